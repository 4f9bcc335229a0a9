%% @doc XEP-0199 XMPP Ping against the real server: client-to-server pings
%% are answered; the server pings idle clients and closes the connection of
%% one that does not answer.
-module(xep0199_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").
-include("throng.hrl").

-compile([export_all, nowarn_export_all]).

-define(C, throng_test_client).

all() -> [client_ping_server, client_ping_own_account, server_pings_idle_client,
          silent_client_is_disconnected, answering_client_stays].

init_per_testcase(TC, Config) when TC =:= client_ping_server; TC =:= client_ping_own_account ->
    throng_ct:start(Config),
    throng_ct:register(<<"alice">>, <<"password">>),
    Config;
init_per_testcase(_TC, Config) ->
    throng_ct:start(Config, #{modules => #{ping => #{interval => 1, timeout => 1}}}),
    throng_ct:register(<<"alice">>, <<"password">>),
    Config.

end_per_testcase(_TC, _Config) ->
    throng_ct:stop().

ping() -> #xmlel{name = <<"ping">>, attrs = [{<<"xmlns">>, ?NS_PING}]}.

client_ping_server(_) ->
    A = ?C:login(<<"alice">>, <<"password">>, <<"r">>),
    R = ?C:iq(A, <<"get">>, ping(), [{<<"to">>, <<"localhost">>}]),
    ?assertEqual(<<"result">>, throng_xml:attr(<<"type">>, R)),
    ?assertEqual(<<"localhost">>, throng_xml:attr(<<"from">>, R)).

client_ping_own_account(_) ->
    A = ?C:login(<<"alice">>, <<"password">>, <<"r">>),
    R = ?C:iq(A, <<"get">>, ping()),
    ?assertEqual(<<"result">>, throng_xml:attr(<<"type">>, R)).

server_pings_idle_client(_) ->
    A = ?C:login(<<"alice">>, <<"password">>, <<"r">>),
    P = ?C:recv_stanza(A, 5000),
    ?assertEqual(<<"iq">>, P#xmlel.name),
    ?assertEqual(<<"get">>, throng_xml:attr(<<"type">>, P)),
    ?assertEqual(<<"localhost">>, throng_xml:attr(<<"from">>, P)),
    ?assertNotEqual(undefined, throng_xml:subel(P, <<"ping">>, ?NS_PING)).

silent_client_is_disconnected(_) ->
    A = ?C:login(<<"alice">>, <<"password">>, <<"r">>),
    #xmlel{name = <<"iq">>} = ?C:recv_stanza(A, 5000),
    ?assertEqual(<<"connection-timeout">>, ?C:closed(A, 10000)).

answering_client_stays(_) ->
    A = ?C:login(<<"alice">>, <<"password">>, <<"r">>),
    [begin
         P = ?C:recv_stanza(A, 5000),
         ?C:send(A, throng_stanza:iq_result(P))
     end || _ <- lists:seq(1, 3)],
    %% Still connected after three rounds.
    R = ?C:iq(A, <<"get">>, ping()),
    ?assertEqual(<<"result">>, throng_xml:attr(<<"type">>, R)).
