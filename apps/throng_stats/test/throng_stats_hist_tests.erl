%% @doc The latency histogram: buckets, differences and quantiles.
-module(throng_stats_hist_tests).

-include_lib("eunit/include/eunit.hrl").

observe_test() ->
    H = throng_stats_hist:new(),
    [throng_stats_hist:observe(H, Us) || Us <- [10, 50, 51, 100, 20000000]],
    #{counts := Counts, sum_us := Sum, count := N} = throng_stats_hist:read(H),
    ?assertEqual(5, N),
    ?assertEqual(10 + 50 + 51 + 100 + 20000000, Sum),
    ?assertEqual(2, lists:nth(1, Counts)),          %% =< 50
    ?assertEqual(2, lists:nth(2, Counts)),          %% =< 100
    ?assertEqual(1, lists:last(Counts)),            %% +Inf
    ?assertEqual(length(throng_stats_hist:bounds()), length(Counts)).

diff_test() ->
    H = throng_stats_hist:new(),
    throng_stats_hist:observe(H, 300),
    R0 = throng_stats_hist:read(H),
    throng_stats_hist:observe(H, 300),
    throng_stats_hist:observe(H, 4000),
    D = throng_stats_hist:diff(throng_stats_hist:read(H), R0),
    ?assertEqual(2, maps:get(count, D)),
    ?assertEqual(4300, maps:get(sum_us, D)),
    ?assertEqual(2, lists:sum(maps:get(counts, D))).

quantile_test() ->
    Bounds = throng_stats_hist:bounds(),
    Zero = [0 || _ <- Bounds],
    ?assertEqual(undefined, throng_stats_hist:quantile(Zero, 0.5)),
    %% 100 observations in the (1000, 2500] bucket: the median is interpolated
    %% to its middle, p99 near its top.
    I = index(2500, Bounds),
    Counts = setnth(I, Zero, 100),
    ?assertEqual(1750.0, throng_stats_hist:quantile(Counts, 0.5)),
    ?assertEqual(2485.0, throng_stats_hist:quantile(Counts, 0.99)),
    %% Everything beyond the last bound: the quantile is that bound.
    Inf = setnth(length(Bounds), Zero, 3),
    ?assertEqual(10000000.0, throng_stats_hist:quantile(Inf, 0.99)).

quantile_monotonic_test() ->
    Counts = [3, 0, 5, 7, 1, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
    Qs = [throng_stats_hist:quantile(Counts, Q) || Q <- [0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 1.0]],
    ?assertEqual(Qs, lists:sort(Qs)).

index(B, Bounds) -> length(lists:takewhile(fun(X) -> X =/= B end, Bounds)) + 1.
setnth(I, L, V) -> lists:sublist(L, I - 1) ++ [V] ++ lists:nthtail(I, L).
