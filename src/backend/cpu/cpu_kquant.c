// cpu_kquant.c — GGUF K-quant weights (Q4_K, Q5_K, Q6_K) on the CPU: the scalar reference dequantizers
// ((d·scale)·q − (dmin·min), each product and the difference rounded to f32) and the integer dot products
// against x quantized in 256-element blocks (cpu_qdot.c), on AVX-512 (VNNI or not), AVX2 and portable C,
// all giving the same bits. Per super-block b of a row, with x's scale dx and quants qx:
//   Q4_K / Q5_K: A = Σ_s sc_s · Σ_l q·qx (the 8 sub-blocks of 32), M = Σ_s m_s · (bsum_2s + bsum_2s+1),
//     t = (d·dx)·(float)A − (dmin·dx)·(float)M;
//   Q6_K: A = Σ_g sc_g · (Σ_l q·qx − 32·bsum_g) (the 16 groups of 16, q the unsigned 6-bit value),
//     t = (d·dx)·(float)A;
// A and M are exact int32 sums (any order); each product and difference of t is rounded to f32 (no fused
// multiply-add), and a row's result is acc = acc + t over its super-blocks in order, from 0.
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

#define QPF 512 // software prefetch distance in each weight row, bytes


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
        float d = quant_f16(p), dmin = quant_f16(p + 2);
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
        float d = quant_f16(p), dmin = quant_f16(p + 2);
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
        float d = quant_f16(p + 208);
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

// ---- integer dot products ----

static void k45_dot_c(const uint8_t *w, size_t rb, int nr, struct qx_view x, int n, int q5, float *r) {
    size_t bb = q5 ? Q5K_BYTES : Q4K_BYTES;
    for (int k = 0; k < nr; k++) {
        float acc = 0;
        for (int b = 0; b < n / QK_K; b++) {
            const uint8_t *p = w + k * rb + b * bb;
            const int8_t *xq = x.q + QK_K * b;
            const int16_t *bs = x.bsum + 16 * b;
            int32_t A = 0, M = 0;
            for (int s = 0; s < 8; s++) {
                int sc, m;
                k4_scale_min(p + 4, s, &sc, &m);
                const uint8_t *q = p + (q5 ? 48 : 16) + 32 * (s / 2);
                int32_t is = 0;
                for (int l = 0; l < 32; l++) {
                    int v = (q[l] >> 4 * (s % 2)) & 15;
                    if (q5) v |= ((p[16 + l] >> s) & 1) << 4;
                    is += v * xq[32 * s + l];
                }
                A += sc * is;
                M += m * (bs[2 * s] + bs[2 * s + 1]);
            }
            float dx = x.d[b];
            float t1 = (quant_f16(p) * dx) * (float)A, t2 = (quant_f16(p + 2) * dx) * (float)M;
            acc += t1 - t2;
        }
        r[k] = acc;
    }
}

static void q6_dot_c(const uint8_t *w, size_t rb, int nr, struct qx_view x, int n, float *r) {
    for (int k = 0; k < nr; k++) {
        float acc = 0;
        for (int b = 0; b < n / QK_K; b++) {
            const uint8_t *p = w + k * rb + b * Q6K_BYTES, *ql = p, *qh = p + 128;
            const int8_t *xq = x.q + QK_K * b, *sc = (const int8_t *)(p + 192);
            const int16_t *bs = x.bsum + 16 * b;
            int32_t A = 0;
            for (int g = 0; g < 16; g++) {
                int32_t is = 0;
                for (int i = 16 * g; i < 16 * g + 16; i++) {
                    int h = i / 128, j = (i % 128) / 32, l = i % 32;
                    int v = ((ql[64 * h + 32 * (j % 2) + l] >> 4 * (j / 2)) & 15) | ((qh[32 * h + l] >> 2 * j) & 3)
                                                                                        << 4;
                    is += v * xq[i];
                }
                A += sc[g] * (is - 32 * bs[g]);
            }
            float t = (quant_f16(p + 208) * x.d[b]) * (float)A;
            acc += t;
        }
        r[k] = acc;
    }
}

#if defined(__AVX2__)
// The 8 scales and 8 mins of a Q4_K / Q5_K scale block as bytes of two words (little-endian x86).
static inline void k4_words(const uint8_t *s, uint64_t *sc, uint64_t *m) {
    uint32_t w0, w1, w2;
    memcpy(&w0, s, 4);
    memcpy(&w1, s + 4, 4);
    memcpy(&w2, s + 8, 4);
    uint32_t sc_hi = (w2 & 0x0F0F0F0F) | ((w0 >> 6) & 0x03030303) << 4;
    uint32_t m_hi = ((w2 >> 4) & 0x0F0F0F0F) | ((w1 >> 6) & 0x03030303) << 4;
    *sc = (uint64_t)sc_hi << 32 | (w0 & 0x3F3F3F3F);
    *m = (uint64_t)m_hi << 32 | (w1 & 0x3F3F3F3F);
}

static inline int32_t hsum8_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}

static inline void kq_prefetch(const uint8_t *p, int kind) {
    _mm_prefetch((const char *)p + QPF, _MM_HINT_T0);
    _mm_prefetch((const char *)p + QPF + 64, _MM_HINT_T0);
    _mm_prefetch((const char *)p + QPF + 128, _MM_HINT_T0);
    if (kind != 0) _mm_prefetch((const char *)p + QPF + 192, _MM_HINT_T0);
}
#endif

