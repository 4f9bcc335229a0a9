%% The user population: names, passwords, CSV, the neighbours contact rule.
-module(throng_bench_xmpp_users_tests).
-include_lib("eunit/include/eunit.hrl").

users_test() ->
    U = throng_bench_xmpp_users:compile(#{first => 1, count => 100, name => <<"user%N">>,
                                          password => <<"pw%N-%N">>, csv => none,
                                          contacts => neighbours, contact_count => 18}),
    ?assertEqual(<<"user42">>, throng_bench_xmpp_users:name(U, 42)),
    ?assertEqual(<<"pw42-42">>, throng_bench_xmpp_users:password(U, 42)),
    ?assertEqual(42, throng_bench_xmpp_users:number_of(U, <<"user42">>)),
    ?assertEqual(undefined, throng_bench_xmpp_users:number_of(U, <<"someone">>)),
    ?assertEqual(undefined, throng_bench_xmpp_users:number_of(U, <<"userx">>)),
    C1 = throng_bench_xmpp_users:contacts(U, 1),
    ?assertEqual(lists:seq(92, 100) ++ lists:seq(2, 10), C1),
    %% the rule is symmetric: a mutual roster
    [?assert(lists:member(N, throng_bench_xmpp_users:contacts(U, M)))
     || N <- lists:seq(1, 100), M <- throng_bench_xmpp_users:contacts(U, N)].

small_population_has_no_duplicate_contacts_test() ->
    U = throng_bench_xmpp_users:compile(#{first => 1, count => 5, name => <<"u%N">>,
                                          password => <<"p">>, csv => none,
                                          contacts => neighbours, contact_count => 18}),
    C = throng_bench_xmpp_users:contacts(U, 3),
    ?assertEqual(lists:usort(C), lists:sort(C)),
    ?assertNot(lists:member(3, C)).

csv_users_test() ->
    File = filename:join(os:getenv("TMPDIR", "/tmp"), "throng_bench_users_test.csv"),
    ok = file:write_file(File, <<"# name,password\nalice,secret\n\nbob, hunter2\n">>),
    U = throng_bench_xmpp_users:compile(#{first => 1, count => auto, name => <<"user%N">>,
                                          password => <<"x">>, csv => File,
                                          contacts => neighbours, contact_count => 18}),
    ?assertMatch(#{count := 2}, U),
    ?assertEqual(<<"bob">>, throng_bench_xmpp_users:name(U, 2)),
    ?assertEqual(<<"hunter2">>, throng_bench_xmpp_users:password(U, 2)),
    ?assertEqual(1, throng_bench_xmpp_users:number_of(U, <<"alice">>)),
    ok = file:write_file(File, <<"just-a-name\n">>),
    ?assertThrow({usage, _}, throng_bench_xmpp_users:read_csv(File)),
    file:delete(File).
