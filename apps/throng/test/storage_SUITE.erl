%% @doc The storage behaviour's contract (throng_storage), checked through
%% throng_storage itself on both backends: every case runs in group mnesia
%% and in group pgsql (a private PostgreSQL server, throng_pg). Accounts,
%% bulk registration, rosters (with concurrent read-modify-write changes
%% that must lose no update), offline messages and their limits and totals,
%% messages in flight (claim, return, recover), the key-value store with
%% term keys, the message archive (ids, ranges from either end, filters,
%% expiry), and failures (storage_failed, nothing changed).
%%
%% Group pgsql_only: what only the PostgreSQL backend has: the schema and
%% its version at start-up, a migration from an older version, a database
%% that goes away and comes back, data kept across a restart of the
%% server.
%%
%% Group mnesia_only: what only the Mnesia backend has (a batch's one
%% fsync, made only when something in it wrote).
-module(storage_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").
-include("throng.hrl").

-compile([export_all, nowarn_export_all]).

-define(S, <<"localhost">>).
-define(ST, throng_storage).

all() ->
    [{group, mnesia}, {group, pgsql}, {group, pgsql_only}, {group, mnesia_only}].

groups() ->
    throng_ct:backend_groups(contract()) ++
        [{pgsql_only, [], [schema_is_created_and_versioned, older_schema_is_migrated,
                           newer_schema_is_refused,
                           foreign_tables_are_refused, unreachable_database_stops_the_boot,
                           database_down_fails_fast_and_comes_back,
                           committed_data_survives_a_server_restart,
                           orphans_go_back_after_an_outage,
                           claim_with_an_unknown_commit_puts_back,
                           a_silent_server_does_not_stop_reconnecting,
                           a_statement_that_waits_too_long_is_cancelled,
                           a_borrower_killed_in_a_transaction_leaks_nothing,
                           idle_connections_give_their_heap_back]},
         {mnesia_only, [], [batch_fsyncs_only_what_it_wrote]}].

contract() ->
    [accounts, login_read_brings_the_keys, remove_account_takes_everything, bulk_create_replaces,
     roster_update_results_and_versions, roster_items_round_trip,
     concurrent_roster_updates_lose_nothing, failing_roster_fun_changes_nothing,
     offline_limits, concurrent_offline_stores_respect_the_limit, offline_totals_follow_the_store,
     inflight_claim_return_delete, inflight_recover_orphans_and_all, inflight_nodes,
     kv_term_keys, batch_returns_the_result,
     mam_store_takes_the_next_free_id, mam_store_many_keeps_each_in_its_archive,
     mam_query_reads_either_end_of_a_range,
     mam_filters_and_counts, mam_delete_user_and_expire].

init_per_group(pgsql_only, Config) ->
    throng_ct:init_backend(pgsql, Config);
init_per_group(mnesia_only, Config) ->
    throng_ct:init_backend(mnesia, Config);
init_per_group(Group, Config) ->
    throng_ct:init_backend(Group, Config).

end_per_group(_Group, Config) ->
    throng_ct:end_backend(Config).

init_per_testcase(TC, Config) ->
    case lists:member(TC, [batch_fsyncs_only_what_it_wrote | contract()]) of
        true -> throng_ct:start_backend(Config);
        false -> ok
    end,
    Config.

end_per_testcase(_TC, _Config) ->
    throng_ct:stop().

%%% Helpers

creds(Password) ->
    throng_auth:make_creds(Password).

msg(Stamp, Body) ->
    #offline_msg{timestamp = Stamp, from = <<"bob@localhost/x">>,
                 packet = <<"<message>", Body/binary, "</message>">>}.

