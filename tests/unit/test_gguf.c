// test_gguf.c — unit tests for src/model/gguf.c: the real stories260K.gguf (keys, arrays,
// tensors, shapes), synthetic v2/v3 files built in memory, and corrupted variants
// (every truncation of the metadata, bad magic/version, huge lengths and counts, bad
// dims, bad offsets, misalignment (offsets, and tensors off their element size under a
// general.alignment of 1 or 2), unsupported types, block types (Q8_0, Q4_0) and rows that are
// not whole blocks, duplicates): each must fail with a
// message naming the file and the key or tensor, and never crash (run under ASan).
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "../../src/base/check.h"
#include "../../src/model/gguf.h"
#include "../test.h"

#define STORIES SHARED_MODEL("stories260K.gguf")

static uint8_t *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc((size_t)len + 1);
    if (p && fread(p, 1, (size_t)len, f) != (size_t)len) { free(p); p = NULL; }
    fclose(f);
    *n = (size_t)len;
    return p;
}

// Opens an exact-size heap copy of data[0..n) so ASan flags any read past the end.
static int open_copy(struct gguf **g, const uint8_t *data, size_t n) {
    uint8_t *copy = malloc(n ? n : 1);
    memcpy(copy, data, n);
    int rc = gguf_open_mem(g, copy, n, "mem.gguf");
    if (rc == 0) {  // touch every tensor byte and every string while the copy lives
        volatile uint8_t sink = 0;
        for (int i = 0; i < gguf_n_tensors(*g); i++) {
            const struct tensor_info *t = gguf_tensor(*g, i);
            const uint8_t *d = t->data;
            for (size_t b = 0; b < t->n_bytes; b += 61) sink ^= d[b];
            if (t->n_bytes) sink ^= d[t->n_bytes - 1];
        }
        (void)sink;
        gguf_close(*g);
        *g = NULL;
    }
    free(copy);
    return rc;
}

// ---- a tiny GGUF writer ----------------------------------------------------------

struct buf { uint8_t *p; size_t n, cap; };

static void put(struct buf *b, const void *src, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}
static void put_u32(struct buf *b, uint32_t v) { uint8_t x[4] = {v, v >> 8, v >> 16, v >> 24}; put(b, x, 4); }
static void put_u64(struct buf *b, uint64_t v) { put_u32(b, (uint32_t)v); put_u32(b, (uint32_t)(v >> 32)); }
static void put_str(struct buf *b, const char *s) { put_u64(b, strlen(s)); put(b, s, strlen(s)); }
static void pad_to(struct buf *b, size_t align) { while (b->n % align) put(b, "", 1); }

static void header(struct buf *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    put(b, "GGUF", 4);
    put_u32(b, version);
    put_u64(b, n_tensors);
    put_u64(b, n_kv);
}
static void kv_u32(struct buf *b, const char *key, uint32_t v) { put_str(b, key); put_u32(b, GGUF_U32); put_u32(b, v); }
static void kv_str(struct buf *b, const char *key, const char *v) { put_str(b, key); put_u32(b, GGUF_STRING); put_str(b, v); }
static void tensor(struct buf *b, const char *name, uint32_t n_dims, const uint64_t *ne,
                   uint32_t type, uint64_t off) {
    put_str(b, name);
    put_u32(b, n_dims);
    for (uint32_t d = 0; d < n_dims; d++) put_u64(b, ne[d]);
    put_u32(b, type);
    put_u64(b, off);
}

