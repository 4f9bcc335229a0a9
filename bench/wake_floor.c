/* Both halves of bench/wake_floor.sh outside Erlang: what the same
 * one-byte packets cost a process that is an epoll loop instead of a VM of
 * Erlang processes.
 *
 *   wake_floor server PORT
 *
 * Accepts connections and reads them in an epoll loop, doing nothing with
 * the bytes (bench/wake_floor.erl's server without the VM); prints
 * "listening".
 *
 *   wake_floor clients HOST PORT N RATE SECONDS [TICK_MS]
 *
 * Opens N connections to HOST:PORT (source addresses 127.0.0.2 and up,
 * 10,000 each, as wake_floor.erl), prints "connected N", then sends one
 * byte on them, RATE a second over all of them, each connection at
 * exponential gaps (mean N / RATE s), for SECONDS; prints "sent K".
 * TICK_MS 0 (the default) wakes for every send at its time (1 ms
 * resolution); TICK_MS T wakes only on multiples of T ms and sends every
 * byte then due: the same packets, fewer wake-ups, each send up to T ms
 * late. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct due { int64_t at; int fd; };

static struct due *heap;
static int heap_n;

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void heap_push(struct due d)
{
    int i = heap_n++;
    while (i > 0 && heap[(i - 1) / 2].at > d.at) {
        heap[i] = heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    heap[i] = d;
}

/* put d at slot i or below it, moving smaller children up */
static void sift_down(int i, struct due d)
{
    for (;;) {
        int c = 2 * i + 1;
        if (c >= heap_n) break;
        if (c + 1 < heap_n && heap[c + 1].at < heap[c].at) c++;
        if (heap[c].at >= d.at) break;
        heap[i] = heap[c];
        i = c;
    }
    heap[i] = d;
}

static struct due heap_pop(void)
{
    struct due top = heap[0], last = heap[--heap_n];
    if (heap_n > 0) sift_down(0, last);
    return top;
}

static int64_t gap_ms(double mean_ms)
{
    double u = (double)random() / ((double)RAND_MAX + 1.0);
    return (int64_t)llround(-mean_ms * log(1.0 - u));
}

static int serve(int port)
{
    int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port),
                             .sin_addr.s_addr = htonl(INADDR_ANY) };
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(l, (struct sockaddr *)&a, sizeof a) < 0 || listen(l, 4096) < 0) {
        fprintf(stderr, "listen on %d: %s\n", port, strerror(errno));
        return 1;
    }
    int ep = epoll_create1(0);
    struct epoll_event ev = { .events = EPOLLIN, .data.fd = l }, evs[256];
    epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev);
    printf("listening\n");
    fflush(stdout);
    char buf[4096];
    for (;;) {
        int k = epoll_wait(ep, evs, 256, -1);
        for (int i = 0; i < k; i++) {
            int fd = evs[i].data.fd;
            if (fd == l) {
                int c = accept(l, NULL, NULL);
                if (c < 0) continue;
                setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                ev.data.fd = c;
                epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev);
            } else if (read(fd, buf, sizeof buf) <= 0) {
                close(fd);
            }
        }
    }
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "server") == 0) return serve(atoi(argv[2]));
    if (argc < 7 || strcmp(argv[1], "clients") != 0) {
        fprintf(stderr, "usage: %s server PORT | clients HOST PORT N RATE SECONDS [TICK_MS]\n",
                argv[0]);
        return 2;
    }
    argv++;
    argc--;
    struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons(atoi(argv[2])) };
    if (inet_pton(AF_INET, argv[1], &dst.sin_addr) != 1) {
        fprintf(stderr, "bad host %s\n", argv[1]);
        return 2;
    }
    int n = atoi(argv[3]);
    double rate = atof(argv[4]);
    int64_t secs = atoll(argv[5]);
    int64_t tick = argc > 6 ? atoll(argv[6]) : 0;
    heap = calloc((size_t)n, sizeof *heap);
    srandom((unsigned)getpid());
    double mean_ms = 1000.0 * n / rate;
    for (int i = 0; i < n; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
        struct sockaddr_in src = { .sin_family = AF_INET };
        src.sin_addr.s_addr = htonl(0x7f000002u + (uint32_t)(i / 10000));
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (fd < 0 || bind(fd, (struct sockaddr *)&src, sizeof src) < 0 ||
            connect(fd, (struct sockaddr *)&dst, sizeof dst) < 0) {
            fprintf(stderr, "connection %d: %s\n", i, strerror(errno));
            return 1;
        }
        heap[heap_n++] = (struct due){ 0, fd };     /* its time is set below */
    }
    printf("connected %d\n", n);
    fflush(stdout);
    int64_t start = now_ms(), deadline = start + secs * 1000, sent = 0;
    /* first sends: one gap after the start, as wake_floor.erl */
    for (int i = 0; i < n; i++) heap[i].at = start + gap_ms(mean_ms);
    for (int i = n / 2 - 1; i >= 0; i--) sift_down(i, heap[i]);   /* heapify */
    int ep = epoll_create1(0);
    struct epoll_event ev;
    while (heap_n > 0 && heap[0].at <= deadline) {
        int64_t t = now_ms();
        while (heap_n > 0 && heap[0].at <= t) {
            struct due d = heap_pop();
            if (send(d.fd, " ", 1, 0) != 1) {
                fprintf(stderr, "send: %s\n", strerror(errno));
                return 1;
            }
            sent++;
            d.at = t + gap_ms(mean_ms);
            if (d.at <= deadline) heap_push(d);
        }
        if (heap_n == 0 || heap[0].at > deadline) break;
        int64_t wake = heap[0].at;
        if (tick > 0) wake = ((wake + tick - 1) / tick) * tick;
        int64_t wait = wake - now_ms();
        if (wait > 0) epoll_wait(ep, &ev, 1, (int)wait);
    }
    printf("sent %lld\n", (long long)sent);
    return 0;
}
