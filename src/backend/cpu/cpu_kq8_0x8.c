// cpu_kq8_0x8.c — Q8_0 weights repacked at load in groups of eight rows for the decode product (owns: the
// group layout, the repack, and its AVX-512 VNNI dot kernel). The kernel gives the bits of the Q8_0 path of
// qx_dot_rows (cpu_qdot.c's header comment has the math): per row and block b the same exact int32 lane sums
// p_{b,l} (here Σ (w + 128)·x − 128·Σ x over the lane's 4 elements: the products are exact and no sum
// overflows, so it is the same integer), the same f32 s_b = d_w·d_x, acc[8·(b mod 2) + l] += s_b·(float)p_{b,l}
// (product rounded, then the sum) in block order, and the same tree over the 16 accumulators.
//
// A group of rows 8g..8g+7 with nb = cols / 32 blocks and np = (nb + 1) / 2 block pairs is KQ80 bytes: np
// quant blocks of 512 bytes, then np scale blocks of 32 bytes, then zeros up to a multiple of 64 (so every
// quant block is 64-byte aligned):
//   quant block p: row r's 64 bytes at 64r, the quants of its blocks 2p and 2p + 1 (32 each, in order), each
//     stored as w ^ 0x80 (the unsigned w + 128); a missing block 2p + 1 (nb odd) is 32 bytes of 0x80.
//   scale block p: the f16 d of row r's block 2p + j at 4r + 2j; a missing block's is 0.
// The rows past the last whole group are not repacked: they are read from the weight as it is.
#include <stdlib.h>
#include <string.h>

#include "cpu_quant.h"
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#define Q80_BYTES 34
#define KQ80_QS 512
#define KQ80_SC 32
#define KQ80_PF 4096 // software prefetch distance in the quant blocks, bytes (scales: 8 pairs ahead)

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)
#define KQ80_BUILT 1
#else
#define KQ80_BUILT 0
#endif

int kq80x8_built(void) { return KQ80_BUILT; }

size_t kq80x8_group_bytes(int64_t cols) {
    size_t np = (size_t)(cols / 32 + 1) / 2;
    return (np * (KQ80_QS + KQ80_SC) + 63) / 64 * 64;
}

size_t kq80x8_bytes(int64_t rows, int64_t cols) {
    if (!KQ80_BUILT || rows < 8 || cols < 32 || cols % 32) return 0;
    return (size_t)(rows / 8) * kq80x8_group_bytes(cols);
}

void kq80x8_repack(const uint8_t *w, size_t rb, int64_t rows, int64_t cols, uint8_t *dst) {
    int nb = (int)(cols / 32), np = (nb + 1) / 2;
    size_t gb = kq80x8_group_bytes(cols);
    for (int64_t g = 0; g < rows / 8; g++) {
        uint8_t *qd = dst + (size_t)g * gb, *sd = qd + (size_t)np * KQ80_QS;
        memset(qd, 0, gb);
        for (int p = 0; p < np; p++)
            for (int r = 0; r < 8; r++) {
                uint8_t *q = qd + (size_t)p * KQ80_QS + 64 * r, *s = sd + (size_t)p * KQ80_SC + 4 * r;
                for (int j = 0; j < 2; j++) {
                    if (2 * p + j >= nb) {
                        memset(q + 32 * j, 0x80, 32);
                        continue;
                    }
                    const uint8_t *b = w + (size_t)(8 * g + r) * rb + (size_t)(2 * p + j) * Q80_BYTES;
                    memcpy(s + 2 * j, b, 2);
                    for (int i = 0; i < 32; i++) q[32 * j + i] = b[2 + i] ^ 0x80;
                }
            }
    }
}

#if KQ80_BUILT
// The 16-accumulator tree of cpu_qdot.c: u_i = a_i + a_{i+8}, v_i = u_i + u_{i+4}, w_i = v_i + v_{i+2}, w_0 + w_1.
static inline float tree16(__m512 a) {
    __m256 u = _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));
    __m128 v = _mm_add_ps(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1));
    __m128 w = _mm_add_ps(v, _mm_movehl_ps(v, v));
    return _mm_cvtss_f32(_mm_add_ss(w, _mm_shuffle_ps(w, w, 1)));
}

// The eight rows of group gp against x (nb blocks): r[0..8).
static inline __attribute__((always_inline)) void kq80x8_dot_avx512(const uint8_t *gp, int nb, struct qx_view x,
                                                                    float *r) {
    const int np = (nb + 1) / 2;
    const __m512i c128 = _mm512_set1_epi8((char)0x80), zero = _mm512_setzero_si512();
    const uint8_t *sd = gp + (size_t)np * KQ80_QS;
    __m512 acc[8];
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) acc[k] = _mm512_setzero_ps();
    for (int p = 0; p < np; p++) {
        const uint8_t *q = gp + (size_t)p * KQ80_QS, *s = sd + (size_t)p * KQ80_SC;
        const int whole = 2 * p + 1 < nb;
#pragma GCC unroll 8
        for (int l = 0; l < 8; l++) _mm_prefetch((const char *)q + KQ80_PF + 64 * l, _MM_HINT_T0);
        _mm_prefetch((const char *)s + 8 * KQ80_SC, _MM_HINT_T0);
        __m512i xv = whole ? _mm512_loadu_si512((const void *)(x.q + 64 * p))
                           : _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)(x.q + 64 * p)));
        __m512i m = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, c128, xv)); // −128·Σ x per lane
        float d0 = x.d[2 * p], d1 = whole ? x.d[2 * p + 1] : d0;
        // S[2k + j] = d_w(row k, block 2p + j)·d_x(block 2p + j), the products scale_pair·dx forms
        __m512 dx = _mm512_unpacklo_ps(_mm512_set1_ps(d0), _mm512_set1_ps(d1));
        __m512 S = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)s)), dx);
#pragma GCC unroll 8
        for (int k = 0; k < 8; k++) {
            __m512i idx = _mm512_inserti64x4(_mm512_set1_epi32(2 * k), _mm256_set1_epi32(2 * k + 1), 1);
            __m512 sk = _mm512_permutexvar_ps(idx, S);
            __m512i l = _mm512_dpbusd_epi32(m, _mm512_load_si512((const void *)(q + 64 * k)), xv);
            __m512 t = _mm512_mul_ps(sk, _mm512_cvtepi32_ps(l));
            acc[k] = whole ? _mm512_add_ps(acc[k], t) : _mm512_mask_add_ps(acc[k], 0x00FF, acc[k], t);
        }
    }
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) r[k] = tree16(acc[k]);
}
#endif

void kq80x8_dot_group(const uint8_t *gp, int cols, struct qx_view x, float *r) {
#if KQ80_BUILT
    kq80x8_dot_avx512(gp, cols / 32, x, r);
#else
    (void)gp, (void)cols, (void)x;
    memset(r, 0, 8 * sizeof(float));
#endif
}
