%% @doc `throng-bench study': the Erlang'07 factor study, regenerated.
%%
%% For every run of a design (throng_bench_study_design: settings ×
%% repeats, interleaved) the study
%%   1. sets the setting's sysctls (net.* only; the old values are put back
%%      after the run, whatever happens),
%%   2. starts a fresh Throng node with the setting (bench/bench_throng.sh:
%%      its own data directory, the design's population registered with
%%      `neighbours' rosters; ERL_FLAGS carries the runtime flags,
%%      THRONG_LISTEN_EXTRA / THRONG_CONFIG_EXTRA the configuration),
%%   3. ramps Poisson arrivals of the design's scenario (the paper mix) at
%%      the design's rate, with sessions that outlast the ramp, until the
%%      stop rule (throng_bench_study_stop) names a limit,
%%   4. stops the node and records the run in OUT/runs/ID/result.json next
%%      to the xmpp run's own summary.json, timeseries.csv and report.html,
%%   5. rewrites OUT/summary.json, OUT/runs.csv and OUT/report.html.
%% A run whose result.json exists is not made again: running the same
%% command again resumes an interrupted study. After the runs, the ratio of
%% routed chat messages to raw TCP echo round trips (same concurrency, same
%% message size) is measured once (OUT/ratio/).
-module(throng_bench_study).

-export([run/1, run_result/4, read_csv/1, num/2]).
%% API used by tests: a run's figures from its files.
-ignore_xref([{run_result, 4}, {read_csv, 1}]).
%% num/2 is shared with throng_bench_study_ratio (rows of read_csv/1).

-define(START_TIMEOUT, 600000).
-define(PORT_FREE_TIMEOUT, 60000).
-define(SYSCTL_ROOT, "/proc/sys").
%% Create this file in the study's directory to end the study after the
%% run in progress (the same command resumes it).
-define(STOP_FILE, "STOP").

%% @doc Run (or resume) a study; returns the exit status: 0 every run
%% completed, 1 some runs failed, 3 none could be made.
-spec run(map()) -> 0 | 1 | 3.
run(Opts) ->
    %% the tables print ± and the design's texts may hold any character
    _ = io:setopts(standard_io, [{encoding, unicode}]),
    _ = io:setopts(standard_error, [{encoding, unicode}]),
    Design0 = case throng_bench_study_design:load(maps:get(design, Opts, "paper")) of
                  {ok, D} -> D;
                  {error, Msg} -> throw({usage, Msg})
              end,
    Design = restrict(Design0, Opts),
    Out = maps:get(out, Opts, "study-" ++ binary_to_list(maps:get(name, Design))),
    ok = filelib:ensure_dir(filename:join(Out, "x")),
    check_resumable(Out, Design0, Design),
    case maps:get(report_only, Opts, false) of
        true -> report(Out, Design), 0;
        false -> study(Design, Out, Opts)
    end.

%% --report: the results files again from the runs made (after an
%% interruption, or with a newer throng-bench), no run made.
report(Out, Design) ->
    Redone = [rederive(Out, throng_bench_study_design:run_id(S, R))
              || {S, R} <- throng_bench_study_design:runs(Design)],
    io:format(standard_error, "study: the figures of ~b run(s) derived again from their files~n",
              [length([x || true <- Redone])]),
    Summary = throng_bench_study_report:write(Out, Design),
    io:format("~ts", [throng_bench_study_report:text(Summary)]),
    io:format("results in ~ts/ (report.html, summary.json, runs.csv, tables.md)~n", [Out]).

