// cpu_kq8.c — Q4_K weights repacked at load in groups of eight rows for the decode product (owns: the
// group layout, the repack, and its AVX-512 VNNI dot kernel). The kernel gives the bits of kq_dot_rows
// (cpu_kquant.c's header comment has the math): per row and super-block the same exact int32 sums A and M,
// then t = (d·dx)·(float)A − (dmin·dx)·(float)M and acc = acc + t in order, each in f32 without fusing.
//
// A group of rows 8g..8g+7 with nb = cols / 256 super-blocks is KQ8 bytes: nb quant blocks of 1024 bytes,
// then nb headers of 160 bytes, then zeros up to a multiple of 64 (so every quant block is 64-byte aligned):
//   quant block b, 16 vectors of 64 bytes: vector z = 2s + h (sub-block s, half h) holds 8 bytes per row r
//     at 8r + i (i = 0..7): low nibble element 32s + 16h + i of row r's super-block b, high nibble element
//     32s + 16h + 8 + i. So int32 lane 2r (2r + 1) of the vector covers 4 elements against the same 4 bytes
//     of x at 32s + 16h + i (i = 0..3, resp. 4..7), a broadcast of x's 8 bytes.
//   header b: d[8] and dmin[8] (f16, row r at r), then the 6-bit scales and mins unpacked to one byte each,
//     sc[s][r] at 32 + 8s + r and m[s][r] at 96 + 8s + r.
// The rows past the last whole group are not repacked: they are read from the weight as it is.
#include <stdlib.h>
#include <string.h>

#include "cpu_quant.h"
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#define Q4K_BYTES 144
#define KQ8_QS 1024
#define KQ8_HDR 160
#define KQ8_PF 2048 // software prefetch distance in the quant blocks, bytes (headers: 4 blocks ahead)

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__) && defined(__AVX512VBMI__)
#define KQ8_BUILT 1
#else
#define KQ8_BUILT 0
#endif

int kq8_built(void) { return KQ8_BUILT; }

size_t kq8_group_bytes(int64_t cols) {
    size_t nb = (size_t)(cols / QK_K);
    return (nb * (KQ8_QS + KQ8_HDR) + 63) / 64 * 64;
}

size_t kq8_bytes(int64_t rows, int64_t cols) {
    if (!KQ8_BUILT || rows < 8 || cols < QK_K || cols % QK_K) return 0;
    return (size_t)(rows / 8) * kq8_group_bytes(cols);
}

void kq8_repack(const uint8_t *w, size_t rb, int64_t rows, int64_t cols, uint8_t *dst) {
    int nb = (int)(cols / QK_K);
    size_t gb = kq8_group_bytes(cols);
    for (int64_t g = 0; g < rows / 8; g++) {
        uint8_t *qd = dst + (size_t)g * gb, *hd = qd + (size_t)nb * KQ8_QS;
        memset(qd, 0, gb);
        for (int b = 0; b < nb; b++) {
            uint8_t *q = qd + (size_t)b * KQ8_QS, *h = hd + (size_t)b * KQ8_HDR;
            for (int r = 0; r < 8; r++) {
                const uint8_t *p = w + (size_t)(8 * g + r) * rb + (size_t)b * Q4K_BYTES, *sc = p + 4, *qs = p + 16;
                memcpy(h + 2 * r, p, 2);
                memcpy(h + 16 + 2 * r, p + 2, 2);
                for (int s = 0; s < 8; s++) {
                    int scale, min;
                    if (s < 4) {
                        scale = sc[s] & 63, min = sc[s + 4] & 63;
                    } else {
                        scale = (sc[s + 4] & 15) | (sc[s - 4] >> 6) << 4;
                        min = (sc[s + 4] >> 4) | (sc[s] >> 6) << 4;
                    }
                    h[32 + 8 * s + r] = (uint8_t)scale;
                    h[96 + 8 * s + r] = (uint8_t)min;
                    for (int hh = 0; hh < 2; hh++)
                        for (int i = 0; i < 8; i++) {
                            int l0 = 16 * hh + i, l1 = l0 + 8; // elements of sub-block s
                            int v0 = (qs[32 * (s / 2) + l0] >> 4 * (s % 2)) & 15;
                            int v1 = (qs[32 * (s / 2) + l1] >> 4 * (s % 2)) & 15;
                            q[64 * (2 * s + hh) + 8 * r + i] = (uint8_t)(v0 | v1 << 4);
                        }
                }
            }
        }
    }
}

#if KQ8_BUILT
// byte l: lane l / 4's row (l / 8) for the scales; its row (l / 4) % 8 and sub-block parity l / 32 for the mins
static const uint8_t SIDX[64] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3,
                                 3, 3, 3, 3, 4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 6,
                                 7, 7, 7, 7, 7, 7, 7, 7};
