%% @doc XEP-0030 Service Discovery against the real server.
-module(xep0030_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").
-include("throng.hrl").

-compile([export_all, nowarn_export_all]).

-define(C, throng_test_client).

all() -> [server_info, server_items, unknown_node, account_info, info_of_other_account,
          register_feature_follows_config, account_items_and_nodes_of_own_account,
          other_account_without_subscription, other_account_with_subscription,
          nonexistent_account, full_jid_of_other_user_goes_to_client].

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
    %% The server, and the PEP service every account is (XEP-0163 §6.1).
    ?assertEqual([{<<"pubsub">>, <<"pep">>}, {<<"server">>, <<"im">>}], lists:sort(identities(R))),
    Fs = features(R),
    [?assert(lists:member(F, Fs)) || F <- [?NS_DISCO_INFO, ?NS_DISCO_ITEMS, ?NS_PING,
                                           ?NS_VERSION, <<"msgoffline">>]],
    ?assertNot(lists:member(?NS_REGISTER, Fs)).

server_items(_) ->
    A = ?C:login(<<"alice">>, <<"password">>, <<"r">>),
    R = ?C:iq(A, <<"get">>, q(?NS_DISCO_ITEMS), [{<<"to">>, <<"localhost">>}]),
    ?assertEqual(<<"result">>, throng_xml:attr(<<"type">>, R)),
    %% The one service of the test server: the MUC service (module muc).
    ?assertEqual([[{<<"jid">>, <<"conference.localhost">>}, {<<"name">>, <<"Chatrooms">>}]],
                 [I#xmlel.attrs || I <- throng_xml:subels(throng_xml:subel(R, <<"query">>))]).

unknown_node(_) ->
    A = ?C:login(<<"alice">>, <<"password">>, <<"r">>),
    Q = (q(?NS_DISCO_INFO))#xmlel{attrs = [{<<"xmlns">>, ?NS_DISCO_INFO}, {<<"node">>, <<"x">>}]},
    R = ?C:iq(A, <<"get">>, Q, [{<<"to">>, <<"localhost">>}]),
    ?assertNotEqual(undefined, throng_xml:subel(throng_xml:subel(R, <<"error">>), <<"item-not-found">>)).

%% A query to a bare JID is answered by the server for the account.
account_info(_) ->
    A = ?C:login(<<"alice">>, <<"password">>, <<"r">>),
    R = ?C:iq(A, <<"get">>, q(?NS_DISCO_INFO), [{<<"to">>, <<"alice@localhost">>}]),
    ?assertEqual([{<<"account">>, <<"registered">>}, {<<"pubsub">>, <<"pep">>}], lists:sort(identities(R))).

%% §8: the server answers for another user's account only to an entity
%% authorized to receive its presence; without a subscription the answer is
%% service-unavailable, as for an account that does not exist.
info_of_other_account(_) ->
    A = ?C:login(<<"alice">>, <<"password">>, <<"r">>),
    R = ?C:iq(A, <<"get">>, q(?NS_DISCO_INFO), [{<<"to">>, <<"bob@localhost">>}]),
    ?assertEqual(<<"bob@localhost">>, throng_xml:attr(<<"from">>, R)),
    error_cond(R, <<"service-unavailable">>),
    R2 = ?C:iq(A, <<"get">>, q(?NS_DISCO_INFO), [{<<"to">>, <<"nobody@localhost">>}]),
    ?assertNotEqual(undefined, throng_xml:subel(throng_xml:subel(R2, <<"error">>), <<"service-unavailable">>)).

register_feature_follows_config(_) ->
    A = ?C:login(<<"alice">>, <<"password">>, <<"r">>),
    R = ?C:iq(A, <<"get">>, q(?NS_DISCO_INFO), [{<<"to">>, <<"localhost">>}]),
    ?assert(lists:member(?NS_REGISTER, features(R))).

error_cond(R, Cond) ->
    ?assertEqual(<<"error">>, throng_xml:attr(<<"type">>, R)),
    ?assertNotEqual(undefined, throng_xml:subel(throng_xml:subel(R, <<"error">>), Cond)).

node(NS, Node) ->
    #xmlel{name = <<"query">>, attrs = [{<<"xmlns">>, NS}, {<<"node">>, Node}]}.

%% The four queries of a disco walk: info and items, without and with a node.
queries() ->
    [q(?NS_DISCO_INFO), q(?NS_DISCO_ITEMS), node(?NS_DISCO_INFO, <<"x">>),
     node(?NS_DISCO_ITEMS, <<"x">>)].

%% The account itself: info and (empty) items; an unknown node is
%% item-not-found (§3.2, §7).
account_items_and_nodes_of_own_account(_) ->
    A = ?C:login(<<"alice">>, <<"password">>, <<"r">>),
    [Info, Items, InfoNode, ItemsNode] =
        [?C:iq(A, <<"get">>, Q, [{<<"to">>, <<"alice@localhost">>}]) || Q <- queries()],
    ?assertEqual([{<<"account">>, <<"registered">>}, {<<"pubsub">>, <<"pep">>}], lists:sort(identities(Info))),
    ?assertEqual(<<"result">>, throng_xml:attr(<<"type">>, Items)),
    ?assertEqual([], throng_xml:subels(throng_xml:subel(Items, <<"query">>))),
    error_cond(InfoNode, <<"item-not-found">>),
    error_cond(ItemsNode, <<"item-not-found">>).

%% XEP-0030 §8: "the server MUST return a <service-unavailable/> error if
%% ... the requesting entity is not authorized to receive presence from the
%% target entity (i.e., via the target having a presence subscription to
%% the requesting entity of type "both" or "from")": every query, with or
%% without a node (a different error would tell the account exists).
other_account_without_subscription(_) ->
    A = ?C:login(<<"alice">>, <<"password">>, <<"r">>),
    %% Alice is subscribed the other way only: Bob receives her presence.
    {ok, _, _, _} = throng_storage:roster_update(
                      <<"bob">>, <<"localhost">>, {<<"alice">>, <<"localhost">>},
                      fun(_) -> {set, #roster_item{jid = {<<"alice">>, <<"localhost">>},
                                                   subscription = to}} end),
    [error_cond(?C:iq(A, <<"get">>, Q, [{<<"to">>, <<"bob@localhost">>}]), <<"service-unavailable">>)
     || Q <- queries()].

%% With Bob's presence shared with Alice (from or both), his server answers
%% for the account: identity, features, items; unknown nodes item-not-found.
other_account_with_subscription(_) ->
    A = ?C:login(<<"alice">>, <<"password">>, <<"r">>),
    {ok, _, _, _} = throng_storage:roster_update(
                      <<"bob">>, <<"localhost">>, {<<"alice">>, <<"localhost">>},
                      fun(_) -> {set, #roster_item{jid = {<<"alice">>, <<"localhost">>},
                                                   subscription = from}} end),
    [Info, Items, InfoNode, ItemsNode] =
        [?C:iq(A, <<"get">>, Q, [{<<"to">>, <<"bob@localhost">>}]) || Q <- queries()],
    ?assertEqual([{<<"account">>, <<"registered">>}, {<<"pubsub">>, <<"pep">>}], lists:sort(identities(Info))),
    ?assertEqual(<<"result">>, throng_xml:attr(<<"type">>, Items)),
    error_cond(InfoNode, <<"item-not-found">>),
    error_cond(ItemsNode, <<"item-not-found">>).

%% §8: an account that does not exist: service-unavailable "no matter if the
%% request specifies a node or not".
nonexistent_account(_) ->
    A = ?C:login(<<"alice">>, <<"password">>, <<"r">>),
    [error_cond(?C:iq(A, <<"get">>, Q, [{<<"to">>, <<"nobody@localhost">>}]),
                <<"service-unavailable">>) || Q <- queries()].

%% A query to a full JID is for the client (RFC 6121 §8.5.3.1): it is
%% routed to that resource, and its answer goes back.
full_jid_of_other_user_goes_to_client(_) ->
    B = ?C:login(<<"bob">>, <<"password">>, <<"b">>),
    A = ?C:login(<<"alice">>, <<"password">>, <<"a">>),
    ?C:send(A, #xmlel{name = <<"iq">>, attrs = [{<<"type">>, <<"get">>}, {<<"id">>, <<"d1">>},
                                                {<<"to">>, <<"bob@localhost/b">>}],
                      children = [q(?NS_DISCO_INFO)]}),
    Q = ?C:recv_stanza(B),
    ?assertEqual({<<"alice@localhost/a">>, <<"d1">>},
                 {throng_xml:attr(<<"from">>, Q), throng_xml:attr(<<"id">>, Q)}),
    ?C:send(B, #xmlel{name = <<"iq">>, attrs = [{<<"type">>, <<"result">>}, {<<"id">>, <<"d1">>},
                                                {<<"to">>, <<"alice@localhost/a">>}],
                      children = [q(?NS_DISCO_INFO)]}),
    R = ?C:recv_stanza(A),
    ?assertEqual({<<"result">>, <<"bob@localhost/b">>},
                 {throng_xml:attr(<<"type">>, R), throng_xml:attr(<<"from">>, R)}).
