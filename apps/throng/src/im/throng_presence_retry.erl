%% @doc Unavailable presence that could not be sent to a user's subscribers
%% because the store did not answer the roster read (a session that ended
%% while the database was down or its pool full; the sessions of a cluster
%% member that went down). The broadcast is kept here and sent when the
%% store answers again, so contacts do not see a resource online that has
%% gone.
%%
%% One process per node, a FIFO of {full JID, presence}. It tries the oldest
%% entry after a delay: 1 s, doubled after each failed read up to 30 s, back
%% to 1 s once a read succeeds (then the rest follow at once, ?BATCH per
%% turn). An entry whose resource is available again when its turn comes is
%% dropped: its contacts already have the newer presence, and an old
%% unavailable would hide it. At most ?MAX entries wait; beyond that a
%% broadcast is dropped (counted, logged once per full spell).
%%
%% Entries live in this process's memory, and a copy of each in the same
%% process of one other cluster member, its **copy holder** (the next
%% connected member after this node in sorted order; another when that one
%% goes, which gets all of them). The holder watches the process that sent
%% them: when it goes (the node killed or cut off, the process crashed or
%% stopped), the holder keeps the copies as its own and sends them: every
%% member reads the same store, and the sessions had left the directory,
%% so no member's handling of a node that went down would tell those
%% contacts. When this process stops (the node stops, or leaves the
%% cluster: {@link hand_over/0}) it also hands what it keeps to a member
%% at once. An entry keeps its key whoever keeps it, so no member keeps it
%% twice; a node that took over a member's entries while cut off from it
%% lets them go when that member sends its copies again (the link is
%% back). A broadcast may still be sent more than once (the store answered
%% during the split, or the member copied them to another), which tells
%% the contacts nothing new; alone, a killed node's entries are lost. A
%% kept broadcast whose sending fails otherwise than on the store is
%% dropped and logged, not a crash.
-module(throng_presence_retry).
-behaviour(gen_server).

-include("throng.hrl").

-export([start_link/0, later/4, waiting/0, copies/0, hand_over/0]).
-export([init/1, handle_call/3, handle_cast/2, handle_info/2, terminate/2]).
%% Called by supervisors (child specs) and proc_lib.
-ignore_xref([{start_link, 0}]).
%% API used by tests and operators.
-ignore_xref([{waiting, 0}, {copies, 0}]).

-define(FIRST_MS, 1000).
-define(LAST_MS, 30000).
-define(MAX, 100000).
-define(BATCH, 500).
%% Handing over: entries per call, how long a member may take to answer
%% one, how many members are tried, and how long it may take in all (what
%% is not handed by then stays; hand_over/0's call and the supervisor's
%% shutdown time for this process, 30 s in throng_sup, wait longer).
-define(HAND_CHUNK, 5000).
-define(HAND_MS, 4000).
-define(HAND_TRIES, 3).
-define(HAND_TOTAL_MS, 20000).
-define(HAND_OVER_MS, 25000).

%% Who sends a kept broadcast: Module:Function(User, El), ok or raising
%% storage_failed ({@link throng_presence:to_subscribers/2}). Named by the
%% caller so this module does not call back into it.
-type sender() :: {module(), atom()}.
-export_type([sender/0]).

