%% @doc An accept loop on a listener's socket. Several acceptors share one
%% listen socket; each hands its connections to its own connection
%% supervisor, after reserving a slot (which waits while the listener is at
%% max_connections).
-module(throng_acceptor).

-export([start_link/2, init/3]).
%% Called by supervisors (child specs) and proc_lib.
-ignore_xref([{start_link, 2}, {init, 3}]).

%% Back-off when the process or the node is out of file descriptors.
-define(EMFILE_SLEEP, 100).

-spec start_link(throng_listener:ref(), pos_integer()) -> {ok, pid()}.
start_link(Ref, Index) ->
    {ok, proc_lib:spawn_link(?MODULE, init, [self(), Ref, Index])}.

-spec init(pid(), throng_listener:ref(), pos_integer()) -> no_return().
init(ListenerSup, Ref, Index) ->
    #{lsock := LSock, transport := Transport} = throng_listener:info(Ref),
    %% The sibling connection supervisor was started before us.
    [ConnsSup] = [P || {{conns_sup, I}, P, _, _} <- supervisor:which_children(ListenerSup),
                       I =:= Index],
    loop(Transport, LSock, ConnsSup, Ref).

loop(Transport, closed, ConnsSup, Ref) ->
    %% The listener is full and stopped listening: wait for its new socket.
    timer:sleep(?EMFILE_SLEEP),
    #{lsock := LSock} = throng_listener:info(Ref),
    loop(Transport, LSock, ConnsSup, Ref);
loop(Transport, LSock, ConnsSup, Ref) ->
    case throng_transport:accept(Transport, LSock) of
        {ok, Sock} ->
            throng_metrics:incr(connections_accepted),
            ok = throng_conns_sup:await_slot(ConnsSup),
            {ok, _Pid} = throng_conns_sup:start_connection(ConnsSup, Sock),
            loop(Transport, LSock, ConnsSup, Ref);
        {error, Why} when Why =:= emfile; Why =:= enfile; Why =:= enobufs; Why =:= enomem ->
            throng_metrics:incr(accept_errors),
            logger:error(#{what => accept_failed, reason => Why,
                           action => "sleeping, connections wait in the backlog"}),
            timer:sleep(?EMFILE_SLEEP),
            loop(Transport, LSock, ConnsSup, Ref);
        {error, closed} ->
            case throng_listener:info(Ref) of
                %% Closed by the listener because it is full, or already
                %% replaced by a new socket.
                #{lsock := New} when New =/= LSock -> loop(Transport, New, ConnsSup, Ref);
                _ -> exit(listen_socket_closed)
            end;
        {error, Why} ->
            throng_metrics:incr(accept_errors),
            logger:info(#{what => accept_failed, reason => Why}),
            loop(Transport, LSock, ConnsSup, Ref)
    end.
