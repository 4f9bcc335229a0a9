%% @doc XEP-0030 Service Discovery against the real server.
-module(xep0030_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").
-include("throng.hrl").

-compile([export_all, nowarn_export_all]).

-define(C, throng_test_client).

all() -> [server_info, server_items, unknown_node, account_info, info_of_other_account,
          register_feature_follows_config].

init_per_testcase(register_feature_follows_config, Config) ->
    throng_ct:start(Config, #{modules => #{register => #{allow_create => true}}}),
    throng_ct:register(<<"alice">>, <<"password">>),
    Config;
init_per_testcase(_TC, Config) ->
    throng_ct:start(Config),
    throng_ct:register(<<"alice">>, <<"password">>),
    throng_ct:register(<<"bob">>, <<"password">>),
    Config.

end_per_testcase(_TC, _Config) ->
    throng_ct:stop().

q(NS) -> #xmlel{name = <<"query">>, attrs = [{<<"xmlns">>, NS}]}.

features(R) ->
    [throng_xml:attr(<<"var">>, F) || #xmlel{name = <<"feature">>} = F
                                         <- throng_xml:subels(throng_xml:subel(R, <<"query">>))].

identities(R) ->
    [{throng_xml:attr(<<"category">>, I), throng_xml:attr(<<"type">>, I)}
     || #xmlel{name = <<"identity">>} = I <- throng_xml:subels(throng_xml:subel(R, <<"query">>))].

server_info(_) ->
    A = ?C:login(<<"alice">>, <<"password">>, <<"r">>),
    R = ?C:iq(A, <<"get">>, q(?NS_DISCO_INFO), [{<<"to">>, <<"localhost">>}]),
    ?assertEqual(<<"result">>, throng_xml:attr(<<"type">>, R)),
    ?assertEqual([{<<"server">>, <<"im">>}], identities(R)),
    Fs = features(R),
    [?assert(lists:member(F, Fs)) || F <- [?NS_DISCO_INFO, ?NS_DISCO_ITEMS, ?NS_PING,
                                           ?NS_VERSION, <<"msgoffline">>]],
    ?assertNot(lists:member(?NS_REGISTER, Fs)).

server_items(_) ->
    A = ?C:login(<<"alice">>, <<"password">>, <<"r">>),
    R = ?C:iq(A, <<"get">>, q(?NS_DISCO_ITEMS), [{<<"to">>, <<"localhost">>}]),
    ?assertEqual(<<"result">>, throng_xml:attr(<<"type">>, R)),
    ?assertEqual([], throng_xml:subels(throng_xml:subel(R, <<"query">>))).

unknown_node(_) ->
    A = ?C:login(<<"alice">>, <<"password">>, <<"r">>),
    Q = (q(?NS_DISCO_INFO))#xmlel{attrs = [{<<"xmlns">>, ?NS_DISCO_INFO}, {<<"node">>, <<"x">>}]},
    R = ?C:iq(A, <<"get">>, Q, [{<<"to">>, <<"localhost">>}]),
    ?assertNotEqual(undefined, throng_xml:subel(throng_xml:subel(R, <<"error">>), <<"item-not-found">>)).

%% A query to a bare JID is answered by the server for the account.
account_info(_) ->
    A = ?C:login(<<"alice">>, <<"password">>, <<"r">>),
    R = ?C:iq(A, <<"get">>, q(?NS_DISCO_INFO), [{<<"to">>, <<"alice@localhost">>}]),
    ?assertEqual([{<<"account">>, <<"registered">>}], identities(R)).

info_of_other_account(_) ->
    A = ?C:login(<<"alice">>, <<"password">>, <<"r">>),
    R = ?C:iq(A, <<"get">>, q(?NS_DISCO_INFO), [{<<"to">>, <<"bob@localhost">>}]),
    ?assertEqual(<<"bob@localhost">>, throng_xml:attr(<<"from">>, R)),
    ?assertEqual([{<<"account">>, <<"registered">>}], identities(R)),
    R2 = ?C:iq(A, <<"get">>, q(?NS_DISCO_INFO), [{<<"to">>, <<"nobody@localhost">>}]),
    ?assertNotEqual(undefined, throng_xml:subel(throng_xml:subel(R2, <<"error">>), <<"service-unavailable">>)).

register_feature_follows_config(_) ->
    A = ?C:login(<<"alice">>, <<"password">>, <<"r">>),
    R = ?C:iq(A, <<"get">>, q(?NS_DISCO_INFO), [{<<"to">>, <<"localhost">>}]),
    ?assert(lists:member(?NS_REGISTER, features(R))).
