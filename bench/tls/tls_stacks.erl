%% @doc Three TLS stacks side by side (bench/tls/stacks.sh runs this):
%% memory per idle server-side TLS connection and server CPU per handshake,
%% same client, certificate and machine.
%%
%%   fast_tls  Debian's erlang-p1-tls (OpenSSL in a NIF, memory BIOs)
%%   otp_ssl   OTP's ssl, with hibernate_after (two processes per connection)
%%   throng    throng_tls_nif + throng_tls_record (the handshake in OpenSSL,
%%             then Erlang records; no OpenSSL state after the handshake)
%%
%% The server side runs in its own BEAM (server/1: one process per
%% connection that echoes and hibernates, like a session); the clients are
%% OTP ssl in the measuring BEAM (main/1). Each connection sends four
%% 600-byte records and reads them back, as a login would, then idles.
-module(tls_stacks).

-export([main/1, server/1, ready/0]).
-export([loop_fast_tls/2, loop_throng/1, loop_otp_ssl/1]).    % hibernation entry points

%%% The server BEAM

server([Stack, PortS, CertFile]) ->
    Port = list_to_integer(PortS),
    {ok, _} = application:ensure_all_started(ssl),
    case Stack of
        "fast_tls" -> {ok, _} = application:ensure_all_started(fast_tls);
        "throng" -> ok = throng_metrics:init();    % the transport counts handshakes
        _ -> ok
    end,
    {ok, L} = gen_tcp:listen(Port, [binary, {active, false}, {reuseaddr, true}, {backlog, 1024}]),
    register(tls_stacks_server, self()),
    accept(list_to_atom(Stack), L, CertFile).

-spec ready() -> boolean().
ready() -> whereis(tls_stacks_server) =/= undefined.

accept(Stack, L, CertFile) ->
    {ok, S} = gen_tcp:accept(L),
    Pid = spawn(fun() -> receive go -> start(Stack, S, CertFile) end end),
    ok = gen_tcp:controlling_process(S, Pid),
    Pid ! go,
    accept(Stack, L, CertFile).

start(fast_tls, S, CertFile) ->
    {ok, T} = fast_tls:tcp_to_tls(S, [{certfile, CertFile}]),
    ok = inet:setopts(S, [{active, once}]),
    erlang:hibernate(?MODULE, loop_fast_tls, [S, T]);
start(throng, S, CertFile) ->
    {ok, Sock} = throng_transport_tls:over_tcp(S, [{certfile, CertFile}]),
    ok = inet:setopts(S, [{active, once}]),
    erlang:hibernate(?MODULE, loop_throng, [Sock]);
start(otp_ssl, S, CertFile) ->
    {ok, T} = ssl:handshake(S, [{certfile, CertFile}, {keyfile, CertFile},
                                {versions, ['tlsv1.3', 'tlsv1.2']}, {hibernate_after, 500},
                                {session_tickets, disabled}, {active, once}], 30000),
    erlang:hibernate(?MODULE, loop_otp_ssl, [T]).

loop_fast_tls(S, T) ->
    receive
        {tcp, S, Data} ->
            {ok, Plain} = fast_tls:recv_data(T, Data),
            _ = Plain =:= <<>> orelse fast_tls:send(T, Plain),
            ok = inet:setopts(S, [{active, once}]),
            erlang:hibernate(?MODULE, loop_fast_tls, [S, T]);
        {tcp_closed, S} -> ok
    end.

loop_throng(Sock) ->
    S = throng_transport:port(Sock),
    receive
        {tcp, S, Data} ->
            case throng_transport:decode(Sock, Data) of
                {ok, Plain, Sock1} ->
                    _ = Plain =:= <<>> orelse throng_transport:send(Sock1, Plain),
                    ok = inet:setopts(S, [{active, once}]),
                    erlang:hibernate(?MODULE, loop_throng, [Sock1]);
                _ -> gen_tcp:close(S)
            end;
        {tcp_closed, S} -> ok
    end.

loop_otp_ssl(T) ->
    receive
        {ssl, T, Data} ->
            ok = ssl:send(T, Data),
            ok = ssl:setopts(T, [{active, once}]),
            erlang:hibernate(?MODULE, loop_otp_ssl, [T]);
        {ssl_closed, T} -> ok
    end.

%%% The measuring BEAM

main([Node, OsPidS, PortS, NS, Label]) ->
    N = list_to_integer(NS),
    OsPid = list_to_integer(OsPidS),
    Port = list_to_integer(PortS),
    {ok, _} = application:ensure_all_started(ssl),
    wait_ready(list_to_atom(Node), 300),
    settle(list_to_atom(Node)),
    Rss0 = rss(OsPid),
    Cpu0 = cpu_ms(OsPid),
    Clients = connect_all(N, Port, []),
    Cpu1 = cpu_ms(OsPid),
    settle(list_to_atom(Node)),
    Rss1 = rss(OsPid),
    io:format("RESULT stack=~s n=~b rss_per_connection_bytes=~.1f server_cpu_ms_per_handshake=~.3f~n",
              [Label, length(Clients), (Rss1 - Rss0) / N, (Cpu1 - Cpu0) / N]),
    [ssl:close(C) || C <- Clients],
    halt(0).

wait_ready(_Node, 0) -> error(server_not_ready);
wait_ready(Node, K) ->
    case rpc:call(Node, ?MODULE, ready, []) of
        true -> ok;
        _ -> timer:sleep(100), wait_ready(Node, K - 1)
    end.

connect_all(0, _Port, Acc) -> Acc;
connect_all(N, Port, Acc) ->
    Batch = min(N, 100),
    Self = self(),
    Pids = [spawn(fun() -> client(Self, Port) end) || _ <- lists:seq(1, Batch)],
    Got = [receive {ready, P, C} -> C after 60000 -> error(timeout) end || P <- Pids],
    connect_all(N - Batch, Port, Got ++ Acc).

client(Parent, Port) ->
    {ok, C} = ssl:connect({127, 0, 0, 1}, Port, [binary, {active, false}, {verify, verify_none},
                                                  {versions, ['tlsv1.3', 'tlsv1.2']}], 60000),
    Msg = binary:copy(<<"x">>, 600),
    [begin ok = ssl:send(C, Msg), recv_n(C, 600) end || _ <- lists:seq(1, 4)],
    ok = ssl:controlling_process(C, Parent),
    Parent ! {ready, self(), C}.

recv_n(_C, 0) -> ok;
recv_n(C, N) ->
    {ok, B} = ssl:recv(C, 0, 30000),
    recv_n(C, N - byte_size(B)).

%% Every process of the server collected, the C heap's free pages returned
%% (the same for every stack), then a pause for hibernations.
settle(Node) ->
    timer:sleep(1500),
    _ = [rpc:call(Node, erlang, garbage_collect, [P]) || P <- rpc:call(Node, erlang, processes, [])],
    _ = rpc:call(Node, throng_tls_nif, trim, []),
    timer:sleep(500).

%% /proc through throng_lib's sampler (stacks.sh puts it on the path).
rss(OsPid) ->
    #{rss := Rss} = throng_proc_sample:sample(OsPid),
    Rss.

cpu_ms(OsPid) ->
    throng_proc_sample:cpu_seconds(throng_proc_sample:sample(OsPid)) * 1000.
