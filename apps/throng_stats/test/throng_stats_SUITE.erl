%% @doc Live statistics against the real server: real XMPP clients log in
%% and talk, and the counters move in /metrics (read by a strict Prometheus
%% parser), in /stats (read by jiffy), in `throng stats' and on the
%% dashboard (loaded in headless Chromium); long message queues built on
%% purpose raise the alarm in every place it is shown.
-module(throng_stats_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").
-include_lib("throng/include/throng.hrl").

-compile([export_all, nowarn_export_all]).

-define(C, throng_test_client).
-define(P, throng_stats_prom_parser).
-define(WAIT_MS, 15000).
-define(ALARM, 50).

all() ->
    [metrics_move_with_logins_and_messages, stats_json_moves_with_logins,
     prometheus_page_is_well_formed, connections_per_listener, auth_failures_counted,
     latency_probes_are_answered, collector_sleeps_between_ticks,
     basic_auth_when_configured, unknown_paths_and_methods,
     queue_alarm_registered_process, queue_alarm_suspended_session, ctl_stats_once,
     stats_command_comes_and_goes, cli_stats_from_hidden_node, dist_traffic_counted,
     dashboard_renders_in_chromium,
     half_sent_requests_do_not_starve, slowloris_closed_after_request_timeout,
     idle_keepalive_closed, keepalive_and_pipelining, bad_requests_answered_and_closed].

init_per_suite(Config) ->
    {ok, _} = application:ensure_all_started(inets),
    Config.

end_per_suite(_Config) ->
    ok.

init_per_testcase(TC, Config) when TC =:= cli_stats_from_hidden_node;
                                   TC =:= dist_traffic_counted ->
    %% Distribution must be up before Mnesia starts (its schema is per node name).
    case distribute() of
        {skip, _} = Skip -> Skip;
        Started -> start(TC, [{distribution, Started} | Config])
    end;
init_per_testcase(queue_alarm_suspended_session = TC, Config) ->
    %% Ticks of 250 ms: the rolling sweep (ten ticks) that finds the
    %% suspended session takes 2.5 s instead of 10.
    _ = application:load(throng_stats),
    ok = application:set_env(throng_stats, interval_ms, 250),
    start(TC, Config);
init_per_testcase(TC, Config) ->
    start(TC, Config).

start(TC, Config) ->
    Stats = maps:merge(#{port => 0, queue_alarm => ?ALARM}, stats_overrides(TC)),
    throng_ct:start(Config, #{stats => Stats}),
    {ok, _} = application:ensure_all_started(throng_stats),
    [throng_ct:register(U, <<"password">>) || U <- [<<"alice">>, <<"bob">>, <<"carol">>]],
    wait_for(fun() -> is_map(throng_stats:snapshot()) end, "a first snapshot"),
    Config.

stats_overrides(basic_auth_when_configured) ->
    #{auth_user => <<"admin">>, auth_password => <<"s3cret">>};
stats_overrides(half_sent_requests_do_not_starve) ->
    %% Deadlines far beyond the test: only the cap's eviction can make room.
    #{http_max_connections => 8, http_request_timeout => 600000, http_idle_timeout => 600000};
stats_overrides(slowloris_closed_after_request_timeout) ->
    #{http_request_timeout => 300};
stats_overrides(idle_keepalive_closed) ->
    #{http_idle_timeout => 300, http_request_timeout => 600000};
stats_overrides(_) ->
    #{}.

end_per_testcase(_TC, Config) ->
    _ = application:stop(throng_stats),
    application:unset_env(throng_stats, interval_ms),
    throng_ct:stop(),
    case ?config(distribution, Config) of
        started -> ok = net_kernel:stop();
        _ -> ok
    end.

%%% Counters move

%% Logins, sessions, connections, stanzas and bytes move in /metrics.
metrics_move_with_logins_and_messages(_) ->
    P0 = metrics(),
    Logins0 = ?P:value(P0, <<"throng_logins_total">>),
    Msgs0 = ?P:value(P0, <<"throng_stanzas_in_total">>, [{<<"kind">>, <<"message">>}]),
    Bytes0 = ?P:value(P0, <<"throng_bytes_received_total">>),
    ?assertEqual(0.0, ?P:value(P0, <<"throng_sessions">>)),
    [A, B, _C] = login_all(),
    [?C:send(A, ?C:message(?C:jid(B), <<"chat">>, <<"hello">>)) || _ <- lists:seq(1, 5)],
    [_ = ?C:recv_stanza(B) || _ <- lists:seq(1, 5)],
    P = wait_for(fun() ->
                         P1 = metrics(),
                         ?P:value(P1, <<"throng_sessions">>) =:= 3.0 andalso
                             ?P:value(P1, <<"throng_stanzas_out_total">>,
                                      [{<<"kind">>, <<"message">>}]) >= 5.0 andalso P1
                 end, "3 sessions and 5 messages out in /metrics"),
    ?assert(?P:value(P, <<"throng_logins_total">>) >= Logins0 + 3),
    ?assert(?P:value(P, <<"throng_sessions_opened_total">>) >= 3.0),
    ?assertEqual(3.0, ?P:value(P, <<"throng_connections">>)),
    ?assert(?P:value(P, <<"throng_stanzas_in_total">>, [{<<"kind">>, <<"message">>}]) >= Msgs0 + 5),
    ?assert(?P:value(P, <<"throng_messages_routed_total">>) >= 5.0),
    ?assert(?P:value(P, <<"throng_bytes_received_total">>) > Bytes0),
    ?assert(?P:value(P, <<"throng_connections_accepted_total">>) >= 3.0),
    ?assert(?P:value(P, <<"throng_memory_per_connection_bytes">>, [{<<"kind">>, <<"beam">>}]) > 0).

%% /stats carries the same figures, with rates and their decays.
stats_json_moves_with_logins(_) ->
    _ = login_all(),
    S = wait_for(fun() ->
                         S1 = stats(),
                         series_value(S1, <<"throng_sessions">>, <<"value">>) =:= 3 andalso
                             is_number(series_value(S1, <<"throng_logins">>, <<"avg10">>)) andalso
                             series_value(S1, <<"throng_logins">>, <<"avg10">>) > 0 andalso S1
                 end, "3 sessions and a login rate in /stats"),
    ?assert(series_value(S, <<"throng_logins">>, <<"value">>) >= 3),
    ?assert(series_value(S, <<"throng_logins">>, <<"avg100">>) > 0),
    #{<<"chart">> := Chart, <<"metrics">> := M, <<"queues">> := Q} = S,
    ?assertEqual(3, maps:get(<<"sessions">>, Chart)),
    ?assertEqual(3, maps:get(<<"connections">>, Chart)),
    ?assertEqual(<<"counter">>, maps:get(<<"type">>, maps:get(<<"throng_logins">>, M))),
    ?assertEqual(?ALARM, maps:get(<<"threshold">>, Q)),
    ?assertEqual(false, maps:get(<<"alarm">>, Q)),
    %% OS and BEAM figures are there and sane.
    Util = series_value(S, <<"throng_beam_scheduler_utilization">>, <<"now">>,
                        #{<<"type">> => <<"normal">>}),
    ?assert(Util >= 0 andalso Util =< 1),
    ?assert(series_value(S, <<"throng_process_resident_memory_bytes">>, <<"value">>) > 0),
    ?assert(series_value(S, <<"throng_process_open_fds">>, <<"value">>) > 0),
    ?assert(series_value(S, <<"throng_beam_processes">>, <<"value">>) > 0),
    History = get_json("/history"),
    ?assert(length(maps:get(<<"t">>, History)) >= 2),
    ?assert(lists:member(3, maps:get(<<"sessions">>, History))).

%% Every family has HELP and TYPE, counters end in _total, and the
%% figures of every part of the sample are there.
prometheus_page_is_well_formed(_) ->
    {200, Headers, Body} = http_get("/metrics", []),
    ?assertEqual("text/plain; version=0.0.4; charset=utf-8",
                 proplists:get_value("content-type", Headers)),
    #{families := F} = P = ?P:parse(Body),
    Expected = [{<<"throng_process_cpu_seconds_total">>, <<"counter">>},
                {<<"throng_host_cpu_seconds_total">>, <<"counter">>},
                {<<"throng_process_resident_memory_bytes">>, <<"gauge">>},
                {<<"throng_process_context_switches_total">>, <<"counter">>},
                {<<"throng_process_open_fds">>, <<"gauge">>},
                {<<"throng_process_max_fds">>, <<"gauge">>},
                {<<"throng_tcp_listen_overflows_total">>, <<"counter">>},
                {<<"throng_tcp_listen_drops_total">>, <<"counter">>},
                {<<"throng_tcp_sockets">>, <<"gauge">>},
                {<<"throng_beam_scheduler_utilization">>, <<"gauge">>},
                {<<"throng_beam_run_queue">>, <<"gauge">>},
                {<<"throng_beam_processes">>, <<"gauge">>},
                {<<"throng_beam_process_limit">>, <<"gauge">>},
                {<<"throng_beam_ports">>, <<"gauge">>},
                {<<"throng_beam_port_limit">>, <<"gauge">>},
                {<<"throng_beam_memory_bytes">>, <<"gauge">>},
                {<<"throng_beam_gc_runs_total">>, <<"counter">>},
                {<<"throng_beam_gc_words_reclaimed_total">>, <<"counter">>},
                {<<"throng_beam_reductions_total">>, <<"counter">>},
                {<<"throng_sessions">>, <<"gauge">>},
                {<<"throng_connections">>, <<"gauge">>},
                {<<"throng_listener_connections">>, <<"gauge">>},
                {<<"throng_connections_accepted_total">>, <<"counter">>},
                {<<"throng_logins_total">>, <<"counter">>},
                {<<"throng_auth_failures_total">>, <<"counter">>},
                {<<"throng_stanzas_in_total">>, <<"counter">>},
                {<<"throng_stanzas_out_total">>, <<"counter">>},
                {<<"throng_bytes_received_total">>, <<"counter">>},
                {<<"throng_bytes_sent_total">>, <<"counter">>},
                {<<"throng_offline_stored_total">>, <<"counter">>},
                {<<"throng_offline_messages">>, <<"gauge">>},
                {<<"throng_route_latency_seconds">>, <<"histogram">>},
                {<<"throng_message_queue_total">>, <<"gauge">>},
                {<<"throng_message_queue_alarm">>, <<"gauge">>},
                {<<"throng_message_queue_alarm_threshold">>, <<"gauge">>},
                {<<"throng_stats_tick_seconds">>, <<"gauge">>}],
    [?assertEqual({Name, Type}, {Name, maps:get(type, maps:get(Name, F, #{type => missing}))})
     || {Name, Type} <- Expected],
    ?assertEqual(float(?ALARM), ?P:value(P, <<"throng_message_queue_alarm_threshold">>)),
    ?assert(?P:value(P, <<"throng_process_cpu_seconds_total">>, [{<<"mode">>, <<"user">>}]) > 0).

%% Each listener's connections, labelled with its port.
connections_per_listener(_) ->
    Port = integer_to_binary(?C:port()),
    _ = login_all(),
    wait_for(fun() ->
                     ?P:value(metrics(), <<"throng_listener_connections">>,
                              [{<<"listener">>, <<"1">>}, {<<"port">>, Port}]) =:= 3.0
             end, "3 connections on listener 1").

auth_failures_counted(_) ->
    F0 = ?P:value(metrics(), <<"throng_auth_failures_total">>),
    C = ?C:connect(#{}),
    _ = ?C:open_stream(C),
    ?assertNotEqual(ok, ?C:auth_plain(C, <<"alice">>, <<"wrong">>)),
    wait_for(fun() -> ?P:value(metrics(), <<"throng_auth_failures_total">>) >= F0 + 1 end,
             "an auth failure in /metrics").

%% The latency probes reach sessions and come back.
latency_probes_are_answered(_) ->
    _ = login_all(),
    P = wait_for(fun() ->
                         P1 = metrics(),
                         ?P:value(P1, <<"throng_route_probes_total">>,
                                  [{<<"result">>, <<"answered">>}]) >= 3.0 andalso P1
                 end, "3 probes answered"),
    ?assert(?P:value(P, <<"throng_route_latency_seconds_count">>) >= 3.0),
    ?assert(?P:value(P, <<"throng_route_latency_seconds_sum">>) > 0),
    L = wait_for(fun() ->
                         #{<<"latency">> := L1} = stats(),
                         is_number(maps:get(<<"p99">>, L1, null)) andalso L1
                 end, "a p99 latency in /stats"),
    ?assert(maps:get(<<"p50">>, L) =< maps:get(<<"p99">>, L)).

%%% HTTP

basic_auth_when_configured(_) ->
    Good = [{"authorization", "Basic " ++ base64:encode_to_string("admin:s3cret")}],
    Bad = [{"authorization", "Basic " ++ base64:encode_to_string("admin:nope")}],
    [begin
         {401, H, _} = http_get(Path, []),
         ?assertMatch("Basic " ++ _, proplists:get_value("www-authenticate", H)),
         {401, _, _} = http_get(Path, Bad),
         {200, _, _} = http_get(Path, Good)
     end || Path <- ["/metrics", "/stats", "/history", "/", "/dashboard.js"]].

unknown_paths_and_methods(_) ->
    {404, _, _} = http_get("/nope", []),
    {200, _, _} = http_get("/metrics?x=1", []),
    {ok, {{_, 405, _}, _, _}} =
        httpc:request(post, {url("/metrics"), [], "text/plain", "x"}, [{timeout, 5000}], []),
    {200, H, Html} = http_get("/", []),
    ?assertMatch("text/html" ++ _, proplists:get_value("content-type", H)),
    %% The page works offline: every script and style it loads is its own.
    ?assertEqual(nomatch, re:run(Html, "(src|href)=\"(https?:)?//")),
    {200, _, _} = http_get("/dashboard.js", []),
    {200, _, _} = http_get("/dashboard.css", []).

%%% HTTP connections: deadlines and a cap that cannot be starved

%% A hundred connections that each sent half a request (the cap is 8, the
%% deadlines far beyond the test) do not keep a complete request
%% out: it is answered 200, the oldest half-sent connections were closed to
%% make room, and the endpoint never holds more than the cap.
half_sent_requests_do_not_starve(_) ->
    Stalled = [begin
                   S = connect(),
                   ok = gen_tcp:send(S, <<"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ">>),
                   S
               end || _ <- lists:seq(1, 100)],
    #{held := Held} = throng_stats_httpd:info(),
    ?assert(Held =< 8),
    {200, _} = raw_request(<<"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n">>, 10000),
    {200, _} = raw_request(<<"GET /stats HTTP/1.1\r\nHost: x\r\n\r\n">>, 10000),
    #{evicted := Evicted, refused := 0} = throng_stats_httpd:info(),
    ?assert(Evicted >= 100 - 8),
    %% The first stalled connections were closed by the server.
    [?assertEqual(closed, wait_closed(S, 10000)) || S <- lists:sublist(Stalled, 10)],
    [gen_tcp:close(S) || S <- Stalled],
    %% httpc (keep-alive, its own pool) still gets through.
    {200, _, _} = http_get("/metrics", []).

%% A client that sends its headers a byte at a time never completes them
%% within stats.http_request_timeout (300 ms): it gets 408 and is closed,
%% although it keeps sending.
slowloris_closed_after_request_timeout(_) ->
    S = connect(),
    ok = gen_tcp:send(S, <<"GET /metrics HTTP/1.1\r\nHost: x\r\n">>),
    %% A byte every 50 ms, for up to 20 s (far beyond the deadline), until
    %% the server answers.
    Dribble = fun Loop(0) -> still_open;
                  Loop(N) ->
                      case gen_tcp:recv(S, 0, 50) of
                          {error, timeout} ->
                              _ = gen_tcp:send(S, <<"X">>),
                              Loop(N - 1);
                          {ok, First} ->
                              {ok, Rest} = recv_all(S, 10000),
                              <<First/binary, Rest/binary>>;
                          {error, Why} ->
                              Why
                      end
              end,
    Answer = Dribble(400),
    ?assertMatch(<<"HTTP/1.1 408 ", _/binary>>, Answer),
    %% A whole request still gets through.
    {200, _} = raw_request(<<"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n">>, 10000).

%% A kept-alive connection that sends nothing after its answer is closed
%% after stats.http_idle_timeout (300 ms), while a new one is served.
idle_keepalive_closed(_) ->
    S = connect(),
    ok = gen_tcp:send(S, <<"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n">>),
    {200, _} = recv_response(S, 10000),
    ?assertEqual(closed, wait_closed(S, 10000)),
    wait_for(fun() -> maps:get(held, throng_stats_httpd:info()) =:= 0 end, "no connection held"),
    {200, _} = raw_request(<<"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n">>, 10000).

%% One connection serves several requests, sent one after another and
%% pipelined; HEAD has GET's length and no body; Connection: close ends it.
keepalive_and_pipelining(_) ->
    S = connect(),
    ok = gen_tcp:send(S, <<"GET /stats HTTP/1.1\r\nHost: x\r\n\r\n">>),
    {200, Body} = recv_response(S, 10000),
    _ = jiffy:decode(Body, [return_maps]),
    Req = <<"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n">>,
    ok = gen_tcp:send(S, [Req, Req, <<"HEAD / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n">>]),
    {404, _} = recv_response(S, 10000),
    {404, _} = recv_response(S, 10000),
    {200, Headers} = recv_response_headers(S, 10000),
    ?assert(binary_to_integer(maps:get(<<"content-length">>, Headers)) > 0),
    ?assertEqual(closed, wait_closed(S, 10000)).

%% Malformed, oversized and unsupported requests get an answer and a close.
bad_requests_answered_and_closed(_) ->
    Cases = [{<<"NOT HTTP AT ALL\r\n\r\n">>, 400},
             {<<"GET /metrics HTTP/1.1\r\nHost: x\r\n", (binary:copy(<<"X-A: b\r\n">>, 100))/binary, "\r\n">>, 431},
             {<<"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n">>, 413},
             {<<"POST /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n">>, 411}],
    [begin
         S = connect(),
         ok = gen_tcp:send(S, Bytes),
         {ok, Answer} = recv_all(S, 10000),
         Prefix = <<"HTTP/1.1 ", (integer_to_binary(Code))/binary, " ">>,
         ?assertEqual({Code, Prefix}, {Code, binary:part(Answer, 0, min(byte_size(Answer), byte_size(Prefix)))})
     end || {Bytes, Code} <- Cases],
    %% A line longer than 8 KiB: the packet decoder gives up on the socket,
    %% which is closed without an answer.
    S1 = connect(),
    ok = gen_tcp:send(S1, <<"GET /", (binary:copy(<<"a">>, 20000))/binary, " HTTP/1.1\r\n\r\n">>),
    ?assertEqual(closed, wait_closed(S1, 10000)),
    %% A small body is read and dropped; the connection stays usable.
    S2 = connect(),
    ok = gen_tcp:send(S2, <<"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
                            "GET /nope HTTP/1.1\r\nHost: x\r\n\r\n">>),
    {405, _} = recv_response(S2, 10000),
    {404, _} = recv_response(S2, 10000),
    gen_tcp:close(S2).

%% Between ticks the collector sleeps hibernated, its heap cut to its live
%% state (what a tick leaves behind is garbage), and it still ticks.
collector_sleeps_between_ticks(_) ->
    Pid = whereis(throng_stats_collector),
    Ticks = fun() -> ticks(throng_stats:snapshot()) end,
    T0 = Ticks(),
    wait_for(fun() -> Ticks() >= T0 + 2 end, "two more ticks"),
    wait_for(fun() -> process_info(Pid, current_function) =:=
                          {current_function, {erlang, hibernate, 3}} end,
             "the collector hibernated between ticks"),
    wait_for(fun() -> Ticks() >= T0 + 3 end, "a tick after hibernating"),
    ?assertEqual(Pid, whereis(throng_stats_collector)).

ticks(#{series := Series}) ->
    hd([trunc(Raw) || {throng_stats_ticks, [], Raw, _, _} <- Series] ++ [0]);
ticks(_) ->
    0.

%%% The queue alarm: logged, exported, shown (page data and table)

%% A registered process that does not read its messages: found by the
%% per-second check of registered processes.
queue_alarm_registered_process(_) ->
    ok = capture_logs(),
    Sink = spawn(fun() -> receive stop -> ok end end),
    true = register(throng_stats_suite_sink, Sink),
    [Sink ! {junk, I} || I <- lists:seq(1, 4 * ?ALARM)],
    alarm_everywhere(<<"throng_stats_suite_sink">>, pid_bin(Sink)),
    exit(Sink, kill),
    alarm_cleared_everywhere().

%% A real session whose process is suspended while messages pile up: it
%% cannot report itself, so the rolling sweep must find it.
queue_alarm_suspended_session(_) ->
    ok = capture_logs(),
    [A, B, _] = login_all(),
    #jid{} = BJid = jid_of(?C:jid(B)),
    Pid = throng_sm:lookup(BJid),
    true = is_pid(Pid),
    ok = sys:suspend(Pid),
    [?C:send(A, ?C:message(?C:jid(B), <<"chat">>, integer_to_binary(I)))
     || I <- lists:seq(1, 4 * ?ALARM)],
    %% B's session may be younger than the sweep under way: found by the
    %% next one, up to two sweeps (5 s at this case's 250 ms ticks) away.
    alarm_everywhere(<<"throng_c2s:init/1">>, pid_bin(Pid), 25000),
    ok = sys:resume(Pid),
    [_ = ?C:recv_stanza(B) || _ <- lists:seq(1, 4 * ?ALARM)],
    alarm_cleared_everywhere().

alarm_everywhere(Name, Pid) ->
    alarm_everywhere(Name, Pid, ?WAIT_MS).

alarm_everywhere(Name, Pid, WaitMs) ->
    Deadline = erlang:monotonic_time(millisecond) + WaitMs,
    %% Exported as a metric, with the process among the longest queues...
    wait_for(fun() ->
                     P = metrics(),
                     ?P:value(P, <<"throng_message_queue_alarm">>) =:= 1.0 andalso
                         [L || {L, _} <- ?P:family(P, <<"throng_message_queue_top_length">>),
                               lists:member({<<"process">>, Name}, L),
                               lists:member({<<"pid">>, Pid}, L)] =/= []
             end, "the alarm in /metrics", Deadline),
    ?assert(?P:value(metrics(), <<"throng_message_queue_alarms_total">>) >= 1.0),
    %% ...in the JSON the page shows...
    #{<<"queues">> := Q, <<"chart">> := Chart} = stats(),
    ?assertEqual(true, maps:get(<<"alarm">>, Q)),
    ?assert(maps:get(<<"over">>, Q) >= 1),
    ?assert(lists:any(fun(#{<<"name">> := N, <<"pid">> := P}) -> N =:= Name andalso P =:= Pid end,
                      maps:get(<<"top">>, Q))),
    ?assert(maps:get(<<"queue_over">>, Chart) >= 1),
    %% ...in the terminal table...
    {0, Text0} = throng_ctl:run("stats", ["--once"]),
    Text = unicode:characters_to_binary(Text0),
    ?assertNotEqual(nomatch, binary:match(Text, <<"ALARM">>)),
    ?assertNotEqual(nomatch, binary:match(Text, Pid)),
    %% ...and logged.
    #{longest := Longest} = receive_log(message_queue_alarm),
    ?assert(lists:keymember(Pid, 1, Longest)).

alarm_cleared_everywhere() ->
    wait_for(fun() -> ?P:value(metrics(), <<"throng_message_queue_alarm">>) =:= 0.0 end,
             "the alarm cleared in /metrics"),
    wait_for(fun() -> maps:get(<<"alarm">>, maps:get(<<"queues">>, stats())) =:= false end,
             "the alarm cleared in /stats"),
    {0, Text} = throng_ctl:run("stats", ["--once"]),
    ?assertEqual(nomatch, string:find(Text, "ALARM")),
    _ = receive_log(message_queue_alarm_cleared),
    logger:remove_handler(?MODULE).

%%% bin/throng stats

ctl_stats_once(_) ->
    _ = login_all(),
    wait_for(fun() ->
                     {0, T} = throng_ctl:run("stats", ["--once"]),
                     re:run(T, "sessions \\(bound\\)\\s+3\\s") =/= nomatch
             end, "3 sessions in the table"),
    {0, Text} = throng_ctl:run("stats", []),
    [?assertNotEqual(nomatch, string:find(Text, S))
     || S <- ["logins/s", "stanzas in/s message", "scheduler utilization %", "resident memory",
              "open descriptors", "listen overflows/s", "Longest message queues",
              "Routing latency"]],
    {2, _} = throng_ctl:run("stats", ["--bogus"]),
    ?assert(lists:keymember("stats", 1, throng_ctl:commands())).

%% `stats' is throng_stats's own command, registered with throng_ctl while
%% the application runs: gone when it stops, back when it starts.
stats_command_comes_and_goes(_) ->
    ?assert(lists:keymember("stats", 1, throng_ctl:commands())),
    ok = application:stop(throng_stats),
    ?assertNot(lists:keymember("stats", 1, throng_ctl:commands())),
    {2, Unknown} = throng_ctl:run("stats", []),
    ?assertEqual("Unknown command: stats\n", lists:flatten(Unknown)),
    {ok, _} = application:ensure_all_started(throng_stats),
    wait_for(fun() -> is_map(throng_stats:snapshot()) end, "a snapshot"),
    {0, _} = throng_ctl:run("stats", ["--once"]).

