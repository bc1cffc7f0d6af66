// cpu_qdot.c — GGUF block-type weights (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K) times f32 activations on the CPU as
// integer dot products (owns: the 8-bit quantization of x, the Q8_0 / Q4_0 kernels, the kernel dispatch and
// cpu_quant_matmul; the K-quant kernels are in cpu_kquant.c). The math, which every path (AVX-512 with or
// without VNNI, AVX2, portable C) and the NumPy reference (tools/ref/gguf_quant.py, qdot) compute exactly:
//
// x quantized once per matmul call, per token, in blocks of B = 32 elements (Q8_0 / Q4_0 weights) or 256
// (the K-quants): amax = max |x_i|, d = amax / 127 (f32), q_i = rint(x_i / d) (round half to even; 0 where
// d = 0), so |q_i| <= 127. The K-quant layout adds bsum[16 per block]: the sums of each 16 consecutive q.
//
// Q8_0 / Q4_0 (w_i = d_w·(signed quant)): block b's 32 products form 8 integer lane sums p_{b,l} (elements
// 4l..4l+3). With s_b = d_w·d_x (f32), 16 f32 accumulators take acc[8·(b mod 2) + l] += s_b·(float)p_{b,l}
// (the product rounded, then the sum: no fused multiply-add), and the result is acc reduced as a tree:
// u_i = acc_i + acc_{i+8}, v_i = u_i + u_{i+4}, w_i = v_i + v_{i+2}, r = w_0 + w_1.
// The K-quants' per-block math is in cpu_kquant.c: exact integer sums per super-block, then one f32 term added
// to one accumulator in block order.
//
// Layout of one token's quantized x (qx_bytes): int8 q[n], at 64-byte offsets then f32 d[n / B], then (K)
// int16 bsum[n / 16].
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../base/check.h"
#include "../../base/half.h"
#include "../weight.h"
#include "cpu.h"
#include "cpu_quant.h"
#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#define ALIGN64(v) (((v) + 63) & ~(size_t)63)
#define QPF 512 // software prefetch distance in each weight row, bytes

int qx_block(enum dtype t) {
    if (t == DT_Q8_0 || t == DT_Q4_0) return 32;
    if (t == DT_Q4_K || t == DT_Q5_K || t == DT_Q6_K) return QK_K;
    return 0;
}

size_t qx_bytes(enum dtype t, int n) {
    int b = qx_block(t);
    if (!b || n <= 0 || n % b) return 0;
    size_t s = ALIGN64((size_t)n) + ALIGN64((size_t)(n / b) * 4);
    if (b == QK_K) s += ALIGN64((size_t)(n / 16) * 2);
    return s;
}

struct qx_view qx_view(enum dtype t, const void *qx, int n) {
    const char *p = qx;
    int b = qx_block(t);
    struct qx_view v = {(const int8_t *)p, (const float *)(p + ALIGN64((size_t)n)), NULL};
    if (b == QK_K) v.bsum = (const int16_t *)(p + ALIGN64((size_t)n) + ALIGN64((size_t)(n / b) * 4));
    return v;
}

int qx_has_path(int path) {
    if (path == QX_C) return 1;
#if defined(__AVX2__)
    if (path == QX_AVX2) return 1;
#endif
#if defined(__AVX512F__) && defined(__AVX512BW__)
    if (path == QX_AVX512) return 1;
#endif
    return 0;
}

int qx_best_path(void) { return qx_has_path(QX_AVX512) ? QX_AVX512 : qx_has_path(QX_AVX2) ? QX_AVX2 : QX_C; }


// ---- quantizing x ----

// One block of b elements: q[0..b) and its scale; x / d, correctly rounded, then rint (round half to even).
static void qx_block_c(const float *x, int b, int8_t *q, float *d) {
    float amax = 0;
    for (int i = 0; i < b; i++) amax = fmaxf(amax, fabsf(x[i]));
    float s = amax / 127.0f;
    *d = s;
    for (int i = 0; i < b; i++) {
        float v = s != 0 ? x[i] / s : 0.0f;
        v = fminf(fmaxf(v, -127.0f), 127.0f); // (a no-op for finite x; keeps the conversion defined)
        q[i] = (int8_t)lrintf(v);
    }
}