body(#offline_msg{packet = <<"<message>", Rest/binary>>}) ->
    binary:part(Rest, 0, byte_size(Rest) - byte_size(<<"</message>">>)).

item(Contact) ->
    #roster_item{jid = {Contact, ?S}}.

failure(Fun) ->
    throng_ct:storage_failure(Fun).

%% Runs F in N processes at once; their results.
parallel(N, F) ->
    Self = self(),
    Pids = [spawn_link(fun() -> receive go -> ok end, Self ! {done, self(), catch F(I)} end)
            || I <- lists:seq(1, N)],
    [P ! go || P <- Pids],
    [receive {done, P, R} -> R after 60000 -> ct:fail({no_result, P}) end || P <- Pids].

%%% The contract, on both backends

%% Accounts: created once, credentials read back exactly, changed only when
%% the account exists, counted per domain.
accounts(_) ->
    C1 = creds(<<"one">>),
    ok = ?ST:create_account(<<"alice">>, ?S, C1),
    ?assertEqual({error, exists}, ?ST:create_account(<<"alice">>, ?S, creds(<<"x">>))),
    ?assertEqual({ok, C1}, ?ST:get_credentials(<<"alice">>, ?S)),
    ?assertEqual(not_found, ?ST:get_credentials(<<"alice">>, <<"example.org">>)),
    ?assert(?ST:account_exists(<<"alice">>, ?S)),
    ?assertNot(?ST:account_exists(<<"nobody">>, ?S)),
    C2 = creds(<<"two">>),
    ok = ?ST:set_credentials(<<"alice">>, ?S, C2),
    ?assertEqual({ok, C2}, ?ST:get_credentials(<<"alice">>, ?S)),
    ?assertEqual({error, not_found}, ?ST:set_credentials(<<"nobody">>, ?S, C2)),
    ok = ?ST:create_account(<<"bob">>, ?S, C1),
    ok = ?ST:create_account(<<"bob">>, <<"example.org">>, C1),
    ?assertEqual(2, ?ST:count_accounts(?S)),
    ?assertEqual(1, ?ST:count_accounts(<<"example.org">>)),
    %% A name in any script, stored as given.
    ok = ?ST:create_account(<<"jürgen-日本"/utf8>>, ?S, C1),
    ?assertEqual({ok, C1}, ?ST:get_credentials(<<"jürgen-日本"/utf8>>, ?S)).

%% login_read/3: the credentials and the keys' values in one read, in the
%% order asked (a key asked twice is answered twice; a missing one is
%% not_found); not_found without the account, whatever the keys hold.
login_read_brings_the_keys(_) ->
    C = creds(<<"one">>),
    ok = ?ST:create_account(<<"alice">>, ?S, C),
    ok = ?ST:kv_put(mod_a, {<<"alice">>, ?S}, #{since => 1}),
    ok = ?ST:kv_put(mod_b, {<<"alice">>, ?S, photo}, <<"hash">>),
    ok = ?ST:kv_put(mod_b, {<<"bob">>, ?S, photo}, <<"bob's">>),
    ?assertEqual({ok, C, []}, ?ST:login_read(<<"alice">>, ?S, [])),
    ?assertEqual({ok, C, [{ok, <<"hash">>}, not_found, {ok, #{since => 1}}, {ok, <<"hash">>}]},
                 ?ST:login_read(<<"alice">>, ?S, [{mod_b, {<<"alice">>, ?S, photo}},
                                                 {mod_a, {<<"carol">>, ?S}},
                                                 {mod_a, {<<"alice">>, ?S}},
                                                 {mod_b, {<<"alice">>, ?S, photo}}])),
    %% The same key in another bucket is another key.
    ?assertEqual({ok, C, [not_found]},
                 ?ST:login_read(<<"alice">>, ?S, [{mod_c, {<<"alice">>, ?S}}])),
    ?assertEqual(not_found, ?ST:login_read(<<"bob">>, ?S, [{mod_b, {<<"bob">>, ?S, photo}}])),
    C2 = creds(<<"two">>),
    ok = ?ST:set_credentials(<<"alice">>, ?S, C2),
    ?assertMatch({ok, C2, [{ok, _}]},
                 ?ST:login_read(<<"alice">>, ?S, [{mod_a, {<<"alice">>, ?S}}])).

%% Removing an account removes its roster, offline messages and messages in
%% flight, and nobody else's.
remove_account_takes_everything(_) ->
    [ok = ?ST:create_account(U, ?S, creds(U)) || U <- [<<"alice">>, <<"bob">>]],
    [{ok, _, _, _} = ?ST:roster_update(U, ?S, {<<"carol">>, ?S}, fun(_) -> {set, item(<<"carol">>)} end)
     || U <- [<<"alice">>, <<"bob">>]],
    [ok = ?ST:offline_store(U, ?S, msg(1, <<"m">>), unlimited) || U <- [<<"alice">>, <<"bob">>]],
    [_] = ?ST:inflight_put(<<"alice">>, ?S, self(), [msg(2, <<"f">>)]),
    ok = ?ST:remove_account(<<"alice">>, ?S),
    ?assertEqual({error, not_found}, ?ST:remove_account(<<"alice">>, ?S)),
    ?assertNot(?ST:account_exists(<<"alice">>, ?S)),
    ?assertEqual({0, []}, ?ST:roster_get(<<"alice">>, ?S)),
    ?assertEqual(0, ?ST:offline_count(<<"alice">>, ?S)),
    ?assertEqual(0, ?ST:inflight_count()),
    ?assertMatch({1, [_]}, ?ST:roster_get(<<"bob">>, ?S)),
    ?assertEqual(1, ?ST:offline_count(<<"bob">>, ?S)),
    ?assertEqual(1, ?ST:offline_total()).

%% bulk_create writes many users (more than one batch) with their rosters,
%% replacing accounts and rosters that were there; versions are 1.
bulk_create_replaces(_) ->
    C = creds(<<"bulk">>),
    ok = ?ST:create_account(<<"u1">>, ?S, creds(<<"old">>)),
    {ok, _, _, _} = ?ST:roster_update(<<"u1">>, ?S, {<<"gone">>, ?S}, fun(_) -> {set, item(<<"gone">>)} end),
    N = 1203,
    Name = fun(I) -> <<"u", (integer_to_binary(I))/binary>> end,
    Users = [{Name(I), C, [#roster_item{jid = {Name(I + 1), ?S}, subscription = both},
                           #roster_item{jid = {Name(I + 2), ?S}, subscription = both}]}
             || I <- lists:seq(1, N)],
    ok = ?ST:bulk_create(?S, Users),
    ?assertEqual(N, ?ST:count_accounts(?S)),
    ?assertEqual({ok, C}, ?ST:get_credentials(<<"u1">>, ?S)),
    {1, Items} = ?ST:roster_get(<<"u1">>, ?S),
    ?assertEqual([{Name(2), ?S}, {Name(3), ?S}], lists:sort([J || #roster_item{jid = J} <- Items])),
    ?assertEqual(#roster_item{jid = {Name(1205), ?S}, subscription = both},
                 ?ST:roster_get_item(Name(1203), ?S, {Name(1205), ?S})).

%% roster_update returns the old and new item and a version bumped only by
%% a change.
roster_update_results_and_versions(_) ->
    U = <<"alice">>,
    Bob = {<<"bob">>, ?S},
    I1 = item(<<"bob">>),
    ?assertEqual({ok, undefined, undefined, 0}, ?ST:roster_update(U, ?S, Bob, fun(_) -> keep end)),
    ?assertEqual({ok, undefined, undefined, 0}, ?ST:roster_update(U, ?S, Bob, fun(_) -> delete end)),
    ?assertEqual({ok, undefined, I1, 1}, ?ST:roster_update(U, ?S, Bob, fun(undefined) -> {set, I1} end)),
    ?assertEqual({ok, I1, I1, 1}, ?ST:roster_update(U, ?S, Bob, fun(Old) -> {set, Old} end)),
    I2 = I1#roster_item{subscription = to},
    ?assertEqual({ok, I1, I2, 2}, ?ST:roster_update(U, ?S, Bob, fun(_) -> {set, I2} end)),
    ?assertEqual({ok, I2, I2, 2}, ?ST:roster_update(U, ?S, Bob, fun(_) -> keep end)),
    ?assertEqual({2, [I2]}, ?ST:roster_get(U, ?S)),
    ?assertEqual(I2, ?ST:roster_get_item(U, ?S, Bob)),
    ?assertEqual(undefined, ?ST:roster_get_item(U, ?S, {<<"carol">>, ?S})),
    ?assertEqual({ok, I2, undefined, 3}, ?ST:roster_update(U, ?S, Bob, fun(_) -> delete end)),
    ?assertEqual({3, []}, ?ST:roster_get(U, ?S)).

%% Every field of an item comes back as it was: names and groups with
%% quotes, backslashes, commas, braces and any script; every subscription
%% and ask state; pre-approval.
roster_items_round_trip(_) ->
    Groups = [<<"plain">>, <<"with \"quotes\"">>, <<"back\\slash">>, <<"a,b">>, <<"{x}">>,
              <<" spaced ">>, <<"NULL">>, <<"Zürich 日本"/utf8>>, <<>>],
    Items = [#roster_item{jid = {<<"c", (integer_to_binary(I))/binary>>, ?S},
                          name = <<"Näme \""/utf8, (integer_to_binary(I))/binary, "\\">>,
                          subscription = Sub, ask = Ask, approved = Approved,
                          groups = lists:sublist(Groups, I rem (length(Groups) + 1))}
             || {I, {Sub, Ask, Approved}} <- lists:zip(lists:seq(1, 32),
                                                      [{S, A, P} || S <- [none, to, from, both],
                                                                    A <- [none, out, in, both],
                                                                    P <- [false, true]])],
    [{ok, _, I, _} = ?ST:roster_update(<<"alice">>, ?S, I#roster_item.jid, fun(_) -> {set, I} end)
     || I <- Items],
    {32, Got} = ?ST:roster_get(<<"alice">>, ?S),
    ?assertEqual(lists:sort(Items), lists:sort(Got)),
    [?assertEqual(I, ?ST:roster_get_item(<<"alice">>, ?S, I#roster_item.jid)) || I <- Items],
    %% Through bulk_create too.
    ok = ?ST:bulk_create(?S, [{<<"dave">>, creds(<<"d">>), Items}]),
    {1, Bulk} = ?ST:roster_get(<<"dave">>, ?S),
    ?assertEqual(lists:sort(Items), lists:sort(Bulk)).

%% Many processes change the same item at once, each adding its own group
%% by read-modify-write: every group is there in the end, and the version
%% counts every change. Others change other contacts of the same roster
%% meanwhile.
concurrent_roster_updates_lose_nothing(_) ->
    Bob = {<<"bob">>, ?S},
    N = 40,
    AddGroup = fun(I) ->
                       G = integer_to_binary(I),
                       ?ST:roster_update(<<"alice">>, ?S, Bob,
                                         fun(undefined) -> {set, (item(<<"bob">>))#roster_item{groups = [G]}};
                                            (Old) -> {set, Old#roster_item{groups = [G | Old#roster_item.groups]}}
                                         end)
               end,
    Other = fun(I) ->
                    C = <<"c", (integer_to_binary(I))/binary>>,
                    ?ST:roster_update(<<"alice">>, ?S, {C, ?S}, fun(_) -> {set, item(C)} end)
            end,
    Results = parallel(2 * N, fun(I) when I =< N -> AddGroup(I); (I) -> Other(I) end),
    [?assertMatch({ok, _, #roster_item{}, _}, R) || R <- Results],
    #roster_item{groups = Groups} = ?ST:roster_get_item(<<"alice">>, ?S, Bob),
    ?assertEqual(lists:seq(1, N), lists:sort([binary_to_integer(G) || G <- Groups])),
    {Ver, Items} = ?ST:roster_get(<<"alice">>, ?S),
    ?assertEqual(2 * N, Ver),
    ?assertEqual(N + 1, length(Items)),
    %% Each change saw its own version: all different.
    Versions = [V || {ok, _, _, V} <- Results],
    ?assertEqual(lists:seq(1, 2 * N), lists:sort(Versions)).

%% A roster function that raises aborts the change: storage_failed
%% {aborted, _}, and the roster is as before.
failing_roster_fun_changes_nothing(_) ->
    Bob = {<<"bob">>, ?S},
    {ok, _, _, 1} = ?ST:roster_update(<<"alice">>, ?S, Bob, fun(_) -> {set, item(<<"bob">>)} end),
    Before = ?ST:roster_get(<<"alice">>, ?S),
    ?assertMatch({aborted, _}, failure(fun() -> ?ST:roster_update(<<"alice">>, ?S, Bob,
                                                                   fun(_) -> error(oops) end) end)),
    ?assertMatch({aborted, _}, failure(fun() -> ?ST:roster_update(<<"alice">>, ?S, Bob,
                                                                   fun(_) -> {set, item(<<"other">>)} end) end)),
    ?assertEqual(Before, ?ST:roster_get(<<"alice">>, ?S)),
    %% And the next change works.
    ?assertMatch({ok, _, undefined, 2}, ?ST:roster_update(<<"alice">>, ?S, Bob, fun(_) -> delete end)).

%% Limits in messages and bytes per user; unlimited stores always; a full
%% user does not stop another.
offline_limits(_) ->
    M = fun(I) -> msg(I, binary:copy(<<"x">>, 100)) end,
    Size = byte_size((M(1))#offline_msg.packet),
    [ok = ?ST:offline_store(<<"alice">>, ?S, M(I), {3, 1000000}) || I <- [1, 2, 3]],
    ?assertEqual({error, full}, ?ST:offline_store(<<"alice">>, ?S, M(4), {3, 1000000})),
    ?assertEqual(3, ?ST:offline_count(<<"alice">>, ?S)),
    ok = ?ST:offline_store(<<"alice">>, ?S, M(5), unlimited),
    ?assertEqual(4, ?ST:offline_count(<<"alice">>, ?S)),
    %% Bytes: two fit exactly, the third does not.
    [ok = ?ST:offline_store(<<"bob">>, ?S, M(I), {100, 2 * Size}) || I <- [1, 2]],
    ?assertEqual({error, full}, ?ST:offline_store(<<"bob">>, ?S, M(3), {100, 2 * Size})),
    ?assertEqual({error, full}, ?ST:offline_store(<<"carol">>, ?S, M(1), {0, 1000000})),
    ?assertEqual({error, full}, ?ST:offline_store(<<"carol">>, ?S, M(1), {10, Size - 1})),
    ok = ?ST:offline_store(<<"carol">>, ?S, M(1), {10, Size}),
    ?assertEqual(7, ?ST:offline_total()),
    ?assertEqual(7 * Size, ?ST:offline_bytes()).

%% Stores racing for the last places of a user: exactly the limit is kept.
concurrent_offline_stores_respect_the_limit(_) ->
    Results = parallel(30, fun(I) -> ?ST:offline_store(<<"alice">>, ?S, msg(I, <<"m">>), {10, 1000000}) end),
    ?assertEqual(10, length([ok || ok <- Results])),
    ?assertEqual(20, length([F || {error, full} = F <- Results])),
    ?assertEqual(10, ?ST:offline_count(<<"alice">>, ?S)).

%% offline_total and offline_bytes follow stores, claims, returns and
%% account removal exactly.
offline_totals_follow_the_store(_) ->
    ?assertEqual({0, 0}, {?ST:offline_total(), ?ST:offline_bytes()}),
    [ok = ?ST:offline_store(U, ?S, msg(1, B), unlimited)
     || {U, B} <- [{<<"alice">>, <<"1">>}, {<<"alice">>, <<"22">>}, {<<"bob">>, <<"333">>}]],
    Bytes = fun(Bodies) -> lists:sum([byte_size((msg(0, B))#offline_msg.packet) || B <- Bodies]) end,
    ?assertEqual({3, Bytes([<<"1">>, <<"22">>, <<"333">>])}, {?ST:offline_total(), ?ST:offline_bytes()}),
    Claimed = ?ST:inflight_claim(<<"alice">>, ?S, self()),
    ?assertEqual({1, Bytes([<<"333">>])}, {?ST:offline_total(), ?ST:offline_bytes()}),
    ok = ?ST:inflight_return([K || {K, _} <- Claimed]),
    ?assertEqual({3, Bytes([<<"1">>, <<"22">>, <<"333">>])}, {?ST:offline_total(), ?ST:offline_bytes()}),
    ok = ?ST:create_account(<<"bob">>, ?S, creds(<<"b">>)),
    ok = ?ST:remove_account(<<"bob">>, ?S),
    ?assertEqual({2, Bytes([<<"1">>, <<"22">>])}, {?ST:offline_total(), ?ST:offline_bytes()}).

%% Messages in flight: put gives one key per message; a claim takes every
%% offline message of the user, oldest first, into flight; a return puts
%% them back (outside the limits); a delete forgets them.
inflight_claim_return_delete(_) ->
    ?assertEqual([], ?ST:inflight_put(<<"alice">>, ?S, self(), [])),
    ?assertEqual([], ?ST:inflight_claim(<<"alice">>, ?S, self())),
    Keys = ?ST:inflight_put(<<"alice">>, ?S, self(), [msg(I, integer_to_binary(I)) || I <- [1, 2]]),
    ?assertMatch([{{<<"alice">>, ?S}, _, _}, {{<<"alice">>, ?S}, _, _}], Keys),
    ?assertEqual(2, length(lists:usort(Keys))),
    ?assertEqual(2, ?ST:inflight_count()),
    %% Stored out of order; claimed by timestamp.
    [ok = ?ST:offline_store(<<"alice">>, ?S, msg(T, integer_to_binary(T)), unlimited)
     || T <- [30, 10, 20]],
    Claimed = ?ST:inflight_claim(<<"alice">>, ?S, self()),
    ?assertEqual([<<"10">>, <<"20">>, <<"30">>], [body(M) || {_, M} <- Claimed]),
    ?assertEqual([10, 20, 30], [T || {_, #offline_msg{timestamp = T}} <- Claimed]),
    ?assertEqual(0, ?ST:offline_count(<<"alice">>, ?S)),
    ?assertEqual(5, ?ST:inflight_count()),
    %% Back to storage, even past the user's limits.
    ok = ?ST:inflight_return([K || {K, _} <- Claimed]),
    ?assertEqual(3, ?ST:offline_count(<<"alice">>, ?S)),
    ?assertEqual({error, full}, ?ST:offline_store(<<"alice">>, ?S, msg(40, <<"40">>), {3, 1000000})),
    ?assertEqual(2, ?ST:inflight_count()),
    ok = ?ST:inflight_delete(Keys),
    ?assertEqual(0, ?ST:inflight_count()),
    %% Returning or deleting keys that are gone changes nothing.
    ok = ?ST:inflight_return(Keys),
    ok = ?ST:inflight_delete(Keys),
    Again = ?ST:inflight_claim(<<"alice">>, ?S, self()),
    ?assertEqual([<<"10">>, <<"20">>, <<"30">>], [body(M) || {_, M} <- Again]).

%% recover(orphans) moves back only the rows of sessions that are gone;
%% recover(all) every row of the node.
inflight_recover_orphans_and_all(_) ->
    Dead = spawn(fun() -> ok end),
    MRef = monitor(process, Dead),
    receive {'DOWN', MRef, _, _, _} -> ok end,
    _ = ?ST:inflight_put(<<"alice">>, ?S, Dead, [msg(1, <<"a1">>), msg(2, <<"a2">>)]),
    _ = ?ST:inflight_put(<<"bob">>, ?S, self(), [msg(3, <<"b">>)]),
    ?assertEqual(2, ?ST:inflight_recover(orphans)),
    ?assertEqual(2, ?ST:offline_count(<<"alice">>, ?S)),
    ?assertEqual(1, ?ST:inflight_count()),
    ?assertEqual(0, ?ST:inflight_recover(orphans)),
    ?assertEqual(1, ?ST:inflight_recover(all)),
    ?assertEqual(0, ?ST:inflight_count()),
    ?assertEqual(1, ?ST:offline_count(<<"bob">>, ?S)),
    %% Many at once (more than one batch).
    _ = ?ST:inflight_put(<<"carol">>, ?S, Dead, [msg(I, <<"c">>) || I <- lists:seq(1, 1234)]),
    ?assertEqual(1234, ?ST:inflight_recover(orphans)),
    ?assertEqual(1234, ?ST:offline_count(<<"carol">>, ?S)).

%% The nodes that have messages in flight, each once.
inflight_nodes(_) ->
    ?assertEqual([], ?ST:inflight_nodes()),
    _ = ?ST:inflight_put(<<"alice">>, ?S, self(), [msg(1, <<"a">>), msg(2, <<"b">>)]),
    _ = ?ST:inflight_put(<<"bob">>, ?S, self(), [msg(3, <<"c">>)]),
    ?assertEqual([node()], ?ST:inflight_nodes()),
    ?assertEqual(3, ?ST:inflight_recover(all)),
    ?assertEqual([], ?ST:inflight_nodes()).

%% Keys are terms compared exactly: equal terms built differently find the
%% same value, 1 and 1.0 differ; buckets are apart; values are any term.
kv_term_keys(_) ->
    MapA = maps:from_list([{K, K} || K <- lists:seq(1, 40)]),
    MapB = maps:from_list([{K, K} || K <- lists:reverse(lists:seq(1, 40))]),
    ok = ?ST:kv_put(mod_a, {user, MapA}, <<"map">>),
    ?assertEqual({ok, <<"map">>}, ?ST:kv_get(mod_a, {user, MapB})),
    Sub = binary:part(<<"xxalicexx">>, 2, 5),
    ok = ?ST:kv_put(mod_a, {Sub, ?S}, prefs),
    ?assertEqual({ok, prefs}, ?ST:kv_get(mod_a, {<<"alice">>, ?S})),
    ok = ?ST:kv_put(mod_a, 1, integer),
    ok = ?ST:kv_put(mod_a, 1.0, float),
    ?assertEqual({ok, integer}, ?ST:kv_get(mod_a, 1)),
    ?assertEqual({ok, float}, ?ST:kv_get(mod_a, 1.0)),
    ok = ?ST:kv_put(mod_a, [a, "str", <<"b">>], #{nested => [{1, 2.5}]}),
    ?assertEqual({ok, #{nested => [{1, 2.5}]}}, ?ST:kv_get(mod_a, [a, "str", <<"b">>])),
    ok = ?ST:kv_put(mod_b, 1, other),
    ?assertEqual({ok, integer}, ?ST:kv_get(mod_a, 1)),
    ?assertEqual(exact_sort([{user, MapA}, {<<"alice">>, ?S}, 1, 1.0, [a, "str", <<"b">>]]),
                 exact_sort(?ST:kv_keys(mod_a))),
    ok = ?ST:kv_put(mod_a, 1, replaced),
    ?assertEqual({ok, replaced}, ?ST:kv_get(mod_a, 1)),
    ok = ?ST:kv_delete(mod_a, 1),
    ok = ?ST:kv_delete(mod_a, 1),
    ?assertEqual(not_found, ?ST:kv_get(mod_a, 1)),
    ?assertEqual({ok, other}, ?ST:kv_get(mod_b, 1)).

%% Terms in an order that tells 1 from 1.0 (lists:sort keeps equal terms
%% in their input order).
exact_sort(Terms) ->
    lists:sort([term_to_binary(T, [deterministic]) || T <- Terms]).

%% batch/1 returns its function's result, and the writes in it are there.
batch_returns_the_result(_) ->
    ?assertEqual(done, ?ST:batch(fun() ->
                                         ok = ?ST:kv_put(mod_a, k, v),
                                         ok = ?ST:offline_store(<<"alice">>, ?S, msg(1, <<"m">>), unlimited),
                                         done
                                 end)),
    ?assertEqual({ok, v}, ?ST:kv_get(mod_a, k)),
    ?assertEqual(1, ?ST:offline_count(<<"alice">>, ?S)).

%% Mnesia: a batch fsyncs once, at its end, and only when something in it
%% wrote (a session that ends re-routing its queue to other resources
%% stores nothing, so waits for no fsync).
batch_fsyncs_only_what_it_wrote(_) ->
    MFA = {throng_mnesia_sync, sync, 0},
    _ = erlang:trace_pattern(MFA, true, [call_count]),
    Syncs = fun() -> {call_count, N} = erlang:trace_info(MFA, call_count), N end,
    try
        S0 = Syncs(),
        ?assertEqual(read, ?ST:batch(fun() -> not_found = ?ST:kv_get(mod_a, k), read end)),
        ?assertEqual(S0, Syncs()),
        ?assertEqual(done, ?ST:batch(fun() ->
                                             ok = ?ST:kv_put(mod_a, k, v),
                                             ?ST:batch(fun() -> ok = ?ST:kv_put(mod_a, k2, v) end),
                                             done
                                     end)),
        ?assertEqual(S0 + 1, Syncs()),
        ?assertEqual({ok, v}, ?ST:kv_get(mod_a, k2))
    after
        erlang:trace_pattern(MFA, false, [call_count])
    end.

%%% Message archive

mam(Id, Bare, Res) ->
    #mam_msg{id = Id, peer = {Bare, Res},
             packet = <<"<message><body>", (integer_to_binary(Id))/binary, "</body></message>">>}.

ids(Msgs) -> [Id || #mam_msg{id = Id} <- Msgs].

%% An id another message of the archive has moves on to the next free one;
%% another user's archive has ids of its own (from the one it asked for on).
mam_store_takes_the_next_free_id(_) ->
    ?assertEqual(10, ?ST:mam_store(<<"alice">>, ?S, mam(10, <<"bob@localhost">>, <<>>))),
    ?assertEqual(11, ?ST:mam_store(<<"alice">>, ?S, mam(10, <<"bob@localhost">>, <<"r">>))),
    ?assertEqual(12, ?ST:mam_store(<<"alice">>, ?S, mam(10, <<"bob@localhost">>, <<"r">>))),
    %% (At least 10: the embedded store's ids increase in a whole shard of
    %% archives, carol's may share alice's.)
    Carol = ?ST:mam_store(<<"carol">>, ?S, mam(10, <<"bob@localhost">>, <<>>)),
    ?assert(Carol >= 10),
    [M10, M11, M12] = ?ST:mam_query(<<"alice">>, ?S, #mam_filter{}, forward, 10),
    ?assertEqual({10, {<<"bob@localhost">>, <<>>}}, {M10#mam_msg.id, M10#mam_msg.peer}),
    ?assertEqual({11, {<<"bob@localhost">>, <<"r">>}}, {M11#mam_msg.id, M11#mam_msg.peer}),
    ?assertEqual(12, M12#mam_msg.id),
    %% The packet is kept byte for byte.
    ?assertEqual(<<"<message><body>10</body></message>">>, M10#mam_msg.packet).

%% Several messages in one write (a message's two copies): each in its
%% user's archive, the ids in the list's order, the next free one when
%% the wanted one is taken (by another of the same list too).
mam_store_many_keeps_each_in_its_archive(_) ->
    ?assertEqual([], ?ST:mam_store_many([])),
    [A1, B1, A2] = ?ST:mam_store_many([{<<"alice">>, ?S, mam(20, <<"bob@localhost">>, <<>>)},
                                       {<<"bob">>, ?S, mam(20, <<"alice@localhost">>, <<"r">>)},
                                       {<<"alice">>, ?S, mam(20, <<"carol@localhost">>, <<>>)}]),
    ?assertEqual({20, 21}, {A1, A2}),
    ?assert(B1 >= 20),
    ?assertEqual([{20, {<<"bob@localhost">>, <<>>}}, {21, {<<"carol@localhost">>, <<>>}}],
                 [{Id, P} || #mam_msg{id = Id, peer = P}
                                 <- ?ST:mam_query(<<"alice">>, ?S, #mam_filter{}, forward, 10)]),
    ?assertEqual([{B1, {<<"alice@localhost">>, <<"r">>}}],
                 [{Id, P} || #mam_msg{id = Id, peer = P}
                                 <- ?ST:mam_query(<<"bob">>, ?S, #mam_filter{}, forward, 10)]).

%% A range is read from its start (forward) or its end (backward), at most
%% Limit, always in ascending order; other users' messages never show.
mam_query_reads_either_end_of_a_range(_) ->
    [?ST:mam_store(<<"alice">>, ?S, mam(Id, <<"bob@localhost">>, <<>>)) || Id <- lists:seq(1, 20)],
    [?ST:mam_store(U, ?S, mam(Id, <<"bob@localhost">>, <<>>))
     || U <- [<<"alic">>, <<"alicf">>, <<"alice2">>], Id <- [5, 50]],
    Q = fun(F, Dir, N) -> ids(?ST:mam_query(<<"alice">>, ?S, F, Dir, N)) end,
    ?assertEqual([1, 2, 3], Q(#mam_filter{}, forward, 3)),
    ?assertEqual([18, 19, 20], Q(#mam_filter{}, backward, 3)),
    ?assertEqual([5, 6], Q(#mam_filter{min = 5, max = 12}, forward, 2)),
    ?assertEqual([11, 12], Q(#mam_filter{min = 5, max = 12}, backward, 2)),
    ?assertEqual(lists:seq(5, 12), Q(#mam_filter{min = 5, max = 12}, backward, 100)),
    ?assertEqual([], Q(#mam_filter{min = 21}, forward, 5)),
    ?assertEqual([], Q(#mam_filter{max = 0}, backward, 5)),
    ?assertEqual([], Q(#mam_filter{}, forward, 0)),
    ?assertEqual([], ids(?ST:mam_query(<<"nobody">>, ?S, #mam_filter{}, backward, 5))).

%% The peer filter (bare: any resource; full: that one) and the ids filter,
%% with ranges and counts.
mam_filters_and_counts(_) ->
    Peers = [{<<"bob@localhost">>, <<>>}, {<<"bob@localhost">>, <<"r1">>},
             {<<"carol@localhost">>, <<"r1">>}, {<<"bob@localhost">>, <<"r2">>}],
    [?ST:mam_store(<<"alice">>, ?S, (mam(Id, <<>>, <<>>))#mam_msg{peer = lists:nth(1 + Id rem 4, Peers)})
     || Id <- lists:seq(1, 12)],
    Bob = {<<"bob@localhost">>, any},
    R1 = {<<"bob@localhost">>, <<"r1">>},
    Q = fun(F, Dir, N) -> ids(?ST:mam_query(<<"alice">>, ?S, F, Dir, N)) end,
    C = fun(F) -> ?ST:mam_count(<<"alice">>, ?S, F) end,
    ?assertEqual([1, 3, 4, 5, 7, 8, 9, 11, 12], Q(#mam_filter{with = Bob}, forward, 100)),
    ?assertEqual([1, 5, 9], Q(#mam_filter{with = R1}, forward, 100)),
    ?assertEqual([9], Q(#mam_filter{with = R1}, backward, 1)),
    ?assertEqual([5], Q(#mam_filter{with = R1, min = 2, max = 8}, forward, 100)),
    ?assertEqual([2, 6, 10], Q(#mam_filter{with = {<<"carol@localhost">>, any}}, forward, 100)),
    ?assertEqual([], Q(#mam_filter{with = {<<"carol@localhost">>, <<>>}}, forward, 100)),
    ?assertEqual({12, 9, 3, 1}, {C(#mam_filter{}), C(#mam_filter{with = Bob}), C(#mam_filter{with = R1}),
                                 C(#mam_filter{with = R1, min = 2, max = 8})}),
    Ids = #mam_filter{ids = [12, 3, 5, 99, 1]},
    ?assertEqual([1, 3, 5, 12], Q(Ids, forward, 100)),
    ?assertEqual([1, 3], Q(Ids, forward, 2)),
    ?assertEqual([5, 12], Q(Ids, backward, 2)),
    ?assertEqual([1, 5], Q(Ids#mam_filter{with = R1}, forward, 100)),
    ?assertEqual([3, 5], Q(Ids#mam_filter{min = 2, max = 11}, forward, 100)),
    ?assertEqual({4, 2}, {C(Ids), C(Ids#mam_filter{with = R1})}).

%% A user's archive goes whole; expiry removes by age and beyond the newest
%% N of each user, on one server only, and says how many it removed.
mam_delete_user_and_expire(_) ->
    Store = fun(U, S, Ids) -> [?ST:mam_store(U, S, mam(Id, <<"x@y">>, <<>>)) || Id <- Ids] end,
    _ = Store(<<"alice">>, ?S, lists:seq(1, 10)),
    _ = Store(<<"bob">>, ?S, lists:seq(1, 3)),
    _ = Store(<<"carol">>, ?S, lists:seq(1, 1200)),
    _ = Store(<<"alice">>, <<"example.org">>, lists:seq(1, 10)),
    Ids = fun(U, S) -> ids(?ST:mam_query(U, S, #mam_filter{}, forward, 10000)) end,
    ok = ?ST:mam_delete_user(<<"bob">>, ?S),
    ?assertEqual([], Ids(<<"bob">>, ?S)),
    ok = ?ST:mam_delete_user(<<"bob">>, ?S),
    ?assertEqual(0, ?ST:mam_expire(?S, 0, infinity)),
    %% Age: below 4 goes (3 of alice's, 3 of carol's).
    ?assertEqual(6, ?ST:mam_expire(?S, 4, infinity)),
    ?assertEqual(lists:seq(4, 10), Ids(<<"alice">>, ?S)),
    %% Count: the newest 5 of each stay.
    ?assertEqual(2 + 1192, ?ST:mam_expire(?S, 0, 5)),
    ?assertEqual(lists:seq(6, 10), Ids(<<"alice">>, ?S)),
    ?assertEqual(lists:seq(1196, 1200), Ids(<<"carol">>, ?S)),
    %% Both at once.
    ?assertEqual(3 + 1, ?ST:mam_expire(?S, 9, 4)),
    ?assertEqual([9, 10], Ids(<<"alice">>, ?S)),
    ?assertEqual(lists:seq(1197, 1200), Ids(<<"carol">>, ?S)),
    %% Another server's archives were not touched.
    ?assertEqual(lists:seq(1, 10), Ids(<<"alice">>, <<"example.org">>)).

%%% PostgreSQL only

%% An empty database gets the schema at the first start, with its version;
%% the next start finds it and keeps what was written.
schema_is_created_and_versioned(Config) ->
    PG = ?config(pg, Config),
    Db = throng_pg:new_database(PG),
    start_on(Config, Db),
    ?assertEqual("2\n", throng_pg:psql(PG, Db, "SELECT version FROM schema_version")),
    ok = ?ST:kv_put(mod_a, k, v),
    throng_ct:restart(),
    ?assertEqual({ok, v}, ?ST:kv_get(mod_a, k)),
    ?assertEqual("1\n", throng_pg:psql(PG, Db, "SELECT count(*) FROM schema_version")).

start_on(Config, Db) ->
    Storage = throng_pg:storage(?config(pg, Config), Db),
    throng_ct:start(Config, #{storage => Storage}).

%% The boot error (step storage) for a database.
boot_error(Config, Db) ->
    Storage = throng_pg:storage(?config(pg, Config), Db),
    ok = application:set_env(throng, config, throng_ct:config(#{storage => Storage})),
    {error, {throng, {{storage, Msg}, _}}} = application:ensure_all_started(throng),
    ct:pal("~ts", [Msg]),
    Msg.

contains(Text, Part) ->
    string:find(Text, Part) =/= nomatch.

%% A database of a newer schema version stops the boot with a message that
%% names both versions.
newer_schema_is_refused(Config) ->
    PG = ?config(pg, Config),
    Db = throng_pg:new_database(PG),
    start_on(Config, Db),
    throng_ct:stop(),
    _ = throng_pg:psql(PG, Db, "UPDATE schema_version SET version = 3"),
    Msg = boot_error(Config, Db),
    ?assert(contains(Msg, "schema version 3, newer than this Throng's (2)")).

%% A database of version 1 (step 1 of the schema file, applied by hand as
%% an operator would have) with data in it gets the steps it lacks at
%% start-up, keeps its data, and works as a new one.
older_schema_is_migrated(Config) ->
    PG = ?config(pg, Config),
    Db = throng_pg:new_database(PG),
    [{1, Step1} | _] = throng_pgsql_schema:steps(),
    _ = throng_pg:psql(PG, Db, "SET ROLE throng; " ++ binary_to_list(Step1)),
    _ = throng_pg:psql(PG, Db, "INSERT INTO kv (bucket, key, value) VALUES ('old', 'k', 'v')"),
    ?assertEqual("1\n", throng_pg:psql(PG, Db, "SELECT version FROM schema_version")),
    start_on(Config, Db),
    ?assertEqual("2\n", throng_pg:psql(PG, Db, "SELECT version FROM schema_version")),
    ?assertEqual("1\n", throng_pg:psql(PG, Db, "SELECT count(*) FROM kv WHERE bucket = 'old'")),
    Id = ?ST:mam_store(<<"alice">>, ?S, mam(100, <<"bob@localhost">>, <<>>)),
    ?assertEqual([100], [I || #mam_msg{id = I} <- ?ST:mam_query(<<"alice">>, ?S, #mam_filter{},
                                                                forward, 10)]),
    ?assertEqual(100, Id).

%% Tables of Throng's without schema_version: refused, not overwritten.
foreign_tables_are_refused(Config) ->
    PG = ?config(pg, Config),
    Db = throng_pg:new_database(PG),
    _ = throng_pg:psql(PG, Db, "CREATE TABLE accounts (x integer); ALTER TABLE accounts OWNER TO throng"),
    Msg = boot_error(Config, Db),
    ?assert(contains(Msg, "table(s) accounts but no schema_version")).

%% A server that does not answer stops the boot with the address and why.
unreachable_database_stops_the_boot(Config) ->
    PG = ?config(pg, Config),
    {ok, L} = gen_tcp:listen(0, [{ip, {127, 0, 0, 1}}]),
    {ok, Port} = inet:port(L),
    ok = gen_tcp:close(L),
    Storage = throng_pg:storage(PG#{port := Port}, <<"throng">>),
    ok = application:set_env(throng, config, throng_ct:config(#{storage => Storage})),
    {error, {throng, {{storage, Msg}, _}}} = application:ensure_all_started(throng),
    ct:pal("~ts", [Msg]),
    ?assert(contains(Msg, "cannot connect to PostgreSQL at throng@127.0.0.1:" ++ integer_to_list(Port))),
    ?assert(contains(Msg, "connection refused")).

%% With the server stopped, every call fails at once with storage_failed
%% {aborted, db_down}: none waits for a timeout. Started again, the pool
%% reconnects by itself and what was committed before is there.
database_down_fails_fast_and_comes_back(Config) ->
    PG = ?config(pg, Config),
    start_on(Config, throng_pg:new_database(PG)),
    ok = ?ST:create_account(<<"alice">>, ?S, creds(<<"a">>)),
    ok = ?ST:kv_put(mod_a, k, before),
    throng_pg:stop_server(PG),
    Calls = [fun() -> ?ST:get_credentials(<<"alice">>, ?S) end,
             fun() -> ?ST:account_exists(<<"alice">>, ?S) end,
             fun() -> ?ST:create_account(<<"bob">>, ?S, creds(<<"b">>)) end,
             fun() -> ?ST:roster_get(<<"alice">>, ?S) end,
             fun() -> ?ST:roster_update(<<"alice">>, ?S, {<<"bob">>, ?S}, fun(_) -> keep end) end,
             fun() -> ?ST:offline_store(<<"alice">>, ?S, msg(1, <<"m">>), {10, 10000}) end,
             fun() -> ?ST:inflight_claim(<<"alice">>, ?S, self()) end,
             fun() -> ?ST:offline_total() end,
             fun() -> ?ST:kv_put(mod_a, k, during) end,
             fun() -> ?ST:kv_get(mod_a, k) end],
    {Micros, Reasons} = timer:tc(fun() -> [failure(C) || C <- Calls] end),
    ?assertEqual([{aborted, db_down} || _ <- Calls], Reasons),
    ?assert(Micros < 1000000),
    throng_pg:start_server(PG),
    throng_ct:wait_until(fun() -> (catch ?ST:kv_get(mod_a, k)) =:= {ok, before} end, 20000),
    ?assert(?ST:account_exists(<<"alice">>, ?S)),
    %% Every connection of the pool is back, not only one.
    [ok = ?ST:kv_put(mod_a, {k, I}, I) || I <- lists:seq(1, 20)],
    ?assertEqual([ok || _ <- lists:seq(1, 8)],
                 parallel(8, fun(I) -> ?ST:kv_put(mod_b, I, I) end)).

%% What was acknowledged is on disk: the server stopped at once (immediate
%% shutdown: no checkpoint, recovery from the write-ahead log) and started
%% again has every write; Throng reconnects without a restart.
committed_data_survives_a_server_restart(Config) ->
    PG = ?config(pg, Config),
    start_on(Config, throng_pg:new_database(PG)),
    ok = ?ST:create_account(<<"alice">>, ?S, C = creds(<<"a">>)),
    {ok, _, _, 1} = ?ST:roster_update(<<"alice">>, ?S, {<<"bob">>, ?S}, fun(_) -> {set, item(<<"bob">>)} end),
    [ok = ?ST:offline_store(<<"alice">>, ?S, msg(I, <<"m">>), {100, 100000}) || I <- lists:seq(1, 5)],
    ok = ?ST:kv_put(mod_a, k, v),
    immediate_stop(PG),
    throng_pg:start_server(PG),
    throng_ct:wait_until(fun() -> (catch ?ST:kv_get(mod_a, k)) =:= {ok, v} end, 20000),
    ?assertEqual({ok, C}, ?ST:get_credentials(<<"alice">>, ?S)),
    ?assertEqual({1, [item(<<"bob">>)]}, ?ST:roster_get(<<"alice">>, ?S)),
    ?assertEqual(5, ?ST:offline_count(<<"alice">>, ?S)),
    ?assertEqual(5, ?ST:offline_total()).

%% Messages in flight whose session ended while the database was down (its
%% return failed) go back to offline storage by themselves once the
%% database is back, without a restart of the node; rows of live sessions
%% stay in flight.
orphans_go_back_after_an_outage(Config) ->
    PG = ?config(pg, Config),
    start_on(Config, throng_pg:new_database(PG)),
    Dead = spawn(fun() -> ok end),
    _ = ?ST:inflight_put(<<"alice">>, ?S, Dead, [msg(1, <<"a">>), msg(2, <<"b">>)]),
    _ = ?ST:inflight_put(<<"bob">>, ?S, self(), [msg(3, <<"c">>)]),
    throng_pg:stop_server(PG),
    throng_pg:start_server(PG),
    throng_ct:wait_until(fun() -> (catch ?ST:offline_count(<<"alice">>, ?S)) =:= 2 end, 20000),
    ?assertEqual(1, ?ST:inflight_count()),
    ?assertEqual(0, ?ST:offline_count(<<"bob">>, ?S)).

%% A claim whose COMMIT reached the server but whose answer was lost
%% (connection broken or timed out): the claim raises, and the messages
%% are back in offline storage for the next try, not in flight for a
%% session that never got them (as with Mnesia: durability_SUITE).
claim_with_an_unknown_commit_puts_back(Config) ->
    PG = ?config(pg, Config),
    start_on(Config, throng_pg:new_database(PG)),
    [ok = ?ST:offline_store(<<"alice">>, ?S, msg(I, integer_to_binary(I)), {10, 100000})
     || I <- [1, 2]],
    ok = meck:new(throng_pgsql_conn, [passthrough]),
    try
        ok = meck:expect(throng_pgsql_conn, squery,
                         fun(Conn, "COMMIT" = Sql, Timeout) ->
                                 {ok, _} = meck:passthrough([Conn, Sql, Timeout]),
                                 {error, {connection, timeout}};
                            (Conn, Sql, Timeout) ->
                                 meck:passthrough([Conn, Sql, Timeout])
                         end),
        ?assertMatch({sync, {commit_unknown, timeout}},
                     failure(fun() -> ?ST:inflight_claim(<<"alice">>, ?S, self()) end))
    after
        meck:unload(throng_pgsql_conn)
    end,
    ?assertEqual(2, ?ST:offline_count(<<"alice">>, ?S)),
    ?assertEqual(0, ?ST:inflight_count()),
    ?assertEqual([<<"1">>, <<"2">>],
                 [body(M) || {_, M} <- ?ST:inflight_claim(<<"alice">>, ?S, self())]).

%% The server goes silent while a lost connection is set up again: it
%% accepts the login and never answers the driver's first query (which
%% the driver waits for without a timeout). The attempt is given up at its
%% deadline, with the driver's process, and the next one, once the server
%% answers again, gets the pool back (it used to stay without a connection
%% for good).
a_silent_server_does_not_stop_reconnecting(Config) ->
    PG = ?config(pg, Config),
    {ProxyPort, Mode} = proxy_start(maps:get(port, PG)),
    #{pgsql := Pg} = Storage = throng_pg:storage(PG, throng_pg:new_database(PG)),
    throng_ct:start(Config, #{storage => Storage#{pgsql => Pg#{port => ProxyPort, pool_size => 1,
                                                               connect_timeout => 500,
                                                               query_timeout => 500}}}),
    %% The pool waits connect_timeout for its first connection, then serves
    %% db_down until it comes: on a loaded machine, through the proxy, it
    %% may come later.
    throng_ct:wait_until(fun() -> pool_conn() =/= undefined end, 20000),
    ok = ?ST:kv_put(mod_a, k, before),
    ?assertEqual(1, length(drivers())),
    atomics:put(Mode, 1, 1),                                   % silent from now on
    exit(pool_conn(), kill),
    throng_ct:wait_until(fun() -> length(drivers()) =:= 1 andalso pool_conn() =:= undefined
                         end, 5000),
    timer:sleep(1000),
    ?assertEqual({aborted, db_down}, failure(fun() -> ?ST:kv_get(mod_a, k) end)),
    atomics:put(Mode, 1, 0),                                   % answering again
    %% deadline 500 + 2 x 500 + 5000 ms, then the backoff
    throng_ct:wait_until(fun() -> (catch ?ST:kv_get(mod_a, k)) =:= {ok, before} end, 20000),
    ?assertEqual(1, length(drivers())).

%% The connection of the pool's one process, or undefined while it has none.
pool_conn() ->
    element(5, sys:get_state(throng_pgsql_1)).

%% The driver's connection processes of this node.
drivers() ->
    [P || P <- processes(), proc_lib:translate_initial_call(P) =:= {pgsql_proto, init, 1}].

%% A TCP proxy to the PostgreSQL server. Mode 0: it relays both ways; mode
%% 1 (for the connections made from then on): it answers the login as a
%% server that accepts it (AuthenticationOk, ReadyForQuery), then reads and
%% answers nothing.
proxy_start(PgPort) ->
    {ok, L} = gen_tcp:listen(0, [binary, {active, false}, {reuseaddr, true}]),
    {ok, Port} = inet:port(L),
    Mode = atomics:new(1, []),
    Pid = spawn(fun() -> receive go -> proxy_accept(L, PgPort, Mode) end end),
    ok = gen_tcp:controlling_process(L, Pid),
    Pid ! go,
    {Port, Mode}.

proxy_accept(L, PgPort, Mode) ->
    case gen_tcp:accept(L) of
        {ok, S} ->
            Handler = spawn(fun() -> receive go -> proxy_conn(S, PgPort, atomics:get(Mode, 1)) end end),
            ok = gen_tcp:controlling_process(S, Handler),
            Handler ! go,
            proxy_accept(L, PgPort, Mode);
        {error, _} ->
            ok
    end.

proxy_conn(S, PgPort, 0) ->
    {ok, P} = gen_tcp:connect("127.0.0.1", PgPort, [binary, {active, true}]),
    ok = inet:setopts(S, [{active, true}]),
    relay(S, P);
proxy_conn(S, _PgPort, 1) ->
    {ok, <<Len:32>>} = gen_tcp:recv(S, 4),
    {ok, _Startup} = gen_tcp:recv(S, Len - 4),
    ok = gen_tcp:send(S, [<<$R, 8:32, 0:32>>, <<$Z, 5:32, $I>>]),
    receive {tcp_closed, S} -> ok end.

relay(A, B) ->
    receive
        {tcp, A, D} -> ok = gen_tcp:send(B, D), relay(A, B);
        {tcp, B, D} -> ok = gen_tcp:send(A, D), relay(A, B);
        {tcp_closed, _} -> gen_tcp:close(A), gen_tcp:close(B)
    end.

%% A pool of one connection and a short query_timeout.
start_small(Config) ->
    PG = ?config(pg, Config),
    #{pgsql := Pg} = Storage = throng_pg:storage(PG, throng_pg:new_database(PG)),
    throng_ct:start(Config, #{storage => Storage#{pgsql => Pg#{pool_size => 1,
                                                               query_timeout => 500}}}),
    Storage.

%% A statement that waits longer than query_timeout (here for a roster lock
%% another client holds) is cancelled by the server: storage_failed
%% {aborted, _} in about that time, nothing changed, and the connection
%% serves the next call.
a_statement_that_waits_too_long_is_cancelled(Config) ->
    #{pgsql := #{port := Port, database := Db, user := User, password := Password}} =
        start_small(Config),
    Bob = {<<"bob">>, ?S},
    {ok, _, _, 1} = ?ST:roster_update(<<"alice">>, ?S, Bob, fun(_) -> {set, item(<<"bob">>)} end),
    {ok, Other} = pgsql:connect([{host, "127.0.0.1"}, {port, Port}, {database, binary_to_list(Db)},
                                 {user, User}, {password, Password}, {as_binary, true}]),
    {ok, _} = pgsql:squery(Other, "BEGIN; SELECT version FROM roster_versions "
                                  "WHERE username = 'alice' FOR UPDATE", 5000),
    {Micros, Reason} = timer:tc(fun() -> failure(fun() -> ?ST:roster_update(
                                                             <<"alice">>, ?S, Bob,
                                                             fun(_) -> delete end) end) end),
    ?assertMatch({aborted, {pgsql, <<"57014">>, _}}, Reason),   %% query_canceled
    ?assert(Micros < 3000000),
    {ok, _} = pgsql:squery(Other, "ROLLBACK", 5000),
    ok = pgsql:terminate(Other),
    ?assertEqual({1, [item(<<"bob">>)]}, ?ST:roster_get(<<"alice">>, ?S)),
    ?assertMatch({ok, _, undefined, 2}, ?ST:roster_update(<<"alice">>, ?S, Bob, fun(_) -> delete end)).

%% A process killed in the middle of a transaction (holding the pool's only
%% connection and a roster lock) leaks neither: the connection is dropped,
%% the server rolls back, and the pool serves the next caller.
a_borrower_killed_in_a_transaction_leaks_nothing(Config) ->
    start_small(Config),
    Bob = {<<"bob">>, ?S},
    Self = self(),
    Borrower = spawn(fun() ->
                             ?ST:roster_update(<<"alice">>, ?S, Bob,
                                               fun(_) ->
                                                       Self ! {inside, self()},
                                                       receive never -> keep end
                                               end)
                     end),
    receive {inside, Borrower} -> ok after 5000 -> ct:fail(no_transaction) end,
    exit(Borrower, kill),
    throng_ct:wait_until(
      fun() ->
              (catch ?ST:roster_update(<<"alice">>, ?S, Bob, fun(_) -> {set, item(<<"bob">>)} end))
                  =:= {ok, undefined, item(<<"bob">>), 1}
      end, 10000),
    ?assertEqual({1, [item(<<"bob">>)]}, ?ST:roster_get(<<"alice">>, ?S)).

%% A large result leaves the driver's processes with a large heap; once the
%% connection is idle, the pool's periodic collection gives it back.
idle_connections_give_their_heap_back(Config) ->
    PG = ?config(pg, Config),
    #{pgsql := Pg} = Storage = throng_pg:storage(PG, throng_pg:new_database(PG)),
    throng_ct:start(Config, #{storage => Storage#{pgsql => Pg#{pool_size => 1,
                                                               idle_gc_interval => 300}}}),
    {ok, Conn, Ref} = throng_pgsql_conn:checkout(throng_pgsql_1, 5000),
    {ok, [{_, Rows}]} = throng_pgsql_conn:squery(
                          Conn, "SELECT repeat('x', 200) FROM generate_series(1, 20000)", 10000),
    ?assertEqual(20000, length(Rows)),
    Heap = fun() -> {total_heap_size, W} = process_info(Conn, total_heap_size), W end,
    Big = Heap(),
    ct:pal("pgsql_proto heap after the result: ~b words", [Big]),
    %% Lent: left alone.
    timer:sleep(1000),
    ?assert(Heap() >= Big div 2),
    ok = throng_pgsql_conn:release(throng_pgsql_1, Ref),
    throng_ct:wait_until(fun() -> Heap() < Big div 4 end, 10000),
    ct:pal("pgsql_proto heap after the idle collection: ~b words", [Heap()]),
    %% The connection still serves.
    ?assertMatch({ok, undefined, _, 1},
                 ?ST:roster_update(<<"alice">>, ?S, {<<"bob">>, ?S},
                                   fun(_) -> {set, item(<<"bob">>)} end)).

immediate_stop(#{bin := Bin, data := Data}) ->
    Cmd = case string:trim(os:cmd("id -u")) of
              "0" -> "runuser -u postgres -- ";
              _ -> ""
          end ++ filename:join(Bin, "pg_ctl") ++ " -D " ++ Data ++ " -m immediate -w stop",
    ct:pal("~ts", [os:cmd(Cmd)]).
