%% @doc The BEAM part of the per-second sample: scheduler utilization, run
%% queues, process/port/atom/ETS counts against their limits, memory by
%% kind, garbage collection, reductions, port I/O and, in a cluster, the
%% traffic of the distribution connections.
%%
%% Scheduler utilization needs erlang:statistics(scheduler_wall_time), which
%% is only kept while the scheduler_wall_time flag is on: {@link init/0}
%% turns it on for as long as the calling process (the collector) lives.
%% Utilization is the growth of active time over the growth of total time
%% between two samples, for each scheduler.
%%
%% Distribution traffic is read from each connection's socket statistics
%% (`inet:getstat/2' on the controlling port of a TCP distribution
%% connection; one packet is one distribution message, ticks included).
%% Those counts start again with each connection, so the totals published
%% here are kept by this module: a connection's growth since the last sample
%% is added, and a connection seen for the first time adds what it counts.
%% Connections controlled by a process (TLS distribution) are not counted.
-module(throng_stats_beam).

-export([init/0, sample/1]).

-type dist_counts() :: {MsgsIn :: non_neg_integer(), MsgsOut :: non_neg_integer(),
                        BytesIn :: non_neg_integer(), BytesOut :: non_neg_integer()}.
-record(beam, {wall :: [{pos_integer(), non_neg_integer(), non_neg_integer()}] | undefined,
               links = #{} :: #{{node(), port()} => dist_counts()},
               dist = {0, 0, 0, 0} :: dist_counts()}).
-opaque state() :: #beam{}.
-export_type([state/0]).

-spec init() -> state().
init() ->
    _ = erlang:system_flag(scheduler_wall_time, true),
    {Links, Dist} = dist_counts(#{}, {0, 0, 0, 0}),
    #beam{wall = wall_time(), links = Links, dist = Dist}.

wall_time() ->
    case erlang:statistics(scheduler_wall_time) of
        undefined -> undefined;
        L -> lists:sort(L)
    end.

-spec sample(state()) -> {[throng_stats_os:sample()], state()}.
sample(#beam{wall = Prev, links = Links0, dist = Dist0}) ->
    Wall = wall_time(),
    {Links, Dist} = dist_counts(Links0, Dist0),
    {sched(Prev, Wall) ++ run_queues() ++ counts() ++ memory() ++ work() ++ dist(Dist),
     #beam{wall = Wall, links = Links, dist = Dist}}.

sched(undefined, _) -> [];
sched(_, undefined) -> [];
sched(Prev, Now) ->
    Normal = erlang:system_info(schedulers),
    Deltas = [{Id, A1 - A0, T1 - T0}
              || {{Id, A0, T0}, {Id, A1, T1}} <- lists:zip(Prev, Now)],
    {N, D} = lists:partition(fun({Id, _, _}) -> Id =< Normal end, Deltas),
    [{throng_beam_scheduler_utilization, [{type, <<"normal">>}], util(N)}] ++
        [{throng_beam_scheduler_utilization, [{type, <<"dirty_cpu">>}], util(D)} || D =/= []] ++
        [{throng_beam_scheduler_utilization_by_id, [{id, integer_to_binary(Id)}], util([X])}
         || {Id, _, _} = X <- N].

util(Deltas) ->
    Active = lists:sum([A || {_, A, _} <- Deltas]),
    Total = lists:sum([T || {_, _, T} <- Deltas]),
    case Total > 0 of
        true -> Active / Total;
        false -> 0.0
    end.

run_queues() ->
    Normal = erlang:system_info(schedulers),
    All = erlang:statistics(run_queue_lengths_all),
    {N, Dirty} = lists:split(min(Normal, length(All)), All),
    [{throng_beam_run_queue, [{queue, <<"normal">>}], lists:sum(N)}] ++
        case Dirty of
            [Cpu, Io | _] -> [{throng_beam_run_queue, [{queue, <<"dirty_cpu">>}], Cpu},
                              {throng_beam_run_queue, [{queue, <<"dirty_io">>}], Io}];
            _ -> []
        end.

counts() ->
    [{throng_beam_processes, [], erlang:system_info(process_count)},
     {throng_beam_process_limit, [], erlang:system_info(process_limit)},
     {throng_beam_ports, [], erlang:system_info(port_count)},
     {throng_beam_port_limit, [], erlang:system_info(port_limit)},
     {throng_beam_atoms, [], erlang:system_info(atom_count)},
     {throng_beam_atom_limit, [], erlang:system_info(atom_limit)},
     {throng_beam_ets_tables, [], erlang:system_info(ets_count)}].

memory() ->
    [{throng_beam_memory_bytes, [{kind, atom_to_binary(K)}], V} || {K, V} <- erlang:memory()].

work() ->
    {GCs, Words, _} = erlang:statistics(garbage_collection),
    {Reds, _} = erlang:statistics(reductions),
    {{input, In}, {output, Out}} = erlang:statistics(io),
    {Uptime, _} = erlang:statistics(wall_clock),
    [{throng_beam_gc_runs, [], GCs},
     {throng_beam_gc_words_reclaimed, [], Words},
     {throng_beam_reductions, [], Reds},
     {throng_beam_io_bytes, [{direction, <<"in">>}], In},
     {throng_beam_io_bytes, [{direction, <<"out">>}], Out},
     {throng_beam_uptime_seconds, [], Uptime div 1000}].

dist({MsgsIn, MsgsOut, BytesIn, BytesOut}) ->
    [{throng_beam_dist_nodes, [], length(erlang:nodes(connected))},
     {throng_beam_dist_messages, [{direction, <<"in">>}], MsgsIn},
     {throng_beam_dist_messages, [{direction, <<"out">>}], MsgsOut},
     {throng_beam_dist_bytes, [{direction, <<"in">>}], BytesIn},
     {throng_beam_dist_bytes, [{direction, <<"out">>}], BytesOut}].

%% The connections' counts now, and the totals grown by what each counted
%% since the last sample.
dist_counts(Links0, Total0) ->
    lists:foldl(
      fun({Node, Port}, {Links, Total}) when is_port(Port) ->
              case inet:getstat(Port, [recv_cnt, send_cnt, recv_oct, send_oct]) of
                  {ok, [{recv_cnt, MI}, {send_cnt, MO}, {recv_oct, BI}, {send_oct, BO}]} ->
                      Now = {MI, MO, BI, BO},
                      Was = maps:get({Node, Port}, Links0, {0, 0, 0, 0}),
                      {Links#{{Node, Port} => Now}, add(Total, grown(Was, Now))};
                  _ ->
                      {Links, Total}
              end;
         (_, Acc) ->
              Acc
      end, {#{}, Total0}, erlang:system_info(dist_ctrl)).

grown({A0, B0, C0, D0}, {A1, B1, C1, D1}) ->
    {max(0, A1 - A0), max(0, B1 - B0), max(0, C1 - C0), max(0, D1 - D0)}.

add({A0, B0, C0, D0}, {A1, B1, C1, D1}) ->
    {A0 + A1, B0 + B1, C0 + C1, D0 + D1}.
