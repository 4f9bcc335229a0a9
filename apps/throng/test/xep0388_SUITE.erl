%% XEP-0388 SASL2 with XEP-0386 Bind2 and XEP-0484 FAST, through the real
%% server over STARTTLS: what is offered, logins with and without Bind2,
%% stream management inline, failures, FAST tokens (issue, one-round-trip
%% login, wrong token, mechanism binding, invalidation, expiry, password
%% change), and XEP-0198 stream resumption inline in <authenticate/>.
-module(xep0388_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").
-include("throng.hrl").

-compile([export_all, nowarn_export_all]).

-define(C, throng_test_client).
-define(UA, <<"d4565fa7-4d72-4749-b3d3-740edbf87770">>).

all() ->
    [offered_over_tls_only, plain_without_bind, scram_with_server_signature, bind2_session,
     bind2_with_stream_management, failure_then_retry, fast_token_then_one_round_trip,
     fast_wrong_token, fast_needs_user_agent, fast_token_bound_to_mechanism,
     fast_invalidate, fast_expired_token, fast_password_change, fast_disabled_account,
     fast_disabled_check_failure_is_temporary,
     inline_resume_with_fast, inline_resume_failed_then_bind2, inline_resume_failed_without_bind,
     inline_resume_not_offered_without_stream_management].

init_per_testcase(TC, Config) ->
    SM = case TC of
             inline_resume_not_offered_without_stream_management -> #{enabled => false};
             _ -> #{}
         end,
    throng_ct:start(Config, #{auth => #{max_failure_delay => 0}, stream_management => SM}),
    ok = throng_ct:register(<<"alice">>, <<"password">>),
    Config.

end_per_testcase(_TC, _Config) ->
    throng_ct:stop().

%%% Helpers

tls() ->
    C = ?C:connect(#{}),
    _ = ?C:open_stream(C),
    F = ?C:starttls(C),
    {C, F}.

authenticate(C, Mech, Initial, Extra) ->
    ?C:send(C, ["<authenticate xmlns='urn:xmpp:sasl:2' mechanism='", Mech, "'>",
                "<initial-response>", base64:encode(Initial), "</initial-response>",
                Extra, "</authenticate>"]),
    ?C:recv_stanza(C).

ua() ->
    ["<user-agent id='", ?UA, "'><software>Throng tests</software></user-agent>"].

plain(User, Password) -> <<0, User/binary, 0, Password/binary>>.

cdata(El, Name) -> throng_xml:subel_cdata(El, Name).

token_of(Success) ->
    case throng_xml:subel(Success, <<"token">>, ?NS_FAST) of
        undefined -> undefined;
        T -> throng_xml:attr(<<"token">>, T)
    end.

ht(User, Token, Cb) ->
    <<User/binary, 0, (crypto:mac(hmac, sha256, Token, <<"Initiator", Cb/binary>>))/binary>>.

%% A PLAIN login over SASL2 asking for a FAST token: the token.
get_token(Mech) ->
    {C, _} = tls(),
    S = authenticate(C, <<"PLAIN">>, plain(<<"alice">>, <<"password">>),
                     [ua(), "<request-token xmlns='urn:xmpp:fast:0' mechanism='", Mech, "'/>"]),
    #xmlel{name = <<"success">>} = S,
    T = token_of(S),
    ?assert(is_binary(T)),
    ?C:close(C),
    T.

%%% Cases

offered_over_tls_only(_) ->
    C = ?C:connect(#{}),
    Plain = ?C:open_stream(C),
    ?assertEqual(undefined, throng_xml:subel(Plain, <<"authentication">>, ?NS_SASL2)),
    F = ?C:starttls(C),
    #xmlel{} = A = throng_xml:subel(F, <<"authentication">>, ?NS_SASL2),
    Mechs = [throng_xml:cdata(M) || #xmlel{name = <<"mechanism">>} = M <- A#xmlel.children],
    ?assert(lists:member(<<"SCRAM-SHA-256-PLUS">>, Mechs)),
    ?assert(lists:member(<<"PLAIN">>, Mechs)),
    Inline = throng_xml:subel(A, <<"inline">>),
    ?assertNotEqual(undefined, throng_xml:subel(Inline, <<"bind">>, ?NS_BIND2)),
    ?assertNotEqual(undefined, throng_xml:subel(Inline, <<"sm">>, ?NS_SM)),
    Fast = throng_xml:subel(Inline, <<"fast">>, ?NS_FAST),
    FastMechs = [throng_xml:cdata(M) || M <- Fast#xmlel.children],
    ?assertEqual([<<"HT-SHA-256-EXPR">>, <<"HT-SHA-256-UNIQ">>, <<"HT-SHA-256-ENDP">>,
                  <<"HT-SHA-256-NONE">>], FastMechs),
    ?C:close(C).

%% No restart: the features of the authenticated stream follow <success/>
%% at once; the identifier is the bare JID; a legacy bind then works.
plain_without_bind(_) ->
    {C, _} = tls(),
    S = authenticate(C, <<"PLAIN">>, plain(<<"alice">>, <<"password">>), []),
    ?assertMatch(#xmlel{name = <<"success">>}, S),
    ?assertEqual(<<"alice@localhost">>, cdata(S, <<"authorization-identifier">>)),
    F = ?C:recv_stanza(C),
    ?assertEqual(<<"stream:features">>, F#xmlel.name),
    ?assertNotEqual(undefined, throng_xml:subel(F, <<"bind">>, ?NS_BIND)),
    _ = ?C:bind(C, <<"legacy">>),
    ?assertEqual(1, length(throng_sm:resources({<<"alice">>, <<"localhost">>}))),
    ?C:close(C).

%% SCRAM through <challenge/>/<response/>; the server's signature comes in
%% <additional-data/>.
scram_with_server_signature(_) ->
    {C, _} = tls(),
    Bare = <<"n=alice,r=clientnonce123">>,
    Ch = authenticate(C, <<"SCRAM-SHA-256">>, <<"n,,", Bare/binary>>, []),
    ?assertMatch(#xmlel{name = <<"challenge">>}, Ch),
    First = base64:decode(throng_xml:cdata(Ch)),
    #{<<"r">> := Nonce, <<"s">> := Salt, <<"i">> := It} =
        maps:from_list([{K, V} || <<K:1/binary, "=", V/binary>> <- binary:split(First, <<",">>, [global])]),
    Salted = throng_scram:salted_password(sha256, <<"password">>, base64:decode(Salt),
                                          binary_to_integer(It)),
    NoProof = <<"c=biws,r=", Nonce/binary>>,
    AuthMsg = [Bare, ",", First, ",", NoProof],
    ClientKey = throng_scram:client_key(sha256, Salted),
    Sig = throng_scram:client_signature(sha256, throng_scram:stored_key(sha256, ClientKey), AuthMsg),
    ?C:send(C, ["<response xmlns='urn:xmpp:sasl:2'>",
                base64:encode(<<NoProof/binary, ",p=", (base64:encode(crypto:exor(ClientKey, Sig)))/binary>>),
                "</response>"]),
    S = ?C:recv_stanza(C),
    ?assertMatch(#xmlel{name = <<"success">>}, S),
    <<"v=", V/binary>> = base64:decode(cdata(S, <<"additional-data">>)),
    ?assertEqual(throng_scram:server_signature(sha256, throng_scram:server_key(sha256, Salted), AuthMsg),
                 base64:decode(V)),
    ?C:close(C).

%% Bind2: authenticated and bound in one step; the resource is tag/random.
bind2_session(_) ->
    {C, _} = tls(),
    S = authenticate(C, <<"PLAIN">>, plain(<<"alice">>, <<"password">>),
                     [ua(), "<bind xmlns='urn:xmpp:bind:0'><tag>Tests</tag></bind>"]),
    ?assertMatch(#xmlel{name = <<"success">>}, S),
    Jid = cdata(S, <<"authorization-identifier">>),
    ?assertMatch(<<"alice@localhost/Tests/", _/binary>>, Jid),
    ?assertNotEqual(undefined, throng_xml:subel(S, <<"bound">>, ?NS_BIND2)),
    #xmlel{name = <<"stream:features">>} = ?C:recv_stanza(C),
    [Resource] = [element(1, E) || E <- throng_sm:resources({<<"alice">>, <<"localhost">>})],
    ?assertEqual(Jid, <<"alice@localhost/", Resource/binary>>),
    %% The session answers a ping.
    ?C:send(C, <<"<iq type='get' id='p1'><ping xmlns='urn:xmpp:ping'/></iq>">>),
    ?assertMatch(#xmlel{name = <<"iq">>}, ?C:recv_stanza(C)),
    ?C:close(C).

bind2_with_stream_management(_) ->
    {C, _} = tls(),
    S = authenticate(C, <<"PLAIN">>, plain(<<"alice">>, <<"password">>),
                     ["<bind xmlns='urn:xmpp:bind:0'><tag>SM</tag>",
                      "<enable xmlns='urn:xmpp:sm:3' resume='true'/></bind>"]),
    Bound = throng_xml:subel(S, <<"bound">>, ?NS_BIND2),
    Enabled = throng_xml:subel(Bound, <<"enabled">>, ?NS_SM),
    ?assertNotEqual(undefined, Enabled),
    ?assertEqual(<<"true">>, throng_xml:attr(<<"resume">>, Enabled)),
    F = ?C:recv_stanza(C),
    ?assertEqual(undefined, throng_xml:subel(F, <<"sm">>, ?NS_SM)),
    ?C:close(C).

failure_then_retry(_) ->
    {C, _} = tls(),
    F = authenticate(C, <<"PLAIN">>, plain(<<"alice">>, <<"wrong">>), []),
    ?assertMatch(#xmlel{name = <<"failure">>}, F),
    ?assertEqual(?NS_SASL2, throng_xml:ns(F)),
    ?assertNotEqual(undefined, throng_xml:subel(F, <<"not-authorized">>, ?NS_SASL)),
    S = authenticate(C, <<"PLAIN">>, plain(<<"alice">>, <<"password">>), []),
    ?assertMatch(#xmlel{name = <<"success">>}, S),
    ?C:close(C).

%% The token from a password login logs the client in next time with one
%% message, and the server proves it knows the token too.
fast_token_then_one_round_trip(_) ->
    Token = get_token(<<"HT-SHA-256-NONE">>),
    {C, _} = tls(),
    S = authenticate(C, <<"HT-SHA-256-NONE">>, ht(<<"alice">>, Token, <<>>),
                     [ua(), "<fast xmlns='urn:xmpp:fast:0'/>",
                      "<bind xmlns='urn:xmpp:bind:0'><tag>Fast</tag></bind>"]),
    ?assertMatch(#xmlel{name = <<"success">>}, S),
    ?assertEqual(crypto:mac(hmac, sha256, Token, <<"Responder">>),
                 base64:decode(cdata(S, <<"additional-data">>))),
    ?assertMatch(<<"alice@localhost/Fast/", _/binary>>, cdata(S, <<"authorization-identifier">>)),
    ?C:close(C).

fast_wrong_token(_) ->
    _ = get_token(<<"HT-SHA-256-NONE">>),
    {C, _} = tls(),
    F = authenticate(C, <<"HT-SHA-256-NONE">>, ht(<<"alice">>, <<"not the token">>, <<>>), [ua()]),
    ?assertNotEqual(undefined, throng_xml:subel(F, <<"not-authorized">>, ?NS_SASL)),
    ?C:close(C).

%% FAST is for a client that says who it is (its user-agent id).
fast_needs_user_agent(_) ->
    Token = get_token(<<"HT-SHA-256-NONE">>),
    {C, _} = tls(),
    F = authenticate(C, <<"HT-SHA-256-NONE">>, ht(<<"alice">>, Token, <<>>), []),
    ?assertNotEqual(undefined, throng_xml:subel(F, <<"invalid-mechanism">>, ?NS_SASL)),
    ?C:close(C).

%% A token issued for -ENDP works with the connection's certificate hash,
%% and not with -NONE.
fast_token_bound_to_mechanism(_) ->
    Token = get_token(<<"HT-SHA-256-ENDP">>),
    {C1, _} = tls(),
    F = authenticate(C1, <<"HT-SHA-256-NONE">>, ht(<<"alice">>, Token, <<>>), [ua()]),
    ?assertMatch(#xmlel{name = <<"failure">>}, F),
    ?C:close(C1),
    {C2, _} = tls(),
    EndPoint = ?C:tls_server_end_point(C2),
    S = authenticate(C2, <<"HT-SHA-256-ENDP">>, ht(<<"alice">>, Token, EndPoint), [ua()]),
    ?assertMatch(#xmlel{name = <<"success">>}, S),
    ?C:close(C2).

%% invalidate='true': the token ends with this login.
fast_invalidate(_) ->
    Token = get_token(<<"HT-SHA-256-NONE">>),
    {C1, _} = tls(),
    S = authenticate(C1, <<"HT-SHA-256-NONE">>, ht(<<"alice">>, Token, <<>>),
                     [ua(), "<fast xmlns='urn:xmpp:fast:0' invalidate='true'/>"]),
    ?assertMatch(#xmlel{name = <<"success">>}, S),
    ?C:close(C1),
    {C2, _} = tls(),
    F = authenticate(C2, <<"HT-SHA-256-NONE">>, ht(<<"alice">>, Token, <<>>), [ua()]),
    ?assertMatch(#xmlel{name = <<"failure">>}, F),
    ?C:close(C2).

%% A token past its expiry: credentials-expired (the client falls back to
%% its password).
fast_expired_token(_) ->
    Token = get_token(<<"HT-SHA-256-NONE">>),
    {ok, Entry} = throng_storage:kv_get(fast_tokens, {<<"alice">>, <<"localhost">>}),
    Past = maps:map(fun(_, Client) ->
                            maps:map(fun(Slot, {T, M, I, _Exp, Tag}) when Slot =/= seen ->
                                             {T, M, I, 1, Tag};
                                        (_, V) -> V
                                     end, Client)
                    end, Entry),
    ok = throng_storage:kv_put(fast_tokens, {<<"alice">>, <<"localhost">>}, Past),
    {C, _} = tls(),
    F = authenticate(C, <<"HT-SHA-256-NONE">>, ht(<<"alice">>, Token, <<>>), [ua()]),
    ?assertNotEqual(undefined, throng_xml:subel(F, <<"credentials-expired">>, ?NS_SASL)),
    ?C:close(C).

%% A password change ends the tokens issued before it.
fast_password_change(_) ->
    Token = get_token(<<"HT-SHA-256-NONE">>),
    ok = throng_auth:set_password(<<"alice">>, <<"localhost">>, <<"new password">>),
    {C, _} = tls(),
    F = authenticate(C, <<"HT-SHA-256-NONE">>, ht(<<"alice">>, Token, <<>>), [ua()]),
    ?assertNotEqual(undefined, throng_xml:subel(F, <<"credentials-expired">>, ?NS_SASL)),
    ?C:close(C).

%% A disabled account's valid token is refused with account-disabled; once
%% enabled again the same token works.
fast_disabled_account(_) ->
    Token = get_token(<<"HT-SHA-256-NONE">>),
    ok = throng_auth:disable(<<"alice">>, <<"localhost">>),
    {C1, _} = tls(),
    F = authenticate(C1, <<"HT-SHA-256-NONE">>, ht(<<"alice">>, Token, <<>>), [ua()]),
    ?assertNotEqual(undefined, throng_xml:subel(F, <<"account-disabled">>, ?NS_SASL)),
    ?C:close(C1),
    ok = throng_auth:enable(<<"alice">>, <<"localhost">>),
    {C2, _} = tls(),
    S = authenticate(C2, <<"HT-SHA-256-NONE">>, ht(<<"alice">>, Token, <<>>), [ua()]),
    ?assertMatch(#xmlel{name = <<"success">>}, S),
    ?C:close(C2).

%% A token login reads the disabled flag on its own (a password login has
%% it from its credential read): when the store fails on that read, the
%% valid token gets temporary-auth-failure, the connection stays, and the
%% login works once the store answers.
fast_disabled_check_failure_is_temporary(_) ->
    Token = get_token(<<"HT-SHA-256-NONE">>),
    ok = meck:new(throng_storage_mnesia, [passthrough, no_link]),
    try
        ok = meck:expect(throng_storage_mnesia, kv_get,
                         fun(disabled_accounts, _) -> error({storage_failed, {aborted, test}});
                            (B, K) -> meck:passthrough([B, K])
                         end),
        {C, _} = tls(),
        F = authenticate(C, <<"HT-SHA-256-NONE">>, ht(<<"alice">>, Token, <<>>), [ua()]),
        ?assertNotEqual(undefined, throng_xml:subel(F, <<"temporary-auth-failure">>, ?NS_SASL)),
        ok = meck:unload(throng_storage_mnesia),
        S = authenticate(C, <<"HT-SHA-256-NONE">>, ht(<<"alice">>, Token, <<>>), [ua()]),
        ?assertMatch(#xmlel{name = <<"success">>}, S),
        ?C:close(C)
    after
        catch meck:unload(throng_storage_mnesia)
    end.

%%% XEP-0198 "Inline Stream Resumption"

resume_el(PrevId, H) ->
    ["<resume xmlns='urn:xmpp:sm:3' previd='", PrevId, "' h='", integer_to_binary(H), "'/>"].

messages(C, N) ->
    [throng_xml:subel_cdata(M, <<"body">>) || M <- [?C:recv_stanza(C) || _ <- lists:seq(1, N)],
                                                M#xmlel.name =:= <<"message">>].

%% The returning client: its FAST token and its session's id in one
%% <authenticate/>. The old session answers: a <success/> with the old full
%% JID and <resumed/> (the Bind2 request beside it ignored), the messages
%% the client had not acknowledged again, and no stream features: the next
%% thing the client reads answers its ping.
inline_resume_with_fast(_) ->
    ok = throng_ct:register(<<"bob">>, <<"password">>),
    {C1, _} = tls(),
    S1 = authenticate(C1, <<"PLAIN">>, plain(<<"alice">>, <<"password">>),
                      [ua(), "<request-token xmlns='urn:xmpp:fast:0' mechanism='HT-SHA-256-NONE'/>",
                       "<bind xmlns='urn:xmpp:bind:0'><tag>Phone</tag>",
                       "<enable xmlns='urn:xmpp:sm:3' resume='true'/></bind>"]),
    Jid = cdata(S1, <<"authorization-identifier">>),
    Token = token_of(S1),
    Id = throng_xml:attr(<<"id">>, throng_xml:subel(throng_xml:subel(S1, <<"bound">>, ?NS_BIND2),
                                                    <<"enabled">>, ?NS_SM)),
    #xmlel{name = <<"stream:features">>} = ?C:recv_stanza(C1),
    B = ?C:login(<<"bob">>, <<"password">>, <<"b">>),
    [?C:send(B, ?C:message(Jid, <<"chat">>, integer_to_binary(N))) || N <- lists:seq(1, 3)],
    ?assertEqual([<<"1">>, <<"2">>, <<"3">>], messages(C1, 3)),
    ?C:abort(C1),
    timer:sleep(200),
    {C2, _} = tls(),
    S2 = authenticate(C2, <<"HT-SHA-256-NONE">>, ht(<<"alice">>, Token, <<>>),
                      [ua(), resume_el(Id, 1),
                       "<bind xmlns='urn:xmpp:bind:0'><tag>Phone</tag></bind>"]),
    ?assertMatch(#xmlel{name = <<"success">>}, S2),
    ?assertEqual(crypto:mac(hmac, sha256, Token, <<"Responder">>),
                 base64:decode(cdata(S2, <<"additional-data">>))),
    ?assertEqual(Jid, cdata(S2, <<"authorization-identifier">>)),
    Resumed = throng_xml:subel(S2, <<"resumed">>, ?NS_SM),
    ?assertEqual(Id, throng_xml:attr(<<"previd">>, Resumed)),
    ?assertEqual(<<"0">>, throng_xml:attr(<<"h">>, Resumed)),
    ?assertEqual(undefined, throng_xml:subel(S2, <<"bound">>, ?NS_BIND2)),
    ?assertEqual([<<"2">>, <<"3">>], messages(C2, 2)),
    ?C:send(C2, <<"<iq type='get' id='p1'><ping xmlns='urn:xmpp:ping'/></iq>">>),
    ?assertMatch(#xmlel{name = <<"iq">>}, ?C:recv_stanza(C2)),
    %% One session, the old one, and it still receives.
    ?assertEqual(1, length(throng_sm:resources({<<"alice">>, <<"localhost">>}))),
    ?C:send(B, ?C:message(Jid, <<"chat">>, <<"after">>)),
    ?assertEqual([<<"after">>], messages(C2, 1)),
    ?C:close(C2),
    ?C:close(B).

%% Nothing to resume: the <success/> says why (<failed/>) and the Bind2
%% request is served, as XEP-0198 asks.
inline_resume_failed_then_bind2(_) ->
    {C, _} = tls(),
    S = authenticate(C, <<"PLAIN">>, plain(<<"alice">>, <<"password">>),
                     [resume_el(<<"bm90IGFuIGlk">>, 0),
                      "<bind xmlns='urn:xmpp:bind:0'><tag>Laptop</tag></bind>"]),
    ?assertMatch(#xmlel{name = <<"success">>}, S),
    Failed = throng_xml:subel(S, <<"failed">>, ?NS_SM),
    ?assertNotEqual(undefined, throng_xml:subel(Failed, <<"item-not-found">>, ?NS_STANZAS)),
    ?assertNotEqual(undefined, throng_xml:subel(S, <<"bound">>, ?NS_BIND2)),
    ?assertMatch(<<"alice@localhost/Laptop/", _/binary>>, cdata(S, <<"authorization-identifier">>)),
    #xmlel{name = <<"stream:features">>} = ?C:recv_stanza(C),
    ?assertEqual(1, length(throng_sm:resources({<<"alice">>, <<"localhost">>}))),
    ?C:close(C).

%% Without Bind2 the failed resumption leaves the stream authenticated and
%% unbound: the features follow and a legacy bind works.
inline_resume_failed_without_bind(_) ->
    {C, _} = tls(),
    S = authenticate(C, <<"PLAIN">>, plain(<<"alice">>, <<"password">>),
                     [resume_el(<<"bm90IGFuIGlk">>, 0)]),
    ?assertEqual(<<"alice@localhost">>, cdata(S, <<"authorization-identifier">>)),
    ?assertNotEqual(undefined, throng_xml:subel(S, <<"failed">>, ?NS_SM)),
    F = ?C:recv_stanza(C),
    ?assertNotEqual(undefined, throng_xml:subel(F, <<"bind">>, ?NS_BIND)),
    _ = ?C:bind(C, <<"legacy">>),
    ?assertEqual(1, length(throng_sm:resources({<<"alice">>, <<"localhost">>}))),
    ?C:close(C).

%% Stream management off: <sm/> is not among SASL2's inline features, and
%% a <resume/> sent anyway gets feature-not-implemented in the <success/>.
inline_resume_not_offered_without_stream_management(_) ->
    {C, F} = tls(),
    Inline = throng_xml:subel(throng_xml:subel(F, <<"authentication">>, ?NS_SASL2), <<"inline">>),
    ?assertEqual(undefined, throng_xml:subel(Inline, <<"sm">>, ?NS_SM)),
    S = authenticate(C, <<"PLAIN">>, plain(<<"alice">>, <<"password">>),
                     [resume_el(<<"bm90IGFuIGlk">>, 0)]),
    Failed = throng_xml:subel(S, <<"failed">>, ?NS_SM),
    ?assertNotEqual(undefined, throng_xml:subel(Failed, <<"feature-not-implemented">>, ?NS_STANZAS)),
    ?C:close(C).
