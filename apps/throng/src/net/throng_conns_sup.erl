%% @doc Parent of the connection processes accepted by one acceptor: a small
%% special process (proc_lib + sys) rather than a `supervisor', because it
%% also enforces `max_connections': an acceptor reserves a slot (one shared
%% atomic counter per listener) before it starts a connection, and while the
%% listener holds that many connections the reservation waits, so new
%% connects queue in the kernel's listen backlog instead of being reset.
%%
%% Connections are linked children that trap exits; on shutdown each gets a
%% `shutdown' exit signal and 5 seconds to end (the c2s process closes its
%% stream with system-shutdown and stores undelivered messages), then is
%% killed. The children are not kept in a table: they are exactly the linked
%% processes other than the parent.
-module(throng_conns_sup).

-export([start_link/2, start_connection/2, await_slot/1]).
-export([init/3, system_continue/3, system_terminate/4, system_code_change/4]).
%% Called by supervisors (child specs) and proc_lib.
-ignore_xref([{start_link, 2}, {init, 3}]).
%% sys callbacks (the process is a special process).
-ignore_xref([{system_continue, 3}, {system_terminate, 4}, {system_code_change, 4}]).

-record(st, {parent :: pid(),
             ref :: throng_listener:ref(),
             protocol :: module(),
             count :: atomics:atomics_ref(),
             max :: pos_integer() | infinity,
             children = 0 :: non_neg_integer(),
             waiting = [] :: [{pid(), reference()}],
             timer = undefined :: undefined | reference()}).

-define(SHUTDOWN_TIMEOUT, 5000).
-define(RECHECK_MS, 20).

-spec start_link(throng_listener:ref(), pos_integer()) -> {ok, pid()}.
start_link(Ref, Index) ->
    proc_lib:start_link(?MODULE, init, [self(), Ref, Index]).

%% @doc Reserves one of the listener's max_connections slots, waiting until
%% one is free. An acceptor calls it after each accept and before starting
%% the connection: at the limit the accepted connection is held unanswered
%% and further connects wait in the kernel's listen backlog.
-spec await_slot(pid()) -> ok.
await_slot(Sup) ->
    MRef = erlang:monitor(process, Sup),
    Sup ! {await_slot, self(), MRef},
    receive
        {MRef, slot} -> erlang:demonitor(MRef, [flush]), ok;
        {'DOWN', MRef, process, _, Reason} -> exit({conns_sup_down, Reason})
    end.

%% @doc Starts a connection process for a socket accepted by the caller
%% (which still owns it) and hands the socket over.
-spec start_connection(pid(), throng_transport:socket()) -> {ok, pid()}.
start_connection(Sup, Sock) ->
    MRef = erlang:monitor(process, Sup),
    Sup ! {start_connection, self(), MRef},
    receive
        {MRef, {ok, Pid}} ->
            erlang:demonitor(MRef, [flush]),
            _ = case throng_transport:controlling_process(Sock, Pid) of
                    ok -> Pid ! {throng_transport, Sock};
                    {error, _} -> ok = throng_transport:close(Sock), exit(Pid, kill)
                end,
            {ok, Pid};
        {'DOWN', MRef, process, _, Reason} ->
            ok = throng_transport:close(Sock),
            exit({conns_sup_down, Reason})
    end.

-spec init(pid(), throng_listener:ref(), pos_integer()) -> no_return().
init(Parent, Ref, _Index) ->
    process_flag(trap_exit, true),
    #{count := Count, max := Max0, protocol := Protocol, opts := Opts} = throng_listener:info(Ref),
    %% A listener that stops listening when full enforces its limit by
    %% closing its socket: an accepted connection never waits for a slot
    %% (at most one per acceptor may go past the limit in that moment).
    Max = case maps:get(when_full, Opts, wait) of
              stop_listening -> infinity;
              wait -> Max0
          end,
    proc_lib:init_ack(Parent, {ok, self()}),
    loop(#st{parent = Parent, ref = Ref, protocol = Protocol, count = Count, max = Max}).

loop(#st{parent = Parent} = St) ->
    receive
        {start_connection, From, MRef} ->
            %% The slot was reserved by await_slot/1.
            Pid = (St#st.protocol):start_link(St#st.ref),
            throng_metrics:incr(connections_open),
            From ! {MRef, {ok, Pid}},
            loop(St#st{children = St#st.children + 1});
        {await_slot, From, MRef} ->
            loop(answer_or_park(From, MRef, St));
        {'EXIT', Parent, Reason} ->
            shutdown_children(St),
            exit(Reason);
        {'EXIT', _Child, _Reason} ->
            atomics:sub(St#st.count, 1, 1),
            closed(1),
            loop(unpark(St#st{children = St#st.children - 1}));
        recheck ->
            loop(unpark(St#st{timer = undefined}));
        {system, From, Req} ->
            sys:handle_system_msg(Req, From, Parent, ?MODULE, [], St);
        {'$gen_call', From, which_children} ->
            Proto = St#st.protocol,
            gen:reply(From, [{Proto, P, worker, [Proto]} || P <- children(St)]),
            loop(St);
        {'$gen_call', From, count_children} ->
            N = St#st.children,
            gen:reply(From, [{specs, 1}, {active, N}, {supervisors, 0}, {workers, N}]),
            loop(St);
        {'$gen_call', From, _Other} ->
            gen:reply(From, {error, not_supported}),
            loop(St);
        Other ->
            logger:warning(#{what => unexpected_message, process => ?MODULE, msg => Other}),
            loop(St)
    end.

answer_or_park(From, MRef, St) ->
    case reserve(St) of
        true -> From ! {MRef, slot}, St;
        false -> arm(St#st{waiting = St#st.waiting ++ [{From, MRef}]})
    end.

unpark(#st{waiting = []} = St) ->
    St;
unpark(#st{waiting = [{From, MRef} | Rest]} = St) ->
    case reserve(St) of
        true -> From ! {MRef, slot}, unpark(St#st{waiting = Rest});
        false -> arm(St)
    end.

%% Slots freed by the listener's other connection supervisors are noticed by
%% polling while an acceptor is parked.
arm(#st{timer = undefined} = St) ->
    St#st{timer = erlang:send_after(?RECHECK_MS, self(), recheck)};
arm(St) ->
    St.

%% Takes a slot if one is free (the counter is shared by the listener's
%% connection supervisors, so the check and the take are one atomic add).
reserve(#st{max = infinity, count = C}) ->
    atomics:add(C, 1, 1),
    true;
reserve(#st{max = Max, count = C}) ->
    case atomics:add_get(C, 1, 1) =< Max of
        true -> true;
        false -> atomics:sub(C, 1, 1), false
    end.

children(#st{parent = Parent}) ->
    {links, Links} = process_info(self(), links),
    [P || P <- Links, is_pid(P), P =/= Parent].

shutdown_children(St) ->
    Children = children(St),
    [exit(P, shutdown) || P <- Children],
    TRef = erlang:start_timer(?SHUTDOWN_TIMEOUT, self(), kill_children),
    wait_children(length(Children), TRef, St).

wait_children(0, TRef, _St) ->
    _ = erlang:cancel_timer(TRef),
    ok;
wait_children(N, TRef, St) ->
    receive
        {'EXIT', _P, _} ->
            atomics:sub(St#st.count, 1, 1),
            closed(1),
            wait_children(N - 1, TRef, St);
        {timeout, TRef, kill_children} ->
            Left = children(St),
            [exit(P, kill) || P <- Left],
            atomics:sub(St#st.count, 1, length(Left)),
            closed(length(Left)),
            ok
    end.

%% The connection gauges follow the children's exits, however they end
%% (a connection process killed without its clean-up too).
closed(N) ->
    throng_metrics:add(connections_open, -N),
    throng_metrics:add(connections_closed, N).

-spec system_continue(pid(), [sys:dbg_opt()], #st{}) -> no_return().
system_continue(_Parent, _Debug, St) ->
    loop(St).

-spec system_terminate(term(), pid(), [sys:dbg_opt()], #st{}) -> no_return().
system_terminate(Reason, _Parent, _Debug, St) ->
    shutdown_children(St),
    exit(Reason).

-spec system_code_change(#st{}, module(), term(), term()) -> {ok, #st{}}.
system_code_change(St, _Module, _OldVsn, _Extra) ->
    {ok, St}.
