%% @doc The server side of SASL (RFC 4422) for c2s: PLAIN (RFC 4616),
%% SCRAM-SHA-1 (RFC 5802) and SCRAM-SHA-256 (RFC 7677), and their -PLUS
%% variants with channel binding (RFC 5056: tls-exporter, RFC 9266;
%% tls-server-end-point, RFC 5929) when the context holds the connection's
%% channel binding data.
%%
%% Downgrade protection (RFC 5802 §6): a client that sends the gs2 flag
%% "y" (it supports channel binding but thinks the server does not) while
%% this server offers it on the connection is refused: someone removed the
%% -PLUS mechanisms on the way. The channel binding data the client proves
%% is compared with the connection's own, so a man in the middle with
%% another TLS connection fails.
%%
%% A pure state machine: no processes, no I/O. The caller handles the
%% <auth/>, <response/>, <challenge/>, <success/> and <failure/> elements and
%% their base64; this module sees and returns decoded bytes. The caller
%% supplies the credential lookup in the context.
%%
%% An empty initial response is taken as none (RFC 6120 §6.4.2): the server
%% sends an empty challenge and the client's next response is its first
%% message. A second empty message is malformed.
%%
%% Users are named by their localpart, SASLprep'ed and then nodeprep'ed. The
%% only authorization identity accepted is the user's own bare JID
%% (user@host); anything else is 'invalid-authzid'.
%%
%% The context may refuse a user before any credential is looked up or any
%% password checked (`allow_user': rate limits); the answer is then
%% 'temporary-auth-failure' (RFC 6120 §6.5). SCRAM asks again before it
%% checks the proof. It may also send the user elsewhere (`other_host': the
%% account's home node in a cluster), at the same point.
%%
%% Unknown users cost what known ones do and fail the same way
%% ('not-authorized'): PLAIN derives a key from a dummy salt; SCRAM answers
%% with a salt derived from the user name and a secret (stable across
%% attempts, as RFC 5802 §9 suggests) and fails at the final step.
-module(throng_sasl).

-export([start/3, step/2]).

-type creds() :: throng_scram:creds().
-type ctx() :: #{host := binary(),
                 %% Stored credentials of a user (name already prepared);
                 %% {error, _} when the store cannot answer now.
                 get_credentials := fun((User :: binary()) ->
                                               {ok, creds()} | not_found
                                                   | {error, term()}),
                 %% Server nonce generator (tests); default 24 random
                 %% base64 characters.
                 nonce => fun(() -> binary()),
                 %% Iteration count announced for unknown users; should be
                 %% the count credentials are made with. Default 4096.
                 iterations => pos_integer(),
                 %% Key for the fake salts of unknown users; default a
                 %% random key made once per node.
                 secret => binary(),
                 %% PLAIN password check against the stored SHA-256 keys
                 %% (e.g. with a cache); default throng_scram:verify_password/3.
                 verify_plain => fun((User :: binary(), Password :: binary(),
                                      #{salt := binary(), iterations := pos_integer(),
                                        stored_key := binary()}) -> boolean()),
                 %% May this user's password be checked now? false:
                 %% 'temporary-auth-failure' without a check. Default: yes.
                 allow_user => fun((User :: binary()) -> boolean()),
                 %% Is this the server to check this user's credentials?
                 %% {other, "host:port"}: the exchange ends with
                 %% {see_other_host, ...} before any is looked up (the
                 %% client is sent to its account's home node). Default:
                 %% here.
                 other_host => fun((User :: binary()) -> here | {other, binary()}),
                 %% The connection's channel bindings by type name, when the
                 %% -PLUS mechanisms are offered on it. Default: none.
                 channel_bindings => #{binary() => binary()},
                 %% FAST (XEP-0484): the client's tokens for an HT mechanism,
                 %% with the slot each is in and when it was issued. Without
                 %% it the HT-* mechanisms are not offered.
                 fast_tokens => fun((User :: binary(), Mechanism :: binary()) ->
                                           {ok, [{atom(), binary(), integer()}]} | expired
                                               | none | unavailable)}.
-type condition() :: 'aborted' | 'account-disabled' | 'credentials-expired'
                   | 'encryption-required' | 'incorrect-encoding'
                   | 'invalid-authzid' | 'invalid-mechanism'
                   | 'malformed-request' | 'mechanism-too-weak'
                   | 'not-authorized' | 'temporary-auth-failure'.
