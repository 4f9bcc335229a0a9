%% @doc Command-line options: every option of every subcommand declared once
%% with its type, default and help text; parsing and validation with one-line
%% messages that name the option, the value and what was expected.
-module(throng_bench_opts).

-export([parse/2, help/1, commands/0]).

-type type() :: int | pos_int | pos_number | duration | size | string | flag | ip_list
              | host_port | targets | int_list | {enum, [atom()]}
              | {repeat, string | pos_int | targets}.
-type opt() :: {Name :: string(), Key :: atom(), type(), Default :: term(), Help :: string()}.

%% @doc Subcommands and their one-line descriptions.
-spec commands() -> [{string(), string()}].
commands() ->
    [{"xmpp", "XMPP load test: simulated users following a scenario"},
     {"echo", "TCP round trips, one message in flight, message size doubling"},
     {"flow", "TCP one-way throughput to a discarding sink, message size doubling"},
     {"http", "short-lived HTTP/1.1 connections, one request per connection"},
     {"compare", "one xmpp scenario against several servers, one after another"},
     {"study", "the Erlang'07 factor study: a fresh node per setting, ramped to its limit"},
     {"echo-server", "run the built-in echo and sink servers"},
     {"http-server", "run the built-in HTTP server (backlog and accept delay settable)"},
     {"worker", "run a worker node that a controller on another host drives"},
     {"fuzz", "fuzz the XML stream parser and a running server with mutated client sessions"},
     {"soak-report", "the verdict of a bench/soak.sh run: memory drift, errors, lost messages"}].

-define(COMMON_OUT,
        [{"out", out, string, undefined, "write summary.json, timeseries.csv and report.html here"},
         {"server-pid", server_pid, {repeat, pos_int}, [],
          "OS pid of the server: sample its RSS and CPU from /proc each second "
          "(repeat for each node of a cluster, in the order of --targets)"},
         {"no-progress", no_progress, flag, false, "no live progress line on stderr"}]).

-define(XMPP_OPTS,
        [{"scenario", scenario, string, "paper", "built-in scenario (paper, smoke) or a YAML file"},
         {"host", host, string, undefined, "server address to connect to (scenario: server.host)"},
         {"port", port, pos_int, undefined, "server port (scenario: server.port)"},
         {"targets", targets, {repeat, targets}, [],
          "several servers (cluster nodes), e.g. 127.0.0.1:15301-15304 or "
          "h1:5222,h2:5222 (server.targets): user N goes to target N mod K"},
         {"domain", domain, string, undefined, "XMPP domain of the users (server.domain)"},
         {"tls", tls, {enum, [none, starttls, direct]}, undefined,
          "none, starttls or direct (XEP-0368: TLS from the first byte; server.tls)"},
         {"tls-resume", tls_resume, flag, false,
          "resume TLS with each user's session ticket at its next login (OTP ssl as the "
          "TLS client; server.tls_resume)"},
         {"auth", auth, {enum, [plain, 'scram-sha-1', 'scram-sha-256', 'scram-sha-1-plus', 'scram-sha-256-plus', fast]}, undefined,
          "SASL mechanism (server.auth); -plus: channel binding (tls-server-end-point); "
          "fast: SASL2 with Bind2 and XEP-0484 tokens; both over TLS"},
         {"users", users, pos_int, undefined,
          "users to launch, and the population size (arrival max_users, users.count)"},
         {"rate", rate, pos_number, undefined, "arrivals per second (the arrival phase's rate)"},
         {"length", length, duration, undefined, "session length of every user (e.g. 60s)"},
         {"keepalive", keepalive, duration, undefined, "whitespace keepalive interval"},
         {"duration", duration, duration, undefined,
          "stop the run after this long (default: arrivals + session length + margin)"},
         {"grace", grace, duration, undefined, "after the duration, time to end sessions"},
         {"password", password, string, undefined, "password pattern, %N = user number"},
         {"users-csv", csv, string, undefined, "CSV file of username,password (one per line)"},
         {"first", first, int, undefined, "number of the first user (users.first)"},
         {"contacts", contact_count, int, undefined, "roster size of the contact rule (even)"},
         {"register", register, flag, false, "register each user in-band (XEP-0077) first"},
         {"socket-buffer", socket_buffer, size, undefined,
          "inet driver receive buffer per user (scenario: socket_buffer, default 128)"},
         {"workers", workers, int, undefined,
          "worker VMs on this host (default: none up to --users-per-vm users, else enough)"},
         {"users-per-vm", users_per_vm, pos_int, 18000, "most simulated users in one VM"},
         {"worker", worker_nodes, {repeat, string}, [],
          "a remote worker node (repeat): throng-bench worker --name NODE"},
         {"cookie", cookie, string, undefined, "distribution cookie for --worker nodes"},
         {"source-ips", source_ips, ip_list, undefined,
          "source addresses, e.g. 127.0.0.1-127.0.0.8 (default: enough 127.0.0.x for the users)"},
         {"seed", seed, int, undefined, "random seed (default: from the clock)"}]
        ++ ?COMMON_OUT).