#if defined(__AVX512F__) && defined(__AVX512BW__)
static void qx_block_avx512(const float *x, int b, int8_t *q, float *d) {
    __m512 m = _mm512_setzero_ps();
    for (int i = 0; i < b; i += 16) m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(x + i)));
    float s = _mm512_reduce_max_ps(m) / 127.0f;
    *d = s;
    if (s == 0) {
        memset(q, 0, (size_t)b);
        return;
    }
    __m512 sv = _mm512_set1_ps(s);
    for (int i = 0; i < b; i += 16) {
        __m512i v = _mm512_cvtps_epi32(_mm512_div_ps(_mm512_loadu_ps(x + i), sv));
        _mm_storeu_si128((__m128i *)(q + i), _mm512_cvtepi32_epi8(v));
    }
}
#endif

#if defined(__AVX2__)
// qx_block_c in 8 lanes (b a multiple of 32): the same amax (MAXPS keeps the running max where x is NaN, as
// fmaxf does), the same correctly rounded x / s, the same clamp (MAXPS gives -127 for NaN, as fmaxf) and
// round half to even (the default rounding of CVTPS2DQ, as lrintf).
static void qx_block_avx2(const float *x, int b, int8_t *q, float *d) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 m = _mm256_setzero_ps();
    for (int i = 0; i < b; i += 8) m = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)), m);
    float lanes[8], amax = 0;
    _mm256_storeu_ps(lanes, m);
    for (int i = 0; i < 8; i++) amax = fmaxf(amax, lanes[i]);
    const float s = amax / 127.0f;
    *d = s;
    if (s == 0) {
        memset(q, 0, (size_t)b);
        return;
    }
    const __m256 sv = _mm256_set1_ps(s), lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int i = 0; i < b; i += 32) {
        __m256i v[4];
        for (int k = 0; k < 4; k++) {
            const __m256 r = _mm256_div_ps(_mm256_loadu_ps(x + i + 8 * k), sv);
            v[k] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(r, lo), hi));
        }
        // the packs work within 128-bit halves: the permute puts the four vectors' lanes back in order
        const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3]));
        _mm256_storeu_si256((__m256i *)(q + i), _mm256_permutevar8x32_epi32(p, order));
    }
}
#endif

void qx_quantize_path(int path, enum dtype t, const float *x, int n, void *qx) {
    int b = qx_block(t);
    int8_t *q = qx;
    float *d = (float *)((char *)qx + ALIGN64((size_t)n));
    for (int i = 0; i < n / b; i++) {
#if defined(__AVX512F__) && defined(__AVX512BW__)
        if (path == QX_AVX512) {
            qx_block_avx512(x + (size_t)i * b, b, q + (size_t)i * b, d + i);
            continue;
        }
#endif
#if defined(__AVX2__)
        if (path == QX_AVX2) {
            qx_block_avx2(x + (size_t)i * b, b, q + (size_t)i * b, d + i);
            continue;
        }
#endif
        qx_block_c(x + (size_t)i * b, b, q + (size_t)i * b, d + i);
    }
    if (b == QK_K) {
        int16_t *bs = (int16_t *)((char *)d + ALIGN64((size_t)(n / b) * 4));
        for (int g = 0; g < n / 16; g++) {
            int s = 0;
            for (int i = 0; i < 16; i++) s += q[16 * g + i];
            bs[g] = (int16_t)s;
        }
    }
}

void qx_quantize(enum dtype t, const float *x, int n, void *qx) { qx_quantize_path(qx_best_path(), t, x, n, qx); }

// ---- Q8_0 / Q4_0 ----

// The 16-accumulator tree of the header comment.
static float tree16(const float *a) {
    float u[8], v[4];
    for (int i = 0; i < 8; i++) u[i] = a[i] + a[i + 8];
    for (int i = 0; i < 4; i++) v[i] = u[i] + u[i + 4];
    float w0 = v[0] + v[2], w1 = v[1] + v[3];
    return w0 + w1;
}

static void q40_dot_c(const uint8_t *w, size_t rb, int nr, const int8_t *xq, const float *xd, int n, int q4, float *r) {
    size_t bb = q4 ? 18 : 34;
    for (int k = 0; k < nr; k++) {
        float acc[16] = {0};
        for (int b = 0; b < n / 32; b++) {
            const uint8_t *p = w + k * rb + b * bb;
            const int8_t *x = xq + 32 * b;
            float s = quant_f16(p) * xd[b];
            for (int l = 0; l < 8; l++) {
                int32_t sum = 0;
                for (int j = 4 * l; j < 4 * l + 4; j++) {
                    int wq = q4 ? (j < 16 ? (p[2 + j] & 15) : (p[2 + j - 16] >> 4)) - 8 : (int8_t)p[2 + j];
                    sum += wq * x[j];
                }
                float prod = s * (float)sum;
                acc[8 * (b & 1) + l] += prod;
            }
        }
        r[k] = tree16(acc);
    }
}

