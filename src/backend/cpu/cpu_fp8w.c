// cpu_fp8w.c — out = x · Wᵀ for fp8_e4m3 weights with per-tensor, per-output-channel or 128×128
// block scales, the exact reference math of docs/fp8_weights.md: each activation row is quantized
// (dynamic per token or a static per-tensor scale) to e4m3, or to e5m2 for a weight marked act_e5m2,
// with the saturating round-to-nearest-even encoder of base/fp8.h; the fp8 values (exact in f32)
// are dotted in f32 with the weight's e4m3 values, and the sum is multiplied by both scales (block
// weights: each value times its block's scale first, fp8w_bscaled, and the sum by 256 times the
// token's). Work is split over weight rows, so a token's results do not depend on the batch it came
// in. Decode (fewer than 4 tokens) widens the codes in registers, four rows a pass, each weight byte
// read once; more tokens take cpu_gemm.c's register-blocked product (AVX-512 builds) or widen each
// row once for all of them; all sum in cpu_dot's order, so their results are the same bits.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../base/check.h"
#include "../../base/fp8.h"
#include "cpu_fp8w.h"
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

#if defined(__AVX512F__)
// 16 floats rounded to their e4m3 values, as fp8_e4m3_table[fp8_e4m3_from_f32(v)] gives them: the same
// steps on the bits (normal results: the mantissa rounded to 3 bits, ties to even, a carry into the
// exponent; below 2^-6: the nearest multiple of 2^-9; from 448's bits up, inf included: 448; the sign
// put back), NaN staying NaN (the table's 0x7F entry is one).
static inline __m512 e4m3_round16(__m512 v) {
    const __m512i u = _mm512_castps_si512(v), a = _mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF));
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(a, 20), _mm512_set1_epi32(1));
    const __m512i nrm = _mm512_and_si512(_mm512_add_epi32(a, _mm512_add_epi32(_mm512_set1_epi32(0x7FFFF), odd)),
                                         _mm512_set1_epi32((int)0xFFF00000u));
    const __m512 sub = _mm512_mul_ps(_mm512_roundscale_ps(_mm512_mul_ps(_mm512_castsi512_ps(a), _mm512_set1_ps(512.0f)),
                                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
                                     _mm512_set1_ps(1.0f / 512.0f));
    __m512i r = _mm512_mask_blend_epi32(_mm512_cmpge_epu32_mask(a, _mm512_set1_epi32(0x3C800000)),
                                        _mm512_castps_si512(sub), nrm);  // (2^-6: the smallest normal)
    r = _mm512_mask_blend_epi32(_mm512_cmpge_epu32_mask(a, _mm512_set1_epi32(0x43E00000)), r,
                                _mm512_set1_epi32(0x43E00000));  // (448)
    r = _mm512_or_si512(r, _mm512_and_si512(u, _mm512_set1_epi32((int)0x80000000u)));
    return _mm512_mask_blend_ps(_mm512_cmpgt_epu32_mask(a, _mm512_set1_epi32(0x7F800000)), _mm512_castsi512_ps(r),
                                _mm512_set1_ps(NAN));
}
#endif

float fp8w_quant_row(const float *x, int n, const struct weight_fp8 *f, float *xq) {
    const float fmax = f->act_e5m2 ? FP8_E5M2_MAX : FP8_E4M3_MAX;
    float s;
    int i = 0;
    if (f->ascale == ASCALE_STATIC_TENSOR) {
        s = f->input_scale;
    } else {
        float amax = 0;
#if defined(__AVX512F__)
        __m512 m = _mm512_setzero_ps();  // (max_ps returns its second operand where the first is NaN: fmaxf's)
        for (; i + 16 <= n; i += 16) m = _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(x + i)), m);
        amax = _mm512_reduce_max_ps(m);
#endif
        for (; i < n; i++) amax = fmaxf(amax, fabsf(x[i]));
        s = amax / fmax;
        if (!(s > 0) || !isfinite(s)) s = 1.0f;  // an all-zero row (or inf/NaN) stays finite
    }
    const float inv = 1.0f / s;
    i = 0;
    if (f->act_e5m2) {
        for (; i < n; i++) xq[i] = fp8_e5m2_table[fp8_e5m2_from_f32(x[i] * inv)];
        return s;
    }
