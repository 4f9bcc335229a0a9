%% @doc `echo' and `flow': the inet-driver speed test.
%%
%% For each number of parallel sockets and each message size (doubling from
%% min_size to max_size, the message count halving so that every step moves
%% about `total' bytes):
%%   echo - each socket keeps one message in flight: send, wait for the same
%%          number of bytes back, repeat; every round trip is timed.
%%   flow - each socket sends its messages as fast as the socket takes them
%%          to a sink that discards them, then half-closes and waits for the
%%          sink to close: the step's time covers delivery of every byte.
-module(throng_bench_echo).

-export([run/2, sizes/2]).
%% API used by tests: the message sizes of a run.
-ignore_xref([{sizes, 2}]).

-type mode() :: echo | flow.

%% @doc Message sizes from Min to Max, doubling.
-spec sizes(pos_integer(), pos_integer()) -> [pos_integer()].
sizes(Min, Max) when Min > Max -> [];
sizes(Min, Max) -> [Min | sizes(Min * 2, Max)].

%% @doc {Size, MessagesPerSocket} for each step.
-spec plan([pos_integer()], pos_integer(), pos_integer(), pos_integer() | infinity) ->
          [{pos_integer(), pos_integer()}].
plan(Sizes, Total, Sockets, MaxCount) ->
    [{S, max(1, min(MaxCount, max(1, Total div S)) div Sockets)} || S <- Sizes].

%% @doc Run the echo or flow test; returns the summary (also written to
%% Opts.out when given). Opts: target ({Host, Port} or builtin), min_size,
%% max_size, total, parallel ([N]), max_count, timeout, nodelay.
-spec run(mode(), map()) -> {ok | error, map()}.
run(Mode, Opts) ->
    {Target, Stop, Label} = target(Mode, Opts),
    Sizes = sizes(maps:get(min_size, Opts), maps:get(max_size, Opts)),
    Started = erlang:system_time(second),
    {Status, Rows, Error} =
        try
            {ok, lists:append([run_parallel(Mode, Target, N, Sizes, Opts)
                               || N <- maps:get(parallel, Opts)]), none}
        catch throw:{step_failed, Partial, Why} ->
                {error, Partial, Why}
        after
            Stop()
        end,
    Summary = #{command => Mode, target => Label, started => Started,
                options => printable(Opts), rows => Rows,
                status => Status,
                error => case Error of none -> null; _ -> throng_bench_units:to_bin(Error) end},
    print_table(Mode, Rows),
    case maps:get(out, Opts, undefined) of
        undefined -> ok;
        Dir -> throng_bench_out:write_echo(Dir, Summary)
    end,
    {Status, Summary}.

target(Mode, #{target := {Host, Port}}) ->
    {{Host, Port}, fun() -> ok end,
     iolist_to_binary([Host, ":", integer_to_list(Port), " (", atom_to_list(Mode), ")"])};
target(_Mode, _Opts) ->
    {ok, Srv = #{port := EP, sink_port := SP}} =
        throng_bench_echo_server:start(#{port => 0, sink_port => 0}),
    {{"127.0.0.1", {EP, SP}}, fun() -> throng_bench_echo_server:stop(Srv) end,
     <<"built-in echo/sink server on 127.0.0.1">>}.

port_for(echo, {_, {EP, _}}) -> EP;
port_for(flow, {_, {_, SP}}) -> SP;
port_for(_, {_, P}) -> P.

run_parallel(Mode, Target, N, Sizes, Opts) ->
    Steps = plan(Sizes, maps:get(total, Opts),
                 N, case Mode of echo -> maps:get(max_count, Opts); flow -> infinity end),
    lists:foldl(fun({Size, Count}, Acc) ->
                        try step(Mode, Target, N, Size, Count, Opts) of
                            Row ->
                                progress(Row),
                                Acc ++ [Row]
                        catch throw:{step_error, Why} ->
                                throw({step_failed, Acc,
                                       io_lib:format("~s with ~b socket(s), ~s messages: ~ts",
                                                     [Mode, N, throng_bench_units:format_bytes(Size),
                                                      describe(Why)])})
                        end
                end, [], Steps).

describe({connect, R}) -> ["cannot connect: ", inet:format_error(R)];
describe(timeout) -> "no answer within the timeout (server stalled?)";
describe(R) when is_atom(R) -> inet:format_error(R);
describe(R) -> io_lib:format("~0tp", [R]).

step(Mode, {Host, _} = Target, N, Size, Count, Opts) ->
    Port = port_for(Mode, Target),
    Timeout = maps:get(timeout, Opts),
    SockOpts = [binary, {active, false}, {nodelay, maps:get(nodelay, Opts, true)},
                {send_timeout, Timeout}, {send_timeout_close, true}]
        ++ case Mode of
               echo -> [{high_watermark, 2 * Size + 65536}, {low_watermark, Size + 32768}];
               flow -> []
           end,
    Socks = [case gen_tcp:connect(Host, Port, SockOpts, Timeout) of
                 {ok, S} -> S;
                 {error, R} -> throw({step_error, {connect, R}})
             end || _ <- lists:seq(1, N)],
    Hist = throng_hist:new(),
    Msg = binary:copy(<<"x">>, Size),
    Self = self(),
    Workers = [spawn_link(fun() ->
                                  receive go -> ok end,
                                  Self ! {done, self(), worker(Mode, S, Msg, Count, Timeout, Hist)}
                          end) || S <- Socks],
    [ok = gen_tcp:controlling_process(S, W) || {S, W} <- lists:zip(Socks, Workers)],
    T0 = erlang:monotonic_time(microsecond),
    [W ! go || W <- Workers],
    Results = [receive {done, W, R} -> R end || W <- Workers],
    Elapsed = max(1, erlang:monotonic_time(microsecond) - T0),
    [gen_tcp:close(S) || S <- Socks],
    case [E || {error, E} <- Results] of
        [E | _] -> throw({step_error, E});
        [] -> ok
    end,
    Msgs = N * Count,
    Bytes = Msgs * Size,
    H = throng_hist:summary(throng_hist:snapshot(Hist)),
    Base = #{mode => Mode, sockets => N, size => Size, count => Msgs, bytes => Bytes,
             seconds => Elapsed / 1.0e6, msgs_per_s => Msgs * 1.0e6 / Elapsed,
             mib_per_s => Bytes * 1.0e6 / Elapsed / 1048576,
             approximate => lists:member(approximate, Results)},
    case Mode of
        echo -> Base#{rtt_us => H};
        flow -> Base#{us_per_msg => Elapsed * N / Msgs}
    end.

worker(echo, S, Msg, Count, Timeout, Hist) -> echo_loop(S, Msg, byte_size(Msg), Count, Timeout, Hist);
worker(flow, S, Msg, Count, Timeout, _Hist) -> flow_loop(S, Msg, Count, Timeout).

echo_loop(_S, _Msg, _Size, 0, _Timeout, _Hist) -> ok;
echo_loop(S, Msg, Size, N, Timeout, Hist) ->
    T0 = erlang:monotonic_time(microsecond),
    case gen_tcp:send(S, Msg) of
        ok ->
            case gen_tcp:recv(S, Size, Timeout) of
                {ok, _} ->
                    throng_hist:record(Hist, erlang:monotonic_time(microsecond) - T0),
                    echo_loop(S, Msg, Size, N - 1, Timeout, Hist);
                {error, R} -> {error, R}
            end;
        {error, R} -> {error, R}
    end.

flow_loop(S, _Msg, 0, Timeout) ->
    case gen_tcp:shutdown(S, write) of
        ok ->
            %% the sink closes once it has read everything we sent
            case gen_tcp:recv(S, 0, Timeout) of
                {error, closed} -> ok;
                {ok, _} -> flow_loop(S, <<>>, 0, Timeout);
                {error, timeout} -> approximate;
                {error, R} -> {error, R}
            end;
        {error, R} -> {error, R}
    end;
flow_loop(S, Msg, N, Timeout) ->
    case gen_tcp:send(S, Msg) of
        ok -> flow_loop(S, Msg, N - 1, Timeout);
        {error, R} -> {error, R}
    end.

progress(#{mode := M, sockets := N, size := Size, count := C, seconds := T, mib_per_s := B}) ->
    io:format(standard_error, "~s: ~b socket(s), ~ts x ~b in ~.3fs, ~.1f MiB/s~n",
              [M, N, throng_bench_units:format_bytes(Size), C, T, B]).

print_table(_Mode, []) -> ok;
print_table(echo, Rows) ->
    io:format("~-7s ~8s ~9s ~9s ~10s ~10s ~9s ~9s ~9s ~9s~n",
              ["sockets", "size", "count", "time", "msgs/s", "MiB/s", "rtt mean", "p50", "p99",
               "max"]),
    [io:format("~-7b ~8ts ~9b ~8.3fs ~10ts ~10.2f ~9ts ~9ts ~9ts ~9ts~n",
               [N, throng_bench_units:format_bytes(S), C, T, throng_bench_units:format_rate(R), B,
                throng_bench_units:format_us(maps:get(mean, H)),
                throng_bench_units:format_us(maps:get(p50, H)),
                throng_bench_units:format_us(maps:get(p99, H)),
                throng_bench_units:format_us(maps:get(max, H))])
     || #{sockets := N, size := S, count := C, seconds := T, msgs_per_s := R, mib_per_s := B,
          rtt_us := H} <- Rows],
    ok;
print_table(flow, Rows) ->
    io:format("~-7s ~8s ~9s ~9s ~10s ~10s ~10s~n",
              ["sockets", "size", "count", "time", "msgs/s", "MiB/s", "us/msg"]),
    [io:format("~-7b ~8ts ~9b ~8.3fs ~10ts ~10.2f ~10.2f~ts~n",
               [N, throng_bench_units:format_bytes(S), C, T, throng_bench_units:format_rate(R), B,
                U, case A of true -> " (sink did not close: time to last send)"; false -> "" end])
     || #{sockets := N, size := S, count := C, seconds := T, msgs_per_s := R, mib_per_s := B,
          us_per_msg := U, approximate := A} <- Rows],
    ok.

printable(Opts) ->
    maps:map(fun(target, {H, P}) -> iolist_to_binary([H, ":", integer_to_list(P)]);
                (_, V) when is_list(V) -> V;
                (_, V) -> V
             end, maps:without([out], Opts)).