#if defined(__AVX512F__) && defined(__AVX512BW__)
#if defined(__AVX512VNNI__)
#define DPBUSD512(acc, u, s) _mm512_dpbusd_epi32(acc, u, s)
#else
#define DPBUSD512(acc, u, s) _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), _mm512_set1_epi16(1)))
#endif

static inline float tree16_512(__m512 a) {
    __m256 u = _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));
    __m128 v = _mm_add_ps(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1));
    __m128 w = _mm_add_ps(v, _mm_movehl_ps(v, v));
    return _mm_cvtss_f32(_mm_add_ss(w, _mm_shuffle_ps(w, w, 1)));
}

// The f16 scales of blocks at p and p + bb as 16 floats: 8 of each.
static inline __m512 scale_pair(const uint8_t *p, size_t bb) {
    uint16_t h0, h1;
    memcpy(&h0, p, 2);
    memcpy(&h1, p + bb, 2);
    return _mm512_cvtph_ps(_mm256_set_m128i(_mm_set1_epi16((short)h1), _mm_set1_epi16((short)h0)));
}

// Blocks b, b+1 of a Q8_0 / Q4_0 row as 64 bytes: signed quants (Q8_0) or the nibbles 0..15 (Q4_0).
static inline __m512i quants_pair(const uint8_t *p, int q4) {
    if (!q4)
        return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(p + 2))),
                                  _mm256_loadu_si256((const __m256i *)(p + 36)), 1);
    __m256i v = _mm256_set_m128i(_mm_loadu_si128((const __m128i *)(p + 20)), _mm_loadu_si128((const __m128i *)(p + 2)));
    __m256i m = _mm256_set1_epi8(15);
    __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(v, m)),
                                   _mm256_and_si256(_mm256_srli_epi16(v, 4), m), 1);
    return _mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(3, 1, 2, 0)); // [lo b, hi b, lo b+1, hi b+1]
}

// One block alone (the last of an odd count), in the low 256 bits.
static inline __m512i quants_one(const uint8_t *p, int q4) {
    if (!q4) return _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(p + 2)));
    __m128i v = _mm_loadu_si128((const __m128i *)(p + 2)), m = _mm_set1_epi8(15);
    return _mm512_zextsi256_si512(_mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m), _mm_and_si128(v, m)));
}

// The lane sums of quants wq (as quants_pair gives them) against x: Q8_0 |w|·(x signed as w), Q4_0
// nibble·x − 8·x (m8 = −8·Σ x per lane).
static inline __m512i lanes(__m512i wq, __m512i xv, __m512i m8, int q4) {
    if (q4) return DPBUSD512(m8, wq, xv);
    __mmask64 neg = _mm512_movepi8_mask(wq);
    __m512i sx = _mm512_mask_sub_epi8(xv, neg, _mm512_setzero_si512(), xv);
    return DPBUSD512(_mm512_setzero_si512(), _mm512_abs_epi8(wq), sx);
}

static inline __attribute__((always_inline)) void q40_dot_avx512(const uint8_t *w, size_t rb, int nr, const int8_t *xq,
                                                                 const float *xd, int n, int q4, float *r) {
    size_t bb = q4 ? 18 : 34;
    __m512 acc[4];
#pragma GCC unroll 4
    for (int k = 0; k < nr; k++) acc[k] = _mm512_setzero_ps();
    int nb = n / 32, b = 0;
    for (; b + 2 <= nb; b += 2) {
        __m512i xv = _mm512_loadu_si512((const void *)(xq + 32 * b));
        __m512 dx = _mm512_insertf32x8(_mm512_set1_ps(xd[b]), _mm256_set1_ps(xd[b + 1]), 1);
        __m512i m8 = _mm512_setzero_si512();
        if (q4) m8 = _mm512_sub_epi32(m8, DPBUSD512(_mm512_setzero_si512(), _mm512_set1_epi8(8), xv));
#pragma GCC unroll 4
        for (int k = 0; k < nr; k++) {
            const uint8_t *p = w + k * rb + b * bb;
            _mm_prefetch((const char *)p + QPF, _MM_HINT_T0);
            __m512 s = _mm512_mul_ps(scale_pair(p, bb), dx);
            __m512 f = _mm512_cvtepi32_ps(lanes(quants_pair(p, q4), xv, m8, q4));
            acc[k] = _mm512_add_ps(acc[k], _mm512_mul_ps(s, f));
        }
    }
    if (b < nb) { // an odd last block: accumulators 0..7 only
        __m512i xv = _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)(xq + 32 * b)));
        __m512i m8 = _mm512_setzero_si512();
        if (q4) m8 = _mm512_sub_epi32(m8, DPBUSD512(_mm512_setzero_si512(), _mm512_set1_epi8(8), xv));
