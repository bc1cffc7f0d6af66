// cpu_backend.c — the reference backend's table: memory (plain malloc), weights (aliases
// of the mapped f32 data; 16-bit matrices are widened row by row in matmul; Q4_K, Q6_K and Q8_0 matrices
// also get a repacked copy for decode, cpu_kq8.c / cpu_kq6x8.c / cpu_kq8_0x8.c, which this file owns and
// frees), and the elementwise ops. Activations are f32.
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../base/argmax.h"
#include "../../base/check.h"
#include "../../base/half.h"
#include "../rope_table.h"
#include "../weight.h"
#include "cpu.h"
#include "cpu_fp8w.h"
#include "cpu_quant.h"

float *cpu_scratch(struct cpu_backend *c, int thread) { return c->scratch + (size_t)thread * c->scratch_floats; }

int cpu_reserve_scratch(struct cpu_backend *c, size_t n) {
    if (n <= c->scratch_floats) return 0;
    float *s = realloc(c->scratch, n * (size_t)c->n_threads * sizeof(float));
    if (!s) return -1;
    c->scratch = s;
    c->scratch_floats = n;
    return 0;
}

const float *cpu_weight_row(const struct weight *w, int64_t row, float *dst) {
    const char *base = w->data;
    switch (w->dtype) {
    case DT_F32: return (const float *)(base + row * w->cols * 4);
    case DT_F16: f16_row_to_f32((const uint16_t *)(base + row * w->cols * 2), dst, (size_t)w->cols); return dst;
    case DT_BF16: bf16_row_to_f32((const uint16_t *)(base + row * w->cols * 2), dst, (size_t)w->cols); return dst;
    default:  // the GGUF block types (an embedding row of a quantized token_embd)
        if (quant_row_to_f32(w->dtype, base + row * (int64_t)dtype_row_bytes(w->dtype, w->cols), dst, w->cols) < 0)
            memset(dst, 0, (size_t)w->cols * sizeof(float));
        return dst;
    }
}

static void *cpu_alloc(struct backend *b, size_t bytes) { return calloc(1, bytes ? bytes : 1); }
static void cpu_free(struct backend *b, void *p) { free(p); }
static void cpu_copy(struct backend *b, void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); }
static void cpu_download_f32(struct backend *b, float *dst, const void *src, size_t n) { memcpy(dst, src, n * 4); }
static int cpu_sync(struct backend *b) {
    struct cpu_backend *c = (struct cpu_backend *)b;
    int rc = c->error;
    c->error = 0;
    return rc;
}
static int cpu_batch_begin(struct backend *b, const struct batch *bt) { return 0; }

// A repacked copy's memory: its whole 2 MiB stretches in 2 MiB pages (the decode product streams it), the
// tail in base pages.
static void *kq8_alloc(size_t bytes) {
    const size_t huge = (size_t)2 << 20;
    void *p = NULL;
    if (posix_memalign(&p, bytes >= huge ? huge : 64, bytes)) return NULL;
#ifdef MADV_HUGEPAGE
    if (bytes >= huge) madvise(p, bytes / huge * huge, MADV_HUGEPAGE);
#endif
    return p;
}

// MemAvailable (/proc/meminfo: free memory and the reclaimable caches) less 512 MiB: what repacked copies may
// take; SIZE_MAX where the kernel does not say.
static size_t kq8_room_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return SIZE_MAX;
    char line[128];
    unsigned long long kb = 0;
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) found = sscanf(line, "MemAvailable: %llu kB", &kb) == 1;
    fclose(f);
    if (!found) return SIZE_MAX;
    const unsigned long long bytes = kb * 1024ull, headroom = 512ull << 20;
    return bytes > headroom ? (size_t)(bytes - headroom) : 0;
}

// The bytes of w's repacked copy (0: none).
static size_t repack_bytes(const struct weight *w) {
    return w->dtype == DT_Q4_K   ? kq8_bytes(w->rows, w->cols)
           : w->dtype == DT_Q6_K ? kq6x8_bytes(w->rows, w->cols)
           : w->dtype == DT_Q8_0 ? kq80x8_bytes(w->rows, w->cols)
                                 : 0;
}

const uint8_t *cpu_kq8_of(const struct cpu_backend *c, const struct weight *w) {
    if (w->dtype != DT_Q4_K && w->dtype != DT_Q6_K && w->dtype != DT_Q8_0) return NULL;
    if (!w->dev || w->dev == w->data) return NULL;
    for (int i = 0; i < c->n_kq8; i++)
        if (c->kq8[i] == w->dev) return w->dev;
    return NULL;
}

