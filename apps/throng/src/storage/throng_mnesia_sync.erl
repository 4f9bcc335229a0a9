%% @doc Group commit for the Mnesia backend. A sync_transaction returns once
%% Mnesia's transaction log process has the commit, which may still sit in
%% that process's write buffer; `mnesia:sync_log/0' writes and fsyncs it.
%% An fsync costs about half a millisecond here, so writers that ask at the
%% same time share one: callers that arrive while a sync is running are
%% answered by the next one.
%%
%% Every caller gets the result of the sync that covered it: `ok' only when
%% that sync succeeded, `{error, Reason}' when it failed (an I/O error of the
%% log, a crash of the worker, this process dying during the call). A
%% failed sync does not stick: the next caller starts a new one.
%%
%% A writer whose contract allows durability a moment after it returns (the
%% message archive's) does not wait: {@link sync_soon/1} asks for a sync
%% that covers its commit and nobody waits for, started
%% `storage.archive_sync_delay' milliseconds later (this node's value) so
%% that the commits of that time share it: at 10 ms, as this began, a
%% lightly loaded node fsynced 24 times a second, a quarter of its CPU
%% (docs/benchmarks.md).
-module(throng_mnesia_sync).
-behaviour(gen_server).

-export([start_link/0, sync/0, sync_soon/1]).
-export([init/1, handle_call/3, handle_cast/2, handle_info/2]).
%% Called by supervisors (child specs) and proc_lib.
-ignore_xref([{start_link, 0}]).

-record(st, {worker :: pid() | undefined,                %% the running sync, if any
             current = [] :: [gen_server:from()],   %% answered when the running sync ends
             next = [] :: [gen_server:from()],      %% answered by the sync after it
             again = false :: boolean(),            %% a sync is owed after the running one
             soon = false :: boolean()}).           %% a sync_soon's timer is running

-spec start_link() -> {ok, pid()} | {error, term()}.
start_link() ->
    gen_server:start_link({local, ?MODULE}, ?MODULE, [], []).

%% @doc Returns `ok' once every transaction committed before the call is on
%% disk, `{error, Reason}' if that could not be made sure of.
%% While this process is not running (before the supervision tree starts:
%% the hosts' modules start first and may write; or between a crash and
%% its restart) the caller fsyncs the log itself.
-spec sync() -> ok | {error, term()}.
sync() ->
    case whereis(?MODULE) of
        undefined ->
            sync_log();
        Pid ->
            try gen_server:call(Pid, sync, infinity)
            catch exit:Why -> {error, {sync_process, Why}}
            end
    end.

%% @doc Asks the group commit of each node of Nodes (this one too if it is
%% named) for a sync that covers every transaction committed before the
%% call, without waiting for it: on disk within each node's
%% `storage.archive_sync_delay' and a sync's time (about a millisecond
%% here) unless the node stops first. A node not connected is not asked.
-spec sync_soon([node()]) -> ok.
sync_soon(Nodes) ->
    [erlang:send({?MODULE, N}, {'$gen_cast', sync_soon}, [noconnect]) || N <- Nodes],
    ok.

-spec init([]) -> {ok, #st{}}.
init([]) ->
    process_flag(trap_exit, true),
    {ok, #st{}}.

-spec handle_call(sync, gen_server:from(), #st{}) -> {noreply, #st{}}.
handle_call(sync, From, #st{worker = undefined} = St) ->
    {noreply, start(St#st{current = [From]})};
handle_call(sync, From, #st{next = Next} = St) ->
    {noreply, St#st{next = [From | Next]}}.

-spec handle_cast(term(), #st{}) -> {noreply, #st{}}.
handle_cast(sync_soon, #st{soon = true} = St) ->
    {noreply, St};
handle_cast(sync_soon, St) ->
    _ = erlang:send_after(throng_config:get([storage, archive_sync_delay]), self(), soon),
    {noreply, St#st{soon = true}};
handle_cast(_Msg, St) ->
    {noreply, St}.

-spec handle_info(term(), #st{}) -> {noreply, #st{}}.
handle_info({'EXIT', Worker, Exit}, #st{worker = Worker, current = Current, next = Next} = St) ->
    Result = case Exit of
                 {synced, R} -> R;
                 Crash -> {error, {sync_crashed, Crash}}
             end,
    Result =:= ok orelse
        logger:error(#{what => mnesia_sync_failed, reason => Result, writers => length(Current)}),
    [gen_server:reply(From, Result) || From <- Current],
    case {Next, St#st.again} of
        {[], false} -> {noreply, St#st{worker = undefined, current = []}};
        _ -> {noreply, start(St#st{current = Next, next = [], again = false})}
    end;
handle_info(soon, #st{worker = undefined} = St) ->
    {noreply, start(St#st{current = [], soon = false})};
handle_info(soon, St) ->
    %% The running sync may have begun before the commits were logged.
    {noreply, St#st{again = true, soon = false}};
handle_info(_Msg, St) ->
    {noreply, St}.

%% The worker reports through its exit reason, so a crash and a result
%% arrive the same way and exactly once.
start(St) ->
    St#st{worker = spawn_link(fun sync_worker/0)}.

-spec sync_worker() -> no_return().
sync_worker() ->
    exit({synced, sync_log()}).

sync_log() ->
    try mnesia:sync_log() of
        ok -> ok;
        {error, _} = Error -> Error
    catch
        Class:Reason -> {error, {Class, Reason}}
    end.
