%% @doc The transport behaviour, and the one API through which the rest of
%% the server uses a connection's socket (ranch's transport, in Throng's
%% size). A socket is `{Module, TCP, State}': the transport module, the
%% TCP socket whose messages the owner receives, and the module's own state
%% (`undefined' for plain TCP, the TLS session after an upgrade). Nothing
%% outside a transport module looks inside it.
%%
%% TCP is a gen_tcp socket of either of OTP's inet backends: a port (the
%% inet driver) or a `{'$inet', gen_tcp_socket, _}' tuple (the socket
%% backend, a listener's `inet_backend: socket'). Only gen_tcp and inet
%% functions touch it, never erlang:port_* ones, so both work alike.
%%
%% Data arrives as messages tagged by `messages/0' of the socket's module
%% ({Data, Closed, Error, Passive}), always from TCP, in `{active, N}'
%% mode; the owner passes the bytes through {@link decode/2} (a TLS
%% transport decrypts there). A WebSocket transport would implement the
%% same callbacks.
-module(throng_transport).

-export([listen/3, accept/2, messages/1, send/2, activate/2, pause/1, read_size/2,
         controlling_process/2, peer_ip/1, close/1, upgrade/3, decode/2,
         tcp_socket/1, is_tls/1, channel_bindings/1, close_after_error/1]).

-type socket() :: {module(), gen_tcp:socket(), term()}.

-define(LINGER_MS, 2000).
-define(LINGER_BYTES, 1048576).
-type message_tags() :: {Data :: atom(), Closed :: atom(), Error :: atom(), Passive :: atom()}.
-export_type([socket/0, message_tags/0]).

-callback listen(inet:port_number(), [gen_tcp:listen_option() | inet:inet_backend()]) ->
    {ok, gen_tcp:socket()} | {error, term()}.
-callback accept(gen_tcp:socket()) -> {ok, socket()} | {error, term()}.
-callback messages() -> message_tags().
-callback send(socket(), iodata()) -> ok | {error, term()}.
-callback setopts(socket(), [gen_tcp:option()]) -> ok | {error, term()}.
-callback controlling_process(socket(), pid()) -> ok | {error, term()}.
-callback peername(socket()) -> {ok, {inet:ip_address(), inet:port_number()}} | {error, term()}.
-callback close(socket()) -> ok.
%% Upgrade to another transport on the same connection (STARTTLS): the
%% server side of the handshake runs as data arrives through decode/2.
-callback upgrade(socket(), Into :: module(), Opts :: list()) -> {ok, socket()} | {error, term()}.
%% `{closed, Data, Socket}': the peer ended the stream inside the transport
%% (TLS close_notify) after Data; Socket sends nothing more.
-callback decode(socket(), binary()) ->
    {ok, binary(), socket()} | {closed, binary(), socket()} | {error, term()}.
%% A transport that can run over an accepted TCP socket (TLS): what a TCP
%% socket's upgrade/3 calls.
-callback over_tcp(gen_tcp:socket(), list()) -> {ok, socket()} | {error, term()}.
-optional_callbacks([over_tcp/2]).

%% @doc Opens a listen socket with a transport module (`{inet_backend, B}'
%% first in Opts chooses OTP's backend).
-spec listen(module(), inet:port_number(), [gen_tcp:listen_option() | inet:inet_backend()]) ->
    {ok, gen_tcp:socket()} | {error, term()}.
listen(Mod, Port, Opts) -> Mod:listen(Port, Opts).

%% @doc Accepts a connection on a listen socket of a transport module.
-spec accept(module(), gen_tcp:socket()) -> {ok, socket()} | {error, term()}.
accept(Mod, LSock) -> Mod:accept(LSock).

-spec messages(socket()) -> message_tags().
messages({Mod, _, _}) -> Mod:messages().

-spec send(socket(), iodata()) -> ok | {error, term()}.
send({Mod, _, _} = S, Data) -> Mod:send(S, Data).

-spec setopts(socket(), [gen_tcp:option()]) -> ok | {error, term()}.
setopts({Mod, _, _} = S, Opts) -> Mod:setopts(S, Opts).

