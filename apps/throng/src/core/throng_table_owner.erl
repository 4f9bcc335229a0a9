%% @doc Owner of the server's shared ETS tables: the session table
%% ({@link throng_sm}), the long-queue table ({@link throng_metrics}) and
%% the tables of {@link throng_tables}. It calls the functions that create
%% them (given by throng_sup, so this module knows no layer above its own)
%% and then does nothing at all (every message is ignored), so it has no reason to crash:
%% the tables live as long as the server. Were it killed anyway, the
%% supervisor (rest_for_one) restarts it with empty tables and then restarts
%% everything that relied on them, connections included.
-module(throng_table_owner).
-behaviour(gen_server).

-export([start_link/1]).
-export([init/1, handle_call/3, handle_cast/2, handle_info/2]).
%% Called by supervisors (child specs) and proc_lib.
-ignore_xref([{start_link, 1}]).

%% @doc Starts the owner; each {M, F, A} creates tables owned by the caller
%% and returns ok.
-spec start_link([mfa()]) -> {ok, pid()} | {error, term()}.
start_link(Creators) ->
    gen_server:start_link({local, ?MODULE}, ?MODULE, Creators, [{hibernate_after, 1000}]).

-spec init([{module(), atom(), list()}]) -> {ok, no_state}.
init(Creators) ->
    _ = [ok = apply(M, F, A) || {M, F, A} <- Creators],
    {ok, no_state}.

-spec handle_call(term(), gen_server:from(), no_state) -> {reply, {error, unknown_call}, no_state}.
handle_call(_Req, _From, St) -> {reply, {error, unknown_call}, St}.

-spec handle_cast(term(), no_state) -> {noreply, no_state}.
handle_cast(_Msg, St) -> {noreply, St}.

-spec handle_info(term(), no_state) -> {noreply, no_state}.
handle_info(_Msg, St) -> {noreply, St}.
