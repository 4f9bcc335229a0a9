%% @doc The storage behaviour: accounts, rosters, offline messages, and a
%% key-value store for extension modules.
%%
%% Protocol code calls only this module; the backend module named by the
%% `storage.backend' option implements the callbacks. Users and servers are
%% passed already normalized (stringprep'ed).
%%
%% == Results and failures ==
%% Every function either returns one of the results in its spec or raises
%% `error({storage_failed, Reason})' ({@link failure()}); no other exception
%% comes out of storage. A write that returns is durable: it survives
%% `kill -9' of the node and a crash of the machine (one exception,
%% spelled out: {@link mam_store/3}, durable `storage.archive_sync_delay'
%% later, a second by default). When a write raises,
%% it was not acknowledged and its outcome depends on Reason:
%% <ul>
%% <li>`{aborted, Why}': the transaction did not commit; nothing changed.</li>
%% <li>`{sync, Why}': it committed in memory (readers on this node see it)
%%     but could not be made sure to be on disk (e.g. an I/O error on the
%%     log); a crash may lose it. With a database server (PostgreSQL) the
%%     outcome is unknown: the connection broke after the commit was sent.
%%     Retrying is safe for the idempotent writes (set_credentials,
%%     roster_update with the same function, kv_put, kv_delete);
%%     inflight_claim puts the messages back before raising when it can.</li>
%% </ul>
%% Reads raise the same when the database is not running. A caller that
%% must not crash on a storage failure (a connection process, the router)
%% catches `error:{storage_failed, _}' and answers with an error.
%%
%% Roster changes are read-modify-write operations ({@link roster_update/4}):
%% the backend runs the given function on the current item inside one
%% transaction, so concurrent subscription changes from several sessions
%% and contacts cannot interleave. A SQL backend does the same with
%% `SELECT ... FOR UPDATE'.
%%
%% == Key-value store ==
%% {@link kv_get/2}, {@link kv_put/3}, {@link kv_delete/2} and
%% {@link kv_keys/1} keep small terms for extension modules, so that a
%% module needs no backend code of its own. Each module uses its own bucket
%% (its module name); keys and values are any terms, meant to be small (a
%% value is kept in memory and written whole). Nothing else removes a
%% bucket's entries: a module that keys by user deletes them itself when
%% the account goes.
%%
%% == Message archive ==
%% {@link mam_store/3}, {@link mam_query/5}, {@link mam_count/4},
%% {@link mam_delete_user/2} and {@link mam_expire/3} keep each user's
%% archive of messages (XEP-0313, throng_mod_mam) ordered by id: the time a
%% message was archived in microseconds, unique in the archive. A query
%% reads a range of ids (with a peer, or only given ids) from either end,
%% at most a given number, so that a page costs its own size and not the
%% archive's. Nothing else removes a user's archive: the module does it
%% when the account goes.
-module(throng_storage).

-include("throng.hrl").

-export([init/0, child_specs/0]).
-export([create_account/3, set_credentials/3, get_credentials/2, login_read/3, remove_account/2,
         account_exists/2, count_accounts/1, bulk_create/2]).
-export([roster_get/2, roster_get_item/3, roster_update/4]).
-export([offline_store/4, offline_count/2, offline_total/0, offline_bytes/0]).
-export([batch/1]).
-export([inflight_put/4, inflight_delete/1, inflight_claim/3, inflight_return/1,
         inflight_recover/1, inflight_nodes/0, inflight_count/0]).
-export([cluster_identity/0, node_up/1]).
%% API used by tests and operators: messages in flight, and moving those of
%% dead sessions back to offline storage without a restart.
-ignore_xref([{inflight_count, 0}, {inflight_recover, 1}]).
-export([kv_get/2, kv_put/3, kv_put_soon/3, kv_delete/2, kv_keys/1, kv_update/3]).
%% API used by tests and operators (administration: every key of a bucket).
-ignore_xref([{kv_keys, 1}]).
-export([mam_store/3, mam_store_many/1, mam_query/5, mam_count/3, mam_count/4, mam_delete_user/2, mam_expire/3]).
%% API used by tests and the benchmarks (a page counts with mam_count/4).
-ignore_xref([{mam_count, 3}]).