%% @doc Lets the socket deliver the next N reads as messages ({active, N});
%% after them it sends the passive message and waits to be re-armed.
-spec activate(socket(), pos_integer()) -> ok | {error, term()}.
activate(S, N) -> setopts(S, [{active, N}]).

%% @doc Stops reading (until {@link activate/2}); TCP flow control then
%% slows the peer down.
-spec pause(socket()) -> ok | {error, term()}.
pause(S) -> setopts(S, [{active, false}]).

%% @doc How many bytes the socket reads at a time from now on.
-spec read_size(socket(), pos_integer()) -> ok | {error, term()}.
read_size(S, Bytes) -> setopts(S, [{buffer, Bytes}]).

-spec controlling_process(socket(), pid()) -> ok | {error, term()}.
controlling_process({Mod, _, _} = S, Pid) -> Mod:controlling_process(S, Pid).

-spec peername(socket()) -> {ok, {inet:ip_address(), inet:port_number()}} | {error, term()}.
peername({Mod, _, _} = S) -> Mod:peername(S).

%% @doc The peer's address, or undefined if the socket is gone.
-spec peer_ip(socket()) -> inet:ip_address() | undefined.
peer_ip(S) ->
    case peername(S) of
        {ok, {IP, _}} -> IP;
        {error, _} -> undefined
    end.

-spec close(socket()) -> ok.
close({Mod, _, _} = S) -> Mod:close(S).

-spec upgrade(socket(), module(), list()) -> {ok, socket()} | {error, term()}.
upgrade({Mod, _, _} = S, Into, Opts) -> Mod:upgrade(S, Into, Opts).

%% @doc Turns bytes read from the socket into application data, and
%% returns the socket's next state (a TLS socket's record layer moves on):
%% the caller keeps using that one. `{closed, Data, Socket}': Data is the
%% last the peer sends (TLS close_notify), and Socket, the one to use from
%% then on, sends nothing more (ours went with the answer).
-spec decode(socket(), binary()) ->
    {ok, binary(), socket()} | {closed, binary(), socket()} | {error, term()}.
decode({Mod, _, _} = S, Data) -> Mod:decode(S, Data).

%% @doc The TCP socket whose messages carry this socket's data: the
%% second element of each of them.
-spec tcp_socket(socket()) -> gen_tcp:socket().
tcp_socket({_, TCP, _}) -> TCP.

-spec is_tls(socket()) -> boolean().
is_tls({Mod, _, _}) -> Mod =:= throng_transport_tls.

%% @doc The channel binding data of the connection by type name
%% (`<<"tls-exporter">>', `<<"tls-server-end-point">>'): empty without TLS.
-spec channel_bindings(socket()) -> #{binary() => binary()}.
channel_bindings({throng_transport_tls, _, _} = S) -> throng_transport_tls:channel_bindings(S);
channel_bindings(_) -> #{}.

%% @doc Closes a connection after writing an error its peer may not have
%% read yet: ends the write side, then reads and drops what the peer still
%% sends until it closes, for at most 2 s or 1 MiB (four stanzas of the
%% default maximum size). Closing a socket
%% with unread input makes the kernel answer with a reset, and a reset makes
%% the peer's kernel drop what it had not read yet — the stream error.
-spec close_after_error(socket()) -> ok.
close_after_error({_, TCP, _} = S) ->
    _ = inet:setopts(TCP, [{active, false}]),
    _ = gen_tcp:shutdown(TCP, write),
    drain(TCP, erlang:monotonic_time(millisecond) + ?LINGER_MS, ?LINGER_BYTES),
    close(S).

drain(TCP, Deadline, Left) when Left > 0 ->
    case Deadline - erlang:monotonic_time(millisecond) of
        Wait when Wait > 0 ->
            case gen_tcp:recv(TCP, 0, Wait) of
                {ok, Bytes} -> drain(TCP, Deadline, Left - byte_size(Bytes));
                {error, _} -> ok
            end;
        _ -> ok
    end;
drain(_TCP, _Deadline, _Left) ->
    ok.
