// cpu_matmul.c — out[n][rows] = x[n][cols] · Wᵀ for f32 activations and F32/F16/BF16/Q8_0/Q4_0
// weights (the block types' kernels are in cpu_qdot.c, FP8 weights' in cpu_fp8w.c). Work is split over weight
// rows, so each output element is one dot product computed start to finish by one thread: results do not
// depend on the thread count or on how many tokens share the batch (chunked prefill and decode
// give equal numbers).
// Decode (fewer than 4 tokens) on 16-bit weights streams each weight byte once: four rows per
// pass share each load of x, and F16 (F16C) / BF16 (shift) elements widen in registers, in the
// same accumulation order as cpu_dot on a widened row, so its results equal the prefill path's.
// Prefill on F32/F16/BF16 weights with AVX-512 or AVX2 is cpu_gemm.c's register-blocked product (the same
// arithmetic again). Vector paths: AVX-512, AVX2+FMA, or portable C, chosen at compile time (-march=native).
#include <string.h>

#include "../../base/check.h"
#include "../../base/half.h"
#include "../weight.h"
#include "cpu.h"
#include "cpu_fp8w.h"
#include "cpu_quant.h"
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

float cpu_dot(const float *a, const float *b, int n) {
    int i = 0;
    float s = 0;
#if defined(__AVX512F__)
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    for (; i + 32 <= n; i += 32) {
        acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
        acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), acc1);
    }
    for (; i + 16 <= n; i += 16) acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
    s = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
#elif defined(__AVX2__) && defined(__FMA__)
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    for (; i + 16 <= n; i += 16) {
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
    }
    for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    s = cpu_hsum256(_mm256_add_ps(acc0, acc1));
#endif
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

// Four tokens against one weight row: the row is loaded once per 8 elements.
// Each result equals cpu_dot(x_t, w) exactly (same accumulation order).
static void dot4(const float *w, const float *x0, const float *x1, const float *x2, const float *x3,
                 int n, float *r) {
#if defined(__AVX512F__)
    // same accumulation structure as cpu_dot, four rows at once
    __m512 a[4], b[4];
    const float *x[4] = {x0, x1, x2, x3};
    for (int k = 0; k < 4; k++) a[k] = b[k] = _mm512_setzero_ps();
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512 wl = _mm512_loadu_ps(w + i), wh = _mm512_loadu_ps(w + i + 16);
        for (int k = 0; k < 4; k++) {
            a[k] = _mm512_fmadd_ps(_mm512_loadu_ps(x[k] + i), wl, a[k]);
            b[k] = _mm512_fmadd_ps(_mm512_loadu_ps(x[k] + i + 16), wh, b[k]);
        }
    }
    for (; i + 16 <= n; i += 16) {
        __m512 wl = _mm512_loadu_ps(w + i);
        for (int k = 0; k < 4; k++) a[k] = _mm512_fmadd_ps(_mm512_loadu_ps(x[k] + i), wl, a[k]);
    }
    for (int k = 0; k < 4; k++) {
        float s = _mm512_reduce_add_ps(_mm512_add_ps(a[k], b[k]));
        for (int j = i; j < n; j++) s += x[k][j] * w[j];
        r[k] = s;
    }
#elif defined(__AVX2__) && defined(__FMA__)
    __m256 a0 = _mm256_setzero_ps(), b0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), b1 = _mm256_setzero_ps();
    __m256 a2 = _mm256_setzero_ps(), b2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps(), b3 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 wl = _mm256_loadu_ps(w + i), wh = _mm256_loadu_ps(w + i + 8);
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x0 + i), wl, a0);
        b0 = _mm256_fmadd_ps(_mm256_loadu_ps(x0 + i + 8), wh, b0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(x1 + i), wl, a1);
        b1 = _mm256_fmadd_ps(_mm256_loadu_ps(x1 + i + 8), wh, b1);
        a2 = _mm256_fmadd_ps(_mm256_loadu_ps(x2 + i), wl, a2);
        b2 = _mm256_fmadd_ps(_mm256_loadu_ps(x2 + i + 8), wh, b2);
        a3 = _mm256_fmadd_ps(_mm256_loadu_ps(x3 + i), wl, a3);
        b3 = _mm256_fmadd_ps(_mm256_loadu_ps(x3 + i + 8), wh, b3);
    }
    for (; i + 8 <= n; i += 8) {
        __m256 wl = _mm256_loadu_ps(w + i);
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x0 + i), wl, a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(x1 + i), wl, a1);
        a2 = _mm256_fmadd_ps(_mm256_loadu_ps(x2 + i), wl, a2);
        a3 = _mm256_fmadd_ps(_mm256_loadu_ps(x3 + i), wl, a3);
    }
    float s0 = cpu_hsum256(_mm256_add_ps(a0, b0)), s1 = cpu_hsum256(_mm256_add_ps(a1, b1));
    float s2 = cpu_hsum256(_mm256_add_ps(a2, b2)), s3 = cpu_hsum256(_mm256_add_ps(a3, b3));
    for (; i < n; i++) { s0 += x0[i] * w[i]; s1 += x1[i] * w[i]; s2 += x2[i] * w[i]; s3 += x3[i] * w[i]; }
    r[0] = s0; r[1] = s1; r[2] = s2; r[3] = s3;