#pragma GCC unroll 4
        for (int k = 0; k < nr; k++) {
            const uint8_t *p = w + k * rb + b * bb;
            __m512 s = _mm512_set1_ps(quant_f16(p) * xd[b]);
            __m512 f = _mm512_cvtepi32_ps(lanes(quants_one(p, q4), xv, m8, q4));
            acc[k] = _mm512_mask_add_ps(acc[k], 0x00FF, acc[k], _mm512_mul_ps(s, f));
        }
    }
#pragma GCC unroll 4
    for (int k = 0; k < nr; k++) r[k] = tree16_512(acc[k]);
}
#endif

#if defined(__AVX512F__) && defined(__AVX512BW__)
#define QT 3 // tokens of the prefill tile (4 rows × QT tokens of accumulators in registers)

// The prefill tile: out[t·ostride + k] for 4 rows k and QT tokens t (token t's quantized x at qx + t·qxb), each
// the same operations as q40_dot_avx512's for that row and token, so the same bits; every weight block is
// loaded and unpacked once for QT tokens, every block of x once for 4 rows.
static inline __attribute__((always_inline)) void
q40_tile_avx512(const uint8_t *w, size_t rb, const char *qx, size_t qxb, int n, int q4, float *out, size_t ostride) {
    size_t bb = q4 ? 18 : 34;
    const int8_t *xq[QT];
    const float *xd[QT];
    __m512 acc[4][QT];
#pragma GCC unroll 4
    for (int t = 0; t < QT; t++) {
        xq[t] = (const int8_t *)(qx + (size_t)t * qxb);
        xd[t] = (const float *)(qx + (size_t)t * qxb + ALIGN64((size_t)n));
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) acc[k][t] = _mm512_setzero_ps();
    }
    int nb = n / 32, b = 0;
    for (; b + 2 <= nb; b += 2) {
        __m512i xv[QT], m8[QT];
        __m512 dx[QT];
#pragma GCC unroll 4
        for (int t = 0; t < QT; t++) {
            xv[t] = _mm512_loadu_si512((const void *)(xq[t] + 32 * b));
            dx[t] = _mm512_insertf32x8(_mm512_set1_ps(xd[t][b]), _mm256_set1_ps(xd[t][b + 1]), 1);
            m8[t] = _mm512_setzero_si512();
            if (q4) m8[t] = _mm512_sub_epi32(m8[t], DPBUSD512(_mm512_setzero_si512(), _mm512_set1_epi8(8), xv[t]));
        }
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            const uint8_t *p = w + k * rb + b * bb;
            _mm_prefetch((const char *)p + QPF, _MM_HINT_T0);
            __m512i wq = quants_pair(p, q4), aw = _mm512_abs_epi8(wq);
            __mmask64 neg = _mm512_movepi8_mask(wq);
            __m512 sw = scale_pair(p, bb);
#pragma GCC unroll 4
            for (int t = 0; t < QT; t++) {
                __m512i l = q4 ? DPBUSD512(m8[t], wq, xv[t])
                               : DPBUSD512(_mm512_setzero_si512(), aw,
                                           _mm512_mask_sub_epi8(xv[t], neg, _mm512_setzero_si512(), xv[t]));
                acc[k][t] = _mm512_add_ps(acc[k][t], _mm512_mul_ps(_mm512_mul_ps(sw, dx[t]), _mm512_cvtepi32_ps(l)));
            }
        }
    }
    if (b < nb) // an odd last block: accumulators 0..7 only
