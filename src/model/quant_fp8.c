// quant_fp8.c — FP8 weights after load (see quant_fp8.h): at-load e4m3 quantization of the
// attention and FFN projections and the output head, the gate's e5m2 activation switch, and the
// weight bytes by dtype. Mixture-of-experts experts are quantized too (their stacked weights: a scale per
// row, or 128x128 tiles when each expert's rows are whole tiles), unless they are MXFP4; routers,
// embeddings, norms and biases keep their dtypes.
#include "quant_fp8.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/check.h"
#include "../base/fp8.h"
#include "../base/half.h"
#include "../base/threadpool.h"

int quant_fp8_parse_skip(struct quant_fp8_options *o, const char *list) {
    char *dup = strdup(list), *save = NULL;
    if (!dup) return err_set(OCT_ENOMEM, "out of memory");
    int rc = OCT_OK, n = 0;
    for (char *t = strtok_r(dup, ", ", &save); t && rc == OCT_OK; t = strtok_r(NULL, ", ", &save), n++) {
        char *end;
        long v = strtol(t, &end, 10);
        if (!strcmp(t, "lm_head")) o->skip_lm_head = true;
        else if (end != t && !*end && v >= 0 && v < MODEL_MAX_LAYERS) o->skip_layer[v] = true;
        else rc = err_set(OCT_EINVAL, "--quantization-skip-layers: '%s' is not a layer index (0..%d) or lm_head", t,
                          MODEL_MAX_LAYERS - 1);
    }
    free(dup);
    if (rc == OCT_OK && n == 0) rc = err_set(OCT_EINVAL, "--quantization-skip-layers: empty list");
    o->any_skip = true;
    return rc;
}

// Row r of a 16/32-bit weight as f32.
static void row_f32(const struct weight *w, int64_t r, float *dst) {
    const char *p = (const char *)w->data + (size_t)r * (size_t)w->cols * dtype_size(w->dtype);
    if (w->dtype == DT_F32) memcpy(dst, p, (size_t)w->cols * sizeof(float));
    else if (w->dtype == DT_BF16) bf16_row_to_f32((const uint16_t *)p, dst, (size_t)w->cols);
    else f16_row_to_f32((const uint16_t *)p, dst, (size_t)w->cols);
}

static float scale_of(float amax) {
    float s = amax / FP8_E4M3_MAX;
    return s > 0 ? s : 1.0f;
}

// One band of rows (B rows of 128×128 tiles, or QUANT_ROWS rows of channels) a task, so that a
// model's weights quantize on every core; a band's codes and scales do not depend on the split.
#define QUANT_ROWS 64
struct quant_job {
    const struct weight *w;
    void (*row)(void *ctx, int64_t r, float *dst);  // row r as f32 (row_f32 of w, or a generator)
    void *row_ctx;
    int block;
    int64_t nbc;
    uint8_t *q;
    float *sc;
    _Atomic int64_t bad_row;  // a band start holding a non-finite value, or -1 (-2: out of memory)
};

static void quant_band(struct quant_job *jb, int64_t r0, int64_t nr, float *buf) {
    const struct weight *w = jb->w;
    const int64_t C = w->cols, B = jb->block > 0 ? jb->block : 1;
    for (int64_t i = 0; i < nr; i++) jb->row(jb->row_ctx, r0 + i, buf + i * C);
    for (int64_t j = 0; j < jb->nbc; j++) {
        const int64_t c0 = jb->block > 0 ? j * B : 0, nc = jb->block > 0 ? (C - c0 < B ? C - c0 : B) : C;
        float amax = 0;  // (fmaxf would skip a NaN; this keeps it, and the check below refuses it)
        for (int64_t i = 0; i < nr; i++)
            for (int64_t k = c0; k < c0 + nc; k++) {
                const float a = fabsf(buf[i * C + k]);
                amax = a > amax || a != a ? a : amax;
            }
        if (!isfinite(amax)) { atomic_store(&jb->bad_row, r0); return; }
        const float s = scale_of(amax);
        jb->sc[(r0 / B) * jb->nbc + j] = s;
        for (int64_t i = 0; i < nr; i++)
            for (int64_t k = c0; k < c0 + nc; k++) jb->q[(r0 + i) * C + k] = fp8_e4m3_from_f32(buf[i * C + k] / s);
    }
}

static void quant_task(void *ctx, int task, int thread) {
    (void)thread;
    struct quant_job *jb = ctx;
    const int64_t R = jb->w->rows, C = jb->w->cols;
    const int64_t band = jb->block > 0 ? jb->block : QUANT_ROWS, r0 = (int64_t)task * band;
    const int64_t nr = R - r0 < band ? R - r0 : band, step = jb->block > 0 ? nr : 1;
    float *buf = malloc((size_t)(step * C) * sizeof(float));
    if (!buf) { atomic_store(&jb->bad_row, -2); return; }
    for (int64_t r = r0; r < r0 + nr; r += step) quant_band(jb, r, step, buf);  // (a channel: one row at a time)
    free(buf);
}

