%% @doc The doctor's checks (throng_doctor:findings/2, report/3) on facts
%% given by hand: each limit's capacity, its severity against a target,
%% the fix it names, and the exit status.
-module(throng_doctor_tests).

-include_lib("eunit/include/eunit.hrl").

-define(D, throng_doctor).

%% This machine's kind: 20,000 descriptors, hard and soft.
facts() ->
    #{mode => node, fd_soft => 20000, fd_hard => 20000, somaxconn => 65535, syn_backlog => 65535,
      port_range => [1024, 65535], tcp_mem => [287898, 383867, 575796],
      tcp_rmem => [4096, 131072, 33554432], tcp_wmem => [4096, 16384, 4194304], tw_reuse => 2,
      conntrack_max => 262144, conntrack_count => 10, overcommit => 0, thp => madvise,
      mem_available => 20 * 1024 * 1024 * 1024, page_size => 4096,
      listeners => [#{port => 5222, backlog => 65535, max_connections => infinity,
                      starttls => optional, direct_tls => false}],
      process_limit => 2097152, process_count => 500, port_limit => 1048576, port_count => 50,
      beam_memory => 0, bind_type => unbound, schedulers => 2, dist_buf_kb => 32768,
      members => 0}.

find(Check, Findings) ->
    [F] = [F || #{check := C} = F <- Findings, string:prefix(C, Check) =/= nomatch],
    F.

fd_hard_limit_caps_a_large_target_test() ->
    Fs = ?D:findings(facts(), 100000),
    #{severity := error, capacity := 19800, fix := Fix} = find("file descriptors", Fs),
    ?assertNotEqual(nomatch, string:find(Fix, "more nodes")),
    {Code, Text} = ?D:report(facts(), 100000, "test"),
    ?assertEqual(1, Code),
    Flat = lists:flatten(io_lib:format("~s", [Text])),
    ?assertNotEqual(nomatch, string:find(Flat, "19800 sessions, set by file descriptors")).

a_target_below_every_limit_passes_test() ->
    Fs = ?D:findings(facts(), 10000),
    ?assertEqual([], [F || #{severity := error} = F <- Fs]),
    ?assertMatch(#{severity := ok}, find("file descriptors", Fs)),
    ?assertMatch({0, _}, ?D:report(facts(), 10000, "test")).

near_the_limit_warns_test() ->
    ?assertMatch(#{severity := warn}, find("file descriptors", ?D:findings(facts(), 19000))).

soft_below_hard_says_raise_the_soft_limit_test() ->
    F = (facts())#{fd_soft => 1024},
    #{severity := error, capacity := 824, fix := Fix} = find("file descriptors", ?D:findings(F, 5000)),
    ?assertNotEqual(nomatch, string:find(Fix, "ulimit -n 20000")).

no_target_reports_capacity_only_test() ->
    Fs = ?D:findings(facts(), undefined),
    ?assertEqual([], [F || #{severity := error} = F <- Fs]),
    ?assertMatch(#{severity := info, capacity := 19800}, find("file descriptors", Fs)),
    ?assertMatch({0, _}, ?D:report(facts(), undefined, "test")).

finite_max_connections_is_the_target_test() ->
    F = (facts())#{listeners => [#{port => 5222, backlog => 1024, max_connections => 50000},
                                 #{port => 5223, backlog => 1024, max_connections => 10000}]},
    %% 60,000 configured: more than the descriptors allow.
    ?assertMatch({1, _}, ?D:report(F, undefined, "test")).

runtime_limits_test() ->
    F = (facts())#{process_limit => 32768, port_limit => 65536},
    Fs = ?D:findings(F, 100000),
    ?assertMatch(#{severity := error, capacity := 30768}, find("Erlang processes", Fs)),
    ?assertMatch(#{severity := error}, find("Erlang ports", Fs)).

%% On the socket backend a session holds no port but a second process.
socket_backend_needs_processes_not_ports_test() ->
    Socket = #{port => 5222, backlog => 1024, max_connections => infinity, inet_backend => socket},
    F = (facts())#{process_limit => 32768, port_limit => 65536, listeners => [Socket]},
    Fs = ?D:findings(F, 100000),
    ?assertMatch(#{severity := error, capacity := 15384}, find("Erlang processes", Fs)),
    ?assertMatch(#{severity := ok, capacity := unlimited}, find("Erlang ports", Fs)),
    %% One listener on the inet driver still needs a port per session.
    Mixed = F#{listeners => [Socket, Socket#{port => 5223, inet_backend => inet}]},
    ?assertMatch(#{severity := error}, find("Erlang ports", ?D:findings(Mixed, 100000))).

kernel_settings_test() ->
    F = (facts())#{somaxconn => 4096, thp => always, overcommit => 2, conntrack_max => 1000,
                   members => 2, dist_buf_kb => 1024},
    Fs = ?D:findings(F, 5000),
    #{severity := warn, fix := Fix} = find("listen backlog", Fs),
    ?assertNotEqual(nomatch, string:find(Fix, "net.core.somaxconn=65535")),
    ?assertMatch(#{severity := warn}, find("transparent huge pages", Fs)),
    ?assertMatch(#{severity := warn}, find("memory overcommit", Fs)),
    ?assertMatch(#{severity := error}, find("conntrack", Fs)),
    ?assertMatch(#{severity := warn}, find("distribution buffer", Fs)),
    %% No conntrack module: nothing to cap.
    ?assertMatch(#{severity := ok}, find("conntrack", ?D:findings(F#{conntrack_max => absent}, 5000))).

memory_test() ->
    F = (facts())#{mem_available => 100 * 1024 * 1024},
    ?assertMatch(#{severity := error}, find("memory available", ?D:findings(F, 100000))),
    %% TLS sessions cost more.
    Tls = F#{listeners => [#{port => 5223, backlog => 10, max_connections => infinity,
                             direct_tls => true}]},
    #{capacity := Plain} = find("memory available", ?D:findings(F, undefined)),
    #{capacity := WithTls} = find("memory available", ?D:findings(Tls, undefined)),
    ?assert(WithTls < Plain),
    %% So do sessions on the socket backend.
    Socket = F#{listeners => [#{port => 5222, backlog => 10, max_connections => infinity,
                                inet_backend => socket}]},
    #{capacity := OnSocket} = find("memory available", ?D:findings(Socket, undefined)),
    ?assert(OnSocket < Plain).

parse_args_test() ->
    ?assertEqual({ok, undefined}, ?D:parse_args([])),
    ?assertEqual({ok, 5000}, ?D:parse_args(["--target", "5000"])),
    ?assertMatch({error, _}, ?D:parse_args(["--target", "many"])),
    ?assertMatch({error, _}, ?D:parse_args(["--target", "0"])),
    ?assertMatch({error, _}, ?D:parse_args(["--bogus"])).