// The scratch a 16-bit row is widened into is reserved by the ops that read the weight (cpu_matmul,
// cpu_rmsnorm): a weight another engine's backend uploaded first never comes through here. Weights are read
// in place (mmap or owned buffer); a Q4_K, Q6_K or Q8_0 matrix also gets its rows repacked in groups of 8 for
// decode (cpu_kq8.c, cpu_kq6x8.c, cpu_kq8_0x8.c), a copy this backend owns as w->dev (the prefill tile and the
// last rows read w->data).
static int cpu_weight_upload(struct backend *b, struct weight *w) {
    struct cpu_backend *c = (struct cpu_backend *)b;
    size_t kb = repack_bytes(w);
    w->dev = (void *)w->data;
    if (w->dtype == DT_E4M3) TRY(cpu_fp8w_check(w));
    if (!kb) return 0;
    if (kb > c->kq8_room) {  // a second copy that would not fit: decode reads the file's layout (same bits)
        if (!c->kq8_told++)
            fprintf(stderr, "octet: cpu: Q4_K/Q6_K/Q8_0 weights past the first %zu MB are not repacked for decode: "
                            "the memory available has no room for the copy (same results, slower decode)\n",
                    c->kq8_used >> 20);
        return 0;
    }
    void *p = kq8_alloc(kb), **list = realloc(c->kq8, (size_t)(c->n_kq8 + 1) * sizeof *list);
    if (list) c->kq8 = list;
    if (!p || !list) {
        free(p);
        return err_set(OCT_ENOMEM, "cpu: no memory to repack a %lld x %lld %s weight", (long long)w->rows,
                       (long long)w->cols, dtype_name(w->dtype));
    }
    if (w->dtype == DT_Q8_0)
        kq80x8_repack(w->data, dtype_row_bytes(w->dtype, w->cols), w->rows, w->cols, p);
    else if (w->dtype == DT_Q6_K)
        kq6x8_repack(w->data, dtype_row_bytes(w->dtype, w->cols), w->rows, w->cols, p);
    else
        kq8_repack(w->data, dtype_row_bytes(w->dtype, w->cols), w->rows, w->cols, p);
    c->kq8[c->n_kq8++] = p;
    c->kq8_room -= kb;
    c->kq8_used += kb;
    w->dev = p;
    return 0;
}
static void cpu_weight_release(struct backend *b, struct weight *w) {
    struct cpu_backend *c = (struct cpu_backend *)b;
    if (cpu_kq8_of(c, w)) {
        for (int i = 0; i < c->n_kq8; i++)
            if (c->kq8[i] == w->dev) { c->kq8[i] = c->kq8[--c->n_kq8]; break; }
        const size_t kb = repack_bytes(w);
        c->kq8_room += kb;
        c->kq8_used -= kb;
        free(w->dev);
    }
    w->dev = NULL;
}

static void cpu_destroy(struct backend *b) {
    struct cpu_backend *c = (struct cpu_backend *)b;
    threadpool_free(c->tp);
    for (int i = 0; i < c->n_kq8; i++) free(c->kq8[i]);
    free(c->kq8);
    free(c->scratch);
    free(c->lg);
    free(c);
}

static void cpu_get_rows(struct backend *b, void *out, const struct weight *table, const struct batch *bt) {
    const struct cpu_backend *c = (const struct cpu_backend *)b;
    float *o = out;
    for (int t = 0; t < bt->n_tokens; t++) {
        float *dst = o + (size_t)t * table->cols;
        int32_t id = bt->token_ids[t];
        if (id < 0) id = -1 - id < BACKEND_FEED_ROWS ? c->feed[-1 - id] : 0;  // (logits_argmax's pick)
        const float *row = cpu_weight_row(table, id, dst);
        if (row != dst) memcpy(dst, row, (size_t)table->cols * sizeof(float));
    }
}

struct norm_ctx { float *out; const float *x; const struct weight *w; int dim; float eps; struct cpu_backend *c; };

static void norm_task(void *p, int t, int thread) {
    struct norm_ctx *n = p;
    const float *x = n->x + (size_t)t * n->dim;
    float *o = n->out + (size_t)t * n->dim;
    const float *w = cpu_weight_row(n->w, 0, cpu_scratch(n->c, thread));
    double ss = 0;
    for (int i = 0; i < n->dim; i++) ss += (double)x[i] * x[i];
    float r = (float)(1.0 / sqrt(ss / n->dim + n->eps));
    for (int i = 0; i < n->dim; i++) o[i] = x[i] * r * w[i];
}