-define(ECHO_OPTS,
        [{"target", target, host_port, undefined,
          "HOST:PORT of an echo (echo) or discard (flow) server; default: built-in server"},
         {"min-size", min_size, size, 16, "smallest message size"},
         {"max-size", max_size, size, 1048576, "largest message size"},
         {"total", total, size, 4194304, "bytes moved per step (count = total / size)"},
         {"parallel", parallel, int_list, [1, 4], "socket counts to run, e.g. 1,4,16"},
         {"max-count", max_count, pos_int, 20000, "most round trips per step (echo)"},
         {"timeout", timeout, duration, 10000, "longest wait for an answer"},
         {"no-nodelay", no_nodelay, flag, false, "leave Nagle's algorithm on"},
         {"out", out, string, undefined, "write summary.json, results.csv and report.html here"}]).

-define(HTTP_OPTS,
        [{"url", url, string, undefined,
          "http://HOST:PORT/PATH to test; default: the built-in server"},
         {"concurrency", concurrency, pos_int, 10, "requests in flight (parallel loops)"},
         {"requests", requests, pos_int, undefined, "total requests (default 1000 without --duration)"},
         {"duration", duration, duration, undefined, "run this long instead of a request count"},
         {"timeout", timeout, duration, 5000, "connect + response deadline per request"},
         {"backlog", backlog, pos_int, 1024, "built-in server: listen backlog"},
         {"accept-delay", accept_delay, duration, 0, "built-in server: pause after each accept"},
         {"body-size", body_size, size, 64, "built-in server: response body size"},
         {"server-port", server_port, int, 0, "built-in server: port (0 = any free port)"},
         {"source-ips", source_ips, ip_list, undefined, "source addresses, e.g. 127.0.0.1-127.0.0.4"}]
        ++ ?COMMON_OUT).

%% @doc The options of a subcommand.
-spec spec(string()) -> [opt()].
spec("xmpp") -> ?XMPP_OPTS;
spec("compare") ->
    [{"server", servers, {repeat, string}, [],
      "NAME=COMMAND starting a server in the foreground (repeat for each server)"},
     {"stop", stops, {repeat, string}, [], "NAME=COMMAND stopping that server (default: SIGTERM)"},
     {"pid", pids, {repeat, string}, [],
      "NAME=COMMAND printing the server's pid (default: the started command's pid)"},
     {"ready-timeout", ready_timeout, duration, 60000, "wait this long for the port to open"},
     {"settle", settle, duration, 2000, "pause between the port opening and the run"}]
        ++ [O || O = {N, _, _, _, _} <- ?XMPP_OPTS, N =/= "server-pid"];
spec("study") ->
    [{"design", design, string, "paper", "built-in design (paper, smoke) or a YAML file"},
     {"out", out, string, undefined,
      "results directory (default: study-NAME); the same --out again resumes the study"},
     {"only", only, string, undefined, "run only these settings, e.g. baseline,sack_off"},
     {"repeats", repeats, pos_int, undefined, "repeats of every setting (default: the design's)"},
     {"no-ratio", no_ratio, flag, false, "skip the routed-messages vs TCP echo measurement"},
     {"report", report_only, flag, false,
      "only write the results again from the runs made (no run)"},
     {"no-progress", no_progress, flag, false, "no live progress line on stderr"}];
spec("echo") -> ?ECHO_OPTS;
spec("flow") -> ?ECHO_OPTS;
spec("http") -> ?HTTP_OPTS;
spec("echo-server") ->
    [{"port", port, int, 7007, "echo port"},
     {"sink-port", sink_port, int, undefined, "sink (discard) port (default: port + 1)"},
     {"ip", ip, string, "127.0.0.1", "address to listen on"},
     {"backlog", backlog, pos_int, 1024, "listen backlog"}];