#if defined(__AVX512F__)
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(xq + i, e4m3_round16(_mm512_mul_ps(_mm512_loadu_ps(x + i), _mm512_set1_ps(inv))));
#endif
    for (; i < n; i++) xq[i] = fp8_e4m3_table[fp8_e4m3_from_f32(x[i] * inv)];
    return s;
}

// ---- e4m3 weight rows against f32 x, widened in registers (decode) ----
// A code's bits placed at a binary16's bits 7-14 (its sign at 15) make a binary16 of 2^-8 times the code's
// value, subnormal codes included, which widens to f32 exactly; x comes 256 times larger (xs, exact: x is
// an fp8 value), so every product x·w is the same number and the sums are cpu_dot's bits. The bytes are
// sign-extended to 16 bits, so after the shift bits 14 and 15 both hold the sign: the mask clears 14.
// A NaN code would widen to 480: cpu_fp8w_check refuses a weight holding one at upload.
#define E4M3_H16_MASK ((short)0xBFFF)
#if defined(__AVX512F__) && defined(__AVX512BW__)
static inline void e4m3x32(const uint8_t *p, __m512 *lo, __m512 *hi) {
    const __m512i s = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)p));
    const __m512i h = _mm512_and_si512(_mm512_slli_epi16(s, 7), _mm512_set1_epi16(E4M3_H16_MASK));
    *lo = _mm512_cvtph_ps(_mm512_castsi512_si256(h));
    *hi = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1));
}
static inline __m512 e4m3x16(const uint8_t *p) {
    const __m256i h = _mm256_and_si256(_mm256_slli_epi16(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)p)), 7),
                                       _mm256_set1_epi16(E4M3_H16_MASK));
    return _mm512_cvtph_ps(h);
}
#define GEMV8_AVX512 1
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
static inline void e4m3x16(const uint8_t *p, __m256 *lo, __m256 *hi) {
    const __m256i h = _mm256_and_si256(_mm256_slli_epi16(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)p)), 7),
                                       _mm256_set1_epi16(E4M3_H16_MASK));
    *lo = _mm256_cvtph_ps(_mm256_castsi256_si128(h));
    *hi = _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1));
}
static inline __m256 e4m3x8(const uint8_t *p) {
    const __m128i h = _mm_and_si128(_mm_slli_epi16(_mm_cvtepi8_epi16(_mm_loadl_epi64((const __m128i *)p)), 7),
                                    _mm_set1_epi16(E4M3_H16_MASK));
    return _mm256_cvtph_ps(h);
}
#define GEMV8_AVX2 1
#endif

#define GEMV8_ROWS 4
#define GEMV8_PREFETCH 1024  // bytes ahead in each row stream (cpu_matmul.c's 16-bit rows: the same 1 KiB)

// A block weight's row: its scales s[r / B][·] (bs), B columns a tile. The lanes' scales for columns
// i .. i + L - 1: one broadcast where they lie in one tile, else each lane its own.
struct brow {
    const float *bs;
    int B;
};
static inline void bscales(struct brow b, int i, int L, float *dst /*[L]*/) {
    for (int l = 0; l < L; l++) dst[l] = b.bs[(i + l) / b.B];
}

// The lanes' scales of the L (<= 32) columns from i for each of the nr rows (f[k]), and the column up to
// which they stay the same: the tile's end where the L columns lie in one tile, else i + L.
static inline int bscale_step(const struct brow *bk, int nr, int i, int L, float (*f)[32]) {
    const int B = bk[0].B, t = i / B;
    if (t != (i + L - 1) / B) {
        for (int k = 0; k < nr; k++) bscales(bk[k], i, L, f[k]);
        return i + L;
    }
    for (int k = 0; k < nr; k++)
        for (int l = 0; l < L; l++) f[k][l] = bk[k].bs[t];
    return (t + 1) * B;
}

