%% @doc The directed-presence set of a session (throng_directed).
-module(throng_directed_tests).

-include_lib("eunit/include/eunit.hrl").
-include("throng.hrl").

j(N) -> #jid{user = integer_to_binary(N), server = <<"localhost">>}.

%% The empty set, what every idle session holds, costs no word of heap.
empty_is_free_test() ->
    ?assertEqual(0, erts_debug:size(throng_directed:new())),
    {ok, S} = throng_directed:add(j(1), throng_directed:new(), 10),
    ?assertEqual(0, erts_debug:size(throng_directed:remove(j(1), S))).

%% At the bound a new entity is refused; one already there is not.
bounded_test() ->
    S = lists:foldl(fun(N, Acc) -> {ok, A} = throng_directed:add(j(N), Acc, 3), A end,
                    throng_directed:new(), [1, 2, 3]),
    ?assertEqual(full, throng_directed:add(j(4), S, 3)),
    ?assertMatch({ok, _}, throng_directed:add(j(2), S, 3)),
    ?assertEqual(3, throng_directed:size(S)),
    {ok, S1} = throng_directed:add(j(4), throng_directed:remove(j(1), S), 3),
    ?assertEqual(lists:sort([j(2), j(3), j(4)]), lists:sort(throng_directed:to_list(S1))),
    ?assertEqual(full, throng_directed:add(j(1), throng_directed:new(), 0)).

%% 160,000 distinct targets: each operation is a map operation, not a scan
%% of the targets so far (the old list made this quadratic).
many_targets_test_() ->
    {timeout, 60,
     fun() ->
             N = 160000,
             S = lists:foldl(fun(I, Acc) -> {ok, A} = throng_directed:add(j(I), Acc, N), A end,
                             throng_directed:new(), lists:seq(1, N)),
             ?assertEqual(N, throng_directed:size(S)),
             Empty = lists:foldl(fun(I, Acc) -> throng_directed:remove(j(I), Acc) end,
                                 S, lists:seq(1, N)),
             ?assertEqual([], Empty)
     end}.
