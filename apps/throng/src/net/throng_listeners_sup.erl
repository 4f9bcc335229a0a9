%% @doc Supervisor of the configured listeners (one throng_listener_sup each).
-module(throng_listeners_sup).
-behaviour(supervisor).
-export([start_link/0, init/1, listeners/0]).

-spec start_link() -> {ok, pid()} | {error, term()}.
start_link() ->
    supervisor:start_link({local, ?MODULE}, ?MODULE, []).

-spec init([]) -> {ok, {supervisor:sup_flags(), [supervisor:child_spec()]}}.
init([]) ->
    Listeners = lists:zip(lists:seq(1, length(throng_config:get([listen]))),
                          throng_config:get([listen])),
    Children = [#{id => {listener, I},
                  start => {throng_listener_sup, start_link, [I, Opts]},
                  type => supervisor, shutdown => infinity}
                || {I, Opts} <- Listeners],
    {ok, {#{strategy => one_for_one, intensity => 10, period => 10}, Children}}.

%% @doc The listener references, in configuration order.
-spec listeners() -> [throng_listener:ref()].
listeners() ->
    [{listener, I} || I <- lists:seq(1, length(throng_config:get([listen])))].
