%% @doc `throng-bench fuzz': the parser-level and the socket-level fuzzers,
%% their progress, the server-side checks and the reproducers.
%%
%% Inputs are numbered 1..N per level; input I of seed S is always the same
%% ({@link throng_bench_fuzz_gen}), so a run is reproduced by its seed and a
%% failure is saved as its seed, number and bytes. Each level runs in worker
%% processes that take the next number from a shared counter; a worker that
%% has not finished an input after `--stall' is killed and the input saved as
%% `loop'.
%%
%% `--known KIND' (repeatable): failures of that kind are counted apart
%% (`known') and saved, but do not fail the run: a server issue already
%% reported, while it is being fixed.
%%
%% Server-side checks (socket level), when told where to look:
%% <ul>
%% <li>`--server-log FILE': each second the new lines of Throng's log are
%%   read; an `error' (or worse) line is a `server_error' failure. The inputs
%%   finished in the seconds before it are replayed one at a time afterwards
%%   (at most `replay_max', 500),
%%   and those after which the log grows again are saved as reproducers (else
%%   the whole window is saved as suspects);</li>
%% <li>`--stats-port P': the server's /metrics before and after the run:
%%   once every connection has gone (sessions included, after their
%%   resumption timeout), the number of processes must be back within
%%   `--leak-slack' of where it started, else a `process_leak' failure.</li>
%% </ul>
-module(throng_bench_fuzz).

-export([run/1, replay/2]).

-export_type([opts/0]).

-type opts() :: #{seed := integer(), parser := non_neg_integer(), socket := non_neg_integer(),
                  _ => term()}.

-define(WINDOW_MS, 3000).
-define(MAX_SAVED, 20).

%% @doc Runs both levels; returns the summary (also written to
%% OUT/summary.json) and whether it found nothing.
-spec run(opts()) -> {ok | failed, map()}.
run(Opts0) ->
    Opts = defaults(Opts0),
    #{seed := Seed, out := Out} = Opts,
    ok = filelib:ensure_path(filename:join(Out, "reproducers")),
    say(Opts, "fuzz: seed ~b, ~b parser inputs, ~b socket inputs, reproducers in ~ts~n",
        [Seed, maps:get(parser, Opts), maps:get(socket, Opts), filename:join(Out, "reproducers")]),
    Deadline = now_ms() + maps:get(time_limit, Opts),
    P = level(parser, Opts, Deadline),
    S = case maps:get(socket, Opts) of
            0 -> #{inputs => 0, ok => 0, failures => #{}, known => #{}, counts => #{},
                   stopped => false};
            _ -> socket_level(Opts, Deadline)
        end,
    Failures = maps:merge_with(fun(_, A, B) -> A + B end,
                               maps:get(failures, P), maps:get(failures, S)),
    Summary = #{seed => Seed, parser => P, socket => S,
                failures_total => lists:sum(maps:values(Failures)),
                reproducers => unicode:characters_to_binary(filename:join(Out, "reproducers"))},
    ok = file:write_file(filename:join(Out, "summary.json"), throng_bench_out:encode_json(Summary)),
    say(Opts, "fuzz: parser ~b inputs (~b failed), socket ~b inputs (~b failed)~s~n",
        [maps:get(inputs, P), total(maps:get(failures, P)), maps:get(inputs, S),
         total(maps:get(failures, S)),
         case maps:get(stopped, P) orelse maps:get(stopped, S) of
             true -> " - stopped at the time limit";
             false -> ""
         end]),
    {case maps:size(Failures) of 0 -> ok; _ -> failed end, Summary}.

defaults(Opts) ->
    maps:merge(#{seed => erlang:system_time(microsecond) rem 1000000000,
                 out => "fuzz-out", domain => <<"localhost">>, users => 1000,
                 password => <<"password">>, host => {127, 0, 0, 1}, port => 5222,
                 concurrency => 32, quiet_ms => 200, stall => 30000, fxml => true,
                 time_limit => 3600000, leak_slack => 50, progress => true, known => [],
                 replay_max => 500,
                 workers => erlang:system_info(schedulers_online)},
               maps:filter(fun(_, V) -> V =/= undefined end, Opts)).

