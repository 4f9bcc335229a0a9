%% @doc XEP-0163 Personal Eventing Protocol (throng_mod_pep, with XEP-0115
%% capabilities, throng_caps) against the real server: publishing (auto
%% create, publish-options, item ids, max_items), notifications to the
%% resources whose capabilities ask for them, last items at login (after the
%% server has learnt and checked a client's capabilities), access models,
%% retract, delete, configure, limits, durability and account removal.
-module(xep0163_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").
-include("throng.hrl").

-compile([export_all, nowarn_export_all]).

-define(C, throng_test_client).
-define(NS_PUBSUB, <<"http://jabber.org/protocol/pubsub">>).
-define(NS_OWNER, <<"http://jabber.org/protocol/pubsub#owner">>).
-define(NS_EVENT, <<"http://jabber.org/protocol/pubsub#event">>).
-define(NS_ERRORS, <<"http://jabber.org/protocol/pubsub#errors">>).
-define(NS_CAPS, <<"http://jabber.org/protocol/caps">>).
-define(NODE, <<"urn:xmpp:tune">>).

all() ->
    [advertised_in_disco, publish_and_read_back, item_id_generated, max_items_one_by_default,
     notification_to_interested_contact, no_notification_without_interest,
     last_item_at_login_after_caps_learnt, caps_cached_no_second_query,
     interest_added_by_a_presence_update,
     wrong_caps_answer_not_trusted, access_presence, access_open, access_whitelist,
     publish_options_create_and_preconditions, retract_notifies, delete_node,
     configure_node, create_node, others_cannot_publish, payload_too_big, survives_restart,
     removed_account_forgotten, node_discovery,
     subscribe_explicitly_as_a_contact, subscribe_refused_by_the_access_model,
     subscribe_for_another_jid_refused, unsubscribe_ends_notifications,
     subscriptions_and_affiliations_retrieved, owner_manages_subscriptions,
     explicit_and_implicit_interest_notified_once, subscriber_losing_access_not_notified,
     delete_ends_subscriptions, removed_subscriber_forgotten].

init_per_testcase(payload_too_big, Config) ->
    start(Config, #{modules => #{pep => #{max_item_bytes => 100}}});
init_per_testcase(_TC, Config) ->
    start(Config, #{}).

start(Config, Overrides) ->
    throng_ct:start(Config, Overrides),
    [throng_ct:register(U, <<"password">>) || U <- [<<"alice">>, <<"bob">>, <<"carol">>]],
    throng_ct:mutual(<<"alice">>, <<"bob">>),
    Config.

end_per_testcase(_TC, _Config) ->
    throng_ct:stop().

%%% Helpers

login(User, Res) -> ?C:login(User, <<"password">>, Res).

iq(C, Type, Payload) -> ?C:iq_skipping(C, Type, Payload, []).
iq(C, Type, Payload, To) -> ?C:iq_skipping(C, Type, Payload, [{<<"to">>, To}]).

type(El) -> throng_xml:attr(<<"type">>, El).

condition(El) ->
    #xmlel{children = [#xmlel{name = Cond} | _]} = throng_xml:subel(El, <<"error">>),
    Cond.

app_condition(El) ->
    [App | _] = [N || #xmlel{name = N} = X <- throng_xml:subels(throng_xml:subel(El, <<"error">>)),
                      throng_xml:ns(X) =:= ?NS_ERRORS],
    App.

el(Name, Attrs, Children) -> #xmlel{name = Name, attrs = Attrs, children = Children}.

tune(Artist) ->
    el(<<"tune">>, [{<<"xmlns">>, <<"http://jabber.org/protocol/tune">>}],
       [el(<<"artist">>, [], [{xmlcdata, Artist}])]).

pubsub(Children) -> el(<<"pubsub">>, [{<<"xmlns">>, ?NS_PUBSUB}], Children).
owner(Children) -> el(<<"pubsub">>, [{<<"xmlns">>, ?NS_OWNER}], Children).

publish_el(Node, Id, Payload) ->
    el(<<"publish">>, [{<<"node">>, Node}],
       [el(<<"item">>, [{<<"id">>, Id} || Id =/= undefined], [Payload])]).

form(Type, Fields) ->
    el(<<"x">>, [{<<"xmlns">>, <<"jabber:x:data">>}, {<<"type">>, <<"submit">>}],
       [el(<<"field">>, [{<<"var">>, <<"FORM_TYPE">>}, {<<"type">>, <<"hidden">>}],
           [el(<<"value">>, [], [{xmlcdata, Type}])])
        | [el(<<"field">>, [{<<"var">>, V}], [el(<<"value">>, [], [{xmlcdata, X}])]) || {V, X} <- Fields]]).

publish(C, Node, Id, Payload) ->
    iq(C, <<"set">>, pubsub([publish_el(Node, Id, Payload)])).

publish(C, Node, Id, Payload, Options) ->
    iq(C, <<"set">>, pubsub([publish_el(Node, Id, Payload),
                             el(<<"publish-options">>, [],
                                [form(<<"http://jabber.org/protocol/pubsub#publish-options">>, Options)])])).

items(C, Owner, Node) ->
    iq(C, <<"get">>, pubsub([el(<<"items">>, [{<<"node">>, Node}], [])]), Owner).

item_ids(R) ->
    Items = throng_xml:subel(throng_xml:subel(R, <<"pubsub">>, ?NS_PUBSUB), <<"items">>),
    [throng_xml:attr(<<"id">>, I) || I <- throng_xml:subels(Items)].

%% A client's disco#info, and the <c/> that names it (XEP-0115 §5).
disco(Features) ->
    el(<<"query">>, [{<<"xmlns">>, ?NS_DISCO_INFO}],
       [el(<<"identity">>, [{<<"category">>, <<"client">>}, {<<"type">>, <<"pc">>},
                            {<<"name">>, <<"test">>}], []) |
        [el(<<"feature">>, [{<<"var">>, F}], []) || F <- lists:usort([?NS_DISCO_INFO | Features])]]).

ver(Features) -> base64:encode(crypto:hash(sha, throng_caps:ver(disco(Features)))).

caps(Features) ->
    el(<<"c">>, [{<<"xmlns">>, ?NS_CAPS}, {<<"hash">>, <<"sha-1">>},
                 {<<"node">>, <<"https://throng.test/client">>}, {<<"ver">>, ver(Features)}], []).

%% Logs in and becomes available advertising Features (Answer: how it
%% answers the server's disco#info: right, wrong). Returns the client and
%% what it got within a moment (presence, events), the query answered.
online(User, Res, Features) -> online(User, Res, Features, right).

online(User, Res, Features, Answer) ->
    C = login(User, Res),
    ?C:send(C, el(<<"presence">>, [], [caps(Features)])),
    {C, settle(C, Features, Answer, [])}.

settle(C, Features, Answer, Acc) ->
    case ?C:recv(C, 400) of
        #xmlel{name = <<"iq">>} = Q ->
            case {type(Q), throng_xml:subel(Q, <<"query">>, ?NS_DISCO_INFO)} of
                {<<"get">>, #xmlel{} = Query} ->
                    Given = case Answer of
                                right -> Features;
                                wrong -> [<<"urn:xmpp:evil+notify">> | Features]
                            end,
                    Reply = (disco(Given))#xmlel{attrs = [{<<"xmlns">>, ?NS_DISCO_INFO},
                                                          {<<"node">>, throng_xml:attr(<<"node">>, Query)}]},
                    ?C:send(C, el(<<"iq">>, [{<<"type">>, <<"result">>}, {<<"id">>, throng_xml:attr(<<"id">>, Q)},
                                             {<<"to">>, throng_xml:attr(<<"from">>, Q)}], [Reply])),
                    settle(C, Features, Answer, [{query, Q} | Acc]);
                _ -> settle(C, Features, Answer, [Q | Acc])
            end;
        #xmlel{} = El -> settle(C, Features, Answer, [El | Acc]);
        _ -> lists:reverse(Acc)
    end.

%% The pubsub events among stanzas: {Node, [ItemIds], [RetractIds]} or {delete, Node}.
events(Els) ->
    [event(E) || #xmlel{name = <<"message">>} = M <- Els,
                 E <- [throng_xml:subel(M, <<"event">>, ?NS_EVENT)], E =/= undefined].

event(E) ->
    case throng_xml:subels(E) of
        [#xmlel{name = <<"items">>} = I] ->
            {throng_xml:attr(<<"node">>, I),
             [throng_xml:attr(<<"id">>, X) || #xmlel{name = <<"item">>} = X <- throng_xml:subels(I)],
             [throng_xml:attr(<<"id">>, X) || #xmlel{name = <<"retract">>} = X <- throng_xml:subels(I)]};
        [#xmlel{name = <<"delete">>} = D] ->
            {delete, throng_xml:attr(<<"node">>, D)}
    end.

collect(C) ->
    case ?C:recv(C, 400) of
        #xmlel{} = El -> [El | collect(C)];
        _ -> []
    end.

notify(Node) -> <<Node/binary, "+notify">>.

%%% Cases

%% The domain's and the account's disco#info have the pubsub/pep identity
%% and the PEP features.
advertised_in_disco(_) ->
    C = login(<<"alice">>, <<"r">>),
    R = iq(C, <<"get">>, el(<<"query">>, [{<<"xmlns">>, ?NS_DISCO_INFO}], []), <<"localhost">>),
    Q = throng_xml:subel(R, <<"query">>),
    ?assert(lists:member({<<"pubsub">>, <<"pep">>},
                         [{throng_xml:attr(<<"category">>, I), throng_xml:attr(<<"type">>, I)}
                          || #xmlel{name = <<"identity">>} = I <- throng_xml:subels(Q)])),
    Features = [throng_xml:attr(<<"var">>, F) || #xmlel{name = <<"feature">>} = F <- throng_xml:subels(Q)],
    [?assert(lists:member(<<?NS_PUBSUB/binary, "#", F/binary>>, Features))
     || F <- [<<"publish">>, <<"publish-options">>, <<"auto-create">>, <<"last-published">>]],
    %% The account itself is the PEP service (§6.1): its bare JID says so.
    RA = iq(C, <<"get">>, el(<<"query">>, [{<<"xmlns">>, ?NS_DISCO_INFO}], []), <<"alice@localhost">>),
    QA = throng_xml:subel(RA, <<"query">>),
    ?assert(lists:member({<<"pubsub">>, <<"pep">>},
                         [{throng_xml:attr(<<"category">>, I), throng_xml:attr(<<"type">>, I)}
                          || #xmlel{name = <<"identity">>} = I <- throng_xml:subels(QA)])),
    ?assert(lists:member(<<?NS_PUBSUB/binary, "#publish-options">>,
                         [throng_xml:attr(<<"var">>, F) || #xmlel{name = <<"feature">>} = F <- throng_xml:subels(QA)])).

%% The owner publishes (the node is created) and reads its item back (XEP-0163 §4, §5).
publish_and_read_back(_) ->
    A = login(<<"alice">>, <<"r">>),
    R = publish(A, ?NODE, <<"t1">>, tune(<<"Yes">>)),
    ?assertEqual(<<"result">>, type(R)),
    ?assertEqual([<<"t1">>], item_ids(items(A, <<"alice@localhost">>, ?NODE))).

%% An item published without an id gets one, returned in the result.
item_id_generated(_) ->
    A = login(<<"alice">>, <<"r">>),
    R = publish(A, ?NODE, undefined, tune(<<"Yes">>)),
    Item = throng_xml:subel(throng_xml:subel(throng_xml:subel(R, <<"pubsub">>), <<"publish">>), <<"item">>),
    Id = throng_xml:attr(<<"id">>, Item),
    ?assert(is_binary(Id) andalso Id =/= <<>>),
    ?assertEqual([Id], item_ids(items(A, <<"alice@localhost">>, ?NODE))).

%% A PEP node keeps one item unless configured otherwise.
max_items_one_by_default(_) ->
    A = login(<<"alice">>, <<"r">>),
    publish(A, ?NODE, <<"t1">>, tune(<<"Yes">>)),
    publish(A, ?NODE, <<"t2">>, tune(<<"Genesis">>)),
    ?assertEqual([<<"t2">>], item_ids(items(A, <<"alice@localhost">>, ?NODE))).

%% A contact whose capabilities include NODE+notify gets the event; its
%% resource without capabilities does not (XEP-0163 §4.3, "filtered notifications").
notification_to_interested_contact(_) ->
    {B, _} = online(<<"bob">>, <<"caps">>, [notify(?NODE)]),
    B2 = login(<<"bob">>, <<"plain">>),
    ?C:send(B2, ?C:presence([])),
    timer:sleep(200),
    ?C:flush(B2),
    A = login(<<"alice">>, <<"r">>),
    publish(A, ?NODE, <<"t1">>, tune(<<"Yes">>)),
    ?assertEqual([{?NODE, [<<"t1">>], []}], events(collect(B))),
    ?assertEqual([], events(collect(B2))).

%% Capabilities without NODE+notify: no event.
no_notification_without_interest(_) ->
    {B, _} = online(<<"bob">>, <<"r">>, [notify(<<"urn:xmpp:other">>)]),
    A = login(<<"alice">>, <<"r">>),
    publish(A, ?NODE, <<"t1">>, tune(<<"Yes">>)),
    ?assertEqual([], events(collect(B))).

%% A resource that logs in after the publication gets the last item, once
%% the server has asked for its (unknown) capabilities and checked the answer.
last_item_at_login_after_caps_learnt(_) ->
    A = login(<<"alice">>, <<"r">>),
    publish(A, ?NODE, <<"t1">>, tune(<<"Yes">>)),
    {_B, Got} = online(<<"bob">>, <<"r">>, [notify(?NODE)]),
    ?assertMatch([_], [Q || {query, Q} <- Got]),
    ?assertEqual([{?NODE, [<<"t1">>], []}], events(Got)).

%% A resource that adds NODE+notify to its capabilities in a later
%% presence gets the last item then (the new ver learnt first), and the
%% notifications from then on (what the interop suite's
%% testNotificationAfterFilterChange does).
interest_added_by_a_presence_update(_) ->
    A = login(<<"alice">>, <<"r">>),
    {B, _} = online(<<"bob">>, <<"r">>, [notify(<<"urn:xmpp:other">>)]),
    publish(A, ?NODE, <<"t1">>, tune(<<"Yes">>)),
    ?assertEqual([], events(collect(B))),
    Features = [notify(<<"urn:xmpp:other">>), notify(?NODE)],
    ?C:send(B, el(<<"presence">>, [], [caps(Features)])),
    Got = settle(B, Features, right, []),
    ?assertMatch([_], [Q || {query, Q} <- Got]),
    ?assertEqual([{?NODE, [<<"t1">>], []}], events(Got)),
    publish(A, ?NODE, <<"t2">>, tune(<<"Genesis">>)),
    ?assertEqual([{?NODE, [<<"t2">>], []}], events(collect(B))),
    %% A status change with the same capabilities sends nothing again.
    ?C:send(B, el(<<"presence">>, [], [el(<<"show">>, [], [{xmlcdata, <<"away">>}]), caps(Features)])),
    ?assertEqual([], events(collect(B))).

%% The second resource with the same capabilities is not asked again: the
%% last item comes at once.
caps_cached_no_second_query(_) ->
    A = login(<<"alice">>, <<"r">>),
    publish(A, ?NODE, <<"t1">>, tune(<<"Yes">>)),
    {_B1, Got1} = online(<<"bob">>, <<"one">>, [notify(?NODE)]),
    ?assertMatch([_], [Q || {query, Q} <- Got1]),
    {_B2, Got2} = online(<<"bob">>, <<"two">>, [notify(?NODE)]),
    ?assertEqual([], [Q || {query, Q} <- Got2]),
    ?assertEqual([{?NODE, [<<"t1">>], []}], events(Got2)).

%% An answer that does not hash to the advertised ver is not believed:
%% nothing is delivered and the next login is asked again.
wrong_caps_answer_not_trusted(_) ->
    A = login(<<"alice">>, <<"r">>),
    publish(A, ?NODE, <<"t1">>, tune(<<"Yes">>)),
    {_B1, Got1} = online(<<"bob">>, <<"one">>, [notify(?NODE)], wrong),
    ?assertEqual([], events(Got1)),
    {_B2, Got2} = online(<<"bob">>, <<"two">>, [notify(?NODE)]),
    ?assertMatch([_], [Q || {query, Q} <- Got2]),
    ?assertEqual([{?NODE, [<<"t1">>], []}], events(Got2)).

%% The default access model is presence: a contact with a subscription
%% reads the items, a stranger gets not-authorized +
%% presence-subscription-required.
access_presence(_) ->
    A = login(<<"alice">>, <<"r">>),
    publish(A, ?NODE, <<"t1">>, tune(<<"Yes">>)),
    B = login(<<"bob">>, <<"r">>),
    ?assertEqual([<<"t1">>], item_ids(items(B, <<"alice@localhost">>, ?NODE))),
    Cc = login(<<"carol">>, <<"r">>),
    R = items(Cc, <<"alice@localhost">>, ?NODE),
    ?assertEqual(<<"not-authorized">>, condition(R)),
    ?assertEqual(<<"presence-subscription-required">>, app_condition(R)).

%% An open node (OMEMO bundles) is readable by anyone.
access_open(_) ->
    A = login(<<"alice">>, <<"r">>),
    publish(A, ?NODE, <<"t1">>, tune(<<"Yes">>), [{<<"pubsub#access_model">>, <<"open">>}]),
    Cc = login(<<"carol">>, <<"r">>),
    ?assertEqual([<<"t1">>], item_ids(items(Cc, <<"alice@localhost">>, ?NODE))).

%% A whitelist node (bookmarks) is the owner's alone: contacts get nothing,
%% not even events.
access_whitelist(_) ->
    {B, _} = online(<<"bob">>, <<"r">>, [notify(?NODE)]),
    A = login(<<"alice">>, <<"r">>),
    publish(A, ?NODE, <<"t1">>, tune(<<"Yes">>), [{<<"pubsub#access_model">>, <<"whitelist">>}]),
    ?assertEqual([], events(collect(B))),
    ?assertEqual(<<"not-authorized">>, condition(items(B, <<"alice@localhost">>, ?NODE))),
    ?assertEqual([<<"t1">>], item_ids(items(A, <<"alice@localhost">>, ?NODE))).

%% publish-options configure a new node and are preconditions on an
%% existing one (XEP-0060 §7.1.5): a mismatch is conflict +
%% precondition-not-met and publishes nothing.
publish_options_create_and_preconditions(_) ->
    A = login(<<"alice">>, <<"r">>),
    Opts = [{<<"pubsub#access_model">>, <<"open">>}, {<<"pubsub#max_items">>, <<"max">>}],
    ?assertEqual(<<"result">>, type(publish(A, ?NODE, <<"t1">>, tune(<<"a">>), Opts))),
    ?assertEqual(<<"result">>, type(publish(A, ?NODE, <<"t2">>, tune(<<"b">>), Opts))),
    ?assertEqual([<<"t1">>, <<"t2">>], item_ids(items(A, <<"alice@localhost">>, ?NODE))),
    R = publish(A, ?NODE, <<"t3">>, tune(<<"c">>), [{<<"pubsub#access_model">>, <<"presence">>}]),
    ?assertEqual(<<"conflict">>, condition(R)),
    ?assertEqual(<<"precondition-not-met">>, app_condition(R)),
    ?assertEqual([<<"t1">>, <<"t2">>], item_ids(items(A, <<"alice@localhost">>, ?NODE))).

%% A retraction is notified to the interested contacts (notify_retract).
retract_notifies(_) ->
    {B, _} = online(<<"bob">>, <<"r">>, [notify(?NODE)]),
    A = login(<<"alice">>, <<"r">>),
    publish(A, ?NODE, <<"t1">>, tune(<<"Yes">>)),
    _ = collect(B),
    R = iq(A, <<"set">>, pubsub([el(<<"retract">>, [{<<"node">>, ?NODE}],
                                    [el(<<"item">>, [{<<"id">>, <<"t1">>}], [])])])),
    ?assertEqual(<<"result">>, type(R)),
    ?assertEqual([{?NODE, [], [<<"t1">>]}], events(collect(B))),
    ?assertEqual([], item_ids(items(A, <<"alice@localhost">>, ?NODE))).

%% Deleting a node notifies the contacts; the node is gone.
delete_node(_) ->
    {B, _} = online(<<"bob">>, <<"r">>, [notify(?NODE)]),
    A = login(<<"alice">>, <<"r">>),
    publish(A, ?NODE, <<"t1">>, tune(<<"Yes">>)),
    _ = collect(B),
    R = iq(A, <<"set">>, owner([el(<<"delete">>, [{<<"node">>, ?NODE}], [])])),
    ?assertEqual(<<"result">>, type(R)),
    ?assertEqual([{delete, ?NODE}], events(collect(B))),
    ?assertEqual(<<"item-not-found">>, condition(items(A, <<"alice@localhost">>, ?NODE))).

%% The owner reads and changes the node's configuration (pubsub#owner).
configure_node(_) ->
    A = login(<<"alice">>, <<"r">>),
    publish(A, ?NODE, <<"t1">>, tune(<<"Yes">>)),
    G = iq(A, <<"get">>, owner([el(<<"configure">>, [{<<"node">>, ?NODE}], [])])),
    ?assertEqual(<<"result">>, type(G)),
    S = iq(A, <<"set">>, owner([el(<<"configure">>, [{<<"node">>, ?NODE}],
                                   [form(<<"http://jabber.org/protocol/pubsub#node_config">>,
                                         [{<<"pubsub#max_items">>, <<"5">>}])])])),
    ?assertEqual(<<"result">>, type(S)),
    publish(A, ?NODE, <<"t2">>, tune(<<"b">>)),
    ?assertEqual([<<"t1">>, <<"t2">>], item_ids(items(A, <<"alice@localhost">>, ?NODE))),
    B = login(<<"bob">>, <<"r">>),
    ?assertEqual(<<"forbidden">>,
                 condition(iq(B, <<"get">>, owner([el(<<"configure">>, [{<<"node">>, ?NODE}], [])]),
                              <<"alice@localhost">>))).

%% A node created explicitly takes the configuration sent with it
%% (XEP-0060 §8.1.3, what OpenPGP for XMPP does); a second create is a conflict.
create_node(_) ->
    A = login(<<"alice">>, <<"r">>),
    Configure = el(<<"configure">>, [], [form(<<"http://jabber.org/protocol/pubsub#node_config">>,
                                              [{<<"pubsub#access_model">>, <<"open">>}])]),
    R = iq(A, <<"set">>, pubsub([el(<<"create">>, [{<<"node">>, ?NODE}], []), Configure])),
    ?assertEqual(<<"result">>, type(R)),
    ?assertEqual([], item_ids(items(A, <<"alice@localhost">>, ?NODE))),
    publish(A, ?NODE, <<"t1">>, tune(<<"Yes">>)),
    Cc = login(<<"carol">>, <<"r">>),
    ?assertEqual([<<"t1">>], item_ids(items(Cc, <<"alice@localhost">>, ?NODE))),
    R2 = iq(A, <<"set">>, pubsub([el(<<"create">>, [{<<"node">>, ?NODE}], [])])),
    ?assertEqual(<<"conflict">>, condition(R2)).

%% Only the owner publishes to its account.
others_cannot_publish(_) ->
    B = login(<<"bob">>, <<"r">>),
    R = iq(B, <<"set">>, pubsub([publish_el(?NODE, <<"x">>, tune(<<"no">>))]), <<"alice@localhost">>),
    ?assertEqual(<<"forbidden">>, condition(R)).

%% An item beyond max_item_bytes: not-acceptable + payload-too-big.
payload_too_big(_) ->
    A = login(<<"alice">>, <<"r">>),
    R = publish(A, ?NODE, <<"t1">>, tune(binary:copy(<<"x">>, 200))),
    ?assertEqual(<<"not-acceptable">>, condition(R)),
    ?assertEqual(<<"payload-too-big">>, app_condition(R)).

%% Nodes and items are durable.
survives_restart(_) ->
    A = login(<<"alice">>, <<"r">>),
    publish(A, ?NODE, <<"t1">>, tune(<<"Yes">>)),
    ?C:close(A),
    throng_ct:restart(),
    A2 = login(<<"alice">>, <<"r">>),
    ?assertEqual([<<"t1">>], item_ids(items(A2, <<"alice@localhost">>, ?NODE))).

%% Removing the account removes its nodes.
removed_account_forgotten(_) ->
    A = login(<<"alice">>, <<"r">>),
    publish(A, ?NODE, <<"t1">>, tune(<<"Yes">>)),
    ?C:close(A),
    ok = throng_auth:unregister(<<"alice">>, <<"localhost">>),
    ?assertEqual(not_found, throng_storage:kv_get(pep, {<<"alice">>, <<"localhost">>, ?NODE})),
    ?assertEqual(not_found, throng_storage:kv_get(pep_nodes, {<<"alice">>, <<"localhost">>})).

%% XEP-0060 §5 on the account: its nodes (disco#items), a node's identity,
%% feature and meta-data (disco#info with the node), its items by id; a
%% whitelist node is hidden from a contact; a node that does not exist is
%% item-not-found.
node_discovery(_) ->
    A = login(<<"alice">>, <<"r">>),
    <<"result">> = type(publish(A, ?NODE, <<"t1">>, tune(<<"Yes">>))),
    <<"result">> = type(publish(A, <<"urn:xmpp:bookmarks:1">>, <<"b1">>, tune(<<"No">>),
                                [{<<"pubsub#access_model">>, <<"whitelist">>}])),
    B = login(<<"bob">>, <<"r">>),
    Q = fun(C, NS, Node) ->
                iq(C, <<"get">>, el(<<"query">>, [{<<"xmlns">>, NS}] ++ [{<<"node">>, Node} || Node =/= undefined],
                                    []), <<"alice@localhost">>)
        end,
    Nodes = fun(R) -> lists:sort([throng_xml:attr(<<"node">>, I)
                                  || I <- throng_xml:subels(throng_xml:subel(R, <<"query">>))]) end,
    ?assertEqual(lists:sort([?NODE, <<"urn:xmpp:bookmarks:1">>]), Nodes(Q(A, ?NS_DISCO_ITEMS, undefined))),
    ?assertEqual([?NODE], Nodes(Q(B, ?NS_DISCO_ITEMS, undefined))),
    Info = Q(B, ?NS_DISCO_INFO, ?NODE),
    ?assertEqual(<<"result">>, type(Info)),
    Query = throng_xml:subel(Info, <<"query">>),
    ?assertEqual(?NODE, throng_xml:attr(<<"node">>, Query)),
    Id = throng_xml:subel(Query, <<"identity">>),
    ?assertEqual({<<"pubsub">>, <<"leaf">>}, {throng_xml:attr(<<"category">>, Id), throng_xml:attr(<<"type">>, Id)}),
    X = throng_xml:subel(Query, <<"x">>, <<"jabber:x:data">>),
    Fields = maps:from_list([{throng_xml:attr(<<"var">>, F), [throng_xml:cdata(V) || V <- throng_xml:subels(F)]}
                             || F <- throng_xml:subels(X), F#xmlel.name =:= <<"field">>]),
    ?assertEqual([<<"http://jabber.org/protocol/pubsub#meta-data">>], maps:get(<<"FORM_TYPE">>, Fields)),
    ?assertEqual([<<"alice@localhost">>], maps:get(<<"pubsub#owner">>, Fields)),
    Items = Q(B, ?NS_DISCO_ITEMS, ?NODE),
    ?assertEqual([<<"t1">>], [throng_xml:attr(<<"name">>, I)
                              || I <- throng_xml:subels(throng_xml:subel(Items, <<"query">>))]),
    ?assertEqual(<<"item-not-found">>, condition(Q(B, ?NS_DISCO_INFO, <<"urn:xmpp:bookmarks:1">>))),
    ?assertEqual(<<"result">>, type(Q(A, ?NS_DISCO_INFO, <<"urn:xmpp:bookmarks:1">>))),
    ?assertEqual(<<"item-not-found">>, condition(Q(A, ?NS_DISCO_INFO, <<"no-such-node">>))),
    %% Carol shares nothing with Alice: the account answers her nothing.
    Cc = login(<<"carol">>, <<"r">>),
    ?assertEqual(<<"service-unavailable">>, condition(Q(Cc, ?NS_DISCO_INFO, ?NODE))).

%%% Explicit subscriptions (XEP-0060 §5.6, §5.7, §6.1, §6.2, §8.8)

%% Logs in and becomes available without capabilities (what arrives at
%% once is dropped).
available(User, Res) ->
    C = login(User, Res),
    ?C:send(C, el(<<"presence">>, [], [])),
    _ = collect(C),
    C.

subscribe(C, Owner, Node, Jid) ->
    iq(C, <<"set">>, pubsub([el(<<"subscribe">>, [{<<"node">>, Node}, {<<"jid">>, Jid}], [])]), Owner).

unsubscribe(C, Owner, Node, Jid) ->
    iq(C, <<"set">>, pubsub([el(<<"unsubscribe">>, [{<<"node">>, Node}, {<<"jid">>, Jid}], [])]), Owner).

%% The <subscription/> elements of a result: [{Node, Jid, Subscription}].
subscriptions_of(R, NS) ->
    P = throng_xml:subel(R, <<"pubsub">>, NS),
    [{throng_xml:attr(<<"node">>, X), throng_xml:attr(<<"jid">>, X), throng_xml:attr(<<"subscription">>, X)}
     || Parent <- throng_xml:subels(P), X <- [Parent | throng_xml:subels(Parent)],
        X#xmlel.name =:= <<"subscription">>].

%% A contact whose client does not advertise +notify subscribes to a node
%% (§6.1): it is subscribed, gets the last item at once and every later
%% one.
subscribe_explicitly_as_a_contact(_) ->
    A = login(<<"alice">>, <<"r">>),
    <<"result">> = type(publish(A, ?NODE, <<"t1">>, tune(<<"a">>))),
    B = available(<<"bob">>, <<"r">>),
    R = subscribe(B, <<"alice@localhost">>, ?NODE, <<"bob@localhost">>),
    ?assertEqual(<<"result">>, type(R)),
    ?assertEqual([{?NODE, <<"bob@localhost">>, <<"subscribed">>}], subscriptions_of(R, ?NS_PUBSUB)),
    ?assertEqual([{?NODE, [<<"t1">>], []}], events(collect(B))),
    <<"result">> = type(publish(A, ?NODE, <<"t2">>, tune(<<"b">>))),
    ?assertEqual([{?NODE, [<<"t2">>], []}], events(collect(B))).

%% Whom the access model does not allow cannot subscribe: a stranger to a
%% presence node (not-authorized + presence-subscription-required), a
%% contact to a whitelist node (not-allowed + closed-node); anyone may
%% subscribe to an open node and is notified; a node that does not exist
%% is item-not-found.
subscribe_refused_by_the_access_model(_) ->
    A = login(<<"alice">>, <<"r">>),
    <<"result">> = type(publish(A, ?NODE, <<"t1">>, tune(<<"a">>))),
    <<"result">> = type(publish(A, <<"wl">>, <<"w1">>, tune(<<"a">>),
                                [{<<"pubsub#access_model">>, <<"whitelist">>}])),
    <<"result">> = type(publish(A, <<"open">>, <<"o1">>, tune(<<"a">>),
                                [{<<"pubsub#access_model">>, <<"open">>}])),
    Cc = available(<<"carol">>, <<"r">>),
    R1 = subscribe(Cc, <<"alice@localhost">>, ?NODE, <<"carol@localhost">>),
    ?assertEqual({<<"not-authorized">>, <<"presence-subscription-required">>}, {condition(R1), app_condition(R1)}),
    B = available(<<"bob">>, <<"r">>),
    R2 = subscribe(B, <<"alice@localhost">>, <<"wl">>, <<"bob@localhost">>),
    ?assertEqual({<<"not-allowed">>, <<"closed-node">>}, {condition(R2), app_condition(R2)}),
    ?assertEqual(<<"item-not-found">>,
                 condition(subscribe(B, <<"alice@localhost">>, <<"nothing">>, <<"bob@localhost">>))),
    ?assertEqual(<<"result">>, type(subscribe(Cc, <<"alice@localhost">>, <<"open">>, <<"carol@localhost/r">>))),
    ?assertEqual([{<<"open">>, [<<"o1">>], []}], events(collect(Cc))),
    <<"result">> = type(publish(A, <<"open">>, <<"o2">>, tune(<<"b">>))),
    <<"result">> = type(publish(A, ?NODE, <<"t2">>, tune(<<"b">>))),
    ?assertEqual([{<<"open">>, [<<"o2">>], []}], events(collect(Cc))),
    ?assertEqual([], events(collect(B))).

%% A subscription is for the asker's own JID (§6.1.3.1): another's is
%% bad-request + invalid-jid, and subscribes nobody.
subscribe_for_another_jid_refused(_) ->
    A = login(<<"alice">>, <<"r">>),
    <<"result">> = type(publish(A, ?NODE, <<"t1">>, tune(<<"a">>),
                                [{<<"pubsub#access_model">>, <<"open">>}])),
    B = available(<<"bob">>, <<"r">>),
    R = subscribe(B, <<"alice@localhost">>, ?NODE, <<"carol@localhost">>),
    ?assertEqual({<<"bad-request">>, <<"invalid-jid">>}, {condition(R), app_condition(R)}),
    ?assertEqual(<<"bad-request">>, condition(iq(B, <<"set">>, pubsub([el(<<"subscribe">>, [{<<"node">>, ?NODE}], [])]),
                                                 <<"alice@localhost">>))),
    ?assertEqual([], throng_pep_subs:list(<<"alice">>, <<"localhost">>, ?NODE)).

%% §6.2: after unsubscribing nothing more arrives; a second unsubscribe is
%% unexpected-request + not-subscribed.
unsubscribe_ends_notifications(_) ->
    A = login(<<"alice">>, <<"r">>),
    <<"result">> = type(publish(A, ?NODE, <<"t1">>, tune(<<"a">>))),
    B = available(<<"bob">>, <<"r">>),
    <<"result">> = type(subscribe(B, <<"alice@localhost">>, ?NODE, <<"bob@localhost">>)),
    _ = collect(B),
    ?assertEqual(<<"result">>, type(unsubscribe(B, <<"alice@localhost">>, ?NODE, <<"bob@localhost">>))),
    <<"result">> = type(publish(A, ?NODE, <<"t2">>, tune(<<"b">>))),
    ?assertEqual([], events(collect(B))),
    R = unsubscribe(B, <<"alice@localhost">>, ?NODE, <<"bob@localhost">>),
    ?assertEqual({<<"unexpected-request">>, <<"not-subscribed">>}, {condition(R), app_condition(R)}).

%% §5.6 and §5.7: a subscriber lists its subscriptions on the account
%% (durable across a restart); the owner lists its affiliations (owner of
%% every node), and another account has none.
subscriptions_and_affiliations_retrieved(_) ->
    A = login(<<"alice">>, <<"r">>),
    <<"result">> = type(publish(A, ?NODE, <<"t1">>, tune(<<"a">>))),
    <<"result">> = type(publish(A, <<"mood">>, <<"m1">>, tune(<<"a">>))),
    B = available(<<"bob">>, <<"r">>),
    <<"result">> = type(subscribe(B, <<"alice@localhost">>, ?NODE, <<"bob@localhost">>)),
    ?C:close(A),
    ?C:close(B),
    throng_ct:restart(),
    B2 = available(<<"bob">>, <<"r">>),
    Subs = iq(B2, <<"get">>, pubsub([el(<<"subscriptions">>, [], [])]), <<"alice@localhost">>),
    ?assertEqual([{?NODE, <<"bob@localhost">>, <<"subscribed">>}], subscriptions_of(Subs, ?NS_PUBSUB)),
    A2 = login(<<"alice">>, <<"r">>),
    Affs = iq(A2, <<"get">>, pubsub([el(<<"affiliations">>, [], [])])),
    ?assertEqual(lists:sort([{<<"mood">>, <<"owner">>}, {?NODE, <<"owner">>}]),
                 lists:sort([{throng_xml:attr(<<"node">>, X), throng_xml:attr(<<"affiliation">>, X)}
                             || X <- throng_xml:subels(throng_xml:subel(throng_xml:subel(Affs, <<"pubsub">>),
                                                                        <<"affiliations">>))])),
    Other = iq(B2, <<"get">>, pubsub([el(<<"affiliations">>, [], [])]), <<"alice@localhost">>),
    ?assertEqual([], throng_xml:subels(throng_xml:subel(throng_xml:subel(Other, <<"pubsub">>),
                                                        <<"affiliations">>))).

%% §8.8: the owner lists a node's subscribers, adds one and removes one;
%% a contact may not.
owner_manages_subscriptions(_) ->
    A = login(<<"alice">>, <<"r">>),
    <<"result">> = type(publish(A, ?NODE, <<"t1">>, tune(<<"a">>))),
    B = available(<<"bob">>, <<"r">>),
    <<"result">> = type(subscribe(B, <<"alice@localhost">>, ?NODE, <<"bob@localhost">>)),
    Get = fun() -> subscriptions_of(iq(A, <<"get">>, owner([el(<<"subscriptions">>, [{<<"node">>, ?NODE}], [])])),
                                    ?NS_OWNER) end,
    ?assertEqual([{undefined, <<"bob@localhost">>, <<"subscribed">>}], Get()),
    Set = iq(A, <<"set">>, owner([el(<<"subscriptions">>, [{<<"node">>, ?NODE}],
                                     [el(<<"subscription">>, [{<<"jid">>, <<"bob@localhost">>},
                                                              {<<"subscription">>, <<"none">>}], []),
                                      el(<<"subscription">>, [{<<"jid">>, <<"carol@localhost">>},
                                                              {<<"subscription">>, <<"subscribed">>}], [])])])),
    ?assertEqual(<<"result">>, type(Set)),
    ?assertEqual([{undefined, <<"carol@localhost">>, <<"subscribed">>}], Get()),
    ?assertEqual(<<"forbidden">>,
                 condition(iq(B, <<"get">>, owner([el(<<"subscriptions">>, [{<<"node">>, ?NODE}], [])]),
                              <<"alice@localhost">>))).

%% A contact interested through its capabilities and subscribed as well
%% gets each event once.
explicit_and_implicit_interest_notified_once(_) ->
    {B, _} = online(<<"bob">>, <<"r">>, [notify(?NODE)]),
    A = login(<<"alice">>, <<"r">>),
    <<"result">> = type(publish(A, ?NODE, <<"t1">>, tune(<<"a">>))),
    <<"result">> = type(subscribe(B, <<"alice@localhost">>, ?NODE, <<"bob@localhost">>)),
    _ = collect(B),
    <<"result">> = type(publish(A, ?NODE, <<"t2">>, tune(<<"b">>))),
    ?assertEqual([{?NODE, [<<"t2">>], []}], events(collect(B))).

%% A subscriber the node no longer allows (open turned whitelist) gets no
%% more events.
subscriber_losing_access_not_notified(_) ->
    A = login(<<"alice">>, <<"r">>),
    <<"result">> = type(publish(A, ?NODE, <<"t1">>, tune(<<"a">>), [{<<"pubsub#access_model">>, <<"open">>}])),
    Cc = available(<<"carol">>, <<"r">>),
    <<"result">> = type(subscribe(Cc, <<"alice@localhost">>, ?NODE, <<"carol@localhost">>)),
    _ = collect(Cc),
    <<"result">> = type(iq(A, <<"set">>, owner([el(<<"configure">>, [{<<"node">>, ?NODE}],
                                                  [form(<<"http://jabber.org/protocol/pubsub#node_config">>,
                                                        [{<<"pubsub#access_model">>, <<"whitelist">>}])])]))),
    <<"result">> = type(publish(A, ?NODE, <<"t2">>, tune(<<"b">>))),
    ?assertEqual([], events(collect(Cc))).

%% Deleting a node notifies its subscribers and ends their subscriptions: a
%% node of the same name made later has none.
delete_ends_subscriptions(_) ->
    A = login(<<"alice">>, <<"r">>),
    <<"result">> = type(publish(A, ?NODE, <<"t1">>, tune(<<"a">>), [{<<"pubsub#access_model">>, <<"open">>}])),
    Cc = available(<<"carol">>, <<"r">>),
    <<"result">> = type(subscribe(Cc, <<"alice@localhost">>, ?NODE, <<"carol@localhost">>)),
    _ = collect(Cc),
    <<"result">> = type(iq(A, <<"set">>, owner([el(<<"delete">>, [{<<"node">>, ?NODE}], [])]))),
    ?assertEqual([{delete, ?NODE}], events(collect(Cc))),
    <<"result">> = type(publish(A, ?NODE, <<"t2">>, tune(<<"b">>), [{<<"pubsub#access_model">>, <<"open">>}])),
    ?assertEqual([], events(collect(Cc))),
    ?assertEqual(not_found, throng_storage:kv_get(pep_subs, {<<"alice">>, <<"localhost">>, ?NODE})).

%% A removed account's subscriptions end: an account made later under its
%% name inherits none.
removed_subscriber_forgotten(_) ->
    A = login(<<"alice">>, <<"r">>),
    <<"result">> = type(publish(A, ?NODE, <<"t1">>, tune(<<"a">>), [{<<"pubsub#access_model">>, <<"open">>}])),
    Cc = available(<<"carol">>, <<"r">>),
    <<"result">> = type(subscribe(Cc, <<"alice@localhost">>, ?NODE, <<"carol@localhost">>)),
    ?C:close(Cc),
    ok = throng_auth:unregister(<<"carol">>, <<"localhost">>),
    ?assertEqual([], throng_pep_subs:list(<<"alice">>, <<"localhost">>, ?NODE)),
    ?assertEqual(not_found, throng_storage:kv_get(pep_subscribed, {<<"carol">>, <<"localhost">>})).
