%% @doc RFC 6120 (XMPP Core) against the real server over real sockets:
%% stream negotiation, STARTTLS, SASL, resource binding, stream and stanza
%% errors; on both of OTP's inet backends (the inet driver, and the socket
%% backend in group socket_backend).
-module(rfc6120_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").
-include("throng.hrl").

-compile([export_all, nowarn_export_all]).

-define(C, throng_test_client).

%% Every case on the inet driver, then again on the socket backend.
all() ->
    cases() ++ [{group, socket_backend}].

groups() ->
    [throng_ct:socket_backend_group(cases())].

cases() ->
    [stream_header_and_features, unknown_host, wrong_stream_namespace, wrong_content_namespace,
     bad_prefix, unsupported_version, stream_restart_domain_change,
     whitespace_keepalive, client_closes_stream,
     starttls_then_scram_sha256, starttls_required_blocks_auth, tls_required_features,
     plain_success, plain_wrong_password, plain_unknown_user, scram_sha1, scram_sha256,
     password_saslprepped_at_registration,
     scram_wrong_password, invalid_mechanism, sasl_abort, bad_base64,
     too_many_auth_failures, stanza_before_auth, plain_with_authzid,
     bind_requested_resource, bind_generated_resource, bind_conflict_newer_wins, bind_conflict_with_a_stuck_session,
     stanza_before_bind, from_is_stamped, spoofed_from_is_rejected,
     iq_without_id_is_bad_request, unknown_iq_service_unavailable,
     malformed_to_jid, remote_domain_not_found, unsupported_stanza_type,
     legacy_session_iq, foreign_namespace_stanza, prefixed_stanza, client_namespace_explicit].

init_per_suite(Config) ->
    Config.

end_per_suite(_Config) ->
    ok.

init_per_group(socket_backend, Config) ->
    throng_ct:init_socket_backend(Config).

end_per_group(_Group, _Config) ->
    ok.

init_per_testcase(TC, Config) ->
    Overrides = case TC of
                    starttls_required_blocks_auth -> #{listener => #{starttls => required}};
                    tls_required_features -> #{listener => #{starttls => required}};
                    _ -> #{}
                end,
    throng_ct:start(Config, Overrides),
    [throng_ct:register(U, <<"password">>) || U <- [<<"alice">>, <<"bob">>]],
    Config.

end_per_testcase(_TC, _Config) ->
    throng_ct:stop().

%%% Stream negotiation

%% The server answers a header with its own, then the pre-auth features.
stream_header_and_features(_) ->
    C = ?C:connect(#{}),
    ?C:send(C, "<?xml version='1.0'?><stream:stream to='localhost' xmlns='jabber:client' "
               "xmlns:stream='http://etherx.jabber.org/streams' version='1.0'>"),
    {stream_start, <<"stream:stream">>, Attrs} = ?C:recv(C),
    ?assertEqual(<<"localhost">>, proplists:get_value(<<"from">>, Attrs)),
    ?assertEqual(<<"1.0">>, proplists:get_value(<<"version">>, Attrs)),
    ?assertNotEqual(undefined, proplists:get_value(<<"id">>, Attrs)),
    F = ?C:recv_stanza(C),
    ?assertNotEqual(undefined, throng_xml:subel(F, <<"starttls">>, ?NS_TLS)),
    Mechs = [throng_xml:cdata(M) || M <- throng_xml:subels(throng_xml:subel(F, <<"mechanisms">>))],
    ?assertEqual([<<"SCRAM-SHA-256">>, <<"SCRAM-SHA-1">>, <<"PLAIN">>], Mechs).

%% A header for a domain the server does not serve: header, then host-unknown.
unknown_host(_) ->
    C = ?C:connect(#{}),
    ?C:send(C, "<stream:stream to='nowhere.test' xmlns='jabber:client' "
               "xmlns:stream='http://etherx.jabber.org/streams' version='1.0'>"),
    {stream_start, _, _} = ?C:recv(C),
    ?assertEqual(<<"host-unknown">>, ?C:closed(C, 5000)).

wrong_stream_namespace(_) ->
    C = ?C:connect(#{}),
    ?C:send(C, "<stream:stream to='localhost' xmlns='jabber:client' "
               "xmlns:stream='urn:wrong' version='1.0'>"),
    {stream_start, _, _} = ?C:recv(C),
    ?assertEqual(<<"invalid-namespace">>, ?C:closed(C, 5000)).

wrong_content_namespace(_) ->
    C = ?C:connect(#{}),
    ?C:send(C, "<stream:stream to='localhost' xmlns='jabber:server' "
               "xmlns:stream='http://etherx.jabber.org/streams' version='1.0'>"),
    {stream_start, _, _} = ?C:recv(C),
    ?assertEqual(<<"invalid-namespace">>, ?C:closed(C, 5000)).

bad_prefix(_) ->
    C = ?C:connect(#{}),
    ?C:send(C, "<s:stream to='localhost' xmlns='jabber:client' version='1.0'>"),
    {stream_start, _, _} = ?C:recv(C),
    ?assertEqual(<<"bad-namespace-prefix">>, ?C:closed(C, 5000)).

unsupported_version(_) ->
    C = ?C:connect(#{}),
    ?C:send(C, "<stream:stream to='localhost' xmlns='jabber:client' "
               "xmlns:stream='http://etherx.jabber.org/streams'>"),
    {stream_start, _, _} = ?C:recv(C),
    ?assertEqual(<<"unsupported-version">>, ?C:closed(C, 5000)).

%% After SASL, the restarted stream must name the same domain.
stream_restart_domain_change(_) ->
    C = ?C:connect(#{}),
    _ = ?C:open_stream(C),
    ok = ?C:auth_plain(C, <<"alice">>, <<"password">>),
    ?C:send(C, "<stream:stream to='example.org' xmlns='jabber:client' "
               "xmlns:stream='http://etherx.jabber.org/streams' version='1.0'>"),
    {stream_start, _, _} = ?C:recv(C),
    ?assertEqual(<<"host-unknown">>, ?C:closed(C, 5000)).

%% Whitespace between stanzas is a keepalive, not an error.
whitespace_keepalive(_) ->
    C = ?C:login(<<"alice">>, <<"password">>, <<"r">>),
    ?C:send(C, <<" \n \t ">>),
    ?C:send(C, <<"  ">>),
    R = ?C:iq(C, <<"get">>, #xmlel{name = <<"ping">>, attrs = [{<<"xmlns">>, ?NS_PING}]}),
    ?assertEqual(<<"result">>, throng_xml:attr(<<"type">>, R)).

%% The client's closing tag is answered with the server's, then the close.
client_closes_stream(_) ->
    C = ?C:login(<<"alice">>, <<"password">>, <<"r">>),
    ?C:send(C, <<"</stream:stream>">>),
    ?assertEqual(stream_end, ?C:recv(C)),
    ?assertEqual(closed, ?C:recv(C)).

%%% STARTTLS

starttls_then_scram_sha256(_) ->
    C = ?C:connect(#{}),
    _ = ?C:open_stream(C),
    F = ?C:starttls(C),
    ?assertEqual(undefined, throng_xml:subel(F, <<"starttls">>)),
    ok = ?C:auth_scram(C, <<"alice">>, <<"password">>, sha256),
    _ = ?C:open_stream(C),
    C1 = ?C:bind(C, <<"tls">>),
    ?assertEqual(<<"alice@localhost/tls">>, ?C:jid(C1)).

%% With starttls: required, authentication before TLS is a policy violation.
starttls_required_blocks_auth(_) ->
    C = ?C:connect(#{}),
    _ = ?C:open_stream(C),
    ?C:send(C, ["<auth xmlns='", ?NS_SASL, "' mechanism='PLAIN'>",
                base64:encode(<<0, "alice", 0, "password">>), "</auth>"]),
    ?assertEqual(<<"policy-violation">>, ?C:closed(C, 5000)).

tls_required_features(_) ->
    C = ?C:connect(#{}),
    F = ?C:open_stream(C),
    TLS = throng_xml:subel(F, <<"starttls">>, ?NS_TLS),
    ?assertNotEqual(undefined, throng_xml:subel(TLS, <<"required">>)),
    ?assertEqual(undefined, throng_xml:subel(F, <<"mechanisms">>)),
    F2 = ?C:starttls(C),
    ?assertNotEqual(undefined, throng_xml:subel(F2, <<"mechanisms">>)).

%%% SASL

plain_success(_) ->
    C = ?C:login(<<"alice">>, <<"password">>, <<"r">>),
    ?assertEqual(<<"alice@localhost/r">>, ?C:jid(C)).

plain_wrong_password(_) ->
    C = ?C:connect(#{}),
    _ = ?C:open_stream(C),
    ?assertEqual({failure, <<"not-authorized">>}, ?C:auth_plain(C, <<"alice">>, <<"wrong">>)),
    %% The stream stays open for another attempt.
    ok = ?C:auth_plain(C, <<"alice">>, <<"password">>).

plain_unknown_user(_) ->
    C = ?C:connect(#{}),
    _ = ?C:open_stream(C),
    ?assertEqual({failure, <<"not-authorized">>}, ?C:auth_plain(C, <<"nobody">>, <<"password">>)).

scram_sha1(_) ->
    C = ?C:login(<<"alice">>, <<"password">>, <<"r">>, #{mechanism => sha}),
    ?assertEqual(<<"alice@localhost/r">>, ?C:jid(C)).

scram_sha256(_) ->
    C = ?C:login(<<"bob">>, <<"password">>, <<"r">>, #{mechanism => sha256}),
    ?assertEqual(<<"bob@localhost/r">>, ?C:jid(C)).

scram_wrong_password(_) ->
    C = ?C:connect(#{}),
    _ = ?C:open_stream(C),
    ?assertEqual({failure, <<"not-authorized">>},
                 ?C:auth_scram(C, <<"alice">>, <<"nope">>, sha256)).

invalid_mechanism(_) ->
    C = ?C:connect(#{}),
    _ = ?C:open_stream(C),
    ?C:send(C, ["<auth xmlns='", ?NS_SASL, "' mechanism='DIGEST-MD5'/>"]),
    F = ?C:recv_stanza(C),
    ?assertEqual(<<"failure">>, F#xmlel.name),
    ?assertNotEqual(undefined, throng_xml:subel(F, <<"invalid-mechanism">>)).

sasl_abort(_) ->
    C = ?C:connect(#{}),
    _ = ?C:open_stream(C),
    ?C:send(C, ["<auth xmlns='", ?NS_SASL, "' mechanism='SCRAM-SHA-1'>",
                base64:encode(<<"n,,n=alice,r=abcdefgh">>), "</auth>"]),
    #xmlel{name = <<"challenge">>} = ?C:recv_stanza(C),
    ?C:send(C, ["<abort xmlns='", ?NS_SASL, "'/>"]),
    F = ?C:recv_stanza(C),
    ?assertNotEqual(undefined, throng_xml:subel(F, <<"aborted">>)),
    ok = ?C:auth_plain(C, <<"alice">>, <<"password">>).

bad_base64(_) ->
    C = ?C:connect(#{}),
    _ = ?C:open_stream(C),
    ?C:send(C, ["<auth xmlns='", ?NS_SASL, "' mechanism='PLAIN'>!!!not base64</auth>"]),
    F = ?C:recv_stanza(C),
    ?assertNotEqual(undefined, throng_xml:subel(F, <<"incorrect-encoding">>)).

%% Five failures on one stream end it; later failures from the same address
%% are answered more and more slowly.
too_many_auth_failures(_) ->
    C = ?C:connect(#{}),
    _ = ?C:open_stream(C),
    [{failure, <<"not-authorized">>} = ?C:auth_plain(C, <<"alice">>, <<"bad">>)
     || _ <- lists:seq(1, 4)],
    ?C:send(C, ["<auth xmlns='", ?NS_SASL, "' mechanism='PLAIN'>",
                base64:encode(<<0, "alice", 0, "bad">>), "</auth>"]),
    #xmlel{name = <<"failure">>} = ?C:recv_stanza(C, 10000),
    ?assertEqual(<<"policy-violation">>, ?C:closed(C, 10000)),
    ?assert(throng_auth_limits:address_failures({127, 0, 0, 1}) >= 5).

stanza_before_auth(_) ->
    C = ?C:connect(#{}),
    _ = ?C:open_stream(C),
    ?C:send(C, ?C:message(<<"bob@localhost">>, <<"chat">>, <<"hi">>)),
    ?assertEqual(<<"not-authorized">>, ?C:closed(C, 5000)).

plain_with_authzid(_) ->
    C = ?C:connect(#{}),
    _ = ?C:open_stream(C),
    ?C:send(C, ["<auth xmlns='", ?NS_SASL, "' mechanism='PLAIN'>",
                base64:encode(<<"bob@localhost", 0, "alice", 0, "password">>), "</auth>"]),
    F = ?C:recv_stanza(C),
    ?assertNotEqual(undefined, throng_xml:subel(F, <<"invalid-authzid">>)).

%%% Resource binding

bind_requested_resource(_) ->
    C = ?C:login(<<"alice">>, <<"password">>, <<"Home">>),
    ?assertEqual(<<"alice@localhost/Home">>, ?C:jid(C)).

bind_generated_resource(_) ->
    C = ?C:login(<<"alice">>, <<"password">>, <<>>),
    <<"alice@localhost/", R/binary>> = ?C:jid(C),
    ?assert(byte_size(R) > 0).

%% The newer session wins; the older one gets a conflict stream error.
bind_conflict_newer_wins(_) ->
    Old = ?C:login(<<"alice">>, <<"password">>, <<"same">>),
    New = ?C:login(<<"alice">>, <<"password">>, <<"same">>),
    ?assertEqual(<<"conflict">>, ?C:closed(Old, 5000)),
    ?assertEqual(<<"alice@localhost/same">>, ?C:jid(New)),
    #jid{} = J = jid(<<"alice@localhost/same">>),
    ?assert(is_pid(throng_sm:lookup(J))).

%% An older session that does not end when told (here: suspended) is
%% killed after five seconds, and the new one is bound: its entry, which no
%% clean-up removed, does not stand in the way (the login used to spin on
%% it for ever).
bind_conflict_with_a_stuck_session(_) ->
    Old = ?C:login(<<"alice">>, <<"password">>, <<"stuck">>),
    J = jid(<<"alice@localhost/stuck">>),
    OldPid = throng_sm:lookup(J),
    ok = sys:suspend(OldPid),
    MRef = erlang:monitor(process, OldPid),
    %% the bind answers after the five seconds
    New = ?C:login(<<"alice">>, <<"password">>, <<"stuck">>, #{bind_timeout => 15000}),
    ?assertEqual(<<"alice@localhost/stuck">>, ?C:jid(New)),
    receive {'DOWN', MRef, process, OldPid, Why} -> ?assertEqual(killed, Why)
    after 1000 -> error(old_session_alive)
    end,
    NewPid = throng_sm:lookup(J),
    ?assert(is_pid(NewPid) andalso NewPid =/= OldPid),
    %% and the new session works
    B = ?C:login(<<"bob">>, <<"password">>, <<"b">>),
    ?C:send(B, ?C:message(<<"alice@localhost/stuck">>, <<"chat">>, <<"after the kill">>)),
    ?assertEqual(<<"after the kill">>, throng_xml:subel_cdata(?C:recv_stanza(New), <<"body">>)),
    _ = Old,
    [?C:close(C) || C <- [New, B]].

stanza_before_bind(_) ->
    C = ?C:connect(#{}),
    _ = ?C:open_stream(C),
    ok = ?C:auth_plain(C, <<"alice">>, <<"password">>),
    _ = ?C:open_stream(C),
    ?C:send(C, ?C:message(<<"bob@localhost">>, <<"chat">>, <<"hi">>)),
    ?assertEqual(<<"not-authorized">>, ?C:closed(C, 5000)).

%%% Stanzas

%% The server stamps from with the sender's full JID.
from_is_stamped(_) ->
    A = ?C:login(<<"alice">>, <<"password">>, <<"a">>),
    B = ?C:login(<<"bob">>, <<"password">>, <<"b">>),
    ?C:send(A, ?C:message(<<"bob@localhost/b">>, <<"chat">>, <<"hello">>)),
    M = ?C:recv_stanza(B),
    ?assertEqual(<<"alice@localhost/a">>, throng_xml:attr(<<"from">>, M)),
    ?assertEqual(<<"bob@localhost/b">>, throng_xml:attr(<<"to">>, M)),
    ?assertEqual(<<"hello">>, throng_xml:subel_cdata(M, <<"body">>)).

spoofed_from_is_rejected(_) ->
    A = ?C:login(<<"alice">>, <<"password">>, <<"a">>),
    El = ?C:message(<<"bob@localhost">>, <<"chat">>, <<"x">>),
    ?C:send(A, throng_xml:set_attr(<<"from">>, <<"bob@localhost/b">>, El)),
    ?assertEqual(<<"invalid-from">>, ?C:closed(A, 5000)).

iq_without_id_is_bad_request(_) ->
    A = ?C:login(<<"alice">>, <<"password">>, <<"a">>),
    ?C:send(A, #xmlel{name = <<"iq">>, attrs = [{<<"type">>, <<"get">>}],
                      children = [#xmlel{name = <<"ping">>, attrs = [{<<"xmlns">>, ?NS_PING}]}]}),
    R = ?C:recv_stanza(A),
    ?assertEqual(<<"error">>, throng_xml:attr(<<"type">>, R)),
    ?assertNotEqual(undefined, throng_xml:subel(throng_xml:subel(R, <<"error">>), <<"bad-request">>)).

unknown_iq_service_unavailable(_) ->
    A = ?C:login(<<"alice">>, <<"password">>, <<"a">>),
    R = ?C:iq(A, <<"get">>, #xmlel{name = <<"query">>, attrs = [{<<"xmlns">>, <<"urn:unknown">>}]}),
    ?assertEqual(<<"error">>, throng_xml:attr(<<"type">>, R)),
    Err = throng_xml:subel(R, <<"error">>),
    ?assertEqual(<<"cancel">>, throng_xml:attr(<<"type">>, Err)),
    ?assertNotEqual(undefined, throng_xml:subel(Err, <<"service-unavailable">>, ?NS_STANZAS)).

malformed_to_jid(_) ->
    A = ?C:login(<<"alice">>, <<"password">>, <<"a">>),
    ?C:send(A, ?C:message(<<"bad@@jid@">>, <<"chat">>, <<"x">>)),
    R = ?C:recv_stanza(A),
    ?assertEqual(<<"error">>, throng_xml:attr(<<"type">>, R)),
    ?assertNotEqual(undefined, throng_xml:subel(throng_xml:subel(R, <<"error">>), <<"jid-malformed">>)).

%% There is no server-to-server: a remote domain is not found.
remote_domain_not_found(_) ->
    A = ?C:login(<<"alice">>, <<"password">>, <<"a">>),
    ?C:send(A, ?C:message(<<"carol@remote.test">>, <<"chat">>, <<"x">>)),
    R = ?C:recv_stanza(A),
    ?assertEqual(<<"carol@remote.test">>, throng_xml:attr(<<"from">>, R)),
    ?assertNotEqual(undefined, throng_xml:subel(throng_xml:subel(R, <<"error">>),
                                                <<"remote-server-not-found">>)).

unsupported_stanza_type(_) ->
    A = ?C:login(<<"alice">>, <<"password">>, <<"a">>),
    ?C:send(A, <<"<foo/>">>),
    ?assertEqual(<<"unsupported-stanza-type">>, ?C:closed(A, 5000)).

legacy_session_iq(_) ->
    A = ?C:login(<<"alice">>, <<"password">>, <<"a">>),
    R = ?C:iq(A, <<"set">>, #xmlel{name = <<"session">>, attrs = [{<<"xmlns">>, ?NS_SESSION}]}),
    ?assertEqual(<<"result">>, throng_xml:attr(<<"type">>, R)).

jid(B) ->
    {ok, J} = throng_jid:parse(B),
    J.

%% A password is SASLprep'ed when the account is created (RFC 4013: a soft
%% hyphen maps to nothing), so the prepared form logs in with PLAIN and
%% SCRAM, as a client that prepares its password would send it.
password_saslprepped_at_registration(_Config) ->
    ok = throng_ct:register(<<"dave">>, <<"pass", 16#C2, 16#AD, "word">>),
    C1 = ?C:connect(#{}),
    _ = ?C:open_stream(C1),
    ?assertEqual(ok, ?C:auth_plain(C1, <<"dave">>, <<"password">>)),
    C2 = ?C:connect(#{}),
    _ = ?C:open_stream(C2),
    ?assertEqual(ok, ?C:auth_scram(C2, <<"dave">>, <<"password">>, sha256)).

%% RFC 6120 §4.9.3.22 unsupported-stanza-type: "The initiating entity has
%% sent a first-level child of the stream that is not supported by the
%% server, either because the receiving entity does not understand the
%% namespace or because [it] does not understand the element name for the
%% applicable namespace". A <message/> qualified by another namespace than
%% jabber:client is not a message stanza: it is not routed.
foreign_namespace_stanza(_) ->
    B = ?C:login(<<"bob">>, <<"password">>, <<"b">>),
    A = ?C:login(<<"alice">>, <<"password">>, <<"a">>),
    ?C:send(A, <<"<message xmlns='urn:x' to='bob@localhost/b'><body>x</body></message>">>),
    ?assertEqual(<<"unsupported-stanza-type">>, ?C:closed(A, 5000)),
    ?C:expect_nothing(B, 300).

%% RFC 6120 §4.9.3.2 bad-namespace-prefix: "The entity has sent a namespace
%% prefix that is unsupported"; §4.8.5: elements qualified by the content
%% namespace carry no prefix. A prefixed first-level element (declared or
%% not) ends the stream with bad-namespace-prefix and is not routed.
prefixed_stanza(_) ->
    B = ?C:login(<<"bob">>, <<"password">>, <<"b">>),
    [begin
         A = ?C:login(<<"alice">>, <<"password">>, R),
         ?C:send(A, Bytes),
         ?assertEqual(<<"bad-namespace-prefix">>, ?C:closed(A, 5000))
     end || {R, Bytes} <- [{<<"a1">>, <<"<foo:message to='bob@localhost/b'><foo:body>x</foo:body></foo:message>">>},
                           {<<"a2">>, <<"<c:message xmlns:c='jabber:client' to='bob@localhost/b'>"
                                       "<c:body>x</c:body></c:message>">>}]],
    ?C:expect_nothing(B, 300).

%% A stanza that names jabber:client itself is a stanza like any other.
client_namespace_explicit(_) ->
    B = ?C:login(<<"bob">>, <<"password">>, <<"b">>),
    A = ?C:login(<<"alice">>, <<"password">>, <<"a">>),
    ?C:send(A, <<"<message xmlns='jabber:client' to='bob@localhost/b' type='chat'><body>x</body></message>">>),
    M = ?C:recv_stanza(B),
    ?assertEqual(<<"x">>, throng_xml:subel_cdata(M, <<"body">>)).