// A small valid file: keys of every kind (nested array too) and two tensors.
// Tensor 'a' [4,2] of `type_a`, tensor 'b' [3] F16 at offset `off_b`; alignment `align`
// (0 = no key). Returns the data section offset in *data_start.
static struct buf synth(uint32_t version, uint32_t type_a, uint64_t off_b, uint32_t align,
                        size_t *data_start) {
    struct buf b = {0};
    header(&b, version, 2, align ? 6 : 5);
    kv_str(&b, "general.architecture", "llama");
    kv_u32(&b, "llama.block_count", 7);
    put_str(&b, "tok.list"); put_u32(&b, GGUF_ARRAY); put_u32(&b, GGUF_STRING); put_u64(&b, 3);
    put_str(&b, "x"); put_str(&b, ""); put_str(&b, "hello");
    put_str(&b, "nested"); put_u32(&b, GGUF_ARRAY); put_u32(&b, GGUF_ARRAY); put_u64(&b, 2);
    put_u32(&b, GGUF_U16); put_u64(&b, 3); put(&b, "\1\0\2\0\3\0", 6);
    put_u32(&b, GGUF_STRING); put_u64(&b, 1); put_str(&b, "in");
    put_str(&b, "f64"); put_u32(&b, GGUF_F64); double d = 0.25; put(&b, &d, 8);
    if (align) kv_u32(&b, "general.alignment", align);
    uint64_t ne_a[2] = {4, 2}, ne_b[1] = {3};
    tensor(&b, "a", 2, ne_a, type_a, 0);
    tensor(&b, "b", 1, ne_b, 1, off_b);
    pad_to(&b, align ? align : 32);
    *data_start = b.n;
    for (int i = 0; i < 256; i++) put(&b, &(uint8_t){(uint8_t)i}, 1);
    return b;
}

// Sets tensor 'a''s data offset in a synth() file (its info record follows its name).
static void set_offset_a(struct buf *b, uint64_t off) {
    static const uint8_t rec[] = {1, 0, 0, 0, 0, 0, 0, 0, 'a', 2, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 2};
    uint8_t *p = memmem(b->p, b->n, rec, sizeof rec);
    if (!p) { CHECK_MSG(0, "tensor 'a' record not found"); return; }
    p += 9 + 4 + 16 + 4;
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(off >> (8 * i));
}

// Expects open of buf to fail with `code` and a message containing `needle`.
#define EXPECT_FAIL(data, n, code, needle) do { struct gguf *_g = NULL; \
    int _rc = open_copy(&_g, (data), (n)); \
    CHECK_MSG(_rc == (code), "rc %d, want %d (%s)", _rc, (code), err_msg()); \
    CHECK_MSG(strstr(err_msg(), (needle)) && strstr(err_msg(), "mem.gguf"), \
              "message '%s' lacks '%s'", err_msg(), (needle)); \
    CHECK(_g == NULL); } while (0)

// ---- tests ------------------------------------------------------------------------

