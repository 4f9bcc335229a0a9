/* throng_tls_nif: the TLS handshake, over Debian's libssl, and nothing
 * after it.
 *
 * OpenSSL 3.0 keeps about 16 KB per established connection (the SSL object
 * alone is 7.6 KB, then cipher contexts, the session, memory BIO buffers),
 * whether or not the connection is idle. An idle XMPP session needs none
 * of it: after the handshake only the traffic keys matter. So this NIF
 * runs the handshake (certificates, key exchange, resumption: everything
 * security depends on stays OpenSSL's), then hands the negotiated keys to
 * Erlang and frees the SSL object. The record layer (AEAD records with the
 * crypto application) is throng_tls_record's.
 *
 * Functions (throng_tls_nif.erl):
 *   new_ctx(CertFile, [{Name, File}], {MinVersion, MaxVersion, Ciphers12, Suites13, Groups})
 *                                -> {ok, Ctx} | {error, Reason}
 *                                   (the default certificate, and one per SNI name;
 *                                    versions 12 or 13; OpenSSL's cipher list for TLS
 *                                    1.2 (empty: TLS 1.2 is off), its TLS 1.3 suite
 *                                    list and its groups list)
 *   conn_new(Ctx)                -> Conn
 *   handshake(Conn, Bytes)       -> {more, Out} | {done, Out, Info, Rest}
 *                                 | {error, Reason, Out}
 *                                   (the ClientHello step on a dirty CPU scheduler
 *                                    only for a slow key: see handshake() below)
 *   trim()                       -> ok   (malloc_trim: free pages to the OS)
 *   timing()                     -> disabled | #{...}   (built with TIMING=1:
 *                                   CPU time per handshake step, then reset)
 * A Conn is used by one process at a time (its connection's owner).
 */
#include <string.h>
#include <malloc.h>
#include <erl_nif.h>
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/rand.h>

#define SECRET_MAX 64

/* Built with `make -C c_src TIMING=1' (-DTHRONG_TLS_TIMING): the thread CPU
 * time of each part of the handshakes, summed until timing() reads and
 * resets them (bench/tls/handshake_cost.sh). Off by default: four
 * clock_gettime calls per step. */
enum { T_ANSWER, T_LATER, T_INFO, T_FREE, T_N };
#ifdef THRONG_TLS_TIMING
#include <time.h>
static unsigned long long timing_ns[T_N];
static unsigned long timing_done;
static unsigned long long thread_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (unsigned long long)t.tv_sec * 1000000000ULL + (unsigned long long)t.tv_nsec;
}
#define TIMED(slot, stmt) do { unsigned long long t0_ = thread_ns(); stmt; \
        __atomic_add_fetch(&timing_ns[slot], thread_ns() - t0_, __ATOMIC_RELAXED); } while (0)
#else
#define TIMED(slot, stmt) do { stmt; } while (0)
#endif
/* glibc keeps what the handshakes freed (tens of KB each, interleaved
 * with what other threads hold) in its arenas instead of returning it;
 * every TRIM_EVERY finished handshakes the free pages go back to the OS
 * (measured: 25 MB, 2.5 KB per session, at 10,000 TLS sessions). */
#define TRIM_EVERY 256
static unsigned long handshakes_ended;

/* The session ticket keys (name, HMAC and AES keys: OpenSSL 3.0's 80
 * bytes), drawn when the library is first loaded and given to every
 * context: tickets stay valid across `reload-certs' (which makes new
 * contexts) until the node restarts. They live in the library's private
 * data, which an upgraded library takes over. */
#define TICKET_KEYS_LEN 80

/* Certificates per host name, chosen by the client's SNI: the default
 * context and, for each name, the context of its certificate. */
typedef struct {
    char name[256];                 /* lower case; "*.example.org" for wildcards */
    SSL_CTX *ctx;
} sni_t;

typedef struct {
    SSL_CTX *ctx;                   /* the default certificate */
    sni_t *sni;
    unsigned int nsni;
    SSL_CTX **owned;                /* every context made, default first */
    unsigned int nowned;
    int slow;                       /* a context signs slowly, or finite-field groups are
                                     * allowed: handshake steps on a dirty scheduler */
} ctx_t;