static void row_of_weight(void *ctx, int64_t r, float *dst) { row_f32(ctx, r, dst); }

int quant_fp8_weight(struct model *m, struct weight *w, int block) {
    if (w->dtype != DT_F32 && w->dtype != DT_F16 && w->dtype != DT_BF16)
        return err_set(OCT_EUNSUP, "--quantization fp8: a weight of dtype %s (need f32, f16 or bf16)",
                       dtype_name(w->dtype));
    return quant_fp8_rows(m, w, block, row_of_weight, w);
}

int quant_fp8_rows(struct model *m, struct weight *w, int block, void (*row)(void *ctx, int64_t r, float *dst),
                   void *ctx) {
    const int64_t R = w->rows, C = w->cols, B = block > 0 ? block : 1;
    const int64_t nbr = block > 0 ? (R + B - 1) / B : R, nbc = block > 0 ? (C + B - 1) / B : 1;
    uint8_t *q = model_own(m, (size_t)(R * C));
    float *sc = model_own(m, (size_t)(nbr * nbc) * sizeof(float));
    if (!q || !sc) return err_set(OCT_ENOMEM, "model: out of memory quantizing to fp8");
    struct quant_job jb = {w, row, ctx, block, nbc, q, sc, -1};  // (bad_row: initialised before any task runs)
    const int64_t band = block > 0 ? block : QUANT_ROWS, n_tasks = (R + band - 1) / band;
    struct threadpool *tp = R * C >= (1 << 20) ? threadpool_create(0) : NULL;  // (small weights: this thread)
    if (tp) threadpool_run(tp, (int)n_tasks, quant_task, &jb);
    else
        for (int64_t t = 0; t < n_tasks; t++) quant_task(&jb, (int)t, 0);
    threadpool_free(tp);
    const int64_t bad = atomic_load(&jb.bad_row);
    if (bad == -2) return err_set(OCT_ENOMEM, "model: out of memory quantizing to fp8");
    if (bad >= 0)
        return err_set(OCT_EINVAL, "--quantization fp8: a weight [%lld x %lld] holds a non-finite value (row %lld)",
                       (long long)R, (long long)C, (long long)bad);
    w->dtype = DT_E4M3;
    w->data = q;
    memset(&w->fp8, 0, sizeof w->fp8);
    w->fp8.wscale = block > 0 ? WSCALE_BLOCK : WSCALE_CHANNEL;
    w->fp8.block = block;
    w->fp8.scale = sc;
    w->fp8.ascale = ASCALE_DYNAMIC_TOKEN;
    return OCT_OK;
}

static const char *const proj_names[7] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up",
                                          "ffn_down"};

// A mixture-of-experts layer's stacked experts (gate, up, down) to e4m3 under o, unless they are MXFP4 or
// the checkpoint stored them in e4m3. Per-channel scales are per row of the stacked weight; 128x128 tiles
// stay within one expert (quant_fp8_apply checks that ffn_dim and dim are multiples of the block), so each
// expert's scales are those of its own weight.
static int quant_experts(struct model *m, const struct quant_fp8_options *o, int l, int *n_fp8) {
    static const char *const names[3] = {"experts' gate", "experts' up", "experts' down"};
    struct layer_weights *lw = &m->layers[l];
    struct weight *p[3] = {&lw->exp_gate, &lw->exp_up, &lw->exp_down};
    for (int i = 0; i < 3 && m->cfg.n_experts > 0; i++) {
        if (!p[i]->data || p[i]->dtype == DT_MXFP4) continue;
        if (o->quantize && o->skip_layer[l] && p[i]->dtype == DT_E4M3)
            return err_set(OCT_EUNSUP, "--quantization-skip-layers: layer %d's %s projections are stored in fp8 by "
                           "the checkpoint (they cannot be kept in a wider type)", l, names[i]);
        if (o->quantize && !o->skip_layer[l] && p[i]->dtype != DT_E4M3) {
            int rc = quant_fp8_weight(m, p[i], o->block);
            if (rc < 0) return err_set(rc, "layer %d %s projections: %s", l, names[i], err_msg());
        }
        *n_fp8 += p[i]->dtype == DT_E4M3;
    }
    return OCT_OK;
}