static const uint8_t MIDX[64] = {0, 0, 0, 0, 1,  1,  1,  1,  2,  2,  2,  2,  3,  3,  3,  3,  4,  4,  4,  4,  5, 5,
                                 5, 5, 6, 6, 6, 6, 7,  7,  7,  7,  8,  8,  8,  8,  9,  9,  9,  9,  10, 10, 10, 10,
                                 11, 11, 11, 11, 12, 12, 12, 12, 13, 13, 13, 13, 14, 14, 14, 14, 15, 15, 15, 15};

// The eight rows of group gp against x (nb super-blocks): r[0..8).
static inline __attribute__((always_inline)) void kq8_dot_avx512(const uint8_t *gp, int nb, struct qx_view x,
                                                                float *r) {
    const __m512i mask = _mm512_set1_epi8(15);
    // sub-block s's scales: lanes 2r and 2r + 1 take byte 8s + r, zero-extended (the other bytes masked to 0)
    const __m512i sidx0 = _mm512_loadu_si512((const void *)SIDX);
    // sub-blocks 2j (lanes 0..7, row r = lane) and 2j + 1 (lanes 8..15): min byte at int16 0 and 1 of the lane
    const __m512i midx0 = _mm512_loadu_si512((const void *)MIDX);
    const __mmask64 kb0 = 0x1111111111111111ull, kb02 = 0x5555555555555555ull;
    // the bsum words (bsum_2s, bsum_2s+1) of sub-blocks 2j, 2j + 1 in lanes 0..7, 8..15
    const __m512i bidx = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    __m256 acc = _mm256_setzero_ps();
    const uint8_t *hd = gp + (size_t)nb * KQ8_QS;
    for (int b = 0; b < nb; b++) {
        const uint8_t *q = gp + (size_t)b * KQ8_QS, *h = hd + (size_t)b * KQ8_HDR;
        const int8_t *xq = x.q + QK_K * b;
#pragma GCC unroll 16
        for (int l = 0; l < 16; l++) _mm_prefetch((const char *)q + KQ8_PF + 64 * l, _MM_HINT_T0);
#pragma GCC unroll 3
        for (int l = 0; l < 3; l++) _mm_prefetch((const char *)h + 4 * KQ8_HDR + 64 * l, _MM_HINT_T0);
        __m512i scb = _mm512_loadu_si512((const void *)(h + 32)), mnb = _mm512_loadu_si512((const void *)(h + 96));
        __m512i A = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int s = 0; s < 8; s++) {
            __m512i is = _mm512_setzero_si512();
#pragma GCC unroll 2
            for (int hh = 0; hh < 2; hh++) {
                __m512i c = _mm512_loadu_si512((const void *)(q + 64 * (2 * s + hh)));
                long long x0, x1;
                memcpy(&x0, xq + 32 * s + 16 * hh, 8);
                memcpy(&x1, xq + 32 * s + 16 * hh + 8, 8);
                is = _mm512_dpbusd_epi32(is, _mm512_and_si512(c, mask), _mm512_set1_epi64(x0));
                is = _mm512_dpbusd_epi32(is, _mm512_and_si512(_mm512_srli_epi16(c, 4), mask), _mm512_set1_epi64(x1));
            }
            // |is| <= 16·15·127 < 2^15: its low int16 is its value, and the scale's high int16 is 0
            __m512i si = _mm512_add_epi8(sidx0, _mm512_set1_epi8((char)(8 * s)));
            __m512i sv = _mm512_maskz_permutexvar_epi8(kb0, si, scb);
            A = _mm512_dpwssd_epi32(A, is, sv);
        }
        __m512i bs = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(x.bsum + 16 * b)));
        __m512i M = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            __m512i bw = _mm512_permutexvar_epi32(_mm512_add_epi32(bidx, _mm512_set1_epi32(2 * j)), bs);
            __m512i mi = _mm512_add_epi8(midx0, _mm512_set1_epi8((char)(16 * j)));
            __m512i mv = _mm512_maskz_permutexvar_epi8(kb02, mi, mnb);
            M = _mm512_dpwssd_epi32(M, mv, bw);
        }
        __m256i A8 = _mm512_cvtepi64_epi32(_mm512_add_epi32(A, _mm512_srli_epi64(A, 32)));
        __m256i M8 = _mm256_add_epi32(_mm512_castsi512_si256(M), _mm512_extracti64x4_epi64(M, 1));
        __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h));
        __m256 dm = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + 16)));
        __m256 xd = _mm256_set1_ps(x.d[b]);
        __m256 t1 = _mm256_mul_ps(_mm256_mul_ps(d, xd), _mm256_cvtepi32_ps(A8));
        __m256 t2 = _mm256_mul_ps(_mm256_mul_ps(dm, xd), _mm256_cvtepi32_ps(M8));
        acc = _mm256_add_ps(acc, _mm256_sub_ps(t1, t2));
    }
    _mm256_storeu_ps(r, acc);
}
#endif

void kq8_dot_group(const uint8_t *gp, int cols, struct qx_view x, float *r) {
#if KQ8_BUILT
    kq8_dot_avx512(gp, cols / QK_K, x, r);
#else
    (void)gp, (void)cols, (void)x;
    memset(r, 0, 8 * sizeof(float));
#endif
}