// r[k] = Σ_i x[i]·w_k[i] for the nr (<= GEMV8_ROWS) e4m3 rows w_k = w + k·stride (no NaN codes), each bit
// for bit cpu_dot(x, the row widened through fp8_e4m3_table, n): the same two accumulators, tail and
// reduction. xs is x times 256. With bk (a block weight's rows, bk[k] row k's), the row widened is
// fp8w_bscaled's instead, w̃[i] = fl(2^-8·ŵ[i]·s[i / B]), against x: the in-register widening's 2^-8·ŵ
// times the lane's scale, one rounding.
static inline __attribute__((always_inline)) void gemv8(const uint8_t *w, size_t stride, int nr, const float *x,
                                                        const float *xs, int n, float *r, const struct brow *bk) {
    int i = 0;
    if (bk) xs = x;
#if defined(GEMV8_AVX512)
    __m512 a[GEMV8_ROWS], b[GEMV8_ROWS], sl[GEMV8_ROWS], sh[GEMV8_ROWS];
    int fresh_to = 0;  // (block weights: the columns up to which sl and sh hold the lanes' scales)
#pragma GCC unroll 4
    for (int k = 0; k < nr; k++) a[k] = b[k] = sl[k] = sh[k] = _mm512_setzero_ps();
    for (; i + 32 <= n; i += 32) {
        if (bk && i + 32 > fresh_to) {
            float f[GEMV8_ROWS][32];
            fresh_to = bscale_step(bk, nr, i, 32, f);
            for (int k = 0; k < nr; k++) sl[k] = _mm512_loadu_ps(f[k]), sh[k] = _mm512_loadu_ps(f[k] + 16);
        }
        const __m512 xl = _mm512_loadu_ps(xs + i), xh = _mm512_loadu_ps(xs + i + 16);
#pragma GCC unroll 4
        for (int k = 0; k < nr; k++) {
            __m512 lo, hi;
            _mm_prefetch((const char *)(w + k * stride + i + GEMV8_PREFETCH), _MM_HINT_T0);
            e4m3x32(w + k * stride + i, &lo, &hi);
            if (bk) lo = _mm512_mul_ps(lo, sl[k]), hi = _mm512_mul_ps(hi, sh[k]);
            a[k] = _mm512_fmadd_ps(xl, lo, a[k]);
            b[k] = _mm512_fmadd_ps(xh, hi, b[k]);
        }
    }
    for (; i + 16 <= n; i += 16) {
        const __m512 xl = _mm512_loadu_ps(xs + i);
#pragma GCC unroll 4
        for (int k = 0; k < nr; k++) {
            __m512 v = e4m3x16(w + k * stride + i);
            if (bk) {
                float f[16];
                bscales(bk[k], i, 16, f);
                v = _mm512_mul_ps(v, _mm512_loadu_ps(f));
            }
            a[k] = _mm512_fmadd_ps(xl, v, a[k]);
        }
    }
#pragma GCC unroll 4
    for (int k = 0; k < nr; k++) r[k] = _mm512_reduce_add_ps(_mm512_add_ps(a[k], b[k]));
#elif defined(GEMV8_AVX2)
    __m256 a[GEMV8_ROWS], b[GEMV8_ROWS], sl[GEMV8_ROWS], sh[GEMV8_ROWS];
    int fresh_to = 0;
#pragma GCC unroll 4
    for (int k = 0; k < nr; k++) a[k] = b[k] = sl[k] = sh[k] = _mm256_setzero_ps();
    for (; i + 16 <= n; i += 16) {
        if (bk && i + 16 > fresh_to) {
            float f[GEMV8_ROWS][32];
            fresh_to = bscale_step(bk, nr, i, 16, f);
            for (int k = 0; k < nr; k++) sl[k] = _mm256_loadu_ps(f[k]), sh[k] = _mm256_loadu_ps(f[k] + 8);
        }
        const __m256 xl = _mm256_loadu_ps(xs + i), xh = _mm256_loadu_ps(xs + i + 8);
#pragma GCC unroll 4
        for (int k = 0; k < nr; k++) {
            __m256 lo, hi;
            _mm_prefetch((const char *)(w + k * stride + i + GEMV8_PREFETCH), _MM_HINT_T0);
            e4m3x16(w + k * stride + i, &lo, &hi);
            if (bk) lo = _mm256_mul_ps(lo, sl[k]), hi = _mm256_mul_ps(hi, sh[k]);
            a[k] = _mm256_fmadd_ps(xl, lo, a[k]);
            b[k] = _mm256_fmadd_ps(xh, hi, b[k]);
        }
    }
    for (; i + 8 <= n; i += 8) {
        const __m256 xl = _mm256_loadu_ps(xs + i);
#pragma GCC unroll 4
        for (int k = 0; k < nr; k++) {
            __m256 v = e4m3x8(w + k * stride + i);
            if (bk) {
                float f[8];
                bscales(bk[k], i, 8, f);
                v = _mm256_mul_ps(v, _mm256_loadu_ps(f));
            }
            a[k] = _mm256_fmadd_ps(xl, v, a[k]);
        }
    }
#pragma GCC unroll 4
    for (int k = 0; k < nr; k++) r[k] = cpu_hsum256(_mm256_add_ps(a[k], b[k]));
#else
    (void)xs;
    for (int k = 0; k < nr; k++) r[k] = 0;
#endif
    for (int k = 0; k < nr; k++)
        for (int j = i; j < n; j++) {
            const uint8_t c = w[k * stride + j];
            r[k] += x[j] * (bk ? fp8w_bscaled(c, bk[k].bs[j / bk[k].B]) : fp8_e4m3_table[c]);
        }
}

