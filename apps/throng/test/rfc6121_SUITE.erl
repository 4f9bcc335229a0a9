%% @doc RFC 6121 (XMPP IM) against the real server: rosters and roster
%% versioning, the subscription state machine with its pushes, presence
%% broadcast and probes, directed presence, message routing (§8.5), and
%% offline storage with XEP-0203 delay stamps.
-module(rfc6121_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").
-include("throng.hrl").

-compile([export_all, nowarn_export_all]).

-define(C, throng_test_client).

all() ->
    [roster_get_empty, roster_set_pushes_to_interested_resources, roster_versioning,
     roster_remove, roster_set_errors,
     subscribe_approve_both_ways, subscribe_while_contact_offline, pre_approval,
     subscribe_when_already_subscribed, subscribe_to_nonexistent_user,
     unsubscribe_stops_presence, unsubscribed_cancels_subscription, deny_request,
     roster_remove_cancels_subscriptions,
     initial_presence_broadcast_and_probe, presence_update_broadcast,
     presence_reflected_to_sender,
     unavailable_on_clean_close, unavailable_on_abrupt_disconnect,
     own_resources_see_each_other, directed_presence_and_unavailable,
     no_presence_without_subscription,
     bare_message_highest_priority, bare_message_equal_priority_all,
     negative_priority_gets_no_bare_messages, full_jid_fallback_to_bare,
     message_to_nonexistent_user, groupchat_to_user_is_error, headline_to_offline_dropped,
     message_without_to_goes_to_own_bare, iq_to_unknown_full_jid,
     offline_storage_with_delay, offline_not_before_initial_presence, offline_limit,
     presence_to_bare_jid_keeps_to, stored_subscription_request_keeps_to,
     error_message_to_bare_jid_ignored, error_message_to_unavailable_full_jid_ignored,
     error_message_to_offline_user_ignored, normal_message_to_unavailable_full_jid_is_error,
     headline_to_unavailable_full_jid_dropped, groupchat_to_unavailable_full_jid_is_error,
     roster_get_of_other_user_forbidden, roster_set_of_other_user_forbidden,
     stored_subscription_request_is_complete, stored_request_forgotten_when_answered,
     stored_request_forgotten_with_account, stored_request_size_is_bounded,
     directed_presence_is_bounded, directed_presence_state_returns_to_empty,
     roster_item_count_is_bounded, roster_item_size_is_bounded].

init_per_testcase(TC, Config) ->
    Overrides = case TC of
                    offline_limit -> #{modules => #{offline => #{max_messages => 2}}};
                    roster_item_count_is_bounded ->
                        #{limits => #{roster_max_items => 2}};
                    roster_item_size_is_bounded ->
                        #{limits => #{roster_max_name_bytes => 16, roster_max_groups => 2,
                                      roster_max_item_bytes => 40}};
                    directed_presence_is_bounded ->
                        #{limits => #{directed_presence_max => 2}};
                    stored_request_size_is_bounded ->
                        #{limits => #{subscription_request_max_bytes => 512}};
                    _ -> #{}
                end,
    throng_ct:start(Config, Overrides),
    [throng_ct:register(U, <<"password">>)
     || U <- [<<"alice">>, <<"bob">>, <<"carol">>]],
    Config.

end_per_testcase(_TC, _Config) ->
    throng_ct:stop().

%%% Helpers

login(User, Resource) ->
    ?C:login(User, <<"password">>, Resource).

%% Logs in and sends initial presence; skips what arrives in return.
online(User, Resource) ->
    online(User, Resource, []).

