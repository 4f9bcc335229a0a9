%% @doc XEP-0352 holding rules (throng_c2s_csi): what is urgent, and the
%% queue's replacement of presence and its bound.
-module(throng_c2s_csi_tests).

-include_lib("eunit/include/eunit.hrl").
-include("throng.hrl").

el(Name, Attrs, Children) -> #xmlel{name = Name, attrs = Attrs, children = Children}.
ns(Name, NS) -> el(Name, [{<<"xmlns">>, NS}], []).
body() -> el(<<"body">>, [], [{xmlcdata, <<"hi">>}]).
u(El) -> throng_c2s_csi:urgent(El).

presence_test() ->
    ?assertNot(u(el(<<"presence">>, [], []))),
    ?assertNot(u(el(<<"presence">>, [{<<"type">>, <<"unavailable">>}], []))),
    [?assert(u(el(<<"presence">>, [{<<"type">>, T}], [])))
     || T <- [<<"subscribe">>, <<"subscribed">>, <<"unsubscribe">>, <<"unsubscribed">>,
              <<"error">>, <<"probe">>]].

message_test() ->
    ?assert(u(el(<<"message">>, [], [body()]))),
    ?assert(u(el(<<"message">>, [], [el(<<"subject">>, [], [])]))),
    ?assert(u(el(<<"message">>, [{<<"type">>, <<"error">>}], []))),
    ?assert(u(el(<<"message">>, [], [ns(<<"encrypted">>, <<"eu.siacs.conversations.axolotl">>)]))),
    ?assertNot(u(el(<<"message">>, [], [ns(<<"composing">>, <<"http://jabber.org/protocol/chatstates">>)]))),
    ?assertNot(u(el(<<"message">>, [], [ns(<<"received">>, <<"urn:xmpp:receipts">>)]))).

carbon_test() ->
    Fwd = fun(M) -> el(<<"forwarded">>, [{<<"xmlns">>, <<"urn:xmpp:forward:0">>}], [M]) end,
    Carbon = fun(M) -> el(<<"message">>, [], [el(<<"received">>, [{<<"xmlns">>, <<"urn:xmpp:carbons:2">>}],
                                                 [Fwd(M)])]) end,
    ?assert(u(Carbon(el(<<"message">>, [], [body()])))),
    ?assertNot(u(Carbon(el(<<"message">>, [], [ns(<<"active">>, <<"http://jabber.org/protocol/chatstates">>)])))).

iq_test() ->
    ?assert(u(el(<<"iq">>, [{<<"type">>, <<"get">>}], []))).

j(R) -> #jid{user = <<"bob">>, server = <<"x">>, resource = R}.

replace_presence_test() ->
    P = fun(S) -> el(<<"presence">>, [], [el(<<"show">>, [], [{xmlcdata, S}])]) end,
    M = el(<<"message">>, [], []),
    {ok, Q1} = throng_c2s_csi:hold(j(<<"a">>), j(<<>>), P(<<"away">>), {[], 10}),
    {ok, Q2} = throng_c2s_csi:hold(j(<<"a">>), j(<<>>), M, {Q1, 10}),
    {ok, Q3} = throng_c2s_csi:hold(j(<<"b">>), j(<<>>), P(<<"xa">>), {Q2, 10}),
    {ok, Q4} = throng_c2s_csi:hold(j(<<"a">>), j(<<>>), P(<<"dnd">>), {Q3, 10}),
    ?assertEqual([M, P(<<"xa">>), P(<<"dnd">>)], [E || {_, _, E} <- throng_c2s_csi:items(Q4)]).

bound_test() ->
    M = el(<<"message">>, [], []),
    {ok, Q1} = throng_c2s_csi:hold(j(<<"a">>), j(<<>>), M, {[], 1}),
    ?assertMatch({full, [_, _]}, throng_c2s_csi:hold(j(<<"a">>), j(<<>>), M, {Q1, 1})).
