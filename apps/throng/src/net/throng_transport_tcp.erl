%% @doc Plain TCP transport: gen_tcp, on the inet driver or the socket
%% backend (whichever the listen options chose; accepted sockets take their
%% listen socket's).
-module(throng_transport_tcp).
-behaviour(throng_transport).

-export([listen/2, accept/1, messages/0, send/2, setopts/2, controlling_process/2,
         peername/1, close/1, upgrade/3, decode/2]).

%% @doc gen_tcp:listen/2, and `{hibernate_after, Ms}' among the options:
%% on the socket backend every accepted socket has a process of its own
%% (gen_tcp_socket, a gen_statem) which then hibernates after Ms idle, as
%% the session does: an idle one takes 13,960 bytes, 1,952 hibernated. That process takes gen_statem start options from its listen
%% socket's `start_opts', an option OTP 25's gen_tcp_socket:setopts/2 sets
%% but inet:setopts/2 does not document: if a later OTP refuses it, the
%% listener starts all the same and says so. (The inet driver has no such
%% process: nothing to do.)
-spec listen(inet:port_number(),
             [gen_tcp:listen_option() | inet:inet_backend() | {hibernate_after, timeout()}]) ->
    {ok, gen_tcp:socket()} | {error, term()}.
listen(Port, Opts) ->
    Hib = [O || {hibernate_after, _} = O <- Opts],
    case gen_tcp:listen(Port, Opts -- Hib) of
        {ok, L} when not is_port(L) ->
            Result = try gen_tcp_socket:setopts(L, [{start_opts, Hib}])
                     catch Class:Why -> {Class, Why}
                     end,
            Result =:= ok orelse
                logger:warning(#{what => socket_processes_not_hibernating, reason => Result,
                                 effect => "idle connections hold about 11 KB more each"}),
            {ok, L};
        Other ->
            Other
    end.

-spec accept(gen_tcp:socket()) -> {ok, throng_transport:socket()} | {error, term()}.
accept(LSock) ->
    case throng_accept:accept(LSock) of
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
