// forward.c — the decoder step of every family (GQA, RoPE, RMSNorm, SwiGLU or GeGLU or routed
// SwiGLU experts, optional per-layer sliding windows, attention sinks) over the backend seam; what
// differs between families is data in struct model_config (biases, q/k norms, post-norms, embedding
// scale, soft-caps, a second RoPE table, expert biases), read by the small steps below. Every backend
// runs this same code.
#include "forward.h"

#include "../base/check.h"
#include "kv_cache.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// Weight i of model_weights' list; a refusal names the tensor (blk.L.NAME) after the backend's reason.
static int upload(struct backend *b, struct weight *w, int i) {
    if (!w->data || w->dev) return 0;  // absent, or uploaded by another forward of this backend type
    int rc = b->ops->weight_upload(b, w);
    if (rc >= 0) return 0;
    if (i < 3) return err_wrap(rc, "backend %s: tensor %s: ", b->ops->name,
                               i == 0 ? "token_embd" : i == 1 ? "output_norm" : "output");
    return err_wrap(rc, "backend %s: tensor blk.%d.%s: ", b->ops->name, (i - 3) / LAYER_N_WEIGHTS,
                    layer_weight_name((i - 3) % LAYER_N_WEIGHTS));
}

// Every weight of the model, in one list: [3 + n_layers * LAYER_N_WEIGHTS] pointers.
static int model_weights(struct model *m, struct weight **ws) {
    int n = 0;
    ws[n++] = &m->token_embd;
    ws[n++] = &m->output_norm;
    ws[n++] = &m->output;
    for (int l = 0; l < m->cfg.n_layers; l++, n += LAYER_N_WEIGHTS) layer_weight_list(&m->layers[l], ws + n);
    return n;
}

// The forwards of one backend type share the model's weight copies (engines on one model); the last
// to go releases them, so that a later forward of another type (the CPU, then CUDA, on one loaded
// model) uploads its own instead of reading the other's pointers. Two types at once are refused.
static int weights_acquire(struct model *m, struct backend *b) {
    if (m->dev_users > 0 && m->dev_ops != (const void *)b->ops)
        return err_set(OCT_EUNSUP, "model %s: its weights are in use by another backend; one loaded model runs on one "
                       "backend type at a time (load it again for the %s backend)", m->name, b->ops->name);
    struct weight *ws[3 + MODEL_MAX_LAYERS * LAYER_N_WEIGHTS];
    const int n = model_weights(m, ws);
    for (int i = 0; i < n; i++) {
        const int rc = upload(b, ws[i], i);
        if (rc < 0) {  // (a first user leaves no copies behind)
            if (m->dev_users == 0)
                for (int j = 0; j < i; j++) if (ws[j]->dev) b->ops->weight_release(b, ws[j]);
            return rc;
        }
    }
    m->dev_ops = b->ops;
    m->dev_users++;
    return OCT_OK;
}

static void weights_release(struct model *m, struct backend *b) {
    if (--m->dev_users > 0) return;
    struct weight *ws[3 + MODEL_MAX_LAYERS * LAYER_N_WEIGHTS];
    const int n = model_weights(m, ws);
    for (int i = 0; i < n; i++) if (ws[i]->dev) b->ops->weight_release(b, ws[i]);
    m->dev_ops = NULL;
}

// The model's needs the backend lacks: an error naming the architecture and the op.
static int check_backend(const struct model_config *c, const struct backend_ops *op) {
    const char *need = NULL;
    if ((c->attn_bias || c->o_bias || c->mlp_bias) && !op->bias_add) need = "bias_add (projection biases)";
    else if (c->act != FFN_ACT_SILU && !op->act_mul) need = "act_mul (GeGLU)";
    else if (c->embed_scale > 0 && c->embed_scale != 1 && !op->scale) need = "scale (embedding scale)";
    else if (c->attn_softcap > 0 && !op->attn_softcap) need = "attention soft-capping";
    else if (c->rope.scaling == ROPE_SCALING_DYNAMIC && !c->rope.dyn_fixed && !op->rope_dynamic)
        need = "dynamic NTK RoPE";
    else if (c->attn_sinks && !op->attn_sinks) need = "attention with sinks";
    else if (c->n_experts > 0 && !op->moe_ffn) need = "moe_ffn (mixture of experts)";
    if (need)
        return err_set(OCT_EUNSUP, "architecture %s needs op %s, not in the %s backend yet", c->arch, need, op->name);
    return OCT_OK;
}

