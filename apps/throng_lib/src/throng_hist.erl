%% @doc HDR-style latency histogram: the one histogram of throng-bench (every
%% timed transaction) and throng_stats (the routing-latency probes).
%%
%% Values are non-negative integers (both record microseconds).
%% Buckets are log-linear: values below 128 have a bucket each; above that,
%% every power of two [2^k, 2^(k+1)) is split into 128 equal sub-buckets, so a
%% bucket is never wider than 1/128 (0.8 %) of its lower bound: two
%% significant digits from 1 us up to 2^36 us (19 hours; larger values land
%% in the last bucket).
%%
%% A live histogram is a `counters' array (write_concurrency: each scheduler
%% adds to its own copy, no lock, no message) plus an `atomics' array for the
%% exact min and max. Recording is a handful of BIF calls from any process.
%% A {@link snapshot()} is a plain term (sparse bucket map) that can be sent
%% between VMs, merged, subtracted (for per-interval views), queried for
%% percentiles, and counted against fixed bounds for Prometheus
%% ({@link le_counts/2}).
-module(throng_hist).

-export([new/0, record/2, reset/1, snapshot/1,
         empty/0, from_list/1, merge/2, subtract/2,
         count/1, sum/1, mean/1, max/1, min/1, percentile/2, summary/1,
         le_counts/2, index/1, bounds/1, value_at/1, bars/2, nbuckets/0]).
%% API used by tests: a snapshot from values, its exact extremes, and the bucket
%% layout the precision tests check.
-ignore_xref([{from_list, 1}, {max, 1}, {min, 1}, {index, 1}, {bounds, 1}, {value_at, 1},
              {nbuckets, 0}]).

-export_type([hist/0, snapshot/0]).

-define(SUB, 128).
-define(SUB_BITS, 7).
-define(MAX_VALUE, ((1 bsl 36) - 1)).
-define(NB, ((36 - ?SUB_BITS) * ?SUB + ?SUB)).   % index(MAX_VALUE) + 1
-define(SUM_IX, (?NB + 1)).
-define(MIN_IX, 1).
-define(MAX_IX, 2).
-define(NO_MIN, ((1 bsl 64) - 1)).

-record(hist, {c :: counters:counters_ref(), a :: atomics:atomics_ref()}).
-opaque hist() :: #hist{}.

-type snapshot() :: #{buckets := #{non_neg_integer() => pos_integer()},
                      count := non_neg_integer(),
                      sum := non_neg_integer(),
                      min := non_neg_integer() | undefined,
                      max := non_neg_integer() | undefined}.

%% @doc A new, empty live histogram.
-spec new() -> hist().
new() ->
    A = atomics:new(2, [{signed, false}]),
    atomics:put(A, ?MIN_IX, ?NO_MIN),
    #hist{c = counters:new(?NB + 1, [write_concurrency]), a = A}.

