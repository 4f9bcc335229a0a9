%% @doc Owns one listener's listen socket and its connection counter, and
%% publishes both (with the listener's options) in persistent_term for the
%% acceptors and connection supervisors.
-module(throng_listener).
-behaviour(gen_server).

-export([start_link/4, info/1, port/1, connections/1]).
-export([init/1, handle_call/3, handle_cast/2, handle_info/2, terminate/2]).
%% Called by supervisors (child specs) and proc_lib.
-ignore_xref([{start_link, 4}]).

-type ref() :: {listener, pos_integer()}.
-type info() :: #{lsock := gen_tcp:socket(), opts := map(),
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
    #{lsock := L} = info(Ref),
    {ok, Port} = inet:port(L),
    Port.

%% @doc The connections a listener holds now (slots taken).
-spec connections(ref()) -> integer().
connections(Ref) ->
    #{count := C} = info(Ref),
    atomics:get(C, 1).

-spec init({ref(), map(), module(), module()}) -> {ok, ref()} | {stop, term()}.
init({Ref, #{ip := IP, port := Port, backlog := Backlog, send_timeout := SendTimeout,
             max_connections := Max, recv_buffer := Buffer, send_buffer := SndBuf} = Opts,
      Transport, Protocol}) ->
    process_flag(trap_exit, true),
    Family = case tuple_size(IP) of 8 -> [inet6]; 4 -> [inet] end,
    SockOpts = Family ++
        [binary, {packet, raw}, {active, false}, {reuseaddr, true}, {ip, IP},
         {backlog, Backlog}, {nodelay, true}, {keepalive, true}, {buffer, Buffer},
         {send_timeout, SendTimeout * 1000}, {send_timeout_close, true}]
        ++ [{sndbuf, SndBuf} || SndBuf > 0],
    case throng_transport:listen(Transport, Port, SockOpts) of
        {ok, LSock} ->
            Count = case persistent_term:get({?MODULE, Ref}, undefined) of
                        #{count := C} -> C;   %% keep counting across a restart
                        undefined -> atomics:new(1, [{signed, true}])
                    end,
            persistent_term:put({?MODULE, Ref}, #{lsock => LSock, opts => Opts,
                                                  transport => Transport, protocol => Protocol,
                                                  count => Count, max => Max}),
            logger:notice(#{what => listener_started, ip => inet:ntoa(IP),
                            port => port(Ref), backlog => Backlog,
                            max_connections => Max}),
            {ok, Ref};
        {error, Why} ->
            logger:error(#{what => listen_failed, ip => inet:ntoa(IP), port => Port,
                           reason => inet:format_error(Why)}),
            {stop, {listen_failed, Port, Why}}
    end.

-spec handle_call(term(), gen_server:from(), ref()) -> {reply, ok, ref()}.
handle_call(_Req, _From, Ref) -> {reply, ok, Ref}.

-spec handle_cast(term(), ref()) -> {noreply, ref()}.
handle_cast(_Msg, Ref) -> {noreply, Ref}.

-spec handle_info(term(), ref()) -> {noreply, ref()}.
handle_info(_Msg, Ref) -> {noreply, Ref}.

-spec terminate(term(), ref()) -> ok.
terminate(_Reason, Ref) ->
    #{lsock := L} = info(Ref),
    _ = gen_tcp:close(L),
    ok.
