// cpu_kq6x8.c — Q6_K weights repacked at load in groups of eight rows for the decode product (owns: the
// group layout, the repack, and its AVX-512 VNNI dot kernel). The kernel gives the bits of kq_dot_rows
// (cpu_kquant.c's header comment has the math): per row and super-block the same exact int32 sum
// A = Σ_g sc_g·Σ_l q·qx − 32·Σ_g sc_g·bsum_g (q the unsigned 6-bit value; no int32 sum overflows, so the
// grouping does not change it), then t = (d·dx)·(float)A and acc = acc + t in order, each in f32.
//
// A group of rows 8g..8g+7 with nb = cols / 256 super-blocks is KQ6 bytes: nb quant blocks of 1536 bytes,
// then nb headers of 144 bytes, then zeros up to a multiple of 64 (so every quant block is 64-byte aligned):
//   quant block b, 8 triples of 64-byte vectors (V0, V1, V2) at 192j: for sub-blocks 2j and 2j + 1 (16
//     elements each) and i = 0..7, byte 8r + i of row r holds the 6-bit values a = element 32j + i,
//     b = 32j + 8 + i, c = 32j + 16 + i, e = 32j + 24 + i of row r's super-block b, as
//     V0 = a | (e & 3) << 6, V1 = b | (e >> 2 & 3) << 6, V2 = c | (e >> 4) << 6.
//     So int32 lane 2r (2r + 1) of a vector of a's (b's, c's, e's) covers 4 elements against the same 4
//     bytes of x at 32j + i (i = 0..3, resp. 4..7; b: + 8, c: + 16, e: + 24), a broadcast of x's 8 bytes.
//   header b: d[8] (f16, row r at 2r), then the int8 scales: sc[g][r] at 16 + 16·(g / 2) + 2r + g % 2.
// The rows past the last whole group are not repacked: they are read from the weight as it is.
#include <stdlib.h>
#include <string.h>

#include "cpu_quant.h"
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#define Q6K_BYTES 210
#define KQ6_QS 1536
#define KQ6_HDR 144
#define KQ6_PF 4096 // software prefetch distance in the quant blocks, bytes (headers: 4 blocks ahead)

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)
#define KQ6_BUILT 1
#else
#define KQ6_BUILT 0
#endif

int kq6x8_built(void) { return KQ6_BUILT; }

size_t kq6x8_group_bytes(int64_t cols) {
    size_t nb = (size_t)(cols / QK_K);
    return (nb * (KQ6_QS + KQ6_HDR) + 63) / 64 * 64;
}

size_t kq6x8_bytes(int64_t rows, int64_t cols) {
    if (!KQ6_BUILT || rows < 8 || cols < QK_K || cols % QK_K) return 0;
    return (size_t)(rows / 8) * kq6x8_group_bytes(cols);
}

// v[0..256) = the unsigned 6-bit values of the Q6_K super-block at p.
static void q6_values(const uint8_t *p, uint8_t *v) {
    for (int h = 0; h < 2; h++)
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 32; l++) {
                int lo = (p[64 * h + 32 * (j % 2) + l] >> 4 * (j / 2)) & 15;
                v[128 * h + 32 * j + l] = (uint8_t)(lo | ((p[128 + 32 * h + l] >> 2 * j) & 3) << 4);
            }
}

void kq6x8_repack(const uint8_t *w, size_t rb, int64_t rows, int64_t cols, uint8_t *dst) {
    int nb = (int)(cols / QK_K);
    size_t gb = kq6x8_group_bytes(cols);
    for (int64_t g = 0; g < rows / 8; g++) {
        uint8_t *qd = dst + (size_t)g * gb, *hd = qd + (size_t)nb * KQ6_QS;
        memset(qd, 0, gb);
        for (int b = 0; b < nb; b++) {
            uint8_t *q = qd + (size_t)b * KQ6_QS, *h = hd + (size_t)b * KQ6_HDR;
            for (int r = 0; r < 8; r++) {
                const uint8_t *p = w + (size_t)(8 * g + r) * rb + (size_t)b * Q6K_BYTES;
                memcpy(h + 2 * r, p + 208, 2);
                for (int s = 0; s < 16; s++) h[16 + 16 * (s / 2) + 2 * r + s % 2] = p[192 + s];
                uint8_t e[QK_K];
                q6_values(p, e);
                for (int j = 0; j < 8; j++)
                    for (int i = 0; i < 8; i++) {
                        const uint8_t *a = e + 32 * j + i, t = a[24];
                        uint8_t *v = q + 192 * j + 8 * r + i;
                        v[0] = (uint8_t)(a[0] | (t & 3) << 6);
                        v[64] = (uint8_t)(a[8] | (t >> 2 & 3) << 6);
                        v[128] = (uint8_t)(a[16] | (t >> 4) << 6);
                    }
            }
        }
    }
}

#if KQ6_BUILT
// int16 position 2L (int32 lane L, row L / 2) of a scale vector takes position 2·(L / 2) of the sign-extended
// scales (plus 16·(j % 2) + g % 2); the odd positions are masked to 0
static const uint16_t SIDX6[32] = {0, 0, 0, 0, 2, 2, 2, 2, 4, 4, 4, 4, 6, 6, 6, 6, 8, 8, 8, 8, 10, 10, 10, 10,
                                   12, 12, 12, 12, 14, 14, 14, 14};
// int16 position p of the bsum vector for scales k (sub-blocks 4k..4k+3): bsum[4k + 2·(p / 16) + p % 2]
static const uint16_t BIDX6[32] = {0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1,
                                   2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3};