TEST(stories260k) {
    struct gguf *g = NULL;
    CHECK_OK(gguf_open(&g, STORIES));
    if (!g) return;
    CHECK_EQ_INT(gguf_version(g), 3);
    CHECK(strcmp(gguf_path(g), STORIES) == 0);
    CHECK_EQ_INT(gguf_n_tensors(g), 48);
    const char *s;
    size_t len;
    CHECK_OK(gguf_get_str(g, "general.architecture", &s, &len));
    CHECK(len == 5 && memcmp(s, "llama", 5) == 0);
    int64_t v;
    CHECK_OK(gguf_get_int(g, "llama.block_count", &v)); CHECK_EQ_INT(v, 5);
    CHECK_OK(gguf_get_int(g, "llama.embedding_length", &v)); CHECK_EQ_INT(v, 64);
    CHECK_OK(gguf_get_int(g, "llama.attention.head_count", &v)); CHECK_EQ_INT(v, 8);
    CHECK_OK(gguf_get_int(g, "llama.attention.head_count_kv", &v)); CHECK_EQ_INT(v, 4);
    CHECK_OK(gguf_get_int(g, "llama.feed_forward_length", &v)); CHECK_EQ_INT(v, 172);
    CHECK_OK(gguf_get_int(g, "llama.context_length", &v)); CHECK_EQ_INT(v, 2048);
    CHECK_OK(gguf_get_int(g, "tokenizer.ggml.bos_token_id", &v)); CHECK_EQ_INT(v, 1);
    CHECK_OK(gguf_get_int(g, "tokenizer.ggml.eos_token_id", &v)); CHECK_EQ_INT(v, 2);
    double eps;
    CHECK_OK(gguf_get_float(g, "llama.attention.layer_norm_rms_epsilon", &eps));
    CHECK_NEAR(eps, 1e-5, 1e-9);
    CHECK_OK(gguf_get_float(g, "llama.block_count", &eps)); CHECK_NEAR(eps, 5, 0);
    CHECK(!gguf_has_key(g, "general.alignment"));
    CHECK(!gguf_has_key(g, "llama.rope.freq_base"));
    CHECK(gguf_get_int(g, "no.such.key", &v) == OCT_EINVAL);
    // wrong type: message names the key and both types
    CHECK(gguf_get_str(g, "llama.block_count", &s, &len) == OCT_EINVAL);
    CHECK(strstr(err_msg(), "llama.block_count") && strstr(err_msg(), "u32"));
    CHECK(gguf_get_int(g, "general.architecture", &v) == OCT_EINVAL);
    bool bv;
    CHECK(gguf_get_bool(g, "llama.block_count", &bv) == OCT_EINVAL);

    enum gguf_type et;
    size_t n;
    CHECK_OK(gguf_get_arr_info(g, "tokenizer.ggml.tokens", &et, &n));
    CHECK(et == GGUF_STRING && n == 512);
    CHECK_OK(gguf_get_arr_str(g, "tokenizer.ggml.tokens", 0, &s, &len));
    CHECK(len == 5 && memcmp(s, "<unk>", 5) == 0);
    CHECK_OK(gguf_get_arr_str(g, "tokenizer.ggml.tokens", 1, &s, &len));
    CHECK(len == 3 && memcmp(s, "<s>", 3) == 0);
    CHECK_OK(gguf_get_arr_str(g, "tokenizer.ggml.tokens", 2, &s, &len));
    CHECK(len == 4 && memcmp(s, "</s>", 4) == 0);
    CHECK_OK(gguf_get_arr_str(g, "tokenizer.ggml.tokens", 3, &s, &len));
    CHECK(len == 6 && memcmp(s, "<0x00>", 6) == 0);
    CHECK_OK(gguf_get_arr_str(g, "tokenizer.ggml.tokens", 258, &s, &len));
    CHECK(len == 6 && memcmp(s, "<0xFF>", 6) == 0);
    CHECK(gguf_get_arr_str(g, "tokenizer.ggml.tokens", 512, &s, &len) == OCT_EINVAL);
    CHECK(strstr(err_msg(), "tokenizer.ggml.tokens") != NULL);
    const void *data;
    CHECK(gguf_get_arr_data(g, "tokenizer.ggml.tokens", &data) == OCT_EINVAL);
    CHECK_OK(gguf_get_arr_info(g, "tokenizer.ggml.scores", &et, &n));
    CHECK(et == GGUF_F32 && n == 512);
    CHECK_OK(gguf_get_arr_info(g, "tokenizer.ggml.token_type", &et, &n));
    CHECK(et == GGUF_I32 && n == 512);
    CHECK_OK(gguf_get_arr_data(g, "tokenizer.ggml.token_type", &data));
    int32_t types[4];
    memcpy(types, data, sizeof types);
    CHECK(types[0] == 2 && types[1] == 3 && types[2] == 3 && types[3] == 6);

    const struct tensor_info *t = gguf_tensor(g, 0);
    CHECK(t && strcmp(t->name, "token_embd.weight") == 0);
    CHECK(gguf_tensor(g, 48) == NULL && gguf_tensor(g, -1) == NULL);
    t = gguf_find_tensor(g, "token_embd.weight");
    CHECK(t && t->dtype == DT_F32 && t->n_dims == 2 && t->ne[0] == 64 && t->ne[1] == 512);
    CHECK(t && t->ne[2] == 1 && t->ne[3] == 1 && t->n_bytes == 64 * 512 * 4);
    CHECK(t && ((uintptr_t)t->data % 32) == 0);
    const struct tensor_info *o = gguf_find_tensor(g, "output.weight");
    CHECK(o && t && o->n_bytes == t->n_bytes && memcmp(o->data, t->data, t->n_bytes) == 0);
    t = gguf_find_tensor(g, "blk.4.ffn_down.weight");
    CHECK(t && t->ne[0] == 172 && t->ne[1] == 64);
    t = gguf_find_tensor(g, "blk.2.attn_k.weight");
    CHECK(t && t->ne[0] == 64 && t->ne[1] == 32);
    t = gguf_find_tensor(g, "output_norm.weight");
    CHECK(t && t->n_dims == 1 && t->ne[0] == 64 && tensor_n_elems(t) == 64);
    CHECK(gguf_find_tensor(g, "blk.5.attn_q.weight") == NULL);
    int n_found = 0;
    for (int i = 0; i < gguf_n_tensors(g); i++)
        n_found += gguf_find_tensor(g, gguf_tensor(g, i)->name) == gguf_tensor(g, i);
    CHECK_EQ_INT(n_found, 48);
    gguf_close(g);
}

