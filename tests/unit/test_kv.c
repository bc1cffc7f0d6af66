// test_kv.c — kv_pool (allocation, refcounts, exhaustion, no leak), KV options parsing
// (dtypes, skip lists incl. sliding_window), per-layer planning and the scales file;
// fp8_per_token_head's plan, sizes, scale placement and the refusal of backends without it.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/base/check.h"
#include "../../src/model/kv_cache.h"
#include "../../src/engine/kv_pool.h"
#include "../../src/model/model.h"
#include "../test.h"

TEST(pool_alloc_ref_free) {
    struct kv_pool p;
    CHECK_OK(kv_pool_init(&p, 8, 4));
    int ids[8];
    for (int i = 0; i < 8; i++) { ids[i] = kv_pool_alloc(&p); CHECK_EQ_INT(ids[i], i); }
    CHECK_EQ_INT(kv_pool_alloc(&p), OCT_EFULL);
    CHECK(strstr(err_msg(), "8 blocks") != NULL);
    kv_pool_ref(&p, ids[3]);
    kv_pool_unref(&p, ids[3]);
    CHECK_EQ_INT(p.n_free, 0);
    kv_pool_unref(&p, ids[3]);
    CHECK_EQ_INT(p.n_free, 1);
    CHECK_EQ_INT(kv_pool_alloc(&p), 3);
    for (int i = 0; i < 8; i++) kv_pool_unref(&p, ids[i]);
    CHECK_EQ_INT(p.n_free, 8);
    CHECK_OK(kv_pool_check(&p));
    // random churn keeps the invariant
    srand(7);
    int held[64], n_held = 0;
    for (int step = 0; step < 10000; step++) {
        if (n_held < 8 && (rand() & 1)) { int id = kv_pool_alloc(&p); CHECK(id >= 0); held[n_held++] = id; }
        else if (n_held > 0) { int k = rand() % n_held; kv_pool_unref(&p, held[k]); held[k] = held[--n_held]; }
    }
    CHECK_OK(kv_pool_check(&p));
    while (n_held) kv_pool_unref(&p, held[--n_held]);
    CHECK_EQ_INT(p.n_free, 8);
    kv_pool_free(&p);
    CHECK(kv_pool_init(&p, 0, 4) < 0);
}