static inline __m512i bcast8(const int8_t *p) {
    long long v;
    memcpy(&v, p, 8);
    return _mm512_set1_epi64(v);
}

// The eight rows of group gp against x (nb super-blocks): r[0..8).
static inline __attribute__((always_inline)) void kq6x8_dot_avx512(const uint8_t *gp, int nb, struct qx_view x,
                                                                   float *r) {
    const __m512i m63 = _mm512_set1_epi8(63), m03 = _mm512_set1_epi8(3), m0f = _mm512_set1_epi8(15);
    const __m512i zero = _mm512_setzero_si512();
    const __m512i sidx = _mm512_loadu_si512((const void *)SIDX6), bidx = _mm512_loadu_si512((const void *)BIDX6);
    const __mmask32 even = 0x55555555u;
    __m256 acc = _mm256_setzero_ps();
    const uint8_t *hd = gp + (size_t)nb * KQ6_QS;
    for (int b = 0; b < nb; b++) {
        const uint8_t *q = gp + (size_t)b * KQ6_QS, *h = hd + (size_t)b * KQ6_HDR;
        const int8_t *xq = x.q + QK_K * b;
#pragma GCC unroll 24
        for (int l = 0; l < 24; l++) _mm_prefetch((const char *)q + KQ6_PF + 64 * l, _MM_HINT_T0);
#pragma GCC unroll 3
        for (int l = 0; l < 3; l++) _mm_prefetch((const char *)h + 4 * KQ6_HDR + 64 * l, _MM_HINT_T0);
        __m512i sc[4]; // sub-blocks 4k..4k+3, sign-extended: position 16·(j − 2k) + 2r + g % 2 (g = 2j + g % 2)
        __m512i bs = _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)(x.bsum + 16 * b)));
        __m512i M = zero; // lane m: Σ sc·bsum of row m % 8 over sub-blocks 2j, 2j + 1 with j % 2 = m / 8
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            sc[k] = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(h + 16 + 32 * k)));
            __m512i bw = _mm512_permutexvar_epi16(_mm512_add_epi16(bidx, _mm512_set1_epi16((short)(4 * k))), bs);
            M = _mm512_dpwssd_epi32(M, sc[k], bw);
        }
        __m512i A = zero;
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
            const uint8_t *v = q + 192 * j;
            const int8_t *xj = xq + 32 * j;
            __m512i v0 = _mm512_loadu_si512((const void *)v), v1 = _mm512_loadu_si512((const void *)(v + 64));
            __m512i v2 = _mm512_loadu_si512((const void *)(v + 128));
            // e: bits 0-1 from v0's top, 2-3 from v1's, 4-5 from v2's (0xE4: the third operand picks the first)
            __m512i t = _mm512_ternarylogic_epi32(_mm512_srli_epi16(v0, 6), _mm512_srli_epi16(v1, 4), m03, 0xE4);
            __m512i e = _mm512_and_si512(_mm512_ternarylogic_epi32(t, _mm512_srli_epi16(v2, 2), m0f, 0xE4), m63);
            // |Σ of 4 q·qx| <= 4·63·127 < 2^15: each sum's low int16 is its value, and the scale's high int16 is 0
            __m512i ia = _mm512_dpbusd_epi32(zero, _mm512_and_si512(v0, m63), bcast8(xj));
            __m512i ib = _mm512_dpbusd_epi32(zero, _mm512_and_si512(v1, m63), bcast8(xj + 8));
            __m512i ic = _mm512_dpbusd_epi32(zero, _mm512_and_si512(v2, m63), bcast8(xj + 16));
            __m512i ie = _mm512_dpbusd_epi32(zero, e, bcast8(xj + 24));
            __m512i s0 = _mm512_maskz_permutexvar_epi16(
                even, _mm512_add_epi16(sidx, _mm512_set1_epi16((short)(16 * (j % 2)))), sc[j / 2]);
            __m512i s1 = _mm512_maskz_permutexvar_epi16(
                even, _mm512_add_epi16(sidx, _mm512_set1_epi16((short)(16 * (j % 2) + 1))), sc[j / 2]);
            A = _mm512_dpwssd_epi32(A, ia, s0);
            A = _mm512_dpwssd_epi32(A, ib, s0);
            A = _mm512_dpwssd_epi32(A, ic, s1);
            A = _mm512_dpwssd_epi32(A, ie, s1);
        }
        __m256i A8 = _mm512_cvtepi64_epi32(_mm512_add_epi32(A, _mm512_srli_epi64(A, 32)));
        __m256i M8 = _mm256_add_epi32(_mm512_castsi512_si256(M), _mm512_extracti64x4_epi64(M, 1));
        A8 = _mm256_sub_epi32(A8, _mm256_slli_epi32(M8, 5));
        __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h));
        __m256 t = _mm256_mul_ps(_mm256_mul_ps(d, _mm256_set1_ps(x.d[b])), _mm256_cvtepi32_ps(A8));
        acc = _mm256_add_ps(acc, t);
    }
    _mm256_storeu_ps(r, acc);
}
#endif

void kq6x8_dot_group(const uint8_t *gp, int cols, struct qx_view x, float *r) {
#if KQ6_BUILT
    kq6x8_dot_avx512(gp, cols / QK_K, x, r);
#else
    (void)gp, (void)cols, (void)x;
    memset(r, 0, 8 * sizeof(float));
#endif
}