-type entry() :: {#jid{}, #xmlel{}, sender()}.
%% An entry's name for all its life, whichever member keeps it: the node
%% that kept it first, that node's incarnation, a number unique there.
-type key() :: {node(), integer(), pos_integer()}.
-type item() :: {key(), entry()}.

-record(st, {queue = queue:new() :: queue:queue(item()),
             len = 0 :: non_neg_integer(),
             %% The keys in the queue.
             kept = #{} :: #{key() => true},
             delay = ?FIRST_MS :: non_neg_integer(),
             timer :: reference() | undefined,
             full = false :: boolean(),
             %% The member holding the copies of the entries here, and
             %% what changed since it was last told (newest first).
             holder = none :: node() | none,
             holder_mon :: reference() | undefined,
             new = [] :: [item()],
             gone = [] :: [key()],
             sync = false :: boolean(),
             %% The copies this process holds for other members: by
             %% member, the process that sent them (watched) and the copies.
             copies = #{} :: #{node() => {pid(), reference(), #{key() => entry()}}}}).

-spec start_link() -> {ok, pid()} | {error, term()}.
start_link() ->
    gen_server:start_link({local, ?MODULE}, ?MODULE, [], []).

%% @doc Keeps User's unavailable presence El for its subscribers, to be sent
%% by Sender when the store reads User's roster again. Why: the read's
%% failure, logged. Never blocks; without this process (the node is
%% stopping) it is dropped.
-spec later(#jid{}, #xmlel{}, sender(), term()) -> ok.
later(User, El, Sender, Why) ->
    throng_metrics:incr(presence_deferred),
    logger:warning(#{what => unavailable_presence_deferred, jid => throng_jid:to_binary(User),
                     reason => Why}),
    gen_server:cast(?MODULE, {later, User, El, Sender}).

%% @doc How many broadcasts wait.
-spec waiting() -> non_neg_integer().
waiting() ->
    gen_server:call(?MODULE, waiting).

%% @doc How many copies of other members' kept broadcasts this node holds.
-spec copies() -> non_neg_integer().
copies() ->
    gen_server:call(?MODULE, copies).

%% @doc Hands every kept broadcast to another cluster member now (this node
%% leaves the cluster: after, it has no member to hand them to). Returns
%% how many went, how many are still here (no member took them), and the
%% member holding their copies (which sends them if this node goes), if
%% any.
-spec hand_over() -> {non_neg_integer(), non_neg_integer(), node() | none}.
hand_over() ->
    gen_server:call(?MODULE, hand_over, ?HAND_OVER_MS).

-spec init([]) -> {ok, #st{}}.
init([]) ->
    %% terminate/2 runs when the node stops: what is kept goes to a member.
    process_flag(trap_exit, true),
    {ok, publish(#st{})}.

-spec handle_call(term(), gen_server:from(), #st{}) -> {reply, term(), #st{}}.
handle_call(Req, From, St) ->
    {reply, Reply, St1} = call(Req, From, St),
    {reply, Reply, publish(St1)}.

-spec handle_cast(term(), #st{}) -> {noreply, #st{}}.
handle_cast(Msg, St) ->
    {noreply, St1} = cast(Msg, St),
    {noreply, publish(St1)}.

-spec handle_info(term(), #st{}) -> {noreply, #st{}}.
handle_info(Msg, St) ->
    {noreply, St1} = info(Msg, St),
    {noreply, publish(St1)}.

call(waiting, _From, St) ->
    {reply, St#st.len, St};
call(copies, _From, St) ->
    {reply, copy_count(St), St};
call(hand_over, _From, St) ->
    St1 = sync(hand(St)),
    {reply, {St#st.len - St1#st.len, St1#st.len, St1#st.holder}, St1};
%% From a member that stops: the answer names what was taken, so that a
%% member running an older version (which answers any call with ok) is
%% not taken for one that keeps them.
call({adopt, From, Entries}, _From, St) ->
    {reply, {adopted, length(Entries)},
     adopt(From, handed_over, [{new_key(), E} || E <- Entries], St)};
call(_Req, _From, St) ->
    {reply, ok, St}.

cast({later, User, El, Sender}, St) ->
    {noreply, arm(keep({new_key(), {User, El, Sender}}, St))};
%% A member's copies: all of them (replacing what was held), more, or
%% those it no longer keeps; each names the process that sent it.
cast({copies, Origin, Pid, Items}, St0) ->
    St = held(Origin, Pid, St0),
    #{Origin := {Pid, Mon, _}} = Copies = St#st.copies,
    St1 = case Items of
              [] ->
                  demonitor(Mon, [flush]),
                  St#st{copies = maps:remove(Origin, Copies)};
              _ ->
                  St#st{copies = Copies#{Origin := {Pid, Mon, maps:from_list(Items)}}}
          end,
    %% What this node took on from Origin while cut off from it, Origin
    %% keeps again: it is sent from there.
    {noreply, unkeep([K || {K, _} <- Items, element(1, K) =:= Origin,
                           is_map_key(K, St1#st.kept)], St1)};
cast({copy, Origin, Pid, Items}, St0) ->
    St = held(Origin, Pid, St0),
    #{Origin := {Pid, Mon, Es}} = St#st.copies,
    {noreply, St#st{copies = (St#st.copies)#{Origin := {Pid, Mon,
                                                        maps:merge(Es, maps:from_list(Items))}}}};
cast({forget, Origin, Pid, Keys}, #st{copies = Copies} = St) ->
    case Copies of
        #{Origin := {Pid, Mon, Es}} ->
            case maps:without(Keys, Es) of
                Left when map_size(Left) =:= 0 ->
                    demonitor(Mon, [flush]),
                    {noreply, St#st{copies = maps:remove(Origin, Copies)}};
                Left ->
                    {noreply, St#st{copies = Copies#{Origin := {Pid, Mon, Left}}}}
            end;
        #{} ->
            {noreply, St}
    end;
cast(_Msg, St) ->
    {noreply, St}.

info(retry, St) ->
    St1 = turn(St#st{timer = undefined}, ?BATCH),
    {noreply, arm(ask_sync(St1, St1#st.gone =/= []))};
info(sync, St) ->
    {noreply, sync(St#st{sync = false})};
%% The holder of the copies went (its node, or its process): another
%% member is looked for in a while (at once could be the same process
%% coming back, or not yet registered).
info({'DOWN', Mon, process, _, _}, #st{holder_mon = Mon} = St) ->
    {noreply, sync_later(St#st{holder = none, holder_mon = undefined})};
%% A member whose copies are held here went (killed, stopped, crashed,
%% or cut off): they are kept and sent from here.
info({'DOWN', Mon, process, _, Why}, #st{copies = Copies} = St) ->
    case [O || {O, {_, M, _}} <- maps:to_list(Copies), M =:= Mon] of
        [Origin] ->
            {noreply, take_over(Origin, Why, St)};
        [] ->
            {noreply, St}
    end;
info(_Msg, St) ->
    {noreply, St}.

%% Stopping: a member keeps what is here (taken now, or the copies'
%% holder when this process has gone); alone, it is gone.
-spec terminate(term(), #st{}) -> ok.
terminate(_Reason, #st{len = 0} = St) ->
    %% The holder forgets what was sent since it was last told.
    _ = sync(St),
    ok;
terminate(Reason, St) when Reason =:= shutdown; Reason =:= normal;
                           element(1, Reason) =:= shutdown ->
    left(sync(hand(St)), no_member_took_it);
terminate(_Crash, St) ->
    left(sync(St), crashed).

left(#st{len = 0}, _Why) ->
    ok;
left(#st{len = Len, holder = none}, Why) ->
    logger:error(#{what => unavailable_presence_forgotten, count => Len, reason => Why});
left(#st{len = Len, holder = Holder}, Why) ->
    logger:warning(#{what => unavailable_presence_left_to_holder, count => Len,
                     holder => Holder, reason => Why}).

new_key() ->
    {node(), erlang:system_info(creation), erlang:unique_integer([positive, monotonic])}.

keep(_Item, #st{len = Len, full = Full} = St) when Len >= ?MAX ->
    throng_metrics:incr(presence_deferred_dropped),
    Full orelse logger:error(#{what => unavailable_presence_queue_full, waiting => Len}),
    St#st{full = true};
keep({Key, _} = Item, #st{queue = Q, len = Len, kept = Kept, new = New} = St) ->
    ask_sync(St#st{queue = queue:in(Item, Q), len = Len + 1, kept = Kept#{Key => true},
                   new = [Item | New]}, true).

%% Items from another member kept here, but not twice under one key.
adopt(From, Why, Items, #st{kept = Kept} = St) ->
    Fresh = [I || {K, _} = I <- Items, not is_map_key(K, Kept)],
    N = length(Fresh),
    logger:notice(#{what => unavailable_presence_adopted, from => From, count => N,
                    reason => Why}),
    throng_metrics:add(presence_deferred_adopted, N),
    arm(lists:foldl(fun keep/2, St, Fresh)).

%% The entries with these keys leave the queue (another member keeps them).
unkeep([], St) ->
    St;
unkeep(Keys, #st{queue = Q, kept = Kept, gone = Gone} = St) ->
    Drop = maps:from_keys(Keys, true),
    Q1 = queue:filter(fun({K, _}) -> not is_map_key(K, Drop) end, Q),
    ask_sync(St#st{queue = Q1, len = queue:len(Q1), kept = maps:without(Keys, Kept),
                   gone = Keys ++ Gone}, true).

%% Origin's copies held here, sent by Pid: watched from the first; a new
%% process there means the one before went, and what it had sent is taken
%% over (its 'DOWN' may come after this).
held(Origin, Pid, #st{copies = Copies} = St) ->
    case Copies of
        #{Origin := {Pid, _, _}} ->
            St;
        #{Origin := _} ->
            held(Origin, Pid, take_over(Origin, replaced, St));
        #{} ->
            St#st{copies = Copies#{Origin => {Pid, monitor(process, Pid), #{}}}}
    end.

take_over(Origin, Why, #st{copies = Copies} = St) ->
    {{_, Mon, Es}, Rest} = maps:take(Origin, Copies),
    demonitor(Mon, [flush]),
    adopt(Origin, Why, maps:to_list(Es), St#st{copies = Rest}).

%% The gauges presence_deferred_waiting and _copies set to what is here
%% (this process alone writes them; a restarted one starts them at 0).
publish(#st{len = Len} = St) ->
    [throng_metrics:add(G, V - throng_metrics:value(G))
     || {G, V} <- [{presence_deferred_waiting, Len}, {presence_deferred_copies, copy_count(St)}]],
    St.

copy_count(#st{copies = Copies}) ->
    lists:sum([map_size(Es) || {_, _, Es} <- maps:values(Copies)]).

%% The copy holder told what changed, once for what came in the mailbox
%% meanwhile.
ask_sync(#st{sync = false} = St, true) ->
    self() ! sync,
    St#st{sync = true};
ask_sync(St, _) ->
    St.

%% A sync in a while (none pending yet).
sync_later(#st{sync = true} = St) ->
    St;
sync_later(St) ->
    erlang:send_after(?FIRST_MS, self(), sync),
    St#st{sync = true}.

sync(St) ->
    case {holder(St), St#st.holder} of
        {none, _} ->
            is_reference(St#st.holder_mon) andalso demonitor(St#st.holder_mon, [flush]),
            St1 = St#st{holder = none, holder_mon = undefined, new = [], gone = []},
            %% Kept with no member to copy it to: looked for again (a
            %% member may join, or a link come back).
            case St1#st.len of
                0 -> St1;
                _ -> sync_later(St1)
            end;
        {Same, Same} ->
            send_chunks(Same, copy, lists:reverse(St#st.new)),
            St#st.gone =:= [] orelse tell(Same, {forget, node(), self(), St#st.gone}),
            St#st{new = [], gone = []};
        {Holder, Old} ->
            Old =:= none orelse tell(Old, {copies, node(), self(), []}),
            is_reference(St#st.holder_mon) andalso demonitor(St#st.holder_mon, [flush]),
            Mon = monitor(process, {?MODULE, Holder}),
            {First, Rest} = lists:split(min(St#st.len, ?HAND_CHUNK), queue:to_list(St#st.queue)),
            tell(Holder, {copies, node(), self(), First}),
            send_chunks(Holder, copy, Rest),
            St#st{holder = Holder, holder_mon = Mon, new = [], gone = []}
    end.

send_chunks(_Holder, _Tag, []) ->
    ok;
send_chunks(Holder, Tag, Items) ->
    {Chunk, Rest} = lists:split(min(length(Items), ?HAND_CHUNK), Items),
    tell(Holder, {Tag, node(), self(), Chunk}),
    send_chunks(Holder, Tag, Rest).

%% A cast that never sets up a connection (to a member that has just
%% gone, it is lost, as the member's copies are).
tell(Node, Msg) ->
    _ = erlang:send({?MODULE, Node}, {'$gen_cast', Msg}, [noconnect]),
    ok.

%% Who holds the copies: the holder as long as it is connected (a member
%% or one leaving: it keeps what it holds until this node goes), else the
%% next connected member after this node in sorted order; none when there
%% is none, or nothing is kept and none was chosen.
holder(#st{len = 0, holder = none}) ->
    none;
holder(#st{holder = Holder}) ->
    case Holder =/= none andalso lists:member(Holder, nodes()) of
        true -> Holder;
        false ->
            Others = [N || N <- throng_members:others(), lists:member(N, nodes())],
            case [N || N <- Others, N > node()] of
                [Next | _] -> Next;
                [] -> case Others of [First | _] -> First; [] -> none end
            end
    end.

%% Every entry to the first of (at most ?HAND_TRIES) other members that
%% takes them, oldest first, ?HAND_CHUNK per call, within ?HAND_TOTAL_MS;
%% what no member took stays.
hand(St) ->
    Deadline = erlang:monotonic_time(millisecond) + ?HAND_TOTAL_MS,
    hand(St, lists:sublist(throng_members:others(), ?HAND_TRIES), Deadline).

hand(#st{len = 0} = St, _Members, _Deadline) ->
    St;
hand(St, [], _Deadline) ->
    St;
hand(#st{queue = Q, len = Len} = St, [Member | Rest] = Members, Deadline) ->
    case Deadline - erlang:monotonic_time(millisecond) of
        Left when Left =< 0 ->
            St;
        Left ->
            {Chunk, Kept} = queue:split(min(Len, ?HAND_CHUNK), Q),
            Items = queue:to_list(Chunk),
            Keys = [K || {K, _} <- Items],
            %% Entries alone (what every version takes); the member names
            %% them anew.
            try gen_server:call({?MODULE, Member},
                                {adopt, node(), [Entry || {_, Entry} <- Items]},
                                min(?HAND_MS, Left)) of
                {adopted, N} ->
                    throng_metrics:add(presence_deferred_handed, N),
                    logger:notice(#{what => unavailable_presence_handed_over, to => Member,
                                    count => N}),
                    hand(St#st{queue = Kept, len = Len - length(Items),
                               kept = maps:without(Keys, St#st.kept),
                               gone = Keys ++ St#st.gone},
                         Members, Deadline);
                _Old ->
                    hand(St, Rest, Deadline)
            catch exit:Why ->
                    logger:warning(#{what => unavailable_presence_hand_over_failed,
                                     to => Member, reason => Why}),
                    hand(St, Rest, Deadline)
            end
    end.

%% Up to N entries, oldest first, until a roster read fails.
turn(#st{len = 0} = St, _N) ->
    St#st{delay = ?FIRST_MS, full = false};
turn(St, 0) ->
    St#st{delay = 0};
turn(#st{queue = Q, len = Len} = St, N) ->
    {{value, {Key, {User, El, Sender}} = Item}, Rest} = queue:out(Q),
    case send(User, El, Sender) of
        done ->
            turn(St#st{queue = Rest, len = Len - 1, kept = maps:remove(Key, St#st.kept),
                       delay = ?FIRST_MS, full = false, gone = [Key | St#st.gone]}, N - 1);
        failed ->
            St#st{queue = queue:in_r(Item, Rest),
                  delay = min(?LAST_MS, max(?FIRST_MS, 2 * St#st.delay))}
    end.

send(#jid{user = U, server = S, resource = R} = User, El, {M, F}) ->
    try
        case lists:keymember(R, 1, throng_sm:available({U, S})) of
            true -> skipped;
            false -> ok = M:F(User, El), sent
        end
    of
        skipped -> throng_metrics:incr(presence_deferred_skipped), done;
        sent -> throng_metrics:incr(presence_deferred_sent), done
    catch
        error:{storage_failed, _} -> failed;
        Class:Reason:Stack ->
            throng_metrics:incr(presence_deferred_dropped),
            logger:error(#{what => unavailable_presence_send_failed,
                           jid => throng_jid:to_binary(User), class => Class,
                           reason => Reason, stacktrace => Stack}),
            done
    end.

arm(#st{len = 0} = St) ->
    St;
arm(#st{timer = undefined, delay = Delay} = St) ->
    St#st{timer = erlang:send_after(Delay, self(), retry)};
arm(St) ->
    St.