int quant_fp8_apply(struct model *m, const struct quant_fp8_options *o) {
    const struct model_config *c = &m->cfg;
    if (!o->quantize && (o->any_skip || o->block))
        return err_set(OCT_EINVAL, "--quantization-%s applies to --quantization fp8, which is not given",
                       o->block ? "block" : "skip-layers");
    for (int l = c->n_layers; l < MODEL_MAX_LAYERS; l++)
        if (o->skip_layer[l])
            return err_set(OCT_EINVAL, "--quantization-skip-layers: layer %d, but %s has %d layers (0..%d)", l,
                           m->name, c->n_layers, c->n_layers - 1);
    if (o->quantize && c->n_experts > 0 && o->block > 0 && m->layers[0].exp_gate.dtype != DT_MXFP4 &&
        (c->ffn_dim % o->block || c->dim % o->block))
        return err_set(OCT_EUNSUP, "--quantization-block %d: %s's experts are [%d x %d] (gate, up) and [%d x %d] "
                       "(down); %dx%d blocks need both sizes to be multiples of %d (use per-channel scales, "
                       "--quantization-block 0)", o->block, m->name, c->ffn_dim, c->dim, c->dim, c->ffn_dim, o->block,
                       o->block, o->block);
    int n_fp8 = 0;
    for (int l = 0; l < c->n_layers; l++) {
        struct layer_weights *lw = &m->layers[l];
        struct weight *p[7] = {&lw->wq, &lw->wk, &lw->wv, &lw->wo, &lw->w_gate, &lw->w_up, &lw->w_down};
        for (int i = 0; i < 7; i++) {
            if (!p[i]->data) continue;
            if (o->quantize && o->skip_layer[l] && p[i]->dtype == DT_E4M3)
                return err_set(OCT_EUNSUP, "--quantization-skip-layers: layer %d's %s is stored in fp8 by the "
                               "checkpoint (it cannot be kept in a wider type)", l, proj_names[i]);
            if (o->quantize && !o->skip_layer[l] && p[i]->dtype != DT_E4M3) {
                int rc = quant_fp8_weight(m, p[i], o->block);
                if (rc < 0) return err_set(rc, "layer %d %s: %s", l, proj_names[i], err_msg());
            }
            n_fp8 += p[i]->dtype == DT_E4M3;
        }
        TRY(quant_experts(m, o, l, &n_fp8));
    }
    if (o->quantize && !o->skip_lm_head && m->output.data != m->token_embd.data && m->output.dtype != DT_E4M3)
        TRY(quant_fp8_weight(m, &m->output, o->block));
    if (o->quantize && c->n_experts > 0 && m->layers[0].exp_gate.dtype == DT_MXFP4)
        fprintf(stderr, "octet: --quantization fp8: the experts of %s's mixture-of-experts layers stay mxfp4 "
                "(already 4-bit); the attention projections are fp8\n", m->name);
    if (o->gate_e5m2) {
        int n_gate = 0;
        for (int l = 0; l < c->n_layers; l++)
            for (int k = 0; k < 2; k++) {  // the dense gate, or the experts' stacked gates
                struct weight *g = k ? &m->layers[l].exp_gate : &m->layers[l].w_gate;
                if (g->data && g->dtype == DT_E4M3) g->fp8.act_e5m2 = true, n_gate++;
            }
        if (!n_gate)
            return err_set(OCT_EINVAL, "--fp8-gate-dtype e5m2: %s has no fp8 gate projections (use --quantization "
                           "fp8 or an FP8 checkpoint)", m->name);
    }
    if (n_fp8 || m->output.dtype == DT_E4M3) {
        if (m->weight_dtype == DT_E4M3) m->weight_dtype = m->token_embd.dtype;  // "auto" KV follows the model's type
        m->weight_bytes = model_weight_bytes_by_dtype(m, (size_t[DT_COUNT]){0});
    }
    return OCT_OK;
}

static size_t weight_bytes(const struct weight *w) {
    if (!w->data) return 0;
    size_t b = (size_t)w->rows * dtype_row_bytes(w->dtype, w->cols);
    if (w->dtype == DT_E4M3) b += (size_t)weight_fp8_n_scales(w) * sizeof(float);
    return b;
}

size_t model_weight_bytes_by_dtype(const struct model *m, size_t bytes[DT_COUNT]) {
    memset(bytes, 0, DT_COUNT * sizeof(size_t));
    const struct weight *top[3] = {&m->token_embd, &m->output_norm, &m->output};
    for (int i = 0; i < 3; i++)
        if (i < 2 || m->output.data != m->token_embd.data) bytes[top[i]->dtype] += weight_bytes(top[i]);
    for (int l = 0; l < m->cfg.n_layers; l++) {
        struct weight *ws[LAYER_N_WEIGHTS];
        layer_weight_list((struct layer_weights *)&m->layers[l], ws);
        for (int i = 0; i < LAYER_N_WEIGHTS; i++) bytes[ws[i]->dtype] += weight_bytes(ws[i]);
    }
    size_t total = 0;
    for (int d = 0; d < DT_COUNT; d++) total += bytes[d];
    return total;
}

const char *model_weight_dtypes_label(const struct model *m, char *buf, size_t n) {
    size_t bytes[DT_COUNT], used = 0;
    model_weight_bytes_by_dtype(m, bytes);
    buf[0] = 0;
    for (;;) {  // largest first
        int best = -1;
        for (int d = 0; d < DT_COUNT; d++)
            if (bytes[d] && (best < 0 || bytes[d] > bytes[best])) best = d;
        if (best < 0 || used >= n) break;
        int k = snprintf(buf + used, n - used, "%s%s %.1f MiB", used ? ", " : "", dtype_name((enum dtype)best),
                         bytes[best] / 1048576.0);
        used += k > 0 ? (size_t)k : 0;
        bytes[best] = 0;
    }
    return buf;
}
