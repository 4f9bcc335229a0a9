%% @doc The run engine shared by `xmpp' and `http': starts a job in every
%% worker VM, samples all of them once a second, keeps the time series,
%% shows the progress line, enforces the deadline, and writes the results.
%%
%% Timeline: the job runs until it reports `done' on every worker, or until
%% the deadline; at the deadline the job is asked to stop (simulated users
%% end their sessions), and `grace' later everything still running is
%% killed. The run never outlives deadline + grace (+ a few seconds to write
%% the files). summary.json, timeseries.csv and report.html are rewritten
%% every 10 s while running, so a run that dies part-way leaves them behind.
-module(throng_bench_run).

-export([run/1, row/6]).
%% API used by tests: one time-series row.
-ignore_xref([{row, 6}]).

-define(PARTIAL_EVERY, 10).

%% @doc Spec: job (module), config (map sent to workers), workers, deadline
%% and grace (ms), kind (module with summary/3 and progress/3), header (map
%% for the summary), out (dir or undefined), server_pid (an OS pid, or a
%% list of them: the nodes of a cluster), progress (bool), and optionally
%% stop_rule: `fun(Row, Rows) -> continue | {stop, Reason, Detail}', asked
%% after every row while the run is running (Rows: the rows so far, newest
%% first); a stop ends the arrivals as the deadline does, and the summary
%% says why under `stop' (`throng-bench study' ramps until a limit).
%% A job that finishes on its own first ends with `stop' null.
%% print_summary (default true): print the summary's lines at the end.
-spec run(map()) -> {complete | stopped | aborted, map()}.
run(Spec) ->
    Old = process_flag(trap_exit, true),
    try run1(Spec)
    after process_flag(trap_exit, Old)
    end.

run1(Spec0 = #{job := Job, config := Config, workers := Workers}) ->
    ServerPids = server_pids(maps:get(server_pid, Spec0, undefined)),
    Spec = Spec0#{server_pid => ServerPids},
    Servers0 = [throng_proc_sample:sample(P) || P <- ServerPids],
    LoadPids = [list_to_integer(os:getpid())
                | [P || W = #{kind := Kd} <- Workers, Kd =/= local,
                        P <- [throng_bench_worker:os_pid(W)], P =/= undefined]],
    Base = #{server0 => sum_rss(Servers0), servers0 => Servers0,
             loadgen_pids => LoadPids,
             loadgen_mem0 => lists:sum([try throng_bench_worker:call(W, throng_bench_metrics,
                                                                     vm_memory, [])
                                        catch _:_ -> 0 end || W <- Workers]),
             loadgen_rss0 => loadgen_rss(LoadPids)},
    T0 = erlang:monotonic_time(millisecond),
    Csv = throng_bench_out:open_timeseries(maps:get(out, Spec, undefined)),
    N = length(Workers),
    Started = [try throng_bench_worker:call(W, throng_bench_worker, start_job,
                                            [Job, Config, {K, N}], 30000) of
                   ok -> ok
               catch C:R -> {error, W, {C, R}}
               end || {K, W} <- lists:enumerate(0, Workers)],
    S0 = Spec#{t0 => T0, csv => Csv, nodes_csv => none, rows => [], phase => running,
               prev => throng_bench_metrics:empty_snapshot(), prev_t => T0,
               snaps => #{}, server_prev => Servers0, base => Base,
               lost => [], started_at => erlang:system_time(second)},
    case [E || E = {error, _, _} <- Started] of
        [] ->
            try loop(1, S0)
            catch C:R:St ->
                    %% a bug must not lose the run: write what there is
                    finish(aborted, io_lib:format("internal error: ~0tp:~0tP ~0tP",
                                                  [C, R, 10, St, 10]), S0)
            end;
        [{error, W, R} | _] ->
            finish(aborted, io_lib:format("cannot start the job on ~ts: ~0tp",
                                          [throng_bench_worker:describe(W), R]), S0)
    end.

loop(Tick, S = #{t0 := T0}) ->
    sleep_until(T0 + Tick * 1000),
    At = probe(S),
    {Merged, Statuses, S1} = sample_all(S),
    S2 = record(Tick, Merged, At, S1),
    (Tick rem ?PARTIAL_EVERY =:= 0) andalso write(running, null, S2),
    Done = Statuses =/= [] andalso lists:all(fun(#{done := D}) -> D end, Statuses),
    Now = Tick * 1000,
    #{deadline := Deadline, grace := Grace, phase := Phase} = S2,
    Stop = case {Phase, maps:get(stop_rule, S2, undefined)} of
               {running, Rule} when is_function(Rule, 2), not Done ->
                   [Row | _] = Rows = maps:get(rows, S2),
                   Rule(Row, Rows);
               _ -> continue
           end,
    if
        Stop =/= continue ->
            {stop, Reason, Detail} = Stop,
            call_all(S2, stop_job),
            loop(Tick + 1, S2#{phase => stopping,
                               stop => #{reason => Reason, detail => Detail,
                                         at_s => maps:get(t, hd(maps:get(rows, S2)))}});
        Done, Phase =:= running -> finish(complete, null, S2);
        Done -> finish(stopped, null, S2);
        Phase =:= running, Now >= Deadline ->
            call_all(S2, stop_job),
            loop(Tick + 1, S2#{phase => stopping});
        Phase =:= stopping, Now >= Deadline + Grace ->
            finish(stopped, null, S2);
        true ->
            case length(maps:get(lost, S2)) =:= length(maps:get(workers, S2)) of
                true -> finish(aborted, <<"every worker VM was lost">>, S2);
                false -> loop(Tick + 1, S2)
            end
    end.

%% Exit signals of linked processes (peers, ports of the caller) arrive as
%% messages while we trap exits: let them pass without losing the beat.
sleep_until(At) ->
    receive
        {'EXIT', _, _} -> sleep_until(At)
    after max(0, At - erlang:monotonic_time(millisecond)) -> ok
    end.

sample_all(S = #{workers := Workers, job := Job, snaps := Snaps, lost := Lost}) ->
    Results = [{W, try throng_bench_worker:call(W, throng_bench_worker, sample, [Job])
                   catch _:R -> {lost, R} end} || W <- Workers],
    {Snaps1, Statuses, Lost1} =
        lists:foldl(fun({#{id := I}, {Snap, Status}}, {Sn, St, L}) when is_map(Status) ->
                            {Sn#{I => Snap}, [Status | St], L};
                       ({W = #{id := I}, {lost, R}}, {Sn, St, L}) ->
                            lists:member(I, L) orelse
                                io:format(standard_error, "~nthrong-bench: lost ~ts: ~0tP~n",
                                          [throng_bench_worker:describe(W), R, 6]),
                            %% a lost worker counts as done, with its last numbers
                            {Sn, [#{done => true, active => 0} | St], lists:usort([I | L])}
                    end, {Snaps, [], Lost}, Results),
    Merged = maps:fold(fun(_, Snap, Acc) -> throng_bench_metrics:merge(Acc, Snap) end,
                       throng_bench_metrics:empty_snapshot(), Snaps1),
    %% the job statuses of the moment with the most users running (they
    %% hold per-user figures)
    Active = lists:sum([A || #{active := A} <- Statuses, A > 0]),
    Peak = case Active > 0 andalso Active >= maps:get(peak_active, S, 0)
               andalso maps:get(phase, S, running) =:= running of
               true -> #{peak_active => Active, peak_statuses => Statuses};
               false -> #{}
           end,
    %% the jobs' own baseline memory (after their set-up, before any user)
    Mem0 = case maps:is_key(jobs_memory0, S) of
               false when Statuses =/= [] ->
                   case [M || #{memory0 := M} <- Statuses, is_integer(M)] of
                       Ms when length(Ms) =:= length(Statuses) -> #{jobs_memory0 => lists:sum(Ms)};
                       _ -> #{}
                   end;
               _ -> #{}
           end,
    {Merged, Statuses, maps:merge(maps:merge(S#{snaps => Snaps1, lost => Lost1}, Peak), Mem0)}.

call_all(#{workers := Workers, job := Job, lost := Lost}, F) ->
    _ = [catch throng_bench_worker:call(W, throng_bench_worker, F, [Job], 10000)
         || W = #{id := I} <- Workers, not lists:member(I, Lost)],
    ok.

%% The moment of a row: the time, and the server's /proc figures, taken
%% just before the workers are asked for their counters. Rates divide by the
%% time between two such moments, not by when the answers came back: a
%% worker VM that answers late (it was busy) must not make the next row's
%% few milliseconds look like a second's worth of work, nor the server's CPU
%% be measured over another interval than the row's.
probe(#{server_pid := Pids}) ->
    {erlang:monotonic_time(millisecond), [throng_proc_sample:sample(P) || P <- Pids]}.

server_pids(undefined) -> [];
server_pids(L) when is_list(L) -> L;
server_pids(P) when is_integer(P) -> [P].

%% The servers' RSS added up, as one sample (undefined when none answered).
sum_rss(Samples) ->
    case [R || #{rss := R} <- Samples] of
        [] -> undefined;
        Rs -> #{rss => lists:sum(Rs)}
    end.

record(Tick, Merged, {Now, Server}, S = #{prev := Prev, prev_t := PrevT, t0 := T0, rows := Rows,
                                          server_prev := SP, base := Base}) ->
    LoadRss = loadgen_rss(maps:get(loadgen_pids, Base)),
    Row0 = row((Now - T0) / 1000, Prev, Merged, max(1, Now - PrevT) / 1000, {SP, Server},
               LoadRss),
    Row = Row0#{tick => Tick, phase => maps:get(phase, S, running)},
    throng_bench_out:append_timeseries(maps:get(csv, S), Row),
    Nodes = throng_bench_out:append_nodes(maps:get(out, S, undefined), maps:get(nodes_csv, S), Row),
    maps:get(progress, S, true) andalso
        (catch progress(Row, Merged, S)),
    S#{rows => [Row | Rows], prev => Merged, prev_t => Now, nodes_csv => Nodes,
       server_prev => [case New of undefined -> Old; _ -> New end
                       || {Old, New} <- lists:zip(SP, Server)],
       last => Merged}.

%% @doc One time-series row from two consecutive merged snapshots, Dt
%% seconds apart, with the servers' /proc samples (before and now, one per
%% server pid) and the load generator's RSS. The server columns add up
%% every server (the nodes of a cluster); with several servers `server_nodes'
%% holds each one's, and with several targets `targets' each one's
%% sessions and logins per second.
-spec row(number(), throng_bench_metrics:snapshot(), throng_bench_metrics:snapshot(), number(),
          {[throng_proc_sample:sample() | undefined], [throng_proc_sample:sample() | undefined]},
          non_neg_integer()) -> map().
