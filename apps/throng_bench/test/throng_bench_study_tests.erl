%% The pure parts of `throng-bench study': designs (validation, expansion,
%% what a resume must match), the stop rule, the statistics, a run's figures
%% from its rows, and the summary/CSV of a set of runs.
-module(throng_bench_study_tests).

-include_lib("eunit/include/eunit.hrl").

-define(D, throng_bench_study_design).

design(Yaml) ->
    ?D:parse(iolist_to_binary(Yaml), <<"test">>).

minimal() ->
    "name: t\nsettings:\n  - name: a\n  - name: b\n    erl_flags: \"+IOt 2\"\n"
    "    listen: {active_n: 1}\n    sysctl: {net.ipv4.tcp_sack: 0}\n".

%%% Designs

builtin_designs_load_test_() ->
    [?_assertMatch({ok, #{settings := [_ | _]}}, ?D:load(N)) || N <- ?D:builtin_names()].

paper_design_mirrors_every_table_test() ->
    {ok, #{settings := Ss, repeats := R}} = ?D:load("paper"),
    ?assert(R >= 3),
    Tables = lists:usort([T || #{table := T} <- Ss]),
    [?assert(lists:any(fun(T) -> binary:match(T, <<"Table ", (integer_to_binary(N))/binary>>) =/= nomatch end,
                       Tables)) || N <- lists:seq(1, 6)].

defaults_and_values_test() ->
    {ok, D} = design(minimal()),
    ?assertMatch(#{repeats := 3, population := 21000, rate := 200, scenario := <<"paper">>,
                   stop := #{error_rate := 0.01, login_p99_ms := 2000, window_s := 5,
                             memory := none, fd_margin := 100}}, D),
    [A, B] = maps:get(settings, D),
    ?assertMatch(#{name := <<"a">>, erl_flags := <<>>, listen := [], sysctl := [], tls := none}, A),
    ?assertMatch(#{erl_flags := <<"+IOt 2">>, listen := [{<<"active_n">>, <<"1">>}],
                   sysctl := [{<<"net.ipv4.tcp_sack">>, <<"0">>}]}, B),
    ?assertEqual(<<"    active_n: 1\n">>, ?D:listen_yaml(B)).

errors_name_the_key_test_() ->
    Err = fun(Y) -> {error, M} = design(Y), M end,
    [?_assertMatch(<<"test: key settings: expected", _/binary>>, Err("name: t\n")),
     ?_assertMatch(<<"test: key settings[1].sysctl: only net.* keys", _/binary>>,
                   Err("name: t\nsettings:\n  - name: a\n  - name: b\n    sysctl: {kernel.pid_max: 5}\n")),
     ?_assertMatch(<<"test: key settings[0].colour: unknown key", _/binary>>,
                   Err("name: t\nsettings:\n  - name: a\n    colour: red\n")),
     ?_assertMatch(<<"test: key settings: two settings named a">>,
                   Err("name: t\nsettings:\n  - name: a\n  - name: a\n")),
     ?_assertMatch(<<"test: key settings[0].name: expected a name", _/binary>>,
                   Err("name: t\nsettings:\n  - name: A b\n")),
     ?_assertMatch(<<"test: key repeats: expected an integer", _/binary>>,
                   Err("name: t\nrepeats: 0\nsettings:\n  - name: a\n")),
     ?_assertMatch(<<"test: key stop.login_p99: expected a duration", _/binary>>,
                   Err("name: t\nstop: {login_p99: soon}\nsettings:\n  - name: a\n")),
     ?_assertMatch(<<"test: key settings[0].tls: expected none", _/binary>>,
                   Err("name: t\nsettings:\n  - name: a\n    tls: yes please\n")),
     ?_assertMatch(<<"test: YAML syntax error", _/binary>>, Err("name: [t\n"))].

ratio_can_be_off_test() ->
    ?assertMatch({ok, #{ratio := false}}, design(minimal() ++ "ratio: false\n")),
    ?assertMatch({ok, #{ratio := #{users := 1000, size := 64, duration_ms := 20000, from := 500,
                                   p99_ms := 1000, refine := 2, max_steps := 10}}},
                 design(minimal())),
    {error, Think} = design(minimal() ++ "ratio: {think: 10ms}\n"),
    ?assertMatch(<<"test: key ratio.think: unknown key", _/binary>>, Think).

runs_are_interleaved_test() ->
    {ok, D} = design("name: t\nrepeats: 2\nsettings:\n  - name: a\n  - name: b\n"),
    ?assertEqual([<<"a-1">>, <<"b-1">>, <<"a-2">>, <<"b-2">>],
                 [?D:run_id(S, R) || {S, R} <- ?D:runs(D)]).

fingerprint_ignores_texts_and_repeats_test() ->
    {ok, D} = design(minimal()),
    {ok, D2} = design("name: other\nrepeats: 5\ndescription: x\n" ++ tl(lists:dropwhile(fun(C) -> C =/= $\n end, minimal()))),
    {ok, D3} = design(minimal() ++ "rate: 50\n"),
    ?assertEqual(?D:fingerprint(D, false), ?D:fingerprint(D2, false)),
    ?assertNotEqual(?D:fingerprint(D, false), ?D:fingerprint(D3, false)),
    ?assertEqual(?D:base_fingerprint(D), ?D:base_fingerprint(D2)),
    ?assertNotEqual(?D:base_fingerprint(D), ?D:base_fingerprint(D3)),
    %% the ratio is measured apart: other ratio options resume the runs
    {ok, D4} = design(minimal() ++ "ratio: {users: 10, from: 100}\n"),
    ?assertEqual(?D:base_fingerprint(D), ?D:base_fingerprint(D4)),
    %% a setting's own: its flags count, its texts do not
    [A, B] = maps:get(settings, D),
    ?assertEqual(?D:setting_fingerprint(A), ?D:setting_fingerprint(A#{table => <<"x">>, factor => <<"y">>})),
    ?assertNotEqual(?D:setting_fingerprint(B), ?D:setting_fingerprint(B#{erl_flags => <<"+IOt 1">>})).

%% A study.json of before version 2 (the design's ratio options, then with
%% `think', in its fingerprint) is still resumed: its fingerprints are made
%% with the ratio it holds.
v1_study_json_resumes_test() ->
    {ok, D} = design(minimal()),
    OldRatio = #{users => 1000, size => 64, think_ms => 10, duration_ms => 30000},
    V1 = erlang:phash2(maps:without([name, description, repeats, settings], D#{ratio => OldRatio}),
                       1 bsl 32),
    ?assertEqual(integer_to_binary(V1, 16), ?D:v1_base_fingerprint(D, OldRatio)),
    ?assertNotEqual(?D:v1_base_fingerprint(D, OldRatio), ?D:base_fingerprint(D)).

%%% The routed/echo ratio: the search for the capacity

-define(R, throng_bench_study_ratio).

ropts() -> #{from => 500, refine => 2, max_steps => 10, users => 1000}.

held(Rate) -> #{offered => Rate, ok => true, msgs_per_s => Rate}.
failed(Rate) -> #{offered => Rate, ok => false, why => <<"lost">>}.

%% The rates a search tries when the server holds everything up to CAP.
search(Cap, Opts) -> search(Cap, Opts, []).
search(Cap, Opts, Steps) ->
    case ?R:next(Steps, Opts) of
        done -> Steps;
        {step, R} -> search(Cap, Opts, Steps ++ [case R =< Cap of true -> held(R); false -> failed(R) end])
    end.

rates(Steps) -> [R || #{offered := R} <- Steps].

ratio_search_doubles_then_bisects_test() ->
    %% 500, 1000, 2000, 4000 held; 8000 failed; then 6000 (held), 7000 (failed)
    Steps = search(6500, ropts()),
    ?assertEqual([500, 1000, 2000, 4000, 8000, 6000, 7000], rates(Steps)),
    ?assertMatch(#{offered := 6000}, ?R:best(Steps)).

ratio_search_halves_when_the_first_step_fails_test() ->
    Steps = search(300, ropts()),
    ?assertEqual([500, 250, 375, 313], rates(Steps)),
    ?assertMatch(#{offered := 250}, ?R:best(Steps)).

ratio_search_is_bounded_test_() ->
    [%% never saturated: stops at one message per user per millisecond
     ?_assertEqual([500, 1000], rates(search(infinity, (ropts())#{users => 1}))),
     %% the step budget
     ?_assertEqual(3, length(search(100000, (ropts())#{max_steps => 3}))),
     %% no refinement: the first failure ends it
     ?_assertEqual([500, 1000, 2000], rates(search(1500, (ropts())#{refine => 0}))),
     %% nothing holds down to the floor: no capacity
     ?_assertEqual(null, ?R:best(search(1, ropts()))),
     %% nor below a rate at which each user would send fewer than 4
     %% messages in the step (1,000 users, 20 s: 200/s)
     ?_assertEqual([500, 250], rates(search(1, (ropts())#{duration_ms => 20000}))),
     %% a held step above a failed one (noise) is not a bracket below it
     ?_assertEqual(done, ?R:next([failed(500), held(1000)], ropts()))].

ratio_step_scenario_test() ->
    Y = iolist_to_binary(?R:chat_scenario(#{port => 5222, contacts => 18},
                                          #{users => 1000, size => 64, duration_ms => 20000}, 125)),
    {ok, S} = throng_bench_scenario:parse(Y, <<"step">>),
    ?assertMatch(#{sessions := [#{chat := #{size := 64, first_after := {uniform, 5000, 5125},
                                            quiet_end := 2000}}]}, S),
    ?assertNotEqual(nomatch, binary:match(Y, <<"think: {constant: 125ms}">>)).

%%% The stop rule

rules() ->
    #{error_rate => 0.01, min_errors => 10, login_p99_ms => 2000, window_s => 3,
      memory => 1000000, fd_margin => 100}.

row(Extra) -> maps:merge(#{errors_s => 0, logins_s => 100, login_p99_ms => 10,
                           server_rss_bytes => 500000, sessions => 10}, Extra).

check(Rows, Facts) -> throng_bench_study_stop:check(rules(), Rows, Facts).

stop_rule_test_() ->
    Quiet = [row(#{}) || _ <- lists:seq(1, 5)],
    [?_assertEqual(continue, check(Quiet, #{fds => 100, fd_limit => 20000})),
     ?_assertMatch({stop, <<"descriptors">>, _}, check(Quiet, #{fds => 19900, fd_limit => 20000})),
     ?_assertEqual(continue, check(Quiet, #{fds => 19899, fd_limit => 20000})),
     ?_assertMatch({stop, <<"memory">>, _}, check([row(#{server_rss_bytes => 1000001}) | Quiet], #{})),
     %% ten connects without a local port in the window: ports, before errors
     ?_assertMatch({stop, <<"ports">>, _},
                   check([row(#{errors_s => 5, logins_s => 0, errors_by_type_s => #{ports => 5}})
                          || _ <- lists:seq(1, 2)] ++ Quiet, #{})),
     ?_assertMatch({stop, <<"errors">>, _},
                   check([row(#{errors_s => 5, logins_s => 0, errors_by_type_s => #{ports => 3}})
                          || _ <- lists:seq(1, 3)] ++ Quiet, #{})),
     %% 30 errors against 270 logins in 3 s: 10% > 1%
     ?_assertMatch({stop, <<"errors">>, _},
                   check([row(#{errors_s => 10, logins_s => 90}) || _ <- lists:seq(1, 3)] ++ Quiet, #{})),
     %% a high rate but fewer than min_errors: noise, not a limit
     ?_assertEqual(continue, check([row(#{errors_s => 3, logins_s => 1}) | Quiet], #{})),
     %% errors older than the window do not count
     ?_assertEqual(continue, check(Quiet ++ [row(#{errors_s => 100})], #{})),
     ?_assertMatch({stop, <<"login_p99">>, _},
                   check([row(#{login_p99_ms => 2500}) || _ <- lists:seq(1, 3)] ++ Quiet, #{})),
     %% one slow second is not a limit
     ?_assertEqual(continue, check([row(#{login_p99_ms => 2500}), row(#{}), row(#{login_p99_ms => 2500})]
                                   ++ Quiet, #{})),
     %% seconds without logins (no p99) do not make a limit either
     ?_assertEqual(continue, check([row(#{login_p99_ms => undefined}) || _ <- lists:seq(1, 3)], #{})),
     ?_assertMatch({stop, <<"population">>, _}, check(Quiet, #{launched_all => true})),
     %% the first limit named wins: descriptors before population
     ?_assertMatch({stop, <<"descriptors">>, _},
                   check(Quiet, #{fds => 20000, fd_limit => 20000, launched_all => true}))].

%%% Statistics

describe_test() ->
    S = throng_bench_study_stats:describe([2, 4, 4, 4, 5, 5, 7, 9]),
    ?assertEqual(8, maps:get(n, S)),
    ?assertEqual(5.0, maps:get(mean, S)),
    ?assert(abs(maps:get(sd, S) - 2.138) < 0.001),
    %% t(7) = 2.365: 2.365 * 2.138 / sqrt(8)
    ?assert(abs(maps:get(ci95, S) - 1.788) < 0.001),
    ?assertMatch(#{n := 1, mean := 3.0, sd := null, ci95 := null},
                 throng_bench_study_stats:describe([3])),
    ?assertMatch(#{n := 0, mean := null}, throng_bench_study_stats:describe([])).

effect_test() ->
    E = throng_bench_study_stats:effect([10, 11, 12], [20, 21, 22]),
    ?assertEqual(10.0, maps:get(diff, E)),
    ?assert(abs(maps:get(pct, E) - 100 * 10 / 11) < 1.0e-9),
    %% Welch: se = sqrt(1/3 + 1/3), df = 4, t = 2.776
    ?assert(abs(maps:get(ci95, E) - 2.776 * math:sqrt(2 / 3)) < 0.001),
    ?assert(maps:get(significant, E)),
    Noisy = throng_bench_study_stats:effect([10, 20, 30], [12, 22, 32]),
    ?assertNot(maps:get(significant, Noisy)),
    ?assertMatch(#{diff := 2.0, ci95 := null, significant := null},
                 throng_bench_study_stats:effect([10], [12])),
    ?assertMatch(#{diff := null}, throng_bench_study_stats:effect([], [1, 2])).

t95_test() ->
    ?assertEqual(12.706, throng_bench_study_stats:t95(1)),
    ?assertEqual(2.776, throng_bench_study_stats:t95(4.7)),
    ?assertEqual(1.960, throng_bench_study_stats:t95(500)).

%%% A run's figures

run_result_test() ->
    %% 20 s of ramp: 100 sessions more each second, RSS 4,000 bytes per
    %% session above 1 MB (with one odd sample), CPU 50% of which 10% system;
    %% the stop rule fires at 20 s; then the users leave and RSS jumps (the
    %% leave storm is not part of the figures)
    Ramp = [#{t => float(T), sessions => 100 * T, users_logged_in => 100 * T,
              server_rss_bytes => 1000000 + 4000 * 100 * T + case T of 17 -> 300000; _ -> 0 end,
              server_cpu_pct => 50.0, server_sys_pct => 10.0} || T <- lists:seq(1, 20)],
    After = [#{t => 21.0, sessions => 2010, users_logged_in => 2010, server_rss_bytes => 90000000,
               server_cpu_pct => 100.0, server_sys_pct => 50.0},
             #{t => 22.0, sessions => 100, users_logged_in => 2010, server_rss_bytes => 95000000,
               server_cpu_pct => 100.0, server_sys_pct => 50.0}],
    Summary = #{stop => #{reason => <<"population">>, detail => <<"d">>, at_s => 20.0},
                latency_ms => #{delivery => #{p99 => 3.5}, login => #{p99 => 7.0}},
                errors => #{total => 2}, messages => #{lost => 0}},
    R = throng_bench_study:run_result(stopped, Summary, Ramp ++ After,
                                      #{rss0 => 1000000, fd_limit => 20000}),
    ?assertMatch(#{ok := true, peak_sessions := 2000, peak_at_s := 20.0, stop_reason := <<"population">>,
                   delivery_p99_ms := 3.5, login_p99_ms := 7.0, errors := 2, logins := 2000}, R),
    %% the slope over 10-90% of the peak: close to 4,000 despite the odd sample
    ?assert(abs(maps:get(memory_per_session, R) - 4000) < 100),
    %% the one sample at the peak: (9,000,000 - 1,000,000) / 2,000
    ?assertEqual(4000.0, maps:get(memory_per_session_at_peak, R)),
    %% CPU to the peak: 20 s at 50% = 10 s, 2 s of it system, over 2,000 logins
    ?assert(abs(maps:get(cpu_user_ms_per_login, R) - 4.0) < 1.0e-9),
    ?assert(abs(maps:get(cpu_sys_ms_per_login, R) - 1.0) < 1.0e-9),
    ?assertMatch(#{ok := false}, throng_bench_study:run_result(aborted, #{error => <<"x">>}, [], #{})),
    ?assertMatch(#{ok := false, error := <<"the run recorded no rows">>},
                 throng_bench_study:run_result(stopped, Summary, [], #{rss0 => 1, fd_limit => 1})),
    %% without a stop (the deadline) every row counts: the later peak
    ?assertMatch(#{stop_reason := <<"deadline">>, peak_sessions := 2010},
                 throng_bench_study:run_result(complete, maps:remove(stop, Summary), Ramp ++ After,
                                               #{rss0 => 1, fd_limit => infinity})).

read_csv_test() ->
    File = filename:join("/tmp", "throng_bench_study_tests-" ++ os:getpid() ++ ".csv"),
    ok = file:write_file(File, "t,sessions,server_cpu_pct\n1.0,5,\n2.0,7,12.5\n"),
    try
        ?assertEqual([#{t => 1.0, sessions => 5}, #{t => 2.0, sessions => 7, server_cpu_pct => 12.5}],
                     throng_bench_study:read_csv(File))
    after
        file:delete(File)
    end.

%%% The summary of runs

summary_test() ->
    {ok, D} = design("name: t\nrepeats: 2\nsettings:\n  - name: a\n  - name: b\n"),
    Run = fun(S, Rep, Peak) -> #{<<"id">> => <<S/binary, "-", (integer_to_binary(Rep))/binary>>,
                                 <<"setting">> => S, <<"repeat">> => Rep, <<"ok">> => true,
                                 <<"stop_reason">> => <<"descriptors">>, <<"peak_sessions">> => Peak,
                                 <<"memory_per_session">> => 4000.0, <<"series">> => [[1, Peak, 5, 1]]}
          end,
    Runs = [Run(<<"a">>, 1, 100), Run(<<"b">>, 1, 200), Run(<<"a">>, 2, 110),
            (Run(<<"b">>, 2, 0))#{<<"ok">> => false}],
    S = throng_bench_study_report:summarize(D, Runs),
    #{settings := [A, B], runs_planned := 4, baseline := <<"a">>} = S,
    ?assertMatch(#{ok_runs := 2, runs := 2, effect := null,
                   stopped_by := #{<<"descriptors">> := 2}}, A),
    ?assertMatch(#{n := 2, mean := 105.0}, maps:get(peak_sessions, maps:get(metrics, A))),
    ?assertMatch(#{ok_runs := 1, runs := 2}, B),
    %% b has one good run: the difference, no interval
    ?assertMatch(#{diff := 95.0, ci95 := null}, maps:get(peak_sessions, maps:get(effect, B))),
    ?assertNot(lists:any(fun(R) -> maps:is_key(<<"series">>, R) end, maps:get(runs, S))),
    Text = unicode:characters_to_binary(throng_bench_study_report:text(S#{ratio => null})),
    ?assertNotEqual(nomatch, binary:match(Text, <<"4 of 4 runs made">>)),
    Md = unicode:characters_to_binary(throng_bench_study_report:markdown(S#{ratio => null})),
    %% a's two runs: 105 ± t(1) * 7.07 / sqrt(2) = 105 ± 63.5
    ?assertNotEqual(nomatch, binary:match(Md, <<"| `a` | 2 | 105±64 | 4000±0 |"/utf8>>)),
    ?assertNotEqual(nomatch, binary:match(Md, <<"| `b` | +95 (+90.5%) |">>)).

%%% sysctls: put back after a run, and after a run that was killed

sysctl_root() ->
    Root = filename:join("/tmp", "throng_bench_study_tests-sysctl-" ++ os:getpid()),
    ok = filelib:ensure_dir(filename:join([Root, "net", "ipv4", "x"])),
    ok = file:write_file(filename:join([Root, "net", "ipv4", "tcp_sack"]), "1\n"),
    Root.

read_sack(Root) ->
    {ok, V} = file:read_file(filename:join([Root, "net", "ipv4", "tcp_sack"])),
    V.

sysctl_put_back_after_a_run_test() ->
    Root = sysctl_root(),
    Journal = filename:join(Root, "journal"),
    try
        ?assertEqual(ok, throng_bench_study_sysctl:writable(Root, <<"net.ipv4.tcp_sack">>)),
        ?assertMatch({error, _}, throng_bench_study_sysctl:writable(Root, <<"net.ipv4.nothing">>)),
        Seen = throng_bench_study_sysctl:with(Root, Journal, [{<<"net.ipv4.tcp_sack">>, <<"0">>}],
                                              fun() -> {read_sack(Root), filelib:is_regular(Journal)} end),
        ?assertEqual({<<"0">>, true}, Seen),
        ?assertEqual(<<"1">>, read_sack(Root)),
        ?assertNot(filelib:is_regular(Journal)),
        %% a run that crashes: the value comes back too
        ?assertError(boom, throng_bench_study_sysctl:with(Root, Journal, [{<<"net.ipv4.tcp_sack">>, <<"0">>}],
                                                          fun() -> error(boom) end)),
        ?assertEqual(<<"1">>, read_sack(Root))
    after
        file:del_dir_r(Root)
    end.

sysctl_recovered_after_a_killed_run_test() ->
    Root = sysctl_root(),
    Journal = filename:join(Root, "journal"),
    try
        %% a study process killed in the middle of its run
        {Pid, Ref} = spawn_monitor(fun() ->
                                           throng_bench_study_sysctl:with(
                                             Root, Journal, [{<<"net.ipv4.tcp_sack">>, <<"0">>}],
                                             fun() -> timer:sleep(infinity) end)
                                   end),
        wait_until(fun() -> read_sack(Root) =:= <<"0">> end),
        exit(Pid, kill),
        receive {'DOWN', Ref, process, Pid, killed} -> ok end,
        ?assertEqual(<<"0">>, read_sack(Root)),
        ?assertEqual([{<<"net.ipv4.tcp_sack">>, <<"1">>}], throng_bench_study_sysctl:recover(Root, Journal)),
        ?assertEqual(<<"1">>, read_sack(Root)),
        ?assertEqual([], throng_bench_study_sysctl:recover(Root, Journal))
    after
        file:del_dir_r(Root)
    end.

wait_until(F) ->
    case F() of
        true -> ok;
        false -> timer:sleep(10), wait_until(F)
    end.

