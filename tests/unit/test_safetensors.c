// test_safetensors.c — unit tests for src/model/safetensors.c: small directories written
// here (single file, sharded index, *.safetensors glob), corrupted headers (truncated,
// bad JSON, offsets out of range, size mismatch, unknown dtype, missing config.json, tensors
// misaligned for their type...),
// and tools/gguf_to_safetensors.py run on stories260K (byte-identical tensors, q/k rows
// un-permuted as specified), checked against gguf.c.
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../src/base/check.h"
#include "../../src/model/gguf.h"
#include "../../src/model/safetensors.h"
#include "../test.h"

static char tmp_root[64];

static void write_bytes(const char *dir, const char *name, const void *p, size_t n) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) { CHECK_MSG(0, "cannot write %s", path); return; }
    fwrite(p, 1, n, f);
    fclose(f);
}

// A safetensors file: 8-byte LE header length, the header text padded with spaces to
// `pad` bytes (8, as the format requires: the data section then starts 8-byte aligned; 1: no
// padding), then `data`.
static void write_st_pad(const char *dir, const char *name, const char *header, const void *data,
                         size_t n_data, size_t pad) {
    size_t hl = strlen(header), padded = (hl + pad - 1) / pad * pad, n = 8 + padded + n_data;
    uint8_t *p = malloc(n);
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    memcpy(p + 8, header, hl);
    memset(p + 8 + hl, ' ', padded - hl);
    if (n_data) memcpy(p + 8 + padded, data, n_data);
    write_bytes(dir, name, p, n);
    free(p);
}
static void write_st(const char *dir, const char *name, const char *header, const void *data,
                     size_t n_data) {
    write_st_pad(dir, name, header, data, n_data, 8);
}

// Fresh empty directory under tmp_root with a config.json (unless no_config).
static const char *new_dir(const char *tag, int no_config) {
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", tmp_root, tag);
    mkdir(path, 0755);
    if (!no_config) write_bytes(path, "config.json", "{\"hidden_size\": 8}", 18);
    return path;
}

static uint8_t data64[64];

#define GOOD_HEADER "{\"__metadata__\":{\"format\":\"pt\"}," \
    "\"e\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[24,32]}," \
    "\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}," \
    "\"f8\":{\"dtype\":\"F8_E4M3\",\"shape\":[2,2],\"data_offsets\":[32,36]}," \
    "\"f5\":{\"dtype\":\"F8_E5M2\",\"shape\":[],\"data_offsets\":[36,37]}," \
    "\"i\":{\"dtype\":\"I64\",\"shape\":[1,1,1,1],\"data_offsets\":[40,48]}," \
    "\"j\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[48,56]}}"

// Expects st_open(dir) to fail with `code` and a message containing `needle`.
#define EXPECT_FAIL(dir, code, needle) do { struct st_dir *_d = NULL; \
    int _rc = st_open(&_d, (dir)); \
    CHECK_MSG(_rc == (code), "rc %d, want %d (%s)", _rc, (code), err_msg()); \
    CHECK_MSG(strstr(err_msg(), (needle)) != NULL, "message '%s' lacks '%s'", err_msg(), \
              (needle)); \
    CHECK(_d == NULL); if (_d) st_close(_d); } while (0)

