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
%% broadcast is dropped (counted, logged once per full spell). Entries live
%% in this process only: a node that stops forgets them, and those contacts
%% are not told (on a single node they end with it; in a cluster the
%% sessions had already left the directory, so the other members' handling
%% of a member that went down does not see them).
-module(throng_presence_retry).
-behaviour(gen_server).

-include("throng.hrl").

-export([start_link/0, later/4, waiting/0]).
-export([init/1, handle_call/3, handle_cast/2, handle_info/2]).
%% Called by supervisors (child specs) and proc_lib.
-ignore_xref([{start_link, 0}]).
%% API used by tests and operators.
-ignore_xref([{waiting, 0}]).

-define(FIRST_MS, 1000).
-define(LAST_MS, 30000).
-define(MAX, 100000).
-define(BATCH, 500).

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

-spec init([]) -> {ok, #st{}}.
init([]) ->
    {ok, #st{}}.

-spec handle_call(term(), gen_server:from(), #st{}) -> {reply, term(), #st{}}.
handle_call(waiting, _From, St) ->
    {reply, St#st.len, St};
handle_call(_Req, _From, St) ->
    {reply, ok, St}.

-spec handle_cast(term(), #st{}) -> {noreply, #st{}}.
handle_cast({later, _User, _El, _Sender}, #st{len = Len, full = Full} = St) when Len >= ?MAX ->
    throng_metrics:incr(presence_deferred_dropped),
    Full orelse logger:error(#{what => unavailable_presence_queue_full, waiting => Len}),
    {noreply, St#st{full = true}};
handle_cast({later, User, El, Sender}, #st{queue = Q, len = Len} = St) ->
    {noreply, arm(St#st{queue = queue:in({User, El, Sender}, Q), len = Len + 1})};
handle_cast(_Msg, St) ->
    {noreply, St}.

-spec handle_info(term(), #st{}) -> {noreply, #st{}}.
handle_info(retry, St) ->
    {noreply, arm(turn(St#st{timer = undefined}, ?BATCH))};
handle_info(_Msg, St) ->
    {noreply, St}.

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
    case lists:keymember(R, 1, throng_sm:available({U, S})) of
        true ->
            throng_metrics:incr(presence_deferred_skipped),
            done;
        false ->
            try M:F(User, El) of
                ok -> throng_metrics:incr(presence_deferred_sent), done
            catch error:{storage_failed, _} -> failed
            end
    end.

arm(#st{len = 0} = St) ->
    St;
arm(#st{timer = undefined, delay = Delay} = St) ->
    St#st{timer = erlang:send_after(Delay, self(), retry)};
arm(St) ->
    St.
