// test_hf_cuda.c — the tiny transformers checkpoints of tests/data/hf (every dense family: Llama with
// its RoPE scalings, biases and GeGLU, Qwen2, Qwen3, Mistral, Gemma 2 and 3, Phi-3; the mixtures of
// experts Mixtral and Qwen3-MoE, and gpt-oss, also as GGUF, where the backend has attention sinks) through the CUDA
// backend against the CPU backend with the same KV cache type (run by scripts/gpu_check.sh's hf
// stage from the repository root; built with `make CUDA=1 gpu-tests`). Per fixture and cache (bf16;
// fp8; fp8 with the sliding-window layers kept in bf16): the teacher-forced sequence in one step
// (the prefill kernels) and the greedy path token by token (the decode kernels, captured graphs),
// each row's KL divergence KL(cpu ‖ cuda) and top-1 agreement. For the mixtures of experts also each
// token's routing on both backends (the forward probe's router input, routed on the host): rows
// whose routing differs are routing near-ties, checked apart (see route_check). Prints one line per
// check, a JSON summary to argv[1], and "N passed, N failed".
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/backend/backend.h"
#include "../../src/base/argmax.h"
#include "../../src/base/check.h"
#include "../../src/base/half.h"
#include "../../src/engine/runner.h"
#include "../../src/model/model.h"
#include "../test.h"

static const char *const fixtures[] = {"llama3_rope", "llama_yarn_bias", "llama_linear", "llama_dynamic", "qwen2",
                                       "qwen3",       "mistral",         "gemma2",       "gemma3",        "phi3",
                                       "mixtral",     "mixtral_fused",   "mixtral_routed", "qwen3_moe",
                                       "qwen3_moe_routed", "qwen3_moe_topk"};
#define N_FIXTURES (sizeof fixtures / sizeof fixtures[0])
// gpt-oss (moe_ffn with biases and the clamped SwiGLU, MXFP4 experts in gptoss_mxfp4) also needs attention
// sinks: run where the CUDA backend reports ops->attn_sinks. NAME.gguf is tests/data/hf_gguf/NAME.gguf
// (llama.cpp's layout of the same checkpoint) against tests/data/hf/NAME/ref.json.
static const char *const sink_fixtures[] = {"gptoss", "gptoss_mxfp4", "gptoss_mxfp4.gguf"};
#define N_SINK_FIXTURES (sizeof sink_fixtures / sizeof sink_fixtures[0])

// The bounds. The CUDA backend keeps activations in bf16 (8 significant bits: each rounding is off
// by up to 2^-9 ≈ 0.2 % relative); along these models' path (2–3 layers of width 64: norms,
// projections, attention, FFN, residual adds, the final norm and the output product) a dozen
// roundings leave logit errors δ of about 1 % of the logits' spread, a few hundredths of a nat
// here. For small δ, KL(p ‖ q) ≈ ½·Var_p(δ): δ of 0.03 gives 5e-4, so a mean of 2e-3 leaves room
// 4× and a worst row of 2e-2 room for a δ of 0.2. With an fp8 (e4m3) cache on both backends the
// bytes are the same except where a bf16 K or V lands on the other side of an e4m3 rounding
// boundary than the CPU's f32 one (a step of 1/16 relative on that element), and the GPU's FP8
// prefill kernels also round Q and P to e4m3 where the CPU widens exactly (about 2 % rms on each
// score and weight): logit δ up to about 0.1, so the bounds are 5× looser (mean 1e-2, worst 5e-2).
// Top-1: these random-weight models have near ties (Gemma 2's
// final soft-cap at 3 leaves margins of 0.001), so the top-1 must agree only where the CPU's
// top-1 − top-2 margin exceeds the δ above several times over (0.25 nats bf16, 0.5 fp8); rows
// inside it are counted and reported, not failed.
// Routing: a mixture of experts picks its top-k experts by the router's logits, a step function of
// the activations. These random routers leave the k-th and (k+1)-th logits of some tokens a few
// hundredths of their spread apart, inside the GPU's activation error above (bf16 xn, and with an
// fp8 cache the attention's rounding upstream), so a token may take another expert on the GPU: a
// different function, whose row rightly fails the KL bound. The test routes each token on both
// backends from their own router inputs and sets the rows whose routing differs apart, bounded: the
// sequence's first differing decision (by position, then layer) must be a near tie on the CPU (its
// gap at most route_gap of the logits' rms: 0.1 with a bf16 cache, 0.3 with fp8, several times the
// relative error each leaves; later ones may follow from it: a token that took another expert
// changes what later tokens attend to by more than the rounding), and at most a quarter of the rows
// may differ. A wrong router (weights, bias, top-k, its input) differs first at a wide gap and fails.
// Some models move far more under an fp8 cache than others (gpt-oss here: its sinks and biases make the
// CPU's own fp8-cache logits differ from its bf16-cache ones by a KL of up to 0.6 in a row, against 0.02
// for the dense fixtures), and a one-step difference in a K or V byte moves them in proportion. So with an
// fp8 cache each bound is the larger of the one above and a quarter of that movement on the CPU (the
// row KL(cpu bf16 cache ‖ cpu fp8 cache), mean and max): the GPU must stay well inside what the cache's
// quantization itself does.
struct mode {
    const char *name, *kv, *skip;
    double kl_mean, kl_max, margin, route_gap;
};
static const struct mode modes[] = {
    {"bf16", "bf16", NULL, 2e-3, 2e-2, 0.25, 0.1},
    {"fp8", "fp8", NULL, 1e-2, 5e-2, 0.5, 0.3},
    {"fp8 skip sliding_window", "fp8", "sliding_window", 1e-2, 5e-2, 0.5, 0.3},
};
#define N_MODES (sizeof modes / sizeof modes[0])

