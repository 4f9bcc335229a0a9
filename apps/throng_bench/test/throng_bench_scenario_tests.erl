%% Scenario files: the built-ins parse, every kind of mistake gives a message
%% naming the key, the value and the expectation.
-module(throng_bench_scenario_tests).
-include_lib("eunit/include/eunit.hrl").

-define(MIN, <<"arrival:\n  - rate: 10\n    max_users: 100\n"
               "sessions:\n  - name: idle\n    probability: 1\n">>).

parse(Bin) -> throng_bench_scenario:parse(Bin, <<"test.yml">>).

error_of(Bin) ->
    {error, Msg} = parse(Bin),
    Msg.

contains(Msg, Part) ->
    case binary:match(Msg, Part) of
        nomatch -> ?debugFmt("~ts does not contain ~ts", [Msg, Part]), false;
        _ -> true
    end.

paper_builtin_test() ->
    {ok, S} = throng_bench_scenario:load("paper"),
    #{name := <<"paper">>, sessions := Ss, arrival := [P], users := U, server := Srv} = S,
    ?assertEqual([<<"inactive">>, <<"idle">>, <<"active">>], [N || #{name := N} <- Ss]),
    ?assertEqual([0.2, 0.6, 0.2], [Pr || #{probability := Pr} <- Ss]),
    ?assertMatch(#{dist := poisson, max_users := 15000}, P),
    ?assertMatch(#{contacts := neighbours, contact_count := 18, count := 15000}, U),
    ?assertMatch(#{auth := plain, tls := none, port := 5222}, Srv),
    [Inactive, Idle, Active] = Ss,
    ?assertMatch(#{roster := true, chat := #{think := {exponential, 600000}}}, Inactive),
    ?assertMatch(#{roster := false, chat := none, keepalive := 60000,
                   length := {constant, 300000}}, Idle),
    ?assertMatch(#{chat := #{think := {exponential, 20000}, size := 64, quiet_end := 0}}, Active).

smoke_builtin_test() ->
    ?assertMatch({ok, #{name := <<"smoke">>}}, throng_bench_scenario:load("smoke")).

minimal_file_gets_defaults_test() ->
    {ok, S} = parse(?MIN),
    ?assertMatch(#{server := #{host := <<"127.0.0.1">>, port := 5222, domain := <<"localhost">>},
                   users := #{count := 100, first := 1, name := <<"user%N">>},
                   timeouts := #{connect := 10000, step := 30000},
                   duration := auto, grace := 10000}, S).

distributions_test() ->
    Y = <<"arrival: [{rate: 1, max_users: 1}]\nsessions:\n"
          "  - {name: a, probability: 0.25, length: 90}\n"
          "  - {name: b, probability: 0.25, length: {exponential: 2m}}\n"
          "  - {name: c, probability: 0.25, length: {uniform: [1s, 1500ms]}}\n"
          "  - {name: d, probability: 0.25, length: {constant: 1h}}\n">>,
    {ok, #{sessions := Ss}} = parse(Y),
    ?assertEqual([{constant, 90000}, {exponential, 120000}, {uniform, 1000, 1500},
                  {constant, 3600000}], [L || #{length := L} <- Ss]).

yaml_syntax_error_names_line_test() ->
    Msg = error_of(<<"arrival: [1, 2\nsessions: x\n">>),
    ?assert(contains(Msg, <<"test.yml: YAML syntax error at line">>)).

unknown_key_is_named_test() ->
    Msg = error_of(<<?MIN/binary, "servr:\n  port: 1\n">>),
    ?assert(contains(Msg, <<"key servr: unknown key">>)),
    ?assert(contains(Msg, <<"server">>)).

nested_unknown_key_test() ->
    Msg = error_of(<<?MIN/binary, "server:\n  prot: 1\n">>),
    ?assert(contains(Msg, <<"key server.prot: unknown key">>)).

wrong_type_names_value_and_expectation_test() ->
    Msg = error_of(<<?MIN/binary, "server:\n  port: 99999\n">>),
    ?assert(contains(Msg, <<"key server.port: expected an integer from 1 to 65535, got 99999">>)).

bad_duration_in_list_item_test() ->
    Msg = error_of(<<"arrival:\n  - rate: 10\n    duration: soon\n"
                     "sessions:\n  - name: idle\n    probability: 1\n">>),
    ?assert(contains(Msg, <<"key arrival[0].duration: expected a positive duration">>)),
    ?assert(contains(Msg, <<"got \"soon\"">>)).

bad_distribution_test() ->
    Msg = error_of(<<?MIN/binary, "length: {gaussian: 3s}\n">>),
    ?assert(contains(Msg, <<"key length: expected a duration (constant) or one of">>)).

bad_enum_test() ->
    Msg = error_of(<<?MIN/binary, "server:\n  auth: digest-md5\n">>),
    ?assert(contains(Msg, <<"key server.auth: expected one of plain, scram-sha-1, scram-sha-256, "
                            "scram-sha-1-plus, scram-sha-256-plus, fast, got \"digest-md5\"">>)).

%% auth fast is SASL2, which servers offer over TLS only; -plus binds TLS.
fast_needs_tls_test() ->
    Msg = error_of(<<?MIN/binary, "server:\n  auth: fast\n">>),
    ?assert(contains(Msg, <<"key server.auth: fast (SASL2, XEP-0388) is offered over TLS only">>)),
    Msg2 = error_of(<<?MIN/binary, "server:\n  auth: scram-sha-256-plus\n">>),
    ?assert(contains(Msg2, <<"scram-sha-256-plus binds the TLS connection">>)),
    Msg3 = error_of(<<?MIN/binary, "server:\n  tls_resume: true\n">>),
    ?assert(contains(Msg3, <<"key server.tls_resume: resumes TLS sessions: set server.tls">>)),
    ?assertMatch({ok, #{server := #{auth := fast, tls := direct}}},
                 parse(<<?MIN/binary, "server:\n  auth: fast\n  tls: direct\n">>)).

missing_required_key_test() ->
    Msg = error_of(<<"arrival:\n  - rate: 10\n    max_users: 5\n">>),
    ?assert(contains(Msg, <<"key sessions: missing">>)),
    Msg2 = error_of(<<"arrival:\n  - max_users: 5\nsessions: [{name: a, probability: 1}]\n">>),
    ?assert(contains(Msg2, <<"key arrival[0].rate: missing">>)).

probabilities_must_sum_to_one_test() ->
    Msg = error_of(<<"arrival: [{rate: 1, max_users: 1}]\nsessions:\n"
                     "  - {name: a, probability: 0.5}\n  - {name: b, probability: 0.3}\n">>),
    ?assert(contains(Msg, <<"key sessions: the probabilities add up to 0.8000, expected 1">>)).

endless_arrival_rejected_test() ->
    Msg = error_of(<<"arrival: [{rate: 1}]\nsessions: [{name: a, probability: 1}]\n">>),
    ?assert(contains(Msg, <<"key arrival: every phase runs forever">>)).

not_a_mapping_test() ->
    Msg = error_of(<<"- just\n- a list\n">>),
    ?assert(contains(Msg, <<"expected a mapping">>)),
    ?assert(contains(error_of(<<>>), <<"empty">>)).

odd_contact_count_test() ->
    Msg = error_of(<<?MIN/binary, "users: {contact_count: 5}\n">>),
    ?assert(contains(Msg, <<"key users.contact_count: expected an even number">>)).

missing_file_test() ->
    {error, Msg} = throng_bench_scenario:load("/nonexistent/x.yml"),
    ?assert(contains(Msg, <<"no such file">>)).

overrides_test() ->
    {ok, S0} = throng_bench_scenario:load("paper"),
    {ok, S} = throng_bench_scenario:apply_overrides(
                S0, #{users => 500, rate => 100, port => 15222, length => {constant, 30000},
                      auth => 'scram-sha-256'}),
    ?assertMatch(#{arrival := [#{rate := 100, max_users := 500}], users := #{count := 500},
                   server := #{port := 15222, auth := 'scram-sha-256'}}, S),
    ?assert(lists:all(fun(#{length := L}) -> L =:= {constant, 30000} end, maps:get(sessions, S))),
    Two = S0#{arrival => [hd(maps:get(arrival, S0)), hd(maps:get(arrival, S0))]},
    ?assertMatch({error, <<"--rate needs", _/binary>>},
                 throng_bench_scenario:apply_overrides(Two, #{rate => 5})).

session_index_test() ->
    Ss = [#{name => a, probability => 0.2}, #{name => b, probability => 0.6},
          #{name => c, probability => 0.2}],
    ?assertEqual(1, throng_bench_scenario:session_index(Ss, 0.1)),
    ?assertEqual(2, throng_bench_scenario:session_index(Ss, 0.5)),
    ?assertEqual(3, throng_bench_scenario:session_index(Ss, 0.95)),
    ?assertEqual(3, throng_bench_scenario:session_index(Ss, 0.9999999)).

%% server.targets: a list of "host:port" (port ranges allowed); without it
%% the one server.host:server.port.
targets_key_test() ->
    {ok, S} = parse(<<"server: {targets: [\"127.0.0.1:15301-15302\", \"127.0.0.2:5222\"]}\n",
                      ?MIN/binary>>),
    ?assertEqual([{<<"127.0.0.1">>, 15301}, {<<"127.0.0.1">>, 15302}, {<<"127.0.0.2">>, 5222}],
                 throng_bench_scenario:targets(S)),
    {ok, One} = parse(<<"server: {host: h, port: 7}\n", ?MIN/binary>>),
    ?assertEqual([{<<"h">>, 7}], throng_bench_scenario:targets(One)),
    %% a port on the command line replaces the scenario's targets
    {ok, S1} = throng_bench_scenario:apply_overrides(S, #{port => 9}),
    ?assertEqual([{<<"127.0.0.1">>, 9}], throng_bench_scenario:targets(S1)),
    Msg = error_of(<<"server: {targets: [\"h:1\", \"h:1\"]}\n", ?MIN/binary>>),
    ?assert(contains(Msg, <<"key server.targets: expected a list of \"HOST:PORT\"">>)),
    ?assert(contains(error_of(<<"server: {targets: 5}\n", ?MIN/binary>>), <<"server.targets">>)).
