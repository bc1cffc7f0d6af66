// forward.c — the Llama-family decoder step (GQA, RoPE, SwiGLU, RMSNorm, optional
// per-layer sliding windows) over the backend seam. Every backend runs this same code.
#include "forward.h"

#include "../base/check.h"
#include "kv_cache.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int upload(struct backend *b, struct weight *w) {
    if (!w->data || w->dev) return 0;  // absent or already uploaded (tied output)
    if (b->ops->weight_upload(b, w) < 0) return err_set(OCT_ENOMEM, "backend %s: cannot upload weight", b->ops->name);
    return 0;
}

int forward_init(struct forward *f, struct model *m, struct backend *b, int max_tokens, int max_logits) {
    memset(f, 0, sizeof *f);
    f->m = m;
    f->b = b;
    f->max_tokens = max_tokens;
    f->max_logits = max_logits;
    const struct model_config *c = &m->cfg;
    rope_table_init(&f->rope, &c->rope);
    TRY(upload(b, &m->token_embd));
    TRY(upload(b, &m->output_norm));
    TRY(upload(b, &m->output));
    for (int l = 0; l < c->n_layers; l++) {
        struct layer_weights *lw = &m->layers[l];
        struct weight *ws[] = {&lw->attn_norm, &lw->wq, &lw->wk, &lw->wv, &lw->wo,
                               &lw->ffn_norm, &lw->w_gate, &lw->w_up, &lw->w_down};
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) TRY(upload(b, ws[i]));
    }
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
        f->probe_buf = malloc((size_t)f->max_tokens * w * sizeof(float));
        if (!f->probe_buf) return err_set(OCT_ENOMEM, "forward: no memory for the probe buffer");
    }
    f->b->ops->download_f32(f->b, f->probe_buf, x, (size_t)n * width);
    f->probe(f->probe_ctx, layer, kind, f->probe_buf, n, width);
    return OCT_OK;
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
    struct attn_params ap = {c->n_heads, 1.0f / sqrtf((float)c->head_dim), f->fp8_math, f->fp8_accum};

    op->get_rows(b, f->x, &m->token_embd, bt);                       // x = embed(tokens)
    for (int l = 0; l < c->n_layers; l++) {
        const struct layer_weights *w = &m->layers[l];
        // q, k, v; RoPE on q and k; k and v into the layer's pages
        const struct attn_in_args ai = {f->q, f->k, f->v, f->xn, f->x, &w->attn_norm, &w->wq, &w->wk, &w->wv,
                                        c->norm_eps, c->n_heads, &f->rope, &kv->layers[l]};
        op->attn_in(b, &ai, bt);
        if (f->probe) {
            TRY(probe(f, l, PROBE_Q, f->q, n, c->n_heads * c->head_dim));
            TRY(probe(f, l, PROBE_K, f->k, n, c->n_kv_heads * c->head_dim));
            TRY(probe(f, l, PROBE_V, f->v, n, c->n_kv_heads * c->head_dim));
        }
        op->attention(b, f->att, f->q, &kv->layers[l], &ap, bt);
        op->proj_add(b, f->x, f->proj, f->att, &w->wo, n);          // x += att · woᵀ
        // silu(xn · w_gateᵀ) ⊙ (xn · w_upᵀ), xn = rmsnorm(x); the probe also wants the gate's pre-activation
        const struct ffn_in_args fi = {f->act, f->gate, f->xn, f->x, &w->ffn_norm, &w->w_gate, &w->w_up,
                                       c->norm_eps, f->probe != NULL};
        op->ffn_in(b, &fi, n);
        if (f->probe) TRY(probe(f, l, PROBE_GATE, f->gate, n, c->ffn_dim));
        op->proj_add(b, f->x, f->proj, f->act, &w->w_down, n);      // x += act · w_downᵀ
    }
    if (bt->n_logits > 0) {
        op->gather_rows(b, f->last, f->x, c->dim, bt);               // only the sampled rows
        op->rmsnorm(b, f->last, f->last, &m->output_norm, bt->n_logits, c->norm_eps);
        if (ids_out) op->logits_argmax(b, ids_out, f->last, &m->output, bt->n_logits);
        else op->logits(b, logits_out, f->last, &m->output, bt->n_logits);
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
