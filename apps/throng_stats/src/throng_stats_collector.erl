%% @doc The per-second collector. Each second it samples the OS
%% ({@link throng_stats_os}), the BEAM ({@link throng_stats_beam}), the
%% server ({@link throng_stats_xmpp}), the message queues
%% ({@link throng_stats_queues}) and the latency probes
%% ({@link throng_stats_probe}); turns running totals into per-second rates;
%% keeps the 1 s, 10 s and 100 s decays of every series
%% ({@link throng_stats_decay}); and publishes the result as one snapshot in
%% the ETS table throng_stats, where the HTTP endpoint and the admin command
%% read it without asking this process anything.
%%
%% Ticks are at fixed points of monotonic time (no drift); a tick that
%% comes late uses the time that really passed for its rates and decays.
-module(throng_stats_collector).
-behaviour(gen_server).

-export([start_link/0, measure/1]).
-export([init/1, handle_call/3, handle_cast/2, handle_info/2, terminate/2]).
%% Called by supervisors (child specs) and proc_lib.
-ignore_xref([{start_link, 0}]).
%% Called through rpc by bench/bench_stats_overhead.escript.
-ignore_xref([{measure, 1}]).

-define(TAB, throng_stats).
-define(HISTORY, 300).            %% points kept for the dashboard's charts
-define(LATENCY_WINDOW, 10).      %% seconds of probes behind the quantiles

-type key() :: {atom(), [{atom(), binary()}]}.
%% Raw value; "now" (the rate over the last tick for a counter, the value
%% for a gauge; undefined for a counter's first tick); the decays.
-type entry() :: {number(), number() | undefined, throng_stats_decay:decay() | undefined}.

-record(c, {interval :: pos_integer(),
            next :: integer(),                   %% monotonic ms of the next tick
            last :: integer(),                   %% monotonic us of the last tick
            types :: #{atom() => throng_stats_spec:type()},
            os :: throng_stats_os:state(),
            beam :: throng_stats_beam:state(),
            queues :: throng_stats_queues:state(),
            series = #{} :: #{key() => entry()},
            ticks = 0 :: non_neg_integer(),
            tick_s = 0.0 :: float(),
            lat_prev :: throng_hist:snapshot() | undefined,   %% the histogram at the last tick
            lat_window = [] :: [throng_hist:snapshot()],      %% the probes of each recent tick
            lat_decay :: throng_stats_decay:decay() | undefined}).

-spec start_link() -> {ok, pid()} | {error, term()}.
start_link() ->
    gen_server:start_link({local, ?MODULE}, ?MODULE, [], []).

%% @doc Benchmark support: takes N samples back to back in the collector,
%% exactly as the per-second ones are taken (then drops their effect on the
%% rates, decays and history), and returns the wall time and the node's CPU
%% time (user + system of the whole OS process, dirty I/O threads included,
%% from /proc/self/stat, counted in clock ticks: 10 ms at the usual USER_HZ
%% of 100) they took. CPU time spent by the rest of the node meanwhile is
%% counted too: measure an idle node.
-spec measure(pos_integer()) -> #{ticks := pos_integer(), wall_us := integer(),
                                  cpu_us := integer() | undefined}.
measure(N) when is_integer(N), N > 0 ->
    gen_server:call(?MODULE, {measure, N}, infinity).

