%% @doc Owner of the server's shared ETS tables: the session table
%% ({@link throng_sm}), the long-queue table ({@link throng_metrics}) and
%% the tables of {@link throng_tables}. It creates them and then does
%% nothing at all (every message is ignored), so it has no reason to crash:
%% the tables live as long as the server. Were it killed anyway, the
%% supervisor (rest_for_one) restarts it with empty tables and then restarts
%% everything that relied on them, connections included.
-module(throng_table_owner).
-behaviour(gen_server).

-export([start_link/0]).
-export([init/1, handle_call/3, handle_cast/2, handle_info/2]).

-spec start_link() -> {ok, pid()} | {error, term()}.
start_link() ->
    gen_server:start_link({local, ?MODULE}, ?MODULE, [], [{hibernate_after, 1000}]).

-spec init([]) -> {ok, no_state}.
init([]) ->
    ok = throng_sm:init(),
    ok = throng_metrics:init_hot_queues(),
    ok = throng_tables:create(),
    {ok, no_state}.

-spec handle_call(term(), gen_server:from(), no_state) -> {reply, {error, unknown_call}, no_state}.
handle_call(_Req, _From, St) -> {reply, {error, unknown_call}, St}.

-spec handle_cast(term(), no_state) -> {noreply, no_state}.
handle_cast(_Msg, St) -> {noreply, St}.

-spec handle_info(term(), no_state) -> {noreply, no_state}.
handle_info(_Msg, St) -> {noreply, St}.
