%% @doc Top supervisor of the Throng server.
%%
%% ```
%% throng_sup (one_for_one)
%% ├── (storage backend)      e.g. throng_mnesia_sync, the group commit of Mnesia's log
%% ├── throng_tables          owner of the shared ETS tables; janitor
%% └── throng_listeners_sup   one throng_listener_sup per configured listener
%% '''
%% Storage (Mnesia) runs as its own application, started before this tree
%% and stopped after it.
-module(throng_sup).
-behaviour(supervisor).
-export([start_link/0, init/1]).

-spec start_link() -> {ok, pid()} | {error, term()}.
start_link() ->
    supervisor:start_link({local, ?MODULE}, ?MODULE, []).

-spec init([]) -> {ok, {supervisor:sup_flags(), [supervisor:child_spec()]}}.
init([]) ->
    Children =
        throng_storage:child_specs() ++
        [#{id => throng_tables, start => {throng_tables, start_link, []}},
         %% Client connections: plain TCP (STARTTLS upgrades a connection
         %% inside the protocol), XMPP client-to-server streams.
         #{id => throng_listeners_sup,
           start => {throng_listeners_sup, start_link, [throng_transport_tcp, throng_c2s]},
           type => supervisor, shutdown => infinity}],
    {ok, {#{strategy => one_for_one, intensity => 10, period => 10}, Children}}.
