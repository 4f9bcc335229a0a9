%% @doc Owns one listener's listen socket and its connection counter, and
%% publishes both (with the listener's options) in persistent_term for the
%% acceptors and connection supervisors.
%%
%% With `when_full: stop_listening' it closes the listen socket while the
%% listener holds max_connections, and opens it again below 95% of it: with
%% `reuse_port' (several nodes on one port) the kernel then sends new
%% connections to the other nodes. The acceptors wait for the new socket.
-module(throng_listener).
-behaviour(gen_server).

-export([start_link/4, info/1, port/1, connections/1, listening/1, forget_counts/0]).
-export([init/1, handle_call/3, handle_cast/2, handle_info/2, terminate/2]).
%% Called by supervisors (child specs) and proc_lib.
-ignore_xref([{start_link, 4}]).
%% API used by tests and operators (is a full listener's socket closed?).
-ignore_xref([{listening, 1}]).

-type ref() :: {listener, pos_integer()}.
-type info() :: #{lsock := gen_tcp:socket() | closed, opts := map(),
                  transport := module(), protocol := module(),
                  count := atomics:atomics_ref(), max := pos_integer() | infinity}.
-export_type([ref/0, info/0]).

-spec start_link(ref(), map(), module(), module()) -> {ok, pid()} | {error, term()}.
start_link(Ref, Opts, Transport, Protocol) ->
    gen_server:start_link(?MODULE, {Ref, Opts, Transport, Protocol}, []).

%% @doc The listen socket, options and counter of a listener.
-spec info(ref()) -> info().
info(Ref) ->
    persistent_term:get({?MODULE, Ref}).

%% @doc The TCP port a listener is bound to (useful with port 0 in tests).
-spec port(ref()) -> inet:port_number().
port(Ref) ->
    case info(Ref) of
        #{lsock := closed, opts := #{port := Port}} -> Port;
        #{lsock := L} -> {ok, Port} = inet:port(L), Port
    end.

%% @doc The connections a listener holds now (slots taken).
-spec connections(ref()) -> integer().
connections(Ref) ->
    #{count := C} = info(Ref),
    atomics:get(C, 1).

%% @doc Forgets every listener's socket and connection count (application
%% start: nothing is connected yet, and a listener then starts counting
%% from zero).
-spec forget_counts() -> ok.
forget_counts() ->
    [persistent_term:erase(K) || {{?MODULE, _} = K, _} <- persistent_term:get()],
    ok.

