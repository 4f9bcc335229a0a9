%% @doc Cluster membership: which nodes serve together, and what to do when
%% that changes.
%%
%% A member is a connected node whose `throng_cluster' process said hello:
%% distributed Erlang connects the nodes (a full mesh), this process tells
%% the others that Throng runs here. The member list goes to
%% {@link throng_members} (read by every session). When it changes:
%% <ul>
%% <li>every session of this node whose directory entry now belongs
%%     elsewhere enters itself again ({@link throng_session:place_again/1});</li>
%% <li>a moment later, entries this node no longer holds are dropped;</li>
%% <li>when a member goes down, the entries of its sessions held here are
%%     dropped and their contacts are sent unavailable presence on their
%%     behalf; ?RECOVER_DELAY_MS later, if it has not come back, the first
%%     member (in sorted order) moves the dead node's messages in flight
%%     back to offline storage. Every member remembers the nodes that went
%%     down until they come back, so that when the first member itself went
%%     down with them the next one does it; a recovery that fails (the
%%     database) is tried again.</li>
%% <li>when this process starts (the node starts, or this process was
%%     restarted after a crash and forgot the nodes that went down),
%%     ?SWEEP_AFTER_INTERVALS reconnect intervals and ?RECOVER_DELAY_MS
%%     later it asks the storage which nodes have messages in flight kept:
%%     those that are not connected are taken as gone (and recovered by
%%     the first member) as if they had just gone down, unless their
%%     host's epmd says they run (a node serving over the same database
%%     that no seed leads to: its sessions hold those messages).</li>
%% </ul>
%% Seeds (`cluster.seeds' and the nodes joined with `join-cluster') and lost
%% members are dialled again every `cluster.reconnect_interval' seconds, so
%% a netsplit heals by itself. No session, login or message waits for this
%% process.
-module(throng_cluster).
-behaviour(gen_server).

-include("throng.hrl").

-export([start_link/0, join/1, leave/0, members/0, status/0, local_status/0, gone/0]).
-export([init/1, handle_call/3, handle_cast/2, handle_info/2, terminate/2]).
%% Called by supervisors, and by bin/throng (throng_ctl) on the node.
%% gone/0: for a look from a remote shell (and the tests).
-ignore_xref([{start_link, 0}, {local_status, 0}, {gone, 0}]).

-define(PURGE_DELAY_MS, 2000).
-define(GONE_WORKERS, 8).
-define(SEEDS_FILE, "cluster_seeds").
%% After a member went down: how long before its messages in flight go back
%% to offline storage (a link that drops and comes back at once, or a node
%% restarted at once, which recovers its own at start-up, is not taken for
%% a dead node), and how long between tries when that fails.
-define(RECOVER_DELAY_MS, 3000).
%% The sweep at start waits this many reconnect intervals (and
%% ?RECOVER_DELAY_MS): the live members are connected by then.
-define(SWEEP_AFTER_INTERVALS, 2).
%% How long the sweep waits for a host's epmd.
-define(EPMD_TIMEOUT_MS, 5000).

-record(st, {known = [] :: [node()],      %% seeds and every node that was a member
             interval :: pos_integer(),
             %% members that went down and did not come back: their
             %% messages in flight may still be to recover
             gone = [] :: [node()],
             %% the running recovery: its monitor and the nodes it does
             recovering = none :: none | {pid(), reference()}}).

-spec start_link() -> {ok, pid()} | {error, term()}.
start_link() ->
    gen_server:start_link({local, ?MODULE}, ?MODULE, [], []).

%% @doc Joins the cluster of Node: connects, checks that both use the same
%% storage, and remembers Node as a seed (DATA_DIR/cluster_seeds).
-spec join(node()) -> ok | {error, string()}.
join(Node) ->
    gen_server:call(?MODULE, {join, Node}, 60000).

%% @doc Leaves the cluster: the other members are told and the remembered
%% seeds are forgotten. The caller ends this node's sessions first, while it
%% is still a member (so that their contacts on every node see them go and
%% what they held goes to the shared storage), and stops the node after.
-spec leave() -> ok.
leave() ->
    gen_server:call(?MODULE, leave, 60000).

%% @doc The members, sorted (this node included).
-spec members() -> [node(), ...].
members() ->
    throng_members:members().

%% @doc Every member with its sessions and state, as this node sees them.
-spec status() -> [#{node := node(), sessions := non_neg_integer() | unreachable,
                     directory := non_neg_integer() | unreachable,
                     address := binary() | none | unreachable}].
status() ->
    Members = members(),
    Results = erpc:multicall(Members, ?MODULE, local_status, [], 5000),
    [case R of
         {ok, Info} -> Info#{node => N};
         _ -> #{node => N, sessions => unreachable, directory => unreachable,
                address => unreachable}
     end || {N, R} <- lists:zip(Members, Results)].

%% @doc This node's sessions, directory entries, and the address it gives
%% clients sent to it (none: no cluster.node_address, or a listener is
%% full) (status/0 asks each member).
-spec local_status() -> #{sessions := non_neg_integer(), directory := non_neg_integer(),
                          address := binary() | none}.
local_status() ->
    #{sessions => throng_sm:count(), directory => throng_dir:size(),
      address => throng_node_addr:own()}.

%% @doc The members that went down and whose messages in flight are not
%% back in offline storage yet, as this node knows them: the first member
%% recovers them and tells the others when it has.
-spec gone() -> [node()].
gone() ->
    gen_server:call(?MODULE, gone, 5000).

%%% gen_server

-spec init([]) -> {ok, #st{}}.
init([]) ->
    Interval = throng_config:get([cluster, reconnect_interval]) * 1000,
    case node() of
        nonode@nohost ->
            {ok, #st{interval = Interval}};
        _ ->
            %% terminate/2 runs when the server stops: the others are told.
            process_flag(trap_exit, true),
            ok = net_kernel:monitor_nodes(true),
            Known = lists:usort(throng_config:get([cluster, seeds]) ++ saved_seeds()) -- [node()],
            [hello(N) || N <- nodes()],
            self() ! reconnect,
            erlang:send_after(?SWEEP_AFTER_INTERVALS * Interval + ?RECOVER_DELAY_MS, self(), sweep),
            {ok, #st{known = Known, interval = Interval}}
    end.

-spec handle_call(term(), gen_server:from(), #st{}) -> {reply, term(), #st{}}.
handle_call({join, Node}, _From, St) ->
    case do_join(Node) of
        ok ->
            save_seeds(lists:usort([Node | saved_seeds()])),
            {reply, ok, St#st{known = lists:usort([Node | St#st.known])}};
        {error, _} = Error ->
            {reply, Error, St}
    end;
handle_call(leave, _From, St) ->
    Others = members() -- [node()],
    [erlang:send({?MODULE, N}, {bye, node(), leaving}, [noconnect]) || N <- Others],
    save_seeds([]),
    changed(members(), [node()]),
    {reply, ok, St#st{known = []}};
handle_call(gone, _From, #st{gone = Gone} = St) ->
    {reply, Gone, St};
handle_call(_Req, _From, St) ->
    {reply, {error, unknown_request}, St}.

-spec handle_cast(term(), #st{}) -> {noreply, #st{}}.
handle_cast(_Msg, St) ->
    {noreply, St}.

-spec handle_info(term(), #st{}) -> {noreply, #st{}}.
handle_info(reconnect, #st{known = Known, interval = Interval} = St) ->
    Lost = [N || N <- Known, not lists:member(N, nodes())],
    %% connect_node/1 can take seconds for an unreachable host: not here.
    [spawn(fun() -> net_kernel:connect_node(N) end) || N <- Lost],
    %% Connected but not a member: a hello crossed a nodedown (the link
    %% dropped and came back while the hello was on its way). Say it again.
    Members = members(),
    [hello(N) || N <- nodes(), lists:member(N, Known), not lists:member(N, Members)],
    erlang:send_after(Interval, self(), reconnect),
    {noreply, St};
handle_info({nodeup, Node}, St) ->
    hello(Node),
    {noreply, St};
handle_info(sweep, St) ->
    %% The storage may be slow or down, a host may not answer: asked by a
    %% process of its own.
    Self = self(),
    _ = spawn(fun() -> Self ! {inflight_nodes, unconnected_inflight_nodes()} end),
    {noreply, St};
handle_info({inflight_nodes, failed}, St) ->
    erlang:send_after(?RECOVER_DELAY_MS, self(), sweep),
    {noreply, St};
handle_info({inflight_nodes, {Unconnected, Running}}, #st{gone = Gone} = St) ->
    %% Running but not connected here: it serves its sessions, which hold
    %% these messages, outside this cluster over the same storage (no seed
    %% leads to it). Neither gone nor a member: said, and left alone.
    Running =/= [] andalso
        logger:warning(#{what => cluster_storage_shared_with_a_node_not_connected,
                         nodes => Running}),
    %% Gone: the others, unless they connected meanwhile (even a node
    %% still saying hello is connected).
    Dead = [N || N <- Unconnected -- Running, not lists:member(N, nodes())],
    _ = case Dead -- Gone of
            [] -> ok;
            New ->
                logger:notice(#{what => cluster_inflight_of_gone_nodes, nodes => New}),
                erlang:send_after(?RECOVER_DELAY_MS, self(), recover)
        end,
    {noreply, St#st{gone = lists:usort(Dead ++ Gone)}};
handle_info(recover, #st{recovering = {_, _}} = St) ->
    %% When the running recovery ends, what is left is looked at again.
    {noreply, St};
handle_info(recover, St) ->
    {noreply, recover(St)};
handle_info({recovered, Pid, Done}, #st{recovering = {Pid, MRef}} = St) ->
    erlang:demonitor(MRef, [flush]),
    {noreply, recovered(Done, St)};
handle_info({'DOWN', MRef, process, Pid, Why}, #st{recovering = {Pid, MRef}} = St) ->
    logger:error(#{what => inflight_recover_failed, reason => Why,
                   retry_ms => ?RECOVER_DELAY_MS}),
    {noreply, recovered([], St)};
handle_info({inflight_recovered, By, Nodes}, #st{gone = Gone} = St) ->
    %% The first member recovered them: nothing is left to do if it goes
    %% down too.
    logger:info(#{what => cluster_gone_recovered, by => By, nodes => Nodes}),
    {noreply, St#st{gone = Gone -- Nodes}};
handle_info({hello, Node}, St) ->
    %% Always answered (welcome is not): the sender may have dropped this
    %% node and need to add it again although this node still has it.
    erlang:send({?MODULE, Node}, {welcome, node()}, [noconnect]),
    %% Where clients reach this node, said on every hello and welcome: the
    %% sender may have restarted and forgotten it.
    throng_node_addr:tell(Node),
    {noreply, member_up(Node, St)};
handle_info({node_address, Node, Addr}, St) ->
    %% Where a member's clients reach it (see-other-host), or none.
    case lists:member(Node, members()) of
        true -> throng_node_addr:learn(Node, Addr);
        false -> ok
    end,
    {noreply, St};
handle_info({welcome, Node}, St) ->
    throng_node_addr:tell(Node),
    {noreply, member_up(Node, St)};
handle_info({nodedown, Node}, St) ->
    St1 = member_gone(Node, down, St),
    %% Already back (the link dropped and came back at once)? Say hello.
    lists:member(Node, nodes()) andalso hello(Node),
    {noreply, St1};
handle_info({bye, Node, leaving}, #st{known = Known} = St) ->
    %% Left the cluster: not dialled again.
    St1 = member_gone(Node, left, St),
    {noreply, St1#st{known = Known -- [Node]}};
handle_info({bye, Node, stopping}, St) ->
    %% Stopping: dialled again until it is back.
    {noreply, member_gone(Node, stopped, St)};
handle_info(purge, St) ->
    Me = node(),
    Dropped = throng_dir:keep_only(
                fun({{US, _}, Pid, _, _, _}) -> throng_members:holder(US, node(Pid)) =:= Me end),
    Dropped > 0 andalso logger:info(#{what => directory_purged, entries => Dropped}),
    {noreply, St};
handle_info(_Msg, St) ->
    {noreply, St}.

%% The server stops (its sessions have ended already: the listeners stop
%% before this process): the other members are told at once rather than
%% when the node's connection drops.
%% A crash of this process is not a stop: the others are not told (they
%% would drop the entries of this node's sessions, which go on), and the
%% process that restarts says hello again.
-spec terminate(term(), #st{}) -> ok.
terminate(Reason, _St) when Reason =:= shutdown; Reason =:= normal;
                            element(1, Reason) =:= shutdown ->
    [erlang:send({?MODULE, N}, {bye, node(), stopping}, [noconnect]) || N <- members() -- [node()]],
    throng_members:set([]),
    ok;
terminate(_Reason, _St) ->
    ok.

%%% Membership changes

hello(Node) ->
    erlang:send({?MODULE, Node}, {hello, node()}, [noconnect]).

member_up(Node, #st{known = Known, gone = Gone} = St) ->
    Old = members(),
    case lists:member(Node, Old) of
        true -> ok;
        false ->
            logger:notice(#{what => cluster_member_up, node => Node}),
            _ = spawn(fun() -> throng_storage:node_up(Node) end),
            changed(Old, [Node | Old])
    end,
    %% Back: it recovered its own messages in flight when it started, or
    %% (the link came back) its sessions still hold them.
    St#st{known = lists:usort([Node | Known]), gone = Gone -- [Node]}.

member_gone(Node, Why, #st{gone = Gone} = St) ->
    Old = members(),
    case lists:member(Node, Old) of
        false -> St;
        true ->
            logger:notice(#{what => cluster_member_down, node => Node, reason => Why}),
            throng_node_addr:forget(Node),
            changed(Old, Old -- [Node]),
            _ = spawn(fun() -> sessions_gone(Node) end),
            erlang:send_after(?RECOVER_DELAY_MS, self(), recover),
            St#st{gone = lists:usort([Node | Gone])}
    end.

%% The end of a recovery: the nodes it did are forgotten, here and by the
%% other members (which kept them in case this one went down too); failed
%% ones, and nodes that went down meanwhile, are looked at again later.
recovered(Done, #st{gone = Gone} = St) ->
    Done =/= [] andalso
        [erlang:send({?MODULE, N}, {inflight_recovered, node(), Done}, [noconnect])
         || N <- members() -- [node()]],
    Left = Gone -- Done,
    Left =/= [] andalso erlang:send_after(?RECOVER_DELAY_MS, self(), recover),
    St#st{gone = Left, recovering = none}.

%% The messages in flight of the members that went down and are not back:
%% recovered by the first member (in a process of its own: the database may
%% be slow); the others keep the list, in case the first one goes down too.
recover(#st{gone = Gone} = St) ->
    case {[N || N <- Gone, not lists:member(N, nodes())], members()} of
        {[], _} ->
            St#st{gone = []};
        {Dead, [First | _]} when First =:= node() ->
            Self = self(),
            Worker = spawn_monitor(
                       fun() ->
                               Self ! {recovered, self(),
                                       [N || N <- Dead, recover_inflight(N) =/= failed]}
                       end),
            St#st{gone = Dead, recovering = Worker};
        {Dead, _} ->
            St#st{gone = Dead}
    end.

changed(Old0, New0) ->
    Old = lists:usort(Old0),
    New = lists:usort(New0),
    throng_members:set(New),
    Me = node(),
    Moved = [Pid || {{US, _}, Pid} <- throng_sm:local_keys(),
                    throng_members:holder(US, Me, Old) =/= throng_members:holder(US, Me, New)],
    [throng_session:place_again(Pid) || Pid <- Moved],
    logger:notice(#{what => cluster_members, members => New, sessions_placed_again => length(Moved)}),
    erlang:send_after(?PURGE_DELAY_MS, self(), purge),
    ok.

%% The sessions of a node that went down: the directory forgets those held
%% here, and their contacts are told (the node cannot tell them any more).
%% Each member tells the contacts of the entries it held (the directory is
%% sharded, so the work is spread over the members), and does so with
%% ?GONE_WORKERS processes at once: each session costs a roster read, which
%% may wait for a remote database.
sessions_gone(Node) ->
    Entries = throng_dir:drop_node(Node),
    Available = [{U, S, R} || {{{U, S}, R}, _Pid, Prio, _, _} <- Entries, Prio =/= undefined],
    Told = in_parallel(fun tell_unavailable/1, Available, ?GONE_WORKERS),
    throng_metrics:add(cluster_sessions_dropped, length(Entries)),
    logger:notice(#{what => cluster_sessions_dropped, node => Node, sessions => length(Entries),
                    unavailable_sent => Told}).

tell_unavailable({U, S, R}) ->
    Unavailable = #xmlel{name = <<"presence">>, attrs = [{<<"type">>, <<"unavailable">>}]},
    throng_presence:unavailable(#jid{user = U, server = S, resource = R}, Unavailable,
                                throng_directed:new()).

%% Fun applied to every item by at most Workers processes; how many were done.
in_parallel(_Fun, [], _Workers) -> 0;
in_parallel(Fun, Items, Workers) ->
    Chunks = chunks(Items, (length(Items) + Workers - 1) div Workers),
    Parent = self(),
    Monitors = [spawn_monitor(fun() -> Parent ! {done, self(), length([Fun(I) || I <- C])} end)
                || C <- Chunks],
    lists:sum([receive
                   {done, Pid, N} -> erlang:demonitor(Ref, [flush]), N;
                   {'DOWN', Ref, process, Pid, Why} ->
                       logger:error(#{what => cluster_sessions_gone_worker_failed, reason => Why}),
                       0
               end || {Pid, Ref} <- Monitors]).

%% Items in runs of Size (the last one shorter).
chunks(Items, Size) when length(Items) =< Size -> [Items];
chunks(Items, Size) ->
    {Chunk, Rest} = lists:split(Size, Items),
    [Chunk | chunks(Rest, Size)].

%% The nodes with messages in flight that are not connected here, and
%% those of them that run all the same (registered with their host's
%% epmd, asked without connecting: a connection would make it a member);
%% or failed. Always an answer: the process that asks waits for it.
unconnected_inflight_nodes() ->
    try throng_storage:inflight_nodes() of
        Nodes ->
            Unconnected = [N || N <- Nodes, N =/= node(), not lists:member(N, nodes())],
            {Unconnected, [N || N <- Unconnected, registered(N)]}
    catch Class:Why ->
            logger:error(#{what => inflight_nodes_failed, class => Class, reason => Why,
                           retry_ms => ?RECOVER_DELAY_MS}),
            failed
    end.

%% Whether a node of that name runs on its host (its epmd knows it). A
%% host that does not answer: no (as a node not connected is taken for
%% gone after a netsplit).
registered(Node) ->
    case string:split(atom_to_list(Node), "@") of
        [Name, Host] ->
            try erl_epmd:port_please(Name, Host, ?EPMD_TIMEOUT_MS) of
                {port, _, _} -> true;
                _ -> false
            catch _:_ -> false
            end;
        _ -> false
    end.

recover_inflight(Node) ->
    try throng_storage:inflight_recover({node, Node}) of
        N ->
            logger:notice(#{what => cluster_inflight_recovered, node => Node, messages => N}),
            N
    catch error:{storage_failed, Why} ->
            logger:error(#{what => inflight_recover_failed, node => Node, reason => Why,
                           retry_ms => ?RECOVER_DELAY_MS}),
            failed
    end.

%%% Joining

do_join(Node) when Node =:= node() ->
    {error, "a node cannot join itself"};
do_join(Node) ->
    case net_kernel:connect_node(Node) of
        false ->
            {error, lists:flatten(io_lib:format(
                                    "cannot connect to ~s (is it running, with the same cookie?)",
                                    [Node]))};
        true ->
            try erpc:call(Node, throng_storage, cluster_identity, [], 10000) of
                Theirs ->
                    case throng_storage:cluster_identity() of
                        Theirs -> hello(Node), ok;
                        Mine ->
                            {error, lists:flatten(io_lib:format(
                                "~s keeps its data in ~0tp, this node in ~0tp: a cluster shares one "
                                "storage (set cluster.db_nodes, or the same PostgreSQL database, "
                                "on every node; docs/clustering.md)", [Node, Theirs, Mine]))}
                    end
            catch Class:Why ->
                    {error, lists:flatten(io_lib:format("~s does not run Throng: ~p:~0tp",
                                                        [Node, Class, Why]))}
            end
    end.

saved_seeds() ->
    case file:consult(seeds_file()) of
        {ok, [Nodes]} when is_list(Nodes) -> [N || N <- Nodes, is_atom(N)];
        _ -> []
    end.

save_seeds(Nodes) ->
    ok = file:write_file(seeds_file(), io_lib:format("~p.~n", [Nodes])).

seeds_file() ->
    filename:join(throng_paths:data_dir(), ?SEEDS_FILE).