static void cpu_rmsnorm(struct backend *b, void *out, const void *x, const struct weight *w, int n, float eps) {
    struct cpu_backend *c = (struct cpu_backend *)b;
    if (cpu_reserve_scratch(c, (size_t)w->cols) < 0) {  // the widened weight row (as in cpu_matmul)
        c->error = err_set(OCT_ENOMEM, "cpu: no memory to widen a norm of %lld values", (long long)w->cols);
        return;
    }
    struct norm_ctx ctx = {out, x, w, (int)w->cols, eps, c};
    threadpool_run(c->tp, n, norm_task, &ctx);
}

// The inverse frequencies token t rotates with: the table's, or dynamic NTK's for its sequence's length.
static const double *rope_freqs(const struct rope_table *rt, const struct batch *bt, int t, double *buf) {
    if (rt->dyn_max_pos <= 0) return rt->inv_freq;
    int s = 0;
    while (s + 1 < bt->n_seqs && bt->query_start[s + 1] <= t) s++;
    int len = bt->seq_lens[s];
    if (len <= rt->dyn_max_pos) return rt->inv_freq;
    int d = rt->n_rot;
    double growth = rt->dyn_factor * len / rt->dyn_max_pos - (rt->dyn_factor - 1);
    double base = rt->dyn_theta * pow(growth, (double)d / (d - 2));
    for (int i = 0; i < d / 2; i++) buf[i] = 1.0 / pow(base, (2.0 * i) / d);
    return buf;
}

static void cpu_rope(struct backend *b, void *x, int n_heads, int head_dim, const struct rope_table *rt,
                     const struct batch *bt) {
    float *v = x;
    int half = rt->n_rot / 2;
    float cs[ROPE_MAX_PAIRS], sn[ROPE_MAX_PAIRS];
    double dyn[ROPE_MAX_PAIRS];
    for (int t = 0; t < bt->n_tokens; t++) {
        int pos = bt->positions[t];
        const double *inv_freq = rope_freqs(rt, bt, t, dyn);
        for (int i = 0; i < half; i++) {
            double ang = pos * inv_freq[i];
            cs[i] = (float)cos(ang) * rt->attn_factor;
            sn[i] = (float)sin(ang) * rt->attn_factor;
        }
        for (int h = 0; h < n_heads; h++) {
            float *hv = v + ((size_t)t * n_heads + h) * head_dim;
            for (int i = 0; i < half; i++) {
                int a = rt->neox ? i : 2 * i, c2 = rt->neox ? i + half : 2 * i + 1;
                float x0 = hv[a], x1 = hv[c2];
                hv[a] = x0 * cs[i] - x1 * sn[i];
                hv[c2] = x0 * sn[i] + x1 * cs[i];
            }
        }
    }
}

// The gated activations, over the pool in chunks of ACT_CHUNK values (on one thread a 512-token prefill's
// 4M of them took 3-4 % of its time); each value's arithmetic is the same in any chunk.
#define ACT_CHUNK 16384
struct act_ctx { float *o; const float *g, *u; int64_t n; enum ffn_act act; };

static void act_task(void *p, int task, int thread) {
    const struct act_ctx *a = p;
    const float k = 0.7978845608028654f;  // sqrt(2/pi)
    const int64_t i0 = (int64_t)task * ACT_CHUNK, i1 = i0 + ACT_CHUNK < a->n ? i0 + ACT_CHUNK : a->n;
    for (int64_t i = i0; i < i1; i++) {
        float x = a->g[i], v;
        if (a->act == FFN_ACT_GELU_TANH) v = 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
        else if (a->act == FFN_ACT_GELU) v = 0.5f * x * (1.0f + erff(x * 0.7071067811865476f));
        else v = x / (1.0f + expf(-x));
        a->o[i] = v * a->u[i];
    }
}

static void cpu_act_mul(struct backend *b, void *out, const void *gate, const void *up, int64_t n,
                        enum ffn_act act) {
    struct act_ctx a = {out, gate, up, n, act};
    const int64_t tasks = (n + ACT_CHUNK - 1) / ACT_CHUNK;
    if (tasks <= 1) act_task(&a, 0, 0);  // (a decode step's: waking a worker costs more)
    else threadpool_run(((struct cpu_backend *)b)->tp, (int)tasks, act_task, &a);
}

static void cpu_silu_mul(struct backend *b, void *out, const void *gate, const void *up, int64_t n) {
    cpu_act_mul(b, out, gate, up, n, FFN_ACT_SILU);
}

