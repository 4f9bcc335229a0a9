%% @doc `bin/throng doctor [--target SESSIONS]': inspects the operating
%% system and the node (running or not) and tells, before a launch, which
%% limit stops the node first, and how to lift it.
%%
%% Every check turns a limit into the number of concurrent sessions it
%% allows on this node (its capacity) and a severity: `error' when it caps
%% the target (`--target', or else the listeners' `max_connections' when
%% they are all finite), `warn' when it hurts without capping (the kernel
%% silently shortening the listen backlog, transparent huge pages, strict
%% overcommit), `info' for what only matters elsewhere (a load generator's
%% ephemeral ports) or with no target to compare against, `ok'. The exit
%% status is 1 when some limit caps the target, 0 otherwise.
%%
%% Facts are gathered where the node runs: by the node itself (its own
%% /proc entry, its runtime's limits, its configuration and cluster) when
%% it is up, else by the command's own process from the configuration
%% file, whose limits are the ones a node started from the same shell
%% inherits. {@link findings/2} is pure: facts in, findings out.
-module(throng_doctor).

-export([run/1, offline/1, facts/1, findings/2, report/3, parse_args/1]).
%% run/1 is called in the node through throng_ctl; offline/1 by
%% throng_ctl_cli when the node is down. The rest is what the tests drive
%% (throng_doctor_tests, doctor_SUITE).
-ignore_xref([{run, 1}, {offline, 1}, {facts, 1}, {findings, 2}, {report, 3}, {parse_args, 1}]).

-type severity() :: ok | info | warn | error.
-type finding() :: #{check := string(), value := string(), severity := severity(),
                     capacity => non_neg_integer() | unlimited, fix := string()}.
-type facts() :: #{atom() => term()}.
-export_type([finding/0, facts/0]).

%% Descriptors, processes and ports a node needs besides its sessions
%% (Mnesia's files, logs, the distribution, listeners, system processes).
-define(FD_RESERVE, 200).
-define(PROC_RESERVE, 2000).
%% Measured server memory per idle session (docs/benchmarks.md): plain
%% TCP with every module, and TLS.
-define(SESSION_BYTES, 5200).
-define(TLS_SESSION_BYTES, 8000).
%% What a session costs more on a listener with inet_backend: socket (its
%% socket's process and the socket NIF's state: 6.7 and 11.0 KB more in
%% two pairs of runs, docs/benchmarks.md; the larger).
-define(SOCKET_EXTRA_BYTES, 11000).
%% Kernel memory a TCP socket needs at least (its minimum receive and send
%% buffers under memory pressure: tcp_rmem[0] + tcp_wmem[0]).
-define(DIST_BUF_ADVISED_KB, 32768).

%% @doc The doctor on the running node: `{ExitCode, Text}'.
-spec run([string()]) -> {0 | 1 | 2, iodata()}.
run(Args) ->
    case parse_args(Args) of
        {ok, Target} -> report(facts(node), Target, "the running node " ++ atom_to_list(node()));
        {error, Text} -> {2, Text}
    end.

%% @doc The doctor with the node down: the configuration file
%% (THRONG_CONFIG) and this process's limits.
-spec offline([string()]) -> {0 | 1 | 2, iodata()}.
offline(Args) ->
    case parse_args(Args) of
        {error, Text} -> {2, Text};
        {ok, Target} ->
            case throng_config:load() of
                ok ->
                    report(facts(offline), Target,
                           lists:flatten(io_lib:format(
                                           "the configuration ~ts (node not running: the "
                                           "release's vm.args and this shell's limits)",
                                           [throng_config:source()])));
                {error, Msg} ->
                    {2, io_lib:format("throng doctor: configuration error: ~ts~n", [Msg])}
            end
    end.