#pragma GCC unroll 4
        for (int t = 0; t < QT; t++) {
            __m512i xv = _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)(xq[t] + 32 * b)));
            __m512i m8 = _mm512_setzero_si512();
            if (q4) m8 = _mm512_sub_epi32(m8, DPBUSD512(_mm512_setzero_si512(), _mm512_set1_epi8(8), xv));
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                const uint8_t *p = w + k * rb + b * bb;
                __m512 s = _mm512_set1_ps(quant_f16(p) * xd[t][b]);
                __m512 f = _mm512_cvtepi32_ps(lanes(quants_one(p, q4), xv, m8, q4));
                acc[k][t] = _mm512_mask_add_ps(acc[k][t], 0x00FF, acc[k][t], _mm512_mul_ps(s, f));
            }
        }
#pragma GCC unroll 4
    for (int t = 0; t < QT; t++)
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) out[(size_t)t * ostride + k] = tree16_512(acc[k][t]);
}
#endif

#if defined(__AVX2__)
static inline float tree16_256(__m256 even, __m256 odd) {
    __m256 u = _mm256_add_ps(even, odd);
    __m128 v = _mm_add_ps(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1));
    __m128 w = _mm_add_ps(v, _mm_movehl_ps(v, v));
    return _mm_cvtss_f32(_mm_add_ss(w, _mm_shuffle_ps(w, w, 1)));
}

// Block p's quants as lanes_wx256 takes them: Q4_0's nibbles in *wq; Q8_0's quants in *wq, their magnitudes in *wa.
static inline void quants256(const uint8_t *p, int q4, __m256i *wq, __m256i *wa) {
    if (q4) {
        const __m128i v = _mm_loadu_si128((const __m128i *)(p + 2)), m = _mm_set1_epi8(15);
        *wq = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m), _mm_and_si128(v, m));
        *wa = _mm256_setzero_si256();
    } else {
        *wq = _mm256_loadu_si256((const __m256i *)(p + 2));
        *wa = _mm256_abs_epi8(*wq);
    }
}

// The block's 8 lane sums against x (32 bytes): Q8_0 |w|·(x signed as w), Q4_0 nibble·x − 8·x.
static inline __m256i lanes_wx256(__m256i wq, __m256i wa, __m256i xv, int q4) {
    const __m256i ones = _mm256_set1_epi16(1);
    if (q4) {
        const __m256i m8 = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(8), xv), ones);
        return _mm256_sub_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(wq, xv), ones), m8);
    }
    return _mm256_madd_epi16(_mm256_maddubs_epi16(wa, _mm256_sign_epi8(xv, wq)), ones);
}

// One Q8_0 (q4 = 0) or Q4_0 (q4 = 1) row against x, its blocks in order (one stream: four rows interleaved read
// memory at 3/4 of the rate), block b's terms into the accumulators of b's parity, a compile-time index (a run-
// time one leaves them in memory).
static inline __attribute__((always_inline)) float q40_dot1_avx2(const uint8_t *w, const int8_t *xq, const float *xd,
                                                                 int n, int q4) {
    const size_t bb = q4 ? 18 : 34;
    const int nb = n / 32;
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int b2 = 0; b2 < nb; b2 += 2)
#pragma GCC unroll 2
        for (int e = 0; e < 2; e++) {
            const int b = b2 + e;
            if (b >= nb) break;
            const uint8_t *p = w + b * bb;
            _mm_prefetch((const char *)p + QPF, _MM_HINT_T0);
            __m256i wq, wa;
            quants256(p, q4, &wq, &wa);
            const __m256i xv = _mm256_loadu_si256((const __m256i *)(xq + 32 * b));
            const __m256 s = _mm256_set1_ps(quant_f16(p) * xd[b]);
            acc[e] = _mm256_add_ps(acc[e], _mm256_mul_ps(s, _mm256_cvtepi32_ps(lanes_wx256(wq, wa, xv, q4))));
        }
    return tree16_256(acc[0], acc[1]);
}
#endif

#if defined(__AVX2__) && !(defined(__AVX512F__) && defined(__AVX512BW__))
#define QT2 4     // tokens of the AVX2 prefill tile (one row × QT2 tokens: 2·QT2 accumulators in registers)

// A row's blocks rounded up to 8: the stride of the tile's scale tables (each row's 32-byte aligned).
static inline int q40_nbp(int n) { return (n / 32 + 7) / 8 * 8; }

