%% @doc A private PostgreSQL server for a test suite: initdb into a fresh
%% directory, a server on 127.0.0.1 and a free port (and a Unix socket in
%% that directory, for the administration done here with psql), a role
%% `throng' with a password (scram-sha-256 over TCP, as a deployment would
%% have it), and a database per Throng start. PostgreSQL refuses to run as
%% root: when the tests run as root, the server and its tools run as the
%% `postgres' user (runuser), in a directory that user owns.
%%
%% Nothing is skipped: without PostgreSQL's server binaries (Debian package
%% postgresql, installed by scripts/deps.sh) start/0 fails with a message
%% that says so.
-module(throng_pg).

-export([start/0, stop/1, stop_server/1, start_server/1, ensure_server/1, new_database/1,
         storage/2, psql/3]).

-type pg() :: #{bin := file:filename(), dir := file:filename(), data := file:filename(),
                port := inet:port_number()}.
-export_type([pg/0]).

-define(ROLE, "throng").
-define(PASSWORD, "throng-test-secret").

%% @doc Creates and starts a server.
-spec start() -> pg().
start() ->
    Bin = bin_dir(),
    clean_up_after_dead_runs(Bin),
    Dir = filename:join("/tmp", "throng-pg-" ++ os:getpid() ++ "-"
                        ++ integer_to_list(erlang:unique_integer([positive]))),
    ok = file:make_dir(Dir),
    ok = own(Dir),
    Data = filename:join(Dir, "data"),
    PG = #{bin => Bin, dir => Dir, data => Data, port => free_port()},
    run(PG, "initdb", ["-D", Data, "-U", "postgres", "--auth-local=trust",
                       "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C", "--no-sync"]),
    start_server(PG),
    psql(PG, "postgres", "CREATE ROLE " ?ROLE " LOGIN PASSWORD '" ?PASSWORD "'"),
    PG.

