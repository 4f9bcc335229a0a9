%% @doc Server-side SASL (PLAIN, SCRAM-SHA-1, SCRAM-SHA-256): the RFC 5802
%% and RFC 7677 exchanges through start/step byte for byte, every failure
%% path, and a property with a client written here.
-module(throng_sasl_tests).

-include_lib("eunit/include/eunit.hrl").

-include("throng_proper.hrl").

-define(HOST, <<"localhost">>).
%% Cheap credentials for the tests that are not about the RFC examples.
-define(IT, 16).
-define(SALT, <<"0123456789abcdef">>).

%%% Fixtures

setup() ->
    {ok, _} = application:ensure_all_started(stringprep),
    ok.

with_stringprep(Tests) ->
    {setup, fun setup/0, fun(_) -> ok end, Tests}.

creds(Password, Salt, Iterations) ->
    #{salt => Salt, iterations => Iterations,
      sha => throng_scram:keys(sha, Password, Salt, Iterations),
      sha256 => throng_scram:keys(sha256, Password, Salt, Iterations)}.

%% A context whose store holds Users (#{Name => creds()}).
ctx(Users) ->
    #{host => ?HOST,
      get_credentials => fun(User) ->
                                 case maps:find(User, Users) of
                                     {ok, Creds} -> {ok, Creds};
                                     error -> not_found
                                 end
                         end}.