typedef struct {
    SSL *ssl;                       /* NULL once the handshake is over */
    ctx_t *owner;                   /* kept while the handshake may need it (SNI) */
    unsigned char client_secret[SECRET_MAX], server_secret[SECRET_MAX];
    size_t client_secret_len, server_secret_len;
    unsigned int tickets_written;   /* TLS 1.3 records under the write key */
    int answered;                   /* the server's first flight is out */
} conn_t;

static ErlNifResourceType *ctx_type, *conn_type;
static int conn_index = -1;
static ERL_NIF_TERM am_ok, am_error, am_more, am_done, am_version, am_cipher, am_tls12,
    am_tls13, am_client_secret, am_server_secret, am_master_secret, am_client_random,
    am_server_random, am_write_records, am_exporter, am_server_end_point, am_tls_unique, am_alpn,
    am_sni, am_undefined;

static void ctx_dtor(ErlNifEnv *env, void *obj) {
    ctx_t *c = obj;
    for (unsigned int i = 0; i < c->nowned; i++) SSL_CTX_free(c->owned[i]);
    enif_free(c->owned);
    enif_free(c->sni);
}

static void release_ssl(conn_t *c) {
    if (c->ssl) SSL_free(c->ssl);
    c->ssl = NULL;
    if (c->owner) enif_release_resource(c->owner);
    c->owner = NULL;
}

static void conn_dtor(ErlNifEnv *env, void *obj) {
    conn_t *c = obj;
    release_ssl(c);
    OPENSSL_cleanse(c->client_secret, SECRET_MAX);
    OPENSSL_cleanse(c->server_secret, SECRET_MAX);
}

static int hexval(char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

/* "LABEL <client random hex> <secret hex>": keeps TLS 1.3's application
 * traffic secrets (the handshake's own secrets are not needed after it). */
static void keylog(const SSL *ssl, const char *line) {
    conn_t *c = SSL_get_ex_data(ssl, conn_index);
    unsigned char *dst;
    size_t *len;
    if (!c) return;
    if (strncmp(line, "CLIENT_TRAFFIC_SECRET_0 ", 24) == 0) {
        dst = c->client_secret; len = &c->client_secret_len;
    } else if (strncmp(line, "SERVER_TRAFFIC_SECRET_0 ", 24) == 0) {
        dst = c->server_secret; len = &c->server_secret_len;
    } else {
        return;
    }
    const char *hex = strchr(line + 24, ' ');
    if (!hex) return;
    hex++;
    size_t n = strlen(hex) / 2;
    if (n > SECRET_MAX) return;
    for (size_t i = 0; i < n; i++) {
        int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) return;
        dst[i] = (unsigned char)(hi << 4 | lo);
    }
    *len = n;
}

/* Counts the TLS 1.3 NewSessionTicket messages the server writes: they
 * are sent under the application write key, so the first record the
 * Erlang side writes has their count as its sequence number. */
static void msg_cb(int write_p, int version, int content_type, const void *buf, size_t len,
                   SSL *ssl, void *arg) {
    if (!write_p || content_type != SSL3_RT_HANDSHAKE || len < 1) return;
    if (((const unsigned char *)buf)[0] != SSL3_MT_NEWSESSION_TICKET) return;
    if (SSL_version(ssl) != TLS1_3_VERSION) return;
    conn_t *c = SSL_get_ex_data(ssl, conn_index);
    if (c) c->tickets_written++;
}

/* ALPN (XEP-0368): xmpp-client when the client offers it; a client that
 * offers only other protocols gets none (no_application_protocol is not
 * sent: XMPP clients without ALPN exist). */
static int alpn_cb(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                   const unsigned char *in, unsigned int inlen, void *arg) {
    static const unsigned char xmpp[] = "\x0bxmpp-client";
    unsigned char *sel = NULL;
    unsigned char sellen = 0;
    if (SSL_select_next_proto(&sel, &sellen, xmpp, sizeof(xmpp) - 1, in, inlen)
        == OPENSSL_NPN_NEGOTIATED) {
        *out = sel; *outlen = sellen;
        return SSL_TLSEXT_ERR_OK;
    }
    return SSL_TLSEXT_ERR_NOACK;
}