static json_t *report;

static int ints(json_t *a, int32_t *out, int max) {
    int n = (int)json_array_size(a);
    for (int i = 0; i < n && i < max; i++) out[i] = (int32_t)json_integer_value(json_array_get(a, (size_t)i));
    return n < max ? n : max;
}

// Each token's routing in one pass over a sequence: the probe's router input (PROBE_MOE_IN) times the
// router's f32 rows plus its bias, in double on the host; per position and layer the chosen experts
// (a bit set; ties to the lower index, as moe_route) and the gap between the k-th and (k+1)-th logit
// over the logits' rms.
#define MAX_POS 64
#define MAX_LAYERS 8
struct routes {
    const struct model *m;
    const float *wr;  // [n_layers][E][dim] the routers, f32
    int pos;          // the next step's first position
    uint64_t set[MAX_POS][MAX_LAYERS];
    double gap[MAX_POS][MAX_LAYERS];
};

static void route_probe(void *ctx, int layer, enum probe_kind kind, const float *x, int n, int width) {
    struct routes *rt = ctx;
    const struct model_config *c = &rt->m->cfg;
    if (kind != PROBE_MOE_IN) return;
    const int E = c->n_experts, K = c->n_experts_used;
    const struct weight *rb = &rt->m->layers[layer].ffn_router_b;
    for (int t = 0; t < n && rt->pos + t < MAX_POS; t++) {
        double lg[64], ss = 0;
        for (int e = 0; e < E; e++) {
            const float *w = rt->wr + ((size_t)layer * E + e) * width;
            double d = 0;
            for (int i = 0; i < width; i++) d += (double)w[i] * x[(size_t)t * width + i];
            if (rb->data && rb->dtype == DT_BF16) d += bf16_to_f32(((const uint16_t *)rb->data)[e]);
            else if (rb->data && rb->dtype == DT_F16) d += f16_to_f32(((const uint16_t *)rb->data)[e]);
            else if (rb->data) d += ((const float *)rb->data)[e];
            lg[e] = d;
            ss += d * d;
        }
        uint64_t set = 0;
        double kth = 0, next = -INFINITY;
        for (int j = 0; j <= K && j < E; j++) {
            int best = -1;
            for (int e = 0; e < E; e++)
                if (!(set >> e & 1) && (best < 0 || lg[e] > lg[best])) best = e;
            if (j < K) { set |= 1ull << best; kth = lg[best]; }
            else next = lg[best];
        }
        rt->set[rt->pos + t][layer] = set;
        rt->gap[rt->pos + t][layer] = (kth - next) / sqrt(ss / E + 1e-30);
    }
    if (layer == c->n_layers - 1) rt->pos += n;
}

