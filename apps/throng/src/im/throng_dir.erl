%% @doc This node's part of the cluster's session directory: entries for
%% sessions on *other* nodes whose bare JID this node holds (see
%% {@link throng_members:holder/2}), in the ETS table `throng_dir', and the
%% writer processes that change it for those nodes.
%%
%% An entry is `{Key, Pid, Prio, Pres, Stamp}' — the same as a session-table
%% entry, Stamp being the session's registration time in microseconds (the
%% newer of two sessions of one full JID wins). Reads are direct ETS reads:
%% from this node's sessions, or from a remote node's lookup through
%% `erpc' ({@link throng_sm}). Writes of a remote session go through one of
%% {@value SHARDS} writer processes, chosen by the key, so the changes of one
%% session are applied in the order it made them; there is no other process
%% on the path and no lock.
%%
%% The entries of sessions that are detached (their connection dropped and
%% they wait for a XEP-0198 resumption) are also in a second table,
%% `throng_dir_detached' (`{Pid}', a row only for such a session, so an
%% attached one costs nothing there): a sender on another node learns it
%% from the home's answer and has the message kept durably before it goes
%% on ({@link throng_router:deliver/4}).
-module(throng_dir).
-behaviour(gen_server).

-export([init_table/0, child_specs/1, start_link/2]).
-export([claim/2, claim_here/3, put/2, update/5, remove/3, set_detached/4]).
-export([entries/1, is_detached/1, drop_node/1, keep_only/1, size/0]).
-export([init/1, handle_call/3, handle_cast/2]).
%% Called by throng_table_owner and supervisors.
-ignore_xref([{init_table, 0}, {start_link, 2}]).

-define(TAB, throng_dir).
-define(DETACHED, throng_dir_detached).
-define(SHARDS, 8).
-define(CALL_TIMEOUT, 5000).
%% The second, longer wait of a claim whose first one timed out.
-define(RETRY_TIMEOUT, 30000).
%% How long drop_node/1 waits for a writer to apply what it was sent.
-define(SYNC_TIMEOUT, 30000).

-type entry() :: {throng_sm:key(), pid(), undefined | integer(),
                  undefined | empty | tuple(), Stamp :: integer()}.
%% What the home asks of the session table (throng_sm, passed in by the
%% supervisor so that this module does not call it): rival, this node's own
%% session of a full JID if another process than the given one holds it
%% (its process and registration stamp); joined, run once a session of a
%% full JID is accepted (it tells the bare JID's other sessions); replace,
%% tells an older session of a full JID that a newer one takes over.
-type rival_fun() :: fun((throng_sm:key(), pid()) -> {pid(), integer()} | none).
-type funs() :: #{rival := rival_fun(), joined := fun((throng_sm:key(), pid()) -> ok),
                  replace := fun((pid(), pid()) -> ok)}.
-export_type([entry/0, rival_fun/0, funs/0]).

-spec init_table() -> ok.
init_table() ->
    ?TAB = ets:new(?TAB, [ordered_set, public, named_table,
                          {read_concurrency, true}, {write_concurrency, true}]),
    ?DETACHED = ets:new(?DETACHED, [set, public, named_table,
                                    {read_concurrency, true}, {write_concurrency, true}]),
    ok.

-spec child_specs(funs()) -> [supervisor:child_spec()].
child_specs(Funs) ->
    [#{id => {?MODULE, I}, start => {?MODULE, start_link, [I, Funs]}}
     || I <- lists:seq(1, ?SHARDS)].

-spec start_link(pos_integer(), funs()) -> {ok, pid()} | {error, term()}.
start_link(I, Funs) ->
    gen_server:start_link({local, name(I)}, ?MODULE, Funs, []).

name(I) ->
    list_to_atom("throng_dir_" ++ integer_to_list(I)).

shard(Key) ->
    name(erlang:phash2(Key, ?SHARDS) + 1).

%%% Called on the session's node

%% @doc Claims a full JID at its home Node for a session of another node:
%% ok, `{exists, Pid}' (an older session holds it: replace it, then claim
%% again) or conflict (a newer session holds it). A home that is gone
%% (its node down) is taken as ok: the membership change that follows
%% places the entry again. A home that is there but does not answer in
%% time is asked again, longer (the first claim is still queued and is
%% decided first: the second one sees its outcome); if that times out too
%% the claim is given up, `unreachable', and a removal of the entry is
%% queued after it, so that whatever the claim decides later leaves
%% nothing behind.
-spec claim(node(), entry()) -> ok | {exists, pid()} | conflict | unreachable.
claim(Node, {Key, Pid, _, _, _} = Entry) ->
    retried(fun(Timeout) -> gen_server:call({shard(Key), Node}, {claim, Entry}, Timeout) end,
            Node, Key, Pid).

%% @doc On the home, for a session of this node: the decision of
%% {@link decide/4} (with no local rival: the caller holds the session
%% table's entry), taken by the key's writer, so that it is never taken
%% between a writer's look at the session table and its write for a claim
%% of another node's session of the same full JID (both could otherwise
%% win).
-spec claim_here(throng_sm:key(), pid(), integer()) ->
          ok | {exists, pid()} | conflict | unreachable.
