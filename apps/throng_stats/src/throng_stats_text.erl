%% @doc The terminal table of `bin/throng stats': the figures of the
%% dashboard and a few more, each with its current value and its 1 s, 10 s
%% and 100 s averages; counters are shown as rates per second.
-module(throng_stats_text).

-export([render/1]).

-type format() :: count | rate | pct | bytes | cores | float.

-spec render(map() | undefined) -> iodata().
render(#{series := S, queues := Q, latency := L} = Snap) ->
    [title(Snap), alarm(Q), "\n",
     io_lib:format("~-40s ~10s ~10s ~10s ~10s~n", ["", "now", "1s", "10s", "100s"]),
     [section(Name, Rows, S) || {Name, Rows} <- rows()],
     latency(L), "\n", queues(Q)];
render(_) ->
    "throng_stats: no sample yet (the collector samples once a second)\n".

title(#{node := Node, time_ms := T} = Snap) ->
    {{Y, Mo, D}, {H, Mi, Sec}} = calendar:system_time_to_universal_time(T, millisecond),
    Tick = case throng_stats_series:raw(maps:get(series, Snap), throng_stats_tick_seconds, []) of
               undefined -> "";
               X -> io_lib:format("   collector tick ~.2f ms", [X * 1000])
           end,
    io_lib:format("~s   ~4..0b-~2..0b-~2..0b ~2..0b:~2..0b:~2..0b UTC~s~n",
                  [Node, Y, Mo, D, H, Mi, Sec, Tick]).

alarm(#{alarm := true, over := N, threshold := T}) ->
    io_lib:format("*** ALARM: ~b process(es) with a message queue longer than ~b ***~n", [N, T]);
alarm(_) ->
    "".

rows() ->
    [{"Throng",
      [{"connections", throng_connections, [], count},
       {"sessions (bound)", throng_sessions, [], count},
       {"connects/s", throng_connections_accepted, [], rate},
       {"logins/s", throng_logins, [], rate},
       {"auth failures/s", throng_auth_failures, [], rate},
       {"stanzas in/s message", throng_stanzas_in, [{kind, <<"message">>}], rate},
       {"stanzas in/s presence", throng_stanzas_in, [{kind, <<"presence">>}], rate},
       {"stanzas in/s iq", throng_stanzas_in, [{kind, <<"iq">>}], rate},
       {"stanzas out/s message", throng_stanzas_out, [{kind, <<"message">>}], rate},
       {"stanzas out/s presence", throng_stanzas_out, [{kind, <<"presence">>}], rate},
       {"stanzas out/s iq", throng_stanzas_out, [{kind, <<"iq">>}], rate},
       {"bytes in/s", throng_bytes_received, [], rate},
       {"bytes out/s", throng_bytes_sent, [], rate},
       {"offline stored/s", throng_offline_stored, [], rate},
       {"offline held", throng_offline_messages, [], count},
       {"memory per connection (BEAM)", throng_memory_per_connection_bytes,
        [{kind, <<"beam">>}], bytes}]},
     {"BEAM",
      [{"scheduler utilization %", throng_beam_scheduler_utilization,
        [{type, <<"normal">>}], pct},
       {"dirty CPU utilization %", throng_beam_scheduler_utilization,
        [{type, <<"dirty_cpu">>}], pct},
       {"run queue", throng_beam_run_queue, [{queue, <<"normal">>}], float},
       {"processes", throng_beam_processes, [], count},
       {"ports", throng_beam_ports, [], count},
       {"memory total", throng_beam_memory_bytes, [{kind, <<"total">>}], bytes},
       {"memory processes", throng_beam_memory_bytes, [{kind, <<"processes">>}], bytes},
       {"memory ets", throng_beam_memory_bytes, [{kind, <<"ets">>}], bytes},
       {"memory binary", throng_beam_memory_bytes, [{kind, <<"binary">>}], bytes},
       {"garbage collections/s", throng_beam_gc_runs, [], rate},
       {"words reclaimed/s", throng_beam_gc_words_reclaimed, [], rate},
       {"reductions/s", throng_beam_reductions, [], rate},
       {"distribution nodes", throng_beam_dist_nodes, [], count},
       {"distribution messages/s in", throng_beam_dist_messages, [{direction, <<"in">>}], rate},
       {"distribution messages/s out", throng_beam_dist_messages, [{direction, <<"out">>}], rate}]},
     {"OS",
      [{"node CPU (cores) user", throng_process_cpu_usage, [{mode, <<"user">>}], cores},
       {"node CPU (cores) system", throng_process_cpu_usage, [{mode, <<"system">>}], cores},
       {"host CPU busy %", throng_host_cpu_usage, [{mode, <<"busy">>}], pct},
       {"resident memory", throng_process_resident_memory_bytes, [], bytes},
       {"context switches/s voluntary", throng_process_context_switches,
        [{kind, <<"voluntary">>}], rate},
       {"context switches/s involuntary", throng_process_context_switches,
        [{kind, <<"involuntary">>}], rate},
       {"open descriptors", throng_process_open_fds, [], count},
       {"descriptor limit", throng_process_max_fds, [], count},
       {"listen overflows/s (host)", throng_tcp_listen_overflows, [], rate},
       {"listen drops/s (host)", throng_tcp_listen_drops, [], rate},
       {"TCP sockets in use (host)", throng_tcp_sockets, [{state, <<"inuse">>}], count}]},
     {"Message queues",
      [{"total (watched processes)", throng_message_queue_total, [], count},
       {"longest", throng_message_queue_max, [], count},
       {"processes over the threshold", throng_message_queue_alarm_processes, [], count}]}].

section(Name, Rows, S) ->
    [Name, "\n",
     [row(Label, throng_stats_series:find(S, M, Labels), F) || {Label, M, Labels, F} <- Rows]].

row(_Label, undefined, _F) ->
    [];
row(Label, {_, _, _, Now, Avgs}, F) ->
    {A1, A10, A100} = case Avgs of
                          undefined -> {undefined, undefined, undefined};
                          _ -> Avgs
                      end,
    io_lib:format("  ~-38s ~10s ~10s ~10s ~10s~n",
                  [Label, fmt(Now, F), fmt(A1, F), fmt(A10, F), fmt(A100, F)]).

-spec fmt(number() | undefined, format()) -> iodata().
fmt(undefined, _) -> "-";
fmt(V, pct) -> io_lib:format("~.1f", [V * 100.0]);
fmt(V, cores) -> io_lib:format("~.3f", [V * 1.0]);
fmt(V, float) -> io_lib:format("~.2f", [V * 1.0]);
fmt(V, bytes) -> si(V, ["B", "KB", "MB", "GB", "TB"], 1024);
fmt(V, count) when is_integer(V) -> integer_to_list(V);
fmt(V, count) -> si(V, ["", "k", "M", "G"], 1000);
fmt(V, rate) -> si(V, ["", "k", "M", "G"], 1000).

si(V, [U], _Base) -> io_lib:format("~.1f~s", [V * 1.0, U]);
si(V, [U | _], Base) when abs(V) < Base ->
    case U of
        "" when V == round(V) -> integer_to_list(round(V));
        _ -> io_lib:format("~.1f~s", [V * 1.0, U])
    end;
si(V, [_ | Us], Base) -> si(V / Base, Us, Base).

latency(#{now := Now, avg1 := A1, avg10 := A10, avg100 := A100} = L) ->
    Ms = fun(null) -> "-"; (X) -> io_lib:format("~.3f", [X * 1000]) end,
    ["Routing latency (probes)\n",
     io_lib:format("  ~-38s ~10s ~10s ~10s ~10s~n", ["mean ms", Ms(Now), Ms(A1), Ms(A10), Ms(A100)]),
     io_lib:format("  ~-38s ~10s~n", ["p50 ms (10 s)", Ms(maps:get(p50, L, null))]),
     io_lib:format("  ~-38s ~10s~n", ["p99 ms (10 s)", Ms(maps:get(p99, L, null))])];
latency(_) ->
    [].

queues(#{top := Top, threshold := T, alarm := Alarm}) ->
    [io_lib:format("Longest message queues (alarm above ~b)~s~n",
                   [T, case Alarm of true -> "  ALARM"; false -> "" end]),
     case Top of
         [] -> "  (none)\n";
         _ -> [io_lib:format("  ~-16s ~-40s ~10b~n", [Pid, Name, Len])
               || #{pid := Pid, name := Name, len := Len} <- Top]
     end];
queues(_) ->
    [].