#if defined(__AVX512F__) && defined(__AVX512BW__)
#if defined(__AVX512VNNI__)
#define DPWSSD512(acc, a, b) _mm512_dpwssd_epi32(acc, a, b)
#else
#define DPWSSD512(acc, a, b) _mm512_add_epi32(acc, _mm512_madd_epi16(a, b))
#endif
static const uint16_t IOTA32[32] = {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15,
                                    16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31};

// 64 bytes: x's 32 at a, then its 32 at a + off.
static inline __m512i x2(const int8_t *a, int off) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)a)),
                              _mm256_loadu_si256((const __m256i *)(a + off)), 1);
}

// The sums of the int32 lanes of each of a[0..3] (16 lanes) or m[0..3] (8 lanes), as 4 lanes.
static inline __m128i hsum4_256(const __m256i *m) {
    __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(m[0], m[1]), _mm256_hadd_epi32(m[2], m[3]));
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

static inline __m128i hsum4_512(const __m512i *a) {
    __m256i f[4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++)
        f[k] = _mm256_add_epi32(_mm512_castsi512_si256(a[k]), _mm512_extracti64x4_epi64(a[k], 1));
    return hsum4_256(f);
}

// Four rows' super-block terms at once, lane k row k: each lane's f32 operations are the scalar ones.
static inline __m128 k4_terms(const uint8_t *p, size_t rb, float dx, __m128i A, __m128i M) {
    uint32_t v[4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) memcpy(&v[k], p + k * rb, 4); // d, dmin
    __m256 dd = _mm256_cvtph_ps(_mm_set_epi32((int)v[3], (int)v[2], (int)v[1], (int)v[0]));
    __m128 lo = _mm256_castps256_ps128(dd), hi = _mm256_extractf128_ps(dd, 1), xd = _mm_set1_ps(dx);
    __m128 d = _mm_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0)), dm = _mm_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1));
    __m128 t1 = _mm_mul_ps(_mm_mul_ps(d, xd), _mm_cvtepi32_ps(A));
    return _mm_sub_ps(t1, _mm_mul_ps(_mm_mul_ps(dm, xd), _mm_cvtepi32_ps(M)));
}

static inline __attribute__((always_inline)) void k45_dot_avx512(const uint8_t *w, size_t rb, int nr, struct qx_view x,
                                                                 int n, int q5, float *r) {
    size_t bb = q5 ? Q5K_BYTES : Q4K_BYTES;
    float acc[4] = {0, 0, 0, 0};
    __m128 acc4 = _mm_setzero_ps();
    const __m512i mask = _mm512_set1_epi8(15), sixteen = _mm512_set1_epi8(16);
    // int16 lane i of sub-blocks (2j, 2j+2) products takes scale 2j for i < 16, 2j + 2 above
    const __m512i ia = _mm512_slli_epi16(_mm512_srli_epi16(_mm512_loadu_si512((const void *)IOTA32), 4), 1);
    const __m512i ib = _mm512_add_epi16(ia, _mm512_set1_epi16(1)), ic = _mm512_add_epi16(ia, _mm512_set1_epi16(4));
    const __m512i id = _mm512_add_epi16(ia, _mm512_set1_epi16(5));
    const __m512i bits_l0 = _mm512_inserti64x4(_mm512_set1_epi8(0x01), _mm256_set1_epi8(0x04), 1);
    const __m512i bits_h0 = _mm512_inserti64x4(_mm512_set1_epi8(0x02), _mm256_set1_epi8(0x08), 1);
    const __m512i bits_l1 = _mm512_inserti64x4(_mm512_set1_epi8(0x10), _mm256_set1_epi8(0x40), 1);
    const __m512i bits_h1 = _mm512_inserti64x4(_mm512_set1_epi8(0x20), _mm256_set1_epi8((char)0x80), 1);
    for (int b = 0; b < n / QK_K; b++) {
        const int8_t *xq = x.q + QK_K * b;
        __m512i x0 = x2(xq, 64), x1 = x2(xq + 32, 64), x2v = x2(xq + 128, 64), x3 = x2(xq + 160, 64);
        __m256i bsum = _mm256_loadu_si256((const __m256i *)(x.bsum + 16 * b));
        float dx = x.d[b];
        __m512i av[4];
        __m256i mv[4];
#pragma GCC unroll 4
        for (int k = 0; k < nr; k++) {
            const uint8_t *p = w + k * rb + b * bb, *qs = p + (q5 ? 48 : 16);
            kq_prefetch(p, q5);
            uint64_t sc, m;
            k4_words(p + 4, &sc, &m);
            __m512i scw = _mm512_zextsi128_si512(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)sc)));
            __m512i c0 = _mm512_loadu_si512((const void *)qs), c1 = _mm512_loadu_si512((const void *)(qs + 64));
            __m512i l0 = _mm512_and_si512(c0, mask), h0 = _mm512_and_si512(_mm512_srli_epi16(c0, 4), mask);
            __m512i l1 = _mm512_and_si512(c1, mask), h1 = _mm512_and_si512(_mm512_srli_epi16(c1, 4), mask);
            if (q5) {
                __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(p + 16)));
                l0 = _mm512_mask_add_epi8(l0, _mm512_test_epi8_mask(qh, bits_l0), l0, sixteen);
                h0 = _mm512_mask_add_epi8(h0, _mm512_test_epi8_mask(qh, bits_h0), h0, sixteen);
                l1 = _mm512_mask_add_epi8(l1, _mm512_test_epi8_mask(qh, bits_l1), l1, sixteen);
                h1 = _mm512_mask_add_epi8(h1, _mm512_test_epi8_mask(qh, bits_h1), h1, sixteen);
            }
            __m512i a =
                DPWSSD512(_mm512_setzero_si512(), _mm512_maddubs_epi16(l0, x0), _mm512_permutexvar_epi16(ia, scw));
            a = DPWSSD512(a, _mm512_maddubs_epi16(h0, x1), _mm512_permutexvar_epi16(ib, scw));
            a = DPWSSD512(a, _mm512_maddubs_epi16(l1, x2v), _mm512_permutexvar_epi16(ic, scw));
            av[k] = DPWSSD512(a, _mm512_maddubs_epi16(h1, x3), _mm512_permutexvar_epi16(id, scw));
            __m128i mb = _mm_cvtsi64_si128((long long)m);
            mv[k] = _mm256_madd_epi16(bsum, _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mb, mb))); // Σ m_s·bsum
            if (nr < 4) {
                int32_t A = _mm512_reduce_add_epi32(av[k]), M = hsum8_epi32(mv[k]);
                float t1 = (quant_f16(p) * dx) * (float)A, t2 = (quant_f16(p + 2) * dx) * (float)M;
                acc[k] += t1 - t2;
            }
        }
        if (nr == 4) acc4 = _mm_add_ps(acc4, k4_terms(w + b * bb, rb, dx, hsum4_512(av), hsum4_256(mv)));
    }
    if (nr == 4)
        _mm_storeu_ps(r, acc4);
    else
        for (int k = 0; k < nr; k++) r[k] = acc[k];
}

