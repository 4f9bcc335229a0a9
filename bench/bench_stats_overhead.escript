#!/usr/bin/env escript
%%! -name throngstatsbench@127.0.0.1 -setcookie throngstatsbench +P 1000000 +sbwt none
%%
%% The cost of Throng's statistics collector at N sessions (default 15,000).
%%
%%   rebar3 as stats compile
%%   bench/bench_stats_overhead.escript [--sessions 15000] [--procs 0]
%%                                      [--ticks 300] [--ab-seconds 120]
%%
%% 1. Starts a Throng node (the code in _build/stats) with statistics on, in
%%    its own OS process, and registers N accounts (18 contacts each).
%% 2. Logs N raw XMPP clients in from this escript (SASL PLAIN over
%%    loopback, resource bind, initial presence), then lets the node settle.
%% 3. Measures the collector three ways, on the idle node holding N sessions:
%%    a. CPU per sample: throng_stats_collector:measure(--ticks) takes that
%%       many samples back to back, exactly as the per-second ones, and
%%       reports the node's CPU time (user+system of the whole OS process)
%%       they took; the node's idle CPU over the same wall time, measured
%%       just before, is subtracted. One sample per second, so CPU per
%%       sample / 1 s = share of one core.
%%    b. Wall time of the per-second samples (throng_stats_tick_seconds,
%%       100 s average): an upper bound of their CPU.
%%    c. A/B: the node's CPU with throng_stats running, running with the
%%       latency probes off, and stopped; four interleaved rounds sharing
%%       --ab-seconds per state, medians (the host is shared and the node has
%%       background work of its own, such as Mnesia log dumps).
%% 4. With --procs M, spawns M idle processes in the node and measures (a)
%%    again: the message-queue sweep is the part that grows with processes.
%%
%% Each OS process stays under 19,000 sockets (the limit here is 20,000).
-mode(compile).

-define(DOMAIN, <<"localhost">>).
-define(PASSWORD, <<"password">>).
-define(NODE, 'throngstatsbenchsrv@127.0.0.1').

