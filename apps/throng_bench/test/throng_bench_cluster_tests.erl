%% The cluster section of a summary, from a synthetic time series: per-node
%% and cluster-wide sessions, memory per session, CPU per login, lost
%% messages; the same-node / cross-node split of messages and latencies.
-module(throng_bench_cluster_tests).
-include_lib("eunit/include/eunit.hrl").

zero() -> maps:from_list([{N, 0} || N <- throng_bench_metrics:target_names()]).

%% Two nodes. Node 1's RSS goes 100 -> 90 (low) -> 190 MB-ish units, node
%% 2's 200 -> 250; both on 1 s rows.
rows() ->
    NoErrors = maps:from_list([{T, 0.0} || T <- throng_bench_metrics:error_types()]),
    [R#{errors_by_type_s => NoErrors} || R <- rows0()].

rows0() ->
    [#{t => 1.0, phase => running, sessions => 0, connects_s => 0.0, logins_s => 0.0,
       targets => [#{sessions => 0, logins_s => 0.0}, #{sessions => 0, logins_s => 0.0}],
       server_nodes => [#{rss => 90000, cpu => 1.0}, #{rss => 200000, cpu => 1.0}],
       server_rss_bytes => 290000, server_cpu_pct => 2.0},
     #{t => 2.0, phase => running, sessions => 40, connects_s => 50.0, logins_s => 40.0,
       targets => [#{sessions => 20, logins_s => 20.0}, #{sessions => 20, logins_s => 20.0}],
       server_nodes => [#{rss => 150000, cpu => 50.0}, #{rss => 220000, cpu => 30.0}],
       server_rss_bytes => 370000, server_cpu_pct => 80.0},
     #{t => 3.0, phase => running, sessions => 100, connects_s => 60.0, logins_s => 60.0,
       targets => [#{sessions => 50, logins_s => 30.0}, #{sessions => 50, logins_s => 30.0}],
       server_nodes => [#{rss => 190000, cpu => 50.0}, #{rss => 250000, cpu => 30.0}],
       server_rss_bytes => 440000, server_cpu_pct => 80.0},
     #{t => 4.0, phase => running, sessions => 100, connects_s => 0.0, logins_s => 0.0,
       targets => [#{sessions => 50, logins_s => 0.0}, #{sessions => 50, logins_s => 0.0}],
       server_nodes => [#{rss => 195000, cpu => 5.0}, #{rss => 250000, cpu => 5.0}],
       server_rss_bytes => 445000, server_cpu_pct => 10.0},
     #{t => 5.0, phase => stopping, sessions => 0, connects_s => 0.0, logins_s => 0.0,
       targets => [#{sessions => 0, logins_s => 0.0}, #{sessions => 0, logins_s => 0.0}],
       server_nodes => [#{rss => 120000, cpu => 9.0}, #{rss => 120000, cpu => 9.0}],
       server_rss_bytes => 240000, server_cpu_pct => 18.0}].

last() ->
    E = throng_bench_metrics:empty_snapshot(),
    #{counters := C} = E,
    E#{counters => C#{logins => 100, users_failed => 1, err_timeout => 1, msgs_sent => 30,
                      msgs_received => 27, msgs_sent_cross => 12},
       targets => [(zero())#{launched => 51, logins => 50, failed => 1, msgs_sent_to => 14,
                             msgs_received => 13},
                   (zero())#{launched => 50, logins => 50, msgs_sent_to => 16,
                             msgs_received => 14}]}.

servers0() -> [{11, #{rss => 100000}}, {22, #{rss => 200000}}].

section_test() ->
    #{nodes := [N1, N2], total := T} =
        throng_bench_cluster:section([<<"h:1">>, <<"h:2">>], servers0(), last(), rows()),
    %% the peak row is t=4 (the last with 100 sessions before the stop)
    ?assertMatch(#{node := 1, target := <<"h:1">>, server_pid := 11, sessions_at_peak := 50,
                   sessions_max := 50, logins := 50, failed := 1, messages_lost := 1,
                   rss_start_bytes := 100000, rss_low_before_peak_bytes := 90000,
                   rss_at_peak_bytes := 195000, rss_growth_bytes := 105000,
                   bytes_per_session_at_peak := 2100}, N1),
    ?assertMatch(#{node := 2, server_pid := 22, rss_growth_bytes := 50000,
                   bytes_per_session_at_peak := 1000, messages_lost := 2}, N2),
    %% login window: t=2 and t=3 (first connect .. last login), 1 s each:
    %% node 1 used 0.5 + 0.5 s of CPU for 50 logins
    ?assert(close(20.0, maps:get(cpu_ms_per_login, N1))),
    ?assert(close(12.0, maps:get(cpu_ms_per_login, N2))),
    %% cluster-wide: the sum of the growths over all sessions, the sum of
    %% the CPU over all logins
    ?assertMatch(#{nodes := 2, sessions_at_peak := 100, rss_growth_bytes := 155000,
                   bytes_per_session_at_peak := 1550, logins := 100, errors := 1,
                   messages_lost := 3}, T),
    ?assert(close(16.0, maps:get(cpu_ms_per_login, T))),
    %% logout window: t=5 (after the peak row t=4, the first with no
    %% session), 1 s: each node used 0.09 s of CPU for its 50 sessions
    ?assertMatch(#{logouts := 50}, N1),
    ?assert(close(1.8, maps:get(cpu_ms_per_logout, N1))),
    ?assert(close(1.8, maps:get(cpu_ms_per_logout, N2))),
    ?assertMatch(#{logouts := 100}, T),
    ?assert(close(1.8, maps:get(cpu_ms_per_logout, T))),
    %% hold window: t=4 (after the last login up to the peak), 1 s with 100
    %% sessions (the mean of t=3's 100 and t=4's 100): node 1 spent 0.05 s,
    %% 500 us per session and second; node 2 the same
    ?assertMatch(#{hold_window_s := 1.0}, T),
    ?assert(close(500.0, maps:get(cpu_us_per_session_s, N1))),
    ?assert(close(1000.0, maps:get(cpu_us_per_session_s, T))),
    %% net login CPU: the login window's session-seconds are (0+40)/2 +
    %% (40+100)/2 = 90, so node 1's 1.0 s less 90 x 500 us = 0.955 s for
    %% 50 logins; node 2's 0.6 s less 0.045 s; the cluster's 1.6 - 0.09 s
    %% for 100
    ?assert(close(19.1, maps:get(cpu_ms_per_login_net, N1))),
    ?assert(close(11.1, maps:get(cpu_ms_per_login_net, N2))),
    ?assert(close(15.1, maps:get(cpu_ms_per_login_net, T))),
    %% net logout CPU: t=5 has (100+0)/2 = 50 session-seconds: 0.09 s less
    %% 0.025 s for node 1's 50 logouts
    ?assert(close(1.3, maps:get(cpu_ms_per_logout_net, N1))),
    ?assert(close(1.3, maps:get(cpu_ms_per_logout_net, T))).

%% The hold window: the rows after the login window up to the peak row.
hold_window_test() ->
    Rows = rows(),
    Window = throng_bench_cluster:login_window(Rows),
    Peak = lists:nth(4, Rows),
    ?assertEqual([{Peak, 1.0}], throng_bench_cluster:hold_window(Rows, Window, Peak)),
    ?assertEqual([], throng_bench_cluster:hold_window(Rows, [], Peak)),
    ?assertEqual([], throng_bench_cluster:hold_window(Rows, Window, #{})),
    %% a peak inside the login window (the run cut early): no hold
    ?assertEqual([], throng_bench_cluster:hold_window(Rows, Window, lists:nth(3, Rows))),
    %% 25 s of hold: 5 cut at each end
    Long = lists:sublist(Rows, 3) ++ [Peak#{t => 3.0 + I} || I <- lists:seq(1, 25)],
    Hold = throng_bench_cluster:hold_window(Long, throng_bench_cluster:login_window(Long),
                                            lists:last(Long)),
    ?assertEqual([9.0, 10.0, 23.0], [maps:get(t, R) || {R, _} <- [hd(Hold), lists:nth(2, Hold),
                                                                  lists:last(Hold)]]),
    ?assertEqual(15, length(Hold)).

%% Without a hold window the net figures are undefined, not the gross ones.
no_hold_no_net_test() ->
    Rows = [R || R = #{t := T} <- rows(), T =/= 4.0],
    #{nodes := [N1, _], total := T} =
        throng_bench_cluster:section([<<"h:1">>, <<"h:2">>], servers0(), last(), Rows),
    ?assertMatch(#{cpu_us_per_session_s := undefined, cpu_ms_per_login_net := undefined}, N1),
    ?assertMatch(#{cpu_us_per_session_s := undefined, cpu_ms_per_login_net := undefined,
                   cpu_ms_per_logout_net := undefined}, T).

%% The logout window stops at the first row with no session; a run cut
%% before that ends it at the last row, and counts the sessions lost so far.
logout_window_test() ->
    Rows = rows(),
    Peak = lists:nth(4, Rows),
    ?assertEqual([{lists:nth(5, Rows), 1.0}], throng_bench_cluster:logout_window(Rows, Peak)),
    ?assertEqual([], throng_bench_cluster:logout_window(lists:sublist(Rows, 4), Peak)),
    ?assertEqual([], throng_bench_cluster:logout_window(Rows, #{})),
    Later = [#{t => 6.0, sessions => 0}],
    ?assertEqual([{lists:nth(5, Rows), 1.0}],
                 throng_bench_cluster:logout_window(Rows ++ Later, Peak)).

close(A, B) -> abs(A - B) < 1.0e-9.

one_server_has_no_section_test() ->
    ?assertEqual(undefined, throng_bench_cluster:section([<<"h:1">>], [{1, undefined}], last(),
                                                         rows())).

%% More server pids than targets (one shared port): per-node memory and CPU
%% without per-node sessions.
shared_port_test() ->
    Last = last(),
    OneTarget = Last#{targets => [hd(maps:get(targets, Last))]},
    #{nodes := [N1, N2], total := T} =
        throng_bench_cluster:section([<<"h:1">>], servers0(), OneTarget,
                                     [maps:remove(targets, R) || R <- rows()]),
    ?assertMatch(#{target := <<"h:1">>, rss_growth_bytes := 105000}, N1),
    ?assertMatch(#{target := undefined, rss_growth_bytes := 50000}, N2),
    ?assertNot(maps:is_key(sessions_at_peak, N2)),
    ?assertMatch(#{bytes_per_session_at_peak := 1550}, T).

%% A server that was never sampled: no cluster-wide memory figure rather
%% than a wrong one.
unsampled_server_test() ->
    Rows = [R#{server_nodes => [N1, #{rss => undefined, cpu => undefined}]}
            || R = #{server_nodes := [N1, _]} <- rows()],
    #{nodes := [_, N2], total := T} =
        throng_bench_cluster:section([<<"h:1">>, <<"h:2">>], [{11, #{rss => 100000}}, {22, undefined}],
                                     last(), Rows),
    ?assertMatch(#{rss_growth_bytes := undefined, bytes_per_session_at_peak := undefined}, N2),
    ?assertMatch(#{rss_growth_bytes := undefined, bytes_per_session_at_peak := undefined}, T).

table_and_csv_test() ->
    C = throng_bench_cluster:section([<<"h:1">>, <<"h:2">>], servers0(), last(), rows()),
    Text = iolist_to_binary(throng_bench_cluster:table(C)),
    [_Intro, Head, L1, L2, Total | _] = binary:split(Text, <<"\n">>, [global]),
    ?assertNotEqual(nomatch, binary:match(Head, <<"B/session">>)),
    ?assertMatch([<<"1">>, <<"h:1">>, <<"11">>, <<"50">> | _], binary:split(L1, <<" ">>, [global, trim_all])),
    ?assertMatch([<<"2">>, <<"h:2">>, <<"22">> | _], binary:split(L2, <<" ">>, [global, trim_all])),
    ?assertMatch([<<"cluster">>, <<"2">>, <<"nodes">>, <<"-">>, <<"100">> | _],
                 binary:split(Total, <<" ">>, [global, trim_all])),
    [R | _] = rows(),
    Lines = binary:split(iolist_to_binary(throng_bench_cluster:nodes_csv_lines(lists:nth(2, rows()))),
                         <<"\n">>, [global, trim]),
    ?assertEqual([<<"2.0,1,20,20.0,150000,50.0">>, <<"2.0,2,20,20.0,220000,30.0">>], Lines),
    ?assertEqual(length(throng_bench_cluster:nodes_csv_columns()),
                 length(binary:split(hd(Lines), <<",">>, [global]))),
    ?assertEqual([], throng_bench_cluster:nodes_csv_lines(maps:without([targets, server_nodes], R))).

%% The xmpp summary of a two-target run: messages and delivery latency
%% split into same-node and cross-node pairs, the cluster section, the
%% report's per-node table and charts.
summary_split_test() ->
    Last0 = last(),
    #{hists := H} = Last0,
    Last = Last0#{hists => H#{delivery => throng_hist:from_list(lists:seq(1000, 27000, 1000)),
                              delivery_same => throng_hist:from_list(lists:seq(1000, 16000, 1000)),
                              delivery_cross => throng_hist:from_list(lists:seq(20000, 30000, 1000))}},
    S = throng_bench_xmpp:summary(Last, rows(),
                                  #{command => xmpp, status => complete, error => null,
                                    settings => #{planned_users => 101,
                                                  targets => [<<"h:1">>, <<"h:2">>]},
                                    server_pids => [11, 22],
                                    servers0 => [#{rss => 100000}, #{rss => 200000}]}),
    #{messages := M, latency_ms := L, cluster := #{total := T}} = S,
    ?assertMatch(#{sent := 30, received := 27, lost := 3,
                   same_node := #{sent := 18, received := 16, lost := 2},
                   cross_node := #{sent := 12, received := 11, lost := 1}}, M),
    ?assertMatch(#{delivery_same := #{count := 16}, delivery_cross := #{count := 11}}, L),
    #{delivery_same := #{mean := SameMean, p50 := SameP50, p99 := SameP99},
      delivery_cross := #{mean := CrossMean}} = L,
    ?assert(SameP50 =< SameP99),
    ?assert(SameMean < CrossMean),
    ?assertMatch(#{bytes_per_session_at_peak := 1550}, T),
    %% the summary's own server figures add up the nodes
    ?assertMatch(#{sampled := true}, maps:get(server, S)),
    ?assert(close(16.0, maps:get(cpu_ms_per_login, maps:get(server, S)))),
    Html = iolist_to_binary(throng_bench_report:run_html(S, rows(), Last)),
    [?assertNotEqual(nomatch, binary:match(Html, X))
     || X <- [<<"Per node and cluster-wide">>, <<"Sessions per node (target)">>,
              <<"Server RSS per node">>, <<"Server CPU per node">>,
              <<"cross-node delivery mean / p50 / p99 (ms)">>, <<"delivery_cross latency histogram">>,
              <<"cluster.nodes.2.rss_growth_bytes">>]],
    Json = jiffy:decode(throng_bench_out:encode_json(S), [return_maps]),
    ?assertMatch(#{<<"cluster">> := #{<<"nodes">> := [#{<<"node">> := 1}, #{<<"node">> := 2}]}},
                 Json).

%% One target: no split, no cluster section (the summary of a single-node
%% run is what it was).
summary_one_target_test() ->
    S = throng_bench_xmpp:summary(last(), rows(),
                                  #{command => xmpp, status => complete, error => null,
                                    settings => #{planned_users => 101, targets => [<<"h:1">>]}}),
    ?assertNot(maps:is_key(cluster, S)),
    ?assertNot(maps:is_key(same_node, maps:get(messages, S))).