-type result() :: {continue, Challenge :: binary(), state()}
                | {success, AdditionalData :: binary(), User :: binary()}
                | {success, AdditionalData :: binary(), User :: binary(),
                   {fast, Slot :: atom(), Issued :: integer()}}
                | {see_other_host, Where :: binary(), User :: binary()}
                | {error, condition(), User :: binary() | undefined}.
-export_type([ctx/0, creds/0, condition/0, result/0, state/0]).

-type mech() :: plain | throng_scram:hash() | {plus, throng_scram:hash()}
              | {ht, Name :: binary(), ChannelBinding :: binary() | none}.

%% Waiting for the first client message after an empty initial response.
-record(first, {mech :: mech(), ctx :: ctx()}).
%% SCRAM, server-first sent, waiting for client-final.
-record(scram, {hash :: throng_scram:hash(),
                user :: binary(),
                known :: boolean(),       % false: fake credentials
                cbind :: binary(),        % gs2 header ++ channel binding data
                client_first_bare :: binary(),
                server_first :: binary(),
                nonce :: binary(),        % client nonce ++ server nonce
                stored_key :: binary(),
                server_key :: binary(),
                allow :: fun((binary()) -> boolean())}).   % ctx's allow_user
-opaque state() :: #first{} | #scram{}.

-define(DEFAULT_ITERATIONS, 4096).
-define(SALT_BYTES, 16).
-define(DUMMY_SALT, <<"throng-dummy-salt">>).
-define(SECRET_KEY, {?MODULE, fake_salt_secret}).
-define(MAX_LOCALPART, 1023).          % RFC 7622 §3.3
-define(MAX_RAW_USER, 4 * ?MAX_LOCALPART).

