// http_guard.h — checks `octet serve` makes of a connection before the API sees it (owns: the
// deadline by which a client must have sent a whole request, kept by a watchdog thread that
// answers 408 and closes the socket; the Host allow list that stops DNS rebinding; not:
// routing or MHD's own limits, which http.c sets). Thread-safe.
#ifndef OCTET_HTTP_GUARD_H
#define OCTET_HTTP_GUARD_H

#include <stdbool.h>

struct guard;
struct guard_conn;  // one per TCP connection

// Starts the watchdog. A request not received whole within timeout_s of its start gets a 408.
// Returns 0 or <0 with err_msg().
int guard_create(struct guard **out, int timeout_s);
void guard_destroy(struct guard *g);
// A connection was accepted (fd is its socket): its first request's deadline starts now.
// NULL if out of memory (the connection then has no deadline).
struct guard_conn *guard_open(struct guard *g, int fd);
// The connection is closed (before its fd is): the watchdog forgets it.
void guard_close(struct guard *g, struct guard_conn *c);
// Its request has been read whole (disarm) / its next request starts now (arm).
void guard_disarm(struct guard *g, struct guard_conn *c);
void guard_arm(struct guard *g, struct guard_conn *c);
// Requests answered 408 by the watchdog so far.
long long guard_timeouts(struct guard *g);

// Which Host header values the server answers (DNS rebinding: a page on a name the attacker
// controls must not reach a loopback server). Always allowed: IP literals, "localhost" and
// *.localhost, and bind_host unless it is a wildcard address; allowed_hosts adds a comma
// separated list of names, or "*" for any. A request without Host (HTTP/1.0) is allowed.
struct host_allow {
    bool any;
    char names[1024];   // ",name1,name2," lowercased
};
// Returns 0 or <0 with err_msg() (an empty entry or a list too long).
int host_allow_init(struct host_allow *h, const char *allowed_hosts, const char *bind_host);
bool host_allowed(const struct host_allow *h, const char *host_header);
// Whether host (a --host value) resolves only to loopback addresses.
bool host_is_loopback(const char *host);

#endif
