%% @doc The JSON documents of the HTTP endpoint, built from a snapshot:
%% /stats (every series with its current value and averages, the queue
%% report, the latency) and /history (the dashboard's chart points, in
%% columns).
-module(throng_stats_view).

-export([stats/1, history/1]).

%% @doc The /stats document. Each metric, by its Prometheus name without
%% `_total', lists its series: labels, value (a gauge's level or a counter's
%% running total), now (the level, or the counter's rate per second over
%% the last tick) and avg1/avg10/avg100 (decays of "now"). `chart' is the
%% latest point of the dashboard's charts (see /history).
-spec stats(map()) -> throng_stats_json:json().
stats(#{time_ms := T, node := Node, interval_s := Dt, series := Series, queues := Q,
        latency := L}) ->
    Metrics = lists:foldl(
                fun({Name, Labels, Raw, Now, Avgs}, Acc) ->
                        Doc = maps:get(Name, Acc, metric_doc(Name)),
                        S = series_doc(Labels, Raw, Now, Avgs),
                        Acc#{Name => Doc#{series => maps:get(series, Doc) ++ [S]}}
                end, #{}, Series),
    #{time_ms => T, node => Node, interval_s => Dt, metrics => Metrics,
      queues => Q, latency => latency_doc(L),
      chart => throng_stats_series:chart_point(T, Series, Q, L)};
stats(_) ->
    #{}.

metric_doc(Name) ->
    #{type := Type, unit := Unit, help := Help} = throng_stats_spec:lookup(Name),
    #{type => Type, unit => Unit, help => Help, series => []}.

series_doc(Labels, Raw, Now, Avgs) ->
    {A1, A10, A100} = case Avgs of
                          undefined -> {null, null, null};
                          _ -> Avgs
                      end,
    #{labels => maps:from_list(Labels), value => Raw, now => null_if_undefined(Now),
      avg1 => A1, avg10 => A10, avg100 => A100}.

latency_doc(L) ->
    case maps:take(histogram, L) of
        {Hist, Rest} ->
            Bounds = throng_stats_spec:latency_buckets(),
            Cumulative = throng_hist:le_counts(Hist, Bounds),
            Counts = lists:zipwith(fun(C, Below) -> C - Below end,
                                   Cumulative, [0 | lists:droplast(Cumulative)]),
            Rest#{count => throng_hist:count(Hist), sum_s => throng_hist:sum(Hist) / 1000000,
                  buckets => [#{le_s => case B of infinity -> <<"+Inf">>; _ -> B / 1000000 end,
                                count => C}
                              || {B, C} <- lists:zip(Bounds, Counts)]};
        error ->
            L
    end.

null_if_undefined(undefined) -> null;
null_if_undefined(X) -> X.

%% @doc The /history document: one array per figure, oldest first.
-spec history([map()]) -> throng_stats_json:json().
history(Points) ->
    maps:from_list([{K, [maps:get(K, P, null) || P <- Points]}
                    || K <- throng_stats_series:chart_keys()]).
