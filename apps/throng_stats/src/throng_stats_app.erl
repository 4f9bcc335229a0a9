%% @doc The throng_stats application: started after throng (whose
%% configuration it reads: the `stats' section). While it runs, the admin
%% command `bin/throng stats' is registered with throng_ctl.
-module(throng_stats_app).
-behaviour(application).

-export([start/2, stop/1]).

-spec start(application:start_type(), term()) -> {ok, pid()} | {error, term()}.
start(_Type, _Args) ->
    case throng_stats_sup:start_link() of
        {ok, Pid} ->
            ok = throng_ctl:register_command(throng_stats:ctl_command()),
            {ok, Pid};
        Error ->
            Error
    end.

-spec stop(term()) -> ok.
stop(_State) ->
    #{name := Name} = throng_stats:ctl_command(),
    throng_ctl:unregister_command(Name).