#else
    r[0] = cpu_dot(x0, w, n); r[1] = cpu_dot(x1, w, n); r[2] = cpu_dot(x2, w, n); r[3] = cpu_dot(x3, w, n);
#endif
}

// ---- 16-bit weight rows against f32 x, widened in registers ----
// gemv16: r[k] = Σ_i x[i]·w_k[i] for the NR rows w_k = w + k*cols (F16 if !bf, else BF16), each
// equal bit for bit to cpu_dot(x, widened w_k, n).
#if defined(__AVX512F__)
static inline __m512 wide16(const uint16_t *p, int bf) {
    __m256i h = _mm256_loadu_si256((const __m256i *)p);
    if (bf) return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    return _mm512_cvtph_ps(h);
}
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
static inline __m256 wide8(const uint16_t *p, int bf) {
    __m128i h = _mm_loadu_si128((const __m128i *)p);
    if (bf) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    return _mm256_cvtph_ps(h);
}
#endif

static inline float wide1(uint16_t h, int bf) { return bf ? bf16_to_f32(h) : f16_to_f32(h); }

#define GEMV_ROWS 4
// Each row stream is prefetched 1 KiB ahead. Within the last 1 KiB of a row the stream's prefetches go to
// the same row of the next group of GEMV_ROWS (nr - 1 rows further on: gemv_task's rows are contiguous,
// cols == n), the row that stream reads next; prefetching straight on would fetch the next row of this
// group, which another stream is already reading, and leave the next group's rows to start cold. The
// hardware prefetchers alone keep too few lines in flight for one core: F16 8192x2048 from memory on two
// threads reads 44.6 GB/s without prefetching and 46.8-49.5 with it, 49.5-51.1 (against 37.1-46.1 in the
// same alternations) with the next group's rows (bench/cpu/RESULTS.md, "F16 decode").
#define GEMV_PREFETCH 512

static inline __attribute__((always_inline)) void gemv16(const uint16_t *w, size_t cols, int nr, const float *x,
                                                         int n, int bf, float *r) {
    int i = 0;
#if defined(__AVX512F__)
    __m512 a[GEMV_ROWS], b[GEMV_ROWS];
#pragma GCC unroll 4
    for (int k = 0; k < nr; k++) a[k] = b[k] = _mm512_setzero_ps();
    for (; i + 32 <= n; i += 32) {
        __m512 xl = _mm512_loadu_ps(x + i), xh = _mm512_loadu_ps(x + i + 16);
        const size_t ahead = i + GEMV_PREFETCH < n ? GEMV_PREFETCH : GEMV_PREFETCH + (size_t)(nr - 1) * cols;
#pragma GCC unroll 4
        for (int k = 0; k < nr; k++) {
            _mm_prefetch((const char *)(w + k * cols + i + ahead), _MM_HINT_T0);
            a[k] = _mm512_fmadd_ps(xl, wide16(w + k * cols + i, bf), a[k]);
            b[k] = _mm512_fmadd_ps(xh, wide16(w + k * cols + i + 16, bf), b[k]);
        }
    }
    for (; i + 16 <= n; i += 16) {
        __m512 xl = _mm512_loadu_ps(x + i);
#pragma GCC unroll 4
        for (int k = 0; k < nr; k++) a[k] = _mm512_fmadd_ps(xl, wide16(w + k * cols + i, bf), a[k]);
    }
#pragma GCC unroll 4
    for (int k = 0; k < nr; k++) r[k] = _mm512_reduce_add_ps(_mm512_add_ps(a[k], b[k]));
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
    __m256 a[GEMV_ROWS], b[GEMV_ROWS];
#pragma GCC unroll 4
    for (int k = 0; k < nr; k++) a[k] = b[k] = _mm256_setzero_ps();
    for (; i + 16 <= n; i += 16) {
        __m256 xl = _mm256_loadu_ps(x + i), xh = _mm256_loadu_ps(x + i + 8);
#pragma GCC unroll 4
        for (int k = 0; k < nr; k++) {
            a[k] = _mm256_fmadd_ps(xl, wide8(w + k * cols + i, bf), a[k]);
            b[k] = _mm256_fmadd_ps(xh, wide8(w + k * cols + i + 8, bf), b[k]);
        }
    }
    for (; i + 8 <= n; i += 8) {
        __m256 xl = _mm256_loadu_ps(x + i);
#pragma GCC unroll 4
        for (int k = 0; k < nr; k++) a[k] = _mm256_fmadd_ps(xl, wide8(w + k * cols + i, bf), a[k]);
    }
#pragma GCC unroll 4
    for (int k = 0; k < nr; k++) r[k] = cpu_hsum256(_mm256_add_ps(a[k], b[k]));
#else
    for (int k = 0; k < nr; k++) r[k] = 0;
#endif
    for (int k = 0; k < nr; k++)
        for (int j = i; j < n; j++) r[k] += x[j] * wide1(w[k * cols + j], bf);
}