static inline __attribute__((always_inline)) void q6_dot_avx512(const uint8_t *w, size_t rb, int nr, struct qx_view x,
                                                                int n, float *r) {
    float acc[4] = {0, 0, 0, 0};
    __m128 acc4 = _mm_setzero_ps();
    const __m512i mask = _mm512_set1_epi8(15), hmask = _mm512_set1_epi8(0x30);
    const __m512i g0 = _mm512_srli_epi16(_mm512_loadu_si512((const void *)IOTA32), 3); // group of int16 lane i
    // quarter j's 2 high bits (bits 2j, 2j+1 of qh) to bits 4, 5: << 4, << 2, as they are, >> 2
    const __m512i cnt_lo = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
    const __m512i cnt_hi = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
    for (int b = 0; b < n / QK_K; b++) {
        const int8_t *xq = x.q + QK_K * b;
        __m512i xv[4], av[4];
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++) xv[i] = _mm512_loadu_si512((const void *)(xq + 64 * i));
        __m256i bsum = _mm256_loadu_si256((const __m256i *)(x.bsum + 16 * b));
        float dx = x.d[b];
#pragma GCC unroll 4
        for (int k = 0; k < nr; k++) {
            const uint8_t *p = w + k * rb + b * Q6K_BYTES;
            kq_prefetch(p, 2);
            __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(p + 192)));
            __m512i scw = _mm512_zextsi256_si512(sc16);
            // − 32·Σ_g sc_g·bsum_g, in the lanes before the products are added
            __m512i a = _mm512_zextsi256_si512(
                _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(_mm256_madd_epi16(sc16, bsum), 5)));
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                __m512i ql = _mm512_loadu_si512((const void *)(p + 64 * h));
                __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(p + 128 + 32 * h)));
                __m512i hl = _mm512_and_si512(_mm512_sllv_epi16(qh, cnt_lo), hmask);
                __m512i hh = _mm512_and_si512(_mm512_srlv_epi16(qh, cnt_hi), hmask);
                __m512i lo = _mm512_ternarylogic_epi32(ql, mask, hl, 0xEA); // (ql & 15) | high bits
                __m512i hi = _mm512_ternarylogic_epi32(_mm512_srli_epi16(ql, 4), mask, hh, 0xEA);
                __m512i s_lo = _mm512_permutexvar_epi16(_mm512_add_epi16(g0, _mm512_set1_epi16((short)(8 * h))), scw);
                __m512i s_hi =
                    _mm512_permutexvar_epi16(_mm512_add_epi16(g0, _mm512_set1_epi16((short)(8 * h + 4))), scw);
                a = DPWSSD512(a, _mm512_maddubs_epi16(lo, xv[2 * h]), s_lo);
                a = DPWSSD512(a, _mm512_maddubs_epi16(hi, xv[2 * h + 1]), s_hi);
            }
            av[k] = a;
            if (nr < 4) {
                float t = (quant_f16(p + 208) * dx) * (float)_mm512_reduce_add_epi32(a);
                acc[k] += t;
            }
        }
        if (nr == 4) {
            const uint8_t *p = w + b * Q6K_BYTES + 208;
            uint16_t h[4];
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) memcpy(&h[k], p + k * rb, 2);
            __m128 d = _mm_cvtph_ps(_mm_set_epi16(0, 0, 0, 0, (short)h[3], (short)h[2], (short)h[1], (short)h[0]));
            __m128 t = _mm_mul_ps(_mm_mul_ps(d, _mm_set1_ps(dx)), _mm_cvtepi32_ps(hsum4_512(av)));
            acc4 = _mm_add_ps(acc4, t);
        }
    }
    if (nr == 4)
        _mm_storeu_ps(r, acc4);
    else
        for (int k = 0; k < nr; k++) r[k] = acc[k];
}
#endif

