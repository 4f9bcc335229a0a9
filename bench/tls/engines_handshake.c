/* The server side of TLS handshakes in memory, with OpenSSL 3.0 or with
 * GnuTLS (both Debian's), against one OpenSSL client: what each engine
 * costs the server per handshake, in one process, by one method (the
 * rustls harness's, bench/tls/rustls_handshake): the flights go through
 * buffers; only the server's calls are timed (thread CPU time), from
 * creating its connection to freeing it, including what Throng's NIF takes
 * from a finished handshake (the application traffic secrets, the
 * tls-exporter value).
 *
 *   engines_handshake PEM N full|resumed openssl|gnutls [tls12]
 *
 * Both servers are configured as Throng's NIF configures OpenSSL: TLS 1.2
 * and 1.3 only, AEAD suites with forward secrecy, stateless tickets (one
 * per TLS 1.3 handshake), no session cache. The client offers what an OTP
 * ssl or OpenSSL client offers by default (X25519 first). With "tls12"
 * the client offers TLS 1.2 only.
 * Build: cc -O2 -o engines_handshake engines_handshake.c -lssl -lcrypto -lgnutls
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <errno.h>
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <gnutls/gnutls.h>
#include <gnutls/abstract.h>

static double thread_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void die(const char *what) {
    fprintf(stderr, "engines_handshake: %s\n", what);
    ERR_print_errors_fp(stderr);
    exit(1);
}

/* ---- buffers between client and server ---- */
typedef struct { unsigned char *p; size_t len, cap, off; } buf_t;
static void buf_put(buf_t *b, const void *d, size_t n) {
    if (b->len + n > b->cap) { b->cap = (b->len + n) * 2; b->p = realloc(b->p, b->cap); }
    memcpy(b->p + b->len, d, n);
    b->len += n;
}
static void buf_reset(buf_t *b) { b->len = 0; b->off = 0; }

/* ---- the OpenSSL client ---- */
static SSL_CTX *client_ctx;
static SSL_SESSION *saved;

static int new_session(SSL *ssl, SSL_SESSION *s) {
    if (saved) SSL_SESSION_free(saved);
    saved = s;
    return 1;
}