// The routers as f32 [n_layers][E][dim], or NULL where the model has no experts (or they do not fit the
// records above).
static float *routers_f32(const struct model *m) {
    const struct model_config *c = &m->cfg;
    if (c->n_experts <= 0) return NULL;
    CHECK_MSG(c->n_experts <= 64 && c->n_layers <= MAX_LAYERS, "routing records: %d experts, %d layers",
              c->n_experts, c->n_layers);
    if (c->n_experts > 64 || c->n_layers > MAX_LAYERS) return NULL;
    float *wr = malloc((size_t)c->n_layers * c->n_experts * c->dim * sizeof(float));
    for (int l = 0; l < c->n_layers; l++) {
        const struct weight *w = &m->layers[l].ffn_router;
        float *dst = wr + (size_t)l * c->n_experts * c->dim;
        const size_t count = (size_t)c->n_experts * c->dim;
        if (w->dtype == DT_BF16) bf16_row_to_f32(w->data, dst, count);
        else if (w->dtype == DT_F16) f16_row_to_f32(w->data, dst, count);
        else if (w->dtype == DT_F32) memcpy(dst, w->data, count * sizeof(float));
        else {
            CHECK_MSG(false, "router of layer %d: dtype %s", l, dtype_name(w->dtype));
            free(wr);
            return NULL;
        }
    }
    return wr;
}

// Logits of the fixture's sequence on one device: tf [n][V] teacher-forced in one step, dec [ng][V]
// the rows of the greedy path (the prompt in one step, then gen[k] one token a step). With rt (rt[0]
// the teacher-forced pass, rt[1] the greedy path) each token's routing is recorded, every step eager.
static int run(struct model *m, const char *device, const struct mode *md, const int32_t *tok, int n,
               const int32_t *prompt, int np, const int32_t *gen, int ng, float *tf, float *dec, struct routes *rt) {
    const int V = m->cfg.n_vocab;
    struct runner_options o;
    runner_options_default(&o);
    snprintf(o.device, sizeof o.device, "%s", device);
    o.max_ctx = 128;
    o.n_threads = 2;
    o.enforce_eager = rt != NULL;  // (the probe copies to the host: no captured graphs)
    if (kv_options_set_dtype(&o.kv, md->kv) || (md->skip && kv_options_set_skip(&o.kv, md->skip))) return -1;
    struct runner r;
    if (runner_init(&r, m, &o)) return -1;
    if (rt) {
        r.fw.probe = route_probe;
        r.fw.probe_ctx = &rt[0];
    }
    int rc = runner_feed(&r, tok, n, true, tf);
    runner_reset(&r);
    if (rt) r.fw.probe_ctx = &rt[1];
    if (!rc) rc = runner_feed(&r, prompt, np, false, dec);
    for (int k = 0; k + 1 < ng && !rc; k++) rc = runner_feed(&r, &gen[k], 1, false, dec + (size_t)(k + 1) * V);
    runner_free(&r);
    return rc;
}

// Marks the rows (row r is position first + r) whose routing differs between the backends in skip[rows];
// returns how many, with the CPU gap of the sequence's first differing decision in *first_gap (positions
// before first included: the prompt's).
static int route_diff(const struct routes *cpu, const struct routes *gpu, int first, int rows, int L, bool *skip,
                      double *first_gap) {
    int count = 0;
    bool seen = false;
    for (int p = 0; p < first + rows && p < MAX_POS; p++) {
        bool differs = false;
        for (int l = 0; l < L; l++)
            if (cpu->set[p][l] != gpu->set[p][l]) {
                if (!seen) *first_gap = cpu->gap[p][l];
                seen = differs = true;
            }
        if (p >= first) {
            skip[p - first] = differs;
            count += differs;
        }
    }
    return count;
}

// log-softmax of a row into lp
static void log_softmax(const float *z, int V, double *lp) {
    double mx = -INFINITY, s = 0;
    for (int i = 0; i < V; i++) mx = z[i] > mx ? z[i] : mx;
    for (int i = 0; i < V; i++) s += exp(z[i] - mx);
    for (int i = 0; i < V; i++) lp[i] = z[i] - mx - log(s);
}

struct stats {
    double kl_sum, kl_max, route_gap;
    int rows, agree, ties, tie_disagree, disagree, rerouted;
};