#if defined(__AVX512F__) && defined(__AVX512BW__)
// The prefill tile: out[t·ostride + k] for 4 rows k and KT tokens t (x[t]), the operations of the four-row
// kernels above for each token (the same bits). Each row's super-block is unpacked once for the KT tokens;
// the integer lanes wait in av / mv until the four rows' sums are reduced together.
#define KT 4
static inline __attribute__((always_inline)) void kq_tile_avx512(const uint8_t *w, size_t rb, const struct qx_view *x,
                                                                 int n, int kind, float *out, size_t ostride) {
    size_t bb = kind == 0 ? Q4K_BYTES : kind == 1 ? Q5K_BYTES : Q6K_BYTES;
    __m128 acc[KT];
#pragma GCC unroll 4
    for (int t = 0; t < KT; t++) acc[t] = _mm_setzero_ps();
    const __m512i mask = _mm512_set1_epi8(15), sixteen = _mm512_set1_epi8(16), hmask = _mm512_set1_epi8(0x30);
    const __m512i iota = _mm512_loadu_si512((const void *)IOTA32);
    const __m512i ia = _mm512_slli_epi16(_mm512_srli_epi16(iota, 4), 1), g0 = _mm512_srli_epi16(iota, 3);
    const __m512i ib = _mm512_add_epi16(ia, _mm512_set1_epi16(1)), ic = _mm512_add_epi16(ia, _mm512_set1_epi16(4));
    const __m512i id = _mm512_add_epi16(ia, _mm512_set1_epi16(5));
    const __m512i bits_l0 = _mm512_inserti64x4(_mm512_set1_epi8(0x01), _mm256_set1_epi8(0x04), 1);
    const __m512i bits_h0 = _mm512_inserti64x4(_mm512_set1_epi8(0x02), _mm256_set1_epi8(0x08), 1);
    const __m512i bits_l1 = _mm512_inserti64x4(_mm512_set1_epi8(0x10), _mm256_set1_epi8(0x40), 1);
    const __m512i bits_h1 = _mm512_inserti64x4(_mm512_set1_epi8(0x20), _mm256_set1_epi8((char)0x80), 1);
    const __m512i cnt_lo = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
    const __m512i cnt_hi = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
    __m512i xs[KT][4]; // each token's x in the order the unpacked weights take it
    __m512i av[KT][4]; // [token][row]
    __m256i mv[KT][4];
    for (int b = 0; b < n / QK_K; b++) {
#pragma GCC unroll 4
        for (int t = 0; t < KT; t++) {
            const int8_t *xq = x[t].q + QK_K * b;
            if (kind == 2) {
#pragma GCC unroll 4
                for (int i = 0; i < 4; i++) xs[t][i] = _mm512_loadu_si512((const void *)(xq + 64 * i));
            } else {
                xs[t][0] = x2(xq, 64), xs[t][1] = x2(xq + 32, 64), xs[t][2] = x2(xq + 128, 64);
                xs[t][3] = x2(xq + 160, 64);
            }
        }
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            const uint8_t *p = w + k * rb + b * bb;
            kq_prefetch(p, kind);
            __m512i q[4], s[4];
            __m256i sc16 = _mm256_setzero_si256(), mw = _mm256_setzero_si256();
            if (kind != 2) {
                const uint8_t *qs = p + (kind ? 48 : 16);
                uint64_t sc, m;
                k4_words(p + 4, &sc, &m);
                __m512i scw = _mm512_zextsi128_si512(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)sc)));
                __m512i c0 = _mm512_loadu_si512((const void *)qs), c1 = _mm512_loadu_si512((const void *)(qs + 64));
                q[0] = _mm512_and_si512(c0, mask), q[1] = _mm512_and_si512(_mm512_srli_epi16(c0, 4), mask);
                q[2] = _mm512_and_si512(c1, mask), q[3] = _mm512_and_si512(_mm512_srli_epi16(c1, 4), mask);
                if (kind == 1) {
                    __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(p + 16)));
                    q[0] = _mm512_mask_add_epi8(q[0], _mm512_test_epi8_mask(qh, bits_l0), q[0], sixteen);
                    q[1] = _mm512_mask_add_epi8(q[1], _mm512_test_epi8_mask(qh, bits_h0), q[1], sixteen);
                    q[2] = _mm512_mask_add_epi8(q[2], _mm512_test_epi8_mask(qh, bits_l1), q[2], sixteen);
                    q[3] = _mm512_mask_add_epi8(q[3], _mm512_test_epi8_mask(qh, bits_h1), q[3], sixteen);
                }
                s[0] = _mm512_permutexvar_epi16(ia, scw), s[1] = _mm512_permutexvar_epi16(ib, scw);
                s[2] = _mm512_permutexvar_epi16(ic, scw), s[3] = _mm512_permutexvar_epi16(id, scw);
                __m128i mb = _mm_cvtsi64_si128((long long)m);
                mw = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mb, mb));
            } else {
                sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(p + 192)));
                __m512i scw = _mm512_zextsi256_si512(sc16);
