%% @doc Client side of SASL PLAIN (RFC 4616), SCRAM-SHA-1 / SCRAM-SHA-256
%% (RFC 5802, RFC 7677), also -PLUS with tls-server-end-point channel
%% binding (RFC 5929), and FAST's HT-SHA-256-NONE
%% (XEP-0484). Pure functions: the XMPP user feeds in the server's
%% challenges and sends out what comes back.
%%
%% Passwords are used as given (the SASLprep of an ASCII password is the
%% password itself; benchmark passwords are ASCII).
-module(throng_bench_sasl).

-export([mechanism/1, plain/2, scram_first/3, scram_first/4, scram_final/3,
         scram_verify/2, ht/2, ht_verify/2, end_point_hash/1]).
%% API used by tests: SCRAM with a given client nonce (RFC test vectors).
-ignore_xref([{scram_first, 3}]).

-type method() :: plain | 'scram-sha-1' | 'scram-sha-256' | 'scram-sha-1-plus'
                | 'scram-sha-256-plus' | fast.
-export_type([method/0]).

-export_type([scram/0]).

-record(scram, {hash :: sha | sha256,
                cbind :: binary(),          % gs2 header ++ channel binding data
                user :: binary(),
                nonce :: binary(),
                first_bare :: binary(),
                server_sig = <<>> :: binary()}).
-opaque scram() :: #scram{}.

%% @doc The SASL mechanism name of a configured method (fast: the password
%% login that gets the first token).
-spec mechanism(method()) -> binary().
mechanism(plain) -> <<"PLAIN">>;
mechanism(fast) -> <<"PLAIN">>;
mechanism('scram-sha-1') -> <<"SCRAM-SHA-1">>;
mechanism('scram-sha-256') -> <<"SCRAM-SHA-256">>;
mechanism('scram-sha-1-plus') -> <<"SCRAM-SHA-1-PLUS">>;
mechanism('scram-sha-256-plus') -> <<"SCRAM-SHA-256-PLUS">>.

%% @doc The initial response of PLAIN (not base64-encoded).
-spec plain(binary(), binary()) -> binary().
plain(User, Pass) -> <<0, User/binary, 0, Pass/binary>>.

%% @doc As scram_first/4 without channel binding (for test vectors).
-spec scram_first(method(), binary(), binary()) -> {binary(), scram()}.
scram_first(Method, User, Nonce) ->
    scram_first(Method, User, Nonce, none).