static void gemv8_4(const uint8_t *w, size_t stride, const float *x, const float *xs, int n, float *r) {
    gemv8(w, stride, GEMV8_ROWS, x, xs, n, r, NULL);
}
static void gemv8_1(const uint8_t *w, const float *x, const float *xs, int n, float *r) {
    gemv8(w, 0, 1, x, xs, n, r, NULL);
}
static void gemv8b_4(const uint8_t *w, size_t stride, const float *x, int n, float *r, const struct brow *bk) {
    gemv8(w, stride, GEMV8_ROWS, x, x, n, r, bk);
}
static void gemv8b_1(const uint8_t *w, const float *x, int n, float *r, const struct brow *bk) {
    gemv8(w, 0, 1, x, x, n, r, bk);
}

int cpu_fp8w_check(const struct weight *w) {
    const uint8_t *p = w->data;
    const size_t n = (size_t)(w->rows * w->cols);
    for (size_t i0 = 0; i0 < n; i0 += 4096) {  // (a vectorised pass a chunk, then the chunk's first NaN)
        const size_t i1 = n - i0 < 4096 ? n : i0 + 4096;
        uint8_t any = 0;
        for (size_t i = i0; i < i1; i++) any |= (uint8_t)((p[i] & 0x7F) == 0x7F);
        for (size_t i = i0; any && i < i1; i++)
            if ((p[i] & 0x7F) == 0x7F)
                return err_set(OCT_EINVAL, "cpu: an fp8_e4m3 weight [%lld x %lld] holds a NaN code (row %lld): the "
                               "model file is broken", (long long)w->rows, (long long)w->cols,
                               (long long)(i / (size_t)w->cols));
    }
    return OCT_OK;
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
    float *xs;       // decode (n < 4): [n][cols] the quantized rows times 256 (gemv8), else NULL
    bool gemm;       // prefill through cpu_gemm_rows (AVX-512 builds)
};

static void quant_task(void *p, int t, int thread) {
    struct fp8w_ctx *m = p;
    size_t cols = (size_t)m->w->cols;
    m->sx[t] = fp8w_quant_row(m->x + t * cols, (int)cols, &m->w->fp8, m->xq + t * cols);
    for (size_t i = 0; m->xs && i < cols; i++) m->xs[t * cols + i] = 256.0f * m->xq[t * cols + i];
}

// Row r's factor after the sum, beside the token's scale: the weight's scale (per tensor or per channel),
// or 256 for a block weight (whose values carry their scales, fp8w_bscaled).
static inline float wfactor(const struct weight *w, int r) {
    return w->fp8.wscale == WSCALE_BLOCK ? 256.0f : w->fp8.scale[w->fp8.wscale == WSCALE_CHANNEL ? r : 0];
}

