%% @doc EUnit tests of throng_sm's route scope: memo/1 and the work a
%% route defers to its end (defer/2, take_deferred/1, carry/0, resume/1).
-module(throng_sm_tests).

-include_lib("eunit/include/eunit.hrl").

-export([route_end/1]).

%% This module stands for an extension module that defers work.
route_end(Items) ->
    [case I of
         broken -> error(broken);
         _ -> note(I)
     end || I <- Items],
    note(ended),
    ok.

note(What) -> put(notes, [What | notes()]).
notes() -> case get(notes) of undefined -> []; L -> L end.
taken() -> lists:reverse(erase_notes()).
erase_notes() -> case erase(notes) of undefined -> []; L -> L end.

outside_a_route_runs_now_test() ->
    _ = erase_notes(),
    ok = throng_sm:defer(?MODULE, now),
    ?assertEqual([now, ended], taken()).

runs_at_the_outermost_end_in_order_test() ->
    _ = erase_notes(),
    R = throng_sm:memo(
          fun() ->
                  ok = throng_sm:defer(?MODULE, first),
                  inner = throng_sm:memo(fun() ->
                                                 ok = throng_sm:defer(?MODULE, second),
                                                 inner
                                         end),
                  note(body),
                  outer
          end),
    ?assertEqual(outer, R),
    %% One call with both items, after the body.
    ?assertEqual([body, first, second, ended], taken()),
    %% Nothing is left for the next route.
    throng_sm:memo(fun() -> ok end),
    ?assertEqual([], taken()).

runs_when_the_route_raises_test() ->
    _ = erase_notes(),
    ?assertError(boom, throng_sm:memo(fun() ->
                                              ok = throng_sm:defer(?MODULE, ran),
                                              error(boom)
                                      end)),
    ?assertEqual([ran, ended], taken()).

a_failure_is_logged_not_raised_test() ->
    _ = erase_notes(),
    Level = maps:get(level, logger:get_primary_config()),
    ok = logger:set_primary_config(level, none),
    try
        ?assertEqual(ok, throng_sm:memo(fun() -> ok = throng_sm:defer(?MODULE, broken) end)),
        ?assertEqual([], taken())
    after
        logger:set_primary_config(level, Level)
    end.

taken_items_do_not_run_at_the_end_test() ->
    _ = erase_notes(),
    throng_sm:memo(fun() ->
                           ok = throng_sm:defer(?MODULE, a),
                           ok = throng_sm:defer(?MODULE, b),
                           ?assertEqual([a, b], throng_sm:take_deferred(?MODULE)),
                           ?assertEqual([], throng_sm:take_deferred(?MODULE))
                   end),
    ?assertEqual([], taken()).

%% What one route carries away runs at the end of the route that resumes
%% it (another node's, in a cluster), not at its own.
carried_items_run_where_they_are_resumed_test() ->
    _ = erase_notes(),
    Carried = throng_sm:memo(fun() ->
                                     ok = throng_sm:defer(?MODULE, carried),
                                     throng_sm:carry()
                             end),
    ?assertEqual([], taken()),
    ?assertEqual([{?MODULE, [carried]}], Carried),
    throng_sm:memo(fun() ->
                           ok = throng_sm:resume(Carried),
                           ok = throng_sm:defer(?MODULE, own)
                   end),
    ?assertEqual([carried, own, ended], taken()).