static ERL_NIF_TERM error_term(ErlNifEnv *env, const char *what) {
    char buf[256];
    unsigned long e = ERR_get_error();
    if (e) {
        ERR_error_string_n(e, buf, sizeof buf);
        ERR_clear_error();
        size_t n = strlen(buf);
        snprintf(buf + n, sizeof buf - n, " (%s)", what);
    } else {
        snprintf(buf, sizeof buf, "%s", what);
    }
    return enif_make_tuple2(env, am_error, enif_make_string(env, buf, ERL_NIF_LATIN1));
}

/* SNI: the context whose certificate names the host the client asked for
 * (exact, then a one-label wildcard); the default one otherwise. */
static int servername_cb(SSL *ssl, int *alert, void *arg) {
    ctx_t *c = arg;
    const char *name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
    char lower[256];
    size_t n;
    if (!name || (n = strlen(name)) == 0 || n >= sizeof lower) return SSL_TLSEXT_ERR_OK;
    for (size_t i = 0; i <= n; i++)
        lower[i] = (name[i] >= 'A' && name[i] <= 'Z') ? name[i] + 32 : name[i];
    const char *dot = strchr(lower, '.');
    SSL_CTX *wild = NULL;
    for (unsigned int i = 0; i < c->nsni; i++) {
        if (strcmp(c->sni[i].name, lower) == 0) {
            SSL_set_SSL_CTX(ssl, c->sni[i].ctx);
            return SSL_TLSEXT_ERR_OK;
        }
        if (!wild && dot && c->sni[i].name[0] == '*' && strcmp(c->sni[i].name + 1, dot) == 0)
            wild = c->sni[i].ctx;
    }
    if (wild) SSL_set_SSL_CTX(ssl, wild);
    return SSL_TLSEXT_ERR_OK;
}

/* A signature with this context's key takes long enough that the step
 * answering a ClientHello should not run on a normal scheduler: RSA keys
 * above 3,072 bits (RSA-4096 signs in ~1.5 ms here; RSA-2048 in 0.21 ms,
 * ECDSA P-256 in 0.014 ms, `openssl speed`), and any key OpenSSL cannot
 * size. */
static int slow_key(SSL_CTX *ctx) {
    EVP_PKEY *k = SSL_CTX_get0_privatekey(ctx);
    if (!k) return 1;
    switch (EVP_PKEY_get_base_id(k)) {
    case EVP_PKEY_EC: case EVP_PKEY_ED25519: case EVP_PKEY_ED448: return 0;
    case EVP_PKEY_RSA: case EVP_PKEY_RSA_PSS: return EVP_PKEY_get_bits(k) > 3072;
    default: return 1;
    }
}

/* The configuration's `tls' section, in OpenSSL's words (throng_tls_nif.erl
 * makes them from throng_config_spec's names, which only name what the
 * record layer implements). */
typedef struct {
    int min_version, max_version;   /* TLS1_2_VERSION or TLS1_3_VERSION */
    char ciphers12[512];            /* "" when TLS 1.2 is off */
    char suites13[256];
    char groups[256];
} settings_t;

/* A server context for one PEM file (chain and key). Every context gets the
 * same settings: after SNI switches a connection to another context, the
 * callbacks that run are that context's. */
