// cpu_moe.c — the CPU reference of a mixture-of-experts FFN (owns: the router's softmax and top-k,
// and moe_ffn: tokens grouped by expert, each expert's SwiGLU run as three matmuls over its group,
// the outputs added into each token's row with its routing weight).
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../base/check.h"
#include "../weight.h"
#include "cpu.h"

void moe_route(const float *logits, int n_experts, int k, bool norm_topk, int *ids, float *w) {
    float mx = logits[0];
    for (int e = 1; e < n_experts; e++) mx = logits[e] > mx ? logits[e] : mx;
    double sum = 0;
    for (int e = 0; e < n_experts; e++) sum += exp((double)logits[e] - mx);
    double picked = 0;
    for (int j = 0; j < k; j++) {  // the j-th largest; ties go to the lower index
        int best = -1;
        for (int e = 0; e < n_experts; e++) {
            bool taken = false;
            for (int i = 0; i < j && !taken; i++) taken = ids[i] == e;
            if (!taken && (best < 0 || logits[e] > logits[best])) best = e;
        }
        ids[j] = best;
        w[j] = (float)(exp((double)logits[best] - mx) / sum);
        picked += w[j];
    }
    if (norm_topk)
        for (int j = 0; j < k; j++) w[j] = (float)(w[j] / picked);
}

// Rows [r0, r0 + n) of a stacked expert weight, as a weight of its own.
static struct weight expert_rows(const struct weight *w, int64_t r0, int64_t n) {
    struct weight v = *w;
    v.rows = n;
    v.data = (const char *)w->data + (size_t)(r0 * w->cols) * dtype_size(w->dtype);
    v.dev = (void *)v.data;
    return v;
}

void cpu_moe_ffn(struct backend *b, const struct moe_ffn_args *a, int n) {
    struct cpu_backend *c = (struct cpu_backend *)b;
    const int E = a->n_experts, K = a->n_used;
    const int64_t dim = a->router->cols, F = E > 0 ? a->gate->rows / E : 0;
    if (E <= 0 || K <= 0 || K > E || a->router->rows != E || F <= 0 || a->gate->rows != E * F ||
        a->up->rows != E * F || a->down->rows != E * dim || a->down->cols != F || a->gate->cols != dim) {
        c->error = err_set(OCT_EINVAL, "cpu: moe_ffn: %d experts (%d used) do not match the expert weights' shapes",
                           E, K);
        return;
    }
    const struct weight *mats[3] = {a->gate, a->up, a->down};
    for (int i = 0; i < 3; i++)
        if (mats[i]->dtype != DT_F32 && mats[i]->dtype != DT_F16 && mats[i]->dtype != DT_BF16) {
            c->error = err_set(OCT_EUNSUP, "cpu: moe_ffn: expert weights of dtype %s (f32, f16 or bf16 only)",
                               dtype_name(mats[i]->dtype));
            return;
        }
    float *logits = malloc((size_t)n * E * sizeof(float)), *wts = malloc((size_t)n * K * sizeof(float));
    int *ids = malloc((size_t)n * K * sizeof(int)), *rows = malloc((size_t)n * sizeof(int));
    float *rw = malloc((size_t)n * sizeof(float)), *xs = malloc((size_t)n * dim * sizeof(float));
    float *g = malloc((size_t)n * F * sizeof(float)), *u = malloc((size_t)n * F * sizeof(float));
    float *y = malloc((size_t)n * dim * sizeof(float));
    float *out = a->out;
    const float *xn = a->xn;
    if (!logits || !wts || !ids || !rows || !rw || !xs || !g || !u || !y) {
        c->error = err_set(OCT_ENOMEM, "cpu: no memory for the experts of %d tokens", n);
        goto done;
    }
    cpu_matmul(b, logits, xn, a->router, n);  // [n][E]
    for (int t = 0; t < n; t++)
        moe_route(logits + (size_t)t * E, E, K, a->norm_topk, ids + (size_t)t * K, wts + (size_t)t * K);
    memset(out, 0, (size_t)n * dim * sizeof(float));
    for (int e = 0; e < E; e++) {
        int cnt = 0;
        for (int t = 0; t < n; t++)
            for (int j = 0; j < K; j++)
                if (ids[t * K + j] == e) {
                    rows[cnt] = t;
                    rw[cnt++] = wts[t * K + j];
                }
        if (!cnt) continue;
        for (int i = 0; i < cnt; i++)
            memcpy(xs + (size_t)i * dim, xn + (size_t)rows[i] * dim, (size_t)dim * sizeof(float));
        const struct weight wg = expert_rows(a->gate, e * F, F), wu = expert_rows(a->up, e * F, F);
        const struct weight wd = expert_rows(a->down, e * dim, dim);
        cpu_matmul(b, g, xs, &wg, cnt);  // [cnt][F]
        cpu_matmul(b, u, xs, &wu, cnt);
        for (int64_t i = 0; i < (int64_t)cnt * F; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
        cpu_matmul(b, y, g, &wd, cnt);   // [cnt][dim]
        for (int i = 0; i < cnt; i++) {
            float *o = out + (size_t)rows[i] * dim;
            const float *yi = y + (size_t)i * dim;
            for (int64_t d = 0; d < dim; d++) o[d] += rw[i] * yi[d];
        }
    }
done:
    free(logits), free(wts), free(ids), free(rows), free(rw), free(xs), free(g), free(u), free(y);
}
