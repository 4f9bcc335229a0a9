%% Per-VM metrics: per-target counters and how snapshots of several VMs
%% add up.
-module(throng_bench_metrics_tests).
-include_lib("eunit/include/eunit.hrl").

per_target_counters_test() ->
    ok = throng_bench_metrics:init(),
    ?assertEqual([], maps:get(targets, throng_bench_metrics:snapshot())),
    ok = throng_bench_metrics:init_targets(3),
    ok = throng_bench_metrics:target_inc(sessions, 0),
    ok = throng_bench_metrics:target_inc(sessions, 2),
    ok = throng_bench_metrics:target_inc(sessions, 2),
    ok = throng_bench_metrics:target_sub(sessions, 2),
    ok = throng_bench_metrics:target_inc(msgs_received, 1),
    [T0, T1, T2] = maps:get(targets, throng_bench_metrics:snapshot()),
    ?assertMatch(#{sessions := 1, msgs_received := 0}, T0),
    ?assertMatch(#{sessions := 0, msgs_received := 1}, T1),
    ?assertMatch(#{sessions := 1, msgs_received := 0}, T2),
    ?assertEqual(lists:sort(throng_bench_metrics:target_names()), lists:sort(maps:keys(T0))),
    %% a new job starts from zero, with its own number of targets
    ok = throng_bench_metrics:init(),
    ok = throng_bench_metrics:init_targets(2),
    ?assertEqual([0, 0], [S || #{sessions := S} <- maps:get(targets, throng_bench_metrics:snapshot())]),
    ok = throng_bench_metrics:init().

merge_adds_targets_test() ->
    E = throng_bench_metrics:empty_snapshot(),
    Z = maps:from_list([{N, 0} || N <- throng_bench_metrics:target_names()]),
    A = E#{targets => [Z#{sessions => 2}, Z#{sessions => 3}]},
    B = E#{targets => [Z#{sessions => 10}, Z#{sessions => 20, logins => 1}]},
    ?assertMatch([#{sessions := 12}, #{sessions := 23, logins := 1}],
                 maps:get(targets, throng_bench_metrics:merge(A, B))),
    %% a VM that has no targets yet (its job not started) adds nothing
    ?assertEqual(maps:get(targets, A), maps:get(targets, throng_bench_metrics:merge(E, A))),
    ?assertEqual(maps:get(targets, A), maps:get(targets, throng_bench_metrics:merge(A, E))).

%% A connect from a source address the host does not have fails as a
%% connect with no local port does: both are `ports' errors (the study's
%% stop rule of that name counts them), not `other'.
no_local_port_is_a_ports_error_test() ->
    ok = throng_bench_metrics:init(),
    {ok, L} = gen_tcp:listen(0, [{ip, {127, 0, 0, 1}}]),
    {ok, Port} = inet:port(L),
    %% 192.0.2.1 (TEST-NET-1) is nobody's address here: bind fails
    {error, R} = gen_tcp:connect({127, 0, 0, 1}, Port, [{ip, {192, 0, 2, 1}}], 2000),
    gen_tcp:close(L),
    ?assertEqual(eaddrnotavail, R),
    ?assertEqual(ports, throng_bench_metrics:count_error(R)),
    #{counters := #{err_ports := 1, err_other := 0}} = throng_bench_metrics:snapshot(),
    ?assertEqual(ports, throng_bench_metrics:count_error(eaddrinuse)).
