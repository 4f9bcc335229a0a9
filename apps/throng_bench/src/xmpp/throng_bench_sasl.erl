%% @doc Client side of SASL PLAIN (RFC 4616) and SCRAM-SHA-1 / SCRAM-SHA-256
%% (RFC 5802, RFC 7677) without channel binding. Pure functions: the XMPP
%% user feeds in the server's challenges and sends out what comes back.
%%
%% Passwords are used as given (the SASLprep of an ASCII password is the
%% password itself; benchmark passwords are ASCII).
-module(throng_bench_sasl).

-export([mechanism/1, plain/2, scram_first/2, scram_first/3, scram_final/3,
         scram_verify/2]).
%% API used by tests: SCRAM with a given client nonce (RFC test vectors).
-ignore_xref([{scram_first, 3}]).

-export_type([scram/0]).

-record(scram, {hash :: sha | sha256,
                user :: binary(),
                nonce :: binary(),
                first_bare :: binary(),
                server_sig = <<>> :: binary()}).
-opaque scram() :: #scram{}.

%% @doc The SASL mechanism name of a configured method.
-spec mechanism(plain | 'scram-sha-1' | 'scram-sha-256') -> binary().
mechanism(plain) -> <<"PLAIN">>;
mechanism('scram-sha-1') -> <<"SCRAM-SHA-1">>;
mechanism('scram-sha-256') -> <<"SCRAM-SHA-256">>.

%% @doc The initial response of PLAIN (not base64-encoded).
-spec plain(binary(), binary()) -> binary().
plain(User, Pass) -> <<0, User/binary, 0, Pass/binary>>.

%% @doc The client-first message (not base64-encoded) and the state to keep.
-spec scram_first('scram-sha-1' | 'scram-sha-256', binary()) -> {binary(), scram()}.
scram_first(Method, User) ->
    scram_first(Method, User, base64:encode(crypto:strong_rand_bytes(18))).

%% @doc As scram_first/2 with a given client nonce (for test vectors).
-spec scram_first('scram-sha-1' | 'scram-sha-256', binary(), binary()) -> {binary(), scram()}.
scram_first(Method, User, Nonce) ->
    Bare = <<"n=", (escape_name(User))/binary, ",r=", Nonce/binary>>,
    Hash = case Method of 'scram-sha-1' -> sha; 'scram-sha-256' -> sha256 end,
    {<<"n,,", Bare/binary>>, #scram{hash = Hash, user = User, nonce = Nonce, first_bare = Bare}}.

%% @doc The client-final message for the server-first message, or an error
%% naming what is wrong with the challenge.
-spec scram_final(scram(), binary(), binary()) -> {ok, binary(), scram()} | {error, binary()}.
scram_final(S = #scram{hash = H, nonce = CNonce, first_bare = Bare}, ServerFirst, Pass) ->
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
                    WithoutProof = <<"c=biws,r=", Nonce/binary>>,
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

parse_attrs(Bin) ->
    maps:from_list([{K, V} || <<K, $=, V/binary>> <- binary:split(Bin, <<",">>, [global])]).

escape_name(U) ->
    binary:replace(binary:replace(U, <<"=">>, <<"=3D">>, [global]), <<",">>, <<"=2C">>, [global]).

hash_len(sha) -> 20;
hash_len(sha256) -> 32.
