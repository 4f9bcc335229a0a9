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
    Mods = maps:get(modules, C),
    ?assertEqual(lists:sort([N || {N, _} <- throng_config_spec:modules()]),
                 lists:sort(maps:keys(Mods))),
    ?assertEqual(false, maps:get(allow_create, maps:get(register, Mods))),
    ?assertEqual(300, maps:get(interval, maps:get(ping, Mods))),
    ?assertEqual(4096, maps:get(scram_iterations, maps:get(auth, C))).

yaml_style_input_test() ->
    setup(),
    {ok, [Doc]} = fast_yaml:decode(<<"hosts: [Example.ORG]\nlisten:\n  - port: 5223\n    ip: \"::\"\n"
                                    "    starttls: required\n    max_connections: infinity\n"
                                    "modules:\n  disco:\n  register: {allow_create: true}\n">>),
    {ok, C} = throng_config:validate(Doc),
    ?assertEqual([<<"example.org">>], maps:get(hosts, C)),
    [L] = maps:get(listen, C),
    ?assertEqual({5223, {0, 0, 0, 0, 0, 0, 0, 0}, required, infinity},
                 {maps:get(port, L), maps:get(ip, L), maps:get(starttls, L),
                  maps:get(max_connections, L)}),
    %% Named modules only, with their defaults filled in.
    ?assertEqual(#{disco => #{},
                   register => #{allow_create => true, min_password_length => 6, ip_interval => 60}},
                 maps:get(modules, C)).

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
    ?assertEqual("modules.register.allow_create: expected true or false, got \"maybe\"",
                 err(#{modules => #{register => #{allow_create => <<"maybe">>}}})),
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
    ?assertEqual(1000, maps:get(max_messages, maps:get(offline, throng_config:get([modules])))),
    ?assertEqual(#{max_messages => 1000, max_bytes => 4194304, max_node_bytes => 1073741824},
                 maps:get(throng_mod_offline, throng_config:modules(<<"localhost">>))),
    file:del_dir_r(Dir).

unknown_module_test() ->
    setup(),
    Msg = err(#{modules => #{pubsub => #{}}}),
    ?assertMatch({match, _}, re:run(Msg, "^modules\\.pubsub: unknown option \\(known here: [a-z_, ]*disco, [a-z_, ]*last, [a-z_, ]*muc, offline,")).

unknown_module_option_test() ->
    setup(),
    ?assertMatch({match, _}, re:run(err(#{modules => #{ping => #{every => 5}}}),
                                    "^modules\\.ping\\.every: unknown option \\(known here: interval, timeout\\)")).

moved_option_test() ->
    setup(),
    ?assertEqual("registration: this option moved to modules.register (enabled -> allow_create) "
                 "(see docs/configuration.md)", err(#{registration => #{enabled => true}})),
    ?assertEqual("ping: this option moved to modules.ping (see docs/configuration.md)",
                 err(#{<<"ping">> => #{}})).

host_config_test() ->
    setup(),
    {ok, C} = throng_config:validate(#{hosts => [<<"a.example">>, <<"b.example">>],
                                       modules => #{disco => #{}},
                                       host_config => [#{host => <<"b.example">>,
                                                         modules => #{ping => #{}}}]}),
    [HC] = maps:get(host_config, C),
    ?assertEqual([ping], maps:keys(maps:get(modules, HC))),
    ?assertEqual("host_config[0].host: c.example is not one of hosts",
                 err(#{hosts => [<<"a.example">>],
                       host_config => [#{host => <<"c.example">>, modules => #{}}]})),
    ?assertEqual("host_config[0].modules: required option missing",
                 err(#{hosts => [<<"a.example">>], host_config => [#{host => <<"a.example">>}]})).

%% admins: none by default; bare JIDs kept normalized; a full JID, a domain
%% or garbage is refused with the key and the value.
admins_test() ->
    setup(),
    {ok, C0} = throng_config:validate(#{}),
    ?assertEqual([], maps:get(admins, C0)),
    {ok, C} = throng_config:validate(#{admins => [<<"Admin@Example.ORG">>, <<"root@localhost">>]}),
    ?assertEqual([<<"admin@example.org">>, <<"root@localhost">>], maps:get(admins, C)),
    [?assertEqual("admins[1]: expected a bare JID such as admin@example.org, got \"" ++ Bad ++ "\"",
                  err(#{admins => [<<"ok@localhost">>, list_to_binary(Bad)]}))
     || Bad <- ["root@localhost/laptop", "localhost", "a b@localhost", ""]].

%% cluster.node_address: empty (no address) by default; host:port with an
%% IPv6 address in brackets; anything else refused with the key.
node_address_test() ->
    setup(),
    {ok, C0} = throng_config:validate(#{}),
    ?assertEqual(<<>>, maps:get(node_address, maps:get(cluster, C0))),
    [begin
         {ok, C} = throng_config:validate(#{cluster => #{node_address => A}}),
         ?assertEqual(A, maps:get(node_address, maps:get(cluster, C)))
     end || A <- [<<"10.0.0.1:5222">>, <<"[::1]:5301">>, <<"xmpp.example.org:5222">>]],
    [?assertEqual("cluster.node_address: expected host:port such as 10.0.0.1:5222 or "
                  "[::1]:5222, got \"" ++ Bad ++ "\"",
                  err(#{cluster => #{node_address => list_to_binary(Bad)}}))
     || Bad <- ["10.0.0.1", "::1:5222", "host:0", "host:port"]].

%% The tls section: defaults (AES-128-GCM first), YAML names, and the
%% checks across its options.
tls_section_test() ->
    setup(),
    {ok, C} = throng_config:validate(#{}),
    #{tls := #{versions := ['tlsv1.2', 'tlsv1.3'], ciphers := [First | _], groups := [x25519 | _]}} = C,
    ?assertEqual('TLS_AES_128_GCM_SHA256', First),
    {ok, [Doc]} = fast_yaml:decode(<<"tls:\n  versions: [tlsv1.3]\n"
                                    "  ciphers: [TLS_CHACHA20_POLY1305_SHA256]\n"
                                    "  groups: [x25519, secp384r1]\n">>),
    {ok, C2} = throng_config:validate(Doc),
    ?assertEqual(#{versions => ['tlsv1.3'], ciphers => ['TLS_CHACHA20_POLY1305_SHA256'],
                   groups => [x25519, secp384r1]}, maps:get(tls, C2)),
    ?assertEqual("tls.versions: at least one is needed", err(#{tls => #{versions => []}})),
    ?assertEqual("tls.groups: at least one is needed", err(#{tls => #{groups => []}})),
    ?assertEqual("tls.ciphers: no cipher suite for tlsv1.2, which tls.versions enables",
                 err(#{tls => #{ciphers => [<<"TLS_AES_128_GCM_SHA256">>]}})),
    ?assertEqual("tls.ciphers: no cipher suite for tlsv1.3, which tls.versions enables",
                 err(#{tls => #{ciphers => [<<"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256">>]}})),
    ?assertMatch({match, _}, re:run(err(#{tls => #{ciphers => [<<"TLS_RSA_WITH_AES_128_CBC_SHA">>]}}),
                                    "^tls.ciphers\\[0\\]: expected one of TLS_AES_128_GCM_SHA256")),
    ?assertMatch({match, _}, re:run(err(#{tls => #{versions => [<<"tlsv1.1">>]}}),
                                    "^tls.versions\\[0\\]: expected one of tlsv1.2, tlsv1.3")),
    %% TLS 1.3 alone needs no TLS 1.2 suite
    ?assertMatch({ok, _}, throng_config:validate(#{tls => #{versions => [<<"tlsv1.3">>],
                                                            ciphers => [<<"TLS_AES_128_GCM_SHA256">>]}})).
