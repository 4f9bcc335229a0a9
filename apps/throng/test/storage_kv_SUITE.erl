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
                              put_soon_is_read_back_and_kept, update_reads_changes_and_replies,
                              updates_of_one_key_one_at_a_time, nested_update_is_one_step]).

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

%% kv_update/3: the function sees what is stored, its reply is returned,
%% and its change (put, delete, keep) is what is stored after.
update_reads_changes_and_replies(_) ->
    ?assertEqual(was_absent, ?KV:kv_update(mod_a, k, fun(not_found) -> {was_absent, {put, 1}} end)),
    ?assertEqual({ok, 1}, ?KV:kv_get(mod_a, k)),
    ?assertEqual(1, ?KV:kv_update(mod_a, k, fun({ok, N}) -> {N, {put, N + 1}} end)),
    ?assertEqual({ok, 2}, ?KV:kv_get(mod_a, k)),
    ?assertEqual(same, ?KV:kv_update(mod_a, k, fun({ok, 2}) -> {same, keep} end)),
    ?assertEqual({ok, 2}, ?KV:kv_get(mod_a, k)),
    ?assertEqual(gone, ?KV:kv_update(mod_a, k, fun({ok, 2}) -> {gone, delete} end)),
    ?assertEqual(not_found, ?KV:kv_get(mod_a, k)),
    ?assertEqual(none, ?KV:kv_update(mod_a, k, fun(not_found) -> {none, delete} end)),
    %% An exception in the function changes nothing.
    ok = ?KV:kv_put(mod_a, k, 7),
    ?assertError({storage_failed, {aborted, _}},
                 ?KV:kv_update(mod_a, k, fun({ok, 7}) -> error(bad) end)),
    ?assertEqual({ok, 7}, ?KV:kv_get(mod_a, k)).

%% Updates of one key from many processes at once run one after the other:
%% no increment is lost (with kv_get then kv_put, most would be).
updates_of_one_key_one_at_a_time(_) ->
    N = 40,
    Self = self(),
    Inc = fun(not_found) -> {ok, {put, 1}};
             ({ok, V}) -> {ok, {put, V + 1}}
          end,
    Pids = [spawn_link(fun() ->
                               [ok = ?KV:kv_update(mod_a, counter, Inc) || _ <- [1, 2, 3]],
                               Self ! {done, self()}
                       end) || _ <- lists:seq(1, N)],
    [receive {done, P} -> ok after 60000 -> error(timeout) end || P <- Pids],
    ?assertEqual({ok, 3 * N}, ?KV:kv_get(mod_a, counter)).

%% An update inside another's function is part of the same step: when the
%% outer one fails after it, neither is stored. On Mnesia, whose nested
%% transactions would give that alone, the step is also made durable once,
%% at its end: one fsync, not one inside the outer transaction as well.
nested_update_is_one_step(Config) ->
    Mnesia = ?config(backend, Config) =:= mnesia,
    Mnesia andalso (ok = meck:new(throng_mnesia_sync, [passthrough, no_link])),
    ok = ?KV:kv_update(mod_a, outer,
                       fun(not_found) ->
                               ok = ?KV:kv_update(mod_b, inner, fun(not_found) -> {ok, {put, i}} end),
                               {ok, {put, o}}
                       end),
    Mnesia andalso
        begin
            ?assertEqual(1, meck:num_calls(throng_mnesia_sync, sync, [])),
            meck:unload(throng_mnesia_sync)
        end,
    ?assertEqual({{ok, o}, {ok, i}}, {?KV:kv_get(mod_a, outer), ?KV:kv_get(mod_b, inner)}),
    ?assertError({storage_failed, _},
                 ?KV:kv_update(mod_a, outer,
                               fun({ok, o}) ->
                                       ok = ?KV:kv_update(mod_b, inner, fun({ok, i}) -> {ok, delete} end),
                                       error(after_the_inner_one)
                               end)),
    ?assertEqual({{ok, o}, {ok, i}}, {?KV:kv_get(mod_a, outer), ?KV:kv_get(mod_b, inner)}).