static SSL_CTX *make_ctx(const char *path, const settings_t *set, unsigned char *ticket_keys,
                         const char **what) {
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) { *what = "SSL_CTX_new"; return NULL; }
    /* TLS 1.2 and 1.3 only; AEAD suites with forward secrecy only: the
     * configuration's (tls.versions, tls.ciphers, tls.groups), which can
     * name nothing else. The server's order; by default AES-128-GCM first:
     * TLS 1.3's mandatory suite (RFC 8446 9.1), at the 128-bit level of
     * the X25519 / P-256 key exchange, and its key schedule hashes with
     * SHA-256, not SHA-384: ~20-30 us less per handshake here (docs/tls.md,
     * "The suites' order"). A client that lists ChaCha20-Poly1305 first (no
     * AES instructions) gets it. */
    if (set->min_version == TLS1_2_VERSION && !set->ciphers12[0]) {
        /* TLS 1.2 on and no suite of its own named: never OpenSSL's
         * default list (it has CBC and static RSA suites) */
        SSL_CTX_free(ctx);
        *what = "tls.ciphers: no TLS 1.2 suite";
        return NULL;
    }
    if (!SSL_CTX_set_min_proto_version(ctx, set->min_version)
        || !SSL_CTX_set_max_proto_version(ctx, set->max_version)
        || (set->ciphers12[0] && !SSL_CTX_set_cipher_list(ctx, set->ciphers12))
        || !SSL_CTX_set_ciphersuites(ctx, set->suites13)) {
        SSL_CTX_free(ctx);
        *what = "tls.versions or tls.ciphers";
        return NULL;
    }
    if (!SSL_CTX_set1_groups_list(ctx, set->groups)) {
        SSL_CTX_free(ctx);
        *what = "tls.groups";
        return NULL;
    }
    SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION
                             | SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_PRIORITIZE_CHACHA);
    /* Resumption by stateless tickets only (keyed by the first context):
     * no server-side session cache to grow with the connections. */
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_max_early_data(ctx, 0);
    SSL_CTX_set_session_id_context(ctx, (const unsigned char *)"throng", 6);
    /* One TLS 1.3 ticket per handshake (OpenSSL's default is two): a
     * client resumes with one; each costs a session encryption and a
     * record. A resumed handshake brings the next one. */
    SSL_CTX_set_num_tickets(ctx, 1);
    if (SSL_CTX_set_tlsext_ticket_keys(ctx, ticket_keys, TICKET_KEYS_LEN) != 1) {
        SSL_CTX_free(ctx);
        *what = "session ticket keys";
        return NULL;
    }
    SSL_CTX_set_keylog_callback(ctx, keylog);
    SSL_CTX_set_msg_callback(ctx, msg_cb);
    SSL_CTX_set_alpn_select_cb(ctx, alpn_cb, NULL);
    if (SSL_CTX_use_certificate_chain_file(ctx, path) != 1
        || SSL_CTX_use_PrivateKey_file(ctx, path, SSL_FILETYPE_PEM) != 1
        || SSL_CTX_check_private_key(ctx) != 1) {
        SSL_CTX_free(ctx);
        *what = "certificate or key";
        return NULL;
    }
    return ctx;
}

static int get_path(ErlNifEnv *env, ERL_NIF_TERM t, char *buf, size_t size) {
    ErlNifBinary b;
    if (!enif_inspect_iolist_as_binary(env, t, &b) || b.size >= size) return 0;
    memcpy(buf, b.data, b.size);
    buf[b.size] = 0;
    return 1;
}

/* {MinVersion, MaxVersion, Ciphers12, Suites13, Groups} */
static int get_settings(ErlNifEnv *env, ERL_NIF_TERM t, settings_t *set) {
    const ERL_NIF_TERM *f;
    int arity, min, max;
    if (!enif_get_tuple(env, t, &arity, &f) || arity != 5
        || !enif_get_int(env, f[0], &min) || !enif_get_int(env, f[1], &max)
        || (min != 12 && min != 13) || (max != 12 && max != 13) || min > max
        || !get_path(env, f[2], set->ciphers12, sizeof set->ciphers12)
        || !get_path(env, f[3], set->suites13, sizeof set->suites13)
        || !get_path(env, f[4], set->groups, sizeof set->groups))
        return 0;
    set->min_version = min == 12 ? TLS1_2_VERSION : TLS1_3_VERSION;
    set->max_version = max == 12 ? TLS1_2_VERSION : TLS1_3_VERSION;
    return 1;
}

/* new_ctx(DefaultFile, [{Name, File}], Settings): the default context, and
 * one per distinct file named for SNI. */