study(Design, Out, Opts) ->
    case throng_bench_study_sysctl:recover(?SYSCTL_ROOT, journal(Out))
        ++ throng_bench_study_sysctl:recover(?SYSCTL_ROOT, ports_journal(Out)) of
        [] -> ok;
        Back -> io:format(standard_error, "study: an interrupted run had changed sysctls; put back: ~ts~n",
                          [lists:join(", ", [[K, " = ", V] || {K, V} <- Back])])
    end,
    _ = file:delete(filename:join(Out, ?STOP_FILE)),
    preflight(Design),
    Runs = throng_bench_study_design:runs(Design),
    %% a run that failed (its node did not start, ...) is made again
    Done0 = [Id || {S, R} <- Runs, Id <- [throng_bench_study_design:run_id(S, R)],
                   made(Out, Id)],
    case Done0 of
        [] -> ok;
        _ -> io:format(standard_error, "study ~ts: resuming in ~ts: ~b of ~b runs already made~n",
                       [maps:get(name, Design), Out, length(Done0), length(Runs)])
    end,
    T0 = erlang:monotonic_time(second),
    Todo = lists:enumerate([{I, S, R} || {I, {S, R}} <- lists:enumerate(Runs),
                                         not lists:member(throng_bench_study_design:run_id(S, R), Done0)]),
    {_Stopped, Ratio} =
        throng_bench_study_sysctl:with(
          ?SYSCTL_ROOT, ports_journal(Out), reserve_ports(Design),
          fun() ->
                  St = runs(Todo, Design, length(Runs), T0, Out, Opts),
                  {St, case {maps:get(ratio, Design), maps:get(no_ratio, Opts, false) orelse St} of
                           {false, _} -> skipped;
                           {_, true} -> skipped;
                           {R, false} -> ratio(Design, R, Out, Opts)
                       end}
          end),
    Summary = throng_bench_study_report:write(Out, Design),
    io:format("~ts", [throng_bench_study_report:text(Summary)]),
    io:format("results in ~ts/ (report.html, summary.json, runs.csv, tables.md)~n", [Out]),
    #{runs := Results} = Summary,
    Failed = [X || X = #{ok := false} <- Results],
    if
        Results =:= [] -> 3;
        length(Failed) =:= length(Results) -> 3;
        Failed =/= []; Ratio =:= failed -> 1;
        true -> 0
    end.

%% The runs still to make, one after another; true when OUT/STOP ended
%% them early.
runs([], _Design, _Total, _T0, _Out, _Opts) -> false;
runs([{K, {I, S, R}} | Rest], Design, Total, T0, Out, Opts) ->
    Stop = filename:join(Out, ?STOP_FILE),
    case filelib:is_regular(Stop) of
        true ->
            _ = file:delete(Stop),
            io:format(standard_error, "~nstudy: stopped on request (~ts) before run ~b of ~b; "
                      "the same command resumes it~n", [Stop, I, Total]),
            true;
        false ->
            announce(Design, I, Total, K, K + length(Rest), S, R, T0),
            one(Design, S, R, I, Out, Opts),
            _ = throng_bench_study_report:write(Out, Design),
            runs(Rest, Design, Total, T0, Out, Opts)
    end.

journal(Out) -> filename:join(Out, "sysctl-journal").

%% The study's own, kept for the whole study (the runs' go to journal/1).
ports_journal(Out) -> filename:join(Out, "sysctl-journal-ports").

