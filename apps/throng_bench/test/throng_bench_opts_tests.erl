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
    ?assertEqual("option --tls: expected one of none, starttls, got \"ssl\"", Err(["--tls", "ssl"])),
    ?assertEqual("unexpected argument \"paper\" for xmpp (options start with --)", Err(["paper"])).

every_command_has_help_test() ->
    [?assertNotEqual(nomatch, string:find(lists:flatten(io_lib:format("~ts", [throng_bench_opts:help(C)])),
                                          "usage: throng-bench " ++ C))
     || {C, _} <- throng_bench_opts:commands()].
