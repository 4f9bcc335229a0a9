%% Durations, sizes and addresses.
-module(throng_bench_units_tests).
-include_lib("eunit/include/eunit.hrl").

durations_test() ->
    [?assertEqual({ok, Ms}, throng_bench_units:parse_duration(In))
     || {In, Ms} <- [{"30s", 30000}, {"500ms", 500}, {"2m", 120000}, {"1h", 3600000},
                     {"1.5s", 1500}, {"30", 30000}, {<<"10 s">>, 10000}, {5, 5000}]],
    [?assertEqual(error, throng_bench_units:parse_duration(In)) || In <- ["soon", "5x", "", "-3s"]].

sizes_test() ->
    [?assertEqual({ok, B}, throng_bench_units:parse_size(In))
     || {In, B} <- [{"64", 64}, {"4k", 4096}, {"1M", 1048576}, {"2MiB", 2097152}, {"1KB", 1024}]],
    ?assertEqual(error, throng_bench_units:parse_size("lots")).

ip_ranges_test() ->
    ?assertEqual({ok, [{127, 0, 0, 1}, {127, 0, 0, 2}, {127, 0, 0, 3}]},
                 throng_bench_units:parse_ip_range("127.0.0.1-127.0.0.3")),
    ?assertEqual({ok, [{10, 0, 0, 1}, {10, 0, 0, 9}]},
                 throng_bench_units:parse_ip_range("10.0.0.1,10.0.0.9")),
    ?assertEqual(error, throng_bench_units:parse_ip_range("127.0.0.3-127.0.0.1")),
    ?assertEqual({ok, {"h", 5222}}, throng_bench_units:parse_host_port("h:5222", 1)),
    ?assertEqual({ok, {"h", 7}}, throng_bench_units:parse_host_port("h", 7)),
    ?assertEqual(error, throng_bench_units:parse_host_port("h:0", 7)).