#pragma GCC unroll 4
                for (int h = 0; h < 2; h++) {
                    __m512i ql = _mm512_loadu_si512((const void *)(p + 64 * h));
                    __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(p + 128 + 32 * h)));
                    __m512i hl = _mm512_and_si512(_mm512_sllv_epi16(qh, cnt_lo), hmask);
                    __m512i hh = _mm512_and_si512(_mm512_srlv_epi16(qh, cnt_hi), hmask);
                    q[2 * h] = _mm512_ternarylogic_epi32(ql, mask, hl, 0xEA);
                    q[2 * h + 1] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(ql, 4), mask, hh, 0xEA);
                    s[2 * h] = _mm512_permutexvar_epi16(_mm512_add_epi16(g0, _mm512_set1_epi16((short)(8 * h))), scw);
                    s[2 * h + 1] =
                        _mm512_permutexvar_epi16(_mm512_add_epi16(g0, _mm512_set1_epi16((short)(8 * h + 4))), scw);
                }
            }
#pragma GCC unroll 4
            for (int t = 0; t < KT; t++) {
                __m256i bsum = _mm256_loadu_si256((const __m256i *)(x[t].bsum + 16 * b));
                __m512i a = _mm512_setzero_si512();
                if (kind == 2)
                    a = _mm512_zextsi256_si512(
                        _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(_mm256_madd_epi16(sc16, bsum), 5)));
                else
                    mv[t][k] = _mm256_madd_epi16(bsum, mw);
#pragma GCC unroll 4
                for (int i = 0; i < 4; i++) a = DPWSSD512(a, _mm512_maddubs_epi16(q[i], xs[t][i]), s[i]);
                av[t][k] = a;
            }
        }
        if (kind != 2) {
            uint32_t v[4];
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) memcpy(&v[k], w + k * rb + b * bb, 4); // d, dmin
            __m256 dd = _mm256_cvtph_ps(_mm_set_epi32((int)v[3], (int)v[2], (int)v[1], (int)v[0]));
            __m128 lo = _mm256_castps256_ps128(dd), hi = _mm256_extractf128_ps(dd, 1);
            __m128 d = _mm_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0)),
                   dm = _mm_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1));
#pragma GCC unroll 4
            for (int t = 0; t < KT; t++) {
                __m128 xd = _mm_set1_ps(x[t].d[b]);
                __m128 t1 = _mm_mul_ps(_mm_mul_ps(d, xd), _mm_cvtepi32_ps(hsum4_512(av[t])));
                acc[t] = _mm_add_ps(acc[t],
                                    _mm_sub_ps(t1, _mm_mul_ps(_mm_mul_ps(dm, xd), _mm_cvtepi32_ps(hsum4_256(mv[t])))));
            }
        } else {
            uint16_t hd[4];
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) memcpy(&hd[k], w + k * rb + b * bb + 208, 2);
            __m128 d = _mm_cvtph_ps(_mm_set_epi16(0, 0, 0, 0, (short)hd[3], (short)hd[2], (short)hd[1], (short)hd[0]));
#pragma GCC unroll 4
            for (int t = 0; t < KT; t++) {
                __m128 tt = _mm_mul_ps(_mm_mul_ps(d, _mm_set1_ps(x[t].d[b])), _mm_cvtepi32_ps(hsum4_512(av[t])));
                acc[t] = _mm_add_ps(acc[t], tt);
            }
        }
    }
#pragma GCC unroll 4
    for (int t = 0; t < KT; t++) _mm_storeu_ps(out + (size_t)t * ostride, acc[t]);
}

int kq_tile(enum dtype t, const uint8_t *w, size_t rb, const struct qx_view *x, int n, float *out, size_t ostride) {
    if (t == DT_Q4_K)
        kq_tile_avx512(w, rb, x, n, 0, out, ostride);
    else if (t == DT_Q5_K)
        kq_tile_avx512(w, rb, x, n, 1, out, ostride);
    else if (t == DT_Q6_K)
        kq_tile_avx512(w, rb, x, n, 2, out, ostride);
    else
        return 0;
    return KT;
}
#elif !defined(__AVX2__)
int kq_tile(enum dtype t, const uint8_t *w, size_t rb, const struct qx_view *x, int n, float *out, size_t ostride) {
    (void)t, (void)w, (void)rb, (void)x, (void)n, (void)out, (void)ostride;
    return 0;
}
#endif

#if defined(__AVX2__)
// A Q4_K / Q5_K super-block p's head: *s16 its 8 sub-block scales as 16-bit lanes in both halves (sub-block s's
// broadcast is a shuffle of bytes 2s, 2s + 1), *m its 8 mins as bytes, *qh its fifth bits (Q5_K).
static inline __attribute__((always_inline)) void k45_head(const uint8_t *p, int q5, __m256i *s16, uint64_t *m,
                                                           __m256i *qh) {
    uint64_t sc;
    k4_words(p + 4, &sc, m);
    *s16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)sc)));
    *qh = q5 ? _mm256_loadu_si256((const __m256i *)(p + 16)) : _mm256_setzero_si256();
}

