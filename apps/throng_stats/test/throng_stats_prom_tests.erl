%% @doc The Prometheus page of a snapshot, read back by a strict parser.
-module(throng_stats_prom_tests).

-include_lib("eunit/include/eunit.hrl").

-define(P, throng_stats_prom_parser).

snapshot() -> throng_stats_fixture:snapshot().

prometheus_parses_test() ->
    P = ?P:parse(throng_stats_prom:render(snapshot())),
    #{families := F} = P,
    ?assertEqual(12.0, ?P:value(P, <<"throng_logins_total">>)),
    ?assertEqual(<<"counter">>, maps:get(type, maps:get(<<"throng_logins_total">>, F))),
    ?assertEqual(<<"gauge">>, maps:get(type, maps:get(<<"throng_sessions">>, F))),
    ?assertEqual(7.0, ?P:value(P, <<"throng_sessions">>)),
    ?assertEqual(40.0, ?P:value(P, <<"throng_stanzas_in_total">>, [{<<"kind">>, <<"message">>}])),
    ?assertEqual(7.0, ?P:value(P, <<"throng_listener_connections">>,
                               [{<<"listener">>, <<"1">>}, {<<"port">>, <<"5222">>}])),
    %% An undeclared counter is still exported, with a generic help line.
    ?assertEqual(3.0, ?P:value(P, <<"throng_some_new_counter_total">>)).

prometheus_queue_top_test() ->
    P = ?P:parse(throng_stats_prom:render(snapshot())),
    %% The label value with a quote, a newline and a backslash survives escaping.
    ?assertEqual(100.0, ?P:value(P, <<"throng_message_queue_top_length">>,
                                 [{<<"rank">>, <<"1">>}, {<<"pid">>, <<"<0.99.0>">>},
                                  {<<"process">>, <<"odd \"name\"\n\\x">>}])),
    ?assertEqual(2, length(?P:family(P, <<"throng_message_queue_top_length">>))).

prometheus_histogram_test() ->
    P = ?P:parse(throng_stats_prom:render(snapshot())),
    Buckets = ?P:family(P, <<"throng_route_latency_seconds_bucket">>),
    ?assertEqual(length(throng_stats_spec:latency_buckets()), length(Buckets)),
    ?assertEqual(4.0, ?P:value(P, <<"throng_route_latency_seconds_bucket">>,
                               [{<<"le">>, <<"+Inf">>}])),
    ?assertEqual(1.0, ?P:value(P, <<"throng_route_latency_seconds_bucket">>,
                               [{<<"le">>, <<"5.0e-5">>}])),
    ?assertEqual(4.0, ?P:value(P, <<"throng_route_latency_seconds_count">>)),
    ?assert(abs(?P:value(P, <<"throng_route_latency_seconds_sum">>) - 0.00743) < 1.0e-12),
    %% Cumulative: never decreasing with le.
    Sorted = lists:sort(fun({[{_, A}], _}, {[{_, B}], _}) -> le(A) =< le(B) end, Buckets),
    Counts = [V || {_, V} <- Sorted],
    ?assertEqual(Counts, lists:sort(Counts)).

le(<<"+Inf">>) -> infinity;
le(B) -> binary_to_float(B).

prometheus_empty_test() ->
    ?assertEqual(#{families => #{}, samples => #{}},
                 ?P:parse(throng_stats_prom:render(#{}))).


%% Every counter of the server is exported under its own declaration (from
%% throng_metrics, through throng_info), never the generic one.
server_counters_declared_test() ->
    Server = [{throng_stats_spec:server_metric(N), K, H}
              || #{name := N, kind := K, help := H} <- throng_info:metrics()],
    ?assert(length(Server) > 20),
    [?assertMatch(#{type := K, help := H}, throng_stats_spec:lookup(Name))
     || {Name, K, H} <- Server],
    ?assertEqual(<<"Undeclared metric.">>,
                 maps:get(help, throng_stats_spec:lookup(throng_some_new_counter))).