online(User, Resource, PresenceChildren) ->
    C = login(User, Resource),
    ?C:send(C, #xmlel{name = <<"presence">>, children = PresenceChildren}),
    ?C:flush(C),
    C.

prio(N) ->
    [#xmlel{name = <<"priority">>, children = [{xmlcdata, integer_to_binary(N)}]}].

%% A mutual subscription set directly in storage.
mutual(A, B) ->
    throng_ct:mutual(A, B).

%% A roster get; presence arriving meanwhile is skipped.
roster_get(C) ->
    Id = integer_to_binary(erlang:unique_integer([positive])),
    ?C:send(C, #xmlel{name = <<"iq">>, attrs = [{<<"type">>, <<"get">>}, {<<"id">>, Id}],
                      children = [#xmlel{name = <<"query">>, attrs = [{<<"xmlns">>, ?NS_ROSTER}]}]}),
    R = wait(C, fun(E) -> throng_xml:attr(<<"id">>, E) =:= Id end),
    <<"result">> = throng_xml:attr(<<"type">>, R),
    R.

items(RosterResult) ->
    [{throng_xml:attr(<<"jid">>, I), throng_xml:attr(<<"subscription">>, I),
      throng_xml:attr(<<"ask">>, I)}
     || I <- throng_xml:subels(throng_xml:subel(RosterResult, <<"query">>))].

set_item(C, JID, Name, Groups) ->
    Item = #xmlel{name = <<"item">>, attrs = [{<<"jid">>, JID}, {<<"name">>, Name}],
                  children = [#xmlel{name = <<"group">>, children = [{xmlcdata, G}]} || G <- Groups]},
    ?C:send(C, #xmlel{name = <<"iq">>, attrs = [{<<"type">>, <<"set">>}, {<<"id">>, <<"set1">>}],
                      children = [#xmlel{name = <<"query">>, attrs = [{<<"xmlns">>, ?NS_ROSTER}],
                                         children = [Item]}]}).

%% Receives stanzas until one matches; returns it (others are skipped).
wait(C, Pred) ->
    case ?C:recv(C) of
        #xmlel{} = El ->
            case Pred(El) of
                true -> El;
                false -> wait(C, Pred)
            end;
        Other -> error({waited_for_stanza, Other})
    end.

%% Receives stanzas until each predicate has matched one (in any order);
%% returns the matches in the order of the predicates. Others are skipped.
expect_all(C, Preds) ->
    expect_all(C, Preds, #{}).

expect_all(_C, Preds, Found) when map_size(Found) =:= length(Preds) ->
    [maps:get(I, Found) || I <- lists:seq(1, length(Preds))];
expect_all(C, Preds, Found) ->
    El = case ?C:recv(C) of
             #xmlel{} = E -> E;
             Other -> error({waited_for_stanzas, Other, maps:keys(Found)})
         end,
    Match = [I || {I, P} <- lists:zip(lists:seq(1, length(Preds)), Preds),
                  not maps:is_key(I, Found), P(El)],
    case Match of
        [I | _] -> expect_all(C, Preds, Found#{I => El});
        [] -> expect_all(C, Preds, Found)
    end.

is_push(El) ->
    El#xmlel.name =:= <<"iq">> andalso throng_xml:attr(<<"type">>, El) =:= <<"set">>
        andalso throng_xml:subel(El, <<"query">>, ?NS_ROSTER) =/= undefined.

push_item(El) ->
    [I] = throng_xml:subels(throng_xml:subel(El, <<"query">>)),
    {throng_xml:attr(<<"jid">>, I), throng_xml:attr(<<"subscription">>, I),
     throng_xml:attr(<<"ask">>, I), throng_xml:attr(<<"approved">>, I)}.

is_presence(Type) ->
    fun(El) -> El#xmlel.name =:= <<"presence">> andalso
                   throng_xml:attr(<<"type">>, El) =:= Type end.

is_presence(Type, From) ->
    fun(El) -> (is_presence(Type))(El) andalso throng_xml:attr(<<"from">>, El) =:= From end.

item_of(User, Contact) ->
    throng_storage:roster_get_item(User, <<"localhost">>, {Contact, <<"localhost">>}).

%%% Rosters

roster_get_empty(_) ->
    A = login(<<"alice">>, <<"r">>),
    R = roster_get(A),
    Q = throng_xml:subel(R, <<"query">>),
    ?assertEqual([], throng_xml:subels(Q)),
    ?assertNotEqual(undefined, throng_xml:attr(<<"ver">>, Q)).

%% A roster set is pushed to every resource that requested the roster, and
%% only to those (RFC 6121 §2.1.6).
roster_set_pushes_to_interested_resources(_) ->
    A1 = login(<<"alice">>, <<"one">>),
    A2 = login(<<"alice">>, <<"two">>),
    A3 = login(<<"alice">>, <<"three">>),
    _ = roster_get(A1),
    _ = roster_get(A2),
    set_item(A1, <<"bob@localhost">>, <<"Bob">>, [<<"Friends">>]),
    P1 = wait(A1, fun is_push/1),
    ?assertEqual({<<"bob@localhost">>, <<"none">>, undefined, undefined}, push_item(P1)),
    #xmlel{} = wait(A1, fun(E) -> throng_xml:attr(<<"id">>, E) =:= <<"set1">> end),
    P2 = wait(A2, fun is_push/1),
    ?assertEqual(push_item(P1), push_item(P2)),
    ?C:expect_nothing(A3, 300),
    [{<<"bob@localhost">>, <<"none">>, undefined}] = items(roster_get(A3)).

%% RFC 6121 §2.6: a get with the current version returns an empty result.
roster_versioning(_) ->
    A = login(<<"alice">>, <<"r">>),
    Ver = throng_xml:attr(<<"ver">>, throng_xml:subel(roster_get(A), <<"query">>)),
    Same = ?C:iq(A, <<"get">>, #xmlel{name = <<"query">>,
                                       attrs = [{<<"xmlns">>, ?NS_ROSTER}, {<<"ver">>, Ver}]}),
    ?assertEqual([], throng_xml:subels(Same)),
    set_item(A, <<"bob@localhost">>, <<"B">>, []),
    P = wait(A, fun is_push/1),
    NewVer = throng_xml:attr(<<"ver">>, throng_xml:subel(P, <<"query">>)),
    ?assertNotEqual(Ver, NewVer),
    ?C:flush(A),
    Full = ?C:iq(A, <<"get">>, #xmlel{name = <<"query">>,
                                       attrs = [{<<"xmlns">>, ?NS_ROSTER}, {<<"ver">>, Ver}]}),
    ?assertEqual(NewVer, throng_xml:attr(<<"ver">>, throng_xml:subel(Full, <<"query">>))),
    ?assertEqual(1, length(items(Full))).

roster_remove(_) ->
    A = login(<<"alice">>, <<"r">>),
    _ = roster_get(A),
    set_item(A, <<"bob@localhost">>, <<"B">>, []),
    _ = wait(A, fun is_push/1),
    ?C:flush(A),
    Remove = #xmlel{name = <<"query">>, attrs = [{<<"xmlns">>, ?NS_ROSTER}],
                    children = [#xmlel{name = <<"item">>,
                                       attrs = [{<<"jid">>, <<"bob@localhost">>},
                                                {<<"subscription">>, <<"remove">>}]}]},
    ?C:send(A, #xmlel{name = <<"iq">>, attrs = [{<<"type">>, <<"set">>}, {<<"id">>, <<"rm">>}],
                      children = [Remove]}),
    P = wait(A, fun is_push/1),
    ?assertMatch({<<"bob@localhost">>, <<"remove">>, _, _}, push_item(P)),
    ?C:flush(A),
    ?assertEqual([], items(roster_get(A))),
    R = ?C:iq(A, <<"set">>, Remove),
    ?assertNotEqual(undefined, throng_xml:subel(throng_xml:subel(R, <<"error">>), <<"item-not-found">>)).