static void cpu_bias_add(struct backend *b, void *x, const struct weight *bias, int n) {
    struct cpu_backend *c = (struct cpu_backend *)b;
    if (cpu_reserve_scratch(c, (size_t)bias->cols) < 0) {
        c->error = err_set(OCT_ENOMEM, "cpu: no memory to widen a bias");
        return;
    }
    const float *w = cpu_weight_row(bias, 0, cpu_scratch(c, 0));
    float *v = x;
    for (int i = 0; i < n; i++)
        for (int64_t j = 0; j < bias->cols; j++) v[(size_t)i * bias->cols + j] += w[j];
}

static void cpu_scale(struct backend *b, void *x, int64_t n, float s) {
    float *v = x;
    for (int64_t i = 0; i < n; i++) v[i] *= s;
}

static void cpu_add(struct backend *b, void *x, const void *y, int64_t n) {
    float *a = x;
    const float *c = y;
    for (int64_t i = 0; i < n; i++) a[i] += c[i];
}

static void cpu_gather_rows(struct backend *b, void *out, const void *x, int dim, const struct batch *bt) {
    for (int i = 0; i < bt->n_logits; i++)
        memcpy((float *)out + (size_t)i * dim, (const float *)x + (size_t)bt->logits_rows[i] * dim,
               (size_t)dim * sizeof(float));
}

static void cpu_logits(struct backend *b, float *host_out, const void *x, const struct weight *w, int n) {
    cpu_matmul(b, host_out, x, w, n);  // activations are f32 host memory already
}

// Synchronous here: the logits, then each row's pick, kept for the next batch as well.
static void cpu_logits_argmax(struct backend *b, int32_t *host_ids, const void *x, const struct weight *w, int n) {
    struct cpu_backend *c = (struct cpu_backend *)b;
    size_t need = (size_t)n * w->rows;
    if (n > BACKEND_FEED_ROWS) {
        c->error = err_set(OCT_EINVAL, "cpu: greedy ids for %d rows (at most %d)", n, BACKEND_FEED_ROWS);
        return;
    }
    if (need > c->lg_floats) {
        float *p = realloc(c->lg, need * sizeof(float));
        if (!p) { c->error = err_set(OCT_ENOMEM, "cpu: no memory for %d rows of logits", n); return; }
        c->lg = p;
        c->lg_floats = need;
    }
    cpu_matmul(b, c->lg, x, w, n);
    for (int i = 0; i < n; i++) host_ids[i] = c->feed[i] = logits_argmax(c->lg + (size_t)i * w->rows, (int)w->rows);
}

static size_t cpu_kv_budget_default(struct backend *b, double util) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    size_t ram = pages > 0 && page > 0 ? (size_t)pages * (size_t)page : (size_t)8 << 30;
    return ram / 4;  // a quarter of RAM: room for the weights, the OS and other processes
}

static const struct backend_ops cpu_ops = {
    .name = "cpu",
    .destroy = cpu_destroy,
    .act_dtype = DT_F32,
    .kv_block_tokens = 16,
    .kv_token_scales = true,
    .fp8_weights = true,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_copy,
    .download = cpu_copy,
    .download_f32 = cpu_download_f32,
    .sync = cpu_sync,
    .weight_upload = cpu_weight_upload,
    .weight_release = cpu_weight_release,
    .batch_begin = cpu_batch_begin,
    .get_rows = cpu_get_rows,
    .rmsnorm = cpu_rmsnorm,
    .matmul = cpu_matmul,
    .rope = cpu_rope,
    .kv_write = cpu_kv_write,
    .attention = cpu_attention,
    .silu_mul = cpu_silu_mul,
    .add = cpu_add,
    .gather_rows = cpu_gather_rows,
    .attn_in = backend_attn_in,
    .proj_add = backend_proj_add,
    .ffn_in = backend_ffn_in,
    .logits = cpu_logits,
    .logits_argmax = cpu_logits_argmax,
    .kv_budget_default = cpu_kv_budget_default,
    .bias_add = cpu_bias_add,
    .act_mul = cpu_act_mul,
    .scale = cpu_scale,
    .moe_ffn = cpu_moe_ffn,
    .attn_softcap = true,
    .rope_dynamic = true,
    .attn_sinks = true,
};

struct backend *backend_cpu_create(int n_threads) {
    struct cpu_backend *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->base.ops = &cpu_ops;
    c->tp = threadpool_create(n_threads);
    if (!c->tp) { free(c); return NULL; }
    c->n_threads = threadpool_n_threads(c->tp);
    c->kq8_room = kq8_room_available();
    if (cpu_reserve_scratch(c, 4096) < 0) { cpu_destroy(&c->base); return NULL; }
    return &c->base;
}
