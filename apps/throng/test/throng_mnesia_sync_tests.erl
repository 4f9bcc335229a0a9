%% @doc The group commit: every writer gets the result of the sync that
%% covered it, a failed sync reaches each of its writers as an error, and a
%% failure does not stick. `mnesia:sync_log/0' is replaced (meck) by one
%% that reports to the test and waits for the result to return.
-module(throng_mnesia_sync_tests).

-include_lib("eunit/include/eunit.hrl").

-define(SYNC, throng_mnesia_sync).

sync_test_() ->
    [{Title, fun() -> with_sync(Test) end}
     || {Title, Test} <-
            [{"a sync that succeeds answers ok", fun ok_when_synced/0},
             {"an error returned by sync_log reaches the writer", fun error_reaches_writer/0},
             {"an exception in sync_log reaches the writer as an error",
              fun crash_reaches_writer/0},
             {"writers grouped into a failing sync all get the error; the next sync works",
              fun grouped_writers_all_fail/0},
             {"with the process not running (before the tree starts), sync/0 fsyncs the log itself",
              fun not_running/0},
             {"sync_soon starts a sync that nobody waits for", fun soon_starts_a_sync/0},
             {"sync_soons of the same moment share one sync", fun soons_share_a_sync/0},
             {"sync_soon while a sync runs owes the next one", fun soon_owes_the_next/0}]].

%% Runs Test in this process with a fresh throng_mnesia_sync whose
%% sync_log calls report here and wait for {finish, ResultFun}.
with_sync(Test) ->
    Self = self(),
    %% A sync_soon's sync begins storage.archive_sync_delay ms later.
    ok = application:set_env(throng, config, #{storage => #{archive_sync_delay => 10}}),
    ok = throng_config:load(),
    ok = application:unset_env(throng, config),
    ok = meck:new(mnesia, [no_link]),
    ok = meck:expect(mnesia, sync_log,
                     fun() ->
                             Self ! {sync_started, self()},
                             receive {finish, Result} -> Result() end
                     end),
    {ok, Pid} = ?SYNC:start_link(),
    unlink(Pid),
    try Test()
    after
        exit(Pid, kill),
        meck:unload(mnesia)
    end.

%% Starts a writer; its result arrives as {synced, Writer, Result}.
writer() ->
    Test = self(),
    spawn_link(fun() -> Test ! {synced, self(), ?SYNC:sync()} end).

%% Waits for the next sync_log call and makes it return Result().
finish_next(Result) ->
    receive {sync_started, Worker} -> Worker ! {finish, Result}
    after 5000 -> error(no_sync_started)
    end.

result(Writer) ->
    receive {synced, Writer, R} -> R
    after 5000 -> error({no_result, Writer})
    end.

%% Writers waiting for the sync after the running one.
queued() ->
    {st, _Worker, _Current, Next, _Again, _Soon} = sys:get_state(?SYNC),
    length(Next).

%% Whether a sync nobody waits for is owed after the running one.
owed() ->
    element(5, sys:get_state(?SYNC)).

wait_queued(N) ->
    case queued() of
        N -> ok;
        _ -> timer:sleep(5), wait_queued(N)
    end.

ok_when_synced() ->
    W = writer(),
    finish_next(fun() -> ok end),
    ?assertEqual(ok, result(W)).

error_reaches_writer() ->
    W = writer(),
    finish_next(fun() -> {error, {file_error, "LATEST.LOG", eio}} end),
    ?assertEqual({error, {file_error, "LATEST.LOG", eio}}, result(W)).

crash_reaches_writer() ->
    W = writer(),
    finish_next(fun() -> error(disk_gone) end),
    ?assertMatch({error, {error, disk_gone}}, result(W)).

grouped_writers_all_fail() ->
    First = writer(),
    Worker1 = receive {sync_started, W1} -> W1 after 5000 -> error(no_sync_started) end,
    %% These arrive while the first sync runs: the next sync covers them all.
    Group = [writer() || _ <- lists:seq(1, 5)],
    wait_queued(5),
    Worker1 ! {finish, fun() -> ok end},
    ?assertEqual(ok, result(First)),
    finish_next(fun() -> {error, eio} end),
    ?assertEqual([{error, eio} || _ <- Group], [result(W) || W <- Group]),
    %% The failure does not stick.
    Later = writer(),
    finish_next(fun() -> ok end),
    ?assertEqual(ok, result(Later)).

not_running() ->
    exit(whereis(?SYNC), kill),
    timer:sleep(10),
    W = writer(),
    finish_next(fun() -> ok end),
    ?assertEqual(ok, result(W)),
    Failed = writer(),
    finish_next(fun() -> {error, eio} end),
    ?assertEqual({error, eio}, result(Failed)).

soon_starts_a_sync() ->
    ok = ?SYNC:sync_soon([node()]),
    finish_next(fun() -> ok end),
    %% And a writer after it gets its own sync.
    W = writer(),
    finish_next(fun() -> ok end),
    ?assertEqual(ok, result(W)).

%% The running sync may have begun before the commit that asks: another
%% one runs after it, although no writer waits.
soon_owes_the_next() ->
    First = writer(),
    Worker1 = receive {sync_started, W1} -> W1 after 5000 -> error(no_sync_started) end,
    ok = ?SYNC:sync_soon([node()]),
    wait_owed(),
    Worker1 ! {finish, fun() -> ok end},
    ?assertEqual(ok, result(First)),
    finish_next(fun() -> ok end),
    wait_idle().

wait_owed() ->
    case owed() of
        true -> ok;
        false -> timer:sleep(5), wait_owed()
    end.

wait_idle() ->
    case sys:get_state(?SYNC) of
        {st, undefined, [], [], false, false} -> ok;
        _ -> timer:sleep(5), wait_idle()
    end.

soons_share_a_sync() ->
    [ok = ?SYNC:sync_soon([node()]) || _ <- lists:seq(1, 20)],
    finish_next(fun() -> ok end),
    wait_idle(),
    receive {sync_started, _} -> error(second_sync) after 50 -> ok end.