%% @doc Starts an exchange with the mechanism the client chose and its
%% (decoded) initial response, <<>> if none.
-spec start(binary(), binary(), ctx()) -> result().
start(Mechanism, InitialResponse, Ctx) ->
    case mech(Mechanism) of
        error -> {error, 'invalid-mechanism', undefined};
        Mech ->
            case offered(Mech, Ctx) of
                false -> {error, 'invalid-mechanism', undefined};
                true when InitialResponse =:= <<>> -> {continue, <<>>, #first{mech = Mech, ctx = Ctx}};
                true -> first_message(Mech, InitialResponse, Ctx)
            end
    end.

%% -PLUS needs the connection's channel bindings; HT needs the client's
%% FAST tokens, and the binding its name says.
offered({plus, _}, Ctx) ->
    map_size(maps:get(channel_bindings, Ctx, #{})) > 0;
offered({ht, _, Cb}, Ctx) ->
    is_map_key(fast_tokens, Ctx)
        andalso (Cb =:= none orelse is_map_key(Cb, maps:get(channel_bindings, Ctx, #{})));
offered(_Mech, _Ctx) ->
    true.

%% @doc Feeds the client's next (decoded) response.
-spec step(state(), binary()) -> result().
step(#first{}, <<>>) ->
    {error, 'malformed-request', undefined};
step(#first{mech = Mech, ctx = Ctx}, Response) ->
    first_message(Mech, Response, Ctx);
step(#scram{} = State, Response) ->
    scram_final(State, Response).

mech(<<"PLAIN">>) -> plain;
mech(<<"SCRAM-SHA-1">>) -> sha;
mech(<<"SCRAM-SHA-256">>) -> sha256;
mech(<<"SCRAM-SHA-1-PLUS">>) -> {plus, sha};
mech(<<"SCRAM-SHA-256-PLUS">>) -> {plus, sha256};
mech(<<"HT-SHA-256-NONE">> = M) -> {ht, M, none};
mech(<<"HT-SHA-256-UNIQ">> = M) -> {ht, M, <<"tls-unique">>};
mech(<<"HT-SHA-256-ENDP">> = M) -> {ht, M, <<"tls-server-end-point">>};
mech(<<"HT-SHA-256-EXPR">> = M) -> {ht, M, <<"tls-exporter">>};
mech(_) -> error.

first_message(plain, Message, Ctx) -> plain(Message, Ctx);
first_message({ht, _, _} = Mech, Message, Ctx) -> ht(Mech, Message, Ctx);
first_message(Mech, Message, Ctx) -> scram_first(Mech, Message, Ctx).

%%% HT-SHA-256-* (draft-schmaus-kitten-sasl-ht, XEP-0484): the client proves
%%% a token it was given: authcid NUL HMAC(token, "Initiator" || cb-data);
%%% the server answers HMAC(token, "Responder" || cb-data). One message each
%%% way, no PBKDF2.

ht({ht, Name, Cb}, Message, Ctx) ->
    case binary:split(Message, <<0>>) of
        [Authcid, Hmac] when Authcid =/= <<>>, byte_size(Hmac) =:= 32 ->
            case username(Authcid) of
                {ok, User} ->
                    admit(User, Ctx, fun() -> ht_check(User, Name, cb_data(Cb, Ctx), Hmac, Ctx) end);
                error ->
                    {error, 'not-authorized', undefined}
            end;
        _ ->
            {error, 'malformed-request', undefined}
    end.

cb_data(none, _Ctx) -> <<>>;
cb_data(Name, Ctx) -> maps:get(Name, maps:get(channel_bindings, Ctx)).

ht_check(User, Name, CbData, Hmac, #{fast_tokens := Tokens}) ->
    case Tokens(User, Name) of
        {ok, Candidates} ->
            Matching = [{Slot, Token, Issued} || {Slot, Token, Issued} <- Candidates,
                                                 crypto:hash_equals(
                                                   crypto:mac(hmac, sha256, Token,
                                                              <<"Initiator", CbData/binary>>),
                                                   Hmac)],
            case Matching of
                [{Slot, Token, Issued} | _] ->
                    {success, crypto:mac(hmac, sha256, Token, <<"Responder", CbData/binary>>),
                     User, {fast, Slot, Issued}};
                [] ->
                    {error, 'not-authorized', User}
            end;
        expired ->
            {error, 'credentials-expired', User};
        none ->
            {error, 'not-authorized', User};
        unavailable ->
            {error, 'temporary-auth-failure', User}
    end.

%%% PLAIN: message = [authzid] NUL authcid NUL passwd

plain(Message, Ctx) ->
    case binary:split(Message, <<0>>, [global]) of
        [AuthzId, AuthcId, Password] when AuthcId =/= <<>>, Password =/= <<>> ->
            case username(AuthcId) of
                {ok, User} -> plain(AuthzId, User, Password, Ctx);
                error -> {error, 'not-authorized', undefined}
            end;
        _ ->
            {error, 'malformed-request', undefined}
    end.

plain(AuthzId, User, Password, #{host := Host} = Ctx) ->
    case {authzid_ok(AuthzId, User, Host), throng_saslprep:prepare(Password)} of
        {false, _} ->
            {error, 'invalid-authzid', User};
        {true, {ok, Prepared}} when Prepared =/= <<>> ->
            admit(User, Ctx, fun() -> plain_check(User, Prepared, Ctx) end);
        {true, _} ->
            %% RFC 4616 §2: a password that fails SASLprep or prepares to
            %% nothing fails verification.
            {error, 'not-authorized', User}
    end.

plain_check(User, Prepared, Ctx) ->
    case lookup(User, sha256, Ctx) of
        {ok, Salt, Iterations, #{stored_key := StoredKey}} ->
            Creds = #{salt => Salt, iterations => Iterations,
                      stored_key => StoredKey},
            case verify_plain(Ctx, User, Prepared, Creds) of
                true -> {success, <<>>, User};
                false -> {error, 'not-authorized', User}
            end;
        not_found ->
            %% Same work as for a real user, result ignored.
            _ = throng_scram:verify_password(
                  sha256, Prepared,
                  #{salt => ?DUMMY_SALT, iterations => iterations(Ctx),
                    stored_key => <<0:256>>}),
            {error, 'not-authorized', User};
        unavailable ->
            {error, 'temporary-auth-failure', User}
    end.

verify_plain(#{verify_plain := Fun}, User, Password, Creds) ->
    Fun(User, Password, Creds);
verify_plain(_Ctx, _User, Password, Creds) ->
    throng_scram:verify_password(sha256, Password, Creds).

%%% SCRAM

scram_first(Mech, Message, #{host := Host} = Ctx) ->
    case parse_client_first(Message) of
        {ok, Flag, Gs2Header, AuthzId, RawUser, ClientNonce, Bare} ->
            case {username(RawUser), binding(Mech, Flag, Ctx)} of
                {error, _} ->
                    {error, 'not-authorized', undefined};
                {{ok, _User}, {error, 'malformed-request'}} ->
                    {error, 'malformed-request', undefined};
                {{ok, User}, {error, Cond}} ->
                    {error, Cond, User};
                {{ok, User}, {ok, CbData}} ->
                    case authzid_ok(AuthzId, User, Host) of
                        true ->
                            Cbind = <<Gs2Header/binary, CbData/binary>>,
                            scram_allowed(hash(Mech), User, {Cbind, Bare, ClientNonce}, Ctx);
                        false ->
                            {error, 'invalid-authzid', User}
                    end
            end;
        error ->
            {error, 'malformed-request', undefined}
    end.

hash({plus, Hash}) -> Hash;
hash(Hash) -> Hash.

%% The channel binding data the client must prove, from the mechanism and
%% the gs2 flag (RFC 5802 §6, §7).
binding({plus, _}, {p, Name}, Ctx) ->
    case maps:find(Name, maps:get(channel_bindings, Ctx, #{})) of
        {ok, Data} -> {ok, Data};
        error -> {error, 'malformed-request'}         % a type this connection lacks
    end;
binding({plus, _}, _NorY, _Ctx) ->
    {error, 'malformed-request'};
binding(_Hash, {p, _}, _Ctx) ->
    {error, 'malformed-request'};
binding(_Hash, y, Ctx) ->
    %% "y": the client could bind but believes the server cannot. If this
    %% server offered -PLUS here, the offer was removed on the way.
    case map_size(maps:get(channel_bindings, Ctx, #{})) of
        0 -> {ok, <<>>};
        _ -> {error, 'not-authorized'}
    end;
binding(_Hash, n, _Ctx) ->
    {ok, <<>>}.

scram_allowed(Hash, User, Client, Ctx) ->
    admit(User, Ctx, fun() -> lookup_keys(Hash, User, Client, Ctx) end).

lookup_keys(Hash, User, Client, Ctx) ->
    case lookup(User, Hash, Ctx) of
        {ok, Salt, Iterations, #{stored_key := StoredKey, server_key := ServerKey}} ->
            server_first(Hash, User, Client, {true, StoredKey, ServerKey},
                         Salt, Iterations, Ctx);
        not_found ->
            %% Fake keys: no proof can match them, and known = false makes
            %% sure of it.
            Size = byte_size(crypto:hash(Hash, <<>>)),
            Fake = {false, crypto:strong_rand_bytes(Size), crypto:strong_rand_bytes(Size)},
            server_first(Hash, User, Client, Fake, fake_salt(User, Ctx), iterations(Ctx), Ctx);
        unavailable ->
            {error, 'temporary-auth-failure', User}
    end.

server_first(Hash, User, {Cbind, Bare, ClientNonce}, {Known, StoredKey, ServerKey},
             Salt, Iterations, Ctx) ->
    Nonce = <<ClientNonce/binary, (server_nonce(Ctx))/binary>>,
    ServerFirst = <<"r=", Nonce/binary, ",s=", (base64:encode(Salt))/binary,
                    ",i=", (integer_to_binary(Iterations))/binary>>,
    {continue, ServerFirst,
     #scram{hash = Hash, user = User, known = Known, cbind = Cbind,
            client_first_bare = Bare, server_first = ServerFirst, nonce = Nonce,
            stored_key = StoredKey, server_key = ServerKey,
            allow = maps:get(allow_user, Ctx, fun(_) -> true end)}}.

scram_final(#scram{user = User, allow = Allow} = State, Message) ->
    case Allow(User) of
        true -> scram_final_check(State, Message);
        false -> {error, 'temporary-auth-failure', User}
    end.

scram_final_check(#scram{user = User} = State, Message) ->
    case parse_client_final(Message) of
        {ok, ChannelBinding, Nonce, WithoutProof, Proof} ->
            #scram{hash = Hash, cbind = Cbind, nonce = ExpectedNonce,
                   client_first_bare = Bare, server_first = ServerFirst,
                   stored_key = StoredKey, server_key = ServerKey,
                   known = Known} = State,
            AuthMessage = [Bare, $,, ServerFirst, $,, WithoutProof],
            %% The proof is checked even when the rest is wrong, so that
            %% every failure costs the same.
            ProofOk = throng_scram:verify_proof(Hash, StoredKey, AuthMessage, Proof),
            case ChannelBinding =:= Cbind andalso Nonce =:= ExpectedNonce
                andalso ProofOk andalso Known of
                true ->
                    Signature = throng_scram:server_signature(Hash, ServerKey, AuthMessage),
                    {success, <<"v=", (base64:encode(Signature))/binary>>, User};
                false ->
                    {error, 'not-authorized', User}
            end;
        error ->
            {error, 'malformed-request', User}
    end.

%% client-first-message = gs2-header client-first-message-bare
%% gs2-header = ("n" / "y" / "p=" cb-name) "," ["a=" saslname] ","
%% client-first-message-bare = ["m=" ext ","] "n=" saslname "," "r=" c-nonce
%%                             ["," extensions]
parse_client_first(Message) ->
    case binary:split(Message, <<",">>) of
        [FlagPart, Rest] ->
            case {gs2_flag(FlagPart), binary:split(Rest, <<",">>)} of
                {{ok, Flag}, [AuthzPart, Bare]} ->
                    Gs2Header = binary:part(Message, 0, byte_size(Message) - byte_size(Bare)),
                    case {authzid_part(AuthzPart), parse_bare(Bare)} of
                        {{ok, AuthzId}, {ok, RawUser, ClientNonce}} ->
                            {ok, Flag, Gs2Header, AuthzId, RawUser, ClientNonce, Bare};
                        _ ->
                            error
                    end;
                _ ->
                    error
            end;
        _ ->
            error
    end.

%% cb-name = 1*(ALPHA / DIGIT / "." / "-")
gs2_flag(<<"n">>) -> {ok, n};
gs2_flag(<<"y">>) -> {ok, y};
gs2_flag(<<"p=", Name/binary>>) when Name =/= <<>> ->
    case lists:all(fun(C) -> (C >= $a andalso C =< $z) orelse (C >= $A andalso C =< $Z)
                                 orelse (C >= $0 andalso C =< $9) orelse C =:= $. orelse C =:= $-
                   end, binary_to_list(Name)) of
        true -> {ok, {p, Name}};
        false -> error
    end;
gs2_flag(_) -> error.

authzid_part(<<>>) -> {ok, <<>>};
authzid_part(<<"a=", Name/binary>>) when Name =/= <<>> -> unescape(Name);
authzid_part(_) -> error.

parse_bare(Bare) ->
    case binary:split(Bare, <<",">>, [global]) of
        [<<"n=", Name/binary>>, <<"r=", Nonce/binary>> | Extensions] ->
            case Name =/= <<>> andalso valid_nonce(Nonce)
                andalso lists:all(fun valid_extension/1, Extensions)
                andalso unescape(Name) of
                {ok, RawUser} -> {ok, RawUser, Nonce};
                _ -> error
            end;
        _ ->
            %% Includes a leading "m=": no mandatory extension is supported.
            error
    end.

%% client-final-message = "c=" base64 "," "r=" nonce ["," extensions]
%%                        "," "p=" base64
parse_client_final(Message) ->
    case binary:matches(Message, <<",">>) of
        [_ | _] = Commas ->
            {Last, 1} = lists:last(Commas),
            WithoutProof = binary:part(Message, 0, Last),
            ProofPart = binary:part(Message, Last + 1, byte_size(Message) - Last - 1),
            case {binary:split(WithoutProof, <<",">>, [global]), ProofPart} of
                {[<<"c=", C/binary>>, <<"r=", Nonce/binary>> | Extensions], <<"p=", P/binary>>} ->
                    case {lists:all(fun valid_extension/1, Extensions),
                          base64_decode(C), base64_decode(P)} of
                        {true, {ok, ChannelBinding}, {ok, Proof}} ->
                            {ok, ChannelBinding, Nonce, WithoutProof, Proof};
                        _ ->
                            error
                    end;
                _ ->
                    error
            end;
        [] ->
            error
    end.

%% printable = %x21-2B / %x2D-7E (no ','; the split already removed those)
valid_nonce(<<>>) -> false;
valid_nonce(Nonce) -> printable(Nonce).

printable(<<C, Rest/binary>>) when C > 16#20, C < 16#7F -> printable(Rest);
printable(<<_, _/binary>>) -> false;
printable(<<>>) -> true.

%% attr-val = ALPHA "=" value
valid_extension(<<A, $=, _/binary>>) when A >= $a, A =< $z; A >= $A, A =< $Z -> true;
valid_extension(_) -> false.

%% saslname: '=' only in "=2C" (',') and "=3D" ('=').
unescape(Name) ->
    case binary:split(Name, <<"=">>, [global]) of
        [Plain] -> {ok, Plain};
        [First | Escaped] -> unescape(Escaped, [First])
    end.

unescape([<<"2C", Rest/binary>> | More], Acc) -> unescape(More, [Rest, $, | Acc]);
unescape([<<"3D", Rest/binary>> | More], Acc) -> unescape(More, [Rest, $= | Acc]);
unescape([_ | _], _) -> error;
unescape([], Acc) -> {ok, iolist_to_binary(lists:reverse(Acc))}.

%% Canonical base64 only (base64:decode/1 skips whitespace and ignores
%% non-zero padding bits).
base64_decode(Encoded) ->
    try base64:decode(Encoded) of
        Decoded ->
            case base64:encode(Decoded) =:= Encoded of
                true -> {ok, Decoded};
                false -> error
            end
    catch
        error:_ -> error
    end.

%%% Shared

%% SASLprep, then nodeprep: the localpart the credentials are stored under.
username(Raw) ->
    case throng_saslprep:prepare(Raw) of
        {ok, Prepared} when Prepared =/= <<>>, byte_size(Prepared) =< ?MAX_RAW_USER ->
            case throng_jid:nodeprep(Prepared) of
                User when is_binary(User), User =/= <<>>,
                          byte_size(User) =< ?MAX_LOCALPART ->
                    {ok, User};
                _ ->
                    error
            end;
        _ ->
            error
    end.

%% The authorization identity, if given, must be the user's own bare JID.
authzid_ok(<<>>, _User, _Host) ->
    true;
authzid_ok(AuthzId, User, Host) ->
    case throng_jid:make(User, Host, <<>>) of
        {ok, Own} -> throng_jid:parse(AuthzId) =:= {ok, Own};
        error -> false
    end.

lookup(User, Hash, #{get_credentials := Get}) ->
    case Get(User) of
        {ok, #{salt := Salt, iterations := Iterations, Hash := Keys}} ->
            {ok, Salt, Iterations, Keys};
        {ok, _NoKeysForThisHash} ->
            not_found;
        not_found ->
            not_found;
        {error, _} ->
            unavailable
    end.

iterations(Ctx) ->
    maps:get(iterations, Ctx, ?DEFAULT_ITERATIONS).

%% The user is named and nothing is looked up yet: may its credentials be
%% checked now (allow_user), and here (other_host)?
admit(User, Ctx, Check) ->
    case allowed(User, Ctx) of
        false -> {error, 'temporary-auth-failure', User};
        true ->
            Other = maps:get(other_host, Ctx, fun(_) -> here end),
            case Other(User) of
                here -> Check();
                {other, Where} -> {see_other_host, Where, User}
            end
    end.

allowed(User, #{allow_user := Allow}) -> Allow(User);
allowed(_User, _Ctx) -> true.

server_nonce(#{nonce := Fun}) -> Fun();
server_nonce(_) -> base64:encode(crypto:strong_rand_bytes(18)).

fake_salt(User, Ctx) ->
    Secret = case Ctx of
                 #{secret := S} -> S;
                 _ -> node_secret()
             end,
    binary:part(crypto:mac(hmac, sha256, Secret, User), 0, ?SALT_BYTES).

node_secret() ->
    case persistent_term:get(?SECRET_KEY, undefined) of
        undefined ->
            Secret = crypto:strong_rand_bytes(32),
            persistent_term:put(?SECRET_KEY, Secret),
            Secret;
        Secret ->
            Secret
    end.