TEST(open_errors) {
    struct gguf *g = (struct gguf *)1;
    CHECK(gguf_open(&g, "/nonexistent/x.gguf") == OCT_EIO);
    CHECK(g == NULL && strstr(err_msg(), "/nonexistent/x.gguf"));
    CHECK(gguf_open(&g, "/tmp") == OCT_EIO);
    char path[] = "/tmp/test_gguf_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    CHECK(write(fd, "GGUF\3\0\0\0", 8) == 8);
    close(fd);
    CHECK(gguf_open(&g, path) == OCT_EINVAL);
    CHECK(g == NULL && strstr(err_msg(), path) && strstr(err_msg(), "truncated"));
    unlink(path);
}

// Every prefix of the real file up to the end of the tensor infos must fail cleanly;
// so must a sample of prefixes cutting into the tensor data.
TEST(truncations) {
    size_t n;
    uint8_t *file = read_all(STORIES, &n);
    CHECK(file != NULL);
    if (!file) return;
    struct gguf *g = NULL;
    CHECK_OK(gguf_open_mem(&g, file, n, "mem.gguf"));
    if (!g) { free(file); return; }
    size_t data_start = n, data_end = 0;
    for (int i = 0; i < gguf_n_tensors(g); i++) {
        const struct tensor_info *t = gguf_tensor(g, i);
        size_t off = (size_t)((const uint8_t *)t->data - file);
        if (off < data_start) data_start = off;
        if (off + t->n_bytes > data_end) data_end = off + t->n_bytes;
    }
    gguf_close(g);
    CHECK(data_start > 10000 && data_start < 20000 && data_end == n);
    int n_bad = 0;
    for (size_t len = 0; len <= data_start; len++) {
        int rc = open_copy(&g, file, len);
        if (rc >= 0 || !strstr(err_msg(), "mem.gguf")) {
            if (n_bad++ < 5) fprintf(stderr, "  prefix %zu: rc %d '%s'\n", len, rc, err_msg());
        }
    }
    for (size_t len = data_start + 1; len < n; len += 4093) {
        int rc = open_copy(&g, file, len);
        if (rc >= 0 || !strstr(err_msg(), "outside")) n_bad++;
    }
    CHECK_EQ_INT(n_bad, 0);
    CHECK_EQ_INT(open_copy(&g, file, n), 0);
    free(file);
}