%% The real command-line client, in a hidden node, against this node:
%% `stats --once' prints one table; `stats' redraws until stopped; `help'
%% lists the command the running node registered.
cli_stats_from_hidden_node(Config) ->
    _ = login_all(),
    wait_for(fun() -> re:run(throng_stats:text(), "sessions \\(bound\\)\\s+3\\s") =/= nomatch end,
             "3 sessions in the table"),
    Once = cli(["stats", "--once"], 30),
    ct:log("~ts", [Once]),
    ?assertMatch({match, _}, re:run(Once, "sessions \\(bound\\)\\s+3\\s")),
    ?assertEqual(nomatch, string:find(Once, "\e[2J")),
    Live = cli(["stats"], 4),
    ct:log("~ts", [Live]),
    %% Redrawn (screen cleared) more than once within a few seconds.
    ?assert(length(string:split(Live, "\e[H\e[2J", all)) >= 3),
    Help = cli(["help"], 30),
    ct:log("~ts", [Help]),
    ?assertNotEqual(nomatch, string:find(Help, "\n  stats [--once]            Live statistics (OS, "
                                               "BEAM, server, message queues), redrawn every "
                                               "second; --once prints one snapshot\n")),
    ?assertNotEqual(nomatch, string:find(Help, "\n  gc                        Write Mnesia's log")),
    ok = file:write_file(filename:join(?config(priv_dir, Config), "cli_stats.txt"), Once).

