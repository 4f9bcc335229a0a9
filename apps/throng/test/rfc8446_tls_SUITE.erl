%% TLS 1.3 (RFC 8446) and TLS 1.2 (RFC 5246, AEAD suites of RFC 5288 and
%% RFC 7905) as Throng serves them: the handshake in the throng_tls_nif
%% NIF, the records in throng_tls_record. The peer is an independent
%% implementation, OTP's ssl, over real sockets: a wrong key, nonce or
%% sequence number anywhere fails its decryption. The cases that move
%% records run again over the socket backend (group socket_backend).
-module(rfc8446_tls_SUITE).
-include_lib("common_test/include/ct.hrl").
-include_lib("eunit/include/eunit.hrl").

-compile([export_all, nowarn_export_all]).

all() ->
    [tls13_each_suite, tls12_each_suite_rsa, tls12_each_suite_ecdsa, large_data_both_ways,
     byte_by_byte, key_update_write, key_update_read_write, close_notify_both_ways,
     tampered_record_is_fatal, old_versions_refused, cbc_suites_refused,
     renegotiation_refused, alpn_and_exporter, resumption_with_ticket, one_ticket_per_handshake,
     ticket_goes_out_with_the_first_record, ticket_before_close_notify,
     ticket_before_key_update,
     slow_key_handshake, no_openssl_state_after_handshake, server_renews_its_key,
     tls12_write_key_limit_ends_writing, server_prefers_aes_128_gcm,
     chacha20_when_the_client_puts_it_first, configured_versions, configured_ciphers,
     configured_groups, tls12_without_suites_refused, finite_field_groups_not_by_default,
     finite_field_groups_run_dirty, slow_key_dirty_after_hello_retry,
     tickets_survive_new_contexts,
     {group, socket_backend}].

%% The TLS transport over a TCP socket of the socket backend.
groups() ->
    [throng_ct:socket_backend_group(
       [tls13_each_suite, large_data_both_ways, byte_by_byte, key_update_read_write,
        close_notify_both_ways, tampered_record_is_fatal])].

init_per_group(socket_backend, Config) ->
    throng_ct:init_socket_backend(Config).

end_per_group(_Group, _Config) ->
    ok.

