%% @doc The versioned schema of the PostgreSQL backend
%% (priv/pgsql/schema.sql). The file is a series of steps, each starting
%% with a line `-- step N: ...': step N takes a database at version N - 1 to
%% version N. At start-up {@link ensure/2} applies every step to a database
%% that has none of Throng's tables, and to a database at an older version
%% the steps it lacks (a migration); a newer or unknown version, or
%% Throng's tables without a version, stop the boot with a message that
%% says so. The check, the creation and a migration run in one transaction
%% under a lock, so that nodes starting together do it once, and a step that
%% fails leaves the database as it was.
-module(throng_pgsql_schema).

-export([ensure/2, file/0, steps/0]).
%% API used by tests and operators (the file an operator applies by hand,
%% its steps).
-ignore_xref([{file, 0}, {steps, 0}]).

-define(VERSION, 2).
%% Key of the advisory lock held while the schema is checked or created.
-define(LOCK, 16#7468726f).
%% Tables of every version: one of them without schema_version is a
%% damaged or foreign schema, not an empty database.
-define(TABLES, ["accounts", "roster_items", "roster_versions", "offline_messages",
                 "offline_totals", "inflight_messages", "kv"]).

%% @doc The schema file.
-spec file() -> file:filename().
file() ->
    filename:join([code:priv_dir(throng), "pgsql", "schema.sql"]).

%% @doc Creates or checks the schema on Conn; `{error, Text}' for an
%% operator when the database cannot be used.
-spec ensure(pid(), pos_integer()) -> ok | {error, string()}.
ensure(Conn, Timeout) ->
    Q = fun(Sql) -> query(Conn, Sql, Timeout) end,
    try
        _ = Q(["BEGIN; SELECT pg_advisory_xact_lock(", integer_to_list(?LOCK), ")"]),
        check_encoding(Q),
        Result = case Q("SELECT to_regclass('schema_version') IS NOT NULL") of
                     [{_, [[<<"t">>]]}] -> check_version(Q);
                     [{_, [[<<"f">>]]}] -> create(Q)
                 end,
        _ = Q("COMMIT"),
        check_fsync(Q),
        Result
    catch
        throw:{schema, Text} ->
            _ = throng_pgsql_conn:squery(Conn, "ROLLBACK", Timeout),
            {error, Text}
    end.

query(Conn, Sql, Timeout) ->
    case throng_pgsql_conn:squery(Conn, Sql, Timeout) of
        {ok, Results} -> Results;
        {error, {pgsql, Fields}} ->
            fail("the database refused ~ts: ~ts",
                 [first_line(Sql), proplists:get_value(message, Fields, <<"?">>)]);
        {error, {connection, Why}} ->
            fail("the connection broke while checking the schema: ~0tp", [Why])
    end.

%% Text goes in and out as UTF-8; another server encoding would change or
%% refuse names.
check_encoding(Q) ->
    case Q("SHOW server_encoding") of
        [{_, [[<<"UTF8">>]]}] -> ok;
        [{_, [[Other]]}] ->
            fail("the database's encoding is ~ts; Throng needs UTF8 (CREATE DATABASE ... "
                 "ENCODING 'UTF8' TEMPLATE template0)", [Other])
    end.

check_version(Q) ->
    case version(Q) of
        ?VERSION -> ok;
        N when N > ?VERSION ->
            fail("the database has schema version ~b, newer than this Throng's (~b): "
                 "run a Throng that knows it", [N, ?VERSION]);
        N when N >= 1 ->
            migrate(Q, N);
        N ->
            fail("the database has schema version ~b, which this Throng (~b) does not "
                 "know", [N, ?VERSION])
    end.

version(Q) ->
    case Q("SELECT version FROM schema_version") of
        [{_, [[V]]}] -> binary_to_integer(V);
        [{_, Rows}] -> fail("schema_version must hold one row, it holds ~b", [length(Rows)])
    end.

%% The steps after From, in order; each must leave its own version.
migrate(Q, From) ->
    lists:foreach(fun({N, Sql}) ->
                          _ = Q(Sql),
                          version(Q) =:= N orelse
                              fail("step ~b of ~ts did not set the schema version to ~b",
                                   [N, file(), N])
                  end, [Step || {N, _} = Step <- steps(), N > From]),
    logger:notice(#{what => pgsql_schema_migrated, from => From, to => ?VERSION}),
    ok.

%% @doc The steps of the schema file, `{N, Sql}' in order: step N takes a
%% database at version N - 1 to version N.
-spec steps() -> [{pos_integer(), binary()}].
steps() ->
    Bin = case file:read_file(file()) of
              {ok, B} -> B;
              {error, E} -> fail("cannot read ~ts: ~ts", [file(), file:format_error(E)])
          end,
    %% The header (comments) before the first step is dropped.
    [_Header | Parts] = re:split(Bin, "^-- step ([0-9]+):", [multiline]),
    Steps = pairs(Parts),
    [N || {N, _} <- Steps] =:= lists:seq(1, ?VERSION) orelse
        fail("~ts holds steps ~w, not 1 to ~b", [file(), [N || {N, _} <- Steps], ?VERSION]),
    Steps.

pairs([N, Sql | Rest]) -> [{binary_to_integer(N), <<"-- step ", N/binary, ":", Sql/binary>>}
                           | pairs(Rest)];
pairs([]) -> [].

create(Q) ->
    Found = [T || T <- ?TABLES,
                  Q(["SELECT to_regclass('", T, "') IS NOT NULL"]) =:= [{<<"SELECT 1">>, [[<<"t">>]]}]],
    Found =:= [] orelse
        fail("the database has table(s) ~ts but no schema_version: not a Throng schema, or a "
             "damaged one; use an empty database", [lists:join(", ", Found)]),
    lists:foreach(fun({_N, Sql}) -> Q(Sql) end, steps()),
    ?VERSION =:= version(Q) orelse
        fail("~ts did not set the schema version to ~b", [file(), ?VERSION]),
    logger:notice(#{what => pgsql_schema_created, version => ?VERSION}),
    ok.

%% Without fsync the server acknowledges commits it may lose in a crash:
%% Throng runs, and says so.
check_fsync(Q) ->
    case Q("SHOW fsync") of
        [{_, [[<<"on">>]]}] -> ok;
        _ -> logger:warning(#{what => pgsql_fsync_off,
                              text => "the PostgreSQL server runs with fsync off: "
                                      "acknowledged writes can be lost in a crash"})
    end.

first_line(Sql) ->
    hd(string:split(iolist_to_binary(Sql), "\n")).

-spec fail(io:format(), [term()]) -> no_return().
fail(Format, Args) ->
    throw({schema, lists:flatten(io_lib:format(Format, Args))}).