claim_here(Key, Pid, Stamp) ->
    retried(fun(Timeout) -> gen_server:call(shard(Key), {decide, Key, Pid, Stamp}, Timeout) end,
            node(), Key, Pid).

retried(Call, Node, Key, Pid) ->
    case timed(Call, Node, ?CALL_TIMEOUT) of
        timeout ->
            case timed(Call, Node, ?RETRY_TIMEOUT) of
                timeout ->
                    logger:error(#{what => directory_claim_given_up, node => Node,
                                   waited_ms => ?CALL_TIMEOUT + ?RETRY_TIMEOUT}),
                    gen_server:cast({shard(Key), Node}, {forget, Key, Pid}),
                    unreachable;
                Result -> Result
            end;
        Result -> Result
    end.

timed(Call, Node, Timeout) ->
    try Call(Timeout)
    catch
        exit:{timeout, _} ->
            logger:warning(#{what => directory_slow, node => Node, timeout_ms => Timeout}),
            timeout;
        exit:Why when Node =:= node() ->
            %% This node's writer is being restarted: asked again.
            logger:warning(#{what => directory_writer_down, reason => Why}),
            timer:sleep(100),
            timeout;
        exit:Why ->
            logger:warning(#{what => directory_unreachable, node => Node, reason => Why}),
            ok
    end.

%% @doc Writes an entry at Node (a backup, or a session placed again).
-spec put(node(), entry()) -> ok.
put(Node, Entry) ->
    gen_server:cast({shard(element(1, Entry)), Node}, {put, Entry}).

%% @doc A new priority and presence of a session, at Node.
-spec update(node(), throng_sm:key(), pid(), undefined | integer(), term()) -> ok.
update(Node, Key, Pid, Prio, Pres) ->
    gen_server:cast({shard(Key), Node}, {update, Key, Pid, Prio, Pres}).

%% @doc The session Pid of Key, entered at Node, is detached (true) or
%% attached again (false). Applied after the session's earlier writes.
-spec set_detached(node(), throng_sm:key(), pid(), boolean()) -> ok.
set_detached(Node, Key, Pid, Detached) ->
    gen_server:cast({shard(Key), Node}, {detached, Key, Pid, Detached}).

%% @doc The session ended: its entry at Node goes. Returns once it is gone,
%% so that from then on no lookup finds the session (the session then takes
%% the messages already on their way to it: throng_c2s_items).
-spec remove(node(), throng_sm:key(), pid()) -> ok.
remove(Node, Key, Pid) ->
    try gen_server:call({shard(Key), Node}, {remove, Key, Pid}, ?CALL_TIMEOUT)
    catch exit:Why ->
            logger:warning(#{what => directory_unreachable, node => Node, reason => Why}),
            ok
    end.

%%% Reads and maintenance of this node's part

%% @doc The entries of a bare JID held here.
-spec entries({binary(), binary()}) -> [entry()].
entries(US) ->
    ets:select(?TAB, [{{{US, '_'}, '_', '_', '_', '_'}, [], ['$_']}]).

%% @doc Whether the session Pid, entered here, is detached.
-spec is_detached(pid()) -> boolean().
is_detached(Pid) ->
    ets:member(?DETACHED, Pid).

%% @doc Removes and returns the entries of sessions on Node (it went down).
%% The writers first apply what they were sent before: a claim or backup
%% write of Node's sessions still in a writer's queue would otherwise be
%% applied after the drop and stay for good (an entry of a dead process
%% that routing trusts while its node name is connected again).
-spec drop_node(node()) -> [entry()].
drop_node(Node) ->
    _ = [try gen_server:call(name(I), sync, ?SYNC_TIMEOUT)
         catch exit:Why ->
                 logger:warning(#{what => directory_writer_behind, writer => name(I),
                                  node_gone => Node, reason => Why})
         end || I <- lists:seq(1, ?SHARDS)],
    Match = {{'_', '$1', '_', '_', '_'}, [{'=:=', {node, '$1'}, Node}]},
    Entries = ets:select(?TAB, [erlang:append_element(Match, ['$_'])]),
    _ = ets:select_delete(?TAB, [erlang:append_element(Match, [true])]),
    _ = ets:select_delete(?DETACHED, [{{'$1'}, [{'=:=', {node, '$1'}, Node}], [true]}]),
    Entries.

%% @doc Removes the entries for which Keep returns false (after a membership
%% change: those this node no longer holds); returns how many went.
-spec keep_only(fun((entry()) -> boolean())) -> non_neg_integer().
keep_only(Keep) ->
    ets:foldl(fun(E, N) ->
                      case Keep(E) of
                          true -> N;
                          false ->
                              ets:delete_object(?TAB, E),
                              ets:delete(?DETACHED, element(2, E)),
                              N + 1
                      end
              end, 0, ?TAB).

-spec size() -> non_neg_integer().
size() ->
    ets:info(?TAB, size).

%%% Writer processes

-spec init(funs()) -> {ok, funs()}.
init(Funs) ->
    {ok, Funs}.

-spec handle_call({claim, entry()} | {decide, throng_sm:key(), pid(), integer()}
                  | {remove, throng_sm:key(), pid()} | sync, gen_server:from(),
                  funs()) -> {reply, ok | {exists, pid()} | conflict, funs()}.
handle_call(sync, _From, Funs) ->
    {reply, ok, Funs};
handle_call({decide, Key, Pid, Stamp}, _From, Funs) ->
    {reply, told(decide(Key, Pid, Stamp, none), Pid, Funs), Funs};
handle_call({claim, Entry}, _From, Funs) ->
    {reply, do_claim(Entry, Funs), Funs};
handle_call({remove, Key, Pid}, _From, Funs) ->
    delete(Key, Pid),
    {reply, ok, Funs}.

-spec handle_cast(term(), funs()) -> {noreply, funs()}.
handle_cast({forget, Key, Pid}, St) ->
    delete(Key, Pid),
    {noreply, St};
handle_cast({detached, Key, Pid, true}, St) ->
    %% Only for a session entered here (one that left meanwhile has no row).
    _ = ets:select_count(?TAB, [{{Key, Pid, '_', '_', '_'}, [], [true]}]) > 0
        andalso ets:insert(?DETACHED, {Pid}),
    {noreply, St};
handle_cast({detached, _Key, Pid, false}, St) ->
    true = ets:delete(?DETACHED, Pid),
    {noreply, St};
handle_cast({put, Entry}, St) ->
    enter(Entry),
    {noreply, St};
handle_cast({update, Key, Pid, Prio, Pres}, St) ->
    _ = ets:select_replace(?TAB, [{{Key, Pid, '_', '_', '$1'}, [],
                                   [{{{const, Key}, {const, Pid}, {const, Prio},
                                      {const, Pres}, '$1'}}]}]),
    {noreply, St};
handle_cast(_Other, St) ->
    {noreply, St}.

%% An entry replaces the one of an older session of its full JID, if any,
%% and that one's detached mark.
enter({Key, Pid, _, _, _} = Entry) ->
    case ets:lookup(?TAB, Key) of
        [{_, Old, _, _, _}] when Old =/= Pid -> true = ets:delete(?DETACHED, Old);
        _ -> ok
    end,
    true = ets:insert(?TAB, Entry).

delete(Key, Pid) ->
    _ = ets:select_delete(?TAB, [{{Key, Pid, '_', '_', '_'}, [], [true]}]),
    true = ets:delete(?DETACHED, Pid),
    ok.

%% The home decides between sessions of one full JID: the one registered
%% later wins. The competitor may be in the directory (a session on a third
%% node) or in this node's own session table. Once accepted (ok; after
%% {exists, _} the session replaces the older one and claims again), the
%% bare JID's other sessions are told, before the reply.
do_claim({Key, Pid, _, _, Stamp} = Entry, #{rival := Rival, joined := Joined} = Funs) ->
    case decide(Key, Pid, Stamp, Rival(Key, Pid)) of
        ok ->
            enter(Entry),
            Joined(Key, Pid),
            ok;
        %% Not entered yet: the claimant claims again once the older one is
        %% gone (a claim asked again after a timeout so finds the older one
        %% still there if it is, and waits for it like any other).
        Decision ->
            told(Decision, Pid, Funs)
    end.

%% The older session is told to go by the home as well as by the claimant:
%% it goes even if the claimant stopped waiting for this answer.
told({exists, Older} = Decision, By, #{replace := Replace}) ->
    ok = Replace(Older, By),
    Decision;
told(Decision, _By, _Funs) ->
    Decision.

%% On the home of Key: may the session Pid, registered at Stamp, hold
%% Key? ok; `{exists, Older}' (an older session holds it: replace it); or
%% conflict (a session registered later holds it). The competitors are the
%% directory's entry and Local (the home's own session, or none); one whose
%% node is gone does not count.
-spec decide(throng_sm:key(), pid(), integer(), {pid(), integer()} | none) ->
          ok | {exists, pid()} | conflict.
decide(Key, Pid, Stamp, Local) ->
    InDir = case ets:lookup(?TAB, Key) of
                [{_, Other, _, _, OStamp}] when Other =/= Pid -> {Other, OStamp};
                _ -> none
            end,
    newest([R || {P, _} = R <- [InDir, Local], alive(P)], Stamp).

newest([], _Stamp) -> ok;
newest([{Older, _} | _] = Rivals, Stamp) ->
    case [R || {_, S} = R <- Rivals, S > Stamp] of
        [_ | _] -> conflict;
        [] -> {exists, Older}
    end.

%% A session on a node that is no longer connected is gone (its entries are
%% being dropped).
alive(Pid) when node(Pid) =:= node() -> is_process_alive(Pid);
alive(Pid) -> lists:member(node(Pid), nodes()).
