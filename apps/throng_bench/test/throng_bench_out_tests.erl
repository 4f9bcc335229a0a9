%% Output files: summary.json, timeseries.csv and report.html with its SVG
%% charts, from synthetic snapshots (no network).
-module(throng_bench_out_tests).
-include_lib("eunit/include/eunit.hrl").

snapshot(Logins, Delivered) ->
    E = throng_bench_metrics:empty_snapshot(),
    #{counters := C, hists := H} = E,
    E#{counters => C#{logins => Logins, sessions => Logins, users_launched => Logins,
                      msgs_sent => Delivered + 2, msgs_received => Delivered,
                      err_timeout => 3},
       hists => H#{login => throng_hist:from_list([1000 * I || I <- lists:seq(1, Logins)]),
                   delivery => throng_hist:from_list(lists:seq(100, 100 + Delivered))},
       memory => 1000000}.

rows() ->
    Empty = throng_bench_metrics:empty_snapshot(),
    Snaps = [Empty | [snapshot(10 * T, 5 * T) || T <- lists:seq(1, 5)]],
    Pairs = lists:zip(lists:droplast(Snaps), tl(Snaps)),
    [(throng_bench_run:row(T, P, C, 1.0, {[], []}, 5000000))#{tick => T}
     || {T, {P, C}} <- lists:enumerate(Pairs)].

row_rates_test() ->
    [R1 | _] = rows(),
    ?assertEqual(10.0, maps:get(logins_s, R1)),
    ?assertEqual(3.0, maps:get(timeout, maps:get(errors_by_type_s, R1))),
    ?assertEqual(10, maps:get(sessions, R1)),
    ?assert(is_number(maps:get(login_p99_ms, R1))),
    ?assertEqual(undefined, maps:get(server_rss_bytes, R1)).

csv_line_has_every_column_test() ->
    [R | _] = rows(),
    Line = iolist_to_binary(throng_bench_out:csv_line(R)),
    Cells = binary:split(string:trim(Line), <<",">>, [global]),
    ?assertEqual(length(throng_bench_out:csv_columns()), length(Cells)),
    Col = fun(Name) ->
                  {I, _} = lists:keyfind(Name, 2, lists:enumerate(throng_bench_out:csv_columns())),
                  lists:nth(I, Cells)
          end,
    ?assertEqual(<<"10">>, Col(sessions)),
    ?assertEqual(<<"3.0">>, Col(err_timeout_s)),
    ?assertEqual(<<>>, Col(server_rss_bytes)).

