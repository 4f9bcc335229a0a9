%% @doc A fixed-bucket latency histogram kept in a `counters' array, so that
%% the process that measures and the process that reports never exchange a
%% message: the prober adds, the collector reads.
%%
%% Layout of the array: one counter per bucket (counts of observations at or
%% below the bucket's upper bound and above the previous one), then the sum
%% of all observations in microseconds, then their count. Buckets follow the
%% 1-2.5-5 progression from 50 microseconds to 10 seconds, plus +Inf.
-module(throng_stats_hist).

-export([new/0, observe/2, read/1, bounds/0, quantile/2, diff/2]).

-type counts() :: [non_neg_integer()].   %% per bucket, not cumulative
-type reading() :: #{counts := counts(), sum_us := non_neg_integer(),
                     count := non_neg_integer()}.
-export_type([counts/0, reading/0]).

-define(BOUNDS, [50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000,
                 250000, 500000, 1000000, 2500000, 5000000, 10000000, infinity]).

%% @doc Upper bounds of the buckets in microseconds; the last is infinity.
-spec bounds() -> [pos_integer() | infinity].
bounds() ->
    ?BOUNDS.

-spec new() -> counters:counters_ref().
new() ->
    counters:new(length(?BOUNDS) + 2, [write_concurrency]).

%% @doc Records one observation of Us microseconds.
-spec observe(counters:counters_ref(), non_neg_integer()) -> ok.
observe(Ref, Us) ->
    N = length(?BOUNDS),
    counters:add(Ref, index(Us, ?BOUNDS, 1), 1),
    counters:add(Ref, N + 1, Us),
    counters:add(Ref, N + 2, 1).

index(_Us, [infinity], I) -> I;
index(Us, [B | _], I) when Us =< B -> I;
index(Us, [_ | Bs], I) -> index(Us, Bs, I + 1).

-spec read(counters:counters_ref()) -> reading().
read(Ref) ->
    N = length(?BOUNDS),
    #{counts => [counters:get(Ref, I) || I <- lists:seq(1, N)],
      sum_us => counters:get(Ref, N + 1),
      count => counters:get(Ref, N + 2)}.

%% @doc The observations made between two readings.
-spec diff(reading(), reading()) -> reading().
diff(#{counts := C1, sum_us := S1, count := N1}, #{counts := C0, sum_us := S0, count := N0}) ->
    #{counts => [max(0, A - B) || {A, B} <- lists:zip(C1, C0)],
      sum_us => max(0, S1 - S0), count => max(0, N1 - N0)}.

%% @doc Estimates the Q-quantile (0 < Q =< 1) in microseconds from bucket
%% counts, interpolating linearly inside the bucket it falls in (the
%% Prometheus histogram_quantile estimate). undefined without observations;
%% the lower bound of the +Inf bucket when it falls there.
-spec quantile(counts(), float()) -> undefined | float().
quantile(Counts, Q) when Q > 0, Q =< 1 ->
    case lists:sum(Counts) of
        0 -> undefined;
        Total -> walk(Counts, ?BOUNDS, 0, 0, Q * Total)
    end.

walk([C | Cs], [B | Bs], Lower, Seen, Rank) ->
    case Seen + C >= Rank andalso C > 0 of
        true when B =:= infinity -> float(Lower);
        true -> Lower + (B - Lower) * (Rank - Seen) / C;
        false when B =:= infinity -> float(Lower);
        false -> walk(Cs, Bs, B, Seen + C, Rank)
    end.
