-- Throng's PostgreSQL schema, version 2 (storage.backend: pgsql).
--
-- The file is a series of steps, each starting with a line "-- step N":
-- step N takes a database at version N - 1 to version N (step 1 creates
-- it). At start-up the pgsql backend (throng_storage_pgsql) applies every
-- step to a database that has none of these tables, and to a database at
-- an older version the steps it lacks, in one transaction; it starts only
-- on a database whose schema_version then holds the version it was built
-- for. To create the schema by hand instead (e.g. when Throng's role may not
-- create tables): psql -v ON_ERROR_STOP=1 -1 -f schema.sql DATABASE; to
-- bring an older database up by hand, run the missing steps the same way.
--
-- Users and servers are stored as Throng normalized them (stringprep).
-- Any change to this file is a new step at its end, never an edit of an
-- existing one.

-- step 1: accounts, rosters, offline messages, messages in flight, kv

CREATE TABLE schema_version (
    version integer NOT NULL
);
INSERT INTO schema_version (version) VALUES (1);

-- Accounts: SCRAM credentials only (RFC 5802, RFC 7677), never a password.
CREATE TABLE accounts (
    server text NOT NULL,
    username text NOT NULL,
    salt bytea NOT NULL,
    iterations integer NOT NULL,
    sha_stored bytea NOT NULL,
    sha_server bytea NOT NULL,
    sha256_stored bytea NOT NULL,
    sha256_server bytea NOT NULL,
    PRIMARY KEY (server, username)
);

-- Roster items (RFC 6121 section 2), one row per contact.
CREATE TABLE roster_items (
    server text NOT NULL,
    username text NOT NULL,
    contact_server text NOT NULL,
    contact_user text NOT NULL,
    name text NOT NULL,
    subscription text NOT NULL CHECK (subscription IN ('none', 'to', 'from', 'both')),
    ask text NOT NULL CHECK (ask IN ('none', 'out', 'in', 'both')),
    approved boolean NOT NULL,
    groups text[] NOT NULL,
    PRIMARY KEY (server, username, contact_server, contact_user)
);

-- The roster version of each user (XEP-0237), bumped with every change.
-- Its row is also the lock that makes roster changes of one user one at a
-- time (SELECT ... FOR UPDATE).
CREATE TABLE roster_versions (
    server text NOT NULL,
    username text NOT NULL,
    version bigint NOT NULL,
    PRIMARY KEY (server, username)
);

-- Offline messages, delivered oldest first (stamp, then id).
CREATE TABLE offline_messages (
    id bigserial PRIMARY KEY,
    server text NOT NULL,
    username text NOT NULL,
    stamp bigint NOT NULL,          -- microseconds since the epoch
    sender text NOT NULL,           -- full JID
    packet bytea NOT NULL,          -- the serialized stanza
    bytes integer GENERATED ALWAYS AS (octet_length(packet)) STORED
);
-- A user's messages, and their count and bytes, from the index alone.
CREATE INDEX offline_messages_user ON offline_messages (server, username) INCLUDE (bytes);

-- Messages and bytes of every offline message together, kept by triggers
-- (offline_total/0 and offline_bytes/0 read 16 rows, not the table). Each
-- server process writes the row of its own pid modulo 16, so concurrent
-- writers rarely wait for one another.
CREATE TABLE offline_totals (
    shard integer PRIMARY KEY,
    messages bigint NOT NULL,
    bytes bigint NOT NULL
);
INSERT INTO offline_totals (shard, messages, bytes) SELECT s, 0, 0 FROM generate_series(0, 15) s;

CREATE FUNCTION offline_totals_add(n bigint, b bigint) RETURNS void LANGUAGE sql AS $$
    UPDATE offline_totals SET messages = messages + n, bytes = bytes + b
    WHERE shard = pg_backend_pid() % 16 AND n <> 0
$$;

CREATE FUNCTION offline_totals_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM offline_totals_add(count(*), coalesce(sum(bytes), 0)) FROM new_rows;
    RETURN NULL;
END $$;

CREATE FUNCTION offline_totals_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM offline_totals_add(-count(*), -coalesce(sum(bytes), 0)) FROM old_rows;
    RETURN NULL;
END $$;

CREATE FUNCTION offline_totals_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM offline_totals_add(count(*), coalesce(sum(bytes), 0)) FROM new_rows;
    PERFORM offline_totals_add(-count(*), -coalesce(sum(bytes), 0)) FROM old_rows;
    RETURN NULL;
END $$;

CREATE FUNCTION offline_totals_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE offline_totals SET messages = 0, bytes = 0;
    RETURN NULL;
END $$;

CREATE TRIGGER offline_messages_inserted AFTER INSERT ON offline_messages
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION offline_totals_inserted();
CREATE TRIGGER offline_messages_deleted AFTER DELETE ON offline_messages
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION offline_totals_deleted();
CREATE TRIGGER offline_messages_updated AFTER UPDATE ON offline_messages
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION offline_totals_updated();
CREATE TRIGGER offline_messages_truncated AFTER TRUNCATE ON offline_messages
    FOR EACH STATEMENT EXECUTE FUNCTION offline_totals_truncated();

-- Messages in flight to XEP-0198 sessions: taken from offline storage or
-- routed to a detached session, kept until the client acknowledges them.
-- The key is the user, the Erlang node that holds the session and a number
-- unique on that node; owner is the session's pid (term_to_binary), so that
-- a node can tell the rows of dead sessions.
CREATE TABLE inflight_messages (
    server text NOT NULL,
    username text NOT NULL,
    node text NOT NULL,
    seq bigint NOT NULL,
    owner bytea NOT NULL,
    stamp bigint NOT NULL,
    sender text NOT NULL,
    packet bytea NOT NULL,
    PRIMARY KEY (server, username, node, seq)
);
-- A node's own rows (recovery at start-up, counts).
CREATE INDEX inflight_messages_node ON inflight_messages (node);

-- The key-value store of extension modules: bucket is the module, key and
-- value are Erlang terms (term_to_binary; keys in a canonical encoding, so
-- that equal terms are equal bytes).
CREATE TABLE kv (
    bucket text NOT NULL,
    key bytea NOT NULL,
    value bytea NOT NULL,
    PRIMARY KEY (bucket, key)
);

-- step 2: the message archive (XEP-0313)

-- Each user's archive of messages, in the archive's order: id is the time
-- the message was archived in microseconds since the epoch, made unique in
-- the archive (the primary key is also the index every query reads a range
-- of, from either end, with LIMIT). with_bare and with_resource are the
-- other party ('' when it has no resource); packet is the stanza, from and
-- to included.
CREATE TABLE mam_messages (
    server text NOT NULL,
    username text NOT NULL,
    id bigint NOT NULL,
    with_bare text NOT NULL,
    with_resource text NOT NULL,
    packet bytea NOT NULL,
    PRIMARY KEY (server, username, id)
);
-- The retention sweep: a server's messages older than a time.
CREATE INDEX mam_messages_age ON mam_messages (server, id);

UPDATE schema_version SET version = 2;