// The AVX2 prefill tile: out[t·ostride + k] for the nr rows k at w (rb bytes apart) and QT2 tokens t (token t's
// quantized x at qx + t·qxb), dw + k·nbp row k's block scales (nbp: the blocks a row rounded up to 8): each
// weight block loaded and unpacked once for QT2 tokens, each token's lane sums, scale and accumulators exactly
// q40_dot1_avx2's. The scales dw·xd of a row are multiplied 8 at a time beforehand into sx (the same float
// products; [QT2][nbp], 32-byte aligned), so that the block loop broadcasts them from memory instead of
// spending a scalar multiply and a shuffle on each.
static inline __attribute__((always_inline)) void q40_tile_avx2(const uint8_t *w, size_t rb, int nr, const char *qx,
                                                                size_t qxb, int n, int q4, const float *dw,
                                                                float *sx, float *out, size_t ostride) {
    const size_t bb = q4 ? 18 : 34;
    const int nb = n / 32, nbp = q40_nbp(n);
    const int8_t *xq[QT2];
    const float *xd[QT2];
    for (int t = 0; t < QT2; t++) {
        struct qx_view v = qx_view(q4 ? DT_Q4_0 : DT_Q8_0, qx + (size_t)t * qxb, n);
        xq[t] = v.q;
        xd[t] = v.d;
    }
    for (int k = 0; k < nr; k++) {
        const float *dk = dw + (size_t)k * nbp;
        for (int t = 0; t < QT2; t++) {
            float *st = sx + (size_t)t * nbp;
            int b = 0;
            for (; b + 8 <= nb; b += 8)
                _mm256_store_ps(st + b, _mm256_mul_ps(_mm256_load_ps(dk + b), _mm256_loadu_ps(xd[t] + b)));
            for (; b < nb; b++) st[b] = dk[b] * xd[t][b];
        }
        __m256 acc[QT2][2];
#pragma GCC unroll 4
        for (int t = 0; t < QT2; t++) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
        for (int b2 = 0; b2 < nb; b2 += 2)
#pragma GCC unroll 2
        for (int e = 0; e < 2; e++) {  // (block parity e a constant: the accumulators stay in registers)
            const int b = b2 + e;
            if (b >= nb) break;
            const uint8_t *p = w + k * rb + b * bb;
            _mm_prefetch((const char *)p + QPF, _MM_HINT_T0);
            __m256i wq, wa;
            quants256(p, q4, &wq, &wa);
#pragma GCC unroll 4
            for (int t = 0; t < QT2; t++) {
                const __m256i xv = _mm256_loadu_si256((const __m256i *)(xq[t] + 32 * b));
                const __m256 sc = _mm256_broadcast_ss(sx + (size_t)t * nbp + b);
                acc[t][e] =
                    _mm256_add_ps(acc[t][e], _mm256_mul_ps(sc, _mm256_cvtepi32_ps(lanes_wx256(wq, wa, xv, q4))));
            }
        }
        for (int t = 0; t < QT2; t++) out[(size_t)t * ostride + k] = tree16_256(acc[t][0], acc[t][1]);
    }
}
#endif

// r[k] for nr <= 4 rows of Q8_0 (q4 = 0) or Q4_0 (q4 = 1) on the given path.
static void q40_dot(int path, const uint8_t *w, size_t rb, int nr, const int8_t *xq, const float *xd, int n, int q4,
                    float *r) {
#if defined(__AVX512F__) && defined(__AVX512BW__)
    if (path == QX_AVX512) {
        if (nr == 4 && q4)
            q40_dot_avx512(w, rb, 4, xq, xd, n, 1, r);
        else if (nr == 4)
            q40_dot_avx512(w, rb, 4, xq, xd, n, 0, r);
        else if (q4)
            for (int k = 0; k < nr; k++) q40_dot_avx512(w + k * rb, 0, 1, xq, xd, n, 1, r + k);
        else
            for (int k = 0; k < nr; k++) q40_dot_avx512(w + k * rb, 0, 1, xq, xd, n, 0, r + k);
        return;
    }
#endif
#if defined(__AVX2__)
    if (path == QX_AVX2) {
        if (q4)
            for (int k = 0; k < nr; k++) r[k] = q40_dot1_avx2(w + k * rb, xq, xd, n, 1);
        else
            for (int k = 0; k < nr; k++) r[k] = q40_dot1_avx2(w + k * rb, xq, xd, n, 0);
        return;
    }
#endif
    q40_dot_c(w, rb, nr, xq, xd, n, q4, r);
}

