%% Histogram: bucket arithmetic, precision, percentiles, merge, concurrency.
-module(throng_hist_tests).
-include_lib("eunit/include/eunit.hrl").

%% Every value falls in a bucket whose bounds contain it, and bucket indices
%% are monotonic in the value.
bucket_bounds_contain_value_test() ->
    Values = lists:seq(0, 5000) ++ [1 bsl K + D || K <- lists:seq(12, 35), D <- [-1, 0, 1, 12345]],
    lists:foldl(fun(V, PrevIx) ->
                        I = throng_hist:index(V),
                        {Lo, Hi} = throng_hist:bounds(I),
                        ?assert(Lo =< V andalso V =< Hi),
                        ?assert(I >= PrevIx),
                        I
                end, 0, lists:sort(Values)).

%% Buckets tile the range without gaps or overlaps.
buckets_are_contiguous_test() ->
    N = throng_hist:nbuckets(),
    lists:foreach(fun(I) ->
                          {_, Hi} = throng_hist:bounds(I),
                          {Lo2, _} = throng_hist:bounds(I + 1),
                          ?assertEqual(Hi + 1, Lo2)
                  end, lists:seq(0, N - 2)),
    ?assertEqual(N - 1, throng_hist:index((1 bsl 36) - 1)).

%% Two significant digits: the value a bucket stands for is within 1% of any
%% value in it.
relative_error_below_one_percent_test() ->
    lists:foreach(fun(V) ->
                          Rep = throng_hist:value_at(throng_hist:index(V)),
                          ?assert(abs(Rep - V) =< 0.01 * V)
                  end, [trunc(math:pow(1.37, K)) || K <- lists:seq(0, 75)]).

percentiles_of_uniform_values_test() ->
    S = throng_hist:from_list(lists:seq(1, 100000)),
    ?assertEqual(100000, throng_hist:count(S)),
    ?assertEqual(1, throng_hist:min(S)),
    ?assertEqual(100000, throng_hist:max(S)),
    Near = fun(Expected, Got) -> abs(Got - Expected) =< 0.01 * Expected end,
    ?assert(Near(50000, throng_hist:percentile(S, 50))),
    ?assert(Near(90000, throng_hist:percentile(S, 90))),
    ?assert(Near(99000, throng_hist:percentile(S, 99))),
    ?assert(Near(99900, throng_hist:percentile(S, 99.9))),
    ?assertEqual(100000, throng_hist:percentile(S, 100)),
    ?assert(abs(throng_hist:mean(S) - 50000.5) < 0.001).

empty_histogram_test() ->
    S = throng_hist:empty(),
    ?assertEqual(undefined, throng_hist:percentile(S, 99)),
    ?assertEqual(0.0, throng_hist:mean(S)),
    ?assertEqual([], throng_hist:bars(S, 10)).

%% A single outlier shows in max and p100, not in p99.
outlier_test() ->
    S = throng_hist:from_list(lists:duplicate(999, 100) ++ [1000000]),
    ?assertEqual(100, throng_hist:percentile(S, 99)),
    ?assertEqual(1000000, throng_hist:max(S)).

live_histogram_matches_pure_test() ->
    H = throng_hist:new(),
    Values = [V * 7 rem 100003 || V <- lists:seq(1, 20000)],
    [throng_hist:record(H, V) || V <- Values],
    Live = throng_hist:snapshot(H),
    Pure = throng_hist:from_list(Values),
    ?assertEqual(maps:get(buckets, Pure), maps:get(buckets, Live)),
    ?assertEqual(throng_hist:summary(Pure), throng_hist:summary(Live)),
    throng_hist:reset(H),
    ?assertEqual(0, throng_hist:count(throng_hist:snapshot(H))).

%% Many processes recording at once lose nothing.
concurrent_recording_test() ->
    H = throng_hist:new(),
    Self = self(),
    Pids = [spawn(fun() ->
                          [throng_hist:record(H, P * 1000 + I) || I <- lists:seq(1, 5000)],
                          Self ! {done, self()}
                  end) || P <- lists:seq(1, 8)],
    [receive {done, P} -> ok end || P <- Pids],
    S = throng_hist:snapshot(H),
    ?assertEqual(40000, throng_hist:count(S)),
    ?assertEqual(1001, throng_hist:min(S)),
    ?assertEqual(13000, throng_hist:max(S)).

merge_equals_union_test() ->
    A = lists:seq(1, 3000),
    B = [V * 13 || V <- lists:seq(1, 5000)],
    M = throng_hist:merge(throng_hist:from_list(A), throng_hist:from_list(B)),
    ?assertEqual(throng_hist:from_list(A ++ B), M),
    ?assertEqual(M, throng_hist:merge(M, throng_hist:empty())).

subtract_gives_interval_test() ->
    H = throng_hist:new(),
    [throng_hist:record(H, 10) || _ <- lists:seq(1, 100)],
    S1 = throng_hist:snapshot(H),
    [throng_hist:record(H, 5000) || _ <- lists:seq(1, 50)],
    S2 = throng_hist:snapshot(H),
    D = throng_hist:subtract(S2, S1),
    ?assertEqual(50, throng_hist:count(D)),
    ?assert(abs(throng_hist:percentile(D, 50) - 5000) =< 50),
    ?assertEqual(0, throng_hist:count(throng_hist:subtract(S2, S2))).

negative_and_huge_values_are_clamped_test() ->
    S = throng_hist:from_list([-5, 1 bsl 50]),
    ?assertEqual(0, throng_hist:min(S)),
    ?assertEqual((1 bsl 36) - 1, throng_hist:max(S)).

bars_cover_all_counts_test() ->
    S = throng_hist:from_list([V * V || V <- lists:seq(1, 3000)]),
    Bars = throng_hist:bars(S, 10),
    ?assertEqual(3000, lists:sum([N || {_, _, N} <- Bars])),
    %% consecutive bars share their edges
    lists:foldl(fun({Lo, Hi, _}, PrevHi) ->
                        PrevHi =:= none orelse ?assert(abs(Lo - PrevHi) < 1.0e-6 * Lo),
                        Hi
                end, none, Bars).

%% Cumulative counts at fixed bounds (Prometheus buckets): exact where the
%% buckets are one value wide, never decreasing, everything at infinity.
le_counts_test() ->
    S = throng_hist:from_list([10, 50, 51, 100, 250, 251, 20000000]),
    ?assertEqual([2, 4, 5, 7], throng_hist:le_counts(S, [50, 100, 250, infinity])),
    ?assertEqual([0, 0], throng_hist:le_counts(throng_hist:empty(), [50, infinity])),
    ?assertEqual([7], throng_hist:le_counts(S, [infinity])),
    %% Above 255 a bucket straddling a bound counts whole: within 1/128.
    Big = throng_hist:from_list([999, 1000, 1001, 1010, 5000]),
    [AtMost1000, AtMost5000, All] = throng_hist:le_counts(Big, [1000, 5000, infinity]),
    ?assert(AtMost1000 >= 2 andalso AtMost1000 =< 3),
    ?assertEqual({5, 5}, {AtMost5000, All}),
    Counts = throng_hist:le_counts(throng_hist:from_list([V * 37 || V <- lists:seq(1, 3000)]),
                                   [50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000,
                                    50000, 100000, 250000, infinity]),
    ?assertEqual(Counts, lists:sort(Counts)),
    ?assertEqual(3000, lists:last(Counts)).
