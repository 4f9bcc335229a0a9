%% @doc `compare': one xmpp scenario against several servers, one after
%% another on this machine, and one table of the results.
%%
%% For each `--server NAME=COMMAND': run COMMAND with /bin/sh; wait until the
%% scenario's host:port accepts connections; find the server's OS pid (the
%% output of `--pid NAME=COMMAND', else the last line the start command
%% printed if it exited and that line is a number, else the pid of the
%% command itself); run the scenario with that pid sampled from /proc; stop
%% the server (`--stop NAME=COMMAND', else SIGTERM, then SIGKILL after 10 s);
%% wait until the port is free again. Results go to OUT/NAME/ and the table
%% to stdout, OUT/comparison.md and OUT/comparison.json.
-module(throng_bench_compare).

-export([run/1, port_free/3]).

%% @doc Run the comparison; returns the exit status.
-spec run(map()) -> 0 | 1 | 3.
run(Opts) ->
    Servers = parse_named("server", maps:get(servers, Opts, [])),
    Servers =/= [] orelse throw({usage, "compare needs at least one --server NAME=COMMAND"}),
    Stops = maps:from_list(parse_named("stop", maps:get(stops, Opts, []))),
    Pids = maps:from_list(parse_named("pid", maps:get(pids, Opts, []))),
    {ok, Scenario, _} = case throng_bench_xmpp:prepare(Opts) of
                            {error, Msg} -> throw({usage, Msg});
                            Prepared -> Prepared
                        end,
    #{server := #{host := HostB, port := Port}} = Scenario,
    Host = binary_to_list(HostB),
    port_free(Host, Port, 2000) orelse
        throw({fatal, io_lib:format("~ts:~b is already in use: stop whatever listens there first",
                                    [Host, Port])}),
    Out = maps:get(out, Opts, "compare-" ++ integer_to_list(erlang:system_time(second))),
    Results = [one(Name, Cmd, maps:get(Name, Stops, undefined), maps:get(Name, Pids, undefined),
                   Host, Port, Opts#{out => filename:join(Out, Name)})
               || {Name, Cmd} <- Servers],
    Table = table(Results),
    io:put_chars(["\n", Table]),
    ok = filelib:ensure_dir(filename:join(Out, "x")),
    ok = file:write_file(filename:join(Out, "comparison.md"), Table),
    ok = file:write_file(filename:join(Out, "comparison.json"),
                         throng_bench_out:encode_json(#{servers => Results,
                                                        scenario => maps:get(name, Scenario)})),
    io:format("results in ~ts/~n", [Out]),
    case [R || R = #{ok := true} <- Results] of
        [] -> 3;
        Good when length(Good) =:= length(Results) -> 0;
        _ -> 1
    end.

%% @doc ["NAME=VALUE"] -> [{"NAME", "VALUE"}]; throws a usage error naming
%% the option otherwise.
-spec parse_named(string(), [string()]) -> [{string(), string()}].
parse_named(Opt, Values) ->
    [case string:split(V, "=") of
         [N, C] when N =/= "", C =/= "" -> {N, C};
         _ -> throw({usage, io_lib:format("option --~s: expected NAME=COMMAND, got \"~ts\"",
                                          [Opt, V])})
     end || V <- Values].

one(Name, Cmd, StopCmd, PidCmd, Host, Port, Opts) ->
    Dir = maps:get(out, Opts),
    ok = filelib:ensure_dir(filename:join(Dir, "x")),
    io:format(standard_error, "~n== ~s: starting: ~ts~n", [Name, Cmd]),
    Log = filename:join(Dir, "server.log"),
    %% `exec' keeps the pid of a simple command (a server in the foreground)
    Exec = case lists:any(fun(Op) -> string:find(Cmd, Op) =/= nomatch end, ["&&", ";", "|"]) of
               true -> "";
               false -> "exec "
           end,
    P = open_port({spawn_executable, "/bin/sh"},
                  [{args, ["-c", Exec ++ Cmd ++ " > '" ++ Log ++ "' 2>&1"]}, exit_status, binary]),
    {os_pid, ShPid} = erlang:port_info(P, os_pid),
    Ready = wait_ready(P, Host, Port, maps:get(ready_timeout, Opts, 60000)),
    Result =
        case Ready of
            {error, Why} ->
                #{name => list_to_binary(Name), ok => false, error => iolist_to_binary(Why)};
            {ok, Exited0} ->
                %% a start script that daemonizes exits soon after the port opens
                Exited = case Exited0 of
                             running -> wait_exit(P, 10000);
                             _ -> Exited0
                         end,
                timer:sleep(maps:get(settle, Opts, 2000)),
                Pid = server_pid(PidCmd, Exited, Log, ShPid),
                io:format(standard_error, "== ~s: ready on ~ts:~b, pid ~p~n",
                          [Name, Host, Port, Pid]),
                {Status, S} = try throng_bench_xmpp:run(Opts#{server_pid => Pid})
                              catch throw:{_, M} -> {aborted, #{error => iolist_to_binary(M)}}
                              end,
                row(Name, Status, S)
        end,
    stop(Name, P, StopCmd, ShPid, Result, Host, Port),
    Result.

wait_ready(P, Host, Port, Timeout) ->
    Deadline = erlang:monotonic_time(millisecond) + Timeout,
    wait_ready(P, Host, Port, Deadline, running).

wait_ready(P, Host, Port, Deadline, State) ->
    case gen_tcp:connect(Host, Port, [], 1000) of
        {ok, S} -> gen_tcp:close(S), {ok, State};
        {error, _} ->
            receive
                {P, {exit_status, 0}} -> wait_ready(P, Host, Port, Deadline, exited);
                {P, {exit_status, N}} ->
                    {error, io_lib:format("the start command exited with status ~b before "
                                          "~ts:~b opened (see server.log)", [N, Host, Port])}
            after 200 ->
                    case erlang:monotonic_time(millisecond) > Deadline of
                        true -> {error, io_lib:format("~ts:~b did not open in time", [Host, Port])};
                        false -> wait_ready(P, Host, Port, Deadline, State)
                    end
            end
    end.

wait_exit(P, Timeout) ->
    receive
        {P, {exit_status, 0}} -> exited;
        {P, {exit_status, _}} -> running
    after Timeout -> running
    end.

server_pid(PidCmd, Exited, Log, ShPid) when PidCmd =/= undefined ->
    case first_int(os:cmd(PidCmd)) of
        undefined -> server_pid(undefined, Exited, Log, ShPid);
        N -> N
    end;
server_pid(undefined, exited, Log, _ShPid) ->
    case file:read_file(Log) of
        {ok, B} ->
            Lines = string:split(string:trim(B), "\n", all),
            first_int(binary_to_list(lists:last(Lines)));
        _ -> undefined
    end;
server_pid(undefined, running, _Log, ShPid) -> ShPid.

first_int(S) ->
    case string:to_integer(string:trim(S)) of
        {N, _} when is_integer(N), N > 0 -> N;
        _ -> undefined
    end.

stop(Name, P, StopCmd, ShPid, Result, Host, Port) ->
    io:format(standard_error, "== ~s: stopping~n", [Name]),
    case StopCmd of
        undefined ->
            Pid = case maps:get(server_pid, Result, undefined) of
                      N when is_integer(N) -> N;
                      _ -> ShPid
                  end,
            _ = os:cmd("kill -TERM " ++ integer_to_list(Pid) ++ " 2>/dev/null"),
            _ = wait_gone(Pid, 100) orelse os:cmd("kill -KILL " ++ integer_to_list(Pid) ++ " 2>/dev/null"),
            ok;
        _ -> _ = os:cmd(StopCmd), ok
    end,
    _ = (catch port_close(P)),
    _ = port_free(Host, Port, 30000) orelse
        io:format(standard_error, "== ~s: ~ts:~b is still open after stopping~n", [Name, Host, Port]),
    ok.

wait_gone(_Pid, 0) -> false;
wait_gone(Pid, N) ->
    case throng_proc_sample:alive(Pid) of
        false -> true;
        true -> timer:sleep(100), wait_gone(Pid, N - 1)
    end.

%% @doc Whether nothing accepts connections on Host:Port, waiting up to
%% Wait ms for it to close (also used by `study').
-spec port_free(string(), inet:port_number(), integer()) -> boolean().
port_free(Host, Port, Wait) when Wait =< 0 ->
    case gen_tcp:connect(Host, Port, [], 500) of
        {ok, S} -> gen_tcp:close(S), false;
        _ -> true
    end;
port_free(Host, Port, Wait) ->
    case gen_tcp:connect(Host, Port, [], 500) of
        {ok, S} -> gen_tcp:close(S), timer:sleep(500), port_free(Host, Port, Wait - 500);
        _ -> true
    end.

row(Name, Status, S) ->
    Get = fun(Path) -> get_in(Path, S) end,
    #{name => list_to_binary(Name), ok => Status =/= aborted andalso Get([verdict, ok]) =:= true,
      status => Status, error => maps:get(error, S, null),
      server_pid => Get([server_pid]),
      sessions_max => Get([sessions, max]),
      users_planned => Get([users, planned]),
      users_logged_in => Get([users, logged_in]),
      server_rss_max_bytes => Get([server, rss_max_bytes]),
      server_bytes_per_session => Get([server, bytes_per_session_at_peak]),
      server_cpu_mean_pct => Get([server, cpu_mean_pct]),
      logins_per_s => Get([rates, logins_per_s, mean_while_active]),
      logins_per_s_max => Get([rates, logins_per_s, max]),
      login_p99_ms => Get([latency_ms, login, p99]),
      delivery_p50_ms => Get([latency_ms, delivery, p50]),
      delivery_p99_ms => Get([latency_ms, delivery, p99]),
      messages_sent => Get([messages, sent]),
      messages_lost => Get([messages, lost]),
      errors => Get([errors, total])}.

get_in([], V) -> V;
get_in([K | Ks], M) when is_map(M) ->
    case maps:find(K, M) of
        {ok, V} -> get_in(Ks, V);
        error -> undefined
    end;
get_in(_, _) -> undefined.

%% @doc The comparison as a Markdown table.
-spec table([map()]) -> iodata().
table(Rows) ->
    Head = ["server", "sessions held", "server RSS max", "server memory/session",
            "server CPU mean", "logins/s", "login p99", "delivery p50", "delivery p99",
            "msgs sent", "lost", "errors", "status"],
    Line = fun(Cells) -> ["| ", lists:join(" | ", Cells), " |\n"] end,
    [Line(Head), Line([<<"---">> || _ <- Head]),
     [Line([maps:get(name, R),
            n(maps:get(sessions_max, R, undefined)),
            bytes(maps:get(server_rss_max_bytes, R, undefined)),
            bytes(maps:get(server_bytes_per_session, R, undefined)),
            pct(maps:get(server_cpu_mean_pct, R, undefined)),
            n(maps:get(logins_per_s, R, undefined)),
            ms(maps:get(login_p99_ms, R, undefined)),
            ms(maps:get(delivery_p50_ms, R, undefined)),
            ms(maps:get(delivery_p99_ms, R, undefined)),
            n(maps:get(messages_sent, R, undefined)),
            n(maps:get(messages_lost, R, undefined)),
            n(maps:get(errors, R, undefined)),
            case R of
                #{ok := true} -> <<"ok">>;
                #{error := E} when E =/= null, E =/= undefined -> throng_bench_units:to_bin(E);
                #{status := St} -> throng_bench_units:to_bin(St);
                _ -> <<"failed">>
            end]) || R <- Rows]].

n(undefined) -> <<"-">>;
n(V) when is_float(V) -> throng_bench_units:format_num(V);
n(V) -> throng_bench_units:to_bin(V).

bytes(undefined) -> <<"-">>;
bytes(B) -> throng_bench_units:format_bytes(B).

pct(undefined) -> <<"-">>;
pct(P) -> iolist_to_binary(io_lib:format("~.1f%", [float(P)])).

ms(undefined) -> <<"-">>;
ms(Ms) -> throng_bench_units:format_us(Ms * 1000).
