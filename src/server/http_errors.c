// http_errors.c — libmicrohttpd answers some requests itself, before the server sees them
// (request line or headers too large: 414/431; malformed request or chunked encoding,
// missing Host, bad Content-Length: 400; unsupported HTTP version: 505), with small HTML
// pages. This file gives those answers the API's JSON error shape instead.
// How: libmicrohttpd 0.9.x builds each of them with MHD_create_response_from_buffer(...,
// MHD_RESPMEM_PERSISTENT) on one of its fixed HTML texts, called through the library's
// procedure linkage table, so the definition below (in the executable) is the one that runs.
// It recognises those texts by their wording and answers JSON; any other buffer gets exactly
// what the library's function would give (built on MHD_create_response_from_buffer_with_free_callback).
// tests/server/test_server_hardening.sh checks every case, so a libmicrohttpd that stops
// routing its errors through here fails a test rather than going unnoticed.
#include <microhttpd.h>
#include <stdlib.h>
#include <string.h>

#define ERR(msg, code) "{\"error\":{\"message\":\"" msg "\",\"type\":\"invalid_request_error\",\"param\":null," \
                       "\"code\":\"" code "\"}}"

// (a phrase of libmicrohttpd's page, the JSON answer)
static const struct { const char *phrase, *json; } pages[] = {
    {"header was too big", ERR("the request line or headers are too large", "request_header_too_large")},
    {"lacked such a header", ERR("an HTTP/1.1 request needs a Host header", "bad_request")},
    {"chunked encoding was syntactically incorrect", ERR("malformed chunked encoding", "bad_request")},
    {"chunk size used in your HTTP chunked encoded request is too large",
     ERR("a chunk of the request body is too large", "request_too_large")},
    {"too large value for <b>Content-Length", ERR("the Content-Length value is too large", "request_too_large")},
    {"wrong value for <b>Content-Length", ERR("the Content-Length header is malformed", "bad_request")},
    {"HTTP version is too old", ERR("this HTTP version is not supported (use HTTP/1.1)", "http_version_not_supported")},
    {"HTTP version is not supported", ERR("this HTTP version is not supported (use HTTP/1.1)",
                                          "http_version_not_supported")},
    {"request was syntactically incorrect", ERR("malformed HTTP request", "bad_request")},
    {"GNU libmicrohttpd documentation", "{\"error\":{\"message\":\"internal server error\",\"type\":\"server_error\","
                                        "\"param\":null,\"code\":null}}"},
};

static const char *json_for(const char *buf, size_t n) {
    if (n < 6 || memcmp(buf, "<html>", 6)) return NULL;
    for (size_t i = 0; i < sizeof pages / sizeof pages[0]; i++)
        if (memmem(buf, n, pages[i].phrase, strlen(pages[i].phrase))) return pages[i].json;
    return NULL;
}

struct MHD_Response *MHD_create_response_from_buffer(size_t size, void *buffer, enum MHD_ResponseMemoryMode mode) {
    const char *json = mode == MHD_RESPMEM_PERSISTENT ? json_for(buffer, size) : NULL;
    if (json) {
        struct MHD_Response *r = MHD_create_response_from_buffer_with_free_callback(strlen(json), (void *)json, NULL);
        if (r) MHD_add_response_header(r, "Content-Type", "application/json");
        return r;
    }
    if (mode == MHD_RESPMEM_MUST_FREE) return MHD_create_response_from_buffer_with_free_callback(size, buffer, free);
    if (mode == MHD_RESPMEM_PERSISTENT) return MHD_create_response_from_buffer_with_free_callback(size, buffer, NULL);
    void *copy = malloc(size ? size : 1);
    if (!copy) return NULL;
    if (size) memcpy(copy, buffer, size);
    struct MHD_Response *r = MHD_create_response_from_buffer_with_free_callback(size, copy, free);
    if (!r) free(copy);
    return r;
}