void qx_dot_rows_path(int path, enum dtype t, const void *w, size_t rb, int nr, const void *qx, int n, float *r) {
    struct qx_view v = qx_view(t, qx, n);
    if (!qx_has_path(path)) path = QX_C;
    if (t == DT_Q8_0 || t == DT_Q4_0)
        q40_dot(path, w, rb, nr, v.q, v.d, n, t == DT_Q4_0, r);
    else
        kq_dot_rows(path, t, w, rb, nr, v, n, r);
}

void qx_dot_rows(enum dtype t, const void *w, size_t rb, int nr, const void *qx, int n, float *r) {
    qx_dot_rows_path(qx_best_path(), t, w, rb, nr, qx, n, r);
}

// ---- the matmul ----

#define QM_ROWS 4
#define KQ_TILE 4 // tokens of cpu_kquant.c's prefill tile
#define QM_MIN_TASK_MACS 16384

struct qm_ctx {
    float *out;
    const float *x;
    const struct weight *w;
    char *qx; // [n][qxb]
    size_t qxb;
    const uint8_t *kq8; // decode: the Q4_K / Q6_K / Q8_0 rows repacked in groups of 8 (cpu_kq8*.c), or NULL
    int n, rows_per_task, tokens_per_task;
    float *tile; // AVX2 Q8_0 / Q4_0 prefill: each thread's block scales and scale products, or NULL
    size_t tile_floats; // a thread's: (QM_ROWS + QT2) · q40_nbp(cols)
};

static void qm_quantize_task(void *p, int task, int thread) {
    struct qm_ctx *m = p;
    int cols = (int)m->w->cols;
    int t0 = task * m->tokens_per_task, t1 = t0 + m->tokens_per_task < m->n ? t0 + m->tokens_per_task : m->n;
    for (int t = t0; t < t1; t++) qx_quantize(m->w->dtype, m->x + (size_t)t * cols, cols, m->qx + (size_t)t * m->qxb);
}

// Rows [r0, r1) for every token, QM_ROWS rows at a time: each group of rows stays in cache across the tokens.
static void qm_task(void *p, int task, int thread) {
    struct qm_ctx *m = p;
    const struct weight *w = m->w;
    int cols = (int)w->cols, rows = (int)w->rows;
    int r0 = task * m->rows_per_task, r1 = r0 + m->rows_per_task < rows ? r0 + m->rows_per_task : rows;
    size_t rb = dtype_row_bytes(w->dtype, cols);
    int r = r0;
    if (m->kq8) // the whole groups of 8 (r0 is one's first row)
        for (; r + 8 <= r1 && r + 8 <= rows / 8 * 8; r += 8)
            for (int t = 0; t < m->n; t++) {
                float res[8];
                struct qx_view v = qx_view(w->dtype, m->qx + (size_t)t * m->qxb, cols);
                if (w->dtype == DT_Q8_0)
                    kq80x8_dot_group(m->kq8 + (size_t)(r / 8) * kq80x8_group_bytes(cols), cols, v, res);
                else if (w->dtype == DT_Q6_K)
                    kq6x8_dot_group(m->kq8 + (size_t)(r / 8) * kq6x8_group_bytes(cols), cols, v, res);
                else
                    kq8_dot_group(m->kq8 + (size_t)(r / 8) * kq8_group_bytes(cols), cols, v, res);
                memcpy(m->out + (size_t)t * rows + r, res, sizeof res);
            }
    for (; r < r1; r += QM_ROWS) {
        int nr = r1 - r < QM_ROWS ? r1 - r : QM_ROWS, t = 0;
        const uint8_t *wr = (const uint8_t *)w->data + (size_t)r * rb;
#if defined(__AVX512F__) && defined(__AVX512BW__)
        if (nr == QM_ROWS && (w->dtype == DT_Q8_0 || w->dtype == DT_Q4_0)) { // prefill: QT tokens at a time
            for (; t + QT <= m->n; t += QT) {
                float *o = m->out + (size_t)t * rows + r;
                const char *q = m->qx + (size_t)t * m->qxb;
                if (w->dtype == DT_Q4_0)
                    q40_tile_avx512(wr, rb, q, m->qxb, cols, 1, o, (size_t)rows);
                else
                    q40_tile_avx512(wr, rb, q, m->qxb, cols, 0, o, (size_t)rows);
            }
        }
#endif
#if defined(__AVX2__) && !(defined(__AVX512F__) && defined(__AVX512BW__))
        if (m->tile) {
            // prefill in AVX2 builds: QT2 tokens at a time, the rows' block scales widened once for all of them
            const int q4 = w->dtype == DT_Q4_0, bb = q4 ? 18 : 34, nb = cols / 32, nbp = q40_nbp(cols);
            float *dw = m->tile + (size_t)thread * m->tile_floats, *sx = dw + (size_t)QM_ROWS * nbp;
            for (int k = 0; k < nr; k++)
                for (int b = 0; b < nb; b++) dw[(size_t)k * nbp + b] = quant_f16(wr + k * rb + (size_t)b * bb);
            for (; t + QT2 <= m->n; t += QT2) {
                float *o = m->out + (size_t)t * rows + r;
                const char *q = m->qx + (size_t)t * m->qxb;
                if (q4)  // (q4 a constant in each inlined copy)
                    q40_tile_avx2(wr, rb, nr, q, m->qxb, cols, 1, dw, sx, o, (size_t)rows);
                else
                    q40_tile_avx2(wr, rb, nr, q, m->qxb, cols, 0, dw, sx, o, (size_t)rows);
            }
        }
#endif
        if (nr == QM_ROWS && qx_block(w->dtype) == QK_K) // the K-quants' tile
            for (; t + KQ_TILE <= m->n; t += KQ_TILE) {
                struct qx_view v[KQ_TILE];
                for (int i = 0; i < KQ_TILE; i++) v[i] = qx_view(w->dtype, m->qx + (size_t)(t + i) * m->qxb, cols);
                if (!kq_tile(w->dtype, wr, rb, v, cols, m->out + (size_t)t * rows + r, (size_t)rows)) break;
            }
        for (; t < m->n; t++) {
            float res[QM_ROWS];
            qx_dot_rows(w->dtype, (const char *)w->data + (size_t)r * rb, rb, nr, m->qx + (size_t)t * m->qxb, cols,
                        res);
            memcpy(m->out + (size_t)t * rows + r, res, (size_t)nr * sizeof(float));
        }
    }
}

