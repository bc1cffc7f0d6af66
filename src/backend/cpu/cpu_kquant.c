// cpu_kquant.c — GGUF K-quant weights (Q4_K, Q5_K, Q6_K) on the CPU: the scalar reference
// dequantizers and the decode dot products, which dequantize each 32-element sub-block in registers
// (AVX-512, or AVX2+FMA) and accumulate in cpu_dot's order for that instruction set, so decode equals
// prefill (which widens a row with the reference and runs cpu_dot) bit for bit; other builds widen a
// row and run cpu_dot. Each value is computed as in the reference: (d·scale)·q − (dmin·min), each product
// and the difference rounded to f32, no fused multiply-add.
//
// A super-block holds QK_K = 256 elements as 8 sub-blocks of 32 (Q4_K, Q5_K) or 16 of 16 (Q6_K):
//   Q4_K (144 bytes): f16 d, f16 dmin, scales[12], qs[128]. Sub-block s (0..7) has a 6-bit scale
//     sc and min m: for s < 4, sc = scales[s] & 63, m = scales[s+4] & 63; else
//     sc = (scales[s+4] & 15) | (scales[s-4] >> 6) << 4, m = (scales[s+4] >> 4) | (scales[s] >> 6) << 4.
//     Its element l (0..31) is nibble (qs[32·(s/2) + l] >> 4·(s%2)) & 15; w = d·sc·q − dmin·m.
//   Q5_K (176 bytes): f16 d, f16 dmin, scales[12], qh[32], qs[128]: as Q4_K, with bit s of qh[l]
//     as the nibble's fifth bit (q = nibble | bit << 4, 0..31).
//   Q6_K (210 bytes): ql[128], qh[64], int8 scales[16], f16 d. Half h (0, 1) of 128 elements,
//     quarter j (0..3) of 32, element l (0..31): low 4 bits from ql[64h + 32·(j%2) + l] (the low
//     nibble for j < 2, the high one otherwise), high 2 bits (qh[32h + l] >> 2j) & 3, q = that − 32;
//     the scale is scales[8h + 2j + l/16]; w = d·scale·q.
#include <string.h>

#include "../../base/half.h"
#include "cpu.h"
#include "cpu_quant.h"
#if defined(__AVX512F__) || defined(__F16C__) || defined(__AVX2__)
#include <immintrin.h>
#endif

static inline float f16_at(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
#if defined(__F16C__)
    return _cvtsh_ss(h);
#else
    return f16_to_f32(h);
#endif
}

// The 6-bit scale and min of sub-block s of a Q4_K / Q5_K super-block's 12 scale bytes.
static inline void k4_scale_min(const uint8_t *sc, int s, int *scale, int *min) {
    if (s < 4) {
        *scale = sc[s] & 63;
        *min = sc[s + 4] & 63;
    } else {
        *scale = (sc[s + 4] & 15) | (sc[s - 4] >> 6) << 4;
        *min = (sc[s + 4] >> 4) | (sc[s] >> 6) << 4;
    }
}

#define Q4K_BYTES 144
#define Q5K_BYTES 176
#define Q6K_BYTES 210

void q4_k_row_to_f32(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / QK_K; b++, p += Q4K_BYTES, dst += QK_K) {
        float d = f16_at(p), dmin = f16_at(p + 2);
        for (int s = 0; s < 8; s++) {
            int sc, m;
            k4_scale_min(p + 4, s, &sc, &m);
            float ds = d * (float)sc, dm = dmin * (float)m;
            const uint8_t *q = p + 16 + 32 * (s / 2);
            for (int l = 0; l < 32; l++) dst[32 * s + l] = ds * (float)((q[l] >> 4 * (s % 2)) & 15) - dm;
        }
    }
}

void q5_k_row_to_f32(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / QK_K; b++, p += Q5K_BYTES, dst += QK_K) {
        float d = f16_at(p), dmin = f16_at(p + 2);
        const uint8_t *qh = p + 16;
        for (int s = 0; s < 8; s++) {
            int sc, m;
            k4_scale_min(p + 4, s, &sc, &m);
            float ds = d * (float)sc, dm = dmin * (float)m;
            const uint8_t *q = p + 48 + 32 * (s / 2);
            for (int l = 0; l < 32; l++) {
                int v = ((q[l] >> 4 * (s % 2)) & 15) | ((qh[l] >> s) & 1) << 4;
                dst[32 * s + l] = ds * (float)v - dm;
            }
        }
    }
}

void q6_k_row_to_f32(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / QK_K; b++, p += Q6K_BYTES, dst += QK_K) {
        const uint8_t *ql = p, *qh = p + 128;
        const int8_t *scales = (const int8_t *)(p + 192);
        float d = f16_at(p + 208);
        for (int h = 0; h < 2; h++)
            for (int j = 0; j < 4; j++)
                for (int l = 0; l < 32; l++) {
                    int lo = (ql[64 * h + 32 * (j % 2) + l] >> 4 * (j / 2)) & 15;
                    int v = (lo | ((qh[32 * h + l] >> 2 * j) & 3) << 4) - 32;
                    float ds = d * (float)scales[8 * h + 2 * j + l / 16];
                    dst[128 * h + 32 * j + l] = ds * (float)v;
                }
    }
}

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#define KQ_SIMD 1
#define QPF 512  // prefetch distance in each row, bytes (as cpu_quant.c)

