%% @doc The error contract of storage against the real server, on both
%% backends. Group mnesia: a write returns only when it is on disk; when the
%% fsync of the log fails (here `mnesia:sync_log/0' made to fail with meck)
%% or the transaction aborts, the write raises `error({storage_failed,
%% Reason})' instead of answering, every writer grouped into a failing sync
%% gets that error, and the next write after a failure is durable again.
%% Group pgsql (a private PostgreSQL server, no mock): the server is stopped
%% while Throng runs; logins get temporary-auth-failure, a message that
%% cannot be stored gets internal-server-error, nothing acknowledged before
%% is lost, and once the server is back the pool reconnects by itself.
%% Cases of both groups: an aborted transaction, reads without a database,
%% a login and an offline message while the store fails.
-module(durability_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").
-include("throng.hrl").

-compile([export_all, nowarn_export_all]).

-define(S, <<"localhost">>).

all() ->
    [{group, mnesia}, {group, pgsql}].

groups() ->
    Both = [aborted_transaction_is_storage_failed, reads_fail_the_same_way_without_database,
            login_while_store_fails_is_temporary, offline_message_while_store_fails_is_an_error],
    [{mnesia, [], [every_write_fails_when_sync_fails, grouped_writers_all_get_the_error,
                   offline_claim_keeps_messages_when_sync_fails,
                   sync_process_down_syncs_in_the_writer, archive_writes_are_synced_soon,
                   archive_writes_wait_for_a_sync_that_does_not_end,
                   archive_with_no_delay_syncs_before_each_store_returns,
                   archive_writes_survive_the_writer_killed, archive_log_is_replayed_at_start,
                   archive_half_written_tail_is_cut, archive_table_migrates_to_files,
                   archive_checkpoint_deletes_old_logs,
                   session_end_with_nothing_unacked_writes_nothing,
                   session_end_keeps_its_mailbox_when_the_roster_read_fails,
                   unavailable_reaches_the_contacts_once_the_roster_reads_again,
                   kept_unavailable_is_dropped_when_the_resource_is_back,
                   kept_unavailable_that_fails_to_send_is_dropped,
                   logout_records_last_activity_without_a_sync | Both]},
     {pgsql, [], [pool_process_down_fails_the_write, database_down_and_back,
                 offline_total_without_database_is_unknown | Both]}].

init_per_group(Group, Config) ->
    throng_ct:init_backend(Group, Config).

end_per_group(_Group, Config) ->
    throng_ct:end_backend(Config).

init_per_testcase(TC, Config) ->
    throng_ct:start_backend(Config, overrides(TC)),
    throng_ct:register(<<"alice">>, <<"password">>),
    Config.

overrides(archive_with_no_delay_syncs_before_each_store_returns) ->
    #{storage => #{archive_sync_delay => 0}};
overrides(_) ->
    #{}.

end_per_testcase(_TC, Config) ->
    catch meck:unload(mnesia),
    catch meck:unload(throng_storage_mnesia),
    catch meck:unload(throng_archive_files),
    application:unset_env(throng, archive_checkpoint_ms),
    throng_ct:stop(),
    case ?config(pg, Config) of
        undefined -> ok;
        PG -> throng_pg:ensure_server(PG)
    end.

%% The store stops answering: Mnesia stops, or the PostgreSQL server.
stop_store(Config) ->
    case ?config(pg, Config) of
        undefined -> stopped = mnesia:stop();
        PG -> throng_pg:stop_server(PG)
    end.

%% The store answers again: Mnesia starts, or the server and the pool has
%% reconnected (by itself: Throng is not restarted).
start_store(Config) ->
    case ?config(pg, Config) of
        undefined ->
            ok = mnesia:start(),
            ok = mnesia:wait_for_tables(mnesia:system_info(tables), 10000);
        PG ->
            throng_pg:start_server(PG),
            throng_ct:wait_until(fun() -> (catch throng_storage:kv_get(?MODULE, k)) =:= not_found end,
                                 20000)
    end.

failure(Fun) ->
    throng_ct:storage_failure(Fun).

fail_syncs_with(Error) ->
    ok = meck:new(mnesia, [passthrough, no_link]),
    ok = meck:expect(mnesia, sync_log, fun() -> Error end).

creds() ->
    throng_auth:make_creds(<<"password">>).

msg(Body) ->
    #offline_msg{timestamp = os:system_time(microsecond), from = <<"bob@localhost/x">>,
                 packet = <<"<message>", Body/binary, "</message>">>}.

%%% Cases

%%% The message archive in files (throng_archive_files, throng_archive_writer)

%% The one write that does not wait for the disk (throng_storage:mam_store/3,
%% a message archived on its way): the writer's log is synced soon after,
%% once for a burst of them, and again for the writes after that sync.
archive_writes_are_synced_soon(_Config) ->
    Self = self(),
    ok = meck:new(throng_archive_files, [passthrough, no_link]),
    ok = meck:expect(throng_archive_files, wal_sync,
                     fun(Fd) -> Self ! {synced, erlang:monotonic_time()}, meck:passthrough([Fd]) end),
    {Micros, _} = timer:tc(fun() -> [store_archive(Id) || Id <- lists:seq(1, 100)] end),
    %% Not one sync each: one for every storage.archive_sync_delay the
    %% burst took, and the last, which begins after the burst (waited for:
    %% a loaded machine delays it).
    Delay = throng_config:get([storage, archive_sync_delay]),
    Syncs = syncs_until(erlang:monotonic_time(), 0) + count_syncs(0),
    ct:pal("100 archive writes in ~b us, ~b syncs (delay ~b ms)", [Micros, Syncs, Delay]),
    ?assert(Syncs =< Micros div (Delay * 1000) + 2),
    101 = store_archive(101),
    _ = syncs_until(erlang:monotonic_time(), 0),
    ?assertEqual(101, throng_storage:mam_count(<<"alice">>, ?S, #mam_filter{})).

%% While the log's sync does not end (here held until the test lets it go),
%% the writer's callers wait: what a crash of the machine can lose stays
%% what came in before one sync.
archive_writes_wait_for_a_sync_that_does_not_end(_Config) ->
    Gate = ets:new(gate, [public]),
    ok = meck:new(throng_archive_files, [passthrough, no_link]),
    Self = self(),
    ok = meck:expect(throng_archive_files, wal_sync,
                     fun(Fd) -> Self ! sync_began, wait_gate(Gate), meck:passthrough([Fd]) end),
    1 = store_archive(1),
    %% The sync a delay later begins, and holds the writer.
    receive sync_began -> ok after 10000 -> ct:fail(no_sync_began) end,
    Writer = spawn_link(fun() -> Self ! {written, self(), store_archive(2)} end),
    receive {written, Writer, _} -> ct:fail(not_held_back) after 500 -> ok end,
    ets:insert(Gate, {open}),
    receive {written, Writer, Id} -> ?assertEqual(2, Id) after 10000 -> ct:fail(still_held) end,
    ?assertEqual(2, throng_storage:mam_count(<<"alice">>, ?S, #mam_filter{})).

%% With storage.archive_sync_delay 0 a store returns after the fsync of its
%% log record. When that fsync fails the store fails and the message is
%% not in the archive; the next store is kept again.
archive_with_no_delay_syncs_before_each_store_returns(_Config) ->
    Self = self(),
    ok = meck:new(throng_archive_files, [passthrough, no_link]),
    Report = fun(Fd) -> Self ! {synced, erlang:monotonic_time()}, meck:passthrough([Fd]) end,
    ok = meck:expect(throng_archive_files, wal_sync, Report),
    %% (The writer reports its sync before it answers the store.)
    ?assertEqual([{1, 1}, {2, 1}, {3, 1}], [{store_archive(Id), count_syncs(0)} || Id <- [1, 2, 3]]),
    ok = meck:expect(throng_archive_files, wal_sync, fun(_) -> {error, eio} end),
    ?assertEqual({aborted, {archive, {log_sync, eio}}}, failure(fun() -> store_archive(4) end)),
    ok = meck:expect(throng_archive_files, wal_sync, Report),
    ?assertEqual({5, 1}, {store_archive(5), count_syncs(0)}),
    ?assertEqual([1, 2, 3, 5], archive_ids()).

%% A store that returned is in the files: the writer killed right after
%% (as a kill -9 of the node would) loses nothing, and its successor
%% continues the ids.
archive_writes_survive_the_writer_killed(_Config) ->
    [store_archive(Id) || Id <- lists:seq(1, 50)],
    Shard = erlang:phash2({<<"alice">>, ?S}, throng_archive_sup:shards()),
    Name = list_to_atom("throng_archive_writer_" ++ integer_to_list(Shard)),
    Old = whereis(Name),
    exit(Old, kill),
    ?assertEqual(lists:seq(1, 50), archive_ids()),
    wait_new_process(Name, Old),
    ?assertEqual(51, store_archive(1)),
    ?assertEqual(51, throng_storage:mam_count(<<"alice">>, ?S, #mam_filter{})).

%% What the log holds reaches the archive at the next start even when the
%% archive's own files lost it (a crash of the machine loses the pages
%% that were not synced; here the files are cut back by hand), and a
%% deletion in the log is applied again after the stores it followed.
archive_log_is_replayed_at_start(_Config) ->
    [store_archive(Id) || Id <- lists:seq(1, 20)],
    Store = fun(U, Id) -> throng_storage:mam_store(U, ?S, #mam_msg{id = Id, peer = {<<"x@y">>, <<>>},
                                                                    packet = <<"<message/>">>})
            end,
    [Store(<<"bob">>, Id) || Id <- lists:seq(1, 5)],
    ok = throng_storage:mam_delete_user(<<"bob">>, ?S),
    Root = throng_archive_files:root(),
    ok = application:stop(throng),
    ?assertNotEqual([], throng_archive_files:wal_files(Root)),
    [Idx] = filelib:wildcard(filename:join(Root, "localhost/*/*.idx")),
    {ok, Fd} = file:open(Idx, [raw, binary, read, write]),
    {ok, _} = file:position(Fd, 16 + 5 * 20 + 7),
    ok = file:truncate(Fd),
    ok = file:close(Fd),
    _ = application:stop(mnesia),
    {ok, _} = application:ensure_all_started(throng),
    ?assertEqual(lists:seq(1, 20), archive_ids()),
    ?assertEqual([], throng_storage:mam_query(<<"bob">>, ?S, #mam_filter{}, forward, 10)),
    %% Applied, synced and deleted: the writers' logs are new and empty.
    ?assertEqual([0], lists:usort([filelib:file_size(P)
                                   || {_, _, P} <- throng_archive_files:wal_files(Root)])),
    ?assertEqual(21, store_archive(21)).

%% A record or an entry half written when the node died is cut off when
%% the archive is next opened; the rest reads as before.
archive_half_written_tail_is_cut(_Config) ->
    [store_archive(Id) || Id <- lists:seq(1, 10)],
    Root = throng_archive_files:root(),
    ok = application:stop(throng),
    [file:delete(P) || {_, _, P} <- throng_archive_files:wal_files(Root)],
    [Base] = [filename:rootname(P) || P <- filelib:wildcard(filename:join(Root, "localhost/*/*.idx"))],
    ok = file:write_file(Base ++ ".idx", <<1, 2, 3, 4, 5, 6, 7>>, [append]),
    ok = file:write_file(Base ++ ".dat", <<"half a record">>, [append]),
    _ = application:stop(mnesia),
    {ok, _} = application:ensure_all_started(throng),
    ?assertEqual(lists:seq(1, 10), archive_ids()),
    ?assertEqual(11, store_archive(5)),
    ?assertEqual(lists:seq(1, 11), archive_ids()).

%% An archive that an earlier version kept in the table throng_mam moves
%% to the files at the next start, and the table is emptied.
archive_table_migrates_to_files(_Config) ->
    Rows = [{throng_mam, {{<<"alice">>, ?S}, Id}, {<<"bob@localhost">>, <<>>}, <<"<message/>">>}
            || Id <- lists:seq(1, 300)],
    ok = lists:foreach(fun mnesia:dirty_write/1, Rows),
    ok = throng_ct:restart(),
    ?assertEqual(0, mnesia:table_info(throng_mam, size)),
    ?assertEqual(lists:seq(1, 300), archive_ids()),
    ?assertEqual(301, store_archive(7)).

%% A checkpoint (here every 200 ms of stores) puts what the old log files
%% hold into the archives' files, syncs them, keeps the largest id given
%% and deletes those log files; ids go on above it after a start whose
%% clock is behind (here: stores asking for id 1).
archive_checkpoint_deletes_old_logs(_Config) ->
    ok = application:set_env(throng, archive_checkpoint_ms, 200),
    ok = throng_ct:restart(),
    Root = throng_archive_files:root(),
    Shard = erlang:phash2({<<"alice">>, ?S}, throng_archive_sup:shards()),
    Logs = fun() -> [Seq || {Sh, Seq, _} <- throng_archive_files:wal_files(Root), Sh =:= Shard] end,
    [First] = Logs(),
    [store_archive(Id) || Id <- lists:seq(1, 20)],
    %% Stores keep coming until a checkpoint has replaced the first log.
    wait_until(fun() -> store_archive(1), not lists:member(First, Logs()) end),
    Stored = length(archive_ids()),
    ?assert(Stored >= 21),
    ?assert(throng_archive_files:floor(Root) >= 20),
    ok = application:stop(throng),
    _ = application:stop(mnesia),
    ok = application:unset_env(throng, archive_checkpoint_ms),
    {ok, _} = application:ensure_all_started(throng),
    ?assertEqual(lists:seq(1, Stored), archive_ids()),
    ?assertEqual(Stored + 1, store_archive(1)).

wait_until(Fun) ->
    wait_until(Fun, 500).

wait_until(_Fun, 0) ->
    ct:fail(condition_not_reached);
wait_until(Fun, N) ->
    case Fun() of
        true -> ok;
        false -> timer:sleep(20), wait_until(Fun, N - 1)
    end.

store_archive(Id) ->
    throng_storage:mam_store(<<"alice">>, ?S, #mam_msg{id = Id, peer = {<<"bob@localhost">>, <<>>},
                                                       packet = <<"<message/>">>}).

archive_ids() ->
    [Id || #mam_msg{id = Id} <- throng_storage:mam_query(<<"alice">>, ?S, #mam_filter{}, forward,
                                                         100000)].

wait_new_process(Name, Old) ->
    case whereis(Name) of
        Pid when is_pid(Pid), Pid =/= Old -> ok;
        _ -> timer:sleep(10), wait_new_process(Name, Old)
    end.

wait_gate(Gate) ->
    case ets:member(Gate, open) of
        true -> ok;
        false -> timer:sleep(10), wait_gate(Gate)
    end.

%% The syncs begun (as archive_writes_are_synced_soon's mock reports them)
%% until one begins after T, that one included. It is waited for up to
%% 10 s, a bound for a loaded machine, not a measure: a group commit that
%% never comes fails the case, a late one does not.
syncs_until(T, N) ->
    receive
        {synced, Began} when Began > T -> N + 1;
        {synced, _} -> syncs_until(T, N + 1)
    after 10000 -> ct:fail({no_sync_begun_after_the_writes, N})
    end.

%% The syncs begun that have already been reported.
count_syncs(N) ->
    receive {synced, _} -> count_syncs(N + 1) after 0 -> N end.

%%% Mnesia's writes

%% Each kind of write raises {storage_failed, {sync, _}} when its sync fails.
every_write_fails_when_sync_fails(_Config) ->
    fail_syncs_with({error, {file_error, "LATEST.LOG", eio}}),
    Sync = {sync, {file_error, "LATEST.LOG", eio}},
    Item = #roster_item{jid = {<<"bob">>, ?S}},
    Writes = [fun() -> throng_storage:create_account(<<"carol">>, ?S, creds()) end,
              fun() -> throng_storage:set_credentials(<<"alice">>, ?S, creds()) end,
              fun() -> throng_storage:roster_update(<<"alice">>, ?S, {<<"bob">>, ?S},
                                                    fun(_) -> {set, Item} end) end,
              fun() -> throng_storage:offline_store(<<"alice">>, ?S, msg(<<"1">>), {10, 1000000}) end,
              fun() -> throng_storage:kv_put(?MODULE, k, v) end,
              fun() -> throng_storage:kv_delete(?MODULE, k) end,
              fun() -> throng_storage:bulk_create(?S, [{<<"dave">>, creds(), []}]) end,
              fun() -> throng_storage:remove_account(<<"alice">>, ?S) end],
    [?assertEqual(Sync, failure(W)) || W <- Writes],
    %% Syncing works again: writes are acknowledged.
    meck:unload(mnesia),
    ok = throng_storage:kv_put(?MODULE, k, v2),
    ?assertEqual({ok, v2}, throng_storage:kv_get(?MODULE, k)).

%% Writers that share a failing sync all get the error; the write after it
%% is acknowledged.
grouped_writers_all_get_the_error(_Config) ->
    Test = self(),
    ok = meck:new(mnesia, [passthrough, no_link]),
    ok = meck:expect(mnesia, sync_log,
                     fun() ->
                             Test ! {sync_started, self()},
                             receive {finish, Result} -> Result() end
                     end),
    First = put_async(first),
    Worker1 = sync_started(),
    Group = [put_async(N) || N <- lists:seq(1, 8)],
    wait_queued(8),
    Worker1 ! {finish, fun() -> meck:passthrough([]) end},
    ?assertEqual(ok, result(First)),
    Worker2 = sync_started(),
    Worker2 ! {finish, fun() -> {error, eio} end},
    ?assertEqual([{storage_failed, {sync, eio}} || _ <- Group], [result(W) || W <- Group]),
    Later = put_async(later),
    Worker3 = sync_started(),
    Worker3 ! {finish, fun() -> meck:passthrough([]) end},
    ?assertEqual(ok, result(Later)),
    ?assertEqual({ok, later}, throng_storage:kv_get(?MODULE, later)).

put_async(Key) ->
    Test = self(),
    spawn_link(fun() ->
                       R = try throng_storage:kv_put(?MODULE, Key, Key)
                           catch error:{storage_failed, _} = E -> E
                           end,
                       Test ! {written, self(), R}
               end).

sync_started() ->
    receive {sync_started, Worker} -> Worker
    after 5000 -> ct:fail(no_sync_started)
    end.

result(Writer) ->
    receive {written, Writer, R} -> R
    after 5000 -> ct:fail({no_result, Writer})
    end.

%% Writers queued for the sync after the running one (white box: the
%% record of throng_mnesia_sync).
wait_queued(N) ->
    case sys:get_state(throng_mnesia_sync) of
        {st, _, _, Next, _, _} when length(Next) =:= N -> ok;
        _ -> timer:sleep(5), wait_queued(N)
    end.

%% Taking offline messages into flight when that cannot be synced raises,
%% and the messages are still stored offline (nothing in flight) for the
%% next try.
offline_claim_keeps_messages_when_sync_fails(_Config) ->
    [ok = throng_storage:offline_store(<<"alice">>, ?S, msg(B), {10, 1000000}) || B <- [<<"1">>, <<"2">>]],
    Bytes = throng_storage:offline_bytes(),
    fail_syncs_with({error, eio}),
    ?assertEqual({sync, eio}, failure(fun() -> throng_storage:inflight_claim(<<"alice">>, ?S, self()) end)),
    ?assertEqual(2, throng_storage:offline_count(<<"alice">>, ?S)),
    ?assertEqual(0, throng_storage:inflight_count()),
    ?assertEqual(Bytes, throng_storage:offline_bytes()),
    meck:unload(mnesia),
    Claimed = throng_storage:inflight_claim(<<"alice">>, ?S, self()),
    ?assertEqual([<<"<message>1</message>">>, <<"<message>2</message>">>],
                 [P || {_Key, #offline_msg{packet = P}} <- Claimed]),
    ?assertEqual(0, throng_storage:offline_count(<<"alice">>, ?S)),
    ?assertEqual(2, throng_storage:inflight_count()).

%% A write while the group-commit process is down (as before the tree
%% starts, when the hosts' modules start) fsyncs Mnesia's log itself: it is
%% acknowledged once on disk, and fails when that fsync fails. Once its
%% supervisor has restarted the process, writes go through it again.
sync_process_down_syncs_in_the_writer(_Config) ->
    ok = supervisor:terminate_child(throng_services_sup, throng_mnesia_sync),
    ok = meck:new(mnesia, [passthrough, no_link]),
    ok = throng_storage:kv_put(?MODULE, k, v),
    ?assertEqual([self()], [P || {P, {mnesia, sync_log, []}, ok} <- meck:history(mnesia)]),
    ok = meck:expect(mnesia, sync_log, fun() -> {error, eio} end),
    ?assertMatch({sync, eio}, failure(fun() -> throng_storage:kv_put(?MODULE, k, w) end)),
    meck:unload(mnesia),
    {ok, _} = supervisor:restart_child(throng_services_sup, throng_mnesia_sync),
    ok = throng_storage:kv_put(?MODULE, k, v),
    ?assertEqual({ok, v}, throng_storage:kv_get(?MODULE, k)).

%% A transaction that aborts raises {storage_failed, {aborted, _}} and
%% changes nothing.
aborted_transaction_is_storage_failed(_Config) ->
    Before = throng_storage:roster_get(<<"alice">>, ?S),
    ?assertMatch({aborted, _},
                 failure(fun() ->
                                 throng_storage:roster_update(<<"alice">>, ?S, {<<"bob">>, ?S},
                                                              fun(_) -> error(oops) end)
                         end)),
    ?assertEqual(Before, throng_storage:roster_get(<<"alice">>, ?S)).

%% With the database stopped, reads raise the same error as writes.
reads_fail_the_same_way_without_database(Config) ->
    stop_store(Config),
    ?assertMatch({aborted, _},
                 failure(fun() -> throng_storage:account_exists(<<"alice">>, ?S) end)),
    ?assertMatch({aborted, _}, failure(fun() -> throng_storage:kv_get(?MODULE, k) end)),
    ?assertMatch({aborted, _}, failure(fun() -> throng_storage:kv_put(?MODULE, k, v) end)).

%% The statistics' count of offline messages (throng_info, read every
%% second by the collector) is unknown while the database cannot answer, not
%% a crash of its reader (the collector was restarted on a saturated
%% PostgreSQL pool: {storage_failed, {aborted, {pool_timeout, _}}}).
offline_total_without_database_is_unknown(Config) ->
    ?assert(is_integer(throng_info:offline_total())),
    stop_store(Config),
    ?assertEqual(undefined, throng_info:offline_total()).

%% A login while the store cannot answer gets temporary-auth-failure
%% (RFC 6120 §6.5.11), not not-authorized and not a dropped connection; the
%% same stream logs in once the store answers again. (Mnesia: the read of
%% credentials made to fail with meck, the rest of the node keeps its
%% database; PostgreSQL: the server stopped.)
login_while_store_fails_is_temporary(Config) ->
    case ?config(backend, Config) of
        mnesia ->
            ok = meck:new(throng_storage_mnesia, [passthrough, no_link]),
            ok = meck:expect(throng_storage_mnesia, login_read,
                             fun(_, _, _) ->
                                     error({storage_failed, {aborted, {node_not_running, node()}}})
                             end);
        pgsql ->
            stop_store(Config)
    end,
    C = throng_test_client:connect(#{}),
    _ = throng_test_client:open_stream(C),
    ?assertEqual({failure, <<"temporary-auth-failure">>},
                 throng_test_client:auth_plain(C, <<"alice">>, <<"password">>)),
    ?assertEqual({failure, <<"temporary-auth-failure">>},
                 throng_test_client:auth_scram(C, <<"alice">>, <<"password">>, sha256)),
    case ?config(backend, Config) of
        mnesia -> ok = meck:unload(throng_storage_mnesia);
        pgsql -> start_store(Config)
    end,
    timer:sleep(200),   %% the second failure is answered after a short delay
    ?assertEqual(ok, throng_test_client:auth_plain(C, <<"alice">>, <<"password">>)).

%% A session that ends with nothing unacknowledged and nothing held has
%% nothing to re-route: its end costs no transaction and no fsync (each
%% logout used to run an empty transaction and wait for a group fsync; in a
%% cluster, on the database nodes).
session_end_with_nothing_unacked_writes_nothing(_Config) ->
    C = throng_test_client:login(<<"alice">>, <<"password">>, <<"r1">>),
    _ = throng_test_client:iq(C, <<"get">>, {xmlel, <<"ping">>, [{<<"xmlns">>, <<"urn:xmpp:ping">>}], []}),
    Counted = [{mnesia, sync_transaction, 1}, {throng_storage_mnesia, batch, 1},
               {throng_mnesia_sync, sync, 0}],
    [erlang:trace_pattern(MFA, true, [call_count]) || MFA <- Counted],
    {ok, JID} = throng_jid:parse(throng_test_client:jid(C)),
    Session = erlang:monitor(process, throng_sm:lookup(JID)),
    try
        ok = throng_test_client:close(C),
        %% The session lingers for late messages, re-routes what it has, ends.
        receive {'DOWN', Session, process, _, _} -> ok after 10000 -> error(session_did_not_end) end,
        ?assertEqual([{MFA, 0} || MFA <- Counted],
                     [{MFA, element(2, erlang:trace_info(MFA, call_count))} || MFA <- Counted])
    after
        [erlang:trace_pattern(MFA, false, [call_count]) || MFA <- Counted]
    end.

%% A session ends while the store fails its roster read (the unavailable
%% presence to its contacts needs the roster): what is in its mailbox is
%% still routed again, here to offline storage. Before, the failed read
%% ended the session's end there and the mailbox was dropped (seen on a
%% saturated PostgreSQL pool: messages neither received nor kept). The
%% mocked read puts a message in the mailbox first, as a sender's route
%% that arrived just before the session left the directory.
session_end_keeps_its_mailbox_when_the_roster_read_fails(_Config) ->
    C = throng_test_client:login(<<"alice">>, <<"password">>, <<"r1">>),
    ok = throng_test_client:send(C, throng_test_client:presence([])),
    {ok, JID} = throng_jid:parse(throng_test_client:jid(C)),
    ok = throng_ct:wait_until(fun() -> throng_sm:available({<<"alice">>, ?S}) =/= [] end, 5000),
    Pid = throng_sm:lookup(JID),
    {ok, From} = throng_jid:parse(<<"bob@localhost/x">>),
    Msg = throng_test_client:message(throng_jid:to_binary(JID), <<"chat">>, <<"late">>),
    ok = meck:new(throng_storage_mnesia, [passthrough, no_link]),
    ok = meck:expect(throng_storage_mnesia, roster_get,
                     fun(_U, _S) when self() =:= Pid ->
                             Pid ! {route, From, JID, Msg},
                             error({storage_failed, {aborted, test}});
                        (U, S) -> meck:passthrough([U, S])
                     end),
    Session = erlang:monitor(process, Pid),
    ok = throng_test_client:close(C),
    receive {'DOWN', Session, process, _, _} -> ok after 10000 -> error(session_did_not_end) end,
    ?assert(meck:called(throng_storage_mnesia, roster_get, ['_', '_'], Pid)),
    ok = meck:unload(throng_storage_mnesia),
    ?assertEqual(1, throng_storage:offline_count(<<"alice">>, ?S)).

%% A session that ends while its roster cannot be read (the database down,
%% its pool full) cannot find its subscribers: its unavailable presence is
%% kept and sent to them once the store reads the roster again, so bob does
%% not see alice online after she left. Here the reads of alice's roster by
%% her session and by the retry process fail until the mock goes.
unavailable_reaches_the_contacts_once_the_roster_reads_again(_Config) ->
    {A, B} = alice_and_bob_online(),
    Sent = throng_metrics:value(presence_deferred_sent),
    fail_alice_roster_reads_of(A),
    ok = throng_test_client:close(A),
    wait_failed_roster_reads(2),      %% the session's, then the first retry's
    ?assertEqual(1, throng_presence_retry:waiting()),
    ok = throng_test_client:expect_nothing(B, 200),
    ok = meck:unload(throng_storage_mnesia),
    U = wait_presence(B, <<"unavailable">>),
    ?assertEqual(<<"alice@localhost/a">>, throng_xml:attr(<<"from">>, U)),
    ?assertEqual(0, throng_presence_retry:waiting()),
    ?assertEqual(Sent + 1, throng_metrics:value(presence_deferred_sent)).

%% The kept unavailable presence of a resource that is available again when
%% the store answers is dropped: bob keeps seeing alice/a online.
kept_unavailable_is_dropped_when_the_resource_is_back(_Config) ->
    {A, B} = alice_and_bob_online(),
    Before = deferred_counts(),
    fail_alice_roster_reads_of(A),
    ok = throng_test_client:close(A),
    wait_failed_roster_reads(2),
    A2 = throng_test_client:login(<<"alice">>, <<"password">>, <<"a">>),
    ok = throng_test_client:available(A2),
    P = wait_presence(B, undefined),
    ?assertEqual(<<"alice@localhost/a">>, throng_xml:attr(<<"from">>, P)),
    ok = meck:unload(throng_storage_mnesia),
    ok = throng_ct:wait_until(fun() -> throng_presence_retry:waiting() =:= 0 end, 40000),
    {Skipped, Sent} = Before,
    ?assertEqual({Skipped + 1, Sent}, deferred_counts()),
    ok = throng_test_client:expect_nothing(B, 200).

%% A kept broadcast whose sender fails otherwise than on the store is
%% dropped (counted, logged); the process goes on. (Crashing, it would lose
%% every other kept broadcast.)
kept_unavailable_that_fails_to_send_is_dropped(_Config) ->
    Pid = whereis(throng_presence_retry),
    Dropped = throng_metrics:value(presence_deferred_dropped),
    {ok, JID} = throng_jid:parse(<<"nobody@localhost/r">>),
    El = #xmlel{name = <<"presence">>, attrs = [{<<"type">>, <<"unavailable">>}]},
    %% erlang:error(JID, El): a sender that raises error:JID.
    ok = throng_presence_retry:later(JID, El, {erlang, error}, test),
    ok = throng_ct:wait_until(
           fun() -> throng_metrics:value(presence_deferred_dropped) =:= Dropped + 1 end, 10000),
    ?assertEqual(0, throng_presence_retry:waiting()),
    ?assertEqual(Pid, whereis(throng_presence_retry)).

deferred_counts() ->
    {throng_metrics:value(presence_deferred_skipped), throng_metrics:value(presence_deferred_sent)}.

alice_and_bob_online() ->
    ok = throng_ct:register(<<"bob">>, <<"password">>),
    ok = throng_ct:mutual(<<"alice">>, <<"bob">>),
    B = throng_test_client:login(<<"bob">>, <<"password">>, <<"b">>),
    ok = throng_test_client:available(B),
    A = throng_test_client:login(<<"alice">>, <<"password">>, <<"a">>),
    ok = throng_test_client:available(A),
    _ = wait_presence(B, undefined),
    {A, B}.

%% Reads of alice's roster by the session of client A and by the retry
%% process fail; any other read (a new session's) is the store's.
fail_alice_roster_reads_of(A) ->
    {ok, JID} = throng_jid:parse(throng_test_client:jid(A)),
    Failing = [throng_sm:lookup(JID), whereis(throng_presence_retry)],
    ok = meck:new(throng_storage_mnesia, [passthrough, no_link]),
    ok = meck:expect(throng_storage_mnesia, roster_get,
                     fun(<<"alice">> = U, S) ->
                             case lists:member(self(), Failing) of
                                 true -> error({storage_failed, {aborted, test}});
                                 false -> meck:passthrough([U, S])
                             end;
                        (U, S) -> meck:passthrough([U, S])
                     end).

wait_failed_roster_reads(N) ->
    Retry = whereis(throng_presence_retry),
    ok = throng_ct:wait_until(
           fun() -> meck:num_calls(throng_storage_mnesia, roster_get, [<<"alice">>, '_']) >= N
                        andalso meck:called(throng_storage_mnesia, roster_get, '_', Retry)
           end, 10000).

wait_presence(C, Type) ->
    case throng_test_client:recv(C, 10000) of
        #xmlel{name = <<"presence">>} = El ->
            case throng_xml:attr(<<"type">>, El) of
                Type -> El;
                _ -> wait_presence(C, Type)
            end;
        #xmlel{} -> wait_presence(C, Type);
        Other -> error({waited_for_presence, Type, Other})
    end.

%% A logout (a session that ends while available) records the time for
%% XEP-0012 without waiting for the disk: no transaction, no fsync; the
%% time is there at once.
logout_records_last_activity_without_a_sync(_Config) ->
    C = throng_test_client:login(<<"alice">>, <<"password">>, <<"r1">>),
    ok = throng_test_client:send(C, throng_test_client:presence([])),
    {ok, JID} = throng_jid:parse(throng_test_client:jid(C)),
    ok = throng_ct:wait_until(fun() -> throng_sm:available({<<"alice">>, ?S}) =/= [] end, 5000),
    Session = erlang:monitor(process, throng_sm:lookup(JID)),
    Counted = [{mnesia, sync_transaction, 1}, {throng_mnesia_sync, sync, 0}],
    [erlang:trace_pattern(MFA, true, [call_count]) || MFA <- Counted],
    Before = erlang:system_time(second),
    try
        ok = throng_test_client:close(C),
        receive {'DOWN', Session, process, _, _} -> ok after 10000 -> error(session_did_not_end) end,
        ?assertEqual([{MFA, 0} || MFA <- Counted],
                     [{MFA, element(2, erlang:trace_info(MFA, call_count))} || MFA <- Counted]),
        {ok, {At, <<>>}} = throng_storage:kv_get(last_activity, {<<"alice">>, ?S}),
        ?assert(At >= Before)
    after
        [erlang:trace_pattern(MFA, false, [call_count]) || MFA <- Counted]
    end.

%% A message for an offline user while the store cannot answer gets
%% internal-server-error back (it was not kept), and the sender's session
%% goes on; once the store answers, the next message is stored.
offline_message_while_store_fails_is_an_error(Config) ->
    throng_ct:register(<<"bob">>, <<"password">>),
    A = throng_test_client:login(<<"alice">>, <<"password">>, <<"r">>),
    stop_store(Config),
    ?assertEqual(<<"internal-server-error">>, send_to_offline(A, <<"bob@localhost">>, <<"1">>)),
    start_store(Config),
    ?assertEqual(stored, send_to_offline(A, <<"bob@localhost">>, <<"2">>)),
    ?assertEqual(1, throng_storage:offline_count(<<"bob">>, ?S)).

%% Sends a chat message, then a ping, and when that is answered another:
%% the error condition that came back for the message, or stored when none
%% did. (A bounce comes back through the sender's own session, after the
%% stanzas it had already read: before the second ping's answer.)
send_to_offline(C, To, Id) ->
    throng_test_client:send(C, #xmlel{name = <<"message">>,
                                      attrs = [{<<"id">>, Id}, {<<"to">>, To}, {<<"type">>, <<"chat">>}],
                                      children = [#xmlel{name = <<"body">>,
                                                         children = [{xmlcdata, <<"hi">>}]}]}),
    lists:foldl(fun(N, Result) ->
                        PingId = <<"ping-", N/binary, "-", Id/binary>>,
                        ping(C, PingId),
                        answer(C, Id, PingId, Result)
                end, stored, [<<"1">>, <<"2">>]).

ping(C, PingId) ->
    throng_test_client:send(C, #xmlel{name = <<"iq">>,
                                      attrs = [{<<"type">>, <<"get">>}, {<<"id">>, PingId},
                                               {<<"to">>, <<"localhost">>}],
                                      children = [#xmlel{name = <<"ping">>,
                                                         attrs = [{<<"xmlns">>, <<"urn:xmpp:ping">>}]}]}).

answer(C, Id, LastPing, Result) ->
    El = throng_test_client:recv_stanza(C),
    case {El#xmlel.name, throng_xml:attr(<<"id">>, El)} of
        {<<"iq">>, LastPing} -> Result;
        {<<"message">>, Id} ->
            <<"error">> = throng_xml:attr(<<"type">>, El),
            #xmlel{children = [#xmlel{name = Cond} | _]} = throng_xml:subel(El, <<"error">>),
            answer(C, Id, LastPing, Cond);
        _ -> answer(C, Id, LastPing, Result)
    end.

%%% PostgreSQL

%% A write while every process of the pool is down is not acknowledged
%% ({aborted, db_down}); once they are back, writes work.
pool_process_down_fails_the_write(_Config) ->
    Names = [Id || {Id, _, _, _} <- supervisor:which_children(throng_pgsql_sup)],
    [ok = supervisor:terminate_child(throng_pgsql_sup, N) || N <- Names],
    ?assertEqual({aborted, db_down}, failure(fun() -> throng_storage:kv_put(?MODULE, k, v) end)),
    [{ok, _} = supervisor:restart_child(throng_pgsql_sup, N) || N <- Names],
    ok = throng_storage:kv_put(?MODULE, k, v).

%% The database goes down while Throng runs and comes back: meanwhile a
%% login gets temporary-auth-failure and a message for an offline user
%% internal-server-error; what was stored before is not lost, and logins
%% work again without a restart of Throng.
database_down_and_back(Config) ->
    [throng_ct:register(U, <<"password">>) || U <- [<<"bob">>, <<"carol">>]],
    C = throng_test_client:login(<<"carol">>, <<"password">>, <<"r">>),
    ?assertEqual(stored, send_to_offline(C, <<"bob@localhost">>, <<"before">>)),
    stop_store(Config),
    ?assertMatch({failure, <<"temporary-auth-failure">>}, fresh_login(<<"alice">>)),
    ?assertEqual(<<"internal-server-error">>, send_to_offline(C, <<"bob@localhost">>, <<"during">>)),
    throng_pg:start_server(?config(pg, Config)),
    throng_ct:wait_until(fun() -> fresh_login(<<"alice">>) =:= ok end, 20000),
    %% Bob gets what was stored before the outage, and only that.
    B = throng_test_client:login(<<"bob">>, <<"password">>, <<"r">>),
    throng_test_client:send(B, throng_test_client:presence([])),
    ?assertEqual([<<"before">>], offline_ids(B, [])),
    ?assertEqual(stored, send_to_offline(C, <<"alice@localhost">>, <<"after">>)).

%% A new connection's PLAIN login: ok or {failure, Condition}.
fresh_login(User) ->
    C = throng_test_client:connect(#{}),
    _ = throng_test_client:open_stream(C),
    R = throng_test_client:auth_plain(C, User, <<"password">>),
    throng_test_client:abort(C),
    R.

%% The ids of the messages a session receives until nothing comes for a
%% second.
offline_ids(C, Acc) ->
    case throng_test_client:recv(C, 1000) of
        #xmlel{name = <<"message">>} = M -> offline_ids(C, [throng_xml:attr(<<"id">>, M) | Acc]);
        #xmlel{} -> offline_ids(C, Acc);
        timeout -> lists:reverse(Acc)
    end.