%% @doc Whether the listen socket is open (it is closed while a
%% `stop_listening' listener is full).
-spec listening(ref()) -> boolean().
listening(Ref) ->
    #{lsock := L} = info(Ref),
    L =/= closed.

-define(FULL_CHECK_MS, 50).

-spec init({ref(), map(), module(), module()}) -> {ok, map()} | {stop, term()}.
init({Ref, #{ip := IP, port := Port, backlog := Backlog, send_timeout := SendTimeout,
             max_connections := Max, login_recv_buffer := Buffer, send_buffer := SndBuf,
             hibernate_after := Hib} = Opts,
      Transport, Protocol}) ->
    process_flag(trap_exit, true),
    Family = case tuple_size(IP) of 8 -> [inet6]; 4 -> [inet] end,
    %% Accepted sockets read login_recv_buffer bytes at a time until their
    %% session opens (throng_c2s_io:session_reads/1).
    %% The backend first (gen_tcp takes it there only), and always: a node
    %% started with -kernel inet_backend socket still gives a listener the
    %% backend its configuration names.
    SockOpts = [{inet_backend, maps:get(inet_backend, Opts, inet)}] ++ Family ++
        [binary, {packet, raw}, {active, false}, {reuseaddr, true}, {ip, IP},
         {backlog, Backlog}, {nodelay, true}, {keepalive, true}, {buffer, Buffer},
         {send_timeout, SendTimeout * 1000}, {send_timeout_close, true}]
        ++ [{sndbuf, SndBuf} || SndBuf > 0]
        ++ [{recbuf, RcvBuf} || RcvBuf <- [maps:get(kernel_recv_buffer, Opts, 0)], RcvBuf > 0]
        ++ [reuse_port() || maps:get(reuse_port, Opts, false)]
        ++ [{hibernate_after, Hib}],   %% the socket backend's socket processes
    case throng_transport:listen(Transport, Port, SockOpts) of
        {ok, LSock} ->
            Count = case persistent_term:get({?MODULE, Ref}, undefined) of
                        #{count := C} -> C;   %% keep counting across a restart
                        undefined -> atomics:new(1, [{signed, true}])
                    end,
            persistent_term:put({?MODULE, Ref}, #{lsock => LSock, opts => Opts,
                                                  transport => Transport, protocol => Protocol,
                                                  count => Count, max => Max}),
            %% Not full (any more, if this listener was restarted full).
            throng_node_addr:listener_full(Ref, false),
            logger:notice(#{what => listener_started, ip => inet:ntoa(IP),
                            port => port(Ref), backlog => Backlog,
                            max_connections => Max}),
            St = #{ref => Ref, transport => Transport, sockopts => SockOpts,
                   port => port(Ref), count => Count, max => Max},
            case {maps:get(when_full, Opts, wait), Max} of
                {stop_listening, N} when is_integer(N) ->
                    erlang:send_after(?FULL_CHECK_MS, self(), check_full),
                    {ok, St#{watch => true}};
                _ ->
                    {ok, St#{watch => false}}
            end;
        {error, Why} ->
            logger:error(#{what => listen_failed, ip => inet:ntoa(IP), port => Port,
                           reason => inet:format_error(Why)}),
            {stop, {listen_failed, Port, Why}}
    end.

%% SO_REUSEPORT (Linux: SOL_SOCKET 1, SO_REUSEPORT 15).
reuse_port() ->
    {raw, 1, 15, <<1:32/native>>}.

-spec handle_call(term(), gen_server:from(), map()) -> {reply, ok, map()}.
handle_call(_Req, _From, St) -> {reply, ok, St}.

-spec handle_cast(term(), map()) -> {noreply, map()}.
handle_cast(_Msg, St) -> {noreply, St}.

-spec handle_info(term(), map()) -> {noreply, map()}.
handle_info(check_full, #{ref := Ref, count := Count, max := Max} = St) ->
    erlang:send_after(?FULL_CHECK_MS, self(), check_full),
    N = atomics:get(Count, 1),
    case listening(Ref) of
        true when N >= Max -> {noreply, stop_listening(St)};
        false when N < Max * 95 div 100 -> {noreply, listen_again(St)};
        _ -> {noreply, St}
    end;
handle_info(_Msg, St) -> {noreply, St}.

stop_listening(#{ref := Ref} = St) ->
    #{lsock := L} = Info = info(Ref),
    persistent_term:put({?MODULE, Ref}, Info#{lsock := closed}),
    _ = gen_tcp:close(L),
    throng_node_addr:listener_full(Ref, true),
    throng_metrics:incr(listener_full),
    logger:warning(#{what => listener_full, port => maps:get(port, St),
                     action => "stopped listening: new connections go to other nodes"}),
    St.

listen_again(#{ref := Ref, transport := Transport, sockopts := SockOpts, port := Port} = St) ->
    case throng_transport:listen(Transport, Port, SockOpts) of
        {ok, LSock} ->
            Info = info(Ref),
            persistent_term:put({?MODULE, Ref}, Info#{lsock := LSock}),
            throng_node_addr:listener_full(Ref, false),
            logger:notice(#{what => listener_resumed, port => Port}),
            St;
        {error, Why} ->
            logger:error(#{what => listen_failed, port => Port, reason => inet:format_error(Why)}),
            St
    end.

-spec terminate(term(), map()) -> ok.
terminate(_Reason, #{ref := Ref}) ->
    case info(Ref) of
        #{lsock := closed} -> ok;
        #{lsock := L} -> _ = gen_tcp:close(L)
    end,
    ok.
