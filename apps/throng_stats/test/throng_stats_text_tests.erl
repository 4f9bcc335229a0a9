%% @doc The terminal table of `bin/throng stats'.
-module(throng_stats_text_tests).

-include_lib("eunit/include/eunit.hrl").

snapshot() -> throng_stats_fixture:snapshot().

text_test() ->
    Text = lists:flatten(io_lib:format("~ts", [throng_stats_text:render(snapshot())])),
    ?assertNotEqual(nomatch, string:find(Text, "throng@127.0.0.1")),
    ?assertNotEqual(nomatch, string:find(Text, "ALARM")),
    ?assertMatch({match, _}, re:run(Text, "logins/s\\s+2\\s+2\\s+1\\.5\\s+0\\.3")),
    ?assertMatch({match, _}, re:run(Text, "sessions \\(bound\\)\\s+7\\s+7\\s+6\\.5\\s+3")),
    ?assertMatch({match, _}, re:run(Text, "scheduler utilization %\\s+25\\.0")),
    ?assertMatch({match, _}, re:run(Text, "<0\\.98\\.0>\\s+throng_c2s:init/1\\s+20")).

text_without_snapshot_test() ->
    ?assertMatch("throng_stats: no sample yet" ++ _,
                 lists:flatten(throng_stats_text:render(undefined))).

