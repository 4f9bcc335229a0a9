%% @doc The `xmpp' command: load a scenario, apply the command-line
%% overrides, plan the worker VMs, check that the server answers, run, and
%% summarise.
-module(throng_bench_xmpp).

-export([run/1, prepare/1, progress/3, summary/3, auto_duration/1, plan_workers/2]).
%% Called by throng_bench_run as the run's kind (Kind:progress/3, Kind:summary/3).
-ignore_xref([{progress, 3}, {summary, 3}]).
%% API used by tests: the run's duration and the worker plan.
-ignore_xref([{auto_duration, 1}, {plan_workers, 2}]).

%% Command-line options that override scenario keys.
-define(OVERRIDES, [host, port, domain, tls, auth, users, rate, length, keepalive, duration,
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
            #{server := #{host := Host, port := Port}} = Scenario,
            case preflight(Scenario) of
                ok -> go(Scenario, Header, Opts);
                {error, Msg} ->
                    {aborted, fail_early(Out, Header, aborted,
                                         io_lib:format("cannot connect to ~ts:~b: ~ts (is the "
                                                       "server running?)", [Host, Port, Msg]))}
            end
    end.

%% @doc The validated scenario with the options applied, and the summary
%% header.
-spec prepare(map()) -> {ok, map(), map()} | {error, iodata()}.
prepare(Opts) ->
    case throng_bench_scenario:load(maps:get(scenario, Opts, "paper")) of
        {error, _} = E -> E;
        {ok, S0} ->
            Ov = maps:map(fun(K, V) when K =:= host; K =:= domain; K =:= password; K =:= csv ->
                                  throng_bench_units:to_bin(V);
                             (length, V) -> {constant, V};
                             (register, V) -> V;
                             (_, V) -> V
                          end, maps:with(?OVERRIDES, Opts)),
            Ov1 = case maps:get(register, Ov, false) of
                      false -> maps:remove(register, Ov);
                      true -> Ov
                  end,
            case throng_bench_scenario:apply_overrides(S0, Ov1) of
                {error, Msg} -> {error, Msg};
                {ok, S1} ->
                    Users = throng_bench_xmpp_users:compile(maps:get(users, S1)),
                    Total = throng_bench_arrival:total_users(maps:get(arrival, S1)),
                    Srcs = source_ips(Opts, S1, Total),
                    Seed = maps:get(seed, Opts, erlang:system_time(microsecond)),
                    S2 = S1#{users => (maps:get(users, S1))#{compiled => Users,
                                                              count => maps:get(count, Users)},
                             source_ips => Srcs, seed => Seed},
                    #{server := Srv} = S2,
                    Header = #{command => xmpp,
                               target => iolist_to_binary(
                                           io_lib:format("~ts:~b (domain ~ts, ~s, ~s)",
                                                         [maps:get(host, Srv), maps:get(port, Srv),
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
                                             seed => Seed}},
                    {ok, S2, Header}
            end
    end.

source_ips(#{source_ips := Ips}, _S, _Total) -> Ips;
source_ips(_Opts, #{server := #{host := Host}}, Total) ->
    case inet:getaddr(binary_to_list(Host), inet) of
        {ok, {127, _, _, _}} ->
            %% at most ~30,000 connections per source address towards one port
            N = max(1, min(250, ceil(Total / 30000))),
            [{127, 0, 0, I} || I <- lists:seq(1, N)];
        _ -> [any]
    end.

preflight(#{server := #{host := Host, port := Port}, timeouts := #{connect := T}}) ->
    case gen_tcp:connect(binary_to_list(Host), Port, [binary, {active, false}], T) of
        {ok, S} -> gen_tcp:close(S), ok;
        {error, R} -> {error, inet:format_error(R)}
    end.

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
                                                     server_pid => maps:get(server_pid, Opts,
                                                                            undefined)},
                                   out => maps:get(out, Opts, undefined),
                                   server_pid => maps:get(server_pid, Opts, undefined),
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
    io_lib:format("[~5bs] launched ~b/~b sessions ~b logins/s ~ts | msgs ~ts/s deliv p99 ~ts | "
                  "errors ~b~ts",
                  [round(maps:get(t, Row)), maps:get(users_launched, C), Planned,
                   maps:get(sessions, C), throng_bench_units:format_rate(maps:get(logins_s, Row)),
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
    (maps:without([server0, loadgen_mem0, loadgen_rss0, job_status], H))#{
      verdict => #{ok => Problems =:= [] andalso Status =/= aborted andalso Status =/= invalid,
                   reasons => Problems},
      users => #{planned => Planned,
                 launched => Get(users_launched),
                 connected => Get(users_connected),
                 logged_in => Get(users_logged_in),
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
                   bytes_in => Get(bytes_in), bytes_out => Get(bytes_out)},
      messages => #{sent => Sent, received => Received, lost => Sent - Received,
                    bounced => Get(msgs_bounced), not_sent_no_contact_online => Get(msgs_unsent)},
      errors => Errors,
      latency_ms => throng_bench_summary:latency(Snap, [connect, tls, register, auth, bind, login,
                                                        roster, presence, delivery]),
      server => throng_bench_summary:server(Rows, maps:get(server0, H, undefined), sessions,
                                            session),
      loadgen => throng_bench_summary:loadgen(Rows, H, sessions, session)}.