static ERL_NIF_TERM new_ctx(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
    char path[4096];
    unsigned int n;
    const char *what = "";
    settings_t set;
    unsigned char *keys = enif_priv_data(env);
    if (!get_path(env, argv[0], path, sizeof path) || !enif_get_list_length(env, argv[1], &n)
        || !get_settings(env, argv[2], &set))
        return enif_make_badarg(env);
    ERR_clear_error();
    ctx_t *c = enif_alloc_resource(ctx_type, sizeof(ctx_t));
    memset(c, 0, sizeof *c);
    c->sni = enif_alloc(sizeof(sni_t) * (n ? n : 1));
    c->owned = enif_alloc(sizeof(SSL_CTX *) * (n + 1));
    char (*files)[4096] = enif_alloc(4096 * (size_t)(n + 1));
    ERL_NIF_TERM result;
    if (!(c->ctx = make_ctx(path, &set, keys, &what))) goto fail;
    c->slow = slow_key(c->ctx) || strstr(set.groups, "ffdhe") != NULL;
    c->owned[c->nowned] = c->ctx;
    memcpy(files[c->nowned++], path, sizeof path);
    ERL_NIF_TERM list = argv[1], head;
    while (enif_get_list_cell(env, list, &head, &list)) {
        const ERL_NIF_TERM *pair;
        int arity;
        ErlNifBinary name;
        if (!enif_get_tuple(env, head, &arity, &pair) || arity != 2
            || !enif_inspect_iolist_as_binary(env, pair[0], &name)
            || name.size == 0 || name.size >= sizeof c->sni[0].name
            || !get_path(env, pair[1], path, sizeof path)) {
            what = "badarg";
            goto fail;
        }
        SSL_CTX *ctx = NULL;
        for (unsigned int i = 0; i < c->nowned; i++)
            if (strcmp(files[i], path) == 0) ctx = c->owned[i];
        if (!ctx) {
            if (!(ctx = make_ctx(path, &set, keys, &what))) goto fail;
            c->slow |= slow_key(ctx);
            c->owned[c->nowned] = ctx;
            memcpy(files[c->nowned++], path, sizeof path);
        }
        sni_t *e = &c->sni[c->nsni++];
        for (size_t i = 0; i < name.size; i++)
            e->name[i] = (name.data[i] >= 'A' && name.data[i] <= 'Z') ? name.data[i] + 32 : name.data[i];
        e->name[name.size] = 0;
        e->ctx = ctx;
    }
    enif_free(files);
    SSL_CTX_set_tlsext_servername_callback(c->ctx, servername_cb);
    SSL_CTX_set_tlsext_servername_arg(c->ctx, c);
    result = enif_make_tuple2(env, am_ok, enif_make_resource(env, c));
    enif_release_resource(c);
    return result;
fail:
    enif_free(files);
    result = error_term(env, what);
    enif_release_resource(c);    /* ctx_dtor frees what was made */
    return result;
}

static ERL_NIF_TERM conn_new(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
    ctx_t *ctx;
    if (!enif_get_resource(env, argv[0], ctx_type, (void **)&ctx)) return enif_make_badarg(env);
    ERR_clear_error();
    SSL *ssl = SSL_new(ctx->ctx);
    if (!ssl) return error_term(env, "SSL_new");
    BIO *rbio = BIO_new(BIO_s_mem()), *wbio = BIO_new(BIO_s_mem());
    if (!rbio || !wbio) {
        BIO_free(rbio); BIO_free(wbio); SSL_free(ssl);
        return error_term(env, "BIO_new");
    }
    SSL_set_bio(ssl, rbio, wbio);
    SSL_set_accept_state(ssl);
    conn_t *c = enif_alloc_resource(conn_type, sizeof(conn_t));
    memset(c, 0, sizeof *c);
    c->ssl = ssl;
    c->owner = ctx;
    enif_keep_resource(ctx);
    SSL_set_ex_data(ssl, conn_index, c);
    ERL_NIF_TERM t = enif_make_resource(env, c);
    enif_release_resource(c);
    return t;
}

static ERL_NIF_TERM bio_out(ErlNifEnv *env, BIO *b) {
    ErlNifBinary out;
    size_t n = BIO_ctrl_pending(b);
    enif_alloc_binary(n, &out);
    if (n > 0 && BIO_read(b, out.data, (int)n) != (int)n) out.size = 0;
    return enif_make_binary(env, &out);
}

static ERL_NIF_TERM bin(ErlNifEnv *env, const unsigned char *p, size_t n) {
    ERL_NIF_TERM t;
    unsigned char *d = enif_make_new_binary(env, n, &t);
    if (n) memcpy(d, p, n);
    return t;
}