-spec init([]) -> {ok, #c{}}.
init([]) ->
    Interval = application:get_env(throng_stats, interval_ms, 1000),
    Now = erlang:monotonic_time(millisecond),
    C = #c{interval = Interval, next = Now + Interval,
           last = erlang:monotonic_time(microsecond),
           types = maps:from_list([{N, T} || #{name := N, type := T} <- throng_stats_spec:all()]),
           os = throng_stats_os:init(), beam = throng_stats_beam:init(),
           queues = throng_stats_queues:init()},
    _ = erlang:start_timer(C#c.next, self(), tick, [{abs, true}]),
    {ok, C}.

-spec handle_call(term(), gen_server:from(), #c{}) -> {reply, term(), #c{}}.
handle_call({measure, N}, _From, #c{ticks = Ticks} = C) ->
    Snap = ets:lookup(?TAB, snapshot),
    Cpu0 = cpu_us(),
    W0 = erlang:monotonic_time(microsecond),
    _ = lists:foldl(fun(_, Acc) -> tick(Acc) end, C, lists:seq(1, N)),
    W1 = erlang:monotonic_time(microsecond),
    Cpu1 = cpu_us(),
    %% Leave no trace: the measured samples' snapshot and history points go.
    true = ets:insert(?TAB, Snap),
    [true = ets:delete(?TAB, {history, Seq}) || Seq <- lists:seq(Ticks + 1, Ticks + N)],
    Cpu = case {Cpu0, Cpu1} of
              {A, B} when is_integer(A), is_integer(B) -> B - A;
              _ -> undefined
          end,
    {reply, #{ticks => N, wall_us => W1 - W0, cpu_us => Cpu}, C};
handle_call(_Req, _From, C) ->
    {reply, ok, C}.

-spec handle_cast(term(), #c{}) -> {noreply, #c{}}.
handle_cast(_Msg, C) ->
    {noreply, C}.

-spec handle_info(term(), #c{}) -> {noreply, #c{}} | {noreply, #c{}, hibernate}.
handle_info({timeout, _, tick}, #c{interval = I, next = Next0} = C0) ->
    C = tick(C0),
    Now = erlang:monotonic_time(millisecond),
    %% Skip the ticks that were missed rather than firing them all at once.
    Next = Next0 + I * max(1, (Now - Next0) div I + 1),
    _ = erlang:start_timer(Next, self(), tick, [{abs, true}]),
    %% Sleep between ticks with the heap cut to the live state: a tick's
    %% garbage (the sweep's process list, the samples) would otherwise
    %% keep the heap at its high-water mark, a few hundred KB on a node
    %% with a few thousand sessions. One full collection per second.
    {noreply, C#c{next = Next}, hibernate};
handle_info(_Msg, C) ->
    {noreply, C}.

-spec terminate(term(), #c{}) -> ok.
terminate(_Reason, #c{os = Os}) ->
    throng_stats_os:close(Os).

%%% One tick

tick(#c{last = Last, os = Os0, beam = Beam0, queues = Q0, ticks = Ticks} = C0) ->
    T0 = erlang:monotonic_time(microsecond),
    Dt = max(1, T0 - Last) / 1000000,
    {OsS, Os} = throng_stats_os:sample(Os0),
    {BeamS, Beam} = throng_stats_beam:sample(Beam0),
    XmppS = throng_stats_xmpp:sample(),
    {QS, QReport, Q} = throng_stats_queues:tick(Q0),
    {LatS, Latency, C1} = latency(Dt, C0),
    Self = [{throng_stats_tick_seconds, [], C0#c.tick_s}, {throng_stats_ticks, [], Ticks + 1}],
    Old = C1#c.series,
    Series0 = update(lists:append([OsS, BeamS, XmppS, QS, LatS, Self]), #{}, Old, Dt, C1#c.types),
    Series = update(derive(Series0), Series0, Old, Dt, C1#c.types),
    Snapshot = #{time_ms => erlang:system_time(millisecond), node => node(),
                 interval_s => Dt, series => to_list(Series), queues => QReport,
                 latency => Latency},
    publish(Snapshot, Ticks + 1),
    T1 = erlang:monotonic_time(microsecond),
    C1#c{last = T0, os = Os, beam = Beam, queues = Q, series = Series, ticks = Ticks + 1,
         tick_s = (T1 - T0) / 1000000}.

%% Running totals become rates; every series gets its decays. Series not
%% sampled this time (a listener gone, ...) are dropped.
update(Samples, Acc0, Old, Dt, Types) ->
    lists:foldl(
      fun({Name, Labels, V}, Acc) ->
              Key = {Name, Labels},
              Prev = maps:get(Key, Old, undefined),
              Acc#{Key => entry(maps:get(Name, Types, counter), V, Prev, Dt)}
      end, Acc0, Samples).

entry(counter, V, {Raw, _, Decay}, Dt) ->
    Rate = max(0, V - Raw) / Dt,
    {V, Rate, decay(Decay, Rate, Dt)};
entry(counter, V, undefined, _Dt) ->
    {V, undefined, undefined};
entry(_Gauge, V, {_, _, Decay}, Dt) ->
    {V, V, decay(Decay, V, Dt)};
entry(_Gauge, V, undefined, _Dt) ->
    {V, V, throng_stats_decay:new(V)}.

decay(undefined, V, _Dt) -> throng_stats_decay:new(V);
decay(D, V, Dt) -> throng_stats_decay:update(D, V, Dt).

%% Figures computed from other series: CPU in cores and shares, memory per
%% connection.
derive(S) ->
    Now = fun(K) -> case maps:get(K, S, undefined) of
                        {_, N, _} when is_number(N) -> N;
                        _ -> undefined
                    end
          end,
    Raw = fun(K) -> case maps:get(K, S, undefined) of
                        {R, _, _} -> R;
                        undefined -> undefined
                    end
          end,
    User = Now({throng_process_cpu_seconds, [{mode, <<"user">>}]}),
    Sys = Now({throng_process_cpu_seconds, [{mode, <<"system">>}]}),
    Proc = case {User, Sys} of
               {U, Y} when is_number(U), is_number(Y) ->
                   [{throng_process_cpu_usage, [{mode, <<"user">>}], U},
                    {throng_process_cpu_usage, [{mode, <<"system">>}], Y},
                    {throng_process_cpu_usage, [{mode, <<"total">>}], U + Y}];
               _ -> []
           end,
    Modes = [{M, N} || {{throng_host_cpu_seconds, [{mode, M}]}, {_, N, _}} <- maps:to_list(S),
                       is_number(N)],
    Host = case lists:sum([N || {_, N} <- Modes]) of
               Total when Total > 0 ->
                   Idle = lists:sum([N || {M, N} <- Modes, M =:= <<"idle">> orelse M =:= <<"iowait">>]),
                   [{throng_host_cpu_usage, [{mode, M}], N / Total}
                    || {M, N} <- Modes, M =/= <<"idle">>] ++
                       [{throng_host_cpu_usage, [{mode, <<"busy">>}], 1 - Idle / Total}];
               _ -> []
           end,
    Conns = Raw({throng_connections, []}),
    PerConn = case is_integer(Conns) andalso Conns > 0 of
                  true ->
                      [{throng_memory_per_connection_bytes, [{kind, <<"beam">>}], B / Conns}
                       || B <- [Raw({throng_beam_memory_bytes, [{kind, <<"total">>}]})],
                          is_number(B)] ++
                          [{throng_memory_per_connection_bytes, [{kind, <<"rss">>}], R / Conns}
                           || R <- [Raw({throng_process_resident_memory_bytes, []})], is_number(R)];
                  false -> []
              end,
    Proc ++ Host ++ PerConn.

%% The latency probes: counts as counters; the mean of the last tick's
%% probes with its decays; quantiles over the last 10 seconds. The window
%% keeps each tick's probes (a few buckets each), not whole histograms.
latency(Dt, #c{lat_prev = Prev, lat_window = Window, lat_decay = Decay} = C) ->
    case throng_stats_probe:read() of
        undefined ->
            {[], #{}, C};
        {Hist, Counts} ->
            Samples = [{throng_route_probes, [{result, atom_to_binary(K)}], V}
                       || {K, V} <- lists:sort(maps:to_list(Counts))],
            {Tick, Recent} = case Prev of
                                 undefined -> {Hist, throng_hist:empty()};
                                 _ -> T = throng_hist:subtract(Hist, Prev), {T, T}
                             end,
            {Mean, Decay1} = case throng_hist:count(Tick) of
                                 0 -> {null, Decay};
                                 _ ->
                                     M = throng_hist:mean(Tick) / 1000000,
                                     {M, decay(Decay, M, Dt)}
                             end,
            Window1 = lists:sublist([Recent | Window], ?LATENCY_WINDOW),
            Span = lists:foldl(fun throng_hist:merge/2, throng_hist:empty(), Window1),
            Q = fun(P) -> case throng_hist:percentile(Span, P) of
                              undefined -> null;
                              Us -> Us / 1000000
                          end
                end,
            {A1, A10, A100} = case Decay1 of
                                  undefined -> {null, null, null};
                                  _ -> throng_stats_decay:averages(Decay1)
                              end,
            Report = #{now => Mean, avg1 => A1, avg10 => A10, avg100 => A100,
                       p50 => Q(50), p90 => Q(90), p99 => Q(99),
                       window_count => throng_hist:count(Span), histogram => Hist},
            {Samples, Report, C#c{lat_prev = Hist, lat_window = Window1, lat_decay = Decay1}}
    end.

%% The node's CPU time (user + system), microseconds.
cpu_us() ->
    case throng_proc_sample:sample(self) of
        undefined -> undefined;
        S -> round(throng_proc_sample:cpu_seconds(S) * 1000000)
    end.

to_list(Series) ->
    [{Name, Labels, Raw, Now, case D of
                                  undefined -> undefined;
                                  _ -> throng_stats_decay:averages(D)
                              end}
     || {{Name, Labels}, {Raw, Now, D}} <- lists:sort(maps:to_list(Series))].

%% The snapshot, and one point of the dashboard's history.
publish(#{time_ms := T, series := Series, queues := Q, latency := L} = Snap, Seq) ->
    Point = throng_stats_series:chart_point(T, Series, Q, L),
    true = ets:insert(?TAB, [{snapshot, Snap}, {{history, Seq}, Point}]),
    true = ets:delete(?TAB, {history, Seq - ?HISTORY}),
    ok.
