%% @doc The server's TLS certificates and the context made from them.
%%
%% The default certificate: `certfile'/`keyfile', or, with no certfile, a
%% self-signed certificate for the configured hosts generated in
%% DATA_DIR/tls on first start (with the openssl command) and reused after.
%%
%% More certificates, chosen by the name the client asks for (SNI):
%% `certfiles', a list of files or wildcard patterns, as ACME clients leave
%% them (e.g. /etc/letsencrypt/live/*/fullchain.pem and privkey.pem, or
%% acme.sh's fullchain.cer and example.org.key): every certificate is
%% paired with the private key whose public key it carries, wherever that
%% key is; a certificate without a key (an intermediate, a CA) is skipped;
%% its DNS names (subjectAltName, else the common name) select it.
%%
%% The TLS context (throng_tls_nif) reads a chain and its key from one PEM
%% file, so each pair is written to DATA_DIR/tls (mode 0600).
%% `bin/throng reload-certs' reads everything again and swaps the context:
%% new connections get the new certificates, running ones keep theirs. The
%% context takes the versions, suites and groups of the `tls' section.
-module(throng_cert).

-export([ensure/0, reload/0, certfile/0, context/0, names/0]).

-include_lib("public_key/include/public_key.hrl").

-define(KEY, {?MODULE, state}).

%% @doc At boot: the certificates and the context, or an error message.
-spec ensure() -> ok | {error, string()}.
ensure() ->
    reload().

%% @doc Reads the certificates again and replaces the context; on any error
%% the running context stays.
-spec reload() -> ok | {error, string()}.
reload() ->
    Dir = filename:join(throng_paths:data_dir(), "tls"),
    ok = filelib:ensure_dir(filename:join(Dir, "x")),
    Default = filename:join(Dir, "server.pem"),
    Result = case {throng_config:get([certfile]), throng_config:get([keyfile])} of
                 {<<>>, _} -> self_signed(Dir, Default);
                 {Cert, Key} -> combine(Cert, Key, Default)
             end,
    case Result of
        ok -> with_sni(Dir, Default);
        {error, _} = E -> E
    end.

with_sni(Dir, Default) ->
    case sni_entries(Dir) of
        {ok, Entries} ->
            case throng_tls_nif:ctx_new(Default, [{N, F} || {N, F} <- Entries],
                                        throng_config:get([tls])) of
                {ok, Ctx} ->
                    persistent_term:put(?KEY, #{file => Default, ctx => Ctx,
                                                names => [N || {N, _} <- Entries]}),
                    logger:notice(#{what => certificates_loaded, default => Default,
                                    names => [N || {N, _} <- Entries]}),
                    ok;
                {error, Why} ->
                    {error, "TLS context: " ++ Why}
            end;
        {error, _} = E ->
            E
    end.

%% @doc The PEM file of the default certificate (chain and key).
-spec certfile() -> file:filename().
certfile() ->
    maps:get(file, persistent_term:get(?KEY)).

%% @doc The server's TLS context (default certificate and SNI names).
-spec context() -> throng_tls_nif:ctx().
context() ->
    maps:get(ctx, persistent_term:get(?KEY)).

%% @doc The host names that select a certificate of `certfiles'.
-spec names() -> [binary()].
names() ->
    maps:get(names, persistent_term:get(?KEY)).

%%% certfiles: certificates paired with their keys, by public key

sni_entries(Dir) ->
    Patterns = throng_config:get([certfiles]),
    Files = lists:usort(lists:append([expand(P) || P <- Patterns])),
    case read_all(Files) of
        {ok, Pems} ->
            Keys = [{public_of(K), F, E} || {F, Entries} <- Pems, {K, E} <- keys(Entries)],
            Chains = [{F, Chain} || {F, Entries} <- Pems, [_ | _] = Chain <- [certs(Entries)]],
            Pairs = pair(Chains, Keys),
            write_pairs(Dir, Pairs);
        {error, _} = E ->
            E
    end.

expand(Pattern) ->
    P = unicode:characters_to_list(throng_paths:absolute(Pattern)),
    case lists:any(fun(C) -> lists:member(C, "*?[{") end, P) of
        true -> filelib:wildcard(P);
        false -> [P]
    end.

read_all(Files) ->
    read_all(Files, []).
read_all([], Acc) ->
    {ok, lists:reverse(Acc)};
read_all([F | Fs], Acc) ->
    case file:read_file(F) of
        {ok, Bin} ->
            try public_key:pem_decode(Bin) of
                [] -> {error, not_pem(F)};
                Entries -> read_all(Fs, [{F, Entries} | Acc])
            catch _:_ -> {error, not_pem(F)}
            end;
        {error, Why} ->
            {error, lists:flatten(io_lib:format("certfiles: cannot read ~ts: ~ts",
                                                [F, file:format_error(Why)]))}
    end.

