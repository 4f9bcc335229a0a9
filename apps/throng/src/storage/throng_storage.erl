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
%% `kill -9' of the node and a crash of the machine. When a write raises,
%% it was not acknowledged and its outcome depends on Reason:
%% <ul>
%% <li>`{aborted, Why}': the transaction did not commit; nothing changed.</li>
%% <li>`{sync, Why}': it committed in memory (readers on this node see it)
%%     but could not be made sure to be on disk (e.g. an I/O error on the
%%     log); a crash may lose it. Retrying is safe for the idempotent writes
%%     (set_credentials, roster_update with the same function, kv_put,
%%     kv_delete); offline_pop puts the messages back before raising.</li>
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
-module(throng_storage).

-include("throng.hrl").

-export([init/0, child_specs/0]).
-export([create_account/3, set_credentials/3, get_credentials/2, remove_account/2,
         account_exists/2, count_accounts/1, bulk_create/2]).
-export([roster_get/2, roster_get_item/3, roster_update/4]).
-export([offline_store/4, offline_pop/2, offline_count/2, offline_total/0]).
-export([kv_get/2, kv_put/3, kv_delete/2, kv_keys/1]).
%% API used by tests and operators (administration: every key of a bucket).
-ignore_xref([{kv_keys, 1}]).

-type luser() :: binary().
-type lserver() :: binary().
-type contact() :: {luser(), lserver()}.
-type creds() :: #scram_creds{}.
-type roster_fun() :: fun((#roster_item{} | undefined) -> {set, #roster_item{}} | delete | keep).
-type bulk_user() :: {luser(), creds(), [#roster_item{}]}.
-type bucket() :: atom().
%% The Reason of `error({storage_failed, Reason})'.
-type failure() :: {aborted, term()} | {sync, term()}.
-export_type([luser/0, lserver/0, contact/0, creds/0, roster_fun/0, bulk_user/0,
              bucket/0, failure/0]).

%% Starts the database. Every failure is returned (never raised) as
%% `{error, Text}', Text readable by an operator: the boot prints it.
-callback init() -> ok | {error, string()}.
%% Processes the backend needs, started under throng_sup (connection pools,
%% group commit, ...).
-callback child_specs() -> [supervisor:child_spec()].
-callback create_account(luser(), lserver(), creds()) -> ok | {error, exists}.
-callback set_credentials(luser(), lserver(), creds()) -> ok | {error, not_found}.
-callback get_credentials(luser(), lserver()) -> {ok, creds()} | not_found.
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
%% Stores a message unless the user already has Max messages stored.
-callback offline_store(luser(), lserver(), #offline_msg{}, Max :: non_neg_integer()) ->
    ok | {error, full}.
%% Removes and returns the user's stored messages, oldest first. When it
%% raises, the messages are still stored.
-callback offline_pop(luser(), lserver()) -> [#offline_msg{}].
-callback offline_count(luser(), lserver()) -> non_neg_integer().
-callback kv_get(bucket(), Key :: term()) -> {ok, Value :: term()} | not_found.
%% Creates or replaces the value of Key.
-callback kv_put(bucket(), Key :: term(), Value :: term()) -> ok.
%% Removes Key (ok also when it was absent).
-callback kv_delete(bucket(), Key :: term()) -> ok.
%% Every key of the bucket, in no order; may scan everything (not for a hot path).
-callback kv_keys(bucket()) -> [term()].
%% Messages held for every user together (statistics: read once a second, so
%% it must be cheap, e.g. a table's size rather than a scan).
-callback offline_total() -> non_neg_integer().

-define(BACKEND_KEY, {?MODULE, backend}).

%% @doc Starts the configured backend; `{error, Text}' on any failure.
-spec init() -> ok | {error, string()}.
init() ->
    Mod = case throng_config:get([storage, backend]) of
              mnesia -> throng_storage_mnesia
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

-spec offline_store(luser(), lserver(), #offline_msg{}, non_neg_integer()) -> ok | {error, full}.
offline_store(U, S, M, Max) -> (backend()):offline_store(U, S, M, Max).

-spec offline_pop(luser(), lserver()) -> [#offline_msg{}].
offline_pop(U, S) -> (backend()):offline_pop(U, S).

-spec offline_count(luser(), lserver()) -> non_neg_integer().
offline_count(U, S) -> (backend()):offline_count(U, S).

%%% Key-value store of extension modules

%% @doc The value stored under Key in Bucket.
-spec kv_get(bucket(), term()) -> {ok, term()} | not_found.
kv_get(B, K) -> (backend()):kv_get(B, K).

%% @doc Stores Value under Key in Bucket (replacing any); durable when it returns.
-spec kv_put(bucket(), term(), term()) -> ok.
kv_put(B, K, V) -> (backend()):kv_put(B, K, V).

%% @doc Removes Key from Bucket (ok also when absent); durable when it returns.
-spec kv_delete(bucket(), term()) -> ok.
kv_delete(B, K) -> (backend()):kv_delete(B, K).

%% @doc Every key in Bucket, in no order. Scans the store: for
%% administration and tests, not for a hot path.
-spec kv_keys(bucket()) -> [term()].
kv_keys(B) -> (backend()):kv_keys(B).
-spec offline_total() -> non_neg_integer().
offline_total() -> (backend()):offline_total().
