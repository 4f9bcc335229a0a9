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
%% Entries live in this process's memory. When it stops (the node stops,
%% or leaves the cluster: {@link hand_over/0}) it hands what it keeps to
%% another cluster member, whose process keeps and sends it as its own:
%% every member reads the same store, and the sessions had left the
%% directory, so no member's handling of a node that went down would tell
%% those contacts. Alone (or when no member takes them in time) the
%% entries are forgotten, logged with their count; so are they when this
%% process crashes (what it kept may be why: handed on, it could crash
%% every member in turn) or the node is killed. A kept broadcast whose
%% sending fails otherwise than on the store is dropped and logged, not a
%% crash.
-module(throng_presence_retry).
-behaviour(gen_server).

-include("throng.hrl").

-export([start_link/0, later/4, waiting/0, hand_over/0]).
-export([init/1, handle_call/3, handle_cast/2, handle_info/2, terminate/2]).
%% Called by supervisors (child specs) and proc_lib.
-ignore_xref([{start_link, 0}]).
%% API used by tests and operators.
-ignore_xref([{waiting, 0}]).

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

-record(st, {queue = queue:new() :: queue:queue({#jid{}, #xmlel{}, sender()}),
             len = 0 :: non_neg_integer(),
             delay = ?FIRST_MS :: non_neg_integer(),
             timer :: reference() | undefined,
             full = false :: boolean()}).

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

%% @doc Hands every kept broadcast to another cluster member now (this node
%% leaves the cluster: after, it has no member to hand them to). Returns
%% how many went, and how many are still here (no member took them).
-spec hand_over() -> {non_neg_integer(), non_neg_integer()}.
hand_over() ->
    gen_server:call(?MODULE, hand_over, ?HAND_OVER_MS).

-spec init([]) -> {ok, #st{}}.
init([]) ->
    %% terminate/2 runs when the node stops: what is kept goes to a member.
    process_flag(trap_exit, true),
    {ok, #st{}}.

-spec handle_call(term(), gen_server:from(), #st{}) -> {reply, term(), #st{}}.
handle_call(waiting, _From, St) ->
    {reply, St#st.len, St};
handle_call(hand_over, _From, St) ->
    St1 = hand(St),
    {reply, {St#st.len - St1#st.len, St1#st.len}, St1};
%% From a member that stops: the answer names what was taken, so that a
%% member running an older version (which answers any call with ok) is
%% not taken for one that keeps them.
handle_call({adopt, From, Entries}, _From, St) ->
    N = length(Entries),
    logger:notice(#{what => unavailable_presence_adopted, from => From, count => N}),
    throng_metrics:add(presence_deferred_adopted, N),
    {reply, {adopted, N}, arm(lists:foldl(fun keep/2, St, Entries))};
handle_call(_Req, _From, St) ->
    {reply, ok, St}.

-spec handle_cast(term(), #st{}) -> {noreply, #st{}}.
handle_cast({later, User, El, Sender}, St) ->
    {noreply, arm(keep({User, El, Sender}, St))};
handle_cast(_Msg, St) ->
    {noreply, St}.

-spec handle_info(term(), #st{}) -> {noreply, #st{}}.
handle_info(retry, St) ->
    {noreply, arm(turn(St#st{timer = undefined}, ?BATCH))};
handle_info(_Msg, St) ->
    {noreply, St}.

%% Stopping: a member keeps what is here; alone, it is gone.
-spec terminate(term(), #st{}) -> ok.
terminate(_Reason, #st{len = 0}) ->
    ok;
terminate(Reason, St) when Reason =:= shutdown; Reason =:= normal;
                           element(1, Reason) =:= shutdown ->
    #st{len = Left} = hand(St),
    Left =:= 0 orelse
        logger:warning(#{what => unavailable_presence_forgotten, count => Left,
                         reason => no_member_took_it}),
    ok;
terminate(_Crash, #st{len = Len}) ->
    logger:error(#{what => unavailable_presence_forgotten, count => Len, reason => crashed}),
    ok.

keep(_Entry, #st{len = Len, full = Full} = St) when Len >= ?MAX ->
    throng_metrics:incr(presence_deferred_dropped),
    Full orelse logger:error(#{what => unavailable_presence_queue_full, waiting => Len}),
    St#st{full = true};
keep(Entry, #st{queue = Q, len = Len} = St) ->
    St#st{queue = queue:in(Entry, Q), len = Len + 1}.

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
            try gen_server:call({?MODULE, Member}, {adopt, node(), queue:to_list(Chunk)},
                                min(?HAND_MS, Left)) of
                {adopted, N} ->
                    throng_metrics:add(presence_deferred_handed, N),
                    logger:notice(#{what => unavailable_presence_handed_over, to => Member,
                                    count => N}),
                    hand(St#st{queue = Kept, len = Len - N}, Members, Deadline);
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
    {{value, {User, El, Sender} = Entry}, Rest} = queue:out(Q),
    case send(User, El, Sender) of
        done ->
            turn(St#st{queue = Rest, len = Len - 1, delay = ?FIRST_MS, full = false}, N - 1);
        failed ->
            St#st{queue = queue:in_r(Entry, Rest),
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
