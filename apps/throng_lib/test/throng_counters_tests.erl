%% @doc Named counters: by name, independent slots, reset, bad names.
-module(throng_counters_tests).

-include_lib("eunit/include/eunit.hrl").

by_name_test() ->
    C = throng_counters:new([sent, answered, lost], []),
    ?assertEqual(#{sent => 0, answered => 0, lost => 0}, throng_counters:to_map(C)),
    ok = throng_counters:add(C, sent, 3),
    ok = throng_counters:add(C, lost, 1),
    ok = throng_counters:sub(C, sent, 1),
    ?assertEqual(2, throng_counters:get(C, sent)),
    ?assertEqual(#{sent => 2, answered => 0, lost => 1}, throng_counters:to_map(C)),
    ok = throng_counters:reset(C),
    ?assertEqual(#{sent => 0, answered => 0, lost => 0}, throng_counters:to_map(C)).

concurrent_adds_test() ->
    C = throng_counters:new([a, b], [write_concurrency]),
    Self = self(),
    Pids = [spawn(fun() ->
                          [throng_counters:add(C, a, 1) || _ <- lists:seq(1, 1000)],
                          Self ! {done, self()}
                  end) || _ <- lists:seq(1, 8)],
    [receive {done, P} -> ok end || P <- Pids],
    ?assertEqual(#{a => 8000, b => 0}, throng_counters:to_map(C)).

unknown_and_duplicate_names_test() ->
    C = throng_counters:new([a], []),
    ?assertError({badkey, b}, throng_counters:add(C, b, 1)),
    ?assertError({badmatch, _}, throng_counters:new([a, b, a], [])).