// Quarter j (64 elements) of the super-block whose quants are at qs: *lo sub-block 2j's and *hi sub-block
// 2j + 1's values (0..15; 0..31 with Q5_K's fifth bits), *sl and *sh their scales' broadcasts.
static inline __attribute__((always_inline)) void k45_quarter(const uint8_t *qs, __m256i s16, __m256i qh, int j,
                                                              int q5, __m256i *lo, __m256i *hi, __m256i *sl,
                                                              __m256i *sh) {
    const __m256i mask = _mm256_set1_epi8(15), sixteen = _mm256_set1_epi8(16);
    const __m256i c = _mm256_loadu_si256((const __m256i *)(qs + 32 * j));
    *lo = _mm256_and_si256(c, mask);
    *hi = _mm256_and_si256(_mm256_srli_epi16(c, 4), mask);
    if (q5) {
        const __m256i bl = _mm256_set1_epi8((char)(1 << 2 * j)), bh = _mm256_set1_epi8((char)(2 << 2 * j));
        *lo = _mm256_or_si256(*lo, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bl), bl), sixteen));
        *hi = _mm256_or_si256(*hi, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bh), bh), sixteen));
    }
    *sl = _mm256_shuffle_epi8(s16, _mm256_set1_epi16((short)((4 * j + 1) << 8 | 4 * j)));
    *sh = _mm256_shuffle_epi8(s16, _mm256_set1_epi16((short)((4 * j + 3) << 8 | (4 * j + 2))));
}

// One row's exact A = Σ_s sc_s · Σ_l q·qx over a Q4_K / Q5_K super-block p (its sub-block scales picked from
// one 16-bit vector by byte shuffles) as 8 int32 lanes; *m receives the 8 mins as bytes.
static inline __attribute__((always_inline)) __m256i k45_block_avx2(const uint8_t *p, const int8_t *xq, int q5,
                                                                    uint64_t *m) {
    const uint8_t *qs = p + (q5 ? 48 : 16);
    kq_prefetch(p, q5);
    __m256i s16, qh, a = _mm256_setzero_si256();
    k45_head(p, q5, &s16, m, &qh);
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        __m256i lo, hi, sl, sh;
        k45_quarter(qs, s16, qh, j, q5, &lo, &hi, &sl, &sh);
        __m256i xl = _mm256_loadu_si256((const __m256i *)(xq + 64 * j));
        __m256i xh = _mm256_loadu_si256((const __m256i *)(xq + 64 * j + 32));
        a = _mm256_add_epi32(a, _mm256_madd_epi16(_mm256_maddubs_epi16(lo, xl), sl));
        a = _mm256_add_epi32(a, _mm256_madd_epi16(_mm256_maddubs_epi16(hi, xh), sh));
    }
    return a;
}

// M = Σ_s m_s · (bsum_2s + bsum_2s+1) as 8 int32 lanes, for the 8 mins in the bytes of m.
static inline __m256i k4_mins8(uint64_t m, const int16_t *bsum) {
    const __m128i mv = _mm_cvtsi64_si128((long long)m);
    const __m256i b = _mm256_loadu_si256((const __m256i *)bsum);
    return _mm256_madd_epi16(b, _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mv, mv)));
}

// One Q4_K / Q5_K row, its super-blocks in order: one stream of the row's bytes (four rows interleaved, x's
// loads shared, read memory at half this rate), each block's exact A and M (k45_block_avx2), then
// acc += (d·dx)·A − (dmin·dx)·M, each product and the difference rounded.
static inline __attribute__((always_inline)) float k45_dot1_avx2(const uint8_t *w, struct qx_view x, int n, int q5) {
    const size_t bb = q5 ? Q5K_BYTES : Q4K_BYTES;
    float acc = 0.0f;
    for (int b = 0; b < n / QK_K; b++) {
        const uint8_t *p = w + b * bb;
        uint64_t m;
        const int32_t A = hsum8_epi32(k45_block_avx2(p, x.q + QK_K * b, q5, &m));
        const int32_t M = hsum8_epi32(k4_mins8(m, x.bsum + 16 * b));
        const float dx = x.d[b], t1 = (quant_f16(p) * dx) * (float)A, t2 = (quant_f16(p + 2) * dx) * (float)M;
        acc += t1 - t2;
    }
    return acc;
}

// Quarter j = c + 2u of half h of a Q6_K super-block p (v: the 32 bytes of low nibbles at p + 64h + 32c, qh: the
// 32 bytes of high bits at p + 128 + 32h): *q its 32 values (0..63, before the −32), *s its two 16-value groups'
// scales as 16-bit lanes in the two halves.
static inline __attribute__((always_inline)) void q6_quarter(const uint8_t *p, int h, int c, int u, __m256i v,
                                                             __m256i qh, __m256i *q, __m256i *s) {
    const int j = c + 2 * u, g = 8 * h + 2 * j;
    const int8_t *sc = (const int8_t *)(p + 192);
    const __m256i nib = _mm256_and_si256(u ? _mm256_srli_epi16(v, 4) : v, _mm256_set1_epi8(15));
    const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * j), _mm256_set1_epi8(3));
    *q = _mm256_or_si256(nib, _mm256_slli_epi16(hb, 4));
    *s = _mm256_set_m128i(_mm_set1_epi16(sc[g + 1]), _mm_set1_epi16(sc[g]));
}

