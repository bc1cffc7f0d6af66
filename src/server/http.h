// http.h — the HTTP front of `octet serve` on libmicrohttpd (owns: the listening
// daemon, routing, API-key auth, body limits, SSE streaming, the set of generations in
// flight and graceful stop; not: JSON shapes (openai.c), metrics text (metrics.c) or the
// engine, which it only reaches through engine.h). Thread model: one thread per
// connection; a generation blocks its connection's thread in req_next, polling the socket
// so that a client that goes away aborts its request within ~50 ms.
#ifndef OCTET_HTTP_H
#define OCTET_HTTP_H

#include <stddef.h>

#include "../engine/engine.h"
#include "openai.h"

struct server_options {
    const char *host;           // address to bind (default 127.0.0.1)
    int port;                   // 0 = pick a free port (see server_port)
    const char *api_key;        // NULL = no auth; else /v1/* needs "Authorization: Bearer KEY" (never "")
    const char *allowed_hosts;  // Host values answered besides the defaults (see http_guard.h); "*" = any
    size_t max_body_bytes;      // larger request bodies get 413
    int shutdown_grace_ms;      // how long server_stop lets in-flight requests finish
    int timeout_keep_alive_s;   // a connection silent this long while idle or sending a request is closed
    int http_timeout_s;         // a request (headers and body) not received whole in this time gets 408
    int max_connections;        // open connections at most (more wait in the listen backlog)
    int max_connections_per_ip; // open connections from one client address at most (more are refused)
};

// While a generation runs, the connection's timeout becomes this: how long a client may
// accept no bytes at all before it is dropped (its request then aborted).
#define HTTP_STALL_TIMEOUT_S 600

void server_options_default(struct server_options *o);

struct server;

// Starts listening. c is copied (its strings and tokenizer must outlive the server).
// Returns 0, or <0 with err_msg() (address in use, bad host, empty API key, bad allowed hosts).
int server_start(struct server **out, struct engine *e, const struct oai_context *c, const struct server_options *o);
// The bound port (the chosen one when options.port was 0).
int server_port(const struct server *s);
// Stops accepting connections, answers new requests on open connections with 503, lets
// generations in flight finish for up to shutdown_grace_ms, aborts the rest (their
// streams end with finish_reason "abort"), closes every connection and frees the server.
// The engine is left running; destroy it afterwards.
void server_stop(struct server *s);

#endif
