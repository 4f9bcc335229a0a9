%% The per-user tiny random generator.
-module(throng_bench_rand_tests).
-include_lib("eunit/include/eunit.hrl").

tiny_rand_is_uniform_enough_test() ->
    {Us, _} = lists:mapfoldl(fun(_, X) -> throng_bench_rand:tiny_uniform(X) end,
                             throng_bench_rand:tiny_seed(7), lists:seq(1, 20000)),
    ?assert(lists:all(fun(U) -> U > 0 andalso U < 1 end, Us)),
    Mean = lists:sum(Us) / 20000,
    ?assert(abs(Mean - 0.5) < 0.01),
    %% exponential draws have the requested mean
    {Ds, _} = lists:mapfoldl(fun(_, X) -> throng_bench_rand:sample_tiny({exponential, 1000}, X) end,
                             throng_bench_rand:tiny_seed(8), lists:seq(1, 20000)),
    ?assert(abs(lists:sum(Ds) / 20000 - 1000) < 30).
