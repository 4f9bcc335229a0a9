%% @doc The fuzzer in CI: a few thousand mutated inputs through Throng's
%% stream parser and a thousand mutated client sessions over real sockets to
%% a Throng started in this node; and the fuzzer's own oracles, shown to
%% catch what they are meant to catch (a silent close, a reset, a log error).
%% bench/fuzz.sh runs the same with a million inputs against a release.
-module(fuzz_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([all/0, init_per_testcase/2, end_per_testcase/2]).
-export([inputs_are_deterministic/1, chunks_join_to_the_input/1,
         parser_survives_mutated_streams/1, sessions_over_sockets_end_with_stream_errors/1,
         silent_close_is_a_failure/1, stream_error_close_is_fine/1,
         log_errors_are_failures/1, reproducer_replays/1]).

-define(USERS, 100).
%% No known server issue: after a stream error, the client's stream end or
%% a failed TLS handshake the server drains the client's input before it
%% closes (throng_transport:close_after_error/1), so no reset destroys what
%% it wrote. Before that, 2.15% of the socket inputs ended in a reset
%% (about 21 of these 1,000); after it, none in 20,000 of the same seed.
-define(KNOWN, []).
-define(CTX, #{domain => <<"localhost">>, users => ?USERS, password => <<"password">>}).

all() ->
    [inputs_are_deterministic, chunks_join_to_the_input, parser_survives_mutated_streams,
     sessions_over_sockets_end_with_stream_errors, silent_close_is_a_failure,
     stream_error_close_is_fine, log_errors_are_failures, reproducer_replays].

init_per_testcase(TC, Config) when TC =:= sessions_over_sockets_end_with_stream_errors;
                                   TC =:= log_errors_are_failures ->
    %% Sessions kept for resumption go after 1 s, so that the leak check
    %% can wait for them; no delay after failed logins (all from 127.0.0.1).
    throng_ct:start(Config, #{auth => #{max_failure_delay => 0, scram_iterations => 16},
                              stream_management => #{resume_timeout => 1}}),
    {ok, ?USERS} = throng_auth:bulk_register(<<"localhost">>, <<"user">>, ?USERS,
                                             <<"password">>, 18),
    [#{port := Port} | _] = throng_info:listeners(),
    Log = filename:join(?config(priv_dir, Config), atom_to_list(TC) ++ "-errors.log"),
    ok = logger:add_handler(fuzz_errors, logger_std_h,
                            #{level => error, config => #{file => Log},
                              formatter => {logger_formatter,
                                            #{single_line => true,
                                              template => [time, " ", level, " ", msg, "\n"]}}}),
    [{port, Port}, {log, Log} | Config];
init_per_testcase(_TC, Config) ->
    Config.

end_per_testcase(TC, _Config) when TC =:= sessions_over_sockets_end_with_stream_errors;
                                   TC =:= log_errors_are_failures ->
    _ = logger:remove_handler(fuzz_errors),
    throng_ct:stop();
end_per_testcase(_TC, _Config) ->
    ok.

%% Input N of a seed is the same every time; other seeds and numbers differ.
inputs_are_deterministic(_) ->
    [begin
         A = throng_bench_fuzz_gen:input(Kind, 7, I, ?CTX),
         ?assertEqual(A, throng_bench_fuzz_gen:input(Kind, 7, I, ?CTX)),
         ?assertNotEqual(maps:get(chunks, A),
                         maps:get(chunks, throng_bench_fuzz_gen:input(Kind, 8, I, ?CTX)))
     end || Kind <- [parser, socket], I <- lists:seq(1, 50)],
    Distinct = lists:usort([maps:get(chunks, throng_bench_fuzz_gen:input(parser, 7, I, ?CTX))
                            || I <- lists:seq(1, 200)]),
    ?assert(length(Distinct) > 190).

%% Chunking cuts, it does not change: the chunks of an unmutated session
%% join to the session; every mutation kind occurs.
chunks_join_to_the_input(_) ->
    R = rand:seed_s(exsss, 1),
    {Els, R1} = throng_bench_fuzz_gen:session(R, ?CTX),
    Bytes = iolist_to_binary(Els),
    {Chunks, _} = throng_bench_fuzz_gen:chunk(R1, Bytes),
    ?assertEqual(Bytes, iolist_to_binary(Chunks)),
    %% The unmutated session is well-formed for the parser (one stream).
    ?assertEqual(ok, throng_bench_fuzz_parser:check([Bytes], false)),
    Kinds = lists:usort(lists:append([maps:get(mutations, throng_bench_fuzz_gen:input(parser, 3, I, ?CTX))
                                      || I <- lists:seq(1, 500)])),
    ?assertEqual(15, length(Kinds)).

%% 4,000 mutated streams in random chunkings: the parser returns events or
%% a defined error, the same however the bytes are cut, and never crashes
%% or loops.
parser_survives_mutated_streams(Config) ->
    {Result, #{parser := P}} =
        throng_bench_fuzz:run(#{seed => 20261123, parser => 4000, socket => 0, progress => false,
                                out => filename:join(?config(priv_dir, Config), "parser")}),
    ?assertEqual(4000, maps:get(inputs, P)),
    ?assertEqual(#{}, maps:get(failures, P)),
    ok = Result.

%% 1,000 mutated client sessions (logins, binds, presence, messages, roster,
%% XEP-0198, ...) over real sockets: every connection the server ends, it
%% ends with a stream error or a stream close; no error in the log; no
%% process left once the connections and sessions are gone.
sessions_over_sockets_end_with_stream_errors(Config) ->
    Before = erlang:system_info(process_count),
    {Result, #{socket := S}} =
        throng_bench_fuzz:run(#{seed => 20261123, parser => 0, socket => 1000,
                                port => ?config(port, Config), users => ?USERS,
                                concurrency => 16, server_log => ?config(log, Config),
                                progress => false, known => ?KNOWN,
                                out => filename:join(?config(priv_dir, Config), "socket")}),
    ?assertEqual(1000, maps:get(inputs, S)),
    ?assertEqual(#{}, maps:get(failures, S)),
    ok = Result,
    wait(fun() -> throng_info:sessions() =:= 0 andalso
                      erlang:system_info(process_count) =< Before + 20 end,
         "sessions gone and the process count back"),
    %% It did reach the server: logins happened.
    ?assert(lists:sum([V || {logins, _, V} <- throng_info:metric_values()]) > 0).

%% The socket oracle: a server that closes without a word is a failure, and
%% so is one that resets the connection.
silent_close_is_a_failure(_) ->
    Port = fake_server(fun(S) -> read_all(S), gen_tcp:close(S) end),
    Target = #{host => {127, 0, 0, 1}, port => Port, quiet_ms => 2000},
    ?assertMatch({fail, closed_silently, _},
                 throng_bench_fuzz_socket:check([<<"<stream:stream>">>], [], Target)),
    Port2 = fake_server(fun(S) -> _ = gen_tcp:recv(S, 0, 5000),
                                  ok = inet:setopts(S, [{linger, {true, 0}}]),
                                  gen_tcp:close(S) end),
    ?assertMatch({fail, reset_silently, _},
                 throng_bench_fuzz_socket:check([<<"<stream:stream>">>], [],
                                                Target#{port => Port2})).

%% ... and one that sends a stream error (split across two writes) or a
%% stream close before closing, or keeps the connection open, is fine.
stream_error_close_is_fine(_) ->
    Target = #{host => {127, 0, 0, 1}, quiet_ms => 300},
    Err = fake_server(fun(S) -> _ = gen_tcp:recv(S, 0, 5000),
                                ok = gen_tcp:send(S, <<"<stream:er">>), timer:sleep(50),
                                ok = gen_tcp:send(S, <<"ror><not-well-formed/></stream:error>">>),
                                gen_tcp:close(S) end),
    ?assertEqual(ok, throng_bench_fuzz_socket:check([<<"<x">>], [], Target#{port => Err})),
    Open = fake_server(fun(S) -> _ = gen_tcp:recv(S, 0, 5000), timer:sleep(2000) end),
    ?assertEqual(ok, throng_bench_fuzz_socket:check([<<"<x">>], [], Target#{port => Open})).

%% An error in the server's log during a socket run is a failure, saved
%% with the inputs that ran before it.
log_errors_are_failures(Config) ->
    Log = ?config(log, Config),
    Self = self(),
    %% An error logged while the run goes on (as a crashing connection would).
    spawn(fun() -> timer:sleep(1500), logger:error(#{what => fuzz_test_crash}), Self ! logged end),
    Out = filename:join(?config(priv_dir, Config), "log"),
    {Result, #{socket := S}} =
        throng_bench_fuzz:run(#{seed => 5, parser => 0, socket => 100000,
                                port => ?config(port, Config), users => ?USERS,
                                concurrency => 4, server_log => Log, progress => false,
                                time_limit => 4000, out => Out, known => ?KNOWN,
                                replay_max => 10}),
    receive logged -> ok after 10000 -> ct:fail(no_log_error) end,
    failed = Result,
    ?assertMatch(#{server_error := N} when N > 0, maps:get(failures, S)),
    ?assertNotEqual([], filelib:wildcard(filename:join([Out, "reproducers", "socket-server_error*.term"]))).

%% A saved reproducer runs again with --replay, with its verdict.
reproducer_replays(Config) ->
    Silent = fun(S) -> read_all(S), gen_tcp:close(S) end,
    Out = filename:join(?config(priv_dir, Config), "replay"),
    {failed, #{socket := S}} =
        throng_bench_fuzz:run(#{seed => 9, parser => 0, socket => 1, port => fake_server(Silent),
                                progress => false, out => Out}),
    ?assertMatch(#{closed_silently := 1}, maps:get(failures, S)),
    [File] = filelib:wildcard(filename:join([Out, "reproducers", "socket-closed_silently-9-1.term"])),
    ?assertMatch({failed, {fail, closed_silently, _}},
                 throng_bench_fuzz:replay(File, #{port => fake_server(Silent)})),
    ?assertEqual(1, throng_bench_cli:run(["fuzz", "--replay", File, "--port",
                                          integer_to_list(fake_server(Silent))])),
    %% Against a server that answers with a stream error, it passes.
    Err = fun(S2) -> read_all(S2), ok = gen_tcp:send(S2, <<"<stream:error/>">>), gen_tcp:close(S2) end,
    ?assertEqual(0, throng_bench_cli:run(["fuzz", "--replay", File, "--port",
                                          integer_to_list(fake_server(Err))])).

%%% Helpers

%% Reads until the client has been quiet for 100 ms.
read_all(S) ->
    case gen_tcp:recv(S, 0, 100) of
        {ok, _} -> read_all(S);
        _ -> ok
    end.

%% A one-connection server on a free port running Fun on the socket.
fake_server(Fun) ->
    Self = self(),
    spawn(fun() ->
                  {ok, L} = gen_tcp:listen(0, [binary, {active, false}, {ip, {127, 0, 0, 1}}]),
                  {ok, P} = inet:port(L),
                  Self ! {port, self(), P},
                  {ok, S} = gen_tcp:accept(L, 10000),
                  Fun(S),
                  gen_tcp:close(L)
          end),
    receive {port, _, P} -> P after 5000 -> ct:fail(no_fake_server) end.

wait(Fun, What) ->
    wait(Fun, What, 60).

wait(_Fun, What, 0) ->
    ct:fail({timeout_waiting_for, What});
wait(Fun, What, N) ->
    case Fun() of
        true -> ok;
        false -> timer:sleep(1000), wait(Fun, What, N - 1)
    end.
