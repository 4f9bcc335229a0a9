%% @doc The /stats and /history documents of a snapshot, read back by jiffy.
-module(throng_stats_view_tests).

-include_lib("eunit/include/eunit.hrl").

snapshot() -> throng_stats_fixture:snapshot().

stats_json_test() ->
    Doc = jiffy:decode(iolist_to_binary(throng_stats_json:encode(
                                          throng_stats_view:stats(snapshot()))), [return_maps]),
    #{<<"metrics">> := M, <<"queues">> := Q, <<"latency">> := L, <<"chart">> := C} = Doc,
    #{<<"type">> := <<"counter">>, <<"series">> := [Logins]} = maps:get(<<"throng_logins">>, M),
    ?assertEqual(#{<<"labels">> => #{}, <<"value">> => 12, <<"now">> => 2.0, <<"avg1">> => 2.0,
                   <<"avg10">> => 1.5, <<"avg100">> => 0.25}, Logins),
    #{<<"series">> := Stanzas} = maps:get(<<"throng_stanzas_in">>, M),
    ?assertEqual(2, length(Stanzas)),
    ?assert(lists:member(null, [maps:get(<<"now">>, S) || S <- Stanzas])),
    ?assertEqual(true, maps:get(<<"alarm">>, Q)),
    ?assertEqual(<<"odd \"name\"\n\\x">>, maps:get(<<"name">>, hd(maps:get(<<"top">>, Q)))),
    ?assertEqual(4, maps:get(<<"count">>, L)),
    %% Per-bucket counts (not cumulative) at the Prometheus bounds.
    [First | _] = Buckets = maps:get(<<"buckets">>, L),
    ?assertEqual(#{<<"le_s">> => 5.0e-5, <<"count">> => 1}, First),
    ?assertEqual(4, lists:sum([C || #{<<"count">> := C} <- Buckets])),
    ?assertEqual(<<"+Inf">>, maps:get(<<"le_s">>, lists:last(Buckets))),
    ?assertEqual(7, maps:get(<<"sessions">>, C)),
    ?assertEqual(4.0, maps:get(<<"stanzas_in">>, C)).

history_json_test() ->
    Points = [throng_stats_series:chart_point(T, maps:get(series, snapshot()), #{}, #{})
              || T <- [1, 2, 3]],
    Doc = jiffy:decode(iolist_to_binary(throng_stats_json:encode(
                                          throng_stats_view:history(Points))), [return_maps]),
    ?assertEqual([1, 2, 3], maps:get(<<"t">>, Doc)),
    ?assertEqual([7, 7, 7], maps:get(<<"sessions">>, Doc)),
    ?assertEqual([null, null, null], maps:get(<<"queue_max">>, Doc)),
    ?assertEqual(lists:sort([atom_to_binary(K) || K <- throng_stats_series:chart_keys()]),
                 lists:sort(maps:keys(Doc))).