TEST(corrupt_real) {
    size_t n;
    uint8_t *file = read_all(STORIES, &n);
    if (!file) { CHECK(file != NULL); return; }
    uint8_t *c = malloc(n);
    // bad magic
    memcpy(c, file, n); c[0] = 'X';
    EXPECT_FAIL(c, n, OCT_EINVAL, "magic");
    // versions: 1 unsupported, 4 unsupported, big-endian 3
    memcpy(c, file, n); c[4] = 1;
    EXPECT_FAIL(c, n, OCT_EUNSUP, "version 1");
    c[4] = 4;
    EXPECT_FAIL(c, n, OCT_EUNSUP, "version 4");
    c[4] = 0; c[7] = 3;
    EXPECT_FAIL(c, n, OCT_EUNSUP, "big-endian");
    // huge counts in the header
    memcpy(c, file, n); memset(c + 8, 0xff, 8);
    EXPECT_FAIL(c, n, OCT_EINVAL, "tensors cannot fit");
    memcpy(c, file, n); memset(c + 16, 0x7f, 8);
    EXPECT_FAIL(c, n, OCT_EINVAL, "keys");
    // first key: huge string length (offset 24), huge array count (the key is
    // "tokenizer.ggml.tokens": 24 + 8 + 21 + 4 (type) + 4 (elem type) = 61)
    memcpy(c, file, n); memset(c + 24, 0xff, 8); c[31] = 0x3f;
    EXPECT_FAIL(c, n, OCT_EINVAL, "key #0");
    CHECK(memcmp(file + 32, "tokenizer.ggml.tokens", 21) == 0);
    memcpy(c, file, n); memset(c + 61, 0xff, 8);
    EXPECT_FAIL(c, n, OCT_EINVAL, "tokenizer.ggml.tokens");
    memcpy(c, file, n); memset(c + 61, 0x00, 8); c[63] = 1;  // 65536 strings: runs out
    EXPECT_FAIL(c, n, OCT_EINVAL, "tokenizer.ggml.tokens");
    memcpy(c, file, n); c[53] = 13;  // value type 13 is invalid
    EXPECT_FAIL(c, n, OCT_EINVAL, "invalid value type 13");
    memcpy(c, file, n); c[57] = 99;  // invalid array element type
    EXPECT_FAIL(c, n, OCT_EINVAL, "invalid array element type 99");
    free(c);
    free(file);
}

TEST(synthetic) {
    size_t ds;
    for (uint32_t version = 2; version <= 3; version++) {
        struct buf b = synth(version, 0, 32, 0, &ds);
        uint8_t *copy = malloc(b.n);
        memcpy(copy, b.p, b.n);
        struct gguf *g = NULL;
        CHECK_OK(gguf_open_mem(&g, copy, b.n, "syn.gguf"));
        if (g) {
            CHECK_EQ_INT(gguf_version(g), (int)version);
            CHECK_EQ_INT(gguf_n_tensors(g), 2);
            int64_t v;
            CHECK_OK(gguf_get_int(g, "llama.block_count", &v)); CHECK_EQ_INT(v, 7);
            double d;
            CHECK_OK(gguf_get_float(g, "f64", &d)); CHECK_NEAR(d, 0.25, 0);
            enum gguf_type et;
            size_t n, len;
            const char *s;
            CHECK_OK(gguf_get_arr_info(g, "nested", &et, &n));
            CHECK(et == GGUF_ARRAY && n == 2);
            const void *data;
            CHECK(gguf_get_arr_data(g, "nested", &data) == OCT_EINVAL);
            CHECK(gguf_get_arr_str(g, "nested", 0, &s, &len) == OCT_EINVAL);
            CHECK_OK(gguf_get_arr_str(g, "tok.list", 1, &s, &len)); CHECK(len == 0);
            CHECK_OK(gguf_get_arr_str(g, "tok.list", 2, &s, &len));
            CHECK(len == 5 && memcmp(s, "hello", 5) == 0);
            const struct tensor_info *t = gguf_find_tensor(g, "b");
            CHECK(t && t->dtype == DT_F16 && t->n_bytes == 6 && t->data == copy + ds + 32);
            t = gguf_find_tensor(g, "a");
            CHECK(t && t->dtype == DT_F32 && t->n_bytes == 32 && t->data == copy + ds);
            gguf_close(g);
        }
        free(copy);
        free(b.p);
    }
    // BF16 and a custom alignment of 64
    struct buf b = synth(3, 30, 64, 64, &ds);
    struct gguf *g = NULL;
    CHECK_OK(gguf_open_mem(&g, b.p, b.n, "syn.gguf"));
    if (g) {
        CHECK(gguf_tensor(g, 0)->dtype == DT_BF16 && ds % 64 == 0);
        gguf_close(g);
    }
    free(b.p);
    // the same through a real file and mmap
    b = synth(2, 1, 32, 0, &ds);
    char path[] = "/tmp/test_gguf_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0 && write(fd, b.p, b.n) == (ssize_t)b.n);
    close(fd);
    CHECK_OK(gguf_open(&g, path));
    if (g) { CHECK(gguf_find_tensor(g, "a")->dtype == DT_F16); gguf_close(g); }
    unlink(path);
    free(b.p);
}

