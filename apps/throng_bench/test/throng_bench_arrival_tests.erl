%% Arrival process: the Poisson generator passes a Kolmogorov-Smirnov test
%% against the exponential distribution, and generators that are wrong in the
%% ways that matter fail the same test.
-module(throng_bench_arrival_tests).
-include_lib("eunit/include/eunit.hrl").

-define(N, 5000).
%% KS critical value at significance 0.001 is 1.95/sqrt(n): a correct
%% generator fails it once in a thousand seeds; the seeds are fixed, so the
%% test is deterministic.
-define(KS_CRIT(N), (1.95 / math:sqrt(N))).

phase(Rate, Dist) ->
    #{rate => Rate, duration => infinity, max_users => ?N + 1, dist => Dist}.

gaps(Times) ->
    {_, Gs} = lists:foldl(fun(T, {Prev, Acc}) -> {T, [T - Prev | Acc]} end, {0, []}, Times),
    lists:reverse(Gs).

%% Kolmogorov-Smirnov statistic D of samples against the exponential
%% distribution with the given mean: the largest distance between the
%% empirical and the theoretical CDF.
ks_exponential(Samples, Mean) ->
    Sorted = lists:sort(Samples),
    N = length(Sorted),
    {D, _} = lists:foldl(
               fun(X, {Dmax, I}) ->
                       F = 1 - math:exp(-X / Mean),
                       Dp = I / N - F,
                       Dm = F - (I - 1) / N,
                       {max(Dmax, max(Dp, Dm)), I + 1}
               end, {0.0, 1}, Sorted),
    D.

%% Inter-arrival times of the Poisson phase are exponential with mean 1/rate.
poisson_interarrival_is_exponential_test_() ->
    [{"seed " ++ integer_to_list(Seed),
      fun() ->
              Times = throng_bench_arrival:schedule([phase(200, poisson)], Seed),
              Gaps = gaps(Times),
              ?assertEqual(?N + 1, length(Gaps)),
              D = ks_exponential(Gaps, 1.0e6 / 200),
              ?assert(D < ?KS_CRIT(length(Gaps))),
              Mean = lists:sum(Gaps) / length(Gaps),
              %% mean within 5 standard errors (sd of the mean = mean/sqrt(n))
              ?assert(abs(Mean - 5000) < 5 * 5000 / math:sqrt(length(Gaps)))
      end} || Seed <- [1, 2, 3]].

%% The test has power: gaps with the right mean but the wrong shape are
%% rejected (uniform gaps, constant gaps, exponential with a wrong mean).
ks_rejects_wrong_distributions_test() ->
    S0 = rand:seed_s(exsss, 42),
    {Uniform, _} = lists:mapfoldl(fun(_, S) ->
                                          {U, S1} = rand:uniform_real_s(S),
                                          {U * 10000, S1}
                                  end, S0, lists:seq(1, ?N)),
    ?assert(ks_exponential(Uniform, 5000) > ?KS_CRIT(?N)),
    Constant = gaps(throng_bench_arrival:schedule([phase(200, constant)], 1)),
    ?assert(ks_exponential(Constant, 5000) > ?KS_CRIT(?N)),
    Fast = gaps(throng_bench_arrival:schedule([phase(260, poisson)], 1)),
    ?assert(ks_exponential(Fast, 5000) > ?KS_CRIT(?N)).

%% Counts of arrivals per second of a Poisson process have variance equal to
%% their mean (index of dispersion 1); evenly spaced arrivals have none.
dispersion_test() ->
    P = #{rate => 50, duration => 400000, max_users => infinity, dist => poisson},
    Counts = per_second(throng_bench_arrival:schedule([P], 7), 400),
    Mean = lists:sum(Counts) / 400,
    Var = lists:sum([(C - Mean) * (C - Mean) || C <- Counts]) / 399,
    %% the ratio has standard deviation sqrt(2/399) = 0.07: [0.75, 1.25] is
    %% +-3.5 sd (probability > 0.999)
    ?assert(Var / Mean > 0.75 andalso Var / Mean < 1.25),
    C = #{rate => 50, duration => 400000, max_users => infinity, dist => constant},
    CCounts = per_second(throng_bench_arrival:schedule([C], 7), 400),
    ?assert(lists:max(CCounts) - lists:min(CCounts) =< 1).

per_second(Times, Secs) ->
    Buckets = lists:foldl(fun(T, Acc) ->
                                  K = T div 1000000,
                                  Acc#{K => maps:get(K, Acc, 0) + 1}
                          end, #{}, Times),
    [maps:get(K, Buckets, 0) || K <- lists:seq(0, Secs - 1)].

constant_arrivals_are_evenly_spaced_test() ->
    Times = throng_bench_arrival:schedule(
              [#{rate => 4, duration => infinity, max_users => 5, dist => constant}], x),
    ?assertEqual([250000, 500000, 750000, 1000000, 1250000], Times).

%% A phase ends at its duration or its cap, whichever first; the next phase
%% takes over from there.
phases_follow_each_other_test() ->
    Ph = [#{rate => 10, duration => 1000, max_users => infinity, dist => constant},
          #{rate => 100, duration => 1000, max_users => 20, dist => constant},
          #{rate => 1, duration => 3000, max_users => infinity, dist => constant}],
    Times = throng_bench_arrival:schedule(Ph, 1),
    {First, Rest} = lists:split(9, Times),
    ?assertEqual([T * 100000 || T <- lists:seq(1, 9)], First),
    {Second, Third} = lists:split(20, Rest),
    ?assertEqual([1000000 + T * 10000 || T <- lists:seq(1, 20)], Second),
    %% the third phase starts at the 20th arrival of the second (1.2 s)
    ?assertEqual([2200000, 3200000], Third),
    %% total_users/1 is the expected count (rate x duration, capped): the
    %% evenly spaced phases here launch one user fewer at each boundary
    ?assertEqual(10 + 20 + 3, throng_bench_arrival:total_users(Ph)),
    ?assertEqual(1000 + 200 + 3000, throng_bench_arrival:arrival_time_ms(Ph)).

%% Splitting among workers keeps the total rate and the total cap.
split_preserves_totals_test() ->
    Ph = [#{rate => 500, duration => infinity, max_users => 15001, dist => poisson}],
    Shares = [throng_bench_arrival:split(Ph, {K, 4}) || K <- lists:seq(0, 3)],
    ?assertEqual(15001, lists:sum([M || [#{max_users := M}] <- Shares])),
    ?assert(abs(lists:sum([R || [#{rate := R}] <- Shares]) - 500) < 1.0e-9),
    Merged = lists:sort(lists:append([throng_bench_arrival:schedule(S, K)
                                      || {K, S} <- lists:enumerate(Shares)])),
    ?assertEqual(15001, length(Merged)),
    D = ks_exponential(gaps(Merged), 1.0e6 / 500),
    ?assert(D < ?KS_CRIT(15001)).

unbounded_total_is_infinity_test() ->
    ?assertEqual(infinity, throng_bench_arrival:total_users(
                             [#{rate => 1, duration => infinity, max_users => infinity,
                                dist => poisson}])).
