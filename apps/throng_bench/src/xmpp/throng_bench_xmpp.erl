%% @doc The `xmpp' command: load a scenario, apply the command-line
%% overrides, plan the worker VMs, check that the server answers, run, and
%% summarise.
-module(throng_bench_xmpp).

-export([run/1, prepare/1, progress/3, summary/3, auto_duration/1, plan_workers/2,
         source_ips/3, check_fds/3, fd_limit/1]).
%% Called by throng_bench_run as the run's kind (Kind:progress/3, Kind:summary/3).
-ignore_xref([{progress, 3}, {summary, 3}]).
%% API used by tests: the run's duration, the worker plan, the source addresses.
-ignore_xref([{auto_duration, 1}, {plan_workers, 2}, {source_ips, 3}, {check_fds, 3},
              {fd_limit, 1}]).

%% Command-line options that override scenario keys.
%% At most this many users bind to one source address (one address has
%% ~64,000 ports with ip_local_port_range 1024-65535, ~28,000 by default).
-define(USERS_PER_SOURCE, 30000).

%% Descriptors a VM keeps for itself besides its users' sockets.
-define(FD_MARGIN, 1000).

-define(OVERRIDES, [host, port, domain, tls, tls_resume, auth, users, rate, length, keepalive, duration,
                    grace, password, csv, first, contact_count, register, socket_buffer]).

%% @doc Run the load test described by the options (see throng_bench_opts).
-spec run(map()) -> {complete | stopped | aborted, map()}.
run(Opts) ->
    Out = maps:get(out, Opts, undefined),
    case prepare(Opts) of
        {error, Msg} ->
            _ = fail_early(Out, #{command => xmpp,
                                  scenario => throng_bench_units:to_bin(
                                                maps:get(scenario, Opts, "paper"))},
                           invalid, Msg),
            throw({usage, Msg});
        {ok, Scenario, Header} ->
            case preflight(Scenario) of
                ok -> go(Scenario, Header, Opts);
                {error, Target, Msg} ->
                    {aborted, fail_early(Out, Header, aborted,
                                         io_lib:format("cannot connect to ~ts: ~ts (is the "
                                                       "server running?)",
                                                       [throng_bench_targets:label(Target), Msg]))}
            end
    end.

%% @doc The validated scenario with the options applied, and the summary
%% header.
-spec prepare(map()) -> {ok, map(), map()} | {error, iodata()}.
prepare(Opts) ->
    case {maps:get(targets, Opts, []), maps:is_key(host, Opts) orelse maps:is_key(port, Opts)} of
        {[_ | _], true} -> {error, <<"give either --targets or --host/--port, not both">>};
        _ -> prepare1(Opts)
    end.

prepare1(Opts) ->
    case throng_bench_scenario:load(maps:get(scenario, Opts, "paper")) of
        {error, _} = E -> E;
        {ok, S0} ->
            Ov = maps:map(fun(K, V) when K =:= host; K =:= domain; K =:= password; K =:= csv ->
                                  throng_bench_units:to_bin(V);
                             (length, V) -> {constant, V};
                             (register, V) -> V;
                             (_, V) -> V
                          end, maps:with(?OVERRIDES, Opts)),
            %% flags: only when given
            Ov1 = maps:filter(fun(K, V) -> not (lists:member(K, [register, tls_resume])
                                                andalso V =:= false) end, Ov),
            Ov2 = case lists:append(maps:get(targets, Opts, [])) of
                      [] -> Ov1;
                      Ts -> Ov1#{targets => Ts}
                  end,
            case throng_bench_scenario:apply_overrides(S0, Ov2) of
                {error, Msg} -> {error, Msg};
                {ok, S1} ->
                    Users = throng_bench_xmpp_users:compile(maps:get(users, S1)),
                    Total = throng_bench_arrival:total_users(maps:get(arrival, S1)),
                    Targets = throng_bench_scenario:targets(S1),
                    Srcs = source_ips(Opts, Targets, Total),
                    Seed = maps:get(seed, Opts, erlang:system_time(microsecond)),
                    S2 = S1#{users => (maps:get(users, S1))#{compiled => Users,
                                                              count => maps:get(count, Users)},
                             source_ips => Srcs, seed => Seed,
                             %% tags this run's messages: a message of an
                             %% earlier run (offline storage) is not counted
                             run => erlang:system_time(microsecond)},
                    #{server := Srv} = S2,
                    Labels = [throng_bench_targets:label(T) || T <- Targets],
                    Header = #{command => xmpp,
                               target => iolist_to_binary(
                                           io_lib:format("~ts (domain ~ts, ~s, ~s)",
                                                         [lists:join(", ", Labels),
                                                          maps:get(domain, Srv), maps:get(tls, Srv),
                                                          maps:get(auth, Srv)])),
                               scenario => #{name => maps:get(name, S2),
                                             description => throng_bench_scenario:describe(S2),
                                             source => throng_bench_units:to_bin(
                                                         maps:get(scenario, Opts, "paper"))},
                               settings => #{planned_users => Total,
                                             population => maps:get(count, Users),
                                             source_ips => [list_to_binary(inet:ntoa(Ip))
                                                            || Ip <- Srcs, Ip =/= any],
                                             targets => Labels,
                                             seed => Seed}},
                    {ok, S2, Header}
            end
    end.

%% @doc Source addresses: the option's, else for loopback targets enough
%% of 127.0.0.1, 127.0.0.2, ... that no address holds more than 30,000
%% users (user N binds to address N mod A before it connects: the kernel
%% then picks its port among those free on that address, whatever the
%% target, so the bound is per address however many targets there are).
-spec source_ips(map(), [throng_bench_targets:target()], non_neg_integer()) ->
          [inet:ip_address() | any].
source_ips(#{source_ips := Ips}, _Targets, _Total) -> Ips;
source_ips(_Opts, Targets, Total) ->
    case throng_bench_targets:loopback(Targets) of
        true ->
            N = max(1, min(250, ceil(Total / ?USERS_PER_SOURCE))),
            [{127, 0, 0, I} || I <- lists:seq(1, N)];
        false -> [any]
    end.

%% Every target must answer before the run starts.
preflight(S = #{timeouts := #{connect := T}}) ->
    lists:foldl(fun(Target = {Host, Port}, ok) ->
                        case gen_tcp:connect(binary_to_list(Host), Port,
                                             [binary, {active, false}], T) of
                            {ok, Sock} -> gen_tcp:close(Sock), ok;
                            {error, R} -> {error, Target, inet:format_error(R)}
                        end;
                   (_, Err) -> Err
                end, ok, throng_bench_scenario:targets(S)).

%% @doc Worker plan: remote nodes, N peers, or this VM alone.
-spec plan_workers(map(), non_neg_integer()) -> map().
plan_workers(#{worker_nodes := Nodes} = Opts, _Total) when Nodes =/= [] ->
    #{nodes => [list_to_atom(N) || N <- Nodes],
      cookie => case maps:get(cookie, Opts, undefined) of
                    undefined -> undefined;
                    C -> list_to_atom(C)
                end};
plan_workers(#{workers := 0}, _Total) -> #{local => true};
plan_workers(#{workers := N}, _Total) -> #{peers => N};
plan_workers(Opts, Total) ->
    PerVm = maps:get(users_per_vm, Opts, 18000),
    case Total =< PerVm of
        true -> #{local => true};
        false -> #{peers => ceil(Total / PerVm)}
    end.

%% @doc Whether every VM of a plan can hold its users' sockets: at most
%% the open-file limit of a process (Limit, this host's; worker VMs started
%% here inherit it) less 1,000 for the VM's own descriptors. Remote worker
%% nodes are not checked (their limit is not known here).
-spec check_fds(map(), non_neg_integer(), pos_integer() | infinity) -> ok | {error, binary()}.
check_fds(_Plan, _Total, infinity) -> ok;
check_fds(#{nodes := _}, _Total, _Limit) -> ok;
check_fds(Plan, Total, Limit) ->
    {Vms, PerVm} = case Plan of
                       #{local := true} -> {1, Total};
                       #{peers := N} -> {N, ceil(Total / N)}
                   end,
    case PerVm =< Limit - ?FD_MARGIN of
        true -> ok;
        false ->
            {error, iolist_to_binary(
                      io_lib:format("~b users in ~b VM(s) is ~b sockets per VM, but a process "
                                    "here may open ~b files (less ~b for the VM itself): use "
                                    "more VMs (--users-per-vm ~b or less, or --workers ~b or more)",
                                    [Total, Vms, PerVm, Limit, ?FD_MARGIN, Limit - ?FD_MARGIN,
                                     ceil(Total / (Limit - ?FD_MARGIN))]))}
    end.

%% @doc The soft open-file limit of this process (/proc/self/limits), or
%% infinity when unlimited or unknown.
-spec fd_limit() -> pos_integer() | infinity.
fd_limit() ->
    case file:read_file("/proc/self/limits") of
        {ok, Bin} -> fd_limit(Bin);
        {error, _} -> infinity
    end.

%% @doc The soft "Max open files" of a /proc/PID/limits text.
-spec fd_limit(binary()) -> pos_integer() | infinity.
fd_limit(Bin) ->
    case [L || L <- binary:split(Bin, <<"\n">>, [global]),
               binary:match(L, <<"Max open files">>) =/= nomatch] of
        [Line | _] ->
            case string:lexemes(binary:part(Line, 14, byte_size(Line) - 14), " ") of
                [Soft | _] ->
                    try binary_to_integer(Soft) catch error:badarg -> infinity end;
                [] -> infinity
            end;
        [] -> infinity
    end.

%% @doc Default run duration: the arrivals, the longest session (five means
%% for exponential lengths), the drain linger and 15 s.
-spec auto_duration(map()) -> non_neg_integer().
auto_duration(#{arrival := Phases, sessions := Ss, drain := Drain}) ->
    Longest = lists:max([case L of
                             {constant, V} -> V;
                             {uniform, _, Hi} -> Hi;
                             {exponential, M} -> 5 * M
                         end || #{length := L} <- Ss]),
    throng_bench_arrival:arrival_time_ms(Phases) + Longest + Drain + 15000.

go(Scenario, Header, Opts) ->
    Total = maps:get(planned_users, maps:get(settings, Header)),
    Plan = plan_workers(Opts, Total),
    case check_fds(Plan, Total, fd_limit()) of
        ok -> go(Scenario, Header, Opts, Plan);
        {error, Msg} -> throw({usage, Msg})
    end.

go(Scenario, Header, Opts, Plan) ->
    ServerPids = case maps:get(server_pid, Opts, []) of
                     undefined -> [];
                     L when is_list(L) -> L;
                     P1 -> [P1]
                 end,
    case throng_bench_worker:start(Plan) of
        {error, Msg} ->
            {aborted, fail_early(maps:get(out, Opts, undefined), Header, aborted, Msg)};
        {ok, Workers} ->
            Deadline = case maps:get(duration, Scenario) of
                           auto -> auto_duration(Scenario);
                           D -> D
                       end,
            throng_bench_run:run(#{job => throng_bench_xmpp_job, config => Scenario,
                                   workers => Workers, deadline => Deadline,
                                   grace => maps:get(grace, Scenario) + maps:get(drain, Scenario),
                                   kind => ?MODULE,
                                   header => Header#{deadline_s => Deadline / 1000,
                                                     server_pid => case ServerPids of
                                                                       [P | _] -> P;
                                                                       [] -> undefined
                                                                   end,
                                                     server_pids => ServerPids},
                                   out => maps:get(out, Opts, undefined),
                                   server_pid => ServerPids,
                                   stop_rule => maps:get(stop_rule, Opts, undefined),
                                   print_summary => maps:get(print_summary, Opts, true),
                                   progress => maps:get(progress, Opts, true)})
    end.

fail_early(Out, Header, Status, Msg) ->
    Summary = summary(throng_bench_metrics:empty_snapshot(), [],
                      Header#{status => Status, error => iolist_to_binary(Msg)}),
    case Out of
        undefined -> ok;
        Dir -> throng_bench_out:write_run(Dir, Summary, [], throng_bench_metrics:empty_snapshot())
    end,
    Summary.

%% @doc The progress line.
-spec progress(map(), throng_bench_metrics:snapshot(), map()) -> iodata().
progress(Row, #{counters := C}, #{settings := #{planned_users := Planned}}) ->
    Errs = maps:get(errors, Row),
    io_lib:format("[~5bs] launched ~b/~b sessions ~b~ts logins/s ~ts | msgs ~ts/s deliv p99 ~ts | "
                  "errors ~b~ts",
                  [round(maps:get(t, Row)), maps:get(users_launched, C), Planned,
                   maps:get(sessions, C),
                   case [X || #{sessions := X} <- maps:get(targets, Row, [])] of
                       [_, _ | _] = PerTarget ->
                           io_lib:format(" (~b targets: ~b..~b each)",
                                         [length(PerTarget), lists:min(PerTarget),
                                          lists:max(PerTarget)]);
                       _ -> ""
                   end,
                   throng_bench_units:format_rate(maps:get(logins_s, Row)),
                   throng_bench_units:format_rate(maps:get(msgs_sent_s, Row)),
                   fmt_ms(maps:get(delivery_p99_ms, Row)), Errs,
                   case maps:get(server_rss_bytes, Row) of
                       undefined -> "";
                       Rss -> io_lib:format(" | server ~ts ~b% cpu",
                                            [throng_bench_units:format_bytes(Rss),
                                             round(case maps:get(server_cpu_pct, Row) of
                                                       undefined -> 0;
                                                       P -> P
                                                   end)])
                   end]);
progress(Row, Snap, H) -> progress(Row, Snap, H#{settings => #{planned_users => 0}}).

hist_count(#{hists := H}, Name) -> throng_hist:count(maps:get(Name, H)).

pad(L, N) when length(L) >= N -> lists:sublist(L, N);
pad(L, N) -> L ++ lists:duplicate(N - length(L), undefined).

fmt_ms(undefined) -> <<"-">>;
fmt_ms(Ms) -> throng_bench_units:format_us(Ms * 1000).

%% @doc summary.json of an xmpp run.
-spec summary(throng_bench_metrics:snapshot(), [map()], map()) -> map().
summary(Snap = #{counters := C}, Rows, H) ->
    Get = fun(K) -> maps:get(K, C) end,
    Sent = Get(msgs_sent),
    Received = Get(msgs_received),
    Errors = throng_bench_summary:errors(Snap),
    Planned = maps:get(planned_users, maps:get(settings, H, #{}), 0),
    Problems =
        [iolist_to_binary(io_lib:format("~b error(s)", [maps:get(total, Errors)]))
         || maps:get(total, Errors) > 0]
        ++ [iolist_to_binary(io_lib:format("~b of ~b planned users logged in",
                                           [Get(users_logged_in), Planned]))
            || Get(users_logged_in) < Planned]
        ++ [<<"more messages received than sent">> || Received > Sent],
    Status = maps:get(status, H, complete),
    Targets = maps:get(targets, maps:get(settings, H, #{}), []),
    Servers0 = lists:zip(maps:get(server_pids, H, []),
                         pad(maps:get(servers0, H, []), length(maps:get(server_pids, H, [])))),
    Server = throng_bench_summary:server(Rows, maps:get(server0, H, undefined), sessions, session),
    CpuS = throng_bench_cluster:login_window_cpu_s(
             throng_bench_cluster:login_window(Rows),
             fun(R) -> maps:get(server_cpu_pct, R, undefined) end),
    Cluster = case throng_bench_cluster:section(Targets, Servers0, Snap, Rows) of
                  undefined -> #{};
                  Section -> #{cluster => Section}
              end,
    RecvSame = hist_count(Snap, delivery_same),
    RecvCross = hist_count(Snap, delivery_cross),
    Split = case {length(Targets) > 1, Get(redirects)} of
                {false, _} -> #{};
                {true, 0} ->
                    Cross = Get(msgs_sent_cross),
                    #{same_node => #{sent => Sent - Cross, received => RecvSame,
                                     lost => Sent - Cross - RecvSame},
                      cross_node => #{sent => Cross, received => RecvCross,
                                      lost => Cross - RecvCross}};
                {true, _} ->
                    %% Users sent to another node (see-other-host): a sender
                    %% cannot know its recipient's node; only what arrived
                    %% is split.
                    #{same_node => #{received => RecvSame},
                      cross_node => #{received => RecvCross}}
            end,
    (maps:merge(Cluster, maps:without([server0, servers0, loadgen_mem0, loadgen_rss0, job_status],
                                      H)))#{
      verdict => #{ok => Problems =:= [] andalso Status =/= aborted andalso Status =/= invalid,
                   reasons => Problems},
      users => #{planned => Planned,
                 launched => Get(users_launched),
                 connected => Get(users_connected),
                 %% logins sent to another server first (see-other-host)
                 redirected => Get(redirects),
                 logged_in => Get(users_logged_in),
                 %% auth fast: logins with a XEP-0484 token (no password)
                 logged_in_with_token => Get(logins_fast),
                 %% tls_resume: logins whose TLS handshake resumed a session
                 tls_resumed => Get(tls_resumed),
                 finished => Get(users_finished),
                 failed => Get(users_failed),
                 running_at_end => Get(users_launched) - Get(users_finished) - Get(users_failed)},
      sessions => #{max => throng_bench_summary:max_of(sessions, Rows),
                    at_end => Get(sessions)},
      rates => #{logins_per_s => throng_bench_summary:rate_stats(logins_s, Rows),
                 connects_per_s => throng_bench_summary:rate_stats(connects_s, Rows),
                 stanzas_in_per_s => throng_bench_summary:rate_stats(stanzas_in_s, Rows),
                 stanzas_out_per_s => throng_bench_summary:rate_stats(stanzas_out_s, Rows),
                 bytes_in_per_s => throng_bench_summary:rate_stats(bytes_in_s, Rows),
                 bytes_out_per_s => throng_bench_summary:rate_stats(bytes_out_s, Rows),
                 messages_sent_per_s => throng_bench_summary:rate_stats(msgs_sent_s, Rows)},
      traffic => #{stanzas_in => Get(stanzas_in), stanzas_out => Get(stanzas_out),
                   bytes_in => Get(bytes_in), bytes_out => Get(bytes_out),
                   %% Socket reads by the simulated clients: each is a
                   %% wake-up of a phone's radio and CPU.
                   reads_in => Get(reads_in)},
      messages => Split#{sent => Sent, received => Received, lost => Sent - Received,
                         bounced => Get(msgs_bounced),
                         not_sent_no_contact_online => Get(msgs_unsent),
                         from_earlier_runs => Get(msgs_stale)},
      %% XEP-0045: rooms joined (user x room), groupchat messages sent and
      %% copies received (each message reaches every occupant, the sender too).
      muc => #{joined => Get(muc_joined), join_errors => Get(muc_join_errors),
               sent => Get(muc_sent), received => Get(muc_received)},
      errors => Errors,
      latency_ms => throng_bench_summary:latency(Snap, [connect, tls, register, auth, bind, login,
                                                        roster, presence, delivery, delivery_same, delivery_muc,
                                                        delivery_cross]),
      server => case Server of
                    #{sampled := true} ->
                        Server#{cpu_s_login_window => CpuS,
                                cpu_ms_per_login => case Get(logins) of
                                                        L when L > 0, is_number(CpuS) ->
                                                            CpuS * 1000 / L;
                                                        _ -> undefined
                                                    end};
                    _ -> Server
                end,
      loadgen => throng_bench_summary:loadgen(Rows, H, sessions, session)}.
