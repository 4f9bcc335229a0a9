%% @doc A PEP node as data (throng_pep_node): configuration from forms,
%% publish-options as preconditions, max_items, retract, access models.
-module(throng_pep_node_tests).

-include_lib("eunit/include/eunit.hrl").
-include("throng.hrl").

base() -> #{access_model => presence, max_items => 1, send_last_published_item => true,
            notify_retract => true}.

config_from_form_test() ->
    F = fun(V) -> throng_pep_node:config_from_form(V, {base(), 100}) end,
    ?assertMatch({ok, #{access_model := open}}, F(#{<<"pubsub#access_model">> => [<<"open">>]})),
    ?assertMatch({ok, #{max_items := 100}}, F(#{<<"pubsub#max_items">> => [<<"max">>]})),
    ?assertMatch({ok, #{max_items := 7}}, F(#{<<"pubsub#max_items">> => [<<"7">>]})),
    ?assertEqual({error, <<"pubsub#max_items">>}, F(#{<<"pubsub#max_items">> => [<<"101">>]})),
    ?assertEqual({error, <<"pubsub#access_model">>}, F(#{<<"pubsub#access_model">> => [<<"roster">>]})),
    ?assertEqual({error, <<"pubsub#persist_items">>}, F(#{<<"pubsub#persist_items">> => [<<"0">>]})),
    %% Fields this node does not have are ignored; FORM_TYPE too.
    ?assertEqual({ok, base()}, F(#{<<"FORM_TYPE">> => [<<"x">>], <<"pubsub#title">> => [<<"t">>]})).

preconditions_test() ->
    P = fun(V) -> throng_pep_node:preconditions(V, {base(), 100}) end,
    ?assertEqual(ok, P(#{<<"pubsub#access_model">> => [<<"presence">>]})),
    ?assertEqual(ok, P(#{})),
    ?assertEqual({error, <<"precondition-not-met">>}, P(#{<<"pubsub#access_model">> => [<<"open">>]})).

publish_test() ->
    N0 = throng_pep_node:new((base())#{max_items := 2}),
    N1 = throng_pep_node:publish({<<"a">>, x, p, 1}, N0),
    N2 = throng_pep_node:publish({<<"b">>, x, p, 2}, N1),
    N3 = throng_pep_node:publish({<<"c">>, x, p, 3}, N2),
    ?assertEqual([<<"b">>, <<"c">>], [Id || {Id, _, _, _} <- throng_pep_node:items(N3)]),
    %% The same id again replaces the item and makes it the newest.
    N4 = throng_pep_node:publish({<<"b">>, y, p, 4}, N3),
    ?assertEqual([<<"c">>, <<"b">>], [Id || {Id, _, _, _} <- throng_pep_node:items(N4)]),
    ?assertEqual({<<"b">>, y, p, 4}, throng_pep_node:last(N4)),
    ?assertEqual([<<"b">>], [Id || {Id, _, _, _} <- throng_pep_node:items(N4, 1)]).

retract_test() ->
    N = throng_pep_node:publish({<<"a">>, x, p, 1}, throng_pep_node:new(base())),
    {ok, N1} = throng_pep_node:retract(<<"a">>, N),
    ?assertEqual(none, throng_pep_node:last(N1)),
    ?assertEqual(not_found, throng_pep_node:retract(<<"a">>, N1)).

access_test() ->
    A = fun(Who, Model) -> throng_pep_node:may_access(Who, (base())#{access_model := Model}) end,
    ?assertEqual([true, true, false], [A(W, presence) || W <- [owner, subscriber, other]]),
    ?assertEqual([true, true, true], [A(W, open) || W <- [owner, subscriber, other]]),
    ?assertEqual([true, false, false], [A(W, whitelist) || W <- [owner, subscriber, other]]).