// One Q6_K row, its super-blocks in order (one stream, as k45_dot1_avx2): per block the exact
// A = Σ_g sc_g · (Σ_l q·qx − 32·bsum_g), then acc += (d·dx)·A.
static inline __attribute__((always_inline)) float q6_dot1_avx2(const uint8_t *w, struct qx_view x, int n) {
    float acc = 0.0f;
    for (int b = 0; b < n / QK_K; b++) {
        const int8_t *xq = x.q + QK_K * b;
        const uint8_t *p = w + b * Q6K_BYTES;
        const int8_t *sc = (const int8_t *)(p + 192);
        kq_prefetch(p, 2);
        __m256i a = _mm256_setzero_si256();
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            __m256i qh = _mm256_loadu_si256((const __m256i *)(p + 128 + 32 * h));
#pragma GCC unroll 2
            for (int c = 0; c < 2; c++) {
                __m256i v = _mm256_loadu_si256((const __m256i *)(p + 64 * h + 32 * c));
#pragma GCC unroll 2
                for (int u = 0; u < 2; u++) {  // quarter j = c + 2u: the low nibbles, then the high ones
                    __m256i q, s;
                    q6_quarter(p, h, c, u, v, qh, &q, &s);
                    __m256i xv = _mm256_loadu_si256((const __m256i *)(xq + 128 * h + 32 * (c + 2 * u)));
                    a = _mm256_add_epi32(a, _mm256_madd_epi16(_mm256_maddubs_epi16(q, xv), s));
                }
            }
        }
        __m256i bsum = _mm256_loadu_si256((const __m256i *)(x.bsum + 16 * b));
        __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)sc));
        int32_t A = hsum8_epi32(a) - 32 * hsum8_epi32(_mm256_madd_epi16(sc16, bsum));
        acc += (quant_f16(p + 208) * x.d[b]) * (float)A;
    }
    return acc;
}
#endif

#if defined(__AVX2__) && !(defined(__AVX512F__) && defined(__AVX512BW__))
#define KT2 4 // tokens of the AVX2 prefill tile

// One Q4_K / Q5_K row against KT2 tokens: each super-block's weights unpacked and its scales shuffled once for
// the four tokens; each token's exact A and M as k45_block_avx2 gives them, the four horizontal sums at once,
// then t = (d·dx)·A − (dmin·dx)·M in the tokens' lanes, added in block order: k45_dot1_avx2's bits.
static inline __attribute__((always_inline)) void k45_tile1_avx2(const uint8_t *w, const struct qx_view *x, int n,
                                                                 int q5, float *out, size_t ostride) {
    const size_t bb = q5 ? Q5K_BYTES : Q4K_BYTES;
    __m128 acc = _mm_setzero_ps();  // lane t: token t
    for (int b = 0; b < n / QK_K; b++) {
        const uint8_t *p = w + b * bb, *qs = p + (q5 ? 48 : 16);
        kq_prefetch(p, q5);
        uint64_t m;
        __m256i s16, qh, a[KT2];
        k45_head(p, q5, &s16, &m, &qh);
#pragma GCC unroll 4
        for (int t = 0; t < KT2; t++) a[t] = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            __m256i lo, hi, sl, sh;
            k45_quarter(qs, s16, qh, j, q5, &lo, &hi, &sl, &sh);
#pragma GCC unroll 4
            for (int t = 0; t < KT2; t++) {
                const int8_t *xq = x[t].q + QK_K * b;
                __m256i xl = _mm256_loadu_si256((const __m256i *)(xq + 64 * j));
                __m256i xh = _mm256_loadu_si256((const __m256i *)(xq + 64 * j + 32));
                a[t] = _mm256_add_epi32(a[t], _mm256_madd_epi16(_mm256_maddubs_epi16(lo, xl), sl));
                a[t] = _mm256_add_epi32(a[t], _mm256_madd_epi16(_mm256_maddubs_epi16(hi, xh), sh));
            }
        }
        __m256i mm[KT2];
        float dx[KT2];
#pragma GCC unroll 4
        for (int t = 0; t < KT2; t++) {
            mm[t] = k4_mins8(m, x[t].bsum + 16 * b);
            dx[t] = x[t].d[b];
        }
        const __m256i ha = _mm256_hadd_epi32(_mm256_hadd_epi32(a[0], a[1]), _mm256_hadd_epi32(a[2], a[3]));
        const __m256i hm = _mm256_hadd_epi32(_mm256_hadd_epi32(mm[0], mm[1]), _mm256_hadd_epi32(mm[2], mm[3]));
        // (exact integer sums in any order: lane t of the two halves added gives token t's)
        const __m128 A = _mm_cvtepi32_ps(_mm_add_epi32(_mm256_castsi256_si128(ha), _mm256_extracti128_si256(ha, 1)));
        const __m128 M = _mm_cvtepi32_ps(_mm_add_epi32(_mm256_castsi256_si128(hm), _mm256_extracti128_si256(hm, 1)));
        const __m128 vx = _mm_loadu_ps(dx), d = _mm_set1_ps(quant_f16(p)), dmin = _mm_set1_ps(quant_f16(p + 2));
        acc = _mm_add_ps(acc, _mm_sub_ps(_mm_mul_ps(_mm_mul_ps(d, vx), A), _mm_mul_ps(_mm_mul_ps(dmin, vx), M)));
    }
    float r[KT2];
    _mm_storeu_ps(r, acc);
    for (int t = 0; t < KT2; t++) out[(size_t)t * ostride] = r[t];
}