// One tensor 'q' of [ne0, 3] elements of ggml type `type` at offset 0; general.alignment `align`.
static struct buf synth_block(uint32_t type, uint64_t ne0, uint32_t align, size_t data_bytes, size_t *data_start) {
    struct buf b = {0};
    header(&b, 3, 1, 2);
    kv_str(&b, "general.architecture", "llama");
    kv_u32(&b, "general.alignment", align);
    uint64_t ne[2] = {ne0, 3};
    tensor(&b, "q", 2, ne, type, 0);
    pad_to(&b, align);
    *data_start = b.n;
    for (size_t i = 0; i < data_bytes; i++) put(&b, &(uint8_t){(uint8_t)i}, 1);
    return b;
}

// Q8_0 (ggml type 8) and Q4_0 (type 2) load as block types: 3 rows of 2 blocks of 34 / 18 bytes;
// Q4_K, Q5_K, Q6_K (12, 13, 14): 3 rows of 2 super-blocks of 144 / 176 / 210 bytes; read in place,
// and the data section must hold them all.
TEST(block_types) {
    static const struct { uint32_t type; enum dtype dt; uint64_t ne0; size_t bytes; } cases[] = {
        {8, DT_Q8_0, 64, 3 * 2 * 34},     {2, DT_Q4_0, 64, 3 * 2 * 18},     {12, DT_Q4_K, 512, 3 * 2 * 144},
        {13, DT_Q5_K, 512, 3 * 2 * 176}, {14, DT_Q6_K, 512, 3 * 2 * 210}};
    for (int i = 0; i < 5; i++) {
        size_t ds;
        struct buf b = synth_block(cases[i].type, cases[i].ne0, 32, cases[i].bytes, &ds);
        struct gguf *g = NULL;
        CHECK_OK(gguf_open_mem(&g, b.p, b.n, "q.gguf"));
        if (g) {
            const struct tensor_info *t = gguf_find_tensor(g, "q");
            CHECK(t && t->dtype == cases[i].dt && t->n_bytes == cases[i].bytes && t->data == b.p + ds);
            CHECK_EQ_INT(dtype_row_bytes(cases[i].dt, (int64_t)cases[i].ne0) * 3, cases[i].bytes);
            gguf_close(g);
        }
        free(b.p);
        b = synth_block(cases[i].type, cases[i].ne0, 32, cases[i].bytes - 1, &ds);  // one byte short
        EXPECT_FAIL(b.p, b.n, OCT_EINVAL, "tensor 'q': data");
        free(b.p);
    }
    CHECK(!strcmp(dtype_name(DT_Q8_0), "q8_0") && !strcmp(dtype_name(DT_Q4_0), "q4_0"));
    CHECK(!strcmp(dtype_name(DT_Q4_K), "q4_k") && !strcmp(dtype_name(DT_Q5_K), "q5_k") &&
          !strcmp(dtype_name(DT_Q6_K), "q6_k"));
    CHECK_EQ_INT(dtype_row_bytes(DT_Q6_K, 128), 0);
    CHECK_EQ_INT(dtype_row_bytes(DT_Q8_0, 33), 0);
    CHECK_EQ_INT(dtype_row_bytes(DT_F16, 33), 66);
    CHECK_EQ_INT(dtype_size(DT_Q4_0), 0);
}