row(T, Prev = #{counters := P, hists := PH}, Cur = #{counters := C, hists := CH, memory := Mem},
    Dt, {SPs, SNows}, LoadRss) ->
    Nodes = [#{rss => case SNow of #{rss := R} -> R; _ -> undefined end,
               cpu => throng_proc_sample:cpu_percent(SP, SNow),
               sys => throng_proc_sample:sys_percent(SP, SNow)}
             || {SP, SNow} <- lists:zip(SPs, SNows)],
    Sum = fun(K) -> case [V || #{K := V} <- Nodes, is_number(V)] of
                        [] -> undefined;
                        Vs -> lists:sum(Vs)
                    end
          end,
    PerNode = case Nodes of
                  [_, _ | _] -> #{server_nodes => [maps:without([sys], Nd) || Nd <- Nodes]};
                  _ -> #{}
              end,
    PerTarget = case {maps:get(targets, Cur, []), maps:get(targets, Prev, [])} of
                    {[_, _ | _] = CT, PT} ->
                        #{targets => [#{sessions => maps:get(sessions, X),
                                        logins_s => (maps:get(logins, X)
                                                     - maps:get(logins, Y, 0)) / Dt}
                                      || {X, Y} <- lists:zip(CT, pad(PT, length(CT)))]};
                    _ -> #{}
                end,
    maps:merge(maps:merge(PerNode, PerTarget),
               (row1(T, P, PH, C, CH, Mem, Dt, LoadRss, Sum(rss), Sum(cpu)))#{
                 server_sys_pct => Sum(sys)}).