%% @doc Record one value (negative values count as 0).
-spec record(hist(), integer()) -> ok.
record(#hist{c = C, a = A}, V0) ->
    V = clamp(V0),
    counters:add(C, index(V) + 1, 1),
    counters:add(C, ?SUM_IX, V),
    update_max(A, V, atomics:get(A, ?MAX_IX)),
    update_min(A, V, atomics:get(A, ?MIN_IX)).

update_max(A, V, Old) when V > Old ->
    case atomics:compare_exchange(A, ?MAX_IX, Old, V) of
        ok -> ok;
        Now -> update_max(A, V, Now)
    end;
update_max(_, _, _) -> ok.

update_min(A, V, Old) when V < Old ->
    case atomics:compare_exchange(A, ?MIN_IX, Old, V) of
        ok -> ok;
        Now -> update_min(A, V, Now)
    end;
update_min(_, _, _) -> ok.

%% @doc Zero a live histogram.
-spec reset(hist()) -> ok.
reset(#hist{c = C, a = A}) ->
    lists:foreach(fun(I) -> counters:put(C, I, 0) end, lists:seq(1, ?NB + 1)),
    atomics:put(A, ?MAX_IX, 0),
    atomics:put(A, ?MIN_IX, ?NO_MIN).

%% @doc A consistent-enough copy of a live histogram (recording may go on).
-spec snapshot(hist()) -> snapshot().
snapshot(#hist{c = C, a = A}) ->
    %% Only the buckets from the smallest to the largest value recorded can
    %% hold anything: of the ~3,800 buckets, the values of one histogram
    %% usually span a few hundred, and each read costs ~0.1 us. (A value
    %% being recorded meanwhile outside that span shows in the next snapshot.)
    Min = atomics:get(A, ?MIN_IX),
    Max = atomics:get(A, ?MAX_IX),
    Buckets = case Min of
                  ?NO_MIN -> #{};
                  _ -> maps:from_list(collect(C, index(Max) + 1, index(Min) + 1, []))
              end,
    Count = maps:fold(fun(_, N, Acc) -> N + Acc end, 0, Buckets),
    #{buckets => Buckets,
      count => Count,
      sum => counters:get(C, ?SUM_IX),
      min => case Count of 0 -> undefined; _ -> Min end,
      max => case Count of 0 -> undefined; _ -> Max end}.

%% The counts of buckets I down to Lo (counter indices, 1-based), as
%% {Bucket, Count} (one maps:from_list: cheaper than growing a map).
collect(_C, I, Lo, Acc) when I < Lo -> Acc;
collect(C, I, Lo, Acc) ->
    case counters:get(C, I) of
        0 -> collect(C, I - 1, Lo, Acc);
        N -> collect(C, I - 1, Lo, [{I - 1, N} | Acc])
    end.

%% @doc The empty snapshot.
-spec empty() -> snapshot().
empty() ->
    #{buckets => #{}, count => 0, sum => 0, min => undefined, max => undefined}.

%% @doc A snapshot holding the given values (for tests and small data sets).
-spec from_list([integer()]) -> snapshot().
from_list(Values) ->
    lists:foldl(fun(V0, #{buckets := B, count := N, sum := S, min := Mn, max := Mx}) ->
                        V = clamp(V0),
                        I = index(V),
                        #{buckets => B#{I => maps:get(I, B, 0) + 1}, count => N + 1,
                          sum => S + V, min => min_of(Mn, V), max => max_of(Mx, V)}
                end, empty(), Values).

%% @doc Sum of two snapshots (e.g. the same histogram on two worker VMs).
-spec merge(snapshot(), snapshot()) -> snapshot().
merge(#{buckets := B1, count := N1, sum := S1, min := Mn1, max := Mx1},
      #{buckets := B2, count := N2, sum := S2, min := Mn2, max := Mx2}) ->
    B = maps:fold(fun(I, N, Acc) -> Acc#{I => maps:get(I, Acc, 0) + N} end, B1, B2),
    #{buckets => B, count => N1 + N2, sum => S1 + S2,
      min => min_of(Mn1, Mn2), max => max_of(Mx1, Mx2)}.

%% @doc What `New' recorded since `Old' (both snapshots of one histogram).
%% Min and max of the interval are bucket bounds, not exact values.
-spec subtract(snapshot(), snapshot()) -> snapshot().
subtract(#{buckets := B2, sum := S2}, #{buckets := B1, sum := S1}) ->
    B = maps:fold(fun(I, N, Acc) ->
                          case N - maps:get(I, B1, 0) of
                              D when D > 0 -> Acc#{I => D};
                              _ -> Acc
                          end
                  end, #{}, B2),
    Count = maps:fold(fun(_, N, Acc) -> N + Acc end, 0, B),
    case Count of
        0 -> empty();
        _ ->
            Keys = maps:keys(B),
            {Lo, _} = bounds(lists:min(Keys)),
            {_, Hi} = bounds(lists:max(Keys)),
            #{buckets => B, count => Count, sum => max(0, S2 - S1), min => Lo, max => Hi}
    end.

-spec count(snapshot()) -> non_neg_integer().
count(#{count := N}) -> N.

-spec sum(snapshot()) -> non_neg_integer().
sum(#{sum := S}) -> S.

%% @doc Arithmetic mean, 0.0 when empty.
-spec mean(snapshot()) -> float().
mean(#{count := 0}) -> 0.0;
mean(#{count := N, sum := S}) -> S / N.

-spec max(snapshot()) -> non_neg_integer() | undefined.
max(#{max := M}) -> M.

-spec min(snapshot()) -> non_neg_integer() | undefined.
min(#{min := M}) -> M.

%% @doc The value below which P percent of the recorded values fall (to the
%% bucket's precision; 100 gives the exact max). `undefined' when empty.
-spec percentile(snapshot(), number()) -> non_neg_integer() | undefined.
percentile(#{count := 0}, _P) -> undefined;
percentile(#{max := Max}, P) when P >= 100 -> Max;
percentile(#{buckets := B, count := N, min := Min, max := Max}, P) ->
    Rank = max(1, ceil(P * N / 100)),
    walk(lists:sort(maps:to_list(B)), Rank, Min, Max).

walk([{_I, C} | Rest], Rank, Min, Max) when C < Rank, Rest =/= [] ->
    walk(Rest, Rank - C, Min, Max);
walk([{I, _} | _], _Rank, Min, Max) ->
    clamp_to(value_at(I), Min, Max).

clamp_to(V, Min, _) when is_integer(Min), V < Min -> Min;
clamp_to(V, _, Max) when is_integer(Max), V > Max -> Max;
clamp_to(V, _, _) -> V.

%% @doc count, mean, min, p50, p90, p99, p99.9 and max of a snapshot.
-spec summary(snapshot()) -> #{atom() => number() | undefined}.
summary(S) ->
    #{count => count(S), mean => mean(S), min => min(S), max => max(S),
      p50 => percentile(S, 50), p90 => percentile(S, 90), p99 => percentile(S, 99),
      p999 => percentile(S, 99.9)}.

%% @doc Cumulative counts at ascending upper bounds (the `le' buckets of a
%% Prometheus histogram; `infinity' counts everything): for each bound, the
%% values at or below it. Exact up to 255; above, a bucket that holds the
%% bound counts whole, so values up to 1/128 above a bound may count as
%% below it.
-spec le_counts(snapshot(), [non_neg_integer() | infinity]) -> [non_neg_integer()].
le_counts(#{buckets := B, count := N}, Bounds) ->
    Sorted = lists:sort(maps:to_list(B)),
    le_counts(Sorted, Bounds, 0, N).

le_counts(_Buckets, [], _Acc, _N) ->
    [];
le_counts(_Buckets, [infinity | Rest], _Acc, N) ->
    [N | le_counts([], Rest, N, N)];
le_counts([{I, C} | More] = Buckets, [Bound | Rest] = Bounds, Acc, N) ->
    case element(1, bounds(I)) =< Bound of
        true -> le_counts(More, Bounds, Acc + C, N);
        false -> [Acc | le_counts(Buckets, Rest, Acc, N)]
    end;
le_counts([], [_Bound | Rest], Acc, N) ->
    [Acc | le_counts([], Rest, Acc, N)].

%% @doc Bucket index of a value (0-based).
-spec index(non_neg_integer()) -> non_neg_integer().
index(V) when V < ?SUB -> V;
index(V) ->
    S = bit_length(V) - (?SUB_BITS + 1),
    S * ?SUB + (V bsr S).

%% @doc Lowest and highest value that fall in bucket I.
-spec bounds(non_neg_integer()) -> {non_neg_integer(), non_neg_integer()}.
bounds(I) when I < ?SUB -> {I, I};
bounds(I) ->
    S = I div ?SUB - 1,
    Sub = I - S * ?SUB,
    {Sub bsl S, ((Sub + 1) bsl S) - 1}.

%% @doc The value a bucket stands for: the middle of its range.
-spec value_at(non_neg_integer()) -> non_neg_integer().
value_at(I) ->
    {Lo, Hi} = bounds(I),
    (Lo + Hi) div 2.

%% @doc Number of buckets of a live histogram.
-spec nbuckets() -> pos_integer().
nbuckets() -> ?NB.

%% @doc The snapshot re-binned for plotting: PerDecade logarithmic bins per
%% power of ten, as [{Low, High, Count}] covering min..max, zero bins included.
-spec bars(snapshot(), pos_integer()) -> [{number(), number(), non_neg_integer()}].
bars(#{count := 0}, _PerDecade) -> [];
bars(#{buckets := B}, PerDecade) ->
    Bin = fun(I) ->
                  V = max(1, value_at(I)),
                  floor(math:log10(V) * PerDecade + 1.0e-9)
          end,
    Binned = maps:fold(fun(I, N, Acc) ->
                               K = Bin(I),
                               Acc#{K => maps:get(K, Acc, 0) + N}
                       end, #{}, B),
    Keys = maps:keys(Binned),
    [{math:pow(10, K / PerDecade), math:pow(10, (K + 1) / PerDecade), maps:get(K, Binned, 0)}
     || K <- lists:seq(lists:min(Keys), lists:max(Keys))].

%% internal

clamp(V) when V < 0 -> 0;
clamp(V) when V > ?MAX_VALUE -> ?MAX_VALUE;
clamp(V) -> V.

bit_length(V) when V >= 1 bsl 32 -> 32 + bit_length(V bsr 32);
bit_length(V) when V >= 1 bsl 16 -> 16 + bit_length(V bsr 16);
bit_length(V) when V >= 1 bsl 8 -> 8 + bit_length(V bsr 8);
bit_length(V) when V >= 1 bsl 4 -> 4 + bit_length(V bsr 4);
bit_length(V) when V >= 1 bsl 2 -> 2 + bit_length(V bsr 2);
bit_length(V) when V >= 2 -> 2;
bit_length(1) -> 1;
bit_length(0) -> 0.

min_of(undefined, B) -> B;
min_of(A, undefined) -> A;
min_of(A, B) -> erlang:min(A, B).

max_of(undefined, B) -> B;
max_of(A, undefined) -> A;
max_of(A, B) -> erlang:max(A, B).
