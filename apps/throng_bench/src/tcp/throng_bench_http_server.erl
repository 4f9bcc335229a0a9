%% @doc A tiny HTTP/1.1 server for the `http' benchmark, with a configurable
%% listen backlog and an artificial delay after each accept.
%%
%% One acceptor accepts a connection, hands it to a new process that reads
%% the request head and answers `200 OK' with a small body and
%% `Connection: close', then sleeps `accept_delay' ms before accepting again.
%% With a small backlog and a delay, connections that arrive faster than
%% they are accepted overflow the kernel's accept queue: Linux drops their
%% SYN (or, with net.ipv4.tcp_abort_on_overflow=1, resets them), and clients
%% see retransmission delays of a second or more, timeouts and resets. That
%% is the listen-backlog effect the benchmark demonstrates.
-module(throng_bench_http_server).

-export([start/1, stop/1, serve_forever/1]).

-type opts() :: #{ip => inet:ip_address(), port => inet:port_number(),
                  backlog => pos_integer(), accept_delay => non_neg_integer(),
                  body_size => non_neg_integer()}.
-type server() :: #{pid := pid(), ip := inet:ip_address(), port := inet:port_number()}.
-export_type([server/0]).

-define(HEAD_LIMIT, 16384).

%% @doc Listen (port 0 picks a free port) and serve until stop/1.
-spec start(opts()) -> {ok, server()} | {error, term()}.
start(Opts) ->
    throng_bench_server_owner:start(fun() -> listen(Opts) end).

-spec stop(server()) -> ok.
stop(Server) -> throng_bench_server_owner:stop(Server).

%% @doc Run until the VM stops (the `http-server' subcommand).
-spec serve_forever(opts()) -> no_return().
serve_forever(Opts) ->
    case start(Opts) of
        {ok, #{ip := Ip, port := P}} ->
            io:format("http server on http://~s:~b/ (backlog ~b, accept delay ~bms)~n",
                      [inet:ntoa(Ip), P, maps:get(backlog, Opts, 1024),
                       maps:get(accept_delay, Opts, 0)]),
            receive after infinity -> ok end;
        {error, R} ->
            throw({fatal, io_lib:format("http-server: cannot listen: ~ts", [inet:format_error(R)])})
    end.

%% In the owner process (throng_bench_server_owner).
listen(Opts) ->
    Ip = maps:get(ip, Opts, {127, 0, 0, 1}),
    case gen_tcp:listen(maps:get(port, Opts, 0), throng_bench_server_owner:listen_opts(Opts)) of
        {ok, L} ->
            {ok, Port} = inet:port(L),
            Body = binary:copy(<<"x">>, maps:get(body_size, Opts, 64)),
            Resp = iolist_to_binary(["HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                                     "Content-Length: ", integer_to_list(byte_size(Body)),
                                     "\r\nConnection: close\r\n\r\n", Body]),
            Owner = self(),
            Delay = maps:get(accept_delay, Opts, 0),
            spawn_link(fun() -> acceptor(L, Resp, Delay, Owner) end),
            {ok, #{ip => Ip, port => Port}};
        {error, _} = E -> E
    end.

acceptor(L, Resp, Delay, Owner) ->
    case throng_accept:accept(L) of
        {ok, S} ->
            Pid = spawn(fun() -> link(Owner), receive go -> handle(S, Resp, <<>>) end end),
            _ = gen_tcp:controlling_process(S, Pid),
            Pid ! go,
            Delay > 0 andalso timer:sleep(Delay),
            acceptor(L, Resp, Delay, Owner);
        {error, closed} -> ok;
        {error, _} ->
            timer:sleep(10),
            acceptor(L, Resp, Delay, Owner)
    end.

handle(S, Resp, Buf) ->
    case binary:match(Buf, <<"\r\n\r\n">>) of
        nomatch when byte_size(Buf) > ?HEAD_LIMIT -> gen_tcp:close(S);
        nomatch ->
            case gen_tcp:recv(S, 0, 30000) of
                {ok, More} -> handle(S, Resp, <<Buf/binary, More/binary>>);
                {error, _} -> gen_tcp:close(S)
            end;
        _ ->
            _ = gen_tcp:send(S, Resp),
            gen_tcp:close(S)
    end.
