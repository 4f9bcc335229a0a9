%% @doc The floor under every per-event cost of a connection server on this
%% machine: what it costs the OS and the VM to wake an idle Erlang process
%% for one small packet on its socket, with nothing else to do.
%%
%% server PORT: accepts connections; each is one process with an
%% {active, 100} socket that hibernates after every event and does nothing
%% with what it reads (a whitespace keepalive is such an event for Throng).
%%
%% clients HOST PORT N RATE SECONDS: N connections from one VM (source
%% addresses 127.0.0.2 and up, 10,000 each); each sends one byte at
%% exponential intervals, RATE packets per second over all of them, for
%% SECONDS, each connection a process that hibernates between its sends
%% (as throng-bench's users do). Prints "sent N" at the end.
%%
%% bench/wake_floor.sh starts both in their own VMs and reads their CPU
%% from /proc; the floor is each VM's CPU over the packets.
-module(wake_floor).

-export([main/1]).
-export([conn_loop/1, client_loop/2]).

main(["server", PortS]) ->
    {ok, L} = gen_tcp:listen(list_to_integer(PortS),
                             [binary, {active, false}, {reuseaddr, true}, {backlog, 4096},
                              {nodelay, true}]),
    io:format("listening~n"),
    accept(L);
main(["clients", Host, PortS, NS, RateS, SecsS]) ->
    Port = list_to_integer(PortS),
    N = list_to_integer(NS),
    Rate = list_to_float(RateS),
    Secs = list_to_integer(SecsS),
    Self = self(),
    Pids = [connect(Host, Port, I, Self) || I <- lists:seq(1, N)],
    io:format("connected ~b~n", [length(Pids)]),
    %% Each connection sends at Rate / N per second: mean gap N / Rate s.
    MeanMs = 1000 * N / Rate,
    Deadline = erlang:monotonic_time(millisecond) + Secs * 1000,
    [P ! {go, MeanMs, Deadline} || P <- Pids],
    Sent = lists:sum([receive {sent, P, K} -> K end || P <- Pids]),
    io:format("sent ~b~n", [Sent]),
    halt(0).

accept(L) ->
    {ok, S} = gen_tcp:accept(L),
    Pid = spawn(fun() -> receive go -> ok end, ok = inet:setopts(S, [{active, 100}]),
                                conn_loop(S) end),
    ok = gen_tcp:controlling_process(S, Pid),
    Pid ! go,
    accept(L).

conn_loop(S) ->
    receive
        {tcp, S, _} -> erlang:hibernate(?MODULE, conn_loop, [S]);
        {tcp_passive, S} -> ok = inet:setopts(S, [{active, 100}]),
                            erlang:hibernate(?MODULE, conn_loop, [S]);
        {tcp_closed, S} -> ok
    end.

connect(Host, Port, I, Parent) ->
    {ok, Ip} = inet:parse_address(Host),
    Src = {127, 0, (I div 10000) div 256, 2 + (I div 10000) rem 256},
    {ok, S} = gen_tcp:connect(Ip, Port, [binary, {active, false}, {ip, Src}, {nodelay, true}]),
    Pid = spawn(fun() -> receive {go, MeanMs, Deadline} ->
                                 client_loop({S, MeanMs, Deadline, Parent, 0}, arm)
                         end end),
    ok = gen_tcp:controlling_process(S, Pid),
    Pid.

client_loop({S, MeanMs, Deadline, Parent, K}, arm) ->
    Gap = round(-MeanMs * math:log(1.0 - rand:uniform())),
    case erlang:monotonic_time(millisecond) + Gap > Deadline of
        true -> Parent ! {sent, self(), K}, gen_tcp:close(S);
        false ->
            erlang:send_after(Gap, self(), send),
            erlang:hibernate(?MODULE, client_loop, [{S, MeanMs, Deadline, Parent, K}, wait])
    end;
client_loop({S, MeanMs, Deadline, Parent, K}, wait) ->
    receive send ->
            ok = gen_tcp:send(S, <<" ">>),
            client_loop({S, MeanMs, Deadline, Parent, K + 1}, arm)
    end.