// general.alignment 1 or 2 is legal, but tensors are read in place as their type: one that
// starts off a multiple of its element size is refused, naming it and the alignment.
TEST(small_alignment) {
    for (uint32_t align = 1; align <= 2; align++) {
        size_t ds;
        struct buf b = synth(3, 0, 64, align, &ds);
        free(b.p);
        b = synth(3, 0, 64 + ds % 2, align, &ds);     // 'a' F32, 'b' F16 at an even file offset
        uint64_t off_a = (4 + 2 - ds % 4) % 4;        // (ds + off_a) % 4 == 2: a multiple of align
        set_offset_a(&b, off_a);
        char want[80];
        snprintf(want, sizeof want, "(general.alignment %u)", align);
        EXPECT_FAIL(b.p, b.n, OCT_EINVAL, "tensor 'a' (f32) starts at byte");
        EXPECT_FAIL(b.p, b.n, OCT_EINVAL, want);
        set_offset_a(&b, (4 - ds % 4) % 4);            // now 4-byte aligned in the file: accepted
        struct gguf *g = NULL;
        CHECK_OK(open_copy(&g, b.p, b.n));
        free(b.p);
        b = synth(3, 1, 64 + ds % 2, align, &ds);     // both F16
        if (align == 1) set_offset_a(&b, ds % 2 ? 0 : 1);  // odd
        if (align == 1) EXPECT_FAIL(b.p, b.n, OCT_EINVAL, "tensor 'a' (f16)");
        else CHECK_OK(open_copy(&g, b.p, b.n));
        free(b.p);
    }
}

