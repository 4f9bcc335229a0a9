%% @doc TLS over a TCP connection (fast_tls: OpenSSL in a NIF, no extra
%% process). The TCP port still delivers the (encrypted) data messages; the
%% owner decrypts them with decode/2, which also drives the handshake.
-module(throng_transport_tls).
-behaviour(throng_transport).

-export([listen/2, accept/1, messages/0, send/2, setopts/2, controlling_process/2,
         peername/1, close/1, upgrade/3, decode/2]).
-export([over_tcp/2]).

%% @doc Server-side TLS on an accepted TCP port (Opts: fast_tls options,
%% e.g. [{certfile, File}]).
-spec over_tcp(port(), list()) -> {ok, throng_transport:socket()} | {error, term()}.
over_tcp(Port, Opts) ->
    case fast_tls:tcp_to_tls(Port, Opts) of
        {ok, TLS} -> {ok, {?MODULE, Port, TLS}};
        {error, _} = E -> E
    end.

%% @doc Listening is plain TCP; TLS starts per connection (direct TLS
%% listeners are not offered yet: accept/1 refuses).
-spec listen(inet:port_number(), [gen_tcp:listen_option()]) -> {ok, port()} | {error, term()}.
listen(Port, Opts) -> throng_transport_tcp:listen(Port, Opts).

-spec accept(port()) -> {error, not_supported}.
accept(_LSock) -> {error, not_supported}.

-spec messages() -> throng_transport:message_tags().
messages() -> {tcp, tcp_closed, tcp_error, tcp_passive}.

-spec send(throng_transport:socket(), iodata()) -> ok | {error, term()}.
send({_, _, TLS}, Data) -> fast_tls:send(TLS, iolist_to_binary(Data)).

%% Socket options, ownership and the peer are the TCP port's.
-spec setopts(throng_transport:socket(), [gen_tcp:option()]) -> ok | {error, term()}.
setopts(Sock, Opts) -> throng_transport_tcp:setopts(Sock, Opts).

-spec controlling_process(throng_transport:socket(), pid()) -> ok | {error, term()}.
controlling_process(Sock, Pid) -> throng_transport_tcp:controlling_process(Sock, Pid).

-spec peername(throng_transport:socket()) ->
    {ok, {inet:ip_address(), inet:port_number()}} | {error, term()}.
peername(Sock) -> throng_transport_tcp:peername(Sock).

-spec close(throng_transport:socket()) -> ok.
close({_, _, TLS}) -> _ = fast_tls:close(TLS), ok.

-spec upgrade(throng_transport:socket(), module(), list()) -> {error, term()}.
upgrade(_Sock, Into, _Opts) -> {error, {cannot_upgrade, ?MODULE, Into}}.

-spec decode(throng_transport:socket(), binary()) -> {ok, binary()} | {error, term()}.
decode({_, _, TLS}, Data) -> fast_tls:recv_data(TLS, Data).