-type luser() :: binary().
-type lserver() :: binary().
-type contact() :: {luser(), lserver()}.
-type creds() :: #scram_creds{}.
-type roster_fun() :: fun((#roster_item{} | undefined) -> {set, #roster_item{}} | delete | keep).
-type bulk_user() :: {luser(), creds(), [#roster_item{}]}.
-type bucket() :: atom().
%% What kv_update/3 does with a key's value: its reply, and the change.
-type kv_fun(Reply) :: fun(({ok, term()} | not_found) -> {Reply, {put, term()} | delete | keep}).
%% The Reason of `error({storage_failed, Reason})'.
-type failure() :: {aborted, term()} | {sync, term()}.
%% A message in flight: the user, the node that holds the session, a number
%% unique on that node.
-type inflight_key() :: {{luser(), lserver()}, node(), pos_integer()}.
%% How much one user may have stored: messages and bytes (of the stored
%% stanzas), or no limit (messages that go back to storage).
-type offline_limits() :: {MaxMessages :: non_neg_integer(), MaxBytes :: non_neg_integer()}
                        | unlimited.
%% Which end of a range of the archive a query reads from.
-type mam_direction() :: forward | backward.
-export_type([luser/0, lserver/0, contact/0, creds/0, roster_fun/0, bulk_user/0,
              bucket/0, kv_fun/1, failure/0, inflight_key/0, offline_limits/0, mam_direction/0]).

%% Starts the database. Every failure is returned (never raised) as
%% `{error, Text}', Text readable by an operator: the boot prints it.
-callback init() -> ok | {error, string()}.
%% Processes the backend needs, started under throng_sup (connection pools,
%% group commit, ...).
-callback child_specs() -> [supervisor:child_spec()].
-callback create_account(luser(), lserver(), creds()) -> ok | {error, exists}.
-callback set_credentials(luser(), lserver(), creds()) -> ok | {error, not_found}.
-callback get_credentials(luser(), lserver()) -> {ok, creds()} | not_found.
%% What a login reads, in one read (one round trip to the database): the
%% credentials and the values of the given keys of the key-value store, in
%% the order given; not_found when there is no account (the keys are then
%% not reported).
-callback login_read(luser(), lserver(), [{bucket(), Key :: term()}]) ->
    {ok, creds(), [{ok, Value :: term()} | not_found]} | not_found.
%% Removes the account with its roster and offline messages.
-callback remove_account(luser(), lserver()) -> ok | {error, not_found}.
-callback account_exists(luser(), lserver()) -> boolean().
-callback count_accounts(lserver()) -> non_neg_integer().
%% Creates (or overwrites) many accounts with their rosters at once.
-callback bulk_create(lserver(), [bulk_user()]) -> ok.
-callback roster_get(luser(), lserver()) -> {Version :: non_neg_integer(), [#roster_item{}]}.
-callback roster_get_item(luser(), lserver(), contact()) -> #roster_item{} | undefined.
%% Applies the function to the current item (undefined when absent) in one
%% transaction. Returns the old and new item (undefined when absent) and the
%% roster version after the change (bumped only when something changed).
-callback roster_update(luser(), lserver(), contact(), roster_fun()) ->
    {ok, Old :: #roster_item{} | undefined, New :: #roster_item{} | undefined,
     Version :: non_neg_integer()}.
%% Stores a message unless it would take the user past the limits.
-callback offline_store(luser(), lserver(), #offline_msg{}, offline_limits()) ->
    ok | {error, full}.
-callback offline_count(luser(), lserver()) -> non_neg_integer().
-callback kv_get(bucket(), Key :: term()) -> {ok, Value :: term()} | not_found.
%% Creates or replaces the value of Key.
-callback kv_put(bucket(), Key :: term(), Value :: term()) -> ok.
%% The same, returning without waiting for the value to be durable (on disk,
%% on the database nodes): a crash soon after may lose it.
-callback kv_put_soon(bucket(), Key :: term(), Value :: term()) -> ok.
%% Removes Key (ok also when it was absent).
-callback kv_delete(bucket(), Key :: term()) -> ok.
%% Reads, changes and writes the value of Key as one step: two updates of
%% one key run one after the other (kv_update/3).
-callback kv_update(bucket(), Key :: term(), kv_fun(Reply)) -> Reply.
%% Every key of the bucket, in no order; may scan everything (not for a hot path).
-callback kv_keys(bucket()) -> [term()].
%% Messages held for every user together (statistics: read once a second, so
%% it must be cheap, e.g. a table's size rather than a scan).
-callback offline_total() -> non_neg_integer().
%% The bytes of every stored message together (as cheap as offline_total).
-callback offline_bytes() -> non_neg_integer().
%% Messages in flight to a session (XEP-0198, docs/architecture.md "What
%% survives kill -9"): kept durably from the moment they are taken from
%% offline storage or routed to a detached session until the client
%% acknowledges them. inflight_put keeps messages for the user's session
%% Owner (durable when it returns); inflight_delete forgets acknowledged ones
%% (not waited on: a lost delete means a message delivered twice);
%% inflight_claim moves every stored offline message of the user into flight
%% in one transaction, oldest first; inflight_return moves messages back to
%% offline storage in one transaction (outside the limits); inflight_recover
%% moves back this node's rows, all of them (start-up: no session outlives
%% its node) or those whose owner is no longer alive, returning how many.
-callback inflight_put(luser(), lserver(), Owner :: pid(), [#offline_msg{}]) -> [inflight_key()].
-callback inflight_delete([inflight_key()]) -> ok.
-callback inflight_claim(luser(), lserver(), Owner :: pid()) -> [{inflight_key(), #offline_msg{}}].
-callback inflight_return([inflight_key()]) -> ok.
-callback inflight_recover(all | orphans | {node, node()}) -> non_neg_integer().
%% The nodes whose sessions' messages in flight are kept (every node's,
%% not only this one's), each once.
-callback inflight_nodes() -> [node()].
%% Runs the function; its writes become durable together at its end (one
%% fsync for many writes). A write inside returns before it is durable;
%% batch/1 raises storage_failed when the end of the batch could not make
%% them durable.
-callback batch(fun(() -> Result)) -> Result.
%% Rows in flight on the node (statistics, tests).
-callback inflight_count() -> non_neg_integer().
%% What the data is (nodes of a Mnesia cluster, a PostgreSQL database):
%% nodes of one Throng cluster must answer the same. Optional: without it,
%% every node is taken to keep its own.
-callback cluster_identity() -> term().
%% A cluster member came (back): a backend that lost it reconnects.
-callback node_up(node()) -> ok.
%% The message archive (XEP-0313). mam_store keeps a message in the user's
%% archive under its id or, when the backend cannot use that id, a later
%% one (another message has it: two nodes archiving in the same
%% microsecond, or an id of an earlier run after the clock went back; or,
%% in a store that only appends, the id is not above every id it gave),
%% and returns the id it used. It runs for every message archived, so it
%% may return before the write is on disk, once every later read sees it,
%% if the write becomes durable within `storage.archive_sync_delay' (a
%% second by default; 0: before it returns) without another call (the only
%% write of this behaviour allowed to: Mnesia alone on its node logs it to
%% its archive files' log, fsynced that delay later;
%% Mnesia with db nodes commits it there and asks their group commit for
%% an fsync it does not wait for; PostgreSQL returns after the commit). mam_query returns the
%% messages the filter selects, in ascending order of id: the first Limit
%% of them (forward) or the last Limit (backward); it reads no more of the
%% archive than it needs to. mam_count counts what the filter selects and,
%% in the same read, how many of those have an id below Before (the index
%% of a page's first message); it may read the user's whole range, once.
%% mam_delete_user removes a user's archive.
%% mam_expire removes, for every user of the server, the messages older
%% than Before (an id) and those beyond the newest MaxPerUser, and returns
%% how many it removed (it may scan everything: for a periodic sweep).
-callback mam_store(luser(), lserver(), #mam_msg{}) -> non_neg_integer().
%% mam_store_many stores several messages, each in its user's archive, as
%% one write where the backend can (one round trip to the db node, one
%% PostgreSQL transaction), with mam_store's guarantees for each; the ids
%% in the order of the list. When it raises, each may or may not be
%% stored, as for a mam_store that raised.
-callback mam_store_many([{luser(), lserver(), #mam_msg{}}]) -> [non_neg_integer()].
-callback mam_query(luser(), lserver(), #mam_filter{}, mam_direction(), non_neg_integer()) ->
    [#mam_msg{}].
-callback mam_count(luser(), lserver(), #mam_filter{}, Before :: non_neg_integer()) ->
    {Count :: non_neg_integer(), Below :: non_neg_integer()}.
-callback mam_delete_user(luser(), lserver()) -> ok.
-callback mam_expire(lserver(), Before :: non_neg_integer(),
                     MaxPerUser :: non_neg_integer() | infinity) -> non_neg_integer().
-optional_callbacks([cluster_identity/0, node_up/1]).

-define(BACKEND_KEY, {?MODULE, backend}).

%% @doc Starts the configured backend; `{error, Text}' on any failure.
-spec init() -> ok | {error, string()}.
init() ->
    Mod = case throng_config:get([storage, backend]) of
              mnesia -> throng_storage_mnesia;
              pgsql -> throng_storage_pgsql
          end,
    persistent_term:put(?BACKEND_KEY, Mod),
    Mod:init().

-spec child_specs() -> [supervisor:child_spec()].
child_specs() ->
    (backend()):child_specs().

-spec backend() -> module().
backend() ->
    persistent_term:get(?BACKEND_KEY).

-spec create_account(luser(), lserver(), creds()) -> ok | {error, exists}.
create_account(U, S, C) -> (backend()):create_account(U, S, C).

-spec set_credentials(luser(), lserver(), creds()) -> ok | {error, not_found}.
set_credentials(U, S, C) -> (backend()):set_credentials(U, S, C).

-spec get_credentials(luser(), lserver()) -> {ok, creds()} | not_found.
get_credentials(U, S) -> (backend()):get_credentials(U, S).

-spec login_read(luser(), lserver(), [{bucket(), term()}]) ->
    {ok, creds(), [{ok, term()} | not_found]} | not_found.
login_read(U, S, Keys) -> (backend()):login_read(U, S, Keys).

-spec remove_account(luser(), lserver()) -> ok | {error, not_found}.
remove_account(U, S) -> (backend()):remove_account(U, S).

-spec account_exists(luser(), lserver()) -> boolean().
account_exists(U, S) -> (backend()):account_exists(U, S).

-spec count_accounts(lserver()) -> non_neg_integer().
count_accounts(S) -> (backend()):count_accounts(S).

-spec bulk_create(lserver(), [bulk_user()]) -> ok.
bulk_create(S, Users) -> (backend()):bulk_create(S, Users).

-spec roster_get(luser(), lserver()) -> {non_neg_integer(), [#roster_item{}]}.
roster_get(U, S) -> (backend()):roster_get(U, S).

-spec roster_get_item(luser(), lserver(), contact()) -> #roster_item{} | undefined.
roster_get_item(U, S, C) -> (backend()):roster_get_item(U, S, C).

-spec roster_update(luser(), lserver(), contact(), roster_fun()) ->
    {ok, #roster_item{} | undefined, #roster_item{} | undefined, non_neg_integer()}.
roster_update(U, S, C, F) -> (backend()):roster_update(U, S, C, F).

-spec offline_store(luser(), lserver(), #offline_msg{}, offline_limits()) -> ok | {error, full}.
offline_store(U, S, M, Max) -> (backend()):offline_store(U, S, M, Max).


-spec offline_count(luser(), lserver()) -> non_neg_integer().
offline_count(U, S) -> (backend()):offline_count(U, S).

%%% Key-value store of extension modules

%% @doc The value stored under Key in Bucket.
-spec kv_get(bucket(), term()) -> {ok, term()} | not_found.
kv_get(B, K) -> (backend()):kv_get(B, K).

%% @doc Stores Value under Key in Bucket (replacing any); durable when it returns.
-spec kv_put(bucket(), term(), term()) -> ok.
kv_put(B, K, V) -> (backend()):kv_put(B, K, V).

%% @doc Stores Value under Key in Bucket (replacing any), without waiting
%% for it to be durable: a later read sees it, but a crash of the machine or
%% of a database node soon after may lose it. For values whose loss is
%% harmless and which are written often (the time of a logout): it spares
%% the writer an fsync and, in a cluster, the round trips to the database
%% nodes.
-spec kv_put_soon(bucket(), term(), term()) -> ok.
kv_put_soon(B, K, V) -> (backend()):kv_put_soon(B, K, V).

%% @doc Removes Key from Bucket (ok also when absent); durable when it returns.
-spec kv_delete(bucket(), term()) -> ok.
kv_delete(B, K) -> (backend()):kv_delete(B, K).

%% @doc Changes the value of Key in Bucket as one step: Fun gets what is
%% stored (`{ok, Value}' or `not_found') and returns its reply and what to
%% do: `{put, New}', `delete' or `keep'. Durable when it returns Fun's
%% reply. Two updates of one key run one after the other, serialized by
%% the storage (a lock on the key in the database: no process of the
%% cluster is asked, so a node that hangs holds up no one). Fun may run
%% more than once (a transaction tried again): it must do nothing but
%% read and compute. Another kv_update/3 inside it is part of the same
%% step; a kv_get/2 inside it sees what is committed (on Mnesia, not this
%% step's own writes). An exception in Fun leaves the value as it was
%% (`storage_failed', aborted).
-spec kv_update(bucket(), term(), kv_fun(Reply)) -> Reply.
kv_update(B, K, Fun) -> (backend()):kv_update(B, K, Fun).

%% @doc Every key in Bucket, in no order. Scans the store: for
%% administration and tests, not for a hot path.
-spec kv_keys(bucket()) -> [term()].
kv_keys(B) -> (backend()):kv_keys(B).
-spec offline_total() -> non_neg_integer().
offline_total() -> (backend()):offline_total().

-spec offline_bytes() -> non_neg_integer().
offline_bytes() -> (backend()):offline_bytes().

%%% Message archive (XEP-0313)

%% @doc Archives a message for the user; the id it was stored under (the
%% message's own, or the next free one). Read by every query when it
%% returns; durable then, or a few tens of milliseconds later (see the
%% callback).
-spec mam_store(luser(), lserver(), #mam_msg{}) -> non_neg_integer().
mam_store(U, S, Msg) -> (backend()):mam_store(U, S, Msg).

%% @doc Archives several messages (a message's copies in its sender's and
%% its recipient's archives) as one write: each as {@link mam_store/3}
%% would, their ids in the order of the list.
-spec mam_store_many([{luser(), lserver(), #mam_msg{}}]) -> [non_neg_integer()].
mam_store_many([]) -> [];
mam_store_many(Items) -> (backend()):mam_store_many(Items).

%% @doc The first (forward) or last (backward) Limit messages of the user's
%% archive that the filter selects, in ascending order of id.
-spec mam_query(luser(), lserver(), #mam_filter{}, mam_direction(), non_neg_integer()) ->
    [#mam_msg{}].
mam_query(_U, _S, _Filter, _Direction, 0) -> [];
mam_query(U, S, Filter, Direction, Limit) -> (backend()):mam_query(U, S, Filter, Direction, Limit).

%% @doc How many messages of the user's archive the filter selects.
-spec mam_count(luser(), lserver(), #mam_filter{}) -> non_neg_integer().
mam_count(U, S, Filter) ->
    {Count, 0} = mam_count(U, S, Filter, 0),
    Count.

%% @doc How many messages of the user's archive the filter selects, and how
%% many of them have an id below Before: one read of the archive.
-spec mam_count(luser(), lserver(), #mam_filter{}, non_neg_integer()) ->
    {non_neg_integer(), non_neg_integer()}.
mam_count(U, S, Filter, Before) -> (backend()):mam_count(U, S, Filter, Before).

%% @doc Removes the user's whole archive.
-spec mam_delete_user(luser(), lserver()) -> ok.
mam_delete_user(U, S) -> (backend()):mam_delete_user(U, S).

%% @doc Removes, for every user of the server, the archived messages with an
%% id below Before and those beyond each user's newest MaxPerUser; returns
%% how many. Scans the server's archives: for a periodic sweep.
-spec mam_expire(lserver(), non_neg_integer(), non_neg_integer() | infinity) -> non_neg_integer().
mam_expire(S, Before, MaxPerUser) -> (backend()):mam_expire(S, Before, MaxPerUser).

%%% Messages in flight to sessions

%% @doc Keeps messages in flight to Owner, a session of the user; durable
%% when it returns.
-spec inflight_put(luser(), lserver(), pid(), [#offline_msg{}]) -> [inflight_key()].
inflight_put(U, S, Owner, Msgs) -> (backend()):inflight_put(U, S, Owner, Msgs).

%% @doc Forgets messages the client acknowledged.
-spec inflight_delete([inflight_key()]) -> ok.
inflight_delete([]) -> ok;
inflight_delete(Keys) -> (backend()):inflight_delete(Keys).

%% @doc Moves the user's offline messages into flight to Owner, oldest first.
-spec inflight_claim(luser(), lserver(), pid()) -> [{inflight_key(), #offline_msg{}}].
inflight_claim(U, S, Owner) -> (backend()):inflight_claim(U, S, Owner).

%% @doc Moves messages in flight back to offline storage.
-spec inflight_return([inflight_key()]) -> ok.
inflight_return([]) -> ok;
inflight_return(Keys) -> (backend()):inflight_return(Keys).

%% @doc Moves messages in flight back to offline storage: all of this
%% node's, those of this node whose session is gone, or all of another node
%% (it went down: a cluster member does it). Returns how many.
-spec inflight_recover(all | orphans | {node, node()}) -> non_neg_integer().
inflight_recover(Which) -> (backend()):inflight_recover(Which).

%% @doc The nodes that have messages in flight kept, each once: after a
%% restart of the membership process, the nodes among them that are gone
%% are recovered as if they had just gone down.
-spec inflight_nodes() -> [node()].
inflight_nodes() -> (backend()):inflight_nodes().

-spec inflight_count() -> non_neg_integer().
inflight_count() -> (backend()):inflight_count().

%% @doc A cluster member came (back) (after a netsplit, or a restart).
-spec node_up(node()) -> ok.
node_up(Node) ->
    Mod = backend(),
    case erlang:function_exported(Mod, node_up, 1) of
        true -> Mod:node_up(Node);
        false -> ok
    end.

%% @doc What this node's data is; the members of a cluster must agree
%% (bin/throng join-cluster checks it).
-spec cluster_identity() -> term().
cluster_identity() ->
    Mod = backend(),
    case erlang:function_exported(Mod, cluster_identity, 0) of
        true -> Mod:cluster_identity();
        false -> {Mod, node()}
    end.

%% @doc Runs F with its writes made durable together, by one sync at its
%% end: many writes of one process (a session re-routing its queue as it
%% ends) cost one fsync instead of one each.
-spec batch(fun(() -> Result)) -> Result.
batch(F) -> (backend()):batch(F).