%% @doc Stops the server and removes its directory.
-spec stop(pg()) -> ok.
stop(#{dir := Dir} = PG) ->
    stop_server(PG),
    ok = file:del_dir_r(Dir).

%% @doc Stops the server (fast shutdown: sessions are ended, committed data
%% is kept); its data stays for start_server/1.
-spec stop_server(pg()) -> ok.
stop_server(#{data := Data} = PG) ->
    run(PG, "pg_ctl", ["-D", Data, "-m", "fast", "-w", "-t", "60", "stop"]),
    ok.

%% @doc Starts the server on its data directory and port; returns when it
%% accepts connections.
-spec start_server(pg()) -> ok.
start_server(#{data := Data, dir := Dir, port := Port} = PG) ->
    Opts = io_lib:format("-p ~b -k ~ts -c listen_addresses=127.0.0.1 -c max_connections=200",
                         [Port, Dir]),
    run(PG, "pg_ctl", ["-D", Data, "-l", filename:join(Dir, "server.log"), "-o", lists:flatten(Opts),
                       "-w", "-t", "60", "start"]),
    ok.

%% @doc Starts the server unless it runs (after a test that stopped it).
-spec ensure_server(pg()) -> ok.
ensure_server(#{data := Data} = PG) ->
    case status(PG, "pg_ctl", ["-D", Data, "status"]) of
        {0, _} -> ok;
        {3, _} -> start_server(PG)
    end.

%% @doc A new empty database owned by the test role: its name.
-spec new_database(pg()) -> binary().
new_database(PG) ->
    Name = "throng_" ++ integer_to_list(erlang:unique_integer([positive])),
    psql(PG, "postgres", "CREATE DATABASE " ++ Name ++ " OWNER " ?ROLE),
    list_to_binary(Name).

%% @doc The `storage' section of Throng's configuration for a database of
%% this server.
-spec storage(pg(), binary()) -> map().
storage(#{port := Port}, Database) ->
    #{backend => pgsql,
      pgsql => #{host => <<"127.0.0.1">>, port => Port, database => Database,
                 user => <<?ROLE>>, password => <<?PASSWORD>>, pool_size => 4,
                 connect_timeout => 2000, query_timeout => 5000}}.

%% @doc Runs SQL as the superuser in a database: psql's output (unaligned,
%% tuples only).
-spec psql(pg(), string() | binary(), string()) -> string().
psql(#{dir := Dir, port := Port} = PG, Database, Sql) ->
    run(PG, "psql", ["-X", "-A", "-t", "-q", "-v", "ON_ERROR_STOP=1", "-h", Dir,
                     "-p", integer_to_list(Port), "-U", "postgres",
                     "-d", unicode:characters_to_list(Database), "-c", Sql]).

%%% Internals

%% Servers left by a test run that was killed (its directory names its OS
%% pid, which is gone): stopped and removed.
clean_up_after_dead_runs(Bin) ->
    lists:foreach(
      fun(Dir) ->
              [_, _, Pid | _] = string:split(filename:basename(Dir), "-", all),
              case filelib:is_dir("/proc/" ++ Pid) of
                  true -> ok;
                  false ->
                      _ = status(#{bin => Bin}, "pg_ctl", ["-D", filename:join(Dir, "data"),
                                                           "-m", "immediate", "-w", "stop"]),
                      _ = file:del_dir_r(Dir)
              end
      end, filelib:wildcard("/tmp/throng-pg-*-*")).

%% The newest installed server (Debian: /usr/lib/postgresql/VERSION/bin).
bin_dir() ->
    Found = [filename:dirname(F) || F <- filelib:wildcard("/usr/lib/postgresql/*/bin/initdb")],
    case lists:sort(fun(A, B) -> version(A) >= version(B) end, Found) of
        [Bin | _] -> Bin;
        [] -> error({postgresql_not_installed,
                     "no PostgreSQL server binaries (/usr/lib/postgresql/*/bin/initdb): "
                     "install the Debian package postgresql (scripts/deps.sh does)"})
    end.

version(BinDir) ->
    list_to_integer(filename:basename(filename:dirname(BinDir))).

free_port() ->
    {ok, L} = gen_tcp:listen(0, [{ip, {127, 0, 0, 1}}]),
    {ok, Port} = inet:port(L),
    ok = gen_tcp:close(L),
    Port.

root() ->
    string:trim(os:cmd("id -u")) =:= "0".

%% Under root, the directory goes to the postgres user.
own(Dir) ->
    case root() of
        false -> ok;
        true ->
            Uid = list_to_integer(string:trim(os:cmd("id -u postgres"))),
            Gid = list_to_integer(string:trim(os:cmd("id -g postgres"))),
            file:change_owner(Dir, Uid, Gid)
    end.

%% Runs a PostgreSQL program (as postgres under root); its output, or an
%% error with the command and its output when it fails. status/3: its exit
%% status and output.
run(PG, Program, Args) ->
    case status(PG, Program, Args) of
        {0, Out} -> Out;
        {Status, Out} -> error({command_failed, Program, Args, Status, Out})
    end.

status(#{bin := Bin}, Program, Args) ->
    Exe = filename:join(Bin, Program),
    {Cmd, CmdArgs} = case root() of
                         true -> {os:find_executable("runuser"), ["-u", "postgres", "--", Exe | Args]};
                         false -> {Exe, Args}
                     end,
    Port = open_port({spawn_executable, Cmd},
                     [{args, CmdArgs}, exit_status, stderr_to_stdout, binary, {cd, "/tmp"}]),
    collect(Port, []).

collect(Port, Acc) ->
    receive
        {Port, {data, D}} -> collect(Port, [D | Acc]);
        {Port, {exit_status, S}} -> {S, unicode:characters_to_list(lists:reverse(Acc))}
    after 120000 ->
            error({command_timeout, Port})
    end.