int cpu_quant_takes(enum dtype t) { return qx_block(t) != 0; }

void cpu_quant_matmul(struct cpu_backend *c, float *out, const float *x, const struct weight *w, int n) {
    int cols = (int)w->cols, rows = (int)w->rows;
    size_t qxb = qx_bytes(w->dtype, cols);
    if (!qxb || n <= 0) {
        if (n > 0)
            c->error =
                err_set(OCT_EINVAL, "cpu: %s rows of %d columns are not whole blocks", dtype_name(w->dtype), cols);
        return;
    }
    char *qx = aligned_alloc(64, (size_t)n * qxb);
    if (!qx) {
        c->error = err_set(OCT_ENOMEM, "cpu: no memory to quantize %d tokens of %d columns", n, cols);
        return;
    }
    struct qm_ctx m = {out, x, w, qx, qxb, n < KQ_TILE ? cpu_kq8_of(c, w) : NULL, n, 0, 0, NULL, 0};
    int nt = c->n_threads;
#if defined(__AVX2__) && !(defined(__AVX512F__) && defined(__AVX512BW__))
    if ((w->dtype == DT_Q8_0 || w->dtype == DT_Q4_0) && n >= QT2) {
        m.tile_floats = (size_t)(QM_ROWS + QT2) * q40_nbp(cols);
        m.tile = aligned_alloc(32, (size_t)nt * m.tile_floats * sizeof(float));
        if (!m.tile) {
            free(qx);
            c->error = err_set(OCT_ENOMEM, "cpu: no memory for the prefill tile's scales (%d columns)", cols);
            return;
        }
    }
#endif
    m.tokens_per_task = n >= 4 * nt ? (n + 4 * nt - 1) / (4 * nt) : n;
    if (m.tokens_per_task == n)
        qm_quantize_task(&m, 0, 0);
    else
        threadpool_run(c->tp, (n + m.tokens_per_task - 1) / m.tokens_per_task, qm_quantize_task, &m);
    long macs_per_row = (long)n * cols;
    int rpt = (int)(QM_MIN_TASK_MACS / (macs_per_row ? macs_per_row : 1));
    if (rpt < 1) rpt = 1;
    if ((rows + rpt - 1) / rpt > nt * 8) rpt = (rows + nt * 8 - 1) / (nt * 8);
    if (rpt < rows) rpt = (rpt + 15) / 16 * 16; // whole 16-row groups: no two threads write one line of out
    m.rows_per_task = rpt;
    threadpool_run(c->tp, (rows + rpt - 1) / rpt, qm_task, &m);
    free(m.tile);
    free(qx);
}
