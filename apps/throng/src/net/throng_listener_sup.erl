%% @doc Supervisor of one listener: the process that owns the listen socket,
%% then one connection supervisor and one acceptor per configured acceptor
%% (`rest_for_one': if the socket owner dies, everything after it restarts).
%% A listener is a transport (a {@link throng_transport} module) and a
%% protocol (the module whose `start_link(Ref)' starts a connection process
%% that waits for `{throng_transport, Socket}'), as in ranch.
%%
%% ```
%% throng_listener_sup (rest_for_one)
%% ├── throng_listener            owns the listen socket, the connection counter
%% ├── throng_conns_sup 1..N      one per acceptor; parent of the connections
%% └── throng_acceptor 1..N       accept loops
%% '''
-module(throng_listener_sup).
-behaviour(supervisor).

-export([start_link/4, init/1]).
%% Called by supervisors (child specs) and proc_lib.
-ignore_xref([{start_link, 4}]).

-spec start_link(pos_integer(), map(), module(), module()) -> {ok, pid()} | {error, term()}.
start_link(Index, Opts, Transport, Protocol) ->
    supervisor:start_link(?MODULE, {Index, Opts, Transport, Protocol}).

-spec init({pos_integer(), map(), module(), module()}) ->
    {ok, {supervisor:sup_flags(), [supervisor:child_spec()]}}.
init({Index, #{acceptors := N} = Opts, Transport, Protocol}) ->
    Ref = {listener, Index},
    Listener = #{id => listener,
                 start => {throng_listener, start_link, [Ref, Opts, Transport, Protocol]}},
    Sups = [#{id => {conns_sup, I},
              start => {throng_conns_sup, start_link, [Ref, I]},
              type => supervisor, shutdown => infinity}
            || I <- lists:seq(1, N)],
    Acceptors = [#{id => {acceptor, I},
                   start => {throng_acceptor, start_link, [Ref, I]},
                   shutdown => brutal_kill}
                 || I <- lists:seq(1, N)],
    {ok, {#{strategy => rest_for_one, intensity => 10, period => 10},
          [Listener | Sups ++ Acceptors]}}.
