%% @doc The transport under a c2s stream: plain TCP, or TLS over that TCP
%% socket after STARTTLS (fast_tls: OpenSSL in a NIF, a few KB per
%% connection). The XMPP code sees only this module, so another transport
%% (e.g. WebSocket) would not touch it.
-module(throng_socket).

-export([send/2, activate/2, pause/1, close/1, peer_ip/1, port/1, starttls/2, decode/2, is_tls/1]).

-type socket() :: {tcp, gen_tcp:socket()} | {tls, fast_tls:tls_socket(), gen_tcp:socket()}.
-export_type([socket/0]).

-spec send(socket(), iodata()) -> ok | {error, term()}.
send({tcp, S}, Data) -> gen_tcp:send(S, Data);
send({tls, T, _}, Data) -> fast_tls:send(T, iolist_to_binary(Data)).

%% @doc Lets the driver deliver the next N reads as messages ({active, N});
%% after them it sends {tcp_passive, Port} and waits to be re-armed.
-spec activate(socket(), pos_integer()) -> ok | {error, term()}.
activate(Sock, N) -> inet:setopts(port(Sock), [{active, N}]).

%% @doc Stops reading the socket (until {@link activate/2}); TCP flow control
%% then slows the peer down.
-spec pause(socket()) -> ok | {error, term()}.
pause(Sock) -> inet:setopts(port(Sock), [{active, false}]).

-spec close(socket()) -> ok.
close({tcp, S}) -> _ = gen_tcp:close(S), ok;
close({tls, T, _}) -> _ = fast_tls:close(T), ok.

-spec peer_ip(socket()) -> inet:ip_address() | undefined.
peer_ip(Sock) ->
    case inet:peername(port(Sock)) of
        {ok, {IP, _}} -> IP;
        {error, _} -> undefined
    end.

%% @doc The gen_tcp port that delivers {tcp, Port, Data} messages.
-spec port(socket()) -> gen_tcp:socket().
port({tcp, S}) -> S;
port({tls, _, S}) -> S.

-spec is_tls(socket()) -> boolean().
is_tls({tls, _, _}) -> true;
is_tls({tcp, _}) -> false.

%% @doc Upgrades a plain socket to TLS (server side). The handshake runs as
%% data arrives through {@link decode/2}.
-spec starttls(socket(), file:filename_all()) -> {ok, socket()} | {error, term()}.
starttls({tcp, S}, CertFile) ->
    case fast_tls:tcp_to_tls(S, [{certfile, CertFile}]) of
        {ok, T} -> {ok, {tls, T, S}};
        {error, _} = E -> E
    end.

%% @doc Turns bytes read from the TCP socket into application data.
-spec decode(socket(), binary()) -> {ok, binary()} | {error, term()}.
decode({tcp, _}, Data) -> {ok, Data};
decode({tls, T, _}, Data) -> fast_tls:recv_data(T, Data).