%% Messages to another node are counted as distribution traffic, and the
%% totals do not fall back when that node's connection ends.
dist_traffic_counted(_) ->
    {ok, Peer, Node} = peer:start_link(#{name => peer:random_name(), host => "127.0.0.1",
                                         longnames => true}),
    S0 = wait_for(fun() ->
                          S = stats(),
                          is_integer(V = series_value(S, <<"throng_beam_dist_nodes">>,
                                                      <<"value">>))
                              andalso V >= 1 andalso S
                  end, "a distribution connection"),
    Out0 = dist_messages(S0, <<"out">>),
    In0 = dist_messages(S0, <<"in">>),
    Bytes0 = series_value(S0, <<"throng_beam_dist_bytes">>, <<"value">>,
                          #{<<"direction">> => <<"out">>}),
    N = 500,
    [true = erpc:call(Node, erlang, garbage_collect, [], 5000) || _ <- lists:seq(1, N)],
    S1 = wait_for(fun() ->
                          S = stats(),
                          dist_messages(S, <<"out">>) >= Out0 + N andalso
                              dist_messages(S, <<"in">>) >= In0 + N andalso S
                  end, "the calls counted both ways"),
    ?assert(series_value(S1, <<"throng_beam_dist_bytes">>, <<"value">>,
                         #{<<"direction">> => <<"out">>}) > Bytes0),
    Out1 = dist_messages(S1, <<"out">>),
    ok = peer:stop(Peer),
    S2 = wait_for(fun() ->
                          S = stats(),
                          series_value(S, <<"throng_beam_dist_nodes">>, <<"value">>) =:= 0
                              andalso S
                  end, "no distribution connection"),
    ?assert(dist_messages(S2, <<"out">>) >= Out1),
    M = metrics(),
    ?assert(?P:value(M, <<"throng_beam_dist_messages_total">>, [{<<"direction">>, <<"out">>}])
            >= Out1).

dist_messages(S, Direction) ->
    series_value(S, <<"throng_beam_dist_messages">>, <<"value">>, #{<<"direction">> => Direction}).

distribute() ->
    case node() of
        nonode@nohost ->
            _ = os:cmd("epmd -daemon"),
            timer:sleep(300),
            Name = list_to_atom("throng_stats_ct_" ++ os:getpid() ++ "@127.0.0.1"),
            case net_kernel:start([Name, longnames]) of
                {ok, _} -> started;
                {error, Why} -> {skip, {no_distribution, Why}}
            end;
        _ ->
            ok
    end.

cli(Args, TimeoutS) ->
    Ebin = filename:dirname(code:which(throng_ctl_cli)),
    [_, Host] = string:split(atom_to_list(node()), "@"),
    Name = case lists:member($., Host) of
               true -> "-name throngctl-" ++ os:getpid() ++ "@" ++ Host;
               false -> "-sname throngctl-" ++ os:getpid()
           end,
    Cmd = io_lib:format("timeout ~b erl -noshell -noinput -hidden ~s "
                        "-setcookie ~s -boot start_clean -pa ~s -s throng_ctl_cli main "
                        "-extra ~s ~s 2>&1",
                        [TimeoutS, Name, erlang:get_cookie(), Ebin, node(),
                         lists:join(" ", Args)]),
    os:cmd(lists:flatten(Cmd)).

%%% The dashboard in a real browser

%% Headless Chromium loads the page, which fetches /history and polls
%% /stats; the DOM it dumps shows live data and charts with plotted points.
dashboard_renders_in_chromium(Config) ->
    case chromium() of
        false ->
            {skip, "chromium not installed (apt-get install chromium)"};
        Chromium ->
            _ = login_all(),
            wait_for(fun() -> length([S || S <- maps:get(<<"sessions">>, get_json("/history")),
                                           S =:= 3]) >= 3
                     end, "3 chart points with 3 sessions"),
            Priv = ?config(priv_dir, Config),
            Dom = browser(Chromium, Priv, ["--virtual-time-budget=8000", "--dump-dom"]),
            ok = file:write_file(filename:join(Priv, "dashboard.dom.html"), Dom),
            ?assertMatch({match, _}, re:run(Dom, "id=\"status\" data-state=\"live\"")),
            {match, [Updates]} = re:run(Dom, "data-updates=\"(\\d+)\"", [{capture, all_but_first, list}]),
            ?assert(list_to_integer(Updates) >= 2),
            ?assertMatch({match, _}, re:run(Dom, "id=\"v-sessions\">3<")),
            [begin
                 {match, [Points, Ink]} =
                     re:run(Dom, "id=\"" ++ Id ++ "\" data-points=\"(\\d+)\" data-ink=\"(-?\\d+)\"",
                            [{capture, all_but_first, list}]),
                 ct:log("~s: ~s points, ~s ink", [Id, Points, Ink]),
                 ?assert(list_to_integer(Points) >= 2),
                 ?assert(list_to_integer(Ink) > 0)
             end || Id <- ["chart-sessions", "chart-logins", "chart-stanzas", "chart-memory",
                           "chart-sched", "chart-queues"]],
            %% The metrics table was filled from /stats.
            ?assertMatch({match, _}, re:run(Dom, "<td[^>]*>throng_logins</td>")),
            Png = filename:join(Priv, "dashboard.png"),
            _ = browser(Chromium, Priv, ["--virtual-time-budget=8000", "--window-size=1400,2400",
                                         "--hide-scrollbars", "--screenshot=" ++ Png]),
            {ok, #{size := Size}} = file_size(Png),
            ?assert(Size > 10000),
            ct:log("<a href=\"~s\">dashboard screenshot</a>", [Png])
    end.

chromium() ->
    case os:getenv("CHROMIUM") of
        Path when is_list(Path), Path =/= "" -> Path;
        _ -> lists:foldl(fun(N, false) -> os:find_executable(N); (_, Found) -> Found end,
                         false, ["chromium", "chromium-browser", "google-chrome"])
    end.

browser(Chromium, Priv, Args) ->
    Profile = filename:join(Priv, "chromium-" ++ integer_to_list(erlang:unique_integer([positive]))),
    Cmd = lists:join(" ", ["timeout 90", Chromium, "--headless", "--no-sandbox", "--disable-gpu",
                           "--disable-background-networking", "--disable-component-update",
                           "--disable-sync", "--no-first-run", "--user-data-dir=" ++ Profile]
                     ++ Args ++ [url("/"), "2>/dev/null"]),
    os:cmd(lists:flatten(Cmd)).

file_size(Path) ->
    case file:read_file_info(Path) of
        {ok, Info} -> {ok, #{size => element(2, Info)}};
        Error -> Error
    end.

%%% Helpers

connect() ->
    {ok, S} = gen_tcp:connect({127, 0, 0, 1}, throng_stats:http_port(),
                              [binary, {active, false}], 5000),
    S.

%% One request on a new connection: the status and the body.
raw_request(Bytes, Ms) ->
    S = connect(),
    ok = gen_tcp:send(S, Bytes),
    R = recv_response(S, Ms),
    gen_tcp:close(S),
    R.

recv_response(S, Ms) ->
    {Code, Headers} = recv_response_headers(S, Ms),
    Body = case binary_to_integer(maps:get(<<"content-length">>, Headers, <<"0">>)) of
               0 -> <<>>;
               Len -> {ok, B} = gen_tcp:recv(S, Len, Ms), B
           end,
    {Code, Body}.

%% Reads a response's status line and headers with the HTTP packet decoder
%% (a HEAD response: everything there is).
recv_response_headers(S, Ms) ->
    ok = inet:setopts(S, [{packet, http_bin}]),
    {ok, {http_response, _, Code, _}} = gen_tcp:recv(S, 0, Ms),
    Headers = recv_headers(S, Ms, #{}),
    ok = inet:setopts(S, [{packet, raw}]),
    {Code, Headers}.

recv_headers(S, Ms, Acc) ->
    case gen_tcp:recv(S, 0, Ms) of
        {ok, {http_header, _, Name, _, Value}} ->
            N = string:lowercase(if is_atom(Name) -> atom_to_binary(Name); true -> Name end),
            recv_headers(S, Ms, Acc#{N => Value});
        {ok, http_eoh} ->
            Acc
    end.

%% Everything the server sends until it closes.
recv_all(S, Ms) ->
    recv_all(S, Ms, []).

recv_all(S, Ms, Acc) ->
    case gen_tcp:recv(S, 0, Ms) of
        {ok, B} -> recv_all(S, Ms, [Acc, B]);
        {error, closed} -> {ok, iolist_to_binary(Acc)};
        {error, econnreset} -> {ok, iolist_to_binary(Acc)};
        {error, timeout} -> {timeout, iolist_to_binary(Acc)}
    end.

%% closed once the server has closed the connection (whatever it sent
%% first is dropped), timeout if it is still open after Ms.
wait_closed(S, Ms) ->
    case recv_all(S, Ms) of
        {ok, _} -> closed;
        {timeout, _} -> timeout
    end.

login_all() ->
    [?C:login(U, <<"password">>, <<"res">>) || U <- [<<"alice">>, <<"bob">>, <<"carol">>]].

jid_of(Bin) ->
    {ok, J} = throng_jid:parse(Bin),
    J.

pid_bin(Pid) ->
    list_to_binary(pid_to_list(Pid)).

url(Path) ->
    "http://127.0.0.1:" ++ integer_to_list(throng_stats:http_port()) ++ Path.

http_get(Path, Headers) ->
    {ok, {{_, Code, _}, RespHeaders, Body}} =
        httpc:request(get, {url(Path), Headers}, [{timeout, 5000}], [{body_format, binary}]),
    {Code, RespHeaders, Body}.

metrics() ->
    {200, _, Body} = http_get("/metrics", []),
    ?P:parse(Body).

stats() ->
    get_json("/stats").

get_json(Path) ->
    {200, H, Body} = http_get(Path, []),
    "application/json" = proplists:get_value("content-type", H),
    jiffy:decode(Body, [return_maps]).

series_value(S, Name, Field) ->
    series_value(S, Name, Field, #{}).

series_value(#{<<"metrics">> := M}, Name, Field, Labels) ->
    case maps:get(Name, M, undefined) of
        #{<<"series">> := Series} ->
            case [X || #{<<"labels">> := L} = X <- Series, L =:= Labels] of
                [X | _] -> maps:get(Field, X);
                [] -> undefined
            end;
        undefined -> undefined
    end.

%% Polls until Fun returns something other than false (returned), or fails
%% after ?WAIT_MS naming what was awaited.
wait_for(Fun, What) ->
    wait_for(Fun, What, erlang:monotonic_time(millisecond) + ?WAIT_MS).

wait_for(Fun, What, Deadline) ->
    case Fun() of
        false ->
            case erlang:monotonic_time(millisecond) > Deadline of
                true -> ct:fail({timeout_waiting_for, What});
                false -> timer:sleep(100), wait_for(Fun, What, Deadline)
            end;
        Result ->
            Result
    end.

%%% Log capture: a logger handler that forwards events to the test process.

capture_logs() ->
    _ = logger:remove_handler(?MODULE),
    ok = logger:add_handler(?MODULE, ?MODULE, #{level => notice, config => #{pid => self()}}).

log(#{msg := {report, #{what := What} = Report}}, #{config := #{pid := Pid}}) ->
    Pid ! {stats_log, What, Report};
log(_, _) ->
    ok.

receive_log(What) ->
    receive
        {stats_log, What, Report} -> Report
    after ?WAIT_MS ->
        ct:fail({no_log_event, What})
    end.
