%% @doc The configuration loader: defaults, validation, and error messages
%% that name the key, the value and what was expected.
-module(throng_config_tests).

-include_lib("eunit/include/eunit.hrl").

setup() ->
    {ok, _} = application:ensure_all_started(fast_yaml),
    {ok, _} = application:ensure_all_started(stringprep),
    ok.

err(Raw) ->
    {error, Msg} = throng_config:validate(Raw),
    Msg.

defaults_test() ->
    setup(),
    {ok, C} = throng_config:validate(#{}),
    ?assertEqual([<<"localhost">>], maps:get(hosts, C)),
    [L] = maps:get(listen, C),
    ?assertEqual(5222, maps:get(port, L)),
    ?assertEqual({127, 0, 0, 1}, maps:get(ip, L)),
    ?assertEqual(262144, maps:get(max_stanza_size, L)),
    ?assertEqual(false, maps:get(enabled, maps:get(registration, C))),
    ?assertEqual(4096, maps:get(scram_iterations, maps:get(auth, C))).

yaml_style_input_test() ->
    setup(),
    {ok, [Doc]} = fast_yaml:decode(<<"hosts: [Example.ORG]\nlisten:\n  - port: 5223\n    ip: \"::\"\n"
                                    "    starttls: required\n    max_connections: infinity\n"
                                    "registration: {enabled: true}\n">>),
    {ok, C} = throng_config:validate(Doc),
    ?assertEqual([<<"example.org">>], maps:get(hosts, C)),
    [L] = maps:get(listen, C),
    ?assertEqual({5223, {0, 0, 0, 0, 0, 0, 0, 0}, required, infinity},
                 {maps:get(port, L), maps:get(ip, L), maps:get(starttls, L),
                  maps:get(max_connections, L)}),
    ?assertEqual(true, maps:get(enabled, maps:get(registration, C))).

unknown_key_test() ->
    setup(),
    Msg = err(#{<<"listen">> => [#{<<"prot">> => 1}]}),
    ?assertMatch({match, _}, re:run(Msg, "^listen\\[0\\]\\.prot: unknown option")),
    ?assertMatch({match, _}, re:run(Msg, "port")).

out_of_range_test() ->
    setup(),
    ?assertEqual("listen[1].port: expected an integer from 0 to 65535, got 70000",
                 err(#{listen => [#{}, #{port => 70000}]})).

wrong_type_test() ->
    setup(),
    ?assertEqual("registration.enabled: expected true or false, got \"maybe\"",
                 err(#{registration => #{enabled => <<"maybe">>}})),
    ?assertEqual("loglevel: expected one of emergency, alert, critical, error, warning, notice, "
                 "info, debug, got \"loud\"", err(#{loglevel => <<"loud">>})),
    ?assertEqual("listen[0].ip: expected an IP address such as \"127.0.0.1\" or \"::\", got \"nowhere\"",
                 err(#{listen => [#{ip => <<"nowhere">>}]})),
    ?assertEqual("hosts: expected a list, got \"localhost\"", err(#{hosts => <<"localhost">>})),
    ?assertEqual("hosts[0]: expected a domain name, got \"bad domain\"",
                 err(#{hosts => [<<"bad domain">>]})).

not_a_mapping_test() ->
    setup(),
    ?assertEqual("auth: expected a mapping of option: value, got 5", err(#{auth => 5})).

duplicate_key_test() ->
    setup(),
    ?assertEqual("loglevel: option given twice",
                 err([{<<"loglevel">>, <<"info">>}, {<<"loglevel">>, <<"debug">>}])).

file_errors_test() ->
    setup(),
    Dir = filename:join("/tmp", "throng_config_tests_" ++ os:getpid()),
    ok = filelib:ensure_dir(filename:join(Dir, "x")),
    Bad = filename:join(Dir, "bad.yml"),
    ok = file:write_file(Bad, <<"listen:\n  - port: [1\n">>),
    {error, Syntax} = throng_config:load_file(Bad),
    ?assertMatch({match, _}, re:run(Syntax, "bad.yml:\\d+:\\d+: YAML syntax error")),
    {error, Missing} = throng_config:load_file(filename:join(Dir, "none.yml")),
    ?assertMatch({match, _}, re:run(Missing, "cannot read configuration file .*none.yml")),
    Good = filename:join(Dir, "good.yml"),
    ok = file:write_file(Good, <<"loglevel: info\n">>),
    ok = throng_config:load_file(Good),
    ?assertEqual(info, throng_config:get([loglevel])),
    ?assertEqual(5, throng_config:get([offline, max_messages]) div 200),
    file:del_dir_r(Dir).