%% @doc The client-first message (not base64-encoded) and the state to
%% keep, with the client nonce (random in a real exchange). A -PLUS method
%% binds the TLS connection: CbData is its tls-server-end-point data (the
%% hash of the server's certificate, {@link end_point_hash/1}).
-spec scram_first(method(), binary(), binary(), binary() | none) -> {binary(), scram()}.
scram_first(Method, User, Nonce, CbData) ->
    Bare = <<"n=", (escape_name(User))/binary, ",r=", Nonce/binary>>,
    {Hash, Gs2} = case Method of
                      'scram-sha-1' -> {sha, <<"n,,">>};
                      'scram-sha-256' -> {sha256, <<"n,,">>};
                      'scram-sha-1-plus' -> {sha, <<"p=tls-server-end-point,,">>};
                      'scram-sha-256-plus' -> {sha256, <<"p=tls-server-end-point,,">>}
                  end,
    CBind = case Gs2 of
                <<"n,,">> -> Gs2;
                _ when is_binary(CbData) -> <<Gs2/binary, CbData/binary>>
            end,
    {<<Gs2/binary, Bare/binary>>,
     #scram{hash = Hash, cbind = CBind, user = User, nonce = Nonce, first_bare = Bare}}.

%% @doc RFC 5929 tls-server-end-point: the hash of the server's certificate
%% (DER, or as public_key decodes it `plain') with its signature's hash
%% function, SHA-256 for MD5 and SHA-1.
-spec end_point_hash(binary() | tuple()) -> binary().
end_point_hash(Der) when is_binary(Der) ->
    end_point_hash(public_key:pkix_decode_cert(Der, plain));
end_point_hash(Cert) ->
    Der = public_key:der_encode('Certificate', Cert),
    {'AlgorithmIdentifier', Oid, _} = element(3, Cert),
    Hash = case pubkey_cert_hash(Oid) of
               H when H =:= sha384; H =:= sha512 -> H;
               _ -> sha256
           end,
    crypto:hash(Hash, Der).

pubkey_cert_hash(Oid) ->
    try public_key:pkix_sign_types(Oid) of
        {H, _} -> H
    catch _:_ -> sha256
    end.

%% @doc The client-final message for the server-first message, or an error
%% naming what is wrong with the challenge.
-spec scram_final(scram(), binary(), binary()) -> {ok, binary(), scram()} | {error, binary()}.
scram_final(S = #scram{hash = H, cbind = CBind, nonce = CNonce, first_bare = Bare}, ServerFirst,
            Pass) ->
    Attrs = parse_attrs(ServerFirst),
    case {maps:get($r, Attrs, undefined), maps:get($s, Attrs, undefined),
          maps:get($i, Attrs, undefined)} of
        {Nonce, Salt64, Iter0} when is_binary(Nonce), is_binary(Salt64), is_binary(Iter0) ->
            case binary:longest_common_prefix([Nonce, CNonce]) =:= byte_size(CNonce) of
                false -> {error, <<"server nonce does not extend the client nonce">>};
                true ->
                    Salt = base64:decode(Salt64),
                    Iter = binary_to_integer(Iter0),
                    Salted = crypto:pbkdf2_hmac(H, Pass, Salt, Iter, hash_len(H)),
                    ClientKey = crypto:mac(hmac, H, Salted, <<"Client Key">>),
                    StoredKey = crypto:hash(H, ClientKey),
                    WithoutProof = <<"c=", (base64:encode(CBind))/binary, ",r=", Nonce/binary>>,
                    AuthMsg = <<Bare/binary, ",", ServerFirst/binary, ",", WithoutProof/binary>>,
                    ClientSig = crypto:mac(hmac, H, StoredKey, AuthMsg),
                    Proof = crypto:exor(ClientKey, ClientSig),
                    ServerKey = crypto:mac(hmac, H, Salted, <<"Server Key">>),
                    ServerSig = crypto:mac(hmac, H, ServerKey, AuthMsg),
                    {ok, <<WithoutProof/binary, ",p=", (base64:encode(Proof))/binary>>,
                     S#scram{server_sig = ServerSig}}
            end;
        _ -> {error, <<"server-first message lacks r, s or i">>}
    end.

%% @doc Check the server-final message ("v=..."): proves the server knew the
%% password too.
-spec scram_verify(scram(), binary()) -> ok | {error, binary()}.
scram_verify(#scram{server_sig = Sig}, ServerFinal) ->
    case parse_attrs(ServerFinal) of
        #{$v := V} ->
            case catch base64:decode(V) of
                Sig -> ok;
                _ -> {error, <<"wrong server signature">>}
            end;
        #{$e := E} -> {error, <<"server error: ", E/binary>>};
        _ -> {error, <<"server-final message lacks v">>}
    end.

%% @doc HT-SHA-256-NONE's initial response with a FAST token (not
%% base64-encoded): the user, NUL, HMAC-SHA-256(token, "Initiator").
-spec ht(binary(), binary()) -> binary().
ht(User, Token) ->
    <<User/binary, 0, (crypto:mac(hmac, sha256, Token, <<"Initiator">>))/binary>>.

%% @doc The server's proof in its success's additional data: it knew the
%% token too.
-spec ht_verify(binary(), binary()) -> ok | {error, binary()}.
ht_verify(Token, Additional) ->
    case crypto:mac(hmac, sha256, Token, <<"Responder">>) of
        Additional -> ok;
        _ -> {error, <<"wrong server proof (FAST)">>}
    end.

parse_attrs(Bin) ->
    maps:from_list([{K, V} || <<K, $=, V/binary>> <- binary:split(Bin, <<",">>, [global])]).

escape_name(U) ->
    binary:replace(binary:replace(U, <<"=">>, <<"=3D">>, [global]), <<",">>, <<"=2C">>, [global]).

hash_len(sha) -> 20;
hash_len(sha256) -> 32.
