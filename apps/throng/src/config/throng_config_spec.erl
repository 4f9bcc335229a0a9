%% @doc Every configuration option of Throng, declared once: its type,
%% default and meaning. {@link throng_config} validates a YAML file against
%% this table, and `scripts/gen_config_doc.escript' renders
%% docs/configuration.md from it (a test keeps the two in sync).
%%
%% A spec is a map from option name to an option description:
%% ```
%% #{type := type(), default => term(), doc := string()}
%% '''
%% An option without a default is required. Types:
%% <ul>
%% <li>`boolean', `string', `path', `ip' (an address string, kept as a tuple)</li>
%% <li>`{int, Min, Max}' (Max may be `infinity'), `{int_or_infinity, Min}'</li>
%% <li>`{enum, [atom()]}', `{list, type()}', `{section, spec()}',
%% `{list_of, spec()}' (a list of sections), `domain', `bare_jid' (kept
%% normalized, `user@domain'), `host_port' (`host:port', `[v6]:port', or
%% empty for none)</li>
%% <li>`modules': extension modules, a mapping of module name to a section of
%% that module's own options (from its `options/0'); a module that is named
%% is enabled, with every option it does not set at its default</li>
%% </ul>
-module(throng_config_spec).

-export([spec/0, modules/0, default_modules/0, moved/0, tls_defaults/0]).
%% API used by tests (throng_ct builds its configuration on it).
-ignore_xref([{default_modules, 0}]).

-type type() :: boolean | string | path | ip | domain | bare_jid | host_port
              | {int, integer(), integer() | infinity}
              | {int_or_infinity, integer()}
              | {enum, [atom()]}
              | {list, type()}
              | {section, spec()}
              | {list_of, spec()}
              | modules.
-type option() :: #{type := type(), default => term(), doc := string()}.
-type spec() :: #{atom() => option()}.
-export_type([type/0, option/0, spec/0]).

-spec spec() -> spec().
spec() ->
    #{hosts =>
          #{type => {list, domain}, default => [<<"localhost">>],
            doc => "XMPP domains this server serves. A stream to any other domain "
                   "gets a host-unknown stream error."},
      admins =>
          #{type => {list, bare_jid}, default => [],
            doc => "Server administrators, as bare JIDs (user@domain), for every host. "
                   "An administrator may run the XEP-0133 service administration "
                   "commands (module `adhoc`: add and delete users, change passwords, "
                   "end sessions, list online users, announce); nobody else can. "
                   "Empty: nobody may. Top-level, not a module option, because other "
                   "modules will need the same list (e.g. room administration)."},
      loglevel =>
          #{type => {enum, [emergency, alert, critical, error, warning, notice, info, debug]},
            default => notice,
            doc => "Lowest level of log events written (OTP logger levels)."},
      data_dir =>
          #{type => path, default => <<"var">>,
            doc => "Directory for the Mnesia database, generated certificates and logs. "
                   "A relative path is taken from the release root (or the current "
                   "directory outside a release)."},
      log_file =>
          #{type => path, default => <<>>,
            doc => "Log file; empty means DATA_DIR/log/throng.log. One event per line; "
                   "events are structured reports (key: value, ...). Rotated at 50 MB, 5 "
                   "files kept."},
      certfile =>
          #{type => path, default => <<>>,
            doc => "PEM certificate chain for STARTTLS. Empty: a self-signed certificate "
                   "(ECDSA P-256) for the first host is generated in DATA_DIR on first "
                   "start and reused."},
      keyfile =>
          #{type => path, default => <<>>,
            doc => "PEM private key for certfile. Empty: the key generated with the "
                   "self-signed certificate."},
      certfiles =>
          #{type => {list, path}, default => [],
            doc => "More certificates, chosen by the host name a client asks for (TLS "
                   "SNI; the default certificate otherwise): files or wildcard patterns "
                   "as ACME clients leave them, e.g. "
                   "[\"/etc/letsencrypt/live/*/fullchain.pem\", "
                   "\"/etc/letsencrypt/live/*/privkey.pem\"]. Each certificate is "
                   "paired with the private key of its public key, in any of the files; "
                   "certificates without a key are skipped; a certificate serves the DNS "
                   "names of its subjectAltName (else its common name), wildcards "
                   "included. `bin/throng reload-certs` reads them again."},
      listen =>
          #{type => {list_of, listener_spec()},
            default => [#{}],
            doc => "Client-to-server (c2s) listeners. Each item is a section with the "
                   "options below; an empty item takes every default."},
      auth =>
          #{type => {section, auth_spec()}, default => #{},
            doc => "Authentication."},
      tls =>
          #{type => {section, tls_spec()}, default => #{},
            doc => "TLS versions, cipher suites and key exchange groups, for STARTTLS "
                   "and direct TLS (docs/tls.md). Only TLS 1.2 and 1.3 and AEAD suites "
                   "with forward secrecy can be named; these settings can only narrow "
                   "or reorder them. Read when the TLS context is made: at start and "
                   "at `bin/throng reload-certs`."},
      stream_management =>
          #{type => {section, sm_spec()}, default => #{},
            doc => "XEP-0198 stream management."},
      limits =>
          #{type => {section, limits_spec()}, default => #{},
            doc => "Bounds on what one user or session may make the server keep: "
                   "rosters, directed presence, stored subscription requests."},
      modules =>
          #{type => modules, default => default_modules(),
            doc => "Extension modules enabled on every host, each with its options (see "
                   "docs/extensions.md and the module sections below). A module that is "
                   "not named is off; `name: {}` enables it with its defaults. Without "
                   "this key, the modules listed as default are enabled."},
      host_config =>
          #{type => {list_of, host_config_spec()}, default => [],
            doc => "Per-host settings. A host named here runs the modules given here "
                   "instead of the top-level `modules`."},
      cluster =>
          #{type => {section, cluster_spec()}, default => #{},
            doc => "Clustering over distributed Erlang (docs/clustering.md). The node "
                   "name and the cookie come from bin/throng (THRONG_NODE, "
                   "THRONG_COOKIE or RELEASE/var/cookie): every node of a cluster needs "
                   "the same cookie."},
      storage =>
          #{type => {section, storage_spec()}, default => #{},
            doc => "Where accounts, rosters and offline messages are kept."},
      stats =>
          #{type => {section, stats_spec()}, default => #{},
            doc => "Live statistics: the per-second collector, message-queue alarms and "
                   "the HTTP endpoint (/metrics, /stats, dashboard)."}}.

%% @doc The extension modules a configuration can name: {Name, Module}.
%% A new module is one line here and one file in apps/throng/src/ext/.
-spec modules() -> [{atom(), module()}].
modules() ->
    [{adhoc, throng_mod_adhoc},
     {blocking, throng_mod_blocking},
     {carbons, throng_mod_carbons},
     {csi, throng_mod_csi},
     {disco, throng_mod_disco},
     {last, throng_mod_last},
     {mam, throng_mod_mam},
     {muc, throng_mod_muc},
     {offline, throng_mod_offline},
     {pep, throng_mod_pep},
     {ping, throng_mod_ping},
     {private, throng_mod_private},
     {register, throng_mod_register},
     {roster_versioning, throng_mod_roster_versioning},
     {vcard, throng_mod_vcard},
     {version, throng_mod_version}].

%% @doc The modules enabled when the configuration has no `modules' key:
%% every module of the catalog (XEP-0313 archiving included: clients
%% expect it; docs/extensions.md says what it costs).
-spec default_modules() -> #{atom() => map()}.
default_modules() ->
    maps:from_list([{Name, #{}} || {Name, _} <- modules()]).

%% @doc Top-level options that moved, with where they went (the error
%% message for an old configuration file says so).
-spec moved() -> #{atom() => string()}.
moved() ->
    #{registration => "modules.register (enabled -> allow_create)",
      offline => "modules.offline",
      ping => "modules.ping"}.

host_config_spec() ->
    #{host => #{type => domain,
                doc => "The host (one of `hosts`)."},
      modules => #{type => modules,
                   doc => "The modules of this host (required), as the top-level `modules`: "
                          "these replace the top-level set for this host."}}.

listener_spec() ->
    #{port => #{type => {int, 0, 65535}, default => 5222,
                doc => "TCP port (0: any free port, for tests)."},
      ip => #{type => ip, default => {127, 0, 0, 1},
              doc => "Address to listen on: \"0.0.0.0\" or \"::\" for every interface."},
      direct_tls => #{type => boolean, default => false,
                      doc => "Direct TLS (XEP-0368): TLS starts when the client connects "
                             "(ALPN xmpp-client, the certificate chosen by SNI), before "
                             "the XMPP stream; STARTTLS is then not offered. The "
                             "shipped configuration has such a listener on port 5223."},
      starttls => #{type => {enum, [disabled, optional, required]}, default => optional,
                    doc => "disabled: no STARTTLS offered. optional: offered, and "
                           "authentication is allowed without it. required: clients must "
                           "negotiate TLS before anything else."},
      redirect_to_home => #{type => boolean, default => false,
                            doc => "In a cluster: a client that names an account whose home "
                                   "(the node that keeps the account's part of the session "
                                   "directory) is another node is sent the stream error "
                                   "see-other-host (RFC 6120 4.9.3.19) with the home's "
                                   "cluster.node_address, once it has named the account in "
                                   "SASL and before any credential is checked; it connects "
                                   "there and logs in. Not when the home has no node_address "
                                   "or one of its listeners is full (when_full: "
                                   "stop_listening). A session on its home answers its account's "
                                   "lookups there (no CPU saving measured at 4 x 9,000 "
                                   "sessions), and a client that comes back through another "
                                   "node is sent home, where XEP-0198 resumption finds its "
                                   "session. Only for clients that follow see-other-host "
                                   "(docs/clustering.md, \"Clients on their home node\")."},
      reuse_port => #{type => boolean, default => false,
                      doc => "SO_REUSEPORT: several nodes on one host listen on the same "
                             "port, and the kernel spreads new connections over them "
                             "(docs/clustering.md)."},
      inet_backend => #{type => {enum, [inet, socket]}, default => inet,
                        doc => "OTP's implementation of this listener's TCP sockets: inet "
                               "(the inet driver: an Erlang port per connection) or socket "
                               "(the socket NIF behind gen_tcp: no port, but a process per "
                               "connection besides the session's, hibernating as it does). "
                               "The node's `-kernel inet_backend` does not change it. Both "
                               "run every feature; on socket a pause (the shaper, the delay "
                               "after a failed authentication) stops reading only after the "
                               "reads the socket's process has already made, up to active_n "
                               "of recv_buffer bytes. Measured at 5,000 idle sessions, two "
                               "runs each: 13.8 and 15.7 KB of memory per session on socket "
                               "against 4.7 and 7.2 KB on inet (docs/benchmarks.md, "
                               "inet_backend)."},
      when_full => #{type => {enum, [wait, stop_listening]}, default => wait,
                     doc => "At max_connections: wait (accepted connections wait for a "
                            "slot, later ones queue in the kernel's backlog) or "
                            "stop_listening (the listen socket is closed until the node "
                            "is below 95% of max_connections, so that with reuse_port the "
                            "kernel sends new connections to the other nodes; connections "
                            "already queued on the closed socket are reset and their "
                            "clients reconnect)."},
      acceptors => #{type => {int, 1, 1024}, default => 8,
                     doc => "Processes accepting connections on the listen socket."},
      backlog => #{type => {int, 1, 1048576}, default => 65535,
                   doc => "Listen backlog: connections the kernel queues before they are "
                          "accepted. Linux caps it at net.core.somaxconn; a burst of "
                          "connects larger than the backlog gets resets."},
      max_connections => #{type => {int_or_infinity, 1}, default => infinity,
                           doc => "Connections this listener holds at once. When reached, "
                                  "acceptors stop accepting and new connections wait in "
                                  "the backlog until one closes."},
      recv_buffer => #{type => {int, 64, 1048576}, default => 1024,
                       doc => "Bytes read from a socket at a time once its session is "
                              "open (the inet driver's user buffer, the socket backend's "
                              "read size); before, login_recv_buffer. A stanza larger "
                              "than this takes more than one read: with 1024 the "
                              "stanzas of real clients (a message with receipts, "
                              "markers and chat states: 300-600 bytes) take one; with "
                              "256 a 570-byte message cost ~6 % more server CPU to "
                              "route (docs/benchmarks.md). Between reads no size holds "
                              "memory: an idle session costs the same. It also bounds "
                              "what waits in a busy connection's mailbox: up to "
                              "active_n reads of this size."},
      login_recv_buffer => #{type => {int, 64, 1048576}, default => 4096,
                             doc => "Bytes read from a socket at a time until its session "
                                    "is open: the TLS handshake, the stream negotiation, "
                                    "authentication and resource binding (a session "
                                    "resumed with XEP-0198 also switches to recv_buffer). "
                                    "A TLS ClientHello (about 0.5 KB, 1.8 KB with a "
                                    "post-quantum key share) and a SASL2 <authenticate/> "
                                    "then arrive in one read each instead of several, and "
                                    "each read saved is a system call and often a "
                                    "scheduler wake-up: a returning TLS client's login "
                                    "makes 5.7 reads instead of 8.6 (docs/tls.md). Between "
                                    "reads neither size holds memory: the inet driver "
                                    "hands over or frees its buffer after each read."},
      send_buffer => #{type => {int, 0, 67108864}, default => 0,
                       doc => "The kernel's send buffer of each connection (SO_SNDBUF), in "
                              "bytes. 0: the kernel's default, grown by its autotuning up "
                              "to net.ipv4.tcp_wmem's maximum. A smaller buffer holds less "
                              "kernel memory per slow client and makes a slow reader show "
                              "sooner in max_queued_stanzas / max_queued_bytes."},
      kernel_recv_buffer => #{type => {int, 0, 67108864}, default => 0,
                              doc => "The kernel's receive buffer of each connection "
                                     "(SO_RCVBUF), in bytes; set on the listen socket, so "
                                     "that it also bounds the TCP window the server offers "
                                     "(send_buffer is its sending twin). 0: the kernel's "
                                     "default, grown by its autotuning up to "
                                     "net.ipv4.tcp_rmem's maximum. Not recv_buffer, the "
                                     "bytes the BEAM reads at a time."},
      active_n => #{type => {int, 1, 10000}, default => 100,
                    doc => "Reads the socket delivers before the connection "
                           "process re-arms it ({active, N}). 1 is active-once "
                           "(a system call per read to re-arm); larger values save "
                           "that call on busy connections and let at most N reads of "
                           "recv_buffer bytes (login_recv_buffer before the session "
                           "opens) queue in a connection's mailbox."},
      max_stanza_size => #{type => {int, 1024, 16777216}, default => 262144,
                           doc => "Largest stanza in bytes. A larger one ends the "
                                  "connection with a policy-violation stream error."},
      max_depth => #{type => {int, 2, 1024}, default => 32,
                     doc => "Deepest element nesting inside a stanza (the stanza is depth "
                            "1). Deeper: policy-violation stream error."},
      shaper_rate => #{type => {int_or_infinity, 64}, default => 131072,
                       doc => "Traffic shaper: sustained bytes per second a client may send. "
                              "A faster client is paused (its socket is not read) until it "
                              "is back within the limit; nothing is dropped."},
      shaper_burst => #{type => {int, 1024, infinity}, default => 524288,
                        doc => "Traffic shaper: bytes a client may send in a burst above "
                               "shaper_rate."},
      negotiation_timeout => #{type => {int, 1, 3600}, default => 30,
                               doc => "Seconds a client has from connecting to a bound "
                                       "resource (TLS, SASL, bind). Slower: "
                                       "connection-timeout stream error."},
      send_timeout => #{type => {int, 1, 3600}, default => 15,
                        doc => "Seconds a write to a client may block (client not reading). "
                               "Then the connection is closed and undelivered messages are "
                               "re-routed or stored offline."},
      max_queued_stanzas => #{type => {int, 64, 10000000}, default => 5000,
                              doc => "Stanzas routed to one client's session that may wait to "
                                     "be written. A client that reads too slowly to keep "
                                     "below it (though fast enough for send_timeout) is "
                                     "disconnected; what its session held is re-routed or "
                                     "stored offline."},
      max_queued_bytes => #{type => {int, 65536, 1073741824}, default => 4194304,
                            doc => "Bytes of the stanzas that may wait for one client (their "
                                   "own memory; message bodies over 64 bytes are shared with "
                                   "the sender and bounded by max_queued_stanzas). Past it, "
                                   "as past max_queued_stanzas. Counting them walks the whole "
                                   "queue, so they are counted after each of the session's "
                                   "events while at most 32 stanzas wait, then at its first "
                                   "event a second after the last count, or sooner when the "
                                   "queue has doubled since or its stanzas would pass this "
                                   "bound at the size last counted: a queue passes it "
                                   "unseen only with stanzas larger than those counted, and "
                                   "for at most that second."},
      hibernate_after => #{type => {int, 0, 3600000}, default => 0,
                           doc => "Milliseconds of inactivity after which a connection "
                                  "process hibernates (a full garbage collection that "
                                  "compacts its heap to its live data). 0: whenever its "
                                  "mailbox is empty. Larger values keep heaps grown by a "
                                  "burst (a login, a roster) alive longer; with many "
                                  "sessions in a burst those heaps fragment the allocator "
                                  "and the node's RSS stays high (see docs/benchmarks.md)."}}.

auth_spec() ->
    #{mechanisms => #{type => {list, {enum, ['SCRAM-SHA-256-PLUS', 'SCRAM-SHA-1-PLUS',
                                             'SCRAM-SHA-256', 'SCRAM-SHA-1', 'PLAIN']}},
                      default => ['SCRAM-SHA-256-PLUS', 'SCRAM-SHA-1-PLUS', 'SCRAM-SHA-256',
                                  'SCRAM-SHA-1', 'PLAIN'],
                      doc => "SASL mechanisms offered, in this order. The -PLUS ones (channel "
                             "binding: tls-exporter, tls-server-end-point, advertised with "
                             "XEP-0440) only on TLS connections; where they are offered, a "
                             "SCRAM client that says it could bind but thinks the server "
                             "cannot (gs2 flag y) is refused as a downgrade."},
      sasl2 => #{type => boolean, default => true,
                 doc => "SASL2 (XEP-0388) on TLS connections, with Bind2 (XEP-0386): "
                        "authentication, resource binding and stream management in one "
                        "round trip, no stream restart. Legacy SASL stays offered."},
      fast => #{type => boolean, default => true,
                doc => "FAST (XEP-0484): a client that logs in with SASL2 (XEP-0388) and a "
                       "user-agent id may ask for a token, and log in with it next time in "
                       "one round trip without PBKDF2 (HT-SHA-256-EXPR, -UNIQ, -ENDP, -NONE). "
                       "Tokens are kept in the storage, per account and client."},
      fast_token_lifetime => #{type => {int, 60, 31536000}, default => 2592000,
                               doc => "Seconds a FAST token stays valid (30 days). A password "
                                      "change ends every token of the account."},
      fast_token_refresh => #{type => {int, 0, 31536000}, default => 86400,
                              doc => "A FAST token older than this many seconds is replaced by "
                                     "a new one when it is used (the client gets it in the "
                                     "<success/>; the old one ends when the new one is "
                                     "first used)."},
      scram_iterations => #{type => {int, 1, 1000000}, default => 4096,
                            doc => "PBKDF2 iterations for SCRAM credentials of new or changed "
                                   "passwords. Passwords are stored only as SCRAM keys."},
      plain_cache_size => #{type => {int, 0, 100000000}, default => 100000,
                            doc => "PLAIN logins must run PBKDF2 against the stored SCRAM "
                                   "keys, which costs about a millisecond. Throng remembers "
                                   "the result for this many users (keyed by an HMAC with "
                                   "a per-boot secret, never the password) so a re-login "
                                   "is cheap. 0 disables the cache."},
      failure_window => #{type => {int, 1, 86400}, default => 300,
                          doc => "Seconds over which address_failures authentication "
                                 "failures from one address are allowed (the address's "
                                 "bucket empties at address_failures per failure_window)."},
      address_failures => #{type => {int, 1, 1000000}, default => 20,
                            doc => "Failed authentications one address (IPv4 address or "
                                   "IPv6 /ipv6_prefix) may have in its bucket. When it is "
                                   "full, every SASL attempt from the address, right "
                                   "password or not, is answered temporary-auth-failure "
                                   "without a password check until the bucket drains "
                                   "(one failure every failure_window/address_failures "
                                   "seconds). Attempts refused do not fill it further."},
      account_failures => #{type => {int, 1, 1000000}, default => 10,
                            doc => "Failed authentications (wrong password) one account "
                                   "may have in its bucket, draining at account_failures "
                                   "per account_window. When it is full, attempts for the "
                                   "account are refused (temporary-auth-failure, no "
                                   "password check) only from addresses that have "
                                   "themselves failed within account_window: a user on an "
                                   "address without recent failures is never locked out "
                                   "by someone guessing their password elsewhere."},
      account_window => #{type => {int, 1, 86400}, default => 600,
                          doc => "Seconds over which account_failures failures for one "
                                 "account are allowed; also how long an address counts as "
                                 "having failed recently."},
      ipv6_prefix => #{type => {int, 1, 128}, default => 64,
                       doc => "IPv6 addresses are counted by this prefix (a /64 is what one "
                              "subscriber usually has; 128: each address alone). IPv4 "
                              "addresses are counted one by one."},
      exempt_loopback => #{type => boolean, default => false,
                           doc => "Do not count failures from loopback addresses "
                                  "(127.0.0.0/8, ::1) nor refuse them: for a local load "
                                  "generator. Off by default: a proxy on the same host "
                                  "would exempt the world."},
      max_tracked => #{type => {int, 1, 100000000}, default => 100000,
                       doc => "Entries (addresses and accounts with recent failures) the "
                              "failure table holds at most. When full, failures from "
                              "addresses not already in it share one bucket (sized as "
                              "one address's) and failures for accounts not in it are "
                              "not counted; entries leave when their bucket is empty and "
                              "their last failure older than account_window."},
      max_failure_delay => #{type => {int, 0, 60000}, default => 5000,
                             doc => "From the second failure in an address's bucket, each "
                                    "failure is answered after 100 ms x 2^(n-2) (n: the "
                                    "failures in the bucket), up to this many milliseconds "
                                    "(the socket is not read meanwhile). A stream is closed "
                                    "with policy-violation after 5 failures."}}.

tls_spec() ->
    #{versions => #{type => {list, {enum, ['tlsv1.2', 'tlsv1.3']}},
                    default => ['tlsv1.2', 'tlsv1.3'],
                    doc => "TLS versions accepted (at least one). `[tlsv1.3]`: TLS 1.2 "
                           "clients are refused with a protocol_version alert."},
      ciphers => #{type => {list, {enum, tls_suites()}},
                   default => tls_suites(),
                   doc => "Cipher suites (IANA names), in the server's order of "
                          "preference: the TLS 1.3 ones (TLS_AES_*, TLS_CHACHA20_*) and "
                          "the TLS 1.2 ones (TLS_ECDHE_*), at least one for each version "
                          "in `versions`. A client that lists ChaCha20-Poly1305 first gets "
                          "it when it is here. TLS 1.2 ECDSA suites need an ECDSA "
                          "certificate, RSA suites an RSA one."},
      groups => #{type => {list, {enum, tls_groups()}},
                  default => [x25519, secp256r1, secp384r1],
                  doc => "Key exchange groups (at least one), in the server's order. A "
                         "TLS 1.3 key share for any of them is taken as the client sent "
                         "it; a client whose shares are for other groups is asked "
                         "(HelloRetryRequest) for the first of these it supports; a "
                         "client that supports none of them is refused. TLS 1.2's ECDHE "
                         "uses the first of these the client supports. The default is "
                         "the elliptic curves every TLS 1.3 client has. The finite-field "
                         "groups (ffdhe*) cost 3 ms (ffdhe2048) to 110 ms (ffdhe8192) of "
                         "CPU per handshake, at the client's choice: with any of them "
                         "configured every handshake step runs on a dirty scheduler."}}.

%% The cipher suites `tls.ciphers' may name: those Throng's record layer
%% implements (throng_tls_kdf:suite/1), in the default order (AES-128-GCM
%% first, TLS 1.3's first).
tls_suites() ->
    ['TLS_AES_128_GCM_SHA256', 'TLS_AES_256_GCM_SHA384', 'TLS_CHACHA20_POLY1305_SHA256',
     'TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256', 'TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256',
     'TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384', 'TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384',
     'TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256',
     'TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256'].

%% The groups `tls.groups' may name: OpenSSL 3.0's default list, in its
%% order (the default is its elliptic curves X25519, P-256 and P-384).
tls_groups() ->
    [x25519, secp256r1, x448, secp521r1, secp384r1, ffdhe2048, ffdhe3072, ffdhe4096,
     ffdhe6144, ffdhe8192].

%% @doc The `tls' section with every option at its default (a TLS context
%% made outside a configured server: tests, benchmarks).
-spec tls_defaults() -> #{atom() => term()}.
tls_defaults() ->
    maps:map(fun(_, #{default := D}) -> D end, tls_spec()).

sm_spec() ->
    #{enabled => #{type => boolean, default => true,
                   doc => "Offer XEP-0198 stream management."},
      resume_timeout => #{type => {int, 0, 86400}, default => 300,
                          doc => "Seconds a session waits to be resumed after its "
                                 "connection drops (0: resumption not offered)."},
      max_unacked => #{type => {int, 1, 1000000}, default => 5000,
                       doc => "Stanzas a client may leave unacknowledged. More: the "
                              "connection ends with a policy-violation stream error and "
                              "the unacknowledged messages go offline."},
      ack_every => #{type => {int, 1, 1000000}, default => 10,
                     doc => "The server asks the client for an acknowledgement after "
                            "this many unacknowledged stanzas."},
      resumption_secret => #{type => string, default => <<>>,
                             doc => "Secret the key of resumption ids is derived from. "
                                    "Empty: a random key made at each start (ids die "
                                    "with the node). Set it, the same on every node, "
                                    "when a resumption may reach another node of a "
                                    "cluster; at least 32 random characters, and keep "
                                    "the file private. Ids from an earlier start never "
                                    "resume."}}.

limits_spec() ->
    #{roster_max_items =>
          #{type => {int, 1, 1000000}, default => 2000,
            doc => "Items in one roster. A roster set, or an outbound subscribe or "
                   "pre-approval, that would add an item past it gets a policy-violation "
                   "stanza error; an inbound subscription request that would add one is "
                   "not stored and its sender gets a presence error (policy-violation). "
                   "Existing items can always be changed or removed."},
      roster_max_name_bytes =>
          #{type => {int, 1, 65536}, default => 1024,
            doc => "Bytes of a roster item's name, and of each of its group names. "
                   "Longer: not-acceptable (RFC 6121 2.3.3)."},
      roster_max_groups =>
          #{type => {int, 0, 10000}, default => 64,
            doc => "Groups of one roster item. More: not-acceptable."},
      roster_max_item_bytes =>
          #{type => {int, 1, 1048576}, default => 4096,
            doc => "Bytes of a roster item's name and group names together: with "
                   "roster_max_items, what bounds a roster (and every roster result). "
                   "More: not-acceptable."},
      directed_presence_max =>
          #{type => {int, 0, 1000000}, default => 1000,
            doc => "Entities one session may have sent directed available presence to "
                   "(each is sent unavailable presence when the session goes "
                   "unavailable, RFC 6121 4.6.3). Directed presence to one more is not "
                   "sent: the client gets a policy-violation presence error."},
      subscription_request_max_bytes =>
          #{type => {int, 256, 65536}, default => 4096,
            doc => "A subscription request waiting for an offline user is kept as the "
                   "complete stanza (RFC 6121 3.1.3) up to this many bytes; children past "
                   "it are dropped from the stored copy (the request itself is kept)."}}.

stats_spec() ->
    #{enabled => #{type => boolean, default => true,
                   doc => "Run the statistics collector and its HTTP endpoint."},
      port => #{type => {int, 0, 65535}, default => 5280,
                doc => "HTTP port of /metrics (Prometheus), /stats (JSON) and the "
                       "dashboard (0: any free port, for tests)."},
      ip => #{type => ip, default => {127, 0, 0, 1},
              doc => "Address of the HTTP endpoint."},
      auth_user => #{type => string, default => <<>>,
                     doc => "HTTP basic-auth user; empty: no authentication. Set it "
                            "(and auth_password) when ip is not a loopback address."},
      auth_password => #{type => string, default => <<>>,
                         doc => "HTTP basic-auth password."},
      queue_alarm => #{type => {int, 1, 100000000}, default => 10000,
                       doc => "A process whose message queue is longer than this raises "
                              "the queue alarm (logged, exported, shown)."},
      http_max_connections =>
          #{type => {int, 1, 100000}, default => 64,
            doc => "Most connections the HTTP endpoint holds. A connection beyond it "
                   "closes the one that has waited longest without a complete request "
                   "(a half-sent request or an idle keep-alive connection), so requests "
                   "that arrive whole are served however many others stall; only when "
                   "every held connection is being answered is the newcomer refused "
                   "with 503."},
      http_request_timeout =>
          #{type => {int, 10, 3600000}, default => 5000,
            doc => "Milliseconds a client has to send a request's line and headers "
                   "(from the connect, or from the request line on a kept-alive "
                   "connection); later: 408 and the connection is closed."},
      http_idle_timeout =>
          #{type => {int, 10, 3600000}, default => 10000,
            doc => "Milliseconds a kept-alive connection may wait for its next request "
                   "line; then it is closed."}}.

cluster_spec() ->
    #{seeds => #{type => {list, node}, default => [],
                 doc => "Nodes to join at start-up and to reconnect to whenever the "
                        "connection is lost (a netsplit heals by itself). Nodes joined "
                        "with `bin/throng join-cluster` are remembered in DATA_DIR and "
                        "need not be listed."},
      db_nodes => #{type => {list, node}, default => [],
                    doc => "Nodes that keep the Mnesia tables (accounts, rosters, offline "
                           "messages) on disk. Empty: this node keeps its own. A node not "
                           "listed keeps no copy and reads and writes the tables of these "
                           "nodes remotely, so a cluster's data is not copied into every "
                           "node's memory. Not used with storage.backend: pgsql."},
      node_address => #{type => host_port, default => <<>>,
                        doc => "Where clients reach this node itself, as host:port (for "
                               "example 10.0.0.1:5222, or a per-node port beside a shared "
                               "one: 127.0.0.1:5301): what listeners with redirect_to_home "
                               "on other nodes send clients to. Told to the other members "
                               "when they join. Empty: clients are never sent here."},
      route_at_home => #{type => boolean, default => false,
                         doc => "true: a stanza for a user whose home (the node that keeps "
                                "the user's part of the session directory) is another node is "
                                "handed to the home, which routes it and confirms it once a "
                                "second, and presence broadcasts take the same way; the sender "
                                "does not wait. false: the sender asks the home for the user's "
                                "sessions and delivers. Measured at 4 x 9,000 sessions, neither "
                                "costs less CPU (docs/clustering.md, \"Routing at the home\"). "
                                "Every node of a cluster should have the same setting."},
      reconnect_interval => #{type => {int, 1, 3600}, default => 5,
                              doc => "Seconds between attempts to reach seeds and lost "
                                     "members."}}.

storage_spec() ->
    #{backend => #{type => {enum, [mnesia, pgsql]}, default => mnesia,
                   doc => "Storage backend. mnesia: embedded, disc copies under "
                          "DATA_DIR/mnesia; a committed write survives kill -9 of the node. "
                          "pgsql: a PostgreSQL database (the pgsql section below; see "
                          "docs/operations.md, \"PostgreSQL backend\"), which several nodes "
                          "may share."},
      archive_sync_delay =>
          #{type => {int, 0, 60000}, default => 1000,
            doc => "Milliseconds from an archived message's write (XEP-0313; the embedded "
                   "store's archive files, or the Mnesia tables of cluster.db_nodes) to its "
                   "fsync; the messages of that time share one fsync. In the archive files "
                   "the write is in the operating system's hands when it returns, so a kill "
                   "-9 of the node loses nothing and a crash of the machine may lose the "
                   "archive's copies of the last delay. On db nodes the write waits in "
                   "Mnesia's log buffer until then, so a kill -9 of a db node may lose them "
                   "too. The messages themselves are delivered or stored offline with their "
                   "own fsync. 0: a store returns after its fsync (the stores of the same "
                   "moment share it). In a cluster a db node fsyncs after its own delay. Not "
                   "used with backend: pgsql, whose every store is committed at once."},
      pgsql =>
          #{type =>
                {section,
                 #{host => #{type => string, default => <<"127.0.0.1">>,
                             doc => "Host name or address of the PostgreSQL server."},
                   port => #{type => {int, 1, 65535}, default => 5432,
                             doc => "TCP port of the PostgreSQL server."},
                   database => #{type => string, default => <<"throng">>,
                                 doc => "Database name. An empty database gets Throng's schema "
                                        "at the first start (priv/pgsql/schema.sql); a "
                                        "database with another schema version is refused."},
                   user => #{type => string, default => <<"throng">>,
                             doc => "Role Throng logs in as (password, md5 or scram-sha-256 "
                                    "authentication)."},
                   password => #{type => string, default => <<>>,
                                 doc => "Password of the role. Keep the configuration file "
                                        "private."},
                   pool_size => #{type => {int, 1, 1000}, default => 10,
                                  doc => "Connections each node keeps open. A caller uses the "
                                         "connection chosen by its process, waiting at most "
                                         "query_timeout for it when it is busy."},
                   connect_timeout =>
                       #{type => {int, 100, 600000}, default => 5000,
                         doc => "Milliseconds a TCP connection to the server may take to open. "
                                "A lost connection is retried at once, then after 100 ms, "
                                "twice as long each time up to 5 s; meanwhile storage calls "
                                "fail at once (a login gets temporary-auth-failure). An "
                                "attempt the server stops answering is given up after "
                                "connect_timeout + 2 x query_timeout + 5 s."},
                   query_timeout =>
                       #{type => {int, 100, 3600000}, default => 10000,
                         doc => "Milliseconds one statement may run (the server cancels it: "
                                "statement_timeout) and a caller may wait for a free "
                                "connection."},
                   idle_gc_interval =>
                       #{type => {int, 0, 3600000}, default => 10000,
                         doc => "Every this many milliseconds, a connection that nobody is "
                                "using has the driver's processes garbage-collected, so that "
                                "the heap a large result left behind goes back (without it "
                                "their ten heaps stay at their high-water mark, about 1 MB "
                                "per node under the paper scenario). 0 turns it off."}}},
            default => #{},
            doc => "The PostgreSQL database, when backend is pgsql (TCP only: the driver has "
                   "no Unix-socket support)."}}.
