%% XEP-0368 (direct TLS) and the certificates of the server: a direct TLS
%% listener with ALPN, certificates chosen by SNI (on direct TLS and on
%% STARTTLS), files as ACME clients leave them, `bin/throng reload-certs'.
%% Real server, real sockets, OTP ssl and openssl s_client as clients.
-module(xep0368_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-compile([export_all, nowarn_export_all]).

-define(HDR(Host), ["<?xml version='1.0'?><stream:stream to='", Host, "' xmlns='jabber:client' "
                    "xmlns:stream='http://etherx.jabber.org/streams' version='1.0'>"]).

all() ->
    [direct_tls_login, direct_tls_without_alpn, sni_selects_certificate,
     sni_on_starttls, acme_layout_full_chain, reload_certs, reload_refuses_bad_file,
     plain_bytes_on_direct_tls_port, tls13_only_server, {group, socket_backend}].

%% Direct TLS and STARTTLS over listeners on the socket backend.
groups() ->
    [throng_ct:socket_backend_group(
       [direct_tls_login, direct_tls_without_alpn, sni_on_starttls,
        plain_bytes_on_direct_tls_port])].

init_per_group(socket_backend, Config) ->
    throng_ct:init_socket_backend(Config).

end_per_group(_Group, _Config) ->
    ok.

init_per_suite(Config) ->
    {ok, _} = application:ensure_all_started(ssl),
    Dir = ?config(priv_dir, Config),
    Live = filename:join([Dir, "acme", "live", "example.org"]),
    Other = filename:join([Dir, "acme", "other"]),
    ok = filelib:ensure_dir(filename:join(Live, "x")),
    ok = filelib:ensure_dir(filename:join(Other, "x")),
    %% A CA, and example.org's certificate signed by it, laid out as certbot
    %% does: cert.pem, chain.pem, fullchain.pem, privkey.pem.
    CaKey = filename:join(Dir, "ca.key"),
    CaCrt = filename:join(Dir, "ca.crt"),
    openssl(["req -x509 -nodes -days 2 -newkey rsa:2048 -subj '/CN=Throng Test CA'"
             " -addext basicConstraints=critical,CA:TRUE -keyout ", CaKey, " -out ", CaCrt]),
    Ext = filename:join(Dir, "san.ext"),
    ok = file:write_file(Ext, "subjectAltName=DNS:example.org,DNS:upload.example.org\n"),
    Csr = filename:join(Dir, "leaf.csr"),
    openssl(["req -nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256 -subj /CN=example.org"
             " -keyout ", filename:join(Live, "privkey.pem"), " -out ", Csr]),
    openssl(["x509 -req -days 2 -in ", Csr, " -CA ", CaCrt, " -CAkey ", CaKey,
             " -CAcreateserial -extfile ", Ext, " -out ", filename:join(Live, "cert.pem")]),
    {ok, Leaf} = file:read_file(filename:join(Live, "cert.pem")),
    {ok, Ca} = file:read_file(CaCrt),
    ok = file:write_file(filename:join(Live, "chain.pem"), Ca),
    ok = file:write_file(filename:join(Live, "fullchain.pem"), [Leaf, Ca]),
    %% A self-signed wildcard certificate with its key in one file, named by
    %% its common name only.
    WildKey = filename:join(Dir, "wild.key"),
    WildCrt = filename:join(Dir, "wild.crt"),
    openssl(["req -x509 -nodes -days 2 -newkey rsa:2048 -subj '/CN=*.wild.test'"
             " -keyout ", WildKey, " -out ", WildCrt]),
    {ok, WK} = file:read_file(WildKey),
    {ok, WC} = file:read_file(WildCrt),
    ok = file:write_file(filename:join(Other, "wild.pem"), [WC, WK]),
    [{leaf, der(Leaf)}, {wild, der(WC)}, {ca, CaCrt},
     {certfiles, [list_to_binary(filename:join([Dir, "acme", "live", "*", "*.pem"])),
                  list_to_binary(filename:join(Other, "*.pem"))]} | Config].

end_per_suite(_Config) ->
    ok.

init_per_testcase(TC, Config) ->
    Certfiles = case TC of
                    reload_certs -> [list_to_binary(filename:join(?config(priv_dir, Config),
                                                                  "later/*.pem"))];
                    _ -> ?config(certfiles, Config)
                end,
    Tls = case TC of
              tls13_only_server -> #{tls => #{versions => [<<"tlsv1.3">>],
                                              ciphers => [<<"TLS_AES_256_GCM_SHA384">>],
                                              groups => [<<"secp384r1">>]}};
              _ -> #{}
          end,
    throng_ct:start(Config, Tls#{listen => [#{port => 0, ip => <<"127.0.0.1">>, starttls => optional},
                                            #{port => 0, ip => <<"127.0.0.1">>, direct_tls => true}],
                                 certfiles => Certfiles}),
    ok = throng_ct:register(<<"alice">>, <<"password">>),
    Config.

end_per_testcase(_TC, _Config) ->
    throng_ct:stop().

openssl(Args) ->
    Cmd = lists:flatten(["openssl " | Args] ++ [" 2>&1"]),
    Out = os:cmd(Cmd),
    ct:log("~s~n~s", [Cmd, Out]).

der(Pem) ->
    [{'Certificate', Der, _} | _] = public_key:pem_decode(Pem),
    Der.

direct_port() -> throng_listener:port({listener, 2}).
starttls_port() -> throng_listener:port({listener, 1}).

%%% Cases

%% TLS first, ALPN xmpp-client, then the stream: no STARTTLS offered, and
%% a login with PLAIN goes through.
direct_tls_login(_) ->
    {ok, S} = ssl:connect({127, 0, 0, 1}, direct_port(),
                          [binary, {active, false}, {verify, verify_none},
                           {alpn_advertised_protocols, [<<"xmpp-client">>]}], 10000),
    ?assertEqual({ok, <<"xmpp-client">>}, ssl:negotiated_protocol(S)),
    ok = ssl:send(S, ?HDR("localhost")),
    Features = recv_until(S, <<"</stream:features>">>),
    ?assertEqual(nomatch, binary:match(Features, <<"starttls">>)),
    ?assertNotEqual(nomatch, binary:match(Features, <<"PLAIN">>)),
    ok = ssl:send(S, ["<auth xmlns='urn:ietf:params:xml:ns:xmpp-sasl' mechanism='PLAIN'>",
                      base64:encode(<<0, "alice", 0, "password">>), "</auth>"]),
    _ = recv_until(S, <<"<success">>),
    ok = ssl:send(S, [?HDR("localhost"), "<iq type='set' id='b'><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'>"
                      "<resource>direct</resource></bind></iq>"]),
    Bound = recv_until(S, <<"</iq>">>),
    ?assertNotEqual(nomatch, binary:match(Bound, <<"alice@localhost/direct">>)),
    ?assertEqual(1, length(throng_sm:resources({<<"alice">>, <<"localhost">>}))),
    ssl:close(S).

%% The configuration's tls section reaches the server's context: with
%% TLS 1.3 only, one suite and one group, a TLS 1.2 client is refused on
%% both ports, a TLS 1.3 client gets that suite (after a HelloRetryRequest
%% for the group) and logs in over direct TLS and over STARTTLS.
tls13_only_server(_) ->
    ?assertMatch({error, {tls_alert, {protocol_version, _}}},
                 tls_connect(direct_port(), ['tlsv1.2'])),
    ?assertMatch({error, {tls_alert, {protocol_version, _}}},
                 tls_connect(starttls(), ['tlsv1.2'])),
    {ok, S} = tls_connect(direct_port(), ['tlsv1.2', 'tlsv1.3']),
    ?assertMatch({ok, [{protocol, 'tlsv1.3'}, {selected_cipher_suite, #{cipher := aes_256_gcm}}]},
                 ssl:connection_information(S, [protocol, selected_cipher_suite])),
    ok = ssl:send(S, ?HDR("localhost")),
    _ = recv_until(S, <<"</stream:features>">>),
    ok = ssl:send(S, ["<auth xmlns='urn:ietf:params:xml:ns:xmpp-sasl' mechanism='PLAIN'>",
                      base64:encode(<<0, "alice", 0, "password">>), "</auth>"]),
    _ = recv_until(S, <<"<success">>),
    ssl:close(S),
    {ok, U} = tls_connect(starttls(), ['tlsv1.3']),
    ?assertMatch({ok, [{selected_cipher_suite, #{cipher := aes_256_gcm}}]},
                 ssl:connection_information(U, [selected_cipher_suite])),
    ssl:close(U).

%% A TCP socket on the STARTTLS port, after <proceed/>.
starttls() ->
    {ok, T} = gen_tcp:connect({127, 0, 0, 1}, starttls_port(), [binary, {active, false}]),
    ok = gen_tcp:send(T, [?HDR("localhost"), "<starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>"]),
    _ = recv_until({gen_tcp, T}, <<"<proceed">>),
    T.

%% A TLS client to a port (direct TLS) or over a socket (after STARTTLS).
tls_connect(PortOrSocket, Versions) ->
    %% OTP ssl names TLS 1.3's groups supported_groups and TLS 1.2's eccs
    Groups = [{supported_groups, [x25519, secp384r1]} || lists:member('tlsv1.3', Versions)] ++
             [{eccs, [secp256r1, secp384r1]} || lists:member('tlsv1.2', Versions)],
    Opts = [binary, {active, false}, {verify, verify_none}, {versions, Versions} | Groups],
    case is_integer(PortOrSocket) of
        true -> ssl:connect({127, 0, 0, 1}, PortOrSocket, Opts, 10000);
        false -> ssl:connect(PortOrSocket, Opts, 10000)
    end.

%% A client that offers no ALPN is served all the same.
direct_tls_without_alpn(_) ->
    {ok, S} = ssl:connect({127, 0, 0, 1}, direct_port(),
                          [binary, {active, false}, {verify, verify_none}], 10000),
    ?assertEqual({error, protocol_not_negotiated}, ssl:negotiated_protocol(S)),
    ok = ssl:send(S, ?HDR("localhost")),
    _ = recv_until(S, <<"</stream:features>">>),
    ssl:close(S).

%% SNI picks the certificate: an exact name, a name under a wildcard
%% certificate (named by its common name only), an unknown name gets the
%% default certificate, and a verifying client accepts the chain.
sni_selects_certificate(Config) ->
    ?assertEqual(?config(leaf, Config), peer_cert(direct, "example.org")),
    ?assertEqual(?config(leaf, Config), peer_cert(direct, "UPLOAD.example.org")),
    ?assertEqual(?config(wild, Config), peer_cert(direct, "chat.wild.test")),
    Default = peer_cert(direct, "unknown.test"),
    ?assertNotEqual(?config(leaf, Config), Default),
    ?assertNotEqual(?config(wild, Config), Default),
    {ok, S} = ssl:connect({127, 0, 0, 1}, direct_port(),
                          [binary, {active, false}, {verify, verify_peer},
                           {cacertfile, ?config(ca, Config)},
                           {server_name_indication, "example.org"}], 10000),
    ssl:close(S).

%% The same after STARTTLS.
sni_on_starttls(Config) ->
    ?assertEqual(?config(leaf, Config), peer_cert(starttls, "example.org")),
    ?assertEqual(?config(wild, Config), peer_cert(starttls, "x.wild.test")).

%% certbot's directory: fullchain.pem is served (leaf and intermediate),
%% cert.pem (the same leaf, shorter chain) and chain.pem (no key) are not.
acme_layout_full_chain(_) ->
    Out = os:cmd("sleep 1 | timeout 20 openssl s_client -connect 127.0.0.1:" ++
                     integer_to_list(direct_port()) ++ " -servername example.org -showcerts 2>&1"),
    ct:log("~s", [Out]),
    ?assertEqual(2, length(binary:matches(list_to_binary(Out), <<"-----BEGIN CERTIFICATE-----">>))).

%% Certificates placed later are served after reload-certs; running
%% connections are not disturbed.
reload_certs(Config) ->
    Before = peer_cert(direct, "example.org"),
    ?assertNotEqual(?config(leaf, Config), Before),
    {ok, Open} = ssl:connect({127, 0, 0, 1}, direct_port(),
                             [binary, {active, false}, {verify, verify_none}], 10000),
    Later = filename:join(?config(priv_dir, Config), "later"),
    ok = filelib:ensure_dir(filename:join(Later, "x")),
    Live = filename:join([?config(priv_dir, Config), "acme", "live", "example.org"]),
    [{ok, _} = file:copy(filename:join(Live, F), filename:join(Later, F))
     || F <- ["fullchain.pem", "privkey.pem"]],
    {0, Text} = throng_ctl:run("reload-certs", []),
    ct:log("~s", [Text]),
    ?assertNotEqual(nomatch, string:find(Text, "example.org")),
    ?assertEqual(?config(leaf, Config), peer_cert(direct, "example.org")),
    %% The connection opened before still works.
    ok = ssl:send(Open, ?HDR("localhost")),
    _ = recv_until(Open, <<"</stream:features>">>),
    ssl:close(Open).

%% A file that holds no PEM: reload-certs says so and the certificates in
%% use stay.
reload_refuses_bad_file(Config) ->
    Bad = filename:join([?config(priv_dir, Config), "acme", "other", "broken.pem"]),
    ok = file:write_file(Bad, <<"this is not a certificate\n">>),
    try
        {1, Text} = throng_ctl:run("reload-certs", []),
        ?assertNotEqual(nomatch, string:find(Text, "broken.pem")),
        ?assertEqual(?config(leaf, Config), peer_cert(direct, "example.org"))
    after
        file:delete(Bad)
    end.

%% A client speaking plain XMPP to the direct TLS port: the handshake
%% fails, the connection is closed and counted.
plain_bytes_on_direct_tls_port(_) ->
    Failed = throng_metrics:value(tls_failed),
    {ok, T} = gen_tcp:connect({127, 0, 0, 1}, direct_port(), [binary, {active, false}]),
    ok = gen_tcp:send(T, ?HDR("localhost")),
    ?assertMatch({error, _}, recv_all(T)),
    throng_ct:wait_until(fun() -> throng_metrics:value(tls_failed) > Failed end, 5000).

%%% Helpers

peer_cert(Kind, SNI) ->
    Opts = [binary, {active, false}, {verify, verify_none}, {server_name_indication, SNI}],
    {ok, S} = case Kind of
                  direct ->
                      ssl:connect({127, 0, 0, 1}, direct_port(), Opts, 10000);
                  starttls ->
                      {ok, T} = gen_tcp:connect({127, 0, 0, 1}, starttls_port(),
                                                [binary, {active, false}]),
                      ok = gen_tcp:send(T, ?HDR("localhost")),
                      _ = recv_until({gen_tcp, T}, <<"</stream:features>">>),
                      ok = gen_tcp:send(T, "<starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>"),
                      _ = recv_until({gen_tcp, T}, <<"<proceed">>),
                      ssl:connect(T, Opts, 10000)
              end,
    {ok, Der} = ssl:peercert(S),
    ssl:close(S),
    Der.

recv_until(S, Pattern) -> recv_until(S, Pattern, <<>>).
recv_until(S, Pattern, Acc) ->
    case binary:match(Acc, Pattern) of
        nomatch ->
            {ok, B} = case S of
                          {gen_tcp, T} -> gen_tcp:recv(T, 0, 10000);
                          _ -> ssl:recv(S, 0, 10000)
                      end,
            recv_until(S, Pattern, <<Acc/binary, B/binary>>);
        _ ->
            Acc
    end.

%% Reads until the server closes: what it sent (an alert) is dropped.
recv_all(T) ->
    case gen_tcp:recv(T, 0, 10000) of
        {ok, _} -> recv_all(T);
        {error, _} = E -> E
    end.
