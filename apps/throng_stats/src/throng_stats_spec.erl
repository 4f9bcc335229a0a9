%% @doc Every metric the collector exports, declared once: its name, type,
%% unit and one-line help. The Prometheus page (HELP and TYPE lines), the
%% JSON document, the terminal table and the dashboard all read this table;
%% docs/operations.md explains each entry at length.
%%
%% The server's own counters are declared where they are counted, in
%% throng_metrics, and come here through {@link throng_info:metrics/0}: each
%% is exported as throng_NAME with the kind, unit and help declared there.
%% The table below declares the rest: the OS, the VM, the figures read from
%% the server's tables, the message queues and the collector itself.
%%
%% Names follow the Prometheus conventions: base units (seconds, bytes), and
%% counters are declared without the `_total' suffix that
%% {@link throng_stats_prom} appends.
-module(throng_stats_spec).

-export([all/0, lookup/1, server_metric/1, latency_buckets/0]).

-type type() :: counter | gauge | histogram.
-type metric() :: #{name := atom(), type := type(), unit := binary(), help := binary()}.
-export_type([type/0, metric/0]).

-define(M(Name, Type, Unit, Help), {Name, Type, <<Unit>>, <<Help>>}).

-spec all() -> [metric()].
all() ->
    [#{name => N, type => T, unit => U, help => H} || {N, T, U, H} <- table() ++ server()].

%% @doc The declaration of a metric. A name declared nowhere (a programming
%% error: every server counter is declared in throng_metrics) is still
%% exported, as a counter with a generic help line, rather than breaking
%% the page.
-spec lookup(atom()) -> metric().
lookup(Name) ->
    case lists:keyfind(Name, 1, table()) of
        {N, T, U, H} -> #{name => N, type => T, unit => U, help => H};
        false ->
            case lists:keyfind(Name, 1, server()) of
                {N, T, U, H} -> #{name => N, type => T, unit => U, help => H};
                false -> #{name => Name, type => counter, unit => <<"events">>,
                           help => <<"Undeclared metric.">>}
            end
    end.

%% @doc The exported name of a server metric: throng_ and its name.
-spec server_metric(atom()) -> atom().
server_metric(Name) ->
    binary_to_atom(<<"throng_", (atom_to_binary(Name))/binary>>).

%% @doc The buckets of throng_route_latency_seconds: upper bounds in
%% microseconds, 1-2.5-5 from 50 us to 10 s, then +Inf.
-spec latency_buckets() -> [pos_integer() | infinity].
latency_buckets() ->
    [50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000,
     250000, 500000, 1000000, 2500000, 5000000, 10000000, infinity].

server() ->
    [{server_metric(N), K, U, H} || #{name := N, kind := K, unit := U, help := H} <- throng_info:metrics()].

table() ->
    [%% OS (/proc)
     ?M(throng_process_cpu_seconds, counter, "seconds",
        "CPU time used by the node's OS process, by mode (user, system); /proc/self/stat."),
     ?M(throng_process_cpu_usage, gauge, "cores",
        "CPU used by the node, in cores (1 = one core busy), by mode and total."),
     ?M(throng_host_cpu_seconds, counter, "seconds",
        "CPU time of the whole host (all CPUs), by mode; /proc/stat."),
     ?M(throng_host_cpu_usage, gauge, "ratio",
        "Share of the host's CPU capacity busy (0..1), by mode and busy = all but idle and iowait."),
     ?M(throng_host_cpus, gauge, "cpus", "CPUs of the host the node may run on."),
     ?M(throng_host_context_switches, counter, "switches",
        "Context switches of the whole host; /proc/stat ctxt."),
     ?M(throng_host_procs_running, gauge, "tasks", "Runnable tasks on the host; /proc/stat."),
     ?M(throng_process_resident_memory_bytes, gauge, "bytes",
        "Resident set size of the node's OS process; /proc/self/status VmRSS."),
     ?M(throng_process_virtual_memory_bytes, gauge, "bytes",
        "Virtual memory size of the node's OS process; /proc/self/stat."),
     ?M(throng_process_threads, gauge, "threads", "OS threads of the node."),
     ?M(throng_process_context_switches, counter, "switches",
        "Context switches of the node's threads (voluntary: blocked; involuntary: preempted), "
        "summed over /proc/self/task/*/status."),
     ?M(throng_process_open_fds, gauge, "descriptors",
        "File descriptors open in the node (sockets, files, pipes)."),
     ?M(throng_process_max_fds, gauge, "descriptors",
        "Soft limit of open file descriptors; /proc/self/limits."),
     ?M(throng_process_fds_usage, gauge, "ratio", "Open descriptors over their limit (0..1)."),
     ?M(throng_tcp_listen_overflows, counter, "connections",
        "Host-wide: connections dropped because an accept queue was full "
        "(TcpExt ListenOverflows)."),
     ?M(throng_tcp_listen_drops, counter, "connections",
        "Host-wide: SYNs or connections dropped at a listening socket, for any reason "
        "(TcpExt ListenDrops)."),
     ?M(throng_tcp_sockets, gauge, "sockets",
        "Host-wide TCP sockets by state (inuse, orphan, time_wait, alloc); /proc/net/sockstat."),
     ?M(throng_tcp_memory_bytes, gauge, "bytes",
        "Host-wide memory held by TCP socket buffers; /proc/net/sockstat mem."),
     %% BEAM
     ?M(throng_beam_scheduler_utilization, gauge, "ratio",
        "Busy share of the BEAM schedulers over the last second (0..1), by type: "
        "normal, dirty_cpu."),
     ?M(throng_beam_scheduler_utilization_by_id, gauge, "ratio",
        "Busy share of each normal scheduler over the last second (0..1)."),
     ?M(throng_beam_run_queue, gauge, "processes",
        "Processes and ports ready to run and waiting for a scheduler, by queue."),
     ?M(throng_beam_processes, gauge, "processes", "Erlang processes alive."),
     ?M(throng_beam_process_limit, gauge, "processes", "Maximum Erlang processes (+P)."),
     ?M(throng_beam_ports, gauge, "ports", "Erlang ports open (sockets, files, ...)."),
     ?M(throng_beam_port_limit, gauge, "ports", "Maximum Erlang ports (+Q)."),
     ?M(throng_beam_atoms, gauge, "atoms", "Atoms in the atom table."),
     ?M(throng_beam_atom_limit, gauge, "atoms", "Size of the atom table (+t)."),
     ?M(throng_beam_ets_tables, gauge, "tables", "ETS tables."),
     ?M(throng_beam_memory_bytes, gauge, "bytes",
        "Memory allocated by the BEAM, by kind (erlang:memory/0)."),
     ?M(throng_beam_gc_runs, counter, "collections", "Garbage collections."),
     ?M(throng_beam_gc_words_reclaimed, counter, "words",
        "Words reclaimed by garbage collections (1 word = 8 bytes)."),
     ?M(throng_beam_reductions, counter, "reductions",
        "Reductions executed (a unit of work of Erlang code)."),
     ?M(throng_beam_io_bytes, counter, "bytes",
        "Bytes through ports (sockets, files), by direction."),
     ?M(throng_beam_uptime_seconds, gauge, "seconds", "Time since the node started."),
     ?M(throng_beam_dist_nodes, gauge, "nodes",
        "Nodes this node has a distribution connection to (cluster members, hidden "
        "nodes such as admin commands)."),
     ?M(throng_beam_dist_messages, counter, "messages",
        "Distribution messages received (direction=in) and sent (out) over TCP "
        "distribution connections, ticks included."),
     ?M(throng_beam_dist_bytes, counter, "bytes",
        "Bytes received and sent over TCP distribution connections."),
     %% Throng: what the server's tables hold, derived figures, the probes
     ?M(throng_listener_connections, gauge, "connections",
        "Client connections open, by listener (its index and port)."),
     ?M(throng_sessions, gauge, "sessions",
        "Authenticated sessions: resources bound in the session table."),
     ?M(throng_offline_messages, gauge, "messages", "Messages held in offline storage now."),
     ?M(throng_memory_per_connection_bytes, gauge, "bytes",
        "Memory per open connection: BEAM memory (kind=beam) or RSS (kind=rss) over connections; "
        "includes the node's fixed overhead."),
     ?M(throng_route_latency_seconds, histogram, "seconds",
        "Time for a probe to pass through a session's message queue and back "
        "(sampled sessions, see docs/operations.md)."),
     ?M(throng_route_probes, counter, "probes", "Latency probes by result (sent, answered, lost)."),
     %% Message queues
     ?M(throng_message_queue_total, gauge, "messages",
        "Messages waiting in the queues of the watched processes (registered, reported "
        "long, or found long by the sweep)."),
     ?M(throng_message_queue_max, gauge, "messages", "Longest message queue seen."),
     ?M(throng_message_queue_watched, gauge, "processes",
        "Processes whose queue is re-checked every second."),
     ?M(throng_message_queue_alarm, gauge, "boolean",
        "1 while some process's queue is longer than the alarm threshold."),
     ?M(throng_message_queue_alarm_processes, gauge, "processes",
        "Processes whose queue is longer than the alarm threshold."),
     ?M(throng_message_queue_alarm_threshold, gauge, "messages", "stats.queue_alarm."),
     ?M(throng_message_queue_alarms, counter, "alarms", "Times the queue alarm was raised."),
     ?M(throng_message_queue_top_length, gauge, "messages",
        "Queue length of the longest queues, by rank and process."),
     ?M(throng_message_queue_swept, counter, "processes",
        "Processes checked by the rolling sweep of every process."),
     ?M(throng_message_queue_sweep_seconds, gauge, "seconds",
        "Time the last complete sweep of every process took."),
     %% The collector itself
     ?M(throng_stats_tick_seconds, gauge, "seconds",
        "Time the collector spent on its last per-second sample."),
     ?M(throng_stats_ticks, counter, "ticks", "Samples taken by the collector.")].