%% A shorter list of per-target counters (a VM that has not started its
%% job yet) is read as zeros.
pad(L, N) when length(L) >= N -> L;
pad(L, N) -> L ++ lists:duplicate(N - length(L), #{}).

row1(T, P, PH, C, CH, Mem, Dt, LoadRss, ServerRss, ServerCpu) ->
    Rate = fun(K) -> (maps:get(K, C) - maps:get(K, P)) / Dt end,
    Rates = maps:from_list([{list_to_atom(atom_to_list(K) ++ "_s"), Rate(K)}
                            || K <- rate_keys()]),
    Errs = [{T1, Rate(list_to_atom("err_" ++ atom_to_list(T1)))}
            || T1 <- throng_bench_metrics:error_types()],
    Pct = fun(H, Q) ->
                  D = throng_hist:subtract(maps:get(H, CH), maps:get(H, PH)),
                  case throng_hist:percentile(D, Q) of
                      undefined -> undefined;
                      V -> V / 1000
                  end
          end,
    Rates#{t => T,
           users_launched => maps:get(users_launched, C),
           users_logged_in => maps:get(users_logged_in, C),
           users_finished => maps:get(users_finished, C),
           users_failed => maps:get(users_failed, C),
           conns_open => maps:get(conns_open, C),
           sessions => maps:get(sessions, C),
           requests => maps:get(requests, C),
           errors => lists:sum([maps:get(list_to_atom("err_" ++ atom_to_list(E)), C)
                                || E <- throng_bench_metrics:error_types()]),
           errors_s => lists:sum([V || {_, V} <- Errs]),
           errors_by_type_s => maps:from_list(Errs),
           connect_p99_ms => Pct(connect, 99),
           login_p50_ms => Pct(login, 50),
           login_p99_ms => Pct(login, 99),
           delivery_p50_ms => Pct(delivery, 50),
           delivery_p99_ms => Pct(delivery, 99),
           response_p50_ms => Pct(response, 50),
           response_p99_ms => Pct(response, 99),
           loadgen_mem_bytes => Mem,
           loadgen_rss_bytes => LoadRss,
           server_rss_bytes => ServerRss,
           server_cpu_pct => ServerCpu}.