static void client_init(int tls12) {
    client_ctx = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_min_proto_version(client_ctx, TLS1_2_VERSION);
    if (tls12) SSL_CTX_set_max_proto_version(client_ctx, TLS1_2_VERSION);
    SSL_CTX_set_verify(client_ctx, SSL_VERIFY_NONE, NULL);
    SSL_CTX_set_session_cache_mode(client_ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(client_ctx, new_session);
}

/* ---- the OpenSSL server, as apps/throng/c_src/throng_tls_nif.c ---- */
static SSL_CTX *ossl_ctx;
/* AES128=1: the servers prefer TLS_AES_128_GCM_SHA256 (its key schedule
 * hashes with SHA-256) to TLS_AES_256_GCM_SHA384 (SHA-384). */
static int aes128_first;
static unsigned char secret_sink[2][64];

/* As the NIF's hexval(): one hex digit, or -1. */
static int hexval(char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

static void keylog(const SSL *ssl, const char *line) {
    /* the NIF parses the two application traffic secrets out of the hex,
     * as here */
    int which = strncmp(line, "CLIENT_TRAFFIC_SECRET_0 ", 24) == 0 ? 0
              : strncmp(line, "SERVER_TRAFFIC_SECRET_0 ", 24) == 0 ? 1 : -1;
    if (which < 0) return;
    const char *hex = strchr(line + 24, ' ');
    if (!hex) return;
    hex++;
    for (size_t i = 0; i < 64; i++) {
        int hi = hexval(hex[2 * i]), lo = hi < 0 ? -1 : hexval(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) return;
        secret_sink[which][i] = (unsigned char)(hi << 4 | lo);
    }
}

/* As the NIF's SNI callback: the name is taken (and acknowledged, which
 * a client needs to offer the session again under that name). */
static int servername_cb(SSL *ssl, int *alert, void *arg) { return SSL_TLSEXT_ERR_OK; }

static void ossl_init(const char *pem) {
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_cipher_list(ctx, "ECDHE+AESGCM:ECDHE+CHACHA20");
    SSL_CTX_set_ciphersuites(ctx, aes128_first
        ? "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"
        : "TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256");
    SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_session_id_context(ctx, (const unsigned char *)"throng", 6);
    SSL_CTX_set_num_tickets(ctx, 1);
    SSL_CTX_set_keylog_callback(ctx, keylog);
    SSL_CTX_set_tlsext_servername_callback(ctx, servername_cb);
    if (SSL_CTX_use_certificate_chain_file(ctx, pem) != 1
        || SSL_CTX_use_PrivateKey_file(ctx, pem, SSL_FILETYPE_PEM) != 1)
        die("server certificate");
    ossl_ctx = ctx;
}

/* ---- the GnuTLS server ---- */
static gnutls_certificate_credentials_t gt_creds;
static gnutls_priority_t gt_prio;
static gnutls_datum_t gt_ticket_key;

typedef struct { buf_t *in, *out; } gt_io_t;

static ssize_t gt_push(gnutls_transport_ptr_t p, const void *d, size_t n) {
    buf_put(((gt_io_t *)p)->out, d, n);
    return (ssize_t)n;
}
static ssize_t gt_pull(gnutls_transport_ptr_t p, void *d, size_t n) {
    buf_t *in = ((gt_io_t *)p)->in;
    size_t avail = in->len - in->off;
    if (avail == 0) { errno = EAGAIN; return -1; }
    if (n > avail) n = avail;
    memcpy(d, in->p + in->off, n);
    in->off += n;
    return (ssize_t)n;
}

static int gt_keylog(gnutls_session_t s, const char *label, const gnutls_datum_t *secret) {
    int which = strcmp(label, "CLIENT_TRAFFIC_SECRET_0") == 0 ? 0
              : strcmp(label, "SERVER_TRAFFIC_SECRET_0") == 0 ? 1 : -1;
    if (which >= 0 && secret->size <= 64) memcpy(secret_sink[which], secret->data, secret->size);
    return 0;
}

static void gt_init(const char *pem) {
    if (gnutls_global_init() < 0) die("gnutls_global_init");
    gnutls_certificate_allocate_credentials(&gt_creds);
    if (gnutls_certificate_set_x509_key_file(gt_creds, pem, pem, GNUTLS_X509_FMT_PEM) < 0)
        die("gnutls certificate");
    const char *err;
    if (gnutls_priority_init(&gt_prio,
            aes128_first
            ? "NONE:+VERS-TLS1.3:+VERS-TLS1.2:+AES-128-GCM:+AES-256-GCM:+CHACHA20-POLY1305:+AEAD:"
              "+ECDHE-ECDSA:+ECDHE-RSA:+SIGN-ALL:+GROUP-X25519:+GROUP-SECP256R1:+GROUP-SECP384R1:"
              "+COMP-NULL:%SERVER_PRECEDENCE"
            : "NONE:+VERS-TLS1.3:+VERS-TLS1.2:+AES-256-GCM:+CHACHA20-POLY1305:+AES-128-GCM:+AEAD:"
            "+ECDHE-ECDSA:+ECDHE-RSA:+SIGN-ALL:+GROUP-X25519:+GROUP-SECP256R1:+GROUP-SECP384R1:"
            "+COMP-NULL:%SERVER_PRECEDENCE", &err) < 0)
        die("gnutls priority");
    gnutls_session_ticket_key_generate(&gt_ticket_key);
}

int main(int argc, char **argv) {
    if (argc < 5 || (strcmp(argv[3], "full") && strcmp(argv[3], "resumed"))
        || (strcmp(argv[4], "openssl") && strcmp(argv[4], "gnutls"))) {
        fprintf(stderr, "usage: engines_handshake PEM N full|resumed openssl|gnutls [tls12]\n");
        return 2;
    }
    const char *pem = argv[1];
    long n = atol(argv[2]);
    int resumed = strcmp(argv[3], "resumed") == 0, gnutls = strcmp(argv[4], "gnutls") == 0;
    int tls12 = argc > 5 && strcmp(argv[5], "tls12") == 0;
    aes128_first = getenv("AES128") && strcmp(getenv("AES128"), "1") == 0;
    client_init(tls12);
    if (gnutls) gt_init(pem); else ossl_init(pem);
    buf_t c2s = {0}, s2c = {0};
    double server_us = 0;
    long reused = 0, done = 0;
    unsigned char exporter[32];
    for (long i = 0; i < n; i++) {
        SSL *c = SSL_new(client_ctx);
        BIO *crb = BIO_new(BIO_s_mem()), *cwb = BIO_new(BIO_s_mem());
        SSL_set_bio(c, crb, cwb);
        SSL_set_connect_state(c);
        SSL_set_tlsext_host_name(c, "localhost");
        if (resumed && saved && !SSL_set_session(c, saved)) die("SSL_set_session");
        SSL *s = NULL;
        gnutls_session_t g = NULL;
        gt_io_t gio = {&c2s, &s2c};
        double t = thread_us();
        if (gnutls) {
            /* one TLS 1.3 ticket, as the NIF (GnuTLS sends two by itself) */
            gnutls_init(&g, GNUTLS_SERVER | GNUTLS_NONBLOCK | GNUTLS_NO_AUTO_SEND_TICKET);
            gnutls_priority_set(g, gt_prio);
            gnutls_credentials_set(g, GNUTLS_CRD_CERTIFICATE, gt_creds);
            gnutls_session_ticket_enable_server(g, &gt_ticket_key);
            gnutls_session_set_keylog_function(g, gt_keylog);
            gnutls_transport_set_ptr(g, &gio);
            gnutls_transport_set_push_function(g, gt_push);
            gnutls_transport_set_pull_function(g, gt_pull);
        } else {
            s = SSL_new(ossl_ctx);
            SSL_set_bio(s, BIO_new(BIO_s_mem()), BIO_new(BIO_s_mem()));
            SSL_set_accept_state(s);
        }
        server_us += thread_us() - t;
        int server_done = 0;
        for (int round = 0; round < 10; round++) {
            /* the client's flight */
            SSL_do_handshake(c);
            unsigned char tmp[16384];
            int k;
            buf_reset(&c2s);
            while ((k = BIO_read(cwb, tmp, sizeof tmp)) > 0) buf_put(&c2s, tmp, (size_t)k);
            if (c2s.len == 0 && server_done) break;
            buf_reset(&s2c);
            t = thread_us();
            if (gnutls) {
                if (!server_done) {
                    int r = gnutls_handshake(g);
                    if (r == 0) {
                        server_done = 1;
                        if (gnutls_protocol_get_version(g) == GNUTLS_TLS1_3
                            && gnutls_session_ticket_send(g, 1, 0) < 0)
                            die("gnutls ticket");
                        if (gnutls_prf_rfc5705(g, 24, "EXPORTER-Channel-Binding", 0, NULL,
                                               sizeof exporter, (char *)exporter) < 0)
                            die("gnutls exporter");
                    } else if (r != GNUTLS_E_AGAIN && r != GNUTLS_E_INTERRUPTED) {
                        fprintf(stderr, "gnutls_handshake: %s\n", gnutls_strerror(r));
                        exit(1);
                    }
                }
            } else if (!server_done) {
                BIO_write(SSL_get_rbio(s), c2s.p, (int)c2s.len);
                int r = SSL_do_handshake(s);
                if (r == 1) {
                    server_done = 1;
                    if (SSL_export_keying_material(s, exporter, sizeof exporter,
                                                   "EXPORTER-Channel-Binding", 24, NULL, 0, 0) != 1)
                        die("openssl exporter");
                } else if (SSL_get_error(s, r) != SSL_ERROR_WANT_READ) {
                    die("SSL_do_handshake (server)");
                }
                BIO *w = SSL_get_wbio(s);
                while ((k = BIO_read(w, tmp, sizeof tmp)) > 0) buf_put(&s2c, tmp, (size_t)k);
            }
            server_us += thread_us() - t;
            if (s2c.len) BIO_write(crb, s2c.p, (int)s2c.len);
            if (server_done && SSL_is_init_finished(c)) {
                /* the client reads its ticket (TLS 1.3) */
                SSL_do_handshake(c);
                char none[1];
                SSL_read(c, none, 0);
                SSL_read(c, none, 1);
                break;
            }
        }
        if (!server_done) die("the handshake did not finish");
        done++;
        t = thread_us();
        if (gnutls) {
            if (gnutls_session_is_resumed(g)) reused++;
            gnutls_deinit(g);
        } else {
            if (SSL_session_reused(s)) reused++;
            SSL_free(s);
        }
        server_us += thread_us() - t;
        if (!resumed) { SSL_SESSION_free(saved); saved = NULL; }
        /* a client SSL freed without a shutdown marks its session not resumable */
        SSL_set_shutdown(c, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
        SSL_free(c);
    }
    printf("%s %s %s%s: server CPU %.1f us per handshake (%ld of %ld resumed)\n",
           gnutls ? "GnuTLS " GNUTLS_VERSION : OpenSSL_version(OPENSSL_VERSION), pem, argv[3],
           tls12 ? " TLS 1.2" : "", server_us / (double)done, reused, done);
    return 0;
}