// Fewer than 4 tokens: GEMV8_ROWS rows at a time widened in registers, each row streamed once for all
// tokens (a block weight's codes times their block's scale as they are widened: fp8w_bscaled).
static void gemv_rows(const struct fp8w_ctx *m, int r0, int r1) {
    const struct weight *w = m->w;
    const int cols = (int)w->cols, rows = (int)w->rows, block = w->fp8.wscale == WSCALE_BLOCK;
    const int B = block ? w->fp8.block : cols, nbc = (cols + B - 1) / B;
    for (int r = r0; r < r1;) {
        const int nr = r1 - r >= GEMV8_ROWS ? GEMV8_ROWS : 1;
        const uint8_t *src = (const uint8_t *)w->data + (size_t)r * cols;
        struct brow bk[GEMV8_ROWS];
        for (int k = 0; k < nr; k++) bk[k] = (struct brow){w->fp8.scale + (size_t)((r + k) / B) * nbc, B};
        for (int t = 0; t < m->n; t++) {
            const float *xq = m->xq + (size_t)t * cols;
            float y[GEMV8_ROWS];
            if (block && nr == GEMV8_ROWS) gemv8b_4(src, (size_t)cols, xq, cols, y, bk);
            else if (block) gemv8b_1(src, xq, cols, y, bk);
            else if (nr == GEMV8_ROWS) gemv8_4(src, (size_t)cols, xq, m->xs + (size_t)t * cols, cols, y);
            else gemv8_1(src, xq, m->xs + (size_t)t * cols, cols, y);
            for (int k = 0; k < nr; k++) m->out[(size_t)t * rows + r + k] = y[k] * (m->sx[t] * wfactor(w, r + k));
        }
        r += nr;
    }
}

static void row_task(void *p, int task, int thread) {
    struct fp8w_ctx *m = p;
    const struct weight *w = m->w;
    const int cols = (int)w->cols, rows = (int)w->rows;
    int r0 = task * m->rows_per_task, r1 = r0 + m->rows_per_task;
    if (r1 > rows) r1 = rows;
    if (m->n < 4) {
        gemv_rows(m, r0, r1);
        return;
    }
    if (m->gemm) {  // the register-blocked product (block weights: of fp8w_bscaled's values), then the scales
        cpu_gemm_rows(w, m->xq, m->n, m->out, r0, r1, cpu_scratch(m->c, thread));
        for (int t = 0; t < m->n; t++)
            for (int r = r0; r < r1; r++) m->out[(size_t)t * rows + r] *= m->sx[t] * wfactor(w, r);
        return;
    }
    float *wr = cpu_scratch(m->c, thread);
    const int block = w->fp8.wscale == WSCALE_BLOCK, B = block ? w->fp8.block : cols, nbc = (cols + B - 1) / B;
    for (int r = r0; r < r1; r++) {  // (each row widened once, as the product reads it, for every token)
        const uint8_t *src = (const uint8_t *)w->data + (size_t)r * cols;
        for (int j = 0, k = 0; j < nbc; j++) {
            const float s = block ? w->fp8.scale[(size_t)(r / B) * nbc + j] : 1;
            for (; k < cols && k < (j + 1) * B; k++) wr[k] = block ? fp8w_bscaled(src[k], s) : fp8_e4m3_table[src[k]];
        }
        for (int t = 0; t < m->n; t++)
            m->out[(size_t)t * rows + r] = cpu_dot(m->xq + (size_t)t * cols, wr, cols) * (m->sx[t] * wfactor(w, r));
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
    const size_t nx = (size_t)n * cols * (n < 4 ? 2 : 1);  // (decode: xs too)
#if defined(__AVX512F__)
    const bool gemm = n >= 4;  // (cpu_gemm_rows exists in AVX-512 builds)
#else
    const bool gemm = false;
#endif
    const size_t scratch = gemm ? cpu_gemm_scratch_floats(w->cols) : cols;
    float *xq = malloc(nx * sizeof(float) + (size_t)n * sizeof(float));
    if (!xq || cpu_reserve_scratch(c, scratch) < 0) {
        free(xq);
        c->error = err_set(OCT_ENOMEM, "cpu: no memory to quantize %d rows of %zu activations to fp8", n, cols);
        return;
    }
    struct fp8w_ctx m = {c, out, x, w, n, 1, xq, xq + nx, n < 4 ? xq + (size_t)n * cols : NULL, gemm};
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
