%% @doc Supervisor of the configured listeners (one throng_listener_sup each).
-module(throng_listeners_sup).
-behaviour(supervisor).
-export([start_link/2, init/1, listeners/0]).
%% Called by supervisors (child specs) and proc_lib.
-ignore_xref([{start_link, 2}]).

%% @doc Starts the configured listeners, each with a transport module and a
%% protocol module (see throng_listener_sup): Transport, or TLS for a
%% listener with `direct_tls'.
-spec start_link(module(), module()) -> {ok, pid()} | {error, term()}.
start_link(Transport, Protocol) ->
    supervisor:start_link({local, ?MODULE}, ?MODULE, {Transport, Protocol}).

-spec init({module(), module()}) -> {ok, {supervisor:sup_flags(), [supervisor:child_spec()]}}.
init({Transport, Protocol}) ->
    Listeners = lists:zip(lists:seq(1, length(throng_config:get([listen]))),
                          throng_config:get([listen])),
    Children = [#{id => {listener, I},
                  start => {throng_listener_sup, start_link,
                            [I, Opts, transport(Opts, Transport), Protocol]},
                  type => supervisor, shutdown => infinity}
                || {I, Opts} <- Listeners],
    {ok, {#{strategy => one_for_one, intensity => 10, period => 10}, Children}}.

transport(#{direct_tls := true}, _Default) -> throng_transport_tls;
transport(_Opts, Default) -> Default.

%% @doc The listener references, in configuration order.
-spec listeners() -> [throng_listener:ref()].
listeners() ->
    [{listener, I} || I <- lists:seq(1, length(throng_config:get([listen])))].
