%% @doc Entry point of bin/throng-bench: `erl -run throng_bench_cli main ARGS'.
%%
%% Exit status: 0 the run completed without errors; 1 it completed but with
%% errors (failed logins, lost connections, failed requests, ...); 2 bad
%% usage or input (unknown option, malformed scenario file); 3 the run could
%% not start or was aborted (server unreachable, worker VMs failed).
-module(throng_bench_cli).

-export([main/0, run/1]).
%% Entry point of bin/throng-bench (erl -run throng_bench_cli main).
-ignore_xref([{main, 0}]).
%% API used by tests: a command line in, an exit status out.
-ignore_xref([{run, 1}]).

%% @doc Run the command line that follows `-extra' and halt the VM with its
%% exit status (`erl -run throng_bench_cli main -extra ARGS': arguments after
%% -extra reach the program untouched, even those starting with a dash).
-spec main() -> no_return().
main() ->
    Code = run(init:get_plain_arguments()),
    erlang:halt(Code, [{flush, true}]).

%% @doc Run a command line and return the exit status (for tests).
-spec run([string()]) -> 0..3.
run(Args) ->
    try
        dispatch(Args)
    catch
        throw:{usage, Msg} ->
            err(Msg), 2;
        throw:{fatal, Msg} ->
            err(Msg), 3;
        Class:Reason:Stack ->
            err(io_lib:format("internal error: ~0tp:~0tP~n  ~0tP", [Class, Reason, 20, Stack, 20])),
            3
    end.

err(Msg) ->
    io:put_chars(standard_error, ["throng-bench: ", Msg, "\n"]).

dispatch([]) -> usage(), 2;
dispatch([H]) when H =:= "help"; H =:= "--help"; H =:= "-h" -> usage(), 0;
dispatch(["help", Cmd]) -> io:put_chars(throng_bench_opts:help(Cmd)), 0;
dispatch([Cmd | Args]) ->
    case lists:keymember(Cmd, 1, throng_bench_opts:commands()) of
        false ->
            throw({usage, io_lib:format("unknown command \"~ts\" (commands: ~ts)",
                                        [Cmd, lists:join(", ", [C || {C, _} <- throng_bench_opts:commands()])])});
        true ->
            case lists:member("--help", Args) orelse lists:member("-h", Args) of
                true -> io:put_chars(throng_bench_opts:help(Cmd)), 0;
                false -> command(Cmd, throng_bench_opts:parse(Cmd, Args))
            end
    end.

usage() ->
    io:put_chars(["usage: throng-bench COMMAND [OPTIONS]   (throng-bench COMMAND --help)\n\ncommands:\n",
                  [io_lib:format("  ~-12s ~ts~n", [C, D]) || {C, D} <- throng_bench_opts:commands()],
                  "\ndocs/bench.md describes every option and every number of the results.\n"]).

command("xmpp", Opts) -> exit_code(throng_bench_xmpp:run(progress(Opts)));
command("compare", Opts) -> throng_bench_compare:run(progress(Opts));
command("study", Opts) -> throng_bench_study:run(progress(Opts));
command(Mode, Opts) when Mode =:= "echo"; Mode =:= "flow" ->
    M = list_to_atom(Mode),
    Opts1 = Opts#{nodelay => not maps:get(no_nodelay, Opts, false)},
    maps:get(min_size, Opts1) =< maps:get(max_size, Opts1)
        orelse throw({usage, "--min-size is larger than --max-size"}),
    case throng_bench_echo:run(M, maps:without([no_nodelay], Opts1)) of
        {ok, _} -> 0;
        {error, #{error := E}} -> err(E), 3
    end;
command("http", Opts0) ->
    Opts = case maps:is_key(requests, Opts0) orelse maps:is_key(duration, Opts0) of
               true -> Opts0;
               false -> Opts0#{requests => 1000}
           end,
    Opts1 = case maps:get(source_ips, Opts, undefined) of
                undefined -> Opts#{source_ips => [any]};
                _ -> Opts
            end,
    exit_code(throng_bench_http:run(progress(Opts1)));
command("echo-server", Opts) ->
    throng_bench_echo_server:serve_forever(#{port => maps:get(port, Opts),
                                             sink_port => maps:get(sink_port, Opts,
                                                                   maps:get(port, Opts) + 1),
                                             ip => ip(Opts), backlog => maps:get(backlog, Opts)});
command("http-server", Opts) ->
    throng_bench_http_server:serve_forever((maps:with([port, backlog, accept_delay, body_size],
                                                      Opts))#{ip => ip(Opts)});
command("fuzz", Opts0) ->
    Opts = fuzz_opts(Opts0),
    case Opts of
        #{replay := File} ->
            {Result, Verdict} = throng_bench_fuzz:replay(File, Opts),
            io:format("~ts: ~0tP~n", [File, Verdict, 30]),
            case Result of ok -> 0; failed -> 1 end;
        _ ->
            {Result, #{parser := P, socket := S, seed := Seed}} = throng_bench_fuzz:run(Opts),
            io:format("fuzz seed=~b parser_inputs=~b parser_failures=~b socket_inputs=~b "
                      "socket_failures=~b~n",
                      [Seed, maps:get(inputs, P), lists:sum(maps:values(maps:get(failures, P))),
                       maps:get(inputs, S), lists:sum(maps:values(maps:get(failures, S)))]),
            case Result of ok -> 0; failed -> 1 end
    end;
command("soak-report", #{dir := _, steady_to_s := _} = Opts) ->
    {Verdict, S} = throng_bench_soak:report(Opts),
    #{rss_bytes := #{drift_pct := Rss}, beam_bytes := #{drift_pct := Beam},
      processes := #{drift := Procs}, messages := #{sent := Sent, lost := Lost}} = S,
    Errors = lists:sum(maps:values(maps:get(errors, S))),
    io:format("soak ~s: rss drift ~p% beam drift ~p% (target < ~p%), process drift ~w, "
              "errors ~b, messages sent ~b lost ~b~n",
              [Verdict, Rss, Beam, maps:get(drift_target, Opts), Procs, Errors, Sent, Lost]),
    case Verdict of pass -> 0; fail -> 1 end;
command("soak-report", _) ->
    throw({usage, "soak-report needs --dir DIR and --steady-to SECONDS"});
command("worker", Opts) ->
    case Opts of
        #{name := N, cookie := C} ->
            throng_bench_worker:serve(#{name => list_to_atom(N), cookie => list_to_atom(C)});
        _ -> throw({usage, "worker needs --name NODE and --cookie COOKIE"})
    end.

ip(#{ip := S}) ->
    case throng_bench_units:parse_ip(S) of
        {ok, Ip} -> Ip;
        error -> throw({usage, io_lib:format("option --ip: expected an IP address, got \"~ts\"", [S])})
    end.

progress(Opts) -> Opts#{progress => not maps:get(no_progress, Opts, false)}.

fuzz_opts(Opts) ->
    Host = case throng_bench_units:parse_ip(maps:get(host, Opts)) of
               {ok, Ip} -> Ip;
               error -> maps:get(host, Opts)
           end,
    (maps:without([no_fxml, no_progress], progress(Opts)))#{
      host => Host, fxml => not maps:get(no_fxml, Opts, false),
      known => [list_to_atom(K) || K <- maps:get(known, Opts, [])],
      domain => list_to_binary(maps:get(domain, Opts)),
      password => list_to_binary(maps:get(password, Opts))}.

%% Exit status of a finished run: aborted -> 3; errors -> 1; else 0.
exit_code({aborted, Summary}) ->
    case maps:get(error, Summary, null) of
        null -> ok;
        E -> err(E)
    end,
    3;
exit_code({_, Summary}) ->
    case maps:get(verdict, Summary, #{}) of
        #{ok := false, reasons := Rs} ->
            err(["completed with problems: ", lists:join("; ", Rs)]), 1;
        _ -> 0
    end.