summary_json_is_one_object_test() ->
    Rows = rows(),
    S = throng_bench_xmpp:summary(snapshot(50, 25), Rows,
                                  #{command => xmpp, status => complete, error => null,
                                    settings => #{planned_users => 50}}),
    Json = jiffy:decode(throng_bench_out:encode_json(S), [return_maps]),
    ?assert(is_map(Json)),
    #{<<"messages">> := M, <<"errors">> := E, <<"latency_ms">> := L, <<"sessions">> := Sess} = Json,
    ?assertEqual(maps:get(<<"sent">>, M), maps:get(<<"received">>, M) + maps:get(<<"lost">>, M)),
    ?assertEqual(3, maps:get(<<"total">>, E)),
    ?assertEqual(50, maps:get(<<"max">>, Sess)),
    ?assertEqual(50, maps:get(<<"count">>, maps:get(<<"login">>, L))),
    ?assertMatch(#{<<"verdict">> := #{<<"ok">> := false}}, Json).

json_conversion_test() ->
    ?assertEqual(#{a => null, b => <<"x">>, c => [1, 2], d => 1.235, e => true},
                 throng_bench_out:json(#{a => undefined, b => x, c => {1, 2}, d => 1.23456,
                                         e => true})).

report_contains_the_charts_test() ->
    Rows = rows(),
    Last = snapshot(50, 25),
    S = throng_bench_xmpp:summary(Last, Rows, #{command => xmpp, status => complete, error => null,
                                                settings => #{planned_users => 50}}),
    Html = iolist_to_binary(throng_bench_report:run_html(S, Rows, Last)),
    [?assertNotEqual(nomatch, binary:match(Html, T))
     || T <- [<<"<!DOCTYPE html>">>, <<"Concurrent sessions over time">>,
              <<"Errors per second over time">>, <<"Rates">>, <<"login latency histogram">>,
              <<"delivery latency histogram">>, <<"<polyline">>, <<"<rect">>]],
    ?assert(length(binary:matches(Html, <<"<svg">>)) >= 7),
    %% self-contained: no scripts, no external references
    [?assertEqual(nomatch, binary:match(Html, T))
     || T <- [<<"<script">>, <<"http://cdn">>, <<"https://">>, <<"src=">>, <<"<link">>]].

report_of_partial_run_shows_status_test() ->
    S = throng_bench_xmpp:summary(throng_bench_metrics:empty_snapshot(), [],
                                  #{command => xmpp, status => aborted,
                                    error => <<"cannot connect to x:1: refused">>}),
    Html = iolist_to_binary(throng_bench_report:run_html(S, [], throng_bench_metrics:empty_snapshot())),
    ?assertNotEqual(nomatch, binary:match(Html, <<"cannot connect to x:1: refused">>)),
    ?assertNotEqual(nomatch, binary:match(Html, <<"no data">>)).

server_section_test() ->
    Rows = [#{t => 1, sessions => 0, server_rss_bytes => 1000, server_cpu_pct => 10.0},
            #{t => 2, sessions => 100, server_rss_bytes => 101000, server_cpu_pct => 30.0},
            #{t => 3, sessions => 50, server_rss_bytes => 90000, server_cpu_pct => undefined}],
    S = throng_bench_summary:server(Rows, #{rss => 1000, cpu_ticks => 0, t => 0}, sessions, session),
    ?assertMatch(#{rss_max_bytes := 101000, bytes_per_session_at_peak := 1000,
                   cpu_max_pct := 30.0, cpu_mean_pct := 20.0}, S).

%% A server whose RSS still falls while the first sessions arrive (it gives
%% memory back after its set-up): the cost per session is measured from the
%% lowest RSS up to the peak, not from the higher one before the run.
server_section_shrinking_server_test() ->
    Rows = [#{t => 1, sessions => 10, server_rss_bytes => 50000},
            #{t => 2, sessions => 20, server_rss_bytes => 40000},
            #{t => 3, sessions => 100, server_rss_bytes => 140000},
            #{t => 4, sessions => 0, server_rss_bytes => 10000}],
    S = throng_bench_summary:server(Rows, #{rss => 90000, cpu_ticks => 0, t => 0}, sessions, session),
    ?assertMatch(#{rss_start_bytes := 90000, rss_low_before_peak_bytes := 40000,
                   bytes_per_session_at_peak := 1000}, S).

%% A delivery of 1 us is a bar from 0.001 ms: its tooltip label is written
%% in the exponent form (io_lib's ~e takes two digits or more).
svg_histogram_of_tiny_values_test() ->
    Svg = iolist_to_binary(throng_bench_svg:histogram(
                             #{bars => [{1, 2, 5}, {2, 1000, 3}], unit_div => 1000})),
    ?assertMatch({_, _}, binary:match(Svg, <<"1.0e-3-2.0e-3: 5">>)).

svg_ticks_test() ->
    ?assertEqual([0, 20, 40, 60, 80, 100], throng_bench_svg:nice_ticks(0, 100, 5)),
    ?assertEqual([1, 10, 100, 1000, 10000, 100000], throng_bench_svg:log_ticks(1, 100000)),
    ?assertEqual([1, 2, 5, 10, 20, 50, 100], throng_bench_svg:log_ticks(1, 100)),
    ?assertEqual(<<"a&lt;b&amp;&#39;">>, throng_bench_svg:escape("a<b&'")).
