%% @doc The TLS handshake NIF (c_src/throng_tls_nif.c, over Debian's
%% libssl): OpenSSL runs the handshake, then hands over the negotiated keys
%% and frees its per-connection state; the records after it are
%% {@link throng_tls_record}'s.
-module(throng_tls_nif).

-export([ctx_new/3, conn_new/1, handshake/2, steps_dirty/1, trim/0, timing/0]).
%% timing/0: read by bench/tls/handshake_cost.sh over the distribution.
-ignore_xref([{timing, 0}]).
%% steps_dirty/1: read by rfc8446_tls_SUITE.
-ignore_xref([{steps_dirty, 1}]).

-on_load(load/0).

-type ctx() :: reference().
-type conn() :: reference().
%% What a finished handshake leaves: the version and cipher suite (its
%% standard name), the secrets the record keys derive from (TLS 1.3: the
%% application traffic secrets; TLS 1.2: the master secret and the hello
%% randoms), how many records the server already wrote under the new write
%% key (TLS 1.3 session tickets), the channel binding values (RFC 9266
%% tls-exporter; RFC 5929 tls-server-end-point and tls-unique; undefined
%% where not defined or not safe), the ALPN protocol and the SNI host name
%% the client sent.
-type info() :: #{version := tls12 | tls13, cipher := atom(),
                  client_secret => binary(), server_secret => binary(),
                  write_records => non_neg_integer(),
                  master_secret => binary(), client_random => binary(),
                  server_random => binary(),
                  exporter := binary() | undefined,
                  server_end_point := binary() | undefined,
                  tls_unique := binary() | undefined,
                  alpn := binary() | undefined,
                  sni := binary() | undefined}.
-export_type([ctx/0, conn/0, info/0]).

load() ->
    Dir = case code:priv_dir(throng) of
              {error, bad_name} ->
                  filename:join(filename:dirname(filename:dirname(code:which(?MODULE))), "priv");
              D -> D
          end,
    erlang:load_nif(filename:join(Dir, "throng_tls_nif"), 0).

%% @doc A server context from PEM files each holding a certificate chain
%% and its private key: the default one, and one per host name a client
%% may ask for with SNI (exact names, or `*.example.org' for one label).
%% The versions, cipher suites (in the server's order) and groups are the
%% configuration's `tls' section (validated by throng_config: TLS 1.2 and
%% 1.3, AEAD suites with forward secrecy). No compression, no
%% renegotiation, stateless session tickets, ALPN xmpp-client.
-spec ctx_new(file:filename_all(), [{binary(), file:filename_all()}],
              #{versions := [atom()], ciphers := [atom()], groups := [atom()], _ => _}) ->
    {ok, ctx()} | {error, string()}.
ctx_new(DefaultFile, ByName, #{versions := Versions, ciphers := Ciphers0, groups := Groups0}) ->
    %% a name given twice counts once, where it first appears (OpenSSL
    %% refuses a group list with a duplicate)
    {Ciphers, Groups} = {lists:uniq(Ciphers0), lists:uniq(Groups0)},
    Nums = [version(V) || V <- Versions],
    {Tls12, Tls13} = lists:partition(fun(C) -> openssl_tls12_name(C) =/= none end, Ciphers),
    Ciphers12 = case lists:member(12, Nums) of
                    true -> lists:join(":", [openssl_tls12_name(C) || C <- Tls12]);
                    false -> ""
                end,
    Settings = {lists:min(Nums), lists:max(Nums), Ciphers12,
                lists:join(":", [atom_to_list(C) || C <- Tls13]),
                lists:join(":", [openssl_group(G) || G <- Groups])},
    new_ctx(DefaultFile, ByName, Settings).

version('tlsv1.2') -> 12;
version('tlsv1.3') -> 13.

%% OpenSSL's name of a TLS 1.2 suite; none for TLS 1.3's (OpenSSL names
%% those as IANA does).
openssl_tls12_name('TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256') -> "ECDHE-ECDSA-AES128-GCM-SHA256";
openssl_tls12_name('TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256') -> "ECDHE-RSA-AES128-GCM-SHA256";
openssl_tls12_name('TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384') -> "ECDHE-ECDSA-AES256-GCM-SHA384";
openssl_tls12_name('TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384') -> "ECDHE-RSA-AES256-GCM-SHA384";
openssl_tls12_name('TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256') -> "ECDHE-ECDSA-CHACHA20-POLY1305";
openssl_tls12_name('TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256') -> "ECDHE-RSA-CHACHA20-POLY1305";
openssl_tls12_name(_) -> none.

openssl_group(x25519) -> "X25519";
openssl_group(x448) -> "X448";
openssl_group(secp256r1) -> "P-256";
openssl_group(secp384r1) -> "P-384";
openssl_group(secp521r1) -> "P-521";
openssl_group(G) -> atom_to_list(G).    % ffdhe2048 ... ffdhe8192

new_ctx(_DefaultFile, _ByName, _Settings) -> erlang:nif_error(not_loaded).

%% @doc A new server-side connection, waiting for the ClientHello.
-spec conn_new(ctx()) -> conn() | {error, string()}.
conn_new(_Ctx) -> erlang:nif_error(not_loaded).

%% @doc Feeds the bytes read from the peer to the handshake: `Out' is what
%% to send to the peer; on `done', `Rest' is what the peer sent after its
%% Finished (records for the record layer) and the connection holds no
%% OpenSSL state any more. On `error' Out may hold the alert to send.
-spec handshake(conn(), binary()) ->
    {more, Out :: binary()} | {done, Out :: binary(), info(), Rest :: binary()} |
    {error, string(), Out :: binary()}.
handshake(_Conn, _Bytes) -> erlang:nif_error(not_loaded).

%% @doc Whether the connection's next handshake step runs on a dirty CPU
%% scheduler: every step until the end when the context has a slowly
%% signing key (RSA above 3,072 bits) or allows finite-field groups
%% (ffdhe*, whose key exchange the client picks); false once the
%% handshake is over.
-spec steps_dirty(conn()) -> boolean().
steps_dirty(_Conn) -> erlang:nif_error(not_loaded).

%% @doc Returns the free pages of the C heap (glibc's arenas) to the OS:
%% what OpenSSL and other libraries freed but glibc kept. The handshake
%% does it itself every 256 handshakes; `bin/throng gc' before a
%% measurement.
-spec trim() -> ok.
trim() -> erlang:nif_error(not_loaded).

%% @doc With the NIF built with `TIMING=1' (bench/tls/handshake_cost.sh):
%% the CPU time OpenSSL spent, summed over the handshakes since the last
%% call, by part: the step that answers the ClientHello (key exchange,
%% signature or ticket, the server's flight), the later steps (the
%% client's Finished, the new ticket), the keys and channel-binding values
%% handed over, and freeing the connection's OpenSSL state; and how many
%% handshakes ended. `disabled' in a normal build.
-spec timing() -> disabled | #{answer_us := float(), later_steps_us := float(),
                               info_us := float(), free_us := float(),
                               handshakes := non_neg_integer()}.
timing() -> erlang:nif_error(not_loaded).