static ERL_NIF_TERM done_info(ErlNifEnv *env, conn_t *c) {
    SSL *ssl = c->ssl;
    int v = SSL_version(ssl);
    const SSL_CIPHER *cipher = SSL_get_current_cipher(ssl);
    const char *name = cipher ? SSL_CIPHER_standard_name(cipher) : NULL;
    unsigned char cr[SSL3_RANDOM_SIZE], sr[SSL3_RANDOM_SIZE], ms[SSL_MAX_MASTER_KEY_LENGTH];
    unsigned char exp[32];
    ERL_NIF_TERM keys[8], vals[8];
    int n = 0;
    keys[n] = am_version; vals[n++] = v == TLS1_3_VERSION ? am_tls13 : am_tls12;
    keys[n] = am_cipher;
    vals[n++] = enif_make_atom(env, name ? name : "undefined");
    if (v == TLS1_3_VERSION) {
        keys[n] = am_client_secret; vals[n++] = bin(env, c->client_secret, c->client_secret_len);
        keys[n] = am_server_secret; vals[n++] = bin(env, c->server_secret, c->server_secret_len);
        keys[n] = am_write_records; vals[n++] = enif_make_uint(env, c->tickets_written);
    } else {
        size_t msl = SSL_SESSION_get_master_key(SSL_get_session(ssl), ms, sizeof ms);
        SSL_get_client_random(ssl, cr, sizeof cr);
        SSL_get_server_random(ssl, sr, sizeof sr);
        keys[n] = am_master_secret; vals[n++] = bin(env, ms, msl);
        keys[n] = am_client_random; vals[n++] = bin(env, cr, sizeof cr);
        keys[n] = am_server_random; vals[n++] = bin(env, sr, sizeof sr);
        OPENSSL_cleanse(ms, sizeof ms);
    }
    /* RFC 9266 tls-exporter, for channel binding (TLS 1.3, or 1.2 with the
     * extended master secret). */
    keys[n] = am_exporter;
    if ((v == TLS1_3_VERSION || SSL_get_extms_support(ssl) == 1)
        && SSL_export_keying_material(ssl, exp, sizeof exp, "EXPORTER-Channel-Binding", 24,
                                      NULL, 0, 0) == 1)
        vals[n++] = bin(env, exp, sizeof exp);
    else
        vals[n++] = am_undefined;
    ERL_NIF_TERM map;
    enif_make_map_from_arrays(env, keys, vals, n, &map);
    /* RFC 5929 tls-server-end-point: the hash of the certificate this
     * connection was served (after SNI), with its signature's hash, SHA-256
     * for MD5 and SHA-1; undefined for signatures without a hash (Ed25519). */
    X509 *cert = SSL_get_certificate(ssl);
    int md_nid = NID_undef;
    unsigned char ep[EVP_MAX_MD_SIZE];
    unsigned int ep_len = 0;
    if (cert && X509_get_signature_info(cert, &md_nid, NULL, NULL, NULL)) {
        const EVP_MD *md = md_nid == NID_undef ? NULL
            : (md_nid == NID_md5 || md_nid == NID_sha1) ? EVP_sha256()
            : EVP_get_digestbynid(md_nid);
        if (!md || X509_digest(cert, md, ep, &ep_len) != 1) ep_len = 0;
    }
    enif_make_map_put(env, map, am_server_end_point,
                      ep_len ? bin(env, ep, ep_len) : am_undefined, &map);
    /* RFC 5929 tls-unique: the first Finished message of the handshake (the
     * client's, or the server's on resumption), as OpenSSL-based clients
     * compute it, also under TLS 1.3 (docs/tls.md says why it is kept); not
     * for TLS 1.2 without the extended master secret (the triple handshake
     * attack, RFC 7627). */
    unsigned char fin[EVP_MAX_MD_SIZE];
    size_t fin_len = 0;
    if (v == TLS1_3_VERSION || SSL_get_extms_support(ssl) == 1) {
        fin_len = SSL_session_reused(ssl) ? SSL_get_finished(ssl, fin, sizeof fin)
                                          : SSL_get_peer_finished(ssl, fin, sizeof fin);
        if (fin_len > sizeof fin) fin_len = 0;
    }
    enif_make_map_put(env, map, am_tls_unique,
                      fin_len ? bin(env, fin, fin_len) : am_undefined, &map);
    const unsigned char *alpn;
    unsigned int alpn_len;
    SSL_get0_alpn_selected(ssl, &alpn, &alpn_len);
    enif_make_map_put(env, map, am_alpn, alpn_len ? bin(env, alpn, alpn_len) : am_undefined, &map);
    const char *sni = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
    enif_make_map_put(env, map, am_sni,
                      sni ? bin(env, (const unsigned char *)sni, strlen(sni)) : am_undefined, &map);
    return map;
}