// FP8 weights need the backend's fp8_weights ability: an error naming the first such weight.
static int check_fp8_weights(struct model *m, const struct backend_ops *op) {
    if (op->fp8_weights) return OCT_OK;
    struct weight *ws[3 + MODEL_MAX_LAYERS * LAYER_N_WEIGHTS];
    const int n = model_weights(m, ws);
    for (int i = 0; i < n; i++)
        if (ws[i]->data && ws[i]->dtype == DT_E4M3)
            return err_set(OCT_EUNSUP, "model %s has fp8_e4m3 weights (%s%d): the %s backend has no FP8 weight GEMMs "
                           "yet (run it with --device cpu)", m->name, i < 3 ? "top-level tensor " : "layer ",
                           i < 3 ? i : (i - 3) / LAYER_N_WEIGHTS, op->name);
    return OCT_OK;
}

int forward_init(struct forward *f, struct model *m, struct backend *b, int max_tokens, int max_logits) {
    memset(f, 0, sizeof *f);
    const struct model_config *c = &m->cfg;
    TRY(check_backend(c, b->ops));
    TRY(check_fp8_weights(m, b->ops));
    f->m = m;
    f->b = b;
    f->max_tokens = max_tokens;
    f->max_logits = max_logits;
    rope_table_init(&f->rope, &c->rope);
    if (c->local_rope) rope_table_init(&f->rope_local, &c->rope_local);
    else f->rope_local = f->rope;
    TRY(weights_acquire(m, b));
    f->holds_weights = true;
    size_t es = dtype_size(b->ops->act_dtype), T = (size_t)max_tokens;
    size_t qd = (size_t)c->n_heads * c->head_dim, kvd = (size_t)c->n_kv_heads * c->head_dim;
    void **bufs[] = {&f->x, &f->xn, &f->q, &f->k, &f->v, &f->att, &f->proj, &f->gate, &f->act, &f->last};
    size_t sizes[] = {T * c->dim, T * c->dim, T * qd, T * kvd, T * kvd, T * qd, T * c->dim,
                      T * c->ffn_dim, T * c->ffn_dim, (size_t)max_logits * c->dim};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        *bufs[i] = b->ops->alloc(b, sizes[i] * es);
        if (!*bufs[i]) {
            forward_free(f);
            return err_set(OCT_ENOMEM, "forward: cannot allocate %zu bytes of activations", sizes[i] * es);
        }
    }
    return OCT_OK;
}

void forward_free(struct forward *f) {
    if (!f->b) return;
    if (f->holds_weights) weights_release(f->m, f->b);
    void *bufs[] = {f->x, f->xn, f->q, f->k, f->v, f->att, f->proj, f->gate, f->act, f->last};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) if (bufs[i]) f->b->ops->free(f->b, bufs[i]);
    free(f->probe_buf);
    memset(f, 0, sizeof *f);
}

// Hands one activation tensor to the probe as host f32.
static int probe(struct forward *f, int layer, enum probe_kind kind, const void *x, int n, int width) {
    if (!f->probe) return OCT_OK;
    const struct model_config *c = &f->m->cfg;
    if (!f->probe_buf) {
        size_t w = (size_t)c->n_heads * c->head_dim > (size_t)c->ffn_dim ? (size_t)c->n_heads * c->head_dim
                                                                         : (size_t)c->ffn_dim;
        w = w > (size_t)c->dim ? w : (size_t)c->dim;
        f->probe_buf = malloc((size_t)f->max_tokens * w * sizeof(float));
        if (!f->probe_buf) return err_set(OCT_ENOMEM, "forward: no memory for the probe buffer");
    }
    f->b->ops->download_f32(f->b, f->probe_buf, x, (size_t)n * width);
    f->probe(f->probe_ctx, layer, kind, f->probe_buf, n, width);
    return OCT_OK;
}

static const struct weight *opt(const struct weight *w) { return w->data ? w : NULL; }

