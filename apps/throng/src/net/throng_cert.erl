%% @doc The certificate for STARTTLS. With no certfile configured, a
%% self-signed certificate for the configured hosts is generated in
%% DATA_DIR/tls on first start (with the openssl command) and reused after.
%% The TLS context (throng_tls_nif) reads the certificate chain and the key
%% from one PEM file, so a configured certfile/keyfile pair is combined
%% into DATA_DIR/tls/server.pem.
-module(throng_cert).

-export([ensure/0, certfile/0]).

%% @doc Makes sure the PEM file exists; returns an error message otherwise.
-spec ensure() -> ok | {error, string()}.
ensure() ->
    Dir = filename:join(throng_paths:data_dir(), "tls"),
    ok = filelib:ensure_dir(filename:join(Dir, "x")),
    Combined = filename:join(Dir, "server.pem"),
    Result = case {throng_config:get([certfile]), throng_config:get([keyfile])} of
                 {<<>>, _} -> self_signed(Dir, Combined);
                 {Cert, Key} -> combine(Cert, Key, Combined)
             end,
    case Result of
        ok -> persistent_term:put({?MODULE, file}, Combined), ok;
        {error, _} = E -> E
    end.

%% @doc The PEM file (certificate chain and key) the TLS context is made from.
-spec certfile() -> file:filename().
certfile() ->
    persistent_term:get({?MODULE, file}).

combine(Cert, Key, Combined) ->
    Files = [throng_paths:absolute(F) || F <- [Cert, Key], F =/= <<>>],
    Read = [{F, file:read_file(F)} || F <- Files],
    case [{F, E} || {F, {error, E}} <- Read] of
        [] ->
            ok = file:write_file(Combined, [B || {_, {ok, B}} <- Read]),
            ok = file:change_mode(Combined, 8#600),
            check(Combined);
        [{F, E} | _] ->
            {error, lists:flatten(io_lib:format("cannot read ~ts: ~ts", [F, file:format_error(E)]))}
    end.

check(File) ->
    {ok, Pem} = file:read_file(File),
    Types = [element(1, E) || E <- public_key:pem_decode(Pem)],
    HasKey = lists:any(fun(T) -> lists:member(T, ['RSAPrivateKey', 'ECPrivateKey',
                                                   'PrivateKeyInfo', 'DSAPrivateKey']) end, Types),
    case {lists:member('Certificate', Types), HasKey} of
        {true, true} -> ok;
        {false, _} -> {error, "certfile holds no PEM certificate"};
        {_, false} -> {error, "no PEM private key in certfile or keyfile"}
    end.

self_signed(Dir, Combined) ->
    case filelib:is_regular(Combined) of
        true -> ok;
        false ->
            [Host | _] = Hosts = throng_config:get([hosts]),
            Key = filename:join(Dir, "selfsigned.key"),
            Cert = filename:join(Dir, "selfsigned.crt"),
            SAN = lists:join(",", ["DNS:" ++ binary_to_list(H) || H <- Hosts]),
            Args = ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-sha256", "-days", "3650",
                    "-subj", "/CN=" ++ binary_to_list(Host),
                    "-addext", "subjectAltName=" ++ SAN,
                    "-keyout", Key, "-out", Cert],
            case run_openssl(Args) of
                ok ->
                    logger:notice(#{what => self_signed_certificate_generated, file => Cert,
                                    hosts => Hosts}),
                    combine(list_to_binary(Cert), list_to_binary(Key), Combined);
                {error, _} = E -> E
            end
    end.

run_openssl(Args) ->
    case os:find_executable("openssl") of
        false ->
            {error, "certfile is not set and the openssl command, needed to generate a "
                    "self-signed certificate, is not installed"};
        Exe ->
            Port = open_port({spawn_executable, Exe},
                             [{args, Args}, exit_status, stderr_to_stdout, binary]),
            collect(Port, [])
    end.

collect(Port, Acc) ->
    receive
        {Port, {data, D}} -> collect(Port, [Acc, D]);
        {Port, {exit_status, 0}} -> ok;
        {Port, {exit_status, N}} ->
            {error, lists:flatten(io_lib:format("openssl exited with ~b: ~ts", [N, Acc]))}
    end.