TEST(single_file) {
    const char *dir = new_dir("single", 0);
    write_st(dir, "model.safetensors", GOOD_HEADER, data64, 56);
    struct st_dir *d = NULL;
    CHECK_OK(st_open(&d, dir));
    if (!d) return;
    CHECK(strcmp(st_path(d), dir) == 0);
    CHECK_EQ_INT(json_integer_value(json_object_get(st_config(d), "hidden_size")), 8);
    CHECK_EQ_INT(st_n_tensors(d), 6);
    // file order = data order
    const char *order[] = {"w", "e", "f8", "f5", "i", "j"};
    for (int i = 0; i < 6; i++) CHECK(strcmp(st_tensor(d, i)->name, order[i]) == 0);
    CHECK(st_tensor(d, 6) == NULL);
    const struct tensor_info *t = st_find_tensor(d, "w");
    CHECK(t && t->dtype == DT_F32 && t->n_dims == 2 && t->ne[0] == 3 && t->ne[1] == 2);
    CHECK(t && t->ne[2] == 1 && t->n_bytes == 24);
    const uint8_t *base = t ? t->data : NULL;
    t = st_find_tensor(d, "e");
    CHECK(t && t->dtype == DT_BF16 && t->ne[0] == 4 && (const uint8_t *)t->data == base + 24);
    CHECK(t && memcmp(t->data, data64 + 24, 8) == 0);
    t = st_find_tensor(d, "f8");
    CHECK(t && t->dtype == DT_E4M3 && t->n_bytes == 4);
    t = st_find_tensor(d, "f5");
    CHECK(t && t->dtype == DT_E5M2 && t->n_dims == 1 && t->ne[0] == 1);
    t = st_find_tensor(d, "i");
    CHECK(t && t->dtype == DT_I64 && t->n_dims == 4 && t->n_bytes == 8);
    t = st_find_tensor(d, "j");
    CHECK(t && t->dtype == DT_I32 && t->ne[0] == 2);
    CHECK(st_find_tensor(d, "__metadata__") == NULL && st_find_tensor(d, "x") == NULL);
    st_close(d);

    // every truncation of the file fails cleanly
    char path[300];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    for (size_t len = 0; len < 8 + (strlen(GOOD_HEADER) + 7) / 8 * 8 + 56; len++) {
        CHECK(truncate(path, (off_t)len) == 0);
        EXPECT_FAIL(dir, OCT_EINVAL, "model.safetensors");
    }
}

TEST(sharded) {
    const char *dir = new_dir("sharded", 0);
    write_st(dir, "s1.safetensors", "{\"a\":{\"dtype\":\"F16\",\"shape\":[2,2],"
             "\"data_offsets\":[0,8]},\"c\":{\"dtype\":\"F32\",\"shape\":[1],"
             "\"data_offsets\":[8,12]}}", data64, 12);
    write_st(dir, "s2.safetensors", "{\"b\":{\"dtype\":\"F32\",\"shape\":[3,1],"
             "\"data_offsets\":[0,12]}}", data64 + 12, 12);
    const char *index = "{\"metadata\":{\"total_size\":24},\"weight_map\":{"
                        "\"a\":\"s1.safetensors\",\"b\":\"s2.safetensors\",\"c\":\"s1.safetensors\"}}";
    write_bytes(dir, "model.safetensors.index.json", index, strlen(index));
    // a stray single file must be ignored when an index exists
    write_st(dir, "model.safetensors", "{\"zz\":{\"dtype\":\"F32\",\"shape\":[1],"
             "\"data_offsets\":[0,4]}}", data64, 4);
    struct st_dir *d = NULL;
    CHECK_OK(st_open(&d, dir));
    if (d) {
        CHECK_EQ_INT(st_n_tensors(d), 3);
        const struct tensor_info *b = st_find_tensor(d, "b");
        CHECK(b && b->ne[0] == 1 && b->ne[1] == 3 && memcmp(b->data, data64 + 12, 12) == 0);
        CHECK(st_find_tensor(d, "a") && st_find_tensor(d, "c") && !st_find_tensor(d, "zz"));
        st_close(d);
    }
    // a weight_map entry missing from its shard
    index = "{\"weight_map\":{\"a\":\"s1.safetensors\",\"zz\":\"s2.safetensors\"}}";
    write_bytes(dir, "model.safetensors.index.json", index, strlen(index));
    EXPECT_FAIL(dir, OCT_EINVAL, "tensor 'zz'");
    // listed in the wrong shard
    index = "{\"weight_map\":{\"a\":\"s2.safetensors\",\"b\":\"s2.safetensors\"}}";
    write_bytes(dir, "model.safetensors.index.json", index, strlen(index));
    EXPECT_FAIL(dir, OCT_EINVAL, "tensor 'a'");
    // a shard that does not exist, a path escaping the dir, no weight_map
    index = "{\"weight_map\":{\"a\":\"s9.safetensors\"}}";
    write_bytes(dir, "model.safetensors.index.json", index, strlen(index));
    EXPECT_FAIL(dir, OCT_EIO, "s9.safetensors");
    index = "{\"weight_map\":{\"a\":\"../x.safetensors\"}}";
    write_bytes(dir, "model.safetensors.index.json", index, strlen(index));
    EXPECT_FAIL(dir, OCT_EINVAL, "plain file name");
    write_bytes(dir, "model.safetensors.index.json", "{}", 2);
    EXPECT_FAIL(dir, OCT_EINVAL, "weight_map");
    write_bytes(dir, "model.safetensors.index.json", "{\"weight_map\":", 14);
    EXPECT_FAIL(dir, OCT_EINVAL, "model.safetensors.index.json");
}