static void ended(void) {
    if (__atomic_add_fetch(&handshakes_ended, 1, __ATOMIC_RELAXED) % TRIM_EVERY == 0)
        malloc_trim(0);
}

static ERL_NIF_TERM handshake_step(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);

/* Until the server's first flight is out, a step may be the one that reads
 * the whole ClientHello and answers it, signature included. With the keys
 * Throng is usually given (RSA-2048, ECDSA) and the elliptic-curve groups
 * that step takes 0.1-0.4 ms and runs here, on the calling scheduler,
 * reported as a full time slice: a hop to a dirty scheduler and back costs
 * two thread wake-ups, which on a busy node cost more than the step. The
 * later steps (the client's Finished: a few hashes, the ticket) are short.
 *
 * A slow context (ctx_t.slow: a key above RSA-3072, or finite-field groups
 * allowed, whose key exchange the client picks and which costs 3 ms for
 * ffdhe2048 up to 110 ms for ffdhe8192) runs every step until the end on a
 * dirty CPU scheduler: after a HelloRetryRequest the signature and the key
 * exchange come in the second step. */
static int dirty(const conn_t *c) {
    return c->ssl && c->owner && c->owner->slow;
}

static ERL_NIF_TERM handshake(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
    conn_t *c;
    if (enif_get_resource(env, argv[0], conn_type, (void **)&c) && c->ssl) {
        if (dirty(c))
            return enif_schedule_nif(env, "handshake_dirty", ERL_NIF_DIRTY_JOB_CPU_BOUND,
                                     handshake_step, argc, argv);
        if (!c->answered) {
            ERL_NIF_TERM r = handshake_step(env, argc, argv);
            (void)enif_consume_timeslice(env, 100);
            return r;
        }
    }
    return handshake_step(env, argc, argv);
}

/* steps_dirty(Conn): whether the connection's next handshake step runs on
 * a dirty scheduler (the tests check the choice). */
static ERL_NIF_TERM steps_dirty(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
    conn_t *c;
    if (!enif_get_resource(env, argv[0], conn_type, (void **)&c)) return enif_make_badarg(env);
    return enif_make_atom(env, dirty(c) ? "true" : "false");
}

static ERL_NIF_TERM handshake_step(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
    conn_t *c;
    ErlNifBinary in;
    if (!enif_get_resource(env, argv[0], conn_type, (void **)&c)
        || !enif_inspect_binary(env, argv[1], &in))
        return enif_make_badarg(env);
    if (!c->ssl)
        return enif_make_tuple3(env, am_error, enif_make_string(env, "handshake over", ERL_NIF_LATIN1),
                                bin(env, NULL, 0));
    BIO *rbio = SSL_get_rbio(c->ssl), *wbio = SSL_get_wbio(c->ssl);
    if (in.size > 0 && BIO_write(rbio, in.data, (int)in.size) != (int)in.size)
        return enif_make_badarg(env);
    ERR_clear_error();
    int r;
    TIMED(c->answered ? T_LATER : T_ANSWER, r = SSL_do_handshake(c->ssl));
    if (r == 1) {
        ERL_NIF_TERM out, info, rest;
        TIMED(T_INFO, out = bio_out(env, wbio); info = done_info(env, c); rest = bio_out(env, rbio));
        /* What the connection costs from now on is the Erlang side's. */
        TIMED(T_FREE, release_ssl(c);
              OPENSSL_cleanse(c->client_secret, SECRET_MAX);
              OPENSSL_cleanse(c->server_secret, SECRET_MAX);
              ended());
#ifdef THRONG_TLS_TIMING
        __atomic_add_fetch(&timing_done, 1, __ATOMIC_RELAXED);
#endif
        return enif_make_tuple4(env, am_done, out, info, rest);
    }
    int e = SSL_get_error(c->ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        if (BIO_ctrl_pending(wbio) > 0) c->answered = 1;
        return enif_make_tuple2(env, am_more, bio_out(env, wbio));
    }
    /* The alert OpenSSL wrote, if any, goes to the peer. */
    ERL_NIF_TERM out = bio_out(env, wbio);
    ERL_NIF_TERM err = error_term(env, "handshake");
    const ERL_NIF_TERM *parts;
    int arity;
    enif_get_tuple(env, err, &arity, &parts);
    release_ssl(c);
    ended();
    return enif_make_tuple3(env, am_error, parts[1], out);
}

