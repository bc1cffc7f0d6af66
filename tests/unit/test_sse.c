// test_sse.c — the benchmark client's SSE parser (src/tools/http_client.c, http_sse_feed):
// events split across writes at every byte, CRLF lines, multi-line data, a long line delivered
// one byte at a time (the line search must examine each byte once: linear, not a rescan of the
// buffer per write), and [DONE] seen or not.
#include <stdlib.h>

#include "../../src/tools/http_client.h"
#include "../test.h"

static const char *STREAM =
    "data: {\"choices\":[{\"text\":\"Hel\",\"finish_reason\":null}]}\n\n"
    ": a comment\r\n"
    "data: {\"choices\":[{\"text\":\"lo\",\"finish_reason\":null}]}\r\n\r\n"
    "data: {\"choices\":[{\"text\":\"!\",\n"
    "data: \"finish_reason\":\"length\"}]}\n\n"
    "data: [DONE]\n\n";

static void feed_in_pieces(struct http_stream *s, const char *p, size_t n, size_t piece) {
    for (size_t i = 0; i < n; i += piece) http_sse_feed(s, p + i, n - i < piece ? n - i : piece, (double)i, false);
    http_sse_feed(s, NULL, 0, (double)n, true);
}

TEST(split_everywhere) {
    size_t n = strlen(STREAM);
    for (size_t piece = 1; piece <= n; piece++) {
        struct http_stream s = {0};
        feed_in_pieces(&s, STREAM, n, piece);
        CHECK_MSG(s.n_chunks == 3 && s.saw_done && !s.error[0], "piece %zu: %d chunks, done %d, '%s'", piece,
                  s.n_chunks, s.saw_done, s.error);
        CHECK_MSG(s.text && !strcmp(s.text, "Hello!"), "piece %zu: text '%s'", piece, s.text ? s.text : "");
        CHECK(s.sse_scanned <= n);
        http_stream_free(&s);
    }
}

TEST(no_done) {
    const char *cut = "data: {\"choices\":[{\"text\":\"a\",\"finish_reason\":null}]}\n\n"
                      "data: {\"choices\":[{\"text\":\"b\",\"finish_reason\":null}]}";  // closed mid-event
    struct http_stream s = {0};
    feed_in_pieces(&s, cut, strlen(cut), 7);
    CHECK_EQ_INT(s.n_chunks, 2);  // the unterminated last event still counts when the stream closes
    CHECK(!s.saw_done);
    http_stream_free(&s);
}

TEST(long_line_linear) {
    const size_t n_text = 1 << 20;
    const char *pre = "data: {\"choices\":[{\"text\":\"", *post = "\",\"finish_reason\":null}]}\n\ndata: [DONE]\n\n";
    size_t n = strlen(pre) + n_text + strlen(post);
    char *body = malloc(n + 1);
    strcpy(body, pre);
    memset(body + strlen(pre), 'x', n_text);
    strcpy(body + strlen(pre) + n_text, post);
    struct http_stream s = {0};
    feed_in_pieces(&s, body, n, 1);
    CHECK_EQ_INT(s.n_chunks, 1);
    CHECK_EQ_INT(s.n_text, n_text);
    CHECK(s.saw_done && !s.error[0]);
    CHECK_MSG(s.sse_scanned <= n, "%zu bytes examined for a %zu-byte stream", s.sse_scanned, n);
    http_stream_free(&s);
    free(body);
}

int main(void) {
    RUN(split_everywhere);
    RUN(no_done);
    RUN(long_line_linear);
    return test_summary("sse");
}