TEST(glob) {
    const char *dir = new_dir("glob", 0);
    write_st(dir, "b.safetensors", "{\"y\":{\"dtype\":\"F32\",\"shape\":[1],"
             "\"data_offsets\":[0,4]}}", data64, 4);
    write_st(dir, "a.safetensors", "{\"x\":{\"dtype\":\"F32\",\"shape\":[1],"
             "\"data_offsets\":[0,4]}}", data64, 4);
    write_bytes(dir, "notes.txt", "hi", 2);
    struct st_dir *d = NULL;
    CHECK_OK(st_open(&d, dir));
    if (d) {
        CHECK_EQ_INT(st_n_tensors(d), 2);
        CHECK(strcmp(st_tensor(d, 0)->name, "x") == 0);  // a.safetensors sorts first
        st_close(d);
    }
    write_st(dir, "c.safetensors", "{\"x\":{\"dtype\":\"F32\",\"shape\":[1],"
             "\"data_offsets\":[0,4]}}", data64, 4);
    EXPECT_FAIL(dir, OCT_EINVAL, "tensor 'x' appears in both a.safetensors and c.safetensors");
    dir = new_dir("empty", 0);
    EXPECT_FAIL(dir, OCT_EINVAL, "no model.safetensors");
}

TEST(corrupt) {
    struct { const char *header; size_t n_data; int code; const char *want; } cases[] = {
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}", 8, OCT_EINVAL, "bad JSON"},
        {"[1,2]", 0, OCT_EINVAL, "not an object"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, OCT_EINVAL,
         "tensor 'w': data_offsets [0, 8] out of range"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,4]}}", 16, OCT_EINVAL, "out of range"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 16, OCT_EINVAL,
         "tensor 'w': 8 bytes in data_offsets"},
        {"{\"w\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8, OCT_EUNSUP,
         "tensor 'w': dtype 'F64'"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 8, OCT_EINVAL, "non-negative"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 8, OCT_EINVAL, "shape[0]"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1],\"data_offsets\":[0,4]}}", 8, OCT_EUNSUP, "rank 5"},
        {"{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 8, OCT_EINVAL, "tensor 'w': needs"},
        {"{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 8, OCT_EINVAL, "tensor 'w': needs"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}", 8, OCT_EINVAL, "tensor 'w': needs"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 8, OCT_EINVAL, "two"},
        {"{\"w\":5}", 8, OCT_EINVAL, "not an object"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}}",
         8, OCT_EINVAL, "tensor 'w'"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[9223372036854775807,2],\"data_offsets\":[0,4]}}",
         8, OCT_EINVAL, "overflows"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
         "\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 8, OCT_EINVAL, "duplicate"},
        {"", 8, OCT_EINVAL, "bad JSON"},
    };
    const char *dir = new_dir("corrupt", 0);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        write_st(dir, "model.safetensors", cases[k].header, data64, cases[k].n_data);
        EXPECT_FAIL(dir, cases[k].code, cases[k].want);
        CHECK(strstr(err_msg(), "model.safetensors") != NULL);
    }
    // header length larger than the file, huge header length
    uint8_t raw[16] = {100, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
    write_bytes(dir, "model.safetensors", raw, 10);
    EXPECT_FAIL(dir, OCT_EINVAL, "header length 100");
    memset(raw, 0xff, 8);
    write_bytes(dir, "model.safetensors", raw, 16);
    EXPECT_FAIL(dir, OCT_EINVAL, "header length");
    write_bytes(dir, "model.safetensors", raw, 5);
    EXPECT_FAIL(dir, OCT_EINVAL, "at least 8 bytes");
    // an empty header object is a valid, empty file
    write_st(dir, "model.safetensors", "{}", NULL, 0);
    struct st_dir *d = NULL;
    CHECK_OK(st_open(&d, dir));
    if (d) { CHECK_EQ_INT(st_n_tensors(d), 0); st_close(d); }
    // config.json: missing, bad JSON, not an object; the directory itself missing
    dir = new_dir("noconfig", 1);
    write_st(dir, "model.safetensors", "{}", NULL, 0);
    EXPECT_FAIL(dir, OCT_EINVAL, "missing config.json");
    write_bytes(dir, "config.json", "{\"a\":", 5);
    EXPECT_FAIL(dir, OCT_EINVAL, "config.json");
    write_bytes(dir, "config.json", "[]", 2);
    EXPECT_FAIL(dir, OCT_EINVAL, "config.json: top level is not a JSON object");
    EXPECT_FAIL("/nonexistent/dir", OCT_EIO, "/nonexistent/dir");
}

