%% xmpp command planning: the automatic deadline and the worker plan.
-module(throng_bench_xmpp_tests).
-include_lib("eunit/include/eunit.hrl").

auto_duration_test() ->
    {ok, S} = throng_bench_scenario:load("paper"),
    {ok, S1} = throng_bench_scenario:apply_overrides(S, #{users => 15000, rate => 500}),
    %% 30 s of arrivals + 5 min sessions + 2 s drain + 15 s
    ?assertEqual(30000 + 300000 + 2000 + 15000, throng_bench_xmpp:auto_duration(S1)).

worker_plan_test() ->
    ?assertEqual(#{local => true}, throng_bench_xmpp:plan_workers(#{}, 15000)),
    ?assertEqual(#{peers => 3}, throng_bench_xmpp:plan_workers(#{}, 50000)),
    ?assertEqual(#{peers => 2}, throng_bench_xmpp:plan_workers(#{workers => 2}, 10)),
    ?assertEqual(#{local => true}, throng_bench_xmpp:plan_workers(#{workers => 0}, 50000)),
    ?assertMatch(#{nodes := ['a@h']}, throng_bench_xmpp:plan_workers(#{worker_nodes => ["a@h"]}, 1)).
