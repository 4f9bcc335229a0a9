%% @doc Messages in flight left behind by sessions that are gone go back to
%% offline storage while the node runs (PostgreSQL backend). A session that
%% ends returns its unacknowledged messages itself; when the database cannot
%% be reached at that moment the rows stay, durable but owned by a dead
%% process, until something moves them back. This process does, with
%% `inflight_recover(orphans)': when a pool process reconnects after an
%% outage (it casts `database_back' to this process's registered name), and
%% every minute. Rows of live sessions are never touched; a run that fails
%% (the database is down again) is simply retried later.
-module(throng_pgsql_orphans).
-behaviour(gen_server).

-export([start_link/0]).
-export([init/1, handle_call/3, handle_cast/2, handle_info/2]).
%% Called by supervisors (child specs) and proc_lib.
-ignore_xref([{start_link, 0}]).

-define(PERIOD_MS, 60000).
%% Reconnections of several pool processes at once make one run.
-define(SETTLE_MS, 500).

-spec start_link() -> {ok, pid()} | {error, term()}.
start_link() ->
    gen_server:start_link({local, ?MODULE}, ?MODULE, [], []).

-spec init([]) -> {ok, reference()}.
init([]) ->
    {ok, erlang:send_after(?PERIOD_MS, self(), run)}.

-spec handle_call(term(), gen_server:from(), reference()) -> {reply, ok, reference()}.
handle_call(_Msg, _From, Timer) ->
    {reply, ok, Timer}.

-spec handle_cast(term(), reference()) -> {noreply, reference()}.
%% The database answers again: look for orphans soon.
handle_cast(database_back, Timer) ->
    _ = erlang:cancel_timer(Timer),
    {noreply, erlang:send_after(?SETTLE_MS, self(), run)};
handle_cast(_Msg, Timer) ->
    {noreply, Timer}.

-spec handle_info(term(), reference()) -> {noreply, reference()}.
handle_info(run, _Timer) ->
    try throng_storage_pgsql:inflight_recover(orphans) of
        0 -> ok;
        N -> logger:notice(#{what => inflight_orphans_recovered, messages => N,
                             text => "messages of ended sessions are offline again"})
    catch
        error:{storage_failed, Why} ->
            logger:info(#{what => inflight_orphans_check_failed, reason => Why})
    end,
    {noreply, erlang:send_after(?PERIOD_MS, self(), run)};
handle_info(_Msg, Timer) ->
    {noreply, Timer}.