/* timing(): the sums since the last call, in microseconds, and how many
 * handshakes ended; `disabled' in a normal build. */
static ERL_NIF_TERM timing(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
#ifdef THRONG_TLS_TIMING
    static const char *names[T_N] = {"answer_us", "later_steps_us", "info_us", "free_us"};
    ERL_NIF_TERM keys[T_N + 1], vals[T_N + 1], map;
    for (int i = 0; i < T_N; i++) {
        keys[i] = enif_make_atom(env, names[i]);
        vals[i] = enif_make_double(env, __atomic_exchange_n(&timing_ns[i], 0, __ATOMIC_RELAXED) / 1e3);
    }
    keys[T_N] = enif_make_atom(env, "handshakes");
    vals[T_N] = enif_make_ulong(env, __atomic_exchange_n(&timing_done, 0, __ATOMIC_RELAXED));
    enif_make_map_from_arrays(env, keys, vals, T_N + 1, &map);
    return map;
#else
    return enif_make_atom(env, "disabled");
#endif
}

/* Returns the C heap's free pages to the OS (bin/throng gc, benchmarks). */
static ERL_NIF_TERM trim(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
    malloc_trim(0);
    return am_ok;
}

static int init(ErlNifEnv *env, void **priv) {
    ErlNifResourceFlags f = ERL_NIF_RT_CREATE | ERL_NIF_RT_TAKEOVER;
    ctx_type = enif_open_resource_type(env, NULL, "throng_tls_ctx", ctx_dtor, f, NULL);
    conn_type = enif_open_resource_type(env, NULL, "throng_tls_conn", conn_dtor, f, NULL);
    if (!ctx_type || !conn_type) return 1;
    if (conn_index < 0) conn_index = SSL_get_ex_new_index(0, "throng", NULL, NULL, NULL);
    if (!*priv) {
        unsigned char *keys = enif_alloc(TICKET_KEYS_LEN);
        if (!keys || RAND_bytes(keys, TICKET_KEYS_LEN) != 1) return 1;
        *priv = keys;
    }
#define A(x) am_##x = enif_make_atom(env, #x)
    A(ok); A(error); A(more); A(done); A(version); A(cipher); A(tls12); A(tls13);
    A(client_secret); A(server_secret); A(master_secret); A(client_random); A(server_random);
    A(write_records); A(exporter); A(server_end_point); A(tls_unique); A(alpn); A(sni);
    A(undefined);
#undef A
    return 0;
}

static int load(ErlNifEnv *env, void **priv, ERL_NIF_TERM info) {
    *priv = NULL;
    return init(env, priv);
}

/* The upgraded library keeps the ticket keys: tickets issued before stay
 * valid. */
static int upgrade(ErlNifEnv *env, void **priv, void **old, ERL_NIF_TERM info) {
    *priv = *old;
    return init(env, priv);
}

static ErlNifFunc funcs[] = {
    {"new_ctx", 3, new_ctx, ERL_NIF_DIRTY_JOB_IO_BOUND},
    {"conn_new", 1, conn_new, 0},
    {"handshake", 2, handshake, 0},
    {"trim", 0, trim, ERL_NIF_DIRTY_JOB_IO_BOUND},
    {"timing", 0, timing, 0},
    {"steps_dirty", 1, steps_dirty, 0},
};

ERL_NIF_INIT(throng_tls_nif, funcs, load, NULL, upgrade, NULL)