spec("http-server") ->
    [{"port", port, int, 8080, "port"},
     {"ip", ip, string, "127.0.0.1", "address to listen on"},
     {"backlog", backlog, pos_int, 1024, "listen backlog"},
     {"accept-delay", accept_delay, duration, 0, "pause after each accept"},
     {"body-size", body_size, size, 64, "response body size"}];
spec("worker") ->
    [{"name", name, string, undefined, "node name, e.g. bench1@10.0.0.2 (required)"},
     {"cookie", cookie, string, undefined, "distribution cookie (required)"}];
spec("fuzz") ->
    [{"parser", parser, int, 10000, "parser-level inputs (in this VM)"},
     {"socket", socket, int, 0, "socket-level inputs (sent to the server at --host:--port)"},
     {"seed", seed, int, undefined, "seed; input N of a seed is always the same (default: the clock)"},
     {"host", host, string, "127.0.0.1", "server address (socket level)"},
     {"port", port, pos_int, 5222, "server port (socket level)"},
     {"domain", domain, string, "localhost", "XMPP domain of the sessions"},
     {"users", users, pos_int, 1000, "sessions log in as user1..userN"},
     {"password", password, string, "password", "their password"},
     {"concurrency", concurrency, pos_int, 32, "socket-level connections in flight"},
     {"quiet", quiet_ms, duration, 200, "after an input, wait this long for the server to answer"},
     {"stall", stall, duration, 30000, "an input running longer than this is a loop (a failure)"},
     {"time-limit", time_limit, duration, 3600000, "stop after this long in all"},
     {"server-log", server_log, string, undefined,
      "the server's log file: error lines during the run are failures"},
     {"stats-port", stats_port, pos_int, undefined,
      "the server's statistics port: process count before and after (leak check)"},
     {"leak-slack", leak_slack, int, 50, "processes more at the end than at the start that are allowed"},
     {"no-fxml", no_fxml, flag, false, "do not compare with fast_xml"},
     {"known", known, {repeat, string}, [],
      "a failure kind counted apart, not failing the run (repeat), e.g. reset_silently"},
     {"out", out, string, "fuzz-out", "summary.json and reproducers/ go here"},
     {"replay", replay, string, undefined, "run one reproducer file (.term) again and exit"},
     {"no-progress", no_progress, flag, false, "no live progress line on stderr"}];
spec("soak-report") ->
    [{"dir", dir, string, undefined, "the soak run's directory (samples.csv, main/, drain/)"},
     {"steady-from", steady_from_s, int, 0, "seconds into the run when every user is online"},
     {"steady-to", steady_to_s, int, undefined, "seconds into the run when users start leaving"},
     {"drift-target", drift_target, pos_number, 2, "largest memory drift that passes, percent"}];
spec(_) -> [].

%% @doc Parse the arguments of a subcommand into a map of typed values
%% (defaults filled in). Throws {usage, Message}.
-spec parse(string(), [string()]) -> #{atom() => term()}.
parse(Cmd, Args) ->
    Spec = spec(Cmd),
    Defaults = maps:from_list([{K, D} || {_, K, _, D, _} <- Spec, D =/= undefined]),
    parse(Cmd, Spec, Args, Defaults).

