// http_guard.c — the request deadline watchdog and the Host allow list (see http_guard.h).
// The watchdog sleeps on a condition variable until the earliest armed deadline; a connection
// past its deadline gets a 408 JSON answer written to its socket and the socket shut down,
// which wakes libmicrohttpd's thread for that connection and makes it close. guard_close runs
// before the socket is closed and takes the same mutex, so a shut-down fd is always still ours.
#include "http_guard.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "../base/check.h"

struct guard_conn {
    struct guard_conn *prev, *next;
    int fd;
    double deadline;    // CLOCK_MONOTONIC seconds; 0 = none
};

struct guard {
    pthread_mutex_t mu;
    pthread_cond_t cv;  // on CLOCK_MONOTONIC; signalled when a deadline is armed or on stop
    pthread_t thread;
    struct guard_conn *conns;
    int timeout_s;
    bool stop;
    long long n_timeouts;
};

static double mono_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// Answers 408 on c's socket and shuts it down. Under g->mu.
static void expire(struct guard *g, struct guard_conn *c) {
    char body[256], msg[512];
    int nb = snprintf(body, sizeof body,
                      "{\"error\":{\"message\":\"the request was not received whole within %d s (--http-timeout)\","
                      "\"type\":\"invalid_request_error\",\"param\":null,\"code\":\"request_timeout\"}}",
                      g->timeout_s);
    int n = snprintf(msg, sizeof msg,
                     "HTTP/1.1 408 Request Timeout\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                     "Connection: close\r\n\r\n%s", nb, body);
    (void)!send(c->fd, msg, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
    shutdown(c->fd, SHUT_RDWR);
    g->n_timeouts++;
}

static void *watchdog(void *arg) {
    struct guard *g = arg;
    pthread_mutex_lock(&g->mu);
    while (!g->stop) {
        double now = mono_s(), next = 0;
        for (struct guard_conn *c = g->conns; c; c = c->next) {
            if (c->deadline <= 0) continue;
            if (c->deadline <= now) { expire(g, c); c->deadline = 0; }
            else if (next == 0 || c->deadline < next) next = c->deadline;
        }
        if (next == 0) { pthread_cond_wait(&g->cv, &g->mu); continue; }
        struct timespec ts = {.tv_sec = (time_t)next, .tv_nsec = (long)((next - (double)(time_t)next) * 1e9)};
        pthread_cond_timedwait(&g->cv, &g->mu, &ts);
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

int guard_create(struct guard **out, int timeout_s) {
    *out = NULL;
    struct guard *g = calloc(1, sizeof *g);
    if (!g) return err_set(OCT_ENOMEM, "out of memory");
    g->timeout_s = timeout_s;
    pthread_mutex_init(&g->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&g->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&g->thread, NULL, watchdog, g)) {
        pthread_cond_destroy(&g->cv);
        pthread_mutex_destroy(&g->mu);
        free(g);
        return err_set(OCT_EIO, "cannot start the connection watchdog thread");
    }
    *out = g;
    return OCT_OK;
}

void guard_destroy(struct guard *g) {
    if (!g) return;
    pthread_mutex_lock(&g->mu);
    g->stop = true;
    pthread_cond_signal(&g->cv);
    pthread_mutex_unlock(&g->mu);
    pthread_join(g->thread, NULL);
    while (g->conns) {  // (MHD reports every close before the server frees the guard)
        struct guard_conn *c = g->conns;
        g->conns = c->next;
        free(c);
    }
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

struct guard_conn *guard_open(struct guard *g, int fd) {
    struct guard_conn *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->fd = fd;
    pthread_mutex_lock(&g->mu);
    c->next = g->conns;
    if (g->conns) g->conns->prev = c;
    g->conns = c;
    c->deadline = mono_s() + g->timeout_s;
    pthread_cond_signal(&g->cv);
    pthread_mutex_unlock(&g->mu);
    return c;
}

void guard_close(struct guard *g, struct guard_conn *c) {
    if (!c) return;
    pthread_mutex_lock(&g->mu);
    if (c->prev) c->prev->next = c->next;
    else g->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    pthread_mutex_unlock(&g->mu);
    free(c);
}

void guard_disarm(struct guard *g, struct guard_conn *c) {
    if (!c) return;
    pthread_mutex_lock(&g->mu);
    c->deadline = 0;
    pthread_mutex_unlock(&g->mu);
}

void guard_arm(struct guard *g, struct guard_conn *c) {
    if (!c) return;
    pthread_mutex_lock(&g->mu);
    c->deadline = mono_s() + g->timeout_s;
    pthread_cond_signal(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

long long guard_timeouts(struct guard *g) {
    pthread_mutex_lock(&g->mu);
    long long n = g->n_timeouts;
    pthread_mutex_unlock(&g->mu);
    return n;
}

// ---- Host allow list ----------------------------------------------------------------------

// Copies the host part of a Host value (no port, no brackets, no trailing dot), lowercased.
// Returns false if it does not fit.
static bool host_part(const char *v, char *out, size_t cap) {
    const char *b = v, *e;
    if (*v == '[') {
        b = v + 1;
        if (!(e = strchr(b, ']'))) return false;
    } else {
        e = strchr(v, ':');
        if (!e) e = v + strlen(v);
        if (strchr(e + (*e != 0), ':')) e = v + strlen(v);  // two colons: not host:port
    }
    size_t n = (size_t)(e - b);
    while (n > 0 && b[n - 1] == '.') n--;
    if (n + 1 > cap) return false;
    for (size_t i = 0; i < n; i++) out[i] = (char)tolower((unsigned char)b[i]);
    out[n] = 0;
    return true;
}

static bool is_ip_literal(const char *h) {
    unsigned char a[16];
    return inet_pton(AF_INET, h, a) == 1 || inet_pton(AF_INET6, h, a) == 1;
}

int host_allow_init(struct host_allow *h, const char *allowed, const char *bind_host) {
    memset(h, 0, sizeof *h);
    size_t k = 0;
    h->names[k++] = ',';
    char one[256];
    const char *p = allowed ? allowed : "";
    if (!strcmp(p, "*")) { h->any = true; return OCT_OK; }
    while (*p) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 0 || n >= sizeof one) return err_set(OCT_EINVAL, "--allowed-hosts: an empty or overlong entry");
        memcpy(one, p, n);
        one[n] = 0;
        if (!strcmp(one, "*")) return err_set(OCT_EINVAL, "--allowed-hosts: '*' must stand alone");
        char host[256];
        if (!host_part(one, host, sizeof host) || !*host ||
            k + strlen(host) + 2 > sizeof h->names)
            return err_set(OCT_EINVAL, "--allowed-hosts: bad or too many entries ('%s')", one);
        k += (size_t)sprintf(h->names + k, "%s,", host);
        p += n + (e != NULL);
    }
    char host[256];
    if (bind_host && host_part(bind_host, host, sizeof host) && *host && k + strlen(host) + 2 <= sizeof h->names)
        sprintf(h->names + k, "%s,", host);
    return OCT_OK;
}

bool host_allowed(const struct host_allow *h, const char *v) {
    if (!v || h->any) return true;
    char host[256], key[260];
    if (!host_part(v, host, sizeof host)) return false;
    if (!*host) return false;
    if (is_ip_literal(host) || !strcmp(host, "localhost")) return true;
    size_t n = strlen(host);
    if (n > 10 && !strcmp(host + n - 10, ".localhost")) return true;
    snprintf(key, sizeof key, ",%s,", host);
    return strstr(h->names, key) != NULL;
}

bool host_is_loopback(const char *host) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
    struct addrinfo *ai = NULL;
    if (getaddrinfo(host, "0", &hints, &ai)) return false;
    bool all = ai != NULL;
    for (struct addrinfo *a = ai; a; a = a->ai_next) {
        if (a->ai_family == AF_INET) {
            const struct sockaddr_in *s = (const void *)a->ai_addr;
            all &= (ntohl(s->sin_addr.s_addr) >> 24) == 127;
        } else if (a->ai_family == AF_INET6) {
            const struct sockaddr_in6 *s = (const void *)a->ai_addr;
            all &= IN6_IS_ADDR_LOOPBACK(&s->sin6_addr) ||
                   (IN6_IS_ADDR_V4MAPPED(&s->sin6_addr) && s->sin6_addr.s6_addr[12] == 127);
        } else {
            all = false;
        }
    }
    freeaddrinfo(ai);
    return all;
}