TEST(synthetic_errors) {
    size_t ds;
    struct buf b = synth(3, 8, 32, 0, &ds);  // Q8_0 rows of 4 elements: not whole 32-element blocks
    EXPECT_FAIL(b.p, b.n, OCT_EINVAL, "tensor 'a': Q8_0 rows of 4 elements are not whole 32-element blocks");
    free(b.p);
    b = synth(3, 7, 32, 0, &ds);  // Q5_1
    EXPECT_FAIL(b.p, b.n, OCT_EUNSUP, "tensor 'a': ggml type 7 (Q5_1)");
    free(b.p);
    b = synth(3, 12, 32, 0, &ds);  // Q4_K rows of 4 elements
    EXPECT_FAIL(b.p, b.n, OCT_EINVAL, "tensor 'a': Q4_K rows of 4 elements are not whole 256-element blocks");
    free(b.p);
    b = synth(3, 16, 32, 0, &ds);  // IQ2_XXS
    EXPECT_FAIL(b.p, b.n, OCT_EUNSUP, "tensor 'a': ggml type 16 (IQ2_XXS) is not supported");
    free(b.p);
    b = synth(3, 0, 33, 0, &ds);  // misaligned
    EXPECT_FAIL(b.p, b.n, OCT_EINVAL, "tensor 'b': data offset 33 is not a multiple");
    free(b.p);
    b = synth(3, 0, 256, 0, &ds);  // out of range
    EXPECT_FAIL(b.p, b.n, OCT_EINVAL, "tensor 'b': data");
    free(b.p);
    b = synth(3, 0, (uint64_t)-32, 0, &ds);  // offset + size wraps around
    EXPECT_FAIL(b.p, b.n, OCT_EINVAL, "outside");
    free(b.p);
    b = synth(3, 0, 32, 48, &ds);  // alignment not a power of two
    EXPECT_FAIL(b.p, b.n, OCT_EINVAL, "general.alignment");
    free(b.p);
    b = synth(3, 0, 32, 0, &ds);   // cut inside the padding before the data section
    EXPECT_FAIL(b.p, ds - 1, OCT_EINVAL, "truncated");
    free(b.p);

    // hand-built tensor-info errors
    struct { uint32_t n_dims; uint64_t ne[5]; const char *want; } cases[] = {
        {0, {1}, "n_dims 0"},
        {5, {1, 1, 1, 1, 1}, "n_dims 5"},
        {2, {4, 0}, "dimension 1 = 0"},
        {2, {1ull << 40, 1ull << 40}, "overflow"},
        {1, {1ull << 63}, "overflow"},
        {2, {1ull << 31, 1ull << 31}, "overflow"},
        {2, {1ull << 30, 1ull << 30}, "outside"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        struct buf c = {0};
        header(&c, 3, 1, 0);
        tensor(&c, "w", cases[k].n_dims, cases[k].ne, 0, 0);
        pad_to(&c, 32);
        put(&c, (uint8_t[64]){0}, 64);
        EXPECT_FAIL(c.p, c.n, OCT_EINVAL, cases[k].want);
        CHECK(strstr(err_msg(), "tensor 'w'") != NULL);
        free(c.p);
    }
    // duplicates, NUL in a key, deep nesting, empty tensor name
    struct buf c = {0};
    header(&c, 3, 0, 2);
    kv_u32(&c, "k", 1);
    kv_u32(&c, "k", 2);
    EXPECT_FAIL(c.p, c.n, OCT_EINVAL, "key 'k': duplicate key");
    free(c.p);
    c = (struct buf){0};
    uint64_t ne[1] = {8};
    header(&c, 3, 2, 0);
    tensor(&c, "t", 1, ne, 0, 0);
    tensor(&c, "t", 1, ne, 0, 32);
    pad_to(&c, 32);
    put(&c, (uint8_t[64]){0}, 64);
    EXPECT_FAIL(c.p, c.n, OCT_EINVAL, "tensor 't': duplicate tensor name");
    free(c.p);
    c = (struct buf){0};
    header(&c, 3, 0, 1);
    put_u64(&c, 3); put(&c, "a\0b", 3); put_u32(&c, GGUF_U8); put(&c, "x", 1);
    EXPECT_FAIL(c.p, c.n, OCT_EINVAL, "NUL");
    free(c.p);
    c = (struct buf){0};
    header(&c, 3, 0, 1);
    put_str(&c, "deep"); put_u32(&c, GGUF_ARRAY);
    for (int i = 0; i < 20; i++) { put_u32(&c, GGUF_ARRAY); put_u64(&c, 1); }
    put_u32(&c, GGUF_U8); put_u64(&c, 0);
    EXPECT_FAIL(c.p, c.n, OCT_EINVAL, "nested deeper");
    free(c.p);
    c = (struct buf){0};
    header(&c, 3, 0, 1);
    put_str(&c, "arr"); put_u32(&c, GGUF_ARRAY); put_u32(&c, 99); put_u64(&c, 0);
    EXPECT_FAIL(c.p, c.n, OCT_EINVAL, "invalid array element type 99");
    free(c.p);
    c = (struct buf){0};
    header(&c, 3, 1, 0);
    tensor(&c, "", 1, ne, 0, 0);
    pad_to(&c, 32);
    put(&c, (uint8_t[32]){0}, 32);
    EXPECT_FAIL(c.p, c.n, OCT_EINVAL, "empty tensor name");
    free(c.p);
    // zero tensors, no padding: a valid (vocab-only) file
    c = (struct buf){0};
    header(&c, 3, 0, 1);
    kv_u32(&c, "k", 1);
    struct gguf *g = NULL;
    CHECK_EQ_INT(open_copy(&g, c.p, c.n), 0);
    free(c.p);
}

int main(void) {
    RUN(stories260k);
    RUN(open_errors);
    RUN(truncations);
    RUN(corrupt_real);
    RUN(synthetic);
    RUN(synthetic_errors);
    RUN(small_alignment);
    RUN(block_types);
    return test_summary("gguf");
}