%% @doc Counters whose per-second rate goes into every row (as KEY_s).
-spec rate_keys() -> [throng_bench_metrics:counter()].
rate_keys() ->
    [users_launched, connects, logins, users_finished, stanzas_in, stanzas_out,
     bytes_in, bytes_out, msgs_sent, msgs_received, requests, responses].

loadgen_rss(Pids) ->
    lists:sum([Rss || P <- Pids, #{rss := Rss} <- [throng_proc_sample:sample(P)]]).

progress(Row, Merged, #{kind := Kind, header := H}) ->
    Line = Kind:progress(Row, Merged, H),
    case os:getenv("THRONG_BENCH_TTY") of
        "1" -> io:put_chars(standard_error, ["\r", Line, "\e[K"]);
        _ ->
            case maps:get(tick, Row) rem 5 of
                0 -> io:put_chars(standard_error, [Line, "\n"]);
                _ -> ok
            end
    end.

finish(Status, Error, S = #{workers := Workers}) ->
    S0 = S,
    call_all(S0, halt_job),
    %% one last sample so that the summary holds the final counts
    At = probe(S0),
    {Merged, _, S1} = sample_all(S0),
    Tick = length(maps:get(rows, S1)) + 1,
    S2 = case maps:get(rows, S1) of
             [] -> record(Tick, Merged, At, S1);
             _ -> S1#{last => Merged}
         end,
    maps:get(progress, S, true) andalso io:put_chars(standard_error, "\n"),
    Summary = write(Status, Error, S2),
    throng_bench_out:close_timeseries(maps:get(csv, S2)),
    case maps:get(nodes_csv, S2) of
        none -> ok;
        NodesCsv -> throng_bench_out:close_timeseries(NodesCsv)
    end,
    maps:get(print_summary, S, true) andalso throng_bench_summary:print(Summary),
    throng_bench_worker:stop(Workers),
    {Status, Summary}.

write(Status, Error, S = #{kind := Kind, header := H, rows := Rows, started_at := At,
                           t0 := T0, base := Base}) ->
    Last = maps:get(last, S, throng_bench_metrics:empty_snapshot()),
    Summary = Kind:summary(Last, lists:reverse(Rows),
                           H#{status => Status, error => Error, started_at => At,
                              duration_s => (erlang:monotonic_time(millisecond) - T0) / 1000,
                              server0 => maps:get(server0, Base),
                              servers0 => maps:get(servers0, Base),
                              loadgen_mem0 => maps:get(jobs_memory0, S,
                                                       maps:get(loadgen_mem0, Base)),
                              loadgen_rss0 => maps:get(loadgen_rss0, Base),
                              workers => length(maps:get(workers, S)),
                              stop => maps:get(stop, S, null),
                              job_status => maps:get(peak_statuses, S, []),
                              lost_workers => length(maps:get(lost, S))}),
    case maps:get(out, S, undefined) of
        undefined -> ok;
        Dir -> throng_bench_out:write_run(Dir, Summary, lists:reverse(Rows), Last)
    end,
    Summary.