init_per_suite(Config) ->
    {ok, _} = application:ensure_all_started(ssl),
    ok = throng_metrics:init(),    % the transport counts handshakes
    Dir = ?config(priv_dir, Config),
    Rsa = filename:join(Dir, "rsa.pem"),
    Ec = filename:join(Dir, "ec.pem"),
    ok = make_cert(Dir, "rsa", ["-newkey", "rsa:2048"], Rsa),
    ok = make_cert(Dir, "ec", ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"], Ec),
    Rsa4096 = filename:join(Dir, "rsa4096.pem"),
    ok = make_cert(Dir, "rsa4096", ["-newkey", "rsa:4096"], Rsa4096),
    [{rsa, Rsa}, {ec, Ec}, {rsa4096, Rsa4096} | Config].

end_per_suite(_Config) ->
    ok.

make_cert(Dir, Name, KeyArgs, Pem) ->
    Key = filename:join(Dir, Name ++ ".key"),
    Crt = filename:join(Dir, Name ++ ".crt"),
    Cmd = lists:flatten(["openssl req -x509 -nodes -days 2 -subj /CN=localhost ",
                         lists:join(" ", KeyArgs), " -keyout ", Key, " -out ", Crt, " 2>&1"]),
    _ = os:cmd(Cmd),
    {ok, K} = file:read_file(Key),
    {ok, C} = file:read_file(Crt),
    file:write_file(Pem, [C, K]).

%%% Cases

tls13_each_suite(Config) ->
    ?assertEqual(3, length(suites('tlsv1.3'))),
    [begin
         {C, S} = connect(Config, rsa, [{versions, ['tlsv1.3']}, {ciphers, [Suite]}]),
         {ok, [{protocol, 'tlsv1.3'}, {selected_cipher_suite, Selected}]} =
             ssl:connection_information(C, [protocol, selected_cipher_suite]),
         ?assertEqual(Suite, Selected),
         echo(C, S, <<"hello over ", (atom_to_binary(maps:get(cipher, Suite)))/binary>>),
         stop(C, S)
     end || Suite <- suites('tlsv1.3')],
    ok.

tls12_each_suite_rsa(Config) ->
    each_tls12(Config, rsa, rsa).

tls12_each_suite_ecdsa(Config) ->
    each_tls12(Config, ec, ecdsa).

each_tls12(Config, Cert, KeyExchange) ->
    Suites = [S || #{key_exchange := ecdhe_rsa} = S <- suites('tlsv1.2'), KeyExchange =:= rsa] ++
             [S || #{key_exchange := ecdhe_ecdsa} = S <- suites('tlsv1.2'), KeyExchange =:= ecdsa],
    ?assertEqual(3, length(Suites)),
    [begin
         {C, S} = connect(Config, Cert, [{versions, ['tlsv1.2']}, {ciphers, [Suite]}]),
         {ok, [{protocol, 'tlsv1.2'}, {selected_cipher_suite, Suite}]} =
             ssl:connection_information(C, [protocol, selected_cipher_suite]),
         echo(C, S, <<"twelve">>),
         echo(C, S, <<"and again">>),
         stop(C, S)
     end || Suite <- Suites],
    ok.

%% Whatever order the client lists the suites in (OTP ssl lists AES-256
%% first), the server picks AES-128-GCM: TLS 1.3's mandatory suite, whose
%% key schedule hashes with SHA-256 (SHA-384 for AES-256 costs ~30 us more
%% per handshake; docs/tls.md). Both versions, both certificate types.
server_prefers_aes_128_gcm(Config) ->
    [begin
         All = suites(V),
         ?assertMatch(#{cipher := aes_256_gcm}, hd(All)),    % the client's own order
         {C, S} = connect(Config, Cert, [{versions, [V]}, {ciphers, All}]),
         {ok, [{selected_cipher_suite, Selected}]} =
             ssl:connection_information(C, [selected_cipher_suite]),
         ?assertMatch(#{cipher := aes_128_gcm, prf := sha256}, Selected),
         echo(C, S, <<"a hundred and twenty-eight">>),
         stop(C, S)
     end || V <- ['tlsv1.3', 'tlsv1.2'], Cert <- [rsa, ec]],
    ok.

%% A client that lists ChaCha20-Poly1305 first (a phone without AES
%% instructions) gets it (OpenSSL's SSL_OP_PRIORITIZE_CHACHA).
chacha20_when_the_client_puts_it_first(Config) ->
    [begin
         All = suites(V),
         Chacha = [S || #{cipher := chacha20_poly1305} = S <- All],
         {C, S} = connect(Config, Cert, [{versions, [V]}, {ciphers, Chacha ++ (All -- Chacha)}]),
         {ok, [{selected_cipher_suite, Selected}]} =
             ssl:connection_information(C, [selected_cipher_suite]),
         ?assertMatch(#{cipher := chacha20_poly1305}, Selected),
         echo(C, S, <<"chacha">>),
         stop(C, S)
     end || V <- ['tlsv1.3', 'tlsv1.2'], Cert <- [rsa, ec]],
    ok.

%% tls.versions: [tlsv1.3] refuses a TLS 1.2 client (protocol_version),
%% [tlsv1.2] a TLS 1.3-only one; each serves its own version.
configured_versions(Config) ->
    [begin
         Tls = (throng_config_spec:tls_defaults())#{versions => [On]},
         {Refused, S1} = try_connect(Config, ec, [{versions, [Off]}], #{tls => Tls}),
         ?assertMatch({error, {tls_alert, {protocol_version, _}}}, Refused),
         ?assertMatch({error, {handshake, _}}, server_result(S1)),
         {C, S} = connect(Config, ec, [{versions, ['tlsv1.2', 'tlsv1.3']}], #{tls => Tls}),
         ?assertEqual({ok, [{protocol, On}]}, ssl:connection_information(C, [protocol])),
         echo(C, S, <<"only ", (atom_to_binary(On))/binary>>),
         stop(C, S)
     end || {On, Off} <- [{'tlsv1.3', 'tlsv1.2'}, {'tlsv1.2', 'tlsv1.3'}]],
    ok.

%% tls.ciphers: only those, first the server's first; a client with none
%% of them is refused.
configured_ciphers(Config) ->
    Tls = (throng_config_spec:tls_defaults())#{
            ciphers => ['TLS_CHACHA20_POLY1305_SHA256', 'TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384']},
    [begin
         {C, S} = connect(Config, rsa, [{versions, [V]}, {ciphers, suites(V)}], #{tls => Tls}),
         {ok, [{selected_cipher_suite, Selected}]} =
             ssl:connection_information(C, [selected_cipher_suite]),
         ?assertMatch(#{cipher := Want}, Selected),
         echo(C, S, <<"configured">>),
         stop(C, S),
         Others = [X || #{cipher := Ci} = X <- suites(V), Ci =:= aes_128_gcm],
         {Refused, S1} = try_connect(Config, rsa, [{versions, [V]}, {ciphers, Others}],
                                     #{tls => Tls}),
         ?assertMatch({error, {tls_alert, _}}, Refused),
         ?assertMatch({error, {handshake, _}}, server_result(S1))
     end || {V, Want} <- [{'tlsv1.3', chacha20_poly1305}, {'tlsv1.2', aes_256_gcm}]],
    ok.

%% A context with TLS 1.2 on and no TLS 1.2 suite is refused (the
%% configuration check refuses it first; the NIF never falls back to
%% OpenSSL's default list, which has CBC suites).
tls12_without_suites_refused(Config) ->
    Tls = (throng_config_spec:tls_defaults())#{ciphers => ['TLS_AES_128_GCM_SHA256']},
    ?assertMatch({error, "tls.ciphers: no TLS 1.2 suite"},
                 throng_tls_nif:ctx_new(?config(ec, Config), [], Tls)),
    ?assertMatch({ok, _}, throng_tls_nif:ctx_new(?config(ec, Config), [],
                                                 Tls#{versions => ['tlsv1.3']})).

%% tls.groups: a TLS 1.3 client whose key share is for another group it
%% also supports is asked again (HelloRetryRequest) and served; one with
%% none of the groups is refused. TLS 1.2's ECDHE takes them too.
configured_groups(Config) ->
    Tls = (throng_config_spec:tls_defaults())#{groups => [secp384r1, secp384r1]},   % twice: once
    %% OTP ssl names TLS 1.3's groups supported_groups and TLS 1.2's eccs
    Groups = fun('tlsv1.3', Gs) -> {supported_groups, Gs};
                ('tlsv1.2', Gs) -> {eccs, Gs}
             end,
    [begin
         {C, S} = connect(Config, ec, [{versions, [V]}, Groups(V, [x25519, secp256r1, secp384r1])],
                          #{tls => Tls}),
         echo(C, S, <<"p-384">>),
         stop(C, S),
         {Refused, S1} = try_connect(Config, ec, [{versions, [V]}, Groups(V, [x25519, secp256r1])],
                                     #{tls => Tls}),
         ?assertMatch({error, {tls_alert, _}}, Refused),
         ?assertMatch({error, {handshake, _}}, server_result(S1))
     end || V <- ['tlsv1.3', 'tlsv1.2']],
    ok.

%% The finite-field groups cost up to 110 ms of CPU per handshake at the
%% client's choice (ffdhe8192): not offered unless configured. A client
%% that supports only those is refused.
finite_field_groups_not_by_default(Config) ->
    ?assertEqual([x25519, secp256r1, secp384r1],
                 maps:get(groups, throng_config_spec:tls_defaults())),
    {Refused, S} = try_connect(Config, ec, [{versions, ['tlsv1.3']},
                                            {supported_groups, [ffdhe2048, ffdhe8192]}]),
    ?assertMatch({error, {tls_alert, _}}, Refused),
    ?assertMatch({error, {handshake, _}}, server_result(S)),
    {ok, Ctx} = throng_tls_nif:ctx_new(?config(ec, Config), [], throng_config_spec:tls_defaults()),
    ?assertNot(throng_tls_nif:steps_dirty(throng_tls_nif:conn_new(Ctx))).

%% Configured, they work, and every step of every handshake of that
%% context runs on a dirty scheduler (an ECDSA key alone would not).
finite_field_groups_run_dirty(Config) ->
    Tls = (throng_config_spec:tls_defaults())#{groups => [x25519, ffdhe2048]},
    {ok, Ctx} = throng_tls_nif:ctx_new(?config(ec, Config), [], Tls),
    ?assert(throng_tls_nif:steps_dirty(throng_tls_nif:conn_new(Ctx))),
    {C, S} = connect(Config, ec, [{versions, ['tlsv1.3']}, {supported_groups, [ffdhe2048]}],
                     #{tls => Tls}),
    echo(C, S, <<"ffdhe2048">>),
    stop(C, S).

%% With a slowly signing key the step after a HelloRetryRequest, which
%% does the key exchange and the signature, still runs on a dirty
%% scheduler (it used to run on the caller's once any flight was out).
slow_key_dirty_after_hello_retry(Config) ->
    Tls = (throng_config_spec:tls_defaults())#{groups => [secp384r1]},
    {ok, Ctx} = throng_tls_nif:ctx_new(?config(rsa4096, Config), [], Tls),
    Conn = throng_tls_nif:conn_new(Ctx),
    {ok, L} = gen_tcp:listen(0, [binary, {active, false}]),
    {ok, Port} = inet:port(L),
    Self = self(),
    spawn_link(fun() ->
                       R = ssl:connect("localhost", Port,
                                       [binary, {active, false}, {verify, verify_none},
                                        {versions, ['tlsv1.3']},
                                        {supported_groups, [x25519, secp384r1]}], 10000),
                       Self ! {client, R},
                       receive stop -> ok end
               end),
    {ok, T} = gen_tcp:accept(L, 10000),
    Steps = manual_handshake(T, Conn, []),
    %% the first flight was a HelloRetryRequest (a ServerHello with RFC
    %% 8446 §4.1.3's random), and every step before the end was dirty
    [<<22, 3, 3, _:16, 2, _:24, 3, 3, Random:32/binary, _/binary>> | _] =
        [Out || {more, Out, _} <- Steps, Out =/= <<>>],
    ?assertEqual(crypto:hash(sha256, <<"HelloRetryRequest">>), Random),
    ?assert(length([O || {_, O, _} <- Steps, O =/= <<>>]) >= 2),
    ?assert(lists:all(fun({_, _, Dirty}) -> Dirty end, Steps)),
    ?assertMatch({done, _, _}, lists:last(Steps)),
    receive {client, R} -> ?assertMatch({ok, _}, R) after 10000 -> error(no_client) end,
    gen_tcp:close(T),
    gen_tcp:close(L).

%% The server's side of a handshake driven by hand: each step as {more |
%% done, Out, whether it ran on a dirty scheduler}, in order.
manual_handshake(T, Conn, Acc) ->
    Dirty = throng_tls_nif:steps_dirty(Conn),
    {ok, In} = gen_tcp:recv(T, 0, 10000),
    case throng_tls_nif:handshake(Conn, In) of
        {more, Out} ->
            ok = gen_tcp:send(T, Out),
            manual_handshake(T, Conn, [{more, Out, Dirty} | Acc]);
        {done, Out, _Info, _Rest} ->
            ok = gen_tcp:send(T, Out),
            ?assertNot(throng_tls_nif:steps_dirty(Conn)),   % over: no OpenSSL state
            lists:reverse([{done, Out, Dirty} | Acc])
    end.

%% The ticket keys outlive a context: a ticket issued by one resumes with
%% a context made later from the same file (what `reload-certs' does).
tickets_survive_new_contexts(Config) ->
    Opts = [{versions, ['tlsv1.3']}, {session_tickets, manual}],
    Ticket = first_ticket(Config, Opts),
    File = ?config(rsa, Config),
    Cached = [K || {{throng_transport_tls, ctx, F, _} = K, _} <- persistent_term:get(), F =:= File],
    ?assertNotEqual([], Cached),
    [persistent_term:erase(K) || K <- Cached],
    {C2, S2} = connect(Config, rsa, [{use_ticket, [Ticket]} | Opts]),
    ?assertEqual({ok, [{session_resumption, true}]},
                 ssl:connection_information(C2, [session_resumption])),
    echo(C2, S2, <<"resumed with a new context">>),
    stop(C2, S2).

%% More than a record's worth each way, so records are split and joined.
large_data_both_ways(Config) ->
    Big = crypto:strong_rand_bytes(100000),
    [begin
         {C, S} = connect(Config, rsa, [{versions, [V]}]),
         echo(C, S, Big),
         stop(C, S)
     end || V <- ['tlsv1.3', 'tlsv1.2']],
    ok.

%% The server gets the handshake and the records one byte at a time.
byte_by_byte(Config) ->
    [begin
         {C, S} = connect(Config, rsa, [{versions, [V]}], #{chunk => 1}),
         echo(C, S, <<"one byte at a time">>),
         stop(C, S)
     end || V <- ['tlsv1.3', 'tlsv1.2']],
    ok.

%% RFC 8446 §4.6.3: the client updates its sending key...
key_update_write(Config) ->
    key_updates(Config, write).

%% ...and asks the server to update its own (update_requested).
key_update_read_write(Config) ->
    key_updates(Config, read_write).

key_updates(Config, Type) ->
    {C, S} = connect(Config, rsa, [{versions, ['tlsv1.3']}]),
    echo(C, S, <<"before">>),
    [begin
         ok = ssl:update_keys(C, Type),
         echo(C, S, <<"after update ", (integer_to_binary(I))/binary>>)
     end || I <- [1, 2]],
    stop(C, S).

%% RFC 8446 §5.5, §4.6.3 with the limit lowered to 3 records per write
%% key: the server sends a KeyUpdate of its own at the first read after its
%% key sealed 3, and OTP's ssl client reads on under each next key (12
%% echoes: 4 renewals; without them the key would have sealed 13 records).
server_renews_its_key(Config) ->
    throng_tls_record:set_limits(3, 1000),
    try
        {C, S} = connect(Config, rsa, [{versions, ['tlsv1.3']}, {ciphers, aes_gcm('tlsv1.3')}]),
        [echo(C, S, <<"echo ", (integer_to_binary(I))/binary>>) || I <- lists:seq(1, 12)],
        {_, _, {established, Rec, _}} = server_sock(S),
        ?assert(throng_tls_record:written(Rec) < 3),
        stop(C, S)
    after
        throng_tls_record:reset_limits()
    end.

%% TLS 1.2 has no KeyUpdate (and renegotiation is refused): when its write
%% key has sealed its limit (lowered here to 5 records) the transport
%% refuses to send, so the connection ends instead of reusing the key.
tls12_write_key_limit_ends_writing(Config) ->
    throng_tls_record:set_limits(2, 5),
    try
        {C, S} = connect(Config, rsa, [{versions, ['tlsv1.2']}, {ciphers, aes_gcm('tlsv1.2')}]),
        [echo(C, S, <<"echo ", (integer_to_binary(I))/binary>>) || I <- lists:seq(1, 3)],
        Sock = server_sock(S),
        ?assertEqual(ok, throng_transport:send(Sock, <<"the last one">>)),
        ?assertEqual(<<"the last one">>, recv_n(C, 12, <<>>)),
        ?assertEqual({error, key_limit}, throng_transport:send(Sock, <<"one too many">>)),
        stop(C, S)
    after
        throng_tls_record:reset_limits()
    end.

%% The client's close_notify ends the server's reading, and is answered.
close_notify_both_ways(Config) ->
    [begin
         {C, S} = connect(Config, rsa, [{versions, [V]}]),
         echo(C, S, <<"bye soon">>),
         %% A downgrade waits for the peer's close_notify: it returns the
         %% TCP socket only if the server answered; nothing comes after it
         %% (RFC 8446 §6.1), though the server tried to send more.
         {ok, TCP} = ssl:close(C, {self(), 5000}),
         ?assertEqual(closed, server_result(S)),
         ?assertEqual({error, closed}, gen_tcp:recv(TCP, 0, 5000))
     end || V <- ['tlsv1.3', 'tlsv1.2']],
    ok.

%% A record changed on the wire: bad_record_mac, fatal, the alert is sent.
tampered_record_is_fatal(Config) ->
    [begin
         {C, S} = connect(Config, rsa, [{versions, [V]}], #{tamper => true}),
         ok = ssl:send(C, <<"this record is changed on its way">>),
         ?assertEqual({error, {alert, bad_record_mac}}, server_result(S)),
         ?assertMatch({error, _}, ssl:recv(C, 0, 5000))
     end || V <- ['tlsv1.3', 'tlsv1.2']],
    ok.

%% TLS 1.0 and 1.1 are refused.
old_versions_refused(Config) ->
    [begin
         {Result, S} = try_connect(Config, rsa, [{versions, [V]}, {ciphers, ssl:cipher_suites(all, V)}]),
         ?assertMatch({error, _}, Result),
         ?assertMatch({error, {handshake, _}}, server_result(S))
     end || V <- ['tlsv1.1', 'tlsv1']],
    ok.

%% CBC suites (and anything without forward secrecy) are not offered.
cbc_suites_refused(Config) ->
    Cbc = [S || #{cipher := Ci} = S <- ssl:cipher_suites(all, 'tlsv1.2'),
                lists:member(Ci, [aes_128_cbc, aes_256_cbc])],
    {Result, S} = try_connect(Config, rsa, [{versions, ['tlsv1.2']}, {ciphers, Cbc}]),
    ?assertMatch({error, _}, Result),
    ?assertMatch({error, {handshake, _}}, server_result(S)).

%% RFC 5746: a TLS 1.2 client's renegotiation is refused with a warning,
%% and the connection goes on under its keys.
renegotiation_refused(Config) ->
    {C, S} = connect(Config, rsa, [{versions, ['tlsv1.2']}]),
    echo(C, S, <<"before">>),
    ?assertMatch({error, _}, ssl:renegotiate(C)),
    stop(C, S).

%% XEP-0368: ALPN xmpp-client is selected. The socket keeps the RFC 9266
%% tls-exporter value (channel binding) and nothing else of the handshake:
%% the value the client computes (openssl s_client -keymatexport; its
%% input stays open a second, so it closes after the handshake is seen).
alpn_and_exporter(Config) ->
    [begin
         {Port, S} = server(Config, rsa, #{}),
         Out = os:cmd("sleep 1 | timeout 20 openssl s_client -connect 127.0.0.1:" ++
                          integer_to_list(Port) ++ " " ++ Flag ++
                          " -alpn xmpp-client -keymatexport EXPORTER-Channel-Binding"
                          " -keymatexportlen 32 2>&1"),
         ct:log("~s~n~s", [Flag, Out]),
         {match, [Hex]} = re:run(Out, "Keying material: ([0-9A-F]+)", [{capture, all_but_first, binary}]),
         ?assertEqual(binary:decode_hex(Hex), server_exporter(S)),
         ?assertMatch({match, _}, re:run(Out, "ALPN protocol: xmpp-client"))
     end || Flag <- ["-tls1_3", "-tls1_2"]],
    ok.

%% TLS 1.3 tickets: a second connection resumes (no certificate, no
%% signature), and its records still line up.
resumption_with_ticket(Config) ->
    Opts = [{versions, ['tlsv1.3']}, {session_tickets, auto}],
    {C1, S1} = connect(Config, rsa, Opts),
    echo(C1, S1, <<"first">>),
    timer:sleep(200),    % the tickets reach the client's ticket store
    stop(C1, S1),
    {C2, S2} = connect(Config, rsa, Opts),
    ?assertEqual({ok, [{session_resumption, true}]},
                 ssl:connection_information(C2, [session_resumption])),
    echo(C2, S2, <<"resumed">>),
    stop(C2, S2).

%% One ticket per handshake, full or resumed (OpenSSL's default is two):
%% the client has a ticket to resume with, and each resumption brings the
%% next one.
one_ticket_per_handshake(Config) ->
    Opts = [{versions, ['tlsv1.3']}, {session_tickets, manual}],
    Ticket = first_ticket(Config, Opts),
    {C2, S2} = connect(Config, rsa, [{use_ticket, [Ticket]} | Opts]),
    ?assertEqual({ok, [{session_resumption, true}]},
                 ssl:connection_information(C2, [session_resumption])),
    echo(C2, S2, <<"resumed">>),
    ?assertMatch([_], tickets(C2)),
    stop(C2, S2).

%% A full handshake and one echo: the one ticket the client got.
first_ticket(Config, Opts) ->
    {C1, S1} = connect(Config, rsa, Opts),
    echo(C1, S1, <<"first">>),
    [Ticket] = tickets(C1),
    stop(C1, S1),
    Ticket.

%% TLS 1.3's session ticket waits for the first record the server seals
%% and goes out in the same write: a handshake costs the server one write
%% (its flight) until it has something to say. The client reads the ticket
%% first (it comes first in the sequence of the server's write key), then
%% the data; the next read drops the held ticket. Full and resumed.
ticket_goes_out_with_the_first_record(Config) ->
    Opts = [{versions, ['tlsv1.3']}, {session_tickets, manual}],
    {C1, S1} = connect(Config, rsa, Opts),
    Ticket = held_then_sent(C1, S1),
    {C2, S2} = connect(Config, rsa, [{use_ticket, [Ticket]} | Opts]),
    ?assertEqual({ok, [{session_resumption, true}]},
                 ssl:connection_information(C2, [session_resumption])),
    _ = held_then_sent(C2, S2),
    ok.

held_then_sent(C, S) ->
    timer:sleep(200),
    Sock = server_sock(S),
    ?assertMatch({_, _, {established, _, _, {<<_, _/binary>>, 1}}}, Sock),
    ?assertEqual([], tickets(C)),
    ?assertEqual({ok, [{send_cnt, 1}]}, writes(Sock)),
    echo(C, S, <<"first">>),
    ?assertEqual({ok, [{send_cnt, 2}]}, writes(Sock)),
    [T] = tickets(C),
    echo(C, S, <<"second">>),
    ?assertMatch({_, _, {established, _, _}}, server_sock(S)),
    stop(C, S),
    T.

writes(Sock) ->
    inet:getstat(throng_transport:tcp_socket(Sock), [send_cnt]).

%% A connection closed before the server sealed anything: its close_notify
%% follows the held ticket, and the client sees a clean close.
ticket_before_close_notify(Config) ->
    Opts = [{versions, ['tlsv1.3']}, {session_tickets, manual}],
    {C, S} = connect(Config, rsa, Opts),
    timer:sleep(200),
    ?assertMatch({_, _, {established, _, _, _}}, server_sock(S)),
    S ! stop,
    ?assertEqual({error, closed}, ssl:recv(C, 0, 10000)),
    ?assertMatch([_], tickets(C)),
    _ = ssl:close(C),
    ok.

%% The client asks for a KeyUpdate before the server sealed anything: the
%% server's KeyUpdate follows the held ticket, and the records after it
%% open under the new keys.
ticket_before_key_update(Config) ->
    Opts = [{versions, ['tlsv1.3']}, {session_tickets, manual}],
    {C, S} = connect(Config, rsa, Opts),
    timer:sleep(200),
    ok = ssl:update_keys(C, read_write),
    timer:sleep(200),
    ?assertMatch({_, _, {established, _, _}}, server_sock(S)),
    echo(C, S, <<"after the update">>),
    ?assertMatch([_], tickets(C)),
    stop(C, S).

%% The tickets the client got (manual tickets come as messages), once the
%% records after the handshake have been read.
tickets(_C) ->
    timer:sleep(200),
    tickets_received([]).

tickets_received(Acc) ->
    receive {ssl, session_ticket, T} -> tickets_received([T | Acc])
    after 0 -> lists:reverse(Acc)
    end.

%% A key that signs slowly (RSA-4096: ~1.5 ms here) is answered on a dirty
%% scheduler, the others on the connection's own: both complete, with TLS
%% 1.3 and 1.2.
slow_key_handshake(Config) ->
    [begin
         {C, S} = connect(Config, rsa4096, [{versions, [V]}]),
         echo(C, S, <<"slow key">>),
         stop(C, S)
     end || V <- ['tlsv1.3', 'tlsv1.2']],
    ok.

%% After the handshake the connection holds no OpenSSL object: the NIF
%% refuses another handshake step, and the socket's state is the record
%% layer's small term.
no_openssl_state_after_handshake(Config) ->
    {C, S} = connect(Config, rsa, [{versions, ['tlsv1.3']}]),
    echo(C, S, <<"x">>),
    echo(C, S, <<"y">>),   % (the read after the ticket went out drops it)
    {_, _, {established, Rec, _Info}} = Sock = server_sock(S),
    ?assert(erts_debug:flat_size(Rec) < 100),
    {handshake, Conn} = {handshake, server_conn(S)},
    ?assertMatch({error, _, _}, throng_tls_nif:handshake(Conn, <<>>)),
    _ = Sock,
    stop(C, S).

%%% The server side: Throng's transport on an accepted TCP socket, echoing
%%% the application data it decodes.

%% The AES-GCM suites of a version: those RFC 8446 §5.5 limits.
aes_gcm(V) ->
    [S || #{cipher := Ci} = S <- suites(V), Ci =/= chacha20_poly1305].

suites('tlsv1.3') ->
    [S || #{key_exchange := any, cipher := Ci} = S <- ssl:cipher_suites(default, 'tlsv1.3'),
          lists:member(Ci, [aes_128_gcm, aes_256_gcm, chacha20_poly1305])];
suites('tlsv1.2') ->
    [S || #{cipher := Ci, key_exchange := KX} = S <- ssl:cipher_suites(default, 'tlsv1.2'),
          lists:member(Ci, [aes_128_gcm, aes_256_gcm, chacha20_poly1305]),
          lists:member(KX, [ecdhe_rsa, ecdhe_ecdsa])].

connect(Config, Cert, ClientOpts) ->
    connect(Config, Cert, ClientOpts, #{}).

connect(Config, Cert, ClientOpts, ServerOpts) ->
    {{ok, C}, S} = try_connect(Config, Cert, ClientOpts, ServerOpts),
    {C, S}.

try_connect(Config, Cert, ClientOpts) ->
    try_connect(Config, Cert, ClientOpts, #{}).

try_connect(Config, Cert, ClientOpts, ServerOpts) ->
    {Port, S} = server(Config, Cert, ServerOpts),
    Result = ssl:connect("localhost", Port, [binary, {active, false}, {verify, verify_none}
                                             | ClientOpts], 10000),
    {Result, S}.

%% A one-connection server on a fresh port (of the group's inet backend).
server(Config, Cert, ServerOpts) ->
    Backend = [{inet_backend, B} || {inet_backend, B} <- [lists:keyfind(inet_backend, 1, Config)]],
    {ok, L} = gen_tcp:listen(0, Backend ++ [binary, {active, false}, {reuseaddr, true}]),
    {ok, Port} = inet:port(L),
    Self = self(),
    {Port, spawn_link(fun() -> server(Self, L, ?config(Cert, Config), ServerOpts) end)}.

server(Parent, L, CertFile, Opts) ->
    {ok, T} = gen_tcp:accept(L),
    gen_tcp:close(L),
    {ok, {throng_transport_tls, T, {handshake, Conn}} = Sock} =
        throng_transport_tls:over_tcp(T, [{certfile, CertFile}
                                          | [{tls, Tls} || #{tls := Tls} <- [Opts]]]),
    put(conn, Conn),
    serve(Parent, Sock, Opts).

serve(Parent, Sock, Opts) ->
    Port = throng_transport:tcp_socket(Sock),
    receive
        {sock, From} -> From ! {sock, Sock, get(conn)}, serve(Parent, Sock, Opts);
        stop -> throng_transport:close(Sock)
    after 0 ->
        case gen_tcp:recv(Port, 0, 100) of
            {ok, Bytes} ->
                Established = element(1, element(3, Sock)) =:= established,
                Bytes1 = case maps:get(tamper, Opts, false) andalso Established of
                             true -> tamper(Bytes);
                             false -> Bytes
                         end,
                case feed(Sock, Bytes1, maps:get(chunk, Opts, byte_size(Bytes1))) of
                    {ok, Plain, Sock1} ->
                        report_exporter(Parent, Sock1),
                        _ = Plain =:= <<>> orelse throng_transport:send(Sock1, Plain),
                        serve(Parent, Sock1, Opts);
                    {closed, _, Closed} ->
                        %% what a session would still answer goes nowhere,
                        %% and what the peer would still send is dropped
                        ok = throng_transport:send(Closed, <<"too late">>),
                        {ok, <<>>, Closed} = throng_transport:decode(Closed, <<23, 3, 3, 0, 1, 0>>),
                        Parent ! {result, self(), closed},
                        throng_transport:close(Closed);
                    {error, _} = E ->
                        Parent ! {result, self(), E},
                        gen_tcp:close(Port)
                end;
            {error, timeout} ->
                serve(Parent, Sock, Opts);
            {error, Why} ->
                Parent ! {result, self(), {error, {tcp, Why}}}
        end
    end.

%% Feeds the bytes to decode/2 in chunks of N.
feed(Sock, Bytes, N) -> feed(Sock, Bytes, N, []).
feed(Sock, <<>>, _N, Acc) -> {ok, iolist_to_binary(lists:reverse(Acc)), Sock};
feed(Sock, Bytes, N, Acc) ->
    K = min(N, byte_size(Bytes)),
    <<Chunk:K/binary, Rest/binary>> = Bytes,
    case throng_transport:decode(Sock, Chunk) of
        {ok, Plain, Sock1} -> feed(Sock1, Rest, N, [Plain | Acc]);
        {closed, _, _} = C -> C;
        {error, _} = E -> E
    end.

report_exporter(Parent, {_, _, {established, _, {Exporter, _, _}, _}}) ->
    report_exporter(Parent, {x, x, {established, x, {Exporter, x, x}}});
report_exporter(Parent, {_, _, {established, _, {Exporter, _, _}}}) ->
    case put(reported, true) of
        undefined -> Parent ! {exporter, self(), Exporter};
        true -> ok
    end;
report_exporter(_Parent, _Sock) ->
    ok.

server_exporter(S) ->
    receive {exporter, S, E} -> E after 10000 -> error(no_exporter) end.

tamper(Bytes) ->
    N = byte_size(Bytes) - 1,
    <<Head:N/binary, Last>> = Bytes,
    <<Head/binary, (Last bxor 1)>>.

server_sock(S) ->
    S ! {sock, self()},
    receive {sock, Sock, _} -> Sock after 5000 -> error(no_sock) end.

server_conn(S) ->
    S ! {sock, self()},
    receive {sock, _, Conn} -> Conn after 5000 -> error(no_sock) end.

server_result(S) ->
    receive {result, S, R} -> R after 10000 -> error(no_server_result) end.

echo(C, _S, Data) ->
    ok = ssl:send(C, Data),
    ?assertEqual(Data, recv_n(C, byte_size(Data), <<>>)).

recv_n(_C, 0, Acc) -> Acc;
recv_n(C, N, Acc) ->
    {ok, B} = ssl:recv(C, 0, 10000),
    recv_n(C, N - byte_size(B), <<Acc/binary, B/binary>>).

stop(C, S) ->
    S ! stop,
    _ = ssl:close(C),
    ok.
