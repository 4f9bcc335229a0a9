%% SCRAM with channel binding (RFC 5802 §6, RFC 5929, RFC 9266) and its
%% advertisement (XEP-0440), through the real server: the -PLUS mechanisms
%% and the channel binding types are offered only over TLS; a client that
%% proves the connection's tls-server-end-point logs in; one that proves
%% another certificate's hash (a man in the middle) does not; a client that
%% says it could bind but thinks the server cannot ("y") is refused as a
%% downgrade where -PLUS is offered, and accepted where it is not.
-module(xep0440_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").
-include("throng.hrl").

-compile([export_all, nowarn_export_all]).

-define(C, throng_test_client).

all() ->
    [plus_offered_only_over_tls, plus_with_server_end_point, plus_wrong_binding_refused,
     plus_unknown_type_refused, downgrade_detected, y_flag_without_plus_accepted,
     plus_not_configured].

init_per_testcase(TC, Config) ->
    Overrides = case TC of
                    plus_not_configured ->
                        #{auth => #{mechanisms => ['SCRAM-SHA-256', 'PLAIN']}};
                    _ -> #{}
                end,
    throng_ct:start(Config, Overrides),
    ok = throng_ct:register(<<"alice">>, <<"password">>),
    Config.

end_per_testcase(_TC, _Config) ->
    throng_ct:stop().

mechanisms(F) ->
    [throng_xml:cdata(M) || M <- (throng_xml:subel(F, <<"mechanisms">>, ?NS_SASL))#xmlel.children].

cb_types(F) ->
    case throng_xml:subel(F, <<"sasl-channel-binding">>, <<"urn:xmpp:sasl-cb:0">>) of
        undefined -> [];
        #xmlel{children = Ch} -> [throng_xml:attr(<<"type">>, E) || E <- Ch]
    end.

tls_client() ->
    C = ?C:connect(#{}),
    _ = ?C:open_stream(C),
    F = ?C:starttls(C),
    {C, F}.

plus_offered_only_over_tls(_) ->
    C = ?C:connect(#{}),
    Plain = ?C:open_stream(C),
    ?assertEqual([<<"SCRAM-SHA-256">>, <<"SCRAM-SHA-1">>, <<"PLAIN">>], mechanisms(Plain)),
    ?assertEqual([], cb_types(Plain)),
    F = ?C:starttls(C),
    ?assertEqual([<<"SCRAM-SHA-256-PLUS">>, <<"SCRAM-SHA-1-PLUS">>, <<"SCRAM-SHA-256">>,
                  <<"SCRAM-SHA-1">>, <<"PLAIN">>], mechanisms(F)),
    ?assertEqual(lists:sort([<<"tls-exporter">>, <<"tls-server-end-point">>, <<"tls-unique">>]),
                 lists:sort(cb_types(F))),
    ?C:close(C).

plus_with_server_end_point(_) ->
    [begin
         {C, _} = tls_client(),
         EndPoint = ?C:tls_server_end_point(C),
         ?assertEqual(ok, ?C:auth_scram(C, <<"alice">>, <<"password">>, Hash,
                                        #{plus => {<<"tls-server-end-point">>, EndPoint}})),
         _ = ?C:open_stream(C),
         _ = ?C:bind(C, <<"plus">>),
         ?C:close(C)
     end || Hash <- [sha256, sha]],
    ok.

%% The hash of another certificate: what a client would compute behind a
%% man in the middle that terminates TLS with its own certificate.
plus_wrong_binding_refused(_) ->
    {C, _} = tls_client(),
    Other = crypto:hash(sha256, <<"another certificate">>),
    ?assertEqual({failure, <<"not-authorized">>},
                 ?C:auth_scram(C, <<"alice">>, <<"password">>, sha256,
                               #{plus => {<<"tls-server-end-point">>, Other}})),
    ?C:close(C).

plus_unknown_type_refused(_) ->
    {C, _} = tls_client(),
    ?assertEqual({failure, <<"malformed-request">>},
                 ?C:auth_scram(C, <<"alice">>, <<"password">>, sha256,
                               #{plus => {<<"tls-channel-id">>, <<"x">>}})),
    ?C:close(C).

downgrade_detected(_) ->
    {C, _} = tls_client(),
    ?assertEqual({failure, <<"not-authorized">>},
                 ?C:auth_scram(C, <<"alice">>, <<"password">>, sha256, #{flag => y})),
    ?C:close(C).

%% Over plain TCP nothing is offered for binding: "y" is the honest answer.
y_flag_without_plus_accepted(_) ->
    C = ?C:connect(#{}),
    _ = ?C:open_stream(C),
    ?assertEqual(ok, ?C:auth_scram(C, <<"alice">>, <<"password">>, sha256, #{flag => y})),
    ?C:close(C).

%% With no -PLUS mechanism configured, nothing is advertised and "y" is
%% accepted over TLS too.
plus_not_configured(_) ->
    {C, F} = tls_client(),
    ?assertEqual([<<"SCRAM-SHA-256">>, <<"PLAIN">>], mechanisms(F)),
    ?assertEqual([], cb_types(F)),
    ?assertEqual(ok, ?C:auth_scram(C, <<"alice">>, <<"password">>, sha256, #{flag => y})),
    ?C:close(C).
