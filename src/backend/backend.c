// backend.c — picks a backend by name (--device cpu|cuda|auto), and the one composition of each
// sublayer op (attn_in, proj_add, ffn_in) from a backend's own primitive ops: the CPU backend's
// table names them, and a backend that fuses a sublayer calls them for the shapes it does not fuse.
#include <stdlib.h>
#include <string.h>

#include "../base/check.h"
#include "backend.h"
#include "weight.h"

void backend_attn_in(struct backend *b, const struct attn_in_args *a, const struct batch *bt) {
    backend_attn_in_ext(b, a, NULL, bt);
}

void backend_attn_in_ext(struct backend *b, const struct attn_in_args *a, const struct attn_in_extra *e,
                         const struct batch *bt) {
    static const struct attn_in_extra none;
    if (!e) e = &none;
    const struct backend_ops *op = b->ops;
    const int n = bt->n_tokens;
    op->rmsnorm(b, a->xn, a->x, a->norm, n, a->eps);
    op->matmul(b, a->q, a->xn, a->wq, n);  // [n][n_heads*hd]
    op->matmul(b, a->k, a->xn, a->wk, n);  // [n][n_kv*hd]
    op->matmul(b, a->v, a->xn, a->wv, n);
    const struct weight *bias[3] = {e->bq, e->bk, e->bv};
    void *out[3] = {a->q, a->k, a->v};
    for (int i = 0; i < 3; i++)
        if (bias[i]) op->bias_add(b, out[i], bias[i], n);
    if (e->q_norm) op->rmsnorm(b, a->q, a->q, e->q_norm, n * a->n_heads, a->eps);  // per head: [n*heads][hd]
    if (e->k_norm) op->rmsnorm(b, a->k, a->k, e->k_norm, n * a->layer->n_kv_heads, a->eps);
    op->rope(b, a->q, a->n_heads, a->layer->head_dim, a->rope, bt);
    op->rope(b, a->k, a->layer->n_kv_heads, a->layer->head_dim, a->rope, bt);
    op->kv_write(b, a->layer, a->k, a->v, bt);
}

void backend_proj_add(struct backend *b, void *x, void *scratch, const void *in, const struct weight *w, int n) {
    b->ops->matmul(b, scratch, in, w, n);
    b->ops->add(b, x, scratch, (int64_t)n * w->rows);
}

void backend_ffn_in(struct backend *b, const struct ffn_in_args *a, int n) { backend_ffn_in_ext(b, a, NULL, n); }

void backend_ffn_in_ext(struct backend *b, const struct ffn_in_args *a, const struct ffn_in_extra *e, int n) {
    static const struct ffn_in_extra none;
    if (!e) e = &none;
    const struct backend_ops *op = b->ops;
    op->rmsnorm(b, a->xn, a->x, a->norm, n, a->eps);
    op->matmul(b, a->gate, a->xn, a->w_gate, n);
    op->matmul(b, a->act, a->xn, a->w_up, n);
    if (e->b_gate) op->bias_add(b, a->gate, e->b_gate, n);
    if (e->b_up) op->bias_add(b, a->act, e->b_up, n);
    if (e->fn == FFN_ACT_SILU) op->silu_mul(b, a->act, a->gate, a->act, (int64_t)n * a->w_up->rows);
    else op->act_mul(b, a->act, a->gate, a->act, (int64_t)n * a->w_up->rows, e->fn);  // (gate keeps its input)
}

void *backend_host_alloc(struct backend *b, size_t bytes) {
    return b->ops->host_alloc ? b->ops->host_alloc(b, bytes) : malloc(bytes);
}

void backend_host_free(struct backend *b, void *p) {
    if (!p) return;
    if (b->ops->host_free) b->ops->host_free(b, p);
    else free(p);
}

struct backend *backend_create(const char *device, int n_threads) {
    if (!device || !device[0] || !strcmp(device, "auto")) {
        if (backend_cuda_available()) return backend_cuda_create(0);
        device = "cpu";
    }
    if (!strcmp(device, "cpu")) {
        struct backend *b = backend_cpu_create(n_threads);
        if (!b) err_set(OCT_ENOMEM, "cannot create the cpu backend");
        return b;
    }
    if (!strcmp(device, "cuda")) return backend_cuda_create(0);
    err_set(OCT_EINVAL, "--device: unknown device '%s' (choose cpu, cuda or auto)", device);
    return NULL;
}
