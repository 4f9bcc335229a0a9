%% @doc The SQL of the PostgreSQL backend: every statement it runs, by name.
%% Each connection prepares all of them once, when it connects
%% ({@link throng_pgsql_conn}); {@link throng_storage_pgsql} runs them by
%% name with their parameters ($1, $2, ...). The tables are those of
%% priv/pgsql/schema.sql.
%%
%% Parameters go to the server in binary form ({@link throng_pgsql:encode/1}):
%% a list of rows travels as one array per column (`unnest'), so that a
%% batch of any size is one statement. Result columns of integer or boolean
%% type are never NULL (the driver cannot decode a NULL of those types).
-module(throng_pgsql_sql).

-export([statements/0]).

-type name() :: atom().
-export_type([name/0]).

-define(KEYS, "unnest($1::text[], $2::text[], $3::text[], $4::bigint[])").

%% @doc Every statement: its name and its SQL.
-spec statements() -> [{name(), iodata()}].
statements() ->
    accounts() ++ roster() ++ offline() ++ inflight() ++ kv() ++ mam().

accounts() ->
    [{account_insert,
      "INSERT INTO accounts (server, username, salt, iterations, sha_stored, sha_server,"
      " sha256_stored, sha256_server) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
      " ON CONFLICT DO NOTHING"},
     {account_update,
      "UPDATE accounts SET salt = $3, iterations = $4, sha_stored = $5, sha_server = $6,"
      " sha256_stored = $7, sha256_server = $8 WHERE server = $1 AND username = $2"},
     {account_get,
      "SELECT salt, iterations, sha_stored, sha_server, sha256_stored, sha256_server"
      " FROM accounts WHERE server = $1 AND username = $2"},
     %% A login's read: the account (row 0) and the kv rows of the keys
     %% given in two arrays (row i for the i-th key, if it has a value; its
     %% other columns are filled, not NULL, which the driver cannot decode
     %% in binary results).
     {login_get,
      "SELECT 0::int8, salt, iterations, sha_stored, sha_server, sha256_stored, sha256_server"
      " FROM accounts WHERE server = $1 AND username = $2"
      " UNION ALL"
      " SELECT k.i, kv.value, 0, ''::bytea, ''::bytea, ''::bytea, ''::bytea"
      " FROM unnest($3::text[], $4::bytea[]) WITH ORDINALITY AS k(bucket, key, i)"
      " JOIN kv ON kv.bucket = k.bucket AND kv.key = k.key"},
     {account_exists,
      "SELECT 1 FROM accounts WHERE server = $1 AND username = $2"},
     {account_count,
      "SELECT count(*) FROM accounts WHERE server = $1"},
     {account_delete,
      "DELETE FROM accounts WHERE server = $1 AND username = $2"},
     {account_delete_inflight,
      "DELETE FROM inflight_messages WHERE server = $1 AND username = $2"},
     {account_delete_offline,
      "DELETE FROM offline_messages WHERE server = $1 AND username = $2"},
     {account_delete_roster,
      "DELETE FROM roster_items WHERE server = $1 AND username = $2"},
     {account_delete_version,
      "DELETE FROM roster_versions WHERE server = $1 AND username = $2"},
     %% Bulk registration: one row per user in each array.
     {bulk_accounts,
      "INSERT INTO accounts (server, username, salt, iterations, sha_stored, sha_server,"
      " sha256_stored, sha256_server)"
      " SELECT $1::text, u, s, i, k1, k2, k3, k4 FROM unnest($2::text[], $3::bytea[], $4::bigint[],"
      " $5::bytea[], $6::bytea[], $7::bytea[], $8::bytea[]) AS a(u, s, i, k1, k2, k3, k4)"
      " ON CONFLICT (server, username) DO UPDATE SET salt = EXCLUDED.salt,"
      " iterations = EXCLUDED.iterations, sha_stored = EXCLUDED.sha_stored,"
      " sha_server = EXCLUDED.sha_server, sha256_stored = EXCLUDED.sha256_stored,"
      " sha256_server = EXCLUDED.sha256_server"},
     {bulk_clear_rosters,
      "DELETE FROM roster_items WHERE server = $1 AND username = ANY($2::text[])"},
     %% One row per item; groups as array literals (text), one per item.
     {bulk_roster_items,
      "INSERT INTO roster_items (server, username, contact_server, contact_user, name,"
      " subscription, ask, approved, groups)"
      " SELECT $1::text, u, cs, cu, n, s, a, p, g::text[] FROM unnest($2::text[], $3::text[],"
      " $4::text[], $5::text[], $6::text[], $7::text[], $8::boolean[], $9::text[])"
      " AS i(u, cs, cu, n, s, a, p, g)"
      " ON CONFLICT (server, username, contact_server, contact_user) DO UPDATE SET"
      " name = EXCLUDED.name, subscription = EXCLUDED.subscription, ask = EXCLUDED.ask,"
      " approved = EXCLUDED.approved, groups = EXCLUDED.groups"},
     {bulk_versions,
      "INSERT INTO roster_versions (server, username, version)"
      " SELECT $1::text, u, 1 FROM unnest($2::text[]) AS v(u)"
      " ON CONFLICT (server, username) DO UPDATE SET version = 1"}].

-define(ITEM_COLUMNS, "contact_user, contact_server, name, subscription, ask, approved, groups").

roster() ->
    %% The version and every item in one reading: a row with NULL items
    %% when there are none.
    [{roster_get,
      "SELECT coalesce((SELECT version FROM roster_versions WHERE server = $1"
      " AND username = $2), 0), r.contact_user, r.contact_server, r.name, r.subscription,"
      " r.ask, coalesce(r.approved, false), r.groups"
      " FROM (SELECT 1) AS one LEFT JOIN roster_items AS r"
      " ON r.server = $1 AND r.username = $2"},
     {roster_get_item,
      "SELECT " ?ITEM_COLUMNS " FROM roster_items WHERE server = $1 AND username = $2"
      " AND contact_server = $3 AND contact_user = $4"},
     %% The user's version row is the lock of roster changes.
     {roster_lock,
      "SELECT version FROM roster_versions WHERE server = $1 AND username = $2 FOR UPDATE"},
     {roster_version_create,
      "INSERT INTO roster_versions (server, username, version) VALUES ($1, $2, 0)"
      " ON CONFLICT DO NOTHING"},
     {roster_version_set,
      "UPDATE roster_versions SET version = $3 WHERE server = $1 AND username = $2"},
     {roster_put,
      "INSERT INTO roster_items (server, username, contact_server, contact_user, name,"
      " subscription, ask, approved, groups)"
      " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::text::text[])"
      " ON CONFLICT (server, username, contact_server, contact_user) DO UPDATE SET"
      " name = EXCLUDED.name, subscription = EXCLUDED.subscription, ask = EXCLUDED.ask,"
      " approved = EXCLUDED.approved, groups = EXCLUDED.groups"},
     {roster_delete,
      "DELETE FROM roster_items WHERE server = $1 AND username = $2"
      " AND contact_server = $3 AND contact_user = $4"}].

offline() ->
    %% Offline stores of one user, and updates of one key-value entry, one
    %% at a time: a transaction-level lock (there may be no row to lock).
    [{xact_lock,
      "SELECT pg_advisory_xact_lock($1::integer, $2::integer)"},
     %% Stored only while the user stays within $6 messages and $7 bytes.
     {offline_insert_within,
      "INSERT INTO offline_messages (server, username, stamp, sender, packet)"
      " SELECT $1::text, $2::text, $3::bigint, $4::text, $5::bytea"
      " WHERE (SELECT count(*) < $6::bigint"
      " AND coalesce(sum(bytes), 0) + octet_length($5::bytea) <= $7::bigint"
      " FROM offline_messages WHERE server = $1 AND username = $2)"},
     {offline_insert,
      "INSERT INTO offline_messages (server, username, stamp, sender, packet)"
      " VALUES ($1, $2, $3, $4, $5)"},
     {offline_count,
      "SELECT count(*) FROM offline_messages WHERE server = $1 AND username = $2"},
     {offline_exists,
      "SELECT EXISTS (SELECT 1 FROM offline_messages WHERE server = $1 AND username = $2)"},
     {offline_totals,
      "SELECT coalesce(sum(messages), 0), coalesce(sum(bytes), 0) FROM offline_totals"},
     {offline_take,
      "DELETE FROM offline_messages WHERE server = $1 AND username = $2"
      " RETURNING id, stamp, sender, packet"}].

inflight() ->
    [{inflight_insert,
      "INSERT INTO inflight_messages (server, username, node, seq, owner, stamp, sender, packet)"
      " SELECT $1::text, $2::text, $3::text, s, $4::bytea, t, f, p"
      " FROM unnest($5::bigint[], $6::bigint[], $7::text[], $8::bytea[]) AS m(s, t, f, p)"},
     {inflight_delete,
      "DELETE FROM inflight_messages WHERE (server, username, node, seq) IN"
      " (SELECT * FROM " ?KEYS ")"},
     %% Back to offline storage in one statement, in their order.
     {inflight_return,
      "WITH moved AS (DELETE FROM inflight_messages WHERE (server, username, node, seq) IN"
      " (SELECT * FROM " ?KEYS ") RETURNING server, username, seq, stamp, sender, packet)"
      " INSERT INTO offline_messages (server, username, stamp, sender, packet)"
      " SELECT server, username, stamp, sender, packet FROM moved ORDER BY stamp, seq"},
     {inflight_of_node,
      "SELECT server, username, seq, owner FROM inflight_messages WHERE node = $1"},
     {inflight_nodes,
      "SELECT DISTINCT node FROM inflight_messages"},
     {inflight_count,
      "SELECT count(*) FROM inflight_messages WHERE node = $1"}].

kv() ->
    [{kv_get, "SELECT value FROM kv WHERE bucket = $1 AND key = $2"},
     {kv_put,
      "INSERT INTO kv (bucket, key, value) VALUES ($1, $2, $3)"
      " ON CONFLICT (bucket, key) DO UPDATE SET value = EXCLUDED.value"},
     {kv_delete, "DELETE FROM kv WHERE bucket = $1 AND key = $2"},
     {kv_keys, "SELECT key FROM kv WHERE bucket = $1"}].

-define(MAM_COLUMNS, "id, with_bare, with_resource, packet").
-define(MAM_RANGE, "server = $1 AND username = $2 AND id >= $3 AND id <= $4").

%% The archive: a query reads a range of a user's ids from either end with
%% LIMIT (the primary key's order), with a peer filter of its own statement
%% so that each has a plan of its own.
mam() ->
    [{mam_insert,
      "INSERT INTO mam_messages (server, username, id, with_bare, with_resource, packet)"
      " VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING"}]
        ++ [{Name, ["SELECT " ?MAM_COLUMNS " FROM mam_messages WHERE " ?MAM_RANGE, With,
                    " ORDER BY id ", Order, " LIMIT $", Limit]}
            || {Name, With, Order, Limit} <- mam_queries()]
        ++ [{mam_query_ids,
             "SELECT " ?MAM_COLUMNS " FROM mam_messages WHERE " ?MAM_RANGE
             " AND id = ANY($5::bigint[])"
             " AND ($6::text IS NULL OR with_bare = $6) AND ($7::text IS NULL OR with_resource = $7)"
             " ORDER BY id"},
            %% The set's size and how many of it are below an id (the
            %% index of a page's first message), in one scan.
            {mam_count, "SELECT count(*), count(*) FILTER (WHERE id < $5)"
             " FROM mam_messages WHERE " ?MAM_RANGE},
            {mam_count_bare, "SELECT count(*), count(*) FILTER (WHERE id < $6)"
             " FROM mam_messages WHERE " ?MAM_RANGE " AND with_bare = $5"},
            {mam_count_full, "SELECT count(*), count(*) FILTER (WHERE id < $7)"
             " FROM mam_messages WHERE " ?MAM_RANGE " AND with_bare = $5 AND with_resource = $6"},
            {mam_delete_user, "DELETE FROM mam_messages WHERE server = $1 AND username = $2"},
            {mam_expire_age, "DELETE FROM mam_messages WHERE server = $1 AND id < $2"},
            %% Every message of the server beyond its user's newest $2.
            {mam_expire_count,
             "DELETE FROM mam_messages AS m USING (SELECT username, id, row_number() OVER"
             " (PARTITION BY username ORDER BY id DESC) AS n FROM mam_messages WHERE server = $1)"
             " AS r WHERE m.server = $1 AND m.username = r.username AND m.id = r.id AND r.n > $2"}].

mam_queries() ->
    [{mam_query_asc, "", "ASC", "5"},
     {mam_query_desc, "", "DESC", "5"},
     {mam_query_bare_asc, " AND with_bare = $5", "ASC", "6"},
     {mam_query_bare_desc, " AND with_bare = $5", "DESC", "6"},
     {mam_query_full_asc, " AND with_bare = $5 AND with_resource = $6", "ASC", "7"},
     {mam_query_full_desc, " AND with_bare = $5 AND with_resource = $6", "DESC", "7"}].