main(Args) ->
    Opts = opts(Args, #{sessions => 15000, procs => 0, ticks => 300, ab_seconds => 120}),
    Root = root(),
    Tmp = string:trim(os:cmd("mktemp -d /tmp/throng-stats-bench.XXXXXX")),
    Port = free_port(),
    ok = start_server(Root, Tmp, Port),
    try run(Opts, Port)
    after
        catch rpc:call(?NODE, init, stop, []),
        timer:sleep(1000),
        os:cmd("rm -rf " ++ Tmp)
    end.

opts(["--sessions", N | T], O) -> opts(T, O#{sessions => list_to_integer(N)});
opts(["--procs", N | T], O) -> opts(T, O#{procs => list_to_integer(N)});
opts(["--ticks", N | T], O) -> opts(T, O#{ticks => list_to_integer(N)});
opts(["--ab-seconds", N | T], O) -> opts(T, O#{ab_seconds => list_to_integer(N)});
opts([], O) -> O;
opts(Other, _) -> io:format(standard_error, "unknown arguments: ~p~n", [Other]), halt(2).

root() ->
    filename:dirname(filename:dirname(filename:absname(escript:script_name()))).

free_port() ->
    {ok, L} = gen_tcp:listen(0, [{ip, {127, 0, 0, 1}}]),
    {ok, P} = inet:port(L),
    gen_tcp:close(L),
    P.

start_server(Root, Tmp, Port) ->
    Yml = filename:join(Tmp, "throng.yml"),
    ok = file:write_file(Yml, io_lib:format(
        "hosts: [localhost]~n"
        "loglevel: warning~n"
        "data_dir: ~s/data~n"
        "listen:~n  - port: ~b~n    ip: \"127.0.0.1\"~n    starttls: optional~n"
        "auth:~n  scram_iterations: 16~n"
        "ping:~n  interval: 0~n"
        "stats:~n  port: 0~n", [Tmp, Port])),
    Ebins = filelib:wildcard(filename:join(Root, "_build/stats/lib/*/ebin")),
    Ebins =/= [] orelse fail("no _build/stats: run `rebar3 as stats compile` first"),
    ok = code:add_pathsa(Ebins),   %% throng_lib's /proc readings, here too
    Cmd = lists:flatten(
            ["THRONG_CONFIG=", Yml, " erl -detached -noinput -name ", atom_to_list(?NODE),
             " -setcookie throngstatsbench +P 2000000 +Q 1048576",
             " +sbwt none +sbwtdcpu none +sbwtdio none",
             [[" -pa ", E] || E <- Ebins],
             " -eval 'application:ensure_all_started(throng_stats)'"]),
    _ = os:cmd(Cmd),
    wait_up(100).

wait_up(0) ->
    fail("the Throng node did not start");
wait_up(N) ->
    case net_adm:ping(?NODE) =:= pong andalso
        is_integer(rpc:call(?NODE, throng_stats, http_port, [])) of
        true -> ok;
        false -> timer:sleep(300), wait_up(N - 1)
    end.

run(#{sessions := N, ticks := Ticks, ab_seconds := AB, procs := Procs}, Port) ->
    io:format("registering ~b accounts...~n", [N]),
    {ok, N} = rpc:call(?NODE, throng_auth, bulk_register,
                       [?DOMAIN, <<"user">>, N, ?PASSWORD, 18], infinity),
    io:format("logging ~b clients in...~n", [N]),
    T0 = erlang:monotonic_time(millisecond),
    Clients = login_all(Port, N),
    io:format("  ~b sessions in ~.1f s~n", [length(Clients),
                                            (erlang:monotonic_time(millisecond) - T0) / 1000]),
    Sessions = rpc:call(?NODE, throng_info, sessions, []),
    Sessions >= N orelse fail(io_lib:format("only ~b sessions", [Sessions])),
    io:format("settling (20 s)...~n"),
    timer:sleep(20000),
    Idle = node_cpu_over(10000),
    io:format("node CPU at rest, everything running: ~.2f % of a core~n", [Idle]),
    PerTick = per_tick(Ticks),
    {WNow, W10, W100} = tick_wall(),
    io:format("~n== collector at ~b sessions ==~n"
              "CPU per sample (a):      ~.3f ms  => ~.3f % of one core at 1 sample/s~n"
              "wall per sample (b):     last ~.3f ms, 10 s average ~.3f ms, 100 s average ~.3f ms~n",
              [Sessions, PerTick, PerTick / 10, WNow * 1000, W10 * 1000, W100 * 1000]),
    %% Interleaved rounds (on, probes off, stopped), medians: the host is
    %% shared and the node has its own background work (Mnesia log dumps).
    Rounds = 4,
    Window = max(5, AB div Rounds),
    Runs = [ab_round(Window) || _ <- lists:seq(1, Rounds)],
    [With, NoProbes, Without] = [median([element(I, R) || R <- Runs]) || I <- [1, 2, 3]],
    io:format("A/B, ~b rounds of ~b s per state, medians (c):~n"
              "  throng_stats running:            ~.3f % of one core  ~p~n"
              "  running, latency probes off:     ~.3f %  ~p~n"
              "  stopped:                         ~.3f %  ~p~n"
              "  => whole application ~.3f %, collector alone ~.3f %, probes ~.3f %~n",
              [Rounds, Window, With, [element(1, R) || R <- Runs],
               NoProbes, [element(2, R) || R <- Runs], Without, [element(3, R) || R <- Runs],
               With - Without, NoProbes - Without, With - NoProbes]),
    restart_stats([{route_probes_per_second, 10}]),
    case Procs of
        0 -> ok;
        _ -> procs(Procs, Ticks)
    end,
    io:format("~nsessions still open: ~b~n", [rpc:call(?NODE, throng_info, sessions, [])]),
    [C ! stop || C <- Clients],
    ok.

%% CPU (ms) of one sample: N back-to-back samples, minus the node's idle CPU
%% over the same wall time.
per_tick(Ticks) ->
    Before = node_cpu_over(5000) / 100,          %% cores
    #{cpu_us := Cpu, wall_us := Wall} =
        rpc:call(?NODE, throng_stats_collector, measure, [Ticks], infinity),
    (Cpu - Before * Wall) / Ticks / 1000.

ab_round(Seconds) ->
    restart_stats([{route_probes_per_second, 10}]),
    With = node_cpu_over(Seconds * 1000),
    restart_stats([{route_probes_per_second, 0}]),
    NoProbes = node_cpu_over(Seconds * 1000),
    ok = rpc:call(?NODE, application, stop, [throng_stats]),
    timer:sleep(3000),
    Without = node_cpu_over(Seconds * 1000),
    {round3(With), round3(NoProbes), round3(Without)}.

round3(X) -> round(X * 1000) / 1000.

median(L) ->
    S = lists:sort(L),
    N = length(S),
    case N rem 2 of
        1 -> lists:nth(N div 2 + 1, S);
        0 -> (lists:nth(N div 2, S) + lists:nth(N div 2 + 1, S)) / 2
    end.

restart_stats(Env) ->
    _ = rpc:call(?NODE, application, stop, [throng_stats]),
    [ok = rpc:call(?NODE, application, set_env, [throng_stats, K, V]) || {K, V} <- Env],
    {ok, _} = rpc:call(?NODE, application, ensure_all_started, [throng_stats]),
    timer:sleep(3000).

tick_wall() ->
    timer:sleep(2000),
    Snap = rpc:call(?NODE, throng_stats, snapshot, []),
    hd([{Now, A10, A100} || {throng_stats_tick_seconds, [], _, Now, {_, A10, A100}}
                                <- maps:get(series, Snap)]).

%% The node's CPU over Ms milliseconds, in % of one core.
node_cpu_over(Ms) ->
    C0 = node_cpu_ms(),
    timer:sleep(Ms),
    C1 = node_cpu_ms(),
    (C1 - C0) * 100 / Ms.

node_cpu_ms() ->
    OsPid = list_to_integer(rpc:call(?NODE, os, getpid, [])),
    throng_proc_sample:cpu_seconds(throng_proc_sample:sample(OsPid)) * 1000.

procs(M, Ticks) ->
    io:format("~nspawning ~b idle processes in the node...~n", [M]),
    %% Evaluated in the node (a fun of this escript could not run there).
    {ok, Tokens, _} = erl_scan:string(
                        "[spawn(fun() -> erlang:hibernate(erlang, exit, [normal]) end)"
                        " || _ <- lists:seq(1, " ++ integer_to_list(M) ++ ")], ok."),
    {ok, Exprs} = erl_parse:parse_exprs(Tokens),
    {value, ok, _} = rpc:call(?NODE, erl_eval, exprs, [Exprs, []], infinity),
    io:format("  processes: ~b~n", [rpc:call(?NODE, erlang, system_info, [process_count])]),
    timer:sleep(10000),
    PerTick = per_tick(Ticks),
    io:format("CPU per sample with ~b more processes: ~.3f ms => ~.3f % of one core~n",
              [M, PerTick, PerTick / 10]).

%%% Raw XMPP clients: PLAIN, bind, presence, then idle.

login_all(Port, N) ->
    login_all(Port, N, 1, 200, self(), 0, []).

%% At most Slots logins in flight.
login_all(_Port, N, _I, _Slots, _Self, Done, Acc) when Done >= N ->
    Acc;
login_all(Port, N, I, Slots, Self, Done, Acc) when I =< N, Slots > 0 ->
    spawn_link(fun() -> client(Self, Port, I) end),
    login_all(Port, N, I + 1, Slots - 1, Self, Done, Acc);
login_all(Port, N, I, Slots, Self, Done, Acc) ->
    receive
        {logged_in, Pid} ->
            (Done + 1) rem 1000 =:= 0 andalso io:format("  ~b~n", [Done + 1]),
            login_all(Port, N, I, Slots + 1, Self, Done + 1, [Pid | Acc]);
        {login_failed, Who, Why} ->
            fail(io_lib:format("login of user~b failed: ~p", [Who, Why]))
    after 60000 ->
            fail("logins stalled")
    end.

client(Parent, Port, I) ->
    User = <<"user", (integer_to_binary(I))/binary>>,
    try
        {ok, S} = gen_tcp:connect({127, 0, 0, 1}, Port, [binary, {active, false}], 30000),
        Header = <<"<?xml version='1.0'?><stream:stream to='localhost' xmlns='jabber:client' "
                   "xmlns:stream='http://etherx.jabber.org/streams' version='1.0'>">>,
        ok = gen_tcp:send(S, Header),
        _ = recv_until(S, <<"</stream:features>">>),
        ok = gen_tcp:send(S, [<<"<auth xmlns='urn:ietf:params:xml:ns:xmpp-sasl' mechanism='PLAIN'>">>,
                              base64:encode(<<0, User/binary, 0, ?PASSWORD/binary>>), <<"</auth>">>]),
        _ = recv_until(S, <<"<success">>),
        ok = gen_tcp:send(S, Header),
        _ = recv_until(S, <<"</stream:features>">>),
        ok = gen_tcp:send(S, <<"<iq type='set' id='b'><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'>"
                               "<resource>bench</resource></bind></iq>">>),
        _ = recv_until(S, <<"</iq>">>),
        ok = gen_tcp:send(S, <<"<presence/>">>),
        Parent ! {logged_in, self()},
        idle(S)
    catch Class:Why ->
            Parent ! {login_failed, I, {Class, Why}}
    end.

recv_until(S, Pattern) ->
    recv_until(S, Pattern, <<>>).

recv_until(S, Pattern, Acc) ->
    case binary:match(Acc, Pattern) of
        {_, _} ->
            Acc;
        nomatch ->
            case binary:match(Acc, [<<"<failure">>, <<"stream:error">>]) of
                {_, _} -> error({refused, Acc});
                nomatch ->
                    {ok, Data} = gen_tcp:recv(S, 0, 30000),
                    recv_until(S, Pattern, <<Acc/binary, Data/binary>>)
            end
    end.

%% Reads (and drops) whatever the server sends, so that it never blocks.
idle(S) ->
    ok = inet:setopts(S, [{active, once}]),
    receive
        {tcp, S, _} -> idle(S);
        {tcp_closed, S} -> ok;
        stop -> gen_tcp:close(S)
    end.

fail(Msg) ->
    io:format(standard_error, "bench_stats_overhead: ~s~n", [Msg]),
    halt(1).
