%% @doc Reading a snapshot's series: one value, the sum over labels, and
%% the point of the dashboard's charts taken from each snapshot.
-module(throng_stats_series).

-export([find/3, raw/3, chart_point/4, chart_keys/0]).

-type series() :: {atom(), [{atom(), binary()}], number(), number() | undefined,
                   {float(), float(), float()} | undefined}.
-export_type([series/0]).

-spec find([series()], atom(), [{atom(), binary()}]) -> series() | undefined.
find(Series, Name, Labels) ->
    case [S || {N, L, _, _, _} = S <- Series, N =:= Name, L =:= Labels] of
        [S | _] -> S;
        [] -> undefined
    end.

%% @doc The current value: a gauge's value or a counter's rate per second.
-spec now([series()], atom(), [{atom(), binary()}]) -> number() | undefined.
now(Series, Name, Labels) ->
    case find(Series, Name, Labels) of
        {_, _, _, Now, _} -> Now;
        undefined -> undefined
    end.

-spec raw([series()], atom(), [{atom(), binary()}]) -> number() | undefined.
raw(Series, Name, Labels) ->
    case find(Series, Name, Labels) of
        {_, _, Raw, _, _} -> Raw;
        undefined -> undefined
    end.

%% @doc The sum of the current values of a metric over all its labels.
-spec sum_now([series()], atom()) -> number() | undefined.
sum_now(Series, Name) ->
    case [Now || {N, _, _, Now, _} <- Series, N =:= Name, is_number(Now)] of
        [] -> undefined;
        L -> lists:sum(L)
    end.

%% @doc The names of a chart point's figures, in order.
-spec chart_keys() -> [atom()].
chart_keys() ->
    [t, sessions, connections, logins, auth_failures, connects, stanzas_in, stanzas_out,
     mem_per_conn, rss_per_conn, sched, sched_dirty, run_queue, cpu, queue_max, queue_over,
     queue_threshold, latency_ms].

%% @doc One point of the charts: the figures the dashboard plots.
-spec chart_point(integer(), [series()], map(), map()) -> #{atom() => number() | null}.
chart_point(T, S, Q, L) ->
    V = fun(undefined) -> null; (X) -> X end,
    #{t => T,
      sessions => V(now(S, throng_sessions, [])),
      connections => V(now(S, throng_connections, [])),
      logins => V(now(S, throng_logins, [])),
      auth_failures => V(now(S, throng_auth_failures, [])),
      connects => V(now(S, throng_connections_accepted, [])),
      stanzas_in => V(sum_now(S, throng_stanzas_in)),
      stanzas_out => V(sum_now(S, throng_stanzas_out)),
      mem_per_conn => V(now(S, throng_memory_per_connection_bytes, [{kind, <<"beam">>}])),
      rss_per_conn => V(now(S, throng_memory_per_connection_bytes, [{kind, <<"rss">>}])),
      sched => V(now(S, throng_beam_scheduler_utilization, [{type, <<"normal">>}])),
      sched_dirty => V(now(S, throng_beam_scheduler_utilization, [{type, <<"dirty_cpu">>}])),
      run_queue => V(now(S, throng_beam_run_queue, [{queue, <<"normal">>}])),
      cpu => V(now(S, throng_process_cpu_usage, [{mode, <<"total">>}])),
      queue_max => maps:get(max, Q, null),
      queue_over => maps:get(over, Q, null),
      queue_threshold => maps:get(threshold, Q, null),
      latency_ms => case maps:get(now, L, null) of
                        null -> null;
                        Sec -> Sec * 1000
                    end}.