// Rows (ne[1] of them, ne[0] floats each) of tensor t.
static const uint8_t *row(const struct tensor_info *t, int64_t r) {
    return (const uint8_t *)t->data + r * t->ne[0] * (int64_t)dtype_size(t->dtype);
}

static void check_converted(const char *dir, struct gguf *g) {
    struct st_dir *d = NULL;
    CHECK_OK(st_open(&d, dir));
    if (!d) return;
    CHECK_EQ_INT(st_n_tensors(d), 48);
    const json_t *cfg = st_config(d);
    CHECK_EQ_INT(json_integer_value(json_object_get(cfg, "num_hidden_layers")), 5);
    CHECK_EQ_INT(json_integer_value(json_object_get(cfg, "num_key_value_heads")), 4);
    CHECK_EQ_INT(json_integer_value(json_object_get(cfg, "head_dim")), 8);
    CHECK_NEAR(json_number_value(json_object_get(cfg, "rope_theta")), 10000, 0);
    CHECK(json_is_false(json_object_get(cfg, "tie_word_embeddings")));
    static const char *same[][2] = {
        {"token_embd.weight", "model.embed_tokens.weight"}, {"output.weight", "lm_head.weight"},
        {"output_norm.weight", "model.norm.weight"},
        {"blk.0.ffn_gate.weight", "model.layers.0.mlp.gate_proj.weight"},
        {"blk.3.ffn_down.weight", "model.layers.3.mlp.down_proj.weight"},
        {"blk.4.attn_v.weight", "model.layers.4.self_attn.v_proj.weight"},
        {"blk.2.attn_output.weight", "model.layers.2.self_attn.o_proj.weight"},
        {"blk.1.attn_norm.weight", "model.layers.1.input_layernorm.weight"},
        {"blk.1.ffn_norm.weight", "model.layers.1.post_attention_layernorm.weight"}};
    for (size_t k = 0; k < sizeof same / sizeof same[0]; k++) {
        const struct tensor_info *a = gguf_find_tensor(g, same[k][0]);
        const struct tensor_info *b = st_find_tensor(d, same[k][1]);
        CHECK_MSG(a && b && a->dtype == b->dtype && a->n_dims == b->n_dims &&
                  memcmp(a->ne, b->ne, sizeof a->ne) == 0 && a->n_bytes == b->n_bytes &&
                  memcmp(a->data, b->data, a->n_bytes) == 0, "%s", same[k][1]);
    }
    // q (8 heads) and k (4 heads), head_dim 8: HF row h*8 + i*4 + j = GGUF row h*8 + 2j + i
    const struct tensor_info *gq = gguf_find_tensor(g, "blk.1.attn_q.weight");
    const struct tensor_info *hq = st_find_tensor(d, "model.layers.1.self_attn.q_proj.weight");
    const struct tensor_info *gk = gguf_find_tensor(g, "blk.4.attn_k.weight");
    const struct tensor_info *hk = st_find_tensor(d, "model.layers.4.self_attn.k_proj.weight");
    CHECK(gq && hq && gk && hk && hq->ne[0] == 64 && hq->ne[1] == 64 && hk->ne[1] == 32);
    if (gq && hq && gk && hk) {
        int n_bad = 0;
        for (int h = 0; h < 8; h++)
            for (int i = 0; i < 2; i++)
                for (int j = 0; j < 4; j++) {
                    n_bad += memcmp(row(hq, h * 8 + i * 4 + j), row(gq, h * 8 + 2 * j + i), 256) != 0;
                    if (h < 4)
                        n_bad += memcmp(row(hk, h * 8 + i * 4 + j), row(gk, h * 8 + 2 * j + i), 256) != 0;
                }
        CHECK_EQ_INT(n_bad, 0);
        CHECK(memcmp(row(hq, 1), row(gq, 1), 256) != 0);  // row 1 really moved
    }
    st_close(d);
}