// x += post_norm(in · wᵀ + bias): a sublayer's output projection and residual add (the backend's
// fused proj_add where the family has neither the bias nor the post-norm).
static void proj_add(struct forward *f, const void *in, const struct weight *w, const struct weight *bias,
                     const struct weight *post_norm, int n) {
    const struct backend_ops *op = f->b->ops;
    if (!bias->data && !post_norm->data) {
        op->proj_add(f->b, f->x, f->proj, in, w, n);
        return;
    }
    op->matmul(f->b, f->proj, in, w, n);
    if (bias->data) op->bias_add(f->b, f->proj, bias, n);
    if (post_norm->data) op->rmsnorm(f->b, f->proj, f->proj, post_norm, n, f->m->cfg.norm_eps);
    op->add(f->b, f->x, f->proj, (int64_t)n * w->rows);
}

// A mixture-of-experts FFN sublayer: xn = rmsnorm(x); x += the routed experts' weighted sum (moe_ffn), with
// the router's and experts' biases and the clamped SwiGLU where the family has them (gpt-oss).
static int moe_ffn(struct forward *f, int l, int n) {
    const struct layer_weights *w = &f->m->layers[l];
    const struct backend_ops *op = f->b->ops;
    const struct model_config *c = &f->m->cfg;
    const struct moe_ffn_args ma = {f->proj, f->xn, &w->ffn_router, &w->exp_gate, &w->exp_up, &w->exp_down,
                                    c->n_experts, c->n_experts_used, c->moe_norm_topk, opt(&w->ffn_router_b),
                                    opt(&w->exp_b_gate), opt(&w->exp_b_up), opt(&w->exp_b_down), c->moe_act,
                                    c->swiglu_alpha, c->swiglu_limit};
    op->rmsnorm(f->b, f->xn, f->x, &w->ffn_norm, n, c->norm_eps);
    if (f->probe) TRY(probe(f, l, PROBE_MOE_IN, f->xn, n, c->dim));
    op->moe_ffn(f->b, &ma, n);
    op->add(f->b, f->x, f->proj, (int64_t)n * c->dim);
    return OCT_OK;
}

// Final-logit soft-capping (Gemma 2): cap·tanh(z/cap), on the host rows.
static void softcap_logits(float *z, size_t n, float cap) {
    for (size_t i = 0; i < n; i++) z[i] = cap * tanhf(z[i] / cap);
}

