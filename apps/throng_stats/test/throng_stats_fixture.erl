%% @doc Test helper: a snapshot as the collector publishes it, with every
%% kind of series, a queue alarm and a latency histogram.
-module(throng_stats_fixture).

-export([snapshot/0]).

-spec snapshot() -> map().
snapshot() ->
    H = throng_hist:new(),
    [throng_hist:record(H, Us) || Us <- [30, 200, 200, 7000]],
    #{time_ms => 1700000000000, node => 'throng@127.0.0.1', interval_s => 1.0,
      series => [{throng_logins, [], 12, 2.0, {2.0, 1.5, 0.25}},
                 {throng_sessions, [], 7, 7, {7.0, 6.5, 3.0}},
                 {throng_stanzas_in, [{kind, <<"message">>}], 40, 4.0, {4.0, 3.0, 1.0}},
                 {throng_stanzas_in, [{kind, <<"iq">>}], 5, undefined, undefined},
                 {throng_beam_scheduler_utilization, [{type, <<"normal">>}], 0.25, 0.25,
                  {0.25, 0.2, 0.1}},
                 {throng_listener_connections, [{listener, <<"1">>}, {port, <<"5222">>}], 7, 7,
                  {7.0, 7.0, 7.0}},
                 {throng_some_new_counter, [], 3, 0.0, {0.0, 0.0, 0.0}}],
      queues => #{total => 120, max => 100, watched => 3, threshold => 50, alarm => true,
                  over => 1, since_ms => 1699999999000,
                  top => [#{pid => <<"<0.99.0>">>, name => <<"odd \"name\"\n\\x">>, len => 100,
                            since_ms => 1699999990000},
                          #{pid => <<"<0.98.0>">>, name => <<"throng_c2s:init/1">>, len => 20,
                            since_ms => 1699999990000}]},
      latency => #{now => 0.002, avg1 => 0.002, avg10 => 0.001, avg100 => null, p50 => 0.0002,
                   p90 => 0.005, p99 => 0.0069, window_count => 4,
                   histogram => throng_hist:snapshot(H)}}.

