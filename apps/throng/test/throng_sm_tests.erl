%% @doc EUnit tests of throng_sm's route scope: memo/1 and at_end/1.
-module(throng_sm_tests).

-include_lib("eunit/include/eunit.hrl").

note(What) -> put(notes, [What | notes()]).
notes() -> case get(notes) of undefined -> []; L -> L end.
taken() -> lists:reverse(erase_notes()).
erase_notes() -> case erase(notes) of undefined -> []; L -> L end.

outside_a_route_runs_now_test() ->
    _ = erase_notes(),
    ok = throng_sm:at_end(fun() -> note(now) end),
    ?assertEqual([now], taken()).

runs_at_the_outermost_end_in_order_test() ->
    _ = erase_notes(),
    R = throng_sm:memo(
          fun() ->
                  ok = throng_sm:at_end(fun() -> note(first) end),
                  inner = throng_sm:memo(fun() ->
                                                 ok = throng_sm:at_end(fun() -> note(second) end),
                                                 inner
                                         end),
                  note(body),
                  outer
          end),
    ?assertEqual(outer, R),
    ?assertEqual([body, first, second], taken()),
    %% Nothing is left for the next route.
    throng_sm:memo(fun() -> ok end),
    ?assertEqual([], taken()).

runs_when_the_route_raises_test() ->
    _ = erase_notes(),
    ?assertError(boom, throng_sm:memo(fun() ->
                                              ok = throng_sm:at_end(fun() -> note(ran) end),
                                              error(boom)
                                      end)),
    ?assertEqual([ran], taken()).

one_that_raises_does_not_stop_the_others_test() ->
    _ = erase_notes(),
    Level = maps:get(level, logger:get_primary_config()),
    ok = logger:set_primary_config(level, none),
    try
        ok = throng_sm:memo(fun() ->
                                    ok = throng_sm:at_end(fun() -> error(broken) end),
                                    ok = throng_sm:at_end(fun() -> note(after_broken) end)
                            end),
        ?assertEqual([after_broken], taken())
    after
        logger:set_primary_config(level, Level)
    end.