static void gemv16_4(const uint16_t *w, size_t cols, const float *x, int n, int bf, float *r) {
    if (bf) gemv16(w, cols, GEMV_ROWS, x, n, 1, r);
    else gemv16(w, cols, GEMV_ROWS, x, n, 0, r);
}

static void gemv16_1(const uint16_t *w, const float *x, int n, int bf, float *r) {
    if (bf) gemv16(w, 0, 1, x, n, 1, r);
    else gemv16(w, 0, 1, x, n, 0, r);
}

#define TOKEN_TILE 64
#define MIN_TASK_MACS 16384
#define GEMM_PART_ROWS 256  // the weight rows of a prefill-product task, at least (where tasks suffice)

struct mm_ctx {
    struct cpu_backend *c;
    float *out;
    const float *x;
    const struct weight *w;
    int n, rows_per_task;
    int tile, tiles;  // the prefill product's tasks (cpu_gemm.c): tiles token tiles of tile tokens a row range
};

// Fewer than 4 tokens on 16-bit weights: GEMV_ROWS rows at a time, each streamed once for all tokens.
static void gemv_task(struct mm_ctx *m, int r0, int r1, int thread) {
    const struct weight *w = m->w;
    int cols = (int)w->cols, rows = (int)w->rows, bf = w->dtype == DT_BF16;
    if (dtype_block_elems(w->dtype) > 1) {  // MXFP4 (the GGUF block types go to cpu_qdot.c)
        size_t rb = dtype_row_bytes(w->dtype, cols);
        float *tmp = cpu_scratch(m->c, thread);
        for (int r = r0; r < r1; r += GEMV_ROWS) {
            int nr = r1 - r < GEMV_ROWS ? r1 - r : GEMV_ROWS;
            for (int t = 0; t < m->n; t++) {
                float res[GEMV_ROWS];
                quant_dot_rows(w->dtype, (const char *)w->data + (size_t)r * rb, rb, nr, m->x + (size_t)t * cols, cols,
                               tmp, res);
                memcpy(m->out + (size_t)t * rows + r, res, (size_t)nr * sizeof(float));
            }
        }
        return;
    }
    const uint16_t *base = w->data;
    int r = r0;
    for (; r + GEMV_ROWS <= r1; r += GEMV_ROWS)
        for (int t = 0; t < m->n; t++) {
            float res[GEMV_ROWS];
            gemv16_4(base + (size_t)r * cols, (size_t)cols, m->x + (size_t)t * cols, cols, bf, res);
            memcpy(m->out + (size_t)t * rows + r, res, sizeof res);
        }
    for (; r < r1; r++)
        for (int t = 0; t < m->n; t++)
            gemv16_1(base + (size_t)r * cols, m->x + (size_t)t * cols, cols, bf, m->out + (size_t)t * rows + r);
}

static int gemv_fits(const struct weight *w, int n) {
    return n < 4 && (w->dtype == DT_F16 || w->dtype == DT_BF16 || dtype_block_elems(w->dtype) > 1);
}

// Row r of w as f32: the block types are dequantized here, the others by cpu_weight_row.
static const float *row_f32(const struct weight *w, int64_t r, float *buf) {
    if (dtype_block_elems(w->dtype) == 1) return cpu_weight_row(w, r, buf);
    quant_row_to_f32(w->dtype, (const char *)w->data + (size_t)r * dtype_row_bytes(w->dtype, w->cols), buf, w->cols);
    return buf;
}

