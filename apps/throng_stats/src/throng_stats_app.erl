%% @doc The throng_stats application: started after throng (whose
%% configuration it reads: the `stats' section).
-module(throng_stats_app).
-behaviour(application).

-export([start/2, stop/1]).

-spec start(application:start_type(), term()) -> {ok, pid()} | {error, term()}.
start(_Type, _Args) ->
    throng_stats_sup:start_link().

-spec stop(term()) -> ok.
stop(_State) ->
    ok.
