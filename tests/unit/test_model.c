// test_model.c — model loading end to end: a safetensors directory converted from the
// GGUF (single file and sharded) gives bit-identical logits; dummy presets have the real
// shapes, are deterministic, run, and honour sliding windows; bad model paths and files
// fail with a message naming the problem.
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/base/check.h"
#include "../../src/engine/runner.h"
#include "../../src/model/forward.h"
#include "../../src/model/model.h"
#include "../test.h"

// Teacher-forced logits of a fixed 40-token sequence.
static int logits_of(struct model *m, float *out, const char *dtype) {
    struct runner_options o;
    runner_options_default(&o);
    snprintf(o.kv.dtype, sizeof o.kv.dtype, "%s", dtype);
    o.max_ctx = 64;
    struct runner r;
    TRY(runner_init(&r, m, &o));
    int32_t ids[40];
    for (int i = 0; i < 40; i++) ids[i] = i == 0 ? 1 : (int32_t)(3 + (i * 37) % (m->cfg.n_vocab - 3));
    int rc = runner_feed(&r, ids, 40, true, out);
    runner_free(&r);
    return rc;
}

TEST(safetensors_equals_gguf) {
    char dir[] = "/tmp/octet_stXXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    struct model *g, *s;
    CHECK_OK(model_load(&g, SHARED_MODEL("stories260K.gguf")));
    size_t n = 40 * 512;
    float *a = malloc(n * 4), *b = malloc(n * 4);
    CHECK_OK(logits_of(g, a, "fp32"));
    for (int shards = 1; shards <= 3; shards += 2) {
        char cmd[512];
        snprintf(cmd, sizeof cmd, "python3 tools/gguf_to_safetensors.py %s %s/m%d --shards %d >/dev/null",
                 SHARED_MODEL("stories260K.gguf"), dir, shards, shards);
        CHECK_EQ_INT(system(cmd), 0);
        char path[256];
        snprintf(path, sizeof path, "%s/m%d", dir, shards);
        CHECK_OK(model_load(&s, path));
        if (!s) continue;
        CHECK_EQ_INT(s->cfg.n_layers, 5);
        CHECK_EQ_INT(s->cfg.n_kv_heads, 4);
        CHECK_EQ_INT(s->cfg.n_vocab, 512);
        CHECK_OK(logits_of(s, b, "fp32"));
        CHECK_MSG(memcmp(a, b, n * 4) == 0, "%d shard(s): logits differ from the GGUF's", shards);
        model_free(s);
        snprintf(cmd, sizeof cmd, "rm -rf %s/m%d", dir, shards);
        CHECK_EQ_INT(system(cmd), 0);
    }
    rmdir(dir);
    free(a);
    free(b);
    model_free(g);
}

TEST(dummy_presets_have_real_shapes) {
    struct model_config c;
    CHECK_OK(dummy_config("llama-3.1-8b", &c));
    CHECK(c.n_layers == 32 && c.n_heads == 32 && c.n_kv_heads == 8 && c.head_dim == 128 && c.dim == 4096);
    CHECK(c.ffn_dim == 14336 && c.n_vocab == 128256 && c.rope.theta == 500000 && c.rope.scaling == ROPE_SCALING_LLAMA3);
    CHECK_OK(dummy_config("llama-3.2-1b", &c));
    CHECK(c.n_layers == 16 && c.dim == 2048 && c.head_dim == 64 && c.n_kv_heads == 8);
    CHECK_OK(dummy_config("gpt-oss-20b-attn", &c));
    CHECK(c.head_dim == 64 && c.sliding_window == 128 && c.layer_sliding[0] && !c.layer_sliding[1] && c.layer_sliding[2]);
    CHECK_OK(dummy_config("gemma-hd256", &c));
    int sliding = 0;
    for (int l = 0; l < 4; l++) sliding += c.layer_sliding[l];
    CHECK(c.head_dim == 256 && c.sliding_window == 512 && sliding == 3);
    CHECK(dummy_config("llama-9", &c) < 0 && strstr(err_msg(), "llama-3.1-8b"));
    int bf16[MODEL_MAX_LAYERS];
    for (int l = 0; l < MODEL_MAX_LAYERS; l++) bf16[l] = 2;
    CHECK_OK(dummy_config("qwen3-8b", &c));
    CHECK(c.n_layers == 36 && c.dim == 4096 && c.n_kv_heads == 8 && c.head_dim == 128 && c.ffn_dim == 12288);
    CHECK(c.qk_norm && !c.attn_bias && c.rope.theta == 1000000 && !strcmp(c.arch, "qwen3"));
    CHECK_EQ_INT(config_kv_bytes_per_token(&c, bf16), 147456);  // 36 layers x 2 x 8 heads x 128 x 2 bytes
    CHECK_OK(dummy_config("gemma-3-4b", &c));
    sliding = 0;
    for (int l = 0; l < c.n_layers; l++) sliding += c.layer_sliding[l];
    CHECK(c.n_layers == 34 && c.head_dim == 256 && c.sliding_window == 512 && sliding == 29 && !c.layer_sliding[5]);
    CHECK(c.post_norms && c.qk_norm && c.act == FFN_ACT_GELU_TANH && c.local_rope && c.rope_local.theta == 10000);
    CHECK(c.rope.scaling == ROPE_SCALING_LINEAR && c.rope.factor == 8 && c.embed_scale == 50.5f);
    CHECK_EQ_INT(config_kv_bytes_per_token(&c, bf16), 139264);
    CHECK_OK(dummy_config("llama-3.3-70b", &c));
    CHECK(c.n_layers == 80 && c.dim == 8192 && c.n_heads == 64 && c.n_kv_heads == 8 && c.ffn_dim == 28672);
    CHECK_EQ_INT(config_kv_bytes_per_token(&c, bf16), 327680);
}

