%% @doc Plain TCP transport: gen_tcp, on the inet driver or the socket
%% backend (whichever the listen options chose; accepted sockets take their
%% listen socket's).
-module(throng_transport_tcp).
-behaviour(throng_transport).

-export([listen/2, accept/1, messages/0, send/2, setopts/2, controlling_process/2,
         peername/1, close/1, upgrade/3, decode/2]).

-spec listen(inet:port_number(), [gen_tcp:listen_option() | inet:inet_backend()]) ->
    {ok, gen_tcp:socket()} | {error, term()}.
listen(Port, Opts) -> gen_tcp:listen(Port, Opts).

-spec accept(gen_tcp:socket()) -> {ok, throng_transport:socket()} | {error, term()}.
accept(LSock) ->
    case gen_tcp:accept(LSock) of
        {ok, S} -> {ok, {?MODULE, S, undefined}};
        {error, _} = E -> E
    end.

-spec messages() -> throng_transport:message_tags().
messages() -> {tcp, tcp_closed, tcp_error, tcp_passive}.

-spec send(throng_transport:socket(), iodata()) -> ok | {error, term()}.
send({_, S, _}, Data) -> gen_tcp:send(S, Data).

-spec setopts(throng_transport:socket(), [gen_tcp:option()]) -> ok | {error, term()}.
setopts({_, S, _}, Opts) -> inet:setopts(S, Opts).

-spec controlling_process(throng_transport:socket(), pid()) -> ok | {error, term()}.
controlling_process({_, S, _}, Pid) -> gen_tcp:controlling_process(S, Pid).

-spec peername(throng_transport:socket()) ->
    {ok, {inet:ip_address(), inet:port_number()}} | {error, term()}.
peername({_, S, _}) -> inet:peername(S).

-spec close(throng_transport:socket()) -> ok.
close({_, S, _}) -> _ = gen_tcp:close(S), ok.

%% @doc STARTTLS: the same TCP connection, now carrying TLS (any transport
%% that can run over an accepted TCP socket: `Into:over_tcp/2').
-spec upgrade(throng_transport:socket(), module(), list()) ->
    {ok, throng_transport:socket()} | {error, term()}.
upgrade({_, S, _}, Into, Opts) ->
    _ = code:ensure_loaded(Into),   %% function_exported/3 is false for a module not loaded yet
    case erlang:function_exported(Into, over_tcp, 2) of
        true -> Into:over_tcp(S, Opts);
        false -> {error, {cannot_upgrade, ?MODULE, Into}}
    end.

-spec decode(throng_transport:socket(), binary()) -> {ok, binary(), throng_transport:socket()}.
decode(Sock, Data) -> {ok, Data, Sock}.