// The 8 sub-block scales d·sc and mins dmin·m of a Q4_K / Q5_K super-block p, as f32.
static inline void k45_scales(const uint8_t *p, float *ds, float *dm) {
    float d = f16_at(p), dmin = f16_at(p + 2);
    for (int s = 0; s < 8; s++) {
        int sc, m;
        k4_scale_min(p + 4, s, &sc, &m);
        ds[s] = d * (float)sc;
        dm[s] = dmin * (float)m;
    }
}

// One 32-element sub-block as bytes: a = elements 0..15, b = 16..31, each value (byte − off)·scale − min,
// scale s_lo for a and s_hi for b.
struct ksub { __m128i a, b; float s_lo, s_hi, min; int off; };

// Sub-block s of a Q4_K (q5 = 0) or Q5_K (q5 = 1) super-block p, with its scale ds and min dm.
static inline __attribute__((always_inline)) struct ksub k45_sub(const uint8_t *p, int s, int q5, float ds, float dm) {
    const uint8_t *q = p + (q5 ? 48 : 16) + 32 * (s / 2);
    __m128i mask = _mm_set1_epi8(15);
    __m128i a = _mm_loadu_si128((const __m128i *)q), b = _mm_loadu_si128((const __m128i *)(q + 16));
    if (s % 2) { a = _mm_srli_epi16(a, 4); b = _mm_srli_epi16(b, 4); }
    a = _mm_and_si128(a, mask);
    b = _mm_and_si128(b, mask);
    if (q5) {
        __m128i bit = _mm_set1_epi8((char)(1 << s)), sixteen = _mm_set1_epi8(16);
        __m128i ha = _mm_loadu_si128((const __m128i *)(p + 16)), hb = _mm_loadu_si128((const __m128i *)(p + 32));
        a = _mm_or_si128(a, _mm_and_si128(_mm_cmpeq_epi8(_mm_and_si128(ha, bit), bit), sixteen));
        b = _mm_or_si128(b, _mm_and_si128(_mm_cmpeq_epi8(_mm_and_si128(hb, bit), bit), sixteen));
    }
    return (struct ksub){a, b, ds, ds, dm, 0};
}

// Quarter j of half h of a Q6_K super-block p.
static inline __attribute__((always_inline)) struct ksub q6_sub(const uint8_t *p, int h, int j) {
    const uint8_t *ql = p + 64 * h + 32 * (j % 2), *qh = p + 128 + 32 * h;
    const int8_t *scales = (const int8_t *)(p + 192) + 8 * h + 2 * j;
    float d = f16_at(p + 208);
    __m128i mask = _mm_set1_epi8(15), three = _mm_set1_epi8(3);
    __m128i a = _mm_loadu_si128((const __m128i *)ql), b = _mm_loadu_si128((const __m128i *)(ql + 16));
    __m128i ha = _mm_loadu_si128((const __m128i *)qh), hb = _mm_loadu_si128((const __m128i *)(qh + 16));
    if (j / 2) { a = _mm_srli_epi16(a, 4); b = _mm_srli_epi16(b, 4); }
    ha = _mm_and_si128(_mm_srli_epi16(ha, 2 * j), three);
    hb = _mm_and_si128(_mm_srli_epi16(hb, 2 * j), three);
    a = _mm_or_si128(_mm_and_si128(a, mask), _mm_slli_epi16(ha, 4));
    b = _mm_or_si128(_mm_and_si128(b, mask), _mm_slli_epi16(hb, 4));
    return (struct ksub){a, b, d * (float)scales[0], d * (float)scales[1], 0.0f, 32};
}

static inline __attribute__((always_inline)) struct ksub ksub_at(const uint8_t *p, int kind, int s, const float *ds,
                                                                 const float *dm) {
    return kind == 2 ? q6_sub(p, s / 4, s % 4) : k45_sub(p, s, kind, ds[s], dm[s]);
}

#if defined(__AVX512F__)
#define VF __m512
// 16 bytes of q as f32 (q − off)·scale − min (Q6_K: no min): the reference's (d·sc)·q − dmin·m, no fused
// multiply-add.
static inline __attribute__((always_inline)) VF kvals(__m128i q, int off, float scale, float min, int has_min) {
    __m512 v = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_cvtepu8_epi32(q), _mm512_set1_epi32(off)));
    v = _mm512_mul_ps(_mm512_set1_ps(scale), v);
    return has_min ? _mm512_sub_ps(v, _mm512_set1_ps(min)) : v;
}
#else
#define VF __m256
// 8 bytes (the low half of q) as f32, as above.
static inline __attribute__((always_inline)) VF kvals(__m128i q, int off, float scale, float min, int has_min) {
    __m256 v = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_cvtepu8_epi32(q), _mm256_set1_epi32(off)));
    v = _mm256_mul_ps(_mm256_set1_ps(scale), v);
    return has_min ? _mm256_sub_ps(v, _mm256_set1_ps(min)) : v;
}
#endif

