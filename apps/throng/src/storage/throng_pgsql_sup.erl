%% @doc The PostgreSQL connection pool: `storage.pgsql.pool_size' processes
%% of {@link throng_pgsql_conn}, each owning one connection, registered as
%% throng_pgsql_1 ... throng_pgsql_N. There is no pool manager: a caller
%% starts at the process its own pid maps to ({@link pick/0}), so that
%% callers spread over the connections without passing through one process;
%% only when that one has no connection does it try the next ones.
-module(throng_pgsql_sup).
-behaviour(supervisor).

-export([start_link/0, init/1, pick/0, options/0]).
%% Called by supervisors (child specs) and proc_lib.
-ignore_xref([{start_link, 0}]).

-define(POOL_KEY, {?MODULE, pool}).

-spec start_link() -> {ok, pid()} | {error, term()}.
start_link() ->
    supervisor:start_link({local, ?MODULE}, ?MODULE, []).

-spec init([]) -> {ok, {supervisor:sup_flags(), [supervisor:child_spec()]}}.
init([]) ->
    Opts = options(),
    N = throng_config:get([storage, pgsql, pool_size]),
    Names = [list_to_atom("throng_pgsql_" ++ integer_to_list(I)) || I <- lists:seq(1, N)],
    Pool = {list_to_tuple(Names), maps:get(query_timeout, Opts)},
    %% Set once per start: a pool of the same shape is not written again.
    persistent_term:get(?POOL_KEY, undefined) =:= Pool orelse persistent_term:put(?POOL_KEY, Pool),
    _ = logger:add_primary_filter(throng_pgsql_driver,
                                  {fun throng_pgsql_conn:log_filter/2, []}),
    Children = [#{id => Name,
                  start => {throng_pgsql_conn, start_link, [Name, Opts, Names -- [Name]]}}
                || Name <- Names],
    %% A pool process does not crash when the database goes away (it
    %% reconnects); a crash is a bug, and a few are allowed.
    {ok, {#{strategy => one_for_one, intensity => 10, period => 10}, Children}}.

%% @doc The pool processes in the order the calling process tries them
%% (its own first, from a hash of its pid), and how long to wait for one;
%% `undefined' when no pool was started.
-spec pick() -> {[atom()], pos_integer()} | undefined.
pick() ->
    case persistent_term:get(?POOL_KEY, undefined) of
        {Names, Timeout} ->
            N = tuple_size(Names),
            First = erlang:phash2(self(), N),
            {[element((First + I) rem N + 1, Names) || I <- lists:seq(0, N - 1)], Timeout};
        undefined ->
            undefined
    end.

%% @doc The connection options, from `storage.pgsql'.
-spec options() -> throng_pgsql_conn:opts().
options() ->
    Get = fun(Key) -> throng_config:get([storage, pgsql, Key]) end,
    #{host => Get(host), port => Get(port), database => Get(database), user => Get(user),
      password => Get(password), connect_timeout => Get(connect_timeout),
      query_timeout => Get(query_timeout), idle_gc_interval => Get(idle_gc_interval)}.
