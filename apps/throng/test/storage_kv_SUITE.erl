%% @doc The key-value store for extension modules (throng_storage:kv_*) on
%% both backends (groups mnesia and pgsql): values by bucket and key,
%% buckets kept apart, keys of any term, and values that survive a restart
%% of the application.
-module(storage_kv_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-compile([export_all, nowarn_export_all]).

-define(KV, throng_storage).

all() ->
    [{group, mnesia}, {group, pgsql}].

groups() ->
    throng_ct:backend_groups([put_get_delete, buckets_are_separate, keys_of_a_bucket,
                              keys_are_any_term, values_survive_restart,
                              put_soon_is_read_back_and_kept]).

init_per_group(Group, Config) ->
    throng_ct:init_backend(Group, Config).

end_per_group(_Group, Config) ->
    throng_ct:end_backend(Config).

init_per_testcase(_TC, Config) ->
    throng_ct:start_backend(Config),
    Config.

end_per_testcase(_TC, _Config) ->
    throng_ct:stop().

%%% Cases

%% A value is read back as stored, replaced by a later put, and gone after a
%% delete; deleting an absent key is ok.
put_get_delete(_Config) ->
    ?assertEqual(not_found, ?KV:kv_get(mod_a, k)),
    ok = ?KV:kv_put(mod_a, k, #{count => 1}),
    ?assertEqual({ok, #{count => 1}}, ?KV:kv_get(mod_a, k)),
    ok = ?KV:kv_put(mod_a, k, [other, value]),
    ?assertEqual({ok, [other, value]}, ?KV:kv_get(mod_a, k)),
    ok = ?KV:kv_delete(mod_a, k),
    ?assertEqual(not_found, ?KV:kv_get(mod_a, k)),
    ok = ?KV:kv_delete(mod_a, k).

%% The same key in two buckets holds two values.
buckets_are_separate(_Config) ->
    ok = ?KV:kv_put(mod_a, k, a),
    ok = ?KV:kv_put(mod_b, k, b),
    ?assertEqual({ok, a}, ?KV:kv_get(mod_a, k)),
    ?assertEqual({ok, b}, ?KV:kv_get(mod_b, k)),
    ok = ?KV:kv_delete(mod_a, k),
    ?assertEqual({ok, b}, ?KV:kv_get(mod_b, k)).

%% kv_keys lists the keys of one bucket only.
keys_of_a_bucket(_Config) ->
    ?assertEqual([], ?KV:kv_keys(mod_a)),
    [ok = ?KV:kv_put(mod_a, N, N * N) || N <- lists:seq(1, 5)],
    ok = ?KV:kv_put(mod_b, 99, x),
    ?assertEqual([1, 2, 3, 4, 5], lists:sort(?KV:kv_keys(mod_a))),
    ?assertEqual([99], ?KV:kv_keys(mod_b)).

%% Keys are compared exactly (1 and 1.0 differ); tuples of binaries, the
%% usual per-user key, work.
keys_are_any_term(_Config) ->
    User = {<<"alice">>, <<"localhost">>},
    ok = ?KV:kv_put(mod_a, User, <<"prefs">>),
    ok = ?KV:kv_put(mod_a, 1, integer),
    ok = ?KV:kv_put(mod_a, 1.0, float),
    ?assertEqual({ok, <<"prefs">>}, ?KV:kv_get(mod_a, User)),
    ?assertEqual({ok, integer}, ?KV:kv_get(mod_a, 1)),
    ?assertEqual({ok, float}, ?KV:kv_get(mod_a, 1.0)).

%% What was put (and not deleted) is there after the application (and
%% Mnesia) are stopped and started again on the same directory or database.
values_survive_restart(_Config) ->
    ok = ?KV:kv_put(mod_a, kept, {1, <<"one">>}),
    ok = ?KV:kv_put(mod_a, gone, 2),
    ok = ?KV:kv_delete(mod_a, gone),
    throng_ct:restart(),
    ?assertEqual({ok, {1, <<"one">>}}, ?KV:kv_get(mod_a, kept)),
    ?assertEqual(not_found, ?KV:kv_get(mod_a, gone)),
    ?assertEqual([kept], ?KV:kv_keys(mod_a)).

%% kv_put_soon does not wait for the disk, but its writer reads the value
%% back at once, a later put_soon or put replaces it, and after a clean
%% restart (the store flushed) it is still there.
put_soon_is_read_back_and_kept(_Config) ->
    ok = ?KV:kv_put_soon(mod_a, k, 1),
    ?assertEqual({ok, 1}, ?KV:kv_get(mod_a, k)),
    ok = ?KV:kv_put_soon(mod_a, k, 2),
    ?assertEqual({ok, 2}, ?KV:kv_get(mod_a, k)),
    ok = ?KV:kv_put(mod_a, k, 3),
    ok = ?KV:kv_put_soon(mod_a, k, {4, <<"four">>}),
    ?assertEqual({ok, {4, <<"four">>}}, ?KV:kv_get(mod_a, k)),
    throng_ct:restart(),
    ?assertEqual({ok, {4, <<"four">>}}, ?KV:kv_get(mod_a, k)).
