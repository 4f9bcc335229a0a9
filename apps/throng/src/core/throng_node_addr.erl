%% @doc Where clients reach each member of the cluster, for the
%% see-other-host redirect to an account's home (listener option
%% `redirect_to_home').
%%
%% Every node may have an address (`cluster.node_address'); it tells it to
%% each member that joins (the membership process calls tell/1 and learn/2
%% and forget/1). While one of this node's listeners is full (`when_full:
%% stop_listening') it tells the members it has no address, so that no
%% client is sent to a node that would refuse it, and tells them the
%% address again when the listener listens again.
%%
%% The addresses are an ETS table ({Node, Address}) read by the sessions
%% that redirect: one read per login, no process on the path.
-module(throng_node_addr).

-export([init_table/0, redirect/1, address/1, own/0, learn/2, forget/1, tell/1,
         listener_full/2]).
%% Called by throng_table_owner at start.
-ignore_xref([{init_table, 0}]).
%% API used by tests and operators (what does this node know?).
-ignore_xref([{address, 1}]).

-define(TAB, ?MODULE).
%% Messages to the other members go to their membership process, which
%% calls learn/2.
-define(PEER, throng_cluster).

-spec init_table() -> ok.
init_table() ->
    ?TAB = ets:new(?TAB, [set, public, named_table, {read_concurrency, true}]),
    ok.

%% @doc Where a client that names the bare JID {User, Server} should
%% connect: `here' when this node is its home, when the home is not known
%% to have an address (not a member yet, no node_address, or full).
-spec redirect({binary(), binary()}) -> here | {other, binary()}.
redirect(US) ->
    case throng_members:home(US) of
        Home when Home =:= node() -> here;
        Home ->
            case address(Home) of
                none -> here;
                Addr -> {other, Addr}
            end
    end.

%% @doc The address another member told this node, or none.
-spec address(node()) -> binary() | none.
address(Node) ->
    case ets:lookup(?TAB, Node) of
        [{_, Addr}] -> Addr;
        [] -> none
    end.

%% @doc This node's address as it tells it now: none without
%% cluster.node_address or while a listener is full.
-spec own() -> binary() | none.
own() ->
    case {throng_config:get([cluster, node_address]), ets:match(?TAB, {{full, '_'}, '_'}, 1)} of
        {<<>>, _} -> none;
        {Addr, '$end_of_table'} -> Addr;
        {_, _Full} -> none
    end.

%% @doc What a member told (its address, or none).
-spec learn(node(), binary() | none) -> ok.
learn(Node, none) -> forget(Node);
learn(Node, Addr) when is_binary(Addr) ->
    true = ets:insert(?TAB, {Node, Addr}),
    ok.

%% @doc A member is gone: no client is sent to it.
-spec forget(node()) -> ok.
forget(Node) ->
    true = ets:delete(?TAB, Node),
    ok.

%% @doc Tells Node this node's address (a member joined).
-spec tell(node()) -> ok.
tell(Node) ->
    _ = erlang:send({?PEER, Node}, {node_address, node(), own()}, [noconnect]),
    ok.

%% @doc A listener of this node became full (true) or listens again
%% (false); the members are told when that changes this node's address.
-spec listener_full(term(), boolean()) -> ok.
listener_full(Ref, Full) ->
    Before = own(),
    _ = case Full of
            true -> ets:insert(?TAB, {{full, Ref}, true});
            false -> ets:delete(?TAB, {full, Ref})
        end,
    case own() of
        Before -> ok;
        _ -> lists:foreach(fun tell/1, throng_members:others())
    end.