%% The usual store: "user" with password "pencil".
ctx() ->
    ctx(#{<<"user">> => creds(<<"pencil">>, ?SALT, ?IT)}).

%%% A SCRAM client

escape(Name) ->
    binary:replace(binary:replace(Name, <<"=">>, <<"=3D">>, [global]),
                   <<",">>, <<"=2C">>, [global]).

attributes(Message) ->
    maps:from_list([list_to_tuple(binary:split(A, <<"=">>))
                    || A <- binary:split(Message, <<",">>, [global])]).

%% From the server-first message: the client-final message without its
%% proof, the proof, and the server-final message to expect.
client_final(Hash, Password, Gs2Header, ClientFirstBare, ServerFirst) ->
    #{<<"r">> := Nonce} = attributes(ServerFirst),
    WithoutProof = <<"c=", (base64:encode(Gs2Header))/binary, ",r=", Nonce/binary>>,
    {Proof, ServerFinal} = sign(Hash, Password, ClientFirstBare, ServerFirst, WithoutProof),
    {WithoutProof, Proof, ServerFinal}.

%% The proof for any client-final message (right or wrong), and the
%% server-final message that would answer it.
sign(Hash, Password, ClientFirstBare, ServerFirst, WithoutProof) ->
    #{<<"s">> := Salt, <<"i">> := Iterations} = attributes(ServerFirst),
    {ok, Prepared} = throng_saslprep:prepare(Password),
    Salted = throng_scram:salted_password(Hash, Prepared, base64:decode(Salt),
                                          binary_to_integer(Iterations)),
    ClientKey = throng_scram:client_key(Hash, Salted),
    AuthMessage = <<ClientFirstBare/binary, ",", ServerFirst/binary, ",", WithoutProof/binary>>,
    Signature = throng_scram:client_signature(
                  Hash, throng_scram:stored_key(Hash, ClientKey), AuthMessage),
    ServerSignature = throng_scram:server_signature(
                        Hash, throng_scram:server_key(Hash, Salted), AuthMessage),
    {throng_scram:client_proof(ClientKey, Signature),
     <<"v=", (base64:encode(ServerSignature))/binary>>}.

with_proof(WithoutProof, Proof) ->
    <<WithoutProof/binary, ",p=", (base64:encode(Proof))/binary>>.

%% Runs a whole SCRAM exchange with gs2 header "n,,".
scram_login(Mech, User, Password, Ctx) ->
    Hash = hash(Mech),
    Bare = <<"n=", (escape(User))/binary, ",r=clientnonce">>,
    {continue, ServerFirst, State} = throng_sasl:start(Mech, <<"n,,", Bare/binary>>, Ctx),
    {WithoutProof, Proof, ServerFinal} = client_final(Hash, Password, <<"n,,">>, Bare, ServerFirst),
    case throng_sasl:step(State, with_proof(WithoutProof, Proof)) of
        {success, ServerFinal, Name} -> {ok, Name};
        {success, Other, _} -> {bad_server_final, Other};
        {error, Condition, _} -> Condition
    end.

hash(<<"SCRAM-SHA-1">>) -> sha;
hash(<<"SCRAM-SHA-256">>) -> sha256.

plain(AuthzId, AuthcId, Password, Ctx) ->
    throng_sasl:start(<<"PLAIN">>, <<AuthzId/binary, 0, AuthcId/binary, 0, Password/binary>>, Ctx).

%%% The RFC examples

%% RFC 5802 §5.
rfc5802_exchange_test() ->
    Ctx = (ctx(#{<<"user">> => creds(<<"pencil">>, base64:decode(<<"QSXCR+Q6sek8bf92">>), 4096)}))
              #{nonce => fun() -> <<"3rfcNHYJY1ZVvWVs7j">> end},
    {continue, ServerFirst, State} =
        throng_sasl:start(<<"SCRAM-SHA-1">>, <<"n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL">>, Ctx),
    ?assertEqual(<<"r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096">>,
                 ServerFirst),
    ?assertEqual({success, <<"v=rmF9pqV8S7suAoZWja4dJRkFsKQ=">>, <<"user">>},
                 throng_sasl:step(State, <<"c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,"
                                           "p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=">>)).

%% RFC 7677 §3.
rfc7677_exchange_test() ->
    Ctx = (ctx(#{<<"user">> => creds(<<"pencil">>, base64:decode(<<"W22ZaJ0SNY7soEsUEjb6gQ==">>),
                                     4096)}))
              #{nonce => fun() -> <<"%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0">> end},
    {continue, ServerFirst, State} =
        throng_sasl:start(<<"SCRAM-SHA-256">>, <<"n,,n=user,r=rOprNGfwEbeRWgbNEkqO">>, Ctx),
    ?assertEqual(<<"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                   "s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096">>, ServerFirst),
    ?assertEqual({success, <<"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=">>, <<"user">>},
                 throng_sasl:step(State, <<"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)"
                                           "hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=">>)).

%%% Mechanism selection and empty initial responses

invalid_mechanism_test_() ->
    [?_assertEqual({error, 'invalid-mechanism', undefined}, throng_sasl:start(M, <<>>, ctx()))
     || M <- [<<"DIGEST-MD5">>, <<"scram-sha-1">>, <<"SCRAM-SHA-1-PLUS">>,
              <<"SCRAM-SHA-256-PLUS">>, <<"X-OAUTH2">>, <<>>]].

%% No initial response: empty challenge, then the first message as a
%% response; an empty response then is malformed.
empty_initial_response_test_() ->
    with_stringprep(
      [fun() ->
               {continue, <<>>, S} = throng_sasl:start(<<"PLAIN">>, <<>>, ctx()),
               ?assertEqual({success, <<>>, <<"user">>},
                            throng_sasl:step(S, <<0, "user", 0, "pencil">>)),
               ?assertEqual({error, 'malformed-request', undefined}, throng_sasl:step(S, <<>>))
       end,
       fun() ->
               {continue, <<>>, S} = throng_sasl:start(<<"SCRAM-SHA-256">>, <<>>, ctx()),
               {continue, <<"r=abc", _/binary>>, _} = throng_sasl:step(S, <<"n,,n=user,r=abc">>),
               ?assertEqual({error, 'malformed-request', undefined}, throng_sasl:step(S, <<>>))
       end]).

%%% PLAIN

plain_test_() ->
    Ctx = ctx(),
    with_stringprep(
      [?_assertEqual({success, <<>>, <<"user">>}, plain(<<>>, <<"user">>, <<"pencil">>, Ctx)),
       %% authcid is prepared (case folded); the password is not case folded.
       ?_assertEqual({success, <<>>, <<"user">>}, plain(<<>>, <<"USER">>, <<"pencil">>, Ctx)),
       ?_assertEqual({error, 'not-authorized', <<"user">>},
                     plain(<<>>, <<"user">>, <<"Pencil">>, Ctx)),
       ?_assertEqual({error, 'not-authorized', <<"user">>},
                     plain(<<>>, <<"user">>, <<"pencil ">>, Ctx)),
       %% The password is SASLprep'ed: a soft hyphen is mapped to nothing.
       ?_assertEqual({success, <<>>, <<"user">>},
                     plain(<<>>, <<"user">>, <<"pen", 16#AD/utf8, "cil">>, Ctx)),
       %% A password that fails SASLprep, or preps to nothing.
       ?_assertEqual({error, 'not-authorized', <<"user">>},
                     plain(<<>>, <<"user">>, <<"pen", 7, "cil">>, Ctx)),
       ?_assertEqual({error, 'not-authorized', <<"user">>},
                     plain(<<>>, <<"user">>, <<16#AD/utf8>>, Ctx)),
       %% Unknown user: the same answer as a wrong password.
       ?_assertEqual({error, 'not-authorized', <<"nobody">>},
                     plain(<<>>, <<"nobody">>, <<"pencil">>, Ctx)),
       %% A name no account can have.
       ?_assertEqual({error, 'not-authorized', undefined},
                     plain(<<>>, <<"us er">>, <<"pencil">>, Ctx)),
       ?_assertEqual({error, 'not-authorized', undefined},
                     plain(<<>>, <<"a@b">>, <<"pencil">>, Ctx))]).

plain_authzid_test_() ->
    Ctx = ctx(),
    Ok = {success, <<>>, <<"user">>},
    Invalid = {error, 'invalid-authzid', <<"user">>},
    with_stringprep(
      [?_assertEqual(Ok, plain(<<"user@localhost">>, <<"user">>, <<"pencil">>, Ctx)),
       ?_assertEqual(Ok, plain(<<"USER@LocalHost">>, <<"user">>, <<"pencil">>, Ctx)),
       ?_assertEqual(Ok, plain(<<"user@localhost.">>, <<"User">>, <<"pencil">>, Ctx)),
       ?_assertEqual(Invalid, plain(<<"user@localhost/res">>, <<"user">>, <<"pencil">>, Ctx)),
       ?_assertEqual(Invalid, plain(<<"other@localhost">>, <<"user">>, <<"pencil">>, Ctx)),
       ?_assertEqual(Invalid, plain(<<"user@elsewhere">>, <<"user">>, <<"pencil">>, Ctx)),
       ?_assertEqual(Invalid, plain(<<"localhost">>, <<"user">>, <<"pencil">>, Ctx)),
       ?_assertEqual(Invalid, plain(<<"user">>, <<"user">>, <<"pencil">>, Ctx)),
       ?_assertEqual(Invalid, plain(<<"@@">>, <<"user">>, <<"pencil">>, Ctx)),
       %% The authzid is checked before (and whatever) the password.
       ?_assertEqual(Invalid, plain(<<"other@localhost">>, <<"user">>, <<"wrong">>, Ctx))]).

plain_malformed_test_() ->
    Ctx = ctx(),
    [?_assertEqual({error, 'malformed-request', undefined},
                   throng_sasl:start(<<"PLAIN">>, Message, Ctx))
     || Message <- [<<"user">>, <<"user", 0, "pencil">>, <<0, "user", 0, "pencil", 0>>,
                    <<0, 0, "pencil">>, <<0, "user", 0>>, <<0, 0>>, <<0>>,
                    <<"a", 0, "b", 0, "c", 0, "d">>]].

plain_store_unavailable_test() ->
    Ctx = #{host => ?HOST, get_credentials => fun(_) -> {error, timeout} end},
    ?assertEqual({error, 'temporary-auth-failure', <<"user">>},
                 plain(<<>>, <<"user">>, <<"pencil">>, Ctx)).

%% PLAIN spends one PBKDF2 for unknown users too, so their failures are not
%% much faster than wrong passwords (min of 7 runs; the PBKDF2 at 4096
%% iterations dominates everything else by 100x).
plain_unknown_user_timing_test_() ->
    with_stringprep(
      {timeout, 30,
       fun() ->
               Ctx = ctx(#{<<"user">> => creds(<<"pencil">>, ?SALT, 4096)}),
               Time = fun(User) ->
                              lists:min([element(1, timer:tc(fun() -> plain(<<>>, User, <<"x">>, Ctx) end))
                                         || _ <- lists:seq(1, 7)])
                      end,
               Known = Time(<<"user">>),
               Unknown = Time(<<"nobody">>),
               io:format(user, "~nPLAIN failure: known user ~b us, unknown user ~b us~n",
                         [Known, Unknown]),
               ?assert(Unknown > Known div 2)
       end}).

%%% SCRAM

scram_mechanisms_test_() ->
    with_stringprep(
      [?_assertEqual({ok, <<"user">>}, scram_login(M, <<"user">>, <<"pencil">>, ctx()))
       || M <- [<<"SCRAM-SHA-1">>, <<"SCRAM-SHA-256">>]]).

scram_wrong_password_test_() ->
    with_stringprep(
      [?_assertEqual('not-authorized', scram_login(M, <<"user">>, <<"pencil!">>, ctx()))
       || M <- [<<"SCRAM-SHA-1">>, <<"SCRAM-SHA-256">>]]).

%% The user name is unescaped, SASLprep'ed and nodeprep'ed.
scram_username_test_() ->
    Ctx = ctx(#{<<"us,er=">> => creds(<<"pencil">>, ?SALT, ?IT),
                <<"user">> => creds(<<"pencil">>, ?SALT, ?IT)}),
    with_stringprep(
      [?_assertEqual({ok, <<"us,er=">>}, scram_login(<<"SCRAM-SHA-256">>, <<"us,er=">>, <<"pencil">>, Ctx)),
       ?_assertEqual({ok, <<"user">>}, scram_login(<<"SCRAM-SHA-256">>, <<"USER">>, <<"pencil">>, Ctx)),
       ?_assertEqual({ok, <<"user">>},
                     scram_login(<<"SCRAM-SHA-256">>, <<"us", 16#AD/utf8, "er">>, <<"pencil">>, Ctx)),
       ?_assertEqual({error, 'not-authorized', undefined},
                     throng_sasl:start(<<"SCRAM-SHA-256">>, <<"n,,n=us er,r=abc">>, Ctx)),
       ?_assertEqual({error, 'not-authorized', undefined},
                     throng_sasl:start(<<"SCRAM-SHA-256">>, <<"n,,n=a@b,r=abc">>, Ctx)),
       ?_assertEqual({error, 'not-authorized', undefined},
                     throng_sasl:start(<<"SCRAM-SHA-256">>, <<"n,,n=", 16#AD/utf8, ",r=abc">>, Ctx))]).

%% "y" (client could bind but thinks we cannot) is fine; c= must echo it.
scram_y_flag_test() ->
    {continue, ServerFirst, State} =
        throng_sasl:start(<<"SCRAM-SHA-256">>, <<"y,,n=user,r=abc">>, ctx()),
    {WithoutProof, Proof, ServerFinal} =
        client_final(sha256, <<"pencil">>, <<"y,,">>, <<"n=user,r=abc">>, ServerFirst),
    ?assertMatch(<<"c=eSws,", _/binary>>, WithoutProof),
    ?assertEqual({success, ServerFinal, <<"user">>},
                 throng_sasl:step(State, with_proof(WithoutProof, Proof))),
    %% The "n,," binding with a "y,," header is refused.
    <<"c=eSws", Rest/binary>> = WithoutProof,
    ?assertEqual({error, 'not-authorized', <<"user">>},
                 throng_sasl:step(State, with_proof(<<"c=biws", Rest/binary>>, Proof))).

scram_authzid_test_() ->
    Login = fun(AuthzId) ->
                    Gs2 = <<"n,a=", AuthzId/binary, ",">>,
                    case throng_sasl:start(<<"SCRAM-SHA-1">>, <<Gs2/binary, "n=user,r=abc">>, ctx()) of
                        {continue, ServerFirst, State} ->
                            {WithoutProof, Proof, _} =
                                client_final(sha, <<"pencil">>, Gs2, <<"n=user,r=abc">>, ServerFirst),
                            throng_sasl:step(State, with_proof(WithoutProof, Proof));
                        Other ->
                            Other
                    end
            end,
    with_stringprep(
      [?_assertMatch({success, _, <<"user">>}, Login(<<"user@localhost">>)),
       ?_assertMatch({success, _, <<"user">>}, Login(<<"User@LOCALHOST">>)),
       ?_assertEqual({error, 'invalid-authzid', <<"user">>}, Login(<<"other@localhost">>)),
       ?_assertEqual({error, 'invalid-authzid', <<"user">>}, Login(<<"user@localhost/r">>)),
       ?_assertEqual({error, 'invalid-authzid', <<"user">>}, Login(<<"user@other">>)),
       ?_assertEqual({error, 'invalid-authzid', <<"user">>}, Login(<<"localhost">>)),
       %% Escaped characters in the authzid are unescaped before the check.
       ?_assertEqual({error, 'invalid-authzid', <<"user">>}, Login(<<"u=2Cser@localhost">>))]).

%%% Channel binding: the -PLUS mechanisms (RFC 5802 §6, RFC 9266, RFC 5929)

-define(EXPORTER, <<"exporter value of this connection, 32 B">>).
-define(END_POINT, <<"hash of the server's certificate">>).
-define(UNIQUE, <<"the first Finished of this connection">>).

plus_ctx() ->
    (ctx())#{channel_bindings => #{<<"tls-exporter">> => ?EXPORTER,
                                   <<"tls-server-end-point">> => ?END_POINT}}.

%% A -PLUS exchange: the client proves ClientData under CbName.
plus_login(Mech, CbName, ClientData, Ctx) ->
    Gs2 = <<"p=", CbName/binary, ",,">>,
    Bare = <<"n=user,r=clientnonce">>,
    case throng_sasl:start(Mech, <<Gs2/binary, Bare/binary>>, Ctx) of
        {continue, ServerFirst, State} ->
            {WithoutProof, Proof, ServerFinal} =
                client_final(hash_of(Mech), <<"pencil">>, <<Gs2/binary, ClientData/binary>>, Bare,
                             ServerFirst),
            case throng_sasl:step(State, with_proof(WithoutProof, Proof)) of
                {success, ServerFinal, <<"user">>} -> ok;
                Other -> Other
            end;
        Other ->
            Other
    end.

hash_of(<<"SCRAM-SHA-1-PLUS">>) -> sha;
hash_of(<<"SCRAM-SHA-256-PLUS">>) -> sha256.

plus_success_test_() ->
    with_stringprep(
      [?_assertEqual(ok, plus_login(M, T, D, plus_ctx()))
       || M <- [<<"SCRAM-SHA-1-PLUS">>, <<"SCRAM-SHA-256-PLUS">>],
          {T, D} <- [{<<"tls-exporter">>, ?EXPORTER}, {<<"tls-server-end-point">>, ?END_POINT}]]).

%% The client's binding data differs from this connection's (a man in the
%% middle terminating TLS): refused.
plus_wrong_binding_test_() ->
    with_stringprep(
      [?_assertEqual({error, 'not-authorized', <<"user">>},
                     plus_login(<<"SCRAM-SHA-256-PLUS">>, <<"tls-exporter">>, <<"another">>, plus_ctx())),
       ?_assertEqual({error, 'not-authorized', <<"user">>},
                     plus_login(<<"SCRAM-SHA-256-PLUS">>, <<"tls-exporter">>, ?END_POINT, plus_ctx()))]).

%% A type the connection does not have; -PLUS without "p="; "p=" without
%% -PLUS: malformed.
plus_malformed_test_() ->
    Ctx = plus_ctx(),
    with_stringprep(
      [?_assertEqual({error, 'malformed-request', undefined},
                     plus_login(<<"SCRAM-SHA-256-PLUS">>, <<"tls-unique">>, <<"x">>, Ctx)),
       ?_assertEqual({error, 'malformed-request', undefined},
                     throng_sasl:start(<<"SCRAM-SHA-256-PLUS">>, <<"n,,n=user,r=abc">>, Ctx)),
       ?_assertEqual({error, 'malformed-request', undefined},
                     throng_sasl:start(<<"SCRAM-SHA-256-PLUS">>, <<"y,,n=user,r=abc">>, Ctx)),
       ?_assertEqual({error, 'malformed-request', undefined},
                     throng_sasl:start(<<"SCRAM-SHA-256">>, <<"p=tls-exporter,,n=user,r=abc">>, Ctx)),
       ?_assertEqual({error, 'malformed-request', undefined},
                     throng_sasl:start(<<"SCRAM-SHA-256-PLUS">>, <<"p=tls,exporter,,n=user,r=abc">>, Ctx)),
       ?_assertEqual({error, 'malformed-request', undefined},
                     throng_sasl:start(<<"SCRAM-SHA-256-PLUS">>, <<"p=,,n=user,r=abc">>, Ctx))]).

%% Downgrade: the client says "y" (it can bind, it thinks the server
%% cannot) on a connection where the server offers -PLUS.
plus_downgrade_detected_test() ->
    ?assertEqual({error, 'not-authorized', <<"user">>},
                 throng_sasl:start(<<"SCRAM-SHA-256">>, <<"y,,n=user,r=abc">>, plus_ctx())).

%% Without -PLUS offered, the mechanisms are unknown; plain SCRAM with "n"
%% still works where they are offered.
plus_not_offered_test_() ->
    with_stringprep(
      [?_assertEqual({error, 'invalid-mechanism', undefined},
                     throng_sasl:start(<<"SCRAM-SHA-1-PLUS">>, <<"p=tls-exporter,,n=user,r=abc">>,
                                       (ctx())#{channel_bindings => #{}})),
       ?_assertEqual({ok, <<"user">>},
                     scram_login(<<"SCRAM-SHA-256">>, <<"user">>, <<"pencil">>, plus_ctx()))]).

%%% FAST: HT-SHA-256-* (XEP-0484, draft-schmaus-kitten-sasl-ht)

-define(TOKEN, <<"a-fast-token">>).

ht_ctx(Answer) ->
    Ctx = plus_ctx(),
    Ctx#{fast_tokens => fun(<<"user">>, _Mech) -> Answer;
                           (_, _) -> none
                        end,
         channel_bindings => (maps:get(channel_bindings, Ctx))#{<<"tls-unique">> => ?UNIQUE}}.

ht_msg(Token, Cb) ->
    <<"user", 0, (crypto:mac(hmac, sha256, Token, <<"Initiator", Cb/binary>>))/binary>>.

ht_test_() ->
    Tokens = {ok, [{new, <<"other">>, 1}, {current, ?TOKEN, 2}]},
    with_stringprep(
      [%% The matching slot, and the server's proof.
       ?_assertEqual({success, crypto:mac(hmac, sha256, ?TOKEN, <<"Responder">>), <<"user">>,
                      {fast, current, 2}},
                     throng_sasl:start(<<"HT-SHA-256-NONE">>, ht_msg(?TOKEN, <<>>), ht_ctx(Tokens))),
       %% -EXPR binds the tls-exporter value, -ENDP the certificate's hash.
       ?_assertMatch({success, _, <<"user">>, {fast, current, 2}},
                     throng_sasl:start(<<"HT-SHA-256-EXPR">>, ht_msg(?TOKEN, ?EXPORTER), ht_ctx(Tokens))),
       ?_assertMatch({success, _, <<"user">>, {fast, current, 2}},
                     throng_sasl:start(<<"HT-SHA-256-ENDP">>, ht_msg(?TOKEN, ?END_POINT), ht_ctx(Tokens))),
       %% -UNIQ binds tls-unique, and nothing else.
       ?_assertEqual({success, crypto:mac(hmac, sha256, ?TOKEN, <<"Responder", ?UNIQUE/binary>>),
                      <<"user">>, {fast, current, 2}},
                     throng_sasl:start(<<"HT-SHA-256-UNIQ">>, ht_msg(?TOKEN, ?UNIQUE), ht_ctx(Tokens))),
       ?_assertEqual({error, 'not-authorized', <<"user">>},
                     throng_sasl:start(<<"HT-SHA-256-UNIQ">>, ht_msg(?TOKEN, ?EXPORTER), ht_ctx(Tokens))),
       ?_assertEqual({error, 'invalid-mechanism', undefined},
                     throng_sasl:start(<<"HT-SHA-256-UNIQ">>, ht_msg(?TOKEN, ?UNIQUE),
                                       (ht_ctx(Tokens))#{channel_bindings =>
                                                             #{<<"tls-exporter">> => ?EXPORTER}})),
       ?_assertEqual({error, 'not-authorized', <<"user">>},
                     throng_sasl:start(<<"HT-SHA-256-EXPR">>, ht_msg(?TOKEN, <<>>), ht_ctx(Tokens))),
       ?_assertEqual({error, 'not-authorized', <<"user">>},
                     throng_sasl:start(<<"HT-SHA-256-NONE">>, ht_msg(<<"wrong">>, <<>>), ht_ctx(Tokens))),
       ?_assertEqual({error, 'credentials-expired', <<"user">>},
                     throng_sasl:start(<<"HT-SHA-256-NONE">>, ht_msg(?TOKEN, <<>>), ht_ctx(expired))),
       ?_assertEqual({error, 'not-authorized', <<"user">>},
                     throng_sasl:start(<<"HT-SHA-256-NONE">>, ht_msg(?TOKEN, <<>>), ht_ctx(none))),
       %% The store could not say: try again later, not "wrong" or "expired".
       ?_assertEqual({error, 'temporary-auth-failure', <<"user">>},
                     throng_sasl:start(<<"HT-SHA-256-NONE">>, ht_msg(?TOKEN, <<>>), ht_ctx(unavailable))),
       ?_assertEqual({error, 'malformed-request', undefined},
                     throng_sasl:start(<<"HT-SHA-256-NONE">>, <<"user-without-nul">>, ht_ctx(Tokens))),
       %% Without tokens in the context (no FAST for this client), or
       %% without the binding a mechanism needs: not offered.
       ?_assertEqual({error, 'invalid-mechanism', undefined},
                     throng_sasl:start(<<"HT-SHA-256-NONE">>, ht_msg(?TOKEN, <<>>), plus_ctx())),
       ?_assertEqual({error, 'invalid-mechanism', undefined},
                     throng_sasl:start(<<"HT-SHA-256-EXPR">>, ht_msg(?TOKEN, <<>>),
                                       (ht_ctx(Tokens))#{channel_bindings => #{}}))]).

%% Malformed client-first messages.
scram_client_first_malformed_test_() ->
    Ctx = ctx(),
    [{binary_to_list(M),
      ?_assertEqual({error, 'malformed-request', undefined},
                    throng_sasl:start(<<"SCRAM-SHA-256">>, M, Ctx))}
     || M <- [<<"n">>, <<"n,">>, <<"n,,">>, <<",,n=user,r=abc">>, <<"x,,n=user,r=abc">>,
              <<"N,,n=user,r=abc">>,
              <<"p=tls-unique,,n=user,r=abc">>,           % channel binding: not offered
              <<"p=tls-exporter,,n=user,r=abc">>,
              <<"n,a=,n=user,r=abc">>, <<"n,b=x,n=user,r=abc">>,
              <<"n,,m=ext,n=user,r=abc">>,                % mandatory extension
              <<"n,,n=user">>, <<"n,,n=user,">>, <<"n,,r=abc">>, <<"n,,r=abc,n=user">>,
              <<"n,,n=,r=abc">>, <<"n,,n=user,r=">>, <<"n,,user,r=abc">>,
              <<"n,,n=us=2Xer,r=abc">>, <<"n,,n=user=,r=abc">>, <<"n,,n=us=2cer,r=abc">>,
              <<"n,,n=user,r=a b">>, <<"n,,n=user,r=a", 16#7F, "b">>,
              <<"n,,n=user,r=", 16#C3, 16#A9>>,
              <<"n,,n=user,r=abc,">>, <<"n,,n=user,r=abc,1=x">>, <<"n,,n=user,r=abc,xy">>,
              <<"n,a=us=er,n=user,r=abc">>]].

%% Extensions after the nonce are ignored (RFC 5802 §5.1).
scram_extensions_ignored_test() ->
    Bare = <<"n=user,r=abc,x=whatever">>,
    {continue, ServerFirst, State} =
        throng_sasl:start(<<"SCRAM-SHA-256">>, <<"n,,", Bare/binary>>, ctx()),
    {WithoutProof, Proof, ServerFinal} =
        client_final(sha256, <<"pencil">>, <<"n,,">>, Bare, ServerFirst),
    %% An extension in the client-final message is covered by the proof.
    WithExt = <<WithoutProof/binary, ",y=1">>,
    ?assertEqual({error, 'not-authorized', <<"user">>},
                 throng_sasl:step(State, with_proof(WithExt, Proof))),
    ?assertEqual({success, ServerFinal, <<"user">>},
                 throng_sasl:step(State, with_proof(WithoutProof, Proof))).

%% Bad client-final messages: malformed ones are 'malformed-request'; ones
%% that parse but carry the wrong binding, nonce or proof 'not-authorized'.
scram_client_final_test_() ->
    Bare = <<"n=user,r=abc">>,
    {continue, ServerFirst, State} =
        throng_sasl:start(<<"SCRAM-SHA-256">>, <<"n,,", Bare/binary>>, ctx()),
    {WithoutProof, Proof, _} = client_final(sha256, <<"pencil">>, <<"n,,">>, Bare, ServerFirst),
    #{<<"r">> := Nonce} = attributes(ServerFirst),
    P = base64:encode(Proof),
    Malformed = [<<>>, <<"c=biws">>, WithoutProof,
                 <<WithoutProof/binary, ",p=!!!!">>,
                 <<WithoutProof/binary, ",p=", P/binary, "x">>,              % bad base64 length
                 <<"c=biws,r=", Nonce/binary, ",p=AAB=">>,                 % non-canonical
                 <<WithoutProof/binary, ",p= ", P/binary>>,
                 <<"r=", Nonce/binary, ",c=biws,p=", P/binary>>,             % order
                 <<"c=biws,p=", P/binary>>,
                 <<"c=bi ws,r=", Nonce/binary, ",p=", P/binary>>,
                 <<"c=biws,r=", Nonce/binary, ",1=x,p=", P/binary>>,
                 <<"c=biws,r=", Nonce/binary, ",p=", P/binary, ",x=1">>],
    NotAuthorized = [<<"c=eSws,r=", Nonce/binary, ",p=", P/binary>>,        % "y,," binding
                     <<"c=,r=", Nonce/binary, ",p=", P/binary>>,
                     <<"c=biws,r=", Nonce/binary, "x,p=", P/binary>>,       % nonce
                     <<"c=biws,r=abc,p=", P/binary>>,
                     <<"c=biws,r=", Nonce/binary, ",p=">>,                    % empty proof
                     <<"c=biws,r=", Nonce/binary, ",p=AAA=">>,
                     <<"c=biws,r=", Nonce/binary, ",p=",
                       (base64:encode(binary:part(Proof, 0, 31)))/binary>>],  % short proof
    [{binary_to_list(M), ?_assertEqual({error, 'malformed-request', <<"user">>},
                                       throng_sasl:step(State, M))}
     || M <- Malformed]
        ++ [{binary_to_list(M), ?_assertEqual({error, 'not-authorized', <<"user">>},
                                              throng_sasl:step(State, M))}
            || M <- NotAuthorized]
        ++ [?_assertMatch({success, _, <<"user">>},
                          throng_sasl:step(State, with_proof(WithoutProof, Proof)))].

%% A client that signs a wrong channel binding or nonce with the right
%% password is still refused: the checks do not rely on the proof.
scram_signed_mismatch_test_() ->
    Bare = <<"n=user,r=abc">>,
    {continue, ServerFirst, State} =
        throng_sasl:start(<<"SCRAM-SHA-1">>, <<"n,,", Bare/binary>>, ctx()),
    #{<<"r">> := Nonce} = attributes(ServerFirst),
    Signed = fun(WithoutProof) ->
                     {Proof, _} = sign(sha, <<"pencil">>, Bare, ServerFirst, WithoutProof),
                     with_proof(WithoutProof, Proof)
             end,
    with_stringprep(
      [?_assertMatch({success, _, <<"user">>},
                     throng_sasl:step(State, Signed(<<"c=biws,r=", Nonce/binary>>))),
       ?_assertMatch({success, _, <<"user">>},
                     throng_sasl:step(State, Signed(<<"c=biws,r=", Nonce/binary, ",z=1">>))),
       ?_assertEqual({error, 'not-authorized', <<"user">>},
                     throng_sasl:step(State, Signed(<<"c=eSws,r=", Nonce/binary>>))),
       ?_assertEqual({error, 'not-authorized', <<"user">>},
                     throng_sasl:step(State, Signed(<<"c=,r=", Nonce/binary>>))),
       ?_assertEqual({error, 'not-authorized', <<"user">>},
                     throng_sasl:step(State, Signed(<<"c=biws,r=abc">>))),
       ?_assertEqual({error, 'not-authorized', <<"user">>},
                     throng_sasl:step(State, Signed(<<"c=biws,r=", Nonce/binary, "x">>)))]).

%% Unknown users get a salt that is stable for the name, differs between
%% names, looks like a real one, and the iteration count real users have;
%% the failure comes at the end, as for a wrong password.
scram_unknown_user_test_() ->
    Ctx = (ctx())#{secret => <<"k">>},
    First = fun(C, User) ->
                    {continue, SF, St} =
                        throng_sasl:start(<<"SCRAM-SHA-256">>, <<"n,,n=", User/binary, ",r=abc">>, C),
                    {attributes(SF), St, SF}
            end,
    {#{<<"s">> := Salt1, <<"i">> := I1}, State, ServerFirst} = First(Ctx, <<"nobody">>),
    {#{<<"s">> := Salt2}, _, _} = First(Ctx, <<"nobody">>),
    {#{<<"s">> := Salt3}, _, _} = First(Ctx, <<"somebody">>),
    {#{<<"s">> := Salt4}, _, _} = First(Ctx#{secret => <<"other">>}, <<"nobody">>),
    {#{<<"i">> := I2}, _, _} = First(Ctx#{iterations => 10000}, <<"nobody">>),
    %% Without a secret in the context a node-wide one is used, also stable.
    NoSecret = maps:remove(secret, Ctx),
    {#{<<"s">> := Salt5}, _, _} = First(NoSecret, <<"nobody">>),
    {#{<<"s">> := Salt6}, _, _} = First(NoSecret, <<"nobody">>),
    {WithoutProof, Proof, _} =
        client_final(sha256, <<"pencil">>, <<"n,,">>, <<"n=nobody,r=abc">>, ServerFirst),
    with_stringprep(
      [?_assertEqual(Salt1, Salt2),
       ?_assertNotEqual(Salt1, Salt3),
       ?_assertNotEqual(Salt1, Salt4),
       ?_assertEqual(Salt5, Salt6),
       ?_assertEqual(16, byte_size(base64:decode(Salt1))),
       ?_assertEqual(<<"4096">>, I1),
       ?_assertEqual(<<"10000">>, I2),
       ?_assertEqual({error, 'not-authorized', <<"nobody">>},
                     throng_sasl:step(State, with_proof(WithoutProof, Proof)))]).

scram_store_unavailable_test() ->
    Ctx = #{host => ?HOST, get_credentials => fun(_) -> {error, timeout} end},
    ?assertEqual({error, 'temporary-auth-failure', <<"user">>},
                 throng_sasl:start(<<"SCRAM-SHA-1">>, <<"n,,n=user,r=abc">>, Ctx)).

%% Credentials without keys for a hash: that mechanism fails like an
%% unknown user, the other works.
scram_missing_hash_test_() ->
    Creds = maps:remove(sha, creds(<<"pencil">>, ?SALT, ?IT)),
    Ctx = ctx(#{<<"user">> => Creds}),
    with_stringprep(
      [?_assertEqual('not-authorized', scram_login(<<"SCRAM-SHA-1">>, <<"user">>, <<"pencil">>, Ctx)),
       ?_assertEqual({ok, <<"user">>}, scram_login(<<"SCRAM-SHA-256">>, <<"user">>, <<"pencil">>, Ctx))]).

%% The default server nonce: printable, no comma, fresh each time.
scram_default_nonce_test() ->
    Nonce = fun() ->
                    {continue, SF, _} = throng_sasl:start(<<"SCRAM-SHA-1">>, <<"n,,n=user,r=abc">>, ctx()),
                    #{<<"r">> := <<"abc", N/binary>>} = attributes(SF),
                    N
            end,
    N1 = Nonce(),
    ?assert(byte_size(N1) >= 16),
    ?assert(lists:all(fun(C) -> C > 16#20 andalso C < 16#7F andalso C =/= $, end,
                      binary_to_list(N1))),
    ?assertNotEqual(N1, Nonce()).

%%% Property: a client written here logs in with random names and passwords

name() ->
    ?BIND(L, proper_types:non_empty(
               proper_types:list(
                 proper_types:frequency(
                   [{6, proper_types:elements(lists:seq($a, $z) ++ lists:seq($0, $9))},
                    {2, proper_types:elements(lists:seq($A, $Z))},
                    {1, proper_types:elements(",=.-_")},
                    {1, proper_types:elements([16#E9, 16#DF, 16#3C0, 16#3A3, 16#65E5, 16#FC])}]))),
          unicode:characters_to_binary(L)).

password() ->
    ?SUCHTHAT(P,
              ?BIND(L, proper_types:non_empty(
                         proper_types:list(
                           proper_types:frequency(
                             [{6, proper_types:range(16#21, 16#7E)},
                              {1, proper_types:elements([$\s, 16#E9, 16#DF, 16#65E5, 16#210C,
                                                         16#AD, 16#A0, 16#FB01, 16#2168])}]))),
                    unicode:characters_to_binary(L)),
              throng_saslprep:prepare(P) =/= {ok, <<>>}).

flip_each_byte(Bin) ->
    [<<Before:I/binary, (B bxor (1 bsl (I rem 8))), After/binary>>
     || I <- lists:seq(0, byte_size(Bin) - 1),
        <<Before:I/binary, B, After/binary>> <- [Bin]].

prop_client_logs_in() ->
    ?FORALL({Name, Password, Iterations},
            {name(), password(), proper_types:range(1, 8)},
            begin
                {ok, Prepared} = throng_saslprep:prepare(Password),
                User = stringprep:nodeprep(Name),
                Salt = crypto:strong_rand_bytes(16),
                Creds = #{salt => Salt, iterations => Iterations,
                          sha => throng_scram:keys(sha, Prepared, Salt, Iterations),
                          sha256 => throng_scram:keys(sha256, Prepared, Salt, Iterations)},
                Ctx = ctx(#{User => Creds}),
                lists:all(fun(Mech) -> scram_ok(Mech, Name, Password, User, Ctx) end,
                          [<<"SCRAM-SHA-1">>, <<"SCRAM-SHA-256">>])
                    andalso plain(<<>>, Name, Password, Ctx) =:= {success, <<>>, User}
                    andalso plain(<<>>, Name, <<Password/binary, "x">>, Ctx)
                            =:= {error, 'not-authorized', User}
            end).

%% Success with the right proof; 'not-authorized' with any one byte of the
%% proof changed.
scram_ok(Mech, Name, Password, User, Ctx) ->
    Bare = <<"n=", (escape(Name))/binary, ",r=propernonce">>,
    {continue, ServerFirst, State} = throng_sasl:start(Mech, <<"n,,", Bare/binary>>, Ctx),
    {WithoutProof, Proof, ServerFinal} =
        client_final(hash(Mech), Password, <<"n,,">>, Bare, ServerFirst),
    throng_sasl:step(State, with_proof(WithoutProof, Proof)) =:= {success, ServerFinal, User}
        andalso lists:all(fun(Bad) ->
                                  throng_sasl:step(State, with_proof(WithoutProof, Bad))
                                      =:= {error, 'not-authorized', User}
                          end, flip_each_byte(Proof)).

property_test_() ->
    with_stringprep(
      {timeout, 60,
       ?_assert(proper:quickcheck(prop_client_logs_in(), [{numtests, 500}, {to_file, user}]))}).

%%% Refusing a user before any check (allow_user: rate limits)

%% A refused user gets temporary-auth-failure before their credentials are
%% looked up (so before any PBKDF2), with PLAIN and SCRAM alike; the
%% callback is asked with the prepared user name.
allow_user_refuses_before_lookup_test_() ->
    %% Built in the process running the test (that is where they report).
    Ctx = fun() ->
                  Self = self(),
                  (ctx())#{get_credentials => fun(U) -> Self ! {looked_up, U}, not_found end,
                           allow_user => fun(U) -> Self ! {asked, U}, false end}
          end,
    Looked = fun() -> receive {looked_up, _} -> true after 0 -> false end end,
    with_stringprep(
      [?_test(begin
                  ?assertEqual({error, 'temporary-auth-failure', <<"user">>},
                               plain(<<>>, <<"USER">>, <<"pencil">>, Ctx())),
                  ?assertEqual({asked, <<"user">>}, receive A -> A after 0 -> none end),
                  ?assertNot(Looked())
              end),
       ?_test(begin
                  ?assertEqual({error, 'temporary-auth-failure', <<"user">>},
                               throng_sasl:start(<<"SCRAM-SHA-256">>, <<"n,,n=user,r=abc">>,
                                                 Ctx())),
                  ?assertNot(Looked())
              end)]).

%% SCRAM asks again before checking the proof: a user refused meanwhile
%% (other connections failed) gets temporary-auth-failure even with the
%% right proof; allowed, the exchange is unchanged.
allow_user_asked_again_at_scram_final_test_() ->
    Counter = counters:new(1, []),
    %% Allowed at the first message, refused from the second question on.
    Allow = fun(_) -> counters:add(Counter, 1, 1), counters:get(Counter, 1) =< 1 end,
    with_stringprep(
      [?_assertEqual('temporary-auth-failure',
                     scram_login(<<"SCRAM-SHA-256">>, <<"user">>, <<"pencil">>,
                                 (ctx())#{allow_user => Allow})),
       ?_assertEqual({ok, <<"user">>},
                     scram_login(<<"SCRAM-SHA-1">>, <<"user">>, <<"pencil">>,
                                 (ctx())#{allow_user => fun(_) -> true end}))]).

%%% Sending a user to another server (other_host: the account's home node)

%% Asked with the prepared user name once the user is named, after
%% allow_user and before any credential is looked up, with PLAIN, SCRAM and
%% HT alike: the exchange ends with see_other_host and nothing is checked.
other_host_before_lookup_test_() ->
    Ctx = fun(Base) ->
                  Self = self(),
                  Base#{get_credentials => fun(U) -> Self ! {looked_up, U}, not_found end,
                        other_host => fun(U) -> Self ! {asked, U}, {other, <<"10.0.0.2:5222">>} end}
          end,
    Looked = fun() -> receive {looked_up, _} -> true after 0 -> false end end,
    Asked = fun() -> receive {asked, U} -> U after 0 -> none end end,
    Tokens = {ok, [{current, ?TOKEN, 2}]},
    with_stringprep(
      [?_test(begin
                  ?assertEqual({see_other_host, <<"10.0.0.2:5222">>, <<"user">>},
                               plain(<<>>, <<"USER">>, <<"pencil">>, Ctx(ctx()))),
                  ?assertEqual(<<"user">>, Asked()),
                  ?assertNot(Looked())
              end),
       ?_test(begin
                  ?assertEqual({see_other_host, <<"10.0.0.2:5222">>, <<"user">>},
                               throng_sasl:start(<<"SCRAM-SHA-256">>, <<"n,,n=user,r=abc">>,
                                                 Ctx(ctx()))),
                  ?assertEqual(<<"user">>, Asked()),
                  ?assertNot(Looked())
              end),
       ?_test(begin
                  Ht = (Ctx(ht_ctx(Tokens)))#{fast_tokens => fun(U, _) ->
                                                                     self() ! {looked_up, U},
                                                                     Tokens
                                                             end},
                  ?assertEqual({see_other_host, <<"10.0.0.2:5222">>, <<"user">>},
                               throng_sasl:start(<<"HT-SHA-256-NONE">>, ht_msg(?TOKEN, <<>>), Ht)),
                  ?assertEqual(<<"user">>, Asked()),
                  ?assertNot(Looked())
              end),
       %% A user refused by allow_user is not sent anywhere.
       ?_test(begin
                  ?assertEqual({error, 'temporary-auth-failure', <<"user">>},
                               plain(<<>>, <<"user">>, <<"pencil">>,
                                     (Ctx(ctx()))#{allow_user => fun(_) -> false end})),
                  ?assertEqual(none, Asked())
              end),
       %% here: the exchange is the usual one.
       ?_assertEqual({ok, <<"user">>},
                     scram_login(<<"SCRAM-SHA-256">>, <<"user">>, <<"pencil">>,
                                 (ctx())#{other_host => fun(_) -> here end})),
       ?_assertMatch({success, _, <<"user">>},
                     plain(<<>>, <<"user">>, <<"pencil">>,
                           (ctx())#{other_host => fun(_) -> here end}))]).
