%% @doc Top supervisor of throng_stats.
%%
%% ```
%% throng_stats_sup (one_for_one; owns the ETS table throng_stats)
%% ├── throng_stats_probe      routing-latency probes
%% ├── throng_stats_collector  the per-second sample
%% └── throng_stats_httpd      /metrics, /stats, /history, the dashboard
%% '''
%% The table holds the latest snapshot, the dashboard's history and the
%% probe's histogram; it belongs to the supervisor so that it outlives a
%% restart of any child. With stats.enabled false nothing runs.
-module(throng_stats_sup).
-behaviour(supervisor).

-export([start_link/0, init/1]).

-spec start_link() -> {ok, pid()} | {error, term()}.
start_link() ->
    supervisor:start_link({local, ?MODULE}, ?MODULE, []).

-spec init([]) -> {ok, {supervisor:sup_flags(), [supervisor:child_spec()]}}.
init([]) ->
    throng_stats = ets:new(throng_stats, [set, public, named_table, {read_concurrency, true}]),
    Children = case throng_config:get([stats, enabled]) of
                   true ->
                       [#{id => probe, start => {throng_stats_probe, start_link, []}},
                        #{id => collector, start => {throng_stats_collector, start_link, []}},
                        #{id => httpd, start => {throng_stats_httpd, start_link, []}}];
                   false ->
                       logger:notice(#{what => stats_disabled}),
                       []
               end,
    {ok, {#{strategy => one_for_one, intensity => 10, period => 10}, Children}}.