not_pem(F) ->
    lists:flatten(io_lib:format("certfiles: ~ts holds no PEM certificate or key", [F])).

certs(Entries) ->
    [E || {'Certificate', _, not_encrypted} = E <- Entries].

keys(Entries) ->
    [{public_key:pem_entry_decode(E), E}
     || {T, _, not_encrypted} = E <- Entries,
        lists:member(T, ['RSAPrivateKey', 'ECPrivateKey', 'PrivateKeyInfo'])].

%% The public key a private key belongs to, in the form a certificate
%% carries it.
public_of(#'RSAPrivateKey'{modulus = N, publicExponent = E}) -> {rsa, N, E};
public_of(#'ECPrivateKey'{publicKey = Pub}) -> {ec, Pub};
public_of(_) -> other.

cert_public(#'OTPCertificate'{tbsCertificate = TBS}) ->
    #'OTPSubjectPublicKeyInfo'{subjectPublicKey = Key} =
        TBS#'OTPTBSCertificate'.subjectPublicKeyInfo,
    case Key of
        #'RSAPublicKey'{modulus = N, publicExponent = E} -> {rsa, N, E};
        #'ECPoint'{point = Pub} -> {ec, Pub};
        _ -> none
    end.

%% Each chain whose first certificate has a key: its names, its chain and
%% key. A leaf found in several files keeps its longest chain.
pair(Chains, Keys) ->
    Found = [{names(Otp), length(Chain), Chain, KeyEntry}
             || {_F, [{_, Der, _} | _] = Chain} <- Chains,
                Otp <- [public_key:pkix_decode_cert(Der, otp)],
                {Pub, _, KeyEntry} <- [K || {P, _, _} = K <- Keys, P =:= cert_public(Otp)],
                Pub =/= other],
    Best = lists:foldl(fun({Names, Len, Chain, Key}, Acc) ->
                               case maps:get(Names, Acc, undefined) of
                                   {L, _, _} when L >= Len -> Acc;
                                   _ -> Acc#{Names => {Len, Chain, Key}}
                               end
                       end, #{}, Found),
    [{Names, Chain, Key} || {Names, {_, Chain, Key}} <- maps:to_list(Best), Names =/= []].

names(#'OTPCertificate'{tbsCertificate = TBS}) ->
    Exts = case TBS#'OTPTBSCertificate'.extensions of asn1_NOVALUE -> []; X -> X end,
    SAN = [binary:list_to_bin(string:lowercase(N))
           || #'Extension'{extnID = ?'id-ce-subjectAltName', extnValue = Vs} <- Exts,
              {dNSName, N} <- Vs],
    case SAN of
        [] ->
            {rdnSequence, RDNs} = TBS#'OTPTBSCertificate'.subject,
            [cn(V) || Set <- RDNs, #'AttributeTypeAndValue'{type = ?'id-at-commonName', value = V} <- Set];
        _ ->
            SAN
    end.

cn({_, S}) when is_list(S) -> binary:list_to_bin(string:lowercase(S));
cn({_, S}) when is_binary(S) -> string:lowercase(S);
cn(S) when is_list(S) -> binary:list_to_bin(string:lowercase(S)).

write_pairs(Dir, Pairs) ->
    SniDir = filename:join(Dir, "sni"),
    _ = file:del_dir_r(SniDir),
    ok = filelib:ensure_dir(filename:join(SniDir, "x")),
    Entries = lists:append(
                [begin
                     File = filename:join(SniDir, integer_to_list(I) ++ ".pem"),
                     ok = write_private(File, public_key:pem_encode(Chain ++ [Key])),
                     [{N, File} || N <- Names]
                 end || {I, {Names, Chain, Key}} <- lists:zip(lists:seq(1, length(Pairs)), Pairs)]),
    {ok, Entries}.

write_private(File, Bin) ->
    ok = file:write_file(File, <<>>),
    ok = file:change_mode(File, 8#600),
    file:write_file(File, Bin).

%%% The default certificate

combine(Cert, Key, Combined) ->
    Files = [throng_paths:absolute(F) || F <- [Cert, Key], F =/= <<>>],
    Read = [{F, file:read_file(F)} || F <- Files],
    case [{F, E} || {F, {error, E}} <- Read] of
        [] ->
            ok = write_private(Combined, [B || {_, {ok, B}} <- Read]),
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
            %% ECDSA P-256: a full handshake signs in 14 us here against
            %% 213 us with RSA-2048 (`openssl speed'); every client Throng
            %% knows accepts it.
            Args = ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                    "-nodes", "-sha256", "-days", "3650",
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