roster_set_errors(_) ->
    A = login(<<"alice">>, <<"r">>),
    Two = #xmlel{name = <<"query">>, attrs = [{<<"xmlns">>, ?NS_ROSTER}],
                 children = [#xmlel{name = <<"item">>, attrs = [{<<"jid">>, <<"a@localhost">>}]},
                             #xmlel{name = <<"item">>, attrs = [{<<"jid">>, <<"b@localhost">>}]}]},
    error_cond(?C:iq(A, <<"set">>, Two), <<"bad-request">>),
    Dup = #xmlel{name = <<"query">>, attrs = [{<<"xmlns">>, ?NS_ROSTER}],
                 children = [#xmlel{name = <<"item">>, attrs = [{<<"jid">>, <<"a@localhost">>}],
                                    children = [#xmlel{name = <<"group">>, children = [{xmlcdata, <<"G">>}]},
                                                #xmlel{name = <<"group">>, children = [{xmlcdata, <<"G">>}]}]}]},
    error_cond(?C:iq(A, <<"set">>, Dup), <<"bad-request">>),
    Empty = #xmlel{name = <<"query">>, attrs = [{<<"xmlns">>, ?NS_ROSTER}],
                   children = [#xmlel{name = <<"item">>, attrs = [{<<"jid">>, <<"a@localhost">>}],
                                      children = [#xmlel{name = <<"group">>}]}]},
    error_cond(?C:iq(A, <<"set">>, Empty), <<"not-acceptable">>).

error_cond(R, Cond) ->
    ?assertEqual(<<"error">>, throng_xml:attr(<<"type">>, R)),
    ?assertNotEqual(undefined, throng_xml:subel(throng_xml:subel(R, <<"error">>), Cond)).

%%% Subscriptions (RFC 6121 §3, Appendix A)

subscribe_approve_both_ways(_) ->
    A = online(<<"alice">>, <<"a">>),
    B = online(<<"bob">>, <<"b">>),
    _ = roster_get(A), _ = roster_get(B),
    ?C:send(A, ?C:presence([{<<"to">>, <<"bob@localhost">>}, {<<"type">>, <<"subscribe">>}])),
    ?assertEqual({<<"bob@localhost">>, <<"none">>, <<"subscribe">>, undefined},
                 push_item(wait(A, fun is_push/1))),
    Req = wait(B, is_presence(<<"subscribe">>)),
    ?assertEqual(<<"alice@localhost">>, throng_xml:attr(<<"from">>, Req)),
    ?C:send(B, ?C:presence([{<<"to">>, <<"alice@localhost">>}, {<<"type">>, <<"subscribed">>}])),
    ?assertEqual({<<"alice@localhost">>, <<"from">>, undefined, undefined},
                 push_item(wait(B, fun is_push/1))),
    %% Approval brings the contact's current presence.
    [Ok, Push, P] = expect_all(A, [is_presence(<<"subscribed">>), fun is_push/1,
                                   is_presence(undefined)]),
    ?assertEqual(<<"bob@localhost">>, throng_xml:attr(<<"from">>, Ok)),
    ?assertEqual({<<"bob@localhost">>, <<"to">>, undefined, undefined}, push_item(Push)),
    ?assertEqual(<<"bob@localhost/b">>, throng_xml:attr(<<"from">>, P)),
    %% The other direction.
    ?C:send(B, ?C:presence([{<<"to">>, <<"alice@localhost">>}, {<<"type">>, <<"subscribe">>}])),
    _ = wait(A, is_presence(<<"subscribe">>)),
    ?C:send(A, ?C:presence([{<<"to">>, <<"bob@localhost">>}, {<<"type">>, <<"subscribed">>}])),
    _ = wait(B, is_presence(<<"subscribed">>)),
    timer:sleep(200),
    ?assertMatch(#roster_item{subscription = both, ask = none}, item_of(<<"alice">>, <<"bob">>)),
    ?assertMatch(#roster_item{subscription = both, ask = none}, item_of(<<"bob">>, <<"alice">>)).

%% A request to an offline contact is kept (Pending In) and delivered when
%% the contact next sends initial presence.
subscribe_while_contact_offline(_) ->
    A = online(<<"alice">>, <<"a">>),
    ?C:send(A, ?C:presence([{<<"to">>, <<"bob@localhost">>}, {<<"type">>, <<"subscribe">>}])),
    %% Both rosters written in alice's session before it answers her next stanza.
    sync(A),
    ?assertMatch(#roster_item{subscription = none, ask = in}, item_of(<<"bob">>, <<"alice">>)),
    B = login(<<"bob">>, <<"b">>),
    %% Hidden from the roster while only pending in.
    ?assertEqual([], items(roster_get(B))),
    ?C:send(B, ?C:presence([])),
    Req = wait(B, is_presence(<<"subscribe">>)),
    ?assertEqual(<<"alice@localhost">>, throng_xml:attr(<<"from">>, Req)).

%% RFC 6121 §3.4: a pre-approved request is answered at once.
pre_approval(_) ->
    A = online(<<"alice">>, <<"a">>),
    B = online(<<"bob">>, <<"b">>),
    _ = roster_get(B),
    ?C:send(B, ?C:presence([{<<"to">>, <<"alice@localhost">>}, {<<"type">>, <<"subscribed">>}])),
    ?assertEqual({<<"alice@localhost">>, <<"none">>, undefined, <<"true">>},
                 push_item(wait(B, fun is_push/1))),
    ?C:expect_nothing(A, 300),
    ?C:send(A, ?C:presence([{<<"to">>, <<"bob@localhost">>}, {<<"type">>, <<"subscribe">>}])),
    _ = wait(A, is_presence(<<"subscribed">>)),
    ?assertEqual({<<"alice@localhost">>, <<"from">>, undefined, undefined},
                 push_item(wait(B, fun is_push/1))),
    ?assertMatch(#roster_item{subscription = to}, item_of(<<"alice">>, <<"bob">>)).

%% A request for a subscription that already exists is answered by the
%% contact's server (auto-reply) and changes nothing; the contact's client
%% is not bothered (RFC 6121 §3.1.3, Appendix A.3.2).
subscribe_when_already_subscribed(_) ->
    mutual(<<"alice">>, <<"bob">>),
    A = online(<<"alice">>, <<"a">>),
    B = online(<<"bob">>, <<"b">>),
    ?C:flush(A),
    ?C:send(A, ?C:presence([{<<"to">>, <<"bob@localhost">>}, {<<"type">>, <<"subscribe">>}])),
    ?C:expect_nothing(B, 300),
    ?assertMatch(#roster_item{subscription = both, ask = none}, item_of(<<"alice">>, <<"bob">>)),
    ?assertMatch(#roster_item{subscription = both, ask = none}, item_of(<<"bob">>, <<"alice">>)).

%% RFC 6121 §8.5.1: "For a presence stanza of type "subscribe", "subscribed",
%% "unsubscribe", or "unsubscribed", the server MUST silently ignore the stanza"
%% when the local account does not exist (an answer would reveal which accounts exist).
subscribe_to_nonexistent_user(_) ->
    A = online(<<"alice">>, <<"a">>),
    ?C:send(A, ?C:presence([{<<"to">>, <<"ghost@localhost">>}, {<<"type">>, <<"subscribe">>}])),
    [?C:send(A, ?C:presence([{<<"to">>, <<"ghost@localhost">>}, {<<"type">>, T}]))
     || T <- [<<"subscribed">>, <<"unsubscribe">>, <<"unsubscribed">>, <<"probe">>]],
    ?C:send(A, ?C:presence([{<<"to">>, <<"ghost@localhost/r">>}])),
    %% A ping after them: its result comes back, and nothing came before it.
    R = ?C:iq(A, <<"get">>, #xmlel{name = <<"ping">>, attrs = [{<<"xmlns">>, ?NS_PING}]},
              [{<<"to">>, <<"localhost">>}]),
    ?assertEqual(<<"result">>, throng_xml:attr(<<"type">>, R)),
    ?C:expect_nothing(A, 300).

unsubscribe_stops_presence(_) ->
    mutual(<<"alice">>, <<"bob">>),
    B = online(<<"bob">>, <<"b">>),
    A = online(<<"alice">>, <<"a">>),
    _ = roster_get(B),
    ?C:flush(B),
    ?C:send(A, ?C:presence([{<<"to">>, <<"bob@localhost">>}, {<<"type">>, <<"unsubscribe">>}])),
    [_, Push] = expect_all(B, [is_presence(<<"unsubscribe">>), fun is_push/1]),
    ?assertMatch({_, <<"to">>, _, _}, push_item(Push)),
    %% Alice no longer receives Bob's presence: she sees him leave.
    U = wait(A, is_presence(<<"unavailable">>)),
    ?assertEqual(<<"bob@localhost/b">>, throng_xml:attr(<<"from">>, U)),
    ?C:send(B, ?C:presence([{<<"type">>, <<"away">>}])),
    ?assertMatch(#roster_item{subscription = from}, item_of(<<"alice">>, <<"bob">>)).

unsubscribed_cancels_subscription(_) ->
    mutual(<<"alice">>, <<"bob">>),
    A = online(<<"alice">>, <<"a">>),
    B = online(<<"bob">>, <<"b">>),
    _ = roster_get(A),
    ?C:flush(A),
    ?C:send(B, ?C:presence([{<<"to">>, <<"alice@localhost">>}, {<<"type">>, <<"unsubscribed">>}])),
    _ = wait(A, is_presence(<<"unsubscribed">>)),
    timer:sleep(200),
    ?assertMatch(#roster_item{subscription = from}, item_of(<<"alice">>, <<"bob">>)),
    ?assertMatch(#roster_item{subscription = to}, item_of(<<"bob">>, <<"alice">>)).

deny_request(_) ->
    A = online(<<"alice">>, <<"a">>),
    B = online(<<"bob">>, <<"b">>),
    ?C:send(A, ?C:presence([{<<"to">>, <<"bob@localhost">>}, {<<"type">>, <<"subscribe">>}])),
    _ = wait(B, is_presence(<<"subscribe">>)),
    ?C:send(B, ?C:presence([{<<"to">>, <<"alice@localhost">>}, {<<"type">>, <<"unsubscribed">>}])),
    _ = wait(A, is_presence(<<"unsubscribed">>)),
    timer:sleep(200),
    ?assertMatch(#roster_item{subscription = none, ask = none}, item_of(<<"alice">>, <<"bob">>)),
    ?assertEqual(undefined, item_of(<<"bob">>, <<"alice">>)).

%% RFC 6121 §2.5.2: removing an item cancels both subscriptions.
roster_remove_cancels_subscriptions(_) ->
    mutual(<<"alice">>, <<"bob">>),
    A = online(<<"alice">>, <<"a">>),
    B = online(<<"bob">>, <<"b">>),
    ?C:flush(B),
    ?C:send(A, #xmlel{name = <<"iq">>, attrs = [{<<"type">>, <<"set">>}, {<<"id">>, <<"rm">>}],
                      children = [#xmlel{name = <<"query">>, attrs = [{<<"xmlns">>, ?NS_ROSTER}],
                                         children = [#xmlel{name = <<"item">>,
                                                            attrs = [{<<"jid">>, <<"bob@localhost">>},
                                                                     {<<"subscription">>, <<"remove">>}]}]}]}),
    _ = wait(B, is_presence(<<"unsubscribe">>)),
    _ = wait(B, is_presence(<<"unsubscribed">>)),
    timer:sleep(200),
    ?assertEqual(undefined, item_of(<<"alice">>, <<"bob">>)),
    ?assertMatch(#roster_item{subscription = none}, item_of(<<"bob">>, <<"alice">>)).

%%% Presence (RFC 6121 §4)

initial_presence_broadcast_and_probe(_) ->
    mutual(<<"alice">>, <<"bob">>),
    B = online(<<"bob">>, <<"b">>, [#xmlel{name = <<"status">>, children = [{xmlcdata, <<"here">>}]}]),
    A = login(<<"alice">>, <<"a">>),
    ?C:send(A, ?C:presence([])),
    %% Bob's presence, from the probe.
    PB = wait(A, is_presence(undefined, <<"bob@localhost/b">>)),
    ?assertEqual(<<"bob@localhost/b">>, throng_xml:attr(<<"from">>, PB)),
    ?assertEqual(<<"here">>, throng_xml:subel_cdata(PB, <<"status">>)),
    %% Alice's presence, broadcast.
    PA = wait(B, is_presence(undefined)),
    ?assertEqual(<<"alice@localhost/a">>, throng_xml:attr(<<"from">>, PA)),
    ?assertEqual(<<"bob@localhost/b">>, throng_xml:attr(<<"to">>, PA)).

presence_update_broadcast(_) ->
    mutual(<<"alice">>, <<"bob">>),
    B = online(<<"bob">>, <<"b">>),
    A = online(<<"alice">>, <<"a">>),
    ?C:flush(B),
    ?C:send(A, #xmlel{name = <<"presence">>,
                      children = [#xmlel{name = <<"show">>, children = [{xmlcdata, <<"away">>}]}]}),
    P = wait(B, is_presence(undefined)),
    ?assertEqual(<<"away">>, throng_xml:subel_cdata(P, <<"show">>)).

%% RFC 6121 §4.2.2 and §4.4.2: initial and later available presence go to
%% all of the user's available resources, the sending one included (an
%% entity is implicitly subscribed to its own presence).
presence_reflected_to_sender(_) ->
    A = login(<<"alice">>, <<"a">>),
    ?C:send(A, #xmlel{name = <<"presence">>,
                      children = [#xmlel{name = <<"status">>, children = [{xmlcdata, <<"here">>}]}]}),
    P = wait(A, is_presence(undefined)),
    ?assertEqual({<<"alice@localhost/a">>, <<"alice@localhost/a">>, <<"here">>},
                 {throng_xml:attr(<<"from">>, P), throng_xml:attr(<<"to">>, P),
                  throng_xml:subel_cdata(P, <<"status">>)}),
    ?C:send(A, #xmlel{name = <<"presence">>,
                      children = [#xmlel{name = <<"show">>, children = [{xmlcdata, <<"away">>}]}]}),
    U = wait(A, is_presence(undefined)),
    ?assertEqual({<<"alice@localhost/a">>, <<"away">>},
                 {throng_xml:attr(<<"from">>, U), throng_xml:subel_cdata(U, <<"show">>)}).

unavailable_on_clean_close(_) ->
    mutual(<<"alice">>, <<"bob">>),
    B = online(<<"bob">>, <<"b">>),
    A = online(<<"alice">>, <<"a">>),
    ?C:flush(B),
    ?C:close(A),
    U = wait(B, is_presence(<<"unavailable">>)),
    ?assertEqual(<<"alice@localhost/a">>, throng_xml:attr(<<"from">>, U)).

%% A session that ends without closing its stream is unavailable too.
unavailable_on_abrupt_disconnect(_) ->
    mutual(<<"alice">>, <<"bob">>),
    B = online(<<"bob">>, <<"b">>),
    A = online(<<"alice">>, <<"a">>),
    ?C:flush(B),
    ?C:abort(A),   %% the TCP connection closes without </stream:stream>
    U = wait(B, is_presence(<<"unavailable">>)),
    ?assertEqual(<<"alice@localhost/a">>, throng_xml:attr(<<"from">>, U)),
    ?assertEqual([], throng_sm:resources({<<"alice">>, <<"localhost">>})).

own_resources_see_each_other(_) ->
    A1 = online(<<"alice">>, <<"one">>),
    A2 = login(<<"alice">>, <<"two">>),
    ?C:send(A2, ?C:presence([])),
    P = wait(A2, is_presence(undefined, <<"alice@localhost/one">>)),
    ?assertEqual(<<"alice@localhost/one">>, throng_xml:attr(<<"from">>, P)),
    P1 = wait(A1, is_presence(undefined)),
    ?assertEqual(<<"alice@localhost/two">>, throng_xml:attr(<<"from">>, P1)).

directed_presence_and_unavailable(_) ->
    C = online(<<"carol">>, <<"c">>),
    A = online(<<"alice">>, <<"a">>),
    ?C:send(A, ?C:presence([{<<"to">>, <<"carol@localhost/c">>}])),
    P = wait(C, is_presence(undefined)),
    ?assertEqual(<<"alice@localhost/a">>, throng_xml:attr(<<"from">>, P)),
    ?C:close(A),
    U = wait(C, is_presence(<<"unavailable">>)),
    ?assertEqual(<<"alice@localhost/a">>, throng_xml:attr(<<"from">>, U)).

no_presence_without_subscription(_) ->
    B = online(<<"bob">>, <<"b">>),
    _A = online(<<"alice">>, <<"a">>),
    ?C:expect_nothing(B, 300).

%%% Messages (RFC 6121 §8.5)

bare_message_highest_priority(_) ->
    B5 = online(<<"bob">>, <<"high">>, prio(5)),
    B1 = online(<<"bob">>, <<"low">>, prio(1)),
    ?C:flush(B5),
    A = online(<<"alice">>, <<"a">>),
    ?C:send(A, ?C:message(<<"bob@localhost">>, <<"chat">>, <<"hi">>)),
    M = wait(B5, fun(E) -> E#xmlel.name =:= <<"message">> end),
    ?assertEqual(<<"hi">>, throng_xml:subel_cdata(M, <<"body">>)),
    ?C:expect_nothing(B1, 300).

bare_message_equal_priority_all(_) ->
    B1 = online(<<"bob">>, <<"one">>, prio(2)),
    B2 = online(<<"bob">>, <<"two">>, prio(2)),
    ?C:flush(B1),
    A = online(<<"alice">>, <<"a">>),
    ?C:send(A, ?C:message(<<"bob@localhost">>, <<"normal">>, <<"all">>)),
    _ = wait(B1, fun(E) -> E#xmlel.name =:= <<"message">> end),
    _ = wait(B2, fun(E) -> E#xmlel.name =:= <<"message">> end).

%% A negative priority never gets bare-JID messages: they go offline.
negative_priority_gets_no_bare_messages(_) ->
    B = online(<<"bob">>, <<"neg">>, prio(-1)),
    A = online(<<"alice">>, <<"a">>),
    ?C:send(A, ?C:message(<<"bob@localhost">>, <<"chat">>, <<"later">>)),
    ?C:expect_nothing(B, 300),
    ?assertEqual(1, throng_mod_offline:count(#jid{user = <<"bob">>, server = <<"localhost">>})),
    %% A full-JID message still reaches it.
    ?C:send(A, ?C:message(<<"bob@localhost/neg">>, <<"chat">>, <<"direct">>)),
    M = wait(B, fun(E) -> E#xmlel.name =:= <<"message">> end),
    ?assertEqual(<<"direct">>, throng_xml:subel_cdata(M, <<"body">>)).

full_jid_fallback_to_bare(_) ->
    B = online(<<"bob">>, <<"b">>),
    A = online(<<"alice">>, <<"a">>),
    ?C:send(A, ?C:message(<<"bob@localhost/gone">>, <<"chat">>, <<"fallback">>)),
    M = wait(B, fun(E) -> E#xmlel.name =:= <<"message">> end),
    ?assertEqual(<<"fallback">>, throng_xml:subel_cdata(M, <<"body">>)).

message_to_nonexistent_user(_) ->
    A = online(<<"alice">>, <<"a">>),
    ?C:send(A, ?C:message(<<"ghost@localhost">>, <<"chat">>, <<"x">>)),
    E = wait(A, fun(El) -> El#xmlel.name =:= <<"message">> end),
    error_cond(E, <<"service-unavailable">>).

groupchat_to_user_is_error(_) ->
    _B = online(<<"bob">>, <<"b">>),
    A = online(<<"alice">>, <<"a">>),
    ?C:send(A, ?C:message(<<"bob@localhost">>, <<"groupchat">>, <<"x">>)),
    E = wait(A, fun(El) -> El#xmlel.name =:= <<"message">> end),
    error_cond(E, <<"service-unavailable">>).

headline_to_offline_dropped(_) ->
    A = online(<<"alice">>, <<"a">>),
    ?C:send(A, ?C:message(<<"bob@localhost">>, <<"headline">>, <<"news">>)),
    ?C:expect_nothing(A, 300),
    ?assertEqual(0, throng_mod_offline:count(#jid{user = <<"bob">>, server = <<"localhost">>})).

message_without_to_goes_to_own_bare(_) ->
    A1 = online(<<"alice">>, <<"one">>),
    A2 = online(<<"alice">>, <<"two">>),
    ?C:flush(A1),
    ?C:send(A2, #xmlel{name = <<"message">>, attrs = [{<<"type">>, <<"chat">>}],
                       children = [#xmlel{name = <<"body">>, children = [{xmlcdata, <<"note">>}]}]}),
    M = wait(A1, fun(E) -> E#xmlel.name =:= <<"message">> end),
    ?assertEqual(<<"note">>, throng_xml:subel_cdata(M, <<"body">>)).

iq_to_unknown_full_jid(_) ->
    A = online(<<"alice">>, <<"a">>),
    R = ?C:iq(A, <<"get">>, #xmlel{name = <<"ping">>, attrs = [{<<"xmlns">>, ?NS_PING}]},
              [{<<"to">>, <<"bob@localhost/none">>}]),
    error_cond(R, <<"service-unavailable">>).

%%% Offline messages

offline_storage_with_delay(_) ->
    A = online(<<"alice">>, <<"a">>),
    [?C:send(A, ?C:message(<<"bob@localhost">>, <<"chat">>, integer_to_binary(N)))
     || N <- lists:seq(1, 3)],
    %% Stored in alice's session before it answers her next stanza.
    sync(A),
    ?assertEqual(3, throng_mod_offline:count(#jid{user = <<"bob">>, server = <<"localhost">>})),
    B = login(<<"bob">>, <<"b">>),
    ?C:send(B, ?C:presence([])),
    Ms = [wait(B, fun(E) -> E#xmlel.name =:= <<"message">> end) || _ <- lists:seq(1, 3)],
    ?assertEqual([<<"1">>, <<"2">>, <<"3">>], [throng_xml:subel_cdata(M, <<"body">>) || M <- Ms]),
    [M1 | _] = Ms,
    ?assertEqual(<<"alice@localhost/a">>, throng_xml:attr(<<"from">>, M1)),
    Delay = throng_xml:subel(M1, <<"delay">>, ?NS_DELAY),
    ?assertEqual(<<"localhost">>, throng_xml:attr(<<"from">>, Delay)),
    {ok, _} = parse_stamp(throng_xml:attr(<<"stamp">>, Delay)),
    ?assertEqual(0, throng_mod_offline:count(#jid{user = <<"bob">>, server = <<"localhost">>})).

parse_stamp(S) ->
    try {ok, calendar:rfc3339_to_system_time(binary_to_list(S))}
    catch _:_ -> error
    end.

%% A bound resource that has not sent presence is not available: bare-JID
%% messages go offline, and come at its initial presence.
offline_not_before_initial_presence(_) ->
    B = login(<<"bob">>, <<"b">>),
    A = online(<<"alice">>, <<"a">>),
    ?C:send(A, ?C:message(<<"bob@localhost">>, <<"chat">>, <<"queued">>)),
    ?C:expect_nothing(B, 300),
    ?C:send(B, ?C:presence([])),
    M = wait(B, fun(E) -> E#xmlel.name =:= <<"message">> end),
    ?assertEqual(<<"queued">>, throng_xml:subel_cdata(M, <<"body">>)).

offline_limit(_) ->
    A = online(<<"alice">>, <<"a">>),
    [?C:send(A, ?C:message(<<"bob@localhost">>, <<"chat">>, integer_to_binary(N)))
     || N <- lists:seq(1, 3)],
    E = wait(A, fun(El) -> El#xmlel.name =:= <<"message">> end),
    error_cond(E, <<"service-unavailable">>),
    ?assertEqual(<<"3">>, throng_xml:subel_cdata(E, <<"body">>)),
    ?assertEqual(2, throng_mod_offline:count(#jid{user = <<"bob">>, server = <<"localhost">>})).

%%% RFC 6121 §8.5: addressing and message types

%% §8.5.2.1.2: presence to a bare JID goes to every available resource and
%% "the server MUST NOT rewrite the 'to' attribute".
presence_to_bare_jid_keeps_to(_) ->
    C1 = online(<<"carol">>, <<"one">>),
    C2 = online(<<"carol">>, <<"two">>),
    ?C:flush(C1),
    A = online(<<"alice">>, <<"a">>),
    ?C:send(A, ?C:presence([{<<"to">>, <<"carol@localhost">>}])),
    [?assertEqual({<<"alice@localhost/a">>, <<"carol@localhost">>},
                  {throng_xml:attr(<<"from">>, P), throng_xml:attr(<<"to">>, P)})
     || C <- [C1, C2], P <- [wait(C, is_presence(undefined, <<"alice@localhost/a">>))]].

%% §3.1.3 and §8.5.2.1.2: a request kept for an offline contact is delivered
%% at its next available presence addressed as it was sent, to the bare JID.
stored_subscription_request_keeps_to(_) ->
    A = online(<<"alice">>, <<"a">>),
    ?C:send(A, ?C:presence([{<<"to">>, <<"bob@localhost">>}, {<<"type">>, <<"subscribe">>}])),
    timer:sleep(200),
    B = login(<<"bob">>, <<"b">>),
    ?C:send(B, ?C:presence([])),
    Req = wait(B, is_presence(<<"subscribe">>)),
    ?assertEqual({<<"alice@localhost">>, <<"bob@localhost">>},
                 {throng_xml:attr(<<"from">>, Req), throng_xml:attr(<<"to">>, Req)}).

error_msg(To) ->
    #xmlel{name = <<"message">>, attrs = [{<<"to">>, To}, {<<"type">>, <<"error">>}],
           children = [#xmlel{name = <<"error">>, attrs = [{<<"type">>, <<"cancel">>}],
                              children = [#xmlel{name = <<"item-not-found">>,
                                                 attrs = [{<<"xmlns">>, ?NS_STANZAS}]}]}]}.

%% Sends a ping to the server and waits for its result: every stanza the
%% client sent before it has been routed by then.
sync(C) ->
    R = ?C:iq(C, <<"get">>, #xmlel{name = <<"ping">>, attrs = [{<<"xmlns">>, ?NS_PING}]},
              [{<<"to">>, <<"localhost">>}]),
    ?assertEqual(<<"result">>, throng_xml:attr(<<"type">>, R)).

%% §8.5.2.1.1: "For a message stanza of type "error", the server MUST
%% silently ignore the message" (bare JID, available resources).
error_message_to_bare_jid_ignored(_) ->
    B = online(<<"bob">>, <<"b">>),
    A = online(<<"alice">>, <<"a">>),
    ?C:send(A, error_msg(<<"bob@localhost">>)),
    sync(A),
    ?C:expect_nothing(B, 300),
    ?C:expect_nothing(A, 0).

%% §8.5.3.2.1: an error message to a full JID with no such resource is
%% silently ignored, also when the user has other resources.
error_message_to_unavailable_full_jid_ignored(_) ->
    B = online(<<"bob">>, <<"b">>),
    A = online(<<"alice">>, <<"a">>),
    ?C:send(A, error_msg(<<"bob@localhost/gone">>)),
    sync(A),
    ?C:expect_nothing(B, 300),
    ?C:expect_nothing(A, 0).

%% §8.5.2.2.1 and §8.5.3.2.1: with no resource at all, an error message is
%% silently ignored: not stored offline, not answered.
error_message_to_offline_user_ignored(_) ->
    A = online(<<"alice">>, <<"a">>),
    ?C:send(A, error_msg(<<"bob@localhost">>)),
    ?C:send(A, error_msg(<<"bob@localhost/gone">>)),
    sync(A),
    ?C:expect_nothing(A, 300),
    ?assertEqual(0, throng_mod_offline:count(#jid{user = <<"bob">>, server = <<"localhost">>})).

%% §8.5.3.2.1: "For a message stanza of type "normal", "groupchat", or
%% "headline", the server MUST either (a) silently ignore the stanza or (b)
%% return an error stanza to the sender, which SHOULD be
%% <service-unavailable/>": only "chat" goes to the other resources. Throng
%% answers normal (and a message with no type, which is normal) with the error.
normal_message_to_unavailable_full_jid_is_error(_) ->
    B = online(<<"bob">>, <<"b">>),
    A = online(<<"alice">>, <<"a">>),
    ?C:send(A, ?C:message(<<"bob@localhost/gone">>, <<"normal">>, <<"n">>)),
    E = wait(A, fun(El) -> El#xmlel.name =:= <<"message">> end),
    error_cond(E, <<"service-unavailable">>),
    ?C:send(A, #xmlel{name = <<"message">>, attrs = [{<<"to">>, <<"bob@localhost/gone">>}],
                      children = [#xmlel{name = <<"body">>, children = [{xmlcdata, <<"x">>}]}]}),
    E2 = wait(A, fun(El) -> El#xmlel.name =:= <<"message">> end),
    error_cond(E2, <<"service-unavailable">>),
    ?C:expect_nothing(B, 300),
    %% And with no resource at all: an error too, not offline storage.
    ?C:close(B),
    timer:sleep(200),
    ?C:send(A, ?C:message(<<"bob@localhost/gone">>, <<"normal">>, <<"n">>)),
    error_cond(wait(A, fun(El) -> El#xmlel.name =:= <<"message">> end), <<"service-unavailable">>),
    ?assertEqual(0, throng_mod_offline:count(#jid{user = <<"bob">>, server = <<"localhost">>})).

%% §8.5.3.2.1: a headline to a full JID with no such resource is silently
%% ignored (Throng's choice of the two the RFC allows): no error, no delivery.
headline_to_unavailable_full_jid_dropped(_) ->
    B = online(<<"bob">>, <<"b">>),
    A = online(<<"alice">>, <<"a">>),
    ?C:send(A, ?C:message(<<"bob@localhost/gone">>, <<"headline">>, <<"h">>)),
    sync(A),
    ?C:expect_nothing(B, 300),
    ?C:expect_nothing(A, 0).

%% §8.5.3.2.1: a groupchat message to a full JID with no such resource gets
%% service-unavailable and is not delivered to the other resources.
groupchat_to_unavailable_full_jid_is_error(_) ->
    B = online(<<"bob">>, <<"b">>),
    A = online(<<"alice">>, <<"a">>),
    ?C:send(A, ?C:message(<<"bob@localhost/gone">>, <<"groupchat">>, <<"g">>)),
    error_cond(wait(A, fun(El) -> El#xmlel.name =:= <<"message">> end), <<"service-unavailable">>),
    ?C:expect_nothing(B, 300).

%% RFC 6121 §2.1.5 and §2.3.3: only the account's own resources may read or
%% change its roster; a roster get or set addressed to another user's bare
%% JID gets <forbidden/> (not service-unavailable).
roster_get_of_other_user_forbidden(_) ->
    A = online(<<"alice">>, <<"a">>),
    R = ?C:iq(A, <<"get">>, #xmlel{name = <<"query">>, attrs = [{<<"xmlns">>, ?NS_ROSTER}]},
              [{<<"to">>, <<"bob@localhost">>}]),
    error_cond(R, <<"forbidden">>),
    ?assertEqual(<<"bob@localhost">>, throng_xml:attr(<<"from">>, R)).

roster_set_of_other_user_forbidden(_) ->
    A = online(<<"alice">>, <<"a">>),
    Item = #xmlel{name = <<"item">>, attrs = [{<<"jid">>, <<"carol@localhost">>}]},
    R = ?C:iq(A, <<"set">>, #xmlel{name = <<"query">>, attrs = [{<<"xmlns">>, ?NS_ROSTER}],
                                    children = [Item]},
              [{<<"to">>, <<"bob@localhost">>}]),
    error_cond(R, <<"forbidden">>),
    ?assertEqual(undefined, item_of(<<"bob">>, <<"carol">>)).

%%% Stored subscription requests (RFC 6121 §3.1.3)

subscribe_el(To, Id, Children) ->
    #xmlel{name = <<"presence">>,
           attrs = [{<<"to">>, To}, {<<"type">>, <<"subscribe">>}, {<<"id">>, Id}],
           children = Children}.

nick(N) ->
    #xmlel{name = <<"nick">>, attrs = [{<<"xmlns">>, <<"http://jabber.org/protocol/nick">>}],
           children = [{xmlcdata, N}]}.

status(T) ->
    #xmlel{name = <<"status">>, children = [{xmlcdata, T}]}.

%% "the contact's server MUST keep a record of the complete presence stanza
%% comprising the subscription request, including any extended content
%% contained therein": id, status and nick come at login, every login until
%% it is answered.
stored_subscription_request_is_complete(_) ->
    A = online(<<"alice">>, <<"a">>),
    ?C:send(A, subscribe_el(<<"bob@localhost">>, <<"sub-1">>, [status(<<"Hi, it's Alice">>),
                                                                 nick(<<"Ally">>)])),
    sync(A),
    [begin
         B = login(<<"bob">>, R),
         ?C:send(B, ?C:presence([])),
         Req = wait(B, is_presence(<<"subscribe">>)),
         ?assertEqual(<<"sub-1">>, throng_xml:attr(<<"id">>, Req)),
         ?assertEqual(<<"Hi, it's Alice">>, throng_xml:subel_cdata(Req, <<"status">>)),
         ?assertEqual(<<"Ally">>, throng_xml:cdata(
                                    throng_xml:subel(Req, <<"nick">>,
                                                     <<"http://jabber.org/protocol/nick">>))),
         ?C:close(B),
         timer:sleep(200)
     end || R <- [<<"first">>, <<"second">>]].

%% Approved (or denied) requests are not kept: the stanza goes with the
%% Pending In state, and the next login brings no request.
stored_request_forgotten_when_answered(_) ->
    A = online(<<"alice">>, <<"a">>),
    ?C:send(A, subscribe_el(<<"bob@localhost">>, <<"s1">>, [nick(<<"Ally">>)])),
    ?C:send(A, subscribe_el(<<"carol@localhost">>, <<"s2">>, [nick(<<"Ally">>)])),
    sync(A),
    ?assertEqual(2, length(throng_storage:kv_keys(sub_request))),
    B = online(<<"bob">>, <<"b">>),
    ?C:send(B, ?C:presence([{<<"to">>, <<"alice@localhost">>}, {<<"type">>, <<"subscribed">>}])),
    C = online(<<"carol">>, <<"c">>),
    ?C:send(C, ?C:presence([{<<"to">>, <<"alice@localhost">>}, {<<"type">>, <<"unsubscribed">>}])),
    sync(B), sync(C),
    ?assertEqual([], throng_storage:kv_keys(sub_request)),
    ?C:close(B),
    timer:sleep(200),
    B2 = login(<<"bob">>, <<"again">>),
    ?C:send(B2, ?C:presence([])),
    wait(B2, is_presence(undefined, <<"bob@localhost/again">>)),
    ?C:expect_nothing(B2, 300).

%% A removed account's waiting requests are removed with it.
stored_request_forgotten_with_account(_) ->
    A = online(<<"alice">>, <<"a">>),
    ?C:send(A, subscribe_el(<<"bob@localhost">>, <<"s1">>, [])),
    ?C:send(A, subscribe_el(<<"carol@localhost">>, <<"s2">>, [])),
    sync(A),
    ok = throng_auth:unregister(<<"bob">>, <<"localhost">>),
    ?assertEqual([{<<"carol">>, <<"localhost">>, {<<"alice">>, <<"localhost">>}}],
                 throng_storage:kv_keys(sub_request)).

%% A request larger than subscription_request_max_bytes (512 here) is kept
%% without the children past the limit: the request, its id and the first
%% children still come at login.
stored_request_size_is_bounded(_) ->
    A = online(<<"alice">>, <<"a">>),
    Big = #xmlel{name = <<"x">>, attrs = [{<<"xmlns">>, <<"urn:big">>}],
                 children = [{xmlcdata, binary:copy(<<"z">>, 2000)}]},
    ?C:send(A, subscribe_el(<<"bob@localhost">>, <<"big">>, [nick(<<"Ally">>), Big, status(<<"s">>)])),
    sync(A),
    {ok, Kept} = throng_storage:kv_get(sub_request, {<<"bob">>, <<"localhost">>,
                                                     {<<"alice">>, <<"localhost">>}}),
    ?assert(byte_size(throng_xml:to_binary(Kept)) =< 512),
    B = login(<<"bob">>, <<"b">>),
    ?C:send(B, ?C:presence([])),
    Req = wait(B, is_presence(<<"subscribe">>)),
    ?assertEqual(<<"big">>, throng_xml:attr(<<"id">>, Req)),
    ?assertEqual([<<"nick">>], [N || #xmlel{name = N} <- Req#xmlel.children]).

%%% Directed presence, bounded (limits.directed_presence_max)

%% With a bound of 2: presence to a third new entity is not sent and the
%% client gets policy-violation; presence again to one already counted, or
%% after an unavailable freed a place, goes; those counted still get
%% unavailable presence when the session ends (RFC 6121 §4.6.3).
directed_presence_is_bounded(_) ->
    C = online(<<"carol">>, <<"c">>),
    B = online(<<"bob">>, <<"b">>),
    A = online(<<"alice">>, <<"a">>),
    ?C:send(A, ?C:presence([{<<"to">>, <<"carol@localhost/c">>}])),
    ?C:send(A, ?C:presence([{<<"to">>, <<"ghost@localhost">>}])),
    ?C:send(A, ?C:presence([{<<"to">>, <<"bob@localhost/b">>}])),
    E = wait(A, is_presence(<<"error">>)),
    error_cond(E, <<"policy-violation">>),
    ?assertEqual(<<"bob@localhost/b">>, throng_xml:attr(<<"from">>, E)),
    ?C:expect_nothing(B, 300),
    ?C:send(A, ?C:presence([{<<"to">>, <<"carol@localhost/c">>}])),
    ?C:send(A, ?C:presence([{<<"to">>, <<"ghost@localhost">>}, {<<"type">>, <<"unavailable">>}])),
    ?C:send(A, ?C:presence([{<<"to">>, <<"bob@localhost/b">>}])),
    _ = wait(B, is_presence(undefined, <<"alice@localhost/a">>)),
    sync(A),
    ?C:expect_nothing(A, 0),
    ?C:close(A),
    _ = wait(B, is_presence(<<"unavailable">>, <<"alice@localhost/a">>)),
    _ = wait(C, is_presence(<<"unavailable">>, <<"alice@localhost/a">>)).

%% A session that sent directed presence and then went unavailable to those
%% entities keeps no more state than before (the idle case costs nothing).
directed_presence_state_returns_to_empty(_) ->
    A = online(<<"alice">>, <<"a">>),
    Pid = throng_sm:lookup(#jid{user = <<"alice">>, server = <<"localhost">>, resource = <<"a">>}),
    Size = fun() -> {_, D} = sys:get_state(Pid), erts_debug:flat_size(D) end,
    Before = Size(),
    Targets = [<<"t", (integer_to_binary(N))/binary, "@localhost">> || N <- lists:seq(1, 50)],
    [?C:send(A, ?C:presence([{<<"to">>, T}])) || T <- Targets],
    sync(A),
    ?assert(Size() > Before),
    [?C:send(A, ?C:presence([{<<"to">>, T}, {<<"type">>, <<"unavailable">>}])) || T <- Targets],
    sync(A),
    ?assertEqual(Before, Size()).

%%% Rosters, bounded (limits.roster_*)

roster_set(C, JID, Name, Groups) ->
    Item = #xmlel{name = <<"item">>, attrs = [{<<"jid">>, JID}, {<<"name">>, Name}],
                  children = [#xmlel{name = <<"group">>, children = [{xmlcdata, G}]} || G <- Groups]},
    R = ?C:iq(C, <<"set">>, #xmlel{name = <<"query">>, attrs = [{<<"xmlns">>, ?NS_ROSTER}],
                                    children = [Item]}),
    case throng_xml:attr(<<"type">>, R) of
        <<"result">> -> ok;
        <<"error">> -> R
    end.

%% With roster_max_items 2: a roster set adding a third item gets
%% policy-violation (the operator's policy, RFC 6120 §8.3.3.12; the item
%% itself is acceptable); existing items can still change. An outbound
%% subscribe that would add an item is refused the same way, and an inbound
%% request that would add one is not kept: its sender gets a presence error
%% and the user is not bothered.
roster_item_count_is_bounded(_) ->
    throng_ct:register(<<"dave">>, <<"password">>),
    A = online(<<"alice">>, <<"a">>),
    ok = roster_set(A, <<"bob@localhost">>, <<"Bob">>, []),
    ok = roster_set(A, <<"carol@localhost">>, <<"Carol">>, []),
    error_cond(roster_set(A, <<"eve@localhost">>, <<"Eve">>, []), <<"policy-violation">>),
    ok = roster_set(A, <<"bob@localhost">>, <<"Robert">>, [<<"Friends">>]),
    ?C:send(A, ?C:presence([{<<"to">>, <<"eve@localhost">>}, {<<"type">>, <<"subscribe">>}])),
    E = wait(A, is_presence(<<"error">>)),
    error_cond(E, <<"policy-violation">>),
    D = online(<<"dave">>, <<"d">>),
    ?C:send(D, ?C:presence([{<<"to">>, <<"alice@localhost">>}, {<<"type">>, <<"subscribe">>}])),
    error_cond(wait(D, is_presence(<<"error">>)), <<"policy-violation">>),
    sync(A),
    ?C:expect_nothing(A, 300),
    ?assertEqual(undefined, item_of(<<"alice">>, <<"dave">>)),
    ?assertEqual(undefined, item_of(<<"alice">>, <<"eve">>)),
    ?assertEqual(2, length(element(2, throng_storage:roster_get(<<"alice">>, <<"localhost">>)))).

%% RFC 6121 §2.3.3: a name or group longer than the server's limit is
%% not-acceptable; so are more groups than roster_max_groups and an item
%% whose name and groups together pass roster_max_item_bytes (16, 2, 40 here).
roster_item_size_is_bounded(_) ->
    A = online(<<"alice">>, <<"a">>),
    B = <<"bob@localhost">>,
    L17 = binary:copy(<<"n">>, 17),
    L16 = binary:copy(<<"n">>, 16),
    [error_cond(roster_set(A, B, Name, Groups), <<"not-acceptable">>)
     || {Name, Groups} <- [{L17, []}, {<<"Bob">>, [L17]}, {<<"Bob">>, [<<"a">>, <<"b">>, <<"c">>]},
                           {L16, [L16, <<"m", (binary:copy(<<"n">>, 15))/binary>>]}]],
    ?assertEqual(undefined, item_of(<<"alice">>, <<"bob">>)),
    ok = roster_set(A, B, binary:copy(<<"n">>, 10), [binary:copy(<<"g">>, 10), binary:copy(<<"h">>, 10)]).