// r[k] = Σ x·w_k over nr rows at w + k·rb; kind 0 Q4_K, 1 Q5_K, 2 Q6_K. Two accumulators per row as
// cpu_dot has: AVX-512 adds each sub-block's first 16 products to a and its last 16 to b; AVX2 adds
// elements 0..7 and 16..23 to a, 8..15 and 24..31 to b.
static inline __attribute__((always_inline)) void kdot(const uint8_t *w, size_t rb, int nr, const float *x, int n,
                                                       int kind, float *r) {
    VF a[4], b[4];
    size_t bb = kind == 0 ? Q4K_BYTES : kind == 1 ? Q5K_BYTES : Q6K_BYTES;
#pragma GCC unroll 4
    for (int k = 0; k < nr; k++) {
#if defined(__AVX512F__)
        a[k] = b[k] = _mm512_setzero_ps();
#else
        a[k] = b[k] = _mm256_setzero_ps();
#endif
    }
    float ds[4][8], dm[4][8];
    for (int i = 0, blk = 0; i < n; i += QK_K, blk++) {
#pragma GCC unroll 4
        for (int k = 0; k < nr; k++) {
            const uint8_t *p = w + k * rb + blk * bb;
            _mm_prefetch((const char *)p + QPF, _MM_HINT_T0);
            _mm_prefetch((const char *)p + QPF + 64, _MM_HINT_T0);
            _mm_prefetch((const char *)p + QPF + 128, _MM_HINT_T0);
            if (kind == 2) _mm_prefetch((const char *)p + QPF + 192, _MM_HINT_T0);
            if (kind != 2) k45_scales(p, ds[k], dm[k]);
        }
        for (int s = 0; s < 8; s++) {
            const float *xs = x + i + 32 * s;
#if defined(__AVX512F__)
            __m512 xl = _mm512_loadu_ps(xs), xh = _mm512_loadu_ps(xs + 16);
#pragma GCC unroll 4
            for (int k = 0; k < nr; k++) {
                struct ksub q = ksub_at(w + k * rb + blk * bb, kind, s, ds[k], dm[k]);
                a[k] = _mm512_fmadd_ps(xl, kvals(q.a, q.off, q.s_lo, q.min, kind != 2), a[k]);
                b[k] = _mm512_fmadd_ps(xh, kvals(q.b, q.off, q.s_hi, q.min, kind != 2), b[k]);
            }
#else
            __m256 x0 = _mm256_loadu_ps(xs), x1 = _mm256_loadu_ps(xs + 8);
            __m256 x2 = _mm256_loadu_ps(xs + 16), x3 = _mm256_loadu_ps(xs + 24);
#pragma GCC unroll 4
            for (int k = 0; k < nr; k++) {
                struct ksub q = ksub_at(w + k * rb + blk * bb, kind, s, ds[k], dm[k]);
                a[k] = _mm256_fmadd_ps(x0, kvals(q.a, q.off, q.s_lo, q.min, kind != 2), a[k]);
                b[k] = _mm256_fmadd_ps(x1, kvals(_mm_srli_si128(q.a, 8), q.off, q.s_lo, q.min, kind != 2), b[k]);
                a[k] = _mm256_fmadd_ps(x2, kvals(q.b, q.off, q.s_hi, q.min, kind != 2), a[k]);
                b[k] = _mm256_fmadd_ps(x3, kvals(_mm_srli_si128(q.b, 8), q.off, q.s_hi, q.min, kind != 2), b[k]);
            }
#endif
        }
    }
#pragma GCC unroll 4
    for (int k = 0; k < nr; k++) {
#if defined(__AVX512F__)
        r[k] = _mm512_reduce_add_ps(_mm512_add_ps(a[k], b[k]));
#else
        r[k] = cpu_hsum256(_mm256_add_ps(a[k], b[k]));
#endif
    }
}

#define KDOT_KIND(name, kind)                                                                          \
    static void name(const uint8_t *w, size_t rb, int nr, const float *x, int n, float *r) {          \
        if (nr == 4) kdot(w, rb, 4, x, n, kind, r);                                                    \
        else for (int k = 0; k < nr; k++) kdot(w + k * rb, 0, 1, x, n, kind, r + k);                  \
    }
KDOT_KIND(kdot_q4, 0)
KDOT_KIND(kdot_q5, 1)
KDOT_KIND(kdot_q6, 2)
#endif

int kquant_dot_rows(enum dtype t, const void *w, size_t row_bytes, int nr, const float *x, int n, float *r) {
#if defined(KQ_SIMD)
    if (t == DT_Q4_K) kdot_q4(w, row_bytes, nr, x, n, r);
    else if (t == DT_Q5_K) kdot_q5(w, row_bytes, nr, x, n, r);
    else if (t == DT_Q6_K) kdot_q6(w, row_bytes, nr, x, n, r);
    else return -1;
    return 0;
#else
    (void)t, (void)w, (void)row_bytes, (void)nr, (void)x, (void)n, (void)r;
    return -1;
#endif
}