TEST(options_parse) {
    struct kv_options o;
    kv_options_default(&o);
    CHECK_OK(kv_options_set_dtype(&o, "fp8_e5m2"));
    CHECK(kv_options_set_dtype(&o, "int4") < 0);
    CHECK(strstr(err_msg(), "int4") && strstr(err_msg(), "fp8_e4m3"));
    CHECK_OK(kv_options_set_skip(&o, "0 2,5"));
    CHECK(o.skip[0] && !o.skip[1] && o.skip[2] && o.skip[5]);
    CHECK_OK(kv_options_set_skip(&o, "sliding_window"));
    CHECK(o.skip_sliding);
    CHECK(kv_options_set_skip(&o, "3x") < 0);
    CHECK(strstr(err_msg(), "'3x'") != NULL);
    CHECK(kv_options_set_skip(&o, "-1") < 0);
    enum dtype d;
    CHECK_OK(kv_dtype_parse("fp8", DT_BF16, &d)); CHECK_EQ_INT(d, DT_E4M3);
    CHECK_OK(kv_dtype_parse("auto", DT_BF16, &d)); CHECK_EQ_INT(d, DT_BF16);
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

TEST(plan_skip_layers_and_scales) {
    struct model *m;
    CHECK_OK(model_load(&m, "dummy:tiny-swa"));
    if (!m) return;
    struct kv_options o;
    kv_options_default(&o);
    CHECK_OK(kv_options_set_dtype(&o, "fp8"));
    CHECK_OK(kv_options_set_skip(&o, "sliding_window 3"));
    struct kv_cache kv;
    CHECK_OK(kv_cache_plan(&kv, m, &o, 16));
    // tiny-swa: layers 0 and 2 slide (window 64), 1 and 3 are global
    CHECK_EQ_INT(kv.layers[0].dtype, DT_BF16);
    CHECK_EQ_INT(kv.layers[0].window, 64);
    CHECK_EQ_INT(kv.layers[1].dtype, DT_E4M3);
    CHECK_EQ_INT(kv.layers[1].window, 0);
    CHECK_EQ_INT(kv.layers[3].dtype, DT_BF16);
    CHECK_EQ_INT(kv.layers[2].dtype, DT_BF16);
    // layers 0, 2, 3 bf16 + layer 1 fp8; each: K+V x 2 KV heads x 32 dims
    CHECK_EQ_INT(kv_cache_bytes_per_token(&kv), 3 * (2 * 2 * 32 * 2) + 1 * (2 * 2 * 32 * 1));
    char dir[] = "/tmp/octet_kvXXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[64];
    snprintf(path, sizeof path, "%s/s.json", dir);
    write_file(path, "{\"format\":\"octet-kv-scales/1\",\"layers\":[{\"k_scale\":0.5,\"v_scale\":[0.25]},"
                     "{\"k_scale\":[1,2],\"v_scale\":0.125},{\"k_scale\":1,\"v_scale\":1},{\"k_scale\":1,\"v_scale\":1}]}");
    snprintf(o.scales_path, sizeof o.scales_path, "%s", path);
    CHECK_OK(kv_cache_plan(&kv, m, &o, 16));
    CHECK(kv.layers[0].k_scale[1] == 0.5f && kv.layers[0].v_scale[0] == 0.25f);
    CHECK(kv.layers[1].k_scale[0] == 1.0f && kv.layers[1].k_scale[1] == 2.0f && kv.layers[1].v_scale[1] == 0.125f);
    const char *bad[] = {
        "{\"layers\":[]}",                                                   // wrong layer count
        "{\"layers\":[{\"k_scale\":0,\"v_scale\":1},{},{},{}]}",            // zero scale
        "{\"layers\":[{\"k_scale\":[1,2,3],\"v_scale\":1},{},{},{}]}",      // 3 heads
        "{\"layers\":[{\"v_scale\":1},{},{},{}]}",                           // missing k_scale
        "not json",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_file(path, bad[i]);
        CHECK_MSG(kv_cache_plan(&kv, m, &o, 16) < 0 && strstr(err_msg(), "s.json"), "case %zu: %s", i, err_msg());
    }
    // k_offset: one [head_dim] array for every head, or [n_kv_heads][head_dim]; FP8 layers only
    // (layer 0 is a bf16 skip layer here, so its offsets are parsed but not applied)
    char good[4096], row[512];
    int hd = kv.layers[1].head_dim;
    size_t at = 0;
    for (int i = 0; i < hd; i++) at += (size_t)snprintf(row + at, sizeof row - at, "%s%d", i ? "," : "", i - 3);
    snprintf(good, sizeof good, "{\"layers\":[{\"k_scale\":1,\"v_scale\":1,\"k_offset\":[%s]},"
             "{\"k_scale\":1,\"v_scale\":1,\"k_offset\":[[%s],[%s]]},{\"k_scale\":1,\"v_scale\":1},"
             "{\"k_scale\":1,\"v_scale\":1}]}", row, row, row);
    write_file(path, good);
    CHECK_OK(kv_cache_plan(&kv, m, &o, 16));
    CHECK(kv.layers[0].k_offset == NULL && kv.layers[2].k_offset == NULL && kv.layers[3].k_offset == NULL);
    CHECK(kv.layers[1].k_offset != NULL);
    if (kv.layers[1].k_offset) CHECK(kv.layers[1].k_offset[0] == -3.0f && kv.layers[1].k_offset[hd + 5] == 2.0f);
    kv_cache_free(&kv);
    CHECK(kv.k_offsets == NULL && kv.layers[1].k_offset == NULL);
    const char *bad_off[] = {
        "{\"layers\":[{\"k_scale\":1,\"v_scale\":1},{\"k_scale\":1,\"v_scale\":1,\"k_offset\":[1,2]},{\"k_scale\":1,\"v_scale\":1},{\"k_scale\":1,\"v_scale\":1}]}",
        "{\"layers\":[{\"k_scale\":1,\"v_scale\":1},{\"k_scale\":1,\"v_scale\":1,\"k_offset\":[[1],[2],[3]]},{\"k_scale\":1,\"v_scale\":1},{\"k_scale\":1,\"v_scale\":1}]}",
        "{\"layers\":[{\"k_scale\":1,\"v_scale\":1},{\"k_scale\":1,\"v_scale\":1,\"k_offset\":\"x\"},{\"k_scale\":1,\"v_scale\":1},{\"k_scale\":1,\"v_scale\":1}]}",
    };
    for (size_t i = 0; i < sizeof bad_off / sizeof bad_off[0]; i++) {
        write_file(path, bad_off[i]);
        CHECK_MSG(kv_cache_plan(&kv, m, &o, 16) < 0 && strstr(err_msg(), "k_offset") && strstr(err_msg(), "layer 1"),
                  "offset case %zu: %s", i, err_msg());
        CHECK(kv.k_offsets == NULL);
    }
    kv_options_default(&o);
    CHECK_OK(kv_options_set_skip(&o, "9"));
    CHECK(kv_cache_plan(&kv, m, &o, 16) < 0 && strstr(err_msg(), "layer 9"));
    unlink(path);
    rmdir(dir);
    model_free(m);
}

// K offsets cancel only in a plain softmax (every score of a query shifts by q·o): a model with attention
// sinks (dummy:tiny-gpt-oss) or soft-capped scores (the gemma2 fixture) refuses a scales file that has
// them, naming the file, the layer and the reason, and keeps no offsets; the same file without offsets loads.
TEST(k_offsets_refused_with_sinks_or_softcap) {
    const char *models[] = {"dummy:tiny-gpt-oss", "tests/data/hf/gemma2"}, *why[] = {"sinks", "soft-caps"};
    char dir[] = "/tmp/octet_kvoffXXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[64];
    snprintf(path, sizeof path, "%s/s.json", dir);
    for (int i = 0; i < 2; i++) {
        struct model *m;
        CHECK_OK(model_load(&m, models[i]));
        if (!m) continue;
        CHECK(kv_offsets_refused(&m->cfg) != NULL);
        struct kv_options o;
        kv_options_default(&o);
        CHECK_OK(kv_options_set_dtype(&o, "fp8"));
        snprintf(o.scales_path, sizeof o.scales_path, "%s", path);
        char json[8192], row[1024], layers[8192] = "";
        const int hd = m->cfg.head_dim, nl = m->cfg.n_layers;
        size_t at = 0, al = 0;
        for (int d = 0; d < hd; d++) at += (size_t)snprintf(row + at, sizeof row - at, "%s0.5", d ? "," : "");
        for (int l = 0; l < nl; l++)
            al += (size_t)snprintf(layers + al, sizeof layers - al, "%s{\"k_scale\":1,\"v_scale\":1%s%s%s}",
                                   l ? "," : "", l == nl - 1 ? ",\"k_offset\":[" : "", l == nl - 1 ? row : "",
                                   l == nl - 1 ? "]" : "");
        snprintf(json, sizeof json, "{\"layers\":[%s]}", layers);
        write_file(path, json);
        struct kv_cache kv;
        CHECK_MSG(kv_cache_plan(&kv, m, &o, 16) < 0 && strstr(err_msg(), "s.json") && strstr(err_msg(), "k_offset") &&
                      strstr(err_msg(), why[i]),
                  "%s: %s", models[i], err_msg());
        CHECK(kv.k_offsets == NULL);
        al = 0;
        for (int l = 0; l < nl; l++)
            al += (size_t)snprintf(layers + al, sizeof layers - al, "%s{\"k_scale\":1,\"v_scale\":1}", l ? "," : "");
        snprintf(json, sizeof json, "{\"layers\":[%s]}", layers);
        write_file(path, json);
        CHECK_OK(kv_cache_plan(&kv, m, &o, 16));
        kv_cache_free(&kv);
        model_free(m);
    }
    struct model *m;  // a plain softmax takes them (the test above loads offsets into dummy:tiny-swa)
    CHECK_OK(model_load(&m, "dummy:tiny"));
    if (m) CHECK(kv_offsets_refused(&m->cfg) == NULL);
    model_free(m);
    unlink(path);
    rmdir(dir);
}

// fp8_per_token_head: planned as e4m3 with dynamic scales on every layer but the skip layers,
// static scales (checkpoint or file) set aside; bytes per token count one f32 per KV head for K
// and V; the scales live after each layer's pages; a backend without kv_token_scales is refused
// at allocation with an error naming the dtype and the backend.
TEST(token_scales_plan_alloc_and_refusal) {
    struct model *m;
    CHECK_OK(model_load(&m, "dummy:tiny-swa"));
    if (!m) return;
    struct kv_options o;
    kv_options_default(&o);
    CHECK_OK(kv_options_set_dtype(&o, "fp8_per_token_head"));
    CHECK(kv_dtype_token_scales("fp8_per_token_head") && !kv_dtype_token_scales("fp8"));
    CHECK_OK(kv_options_set_skip(&o, "sliding_window"));
    struct kv_cache kv;
    CHECK_OK(kv_cache_plan(&kv, m, &o, 16));
    CHECK(!kv.tok_scales[0] && kv.tok_scales[1] && !kv.tok_scales[2] && kv.tok_scales[3]);
    CHECK_EQ_INT(kv.layers[1].dtype, DT_E4M3);
    CHECK_EQ_INT(kv.layers[0].dtype, DT_BF16);
    // 2 bf16 layers + 2 e4m3 layers with 2 KV heads x (K, V) x 4 scale bytes
    CHECK_EQ_INT(kv_cache_bytes_per_token(&kv), 2 * (2 * 2 * 32 * 2) + 2 * (2 * 2 * 32 * 1 + 2 * 2 * 4));
    struct backend *b = backend_cpu_create(1);
    CHECK_OK(kv_cache_alloc(&kv, b, 3));
    size_t at;
    size_t bytes = kv_layer_bytes(&kv.layers[1], true, 3, &at);
    CHECK_EQ_INT(at, 3 * 2 * 16 * 32);
    CHECK_EQ_INT(bytes, at + 3 * 2 * 16 * 4);
    CHECK(kv.layers[1].k_tok_scale == (float *)((char *)kv.layers[1].k + at));
    CHECK(kv.layers[1].v_tok_scale == (float *)((char *)kv.layers[1].v + at));
    CHECK(kv.layers[0].k_tok_scale == NULL && kv.layers[2].v_tok_scale == NULL);
    CHECK_EQ_INT(kv.bytes, 2 * (2 * kv_layer_bytes(&kv.layers[0], false, 3, &at)) + 2 * (2 * bytes));
    kv_cache_free(&kv);
    CHECK(kv.layers[1].k_tok_scale == NULL);
    // a scales file's static scales are set aside (its K offsets still apply)
    char dir[] = "/tmp/octet_kvtXXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    snprintf(o.scales_path, sizeof o.scales_path, "%s/s.json", dir);
    write_file(o.scales_path, "{\"layers\":[{\"k_scale\":0.5,\"v_scale\":0.5},{\"k_scale\":0.5,\"v_scale\":0.25},"
                              "{\"k_scale\":1,\"v_scale\":1},{\"k_scale\":1,\"v_scale\":1}]}");
    CHECK_OK(kv_cache_plan(&kv, m, &o, 16));
    CHECK(kv.layers[1].k_scale[0] == 1.0f && kv.layers[1].v_scale[1] == 1.0f);
    CHECK(kv.layers[0].k_scale[0] == 0.5f);  // (a bf16 skip layer: unused either way)
    unlink(o.scales_path);
    rmdir(dir);
    // a backend without the capability: the CPU's ops with kv_token_scales off, named "cuda"
    struct backend_ops ops = *b->ops;
    ops.kv_token_scales = false;
    ops.name = "cuda";
    const struct backend_ops *keep = b->ops;
    b->ops = &ops;
    CHECK(kv_cache_alloc(&kv, b, 3) == OCT_EUNSUP);
    CHECK_MSG(strstr(err_msg(), "fp8_per_token_head") && strstr(err_msg(), "cuda"), "%s", err_msg());
    CHECK(kv.layers[1].k == NULL);
    kv_options_default(&o);  // other dtypes need no capability
    CHECK_OK(kv_options_set_dtype(&o, "fp8"));
    CHECK_OK(kv_cache_plan(&kv, m, &o, 16));
    CHECK_OK(kv_cache_alloc(&kv, b, 3));
    kv_cache_free(&kv);
    b->ops = keep;
    b->ops->destroy(b);
    model_free(m);
}

int main(void) {
    RUN(pool_alloc_ref_free);
    RUN(options_parse);
    RUN(plan_skip_layers_and_scales);
    RUN(k_offsets_refused_with_sinks_or_softcap);
    RUN(token_scales_plan_alloc_and_refusal);
    return test_summary("kv");
}