// The step's work, queued: logits into logits_out (synchronous in every backend) or, with ids_out,
// the greedy ids (asynchronous where the backend can be).
static int forward_issue(struct forward *f, struct kv_cache *kv, const struct batch *bt, float *logits_out,
                         int32_t *ids_out) {
    struct backend *b = f->b;
    const struct backend_ops *op = b->ops;
    const struct model *m = f->m;
    const struct model_config *c = &m->cfg;
    int n = bt->n_tokens;
    if (n <= 0 || n > f->max_tokens)
        return err_set(OCT_EINVAL, "forward: %d tokens in a step (max %d)", n, f->max_tokens);
    if (bt->n_logits < 0 || bt->n_logits > f->max_logits)
        return err_set(OCT_EINVAL, "forward: %d logits rows (max %d)", bt->n_logits, f->max_logits);
    TRY(op->batch_begin(b, bt));
    float scale = c->attn_scale > 0 ? c->attn_scale : 1.0f / sqrtf((float)c->head_dim);
    struct attn_params ap = {c->n_heads, scale, f->fp8_math, f->fp8_accum, c->attn_softcap};
    // Llama's sublayers run as the backend's (maybe fused) ops; the others' as backend.c's compositions
    bool plain = config_is_plain_llama(c);

    op->get_rows(b, f->x, &m->token_embd, bt);                       // x = embed(tokens)
    if (c->embed_scale > 0 && c->embed_scale != 1) op->scale(b, f->x, (int64_t)n * c->dim, c->embed_scale);
    for (int l = 0; l < c->n_layers; l++) {
        const struct layer_weights *w = &m->layers[l];
        // q, k, v (+ biases, per-head norms); RoPE on q and k; k and v into the layer's pages
        const struct rope_table *rt = c->layer_sliding[l] ? &f->rope_local : &f->rope;
        const struct attn_in_args ai = {f->q, f->k, f->v, f->xn, f->x, &w->attn_norm, &w->wq, &w->wk, &w->wv,
                                        c->norm_eps, c->n_heads, rt, &kv->layers[l]};
        const struct attn_in_extra ae = {opt(&w->bq), opt(&w->bk), opt(&w->bv), opt(&w->q_norm), opt(&w->k_norm)};
        if (plain) op->attn_in(b, &ai, bt);
        else backend_attn_in_ext(b, &ai, &ae, bt);
        if (f->probe) {
            TRY(probe(f, l, PROBE_Q, f->q, n, c->n_heads * c->head_dim));
            TRY(probe(f, l, PROBE_K, f->k, n, c->n_kv_heads * c->head_dim));
            TRY(probe(f, l, PROBE_V, f->v, n, c->n_kv_heads * c->head_dim));
        }
        kv->layers[l].sinks = opt(&w->attn_sinks);  // (gpt-oss: a learned logit in each head's denominator)
        op->attention(b, f->att, f->q, &kv->layers[l], &ap, bt);
        proj_add(f, f->att, &w->wo, &w->bo, &w->post_attn_norm, n);       // x += norm(att · woᵀ + bo)
        if (c->n_experts > 0) {  // x += Σ_k p_k · expert_k(rmsnorm(x)), the router's top-k experts
            TRY(moe_ffn(f, l, n));
            continue;
        }
        // act(xn · w_gateᵀ) ⊙ (xn · w_upᵀ), xn = rmsnorm(x); the probe also wants the gate's pre-activation
        const struct ffn_in_args fi = {f->act, f->gate, f->xn, f->x, &w->ffn_norm, &w->w_gate, &w->w_up,
                                       c->norm_eps, f->probe != NULL, &w->w_down};
        const struct ffn_in_extra fe = {opt(&w->b_gate), opt(&w->b_up), c->act};
        if (plain) op->ffn_in(b, &fi, n);
        else backend_ffn_in_ext(b, &fi, &fe, n);
        if (f->probe) TRY(probe(f, l, PROBE_GATE, f->gate, n, c->ffn_dim));
        proj_add(f, f->act, &w->w_down, &w->b_down, &w->post_ffn_norm, n);  // x += norm(act · w_downᵀ + b)
    }
    if (bt->n_logits > 0) {
        op->gather_rows(b, f->last, f->x, c->dim, bt);               // only the sampled rows
        op->rmsnorm(b, f->last, f->last, &m->output_norm, bt->n_logits, c->norm_eps);
        if (ids_out) op->logits_argmax(b, ids_out, f->last, &m->output, bt->n_logits);
        else op->logits(b, logits_out, f->last, &m->output, bt->n_logits);  // (synchronous)
        // the cap is monotonic, so the greedy ids need none
        if (!ids_out && c->final_softcap > 0)
            softcap_logits(logits_out, (size_t)bt->n_logits * c->n_vocab, c->final_softcap);
    }
    return OCT_OK;
}

int forward_wait(struct forward *f) {
    int rc = f->b->ops->sync(f->b);
    if (rc < 0) return err_wrap(rc, "backend %s: ", f->b->ops->name);
    return OCT_OK;
}

int forward_wait_ids(struct forward *f, const int32_t *ids) {
    const struct backend_ops *op = f->b->ops;
    int rc = op->wait_ids ? op->wait_ids(f->b, ids) : op->sync(f->b);
    if (rc < 0) return err_wrap(rc, "backend %s: ", op->name);
    return OCT_OK;
}

int forward_run(struct forward *f, struct kv_cache *kv, const struct batch *bt, float *logits_out) {
    TRY(forward_issue(f, kv, bt, logits_out, NULL));
    return forward_wait(f);
}

int forward_launch_greedy(struct forward *f, struct kv_cache *kv, const struct batch *bt, int32_t *ids_out) {
    if (!f->b->ops->logits_argmax)
        return err_set(OCT_EUNSUP, "backend %s: no greedy ids on the device", f->b->ops->name);
    if (bt->n_logits > BACKEND_FEED_ROWS)
        return err_set(OCT_EINVAL, "forward: greedy ids for %d rows (at most %d)", bt->n_logits, BACKEND_FEED_ROWS);
    return forward_issue(f, kv, bt, NULL, ids_out);
}
