%% Several targets: parsing, which user goes where, same-node and
%% cross-node pairs.
-module(throng_bench_targets_tests).
-include_lib("eunit/include/eunit.hrl").

parse_test() ->
    ?assertEqual({ok, [{<<"127.0.0.1">>, 15301}, {<<"127.0.0.1">>, 15302}]},
                 throng_bench_targets:parse("127.0.0.1:15301,127.0.0.1:15302")),
    %% a port range is one target per port, in order
    ?assertEqual({ok, [{<<"h">>, 15301}, {<<"h">>, 15302}, {<<"h">>, 15303}, {<<"g">>, 5222}]},
                 throng_bench_targets:parse("h:15301-15303, g")),
    ?assertEqual({ok, [{<<"::1">>, 5223}]}, throng_bench_targets:parse(<<"[::1]:5223">>)),
    %% a YAML list of strings is their concatenation
    ?assertEqual({ok, [{<<"a">>, 1}, {<<"b">>, 2}, {<<"b">>, 3}]},
                 throng_bench_targets:parse([<<"a:1">>, <<"b:2-3">>])),
    [?assertEqual(error, throng_bench_targets:parse(Bad))
     || Bad <- ["", "h:0", "h:1,", "h:5-4", "h:1,h:1", "h:1-2,h:2", ":5", "h:x",
                [<<"a:1">>, 7], [[{<<"host">>, <<"a">>}]], [], 42]].

of_user_test() ->
    %% user N goes to target N mod K: with two targets even users on the
    %% first, odd users on the second
    ?assertEqual([1, 0, 1, 0], [throng_bench_targets:of_user(N, 2) || N <- lists:seq(1, 4)]),
    ?assertEqual([0, 0, 0], [throng_bench_targets:of_user(N, 1) || N <- [1, 2, 17]]),
    %% every target gets its share of a population
    K = 7,
    Counts = lists:foldl(fun(N, Acc) -> maps:update_with(throng_bench_targets:of_user(N, K),
                                                         fun(C) -> C + 1 end, 1, Acc) end,
                         #{}, lists:seq(1, 7000)),
    ?assertEqual(lists:seq(0, K - 1), lists:sort(maps:keys(Counts))),
    ?assertEqual([1000], lists:usort(maps:values(Counts))).

%% With the neighbours rule (contacts N-9..N+9) and 2 targets, 8 of a user's
%% 18 contacts share its node and 10 do not: both kinds of pair occur.
pairs_of_a_roster_test() ->
    Kinds = fun(K) ->
                    N = 100,
                    Pairs = [throng_bench_targets:pair(throng_bench_targets:of_user(N, K),
                                                       throng_bench_targets:of_user(N + D, K))
                             || D <- lists:seq(-9, 9), D =/= 0],
                    {length([x || same <- Pairs]), length([x || cross <- Pairs])}
            end,
    ?assertEqual({8, 10}, Kinds(2)),
    ?assertEqual({4, 14}, Kinds(4)),
    ?assertEqual({18, 0}, Kinds(1)).

label_test() ->
    ?assertEqual(<<"127.0.0.1:15301">>, throng_bench_targets:label({<<"127.0.0.1">>, 15301})),
    ?assertEqual(<<"[::1]:5222">>, throng_bench_targets:label({<<"::1">>, 5222})).

loopback_test() ->
    ?assert(throng_bench_targets:loopback([{<<"127.0.0.1">>, 1}, {<<"127.0.0.2">>, 2}])),
    ?assertNot(throng_bench_targets:loopback([{<<"127.0.0.1">>, 1}, {<<"10.0.0.1">>, 2}])).