// KL(cpu ‖ cuda) and top-1 agreement of `rows` rows, but those set in skip (NULL: none)
static void compare(const float *cpu, const float *gpu, int rows, int V, double margin, const bool *skip,
                    struct stats *st) {
    double *p = malloc((size_t)V * sizeof(double)), *q = malloc((size_t)V * sizeof(double));
    for (int r = 0; r < rows; r++) {
        if (skip && skip[r]) continue;
        const float *a = cpu + (size_t)r * V, *b = gpu + (size_t)r * V;
        log_softmax(a, V, p);
        log_softmax(b, V, q);
        double kl = 0;
        for (int i = 0; i < V; i++) kl += exp(p[i]) * (p[i] - q[i]);
        st->kl_sum += kl;
        st->kl_max = kl > st->kl_max ? kl : st->kl_max;
        st->rows++;
        int top = logits_argmax(a, V), second = -1;
        for (int i = 0; i < V; i++)
            if (i != top && (second < 0 || a[i] > a[second])) second = i;
        const bool same = logits_argmax(b, V) == top, tie = a[top] - a[second] < margin;
        st->agree += same;
        st->ties += tie;
        if (!same) ++*(tie ? &st->tie_disagree : &st->disagree);
    }
    free(p);
    free(q);
}

static void check_fixture(const char *name, const struct mode *md) {
    char dir[256], path[300];
    const size_t nl = strlen(name);
    const bool gguf = nl > 5 && !strcmp(name + nl - 5, ".gguf");
    if (gguf) snprintf(dir, sizeof dir, "tests/data/hf_gguf/%s", name);
    else snprintf(dir, sizeof dir, "tests/data/hf/%s", name);
    snprintf(path, sizeof path, "tests/data/hf/%.*s/ref.json", (int)(gguf ? nl - 5 : nl), name);
    json_error_t e;
    json_t *ref = json_load_file(path, 0, &e);
    CHECK_MSG(ref != NULL, "%s: %s", path, e.text);
    if (!ref) return;
    int32_t tok[64], prompt[64], gen[64];
    const int n = ints(json_object_get(ref, "tokens"), tok, 64), np = ints(json_object_get(ref, "prompt"), prompt, 64),
              ng = ints(json_object_get(ref, "gen"), gen, 64);
    json_decref(ref);
    struct model *m;
    int rc = model_load(&m, dir);
    CHECK_MSG(rc == 0, "%s: %s", name, err_msg());
    if (rc) return;
    const int V = m->cfg.n_vocab;
    float *tf[2], *dec[2];
    float *wr = routers_f32(m);
    struct routes *rt = wr ? calloc(4, sizeof *rt) : NULL;  // cpu tf, cpu greedy, cuda tf, cuda greedy
    for (int i = 0; rt && i < 4; i++) { rt[i].m = m; rt[i].wr = wr; }
    for (int d = 0; d < 2; d++) {
        tf[d] = malloc((size_t)n * V * sizeof(float));
        dec[d] = malloc((size_t)ng * V * sizeof(float));
        rc = run(m, d ? "cuda" : "cpu", md, tok, n, prompt, np, gen, ng, tf[d], dec[d], d || !rt ? NULL : rt);
        CHECK_MSG(rc == 0, "%s %s on %s: %s", name, md->name, d ? "cuda" : "cpu", err_msg());
    }
    if (!rc && rt) {  // the CUDA backend's routing, from an eager pass with the probe
        float *tf_e = malloc((size_t)n * V * sizeof(float)), *dec_e = malloc((size_t)ng * V * sizeof(float));
        rc = run(m, "cuda", md, tok, n, prompt, np, gen, ng, tf_e, dec_e, rt + 2);
        CHECK_MSG(rc == 0, "%s %s on cuda, probed: %s", name, md->name, err_msg());
        free(tf_e);
        free(dec_e);
    }
    struct stats moved[2] = {{0}};  // KL(cpu bf16 cache ‖ cpu fp8 cache) per path: the cache's own movement
    if (!rc && strcmp(md->kv, "bf16")) {
        float *tf_b = malloc((size_t)n * V * sizeof(float)), *dec_b = malloc((size_t)ng * V * sizeof(float));
        rc = run(m, "cpu", &modes[0], tok, n, prompt, np, gen, ng, tf_b, dec_b, NULL);
        CHECK_MSG(rc == 0, "%s bf16 on cpu: %s", name, err_msg());
        if (!rc) {
            compare(tf_b, tf[0], n, V, md->margin, NULL, &moved[0]);
            compare(dec_b, dec[0], ng, V, md->margin, NULL, &moved[1]);
        }
        free(tf_b);
        free(dec_b);
    }
    if (!rc) {
        struct stats s[2] = {{0}};
        bool skip[2][MAX_POS] = {{false}};
        if (rt) {
            s[0].rerouted = route_diff(&rt[0], &rt[2], 0, n, m->cfg.n_layers, skip[0], &s[0].route_gap);
            s[1].rerouted = route_diff(&rt[1], &rt[3], np - 1, ng, m->cfg.n_layers, skip[1], &s[1].route_gap);
        }
        compare(tf[0], tf[1], n, V, md->margin, skip[0], &s[0]);
        compare(dec[0], dec[1], ng, V, md->margin, skip[1], &s[1]);
        static const char *const path_name[2] = {"teacher-forced", "greedy path"};
        for (int k = 0; k < 2; k++) {
            const int all = k ? ng : n;
            const double mean = s[k].rows ? s[k].kl_sum / s[k].rows : 0;
            const bool route_ok = s[k].route_gap <= md->route_gap && 4 * s[k].rerouted <= all;
            const double b_mean = fmax(md->kl_mean, moved[k].rows ? 0.25 * moved[k].kl_sum / moved[k].rows : 0),
                         b_max = fmax(md->kl_max, 0.25 * moved[k].kl_max);
            const bool ok = mean <= b_mean && s[k].kl_max <= b_max && s[k].disagree == 0 && route_ok;
            char label[160], routed[96] = "";
            snprintf(label, sizeof label, "%s %s cache, %s", name, md->name, path_name[k]);
            if (rt)
                snprintf(routed, sizeof routed, " rerouted %d/%d (first at gap %.3f, bound %.2f)", s[k].rerouted, all,
                         s[k].route_gap, md->route_gap);
            fprintf(stderr, "  %-52s KL mean %.2e max %.2e (bounds %.1e %.1e) top-1 %d/%d (ties %d, %d differ)%s%s\n",
                    label, mean, s[k].kl_max, b_mean, b_max, s[k].agree, s[k].rows, s[k].ties,
                    s[k].tie_disagree, routed, ok ? "" : "  FAIL");
            CHECK_MSG(ok, "%s: KL mean %.3g max %.3g, %d top-1 differences outside near ties, %d rows rerouted (the "
                      "first at CPU gap %.3g)", label, mean, s[k].kl_max, s[k].disagree, s[k].rerouted, s[k].route_gap);
            json_t *o = json_pack("{s:s,s:s,s:s,s:f,s:f,s:f,s:f,s:i,s:i,s:i,s:i,s:i,s:f,s:b}", "fixture", name,
                                  "cache", md->name, "path", path_name[k], "kl_mean", mean, "kl_max", s[k].kl_max,
                                  "bound_mean", b_mean, "bound_max", b_max, "rows", s[k].rows, "top1_agree",
                                  s[k].agree, "near_ties", s[k].ties, "top1_differ_outside_ties", s[k].disagree,
                                  "rerouted_rows", s[k].rerouted, "rerouted_first_gap", s[k].route_gap, "ok", ok);
            json_array_append_new(report, o);
        }
    }
    for (int d = 0; d < 2; d++) { free(tf[d]); free(dec[d]); }
    free(rt);
    free(wr);
    model_free(m);
}

TEST(hf_fixtures_cuda_vs_cpu) {
    for (size_t i = 0; i < N_FIXTURES; i++)
        for (size_t k = 0; k < N_MODES; k++) check_fixture(fixtures[i], &modes[k]);
    struct backend *b = backend_cuda_create(0);
    const bool sinks = b && b->ops->attn_sinks;
    if (b) b->ops->destroy(b);
    if (!sinks) fprintf(stderr, "  (gpt-oss fixtures skipped: the cuda backend has no attention sinks)\n");
    for (size_t i = 0; sinks && i < N_SINK_FIXTURES; i++)
        for (size_t k = 0; k < N_MODES; k++) check_fixture(sink_fixtures[i], &modes[k]);
}

int main(int argc, char **argv) {
    report = json_array();
    RUN(hf_fixtures_cuda_vs_cpu);
    if (argc > 1) json_dump_file(report, argv[1], JSON_INDENT(1));
    json_decref(report);
    return test_summary("hf_cuda");
}
