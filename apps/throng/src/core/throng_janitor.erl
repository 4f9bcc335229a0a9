%% @doc The janitor: every few seconds it drops the authentication-failure
%% buckets that have emptied and the in-band registrations that have aged
%% out ({@link throng_tables:sweep/0}).
%% It owns nothing; a crash costs at most one sweep.
-module(throng_janitor).
-behaviour(gen_server).

-export([start_link/0]).
-export([init/1, handle_call/3, handle_cast/2, handle_info/2]).
%% Called by supervisors (child specs) and proc_lib.
-ignore_xref([{start_link, 0}]).

-define(SWEEP_MS, 10000).

-spec start_link() -> {ok, pid()} | {error, term()}.
start_link() ->
    gen_server:start_link({local, ?MODULE}, ?MODULE, [], []).

-spec init([]) -> {ok, no_state}.
init([]) ->
    _ = erlang:send_after(?SWEEP_MS, self(), sweep),
    {ok, no_state}.

-spec handle_call(term(), gen_server:from(), no_state) -> {reply, ok, no_state}.
handle_call(_Req, _From, St) -> {reply, ok, St}.

-spec handle_cast(term(), no_state) -> {noreply, no_state}.
handle_cast(_Msg, St) -> {noreply, St}.

-spec handle_info(term(), no_state) -> {noreply, no_state, hibernate}.
handle_info(sweep, St) ->
    ok = throng_tables:sweep(),
    _ = erlang:send_after(?SWEEP_MS, self(), sweep),
    {noreply, St, hibernate};
handle_info(_Msg, St) ->
    {noreply, St, hibernate}.