parse(_Cmd, _Spec, [], Acc) -> Acc;
parse(Cmd, Spec, ["--" ++ Opt | Rest], Acc) ->
    {Name, Inline} = case string:split(Opt, "=") of
                         [N] -> {N, none};
                         [N, IV] -> {N, IV}
                     end,
    case lists:keyfind(Name, 1, Spec) of
        false ->
            usage("unknown option --~s for ~s (see: throng-bench ~s --help)", [Name, Cmd, Cmd]);
        {_, Key, flag, _, _} when Inline =:= none -> parse(Cmd, Spec, Rest, Acc#{Key => true});
        {_, _, flag, _, _} -> usage("option --~s takes no value", [Name]);
        {_, Key, Type, _, _} ->
            {Raw, Rest1} = case {Inline, Rest} of
                               {none, [V1 | R]} -> {V1, R};
                               {none, []} -> usage("option --~s needs a value", [Name]);
                               {V2, _} -> {V2, Rest}
                           end,
            Val = value(Name, Type, Raw),
            Acc1 = case Type of
                       {repeat, _} -> Acc#{Key => maps:get(Key, Acc, []) ++ [Val]};
                       _ -> Acc#{Key => Val}
                   end,
            parse(Cmd, Spec, Rest1, Acc1)
    end;
parse(Cmd, _Spec, [Arg | _], _Acc) ->
    usage("unexpected argument \"~ts\" for ~s (options start with --)", [Arg, Cmd]).

value(Name, int, Raw) ->
    case string:to_integer(Raw) of
        {N, ""} when N >= 0 -> N;
        _ -> bad(Name, "a non-negative integer", Raw)
    end;
value(Name, pos_int, Raw) ->
    case string:to_integer(Raw) of
        {N, ""} when N > 0 -> N;
        _ -> bad(Name, "a positive integer", Raw)
    end;
value(Name, pos_number, Raw) ->
    case throng_bench_units:parse_number(Raw) of
        {ok, N} when N > 0 -> N;
        _ -> bad(Name, "a positive number", Raw)
    end;
value(Name, duration, Raw) ->
    case throng_bench_units:parse_duration(Raw) of
        {ok, Ms} -> Ms;
        error -> bad(Name, "a duration such as 500ms, 30s, 5m or 1h", Raw)
    end;
value(Name, size, Raw) ->
    case throng_bench_units:parse_size(Raw) of
        {ok, N} when N > 0 -> N;
        _ -> bad(Name, "a size such as 64, 4k or 1M", Raw)
    end;
value(_Name, string, Raw) -> Raw;
value(Name, {repeat, T}, Raw) -> value(Name, T, Raw);
value(Name, ip_list, Raw) ->
    case throng_bench_units:parse_ip_range(Raw) of
        {ok, Ips} when Ips =/= [] -> Ips;
        _ -> bad(Name, "addresses such as 127.0.0.1-127.0.0.8 or 10.0.0.1,10.0.0.2", Raw)
    end;
value(Name, targets, Raw) ->
    case throng_bench_targets:parse(Raw) of
        {ok, Ts} -> Ts;
        error -> bad(Name, "HOST:PORT items separated by commas (a port range HOST:P1-P2 "
                     "counts one target per port; each target once)", Raw)
    end;
value(Name, host_port, Raw) ->
    case throng_bench_units:parse_host_port(Raw, 7) of
        {ok, HP} -> HP;
        error -> bad(Name, "HOST:PORT", Raw)
    end;
value(Name, int_list, Raw) ->
    try [begin {N, ""} = string:to_integer(string:trim(P)), true = N > 0, N end
         || P <- string:split(Raw, ",", all)]
    catch _:_ -> bad(Name, "a comma-separated list of positive integers such as 1,4,16", Raw)
    end;
value(Name, {enum, Allowed}, Raw) ->
    case [A || A <- Allowed, atom_to_list(A) =:= string:lowercase(Raw)] of
        [A] -> A;
        [] -> bad(Name, "one of " ++ lists:join(", ", [atom_to_list(A) || A <- Allowed]), Raw)
    end.

-spec bad(string(), iodata(), string()) -> no_return().
bad(Name, Expected, Raw) ->
    usage("option --~s: expected ~ts, got \"~ts\"", [Name, Expected, Raw]).

-spec usage(string(), [term()]) -> no_return().
usage(Fmt, Args) -> throw({usage, io_lib:format(Fmt, Args)}).

%% @doc Help text of a subcommand.
-spec help(string()) -> iodata().
help(Cmd) ->
    Desc = proplists:get_value(Cmd, commands(), ""),
    ["usage: throng-bench ", Cmd, " [OPTIONS]\n", Desc, "\n\noptions:\n",
     [io_lib:format("  --~-22s ~ts~ts~n",
                    [case T of flag -> N; _ -> N ++ " " ++ metavar(T) end, H,
                     case D of
                         undefined -> "";
                         [] -> "";
                         false -> "";
                         _ -> io_lib:format(" [default: ~ts]", [show_default(T, D)])
                     end])
      || {N, _K, T, D, H} <- spec(Cmd)],
     "\ndocs/bench.md describes every option and every number of the results.\n"].

metavar(int) -> "N";
metavar(pos_int) -> "N";
metavar(pos_number) -> "X";
metavar(duration) -> "D";
metavar(size) -> "BYTES";
metavar(ip_list) -> "IPS";
metavar(host_port) -> "HOST:PORT";
metavar(targets) -> "HOST:PORT,...";
metavar({repeat, T}) -> metavar(T);
metavar(int_list) -> "N,N";
metavar({enum, _}) -> "NAME";
metavar(_) -> "S".

show_default(duration, D) -> throng_bench_units:format_ms(D);
show_default(size, D) -> throng_bench_units:format_bytes(D);
show_default(int_list, L) -> lists:join(",", [integer_to_list(X) || X <- L]);
show_default(_, D) when is_list(D) -> D;
show_default(_, D) -> io_lib:format("~p", [D]).
