%% @doc Stream headers and features (RFC 6120 §4).
-module(throng_stream_tests).

-include_lib("eunit/include/eunit.hrl").
-include("throng.hrl").

hosts() -> [<<"localhost">>, <<"example.org">>].

attrs(Extra) ->
    [{<<"xmlns">>, ?NS_CLIENT}, {<<"xmlns:stream">>, ?NS_STREAM}, {<<"version">>, <<"1.0">>} | Extra].

setup() -> {ok, _} = application:ensure_all_started(stringprep).

good_header_test() ->
    setup(),
    ?assertEqual({ok, <<"example.org">>},
                 throng_stream:check_header(<<"stream:stream">>, attrs([{<<"to">>, <<"Example.ORG">>}]),
                                            hosts())),
    %% No 'to': the first host.
    ?assertEqual({ok, <<"localhost">>}, throng_stream:check_header(<<"stream:stream">>, attrs([]), hosts())),
    %% Any prefix, if declared.
    ?assertMatch({ok, _}, throng_stream:check_header(
                            <<"s:stream">>, [{<<"xmlns">>, ?NS_CLIENT}, {<<"xmlns:s">>, ?NS_STREAM},
                                             {<<"version">>, <<"1.0">>}], hosts())),
    %% A later minor or major version is answered with ours.
    ?assertMatch({ok, _}, throng_stream:check_header(
                            <<"stream:stream">>, [{<<"version">>, <<"1.5">>} | attrs([])], hosts())).

bad_headers_test() ->
    setup(),
    C = fun(Name, Attrs) -> element(2, throng_stream:check_header(Name, Attrs, hosts())) end,
    ?assertEqual('host-unknown', C(<<"stream:stream">>, attrs([{<<"to">>, <<"other.test">>}]))),
    ?assertEqual('bad-namespace-prefix',
                 C(<<"s:stream">>, [{<<"xmlns">>, ?NS_CLIENT}, {<<"version">>, <<"1.0">>}])),
    ?assertEqual('invalid-namespace',
                 C(<<"stream:stream">>, [{<<"xmlns:stream">>, <<"urn:x">>}, {<<"xmlns">>, ?NS_CLIENT}])),
    ?assertEqual('invalid-namespace',
                 C(<<"stream:stream">>, [{<<"xmlns">>, <<"jabber:server">>}, {<<"xmlns:stream">>, ?NS_STREAM},
                                         {<<"version">>, <<"1.0">>}])),
    ?assertEqual('invalid-namespace', C(<<"stream:other">>, attrs([]))),
    ?assertEqual('unsupported-version',
                 C(<<"stream:stream">>, [{<<"xmlns">>, ?NS_CLIENT}, {<<"xmlns:stream">>, ?NS_STREAM}])).

features_test() ->
    Opts = #{stage => pre_auth, tls => false, starttls => required,
             mechanisms => [<<"PLAIN">>], extra => <<"<register xmlns='http://jabber.org/features/iq-register'/>">>,
             sm => true},
    F = iolist_to_binary(throng_stream:features(Opts)),
    ?assertMatch({_, _}, binary:match(F, <<"<required/>">>)),
    ?assertEqual(nomatch, binary:match(F, <<"mechanisms">>)),   %% not before TLS
    ?assertEqual(nomatch, binary:match(F, <<"iq-register">>)),  %% module features neither
    F2 = iolist_to_binary(throng_stream:features(Opts#{tls => true})),
    ?assertEqual(nomatch, binary:match(F2, <<"starttls">>)),
    ?assertMatch({_, _}, binary:match(F2, <<"<mechanism>PLAIN</mechanism>">>)),
    ?assertMatch({_, _}, binary:match(F2, <<"iq-register">>)),
    F3 = iolist_to_binary(throng_stream:features(#{stage => authenticated, sm => true,
                                                   extra => ["<ver xmlns='", ?NS_ROSTERVER, "'/>"]})),
    [?assertMatch({_, _}, binary:match(F3, X)) || X <- [?NS_BIND, ?NS_SM, ?NS_ROSTERVER]].

stream_error_test() ->
    ?assertEqual(<<"<stream:error><see-other-host xmlns='urn:ietf:params:xml:ns:xmpp-streams'>"
                   "[::1]:5222</see-other-host></stream:error>">>,
                 iolist_to_binary(throng_stream:error({'see-other-host', <<"[::1]:5222">>}, <<>>))),
    E = iolist_to_binary(throng_stream:error('host-unknown', <<"a < b">>)),
    ?assertEqual(<<"<stream:error><host-unknown xmlns='urn:ietf:params:xml:ns:xmpp-streams'/>"
                   "<text xmlns='urn:ietf:params:xml:ns:xmpp-streams' xml:lang='en'>a &lt; b</text>"
                   "</stream:error>">>, E).
