// cpu_fp8w.c — out = x · Wᵀ for fp8_e4m3 weights with per-tensor, per-output-channel or 128×128
// block scales, the exact reference math of docs/fp8_weights.md: each activation row is quantized
// (dynamic per token or a static per-tensor scale) to e4m3, or to e5m2 for a weight marked act_e5m2,
// with the saturating round-to-nearest-even encoder of base/fp8.h; the fp8 values (exact in f32)
// are dotted in f32 with the weight's e4m3 values, and the sum is multiplied by both scales (block
// weights: each tile's partial sum by its scale, then the total by the row's). Work is split over
// weight rows, so a token's results do not depend on the batch it came in.
#include <math.h>
#include <stdlib.h>

#include "../../base/check.h"
#include "../../base/fp8.h"
#include "cpu_fp8w.h"

float fp8w_quant_row(const float *x, int n, const struct weight_fp8 *f, float *xq) {
    const float fmax = f->act_e5m2 ? FP8_E5M2_MAX : FP8_E4M3_MAX;
    float s;
    if (f->ascale == ASCALE_STATIC_TENSOR) {
        s = f->input_scale;
    } else {
        float amax = 0;
        for (int i = 0; i < n; i++) amax = fmaxf(amax, fabsf(x[i]));
        s = amax / fmax;
        if (!(s > 0) || !isfinite(s)) s = 1.0f;  // an all-zero row (or inf/NaN) stays finite
    }
    const float inv = 1.0f / s;
    if (f->act_e5m2)
        for (int i = 0; i < n; i++) xq[i] = fp8_e5m2_table[fp8_e5m2_from_f32(x[i] * inv)];
    else
        for (int i = 0; i < n; i++) xq[i] = fp8_e4m3_table[fp8_e4m3_from_f32(x[i] * inv)];
    return s;
}

struct weight fp8w_rows(const struct weight *w, int64_t r0, int64_t n) {
    struct weight v = *w;
    v.rows = n;
    v.data = (const uint8_t *)w->data + (size_t)(r0 * w->cols);
    v.dev = (void *)v.data;
    if (w->fp8.wscale == WSCALE_CHANNEL) v.fp8.scale = w->fp8.scale + r0;
    if (w->fp8.wscale == WSCALE_BLOCK)
        v.fp8.scale = w->fp8.scale + (r0 / w->fp8.block) * ((w->cols + w->fp8.block - 1) / w->fp8.block);
    return v;
}

struct fp8w_ctx {
    struct cpu_backend *c;
    float *out;
    const float *x;
    const struct weight *w;
    int n, rows_per_task;
    float *xq, *sx;  // [n][cols] quantized rows (fp8 values), [n] their scales
};

static void quant_task(void *p, int t, int thread) {
    struct fp8w_ctx *m = p;
    size_t cols = (size_t)m->w->cols;
    m->sx[t] = fp8w_quant_row(m->x + t * cols, (int)cols, &m->w->fp8, m->xq + t * cols);
}

static void row_task(void *p, int task, int thread) {
    struct fp8w_ctx *m = p;
    const struct weight *w = m->w;
    const int cols = (int)w->cols, rows = (int)w->rows;
    int r0 = task * m->rows_per_task, r1 = r0 + m->rows_per_task;
    if (r1 > rows) r1 = rows;
    float *wr = cpu_scratch(m->c, thread);
    const int B = w->fp8.block, nbc = B > 0 ? (cols + B - 1) / B : 0;
    for (int r = r0; r < r1; r++) {
        const uint8_t *src = (const uint8_t *)w->data + (size_t)r * cols;
        for (int k = 0; k < cols; k++) wr[k] = fp8_e4m3_table[src[k]];
        for (int t = 0; t < m->n; t++) {
            const float *xq = m->xq + (size_t)t * cols;
            float y;
            if (w->fp8.wscale == WSCALE_BLOCK) {
                const float *ws = w->fp8.scale + (size_t)(r / B) * nbc;
                float acc = 0;
                for (int j = 0; j < nbc; j++) {
                    int k0 = j * B, len = cols - k0 < B ? cols - k0 : B;
                    acc += ws[j] * cpu_dot(xq + k0, wr + k0, len);
                }
                y = acc * m->sx[t];
            } else {
                float ws = w->fp8.scale[w->fp8.wscale == WSCALE_CHANNEL ? r : 0];
                y = cpu_dot(xq, wr, cols) * (m->sx[t] * ws);
            }
            m->out[(size_t)t * rows + r] = y;
        }
    }
}

#define MIN_TASK_MACS 16384

void cpu_fp8w_matmul(struct cpu_backend *c, float *out, const float *x, const struct weight *w, int n) {
    if (!w->fp8.scale || (w->fp8.wscale == WSCALE_BLOCK && w->fp8.block <= 0) ||
        (w->fp8.ascale == ASCALE_STATIC_TENSOR && !(w->fp8.input_scale > 0))) {
        c->error = err_set(OCT_EINVAL, "cpu: fp8_e4m3 weight [%lld x %lld] without its scales",
                           (long long)w->rows, (long long)w->cols);
        return;
    }
    if (n <= 0) return;
    size_t cols = (size_t)w->cols;
    float *xq = malloc((size_t)n * cols * sizeof(float) + (size_t)n * sizeof(float));
    if (!xq || cpu_reserve_scratch(c, cols) < 0) {
        free(xq);
        c->error = err_set(OCT_ENOMEM, "cpu: no memory to quantize %d rows of %zu activations to fp8", n, cols);
        return;
    }
    struct fp8w_ctx m = {c, out, x, w, n, 1, xq, xq + (size_t)n * cols};
    threadpool_run(c->tp, n, quant_task, &m);
    int rows = (int)w->rows;
    long macs_per_row = (long)n * w->cols;
    int rpt = (int)(MIN_TASK_MACS / (macs_per_row ? macs_per_row : 1));
    if (rpt < 1) rpt = 1;
    int max_tasks = c->n_threads * 8;
    if ((rows + rpt - 1) / rpt > max_tasks) rpt = (rows + max_tasks - 1) / max_tasks;
    if (rpt < rows) rpt = (rpt + 15) / 16 * 16;  // two threads never write one 64-byte line of out
    m.rows_per_task = rpt;
    threadpool_run(c->tp, (rows + rpt - 1) / rpt, row_task, &m);
    free(xq);
}
