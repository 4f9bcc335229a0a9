%% @doc Common Test support: starts the real server in the test node with a
%% private data directory and a listener on a free port, and registers users.
-module(throng_ct).

-export([start/1, start/2, start_exact/2, stop/0, register/2, register/3, config/1, mutual/2,
         start_distribution/2, wait_until/2, repo_root/0]).
-export([backend_groups/1, init_backend/2, end_backend/1, start_backend/1, start_backend/2,
         restart/0, storage_failure/1, fail_roster_reads/1]).
-export([socket_backend_group/1, init_socket_backend/1]).

-include("throng.hrl").
-include_lib("stdlib/include/assert.hrl").

%% @doc Starts Throng with test defaults (domain localhost, port 0, data in
%% the suite's priv_dir) merged with Overrides (a config map, atom keys).
%% In the group of {@link socket_backend_group/1} every listener runs on
%% the socket backend.
-spec start(list()) -> ok.
start(CTConfig) ->
    start(CTConfig, #{}).

-spec start(list(), map()) -> ok.
start(CTConfig, Overrides) ->
    Dir = filename:join(proplists:get_value(priv_dir, CTConfig),
                        "data-" ++ integer_to_list(erlang:unique_integer([positive]))),
    Config = config(Overrides#{data_dir => list_to_binary(Dir)}),
    ok = application:set_env(throng, config, inet_backend(CTConfig, Config)),
    {ok, _} = application:ensure_all_started(throng),
    ok.

%%% Suites that run on both inet backends

%% @doc A group `socket_backend' running Cases again with every listener
%% on OTP's socket backend (`inet_backend: socket') instead of the inet
%% driver; the suite's init_per_group calls {@link init_socket_backend/1}.
-spec socket_backend_group([atom()]) -> {socket_backend, [], [atom()]}.
socket_backend_group(Cases) ->
    {socket_backend, [], Cases}.

-spec init_socket_backend(list()) -> list().
init_socket_backend(Config) ->
    [{inet_backend, socket} | Config].

inet_backend(CTConfig, #{listen := Listeners} = Config) ->
    case proplists:get_value(inet_backend, CTConfig) of
        undefined -> Config;
        Backend -> Config#{listen := [L#{inet_backend => Backend} || L <- Listeners]}
    end.

%% @doc Starts Throng with the test defaults but exactly these modules (the
%% defaults of start/2 would merge into the map): a module left out is off.
-spec start_exact(list(), #{atom() => map()}) -> ok.
start_exact(CTConfig, Modules) ->
    Dir = filename:join(proplists:get_value(priv_dir, CTConfig),
                        "data-" ++ integer_to_list(erlang:unique_integer([positive]))),
    Config = config(#{data_dir => list_to_binary(Dir)}),
    ok = application:set_env(throng, config, Config#{modules => Modules}),
    {ok, _} = application:ensure_all_started(throng),
    ok.

%%% Suites that run on both storage backends

%% @doc Groups `mnesia' and `pgsql', each running every case of Cases.
-spec backend_groups([atom()]) -> [{mnesia | pgsql, [], [atom()]}].
backend_groups(Cases) ->
    [{mnesia, [], Cases}, {pgsql, [], Cases}].

%% @doc In init_per_group: the group's backend; the pgsql group gets a
%% private PostgreSQL server ({@link throng_pg}), stopped by end_backend/1.
-spec init_backend(atom(), list()) -> list().
init_backend(pgsql, Config) ->
    [{backend, pgsql}, {pg, throng_pg:start()} | Config];
init_backend(Group, Config) ->
    [{backend, Group} | Config].

-spec end_backend(list()) -> ok.
end_backend(Config) ->
    case proplists:get_value(pg, Config) of
        undefined -> ok;
        PG -> throng_pg:stop(PG)
    end.

-spec start_backend(list()) -> ok.
start_backend(Config) ->
    start_backend(Config, #{}).

%% @doc As start/2, on the group's backend: with pgsql, on a new empty
%% database of the group's server.
-spec start_backend(list(), map()) -> ok.
start_backend(Config, Overrides) ->
    case proplists:get_value(pg, Config) of
        undefined ->
            start(Config, Overrides);
        PG ->
            Storage = throng_pg:storage(PG, throng_pg:new_database(PG)),
            start(Config, deep_merge(Overrides, #{storage => Storage}))
    end.

%% @doc Stops the application and starts it again with the same
%% configuration: the same data directory and database.
-spec restart() -> ok.
restart() ->
    ok = application:stop(throng),
    _ = application:stop(mnesia),
    {ok, _} = application:ensure_all_started(throng),
    ok.

%% @doc The Reason of the `error({storage_failed, Reason})' Fun raises;
%% fails the test if Fun returns.
-spec storage_failure(fun(() -> term())) -> throng_storage:failure().
storage_failure(Fun) ->
    try Fun() of
        Result -> ct:fail({returned, Result})
    catch
        error:{storage_failed, Reason} -> Reason
    end.

%% @doc From now on, reads of User@localhost's roster on this node (the
%% Mnesia backend) fail as a store that does not answer; other reads are
%% the store's. meck:unload(throng_storage_mnesia) ends it. Runs on a
%% cluster node through erpc: the mock outlives the call.
-spec fail_roster_reads(binary()) -> ok.
fail_roster_reads(User) ->
    ok = meck:new(throng_storage_mnesia, [passthrough, no_link]),
    ok = meck:expect(throng_storage_mnesia, roster_get,
                     fun(U, S) when U =:= User, S =:= <<"localhost">> ->
                             error({storage_failed, {aborted, test}});
                        (U, S) -> meck:passthrough([U, S])
                     end).

%% @doc The test configuration map.
-spec config(map()) -> map().
config(Overrides) ->
    Listener = maps:merge(#{port => 0, ip => <<"127.0.0.1">>, starttls => optional},
                          maps:get(listener, Overrides, #{})),
    Base = #{hosts => [<<"localhost">>, <<"example.org">>],
             loglevel => notice,
             listen => [Listener],
             auth => #{scram_iterations => 64},
             %% Every default module, without the server's keepalive pings.
             modules => maps:merge(throng_config_spec:default_modules(),
                                   #{ping => #{interval => 0}})},
    deep_merge(Base, maps:remove(listener, Overrides)).

deep_merge(A, B) ->
    maps:fold(fun(K, V, Acc) when is_map(V) ->
                      Acc#{K => deep_merge(maps:get(K, Acc, #{}), V)};
                 (K, V, Acc) -> Acc#{K => V}
              end, A, B).

-spec stop() -> ok.
stop() ->
    _ = application:stop(throng),
    _ = application:stop(mnesia),
    application:unset_env(throng, config),
    ok.

%% @doc Registers user@localhost with password "password".
-spec register(binary(), binary()) -> ok.
register(User, Password) ->
    register(User, <<"localhost">>, Password).

-spec register(binary(), binary(), binary()) -> ok.
register(User, Server, Password) ->
    ok = throng_auth:register(User, Server, Password).

%% @doc A mutual subscription (both) between two localhost users, set
%% directly in storage.
-spec mutual(binary(), binary()) -> ok.
mutual(A, B) ->
    both(A, B),
    both(B, A).

both(U, C) ->
    {ok, _, _, _} = throng_storage:roster_update(
                      U, <<"localhost">>, {C, <<"localhost">>},
                      fun(_) -> {set, #roster_item{jid = {C, <<"localhost">>},
                                                   subscription = both}} end),
    ok.

%% @doc The repository's root: THRONG_ROOT, or five levels above this
%% module's directory (.../_build/PROFILE/lib/throng/test/throng_ct.beam).
-spec repo_root() -> file:filename().
repo_root() ->
    case os:getenv("THRONG_ROOT") of
        R when is_list(R), R =/= "" -> R;
        _ -> up(filename:dirname(code:which(?MODULE)), 5)
    end.

up(Dir, 0) -> Dir;
up(Dir, N) -> up(filename:dirname(Dir), N - 1).

%% Makes this node distributed. A fresh machine has no epmd running (only
%% `erl -sname` starts one, net_kernel:start/1 does not), so start it and
%% wait until it answers before registering.
-spec start_distribution(atom(), shortnames | longnames) -> {ok, pid()} | {error, term()}.
start_distribution(Name, NameType) ->
    ok = ensure_epmd(50),
    net_kernel:start([Name, NameType]).

ensure_epmd(0) ->
    {error, epmd_not_answering};
ensure_epmd(Tries) ->
    case erl_epmd:names() of
        {ok, _} ->
            ok;
        {error, _} ->
            _ = os:cmd("epmd -daemon"),
            timer:sleep(100),
            ensure_epmd(Tries - 1)
    end.

%% @doc Waits until F() is true, checking every 50 ms for at most Ms
%% milliseconds; then asserts it (a failed wait is a failed test).
-spec wait_until(fun(() -> boolean()), integer()) -> ok.
wait_until(F, Ms) when Ms =< 0 ->
    ?assert(F());
wait_until(F, Ms) ->
    case F() of
        true -> ok;
        false -> timer:sleep(50), wait_until(F, Ms - 50)
    end.
