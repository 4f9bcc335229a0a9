%% echo, flow and http against the built-in servers, and against servers that
%% refuse, reset or stall connections. Assertions are about behaviour and
%% consistency (counts, error types, files), never about absolute timings.
-module(throng_bench_tcp_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([all/0, init_per_suite/1, end_per_suite/1, suite/0]).
-export([echo_builtin/1, flow_builtin/1, echo_unreachable/1, echo_stalled_server/1,
         http_short_connections/1, http_backlog_overflow/1, http_unreachable/1,
         http_resetting_server/1, http_duration/1, cli_bad_options/1]).

suite() -> [{timetrap, {minutes, 3}}].

all() ->
    [echo_builtin, flow_builtin, echo_unreachable, echo_stalled_server,
     http_short_connections, http_backlog_overflow, http_unreachable, http_resetting_server,
     http_duration, cli_bad_options].

init_per_suite(Config) ->
    {ok, _} = application:ensure_all_started(crypto),
    Config.

end_per_suite(_Config) -> ok.

echo_opts(Dir) ->
    #{min_size => 16, max_size => 4096, total => 65536, parallel => [1, 3], max_count => 500,
      timeout => 5000, nodelay => true, out => Dir}.

%% @doc echo against the built-in server: one row per size and socket count,
%% every round trip timed, files written.
echo_builtin(Config) ->
    Dir = filename:join(?config(priv_dir, Config), "echo"),
    {ok, #{rows := Rows, status := ok}} = throng_bench_echo:run(echo, echo_opts(Dir)),
    Sizes = throng_bench_echo:sizes(16, 4096),
    ?assertEqual(length(Sizes) * 2, length(Rows)),
    [begin
         #{count := C, size := S, sockets := N, bytes := B, rtt_us := #{count := HC}} = R,
         ?assertEqual(C * S, B),
         ?assertEqual(C, HC),
         ?assertEqual(0, C rem N)
     end || R <- Rows],
    Json = jiffy:decode(read(Dir, "summary.json"), [return_maps]),
    ?assertEqual(<<"echo">>, maps:get(<<"command">>, Json)),
    ?assertEqual(length(Rows), length(maps:get(<<"rows">>, Json))),
    Csv = binary:split(read(Dir, "results.csv"), <<"\n">>, [global, trim]),
    ?assertEqual(length(Rows) + 1, length(Csv)),
    Html = read(Dir, "report.html"),
    ?assertEqual(2, count(Html, <<"<svg">>)).

%% @doc flow against the built-in sink: every byte is accounted for.
flow_builtin(Config) ->
    Dir = filename:join(?config(priv_dir, Config), "flow"),
    {ok, #{rows := Rows}} = throng_bench_echo:run(flow, echo_opts(Dir)),
    ?assertEqual(length(throng_bench_echo:sizes(16, 4096)) * 2, length(Rows)),
    [?assertMatch(#{approximate := false}, R) || R <- Rows],
    [?assertEqual(C * S, B) || #{count := C, size := S, bytes := B} <- Rows],
    ?assert(filelib:is_file(filename:join(Dir, "report.html"))).

%% @doc A port nobody listens on: a clear error, partial results written.
echo_unreachable(Config) ->
    Dir = filename:join(?config(priv_dir, Config), "echo_unreachable"),
    Port = free_port(),
    {error, #{error := Msg, rows := []}} =
        throng_bench_echo:run(echo, (echo_opts(Dir))#{target => {"127.0.0.1", Port}}),
    ?assertNotEqual(nomatch, string:find(Msg, "cannot connect")),
    ?assert(filelib:is_file(filename:join(Dir, "summary.json"))).

%% @doc A server that accepts and never answers: the step times out, the run
%% ends with an error instead of hanging.
echo_stalled_server(Config) ->
    {Port, Stop} = stalled_server(),
    Dir = filename:join(?config(priv_dir, Config), "echo_stalled"),
    try
        {error, #{error := Msg}} =
            throng_bench_echo:run(echo, (echo_opts(Dir))#{target => {"127.0.0.1", Port},
                                                          timeout => 500}),
        ?assertNotEqual(nomatch, string:find(Msg, "no answer"))
    after Stop()
    end.

%% @doc Short-lived connections against the built-in HTTP server: every
%% request answered, both histograms filled, one CSV row per second.
http_short_connections(Config) ->
    Dir = filename:join(?config(priv_dir, Config), "http_ok"),
    {complete, S} = throng_bench_http:run(http_opts(Dir, #{requests => 500, concurrency => 20})),
    #{requests := #{total := 500, ok := 500, failed := 0, bad_status := 0},
      latency_ms := #{connect := #{count := 500}, response := #{count := 500}},
      verdict := #{ok := true}} = S,
    Json = jiffy:decode(read(Dir, "summary.json"), [return_maps]),
    ?assertMatch(#{<<"requests">> := #{<<"total">> := 500}}, Json),
    [Header | Lines] = binary:split(read(Dir, "timeseries.csv"), <<"\n">>, [global, trim]),
    ?assertEqual(length(throng_bench_out:csv_columns()),
                 length(binary:split(Header, <<",">>, [global]))),
    ?assert(length(Lines) >= 1),
    ?assert(count(read(Dir, "report.html"), <<"<svg">>) >= 3).

%% @doc The listen-backlog effect: a backlog of 1 and a server that accepts
%% 20 connections a second, 40 clients with a 1 s deadline: requests fail
%% (timeouts, resets or refusals), and every request is either answered or
%% counted as an error.
http_backlog_overflow(Config) ->
    Dir = filename:join(?config(priv_dir, Config), "http_backlog"),
    {_, S} = throng_bench_http:run(http_opts(Dir, #{requests => 200, concurrency => 40,
                                                    backlog => 1, accept_delay => 50,
                                                    timeout => 1000})),
    #{requests := #{total := 200, ok := Ok, failed := Failed},
      errors := #{by_type := ByType}, verdict := #{ok := false}} = S,
    ct:log("ok ~p failed ~p by type ~p", [Ok, Failed, ByType]),
    ?assert(Failed > 0),
    ?assertEqual(200, Ok + Failed),
    ?assertEqual(Failed, maps:get(timeout, ByType) + maps:get(econnreset, ByType)
                 + maps:get(econnrefused, ByType) + maps:get(closed, ByType)).

%% @doc Nothing listening: the run is aborted at once with a clear message,
%% and summary.json says so.
http_unreachable(Config) ->
    Dir = filename:join(?config(priv_dir, Config), "http_unreachable"),
    Port = free_port(),
    {aborted, #{error := Msg}} =
        throng_bench_http:run(http_opts(Dir, #{url => "http://127.0.0.1:" ++ integer_to_list(Port)
                                                   ++ "/"})),
    ?assertNotEqual(nomatch, string:find(Msg, "connection refused")),
    ?assertMatch(#{<<"status">> := <<"aborted">>},
                 jiffy:decode(read(Dir, "summary.json"), [return_maps])).

%% @doc A server that resets every connection: every request counted as an
%% error of type econnreset or closed; the run completes.
http_resetting_server(Config) ->
    {Port, Stop} = resetting_server(),
    Dir = filename:join(?config(priv_dir, Config), "http_reset"),
    try
        {complete, S} =
            throng_bench_http:run(http_opts(Dir, #{requests => 50, concurrency => 5,
                                                   url => "http://127.0.0.1:" ++
                                                       integer_to_list(Port) ++ "/"})),
        #{requests := #{total := 50, ok := 0, failed := 50}, errors := #{by_type := B}} = S,
        ?assertEqual(50, maps:get(econnreset, B) + maps:get(closed, B))
    after Stop()
    end.

%% @doc A run bounded by time instead of a request count stops by itself.
http_duration(Config) ->
    Dir = filename:join(?config(priv_dir, Config), "http_duration"),
    {Status, #{requests := #{total := T, failed := 0}}} =
        throng_bench_http:run(http_opts(Dir, #{duration => 2000, concurrency => 4})),
    ?assert(Status =:= stopped orelse Status =:= complete),
    ?assert(T > 0).

%% @doc Bad options give exit status 2; an unreachable target gives 3.
cli_bad_options(_Config) ->
    ?assertEqual(2, throng_bench_cli:run(["echo", "--bogus"])),
    ?assertEqual(2, throng_bench_cli:run(["http", "--concurrency", "many"])),
    ?assertEqual(2, throng_bench_cli:run(["nosuchcommand"])),
    ?assertEqual(2, throng_bench_cli:run(["xmpp", "--scenario", "/nonexistent.yml"])),
    ?assertEqual(3, throng_bench_cli:run(["echo", "--target",
                                          "127.0.0.1:" ++ integer_to_list(free_port()),
                                          "--max-size", "64"])),
    ?assertEqual(0, throng_bench_cli:run(["help"])).

%% helpers

http_opts(Dir, Extra) ->
    maps:merge(#{concurrency => 10, timeout => 5000, backlog => 1024, accept_delay => 0,
                 body_size => 64, source_ips => [any], out => Dir, progress => false}, Extra).

read(Dir, File) ->
    {ok, B} = file:read_file(filename:join(Dir, File)),
    B.

count(Bin, Pat) -> length(binary:matches(Bin, Pat)).

free_port() ->
    {ok, L} = gen_tcp:listen(0, []),
    {ok, P} = inet:port(L),
    gen_tcp:close(L),
    P.

%% Accepts connections and holds them without a word.
stalled_server() ->
    Self = self(),
    Pid = spawn(fun() ->
                        {ok, L} = gen_tcp:listen(0, [binary, {active, false}]),
                        {ok, P} = inet:port(L),
                        Self ! {port, P},
                        hold(L, [])
                end),
    receive {port, P} -> {P, fun() -> exit(Pid, kill) end} end.

hold(L, Acc) ->
    case gen_tcp:accept(L) of
        {ok, S} -> hold(L, [S | Acc]);
        _ -> ok
    end.

%% Accepts connections and resets them (SO_LINGER 0 then close).
resetting_server() ->
    Self = self(),
    Pid = spawn(fun() ->
                        {ok, L} = gen_tcp:listen(0, [binary, {active, false}]),
                        {ok, P} = inet:port(L),
                        Self ! {port, P},
                        reset_loop(L)
                end),
    receive {port, P} -> {P, fun() -> exit(Pid, kill) end} end.

reset_loop(L) ->
    case gen_tcp:accept(L) of
        {ok, S} ->
            ok = inet:setopts(S, [{linger, {true, 0}}]),
            _ = gen_tcp:recv(S, 0, 1000),
            gen_tcp:close(S),
            reset_loop(L);
        _ -> ok
    end.
