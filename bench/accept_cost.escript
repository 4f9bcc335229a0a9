#!/usr/bin/env escript
%%! -noshell
%% What accepting a TCP connection costs the accepting VM: gen_tcp:accept/1
%% against Throng's throng_accept:accept/1 (the same accept
%% without gen_tcp's copying of the listen socket's options, 40 system
%% calls), on a listen socket with Throng's listener options. ROUNDS rounds
%% alternate the two; each accepts N connections already waiting in the
%% backlog (made beforehand, not measured) and reports the wall time and
%% the VM's CPU time per accept.
%%
%%   make release   (or rebar3 compile)
%%   bench/accept_cost.escript [N] [ROUNDS]       (default 3000 connections, 5 rounds)
main(Args) ->
    {N, Rounds} = case Args of
                      [] -> {3000, 5};
                      [A] -> {list_to_integer(A), 5};
                      [A, B | _] -> {list_to_integer(A), list_to_integer(B)}
                  end,
    Root = filename:dirname(filename:dirname(filename:absname(escript:script_name()))),
    [code:add_patha(D) || D <- filelib:wildcard(filename:join(Root, "_build/default/lib/throng_lib/ebin"))],
    {module, _} = code:ensure_loaded(throng_accept),
    io:format("~b connections per run, ~b rounds; per accept: wall / VM CPU~n", [N, Rounds]),
    Results = [begin
                   G = run(N, fun gen_tcp:accept/1),
                   T = run(N, fun throng_accept:accept/1),
                   io:format("round ~b: gen_tcp:accept ~.1f / ~.1f us   throng_accept ~.1f / ~.1f us~n",
                             [R, element(1, G), element(2, G), element(1, T), element(2, T)]),
                   {G, T}
               end || R <- lists:seq(1, Rounds)],
    Med = fun(L) -> lists:nth((length(L) + 1) div 2, lists:sort(L)) end,
    GW = Med([W || {{W, _}, _} <- Results]), GC = Med([C || {{_, C}, _} <- Results]),
    TW = Med([W || {_, {W, _}} <- Results]), TC = Med([C || {_, {_, C}} <- Results]),
    io:format("median: gen_tcp:accept ~.1f / ~.1f us, throng_accept ~.1f / ~.1f us (CPU ratio ~.2f)~n",
              [GW, GC, TW, TC, TC / GC]).

run(N, Accept) ->
    {ok, L} = gen_tcp:listen(0, [binary, {packet, raw}, {active, false}, {reuseaddr, true},
                                 {ip, {127, 0, 0, 1}}, {backlog, N}, {nodelay, true},
                                 {keepalive, true}, {buffer, 4096}, {send_timeout, 15000},
                                 {send_timeout_close, true}]),
    {ok, Port} = inet:port(L),
    Cs = [begin
              {ok, C} = gen_tcp:connect({127, 0, 0, 1}, Port, [binary, {active, false}]),
              C
          end || _ <- lists:seq(1, N)],
    timer:sleep(200),
    Cpu0 = cpu_ns(),
    T0 = erlang:monotonic_time(microsecond),
    Ss = [begin {ok, S} = Accept(L), S end || _ <- lists:seq(1, N)],
    T1 = erlang:monotonic_time(microsecond),
    Cpu1 = cpu_ns(),
    [gen_tcp:close(X) || X <- Ss ++ Cs],
    gen_tcp:close(L),
    timer:sleep(200),
    {(T1 - T0) / N, (Cpu1 - Cpu0) / 1000 / N}.

%% CPU time of every thread of this VM (user and system), in nanoseconds:
%% the first field of each thread's /proc schedstat.
cpu_ns() ->
    {ok, Tasks} = file:list_dir("/proc/self/task"),
    lists:sum([begin
                   {ok, B} = file:read_file(filename:join(["/proc/self/task", T, "schedstat"])),
                   [Ns | _] = binary:split(B, <<" ">>),
                   binary_to_integer(Ns)
               end || T <- Tasks]).
