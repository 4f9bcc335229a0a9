%% @doc XEP-0191 Blocking Command (throng_mod_blocking) against the real
%% server: the list and its pushes, what a blocked entity can no longer do
%% (messages, IQs, presence, subscription requests, offline messages), what
%% the user can no longer send, presence when blocking and unblocking, the
%% limit, durability and removal of the account.
-module(xep0191_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").
-include("throng.hrl").

-compile([export_all, nowarn_export_all]).

-define(C, throng_test_client).
-define(NS, <<"urn:xmpp:blocking">>).
-define(NS_ERRORS, <<"urn:xmpp:blocking:errors">>).

all() ->
    [advertised_in_disco, empty_list, block_and_list, push_to_resources_that_asked,
     block_without_items_is_bad_request, malformed_jid, unblock_one, unblock_all,
     nothing_changes_no_push, message_from_blocked_bounced, message_to_blocked_refused,
     iq_from_blocked, presence_hidden_both_ways, unblock_sends_presence,
     subscription_request_from_blocked_dropped, offline_message_from_blocked_refused,
     others_cannot_read_the_list, limit, survives_restart, removed_account_forgotten,
     full_jid_item_blocks_one_resource, users_without_a_list_cost_no_read,
     block_made_after_the_filter_is_enforced, filter_not_trusted_after_a_member_change,
     filter_sized_for_its_bucket].

init_per_testcase(limit, Config) ->
    throng_ct:start(Config, #{modules => #{blocking => #{max_items => 2}}}),
    users(Config);
init_per_testcase(_TC, Config) ->
    throng_ct:start(Config),
    users(Config).

users(Config) ->
    [throng_ct:register(U, <<"password">>) || U <- [<<"alice">>, <<"bob">>, <<"carol">>]],
    throng_ct:mutual(<<"alice">>, <<"bob">>),
    Config.

end_per_testcase(_TC, _Config) ->
    throng_ct:stop().

%%% Helpers

login(User) -> login(User, <<"r">>).
login(User, Res) -> ?C:login(User, <<"password">>, Res).

%% Logged in and available, its own presence (and the contacts') read.
online(User, Res) ->
    C = login(User, Res),
    ?C:send(C, ?C:presence([])),
    settle([C]),
    C.

items(Jids) ->
    [#xmlel{name = <<"item">>, attrs = [{<<"jid">>, J}]} || J <- Jids].

el(Name, Jids) ->
    #xmlel{name = Name, attrs = [{<<"xmlns">>, ?NS}], children = items(Jids)}.

block(C, Jids) -> iq(C, <<"set">>, el(<<"block">>, Jids), []).
unblock(C, Jids) -> iq(C, <<"set">>, el(<<"unblock">>, Jids), []).

iq(C, Type, Payload, Attrs) -> ?C:iq_skipping(C, Type, Payload, Attrs).

blocklist(C) ->
    R = iq(C, <<"get">>, el(<<"blocklist">>, []), []),
    <<"result">> = throng_xml:attr(<<"type">>, R),
    [throng_xml:attr(<<"jid">>, I) || I <- throng_xml:subels(throng_xml:subel(R, <<"blocklist">>))].

type(El) -> throng_xml:attr(<<"type">>, El).

condition(El) ->
    #xmlel{children = [#xmlel{name = Cond} | _]} = throng_xml:subel(El, <<"error">>),
    Cond.

%% Drains whatever a client has received (presence at login and the like).
settle(Cs) ->
    timer:sleep(200),
    [?C:flush(C) || C <- Cs],
    ok.

%%% Cases

%% disco#info of the domain lists urn:xmpp:blocking (§3.1).
advertised_in_disco(_) ->
    A = login(<<"alice">>),
    R = ?C:iq(A, <<"get">>, #xmlel{name = <<"query">>, attrs = [{<<"xmlns">>, ?NS_DISCO_INFO}]},
              [{<<"to">>, <<"localhost">>}]),
    Features = [throng_xml:attr(<<"var">>, F)
                || #xmlel{name = <<"feature">>} = F <- throng_xml:subels(throng_xml:subel(R, <<"query">>))],
    ?assert(lists:member(?NS, Features)).

%% A new account's list is empty (§3.2).
empty_list(_) ->
    ?assertEqual([], blocklist(login(<<"alice">>))).

%% Blocked JIDs are listed, normalized and without duplicates (§3.3).
block_and_list(_) ->
    A = login(<<"alice">>),
    ?assertEqual(<<"result">>, type(block(A, [<<"Bob@LocalHost">>, <<"carol@localhost">>]))),
    ?assertEqual(<<"result">>, type(block(A, [<<"bob@localhost">>]))),
    ?assertEqual([<<"bob@localhost">>, <<"carol@localhost">>], blocklist(A)).

%% A change is pushed to every resource that asked for the list, the
%% sending one included, and to no other (§3.3).
push_to_resources_that_asked(_) ->
    A1 = login(<<"alice">>, <<"one">>),
    A2 = login(<<"alice">>, <<"two">>),
    A3 = login(<<"alice">>, <<"three">>),
    [] = blocklist(A1),
    [] = blocklist(A2),
    Id = <<"b1">>,
    ?C:send(A1, #xmlel{name = <<"iq">>, attrs = [{<<"type">>, <<"set">>}, {<<"id">>, Id}],
                       children = [el(<<"block">>, [<<"carol@localhost">>])]}),
    Got = [?C:recv_stanza(A1), ?C:recv_stanza(A1)],
    ?assertEqual([<<"result">>, <<"set">>], lists:sort([type(S) || S <- Got])),
    [Push1] = [S || S <- Got, type(S) =:= <<"set">>],
    Push2 = ?C:recv_stanza(A2),
    [?assertEqual([<<"carol@localhost">>],
                  [throng_xml:attr(<<"jid">>, I)
                   || I <- throng_xml:subels(throng_xml:subel(P, <<"block">>, ?NS))])
     || P <- [Push1, Push2]],
    ?assertEqual(<<"alice@localhost">>, throng_xml:attr(<<"from">>, Push2)),
    ?C:expect_nothing(A3, 300).

%% A block with no item is a bad request (§3.3).
block_without_items_is_bad_request(_) ->
    A = login(<<"alice">>),
    R = block(A, []),
    ?assertEqual(<<"bad-request">>, condition(R)).

%% An item whose JID does not parse: jid-malformed, nothing blocked.
malformed_jid(_) ->
    A = login(<<"alice">>),
    R = block(A, [<<"bob@localhost">>, <<"a@b@c">>]),
    ?assertEqual(<<"jid-malformed">>, condition(R)),
    ?assertEqual([], blocklist(A)).

%% Unblocking one JID leaves the others (§3.4).
unblock_one(_) ->
    A = login(<<"alice">>),
    block(A, [<<"bob@localhost">>, <<"carol@localhost">>]),
    ?assertEqual(<<"result">>, type(unblock(A, [<<"bob@localhost">>]))),
    ?assertEqual([<<"carol@localhost">>], blocklist(A)).

%% An unblock with no item empties the list, and the push lists nothing (§3.5).
unblock_all(_) ->
    A = login(<<"alice">>),
    [] = blocklist(A),
    block(A, [<<"bob@localhost">>, <<"carol@localhost">>]),
    ?C:flush(A),
    Id = <<"u1">>,
    ?C:send(A, #xmlel{name = <<"iq">>, attrs = [{<<"type">>, <<"set">>}, {<<"id">>, Id}],
                      children = [el(<<"unblock">>, [])]}),
    Got = [?C:recv_stanza(A), ?C:recv_stanza(A)],
    [Push] = [S || S <- Got, type(S) =:= <<"set">>],
    ?assertEqual([], throng_xml:subels(throng_xml:subel(Push, <<"unblock">>, ?NS))),
    ?assertEqual([], blocklist(A)).

%% Blocking a JID already blocked changes nothing and pushes nothing.
nothing_changes_no_push(_) ->
    A = login(<<"alice">>),
    [] = blocklist(A),
    block(A, [<<"bob@localhost">>]),
    ?C:flush(A),
    ?assertEqual(<<"result">>, type(block(A, [<<"bob@localhost">>]))),
    ?C:expect_nothing(A, 300).

%% A message from a blocked JID is not delivered; its sender gets
%% service-unavailable (§3.5).
message_from_blocked_bounced(_) ->
    A = online(<<"alice">>, <<"r">>),
    B = online(<<"bob">>, <<"r">>),
    block(A, [<<"bob@localhost">>]),
    settle([A, B]),
    ?C:send(B, ?C:message(<<"alice@localhost">>, <<"chat">>, <<"hi">>)),
    E = ?C:recv_stanza(B),
    ?assertEqual(<<"error">>, type(E)),
    ?assertEqual(<<"service-unavailable">>, condition(E)),
    ?C:send(B, ?C:message(<<"alice@localhost/r">>, <<"chat">>, <<"hi again">>)),
    ?assertEqual(<<"service-unavailable">>, condition(?C:recv_stanza(B))),
    ?C:expect_nothing(A, 300).

%% The user cannot send to a JID it blocked: not-acceptable with
%% <blocked xmlns='urn:xmpp:blocking:errors'/> (§3.6).
message_to_blocked_refused(_) ->
    A = online(<<"alice">>, <<"r">>),
    B = online(<<"bob">>, <<"r">>),
    block(A, [<<"bob@localhost">>]),
    settle([A, B]),
    ?C:send(A, ?C:message(<<"bob@localhost">>, <<"chat">>, <<"hi">>)),
    E = ?C:recv_stanza(A),
    ?assertEqual(<<"error">>, type(E)),
    ?assertEqual(<<"bob@localhost">>, throng_xml:attr(<<"from">>, E)),
    ?assertEqual(<<"not-acceptable">>, condition(E)),
    ?assertNotEqual(undefined, throng_xml:subel(throng_xml:subel(E, <<"error">>),
                                                <<"blocked">>, ?NS_ERRORS)),
    ?C:expect_nothing(B, 300).

%% An IQ get from a blocked JID, to a full JID or answered by the server
%% for the account, gets service-unavailable (§3.5).
iq_from_blocked(_) ->
    A = online(<<"alice">>, <<"r">>),
    B = online(<<"bob">>, <<"r">>),
    block(A, [<<"bob@localhost">>]),
    settle([A, B]),
    Version = #xmlel{name = <<"query">>, attrs = [{<<"xmlns">>, <<"jabber:iq:version">>}]},
    R1 = iq(B, <<"get">>, Version, [{<<"to">>, <<"alice@localhost/r">>}]),
    ?assertEqual(<<"service-unavailable">>, condition(R1)),
    Last = #xmlel{name = <<"query">>, attrs = [{<<"xmlns">>, <<"jabber:iq:last">>}]},
    R2 = iq(B, <<"get">>, Last, [{<<"to">>, <<"alice@localhost">>}]),
    ?assertEqual(<<"service-unavailable">>, condition(R2)),
    ?C:expect_nothing(A, 300).

%% Blocking a subscribed contact sends it unavailable presence; from then on
%% neither sees the other's presence.
presence_hidden_both_ways(_) ->
    A = online(<<"alice">>, <<"r">>),
    B = online(<<"bob">>, <<"r">>),
    settle([A, B]),
    block(A, [<<"bob@localhost">>]),
    P = ?C:recv_stanza(B),
    ?assertEqual({<<"presence">>, <<"unavailable">>, <<"alice@localhost/r">>},
                 {P#xmlel.name, type(P), throng_xml:attr(<<"from">>, P)}),
    settle([A, B]),
    Away = #xmlel{name = <<"presence">>, children = [#xmlel{name = <<"show">>,
                                                           children = [{xmlcdata, <<"away">>}]}]},
    ?C:send(A, Away),
    ?C:send(B, Away),
    %% Alice sees her own presence come back, not Bob's.
    Own = ?C:recv_stanza(A),
    ?assertEqual(<<"alice@localhost/r">>, throng_xml:attr(<<"from">>, Own)),
    ?C:expect_nothing(A, 300),
    Own2 = ?C:recv_stanza(B),
    ?assertEqual(<<"bob@localhost/r">>, throng_xml:attr(<<"from">>, Own2)),
    ?C:expect_nothing(B, 300),
    %% A new resource of Bob's does not get Alice's presence either.
    B2 = online(<<"bob">>, <<"two">>),
    Froms = collect_froms(B2),
    ?assertNot(lists:any(fun(F) -> binary:match(F, <<"alice">>) =/= nomatch end, Froms)).

collect_froms(C) ->
    case ?C:recv(C, 300) of
        #xmlel{} = El -> [throng_xml:attr(<<"from">>, El, <<>>) | collect_froms(C)];
        _ -> []
    end.

%% Unblocking a subscribed contact sends it the user's current presence.
unblock_sends_presence(_) ->
    A = online(<<"alice">>, <<"r">>),
    B = online(<<"bob">>, <<"r">>),
    block(A, [<<"bob@localhost">>]),
    settle([A, B]),
    unblock(A, [<<"bob@localhost">>]),
    P = ?C:recv_stanza(B),
    ?assertEqual({<<"presence">>, undefined, <<"alice@localhost/r">>},
                 {P#xmlel.name, throng_xml:attr(<<"type">>, P), throng_xml:attr(<<"from">>, P)}).

%% A subscription request from a blocked JID does not reach the user, now
%% or at its next login.
subscription_request_from_blocked_dropped(_) ->
    A = online(<<"alice">>, <<"r">>),
    block(A, [<<"carol@localhost">>]),
    settle([A]),
    Cc = online(<<"carol">>, <<"r">>),
    ?C:send(Cc, #xmlel{name = <<"presence">>, attrs = [{<<"to">>, <<"alice@localhost">>},
                                                       {<<"type">>, <<"subscribe">>}]}),
    ?C:expect_nothing(A, 300),
    ?C:close(A),
    timer:sleep(200),
    A2 = online(<<"alice">>, <<"again">>),
    Froms = collect_froms(A2),
    ?assertNot(lists:member(<<"carol@localhost">>, Froms)).

%% A message from a blocked JID to an offline user is refused, not stored.
offline_message_from_blocked_refused(_) ->
    A = login(<<"alice">>),
    block(A, [<<"bob@localhost">>]),
    ?C:close(A),
    throng_ct:wait_until(fun() -> throng_sm:resources({<<"alice">>, <<"localhost">>}) =:= [] end, 5000),
    B = login(<<"bob">>),
    ?C:send(B, ?C:message(<<"alice@localhost">>, <<"chat">>, <<"while you were out">>)),
    ?assertEqual(<<"service-unavailable">>, condition(?C:recv_stanza(B))),
    ?assertEqual(0, throng_storage:offline_count(<<"alice">>, <<"localhost">>)).

%% Another user asking for someone's list gets service-unavailable.
others_cannot_read_the_list(_) ->
    A = login(<<"alice">>),
    block(A, [<<"carol@localhost">>]),
    B = login(<<"bob">>),
    R = ?C:iq(B, <<"get">>, el(<<"blocklist">>, []), [{<<"to">>, <<"alice@localhost">>}]),
    ?assertEqual(<<"service-unavailable">>, condition(R)).

%% Beyond max_items a block is refused and changes nothing.
limit(_) ->
    A = login(<<"alice">>),
    ?assertEqual(<<"result">>, type(block(A, [<<"bob@localhost">>, <<"carol@localhost">>]))),
    R = block(A, [<<"dave@localhost">>]),
    ?assertEqual(<<"not-acceptable">>, condition(R)),
    ?assertEqual([<<"bob@localhost">>, <<"carol@localhost">>], blocklist(A)).

%% The list is durable: after a restart it is listed and enforced.
survives_restart(_) ->
    A = login(<<"alice">>),
    block(A, [<<"bob@localhost">>]),
    ?C:close(A),
    throng_ct:restart(),
    A2 = online(<<"alice">>, <<"r">>),
    ?assertEqual([<<"bob@localhost">>], blocklist(A2)),
    B = online(<<"bob">>, <<"r">>),
    settle([A2, B]),
    ?C:send(B, ?C:message(<<"alice@localhost/r">>, <<"chat">>, <<"hi">>)),
    ?assertEqual(<<"service-unavailable">>, condition(?C:recv_stanza(B))).

%% Removing the account removes its list.
removed_account_forgotten(_) ->
    A = login(<<"alice">>),
    block(A, [<<"bob@localhost">>]),
    ?C:close(A),
    ok = throng_auth:unregister(<<"alice">>, <<"localhost">>),
    ?assertEqual(not_found, throng_storage:kv_get(blocking, {<<"alice">>, <<"localhost">>})).

%% An item with a resource blocks that resource only (XEP-0016 §2.1).
full_jid_item_blocks_one_resource(_) ->
    A = online(<<"alice">>, <<"r">>),
    B1 = online(<<"bob">>, <<"one">>),
    B2 = online(<<"bob">>, <<"two">>),
    block(A, [<<"bob@localhost/one">>]),
    settle([A, B1, B2]),
    ?C:send(B1, ?C:message(<<"alice@localhost/r">>, <<"chat">>, <<"from one">>)),
    ?assertEqual(<<"service-unavailable">>, condition(?C:recv_stanza(B1))),
    ?C:send(B2, ?C:message(<<"alice@localhost/r">>, <<"chat">>, <<"from two">>)),
    M = ?C:recv_stanza(A),
    ?assertEqual(<<"bob@localhost/two">>, throng_xml:attr(<<"from">>, M)).

%%% The filter of the users that have a list (throng_kv_filter)

%% Once the node's filter is trusted, a user who never blocked anyone costs
%% no store read: not when a message for it arrives while it is offline,
%% not when it logs in. A user with a list is still read, and enforced.
users_without_a_list_cost_no_read(_) ->
    A = login(<<"alice">>),
    block(A, [<<"bob@localhost">>]),
    ?C:close(A),
    filter_ready(),
    B = login(<<"bob">>),
    Reads = counting_reads(fun() ->
        ?C:send(B, ?C:message(<<"carol@localhost">>, <<"chat">>, <<"for later">>)),
        throng_ct:wait_until(fun() -> throng_storage:offline_count(<<"carol">>, <<"localhost">>) =:= 1 end, 5000),
        C = login(<<"carol">>),
        ?C:close(C)
    end),
    ?assertEqual(0, Reads),
    %% Alice has a list: it is read, and Bob's message refused.
    Reads2 = counting_reads(fun() ->
        ?C:send(B, ?C:message(<<"alice@localhost">>, <<"chat">>, <<"hello?">>)),
        ?assertEqual(<<"service-unavailable">>, condition(?C:recv_stanza(B)))
    end),
    ?assert(Reads2 >= 1, Reads2),
    ?assertEqual(0, throng_storage:offline_count(<<"alice">>, <<"localhost">>)).

%% A list made after the filter was built is in it at once: the blocked
%% sender is refused while the user is offline.
block_made_after_the_filter_is_enforced(_) ->
    filter_ready(),
    ?assertNot(throng_kv_filter:maybe(blocking, {<<"alice">>, <<"localhost">>})),
    A = login(<<"alice">>),
    block(A, [<<"bob@localhost">>]),
    ?C:close(A),
    throng_ct:wait_until(fun() -> throng_sm:resources({<<"alice">>, <<"localhost">>}) =:= [] end, 5000),
    B = login(<<"bob">>),
    ?C:send(B, ?C:message(<<"alice@localhost">>, <<"chat">>, <<"hello?">>)),
    ?assertEqual(<<"service-unavailable">>, condition(?C:recv_stanza(B))),
    ?assertEqual(0, throng_storage:offline_count(<<"alice">>, <<"localhost">>)).

%% After a change of the member list the filter is not trusted (a
%% broadcast may have been lost on a dropped link): the store is read,
%% and the filter built again from it. The list here is written to the
%% store directly, as if its broadcast had been lost.
filter_not_trusted_after_a_member_change(_) ->
    filter_ready(),
    ok = throng_storage:kv_put(blocking, {<<"alice">>, <<"localhost">>}, [<<"bob@localhost">>]),
    ?assertNot(throng_kv_filter:maybe(blocking, {<<"alice">>, <<"localhost">>})),
    ok = throng_members:set(['ghost@127.0.0.1']),
    ok = throng_members:set([]),
    ?assertNot(throng_kv_filter:ready(blocking)),
    B = login(<<"bob">>),
    ?C:send(B, ?C:message(<<"alice@localhost">>, <<"chat">>, <<"one">>)),
    ?assertEqual(<<"service-unavailable">>, condition(?C:recv_stanza(B))),
    filter_ready(),
    ?assert(throng_kv_filter:maybe(blocking, {<<"alice">>, <<"localhost">>})),
    ?C:send(B, ?C:message(<<"alice@localhost">>, <<"chat">>, <<"two">>)),
    ?assertEqual(<<"service-unavailable">>, condition(?C:recv_stanza(B))),
    ?assertEqual(0, throng_storage:offline_count(<<"alice">>, <<"localhost">>)).

%% The filter is sized for the lists there are (twice as many, at least
%% 1,024, 8 bytes each), not fixed: 8 KiB for a bucket of a few lists. One
%% that takes more lists than it was sized for is built again, bigger, and
%% holds every user that has one.
filter_sized_for_its_bucket(_) ->
    filter_ready(),
    ?assertEqual(8192, filter_bytes()),
    Users = [{<<"u", (integer_to_binary(I))/binary>>, <<"localhost">>} || I <- lists:seq(1, 1500)],
    %% As a block writes them: the store, then every node's cache and filter.
    [begin
         ok = throng_storage:kv_put(blocking, U, [<<"x@localhost">>]),
         ok = throng_mod_blocking:cache_update(U, [<<"x@localhost">>])
     end || U <- Users],
    throng_ct:wait_until(fun() -> filter_bytes() > 8192 end, 10000),
    %% 1,500 lists when it was built again (or a few more, if it was built
    %% while they were written): room for twice as many.
    ?assert(filter_bytes() >= 2 * 1025 * 8, filter_bytes()),
    ?assert(filter_bytes() =< 2 * 1500 * 8, filter_bytes()),
    ?assert(lists:all(fun(U) -> throng_kv_filter:maybe(blocking, U) end, Users)),
    ?assertNot(throng_kv_filter:maybe(blocking, {<<"nobody">>, <<"localhost">>})).

filter_bytes() ->
    [{_, _, Bloom}] = ets:lookup(throng_kv_filter, {blocking, current}),
    throng_bloom:bytes(Bloom).

%% The filter is built on the first question; waits until it is trusted.
filter_ready() ->
    _ = throng_kv_filter:maybe(blocking, {<<"nobody">>, <<"localhost">>}),
    throng_ct:wait_until(fun() -> throng_kv_filter:ready(blocking) end, 5000).

%% How many times the node read a blocklist from the store while F ran.
counting_reads(F) ->
    MFA = {throng_mod_blocking, read, 1},
    1 = erlang:trace_pattern(MFA, true, [call_count]),
    try
        F(),
        {call_count, N} = erlang:trace_info(MFA, call_count),
        N
    after
        erlang:trace_pattern(MFA, false, [call_count])
    end.