// One Q6_K row against KT2 tokens: each super-block's 6-bit values and scales unpacked once for the four tokens;
// each token's exact A = Σ_g sc_g · (Σ_l q·qx − 32·bsum_g) (as integer lanes, summed at once as the Q4_K tile
// sums), then acc += (d·dx)·A in the tokens' lanes, in block order: q6_dot1_avx2's bits.
static inline __attribute__((always_inline)) void q6_tile1_avx2(const uint8_t *w, const struct qx_view *x, int n,
                                                                float *out, size_t ostride) {
    __m128 acc = _mm_setzero_ps();  // lane t: token t
    for (int b = 0; b < n / QK_K; b++) {
        const uint8_t *p = w + b * Q6K_BYTES;
        const int8_t *sc = (const int8_t *)(p + 192);
        kq_prefetch(p, 2);
        __m256i a[KT2];
#pragma GCC unroll 4
        for (int t = 0; t < KT2; t++) a[t] = _mm256_setzero_si256();
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m256i qh = _mm256_loadu_si256((const __m256i *)(p + 128 + 32 * h));
#pragma GCC unroll 2
            for (int c = 0; c < 2; c++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(p + 64 * h + 32 * c));
#pragma GCC unroll 2
                for (int u = 0; u < 2; u++) {  // quarter j = c + 2u: the low nibbles, then the high ones
                    const int j = c + 2 * u;
                    __m256i q, s;
                    q6_quarter(p, h, c, u, v, qh, &q, &s);
#pragma GCC unroll 4
                    for (int t = 0; t < KT2; t++) {
                        const __m256i xv = _mm256_loadu_si256((const __m256i *)(x[t].q + QK_K * b + 128 * h + 32 * j));
                        a[t] = _mm256_add_epi32(a[t], _mm256_madd_epi16(_mm256_maddubs_epi16(q, xv), s));
                    }
                }
            }
        }
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)sc));
        float dx[KT2];
#pragma GCC unroll 4
        for (int t = 0; t < KT2; t++) {  // (exact integers: the 32·bsum terms leave each lane sum unchanged in total)
            const __m256i bsum = _mm256_loadu_si256((const __m256i *)(x[t].bsum + 16 * b));
            a[t] = _mm256_sub_epi32(a[t], _mm256_slli_epi32(_mm256_madd_epi16(sc16, bsum), 5));
            dx[t] = x[t].d[b];
        }
        const __m256i ha = _mm256_hadd_epi32(_mm256_hadd_epi32(a[0], a[1]), _mm256_hadd_epi32(a[2], a[3]));
        const __m128 A = _mm_cvtepi32_ps(_mm_add_epi32(_mm256_castsi256_si128(ha), _mm256_extracti128_si256(ha, 1)));
        const __m128 d = _mm_set1_ps(quant_f16(p + 208));
        acc = _mm_add_ps(acc, _mm_mul_ps(_mm_mul_ps(d, _mm_loadu_ps(dx)), A));
    }
    float r[KT2];
    _mm_storeu_ps(r, acc);
    for (int t = 0; t < KT2; t++) out[(size_t)t * ostride] = r[t];
}

// The AVX2 build's prefill tile (cpu_quant.h): Q4_K, Q5_K and Q6_K, 4 rows one after another (each row read once
// for the four tokens).
int kq_tile(enum dtype t, const uint8_t *w, size_t rb, const struct qx_view *x, int n, float *out, size_t ostride) {
    if (t == DT_Q6_K) {
        for (int k = 0; k < 4; k++) q6_tile1_avx2(w + k * rb, x, n, out + k, ostride);
        return KT2;
    }
    if (t != DT_Q4_K && t != DT_Q5_K) return 0;
    for (int k = 0; k < 4; k++) k45_tile1_avx2(w + k * rb, x, n, t == DT_Q5_K, out + k, ostride);
    return KT2;
}
#endif

// kind 0 Q4_K, 1 Q5_K, 2 Q6_K; nr <= 4 (four rows share each load of x).
#define KQ_RUN(fn4, fn1)                      \
    do {                                      \
        if (nr == 4)                          \
            fn4;                              \
        else                                  \
            for (int k = 0; k < nr; k++) fn1; \
    } while (0)

void kq_dot_rows(int path, enum dtype t, const uint8_t *w, size_t rb, int nr, struct qx_view x, int n, float *r) {
#if defined(__AVX512F__) && defined(__AVX512BW__)
    if (path == QX_AVX512) {
        if (t == DT_Q4_K)
            KQ_RUN(k45_dot_avx512(w, rb, 4, x, n, 0, r), k45_dot_avx512(w + k * rb, 0, 1, x, n, 0, r + k));
        else if (t == DT_Q5_K)
            KQ_RUN(k45_dot_avx512(w, rb, 4, x, n, 1, r), k45_dot_avx512(w + k * rb, 0, 1, x, n, 1, r + k));
        else
            KQ_RUN(q6_dot_avx512(w, rb, 4, x, n, r), q6_dot_avx512(w + k * rb, 0, 1, x, n, r + k));
        return;
    }
#endif
#if defined(__AVX2__)
    if (path == QX_AVX2) {
        if (t == DT_Q4_K)
            for (int k = 0; k < nr; k++) r[k] = k45_dot1_avx2(w + k * rb, x, n, 0);
        else if (t == DT_Q5_K)
            for (int k = 0; k < nr; k++) r[k] = k45_dot1_avx2(w + k * rb, x, n, 1);
        else
            for (int k = 0; k < nr; k++) r[k] = q6_dot1_avx2(w + k * rb, x, n);
        return;
    }
#endif
    if (t == DT_Q6_K)
        q6_dot_c(w, rb, nr, x, n, r);
    else
        k45_dot_c(w, rb, nr, x, n, t == DT_Q5_K, r);
}