ctx(Opts) ->
    maps:with([domain, users, password], Opts).

%%% The parser level

level(parser, #{parser := 0}, _) ->
    #{inputs => 0, ok => 0, failures => #{}, known => #{}, counts => #{}, stopped => false};
level(parser, Opts, Deadline) ->
    Ctx = ctx(Opts),
    Fxml = maps:get(fxml, Opts),
    Check = fun(I) ->
                    In = throng_bench_fuzz_gen:input(parser, maps:get(seed, Opts), I, Ctx),
                    {In, throng_bench_fuzz_parser:check(maps:get(chunks, In), Fxml)}
            end,
    engine(parser, maps:get(parser, Opts), maps:get(workers, Opts), Check, Opts, Deadline,
           fun(_) -> ok end).

%%% The socket level

socket_level(Opts, Deadline) ->
    Target = maps:with([host, port, quiet_ms], Opts),
    Ctx = ctx(Opts),
    Before = metrics(Opts),
    Log = log_open(Opts),
    Check = fun(I) ->
                    In = throng_bench_fuzz_gen:input(socket, maps:get(seed, Opts), I, Ctx),
                    {In, throng_bench_fuzz_socket:check(maps:get(chunks, In),
                                                        maps:get(pauses, In), Target)}
            end,
    Tick = fun(Recent) -> log_tick(Log, Recent) end,
    R0 = engine(socket, maps:get(socket, Opts), maps:get(concurrency, Opts), Check, Opts,
                Deadline, Tick),
    R1 = crashes(Log, Opts, Check, R0),
    leaks(Before, Opts, R1).

%% Server errors seen in the log: replay each window's inputs one at a time.
crashes(Log, Opts, Check, R) ->
    case log_events(Log) of
        [] -> R;
        Events ->
            say(Opts, "fuzz: ~b server error(s) in the log; replaying the inputs before them~n",
                [length(Events)]),
            lists:foldl(fun({Lines, Window}, Acc) -> culprit(Lines, Window, Log, Opts, Check, Acc) end,
                        R, lists:sublist(Events, 3))
    end.

culprit(Lines, Window, Log, Opts, Check, R) ->
    Found = [I || I <- lists:sublist(lists:usort(Window), maps:get(replay_max, Opts)),
                  begin
                      _ = Check(I),
                      timer:sleep(200),
                      log_new_errors(Log) =/= []
                  end],
    Saved = case Found of
                [] -> [save(Opts, socket, server_error_suspect, I, #{log => Lines}) || I <- Window];
                _ -> [save(Opts, socket, server_error, I, #{log => Lines}) || I <- Found]
            end,
    fail(R, server_error, length(Saved)).

leaks(undefined, _Opts, R) ->
    R;
leaks(#{processes := P0}, Opts, R) when not is_integer(P0) ->
    %% The server's first statistics sample had no process count yet: no
    %% baseline, no leak check (said, not hidden).
    say(Opts, "fuzz: no process count before the run: leak check skipped~n", []),
    R#{processes_before => null};
leaks(#{processes := P0}, Opts, R) ->
    Slack = maps:get(leak_slack, Opts),
    %% Sessions kept for resumption leave after the server's resume_timeout.
    After = wait_metrics(Opts, fun(#{connections := C, sessions := S, processes := P}) ->
                                       C =:= 0 andalso S =:= 0 andalso P =< P0 + Slack
                               end, now_ms() + maps:get(leak_wait, Opts, 60000)),
    R1 = R#{processes_before => P0, processes_after => maps:get(processes, After, null),
            connections_after => maps:get(connections, After, null),
            sessions_after => maps:get(sessions, After, null)},
    case After of
        #{connections := 0, sessions := 0, processes := P} when P =< P0 + Slack -> R1;
        _ ->
            say(Opts, "fuzz: process leak? before ~p, after ~p~n", [P0, After]),
            fail(R1, process_leak, 1)
    end.

fail(#{failures := F} = R, What, N) ->
    R#{failures := maps:update_with(What, fun(X) -> X + N end, N, F)}.

%%% The engine: workers, progress, stalls

engine(Kind, N, Workers, Check, Opts, Deadline, Tick) ->
    Next = atomics:new(1, []),
    Ctl = self(),
    Spawn = fun() -> spawn_link(fun() -> worker(Ctl, Next, N, Check) end) end,
    process_flag(trap_exit, true),
    Pids = maps:from_list([{Spawn(), {0, now_ms()}} || _ <- lists:seq(1, min(Workers, max(N, 1)))]),
    St = #{kind => Kind, n => N, done => 0, ok => 0, counts => #{}, failures => #{}, known => #{},
           saved => #{}, recent => [], pids => Pids, spawn => Spawn, next => Next,
           start => now_ms(), deadline => Deadline, opts => Opts, tick => Tick,
           last_tick => now_ms()},
    R = loop(St),
    process_flag(trap_exit, false),
    R.

worker(Ctl, Next, N, Check) ->
    I = atomics:add_get(Next, 1, 1),
    case I =< N of
        true ->
            Ctl ! {started, self(), I},
            {In, Verdict} = Check(I),
            Ctl ! {done, self(), I, In, Verdict},
            worker(Ctl, Next, N, Check);
        false ->
            ok
    end.

loop(#{pids := Pids, deadline := Deadline} = St) when map_size(Pids) =:= 0 ->
    finish(St, now_ms() >= Deadline);
loop(#{deadline := Deadline, pids := Pids} = St0) ->
    case now_ms() >= Deadline of
        true ->
            [begin unlink(P), exit(P, kill) end || P <- maps:keys(Pids)],
            flush_exits(),
            finish(St0, true);
        false ->
            St = tick(St0),
            receive
                {started, Pid, I} ->
                    loop(St#{pids := Pids#{Pid => {I, now_ms()}}});
                {done, Pid, I, In, Verdict} ->
                    loop(record(St#{pids := Pids#{Pid => {0, now_ms()}}}, I, In, Verdict));
                {'EXIT', Pid, normal} ->
                    loop(St#{pids := maps:remove(Pid, Pids)});
                {'EXIT', Pid, Why} when is_map_key(Pid, Pids) ->
                    %% A crash of the harness itself: count the input, go on.
                    {I, _} = maps:get(Pid, Pids),
                    St1 = record(St#{pids := maps:remove(Pid, Pids)}, I, undefined,
                                 {fail, harness_crash, Why}),
                    loop(respawn(St1))
            after 1000 ->
                loop(St)
            end
    end.

flush_exits() ->
    receive {'EXIT', _, _} -> flush_exits(); {started, _, _} -> flush_exits();
            {done, _, _, _, _} -> flush_exits()
    after 0 -> ok
    end.

respawn(#{pids := Pids, spawn := Spawn, next := Next, n := N} = St) ->
    case atomics:get(Next, 1) < N of
        true -> St#{pids := Pids#{Spawn() => {0, now_ms()}}};
        false -> St
    end.

%% A worker busy with one input for longer than --stall: a loop (or a hang).
stalls(#{pids := Pids, opts := #{stall := Stall}} = St) ->
    Now = now_ms(),
    maps:fold(fun(Pid, {I, Since}, Acc) when I > 0, Now - Since > Stall ->
                      unlink(Pid), exit(Pid, kill),
                      Acc1 = record(Acc#{pids := maps:remove(Pid, maps:get(pids, Acc))}, I,
                                    undefined, {fail, loop, {stalled_ms, Now - Since}}),
                      respawn(Acc1);
                 (_, _, Acc) -> Acc
              end, St, Pids).

record(#{done := D, counts := C, recent := Recent, kind := Kind, opts := Opts} = St,
       I, In, Verdict) ->
    Now = now_ms(),
    St1 = St#{done := D + 1, recent := [{Now, I} | [X || {T, _} = X <- Recent, Now - T < ?WINDOW_MS]]},
    case Verdict of
        ok -> St1#{ok := maps:get(ok, St1) + 1};
        {ok, What} -> St1#{ok := maps:get(ok, St1) + 1, counts := maps:update_with(What, fun(X) -> X + 1 end, 1, C)};
        {fail, What, Detail} ->
            #{failures := F0, saved := S, known := K} = St1,
            {F, K1} = case lists:member(What, maps:get(known, Opts)) of
                          true -> {F0, maps:update_with(What, fun(X) -> X + 1 end, 1, K)};
                          false -> {maps:update_with(What, fun(X) -> X + 1 end, 1, F0), K}
                      end,
            Saved = maps:get(What, S, 0),
            Saved < ?MAX_SAVED andalso
                save(Opts, Kind, What, I, #{detail => Detail, input => In}),
            say(Opts, "~nfuzz: ~s input ~b: ~s~s~n",
                [Kind, I, What, case maps:is_key(What, K1) of true -> " (known)"; false -> "" end]),
            St1#{failures := F, known := K1, saved := S#{What => Saved + 1}}
    end.

tick(#{last_tick := Last} = St) ->
    Now = now_ms(),
    case Now - Last >= 1000 of
        true ->
            progress(St),
            #{tick := Tick, recent := Recent} = St,
            Tick([I || {_, I} <- Recent]),
            stalls(St#{last_tick := Now});
        false -> St
    end.

progress(#{opts := #{progress := false}}) -> ok;
progress(#{kind := Kind, done := D, n := N, start := T0, failures := F, counts := C,
           known := K}) ->
    Secs = max(1, now_ms() - T0) / 1000,
    io:format(standard_error, "\rfuzz ~s: ~b/~b inputs, ~b/s, ~b failed, known ~w, ~w   ",
              [Kind, D, N, round(D / Secs), total(F), K, C]).

finish(#{kind := Kind, done := D, ok := Ok, counts := C, failures := F, known := K,
         start := T0} = St, Stopped) ->
    progress(St),
    say(maps:get(opts, St), "~n", []),
    #{inputs => D, ok => Ok, counts => C, failures => F, known => K, stopped => Stopped,
      seconds => (now_ms() - T0) / 1000, kind => Kind}.

%%% Reproducers

save(Opts, Kind, What, I, Extra) ->
    #{seed := Seed, out := Out} = Opts,
    In = case maps:get(input, Extra, undefined) of
             undefined -> throng_bench_fuzz_gen:input(Kind, Seed, I, ctx(Opts));
             X -> X
         end,
    Base = filename:join([Out, "reproducers",
                          io_lib:format("~s-~s-~b-~b", [Kind, What, Seed, I])]),
    Term = #{kind => Kind, failure => What, seed => Seed, index => I,
             mutations => maps:get(mutations, In), chunks => maps:get(chunks, In),
             pauses => maps:get(pauses, In), detail => maps:get(detail, Extra, null),
             log => maps:get(log, Extra, [])},
    ok = file:write_file(Base ++ ".term", ["%% -*- coding: latin-1 -*-\n",
                                           io_lib:format("~p.~n", [Term])]),
    ok = file:write_file(Base ++ ".bin", maps:get(chunks, In)),
    I.

%% @doc Runs one saved reproducer (a .term file) again and returns its
%% verdict now: the parser's, or the socket oracle's against the target.
-spec replay(file:filename(), map()) -> {ok | failed, term()}.
replay(File, Opts0) ->
    Opts = defaults(Opts0),
    case file:consult(File) of
        {ok, [#{kind := Kind, chunks := Chunks, pauses := Pauses}]} ->
            V = case Kind of
                    parser -> throng_bench_fuzz_parser:check(Chunks, maps:get(fxml, Opts));
                    socket -> throng_bench_fuzz_socket:check(Chunks, Pauses,
                                                             maps:with([host, port, quiet_ms], Opts))
                end,
            {case V of {fail, _, _} -> failed; _ -> ok end, V};
        {ok, _} -> throw({usage, io_lib:format("~ts: not a fuzz reproducer", [File])});
        {error, Why} -> throw({usage, io_lib:format("~ts: ~ts", [File, file:format_error(Why)])})
    end.

%%% The server's log

log_open(#{server_log := File}) ->
    Size = filelib:file_size(File),
    Tab = ets:new(fuzz_log, [public]),
    true = ets:insert(Tab, [{file, File}, {pos, Size}, {events, []}]),
    Tab;
log_open(_) ->
    undefined.

log_tick(undefined, _Recent) -> ok;
log_tick(Tab, Recent) ->
    case log_new_errors(Tab) of
        [] -> ok;
        Lines ->
            [{events, E}] = ets:lookup(Tab, events),
            true = ets:insert(Tab, {events, E ++ [{Lines, Recent}]}),
            ok
    end.

log_events(undefined) -> [];
log_events(Tab) -> ets:lookup_element(Tab, events, 2).

%% Error lines (level error or worse) added to the log since the last look.
log_new_errors(Tab) ->
    [{file, File}] = ets:lookup(Tab, file),
    [{pos, Pos}] = ets:lookup(Tab, pos),
    case file:open(File, [read, binary, raw]) of
        {ok, F} ->
            Data = case file:pread(F, Pos, 16#1000000) of
                       {ok, D} -> D;
                       _ -> <<>>
                   end,
            ok = file:close(F),
            true = ets:insert(Tab, {pos, Pos + byte_size(Data)}),
            [L || L <- binary:split(Data, <<"\n">>, [global]),
                  re:run(L, <<"^\\S+ (error|critical|alert|emergency) ">>) =/= nomatch];
        {error, _} -> []
    end.

%%% The server's /metrics

metrics(#{stats_port := Port} = Opts) when is_integer(Port) ->
    Host = maps:get(host, Opts),
    case http_get(Host, Port, "/metrics") of
        {ok, Body} ->
            V = fun(Name) ->
                        case re:run(Body, <<"(?m)^", Name/binary, " ([0-9.e+]+)$">>,
                                    [{capture, [1], binary}]) of
                            {match, [X]} -> num(X);
                            nomatch -> undefined
                        end
                end,
            #{processes => V(<<"throng_beam_processes">>), connections => V(<<"throng_connections">>),
              sessions => V(<<"throng_sessions">>)};
        {error, _} -> undefined
    end;
metrics(_) ->
    undefined.

num(X) ->
    try binary_to_integer(X)
    catch error:badarg -> round(binary_to_float(X))
    end.

%% A GET with Connection: close; the body once the server has closed.
http_get(Host, Port, Path) ->
    case gen_tcp:connect(Host, Port, [binary, {active, false}], 5000) of
        {ok, S} ->
            ok = gen_tcp:send(S, ["GET ", Path, " HTTP/1.1\r\nHost: fuzz\r\nConnection: close\r\n\r\n"]),
            R = read_all(S, []),
            gen_tcp:close(S),
            case R of
                {ok, <<"HTTP/1.1 200", _/binary>> = Resp} ->
                    [_, Body] = binary:split(Resp, <<"\r\n\r\n">>),
                    {ok, Body};
                {ok, Other} -> {error, {bad_response, binary:part(Other, 0, min(40, byte_size(Other)))}};
                Error -> Error
            end;
        Error -> Error
    end.

read_all(S, Acc) ->
    case gen_tcp:recv(S, 0, 10000) of
        {ok, B} -> read_all(S, [Acc, B]);
        {error, closed} -> {ok, iolist_to_binary(Acc)};
        Error -> Error
    end.

wait_metrics(Opts, Done, Deadline) ->
    M = metrics(Opts),
    case is_map(M) andalso Done(M) of
        true -> M;
        false ->
            case now_ms() > Deadline of
                true -> case M of undefined -> #{}; _ -> M end;
                false -> timer:sleep(1000), wait_metrics(Opts, Done, Deadline)
            end
    end.

%%% Helpers

total(F) -> lists:sum(maps:values(F)).

say(#{progress := false}, _Fmt, _Args) -> ok;
say(_Opts, Fmt, Args) -> io:format(standard_error, Fmt, Args).

now_ms() -> erlang:monotonic_time(millisecond).
