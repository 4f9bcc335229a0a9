%% @doc The supervision tree of the Throng server.
%%
%% ```
%% throng_sup (rest_for_one)
%% ├── throng_table_owner       owns the shared ETS tables (sessions, long queues,
%% │                            auth failures, registrations, PLAIN cache, key
%% │                            filters); does nothing else
%% ├── throng_services_sup (one_for_one)
%% │   ├── (storage backend)    throng_mnesia_sync, the group commit of Mnesia's log, or
%% │   │                        the PostgreSQL pool (throng_pgsql_sup, throng_pgsql_orphans)
%% │   ├── throng_janitor       ages out auth-failure and registration entries
%% │   ├── throng_dir_1..8      writers of this node's part of the session directory
%% │   ├── throng_handoff_tracker, _worker x N  stanzas handed to this node as
%% │   │                        their users' home, and copies of those handed off
%% │   ├── throng_cluster       cluster membership: seeds, members up and down
%% │   └── throng_presence_retry unavailable presence kept while the store cannot
%% │                            read the roster, sent when it answers again (handed
%% │                            to a member when this node stops; a copy at one
%% │                            member, sent from there if this node dies)
%% └── throng_listeners_sup     one throng_listener_sup per configured listener
%% '''
%% rest_for_one: everything after the table owner uses its tables, so were
%% the owner ever to die, the services and the listeners (with every
%% connection) restart after it on fresh tables. A crash of a service (the
%% janitor, the group commit) restarts only that service; the connections
%% go on. The per-boot secret is a persistent_term made before the tree
%% starts ({@link throng_app}), so no restart changes it.
%%
%% Storage (Mnesia) runs as its own application, started before this tree
%% and stopped after it; the PostgreSQL backend's pool is a child here.
-module(throng_sup).
-behaviour(supervisor).
-export([start_link/0, start_services/0, init/1]).
%% Called by supervisors (child specs) and proc_lib.
-ignore_xref([{start_services, 0}]).

-spec start_link() -> {ok, pid()} | {error, term()}.
start_link() ->
    supervisor:start_link({local, ?MODULE}, ?MODULE, top).

%% @doc Starts throng_services_sup, the middle level of the tree.
-spec start_services() -> {ok, pid()} | {error, term()}.
start_services() ->
    supervisor:start_link({local, throng_services_sup}, ?MODULE, services).

-spec init(top | services) -> {ok, {supervisor:sup_flags(), [supervisor:child_spec()]}}.
init(top) ->
    Children =
        [#{id => throng_table_owner,
           start => {throng_table_owner, start_link,
                     [[{throng_sm, init, []}, {throng_caps, init, []}, {throng_dir, init_table, []},
                       {throng_handoff, init_table, []}, {throng_node_addr, init_table, []},
                       {throng_kv_filter, init, []},
                       {throng_metrics, init_hot_queues, []},
                       {throng_tables, create, []}]]}},
         #{id => throng_services_sup, start => {?MODULE, start_services, []},
           type => supervisor, shutdown => infinity},
         %% Client connections: plain TCP (STARTTLS upgrades a connection
         %% inside the protocol), XMPP client-to-server streams.
         #{id => throng_listeners_sup,
           start => {throng_listeners_sup, start_link, [throng_transport_tcp, throng_c2s]},
           type => supervisor, shutdown => infinity}],
    {ok, {#{strategy => rest_for_one, intensity => 10, period => 10}, Children}};
init(services) ->
    Children =
        throng_storage:child_specs() ++
        [#{id => throng_janitor, start => {throng_janitor, start_link, []}}] ++
        %% The cluster: this node's part of the session directory, then the
        %% membership process that fills the member list.
        throng_dir:child_specs(#{rival => fun throng_sm:local_rival/2,
                                 joined => fun throng_sm:joined/2,
                                 replace => fun throng_session:replace/2}) ++
        %% Stanzas handed to this node as their users' home, and the copies
        %% of those it handed to others, kept until confirmed.
        throng_handoff:child_specs() ++
        [#{id => throng_cluster, start => {throng_cluster, start_link, []}},
         %% After the membership process, so that it stops before it: what
         %% it keeps goes to a member while the members are still known.
         #{id => throng_presence_retry, start => {throng_presence_retry, start_link, []},
           shutdown => 30000}],
    {ok, {#{strategy => one_for_one, intensity => 10, period => 10}, Children}}.