TEST(dummy_deterministic_and_runs) {
    struct model *a, *b;
    CHECK_OK(model_load(&a, "dummy:tiny"));
    CHECK_OK(model_load(&b, "dummy:tiny"));
    if (!a || !b) return;
    CHECK(memcmp(a->layers[2].w_up.data, b->layers[2].w_up.data, (size_t)(a->layers[2].w_up.rows * a->layers[2].w_up.cols) * 2) == 0);
    size_t n = 40 * 512;
    float *x = malloc(n * 4), *y = malloc(n * 4);
    CHECK_OK(logits_of(a, x, "auto"));
    int finite = 1;
    double sd = 0;
    for (size_t i = 0; i < n; i++) { finite &= isfinite(x[i]); sd += x[i] * x[i]; }
    sd = sqrt(sd / n);
    CHECK(finite);
    CHECK_MSG(sd > 0.1 && sd < 20, "logit rms %g", sd);
    CHECK_OK(logits_of(a, y, "fp8"));
    CHECK(memcmp(x, y, n * 4) != 0);
    model_free(a);
    model_free(b);
    free(x);
    free(y);
}

TEST(sliding_window_changes_long_contexts_only) {
    // tiny and tiny-swa share weights (same tensor names and seeds); windows are 64 tokens
    struct model *full, *swa;
    CHECK_OK(model_load(&full, "dummy:tiny"));
    CHECK_OK(model_load(&swa, "dummy:tiny-swa"));
    if (!full || !swa) return;
    struct runner_options o;
    runner_options_default(&o);
    o.max_ctx = 128;
    struct runner r1, r2;
    CHECK_OK(runner_init(&r1, full, &o));
    CHECK_OK(runner_init(&r2, swa, &o));
    int32_t ids[100];
    for (int i = 0; i < 100; i++) ids[i] = (i * 11) % 256;
    float *a = malloc(100 * 512 * 4), *b = malloc(100 * 512 * 4);
    CHECK_OK(runner_feed(&r1, ids, 100, true, a));
    CHECK_OK(runner_feed(&r2, ids, 100, true, b));
    CHECK(memcmp(a, b, 64 * 512 * 4) == 0);                  // positions < window: identical
    CHECK(memcmp(a + 99 * 512, b + 99 * 512, 512 * 4) != 0);  // beyond: differ
    runner_free(&r1);
    runner_free(&r2);
    free(a);
    free(b);
    model_free(full);
    model_free(swa);
}

TEST(bad_models_fail_clearly) {
    struct model *m;
    CHECK(model_load(&m, "/nonexistent/model.gguf") < 0 && strstr(err_msg(), "/nonexistent/model.gguf") && m == NULL);
    CHECK(model_load(&m, "dummy:nope") < 0 && strstr(err_msg(), "nope"));
    char dir[] = "/tmp/octet_badXXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    CHECK(model_load(&m, dir) < 0 && strstr(err_msg(), "config.json"));
    char path[256];
    snprintf(path, sizeof path, "%s/trunc.gguf", dir);
    FILE *in = fopen(SHARED_MODEL("stories260K.gguf"), "rb"), *out = fopen(path, "wb");
    char buf[4096];
    size_t k = fread(buf, 1, sizeof buf, in);
    fwrite(buf, 1, k, out);
    fclose(in);
    fclose(out);
    CHECK(model_load(&m, path) < 0 && strstr(err_msg(), "trunc.gguf"));
    unlink(path);
    rmdir(dir);
}

// One loaded model, its weights' backend copies shared by the forwards of one backend type and
// released by the last: a later forward of another type uploads its own (CUDA once read the CPU's
// host pointers after a CPU runner on the same model), and two types at once are refused.
TEST(weights_follow_the_backend_type) {
    struct model *m;
    CHECK(model_load(&m, "dummy:tiny") == 0);
    if (!m) return;
    struct runner_options o;
    runner_options_default(&o);
    o.max_ctx = 32;
    struct runner r1, r2;
    CHECK(runner_init(&r1, m, &o) == 0);
    CHECK(runner_init(&r2, m, &o) == 0);
    CHECK(m->dev_users == 2 && m->token_embd.dev != NULL && m->layers[0].wq.dev != NULL);
    // a backend of another type (the CPU's ops at another address) while the CPU holds the weights
    struct backend *b = backend_create("cpu", 1);
    CHECK(b != NULL);
    if (b) {
        struct backend_ops other = *b->ops;
        const struct backend_ops *own = b->ops;
        b->ops = &other;
        struct forward f;
        CHECK(forward_init(&f, m, b, 8, 1) < 0 && strstr(err_msg(), "in use by another backend") != NULL);
        runner_free(&r1);
        CHECK(m->dev_users == 1 && m->token_embd.dev != NULL);
        runner_free(&r2);
        CHECK(m->dev_users == 0 && m->token_embd.dev == NULL && m->layers[0].wq.dev == NULL);
        CHECK(forward_init(&f, m, b, 8, 1) == 0);  // now the other type takes them
        CHECK(m->dev_users == 1 && m->dev_ops == (const void *)&other && m->token_embd.dev != NULL);
        forward_free(&f);
        CHECK(m->dev_users == 0 && m->token_embd.dev == NULL);
        b->ops = own;
        b->ops->destroy(b);
    }
    model_free(m);
}

int main(void) {
    RUN(safetensors_equals_gguf);
    RUN(dummy_presets_have_real_shapes);
    RUN(dummy_deterministic_and_runs);
    RUN(sliding_window_changes_long_contexts_only);
    RUN(bad_models_fail_clearly);
    RUN(weights_follow_the_backend_type);
    return test_summary("model");
}
