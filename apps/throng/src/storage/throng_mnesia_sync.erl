%% @doc Group commit for the Mnesia backend. A sync_transaction returns once
%% Mnesia's transaction log process has the commit, which may still sit in
%% that process's write buffer; `mnesia:sync_log/0' writes and fsyncs it.
%% An fsync costs about half a millisecond here, so writers that ask at the
%% same time share one: callers that arrive while a sync is running are
%% answered by the next one.
-module(throng_mnesia_sync).
-behaviour(gen_server).

-export([start_link/0, sync/0]).
-export([init/1, handle_call/3, handle_cast/2, handle_info/2]).

-record(st, {running = false :: boolean(),
             current = [] :: [gen_server:from()],   %% answered when the running sync ends
             next = [] :: [gen_server:from()]}).    %% answered by the sync after it

-spec start_link() -> {ok, pid()} | {error, term()}.
start_link() ->
    gen_server:start_link({local, ?MODULE}, ?MODULE, [], []).

%% @doc Returns once every transaction committed before the call is on disk.
-spec sync() -> ok.
sync() ->
    gen_server:call(?MODULE, sync, infinity).

-spec init([]) -> {ok, #st{}}.
init([]) ->
    process_flag(trap_exit, true),
    {ok, #st{}}.

-spec handle_call(sync, gen_server:from(), #st{}) -> {noreply, #st{}}.
handle_call(sync, From, #st{running = false} = St) ->
    {noreply, start(St#st{current = [From]})};
handle_call(sync, From, #st{next = Next} = St) ->
    {noreply, St#st{next = [From | Next]}}.

-spec handle_cast(term(), #st{}) -> {noreply, #st{}}.
handle_cast(_Msg, St) ->
    {noreply, St}.

-spec handle_info(term(), #st{}) -> {noreply, #st{}}.
handle_info({'EXIT', _Worker, Reason}, #st{current = Current, next = Next} = St) ->
    Reason =:= normal orelse logger:error(#{what => mnesia_sync_failed, reason => Reason}),
    [gen_server:reply(From, ok) || From <- Current],
    case Next of
        [] -> {noreply, St#st{running = false, current = []}};
        _ -> {noreply, start(St#st{current = Next, next = []})}
    end;
handle_info(_Msg, St) ->
    {noreply, St}.

start(St) ->
    _ = spawn_link(fun() -> ok = mnesia:sync_log() end),
    St#st{running = true}.
