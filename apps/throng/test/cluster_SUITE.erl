%% @doc A Throng cluster of three nodes (OTP `peer'), driven over real
%% sockets: RFC 6121 routing and presence between users on different nodes,
%% priorities across nodes, "newer session wins" across nodes, kick,
%% roster pushes to every resource, offline storage when the last resource
%% leaves, the loss of a node (`halt' without any clean-up) and its return,
%% the shared client port (SO_REUSEPORT), and the message archive of users
%% on nodes that keep no copy of the tables.
%%
%% Node 1 keeps the Mnesia tables (cluster.db_nodes); nodes 2 and 3 keep no
%% copy and use them remotely; nodes 2 and 3 join through cluster.seeds.
-module(cluster_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").
-include("throng.hrl").

-compile([export_all, nowarn_export_all]).

-define(C, throng_test_client).
-define(WAIT, 10000).
%% The pool's nodes (node1 keeps the tables in most cases) and its process.
-define(POOLED, [node1, node2, node3]).
-define(POOL, cluster_suite_pool).

all() ->
    [members_and_status, message_to_bare_and_full_jid, presence_across_nodes,
     priority_across_nodes, newer_session_wins_across_nodes, kick_on_another_node,
     roster_push_to_every_resource, offline_when_last_resource_leaves,
     directory_is_sharded, node_loss_and_return, shared_port, full_node_stops_listening,
     resumption_on_another_node_fails_cleanly, netsplit_heals, stopped_db_node_comes_back,
     vcard_hash_across_nodes, archive_across_nodes, motd_on_every_node,
     blocklists_across_a_restart, archive_preferences_across_nodes,
     archive_write_does_not_wait_for_the_fsync, archive_write_waits_for_the_fsync_with_no_delay,
     archive_copies_take_no_transaction, archive_written_from_here_for_an_older_db_node,
     archive_slots_kept_taken_and_stale, archive_slot_claimed_again_on_new_storage,
     one_lookup_per_message, login_reads_cost_one_round_trip_each,
     sent_carbons_ask_the_home_until_alone, message_routed_at_its_home,
     routed_at_home_in_order, handed_off_stanza_survives_its_home,
     iq_to_an_account_answered_where_sent, sent_to_the_home_node,
     resumed_at_home_through_another_node, dead_session_in_the_directory,
     stuck_session_on_another_node_is_replaced, queued_directory_write_of_a_dead_node,
     slow_home_still_replaces_the_older_session, inflight_of_a_dead_node_goes_back,
     inflight_recovered_when_the_first_member_dies_too,
     message_to_a_detached_session_survives_its_node, detached_mark_follows_the_session,
     inflight_recovered_after_a_restart_of_the_membership_process,
     sweep_leaves_the_inflight_of_a_running_node, detached_mark_after_the_members_change_back,
     keep_at_a_silent_node_holds_up_no_one_else, private_and_pep_writes_while_a_node_hangs,
     archive_key_made_while_a_node_hangs, kept_unavailable_goes_to_a_member_when_its_node_stops,
     kept_unavailable_survives_a_kill_of_its_node, kept_unavailable_copy_moves_when_its_holder_dies,
     kept_unavailable_survives_a_crash_of_its_process,
     kept_unavailable_is_not_multiplied_by_netsplits].

suite() ->
    [{timetrap, {minutes, 5}}].

init_per_suite(Config) ->
    case node() of
        nonode@nohost -> {ok, _} = throng_ct:start_distribution(cluster_suite, shortnames);
        _ -> ok
    end,
    start_pool(),
    Config.

end_per_suite(_Config) ->
    stop_pool(),
    _ = net_kernel:stop(),
    ok.

init_per_testcase(sweep_leaves_the_inflight_of_a_running_node = TC, Config) ->
    %% Nodes sharing a PostgreSQL database, each alone (no seeds, and not
    %% meshed through this node's connections), started by the case.
    put(case_dir, atom_to_list(TC)),
    PG = throng_pg:start(),
    put(node_config, #{storage => throng_pg:storage(PG, throng_pg:new_database(PG))}),
    put(lone, true),
    [{pg, PG}, {names, [list_to_atom(atom_to_list(TC) ++ "_" ++ [L]) || L <- "abc"]} | Config];
init_per_testcase(TC, Config) ->
    put(case_dir, atom_to_list(TC)),
    %% The three nodes of the pool, their applications stopped; each gets
    %% the case's configuration and data directories below.
    ok = reset_pool(),
    Names0 = ?POOLED,
    %% The db node (the first started) is the last member in sorted order:
    %% the first member can die without the tables.
    Names = case TC of
                inflight_recovered_when_the_first_member_dies_too -> lists:reverse(Names0);
                _ -> Names0
            end,
    TC =:= full_node_stops_listening andalso
        put(shared_opts, #{hd(Names) => #{max_connections => 3, when_full => stop_listening}}),
    TC =:= archive_write_waits_for_the_fsync_with_no_delay andalso
        put(node_config, #{storage => #{archive_sync_delay => 0}}),
    lists:member(TC, [message_routed_at_its_home, routed_at_home_in_order,
                      handed_off_stanza_survives_its_home, iq_to_an_account_answered_where_sent,
                      archive_copies_take_no_transaction,
                      keep_at_a_silent_node_holds_up_no_one_else])
        andalso put(node_config, #{cluster => #{route_at_home => true}}),
    lists:member(TC, [sent_to_the_home_node, resumed_at_home_through_another_node])
        andalso put(node_address, true),
    Nodes = start_cluster(Config, Names),
    wait_members(Nodes),
    N1 = hd(Nodes),
    [ok = erpc:call(N1, throng_ct, register, [U, <<"password">>])
     || U <- [<<"alice">>, <<"bob">>, <<"carol">>]],
    ok = erpc:call(N1, throng_ct, mutual, [<<"alice">>, <<"bob">>]),
    [{nodes, Nodes} | Config].

end_per_testcase(_TC, Config) ->
    %% The pool's nodes stay for the next case, which stops their
    %% applications first; after a failure they go too (the next case
    %% boots new ones), so that no failure leaves anything behind.
    Keep = ?config(tc_status, Config) =:= ok,
    [catch peer:stop(P) || {N, P} <- get_peers_by_node(), not (Keep andalso pooled(N))],
    case ?config(pg, Config) of
        undefined -> ok;
        PG -> throng_pg:stop(PG)
    end,
    erase(lone),
    erase(peers),
    erase(shared_opts),
    erase(node_config),
    erase(node_address),
    ok.

%%% Cases

members_and_status(Config) ->
    [N1, N2, N3] = Nodes = ?config(nodes, Config),
    [?assertEqual(lists:sort(Nodes), erpc:call(N, throng_cluster, members, [])) || N <- Nodes],
    A = login(<<"alice">>, <<"a">>, N2),
    ?C:send(A, ?C:presence([])),
    _ = ?C:recv_stanza(A),
    Status = erpc:call(N3, throng_cluster, status, []),
    ?assertEqual(lists:sort(Nodes), [N || #{node := N} <- Status]),
    ?assertEqual([{N1, 0}, {N2, 1}, {N3, 0}],
                 lists:sort([{N, S} || #{node := N, sessions := S} <- Status])),
    {0, Text} = erpc:call(N1, throng_ctl, run, ["sessions", []]),
    ?assertEqual(<<"alice@localhost/a\n">>, iolist_to_binary(Text)),
    ?C:close(A).

message_to_bare_and_full_jid(Config) ->
    [N1, N2, _] = ?config(nodes, Config),
    A = online(<<"alice">>, <<"a">>, N1),
    B = online(<<"bob">>, <<"b">>, N2),
    ?C:flush(A), ?C:flush(B),
    ?C:send(A, ?C:message(<<"bob@localhost">>, <<"chat">>, <<"to bare">>)),
    ?assertEqual(<<"to bare">>, body(?C:recv_stanza(B))),
    ?C:send(A, ?C:message(<<"bob@localhost/b">>, <<"chat">>, <<"to full">>)),
    M = ?C:recv_stanza(B),
    ?assertEqual(<<"to full">>, body(M)),
    ?assertEqual(<<"alice@localhost/a">>, throng_xml:attr(<<"from">>, M)),
    %% And back, to a full JID on the other node.
    ?C:send(B, ?C:message(<<"alice@localhost/a">>, <<"normal">>, <<"back">>)),
    ?assertEqual(<<"back">>, body(?C:recv_stanza(A))),
    %% An IQ to a full JID on another node reaches it.
    ?C:send(A, #xmlel{name = <<"iq">>, attrs = [{<<"to">>, <<"bob@localhost/b">>},
                                               {<<"type">>, <<"get">>}, {<<"id">>, <<"q1">>}],
                      children = [#xmlel{name = <<"query">>, attrs = [{<<"xmlns">>, <<"urn:x">>}]}]}),
    Q = ?C:recv_stanza(B),
    ?assertEqual(<<"q1">>, throng_xml:attr(<<"id">>, Q)),
    [?C:close(C) || C <- [A, B]].

%% XEP-0313 between nodes that keep no copy: Alice on node 2 writes both
%% archives (in a transaction on node 1's tables: another node may take
%% the same id); Bob on node 3 gets the stanza ids node 2 made and finds
%% them in his archive, read through node 3 (the key of the ids is one for
%% the cluster); the db node holds both copies.
archive_across_nodes(Config) ->
    [N1, N2, N3] = ?config(nodes, Config),
    A = online(<<"alice">>, <<"a">>, N2),
    B = online(<<"bob">>, <<"b">>, N3),
    ?C:flush(A), ?C:flush(B),
    [?C:send(A, ?C:message(<<"bob@localhost">>, <<"chat">>, Body)) || Body <- [<<"one">>, <<"two">>]],
    Got = [?C:recv_stanza(B) || _ <- [1, 2]],
    ?assertEqual([<<"one">>, <<"two">>], [body(M) || M <- Got]),
    Ids = [throng_xml:attr(<<"id">>, throng_xml:subel(M, <<"stanza-id">>, <<"urn:xmpp:sid:0">>))
           || M <- Got],
    ?C:send(B, #xmlel{name = <<"iq">>, attrs = [{<<"type">>, <<"set">>}, {<<"id">>, <<"mam1">>}],
                      children = [#xmlel{name = <<"query">>,
                                         attrs = [{<<"xmlns">>, <<"urn:xmpp:mam:2">>}]}]}),
    [R1, R2, Fin] = [?C:recv_stanza(B) || _ <- [1, 2, 3]],
    ?assertEqual(Ids, [throng_xml:attr(<<"id">>, throng_xml:subel(R, <<"result">>)) || R <- [R1, R2]]),
    ?assertEqual(<<"mam1">>, throng_xml:attr(<<"id">>, Fin)),
    ?assertEqual({2, 2}, archived_counts(N1)),
    [?C:close(C) || C <- [A, B]].

%% XEP-0441 preferences set on one node are obeyed by another whose
%% filter of the users with preferences was built before (the filter
%% learns them by broadcast): Bob, on node 3, archives nothing from Alice;
%% Alice's message, archived by node 2, is in her archive only.
archive_preferences_across_nodes(Config) ->
    [N1, N2, N3] = ?config(nodes, Config),
    _ = erpc:call(N2, throng_kv_filter, maybe, [throng_mod_mam, {<<"nobody">>, <<"localhost">>}]),
    wait_until(fun() -> erpc:call(N2, throng_kv_filter, ready, [throng_mod_mam]) end),
    A = online(<<"alice">>, <<"a">>, N2),
    B = online(<<"bob">>, <<"b">>, N3),
    ?C:flush(A), ?C:flush(B),
    R = ?C:iq(B, <<"set">>, #xmlel{name = <<"prefs">>,
                                   attrs = [{<<"xmlns">>, <<"urn:xmpp:mam:2">>},
                                            {<<"default">>, <<"always">>}],
                                   children = [#xmlel{name = <<"never">>,
                                                      children = [#xmlel{name = <<"jid">>,
                                                                         children = [{xmlcdata, <<"alice@localhost">>}]}]}]}),
    ?assertEqual(<<"result">>, throng_xml:attr(<<"type">>, R)),
    wait_until(fun() -> erpc:call(N2, throng_kv_filter, maybe, [throng_mod_mam, {<<"bob">>, <<"localhost">>}]) end),
    ?assert(erpc:call(N2, throng_kv_filter, ready, [throng_mod_mam])),
    ?C:send(A, ?C:message(<<"bob@localhost">>, <<"chat">>, <<"not kept by bob">>)),
    ?assertEqual(<<"not kept by bob">>, body(?C:recv_stanza(B))),
    Count = fun(U) -> erpc:call(N1, throng_storage, mam_count, [U, <<"localhost">>, #mam_filter{}]) end,
    ?assertEqual({1, 0}, {Count(<<"alice">>), Count(<<"bob">>)}),
    [?C:close(C) || C <- [A, B]].

%% An archived message is committed on the db node before the sender's
%% node goes on (the recipient's stanza id is in the table), and the db
%% node fsyncs it by itself a moment later: nobody waits for that fsync
%% (no throng_mnesia_sync:sync/0 on the db node, one sync or more run).
archive_write_does_not_wait_for_the_fsync(Config) ->
    {N1, A, B} = archiving_pair(Config),
    Counted = [{throng_mnesia_sync, sync, 0}, {throng_mnesia_sync, sync_worker, 0}],
    [_ = erpc:call(N1, erlang, trace_pattern, [MFA, true, [call_count]]) || MFA <- Counted],
    ?C:send(A, ?C:message(<<"bob@localhost">>, <<"chat">>, <<"archived">>)),
    M = ?C:recv_stanza(B),
    Id = throng_xml:attr(<<"id">>, throng_xml:subel(M, <<"stanza-id">>, <<"urn:xmpp:sid:0">>)),
    ?assert(is_binary(Id)),
    ?assertEqual({2, 2}, archived_counts(N1)),
    wait_until(fun() -> element(2, erpc:call(N1, erlang, trace_info, [{throng_mnesia_sync, sync_worker, 0},
                                                                       call_count])) >= 1 end),
    ?assertEqual({call_count, 0}, erpc:call(N1, erlang, trace_info, [{throng_mnesia_sync, sync, 0}, call_count])),
    [?C:close(C) || C <- [A, B]].

%% With storage.archive_sync_delay 0 a message's archived copies wait for
%% the db node's fsync before the message goes on: the sender's and the
%% recipient's copies are one call to the db node (archive_rows/2), which
%% waits for one throng_mnesia_sync:sync/0 there.
archive_write_waits_for_the_fsync_with_no_delay(Config) ->
    {N1, A, B} = archiving_pair(Config),
    MFAs = [{throng_mnesia_sync, sync, 0}, {throng_storage_mnesia, archive_rows, 2}],
    [_ = erpc:call(N1, erlang, trace_pattern, [MFA, true, [call_count]]) || MFA <- MFAs],
    ?C:send(A, ?C:message(<<"bob@localhost">>, <<"chat">>, <<"archived">>)),
    <<"archived">> = body(?C:recv_stanza(B)),
    ?assertEqual([{call_count, 1}, {call_count, 1}],
                 [erpc:call(N1, erlang, trace_info, [MFA, call_count]) || MFA <- MFAs]),
    ?assertEqual({2, 2}, archived_counts(N1)),
    [?C:close(C) || C <- [A, B]].

%% A db node that does not know archive_rows/2 (an older version, in a
%% rolling upgrade): the serving node writes the copies itself, as Mnesia
%% writes to tables it does not keep, and nothing is lost.
archive_written_from_here_for_an_older_db_node(Config) ->
    {N1, A, B} = archiving_pair(Config),
    ok = erpc:call(N1, meck, new, [throng_storage_mnesia, [passthrough, no_link]]),
    ok = erpc:call(N1, meck, delete, [throng_storage_mnesia, archive_rows, 2]),
    ?C:send(A, ?C:message(<<"bob@localhost">>, <<"chat">>, <<"archived">>)),
    M = ?C:recv_stanza(B),
    ?assertEqual(<<"archived">>, body(M)),
    ?assert(is_binary(throng_xml:attr(<<"id">>, throng_xml:subel(M, <<"stanza-id">>,
                                                                 <<"urn:xmpp:sid:0">>)))),
    ?assertEqual({2, 2}, archived_counts(N1)),
    ok = erpc:call(N1, meck, unload, [throng_storage_mnesia]),
    [?C:close(C) || C <- [A, B]].

%% Alice on node 2 and Bob on node 3, after the cluster's first archived
%% message (it stores the key of the stanza ids and claims node 2's id
%% slot: durable writes, waited for, which the cases do not count); N1 is
%% the db node.
archiving_pair(Config) ->
    [N1, N2, N3] = ?config(nodes, Config),
    A = online(<<"alice">>, <<"a">>, N2),
    B = online(<<"bob">>, <<"b">>, N3),
    ?C:flush(A), ?C:flush(B),
    ?C:send(A, ?C:message(<<"bob@localhost">>, <<"chat">>, <<"first">>)),
    <<"first">> = body(?C:recv_stanza(B)),
    {N1, A, B}.

%% The messages in Alice's and Bob's archives, read on the db node.
archived_counts(N1) ->
    Count = fun(U) -> erpc:call(N1, throng_storage, mam_count, [U, <<"localhost">>, #mam_filter{}]) end,
    {Count(<<"alice">>), Count(<<"bob">>)}.

%% Each node gives archive ids of its own slot (throng_mam_slot): an
%% archived copy is a write, not a transaction (none is committed on any
%% node while 40 copies are archived), a message's two copies one call to
%% the db node, and two nodes storing for one user
%% with the same wanted id at once keep every message, under distinct ids.
archive_copies_take_no_transaction(Config) ->
    [N1, N2, N3] = Nodes = ?config(nodes, Config),
    A = online(<<"alice">>, <<"a">>, N2),
    B = online(<<"bob">>, <<"b">>, N3),
    ?C:flush(A), ?C:flush(B),
    %% The first archived messages claim each node's slot and store the
    %% key of the stanza ids (transactions): not counted.
    ?C:send(A, ?C:message(<<"bob@localhost">>, <<"chat">>, <<"first">>)),
    <<"first">> = body(?C:recv_stanza(B)),
    ?C:send(B, ?C:message(<<"alice@localhost">>, <<"chat">>, <<"back">>)),
    <<"back">> = body(?C:recv_stanza(A)),
    Commits = fun() -> lists:sum([erpc:call(N, mnesia, system_info, [transaction_commits])
                                  || N <- Nodes]) end,
    Before = Commits(),
    Rows = {throng_storage_mnesia, archive_rows, 2},
    _ = erpc:call(N1, erlang, trace_pattern, [Rows, true, [call_count]]),
    [begin
         ?C:send(A, ?C:message(<<"bob@localhost">>, <<"chat">>, <<"to bob">>)),
         <<"to bob">> = body(?C:recv_stanza(B)),
         ?C:send(B, ?C:message(<<"alice@localhost">>, <<"chat">>, <<"to alice">>)),
         <<"to alice">> = body(?C:recv_stanza(A))
     end || _ <- lists:seq(1, 10)],
    %% (with a transaction per copy: 40 or more)
    ?assertEqual(0, Commits() - Before),
    %% A message's two copies are one call to the db node: 20, not 40.
    ?assertEqual({call_count, 20}, erpc:call(N1, erlang, trace_info, [Rows, call_count])),
    Query = fun(U) -> erpc:call(N1, throng_storage, mam_query,
                                [U, <<"localhost">>, #mam_filter{}, forward, 100]) end,
    [?assertEqual(22, length(Query(U))) || U <- [<<"alice">>, <<"bob">>]],
    %% Each node that wrote copies has a slot of its own (the recipients'
    %% homes, which route the messages to them and write both copies); its
    %% ids are that slot modulo 64.
    Slots = slots(N1),
    SlotNodes = lists:sort([N || {_, N} <- Slots]),
    Homes = lists:usort([erpc:call(N1, throng_members, home, [{U, <<"localhost">>}])
                         || U <- [<<"alice">>, <<"bob">>]]),
    ?assertEqual(length(Slots), length(lists:usort([S || {S, _} <- Slots]))),
    ?assertEqual(lists:usort(SlotNodes), SlotNodes),
    ?assertEqual([], SlotNodes -- Nodes),
    ?assertEqual([], Homes -- SlotNodes),
    ?assert(lists:all(fun(#mam_msg{id = Id}) -> lists:keymember(Id rem 64, 1, Slots) end,
                      Query(<<"alice">>))),
    %% The same wanted id on two nodes at once, 50 times each.
    Want = os:system_time(microsecond),
    Store = fun(N, I) ->
                    Msg = #mam_msg{id = Want, peer = {<<"x@localhost">>, <<>>},
                                   packet = integer_to_binary(I)},
                    erpc:call(N, throng_storage, mam_store, [<<"carol">>, <<"localhost">>, Msg])
            end,
    Self = self(),
    Pids = [spawn_link(fun() -> Self ! {self(), [Store(N, I) || I <- lists:seq(1, 50)]} end)
            || N <- [N2, N3]],
    Ids = lists:append([receive {P, L} -> L end || P <- Pids]),
    ?assertEqual(100, length(lists:usort(Ids))),
    Kept = Query(<<"carol">>),
    ?assertEqual(100, length(Kept)),
    ?assertEqual(lists:usort(Ids), [Id || #mam_msg{id = Id} <- Kept]),
    [?C:close(C) || C <- [A, B]].

%% Slots: a node that restarts keeps its slot and gives ids above the
%% limit it had reserved; a node that finds every slot taken takes a long
%% unused one (ids above its old limit), and when none is, archives with a
%% transaction under the shared residue 63 without losing a message.
archive_slots_kept_taken_and_stale(Config) ->
    [N1, N2, N3] = Nodes = ?config(nodes, Config),
    Now = os:system_time(microsecond),
    Hour = 3600000000,
    Put = fun(Slot, Value) -> ok = erpc:call(N1, throng_storage, kv_put, [mam_slot, Slot, Value]) end,
    %% Every slot but 61 and 62 is held by a node of the future; 61 by one
    %% gone for two hours; 62 is free.
    [Put(S, {'other@nowhere', Now + Hour}) || S <- lists:seq(0, 60)],
    Put(61, {'gone@nowhere', Now - 2 * Hour}),
    Store = fun(N, U) ->
                    Msg = #mam_msg{id = throng_mam_id_next(N), peer = {<<"x@localhost">>, <<>>},
                                   packet = <<"p">>},
                    erpc:call(N, throng_storage, mam_store, [U, <<"localhost">>, Msg])
            end,
    Id2 = Store(N2, <<"alice">>),
    ?assertEqual(62, Id2 rem 64),
    Id3 = Store(N3, <<"alice">>),
    ?assertEqual(61, Id3 rem 64),
    ?assert(Id3 > Now - 2 * Hour),
    ?assertEqual([{61, N3}, {62, N2}], lists:sort([{S, N} || {S, N} <- slots(N1), N =/= 'other@nowhere'])),
    %% Node 1 finds none: the shared residue, in a transaction.
    Id1 = Store(N1, <<"alice">>),
    ?assertEqual(63, Id1 rem 64),
    Count = fun(U) -> erpc:call(N1, throng_storage, mam_count, [U, <<"localhost">>, #mam_filter{}]) end,
    ?assertEqual(3, Count(<<"alice">>)),
    %% Node 2 restarts: the same slot, ids from its reserved limit on.
    {62, {N2, Limit}} = lists:keyfind(62, 1, slot_rows(N1)),
    Peer2 = proplists:get_value(N2, get_peers_by_node()),
    peer:stop(Peer2),
    wait_until(fun() -> erpc:call(N1, throng_cluster, members, []) =:= lists:sort([N1, N3]) end),
    [_] = start_cluster(Config, [node_name(N2)], N1),
    wait_members(Nodes),
    Again = Store(N2, <<"alice">>),
    ?assertEqual(62, Again rem 64),
    ?assert(Again >= Limit),
    ?assertEqual(4, Count(<<"alice">>)).

%% The application started again in the same runtime on new, empty
%% storage claims its archive slot in that storage: the slot it had in
%% the old one may be another node's there. (Before, the claim was kept
%% in the runtime across the restart: node 2 went on giving ids of its old
%% slot, which a node of the new storage held.)
archive_slot_claimed_again_on_new_storage(Config) ->
    [N1, N2, _] = ?config(nodes, Config),
    Store = fun(N) ->
                    Msg = #mam_msg{id = throng_mam_id_next(N), peer = {<<"x@localhost">>, <<>>},
                                   packet = <<"p">>},
                    erpc:call(N, throng_storage, mam_store, [<<"alice">>, <<"localhost">>, Msg])
            end,
    Slot = Store(N2) rem 64,
    ?assertEqual([{Slot, N2}], slots(N1)),
    %% The cluster again, in the same runtimes, with new data directories.
    put(case_dir, get(case_dir) ++ "-new"),
    ok = reset_pool(),
    Nodes = start_cluster(Config, ?POOLED),
    wait_members(Nodes),
    ?assertEqual([], slots(N1)),
    ok = erpc:call(N1, throng_storage, kv_put,
                   [mam_slot, Slot, {'other@nowhere', os:system_time(microsecond) + 3600000000}]),
    Id = Store(N2),
    ?assertNotEqual(Slot, Id rem 64),
    ?assertEqual([{Id rem 64, N2}], [{S, N} || {S, N} <- slots(N1), N =/= 'other@nowhere']).

throng_mam_id_next(N) ->
    erpc:call(N, throng_mam_id, next, []).

%% The archive id slots: {Slot, Node}.
slots(N) ->
    [{S, Node} || {S, {Node, _}} <- slot_rows(N)].

slot_rows(N) ->
    [{S, V} || S <- erpc:call(N, throng_storage, kv_keys, [mam_slot]),
               {ok, V} <- [erpc:call(N, throng_storage, kv_get, [mam_slot, S])]].

%% With cluster.route_at_home off (the default), routing one chat message asks the
%% recipient's home about the recipient once (throng_sm:memo/1): the
%% archive (does the account exist), the route and the carbons share the
%% answer. Without the memo: 2 asks, and an account read from the store.
one_lookup_per_message(Config) ->
    Nodes = ?config(nodes, Config),
    Home = fun(U) -> erpc:call(hd(Nodes), throng_members, home, [{U, <<"localhost">>}]) end,
    HomeB = Home(<<"bob">>),
    [SenderNode | _] = Nodes -- [HomeB],
    B = online(<<"bob">>, <<"b">>, lists:last(Nodes)),
    A = online(<<"alice">>, <<"a">>, SenderNode),
    ?C:flush(A), ?C:flush(B),
    %% Warm-up (the cluster's first archived message stores a key).
    ?C:send(A, ?C:message(<<"bob@localhost">>, <<"chat">>, <<"first">>)),
    <<"first">> = body(?C:recv_stanza(B)),
    MFA = {throng_sm, home_view, 1},
    _ = erpc:call(HomeB, erlang, trace_pattern, [MFA, true, [call_count]]),
    ?C:send(A, ?C:message(<<"bob@localhost">>, <<"chat">>, <<"counted">>)),
    <<"counted">> = body(?C:recv_stanza(B)),
    {call_count, Asks} = erpc:call(HomeB, erlang, trace_info, [MFA, call_count]),
    %% (alice's own sent carbons asked her home during the warm-up, and
    %% learned she is alone: sent_carbons_ask_the_home_until_alone)
    ct:pal("asks ~p homes ~p", [Asks, {HomeB, Home(<<"alice">>), SenderNode}]),
    ?assertEqual(1, Asks),
    [?C:close(C) || C <- [A, B]].

%% On a node without the tables, each of a login's reads of the store
%% (the credentials with the keys the modules ask for; the roster with its
%% version) costs what a read of one row costs: one round trip to the db
%% node (Mnesia would make one for each row), and a read of one row is one
%% message there (Mnesia's remote read sends three: monitor, request,
%% demonitor). Counted as the sends on the distribution connection to the
%% db node for 20 reads of each kind.
login_reads_cost_one_round_trip_each(Config) ->
    [N1, N2 | _] = ?config(nodes, Config),
    S = <<"localhost">>,
    Keys = [{disabled_accounts, {<<"alice">>, S}}, {vcard, {<<"alice">>, S, photo}}],
    Row = dist_sends(N2, N1, throng_storage, kv_get, [vcard, {<<"alice">>, S, photo}]),
    Login = dist_sends(N2, N1, throng_storage, login_read, [<<"alice">>, S, Keys]),
    Roster = dist_sends(N2, N1, throng_storage, roster_get, [<<"alice">>, S]),
    ct:pal("sends to the db node for 20 reads: one row ~b, login ~b, roster ~b",
           [Row, Login, Roster]),
    ?assertMatch({ok, _, [not_found, not_found]},
                 erpc:call(N2, throng_storage, login_read, [<<"alice">>, S, Keys])),
    ?assertMatch({_, [_]}, erpc:call(N2, throng_storage, roster_get, [<<"alice">>, S])),
    ?assert(Row >= 20),
    ?assert(Row < 40),
    %% Two reads each would be twice the row's count.
    ?assert(Login < Row + 10),
    ?assert(Roster < Row + 10).

%% The sends on Node's distribution connection to To while Node calls M:F(A)
%% 20 times (each call from this node, through another connection).
dist_sends(Node, To, M, F, A) ->
    {To, Port} = lists:keyfind(To, 1, erpc:call(Node, erlang, system_info, [dist_ctrl])),
    Count = fun() ->
                    {ok, [{send_cnt, N}]} = erpc:call(Node, inet, getstat, [Port, [send_cnt]]),
                    N
            end,
    _ = erpc:call(Node, M, F, A),
    Before = Count(),
    [_ = erpc:call(Node, M, F, A) || _ <- lists:seq(1, 20)],
    Count() - Before.

%% A message for a user whose home is a third node is handed to the home,
%% which routes it: every lookup of the recipient there is made by the
%% home's worker for that user, none by a process the sender started there
%% (an erpc call), and the sender's node keeps nothing once the home has
%% confirmed it. Both archive copies are written, the carbons go out.
message_routed_at_its_home(Config) ->
    Nodes = ?config(nodes, Config),
    BobUS = {<<"bob">>, <<"localhost">>},
    {HomeB, A, B} = bob_away_from_home(Nodes),
    Worker = erpc:call(HomeB, erlang, whereis, [erpc:call(HomeB, throng_handoff, worker_for, [BobUS])]),
    Callers = callers(HomeB, BobUS),
    ?C:send(A, ?C:message(<<"bob@localhost">>, <<"chat">>, <<"at home">>)),
    M = ?C:recv_stanza(B),
    ?assertEqual(<<"at home">>, body(M)),
    ?assertNotEqual(undefined, throng_xml:subel(M, <<"stanza-id">>, <<"urn:xmpp:sid:0">>)),
    [_ | _] = Seen = Callers(),
    ?assertEqual([Worker], lists:usort(Seen)),
    %% Confirmed (within a second): no node keeps anything.
    wait_until(fun() -> lists:sum([erpc:call(N, throng_handoff, pending, []) || N <- Nodes]) =:= 0 end),
    %% Both archives hold it.
    wait_until(fun() -> archived_counts(hd(Nodes)) =:= {1, 1} end),
    [?C:close(C) || C <- [A, B]].

%% An IQ to an account (answered by the server for it) and the answer to
%% the session that asked are routed where they are, not at the homes of
%% the account and of the asker: nothing is handed over. A message is.
iq_to_an_account_answered_where_sent(Config) ->
    Nodes = ?config(nodes, Config),
    Homes = [erpc:call(hd(Nodes), throng_members, home, [{U, <<"localhost">>}])
             || U <- [<<"alice">>, <<"bob">>]],
    %% A node that is neither's home (3 nodes, at most 2 homes).
    [Node | _] = Nodes -- Homes,
    A = online(<<"alice">>, <<"a">>, Node),
    B = online(<<"bob">>, <<"b">>, lists:last(Nodes -- [Node])),
    ?C:flush(A), ?C:flush(B),
    %% Bob publishes a vCard (an IQ to his own account).
    Card = #xmlel{name = <<"vCard">>, attrs = [{<<"xmlns">>, <<"vcard-temp">>}],
                  children = [#xmlel{name = <<"FN">>, children = [{xmlcdata, <<"Bob">>}]}]},
    ?C:send(B, #xmlel{name = <<"iq">>, attrs = [{<<"type">>, <<"set">>}, {<<"id">>, <<"s1">>}],
                      children = [Card]}),
    S1 = wait_for(B, fun(El) -> throng_xml:attr(<<"id">>, El) =:= <<"s1">> end),
    ?assertEqual(<<"result">>, throng_xml:attr(<<"type">>, S1)),
    MFA = {throng_handoff, route, 4},
    _ = erpc:call(Node, erlang, trace_pattern, [MFA, true, [call_count]]),
    Get = #xmlel{name = <<"vCard">>, attrs = [{<<"xmlns">>, <<"vcard-temp">>}]},
    ?C:send(A, #xmlel{name = <<"iq">>, attrs = [{<<"to">>, <<"bob@localhost">>}, {<<"type">>, <<"get">>},
                                               {<<"id">>, <<"v1">>}], children = [Get]}),
    R = wait_for(A, fun(El) -> throng_xml:attr(<<"id">>, El) =:= <<"v1">> end),
    ?assertEqual(<<"result">>, throng_xml:attr(<<"type">>, R)),
    Handed = fun() -> {call_count, N} = erpc:call(Node, erlang, trace_info, [MFA, call_count]), N end,
    ?assertEqual(0, Handed()),
    ?C:send(A, ?C:message(<<"bob@localhost">>, <<"chat">>, <<"m">>)),
    <<"m">> = body(?C:recv_stanza(B)),
    ?assertEqual(1, Handed()),
    [?C:close(C) || C <- [A, B]].

%% Messages and presence one user sends another whose home is a third node
%% arrive in the order sent: the messages go through the home's worker for
%% the recipient, and so does the sender's presence broadcast.
routed_at_home_in_order(Config) ->
    {_, A, B} = bob_away_from_home(?config(nodes, Config)),
    Bodies = [integer_to_binary(I) || I <- lists:seq(1, 100)],
    [?C:send(A, ?C:message(To, <<"chat">>, Body))
     || {Body, To} <- lists:zip(Bodies, lists:append(lists:duplicate(50, [<<"bob@localhost">>,
                                                                           <<"bob@localhost/b">>])))],
    ?C:send(A, #xmlel{name = <<"presence">>,
                      children = [#xmlel{name = <<"status">>, children = [{xmlcdata, <<"after">>}]}]}),
    Got = [recv_chat_or_presence(B) || _ <- lists:seq(1, 101)],
    ?assertEqual(Bodies ++ [presence], Got),
    [?C:close(C) || C <- [A, B]].

%% Bob on one node and Alice on another, neither of them bob's home: each
%% message from Alice to Bob is handed to the home. {Home, A, B}.
bob_away_from_home(Nodes) ->
    HomeB = erpc:call(hd(Nodes), throng_members, home, [{<<"bob">>, <<"localhost">>}]),
    [SenderNode, Third] = Nodes -- [HomeB],
    B = online(<<"bob">>, <<"b">>, Third),
    A = online(<<"alice">>, <<"a">>, SenderNode),
    ?C:flush(A), ?C:flush(B),
    {HomeB, A, B}.

recv_chat_or_presence(C) ->
    case ?C:recv_stanza(C) of
        #xmlel{name = <<"presence">>} -> presence;
        El -> body(El)
    end.

%% The home dies before it has routed a stanza handed to it (its worker is
%% held still): the sending node, which kept the stanza, routes it again
%% once the home has left the members, and it reaches the recipient (or,
%% when the recipient's session is not yet entered at its new home, the
%% offline storage): it is not lost.
handed_off_stanza_survives_its_home(Config) ->
    [N1 | _] = Nodes = ?config(nodes, Config),
    %% A user whose home is not node 1 (node 1 keeps the tables, and stays).
    Users = [<<"user", (integer_to_binary(I))/binary>> || I <- lists:seq(1, 30)],
    Home = fun(U) -> erpc:call(N1, throng_members, home, [{U, <<"localhost">>}]) end,
    [T | _] = [U || U <- Users, Home(U) =/= N1],
    ok = erpc:call(N1, throng_ct, register, [T, <<"password">>]),
    H = Home(T),
    [S] = Nodes -- [N1, H],
    Target = online(T, <<"t">>, S),
    A = online(<<"alice">>, <<"a">>, N1),
    ?C:flush(A), ?C:flush(Target),
    ok = erpc:call(H, sys, suspend, [erpc:call(H, throng_handoff, worker_for, [{T, <<"localhost">>}])]),
    ?C:send(A, ?C:message(<<T/binary, "@localhost">>, <<"chat">>, <<"kept">>)),
    wait_until(fun() -> erpc:call(N1, throng_handoff, pending, []) =:= 1 end),
    %% The home dies without any clean-up.
    PeerH = proplists:get_value(H, get_peers_by_node()),
    erpc:cast(H, erlang, halt, [137]),
    [wait_until(fun() -> erpc:call(N, throng_cluster, members, []) =:= lists:sort([N1, S]) end)
     || N <- [N1, S]],
    catch peer:stop(PeerH),
    wait_until(fun() -> erpc:call(N1, throng_handoff, pending, []) =:= 0 end),
    case ?C:recv(Target, 2000) of
        #xmlel{} = El -> ?assertEqual(<<"kept">>, body(El));
        _ -> ?assertEqual(1, erpc:call(N1, throng_storage, offline_count, [T, <<"localhost">>]))
    end,
    ?assertEqual(1, erpc:call(N1, throng_metrics, value, [handoff_routed_again])),
    [?C:close(C) || C <- [A, Target]].

%% A fun returning the processes that called throng_sm:home_view/1 for US
%% on Node since now (a tracer there collects them; a call's trace message
%% is in its queue before the call returns).
callers(Node, US) ->
    Collector = erpc:call(Node, erlang, spawn, [?MODULE, caller_collector, [[]]]),
    MFA = {throng_sm, home_view, 1},
    1 = erpc:call(Node, erlang, trace_pattern, [MFA, [{[US], [], []}], [local]]),
    _ = erpc:call(Node, erlang, trace, [all, true, [call, {tracer, Collector}]]),
    fun() ->
            Collector ! {callers, self()},
            receive {callers, Collector, Pids} -> Pids after ?WAIT -> ct:fail(no_callers) end
    end.

caller_collector(Pids) ->
    receive
        {trace, Pid, call, _} -> caller_collector([Pid | Pids]);
        {callers, From} -> From ! {callers, self(), lists:reverse(Pids)}, caller_collector(Pids)
    end.

%% A session whose account's home is another node asks the home for its
%% own other resources (where its sent carbons go) until the home says it
%% is alone; a new resource of the account, accepted on the home itself or
%% on a third node, makes the home tell it, and the carbons reach the new
%% resource from the next message on.
sent_carbons_ask_the_home_until_alone(Config) ->
    Nodes = ?config(nodes, Config),
    HomeA = erpc:call(hd(Nodes), throng_members, home, [{<<"alice">>, <<"localhost">>}]),
    [SenderNode, Third] = Nodes -- [HomeA],
    B = online(<<"bob">>, <<"b">>, SenderNode),
    A = online(<<"alice">>, <<"a">>, SenderNode),
    ?C:flush(A), ?C:flush(B),
    %% Only the asks about alice's account count: bob's home may be HomeA
    %% too (the homes depend on the host's name), and its lookups of bob,
    %% for routing or when bob's session enters itself again after the
    %% members change, are not the subject here.
    Asks = count_asks(HomeA, {<<"alice">>, <<"localhost">>}),
    Send = fun(Body) ->
                   Before = Asks(),
                   ?C:send(A, ?C:message(<<"bob@localhost">>, <<"chat">>, Body)),
                   Body = body(?C:recv_stanza(B)),
                   Asks() - Before
           end,
    %% Alone: asked once, then not.
    ?assertEqual([1, 0, 0], [Send(M) || M <- [<<"m1">>, <<"m2">>, <<"m3">>]]),
    %% A second resource on the home itself, then one on a third node: each
    %% gets the sent carbon of the very next message.
    [begin
         A2 = login(<<"alice">>, Res, Where),
         <<"result">> = throng_xml:attr(<<"type">>, ?C:iq_skipping(
                          A2, <<"set">>, #xmlel{name = <<"enable">>,
                                                attrs = [{<<"xmlns">>, <<"urn:xmpp:carbons:2">>}]}, [])),
         ?assertEqual(1, Send(<<"to both ", Res/binary>>)),
         Carbon = wait_for(A2, fun(El) -> throng_xml:subel(El, <<"sent">>, <<"urn:xmpp:carbons:2">>)
                                              =/= undefined end),
         ?assertNotEqual(nomatch, binary:match(throng_xml:to_binary(Carbon), <<"to both ", Res/binary>>)),
         ?C:close(A2),
         wait_until(fun() -> length(erpc:call(HomeA, throng_sm, home_view,
                                              [{<<"alice">>, <<"localhost">>}])) =:= 1 end),
         %% Alone again: asked once more, then not.
         ?assertEqual([1, 0], [Send(M) || M <- [<<"after ", Res/binary>>, <<"again ", Res/binary>>]])
     end || {Res, Where} <- [{<<"on-home">>, HomeA}, {<<"on-third">>, Third}]],
    %% The members change (the third node goes; alice's home stays): what
    %% the session remembered carries the old epoch, so it asks again once.
    peer:stop(proplists:get_value(Third, get_peers_by_node())),
    [wait_until(fun() -> erpc:call(N, throng_cluster, members, []) =:= lists:sort([HomeA, SenderNode]) end)
     || N <- [HomeA, SenderNode]],
    ?assertEqual(HomeA, erpc:call(SenderNode, throng_members, home, [{<<"alice">>, <<"localhost">>}])),
    %% Bob's session, whose home may have moved with the members, is in
    %% the directory again (else the next message would go offline).
    HomeB = erpc:call(SenderNode, throng_members, home, [{<<"bob">>, <<"localhost">>}]),
    wait_until(fun() -> length(erpc:call(HomeB, throng_sm, home_view, [{<<"bob">>, <<"localhost">>}])) =:= 1 end),
    ?assertEqual([1, 0], [Send(M) || M <- [<<"new members">>, <<"new members again">>]]),
    [?C:close(C) || C <- [A, B]].

%% A fun returning how many times throng_sm:home_view/1 has been called on
%% Node for the account US since now (callers/2).
count_asks(Node, US) ->
    Callers = callers(Node, US),
    fun() -> length(Callers()) end.

presence_across_nodes(Config) ->
    [N1, N2, N3] = ?config(nodes, Config),
    A = online(<<"alice">>, <<"a">>, N1),
    %% Bob comes online on another node: Alice sees him, he gets her
    %% presence (the probe is answered from the directory).
    B = login(<<"bob">>, <<"b">>, N2),
    ?C:send(B, ?C:presence([])),
    Got = [?C:recv_stanza(B), ?C:recv_stanza(B)],
    Froms = lists:sort([throng_xml:attr(<<"from">>, P) || P <- Got]),
    ?assertEqual([<<"alice@localhost/a">>, <<"bob@localhost/b">>], Froms),
    P = ?C:recv_stanza(A),
    ?assertEqual(<<"bob@localhost/b">>, throng_xml:attr(<<"from">>, P)),
    %% A second resource of Bob on a third node: his other resource and
    %% Alice see it.
    B2 = login(<<"bob">>, <<"b2">>, N3),
    ?C:send(B2, ?C:presence([])),
    ?assertEqual(<<"bob@localhost/b2">>, throng_xml:attr(<<"from">>, ?C:recv_stanza(A))),
    ?assertEqual(<<"bob@localhost/b2">>, throng_xml:attr(<<"from">>, ?C:recv_stanza(B))),
    %% Unavailable presence crosses nodes too.
    ?C:send(B2, ?C:presence([{<<"type">>, <<"unavailable">>}])),
    U = ?C:recv_stanza(A),
    ?assertEqual({<<"bob@localhost/b2">>, <<"unavailable">>},
                 {throng_xml:attr(<<"from">>, U), throng_xml:attr(<<"type">>, U)}),
    [?C:close(C) || C <- [A, B, B2]].

priority_across_nodes(Config) ->
    [N1, N2, N3] = ?config(nodes, Config),
    A = online(<<"alice">>, <<"a">>, N1),
    Low = online(<<"bob">>, <<"low">>, N2, 1),
    High = online(<<"bob">>, <<"high">>, N3, 5),
    ?C:flush(Low), ?C:flush(High), ?C:flush(A),
    ?C:send(A, ?C:message(<<"bob@localhost">>, <<"chat">>, <<"prio">>)),
    ?assertEqual(<<"prio">>, body(?C:recv_stanza(High))),
    ok = ?C:expect_nothing(Low, 500),
    [?C:close(C) || C <- [A, Low, High]].

newer_session_wins_across_nodes(Config) ->
    [N1, _, N3] = ?config(nodes, Config),
    Old = online(<<"carol">>, <<"same">>, N1),
    New = online(<<"carol">>, <<"same">>, N3),
    ?assertEqual(<<"conflict">>, ?C:closed(Old, ?WAIT)),
    %% The new session is the one the cluster routes to.
    Pid = erpc:call(N1, throng_sm, lookup, [jid(<<"carol">>, <<"same">>)]),
    ?assertEqual(N3, node(Pid)),
    ?C:close(New).

%% The home's directory holds an entry of a process that is gone without
%% its clean-up (killed; its node still connected): a login of that full
%% JID at the home replaces it at once (it used to be found again at every
%% claim, the login spinning for ever).
dead_session_in_the_directory(Config) ->
    Nodes = ?config(nodes, Config),
    US = {<<"carol">>, <<"localhost">>},
    {Home, _} = erpc:call(hd(Nodes), throng_members, place, [US]),
    Other = hd(Nodes -- [Home]),
    Dead = erpc:call(Other, erlang, spawn, [erlang, is_atom, [x]]),
    wait_until(fun() -> not erpc:call(Other, erlang, is_process_alive, [Dead]) end),
    true = erpc:call(Home, ets, insert, [throng_dir, {{US, <<"r">>}, Dead, 0, undefined, 1}]),
    C = login(<<"carol">>, <<"r">>, Home),
    ?assertEqual(<<"carol@localhost/r">>, ?C:jid(C)),
    ?assertEqual([], erpc:call(Home, throng_dir, entries, [US])),
    ?C:close(C).

%% A session on one node that does not end when replaced (suspended) is
%% killed after five seconds by the new session on another node, and its
%% directory entry goes with it: the resource can be bound again anywhere.
stuck_session_on_another_node_is_replaced(Config) ->
    Nodes = ?config(nodes, Config),
    US = {<<"carol">>, <<"localhost">>},
    {Home, _} = erpc:call(hd(Nodes), throng_members, place, [US]),
    [A, B] = Nodes -- [Home],
    Old = online(<<"carol">>, <<"s">>, A),
    OldPid = erpc:call(A, throng_sm, lookup, [jid(<<"carol">>, <<"s">>)]),
    ok = erpc:call(A, sys, suspend, [OldPid]),
    New = ?C:login(<<"carol">>, <<"password">>, <<"s">>,
                   #{port => port_of(B), bind_timeout => 15000}),
    ?assertEqual(<<"carol@localhost/s">>, ?C:jid(New)),
    ?assertNot(erpc:call(A, erlang, is_process_alive, [OldPid])),
    NewPid = erpc:call(Home, throng_sm, lookup, [jid(<<"carol">>, <<"s">>)]),
    ?assertEqual(B, node(NewPid)),
    %% the killed session's own node forgot it too: it finds the new one
    ?assertEqual(NewPid, erpc:call(A, throng_sm, lookup, [jid(<<"carol">>, <<"s">>)])),
    ?C:close(New),
    %% once it ends, the resource binds again at the home at once
    wait_until(fun() -> erpc:call(Home, throng_dir, entries, [US]) =:= [] end),
    Again = login(<<"carol">>, <<"s">>, Home),
    ?C:close(Again),
    _ = Old.

%% A node dies while the home's directory writers still hold its claim:
%% the drop comes after it, and no entry of the dead node is left behind
%% (it used to be applied after the drop and stay for good).
queued_directory_write_of_a_dead_node(Config) ->
    Nodes = ?config(nodes, Config),
    US = {<<"carol">>, <<"localhost">>},
    {Home, _} = erpc:call(hd(Nodes), throng_members, place, [US]),
    Dying = lists:last(Nodes -- [Home]),
    Writers = [list_to_atom("throng_dir_" ++ integer_to_list(I)) || I <- lists:seq(1, 8)],
    [ok = erpc:call(Home, sys, suspend, [W]) || W <- Writers],
    %% a session of the dying node claims its full JID: the claim waits in
    %% a writer's queue at the home
    Session = erpc:call(Dying, erlang, spawn, [timer, sleep, [infinity]]),
    Entry = {{US, <<"q">>}, Session, undefined, undefined, erlang:system_time(microsecond)},
    _ = erpc:call(Dying, erlang, spawn, [throng_dir, claim, [Home, Entry]]),
    wait_until(fun() ->
                       lists:sum([element(2, erpc:call(Home, erlang, process_info,
                                                       [whereis_on(Home, W), message_queue_len]))
                                  || W <- Writers]) >= 1
               end),
    Peer = proplists:get_value(Dying, get_peers_by_node()),
    erpc:cast(Dying, erlang, halt, [137]),
    wait_until(fun() -> not lists:member(Dying, erpc:call(Home, throng_cluster, members, [])) end),
    [ok = erpc:call(Home, sys, resume, [W]) || W <- Writers],
    wait_until(fun() -> erpc:call(Home, throng_metrics, value, [cluster_sessions_dropped]) >= 1 end),
    ?assertEqual([], [E || {_, Pid, _, _, _} = E <- erpc:call(Home, throng_dir, entries, [US]),
                           node(Pid) =:= Dying]),
    _ = (catch peer:stop(Peer)),
    ok.

whereis_on(Node, Name) ->
    erpc:call(Node, erlang, whereis, [Name]).

%% The home's directory writers are held up longer than a claim waits:
%% the claim is asked again, and the older session of the full JID is
%% replaced all the same (the home tells it). It used to take the timeout
%% as an acceptance and leave both sessions bound.
slow_home_still_replaces_the_older_session(Config) ->
    Nodes = ?config(nodes, Config),
    US = {<<"carol">>, <<"localhost">>},
    {Home, _} = erpc:call(hd(Nodes), throng_members, place, [US]),
    [A, B] = Nodes -- [Home],
    Old = online(<<"carol">>, <<"w">>, A),
    Writers = [list_to_atom("throng_dir_" ++ integer_to_list(I)) || I <- lists:seq(1, 8)],
    [ok = erpc:call(Home, sys, suspend, [W]) || W <- Writers],
    Self = self(),
    spawn_link(fun() ->
                       New = ?C:login(<<"carol">>, <<"password">>, <<"w">>,
                                      #{port => port_of(B), bind_timeout => 40000}),
                       Self ! {new, New}
               end),
    timer:sleep(6000),                        % past the first wait of the claim
    [ok = erpc:call(Home, sys, resume, [W]) || W <- Writers],
    New = receive {new, C} -> C after 40000 -> error(no_bind) end,
    ?assertEqual(<<"conflict">>, ?C:closed(Old, ?WAIT)),
    NewPid = erpc:call(Home, throng_sm, lookup, [jid(<<"carol">>, <<"w">>)]),
    ?assertEqual(B, node(NewPid)),
    ?C:close(New).

%% Stored messages a session of a node had taken into flight (sent, not
%% yet acknowledged: XEP-0198) when that node died go back to offline
%% storage (the first member does it, a few seconds after the node went
%% down), and the user's next session gets them. Every member, not only
%% the first, then forgets the node (before, node 2 kept it in its list of
%% nodes to recover until it came back).
inflight_of_a_dead_node_goes_back(Config) ->
    [N1, N2, N3] = ?config(nodes, Config),
    A = online(<<"alice">>, <<"a">>, N1),
    two_in_flight_to_bob(A, N1, N3),
    ?assertEqual(0, erpc:call(N1, throng_storage, offline_count, [<<"bob">>, <<"localhost">>])),
    Peer3 = proplists:get_value(N3, get_peers_by_node()),
    erpc:cast(N3, erlang, halt, [137]),
    wait_until(fun() -> erpc:call(N2, throng_cluster, gone, []) =:= [N3] end),
    wait_until(fun() -> erpc:call(N1, throng_storage, offline_count, [<<"bob">>, <<"localhost">>]) =:= 2 end),
    wait_until(fun() -> [erpc:call(N, throng_cluster, gone, []) || N <- [N1, N2]] =:= [[], []] end),
    _ = (catch peer:stop(Peer3)),
    B2 = online(<<"bob">>, <<"again">>, N2),
    ?assertEqual([<<"1">>, <<"2">>], lists:sort(collect_bodies(B2, 2))),
    [?C:close(C) || C <- [A, B2]].

%% Alice (A) sends Bob two messages while he is away (stored through Db,
%% the node with the tables); Bob logs in at Node with XEP-0198 and gets
%% them without acknowledging them: two messages in flight to his session.
two_in_flight_to_bob(A, Db, Node) ->
    [?C:send(A, ?C:message(<<"bob@localhost">>, <<"chat">>, B)) || B <- [<<"1">>, <<"2">>]],
    wait_until(fun() -> erpc:call(Db, throng_storage, offline_count, [<<"bob">>, <<"localhost">>]) =:= 2 end),
    B1 = login(<<"bob">>, <<"b">>, Node),
    ?C:send(B1, #xmlel{name = <<"enable">>, attrs = [{<<"xmlns">>, ?NS_SM}]}),
    _ = wait_for(B1, fun(El) -> El#xmlel.name =:= <<"enabled">> end),
    ?C:send(B1, ?C:presence([])),
    ?assertEqual([<<"1">>, <<"2">>], collect_bodies(B1, 2)),   % never acknowledged
    ?assertEqual(2, erpc:call(Db, throng_storage, inflight_count, [])).

%% The node holding a session's messages in flight goes down, and the
%% first member, which should recover them, goes down without having done
%% it: the next member does it. (Before, the survivor left them to the
%% first member it saw at that moment and forgot them: they stayed in
%% flight until the node came back.)
inflight_recovered_when_the_first_member_dies_too(Config) ->
    [Db, Mid, First] = ?config(nodes, Config),     % started in this order
    ?assertEqual(First, hd(erpc:call(Db, throng_cluster, members, []))),
    A = online(<<"alice">>, <<"a">>, Db),
    two_in_flight_to_bob(A, Db, Mid),
    Peers = get_peers_by_node(),
    %% The first member is as good as dead (its membership process hangs:
    %% it does nothing about the node's death) but still counts as one,
    %% past the recovery's delay; then it dies too.
    ok = erpc:call(First, sys, suspend, [throng_cluster]),
    erpc:cast(Mid, erlang, halt, [137]),
    wait_until(fun() -> not lists:member(Mid, erpc:call(Db, throng_cluster, members, [])) end),
    timer:sleep(4000),
    ?assertEqual(2, erpc:call(Db, throng_storage, inflight_count, [])),
    erpc:cast(First, erlang, halt, [137]),
    wait_until(fun() -> erpc:call(Db, throng_cluster, members, []) =:= [Db] end),
    wait_until(fun() -> erpc:call(Db, throng_storage, offline_count, [<<"bob">>, <<"localhost">>]) =:= 2 end),
    ?assertEqual(0, erpc:call(Db, throng_storage, inflight_count, [])),
    [_ = (catch peer:stop(proplists:get_value(N, Peers))) || N <- [Mid, First]],
    ?C:close(A).

%% A message from another node to a detached XEP-0198 session is kept
%% durably before the sender's session has handled it (so before the
%% sender's acknowledgement covers it), whichever node is the recipient's
%% home: the sender's, the session's own or a third. When the session's
%% node dies before the session took the messages (here it is stuck), they
%% go back to offline storage and the user's next session gets them.
%% (Before, a session on another node kept them only when it took them:
%% they died with its node.)
message_to_a_detached_session_survives_its_node(Config) ->
    [Db, Sender, Away] = ?config(nodes, Config),
    Users = users_at_homes([Sender, Away, Db], Db),
    [ok = erpc:call(Db, throng_ct, register, [U, <<"password">>]) || U <- Users],
    _ = [detached_and_stuck(U, Away, Sender) || U <- Users],
    A = online(<<"alice">>, <<"a">>, Sender),
    [?C:send(A, ?C:message(<<U/binary, "@localhost/r">>, <<"chat">>, U)) || U <- Users],
    %% Alice's session has handled them: an IQ sent after them is answered.
    <<"result">> = throng_xml:attr(<<"type">>, ?C:iq(A, <<"get">>, #xmlel{name = <<"ping">>, attrs = [{<<"xmlns">>, ?NS_PING}]})),
    %% Kept in flight, each once, and nowhere else.
    Offline = fun(U) -> erpc:call(Db, throng_storage, offline_count, [U, <<"localhost">>]) end,
    ?assertEqual(length(Users), erpc:call(Db, throng_storage, inflight_count, [])),
    ?assertEqual([0 || _ <- Users], [Offline(U) || U <- Users]),
    Peer = proplists:get_value(Away, get_peers_by_node()),
    erpc:cast(Away, erlang, halt, [137]),
    [wait_until(fun() -> Offline(U) =:= 1 end) || U <- Users],
    ?assertEqual(0, erpc:call(Db, throng_storage, inflight_count, [])),
    _ = (catch peer:stop(Peer)),
    %% Once: nothing else comes back later.
    timer:sleep(4000),
    ?assertEqual([1 || _ <- Users], [Offline(U) || U <- Users]),
    [U1 | _] = Users,
    B = online(U1, <<"again">>, Sender),
    ?assertEqual([U1], collect_bodies(B, 1)),
    [?C:close(C) || C <- [A, B]].

%% The mark of a detached session follows its directory entry: to the
%% entry's new home when the members change (the session enters itself
%% there again), and away when the session is resumed.
detached_mark_follows_the_session(Config) ->
    [N1, N2, N3] = ?config(nodes, Config),
    %% A user whose home is node 3, and node 1 once node 3 is gone.
    [U | _] = [C || C <- candidate_users(),
                    erpc:call(N1, throng_members, home, [{C, <<"localhost">>}]) =:= N3,
                    erpc:call(N1, throng_members, holder,
                              [{C, <<"localhost">>}, N3, lists:sort([N1, N2])]) =:= N1],
    US = {U, <<"localhost">>},
    ok = erpc:call(N1, throng_ct, register, [U, <<"password">>]),
    {Id, Pid} = detached(U, N2),
    wait_until(fun() -> erpc:call(N1, throng_sm, is_detached, [Pid, US]) end),
    Peer3 = proplists:get_value(N3, get_peers_by_node()),
    erpc:cast(N3, erlang, halt, [137]),
    wait_until(fun() -> erpc:call(N1, throng_members, home, [US]) =:= N1 end),
    wait_until(fun() -> erpc:call(N1, throng_sm, lookup, [jid(U, <<"r">>)]) =:= Pid end),
    wait_until(fun() -> erpc:call(N1, throng_sm, is_detached, [Pid, US]) end),
    _ = (catch peer:stop(Peer3)),
    {B2, Resumed} = resumes(U, port_of(N2), Id, 0),
    ?assertEqual(<<"resumed">>, Resumed#xmlel.name),
    wait_until(fun() -> not erpc:call(N1, throng_sm, is_detached, [Pid, US]) end),
    ?C:close(B2).

%% The members change and change back (a fourth node comes and goes)
%% before the first holder of a detached session's entry has dropped it,
%% and the session is resumed in between: the first holder, holding the
%% entry again, does not keep the old mark. (Before, placed again, the
%% session said only "detached" and only when it was: the mark outlived
%% the detachment, and senders kept their messages for it durably.)
%% The first holder's membership process is held meanwhile, so that it
%% does not drop the entry when it stops holding it.
detached_mark_after_the_members_change_back(Config) ->
    [N1, N2, N3] = Nodes = ?config(nodes, Config),
    NameD = list_to_atom(atom_to_list(node_name(N1)) -- "1" ++ "4"),
    D = node_at(NameD),
    US0 = fun(C) -> {C, <<"localhost">>} end,
    [U | _] = [C || C <- candidate_users(),
                    erpc:call(N1, throng_members, holder, [US0(C), N2, lists:sort(Nodes)]) =:= N3,
                    erpc:call(N1, throng_members, holder, [US0(C), N2, lists:sort([D | Nodes])]) =:= D],
    US = US0(U),
    ok = erpc:call(N1, throng_ct, register, [U, <<"password">>]),
    {Id, Pid} = detached(U, N2),
    wait_until(fun() -> erpc:call(N3, throng_dir, is_detached, [Pid]) end),
    ok = erpc:call(N3, sys, suspend, [throng_cluster]),
    D = start_node(Config, NameD, N1, shared_port_number()),
    wait_until(fun() -> erpc:call(D, throng_dir, is_detached, [Pid]) end),
    {B2, Resumed} = resumes(U, port_of(N2), Id, 0),
    ?assertEqual(<<"resumed">>, Resumed#xmlel.name),
    wait_until(fun() -> not erpc:call(D, throng_dir, is_detached, [Pid]) end),
    PeerD = proplists:get_value(D, get_peers_by_node()),
    ok = peer:stop(PeerD),
    wait_until(fun() -> erpc:call(N2, throng_cluster, members, []) =:= lists:sort(Nodes) end),
    ok = erpc:call(N3, sys, resume, [throng_cluster]),
    wait_members(Nodes),
    wait_until(fun() -> [E || {{_, <<"r">>}, P, _, _, _} = E <- erpc:call(N3, throng_dir, entries, [US]),
                              P =:= Pid] =/= [] end),
    wait_until(fun() -> not erpc:call(N3, throng_dir, is_detached, [Pid]) end),
    ?assertNot(erpc:call(N1, throng_sm, is_detached, [Pid, US])),
    ?C:close(B2).

%% Routing at the home: a message for a detached session whose node does
%% not answer (its OS process stopped) does not hold up the home's
%% hand-off worker. Another user's message behind it on the same worker is
%% delivered while the call to that node waits; the held user's next
%% message waits behind the first; once the node answers, the session has
%% both, in order, and nothing went to offline storage. (Before, the
%% worker itself waited in the call, up to 10 s, and everyone behind it
%% with it.) The next one is a headline, which is not kept (it goes
%% straight to the session): only its being held behind the first keeps
%% it second; sent on, it would reach the session while the first was
%% still being kept.
keep_at_a_silent_node_holds_up_no_one_else(Config) ->
    [Home, Sender, Away] = ?config(nodes, Config),
    US = fun(U) -> {U, <<"localhost">>} end,
    Worker = fun(U) -> erpc:call(Home, throng_handoff, worker_for, [US(U)]) end,
    [D | Others] = [U || U <- candidate_users(),
                         erpc:call(Home, throng_members, home, [US(U)]) =:= Home],
    E = hd([U || U <- Others, Worker(U) =:= Worker(D)]),
    [ok = erpc:call(Home, throng_ct, register, [U, <<"password">>]) || U <- [D, E]],
    {Id, Pid} = detached(D, Away),
    wait_until(fun() -> erpc:call(Home, throng_sm, is_detached, [Pid, US(D)]) end),
    EC = online(E, <<"e">>, Sender),
    A = online(<<"alice">>, <<"a">>, Sender),
    To = fun(U, R) -> <<U/binary, "@localhost/", R/binary>> end,
    OsPid = erpc:call(Away, os, getpid, []),
    "" = os:cmd("kill -STOP " ++ OsPid),
    try
        ?C:send(A, ?C:message(To(D, <<"r">>), <<"chat">>, <<"1">>)),
        ?C:send(A, ?C:message(To(E, <<"e">>), <<"chat">>, <<"2">>)),
        ?C:send(A, ?C:message(To(D, <<"r">>), <<"headline">>, <<"3">>)),
        ?assertEqual([<<"2">>], collect_bodies(EC, 1)),
        %% The first is still being kept: not given up to offline storage.
        ?assertEqual(0, erpc:call(Home, throng_storage, offline_count, tuple_to_list(US(D))))
    after
        os:cmd("kill -CONT " ++ OsPid)
    end,
    {B, Resumed} = resumes(D, port_of(Away), Id, 0),
    ?assertEqual(<<"resumed">>, Resumed#xmlel.name),
    ?assertEqual([<<"1">>, <<"3">>], collect_bodies(B, 2)),
    ?assertEqual(0, erpc:call(Home, throng_storage, offline_count, tuple_to_list(US(D)))),
    [?C:close(C) || C <- [A, B, EC]].

%% Private XML storage (XEP-0049) and PEP subscriptions (XEP-0163) are
%% written while a node of the cluster hangs (its OS process stopped, the
%% connections to it open): their read-modify-writes are serialized by the
%% storage, not by a lock every node must grant. (Before, each took a
%% `global' lock, which waits for every connected node: none of them was
%% answered until the hung node was known down, up to net_ticktime.)
%% The node that hangs keeps no tables and is neither user's home: a home
%% that hangs holds up the lookups of its users (a publish's
%% notifications) for the directory's 5 s, as clustering.md says.
private_and_pep_writes_while_a_node_hangs(Config) ->
    [Db, N2, Hangs] = ?config(nodes, Config),
    [U1, U2 | _] = [U || U <- candidate_users(),
                         erpc:call(Db, throng_members, home, [{U, <<"localhost">>}]) =/= Hangs],
    [ok = erpc:call(Db, throng_ct, register, [U, <<"password">>]) || U <- [U1, U2]],
    ok = erpc:call(Db, throng_ct, mutual, [U1, U2]),
    Bare = fun(U) -> <<U/binary, "@localhost">> end,
    A = online(U1, <<"a">>, Db),
    B = online(U2, <<"b">>, N2),
    El = fun(Name, Attrs, Children) -> #xmlel{name = Name, attrs = Attrs, children = Children} end,
    Private = fun(Type, Children) ->
                      ?C:iq_skipping(A, Type, El(<<"query">>, [{<<"xmlns">>, <<"jabber:iq:private">>}],
                                                 Children), [])
              end,
    Note = fun(Text) -> El(<<"note">>, [{<<"xmlns">>, <<"urn:x:note">>}], [{xmlcdata, Text}]) end,
    PubSub = fun(C, Child) ->
                     ?C:iq_skipping(C, <<"set">>,
                                    El(<<"pubsub">>, [{<<"xmlns">>, <<"http://jabber.org/protocol/pubsub">>}],
                                       [Child]), [{<<"to">>, Bare(U1)}])
             end,
    Tune = El(<<"tune">>, [{<<"xmlns">>, <<"http://jabber.org/protocol/tune">>}], []),
    Node = [{<<"node">>, <<"urn:xmpp:tune">>}],
    Result = fun(R) -> throng_xml:attr(<<"type">>, R) end,
    OsPid = erpc:call(Hangs, os, getpid, []),
    "" = os:cmd("kill -STOP " ++ OsPid),
    try
        ?assertEqual(<<"result">>, Result(Private(<<"set">>, [Note(<<"one">>)]))),
        ?assertEqual(<<"result">>,
                     Result(PubSub(A, El(<<"publish">>, Node, [El(<<"item">>, [{<<"id">>, <<"t1">>}], [Tune])])))),
        ?assertEqual(<<"result">>,
                     Result(PubSub(B, El(<<"subscribe">>, [{<<"jid">>, Bare(U2)} | Node], []))))
    after
        os:cmd("kill -CONT " ++ OsPid)
    end,
    Got = Private(<<"get">>, [El(<<"note">>, [{<<"xmlns">>, <<"urn:x:note">>}], [])]),
    ?assertEqual([Note(<<"one">>)], (throng_xml:subel(Got, <<"query">>))#xmlel.children),
    ?assertEqual([{U2, <<"localhost">>, <<>>}],
                 erpc:call(Db, throng_pep_subs, list, [U1, <<"localhost">>, <<"urn:xmpp:tune">>])),
    [?C:close(C) || C <- [A, B]].

%% The archive's id key is made (new storage) and read while a node of the
%% cluster hangs: two nodes starting at once make one key between them,
%% serialized by the storage, and neither waits for the hung node. (Before,
%% making it took a `global' lock of every connected node: it waited until
%% the hung node was known down, up to net_ticktime, 60 s, which is longer
%% than the 20 s the case waits.)
archive_key_made_while_a_node_hangs(Config) ->
    [Db, N2, Hangs] = ?config(nodes, Config),
    Old = erpc:call(N2, throng_mod_mam, id_key, []),
    Cache = {throng_mod_mam, id_key},
    %% Each node read it when the module started, the first too (which made
    %% it, before its group commit process ran).
    [?assertEqual(Old, erpc:call(N, persistent_term, get, [Cache, none])) || N <- [Db, N2, Hangs]],
    OsPid = erpc:call(Hangs, os, getpid, []),
    "" = os:cmd("kill -STOP " ++ OsPid),
    Keys = try
               ok = erpc:call(Db, throng_storage, kv_delete, [throng_mod_mam, id_key]),
               [true = erpc:call(N, persistent_term, erase, [Cache]) || N <- [Db, N2]],
               erpc:multicall([Db, N2], throng_mod_mam, id_key, [], 20000)
           after
               os:cmd("kill -CONT " ++ OsPid)
           end,
    [{ok, New}, {ok, New}] = Keys,
    ?assertNotEqual(Old, New),
    ?assertEqual({ok, New}, erpc:call(Hangs, throng_storage, kv_get, [throng_mod_mam, id_key])).

%% New accounts, one for each of Homes, whose home that node is.
users_at_homes(Homes, Node) ->
    [hd([U || U <- candidate_users(),
              erpc:call(Node, throng_members, home, [{U, <<"localhost">>}]) =:= Home])
     || Home <- Homes].

candidate_users() ->
    [<<"u", (integer_to_binary(I))/binary>> || I <- lists:seq(1, 500)].

%% User's session (resource r) on Node enables resumption, is available and
%% loses its connection: the resumption id and the session.
detached(User, Node) ->
    B = online(User, <<"r">>, Node),
    ?C:send(B, #xmlel{name = <<"enable">>, attrs = [{<<"xmlns">>, ?NS_SM}, {<<"resume">>, <<"true">>}]}),
    Id = throng_xml:attr(<<"id">>, wait_for(B, fun(El) -> El#xmlel.name =:= <<"enabled">> end)),
    Pid = erpc:call(Node, throng_sm, lookup, [jid(User, <<"r">>)]),
    ?C:abort(B),
    {Id, Pid}.

%% User's session (resource r) on Node enables resumption, is available,
%% loses its connection and is detached, as the Sender node sees it; then
%% it is stuck (sys:suspend/1): it takes nothing from its mailbox.
detached_and_stuck(User, Node, Sender) ->
    {_, Pid} = detached(User, Node),
    wait_until(fun() -> erpc:call(Node, throng_sm, is_detached, [Pid]) end),
    wait_until(fun() -> erpc:call(Sender, throng_sm, is_detached, [Pid, {User, <<"localhost">>}]) end),
    ok = erpc:call(Node, sys, suspend, [Pid]),
    Pid.

%% The first member's membership process is restarted (after a crash)
%% while a dead node's messages in flight are still to recover: it forgot
%% that node, but finds its rows in the storage when it starts, and
%% recovers them. (Before, they stayed in flight until that node came back:
%% the other member remembered the node but was not first.)
inflight_recovered_after_a_restart_of_the_membership_process(Config) ->
    [First, Mid, Last] = ?config(nodes, Config),
    ?assertEqual(First, hd(erpc:call(Mid, throng_cluster, members, []))),
    A = online(<<"alice">>, <<"a">>, Mid),
    two_in_flight_to_bob(A, First, Last),
    Peers = get_peers_by_node(),
    %% The first member does nothing about the death (its process hangs)
    %% until it is killed, past the recovery's delay.
    ok = erpc:call(First, sys, suspend, [throng_cluster]),
    erpc:cast(Last, erlang, halt, [137]),
    wait_until(fun() -> not lists:member(Last, erpc:call(Mid, throng_cluster, members, [])) end),
    timer:sleep(4000),
    ?assertEqual(2, erpc:call(First, throng_storage, inflight_count, [])),
    true = erpc:call(First, erlang, exit, [erpc:call(First, erlang, whereis, [throng_cluster]), kill]),
    throng_ct:wait_until(
      fun() -> erpc:call(First, throng_storage, offline_count, [<<"bob">>, <<"localhost">>]) =:= 2 end,
      30000),
    _ = (catch peer:stop(proplists:get_value(Last, Peers))),
    ?C:close(A).

%% Nodes that share a PostgreSQL database without being members of one
%% cluster (no seed leads from one to the other): a node that starts does
%% not take the messages another running node holds in flight for its
%% sessions (they would be delivered twice), and takes those of a dead one.
%% (Before, the start-up sweep took every node not connected for gone: the
%% running node's messages went to offline storage too.)
sweep_leaves_the_inflight_of_a_running_node(Config) ->
    [NameA, NameB, NameC] = ?config(names, Config),
    Port = shared_port_number(),
    A = start_node(Config, NameA, node_at(NameA), Port),
    C = start_node(Config, NameC, node_at(NameC), Port),
    [?assertEqual([N], erpc:call(N, throng_cluster, members, [])) || N <- [A, C]],
    [ok = erpc:call(A, throng_ct, register, [U, <<"password">>]) || U <- [<<"bob">>, <<"carol">>]],
    %% A holds one for carol (its session on A); C, one for bob.
    Hold = fun(Node, To) ->
                   Msg = #offline_msg{timestamp = erlang:system_time(microsecond),
                                      from = <<"alice@localhost/a">>,
                                      packet = <<"<message to='", To/binary, "@localhost'/>">>},
                   Owner = erpc:call(Node, erlang, whereis, [throng_sup]),
                   [_] = erpc:call(Node, throng_storage, inflight_put, [To, <<"localhost">>, Owner, [Msg]])
           end,
    Hold(A, <<"carol">>),
    Hold(C, <<"bob">>),
    ?assertEqual(lists:sort([A, C]), lists:sort(erpc:call(A, throng_storage, inflight_nodes, []))),
    PeerC = proplists:get_value(C, get_peers_by_node()),
    erpc:cast(C, erlang, halt, [137]),
    _ = (catch peer:stop(PeerC)),
    B = start_node(Config, NameB, node_at(NameB), Port),
    %% B's sweep: two reconnect intervals of 1 s and 3 s after its start,
    %% and the recovery 3 s after that.
    Offline = fun(U) -> erpc:call(B, throng_storage, offline_count, [U, <<"localhost">>]) end,
    throng_ct:wait_until(fun() -> Offline(<<"bob">>) =:= 1 end, 30000),
    %% (A recovery of both would be done by now.)
    timer:sleep(2000),
    ?assertEqual([B], erpc:call(B, throng_cluster, members, [])),
    ?assertEqual(0, Offline(<<"carol">>)),
    ?assertEqual(1, erpc:call(A, throng_storage, inflight_count, [])),
    ?assertEqual([A], erpc:call(A, throng_storage, inflight_nodes, [])).

kick_on_another_node(Config) ->
    [N1, N2, _] = ?config(nodes, Config),
    B = online(<<"bob">>, <<"b">>, N2),
    %% bin/throng kick run against node 1.
    {0, _} = erpc:call(N1, throng_ctl, run, ["kick", ["bob@localhost/b"]]),
    ?assertEqual(<<"policy-violation">>, ?C:closed(B, ?WAIT)).

roster_push_to_every_resource(Config) ->
    [N1, N2, _] = ?config(nodes, Config),
    A1 = online(<<"alice">>, <<"one">>, N1),
    A2 = online(<<"alice">>, <<"two">>, N2),
    %% Both resources ask for the roster (pushes go to those that did).
    [begin
         ?C:send(C, #xmlel{name = <<"iq">>, attrs = [{<<"type">>, <<"get">>}, {<<"id">>, <<"g">>}],
                           children = [#xmlel{name = <<"query">>, attrs = [{<<"xmlns">>, ?NS_ROSTER}]}]}),
         wait_for(C, fun(El) -> throng_xml:attr(<<"id">>, El) =:= <<"g">> end)
     end || C <- [A1, A2]],
    Set = #xmlel{name = <<"query">>, attrs = [{<<"xmlns">>, ?NS_ROSTER}],
                 children = [#xmlel{name = <<"item">>, attrs = [{<<"jid">>, <<"carol@localhost">>},
                                                               {<<"name">>, <<"Carol">>}]}]},
    ?C:send(A1, #xmlel{name = <<"iq">>, attrs = [{<<"type">>, <<"set">>}, {<<"id">>, <<"s1">>}],
                       children = [Set]}),
    Push = wait_for(A2, fun(El) -> throng_xml:attr(<<"type">>, El) =:= <<"set">> end),
    Item = throng_xml:subel(throng_xml:subel(Push, <<"query">>, ?NS_ROSTER), <<"item">>),
    ?assertEqual(<<"carol@localhost">>, throng_xml:attr(<<"jid">>, Item)),
    [?C:close(C) || C <- [A1, A2]].

offline_when_last_resource_leaves(Config) ->
    [N1, N2, N3] = ?config(nodes, Config),
    B = online(<<"bob">>, <<"b">>, N2),
    ?C:close(B),
    wait_until(fun() -> erpc:call(N1, throng_sm, resources, [{<<"bob">>, <<"localhost">>}]) =:= [] end),
    A = online(<<"alice">>, <<"a">>, N1),
    ?C:send(A, ?C:message(<<"bob@localhost">>, <<"chat">>, <<"stored">>)),
    wait_until(fun() -> erpc:call(N1, throng_storage, offline_count, [<<"bob">>, <<"localhost">>]) =:= 1 end),
    B2 = online(<<"bob">>, <<"again">>, N3),
    wait_for(B2, fun(El) -> body(El) =:= <<"stored">> end),
    [?C:close(C) || C <- [A, B2]].

%% Each node's part of the directory holds only entries of sessions on
%% other nodes, one per session: the sum over the nodes is the number of
%% sessions, not a multiple of it.
directory_is_sharded(Config) ->
    Nodes = ?config(nodes, Config),
    Users = [<<"alice">>, <<"bob">>, <<"carol">>],
    Clients = [online(U, integer_to_binary(I), lists:nth(1 + (I rem 3), Nodes))
               || U <- Users, I <- lists:seq(1, 6)],
    wait_until(fun() ->
                       Dir = lists:sum([erpc:call(N, throng_dir, size, []) || N <- Nodes]),
                       Dir =:= length(Clients)
               end),
    [?assertEqual(18, length(erpc:call(N, throng_sm, resources, [{U, <<"localhost">>}])) * 3)
     || N <- Nodes, U <- Users],
    [?C:close(C) || C <- Clients].

%% Alice's session on node 2 ends while node 2 cannot read her roster: her
%% unavailable presence for bob (on node 3) is kept there. Node 2 stops
%% before it can read again: what it kept goes to another member, which
%% reads the roster and tells bob.
kept_unavailable_goes_to_a_member_when_its_node_stops(Config) ->
    [N1, N2, N3] = ?config(nodes, Config),
    B = online(<<"bob">>, <<"b">>, N3),
    A = online(<<"alice">>, <<"a">>, N2),
    From = fun(El) -> throng_xml:attr(<<"from">>, El) =:= <<"alice@localhost/a">> end,
    _ = wait_for(B, From),
    Adopted = fun() -> lists:sum([erpc:call(N, throng_metrics, value, [presence_deferred_adopted])
                                  || N <- [N1, N3]]) end,
    Before = Adopted(),
    ok = erpc:call(N2, throng_ct, fail_roster_reads, [<<"alice">>]),
    ?C:close(A),
    wait_until(fun() -> erpc:call(N2, throng_presence_retry, waiting, []) =:= 1 end),
    ok = ?C:expect_nothing(B, 300),
    ok = erpc:call(N2, application, stop, [throng]),
    U = wait_for(B, From),
    ?assertEqual(<<"unavailable">>, throng_xml:attr(<<"type">>, U)),
    ?assertEqual(Before + 1, Adopted()),
    ?C:close(B).

%% What a node keeps is copied to one member (the next in sorted order):
%% when the node is killed, that member sends it.
kept_unavailable_survives_a_kill_of_its_node(Config) ->
    [N1, N2, N3] = ?config(nodes, Config),
    Before = erpc:call(N3, throng_metrics, value, [presence_deferred_adopted]),
    {B, From} = alice_kept(N1, N2, N3),
    0 = erpc:call(N1, throng_presence_retry, copies, []),
    ok = ?C:expect_nothing(B, 300),
    erpc:cast(N2, erlang, halt, [137]),
    U = wait_for(B, From),
    ?assertEqual(<<"unavailable">>, throng_xml:attr(<<"type">>, U)),
    ?assertEqual(Before + 1, erpc:call(N3, throng_metrics, value, [presence_deferred_adopted])),
    0 = erpc:call(N3, throng_presence_retry, copies, []),
    wait_until(fun() -> erpc:call(N3, throng_metrics, value, [presence_deferred_copies]) =:= 0
                            andalso erpc:call(N3, throng_metrics, value,
                                              [presence_deferred_waiting]) =:= 0 end),
    %% Sent once: the copy was the only one.
    ok = ?C:expect_nothing(B, 1000),
    ?C:close(B).

%% The member holding the copy dies first: the node copies what it keeps
%% to another member, which sends it when the node is killed in turn.
kept_unavailable_copy_moves_when_its_holder_dies(Config) ->
    [N1, N2, N3] = ?config(nodes, Config),
    {B, From} = alice_kept(N1, N2, N3),
    erpc:cast(N3, erlang, halt, [137]),
    wait_until(fun() -> erpc:call(N1, throng_presence_retry, copies, []) =:= 1 end),
    ok = ?C:expect_nothing(B, 300),
    erpc:cast(N2, erlang, halt, [137]),
    U = wait_for(B, From),
    ?assertEqual(<<"unavailable">>, throng_xml:attr(<<"type">>, U)),
    ?C:close(B).

%% The process keeping it crashes (its node lives on): the holder of the
%% copy sends it; the restarted process starts empty. A crash of the
%% holder's process makes the node copy it again.
kept_unavailable_survives_a_crash_of_its_process(Config) ->
    [N1, N2, N3] = ?config(nodes, Config),
    Before = erpc:call(N3, throng_metrics, value, [presence_deferred_adopted]),
    {B, From} = alice_kept(N1, N2, N3),
    true = erpc:call(N3, fun() -> exit(whereis(throng_presence_retry), kill) end),
    wait_until(fun() -> retry_count(N3, copies) =:= 1 end),
    ok = ?C:expect_nothing(B, 300),
    %% A crash that runs terminate/2 (a kill does not).
    ok = erpc:call(N2, sys, terminate, [throng_presence_retry, test_crash]),
    U = wait_for(B, From),
    ?assertEqual(<<"unavailable">>, throng_xml:attr(<<"type">>, U)),
    ?assertEqual(Before + 1, erpc:call(N3, throng_metrics, value, [presence_deferred_adopted])),
    wait_until(fun() -> retry_count(N3, waiting) =:= 0 end),
    0 = erpc:call(N2, throng_presence_retry, waiting, []),
    ok = ?C:expect_nothing(B, 1000),
    ?C:close(B).

%% Node 2, keeping alice's unavailable, is cut off twice while no roster
%% can be read on node 3 either: node 3 takes it over each time, and gives
%% it back when node 2 sends its copies again, so after two splits it is
%% kept once on each side, not doubled; once the rosters read, bob gets it.
kept_unavailable_is_not_multiplied_by_netsplits(Config) ->
    [N1, N2, N3] = Nodes = ?config(nodes, Config),
    {B, From} = alice_kept(N1, N2, N3),
    ok = erpc:call(N3, throng_ct, fail_roster_reads, [<<"alice">>]),
    Split = fun() ->
                    ?assertEqual([true, true], try_call(N2, ?MODULE, cut_off, [[N1, N3]], cut_failed)),
                    wait_until(fun() -> retry_count(N3, waiting) =:= 1 end),
                    throng_ct:wait_until(
                      fun() -> lists:all(fun(N) -> try_call(N, throng_cluster, members, [], [])
                                                       =:= Nodes end, Nodes) end, 30000),
                    %% Node 2 copies it to node 3 again, which lets its own go.
                    wait_until(fun() -> retry_count(N3, copies) =:= 1
                                            andalso retry_count(N3, waiting) =:= 0 end)
            end,
    Split(),
    Split(),
    1 = erpc:call(N2, throng_presence_retry, waiting, []),
    0 = erpc:call(N1, throng_presence_retry, waiting, []),
    %% Node 2 reaches the tables again (as in netsplit_heals).
    wait_until(fun() -> lists:member(N1, try_call(N2, mnesia, system_info, [running_db_nodes], [])) end),
    [ok = erpc:call(N, meck, unload, [throng_storage_mnesia]) || N <- [N2, N3]],
    %% Node 2's next try may be 30 s away (its reads failed a while).
    U = wait_for(B, From, 45000),
    ?assertEqual(<<"unavailable">>, throng_xml:attr(<<"type">>, U)),
    ok = ?C:expect_nothing(B, 1000),
    ?C:close(B).

%% throng_presence_retry:F() on Node; none while it restarts.
retry_count(Node, F) ->
    try erpc:call(Node, throng_presence_retry, F, [])
    catch exit:{exception, {noproc, _}} -> none
    end.

%% Bob online on N1 sees Alice on N2; her session ends while her roster
%% cannot be read there: her unavailable presence is kept on N2, its copy
%% on N3 (the next member). Bob's client and the test for her stanzas.
alice_kept(N1, N2, N3) ->
    B = online(<<"bob">>, <<"b">>, N1),
    A = online(<<"alice">>, <<"a">>, N2),
    From = fun(El) -> throng_xml:attr(<<"from">>, El) =:= <<"alice@localhost/a">> end,
    _ = wait_for(B, From),
    ok = erpc:call(N2, throng_ct, fail_roster_reads, [<<"alice">>]),
    ?C:close(A),
    wait_until(fun() -> erpc:call(N2, throng_presence_retry, waiting, []) =:= 1 end),
    wait_until(fun() -> erpc:call(N3, throng_presence_retry, copies, []) =:= 1 end),
    %% The gauges say the same.
    1 = erpc:call(N2, throng_metrics, value, [presence_deferred_waiting]),
    1 = erpc:call(N3, throng_metrics, value, [presence_deferred_copies]),
    0 = erpc:call(N1, throng_metrics, value, [presence_deferred_copies]),
    {B, From}.

node_loss_and_return(Config) ->
    [N1, N2, N3] = Nodes = ?config(nodes, Config),
    A = online(<<"alice">>, <<"a">>, N1),
    B = online(<<"bob">>, <<"b">>, N3),
    ?C:flush(A),
    %% Node 3 dies without any clean-up.
    Peer3 = proplists:get_value(N3, get_peers_by_node()),
    erpc:cast(N3, erlang, halt, [137]),
    P = wait_for(A, fun(El) -> throng_xml:attr(<<"type">>, El) =:= <<"unavailable">> end),
    ?assertEqual(<<"bob@localhost/b">>, throng_xml:attr(<<"from">>, P)),
    wait_until(fun() -> erpc:call(N2, throng_sm, resources, [{<<"bob">>, <<"localhost">>}]) =:= [] end),
    %% Each survivor drops node 3 when its own link reports it down: not
    %% necessarily by the time another member has told Alice (CI once saw
    %% node 2 a moment behind), but within seconds.
    [wait_until(fun() -> erpc:call(N, throng_cluster, members, []) =:= lists:sort([N1, N2]) end)
     || N <- [N1, N2]],
    %% A message to him now is kept offline, not lost.
    ?C:send(A, ?C:message(<<"bob@localhost">>, <<"chat">>, <<"while down">>)),
    wait_until(fun() -> erpc:call(N2, throng_storage, offline_count, [<<"bob">>, <<"localhost">>]) =:= 1 end),
    catch peer:stop(Peer3),
    ?C:closed(B, ?WAIT),
    %% The node comes back and rejoins by itself (its seeds).
    [_] = start_cluster(Config, [node_name(N3)], N1),
    wait_members(Nodes),
    B2 = online(<<"bob">>, <<"back">>, N3),
    wait_for(B2, fun(El) -> body(El) =:= <<"while down">> end),
    [?C:close(C) || C <- [A, B2]].

%% The three nodes listen on one port (reuse_port); connections land on
%% every one of them.
shared_port(Config) ->
    Nodes = ?config(nodes, Config),
    [Port] = lists:usort([erpc:call(N, throng_listener, port, [{listener, 2}]) || N <- Nodes]),
    Clients = [online(<<"carol">>, integer_to_binary(I), Port) || I <- lists:seq(1, 30)],
    Counts = [erpc:call(N, throng_sm, count, []) || N <- Nodes],
    ?assertEqual(30, lists:sum(Counts)),
    ?assert(lists:all(fun(C) -> C > 0 end, Counts)),
    [?C:close(C) || C <- Clients].

%% A node at max_connections with when_full: stop_listening closes its
%% socket on the shared port: the kernel sends the next connections to the
%% others; below 95% it listens again.
full_node_stops_listening(Config) ->
    [N1 | _] = Nodes = ?config(nodes, Config),
    [Port] = lists:usort([erpc:call(N, throng_listener, port, [{listener, 2}]) || N <- Nodes]),
    Count = fun(N) -> erpc:call(N, throng_sm, count, []) end,
    %% A connect that was in node 1's backlog when it closed its socket is
    %% reset (docs: the client reconnects, and the kernel sends it to
    %% another node): so do these clients. Clients come until node 1 holds
    %% its 3 (the kernel spreads them by a hash: how many that takes varies).
    Before = connect_until(fun() -> Count(N1) >= 3 end, Port, 1, 60),
    %% The listener sees it full at its next check (every 50 ms).
    wait_until(fun() -> not erpc:call(N1, throng_listener, listening, [{listener, 2}]) end),
    %% Node 1's shared listener holds at most 3 (and, in the moment its
    %% socket closes, at most one more per acceptor).
    Held = Count(N1),
    %% (the counts in the failure: CI once saw this outside its bounds)
    ?assertMatch({true, _, _}, {Held >= 3 andalso Held =< 3 + 8, Held, [Count(N) || N <- Nodes]}),
    %% Not listening: every later connection goes to the other nodes.
    After = [online_reconnecting(<<"carol">>, <<"late", (integer_to_binary(I))/binary>>, Port, 5)
             || I <- lists:seq(1, 20)],
    ?assertEqual(Held, Count(N1)),
    Clients = Before ++ After,
    ?assertEqual(length(Clients), lists:sum([Count(N) || N <- Nodes])),
    ?assert(erpc:call(N1, throng_metrics, value, [listener_full]) >= 1),
    [?C:close(C) || C <- Clients],
    wait_until(fun() -> erpc:call(N1, throng_listener, listening, [{listener, 2}]) end).

%% Clients (carol/1, carol/2, ...) log in on the shared port until Done()
%% holds; at most Max of them.
connect_until(Done, Port, I, Max) when I =< Max ->
    C = online_reconnecting(<<"carol">>, integer_to_binary(I), Port, 5),
    case Done() of
        true -> [C];
        false -> [C | connect_until(Done, Port, I + 1, Max)]
    end;
connect_until(_Done, _Port, _I, Max) ->
    error({node_never_full_after, Max}).

%% The session's node is not the one the client comes back to: the
%% resumption fails with <failed/>, and nothing the old session held is
%% lost: it comes with the new session's initial presence.
resumption_on_another_node_fails_cleanly(Config) ->
    [N1, N2, N3] = ?config(nodes, Config),
    B = online(<<"bob">>, <<"b">>, N2),
    {Id, H, A} = bob_detached(B, fun() -> online(<<"alice">>, <<"a">>, N1) end, N2),
    %% The client got message 1 (h = 1) and comes back on node 3.
    {C, F} = bob_resumes(port_of(N3), Id, H),
    ?assertEqual(<<"failed">>, F#xmlel.name),
    %% the one stanza of Bob's the old session handled (XEP-0198 §5)
    ?assertEqual(<<"1">>, throng_xml:attr(<<"h">>, F)),
    ?assertEqual([], erpc:call(N1, throng_sm, resources, [{<<"bob">>, <<"localhost">>}])),
    %% A new session on node 3: messages 2 and 3 come, 1 does not.
    B2 = ?C:bind(C, <<"b">>),
    ?C:send(B2, ?C:presence([])),
    Got = collect_bodies(B2, 2),
    ?assertEqual([<<"2">>, <<"3">>], Got),
    [?C:close(X) || X <- [A, B2]].

%% Bob's session B (on Node) enables resumption; Alice logs in (Login) and
%% sends it messages 1..3; its connection drops when the client has had
%% message 1. The resumption id, the client's h, and Alice.
bob_detached(B, Login, Node) ->
    ?C:send(B, #xmlel{name = <<"enable">>, attrs = [{<<"xmlns">>, ?NS_SM}, {<<"resume">>, <<"true">>}]}),
    E = wait_for(B, fun(El) -> El#xmlel.name =:= <<"enabled">> end),
    Id = throng_xml:attr(<<"id">>, E),
    %% one stanza of Bob's own the server handles (its h for the client: 1)
    ?C:send(B, #xmlel{name = <<"presence">>, attrs = [{<<"type">>, <<"unavailable">>},
                                                      {<<"to">>, <<"carol@localhost">>}]}),
    A = Login(),
    [?C:send(A, ?C:message(<<"bob@localhost/b">>, <<"chat">>, integer_to_binary(I)))
     || I <- lists:seq(1, 3)],
    %% Every stanza since <enabled/> counts; h covers those up to message 1.
    Received = stanzas_until(B, <<"3">>),
    H = length(lists:takewhile(fun(El) -> body(El) =/= <<"2">> end, Received)),
    ?C:abort(B),
    wait_until(fun() ->
                       [Pid] = [P || {<<"b">>, P, _, _} <- erpc:call(Node, throng_sm, resources,
                                                                      [{<<"bob">>, <<"localhost">>}])],
                       erpc:call(Node, throng_sm, is_detached, [Pid])
               end),
    {Id, H, A}.

%% Bob's client logs in at Port and asks to resume session Id with h = H:
%% the client and the answer (<resumed/> or <failed/>).
bob_resumes(Port, Id, H) ->
    resumes(<<"bob">>, Port, Id, H).

resumes(User, Port, Id, H) ->
    C = ?C:connect(#{port => Port}),
    _ = ?C:open_stream(C),
    ok = ?C:auth_plain(C, User, <<"password">>),
    _ = ?C:open_stream(C),
    ?C:send(C, #xmlel{name = <<"resume">>, attrs = [{<<"xmlns">>, ?NS_SM}, {<<"previd">>, Id},
                                                    {<<"h">>, integer_to_binary(H)}]}),
    {C, ?C:recv_stanza(C)}.

stanzas_until(C, Body) ->
    El = ?C:recv_stanza(C),
    case body(El) of
        Body -> [El];
        _ -> [El | stanzas_until(C, Body)]
    end.

collect_bodies(_C, 0) -> [];
collect_bodies(C, N) ->
    El = wait_for(C, fun(El) -> body(El) =/= undefined end),
    [body(El) | collect_bodies(C, N - 1)].

%% A node cut off from the others (the connections dropped) comes back by
%% itself within cluster.reconnect_interval: members, storage and routing
%% work again without anyone doing anything.
%% XEP-0153 across nodes: a vCard photo set through one node shows at once
%% in presence another resource of the user sends through another node,
%% one that had already read (and cached) that the user had no vCard: the
%% node where the vCard changed tells the others to drop their copy.
vcard_hash_across_nodes(Config) ->
    [N1, N2, N3] = ?config(nodes, Config),
    B = online(<<"bob">>, <<"b">>, N1),
    A3 = online(<<"alice">>, <<"a3">>, N3),
    A2 = online(<<"alice">>, <<"a2">>, N2),
    Image = crypto:hash(sha512, <<"avatar">>),
    Photo = #xmlel{name = <<"PHOTO">>,
                   children = [#xmlel{name = <<"BINVAL">>, children = [{xmlcdata, base64:encode(Image)}]}]},
    ?C:send(A2, #xmlel{name = <<"iq">>, attrs = [{<<"type">>, <<"set">>}, {<<"id">>, <<"vc1">>}],
                       children = [#xmlel{name = <<"vCard">>, attrs = [{<<"xmlns">>, <<"vcard-temp">>}],
                                          children = [Photo]}]}),
    R = wait_for(A2, fun(El) -> throng_xml:attr(<<"id">>, El) =:= <<"vc1">> end),
    ?assertEqual(<<"result">>, throng_xml:attr(<<"type">>, R)),
    ?C:send(A3, #xmlel{name = <<"presence">>,
                       children = [#xmlel{name = <<"status">>, children = [{xmlcdata, <<"after">>}]}]}),
    P = wait_for(B, fun(El) -> throng_xml:attr(<<"from">>, El) =:= <<"alice@localhost/a3">> andalso
                                   throng_xml:subel_cdata(El, <<"status">>) =:= <<"after">> end),
    X = throng_xml:subel(P, <<"x">>, <<"vcard-temp:x:update">>),
    ?assertNotEqual(undefined, X),
    ?assertEqual(binary:encode_hex(crypto:hash(sha, Image)),
                 string:uppercase(throng_xml:subel_cdata(X, <<"photo">>))),
    [?C:close(C) || C <- [A2, A3, B]].

%% A message of the day set on one node (XEP-0133 set-motd, run as the
%% provider runs it) reaches logins on the others, once per account.
motd_on_every_node(Config) ->
    [N1, N2, N3] = ?config(nodes, Config),
    Req = #{host => <<"localhost">>, from => jid(<<"alice">>, <<"admin">>),
            node => <<"http://jabber.org/protocol/admin#set-motd">>, action => complete,
            stage => undefined, values => #{<<"motd">> => [<<"Cluster-wide.">>]}},
    ?assertMatch({completed, _, _}, erpc:call(N1, throng_adhoc_admin, adhoc_execute, [Req])),
    Motd = fun(C) -> wait_for(C, fun(El) -> El#xmlel.name =:= <<"message">> end) end,
    B = online(<<"bob">>, <<"b">>, N2),
    ?assertEqual(<<"Cluster-wide.">>, body(Motd(B))),
    C3 = online(<<"carol">>, <<"c">>, N3),
    ?assertEqual(<<"Cluster-wide.">>, body(Motd(C3))),
    B2 = online(<<"bob">>, <<"b2">>, N3),
    NoMessage = fun F() ->
                        case ?C:recv(B2, 500) of
                            timeout -> ok;
                            #xmlel{name = <<"presence">>} -> F();
                            Other -> error({unexpected, Other})
                        end
                end,
    ok = NoMessage(),
    [?C:close(C) || C <- [B, C3, B2]].

netsplit_heals(Config) ->
    [N1, N2, N3] = Nodes = ?config(nodes, Config),
    %% Node 2 drops its links to nodes 1 and 3 (they see it go down, it
    %% sees them go); then, whatever happens between, every node must have
    %% every member again by itself.
    ?assertEqual([true, true], try_call(N2, ?MODULE, cut_off, [[N1, N3]], cut_failed)),
    throng_ct:wait_until(fun() -> lists:all(fun(N) -> try_call(N, throng_cluster, members, [], []) =:= Nodes end,
                                            Nodes) end, 30000),
    wait_until(fun() -> lists:member(N1, try_call(N2, mnesia, system_info, [running_db_nodes], [])) end),
    %% Node 2 reads the accounts again (until it does, its logins get
    %% temporary-auth-failure, as docs/clustering.md says of a split; the
    %% db node being running is not yet the tables being readable).
    wait_until(fun() -> try_call(N2, throng_storage, account_exists, [<<"bob">>, <<"localhost">>], false) end),
    B = online(<<"bob">>, <<"b">>, N2),
    A = online(<<"alice">>, <<"a">>, N1),
    wait_for(B, fun(El) -> throng_xml:attr(<<"from">>, El) =:= <<"alice@localhost/a">> end),
    ?C:send(A, ?C:message(<<"bob@localhost">>, <<"chat">>, <<"healed">>)),
    wait_for(B, fun(El) -> body(El) =:= <<"healed">> end),
    [?C:close(X) || X <- [A, B]].

%% As config/vm.args: global does not turn one dropped link into a
%% disconnect of every node involved (docs/clustering.md).
vm_args() ->
    Lone = case get(lone) of
               %% Not connected to the nodes this node is connected to
               %% (global's full mesh): a lone node stays alone.
               true -> ["-connect_all", "false"];
               undefined -> []
           end,
    ["-kernel", "prevent_overlapping_partitions", "false" | Lone].

try_call(N, M, F, A, Otherwise) ->
    try erpc:call(N, M, F, A, 2000)
    catch _:_ -> Otherwise
    end.

%% The node that keeps the database stops cleanly (the others are told at
%% once) and starts again: it is a member again, and the nodes without a
%% copy reach its tables again, without anyone doing anything.
stopped_db_node_comes_back(Config) ->
    [N1, N2, N3] = Nodes = ?config(nodes, Config),
    ok = erpc:call(N1, application, stop, [throng]),
    wait_until(fun() -> erpc:call(N2, throng_cluster, members, []) =:= [N2, N3] end),
    {ok, _} = erpc:call(N1, application, ensure_all_started, [throng]),
    wait_members(Nodes),
    wait_until(fun() -> lists:member(N1, erpc:call(N2, mnesia, system_info, [running_db_nodes])) end),
    A = online(<<"alice">>, <<"a">>, N2),
    B = online(<<"bob">>, <<"b">>, N1),
    wait_for(A, fun(El) -> throng_xml:attr(<<"from">>, El) =:= <<"bob@localhost/b">> end),
    [?C:close(X) || X <- [A, B]].

%% XEP-0191 for users with no session on the node that checks: node 3
%% stops and starts again while users on node 2 write blocklists. Every
%% list is in node 3's filter once it is trusted, whether it was written
%% before node 3 stopped, while it was away or coming back (the filter's
%% scan, or the broadcast), or after; a user on node 3 is refused by each
%% of them while they are offline. Users without a list cost node 3 no
%% store read.
blocklists_across_a_restart(Config) ->
    [N1, N2, N3] = Nodes = ?config(nodes, Config),
    Users = [<<"u", (integer_to_binary(I))/binary>> || I <- lists:seq(1, 20)],
    [ok = erpc:call(N1, throng_ct, register, [U, <<"password">>]) || U <- Users ++ [<<"dave">>]],
    BlockCarol = fun(U) ->
                         C = login(U, <<"w">>, N2),
                         R = ?C:iq(C, <<"set">>, #xmlel{name = <<"block">>,
                                                       attrs = [{<<"xmlns">>, <<"urn:xmpp:blocking">>}],
                                                       children = [#xmlel{name = <<"item">>,
                                                                          attrs = [{<<"jid">>, <<"carol@localhost">>}]}]}),
                         <<"result">> = throng_xml:attr(<<"type">>, R),
                         ?C:close(C)
                 end,
    BlockCarol(<<"alice">>),
    ok = erpc:call(N3, application, stop, [throng]),
    Parent = self(),
    Writer = spawn_link(fun() -> [BlockCarol(U) || U <- Users], Parent ! {written, self()} end),
    {ok, _} = erpc:call(N3, application, ensure_all_started, [throng]),
    wait_members(Nodes),
    %% The first question starts node 3's build, while the writer writes.
    _ = erpc:call(N3, throng_kv_filter, maybe, [blocking, {<<"nobody">>, <<"localhost">>}]),
    wait_until(fun() -> erpc:call(N3, throng_kv_filter, ready, [blocking]) end),
    receive {written, Writer} -> ok after 60000 -> error(writer_late) end,
    BlockCarol(<<"bob">>),
    Blockers = [<<"alice">>, <<"bob">> | Users],
    ?assertEqual(lists:sort([{U, <<"localhost">>} || U <- Blockers]),
                 lists:sort(erpc:call(N1, throng_storage, kv_keys, [blocking]))),
    ?assert(erpc:call(N3, throng_kv_filter, ready, [blocking])),
    ?assertEqual([], [U || U <- Blockers,
                           not erpc:call(N3, throng_kv_filter, maybe, [blocking, {U, <<"localhost">>}])]),
    C = online(<<"carol">>, <<"c">>, N3),
    ?C:flush(C),
    [begin
         ?C:send(C, ?C:message(<<U/binary, "@localhost">>, <<"chat">>, <<"hi">>)),
         E = ?C:recv_stanza(C),
         ?assertEqual({U, <<"error">>}, {U, throng_xml:attr(<<"type">>, E)})
     end || U <- Blockers],
    MFA = {throng_mod_blocking, read, 1},
    1 = erpc:call(N3, erlang, trace_pattern, [MFA, true, [call_count]]),
    ?C:send(C, ?C:message(<<"dave@localhost">>, <<"chat">>, <<"stored">>)),
    wait_until(fun() -> erpc:call(N1, throng_storage, offline_count, [<<"dave">>, <<"localhost">>]) =:= 1 end),
    ?assertEqual({call_count, 0}, erpc:call(N3, erlang, trace_info, [MFA, call_count])),
    ?C:close(C).

%% In the node: drop the connections to Nodes (what a netsplit does).
cut_off(Nodes) ->
    [erlang:disconnect_node(N) || N <- Nodes].

%% A listener with redirect_to_home sends a client to its account's home
%% node (see-other-host with the home's cluster.node_address) once the
%% client names the account, before any credential is checked (a wrong
%% password is not even looked at); at the home it logs in. A home that says it is full
%% (what its listener does at max_connections with when_full:
%% stop_listening; called directly here) gets no one: the client logs in
%% where it is; and again once the home has room.
sent_to_the_home_node(Config) ->
    Nodes = ?config(nodes, Config),
    {Home, Addr} = home_address(<<"alice">>, Nodes),
    Others = Nodes -- [Home],
    Answer = fun(N, Password) ->
                     C = ?C:connect(#{port => port_of(N)}),
                     _ = ?C:open_stream(C),
                     R = ?C:auth_plain(C, <<"alice">>, Password),
                     ?C:abort(C),
                     R
             end,
    SeeOther = fun(N) ->
                       {stream_error, #xmlel{children = [El | _]}} = Answer(N, <<"wrong">>),
                       {El#xmlel.name, throng_xml:cdata(El)}
               end,
    [?assertEqual({<<"see-other-host">>, Addr}, SeeOther(N)) || N <- Others],
    %% bin/throng cluster shows where each node's clients are sent.
    {0, Table} = erpc:call(hd(Others), throng_ctl, run, ["cluster", []]),
    ?assertMatch({_, _}, binary:match(iolist_to_binary(Table), <<"  ", Addr/binary, "\n">>)),
    [?assertEqual({1, 0}, {erpc:call(N, throng_metrics, value, [redirected_home]),
                           erpc:call(N, throng_metrics, value, [auth_failures])})
     || N <- Others],
    %% At the home: checked there (and a wrong password fails).
    ?assertEqual({failure, <<"not-authorized">>}, Answer(Home, <<"wrong">>)),
    A = online(<<"alice">>, <<"a">>, Addr),
    ?assertEqual(1, erpc:call(Home, throng_sm, count, [])),
    %% Bob, wherever the shared port (no redirect_to_home) puts him, reaches
    %% her.
    [SharedPort] = lists:usort([erpc:call(N, throng_listener, port, [{listener, 2}]) || N <- Nodes]),
    B = online(<<"bob">>, <<"b">>, SharedPort),
    ?C:flush(A),
    ?C:send(B, ?C:message(<<"alice@localhost">>, <<"chat">>, <<"at home">>)),
    ?assertEqual(<<"at home">>, body(?C:recv_stanza(A))),
    %% The home is full: the others forget its address, and log her in.
    ok = erpc:call(Home, throng_node_addr, listener_full, [{listener, 1}, true]),
    wait_until(fun() -> [erpc:call(N, throng_node_addr, address, [Home]) || N <- Others]
                            =:= [none, none] end),
    [N2 | _] = Others,
    Before = erpc:call(N2, throng_sm, count, []),
    A2 = online(<<"alice">>, <<"away">>, N2),
    ?assertEqual(Before + 1, erpc:call(N2, throng_sm, count, [])),
    ok = erpc:call(Home, throng_node_addr, listener_full, [{listener, 1}, false]),
    wait_until(fun() -> [erpc:call(N, throng_node_addr, address, [Home]) || N <- Others]
                            =:= [Addr, Addr] end),
    [?C:close(C) || C <- [A, A2, B]].

%% With clients on their home node, a client that comes back through
%% another node is sent home first, where its detached session waits: the
%% XEP-0198 resumption works whatever node the client reaches (without the
%% redirect it fails there: resumption_on_another_node_fails_cleanly), and
%% what the session had not had acknowledged is sent again.
resumed_at_home_through_another_node(Config) ->
    Nodes = ?config(nodes, Config),
    {Home, Addr} = home_address(<<"bob">>, Nodes),
    [Other | _] = Nodes -- [Home],
    B = online(<<"bob">>, <<"b">>, Addr),
    [SharedPort] = lists:usort([erpc:call(N, throng_listener, port, [{listener, 2}]) || N <- Nodes]),
    {Id, H, A} = bob_detached(B, fun() -> online(<<"alice">>, <<"a">>, SharedPort) end, Home),
    %% Back through another node: sent home before any password check.
    C0 = ?C:connect(#{port => port_of(Other)}),
    _ = ?C:open_stream(C0),
    {stream_error, #xmlel{children = [SeeOther | _]}} = ?C:auth_plain(C0, <<"bob">>, <<"password">>),
    ?assertEqual({<<"see-other-host">>, Addr}, {SeeOther#xmlel.name, throng_xml:cdata(SeeOther)}),
    ?C:abort(C0),
    {"127.0.0.1", HomePort} = throng_host_port:parse(Addr),
    {C, R} = bob_resumes(HomePort, Id, H),
    ?assertEqual(<<"resumed">>, R#xmlel.name),
    %% Messages 2 and 3 (not acknowledged) come again; 1 does not.
    ?assertEqual([<<"2">>, <<"3">>], collect_bodies(C, 2)),
    [?C:close(X) || X <- [A, C]].

%% The home of a user and the address its clients are sent to, once every
%% other node knows it.
home_address(User, Nodes) ->
    Home = erpc:call(hd(Nodes), throng_members, home, [{User, <<"localhost">>}]),
    Addr = <<"127.0.0.1:", (integer_to_binary(port_of(Home)))/binary>>,
    Others = Nodes -- [Home],
    wait_until(fun() -> [erpc:call(N, throng_node_addr, address, [Home]) || N <- Others]
                            =:= [Addr || _ <- Others] end),
    {Home, Addr}.

%%% Cluster set-up

start_cluster(Config, Names) ->
    Seed = node_at(hd(Names)),
    start_cluster(Config, Names, Seed).

start_cluster(Config, Names, Seed) ->
    SharedPort = shared_port_number(),
    [start_node(Config, Name, Seed, SharedPort) || Name <- Names].

start_node(Config, Name, Seed, SharedPort) ->
    {Peer, Node} = case lists:member(Name, ?POOLED) andalso get(lone) =:= undefined of
                       true -> pool_node(Name);
                       false -> boot(Name)
                   end,
    put(peers, [{Node, Peer} | lists:keydelete(Node, 1, get_peers_by_node())]),
    Dir = filename:join([?config(priv_dir, Config), get(case_dir), atom_to_list(Name)]),
    Extra0 = case get(node_config) of undefined -> #{}; E -> E end,
    Cluster0 = maps:get(cluster, Extra0, #{}),
    %% node_address: the node's own listener (listener 1) on a port known
    %% before the start, where it redirects to its users' homes too.
    {Extra, Cluster} =
        case get(node_address) of
            true ->
                P = free_port(),
                {Extra0#{listener => #{port => P, redirect_to_home => true}},
                 Cluster0#{node_address => <<"127.0.0.1:", (integer_to_binary(P))/binary>>}};
            undefined ->
                {Extra0, Cluster0}
        end,
    Cfg = throng_ct:config(Extra#{data_dir => list_to_binary(Dir),
                                  cluster => Cluster#{seeds => seeds(Seed), db_nodes => [Seed],
                                                      reconnect_interval => 1},
                                  stream_management => #{resumption_secret =>
                                                             <<"cluster-suite-secret-0123456789abcdef">>}}),
    Shared = maps:get(Name, case get(shared_opts) of undefined -> #{}; M -> M end, #{}),
    Listeners = maps:get(listen, Cfg) ++
        [Shared#{port => SharedPort, ip => <<"127.0.0.1">>, reuse_port => true}],
    ok = erpc:call(Node, application, set_env, [throng, config, Cfg#{listen => Listeners}]),
    {ok, _} = erpc:call(Node, application, ensure_all_started, [throng]),
    Node.

%% A new node (a BEAM of its own) named Name, linked to this process.
boot(Name) ->
    {ok, Peer, Node} = peer:start_link(boot_opts(Name)),
    {Peer, Node}.

boot_opts(Name) ->
    Paths = lists:append([["-pa", P] || P <- code:get_path(), not lists:prefix(code:lib_dir(), P)]),
    %% Controlled over stdio, not distribution: a peer controlled over
    %% distribution halts when that connection drops (netsplit_heals drops
    %% connections on purpose).
    #{name => Name, connection => standard_io, args => Paths ++ vm_args()}.

%%% The pool: booting three BEAMs and loading Throng's code into them took
%%% about 1.3 s of every case's 2 s of set-up; the pool keeps node1..node3
%%% from case to case and only restarts their applications, each case with
%%% its own data directories, as the single-node suites restart the
%%% application in the test node. A node that a case stopped or killed is
%%% booted again; the nodes of a failed case are not kept.

pooled(Node) ->
    lists:member(node_name(Node), ?POOLED).

%% The pool's process owns the links to its peers: it outlives the cases.
start_pool() ->
    Pid = spawn(fun() -> process_flag(trap_exit, true), pool_loop(#{}) end),
    true = register(?POOL, Pid),
    ok.

stop_pool() ->
    pool_call(stop).

pool_call(Msg) ->
    Ref = monitor(process, ?POOL),
    ?POOL ! {Msg, self(), Ref},
    receive
        {Ref, Reply} -> demonitor(Ref, [flush]), Reply;
        {'DOWN', Ref, _, _, Why} -> error({pool_down, Why})
    end.

pool_loop(Peers) ->
    receive
        {{boot, Name}, From, Ref} ->
            {ok, Peer, Node} = peer:start_link(boot_opts(Name)),
            From ! {Ref, {Peer, Node}},
            pool_loop(Peers#{Name => {Peer, Node}});
        {running, From, Ref} ->
            Live = maps:filter(fun(_, {P, _}) -> is_process_alive(P) end, Peers),
            From ! {Ref, Live},
            pool_loop(Live);
        {stop, From, Ref} ->
            [catch peer:stop(P) || {P, _} <- maps:values(Peers)],
            From ! {Ref, ok};
        {'EXIT', _, _} ->
            pool_loop(Peers)
    end.

%% Every node of the pool that still runs, its applications stopped and
%% its runtime as a new one's for what the cases change (trace patterns,
%% meck); a node where that fails is stopped (the next start boots one).
reset_pool() ->
    Running = maps:values(pool_call(running)),
    Self = self(),
    Pids = [spawn_link(fun() -> Self ! {reset, self(), reset_node(P, N)} end) || {P, N} <- Running],
    [receive {reset, Pid, _} -> ok end || Pid <- Pids],
    ok.

reset_node(Peer, Node) ->
    try
        running = peer:get_state(Peer),
        ok = erpc:call(Node, ?MODULE, reset_runtime, [], 30000)
    catch _:Why ->
            ct:log("~p not reused (~0p): a new one is booted", [Node, Why]),
            catch peer:stop(Peer),
            stopped
    end.

%% Run in a pool node: what a case left there gone.
reset_runtime() ->
    _ = application:stop(throng),
    _ = application:stop(mnesia),
    ok = application:unset_env(throng, config),
    _ = erlang:trace(all, false, [all]),
    [_ = erlang:trace_pattern({'_', '_', '_'}, false, [F])
     || F <- [local, global, call_count, call_time]],
    case code:is_loaded(meck) of
        false -> ok;
        _ -> _ = meck:unload(), ok
    end.

%% Name's node from the pool: the one running (its applications stopped
%% by reset_pool/0, or stopped here when a case starts it again), or a new
%% one.
pool_node(Name) ->
    case maps:find(Name, pool_call(running)) of
        {ok, {Peer, Node}} ->
            case reset_node(Peer, Node) of
                ok -> {Peer, Node};
                stopped -> pool_call({boot, Name})
            end;
        error ->
            pool_call({boot, Name})
    end.

seeds(Seed) ->
    case get(lone) of
        true -> [];
        undefined -> [Seed]
    end.

get_peers() ->
    [P || {_, P} <- get_peers_by_node()].

get_peers_by_node() ->
    case get(peers) of
        undefined -> [];
        L -> L
    end.

node_at(Name) ->
    [_, Host] = string:split(atom_to_list(node()), "@"),
    list_to_atom(atom_to_list(Name) ++ "@" ++ Host).

node_name(Node) ->
    [Name, _] = string:split(atom_to_list(Node), "@"),
    list_to_atom(Name).

shared_port_number() ->
    case get(shared_port) of
        undefined ->
            P = free_port(),
            put(shared_port, P),
            P;
        P -> P
    end.

free_port() ->
    {ok, S} = gen_tcp:listen(0, []),
    {ok, P} = inet:port(S),
    gen_tcp:close(S),
    P.

wait_members(Nodes) ->
    Want = lists:sort(Nodes),
    wait_until(fun() -> lists:all(fun(N) -> erpc:call(N, throng_cluster, members, []) =:= Want end,
                                  Nodes) end).

%%% Clients

port_of(Node) ->
    erpc:call(Node, throng_listener, port, [{listener, 1}]).

login(User, Res, Node) when is_atom(Node) ->
    ?C:login(User, <<"password">>, Res, #{port => port_of(Node)});
login(User, Res, Port) when is_integer(Port) ->
    ?C:login(User, <<"password">>, Res, #{port => Port});
login(User, Res, HostPort) when is_binary(HostPort) ->
    {"127.0.0.1", Port} = throng_host_port:parse(HostPort),
    login(User, Res, Port).

online(User, Res, Where) ->
    online(User, Res, Where, 0).

%% online/3 that connects again (up to Tries times) when the server resets
%% or closes the connection before the stream is open.
online_reconnecting(User, Res, Port, Tries) ->
    try online(User, Res, Port)
    catch error:{badmatch, closed} when Tries > 1 -> online_reconnecting(User, Res, Port, Tries - 1);
          error:{connect_failed, _} when Tries > 1 -> online_reconnecting(User, Res, Port, Tries - 1)
    end.

%% Logged in, available, and its own presence echo read.
online(User, Res, Where, Prio) ->
    C = login(User, Res, Where),
    ?C:send(C, #xmlel{name = <<"presence">>,
                      children = [#xmlel{name = <<"priority">>,
                                         children = [{xmlcdata, integer_to_binary(Prio)}]}]}),
    Self = <<User/binary, "@localhost/", Res/binary>>,
    wait_for(C, fun(El) -> throng_xml:attr(<<"from">>, El) =:= Self end),
    C.

wait_for(C, Pred) ->
    wait_for(C, Pred, ?WAIT).

wait_for(C, Pred, Ms) ->
    case ?C:recv(C, Ms) of
        #xmlel{} = El ->
            case Pred(El) of
                true -> El;
                false -> wait_for(C, Pred, Ms)
            end;
        Other -> error({waited, Other})
    end.

body(El) ->
    case throng_xml:subel(El, <<"body">>) of
        undefined -> undefined;
        B -> throng_xml:cdata(B)
    end.

jid(U, R) ->
    #jid{user = U, server = <<"localhost">>, resource = R}.

wait_until(F) ->
    throng_ct:wait_until(F, ?WAIT).