static void mm_task(void *p, int task, int thread) {
    struct mm_ctx *m = p;
    const struct weight *w = m->w;
    int cols = (int)w->cols, rows = (int)w->rows;
    float *buf = cpu_scratch(m->c, thread);
    if (cpu_gemm_fits(w, m->n)) {  // 16-bit and f32 weights on AVX-512 or AVX2 (cpu_gemm.c): a row range of one tile
        const int t0 = task % m->tiles * m->tile, nt = m->n - t0 < m->tile ? m->n - t0 : m->tile;
        const int r0 = task / m->tiles * m->rows_per_task;
        const int r1 = r0 + m->rows_per_task < rows ? r0 + m->rows_per_task : rows;
        cpu_gemm_rows(w, m->x + (size_t)t0 * cols, nt, m->out + (size_t)t0 * rows, r0, r1, buf);
        return;
    }
    int r0 = task * m->rows_per_task, r1 = r0 + m->rows_per_task;
    if (r1 > rows) r1 = rows;
    if (gemv_fits(w, m->n)) {
        gemv_task(m, r0, r1, thread);
        return;
    }
    for (int t0 = 0; t0 < m->n; t0 += TOKEN_TILE) {
        int t1 = t0 + TOKEN_TILE < m->n ? t0 + TOKEN_TILE : m->n;
        for (int r = r0; r < r1; r++) {
            const float *wr = row_f32(w, r, buf);
            int t = t0;
            for (; t + 4 <= t1; t += 4) {
                float res[4];
                const float *x = m->x + (size_t)t * cols;
                dot4(wr, x, x + cols, x + 2 * (size_t)cols, x + 3 * (size_t)cols, cols, res);
                for (int k = 0; k < 4; k++) m->out[(size_t)(t + k) * rows + r] = res[k];
            }
            for (; t < t1; t++) m->out[(size_t)t * rows + r] = cpu_dot(m->x + (size_t)t * cols, wr, cols);
        }
    }
}

void cpu_matmul(struct backend *b, void *out, const void *x, const struct weight *w, int n) {
    struct cpu_backend *c = (struct cpu_backend *)b;
    if (w->dtype == DT_E4M3) { cpu_fp8w_matmul(c, out, x, w, n); return; }  // FP8 weights: cpu_fp8w.c
    if (cpu_quant_takes(w->dtype)) { cpu_quant_matmul(c, out, x, w, n); return; }  // GGUF Q*: cpu_qdot.c
    // each thread widens one 16-bit row into its scratch: reserved here, from the weight itself, since
    // a weight uploaded by another backend (engines sharing a model) never passed this one's upload
    size_t need = (size_t)w->cols;
    if (cpu_gemm_fits(w, n) && need < cpu_gemm_scratch_floats(w->cols)) need = cpu_gemm_scratch_floats(w->cols);
    if (cpu_reserve_scratch(c, need) < 0) {
        c->error = err_set(OCT_ENOMEM, "cpu: no memory to widen rows of %lld columns", (long long)w->cols);
        return;
    }
    long macs_per_row = (long)n * w->cols;
    int rows = (int)w->rows;
    int rpt = (int)(MIN_TASK_MACS / (macs_per_row ? macs_per_row : 1));
    if (rpt < 1) rpt = 1;
    int max_tasks = c->n_threads * 8;
    if ((rows + rpt - 1) / rpt > max_tasks) rpt = (rows + max_tasks - 1) / max_tasks;
    // GEMV tasks: whole 16-row groups, so two threads never write one 64-byte line of out
    if ((gemv_fits(w, n) || cpu_gemm_fits(w, n)) && rpt < rows) rpt = (rpt + 15) / 16 * 16;
    struct mm_ctx ctx = {c, out, x, w, n, rpt, n, 1};
    if (cpu_gemm_fits(w, n)) {
        // a task is one token tile (cpu_gemm_tile_tokens) of a row range, so it packs that tile's x once for
        // at least GEMM_PART_ROWS rows (a task of every token for fewer rows packed them all: F16 pp512 on the
        // 1.2B shape, 2 threads, ran 7 % slower; see bench/cpu/RESULTS.md); ranges narrower where that is
        // what gives max_tasks tasks, and never narrower than the row split above (rpt); tile after tile within
        // a range, so both threads read its weight rows
        ctx.tile = cpu_gemm_tile_tokens(w->cols);
        ctx.tiles = (n + ctx.tile - 1) / ctx.tile;
        const int parts = (max_tasks + ctx.tiles - 1) / ctx.tiles;
        int rpp = ((rows + parts - 1) / parts + 15) / 16 * 16;
        if (rpp > GEMM_PART_ROWS) rpp = GEMM_PART_ROWS;
        ctx.rows_per_task = rpp > rpt ? rpp : rpt;
        threadpool_run(c->tp, ctx.tiles * ((rows + ctx.rows_per_task - 1) / ctx.rows_per_task), mm_task, &ctx);
        return;
    }
    threadpool_run(c->tp, (rows + rpt - 1) / rpt, mm_task, &ctx);
}
