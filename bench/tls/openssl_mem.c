/* What OpenSSL keeps per established server-side TLS connection, by
 * allocation site (bench/tls/openssl_mem.sh builds and runs this).
 *
 * N server connections are made in fast_tls's pattern (an SSL object with
 * two memory BIOs, SSL_MODE_RELEASE_BUFFERS, no session cache), each
 * handshaken with an in-process client and given a few application records
 * both ways, as a login would; then the bytes the server side still holds
 * are summed per OpenSSL source line. Allocations are attributed to the
 * side (server or client) that made them.
 *
 *   openssl_mem N PEM TLS13(0|1) [sites]
 */
#include <openssl/ssl.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct hdr { size_t n; int side; int line; const char *file; struct hdr *next, *prev; } hdr;
static hdr head = {0, 0, 0, 0, &head, &head};
static int side;                /* 1: the server side is running */
static long live[2];

static void *m(size_t n, const char *file, int line) {
    hdr *h = malloc(sizeof(hdr) + n);
    if (!h) return NULL;
    h->n = n; h->side = side; h->line = line; h->file = file;
    h->next = head.next; h->prev = &head; head.next->prev = h; head.next = h;
    live[side] += n;
    return h + 1;
}
static void fr(void *p, const char *file, int line) {
    if (!p) return;
    hdr *h = (hdr *)p - 1;
    live[h->side] -= h->n;
    h->prev->next = h->next; h->next->prev = h->prev;
    free(h);
}
static void *rl(void *p, size_t n, const char *file, int line) {
    if (!p) return m(n, file, line);
    if (n == 0) { fr(p, file, line); return NULL; }
    void *q = m(n, file, line);
    hdr *h = (hdr *)p - 1;
    if (q) memcpy(q, p, h->n < n ? h->n : n);
    fr(p, file, line);
    return q;
}

typedef struct { SSL *s, *c; BIO *sr, *sw, *cr, *cw; } pair;

static void pump(pair *p) {
    char buf[65536], app[4096];
    int moved, n;
    do {
        moved = 0;
        side = 1; while ((n = BIO_read(p->sw, buf, sizeof buf)) > 0) { side = 0; BIO_write(p->cr, buf, n); moved = 1; side = 1; }
        side = 0; while ((n = BIO_read(p->cw, buf, sizeof buf)) > 0) { side = 1; BIO_write(p->sr, buf, n); moved = 1; side = 0; }
        side = 1; SSL_do_handshake(p->s); while (SSL_read(p->s, app, sizeof app) > 0) ;
        side = 0; SSL_do_handshake(p->c); while (SSL_read(p->c, app, sizeof app) > 0) ;
    } while (moved);
}

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: %s N PEM TLS13(0|1) [sites]\n", argv[0]); return 2; }
    int n = atoi(argv[1]), tls13 = atoi(argv[3]);
    const char *pem = argv[2];
    CRYPTO_set_mem_functions(m, rl, fr);
    SSL_CTX *sc = SSL_CTX_new(TLS_server_method()), *cc = SSL_CTX_new(TLS_client_method());
    if (SSL_CTX_use_certificate_chain_file(sc, pem) != 1
        || SSL_CTX_use_PrivateKey_file(sc, pem, SSL_FILETYPE_PEM) != 1) {
        fprintf(stderr, "cannot load %s\n", pem); return 1;
    }
    SSL_CTX_set_mode(sc, SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_mode(cc, SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_session_cache_mode(sc, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_min_proto_version(sc, TLS1_2_VERSION);
    if (!tls13) SSL_CTX_set_max_proto_version(sc, TLS1_2_VERSION);
    pair *ps = calloc(n, sizeof(pair));
    long base = live[1];
    char msg[600];
    memset(msg, 'x', sizeof msg);
    for (int i = 0; i < n; i++) {
        pair *p = &ps[i];
        side = 1; p->s = SSL_new(sc); p->sr = BIO_new(BIO_s_mem()); p->sw = BIO_new(BIO_s_mem());
        SSL_set_bio(p->s, p->sr, p->sw); SSL_set_accept_state(p->s);
        side = 0; p->c = SSL_new(cc); p->cr = BIO_new(BIO_s_mem()); p->cw = BIO_new(BIO_s_mem());
        SSL_set_bio(p->c, p->cr, p->cw); SSL_set_connect_state(p->c);
        pump(p);
        for (int k = 0; k < 4; k++) {
            side = 0; SSL_write(p->c, msg, sizeof msg);
            side = 1; SSL_write(p->s, msg, sizeof msg);
            pump(p);
        }
    }
    long bio = 0;
    for (int i = 0; i < n; i++) {
        BUF_MEM *a, *b;
        BIO_get_mem_ptr(ps[i].sr, &a); BIO_get_mem_ptr(ps[i].sw, &b);
        bio += a->max + b->max;
    }
    printf("%s, %s, %s: OpenSSL holds %ld bytes per idle server connection "
           "(of which memory BIO buffers %ld)\n", pem, SSL_get_version(ps[0].s),
           SSL_get_cipher(ps[0].s), (live[1] - base) / n, bio / n);
    if (argc > 4) {
        /* by site: bytes per connection, allocations per connection */
        for (hdr *h = head.next; h != &head; h = h->next)
            if (h->side == 1) printf("SITE %s:%d %zu\n", h->file ? h->file : "?", h->line, h->n);
    }
    return 0;
}