%% @doc `--target N' (a positive integer) or nothing.
-spec parse_args([string()]) -> {ok, pos_integer() | undefined} | {error, string()}.
parse_args([]) ->
    {ok, undefined};
parse_args(["--target", N]) ->
    try list_to_integer(N) of
        T when T > 0 -> {ok, T};
        _ -> {error, "throng doctor: --target: expected a positive integer\n"}
    catch error:badarg -> {error, "throng doctor: --target: expected a positive integer\n"}
    end;
parse_args(_) ->
    {error, "usage: throng doctor [--target SESSIONS]\n"}.

%%% Facts

%% @doc What the checks look at: the OS (/proc, /sys) and the node: its
%% own limits when it runs (`node'), the defaults of a new runtime and the
%% configuration when it does not (`offline').
-spec facts(node | offline) -> facts().
facts(Mode) ->
    {Soft, Hard} = fd_limits(),
    Listeners = [maps:with([port, backlog, max_connections, starttls, direct_tls, inet_backend], L)
                 || L <- throng_config:get([listen])],
    Os = #{mode => Mode, fd_soft => Soft, fd_hard => Hard,
           somaxconn => int_file("/proc/sys/net/core/somaxconn"),
           syn_backlog => int_file("/proc/sys/net/ipv4/tcp_max_syn_backlog"),
           port_range => ints_file("/proc/sys/net/ipv4/ip_local_port_range"),
           tcp_mem => ints_file("/proc/sys/net/ipv4/tcp_mem"),
           tcp_rmem => ints_file("/proc/sys/net/ipv4/tcp_rmem"),
           tcp_wmem => ints_file("/proc/sys/net/ipv4/tcp_wmem"),
           tw_reuse => int_file("/proc/sys/net/ipv4/tcp_tw_reuse"),
           conntrack_max => int_file("/proc/sys/net/netfilter/nf_conntrack_max"),
           conntrack_count => int_file("/proc/sys/net/netfilter/nf_conntrack_count"),
           overcommit => int_file("/proc/sys/vm/overcommit_memory"),
           thp => thp(),
           mem_available => meminfo("MemAvailable"),
           page_size => 4096,
           listeners => Listeners},
    Node = case Mode of
               node ->
                   #{process_limit => erlang:system_info(process_limit),
                     process_count => erlang:system_info(process_count),
                     port_limit => erlang:system_info(port_limit),
                     port_count => erlang:system_info(port_count),
                     beam_memory => erlang:memory(total),
                     bind_type => erlang:system_info(scheduler_bind_type),
                     schedulers => erlang:system_info(schedulers_online),
                     dist_buf_kb => erlang:system_info(dist_buf_busy_limit) div 1024,
                     members => length(nodes())};
               offline ->
                   %% What the release's vm.args (THRONG_VM_ARGS, set by
                   %% bin/throng) gives a new node, over the runtime's
                   %% defaults.
                   Flags = vm_args(os:getenv("THRONG_VM_ARGS")),
                   #{process_limit => maps:get("+P", Flags, 1048576),
                     port_limit => maps:get("+Q", Flags, 65536), process_count => 0,
                     port_count => 0, beam_memory => 0,
                     bind_type => case maps:get("+sbt", Flags, "u") of
                                      "u" -> unbound;
                                      T -> list_to_atom(T)
                                  end,
                     schedulers => erlang:system_info(logical_processors_available),
                     dist_buf_kb => maps:get("+zdbbl", Flags, 1024), members => 0}
           end,
    maps:merge(Os, Node).

%% The numeric and binding flags of a vm.args file ("+P" => N, ...).
vm_args(false) ->
    #{};
vm_args(Path) ->
    case file:read_file(Path) of
        {ok, Text} ->
            maps:from_list(
              [case Flag of
                   "+sbt" -> {Flag, V};
                   _ -> {Flag, list_to_integer(V)}
               end
               || Line <- string:lexemes(binary_to_list(Text), "\n"),
                  [Flag, V] <- [string:lexemes(Line, " \t")],
                  lists:member(Flag, ["+P", "+Q", "+zdbbl", "+sbt"])]);
        _ -> #{}
    end.

fd_limits() ->
    case file:read_file("/proc/self/limits") of
        {ok, Text} ->
            case throng_proc:limits(Text) of
                #{max_open_files := {S, H}} -> {limit(S), limit(H)};
                #{} -> {unknown, unknown}
            end;
        _ -> {unknown, unknown}
    end.

limit(infinity) -> unlimited;
limit(N) -> N.

int_file(Path) ->
    case ints_file(Path) of
        [N | _] -> N;
        _ -> absent
    end.

ints_file(Path) ->
    case file:read_file(Path) of
        {ok, Text} ->
            try [list_to_integer(T) || T <- string:lexemes(binary_to_list(Text), " \t\n")]
            catch error:badarg -> absent
            end;
        _ -> absent
    end.

thp() ->
    case file:read_file("/sys/kernel/mm/transparent_hugepage/enabled") of
        {ok, Text} ->
            case re:run(Text, "\\[(\\w+)\\]", [{capture, all_but_first, list}]) of
                {match, [Mode]} -> list_to_atom(Mode);
                nomatch -> unknown
            end;
        _ -> absent
    end.

meminfo(Key) ->
    case file:read_file("/proc/meminfo") of
        {ok, Text} ->
            case re:run(Text, Key ++ ":\\s+(\\d+) kB", [{capture, all_but_first, list}]) of
                {match, [KB]} -> list_to_integer(KB) * 1024;
                nomatch -> absent
            end;
        _ -> absent
    end.

%%% Findings (pure)

%% @doc Each check of the facts against the target (undefined: none).
-spec findings(facts(), pos_integer() | undefined) -> [finding()].
findings(F, Target) ->
    [fds(F, Target), ports(F, Target), processes(F, Target), memory(F, Target),
     conntrack(F, Target), tcp_mem(F, Target), listeners(F, Target)]
        ++ backlog(F) ++ [local_ports(F), tw_reuse(F), overcommit(F), thp(F), binding(F)]
        ++ dist(F).

%% A check that turns a limit into a capacity: error when it is below the
%% target, Warn when a target fits but nothing is spare (10%), ok else.
capped(Check, Value, Capacity, Target, Fix) ->
    Sev = case {Capacity, Target} of
              {_, undefined} -> info;
              {unlimited, _} -> ok;
              {C, T} when C < T -> error;
              {C, T} when C < T + T div 10 -> warn;
              _ -> ok
          end,
    #{check => Check, value => Value, severity => Sev, capacity => Capacity,
      fix => case Sev of ok -> "-"; _ -> Fix end}.

fds(#{fd_soft := Soft, fd_hard := Hard}, Target) ->
    Value = io_lib:format("soft ~s, hard ~s", [show(Soft), show(Hard)]),
    Cap = case Soft of
              unknown -> unlimited;
              unlimited -> unlimited;
              _ -> max(0, Soft - ?FD_RESERVE)
          end,
    Raise = case {Soft, Hard} of
                {S, H} when is_integer(S), is_integer(H), S < H ->
                    io_lib:format("raise the soft limit to the hard one (ulimit -n ~b, or "
                                  "LimitNOFILE=~b in the service unit); ", [H, H]);
                _ -> ""
            end,
    Beyond = io_lib:format("beyond the hard limit (~s) raise it (limits.conf nofile, "
                           "LimitNOFILE) or run more nodes sharing the port (cluster, "
                           "reuse_port: docs/clustering.md)", [show(Hard)]),
    capped("file descriptors (one per session)", lists:flatten(Value), Cap, Target,
           lists:flatten([Raise, Beyond])).

%% A session's socket is a port on the inet driver, a process beside the
%% session's on the socket backend (the listeners' inet_backend): what the
%% listeners' sessions need at most of each.
on_socket_backend(#{listeners := Ls}) ->
    Backends = [maps:get(inet_backend, L, inet) || L <- Ls],
    {Backends =/= [] andalso lists:all(fun(B) -> B =:= socket end, Backends),
     lists:member(socket, Backends)}.

ports(#{port_limit := Limit, port_count := Used} = F, Target) ->
    Value = io_lib:format("~b (~b in use)", [Limit, Used]),
    case on_socket_backend(F) of
        {true, _} ->
            capped("Erlang ports (+Q, none per session)", Value,
                   unlimited, Target, "-");
        {false, _} ->
            capped("Erlang ports (+Q, one per session)", Value,
                   max(0, Limit - max(Used, 100)), Target,
                   "raise +Q in the release's vm.args (e.g. +Q 1048576)")
    end.

processes(#{process_limit := Limit, process_count := Used} = F, Target) ->
    {Check, PerSession} = case on_socket_backend(F) of
                              {_, true} -> {"Erlang processes (+P, two per session)", 2};
                              {_, false} -> {"Erlang processes (+P, one per session)", 1}
                          end,
    capped(Check, io_lib:format("~b (~b in use)", [Limit, Used]),
           max(0, Limit - max(Used, ?PROC_RESERVE)) div PerSession, Target,
           "raise +P in the release's vm.args (e.g. +P 4194304)").

memory(#{mem_available := absent}, _Target) ->
    #{check => "memory", value => "unknown (no /proc/meminfo)", severity => info, fix => "-"};
memory(#{mem_available := Avail, listeners := Ls} = F, Target) ->
    Per = case lists:any(fun tls/1, Ls) of
              true -> ?TLS_SESSION_BYTES;
              false -> ?SESSION_BYTES
          end + case on_socket_backend(F) of
                    {_, true} -> ?SOCKET_EXTRA_BYTES;
                    {_, false} -> 0
                end,
    capped("memory available", lists:flatten(io_lib:format("~s available, ~b B per idle session", [mb(Avail), Per])),
           Avail div Per, Target,
           "more RAM, fewer modules, or more nodes (docs/benchmarks.md has the cost of each)").

tls(#{starttls := required}) -> true;
tls(#{direct_tls := true}) -> true;
tls(_) -> false.

conntrack(#{conntrack_max := absent}, _Target) ->
    #{check => "conntrack table", value => "not loaded", severity => ok, fix => "-"};
conntrack(#{conntrack_max := Max} = F, Target) ->
    Used = case maps:get(conntrack_count, F, absent) of
               absent -> 0;
               N -> N
           end,
    capped("conntrack table (one entry per connection)",
           io_lib:format("max ~b (~b in use)", [Max, Used]), max(0, Max - Used), Target,
           io_lib:format("sysctl -w net.netfilter.nf_conntrack_max=~b (or no connection "
                         "tracking on the XMPP port: iptables -t raw ... -j NOTRACK)",
                         [2 * max(Max, case Target of undefined -> Max; _ -> Target end)])).

tcp_mem(#{tcp_mem := [_, _, Max], tcp_rmem := [RMin | _], tcp_wmem := [WMin | _],
          page_size := Page}, Target) ->
    capped("TCP memory (tcp_mem, minimum buffers)",
           io_lib:format("~s; minimum buffers ~b + ~b B", [mb(Max * Page), RMin, WMin]),
           Max * Page div (RMin + WMin), Target,
           "raise net.ipv4.tcp_mem (pages), or lower tcp_rmem/tcp_wmem minimums");
tcp_mem(_, _Target) ->
    #{check => "TCP memory", value => "unknown", severity => info, fix => "-"}.

listeners(#{listeners := Ls}, Target) ->
    Caps = [M || #{max_connections := M} <- Ls],
    Cap = case lists:member(infinity, Caps) orelse Caps =:= [] of
              true -> unlimited;
              false -> lists:sum(Caps)
          end,
    capped("listeners' max_connections",
           lists:flatten(lists:join(", ", [io_lib:format("port ~b: ~s", [P, show(M)])
                                            || #{port := P, max_connections := M} <- Ls])),
           Cap, Target, "raise listen[].max_connections in the configuration").

%% The kernel shortens every listen backlog to somaxconn without a word:
%% a login storm beyond it is dropped or reset.
backlog(#{somaxconn := Max, listeners := Ls} = F) when is_integer(Max) ->
    Wanted = lists:max([0 | [B || #{backlog := B} <- Ls]]),
    Syn = maps:get(syn_backlog, F, absent),
    [#{check => "listen backlog (somaxconn)",
       value => lists:flatten(io_lib:format("somaxconn ~b, configured backlog ~b", [Max, Wanted])),
       severity => case Max < Wanted of true -> warn; false -> ok end,
       fix => case Max < Wanted of
                  true -> lists:flatten(io_lib:format("sysctl -w net.core.somaxconn=~b "
                                                      "(the kernel caps the backlog at it)",
                                                      [Wanted]));
                  false -> "-"
              end}]
        ++ [#{check => "SYN backlog (tcp_max_syn_backlog)",
              value => integer_to_list(Syn),
              severity => case Syn < min(Wanted, Max) of true -> warn; false -> ok end,
              fix => case Syn < min(Wanted, Max) of
                         true -> lists:flatten(io_lib:format(
                                                 "sysctl -w net.ipv4.tcp_max_syn_backlog=~b",
                                                 [min(Wanted, Max)]));
                         false -> "-"
                     end} || is_integer(Syn)];
backlog(_) ->
    [].

local_ports(#{port_range := [Lo, Hi]}) ->
    #{check => "ephemeral ports (ip_local_port_range)",
      value => lists:flatten(io_lib:format("~b-~b: ~b per source address and server port",
                                           [Lo, Hi, Hi - Lo + 1])),
      severity => info,
      fix => case Hi - Lo + 1 < 60000 of
                 true -> "outgoing connections only (load generators, clusters): widen with "
                         "sysctl -w net.ipv4.ip_local_port_range=\"1024 65535\" or use more "
                         "source addresses (127.0.0.x)";
                 false -> "-"
             end};
local_ports(_) ->
    #{check => "ephemeral ports", value => "unknown", severity => info, fix => "-"}.

tw_reuse(#{tw_reuse := R}) when is_integer(R) ->
    #{check => "tcp_tw_reuse",
      value => case R of
                   1 -> "1 (on)";
                   2 -> "2 (loopback only)";
                   _ -> integer_to_list(R) ++ " (off)"
               end,
      severity => info,
      fix => case R of
                 0 -> "for a load generator on this host that reconnects fast: "
                      "sysctl -w net.ipv4.tcp_tw_reuse=1";
                 _ -> "-"
             end};
tw_reuse(_) ->
    #{check => "tcp_tw_reuse", value => "unknown", severity => info, fix => "-"}.

overcommit(#{overcommit := 2}) ->
    #{check => "memory overcommit", value => "2 (strict)", severity => warn,
      fix => "the runtime reserves address space it may never use: "
             "sysctl -w vm.overcommit_memory=0"};
overcommit(#{overcommit := M}) ->
    #{check => "memory overcommit", value => show(M), severity => ok, fix => "-"}.

thp(#{thp := always}) ->
    #{check => "transparent huge pages", value => "always", severity => warn,
      fix => "idle sessions' heaps get whole huge pages: "
             "echo madvise > /sys/kernel/mm/transparent_hugepage/enabled"};
thp(#{thp := M}) ->
    #{check => "transparent huge pages", value => show(M), severity => ok, fix => "-"}.

binding(#{bind_type := unbound, schedulers := S}) ->
    #{check => "scheduler binding", value => lists:flatten(io_lib:format("unbound, ~b schedulers", [S])),
      severity => info,
      fix => "on a host dedicated to Throng, +sbt db in vm.args binds schedulers to cores"};
binding(#{bind_type := T, schedulers := S}) ->
    #{check => "scheduler binding", value => lists:flatten(io_lib:format("~p, ~b schedulers", [T, S])),
      severity => ok, fix => "-"}.

dist(#{members := 0}) ->
    [];
dist(#{dist_buf_kb := KB, members := N}) ->
    [#{check => "distribution buffer (+zdbbl)",
       value => lists:flatten(io_lib:format("~b KB, ~b other node(s)", [KB, N])),
       severity => case KB < ?DIST_BUF_ADVISED_KB of true -> warn; false -> ok end,
       fix => case KB < ?DIST_BUF_ADVISED_KB of
                  true -> lists:flatten(io_lib:format(
                                          "+zdbbl ~b in vm.args: a busy link to another node "
                                          "suspends every sender at ~b KB", [?DIST_BUF_ADVISED_KB, KB]));
                  false -> "-"
              end}].

show(unlimited) -> "unlimited";
show(infinity) -> "infinity";
show(N) when is_integer(N) -> integer_to_list(N);
show(A) when is_atom(A) -> atom_to_list(A).

mb(Bytes) -> lists:flatten(io_lib:format("~.1f MB", [Bytes / 1048576])).

%%% Report

%% @doc The table of findings, the limit that decides the node's capacity,
%% and the exit status (1 when a limit caps the target).
-spec report(facts(), pos_integer() | undefined, string()) -> {0 | 1, iodata()}.
report(Facts, Target0, What) ->
    Target = case Target0 of
                 undefined -> configured_target(Facts);
                 _ -> Target0
             end,
    Fs = findings(Facts, Target),
    Capped = [C || #{capacity := C} <- Fs, is_integer(C)],
    Decides = case Capped of
                  [] -> "no limit found";
                  _ ->
                      Min = lists:min(Capped),
                      [#{check := C} | _] = [X || #{capacity := M} = X <- Fs, M =:= Min],
                      io_lib:format("~b sessions, set by ~s", [Min, C])
              end,
    Errors = [X || #{severity := error} = X <- Fs],
    Text = [io_lib:format("throng doctor: ~s~n", [What]),
            case Target of
                undefined -> "target: none (give --target SESSIONS, or finite max_connections)\n";
                _ -> io_lib:format("target: ~b sessions~n", [Target])
            end,
            io_lib:format("~n~-6s ~-44s ~10s  ~s~n", ["", "check", "sessions", "value"]),
            [io_lib:format("~-6s ~-44s ~10s  ~s~n",
                           [tag(S), C, case maps:get(capacity, X, none) of
                                           none -> "";
                                           Cap -> show(Cap)
                                       end, V])
             || #{check := C, value := V, severity := S} = X <- Fs],
            "\nFixes:\n",
            [io_lib:format("  ~s: ~s~n", [C, Fix])
             || #{check := C, severity := S, fix := Fix} <- Fs, S =/= ok, Fix =/= "-"],
            io_lib:format("~nThis node's capacity: ~s.~n", [Decides]),
            case Errors of
                [] -> "";
                _ -> io_lib:format("~b limit(s) cap the target: see ERROR above.~n", [length(Errors)])
            end],
    {case Errors of [] -> 0; _ -> 1 end, Text}.

tag(ok) -> "ok";
tag(info) -> "info";
tag(warn) -> "WARN";
tag(error) -> "ERROR".

%% The listeners' total max_connections when every one is finite.
configured_target(#{listeners := Ls}) ->
    Caps = [M || #{max_connections := M} <- Ls],
    case Caps =/= [] andalso not lists:member(infinity, Caps) of
        true -> lists:sum(Caps);
        false -> undefined
    end.
