%% @doc The built-in echo and sink (discard) servers for `echo' and `flow'.
%%
%% The echo port sends back every byte it receives. The sink port reads and
%% discards until the client closes its sending side, then closes: a client
%% that half-closes and waits for the close knows the server has read
%% everything (RFC 863 discard servers behave the same way).
-module(throng_bench_echo_server).

-export([start/1, stop/1, serve_forever/1]).

-type opts() :: #{ip => inet:ip_address(), port => inet:port_number(),
                  sink_port => inet:port_number(), backlog => pos_integer()}.
-type server() :: #{pid := pid(), ip := inet:ip_address(),
                    port := inet:port_number(), sink_port := inet:port_number()}.
-export_type([server/0]).

%% @doc Start both listeners (port 0 picks free ports; sink_port defaults to
%% the port after the echo port when a port is given, else any free port).
-spec start(opts()) -> {ok, server()} | {error, term()}.
start(Opts) ->
    throng_bench_server_owner:start(fun() -> listen(Opts) end).

%% @doc Stop the listeners and every connection they accepted.
-spec stop(server()) -> ok.
stop(Server) -> throng_bench_server_owner:stop(Server).

%% @doc Run until the VM stops (the `echo-server' subcommand).
-spec serve_forever(opts()) -> no_return().
serve_forever(Opts) ->
    case start(Opts) of
        {ok, #{ip := Ip, port := P, sink_port := SP}} ->
            io:format("echo server on ~s:~b, sink (discard) server on ~s:~b~n",
                      [inet:ntoa(Ip), P, inet:ntoa(Ip), SP]),
            receive after infinity -> ok end;
        {error, R} ->
            throw({fatal, io_lib:format("echo-server: cannot listen: ~ts", [inet:format_error(R)])})
    end.

%% In the owner process (throng_bench_server_owner).
listen(Opts) ->
    Ip = maps:get(ip, Opts, {127, 0, 0, 1}),
    Port = maps:get(port, Opts, 0),
    SinkPort = maps:get(sink_port, Opts, case Port of 0 -> 0; _ -> Port + 1 end),
    LOpts = throng_bench_server_owner:listen_opts(Opts),
    case gen_tcp:listen(Port, LOpts) of
        {ok, L1} ->
            case gen_tcp:listen(SinkPort, LOpts) of
                {ok, L2} ->
                    {ok, P1} = inet:port(L1),
                    {ok, P2} = inet:port(L2),
                    Owner = self(),
                    spawn_link(fun() -> acceptor(L1, fun echo/1, Owner) end),
                    spawn_link(fun() -> acceptor(L2, fun sink/1, Owner) end),
                    {ok, #{ip => Ip, port => P1, sink_port => P2}};
                {error, _} = E -> E
            end;
        {error, _} = E -> E
    end.

acceptor(L, Handler, Owner) ->
    case throng_accept:accept(L) of
        {ok, S} ->
            Pid = spawn(fun() ->
                                link(Owner),
                                receive go -> Handler(S) end
                        end),
            ok = gen_tcp:controlling_process(S, Pid),
            Pid ! go,
            acceptor(L, Handler, Owner);
        {error, closed} -> ok;
        {error, _} ->
            %% emfile and the like: back off instead of spinning
            timer:sleep(10),
            acceptor(L, Handler, Owner)
    end.

echo(S) ->
    case gen_tcp:recv(S, 0) of
        {ok, Data} ->
            case gen_tcp:send(S, Data) of
                ok -> echo(S);
                {error, _} -> gen_tcp:close(S)
            end;
        {error, _} -> gen_tcp:close(S)
    end.

sink(S) ->
    case gen_tcp:recv(S, 0) of
        {ok, _} -> sink(S);
        {error, _} -> gen_tcp:close(S)
    end.