TEST(converter) {
    struct gguf *g = NULL;
    CHECK_OK(gguf_open(&g, SHARED_MODEL("stories260K.gguf")));
    if (!g) return;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "python3 tools/gguf_to_safetensors.py %s %s/conv1",
             SHARED_MODEL("stories260K.gguf"), tmp_root);
    CHECK_EQ_INT(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "%s/conv1", tmp_root);
    check_converted(cmd, g);
    snprintf(cmd, sizeof cmd, "python3 tools/gguf_to_safetensors.py %s %s/conv3 --shards 3",
             SHARED_MODEL("stories260K.gguf"), tmp_root);
    CHECK_EQ_INT(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "%s/conv3/model-00003-of-00003.safetensors", tmp_root);
    CHECK(access(cmd, R_OK) == 0);
    snprintf(cmd, sizeof cmd, "%s/conv3", tmp_root);
    check_converted(cmd, g);
    gguf_close(g);
}

// Tensors are read in place, so each must start at a multiple of its element size in the file:
// a header length that is not a multiple of 8 (the format requires one) shifts the data
// section off alignment, and the first tensor that lands misaligned is refused by name.
TEST(misaligned) {
    const char *dir = new_dir("misaligned", 0);
    const char *h = "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    size_t hl = strlen(h);
    char hdr[128];
    // pad the header to 2 mod 4: the F32 tensor starts 2 bytes off alignment
    snprintf(hdr, sizeof hdr, "%s%.*s", h, (int)((4 + 2 - (8 + hl) % 4) % 4), "   ");
    CHECK((8 + strlen(hdr)) % 4 == 2);
    write_st_pad(dir, "model.safetensors", hdr, data64, 8, 1);
    EXPECT_FAIL(dir, OCT_EINVAL, "tensor 'w' (f32) starts at byte");
    EXPECT_FAIL(dir, OCT_EINVAL, "not a multiple of 8");
    // an F16 tensor 1 byte off, behind an aligned F32 one
    const char *h2 = "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                     "\"b\":{\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[5,7]}}";
    write_st(dir, "model.safetensors", h2, data64, 7);
    EXPECT_FAIL(dir, OCT_EINVAL, "tensor 'b' (f16)");
    // one-byte types need no alignment; the padded header keeps 2- and 4-byte types aligned
    const char *h3 = "{\"a\":{\"dtype\":\"F8_E4M3\",\"shape\":[3],\"data_offsets\":[0,3]},"
                     "\"b\":{\"dtype\":\"BF16\",\"shape\":[1],\"data_offsets\":[4,6]}}";
    write_st(dir, "model.safetensors", h3, data64, 6);
    struct st_dir *d = NULL;
    CHECK_OK(st_open(&d, dir));
    if (d) st_close(d);
}

int main(void) {
    snprintf(tmp_root, sizeof tmp_root, "/tmp/test_st_XXXXXX");
    if (!mkdtemp(tmp_root)) { perror("mkdtemp"); return 1; }
    RUN(single_file);
    RUN(sharded);
    RUN(glob);
    RUN(corrupt);
    RUN(misaligned);
    RUN(converter);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp_root);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp_root);
    return test_summary("safetensors");
}
