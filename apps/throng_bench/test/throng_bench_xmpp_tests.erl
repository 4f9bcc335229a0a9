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

%% --targets and --host/--port together are a mistake; --targets replaces
%% the scenario's server, --host/--port replace the scenario's targets.
targets_test() ->
    ?assertMatch({error, <<"give either --targets or --host/--port, not both">>},
                 throng_bench_xmpp:prepare(#{targets => [[{<<"127.0.0.1">>, 1}]], port => 5})),
    {ok, S, H} = throng_bench_xmpp:prepare(#{targets => [[{<<"127.0.0.1">>, 15301},
                                                           {<<"127.0.0.1">>, 15302}],
                                                          [{<<"127.0.0.1">>, 15303}]],
                                             users => 100, seed => 1}),
    ?assertEqual([{<<"127.0.0.1">>, 15301}, {<<"127.0.0.1">>, 15302}, {<<"127.0.0.1">>, 15303}],
                 throng_bench_scenario:targets(S)),
    ?assertEqual([<<"127.0.0.1:15301">>, <<"127.0.0.1:15302">>, <<"127.0.0.1:15303">>],
                 maps:get(targets, maps:get(settings, H))),
    {ok, S1, _} = throng_bench_xmpp:prepare(#{port => 15222, users => 100}),
    ?assertEqual([{<<"127.0.0.1">>, 15222}], throng_bench_scenario:targets(S1)).

%% 500,000 users on 27 loopback targets: every worker VM stays below the
%% open-file limit and no source address carries more than 30,000 users,
%% whatever the number of targets.
cluster_scale_plan_test() ->
    Total = 500000,
    Targets = [{<<"127.0.0.1">>, 15300 + I} || I <- lists:seq(1, 27)],
    #{peers := Vms} = Plan = throng_bench_xmpp:plan_workers(#{users_per_vm => 18000}, Total),
    ?assertEqual(ok, throng_bench_xmpp:check_fds(Plan, Total, 20000)),
    ?assert(ceil(Total / Vms) =< 19000),
    Srcs = throng_bench_xmpp:source_ips(#{}, Targets, Total),
    ?assertEqual(17, length(Srcs)),
    ?assert(lists:all(fun({127, 0, 0, _}) -> true; (_) -> false end, Srcs)),
    %% users per (source address, target): user N binds to source N mod A
    %% and connects to target N mod K
    PerSource = lists:foldl(fun(N, Acc) -> maps:update_with(N rem length(Srcs),
                                                            fun(C) -> C + 1 end, 1, Acc) end,
                            #{}, lists:seq(1, Total)),
    ?assert(lists:max(maps:values(PerSource)) =< 30000),
    ?assertEqual(length(Srcs), map_size(PerSource)),
    %% a remote target: the kernel picks the source address
    ?assertEqual([any], throng_bench_xmpp:source_ips(#{}, [{<<"10.1.2.3">>, 5222}], Total)),
    ?assertEqual([{10, 0, 0, 1}], throng_bench_xmpp:source_ips(#{source_ips => [{10, 0, 0, 1}]},
                                                               Targets, Total)).

open_file_limit_test() ->
    %% too many users for one VM, or per VM
    {error, Msg} = throng_bench_xmpp:check_fds(#{local => true}, 25000, 20000),
    ?assertNotEqual(nomatch, binary:match(Msg, <<"25000 users in 1 VM(s) is 25000 sockets per VM">>)),
    ?assertNotEqual(nomatch, binary:match(Msg, <<"--users-per-vm 19000 or less, or --workers 2">>)),
    ?assertMatch({error, _}, throng_bench_xmpp:check_fds(#{peers => 2}, 40000, 20000)),
    ?assertEqual(ok, throng_bench_xmpp:check_fds(#{peers => 3}, 40000, 20000)),
    ?assertEqual(ok, throng_bench_xmpp:check_fds(#{local => true}, 25000, infinity)),
    ?assertEqual(ok, throng_bench_xmpp:check_fds(#{nodes => [a@h]}, 90000, 20000)),
    %% /proc/PID/limits
    Limits = <<"Limit                     Soft Limit           Hard Limit           Units     \n"
               "Max processes             95219                95219                processes \n"
               "Max open files            20000                40000                files     \n">>,
    ?assertEqual(20000, throng_bench_xmpp:fd_limit(Limits)),
    ?assertEqual(infinity, throng_bench_xmpp:fd_limit(
                             <<"Max open files            unlimited            unlimited            files\n">>)),
    ?assertEqual(infinity, throng_bench_xmpp:fd_limit(<<"nothing here\n">>)).