%% The server's ports out of the ephemeral range for the whole study: the
%% load generator opens tens of thousands of connections, and with a wide
%% net.ipv4.ip_local_port_range one of them (or a node's distribution
%% listener) may take the port the next run's node must listen on
%% (eaddrinuse). Nothing when the file cannot be written (not root): the
%% study then runs as before, and says so.
reserve_ports(#{port := Port, settings := Ss}) ->
    Last = Port + lists:max([N || #{nodes := N} <- Ss]) - 1,
    Key = <<"net.ipv4.ip_local_reserved_ports">>,
    case throng_bench_study_sysctl:writable(?SYSCTL_ROOT, Key) of
        ok ->
            {ok, Old} = throng_bench_study_sysctl:read(?SYSCTL_ROOT, Key),
            Mine = iolist_to_binary(io_lib:format("~b-~b", [Port, Last])),
            [{Key, case string:trim(Old) of
                       <<>> -> Mine;
                       O -> <<O/binary, ",", Mine/binary>>
                   end}];
        {error, Why} ->
            io:format(standard_error, "study: cannot keep ports ~b-~b out of the ephemeral range: "
                      "~ts~n", [Port, Last, Why]),
            []
    end.

%% --only NAME,... and --repeats N narrow a design without editing it.
restrict(D = #{settings := Ss}, Opts) ->
    D1 = case maps:get(only, Opts, undefined) of
             undefined -> D;
             Names0 ->
                 Names = [list_to_binary(N) || N <- string:lexemes(Names0, ",")],
                 case Names -- [N || #{name := N} <- Ss] of
                     [] -> D#{settings => [S || S = #{name := N} <- Ss, lists:member(N, Names)]};
                     [U | _] -> throw({usage, io_lib:format("option --only: the design has no setting \"~ts\"",
                                                            [U])})
                 end
         end,
    case maps:get(repeats, Opts, undefined) of
        undefined -> D1;
        R -> D1#{repeats => R}
    end.

%% A study directory belongs to one design: resuming with a design that
%% measures differently would mix incomparable runs. The same population,
%% rate, scenario and stop rule are needed; a setting already in the study
%% must be the same; --only (some settings) and new settings are fine.
%% study.json before version 2 had the ratio's options in its fingerprint
%% (they are taken from its design then); before per-setting fingerprints
%% it held one fingerprint of the whole design, which must then be the same.
check_resumable(Out, Full, Design) ->
    File = filename:join(Out, "study.json"),
    Base = throng_bench_study_design:base_fingerprint(Design),
    Mine = maps:from_list([{N, throng_bench_study_design:setting_fingerprint(S)}
                           || S = #{name := N} <- maps:get(settings, Design)]),
    Known = case file:read_file(File) of
                {ok, Bin} ->
                    case catch jiffy:decode(Bin, [return_maps]) of
                        #{<<"fingerprint">> := Fp} = Old ->
                            Ratio = stored_ratio(Old),
                            Mark = case maps:get(<<"version">>, Old, 1) of
                                       2 -> Base;
                                       _ -> throng_bench_study_design:v1_base_fingerprint(Design, Ratio)
                                   end,
                            case Old of
                                #{<<"settings">> := Ss} when is_map(Ss), Fp =:= Mark ->
                                    maps:foreach(fun(N, F) ->
                                                         case maps:get(N, Ss, F) of
                                                             F -> ok;
                                                             _ -> other_design(Out)
                                                         end
                                                 end, Mine),
                                    Ss;
                                #{<<"settings">> := _} -> other_design(Out);
                                _ ->
                                    case Fp =:= throng_bench_study_design:fingerprint(Full, Ratio) of
                                        true -> #{};
                                        false -> other_design(Out)
                                    end
                            end;
                        _ -> throw({usage, io_lib:format("~ts: unreadable; give another --out", [File])})
                    end;
                {error, enoent} -> #{}
            end,
    ok = file:write_file(File, throng_bench_out:encode_json(
                                 #{version => 2, fingerprint => Base,
                                   settings => maps:merge(Known, Mine),
                                   design => printable(Design)})).

%% The ratio options a study.json's design held (as the design had them).
stored_ratio(#{<<"design">> := #{<<"ratio">> := R}}) when is_map(R) -> atomize(R);
stored_ratio(_) -> false.

-spec other_design(file:filename()) -> no_return().
other_design(Out) ->
    throw({usage, io_lib:format("~ts holds a study of another design (or of this one with other "
                                "settings): give another --out", [Out])}).

printable(Design) ->
    Design#{settings => [S#{listen => maps:from_list(L), sysctl => maps:from_list(Y)}
                         || S = #{listen := L, sysctl := Y} <- maps:get(settings, Design)]}.

%% Everything that can be known to fail before hours of runs.
preflight(Design = #{settings := Ss, port := Port}) ->
    {Start, _} = commands(Design),
    case Start of
        default ->
            filelib:is_regular(default_script()) orelse
                throw({fatal, io_lib:format("~ts not found: run the study from a Throng checkout "
                                            "(bin/throng-bench) or give server.start",
                                            [default_script()])}),
            %% bench_throng.sh starts THRONG_REL's release when it is set
            Rel = case os:getenv("THRONG_REL") of
                      R when is_list(R), R =/= "" -> R;
                      _ -> filename:join([root(), "_build", "default", "rel", "throng"])
                  end,
            filelib:is_regular(filename:join([Rel, "bin", "throng"]))
                orelse throw({fatal, io_lib:format("the Throng release is not built (~ts): run make "
                                                   "release", [Rel])});
        _ -> ok
    end,
    lists:foreach(fun(#{name := N, sysctl := Sys}) ->
                          [case throng_bench_study_sysctl:writable(?SYSCTL_ROOT, K) of
                               ok -> ok;
                               {error, Why} ->
                                   throw({fatal, io_lib:format("setting ~ts: cannot set ~ts: ~ts",
                                                               [N, K, Why])})
                           end || {K, _} <- Sys]
                  end, Ss),
    Nodes = lists:max([N || #{nodes := N} <- Ss]),
    [port_free(P) orelse
         throw({fatal, io_lib:format("port ~b is in use: stop what listens there or set port", [P])})
     || P <- lists:seq(Port, Port + Nodes - 1)],
    ok.

announce(#{name := DName}, I, Total, K, Todo, #{name := N, table := Tb}, R, T0) ->
    Elapsed = erlang:monotonic_time(second) - T0,
    Eta = case K of
              1 -> "";
              _ -> io_lib:format(", about ~ts left",
                                 [throng_bench_units:format_ms(Elapsed / (K - 1) * (Todo - K + 1) * 1000)])
          end,
    io:format(standard_error, "~n== study ~ts: run ~b/~b: ~ts, repeat ~b (~ts); ~ts elapsed~ts~n",
              [DName, I, Total, N, R, Tb, throng_bench_units:format_ms(Elapsed * 1000), Eta]).

%% A run's figures derived again from its summary.json and timeseries.csv
%% (and the samples its result.json kept), so that a better analysis
%% applies to the runs of earlier studies too.
rederive(Out, Id) ->
    Dir = filename:join([Out, "runs", binary_to_list(Id)]),
    case {file:read_file(result_file(Out, Id)), file:read_file(filename:join(Dir, "summary.json"))} of
        {{ok, ResBin}, {ok, SumBin}} ->
            Old = atomize(jiffy:decode(ResBin, [return_maps])),
            case Old of
                #{ok := true, status := St, server_rss0 := Rss0, fd_limit := Fd} ->
                    Summary = atomize(jiffy:decode(SumBin, [return_maps])),
                    New = run_result(binary_to_atom(St), Summary,
                                     read_csv(filename:join(Dir, "timeseries.csv")),
                                     #{rss0 => undefined_if_null(Rss0),
                                       fd_limit => case Fd of null -> infinity; _ -> Fd end}),
                    Keep = maps:merge(#{nodes => 1}, maps:with([id, setting, repeat, table, started_at, nodes], Old)),
                    ok = file:write_file(result_file(Out, Id),
                                         throng_bench_out:encode_json(maps:merge(New, Keep))),
                    true;
                _ -> false
            end;
        _ -> false
    end.

atomize(M) when is_map(M) ->
    maps:from_list([{binary_to_atom(K), atomize(V)} || {K, V} <- maps:to_list(M)]);
atomize(L) when is_list(L) -> [atomize(X) || X <- L];
atomize(V) -> V.

undefined_if_null(null) -> undefined;
undefined_if_null(V) -> V.

%%% One run

one(Design, Setting, Rep, Index, Out, Opts) ->
    Id = throng_bench_study_design:run_id(Setting, Rep),
    Dir = filename:join([Out, "runs", binary_to_list(Id)]),
    _ = file:del_dir_r(Dir),
    ok = filelib:ensure_dir(filename:join(Dir, "x")),
    Work = filename:join(["/tmp", "throng-study-" ++ os:getpid(), binary_to_list(Id)]),
    Started = erlang:system_time(second),
    Result = throng_bench_study_sysctl:with(?SYSCTL_ROOT, journal(Out), maps:get(sysctl, Setting),
                                            fun() -> measure(Design, Setting, Index, Dir, Work, Opts) end),
    _ = file:del_dir_r(Work),
    Final = Result#{id => Id, setting => maps:get(name, Setting), repeat => Rep,
                    table => maps:get(table, Setting), started_at => Started},
    ok = file:write_file(result_file(Out, Id), throng_bench_out:encode_json(Final)),
    case Final of
        #{ok := true} ->
            io:format(standard_error, "== ~ts: ~b sessions (stopped by ~ts: ~ts), ~ts~n",
                      [Id, maps:get(peak_sessions, Final), maps:get(stop_reason, Final),
                       maps:get(stop_detail, Final),
                       case maps:get(memory_per_session, Final) of
                           null -> <<"(too short a ramp for the memory slope)">>;
                           B -> [throng_bench_units:format_bytes(B), " per session"]
                       end]);
        #{error := E} ->
            io:format(standard_error, "== ~ts failed: ~ts~n", [Id, E])
    end.

measure(Design, Setting = #{nodes := Nodes}, Index, Dir, Work, Opts) ->
    #{port := Port, population := Pop0, rate := Rate} = Design,
    %% the population is per node: a cluster is offered as many per node
    Pop = Pop0 * Nodes,
    case start_server(Design, Setting, Work, Dir) of
        {error, Why} -> #{ok => false, error => Why};
        {ok, Pids} ->
            try
                Rss0 = lists:foldl(fun(P, Acc) ->
                                           case {throng_proc_sample:sample(P), Acc} of
                                               {#{rss := R0}, N} when is_integer(N) -> N + R0;
                                               _ -> undefined
                                           end
                                   end, 0, Pids),
                Ramp = Pop / Rate * 1000,
                FdLimit = lists:min([server_fd_limit(P) || P <- Pids]),
                Rule = stop_rule(maps:get(stop, Design), Pids, FdLimit, Pop),
                Target = case Nodes of
                             1 -> #{port => Port};
                             _ -> #{targets => [[{<<"127.0.0.1">>, P}
                                                 || P <- lists:seq(Port, Port + Nodes - 1)]]}
                         end,
                XOpts = Target#{scenario => binary_to_list(maps:get(scenario, Design)),
                                users => Pop, rate => Rate,
                                contact_count => maps:get(contacts, Design),
                                tls => maps:get(tls, Setting),
                                length => round(2 * Ramp) + 60000,
                                duration => round(1.5 * Ramp) + 60000,
                                server_pid => Pids, out => Dir,
                                seed => maps:get(seed, Design) + Index,
                                progress => maps:get(progress, Opts, true),
                                print_summary => false,
                                stop_rule => Rule},
                {Status, Summary} = try throng_bench_xmpp:run(XOpts)
                                    catch throw:{_, M} -> {aborted, #{error => iolist_to_binary(M)}}
                                    end,
                (run_result(Status, Summary, read_csv(filename:join(Dir, "timeseries.csv")),
                            #{rss0 => Rss0, fd_limit => FdLimit}))#{nodes => Nodes}
            after
                stop_server(Design, Nodes, Work, Dir)
            end
    end.

%% The stop rule of a run on these server VMs: the descriptors of the one
%% holding the most (a cluster's users are spread evenly), against the
%% lowest limit among them.
stop_rule(Rules, Pids, FdLimit, Pop) ->
    fun(Row, Rows) ->
            Sessions = maps:get(sessions, Row, 0),
            %% listing /proc/PID/fd (older kernels) costs a few ms at 20,000
            %% entries: only once the sessions are past half the limit
            Fds = case is_integer(FdLimit) andalso Sessions >= FdLimit div 2 * length(Pids) of
                      true -> lists:max([case throng_proc_sample:open_fds(P) of
                                             undefined -> 0;
                                             N -> N
                                         end || P <- Pids]);
                      false -> 0
                  end,
            throng_bench_study_stop:check(Rules, Rows,
                                          #{fds => Fds, fd_limit => FdLimit,
                                            launched_all => maps:get(users_launched, Row, 0) >= Pop})
    end.

server_fd_limit(Pid) ->
    case file:read_file("/proc/" ++ integer_to_list(Pid) ++ "/limits") of
        {ok, Bin} -> throng_bench_xmpp:fd_limit(Bin);
        {error, _} -> infinity
    end.

%% @doc A run's figures from the xmpp run's status and summary, its rows
%% (timeseries.csv, oldest first) and the study's own samples (rss0: the
%% server's RSS before the first user; fd_limit).
%%   peak_sessions       the most sessions held at once
%%   memory_per_session  (server RSS at that moment - rss0) / peak_sessions
%%   cpu_user_ms_per_login, cpu_sys_ms_per_login
%%                       the server's CPU time from the start to the peak,
%%                       user and system, divided by the logins made by then
%%                       (it includes the traffic of the sessions held: the
%%                       paper's measure of load)
%%   delivery_p99_ms, login_p99_ms  over the whole run
-spec run_result(atom(), map(), [map()], map()) -> map().
run_result(aborted, Summary, _Rows, _Samples) ->
    #{ok => false, status => aborted, error => maps:get(error, Summary, <<"aborted">>)};
run_result(Status, Summary, Rows, #{rss0 := Rss0, fd_limit := FdLimit}) ->
    Stop = case maps:get(stop, Summary, null) of
               #{reason := R, detail := Dt} -> #{stop_reason => R, stop_detail => Dt};
               _ -> #{stop_reason => <<"deadline">>,
                      stop_detail => <<"the run's duration passed without a limit">>}
           end,
    %% The ramp ends where the stop rule fired: after it the users leave
    %% together, and that storm (every presence going out at once) is no
    %% part of holding sessions.
    Ramp0 = case maps:get(stop, Summary, null) of
                #{at_s := At} -> [R || R <- Rows, num(t, R) =< At];
                _ -> Rows
            end,
    case Ramp0 of
        [] -> #{ok => false, status => Status, error => <<"the run recorded no rows">>};
        _ ->
            Peak = lists:foldl(fun(R, Best) ->
                                       case num(sessions, R) > num(sessions, Best) of
                                           true -> R;
                                           false -> Best
                                       end
                               end, hd(Ramp0), Ramp0),
            PeakT = num(t, Peak),
            Ramp = [R || R <- Ramp0, num(t, R) =< PeakT],
            {Cpu, Sys} = cpu_seconds(Ramp),
            Sessions = num(sessions, Peak),
            Logins = num(users_logged_in, Peak),
            PerLogin = fun(S) when Logins > 0 -> S * 1000 / Logins;
                          (_) -> null
                       end,
            RssPeak = maps:get(server_rss_bytes, Peak, undefined),
            Lat = maps:get(latency_ms, Summary, #{}),
            P99 = fun(K) -> case maps:get(K, Lat, #{}) of
                                #{p99 := V} -> V;
                                _ -> null
                            end
                  end,
            maps:merge(Stop,
                       #{ok => Sessions > 0, status => Status,
                         error => case Sessions > 0 of
                                      true -> null;
                                      false -> <<"no session was ever held">>
                                  end,
                         peak_sessions => round(Sessions), peak_at_s => PeakT,
                         memory_per_session => rss_slope(Ramp, Sessions),
                         memory_per_session_at_peak =>
                             case is_number(RssPeak) andalso is_number(Rss0) andalso Sessions > 0 of
                                 true -> (RssPeak - Rss0) / Sessions;
                                 false -> null
                             end,
                         server_rss0 => null_if_undefined(Rss0),
                         server_rss_peak => null_if_undefined(RssPeak),
                         fd_limit => case FdLimit of infinity -> null; L -> L end,
                         logins => round(Logins),
                         cpu_user_ms_per_login => PerLogin(Cpu - Sys),
                         cpu_sys_ms_per_login => PerLogin(Sys),
                         delivery_p99_ms => P99(delivery),
                         login_p99_ms => P99(login),
                         errors => maps:get(total, maps:get(errors, Summary, #{}), 0),
                         messages_lost => maps:get(lost, maps:get(messages, Summary, #{}), 0),
                         series => series(Rows)})
    end.

%% Bytes of server RSS per session added: the least-squares slope of RSS
%% on sessions over the seconds of the ramp between 10% and 90% of the peak
%% (the node's start and the last seconds before the limit left out). One
%% sample of RSS at the peak depends on what the allocators did just then;
%% the slope over a hundred samples does not.
rss_slope(Ramp, Peak) ->
    Pts = [{num(sessions, R), Rss} || R <- Ramp, Rss <- [maps:get(server_rss_bytes, R, undefined)],
                                      is_number(Rss), num(sessions, R) >= 0.1 * Peak,
                                      num(sessions, R) =< 0.9 * Peak],
    case length(Pts) >= 5 of
        false -> null;
        true ->
            N = length(Pts),
            Mx = lists:sum([X || {X, _} <- Pts]) / N,
            My = lists:sum([Y || {_, Y} <- Pts]) / N,
            Sxx = lists:sum([(X - Mx) * (X - Mx) || {X, _} <- Pts]),
            case Sxx == 0 of
                true -> null;
                false -> lists:sum([(X - Mx) * (Y - My) || {X, Y} <- Pts]) / Sxx
            end
    end.

%% The server's CPU seconds (all, system) over rows: each row's percent
%% covers the time since the previous row.
cpu_seconds(Rows) ->
    {_, C, S} = lists:foldl(
                  fun(R, {PrevT, C, S}) ->
                          T = num(t, R),
                          Dt = T - PrevT,
                          {T, C + num(server_cpu_pct, R) / 100 * Dt,
                           S + num(server_sys_pct, R) / 100 * Dt}
                  end, {0, 0.0, 0.0}, Rows),
    {C, S}.

%% Sessions and CPU over time for the charts, at most ~150 points.
series(Rows) ->
    Step = max(1, length(Rows) div 150),
    Pick = [R || {I, R} <- lists:enumerate(0, Rows), I rem Step =:= 0],
    [[num(t, R), num(sessions, R), num(server_cpu_pct, R), num(server_sys_pct, R)] || R <- Pick].

%% @doc A number of a read_csv/1 row (0 when the cell is empty).
-spec num(atom(), map()) -> number().
num(K, R) ->
    case maps:get(K, R, 0) of
        V when is_number(V) -> V;
        _ -> 0
    end.

null_if_undefined(undefined) -> null;
null_if_undefined(V) -> V.

%% @doc A CSV file with a header line as maps of column name => number
%% (empty and non-numeric cells are left out).
-spec read_csv(file:filename()) -> [map()].
read_csv(File) ->
    case file:read_file(File) of
        {ok, Bin} ->
            case binary:split(Bin, <<"\n">>, [global, trim_all]) of
                [] -> [];
                [Head | Lines] ->
                    Cols = [binary_to_atom(C) || C <- binary:split(Head, <<",">>, [global])],
                    [maps:from_list([{C, V} || {C, Cell} <- lists:zip(Cols, pad(Cells, length(Cols))),
                                               {ok, V} <- [number(Cell)]])
                     || L <- Lines, Cells <- [binary:split(L, <<",">>, [global])]]
            end;
        {error, _} -> []
    end.

pad(L, N) when length(L) >= N -> lists:sublist(L, N);
pad(L, N) -> L ++ lists:duplicate(N - length(L), <<>>).

number(<<>>) -> error;
number(B) ->
    try {ok, binary_to_integer(B)}
    catch error:badarg ->
            try {ok, binary_to_float(B)}
            catch error:badarg -> error
            end
    end.

%%% The server

commands(#{start := Start, stop_cmd := Stop}) -> {Start, Stop}.

root() ->
    case os:getenv("THRONG_BENCH_ROOT") of
        R when is_list(R), R =/= "" -> R;
        _ -> filename:dirname(filename:dirname(filename:dirname(filename:dirname(
                                                                  code:lib_dir(throng_bench)))))
    end.

default_script() -> filename:join([root(), "bench", "bench_throng.sh"]).

expand(Cmd, Design, Work) ->
    Vars = [{"{dir}", Work}, {"{port}", integer_to_list(maps:get(port, Design))},
            {"{users}", integer_to_list(maps:get(population, Design))},
            {"{contacts}", integer_to_list(maps:get(contacts, Design))},
            {"{iterations}", integer_to_list(maps:get(iterations, Design))}],
    lists:foldl(fun({K, V}, Acc) -> string:replace(Acc, K, V, all) end,
                unicode:characters_to_list(Cmd), Vars).

start_command(#{start := default}) ->
    default_script() ++ " start {dir} {port} {users} {contacts} {iterations}";
start_command(#{start := C}) -> C.

stop_command(#{stop_cmd := default}) -> default_script() ++ " stop {dir}";
stop_command(#{stop_cmd := C}) -> C.

start_server(Design, Setting = #{nodes := Nodes}, Work, Dir) ->
    ok = filelib:ensure_dir(filename:join(Work, "x")),
    Cmd = expand(start_command(Design), Design#{population => maps:get(population, Design) * Nodes},
                 Work),
    Env = [{"THRONG_BENCH_NODE", node_name(Design)},
           {"THRONG_BENCH_NODES", integer_to_list(Nodes)},
           {"ERL_FLAGS", binary_to_list(maps:get(erl_flags, Setting))},
           {"THRONG_LISTEN_EXTRA", binary_to_list(throng_bench_study_design:listen_yaml(Setting))},
           {"THRONG_CONFIG_EXTRA", binary_to_list(maps:get(config, Setting))}],
    Log = filename:join(Dir, "server-start.log"),
    io:format(standard_error, "== starting the server~ts: ~ts~n",
              [case Nodes of 1 -> ""; _ -> io_lib:format(" (~b nodes)", [Nodes]) end, flat(Cmd)]),
    case shell(Cmd ++ " 2>'" ++ Log ++ "'", Env, ?START_TIMEOUT) of
        {0, Output} ->
            Lines = string:lexemes(Output, "\n"),
            Pids = [case string:to_integer(string:trim(L)) of
                        {Pid, []} when is_integer(Pid) -> Pid;
                        _ -> error
                    end || L <- lists:nthtail(max(0, length(Lines) - Nodes), Lines)],
            Ports = lists:seq(maps:get(port, Design), maps:get(port, Design) + Nodes - 1),
            case length(Pids) =:= Nodes andalso not lists:member(error, Pids) of
                true ->
                    case lists:all(fun(P) -> wait_open(P, 30000) end, Ports) of
                        true -> {ok, Pids};
                        false -> {error, <<"the server did not open its port (see server-start.log)">>}
                    end;
                false ->
                    {error, iolist_to_binary(io_lib:format("the start command did not print the "
                                                           "server's pid~ts last",
                                                           [case Nodes of
                                                                1 -> "";
                                                                _ -> io_lib:format("s (~b, a line each)",
                                                                                   [Nodes])
                                                            end]))}
            end;
        {Code, _} ->
            {error, iolist_to_binary(io_lib:format("the start command exited with status ~p "
                                                   "(see ~ts)", [Code, Log]))}
    end.

%% The study's nodes are named after its port: a study never stops another
%% study's node, nor the node of bench/*.sh scripts (throngbench@).
node_name(#{port := Port}) -> "throngstudy" ++ integer_to_list(Port) ++ "@127.0.0.1".

stop_server(Design, Nodes, Work, Dir) ->
    Cmd = expand(stop_command(Design), Design, Work),
    _ = shell(Cmd ++ " 2>>'" ++ filename:join(Dir, "server-start.log") ++ "'",
              [{"THRONG_BENCH_NODE", node_name(Design)}], 120000),
    [throng_bench_compare:port_free("127.0.0.1", P, ?PORT_FREE_TIMEOUT) orelse
         io:format(standard_error, "throng-bench: port ~b still in use after the server's stop~n", [P])
     || P <- lists:seq(maps:get(port, Design), maps:get(port, Design) + Nodes - 1)],
    ok.

flat(S) -> lists:flatten(S).

%% Run a shell command; {ExitStatus | timeout, Stdout}.
shell(Cmd, Env, Timeout) ->
    P = open_port({spawn_executable, "/bin/sh"},
                  [{args, ["-c", flat(Cmd)]}, {env, Env}, exit_status, binary, stream]),
    Deadline = erlang:monotonic_time(millisecond) + Timeout,
    collect(P, Deadline, []).

collect(P, Deadline, Acc) ->
    receive
        {P, {data, D}} -> collect(P, Deadline, [Acc, D]);
        {P, {exit_status, S}} -> {S, unicode:characters_to_list(iolist_to_binary(Acc))}
    after max(0, Deadline - erlang:monotonic_time(millisecond)) ->
            catch port_close(P),
            {timeout, unicode:characters_to_list(iolist_to_binary(Acc))}
    end.

port_free(Port) -> throng_bench_compare:port_free("127.0.0.1", Port, 0).

listening(Port) ->
    case gen_tcp:connect("127.0.0.1", Port, [], 1000) of
        {ok, S} -> gen_tcp:close(S), true;
        {error, _} -> false
    end.

%% The server's port open (the port's wait until free is compare's).
wait_open(Port, Timeout) ->
    Deadline = erlang:monotonic_time(millisecond) + Timeout,
    wait_open1(Port, Deadline).

wait_open1(Port, Deadline) ->
    case listening(Port) of
        true -> true;
        false ->
            case erlang:monotonic_time(millisecond) > Deadline of
                true -> false;
                false -> timer:sleep(250), wait_open1(Port, Deadline)
            end
    end.

result_file(Out, Id) -> filename:join([Out, "runs", Id, "result.json"]).

made(Out, Id) ->
    case file:read_file(result_file(Out, Id)) of
        {ok, Bin} ->
            try jiffy:decode(Bin, [return_maps]) of
                #{<<"ok">> := Ok} -> Ok =:= true;
                _ -> false
            catch _:_ -> false
            end;
        {error, _} -> false
    end.

%%% The ratio of routed messages to echo round trips

%% throng_bench_study_ratio searches the capacity, each step on a fresh
%% baseline node under the baseline's sysctls.
ratio(Design, R, Out, Opts) ->
    Baseline = (hd(maps:get(settings, Design)))#{nodes => 1},
    D = Design#{population => maps:get(users, R)},
    throng_bench_study_sysctl:with(
      ?SYSCTL_ROOT, journal(Out), maps:get(sysctl, Baseline),
      fun() ->
              throng_bench_study_ratio:measure(
                D, R, filename:join(Out, "ratio"),
                #{start => fun(Work, Dir) -> start_server(D, Baseline, Work, Dir) end,
                  stop => fun(Work, Dir) -> stop_server(D, 1, Work, Dir) end,
                  progress => maps:get(progress, Opts, true)})
      end).
