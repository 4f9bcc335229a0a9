%% Command-line options: typed values, defaults, messages naming the option.
-module(throng_bench_opts_tests).
-include_lib("eunit/include/eunit.hrl").

options_test() ->
    O = throng_bench_opts:parse("xmpp", ["--users", "500", "--rate=50", "--register",
                                         "--worker", "a@h", "--worker", "b@h",
                                         "--source-ips", "127.0.0.1-127.0.0.2",
                                         "--length", "90s", "--auth", "SCRAM-SHA-1"]),
    ?assertMatch(#{users := 500, rate := 50, register := true, worker_nodes := ["a@h", "b@h"],
                   source_ips := [{127, 0, 0, 1}, {127, 0, 0, 2}], length := 90000,
                   auth := 'scram-sha-1', scenario := "paper", users_per_vm := 18000}, O).

%% Several targets and several server pids: both options repeat; a port
%% range counts one target per port.
cluster_options_test() ->
    O = throng_bench_opts:parse("xmpp", ["--targets", "127.0.0.1:15301-15302",
                                         "--targets=127.0.0.1:15303",
                                         "--server-pid", "11", "--server-pid", "22"]),
    ?assertMatch(#{targets := [[{<<"127.0.0.1">>, 15301}, {<<"127.0.0.1">>, 15302}],
                               [{<<"127.0.0.1">>, 15303}]],
                   server_pid := [11, 22]}, O),
    %% neither given: empty lists (one server, nothing sampled)
    ?assertMatch(#{targets := [], server_pid := []}, throng_bench_opts:parse("xmpp", [])),
    ?assertMatch(#{server_pid := [7]}, throng_bench_opts:parse("http", ["--server-pid", "7"])).

option_errors_name_the_option_test() ->
    Err = fun(Args) ->
                  try throng_bench_opts:parse("xmpp", Args), none
                  catch throw:{usage, M} -> lists:flatten(M)
                  end
          end,
    ?assertEqual("option --users: expected a positive integer, got \"0\"", Err(["--users", "0"])),
    ?assertEqual("option --rate needs a value", Err(["--rate"])),
    ?assertEqual("unknown option --user for xmpp (see: throng-bench xmpp --help)",
                 Err(["--user", "5"])),
    ?assertEqual("option --tls: expected one of none, starttls, direct, got \"ssl\"", Err(["--tls", "ssl"])),
    ?assertEqual("unexpected argument \"paper\" for xmpp (options start with --)", Err(["paper"])),
    ?assertEqual("option --targets: expected HOST:PORT items separated by commas (a port range "
                 "HOST:P1-P2 counts one target per port; each target once), got \"h:1,h:1\"",
                 Err(["--targets", "h:1,h:1"])),
    ?assertEqual("option --server-pid: expected a positive integer, got \"x\"",
                 Err(["--server-pid", "x"])).

every_command_has_help_test() ->
    [?assertNotEqual(nomatch, string:find(lists:flatten(io_lib:format("~ts", [throng_bench_opts:help(C)])),
                                          "usage: throng-bench " ++ C))
     || {C, _} <- throng_bench_opts:commands()].
