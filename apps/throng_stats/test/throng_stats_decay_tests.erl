%% @doc The 1/10/100 s exponential decays.
-module(throng_stats_decay_tests).

-include_lib("eunit/include/eunit.hrl").
%% PropEr through its functions (its header is in erlang-proper-dev).
-import(proper_types, [real/0, range/2]).

-define(EPS, 1.0e-9).

constant_input_stays_constant_test() ->
    D = lists:foldl(fun(_, D) -> throng_stats_decay:update(D, 42, 1) end,
                    throng_stats_decay:new(42), lists:seq(1, 500)),
    {A1, A10, A100} = throng_stats_decay:averages(D),
    ?assert(abs(A1 - 42) < ?EPS andalso abs(A10 - 42) < ?EPS andalso abs(A100 - 42) < ?EPS).

%% After a step from 0 to 1, an average has covered 1 - 1/e of the step once
%% its time constant has passed.
step_response_test() ->
    Step = fun(Seconds) ->
                   lists:foldl(fun(_, D) -> throng_stats_decay:update(D, 1, 1) end,
                               throng_stats_decay:new(0), lists:seq(1, Seconds))
           end,
    Target = 1 - math:exp(-1),
    {A1, _, _} = throng_stats_decay:averages(Step(1)),
    {_, A10, _} = throng_stats_decay:averages(Step(10)),
    {_, _, A100} = throng_stats_decay:averages(Step(100)),
    ?assert(abs(A1 - Target) < ?EPS),
    ?assert(abs(A10 - Target) < ?EPS),
    ?assert(abs(A100 - Target) < ?EPS).

%% The shorter the time constant, the faster an average follows a change.
ordering_test() ->
    D = throng_stats_decay:update(throng_stats_decay:new(0), 100, 1),
    {A1, A10, A100} = throng_stats_decay:averages(D),
    ?assert(A1 > A10 andalso A10 > A100 andalso A100 > 0).

%% A late tick weighs the new value by the time that really passed: two
%% half-second updates with the same value equal one one-second update.
prop_split_interval() ->
    proper:forall(
      {real(), real(), range(1, 5000)},
      fun({Start, V, Dt}) ->
                Seconds = Dt / 1000,
                D0 = throng_stats_decay:new(Start),
                One = throng_stats_decay:update(D0, V, Seconds),
                Two = throng_stats_decay:update(throng_stats_decay:update(D0, V, Seconds / 2),
                                                V, Seconds / 2),
                {X1, X2, X3} = throng_stats_decay:averages(One),
                {Y1, Y2, Y3} = throng_stats_decay:averages(Two),
                Close = fun(A, B) -> abs(A - B) =< 1.0e-9 * max(1.0, abs(A)) end,
                Close(X1, Y1) andalso Close(X2, Y2) andalso Close(X3, Y3)
      end).

%% An average always lies between the old average and the new value.
prop_between() ->
    proper:forall(
      {real(), real(), range(0, 100000)},
      fun({Start, V, Dt}) ->
                D = throng_stats_decay:update(throng_stats_decay:new(Start), V, Dt / 1000),
                Lo = min(Start, V) - 1.0e-9, Hi = max(Start, V) + 1.0e-9,
                lists:all(fun(A) -> A >= Lo andalso A =< Hi end,
                          tuple_to_list(throng_stats_decay:averages(D)))
      end).

properties_test_() ->
    {timeout, 60,
     [?_assert(proper:quickcheck(prop_split_interval(), [{numtests, 500}, {to_file, user}])),
      ?_assert(proper:quickcheck(prop_between(), [{numtests, 500}, {to_file, user}]))]}.
