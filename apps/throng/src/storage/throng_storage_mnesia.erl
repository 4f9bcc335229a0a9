%% @doc The embedded storage backend: Mnesia disc_copies tables under
%% DATA_DIR/mnesia. Reads are dirty (a local ETS lookup); writes run in
%% `mnesia:sync_transaction', which returns once the commit is handed to the
%% transaction log, and then wait for {@link throng_mnesia_sync} to fsync the
%% log, so a write that returns survives `kill -9' and a crash of the machine.
%%
%% In a cluster (`cluster.db_nodes'), the listed nodes keep the tables on
%% disk (disc_copies, replicated among them) and every other node keeps no
%% copy: it writes the tables of the listed nodes through Mnesia, and a
%% write returns after those nodes fsynced it. Its reads run on a db node,
%% each in one `erpc' call (at_tables/3): a dirty read, or a whole step that
%% reads several rows (login_read/3, roster_get/2, the archive's queries);
%% the archive's writes are one call too.
%%
%% Failures follow the contract of {@link throng_storage}: a function returns
%% one of its documented results or raises `error({storage_failed, Reason})'
%% with Reason `{aborted, Why}' (nothing changed) or `{sync, Why}' (committed
%% in memory, not known to be on disk).
-module(throng_storage_mnesia).
-behaviour(throng_storage).

-include("throng.hrl").

-export([init/0, child_specs/0, create_account/3, set_credentials/3, get_credentials/2,
         login_read/3, remove_account/2,
         account_exists/2, count_accounts/1, bulk_create/2,
         roster_get/2, roster_get_item/3, roster_update/4,
         offline_store/4, offline_count/2, offline_total/0, offline_bytes/0,
         inflight_put/4, inflight_delete/1, inflight_claim/3, inflight_return/1,
         inflight_recover/1, inflight_nodes/0, inflight_count/0, batch/1, cluster_identity/0, node_up/1,
         kv_get/2, kv_put/3, kv_put_soon/3, kv_delete/2, kv_keys/1, kv_update/3,
         mam_store/3, mam_store_many/1, mam_query/5, mam_count/4, mam_delete_user/2,
         mam_expire/3]).
%% Called remotely (erpc) by the members that do not keep the tables.
-export([archive_rows/2, roster_get_here/2, login_read_here/3, table_query/5, table_count/4]).
-ignore_xref([{archive_rows, 2}, {roster_get_here, 2}, {login_read_here, 3}, {table_query, 5},
              {table_count, 4}]).

-record(throng_account, {us :: {binary(), binary()}, creds :: #scram_creds{}}).
-record(throng_roster, {us :: {binary(), binary()}, item :: #roster_item{}}).
-record(throng_roster_ver, {us :: {binary(), binary()}, version :: non_neg_integer()}).
-record(throng_offline, {us :: {binary(), binary()}, msg :: #offline_msg{}}).
-record(throng_kv, {key :: {atom(), term()}, value :: term()}).
%% A message in flight to a session (XEP-0198): taken from offline storage
%% or routed to a detached session, kept until the client acknowledges it.
%% Keyed by the user first (ordered_set: a user's rows are one range), the
%% node (a node recovers only its own rows) and a number unique on the node.
-record(throng_inflight, {key :: throng_storage:inflight_key(),
                          owner :: pid(),
                          msg :: #offline_msg{}}).

%% A message of a user's archive (XEP-0313). An ordered_set keyed by the
%% user first and the id second: a user's archive is one range of the
%% table, in the archive's order, so that a page is found in O(log n) and
%% read in its own size, from either end.
-record(throng_mam, {key :: {{binary(), binary()}, non_neg_integer()},
                     peer :: {binary(), binary()},
                     packet :: binary()}).

-define(TABLES,
        [{throng_account, set, record_info(fields, throng_account)},
         {throng_roster, bag, record_info(fields, throng_roster)},
         {throng_roster_ver, set, record_info(fields, throng_roster_ver)},
         {throng_offline, bag, record_info(fields, throng_offline)},
         {throng_kv, set, record_info(fields, throng_kv)},
         {throng_inflight, ordered_set, record_info(fields, throng_inflight)},
         {throng_mam, ordered_set, record_info(fields, throng_mam)}]).

-define(LOAD_TIMEOUT_MS, 600000).
-define(BYTES_KEY, {?MODULE, offline_bytes}).
-define(DISC_KEY, {?MODULE, disc_nodes}).
%% This runtime's archive id slot (see "Archive id slots" below).
-define(SLOT_KEY, {?MODULE, mam_slot}).
-define(DC_DUMP_LIMIT, 1).

-spec child_specs() -> [supervisor:child_spec()].
child_specs() ->
    [#{id => throng_mnesia_sync, start => {throng_mnesia_sync, start_link, []}} |
     case archive() of
         {files, Root} -> [throng_archive_sup:child_spec(Root)];
         table -> []
     end].

%%% Start-up

%% @doc Starts Mnesia on DATA_DIR/mnesia, creating the schema and the
%% tables on first use. Every failure is returned as `{error, Text}', Text
%% saying what could not be done and why; Mnesia is left stopped then.
-spec init() -> ok | {error, string()}.
init() ->
    try
        Dir = filename:join(throng_paths:data_dir(), "mnesia"),
        ensure_dir(Dir),
        configure(Dir),
        case role(throng_config:get([cluster, db_nodes])) of
            own -> init_own(Dir);
            {replica, Others} -> init_replica(Dir, Others);
            {remote, DbNodes} -> init_remote(Dir, DbNodes)
        end,
        wait_for_tables(),
        %% The archive slot this runtime claimed before a restart of the
        %% application is claimed again: the storage may be another one,
        %% where that slot is another node's.
        _ = persistent_term:erase(?SLOT_KEY),
        persistent_term:put(?DISC_KEY, disc_nodes()),
        count_offline_bytes(),
        init_archive(throng_config:get([cluster, db_nodes])),
        recover_at_boot()
    catch
        throw:{storage_init, Text} ->
            _ = application:stop(mnesia),
            {error, Text};
        Class:Reason ->
            _ = application:stop(mnesia),
            {error, fmt("unexpected ~p while starting Mnesia: ~0tp", [Class, Reason])}
    end.

%% own: this node keeps its own tables. replica: it keeps disc copies of
%% tables shared with the other db nodes. remote: it keeps none.
role([]) -> own;
role(DbNodes) ->
    case lists:member(node(), DbNodes) of
        true when DbNodes =:= [node()] -> own;
        true -> {replica, lists:usort(DbNodes) -- [node()]};
        false -> {remote, lists:usort(DbNodes)}
    end.

init_own(Dir) ->
    ensure_schema(Dir),
    start_mnesia(Dir),
    check_owner(Dir),
    lists:foreach(fun create_table/1, ?TABLES).

%% A replica that has its schema rejoins by itself (Mnesia knows the other
%% nodes); a new one copies the tables of a running db node, or, when none
%% runs and it is the first of the list, starts the database.
init_replica(Dir, Others) ->
    case has_schema(Dir) of
        true ->
            init_own(Dir);
        false ->
            start_mnesia(Dir),
            case connect(Others) of
                [] when hd(Others) > node() ->
                    _ = application:stop(mnesia),
                    init_own(Dir);
                [] ->
                    fail("no other db node (~ts) is reachable, and this node is not the first "
                         "of cluster.db_nodes: start that one first", [names(Others)]);
                _ ->
                    copy_type(schema),
                    lists:foreach(fun({T, _, _}) -> copy_type(T) end, ?TABLES)
            end
    end.

%% A node without copies: a RAM schema, connected to the db nodes.
init_remote(Dir, DbNodes) ->
    has_schema(Dir) andalso
        fail("~ts holds a database of this node's own, but cluster.db_nodes says this node "
             "keeps no copy (it uses ~ts): move the directory away", [Dir, names(DbNodes)]),
    start_mnesia(Dir),
    case connect(DbNodes) of
        [] -> fail("no db node (~ts) is reachable", [names(DbNodes)]);
        _ -> ok
    end.

connect(Nodes) ->
    case mnesia:change_config(extra_db_nodes, Nodes) of
        {ok, Connected} -> Connected;
        {error, E} -> fail("cannot reach the db nodes ~ts: ~0tp", [names(Nodes), E])
    end.

copy_type(schema) ->
    case mnesia:change_table_copy_type(schema, node(), disc_copies) of
        {atomic, ok} -> ok;
        {aborted, {already_exists, schema, _, disc_copies}} -> ok;
        {aborted, Why} -> fail("cannot keep the schema on disk: ~0tp", [Why])
    end;
copy_type(Table) ->
    case mnesia:add_table_copy(Table, node(), disc_copies) of
        {atomic, ok} -> ok;
        {aborted, {already_exists, Table, _}} -> ok;
        {aborted, Why} -> fail("cannot copy the table ~p: ~0tp", [Table, Why])
    end.

has_schema(Dir) ->
    lists:any(fun(F) -> filelib:is_regular(filename:join(Dir, F)) end,
              ["schema.DAT", "FALLBACK.BUP"]).

names(Nodes) ->
    lists:join(", ", [atom_to_list(N) || N <- Nodes]).

%% The other nodes that keep the tables on disk, and whether this one does.
disc_nodes() ->
    Disc = mnesia:table_info(throng_account, disc_copies),
    {lists:member(node(), Disc), Disc -- [node()]}.

%% @doc A member came (back): if it keeps the tables and Mnesia here lost
%% it (a netsplit), connect again, so that the tables it keeps are
%% reachable without a restart.
-spec node_up(node()) -> ok.
node_up(Node) ->
    {_, Disc} = persistent_term:get(?DISC_KEY, {true, []}),
    case lists:member(Node, Disc) andalso
        not lists:member(Node, mnesia:system_info(running_db_nodes)) of
        false -> ok;
        true ->
            Result = mnesia:change_config(extra_db_nodes, [Node]),
            logger:notice(#{what => db_node_reconnected, node => Node, result => Result}),
            ok
    end.

%% @doc The nodes that keep the data: equal on every node of one cluster.
-spec cluster_identity() -> {mnesia, [node()]}.
cluster_identity() ->
    {mnesia, lists:usort(mnesia:table_info(throng_account, disc_copies))}.

ensure_dir(Dir) ->
    case filelib:ensure_dir(filename:join(Dir, "x")) of
        ok -> ok;
        {error, E} ->
            Why = case in_the_way(Dir) of
                      none -> file:format_error(E);
                      File -> fmt("~ts is a file, not a directory", [File])
                  end,
            fail("cannot create the database directory ~ts: ~ts", [Dir, Why])
    end.

%% The path or ancestor that exists as something other than a directory.
in_the_way(Path) ->
    case filelib:is_file(Path) andalso not filelib:is_dir(Path) of
        true -> Path;
        false ->
            case filename:dirname(Path) of
                Path -> none;
                Parent -> in_the_way(Parent)
            end
    end.

%% Mnesia is started here, not as a dependency of the application, because
%% its directory comes from Throng's configuration.
configure(Dir) ->
    _ = application:stop(mnesia),
    case application:load(mnesia) of
        ok -> ok;
        {error, {already_loaded, mnesia}} -> ok;
        {error, E} -> fail("cannot load the Mnesia application: ~0tp", [E])
    end,
    ok = application:set_env(mnesia, dir, Dir),
    %% Dump the transaction log less often: bulk registration writes
    %% millions of roster rows.
    ok = application:set_env(mnesia, dump_log_write_threshold, 50000),
    %% A dump of the log appends a disc_copies table's changes to its .DCL
    %% file, and rewrites the whole table (.DCD) instead once the .DCL
    %% holds at least 1/dc_dump_limit of the .DCD's size (mnesia_dumper).
    %% A growing table is so rewritten about dc_dump_limit times per row
    %% it holds: with 40, a message archive of millions of rows would be
    %% rewritten whole at nearly every dump. 1: a table is rewritten when
    %% its .DCL is as large as its .DCD, so a start reads at most about
    %% twice the table. (Argued from Mnesia's rule; a 40 s run of
    %% bench/routing.sh 1000 reached no full rewrite with either value.)
    ok = application:set_env(mnesia, dc_dump_limit, ?DC_DUMP_LIMIT).

%% A new schema is first written as FALLBACK.BUP and becomes schema.DAT
%% when Mnesia starts: either means the schema exists.
ensure_schema(Dir) ->
    case has_schema(Dir) of
        true -> ok;
        false ->
            case mnesia:create_schema([node()]) of
                ok -> ok;
                {error, E} -> fail("cannot create the Mnesia schema in ~ts: ~0tp", [Dir, E])
            end
    end.

start_mnesia(Dir) ->
    case application:ensure_all_started(mnesia) of
        {ok, _} -> ok;
        {error, E} -> fail("Mnesia did not start on ~ts: ~0tp", [Dir, E])
    end.

%% A database created under another node name starts, but holds no disc
%% copies for this node: writes would not be kept.
check_owner(Dir) ->
    Owners = mnesia:table_info(schema, disc_copies),
    lists:member(node(), Owners) orelse
        fail("the database in ~ts belongs to node ~ts, but this node is ~ts: start the node "
             "under that name (THRONG_NODE) or move the directory away",
             [Dir, lists:join(", ", [atom_to_list(N) || N <- Owners]), node()]).

create_table({Name, Type, Fields}) ->
    case mnesia:create_table(Name, [{disc_copies, [node()]}, {type, Type},
                                    {attributes, Fields}]) of
        {atomic, ok} -> ok;
        {aborted, {already_exists, Name}} -> ok;
        {aborted, Why} -> fail("cannot create the table ~p: ~0tp", [Name, Why])
    end.

wait_for_tables() ->
    Tables = [T || {T, _, _} <- ?TABLES],
    case mnesia:wait_for_tables(Tables, ?LOAD_TIMEOUT_MS) of
        ok -> ok;
        {timeout, Missing} ->
            fail("tables ~p not loaded after ~b s", [Missing, ?LOAD_TIMEOUT_MS div 1000]);
        {error, E} -> fail("cannot load the tables: ~0tp", [E])
    end.

-spec fail(io:format(), [term()]) -> no_return().
fail(Format, Args) ->
    throw({storage_init, fmt(Format, Args)}).

fmt(Format, Args) ->
    lists:flatten(io_lib:format(Format, Args)).

%%% Transactions and reads

%% A write: committed, then fsynced with the writers of the same moment.
tx(F) ->
    tx(F, fun(_) -> ok end).

%% Undo runs on the result when the commit could not be made durable, before
%% the failure is raised.
tx(F, Undo) ->
    tx(F, Undo, fun sync/0).

%% The commit is fsynced on every running node that keeps the tables on
%% disk: this one through the group commit (or directly, at start-up
%% before it runs), the others by asking theirs.
sync() ->
    case persistent_term:get(?DISC_KEY, {true, []}) of
        {true, []} -> throng_mnesia_sync:sync();     %% alone: no remote copy to ask
        {Here, Others} -> sync(Here, Others)
    end.

%% The same, not waited for (throng_mnesia_sync:sync_soon/1).
sync_soon() ->
    {Here, Others} = persistent_term:get(?DISC_KEY, {true, []}),
    throng_mnesia_sync:sync_soon([node() || Here] ++ running(Others)).

%% The nodes of Nodes whose Mnesia runs (the others cannot be asked).
running(Nodes) ->
    Running = mnesia:system_info(running_db_nodes),
    [N || N <- Nodes, lists:member(N, Running)].

sync(Here, Others0) ->
    Others = running(Others0),
    Mine = case Here of
               true -> throng_mnesia_sync:sync();
               false -> ok
           end,
    Theirs = [case R of
                  {ok, Result} -> Result;
                  {Class, Why} -> {error, {N, Class, Why}}
              end || {N, R} <- lists:zip(Others, erpc:multicall(Others, throng_mnesia_sync, sync,
                                                                [], 10000))],
    case [E || E <- [Mine | Theirs], E =/= ok] of
        [] -> ok;
        [{error, _} = E | _] -> E
    end.

%% Sync fsyncs the log: throng_mnesia_sync, which groups the writers of the
%% same moment, or (at start-up, before it runs) Mnesia directly. Inside
%% batch/1 the fsync waits for the end of the batch.
tx(F, Undo, Sync) ->
    case mnesia:sync_transaction(F) of
        {atomic, Result} ->
            case deferred() orelse Sync() of
                true -> Result;
                ok -> Result;
                {error, Why} ->
                    Undo(Result),
                    failed({sync, Why})
            end;
        {aborted, Why} ->
            failed({aborted, Why})
    end.

%% Inside batch/1: clean until a write in it leaves its fsync to the batch
%% (then wrote).
-define(BATCH, {?MODULE, batch}).

%% Called by a write once committed (every write of this module: a
%% transaction, the archive's dirty write, the dirty ones not fsynced by
%% themselves): true when it is in a batch, whose end will fsync it (and
%% now knows it must).
deferred() ->
    case get(?BATCH) of
        undefined -> false;
        _ -> put(?BATCH, wrote), true
    end.

%% @doc Runs F, whose writes are made durable together by one fsync at its
%% end (a session that ends re-routes its whole queue this way). A batch in
%% which nothing wrote (the messages all went to other sessions) fsyncs
%% nothing.
-spec batch(fun(() -> Result)) -> Result.
batch(F) ->
    case get(?BATCH) of
        undefined ->
            put(?BATCH, clean),
            try F()
            after
                case erase(?BATCH) =:= wrote andalso sync() of
                    false -> ok;
                    ok -> ok;
                    {error, Why} -> failed({sync, Why})
                end
            end;
        _ ->
            F()
    end.

%% A dirty read or select, made on a db node by a node that keeps no copy:
%% one message each way (Mnesia's own remote read sends three: a monitor,
%% the request and a demonitor).
dirty_read(Tab, Key) ->
    dirty(dirty_read, [Tab, Key]).

dirty_select(Tab, MatchSpec) ->
    dirty(dirty_select, [Tab, MatchSpec]).

dirty(F, Args) ->
    try at_tables(mnesia, F, Args)
    catch exit:{aborted, Why} -> failed({aborted, Why})
    end.

%% M:F(Args) where the tables are: here when this node keeps them (or no
%% db node runs), else in one call to a db node.
at_tables(M, F, Args) ->
    Here = fun() -> apply(M, F, Args) end,
    case db_node() of
        here -> Here();
        Node -> at_db_node(Node, M, F, Args, Here)
    end.

-spec failed(throng_storage:failure()) -> no_return().
failed(Reason) ->
    error({storage_failed, Reason}).

%%% Accounts

-spec create_account(binary(), binary(), #scram_creds{}) -> ok | {error, exists}.
create_account(U, S, Creds) ->
    tx(fun() ->
               case mnesia:read(throng_account, {U, S}, write) of
                   [] -> mnesia:write(#throng_account{us = {U, S}, creds = Creds});
                   [_] -> {error, exists}
               end
       end).

-spec set_credentials(binary(), binary(), #scram_creds{}) -> ok | {error, not_found}.
set_credentials(U, S, Creds) ->
    tx(fun() ->
               case mnesia:read(throng_account, {U, S}, write) of
                   [] -> {error, not_found};
                   [_] -> mnesia:write(#throng_account{us = {U, S}, creds = Creds})
               end
       end).

-spec get_credentials(binary(), binary()) -> {ok, #scram_creds{}} | not_found.
get_credentials(U, S) ->
    case dirty_read(throng_account, {U, S}) of
        [#throng_account{creds = C}] -> {ok, C};
        [] -> not_found
    end.

%% The account and the keys are rows of two tables: read where the
%% tables are, in one round trip from a node that keeps no copy.
-spec login_read(binary(), binary(), [{atom(), term()}]) ->
    {ok, #scram_creds{}, [{ok, term()} | not_found]} | not_found.
login_read(U, S, Keys) ->
    at_tables(?MODULE, login_read_here, [U, S, Keys]).

%% @doc login_read/3 made with the reads of this node (on a db node: its
%% own copies).
-spec login_read_here(binary(), binary(), [{atom(), term()}]) ->
    {ok, #scram_creds{}, [{ok, term()} | not_found]} | not_found.
login_read_here(U, S, Keys) ->
    case get_credentials(U, S) of
        {ok, Creds} -> {ok, Creds, [kv_get(B, K) || {B, K} <- Keys]};
        not_found -> not_found
    end.

-spec remove_account(binary(), binary()) -> ok | {error, not_found}.
remove_account(U, S) ->
    US = {U, S},
    tx_counted(fun() ->
                       case mnesia:read(throng_account, US, write) of
                           [] -> {{error, not_found}, 0};
                           [_] ->
                               Bytes = rows_bytes(mnesia:read(throng_offline, US, write)),
                               [mnesia:delete({T, US})
                                || T <- [throng_account, throng_roster, throng_roster_ver,
                                         throng_offline]],
                               [mnesia:delete({throng_inflight, K})
                                || K <- mnesia:select(throng_inflight, user_keys(US), write)],
                               {ok, -Bytes}
                       end
               end).

-spec account_exists(binary(), binary()) -> boolean().
account_exists(U, S) ->
    dirty_read(throng_account, {U, S}) =/= [].

-spec count_accounts(binary()) -> non_neg_integer().
count_accounts(S) ->
    length(list_accounts(S)).

-spec list_accounts(binary()) -> [binary()].
list_accounts(S) ->
    dirty_select(throng_account, [{{throng_account, {'$1', S}, '_'}, [], ['$1']}]).

%% Batches keep each transaction (and its log record) a reasonable size.
-define(BULK_BATCH, 500).

-spec bulk_create(binary(), [throng_storage:bulk_user()]) -> ok.
bulk_create(_S, []) ->
    ok;
bulk_create(S, Users) ->
    {Batch, Rest} = split(?BULK_BATCH, Users),
    tx(fun() ->
               lists:foreach(
                 fun({U, Creds, Items}) ->
                         US = {U, S},
                         mnesia:write(#throng_account{us = US, creds = Creds}),
                         mnesia:delete({throng_roster, US}),
                         [mnesia:write(#throng_roster{us = US, item = I}) || I <- Items],
                         mnesia:write(#throng_roster_ver{us = US, version = 1})
                 end, Batch)
       end),
    bulk_create(S, Rest).

split(N, L) when length(L) =< N -> {L, []};
split(N, L) -> lists:split(N, L).

%%% Rosters

%% The roster and its version are two rows of two tables: read where the
%% tables are, in one round trip from a node that keeps no copy (two
%% dirty reads would be two).
-spec roster_get(binary(), binary()) -> {non_neg_integer(), [#roster_item{}]}.
roster_get(U, S) ->
    at_tables(?MODULE, roster_get_here, [U, S]).

%% @doc roster_get/2 made with the reads of this node (on a db node: its
%% own copies).
-spec roster_get_here(binary(), binary()) -> {non_neg_integer(), [#roster_item{}]}.
roster_get_here(U, S) ->
    Items = [I || #throng_roster{item = I} <- dirty_read(throng_roster, {U, S})],
    {roster_version(U, S), Items}.

-spec roster_get_item(binary(), binary(), throng_storage:contact()) -> #roster_item{} | undefined.
roster_get_item(U, S, Contact) ->
    find(Contact, dirty_read(throng_roster, {U, S})).

find(Contact, Rows) ->
    case [I || #throng_roster{item = #roster_item{jid = J} = I} <- Rows, J =:= Contact] of
        [I | _] -> I;
        [] -> undefined
    end.

-spec roster_update(binary(), binary(), throng_storage:contact(), throng_storage:roster_fun()) ->
    {ok, #roster_item{} | undefined, #roster_item{} | undefined, non_neg_integer()}.
roster_update(U, S, Contact, Fun) ->
    US = {U, S},
    tx(fun() ->
               Old = find(Contact, mnesia:read(throng_roster, US, write)),
               Ver = case mnesia:read(throng_roster_ver, US, write) of
                         [#throng_roster_ver{version = V}] -> V;
                         [] -> 0
                     end,
               case Fun(Old) of
                   keep ->
                       {ok, Old, Old, Ver};
                   {set, Old} ->
                       {ok, Old, Old, Ver};
                   {set, #roster_item{jid = Contact} = New} ->
                       delete_old(US, Old),
                       mnesia:write(#throng_roster{us = US, item = New}),
                       bump(US, Ver),
                       {ok, Old, New, Ver + 1};
                   delete when Old =:= undefined ->
                       {ok, undefined, undefined, Ver};
                   delete ->
                       delete_old(US, Old),
                       bump(US, Ver),
                       {ok, Old, undefined, Ver + 1}
               end
       end).

delete_old(_US, undefined) -> ok;
delete_old(US, Old) -> mnesia:delete_object(#throng_roster{us = US, item = Old}).

bump(US, Ver) ->
    mnesia:write(#throng_roster_ver{us = US, version = Ver + 1}).

-spec roster_version(binary(), binary()) -> non_neg_integer().
roster_version(U, S) ->
    case dirty_read(throng_roster_ver, {U, S}) of
        [#throng_roster_ver{version = V}] -> V;
        [] -> 0
    end.

%%% Offline messages

%% A write that changes how many bytes offline storage holds: F returns
%% {Result, Delta}. The count follows the commit, also when the sync after
%% it fails (the change is then in memory, as the failure says).
tx_counted(F) ->
    tx_counted(F, fun sync/0).

%% A claim: on a failed sync the rows go back to offline storage (put_back)
%% and the byte count is as before.
tx_claim(F) ->
    {Rows, Delta} = tx(F, fun put_back/1),
    add_bytes(Delta),
    Rows.

tx_counted(F, Sync) ->
    {Result, Delta} = tx(F, fun({_, D}) -> add_bytes(D) end, Sync),
    add_bytes(Delta),
    Result.

-spec offline_store(binary(), binary(), #offline_msg{}, throng_storage:offline_limits()) ->
    ok | {error, full}.
offline_store(U, S, Msg, Limits) ->
    US = {U, S},
    Size = msg_bytes(Msg),
    tx_counted(fun() ->
                       case within(Limits, Size, mnesia:read(throng_offline, US, write)) of
                           false -> {{error, full}, 0};
                           true -> {mnesia:write(#throng_offline{us = US, msg = Msg}), Size}
                       end
               end).

within(unlimited, _Size, _Rows) ->
    true;
within({MaxMessages, MaxBytes}, Size, Rows) ->
    length(Rows) < MaxMessages andalso rows_bytes(Rows) + Size =< MaxBytes.

sorted(Msgs) ->
    lists:keysort(#offline_msg.timestamp, Msgs).

%% A claim that cannot be made durable is undone (without waiting for the
%% disk) before the failure is raised: the messages stay stored offline for
%% the next try.
put_back({Rows, _Delta}) ->
    Undo = fun() ->
                   [begin
                        mnesia:delete({throng_inflight, K}),
                        mnesia:write(#throng_offline{us = US, msg = M})
                    end || #throng_inflight{key = {US, _, _} = K, msg = M} <- Rows],
                   ok
           end,
    case mnesia:sync_transaction(Undo) of
        {atomic, ok} -> ok;
        {aborted, Why} ->
            logger:error(#{what => offline_put_back_failed, reason => Why,
                           messages => length(Rows)})
    end.

-spec offline_count(binary(), binary()) -> non_neg_integer().
offline_count(U, S) ->
    length(dirty_read(throng_offline, {U, S})).

%% @doc The size of the offline table: one row per message (a bag), read in
%% constant time.
-spec offline_total() -> non_neg_integer().
offline_total() ->
    mnesia:table_info(throng_offline, size).

%% @doc The bytes of every stored message together: a counter kept with
%% every write (counted from the table at start-up).
-spec offline_bytes() -> non_neg_integer().
offline_bytes() ->
    atomics:get(persistent_term:get(?BYTES_KEY), 1).

count_offline_bytes() ->
    Ref = atomics:new(1, [{signed, true}]),
    %% Match specs spell the records as tuples ('$1' is not of the fields' types).
    Sizes = mnesia:dirty_select(throng_offline,
                                [{{throng_offline, '_', {offline_msg, '_', '_', '$1'}},
                                  [], [{byte_size, '$1'}]}]),
    atomics:put(Ref, 1, lists:sum(Sizes)),
    persistent_term:put(?BYTES_KEY, Ref).

add_bytes(0) -> ok;
add_bytes(N) -> atomics:add(persistent_term:get(?BYTES_KEY), 1, N).

msg_bytes(#offline_msg{packet = P}) -> byte_size(P).

rows_bytes(Rows) ->
    lists:sum([msg_bytes(M) || #throng_offline{msg = M} <- Rows]).

%%% Messages in flight to sessions (XEP-0198)
%%
%% A row lives from the moment a message is taken from offline storage for
%% a session, or routed to a detached session, until the client
%% acknowledges it (inflight_delete) or it goes back to offline storage
%% (inflight_return, and for every row at start-up: no session outlives its
%% node). Deletes are not waited on: a delete lost in a crash only makes a
%% message delivered twice.

user_keys(US) ->
    [{{throng_inflight, {US, '_', '_'}, '_', '_'}, [], [{element, #throng_inflight.key, '$_'}]}].

new_key(US) ->
    {US, node(), erlang:unique_integer([positive])}.

-spec inflight_put(binary(), binary(), pid(), [#offline_msg{}]) -> [throng_storage:inflight_key()].
inflight_put(U, S, Owner, Msgs) ->
    Rows = [#throng_inflight{key = new_key({U, S}), owner = Owner, msg = M} || M <- Msgs],
    tx(fun() -> lists:foreach(fun mnesia:write/1, Rows) end),
    [K || #throng_inflight{key = K} <- Rows].

-spec inflight_delete([throng_storage:inflight_key()]) -> ok.
inflight_delete(Keys) ->
    try lists:foreach(fun(K) -> mnesia:dirty_delete(throng_inflight, K) end, Keys)
    catch exit:{aborted, Why} -> failed({aborted, Why})
    end,
    %% Not fsynced by itself; inside batch/1, with the batch.
    _ = Keys =/= [] andalso deferred(),
    ok.

%% Offline messages become in flight in one transaction, oldest first.
-spec inflight_claim(binary(), binary(), pid()) -> [{throng_storage:inflight_key(), #offline_msg{}}].
inflight_claim(U, S, Owner) ->
    US = {U, S},
    case dirty_read(throng_offline, US) of
        [] -> [];
        _ ->
            Claimed = tx_claim(
                        fun() ->
                                Msgs = sorted([M || #throng_offline{msg = M}
                                                        <- mnesia:read(throng_offline, US, write)]),
                                mnesia:delete({throng_offline, US}),
                                Rows = [#throng_inflight{key = new_key(US), owner = Owner, msg = M}
                                        || M <- Msgs],
                                lists:foreach(fun mnesia:write/1, Rows),
                                {Rows, -lists:sum([msg_bytes(M) || M <- Msgs])}
                        end),
            [{K, M} || #throng_inflight{key = K, msg = M} <- Claimed]
    end.

%% In flight back to offline storage, in one transaction, outside the
%% user's limits (these messages had been accepted).
-spec inflight_return([throng_storage:inflight_key()]) -> ok.
inflight_return(Keys) ->
    return_keys(Keys, fun sync/0).

return_keys(Keys, Sync) ->
    tx_counted(fun() ->
                       Rows = lists:append([mnesia:read(throng_inflight, K, write) || K <- Keys]),
                       {ok, lists:sum([to_offline(R) || R <- Rows])}
               end, Sync).

to_offline(#throng_inflight{key = {US, _, _} = K, msg = M}) ->
    mnesia:delete({throng_inflight, K}),
    mnesia:write(#throng_offline{us = US, msg = M}),
    msg_bytes(M).

%% This node's rows go back to offline storage: every one (at start-up), or
%% those whose session process is gone (orphans). Returns how many.
-spec inflight_recover(all | orphans | {node, node()}) -> non_neg_integer().
inflight_recover({node, Node}) ->
    recover(all, Node, fun sync/0);
inflight_recover(Which) ->
    recover(Which, fun sync/0).

recover(Which, Sync) ->
    recover(Which, node(), Sync).

recover(Which, Node, Sync) ->
    Keys = mnesia:dirty_select(throng_inflight,
                               [{{throng_inflight, '$1', '$2', '_'},
                                 [{'=:=', {element, 2, '$1'}, {const, Node}}], [{{'$1', '$2'}}]}]),
    Lost = [K || {K, Owner} <- Keys, Which =:= all orelse not is_process_alive(Owner)],
    lists:foreach(fun(Batch) -> return_keys(Batch, Sync) end, batches(Lost)),
    length(Lost).

batches([]) -> [];
batches(L) ->
    {B, Rest} = split(?BULK_BATCH, L),
    [B | batches(Rest)].

-spec inflight_nodes() -> [node()].
inflight_nodes() ->
    lists:usort(dirty_select(throng_inflight,
                             [{{throng_inflight, {'_', '$1', '_'}, '_', '_'}, [], ['$1']}])).

-spec inflight_count() -> non_neg_integer().
inflight_count() ->
    mnesia:table_info(throng_inflight, size).

recover_at_boot() ->
    case recover(all, fun sync/0) of
        0 -> ok;
        N -> logger:notice(#{what => inflight_recovered, messages => N,
                             text => "unacknowledged messages of the last run are offline again"})
    end.

%%% Key-value store of extension modules

-spec kv_get(atom(), term()) -> {ok, term()} | not_found.
kv_get(Bucket, Key) when is_atom(Bucket) ->
    case dirty_read(throng_kv, {Bucket, Key}) of
        [#throng_kv{value = V}] -> {ok, V};
        [] -> not_found
    end.

-spec kv_put(atom(), term(), term()) -> ok.
kv_put(Bucket, Key, Value) when is_atom(Bucket) ->
    tx(fun() -> mnesia:write(#throng_kv{key = {Bucket, Key}, value = Value}) end).

%% A dirty write sent to the table's nodes without waiting for them (nor
%% for the log's fsync); the writer's own later reads see it (they go to
%% the same nodes after it).
-spec kv_put_soon(atom(), term(), term()) -> ok.
kv_put_soon(Bucket, Key, Value) when is_atom(Bucket) ->
    activity(fun() -> mnesia:write(#throng_kv{key = {Bucket, Key}, value = Value}) end),
    %% Inside batch/1 it is fsynced with the batch, as before.
    _ = deferred(),
    ok.

-spec kv_delete(atom(), term()) -> ok.
kv_delete(Bucket, Key) when is_atom(Bucket) ->
    tx(fun() -> mnesia:delete({throng_kv, {Bucket, Key}}) end).

%% A transaction with a write lock on the row (held by the nodes with the
%% table); inside another transaction (Fun of an outer update), part of it.
-spec kv_update(atom(), term(), throng_storage:kv_fun(R)) -> R.
kv_update(Bucket, Key, Fun) when is_atom(Bucket) ->
    K = {Bucket, Key},
    Update = fun() ->
                     Found = case mnesia:read(throng_kv, K, write) of
                                 [#throng_kv{value = V}] -> {ok, V};
                                 [] -> not_found
                             end,
                     {Reply, Change} = Fun(Found),
                     case Change of
                         keep -> ok;
                         delete -> mnesia:delete({throng_kv, K});
                         {put, New} -> mnesia:write(#throng_kv{key = K, value = New})
                     end,
                     Reply
             end,
    case mnesia:is_transaction() of
        true -> Update();
        false -> tx(Update)
    end.

%% A scan of the whole table: for administration and tests.
-spec kv_keys(atom()) -> [term()].
kv_keys(Bucket) when is_atom(Bucket) ->
    dirty_select(throng_kv, [{#throng_kv{key = {Bucket, '$1'}, value = '_'}, [], ['$1']}]).


%%% Message archive (XEP-0313)

%% A node that keeps its data alone (no cluster.db_nodes) keeps the
%% archive in files, not in a table held in RAM ({@link
%% throng_archive_files}, written by {@link throng_archive_writer}): an
%% archive grows with the messages (up to max_messages per user), and in a
%% disc_copies table every message cost ~744 bytes of RAM (bench/mam.sh).
%% A store returns once the message is in the files (every query sees it,
%% a kill -9 of the node does not lose it) and in the writer's log, which
%% is fsynced `storage.archive_sync_delay' later with every store of that
%% moment. In a cluster whose db nodes share the tables, the archive is
%% the table throng_mam, on the db nodes. Each node gives ids that no other
%% node gives ({@link throng_mam_slot}), so a store is written without a
%% transaction: by a node that keeps the tables itself, and by any other
%% in one call to a db node ({@link archive_rows/2}), which writes the
%% rows to every db node and asks for their fsync (a message's two copies:
%% one round trip). It returns once every query sees the rows; they are
%% fsynced with the writes of the next moments, as for the files. The
%% nodes that got no slot take their ids in a transaction that checks the
%% key.
-spec mam_store(binary(), binary(), #mam_msg{}) -> non_neg_integer().
mam_store(U, S, Msg) ->
    [Id] = mam_store_many([{U, S, Msg}]),
    Id.

-spec mam_store_many([{binary(), binary(), #mam_msg{}}]) -> [non_neg_integer()].
mam_store_many(Items) ->
    case archive() of
        {files, _Root} ->
            [case throng_archive_writer:store(U, S, Msg) of
                 {ok, Id} -> Id;
                 {error, Why} -> failed({aborted, {archive, Why}})
             end || {U, S, Msg} <- Items];
        table ->
            Wanted = [{{U, S}, archive_id(Id0), Msg} || {U, S, #mam_msg{id = Id0} = Msg} <- Items],
            case lists:all(fun({_, Want, _}) -> element(1, Want) =:= own end, Wanted) of
                true ->
                    write_archive([mam_row(US, Id, Msg) || {US, {own, Id}, Msg} <- Wanted]),
                    [Id || {_, {own, Id}, _} <- Wanted];
                false ->
                    tx(fun() -> [table_id(US, Want, Msg) || {US, Want, Msg} <- Wanted] end,
                       fun(_) -> ok end, fun archive_sync/0)
            end
    end.

%% In a transaction: the row written under its own id, or the next free
%% one of a shared id's residue.
table_id(US, {own, Id}, Msg) ->
    mnesia:write(mam_row(US, Id, Msg)),
    Id;
table_id(US, {shared, Id1}, Msg) ->
    Id = free_id(US, Id1),
    mnesia:write(mam_row(US, Id, Msg)),
    Id.

%% The rows, written by this node when it keeps the tables, else by a db
%% node in one call; their fsync asked for (or waited for, with a delay of
%% 0), unless a batch will fsync them at its end.
write_archive(Rows) ->
    Sync = case deferred() of
               true -> none;
               false -> archive_sync_mode()
           end,
    Result = case db_node() of
                 here -> archive_rows(Rows, Sync);
                 Node -> at_db_node(Node, ?MODULE, archive_rows, [Rows, Sync],
                                    fun() -> archive_rows(Rows, Sync) end)
             end,
    case Result of
        ok -> ok;
        {error, Why} -> failed({sync, Why})
    end.

archive_sync_mode() ->
    case throng_config:get([storage, archive_sync_delay]) of
        0 -> wait;
        _ -> soon
    end.

%% here: this node keeps the tables (or no db node runs: the write here
%% fails as Mnesia says). Else one of the running db nodes, the same one
%% for every write of this node while they run.
db_node() ->
    case persistent_term:get(?DISC_KEY, {true, []}) of
        {true, _} -> here;
        {false, DbNodes} ->
            case running(DbNodes) of
                [] -> here;
                Running -> lists:nth(erlang:phash2(node(), length(Running)) + 1, Running)
            end
    end.

%% @doc On a node that keeps the tables: writes archive rows (to every db
%% node, returning when they all have them) and asks for their fsync:
%% soon (not waited for), wait (returns once on disk) or none (a batch
%% fsyncs at its end).
-spec archive_rows([#throng_mam{}], none | soon | wait) -> ok | {error, term()}.
archive_rows(Rows, Sync) ->
    activity(sync_dirty, fun() -> lists:foreach(fun mnesia:write/1, Rows) end),
    sync_by(Sync).

sync_by(none) -> ok;
sync_by(soon) -> sync_soon();
sync_by(wait) -> sync().

%% M:F(Args) run on Node, a running db node: one round trip for all it
%% does there. A db node that went away during the call (a write may have
%% been made or not: the rows and keys are the same when it is made again)
%% or that does not know F (an older version): Here(), Mnesia's own way
%% from this node to tables it does not keep.
at_db_node(Node, M, F, Args, Here) ->
    try erpc:call(Node, M, F, Args, infinity)
    catch
        error:{exception, {storage_failed, Why}, _} -> failed(Why);
        exit:{exception, {aborted, Why}} -> failed({aborted, Why});
        error:{exception, undef, [{M, F, _, _} | _]} -> Here();
        error:{erpc, _} = Why ->
            logger:warning(#{what => db_node_unreachable, node => Node, call => F,
                             reason => Why}),
            Here();
        Class:Why ->
            failed({aborted, {db_node, Node, Class, Why}})
    end.

%% An archived message's fsync: asked for and not waited for
%% (storage.archive_sync_delay later), or with a delay of 0 waited for.
archive_sync() ->
    sync_by(archive_sync_mode()).

mam_row(US, Id, #mam_msg{peer = Peer, packet = Packet}) ->
    #throng_mam{key = {US, Id}, peer = Peer, packet = Packet}.

%% Another node without a slot may have taken the id: the next one of the
%% shared residue.
free_id(US, Id) ->
    case mnesia:read(throng_mam, {US, Id}, write) of
        [] -> Id;
        [_] -> free_id(US, Id + 64)
    end.

%%% Archive id slots (throng_mam_slot): rows {mam_slot, Slot} of throng_kv,
%%% valued {Node, Limit}.

%% A reservation: ids for the next 5 seconds.
-define(RESERVE_US, 5000000).
%% A wanted id older than this is one of the past (not the time now).
-define(PAST_US, 1000000).
%% A slot whose limit is an hour past may go to another node.
-define(STALE_US, 3600000000).

%% {own, Id}: an id no other node gives. {shared, Id}: an id to check in
%% a transaction: this node has no slot, or the id wanted is more than a
%% second old (an import, a test: kept as it is, moved to the slot's
%% residue, where ids this node gave may be).
archive_id(Want) ->
    case {slot_state(), Want < os:system_time(microsecond) - ?PAST_US} of
        {{_, St}, true} ->
            {shared, throng_mam_slot:align(Want, throng_mam_slot:slot(St))};
        {{own, St}, false} ->
            case throng_mam_slot:next(St, Want) of
                {ok, Id} -> {own, Id};
                {beyond, Id} -> extend_slot(St, Id), archive_id(Want)
            end;
        {{shared, St}, false} ->
            {ok, Id} = throng_mam_slot:next(St, Want),
            {shared, Id}
    end.

slot_state() ->
    case persistent_term:get(?SLOT_KEY, undefined) of
        undefined -> locked(fun() -> persistent_term:get(?SLOT_KEY, undefined) end, fun claim_slot/0);
        State -> State
    end.

%% F, or Else when F returns undefined, one process of the node at a time.
locked(F, Else) ->
    global:trans({?SLOT_KEY, self()},
                 fun() ->
                         case F() of
                             undefined -> Else();
                             Done -> Done
                         end
                 end, [node()]).

%% This node's slot (the one it had, a free one, or one long unused), with
%% a limit 5 s ahead; none left: the shared residue.
claim_slot() ->
    Now = os:system_time(microsecond),
    Me = node(),
    State =
        tx(fun() ->
                   Rows = mnesia:select(throng_kv, [{#throng_kv{key = {mam_slot, '$1'}, value = '$2'},
                                                     [], [{{'$1', '$2'}}]}], write),
                   Free = throng_mam_slot:slots() -- [Slot || {Slot, _} <- Rows],
                   Stale = lists:sort([{Limit, Slot} || {Slot, {_, Limit}} <- Rows,
                                                        Limit < Now - ?STALE_US]),
                   case {[{Slot, L} || {Slot, {N, L}} <- Rows, N =:= Me], Free, Stale} of
                       {[{Slot, Floor} | _], _, _} -> take_slot(Slot, Floor, Now);
                       {[], [Slot | _], _} -> take_slot(Slot, 0, Now);
                       {[], [], [{Floor, Slot} | _]} -> take_slot(Slot, Floor, Now);
                       {[], [], []} -> none
                   end
           end),
    Result = case State of
                 {Slot, Floor, Limit} ->
                     logger:info(#{what => archive_slot_claimed, slot => Slot, limit => Limit}),
                     {own, throng_mam_slot:new(Slot, Floor, Limit)};
                 none ->
                     logger:warning(#{what => archive_slots_all_taken,
                                      action => "this node's archive writes take a transaction"}),
                     {shared, throng_mam_slot:new(throng_mam_slot:shared(), 0, 1 bsl 62)}
             end,
    persistent_term:put(?SLOT_KEY, Result),
    Result.

take_slot(Slot, Floor, Now) ->
    Limit = max(Now, Floor) + ?RESERVE_US,
    mnesia:write(#throng_kv{key = {mam_slot, Slot}, value = {node(), Limit}}),
    {Slot, Floor, Limit}.

%% The limit moves 5 s past Id, on disk first. A slot taken meanwhile by
%% another node (this one gave no id for an hour) is given up: the next
%% store claims one again.
extend_slot(St, Id) ->
    Slot = throng_mam_slot:slot(St),
    Me = node(),
    Extend = fun() ->
                     Limit = max(os:system_time(microsecond), Id) + ?RESERVE_US,
                     case tx(fun() ->
                                     case mnesia:read(throng_kv, {mam_slot, Slot}, write) of
                                         [#throng_kv{value = {Me, _}}] ->
                                             mnesia:write(#throng_kv{key = {mam_slot, Slot},
                                                                     value = {Me, Limit}});
                                         _ ->
                                             lost
                                     end
                             end) of
                         ok ->
                             throng_mam_slot:set_limit(St, Limit);
                         lost ->
                             logger:notice(#{what => archive_slot_lost, slot => Slot}),
                             persistent_term:erase(?SLOT_KEY)
                     end,
                     done
             end,
    locked(fun() ->
                   case throng_mam_slot:limit(St) > Id of
                       true -> done;                   %% moved by another process
                       false -> undefined
                   end
           end, Extend),
    ok.

-define(ARCHIVE_KEY, {?MODULE, archive}).

%% files, with their directory, or the table.
archive() ->
    persistent_term:get(?ARCHIVE_KEY, table).

%% At a start of a node that keeps its data alone (no cluster.db_nodes:
%% with them, even a list of this node alone, other nodes may read and
%% write the tables, so the archive is the table): what the writers' logs
%% hold goes to the archives, and so does what an earlier version archived
%% in the table.
init_archive([]) ->
    Root = throng_archive_files:root(),
    try
        {_, LogMax} = throng_archive_files:recover(Root),
        Migrated = migrate_archive(Root),
        %% Ids go on above every id given before, whatever the clock says.
        Floor = lists:max([throng_archive_files:floor(Root), LogMax, Migrated]),
        throng_archive_files:set_floor(Root, "start", Floor)
    catch
        throw:{archive, Why} -> fail("cannot recover the message archive in ~ts: ~0tp", [Root, Why])
    end,
    persistent_term:put(?ARCHIVE_KEY, {files, Root});
init_archive(_Shared) ->
    persistent_term:put(?ARCHIVE_KEY, table).

%% The table's rows, in its order (user by user, by id), appended to the
%% files (a row whose id a file already has is skipped: a migration cut
%% short starts again); the table is emptied once the file system holds
%% the files.
%% Returns the largest id it moved.
migrate_archive(Root) ->
    case mnesia:table_info(throng_mam, size) of
        0 ->
            0;
        Size ->
            logger:notice(#{what => archive_migration_started, messages => Size, dir => Root}),
            {Open, Max} = migrate(mnesia:dirty_first(throng_mam), Root, {#{}, 0}, 0),
            throng_archive_files:close_all(Open),
            case throng_archive_files:syncfs(Root) of
                ok -> ok;
                {error, Why} -> fail("cannot sync the migrated message archive: ~0tp", [Why])
            end,
            {atomic, ok} = mnesia:clear_table(throng_mam),
            logger:notice(#{what => archive_migration_done, messages => Size}),
            Max
    end.

migrate('$end_of_table', _Root, Acc, _N) ->
    Acc;
migrate({US, Id} = Key, Root, {Open, Max}, N) ->
    N > 0 andalso N rem 100000 =:= 0 andalso
        logger:notice(#{what => archive_migration_progress, messages => N}),
    Open1 = case mnesia:dirty_read(throng_mam, Key) of
                [#throng_mam{peer = Peer, packet = Packet}] ->
                    throng_archive_files:restore(Root, US, Id, Peer, Packet, Open);
                [] ->
                    Open
            end,
    migrate(mnesia:dirty_next(throng_mam, Key), Root, {Open1, max(Max, Id)}, N + 1).

%% Without a peer filter, a range is walked key by key from the end the
%% query reads from (one ordered_set step each, O(log n)): a page reads its
%% own rows, not the rest of the archive. With one, the ids of the range
%% that match are selected first (a scan of the user's range that copies
%% nothing but the ids: 20,000 messages in ~3 ms), then the page's rows
%% are read.
-spec mam_query(binary(), binary(), #mam_filter{}, throng_storage:mam_direction(),
                non_neg_integer()) -> [#mam_msg{}].
mam_query(U, S, F, Direction, Limit) ->
    case archive() of
        {files, Root} ->
            %% The pending messages first, then the files.
            files(fun() -> throng_archive_files:query(Root, U, S, F, {Direction, Limit},
                                                      throng_archive_writer:pending(U, S))
                  end);
        %% A walk of the user's range, a read per message: made where
        %% the tables are, one round trip from a node without them.
        table -> at_tables(?MODULE, table_query, [U, S, F, Direction, Limit])
    end.

files(Fun) ->
    try Fun()
    catch throw:{archive, Why} -> failed({aborted, {archive, Why}})
    end.

%% @doc mam_query/5 of the table, made with the reads of this node (on a db
%% node: its own copies).
-spec table_query(binary(), binary(), #mam_filter{}, throng_storage:mam_direction(),
                  non_neg_integer()) -> [#mam_msg{}].
table_query(U, S, #mam_filter{ids = any, with = any, min = Min} = F, forward, Limit) ->
    US = {U, S},
    walk(fun mnesia:dirty_next/2, {US, Min - 1}, US, F, Limit, []);
table_query(U, S, #mam_filter{ids = any, with = any, max = Max} = F, backward, Limit) ->
    US = {U, S},
    lists:reverse(walk(fun mnesia:dirty_prev/2, {US, Max + 1}, US, F, Limit, []));
table_query(U, S, #mam_filter{ids = any} = F, Direction, Limit) ->
    US = {U, S},
    Ids = range_ids(US, F),
    Page = case Direction of
               forward -> lists:sublist(Ids, Limit);
               backward -> lists:nthtail(max(0, length(Ids) - Limit), Ids)
           end,
    [M || Id <- Page, M <- read_mam(US, Id)];
table_query(U, S, #mam_filter{ids = Ids} = F, Direction, Limit) ->
    US = {U, S},
    Found = [M || Id <- lists:usort(Ids), M <- read_mam(US, Id), selects(F, M)],
    case Direction of
        forward -> lists:sublist(Found, Limit);
        backward -> lists:nthtail(max(0, length(Found) - Limit), Found)
    end.

%% Acc ends up in the reverse order of the walk.
walk(_Step, _Key, _US, _F, 0, Acc) ->
    lists:reverse(Acc);
walk(Step, Key, US, #mam_filter{min = Min, max = Max} = F, Limit, Acc) ->
    case dirty_step(Step, Key) of
        {US, Id} = Next when Id >= Min, Id =< Max ->
            case [M || M <- read_mam(US, Id), selects(F, M)] of
                [M] -> walk(Step, Next, US, F, Limit - 1, [M | Acc]);
                [] -> walk(Step, Next, US, F, Limit, Acc)
            end;
        _EndOfRange ->
            lists:reverse(Acc)
    end.

dirty_step(Step, Key) ->
    try Step(throng_mam, Key)
    catch exit:{aborted, Why} -> failed({aborted, Why})
    end.

read_mam(US, Id) ->
    [#mam_msg{id = Id, peer = P, packet = B}
     || #throng_mam{peer = P, packet = B} <- dirty_read(throng_mam, {US, Id})].

selects(F, M) ->
    throng_archive_files:selects(F, M).

%% The ids of the user's range that the filter selects, in order: a select
%% over the user's range (the key's bound prefix keeps it there).
range_ids(US, #mam_filter{min = Min, max = Max, with = With}) ->
    Peer = case With of
               any -> '_';
               {Bare, any} -> {Bare, '_'};
               {Bare, Res} -> {Bare, Res}
           end,
    dirty_select(throng_mam, [{{throng_mam, {US, '$1'}, Peer, '_'},
                               [{'>=', '$1', Min}, {'=<', '$1', Max}], ['$1']}]).

%% One select of the range; the ids below Before are counted in what it
%% returned.
-spec mam_count(binary(), binary(), #mam_filter{}, non_neg_integer()) ->
    {non_neg_integer(), non_neg_integer()}.
mam_count(U, S, F, Before) ->
    case archive() of
        {files, Root} ->
            files(fun() -> throng_archive_files:count(Root, U, S, {F, Before},
                                                      throng_archive_writer:pending(U, S))
                  end);
        table -> at_tables(?MODULE, table_count, [U, S, F, Before])
    end.

%% @doc mam_count/4 of the table, made with the reads of this node.
-spec table_count(binary(), binary(), #mam_filter{}, non_neg_integer()) ->
    {non_neg_integer(), non_neg_integer()}.
table_count(U, S, #mam_filter{ids = any} = F, Before) ->
    count_below(range_ids({U, S}, F), Before);
table_count(U, S, Filter, Before) ->
    Found = table_query(U, S, Filter, forward, length(Filter#mam_filter.ids)),
    count_below([Id || #mam_msg{id = Id} <- Found], Before).

count_below(Ids, Before) ->
    {length(Ids), length([Id || Id <- Ids, Id < Before])}.

-spec mam_delete_user(binary(), binary()) -> ok.
mam_delete_user(U, S) ->
    case archive() of
        {files, _Root} ->
            case throng_archive_writer:delete(U, S) of
                ok -> ok;
                {error, Why} -> failed({aborted, {archive, Why}})
            end;
        table ->
            table_delete_user(U, S)
    end.

table_delete_user(U, S) ->
    US = {U, S},
    Ids = dirty_select(throng_mam, [{{throng_mam, {US, '$1'}, '_', '_'}, [], ['$1']}]),
    delete_mam(US, Ids).

%% In transactions of ?BULK_BATCH rows.
delete_mam(_US, []) ->
    ok;
delete_mam(US, Ids) ->
    {Batch, Rest} = split(?BULK_BATCH, Ids),
    tx(fun() -> lists:foreach(fun(Id) -> mnesia:delete({throng_mam, {US, Id}}) end, Batch) end),
    delete_mam(US, Rest).

%% The keys of the server's archives are read in chunks, in the table's
%% order (user by user, oldest first): one user's ids are held at a time.
-spec mam_expire(binary(), non_neg_integer(), non_neg_integer() | infinity) -> non_neg_integer().
mam_expire(S, Before, MaxPerUser) ->
    case archive() of
        {files, Root} ->
            %% Archives that have only pending messages have no files yet.
            throng_archive_writer:catch_up(),
            lists:foldl(fun(U, N) ->
                                case throng_archive_writer:keep(U, S, Before, MaxPerUser) of
                                    {ok, Gone} -> N + Gone;
                                    {error, Why} -> failed({aborted, {archive, Why}})
                                end
                        end, 0, files(fun() -> throng_archive_files:users(Root, S) end));
        table ->
            table_expire(S, Before, MaxPerUser)
    end.

table_expire(S, Before, MaxPerUser) ->
    Spec = [{{throng_mam, {{'$1', S}, '$2'}, '_', '_'}, [], [{{'$1', '$2'}}]}],
    First = fun() -> mnesia:select(throng_mam, Spec, ?BULK_BATCH, read) end,
    expire_chunks(activity(First), S, Before, MaxPerUser, none, [], 0).

activity(F) ->
    activity(async_dirty, F).

activity(Kind, F) ->
    try mnesia:activity(Kind, F)
    catch exit:{aborted, Why} -> failed({aborted, Why})
    end.

%% User: the user whose ids (newest first) are in Ids.
expire_chunks('$end_of_table', S, Before, Max, User, Ids, N) ->
    N + expire_user(S, User, Ids, Before, Max);
expire_chunks({Keys, Cont}, S, Before, Max, User0, Ids0, N0) ->
    {User, Ids, N} =
        lists:foldl(fun({U, Id}, {U, Acc, N}) -> {U, [Id | Acc], N};
                       ({U, Id}, {Prev, Acc, N}) ->
                            {U, [Id], N + expire_user(S, Prev, Acc, Before, Max)}
                    end, {User0, Ids0, N0}, Keys),
    expire_chunks(activity(fun() -> mnesia:select(Cont) end), S, Before, Max, User, Ids, N).

expire_user(_S, none, _Ids, _Before, _Max) ->
    0;
expire_user(S, U, NewestFirst, Before, Max) ->
    Kept = case Max of
               infinity -> NewestFirst;
               _ -> lists:sublist(NewestFirst, Max)
           end,
    Doomed = [Id || Id <- NewestFirst, Id < Before] ++
        lists:nthtail(length(Kept), NewestFirst),
    Unique = lists:usort(Doomed),
    delete_mam({U, S}, Unique),
    length(Unique).
