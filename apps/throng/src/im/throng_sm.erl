%% @doc The session table: every bound resource on this node, with its
%% process, its presence priority and its last available presence.
%%
%% One ETS ordered_set keyed by {{User, Server}, Resource}, with read and
%% write concurrency: a login, a presence change or a message route reads and
%% writes it directly from the session's own process, never through a
%% server process. The ordered key makes "all resources of a bare JID" a
%% short range scan.
%%
%% Presence is kept here rather than in the session process so that a probe
%% or a new subscriber is answered by reading the table, without waking the
%% contact's (hibernated) process.
%%
%% == In a cluster ==
%% Each node's table holds its own sessions. The lookups of a bare JID
%% ({@link resources/1}, {@link available/1}, {@link lookup/1}) are answered
%% by its **home** ({@link throng_members:place/1}): the home's own table
%% plus its part of the directory ({@link throng_dir}), where every other
%% node's sessions of that bare JID are entered. A lookup is an ETS read on
%% the home, and one `erpc' round trip when the home is another node. A
%% session on the home itself is entered at the backup instead, so that the
%% directory holds exactly one entry per session, never on the session's own
%% node: whoever holds it learns of the session's end when its node goes
%% down. Alone, a node has no directory and nothing here changes.
-module(throng_sm).

-include("throng.hrl").

-compile({no_auto_import, [register/2, unregister/1]}).
-export([init/0, register/2, unregister/2, forget/2, recover_killed/1, set_presence/3, resources/1,
         available/1, available_many/1, lookup/1, count/0, all/0, next/1,
         set_detached/2, is_detached/1, is_detached/2, has_local/1, is_local/1, own_presence/1, set_flag/2,
         has_flag/2,
         host_sessions/1, local_host_sessions/1, memo/1, defer/2, take_deferred/1,
         carry/0, resume/1, own_others/1,
         not_alone/0]).
-export([home_view/1, home_lookup/1, home_view_many/1, local_rival/2, joined/2, place_again/2,
         local_keys/0]).
%% Called by throng_table_owner (a table creator named in throng_sup), and
%% remotely (erpc) by the other members of a cluster.
-ignore_xref([{init, 0}, {home_view, 1}, {home_lookup, 1}, {home_view_many, 1}, {all, 0},
              {local_host_sessions, 1}]).
%% The local answer, asked by tests (the router asks is_detached/2).
-ignore_xref([{is_detached, 1}]).

-define(TAB, throng_session).
-define(REMOTE_TIMEOUT, 5000).
%% Sessions whose connection dropped and that wait for a XEP-0198
%% resumption: only those, so an attached session costs nothing here.
-define(DETACHED, throng_detached).
%% Per-session flags modules set (carbons enabled, blocklist requested):
%% {Pid, Bits}, a row only for a session with a flag set, so an idle
%% session that set none costs nothing here. Node-local, like the pid.
-define(FLAGS, throng_session_flags).
-type flag() :: carbons | blocklist.
%% In a session whose account's home is another node: the membership epoch
%% at which the home said the session was its account's only one.
-define(ALONE, {?MODULE, alone}).
-export_type([flag/0]).

%% prio: undefined while the resource is not available (no initial presence
%% yet, or it sent unavailable). pres: the presence element, without from and
%% to, or undefined. (Match specs below spell the record as a plain tuple,
%% {session, Key, Pid, Prio, Pres, Stamp}, since '$1' is not of the fields' types.)
-record(session, {key :: {{binary(), binary()}, binary()},
                  pid :: pid(),
                  prio :: undefined | integer(),
                  pres :: undefined | empty | #xmlel{},
                  stamp :: integer()}).            %% registered at, microseconds

-type entry() :: {Resource :: binary(), pid(), Prio :: undefined | integer(),
                  Pres :: undefined | #xmlel{}}.
-type key() :: {{binary(), binary()}, binary()}.
%% Work deferred to a route's end (defer/2): {Module, Items} in the order
%% of each module's first item, the items in the order given.
-type deferred() :: [{module(), [term()]}].
-export_type([entry/0, key/0, deferred/0]).

-spec init() -> ok.
init() ->
    ?TAB = ets:new(?TAB, [ordered_set, public, named_table, {keypos, #session.key},
                          {read_concurrency, true}, {write_concurrency, true}]),
    ?DETACHED = ets:new(?DETACHED, [set, public, named_table,
                                    {read_concurrency, true}, {write_concurrency, true}]),
    ?FLAGS = ets:new(?FLAGS, [set, public, named_table,
                              {read_concurrency, true}, {write_concurrency, true}]),
    ok.

%% @doc Registers the calling session for a full JID. When another process
%% holds that JID, returns it (the caller replaces it and registers again);
%% conflict when a session registered later holds it (two logins at the
%% same moment on two nodes: the later one wins).
-spec register(#jid{}, pid()) -> ok | {exists, pid()} | conflict | unreachable.
register(#jid{user = U, server = S, resource = R}, Pid) ->
    Key = {{U, S}, R},
    case claim_local(Key, Pid, os:system_time(microsecond)) of
        {ok, Stamp} ->
            case claim_cluster({Key, Pid, undefined, undefined, Stamp}) of
                Failed when Failed =:= conflict; Failed =:= unreachable ->
                    unregister_local(Key, Pid),
                    Failed;
                Result -> Result
            end;
        Exists -> Exists
    end.

claim_local(Key, Pid, Stamp) ->
    case ets:insert_new(?TAB, #session{key = Key, pid = Pid, stamp = Stamp}) of
        true -> {ok, Stamp};
        false ->
            case ets:lookup(?TAB, Key) of
                [#session{pid = Pid, stamp = Own}] -> {ok, Own};   %% again, after a replace
                [#session{pid = Old}] -> {exists, Old};
                [] -> claim_local(Key, Pid, Stamp)
            end
    end.

%% The home decides: on this node against the directory's entry, elsewhere
%% by a call to the home; a session on its home is entered at the backup.
claim_cluster({{US, _} = Key, Pid, _, _, Stamp} = Entry) ->
    case throng_members:clustered() of
        false -> ok;
        true ->
            case throng_members:place(US) of
                {Home, Backup} when Home =:= node() ->
                    case throng_dir:claim_here(Key, Pid, Stamp) of
                        ok ->
                            joined(Key, Pid),
                            throng_dir:put(Backup, Entry);
                        Other -> Other
                    end;
                {Home, _} ->
                    throng_dir:claim(Home, Entry)
            end
    end.

%% @doc On the home: this node's own session of Key if another process than
%% Pid holds it, with its registration stamp (for {@link throng_dir}).
-spec local_rival(key(), pid()) -> {pid(), integer()} | none.
local_rival(Key, Pid) ->
    case ets:lookup(?TAB, Key) of
        [#session{pid = Other, stamp = Stamp}] when Other =/= Pid -> {Other, Stamp};
        _ -> none
    end.

%% @doc On the home of Key's bare JID, once it accepted the session Pid of
%% Key: the other sessions of that bare JID it knows are told they are not
%% alone (see {@link own_others/1}). Sent before the registration returns,
%% so before the new session can enable carbons.
-spec joined(key(), pid()) -> ok.
joined({US, _}, Pid) ->
    _ = [erlang:send(Other, {?MODULE, not_alone}, [noconnect])
         || {_, Other, _, _} <- home_view(US), Other =/= Pid],
    ok.

%% @doc Removes the entry of a full JID if it still belongs to Pid.
-spec unregister(#jid{}, pid()) -> ok.
unregister(#jid{user = U, server = S, resource = R}, Pid) ->
    Key = {{U, S}, R},
    unregister_local(Key, Pid),
    case holder(U, S) of
        none -> ok;
        Node -> throng_dir:remove(Node, Key, Pid)
    end.

%% @doc The session Pid of a full JID is gone without its own clean-up
%% (killed, or its node is gone): what its own {@link unregister/2} would
%% have removed goes, run on its node (that node would otherwise go on
%% finding the dead process first). If that node does not answer, at
%% least the directory forgets it.
-spec forget(#jid{}, pid()) -> ok.
forget(JID, Pid) when node(Pid) =:= node() ->
    unregister(JID, Pid);
forget(#jid{user = U, server = S, resource = R} = JID, Pid) ->
    try erpc:call(node(Pid), ?MODULE, unregister, [JID, Pid], 5000)
    catch Class:Why ->
            logger:warning(#{what => session_forget_failed, node => node(Pid),
                             reason => {Class, Why}}),
            throng_dir:remove(throng_members:holder({U, S}, node(Pid)), {{U, S}, R}, Pid)
    end.

%% @doc After a session was killed: the messages it held in flight
%% (XEP-0198, kept durably until acknowledged) go back to offline storage,
%% on its node (the node recovers its own rows whose owner is dead).
-spec recover_killed(pid()) -> ok.
recover_killed(Pid) ->
    try erpc:call(node(Pid), throng_storage, inflight_recover, [orphans], 10000) of
        _ -> ok
    catch Class:Why ->
            logger:error(#{what => inflight_recover_failed, owner => Pid,
                           reason => {Class, Why}}),
            ok
    end.

unregister_local(Key, Pid) ->
    _ = ets:select_delete(?TAB, [{{session, Key, Pid, '_', '_', '_'}, [], [true]}]),
    true = ets:delete(?FLAGS, Pid),
    true = ets:delete(?DETACHED, Pid),
    ok.

%% Where the directory keeps this node's sessions of U@S (none: alone).
holder(U, S) ->
    case throng_members:clustered() of
        false -> none;
        true -> throng_members:holder({U, S}, node())
    end.

%% @doc After a membership change, in the session: enters it again where
%% it now belongs, with its current presence. Like a login, the newer of two
%% sessions of one full JID wins (after a netsplit each side may have one):
%% `{exists, Older}' is to be replaced, conflict means this one is older.
-spec place_again(#jid{}, pid()) -> ok | {exists, pid()} | conflict | unreachable.
place_again(#jid{user = U, server = S, resource = R}, Pid) ->
    case ets:lookup(?TAB, {{U, S}, R}) of
        [#session{key = Key, pid = Pid, prio = Prio, pres = Pres, stamp = Stamp}] ->
            case claim_cluster({Key, Pid, Prio, Pres, Stamp}) of
                ok ->
                    %% Detached or not, as at its new place: the new
                    %% holder may be an old one again, still holding the
                    %% entry and its mark from before the session was
                    %% resumed (the members changed and changed back).
                    tell_holder(Key, Pid, is_detached(Pid));
                Other -> Other
            end;
        _ -> ok
    end.

%% @doc Every session of this node as {Key, Pid} (membership changes walk it).
-spec local_keys() -> [{key(), pid()}].
local_keys() ->
    ets:select(?TAB, [{{session, '$1', '$2', '_', '_', '_'}, [], [{{'$1', '$2'}}]}]).

%% @doc Records a resource's presence: a priority and presence element when
%% available, undefined when not.
-spec set_presence(#jid{}, undefined | integer(), undefined | #xmlel{}) -> ok.
set_presence(#jid{user = U, server = S, resource = R}, Prio, Pres) ->
    Key = {{U, S}, R},
    Packed = pack(Pres),
    _ = ets:update_element(?TAB, Key, [{#session.prio, Prio}, {#session.pres, Packed}]),
    case holder(U, S) of
        none -> ok;
        Node -> throng_dir:update(Node, Key, self(), Prio, Packed)
    end.

%% The usual presence, <presence/> with nothing in it, is kept as an atom:
%% a few words less per session.
-define(EMPTY, #xmlel{name = <<"presence">>, attrs = [], children = []}).
pack(?EMPTY) -> empty;
pack(P) -> P.

unpack(empty) -> ?EMPTY;
unpack(P) -> P.

unpack_entries(Entries) ->
    [{R, Pid, Prio, unpack(P)} || {R, Pid, Prio, P} <- Entries].

%% @doc Every bound resource of a bare JID, on every node.
-spec resources({binary(), binary()}) -> [entry()].
resources(US) ->
    unpack_entries(view(US)).

%% @doc The other resources of the calling session's own account (JID is
%% its own): those its sent carbons go to. In a cluster, when the account's
%% home is another node and said that this session was the account's only
%% one, the session remembers it (one process-dictionary entry, with the
%% membership epoch) and asks no more until the home tells it otherwise
%% ({@link joined/2}, {@link not_alone/0}) or the members change. Only an
%% answer from the home that lists the session itself counts: a home that
%% does not know it yet (it is being placed again) could not tell it later.
-spec own_others(#jid{}) -> [entry()].
own_others(#jid{user = U, server = S}) ->
    US = {U, S},
    case throng_members:clustered() of
        false -> unpack_entries(others(local_view(US)));
        true ->
            %% The epoch before the member list (throng_members:epoch/0).
            Epoch = throng_members:epoch(),
            case throng_members:home(US) of
                Home when Home =:= node() -> unpack_entries(others(home_view(US)));
                Home ->
                    case get(?ALONE) of
                        Epoch -> [];
                        _ -> remote_others(Home, US, Epoch)
                    end
            end
    end.

%% Asks the (remote) home, and remembers an answer that lists the session alone.
remote_others(Home, US, Epoch) ->
    {Answer, View, _} = memo_view(Home, US),
    case others(View) of
        [] when Answer =:= home ->
            lists:keymember(self(), 2, View) andalso put(?ALONE, Epoch),
            [];
        Rest -> unpack_entries(Rest)
    end.

%% The entries of other sessions than the caller.
others(View) ->
    [E || {_, Pid, _, _} = E <- View, Pid =/= self()].

%% @doc In the session, on `{throng_sm, not_alone}': another session of its
%% account began, so {@link own_others/1} asks the home again.
-spec not_alone() -> ok.
not_alone() ->
    _ = erase(?ALONE),
    ok.

%% @doc The available resources of a bare JID (those that sent presence).
-spec available({binary(), binary()}) -> [entry()].
available(US) ->
    unpack_entries(only_available(view(US))).

only_available(Entries) ->
    [E || {_, _, Prio, _} = E <- Entries, Prio =/= undefined].

%% @doc The available resources of many bare JIDs, asking each home once
%% and the homes at the same time (an initial presence asks for a roster).
-spec available_many([{binary(), binary()}]) -> #{{binary(), binary()} => [entry()]}.
available_many(USs) ->
    Views = case throng_members:clustered() of
                false -> [{US, local_view(US)} || US <- USs];
                true -> views(USs)
            end,
    maps:from_list([{US, unpack_entries(only_available(V))} || {US, V} <- Views]).

%% @doc The process of a full JID.
-spec lookup(#jid{}) -> pid() | undefined.
lookup(#jid{user = U, server = S, resource = R}) ->
    try ets:lookup_element(?TAB, {{U, S}, R}, #session.pid)
    catch error:badarg ->
            case throng_members:clustered() of
                false -> undefined;
                true -> case lists:keyfind(R, 1, view({U, S})) of
                            {R, Pid, _, _} -> Pid;
                            false -> undefined
                        end
            end
    end.

%% The raw entries (presence packed) of a bare JID: this node's own; in a
%% cluster, its home's view (inside memo/1, asked once).
view(US) ->
    case throng_members:clustered() of
        false -> local_view(US);
        true ->
            case throng_members:home(US) of
                Home when Home =:= node() -> home_view(US);
                Home -> element(2, memo_view(Home, US))
            end
    end.

-define(MEMO, {?MODULE, memo}).
-define(DEFERRED, {?MODULE, deferred}).

%% @doc Runs F, in which each bare JID whose home is another node is looked
%% up once: routing one message asks about its recipient for the archive
%% (does the account exist), the route and the carbons, a round trip to
%% the home each time otherwise. For a stanza that changes no session (a
%% message); nested calls share the outer one's answers. What {@link
%% defer/2} left for its end runs when the outermost call ends, whether F
%% returned or raised.
-spec memo(fun(() -> R)) -> R.
memo(F) ->
    case get(?MEMO) of
        undefined ->
            put(?MEMO, #{}),
            try F()
            after
                erase(?MEMO),
                run_deferred()
            end;
        _ ->
            F()
    end.

%% @doc Leaves Item for `Module:route_end(Items)', which runs when the
%% outermost {@link memo/1} around the caller ends, with every item the
%% module left in that route (in order; the modules in the order of their
%% first item); now, alone, when there is none. A later step of the same
%% route may take the items first ({@link take_deferred/1}) and do their
%% work together with its own: the archive writes a message's copy in its
%% sender's archive with the copy in its recipient's, one write for both.
%% The items are data, not funs, so that a route handed to another node
%% ({@link carry/0}) takes them along. What route_end/1 raises is logged.
-spec defer(module(), term()) -> ok.
defer(Module, Item) ->
    case get(?MEMO) of
        undefined -> run_logged(Module, [Item]);
        _ ->
            Deferred = deferred(),
            put(?DEFERRED, case lists:keyfind(Module, 1, Deferred) of
                               {_, Items} -> lists:keyreplace(Module, 1, Deferred,
                                                              {Module, Items ++ [Item]});
                               false -> Deferred ++ [{Module, [Item]}]
                           end),
            ok
    end.

%% @doc Takes back what Module deferred in the current route ({@link
%% defer/2}), in order: its route_end/1 will not see them.
-spec take_deferred(module()) -> [term()].
take_deferred(Module) ->
    Deferred = deferred(),
    case lists:keytake(Module, 1, Deferred) of
        {value, {_, Items}, Rest} -> put(?DEFERRED, Rest), Items;
        false -> []
    end.

%% @doc Takes everything deferred in the current route, to be carried with
%% the route to another node, where {@link resume/1} puts it back.
-spec carry() -> deferred().
carry() ->
    case erase(?DEFERRED) of
        undefined -> [];
        Deferred -> Deferred
    end.

%% @doc Inside {@link memo/1}: what another node's route deferred ({@link
%% carry/0}) is deferred in this one.
-spec resume(deferred()) -> ok.
resume(Carried) ->
    lists:foreach(fun({Module, Items}) -> [defer(Module, I) || I <- Items] end, Carried).

deferred() ->
    case get(?DEFERRED) of
        undefined -> [];
        Deferred -> Deferred
    end.

run_deferred() ->
    lists:foreach(fun({Module, Items}) -> run_logged(Module, Items) end, carry()).

run_logged(Module, Items) ->
    try Module:route_end(Items) of
        _ -> ok
    catch Class:Why:Stack ->
            logger:error(#{what => route_end_failed, module => Module, class => Class,
                           reason => Why, stack => Stack}),
            ok
    end.

memo_view(Home, US) ->
    case get(?MEMO) of
        undefined -> remote_view(Home, US);
        #{US := View} -> View;
        Memo ->
            View = remote_view(Home, US),
            put(?MEMO, Memo#{US => View}),
            View
    end.

local_view(US) ->
    ets:select(?TAB, [{{session, {US, '$1'}, '$2', '$3', '$4', '_'}, [],
                       [{{'$1', '$2', '$3', '$4'}}]}]).

%% @doc On the home of US: its sessions on this node and, from the
%% directory, on the others (called remotely by {@link view/1}).
-spec home_view({binary(), binary()}) -> [{binary(), pid(), undefined | integer(), term()}].
home_view(US) ->
    Local = local_view(US),
    Remote = [{R, Pid, Prio, Pres} || {{_, R}, Pid, Prio, Pres, _} <- throng_dir:entries(US),
                                      not lists:keymember(R, 1, Local)],
    Local ++ Remote.

%% @doc On the home of US: home_view/1 and which of those sessions are
%% detached (a message for one is kept durably by its sender; called
%% remotely by {@link view/1}).
-spec home_lookup({binary(), binary()}) ->
          {[{binary(), pid(), undefined | integer(), term()}], [pid()]}.
home_lookup(US) ->
    View = home_view(US),
    {View, [Pid || {_, Pid, _, _} <- View, detached_here(Pid)]}.

%% Detached, as this node knows: its own session, or one entered here.
detached_here(Pid) when node(Pid) =:= node() -> is_detached(Pid);
detached_here(Pid) -> throng_dir:is_detached(Pid).

%% @doc home_view/1 of many bare JIDs.
-spec home_view_many([{binary(), binary()}]) -> [{{binary(), binary()}, list()}].
home_view_many(USs) ->
    [{US, home_view(US)} || US <- USs].

%% The home's answer: its view of US and which of those sessions are
%% detached. A home that does not answer (down, or cut off): this node's
%% own sessions of the user are what is known (fallback, not the home's
%% answer). A home of an earlier version (no home_lookup/1: during a
%% rolling upgrade) is asked for its view alone.
remote_view(Home, US) ->
    try erpc:call(Home, ?MODULE, home_lookup, [US], ?REMOTE_TIMEOUT) of
        {View, Detached} -> {home, View, Detached}
    catch
        error:{exception, undef, [{?MODULE, home_lookup, _, _} | _]} ->
            try {home, erpc:call(Home, ?MODULE, home_view, [US], ?REMOTE_TIMEOUT), []}
            catch Class:Why -> fallback(Home, US, Class, Why)
            end;
        Class:Why ->
            fallback(Home, US, Class, Why)
    end.

fallback(Home, US, Class, Why) ->
    unreachable(Home, Class, Why),
    Local = local_view(US),
    {fallback, Local, [Pid || {_, Pid, _, _} <- Local, is_detached(Pid)]}.

unreachable(Home, Class, Why) ->
    throng_metrics:incr(directory_unreachable),
    logger:warning(#{what => directory_unreachable, node => Home, class => Class, reason => Why}).

%% Grouped by home; the remote homes are asked in parallel.
views(USs) ->
    Groups = maps:groups_from_list(fun throng_members:home/1, USs),
    Me = node(),
    Requests = [{Home, Group, erpc:send_request(Home, ?MODULE, home_view_many, [Group])}
                || {Home, Group} <- maps:to_list(Groups), Home =/= Me],
    Local = home_view_many(maps:get(Me, Groups, [])),
    Remote = lists:flatmap(
               fun({Home, Group, Req}) ->
                       try erpc:receive_response(Req, ?REMOTE_TIMEOUT)
                       catch Class:Why ->
                               unreachable(Home, Class, Why),
                               [{US, local_view(US)} || US <- Group]
                       end
               end, Requests),
    Local ++ Remote.

%% @doc The sessions of this node.
-spec count() -> non_neg_integer().
count() ->
    ets:info(?TAB, size).

%% @doc Every session of this node as {FullJID, Pid} (admin use; walks the table).
-spec all() -> [{#jid{}, pid()}].
all() ->
    [{#jid{user = U, server = S, resource = R}, P}
     || #session{key = {{U, S}, R}, pid = P} <- ets:tab2list(?TAB)].

%% @doc Every session of a host, on every member of the cluster, as full
%% JIDs (administration: it walks each node's table, O(sessions)). A member
%% that does not answer within 5 s is left out, and logged.
-spec host_sessions(binary()) -> [#jid{}].
host_sessions(Host) ->
    case throng_members:clustered() of
        false -> local_host_sessions(Host);
        true ->
            Members = throng_members:members(),
            lists:append(
              [case R of
                   {ok, Jids} -> Jids;
                   {Class, Why} ->
                       logger:warning(#{what => host_sessions_unreachable, node => Node,
                                        class => Class, reason => Why}),
                       []
               end || {Node, R} <- lists:zip(Members, erpc:multicall(Members, ?MODULE,
                                                                      local_host_sessions,
                                                                      [Host], ?REMOTE_TIMEOUT))])
    end.

%% @doc The sessions of a host on this node, as full JIDs.
-spec local_host_sessions(binary()) -> [#jid{}].
local_host_sessions(Host) ->
    [#jid{user = U, server = Host, resource = R}
     || {U, R} <- ets:select(?TAB, [{{session, {{'$1', Host}, '$2'}, '_', '_', '_', '_'}, [],
                                     [{{'$1', '$2'}}]}])].

%% @doc The session after Key in table order, wrapping around to the first
%% (undefined: the first), with its process; none when there is no session.
%% One ets:next per call: walking with it visits every session in turn.
-spec next(key() | undefined) -> {key(), pid()} | none.
next(Key) ->
    Next = case Key of
               undefined -> ets:first(?TAB);
               _ -> case ets:next(?TAB, Key) of
                        '$end_of_table' -> ets:first(?TAB);
                        K -> K
                    end
           end,
    case Next of
        '$end_of_table' -> none;
        _ ->
            try {Next, ets:lookup_element(?TAB, Next, #session.pid)}
            catch error:badarg -> none   %% ended meanwhile
            end
    end.

%% @doc Marks the calling session of JID as detached (its connection
%% dropped and it waits for a resumption) or attached again. Messages
%% routed to a detached session are kept durably by the router ({@link
%% throng_inflight}). In a cluster its directory entry is marked too (after
%% the session's earlier writes), so that senders on other nodes learn it
%% from the home ({@link is_detached/2}); until the mark is applied there
%% (a message between nodes' time) they send as to an attached session.
-spec set_detached(#jid{}, boolean()) -> ok.
set_detached(#jid{user = U, server = S, resource = R}, true) ->
    Pid = self(),
    true = ets:insert(?DETACHED, {Pid}),
    tell_holder({{U, S}, R}, Pid, true);
set_detached(#jid{user = U, server = S, resource = R}, false) ->
    Pid = self(),
    case ets:take(?DETACHED, Pid) of
        [] -> ok;     %% attached (the usual end of a session): nothing to say
        _ -> tell_holder({{U, S}, R}, Pid, false)
    end.

tell_holder({{U, S}, _} = Key, Pid, Detached) ->
    case holder(U, S) of
        none -> ok;
        Node -> throng_dir:set_detached(Node, Key, Pid, Detached)
    end.

%% @doc Whether a session of this node is detached.
-spec is_detached(pid()) -> boolean().
is_detached(Pid) ->
    ets:member(?DETACHED, Pid).

%% @doc Whether the session Pid of the bare JID US is detached, on any
%% node: its own node knows for a session of this node, the home for the
%% others (inside {@link memo/1} its answer to the route's lookup, not a
%% second round trip).
-spec is_detached(pid(), {binary(), binary()}) -> boolean().
is_detached(Pid, _US) when node(Pid) =:= node() ->
    is_detached(Pid);
is_detached(Pid, US) ->
    case throng_members:home(US) of
        Home when Home =:= node() -> throng_dir:is_detached(Pid);
        Home -> lists:member(Pid, element(3, memo_view(Home, US)))
    end.

%% @doc Whether a bare JID has a session on this node: the key after
%% {US, <<>>} (no resource is empty) is one of US's if it has any. One
%% ets:next, which builds nothing but the key it returns: this runs for
%% every presence a session receives (blocking), and a select would build
%% its match specification and continuation each time.
-spec has_local({binary(), binary()}) -> boolean().
has_local(US) ->
    case ets:next(?TAB, {US, <<>>}) of
        {US, _} -> true;
        _ -> false
    end.

%% @doc Whether a full JID has its session on this node (one ETS read).
-spec is_local(#jid{}) -> boolean().
is_local(#jid{user = U, server = S, resource = R}) ->
    ets:member(?TAB, {{U, S}, R}).

%% @doc The recorded presence of a session of this node (one ETS read of
%% its own row, never a remote view): {Prio, Presence}, Prio undefined
%% while it is not available; undefined when no such session is here.
-spec own_presence(#jid{}) -> {undefined | integer(), undefined | #xmlel{}} | undefined.
own_presence(#jid{user = U, server = S, resource = R}) ->
    case ets:lookup(?TAB, {{U, S}, R}) of
        [#session{prio = Prio, pres = Pres}] -> {Prio, unpack(Pres)};
        [] -> undefined
    end.

%% @doc Sets or clears a flag of the calling session (until it ends).
-spec set_flag(flag(), boolean()) -> ok.
set_flag(Flag, On) ->
    Pid = self(),
    Bit = flag_bit(Flag),
    Old = try ets:lookup_element(?FLAGS, Pid, 2) catch error:badarg -> 0 end,
    case {On, Old bor Bit, Old band bnot Bit} of
        {true, New, _} -> true = ets:insert(?FLAGS, {Pid, New});
        {false, _, 0} -> true = ets:delete(?FLAGS, Pid);
        {false, _, New} -> true = ets:insert(?FLAGS, {Pid, New})
    end,
    ok.

%% @doc Whether a session of this node has a flag set.
-spec has_flag(pid(), flag()) -> boolean().
has_flag(Pid, Flag) ->
    try ets:lookup_element(?FLAGS, Pid, 2) band flag_bit(Flag) =/= 0
    catch error:badarg -> false
    end.

flag_bit(carbons) -> 1;
flag_bit(blocklist) -> 2.
