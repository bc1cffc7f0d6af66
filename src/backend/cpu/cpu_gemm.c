// cpu_gemm.c — the prefill product of F32/F16/BF16 weights on AVX-512 (cpu_gemm_rows): out[t][r] =
// x[t]·W[r] for a range of weight rows and every token, register-blocked so that the machine's FMA
// units, not its loads, set the pace, with each output's arithmetic exactly cpu_dot's on the widened
// row: lane-wise f32 FMAs into two accumulators (a: the first 16 of each 32 columns, b: the last 16),
// one more 16-column step into a where 16 remain, reduce_add(a + b), then the scalar tail in column
// order. So prefill equals the decode GEMV (cpu_matmul.c's gemv16) and the reference bit for bit, and
// a token's outputs do not depend on the batch around it.
//
// Blocking (per thread, for its rows): tokens in tiles of up to GEMM_TT, fewer where their x would
// pass GEMM_X_FLOATS (so a tile's x stays in L2); inside a tile, rows in blocks of GEMM_R, each
// block's columns in chunks of GEMM_KC widened once into scratch (16 KB, L1) and used by every token
// of the tile. The micro kernel (micro) runs GEMM_R rows × GEMM_T tokens, one of the two accumulators
// at a time (24 of the 32 zmm registers); between chunks and passes the accumulators wait in scratch,
// which moves them exactly. Builds without AVX-512 keep cpu_matmul.c's row-at-a-time path
// (cpu_gemm_fits is false there).
#include <string.h>

#include "../../base/half.h"
#include "../weight.h"
#include "cpu.h"
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#define GEMM_R 8      // weight rows of the micro kernel
#define GEMM_T 3      // tokens of the micro kernel
#define GEMM_KC 512   // columns widened at a time (a multiple of 32)
#define GEMM_WP (GEMM_KC + 16)  // floats between widened rows (+64 bytes: the rows fall in different L1 sets)
#define GEMM_TT 64    // the most tokens whose x is reused by every row block
#define GEMM_X_FLOATS (1 << 16)  // a token tile's x, at most (256 KB: a quarter of the L2 cache)

size_t cpu_gemm_scratch_floats(void) { return (size_t)GEMM_R * GEMM_WP + (size_t)GEMM_TT * GEMM_R * 32; }

#if defined(__AVX512F__)

int cpu_gemm_fits(const struct weight *w, int n) {
    return n >= 4 && (w->dtype == DT_F32 || w->dtype == DT_F16 || w->dtype == DT_BF16);
}

// wb[r][0, len) = row r's columns [k0, k0 + len) as f32 (len a multiple of 32).
static void widen_chunk(const struct weight *w, int r0, int nr, int64_t k0, int len, float *wb) {
    const int64_t cols = w->cols;
    for (int r = 0; r < nr; r++) {
        const uint16_t *src = (const uint16_t *)w->data + (size_t)(r0 + r) * cols + k0;
        float *dst = wb + (size_t)r * GEMM_WP;
        for (int i = 0; i < len; i += 16) {
            const __m256i h = _mm256_loadu_si256((const __m256i *)(src + i));
            const __m512 bf = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
            _mm512_storeu_ps(dst + i, w->dtype == DT_F16 ? _mm512_cvtph_ps(h) : bf);
        }
    }
}

// One of each output's two accumulators (h = 0: a, the first 16 of each 32 columns; h = 16: b, the last
// 16) for NR rows × NT tokens over columns [0, len) of w[r] and x[t]; acc holds them between calls as
// [t][r][a|b][16] floats; fresh starts them at zero. Taking a and b in separate passes leaves each its
// own FMAs in column order (cpu_dot's arithmetic) while only one of them is live, so the tile holds
// 8 rows: x, streamed from L2, is loaded once per 8 FMAs.
static inline __attribute__((always_inline)) void micro(int nr, int nt, const float *const *w, const float *const *x,
                                                        int len, int h, float *acc, int fresh) {
    __m512 c[GEMM_R][GEMM_T];
#pragma GCC unroll 8
    for (int r = 0; r < GEMM_R; r++)  // (every entry defined: edge tiles use fewer)
#pragma GCC unroll 3
        for (int t = 0; t < GEMM_T; t++) c[r][t] = _mm512_setzero_ps();
    if (!fresh)
#pragma GCC unroll 8
        for (int r = 0; r < nr; r++)
#pragma GCC unroll 3
            for (int t = 0; t < nt; t++) c[r][t] = _mm512_loadu_ps(acc + ((size_t)t * GEMM_R + r) * 32 + h);
    for (int k = h; k < len; k += 32) {
        __m512 xv[GEMM_T];
#pragma GCC unroll 3
        for (int t = 0; t < nt; t++) xv[t] = _mm512_loadu_ps(x[t] + k);
#pragma GCC unroll 8
        for (int r = 0; r < nr; r++) {
            __m512 wv = _mm512_loadu_ps(w[r] + k);
            __asm__("" : "+v"(wv));  // one load for the NT FMAs (not one folded into each)
#pragma GCC unroll 3
            for (int t = 0; t < nt; t++) c[r][t] = _mm512_fmadd_ps(xv[t], wv, c[r][t]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < nr; r++)
#pragma GCC unroll 3
        for (int t = 0; t < nt; t++) _mm512_storeu_ps(acc + ((size_t)t * GEMM_R + r) * 32 + h, c[r][t]);
}

// micro with the full tile's sizes known to the compiler (the accumulators stay in registers); edge
// tiles take the general form.
static void micro_any(int nr, int nt, const float *const *w, const float *const *x, int len, float *acc, int fresh) {
    for (int h = 0; h < 32; h += 16) {
        if (nr == GEMM_R && nt == GEMM_T) micro(GEMM_R, GEMM_T, w, x, len, h, acc, fresh);
        else micro(nr, nt, w, x, len, h, acc, fresh);
    }
}

// Row r's f32 value at column j (the scalar tail).
static inline float elem(const struct weight *w, int64_t r, int64_t j) {
    const size_t i = (size_t)r * (size_t)w->cols + (size_t)j;
    if (w->dtype == DT_F16) return f16_to_f32(((const uint16_t *)w->data)[i]);
    if (w->dtype == DT_BF16) return bf16_to_f32(((const uint16_t *)w->data)[i]);
    return ((const float *)w->data)[i];
}

// The 16 values of row r at column j as f32 (the one 16-column step).
static inline __m512 load16(const struct weight *w, int64_t r, int64_t j) {
    const size_t i = (size_t)r * (size_t)w->cols + (size_t)j;
    if (w->dtype == DT_F32) return _mm512_loadu_ps((const float *)w->data + i);
    const __m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)w->data + i));
    if (w->dtype == DT_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

void cpu_gemm_rows(const struct weight *w, const float *x /*[n][cols]*/, int n, float *out /*[n][rows]*/, int r0,
                   int r1, float *scratch) {
    const int cols = (int)w->cols, rows = (int)w->rows, n32 = cols / 32 * 32;
    float *wb = scratch, *acc = scratch + (size_t)GEMM_R * GEMM_WP;  // [GEMM_R][GEMM_WP], [GEMM_TT][GEMM_R][32]
    int tile = GEMM_X_FLOATS / cols;  // the token tile's x in L2: fewer tokens for wider rows
    tile = (tile > GEMM_TT ? GEMM_TT : tile < 4 * GEMM_T ? 4 * GEMM_T : tile) / GEMM_T * GEMM_T;
    for (int t0 = 0; t0 < n; t0 += tile) {
        const int tt = n - t0 < tile ? n - t0 : tile;
        for (int rb = r0; rb < r1; rb += GEMM_R) {
            const int nr = r1 - rb < GEMM_R ? r1 - rb : GEMM_R;
            for (int k0 = 0; k0 < n32 || k0 == 0; k0 += GEMM_KC) {
                const int len = n32 - k0 < GEMM_KC ? n32 - k0 : GEMM_KC;
                const float *wr[GEMM_R];
                for (int r = 0; r < nr; r++)
                    wr[r] = w->dtype == DT_F32 ? (const float *)w->data + (size_t)(rb + r) * cols + k0
                                               : wb + (size_t)r * GEMM_WP;
                if (w->dtype != DT_F32 && len > 0) widen_chunk(w, rb, nr, k0, len, wb);
                for (int t = 0; t < tt; t += GEMM_T) {
                    const int nt = tt - t < GEMM_T ? tt - t : GEMM_T;
                    const float *xr[GEMM_T];
                    for (int j = 0; j < nt; j++) xr[j] = x + (size_t)(t0 + t + j) * cols + k0;
                    micro_any(nr, nt, wr, xr, len, acc + (size_t)t * GEMM_R * 32, k0 == 0);
                }
                if (len <= 0) break;
            }
            // cpu_dot's ending: one 16-column step into a, reduce_add(a + b), the scalar tail
            for (int t = 0; t < tt; t++) {
                const float *xt = x + (size_t)(t0 + t) * cols;
                for (int r = 0; r < nr; r++) {
                    const float *p = acc + ((size_t)t * GEMM_R + r) * 32;
                    __m512 a = _mm512_loadu_ps(p), b = _mm512_loadu_ps(p + 16);
                    int j = n32;
                    if (j + 16 <= cols) {
                        a = _mm512_fmadd_ps(_mm512_loadu_ps(xt + j), load16(w, rb + r, j), a);
                        j += 16;
                    }
                    float s = _mm512_reduce_add_ps(_mm512_add_ps(a, b));
                    for (; j < cols; j++) s += xt[j] * elem(w, rb + r, j);
                    out[(size_t)(t0 + t) * rows + rb + r] = s;
                }
            }
        }
    }
}

#else

int cpu_gemm_fits(const struct weight *w, int n) { return 0; }

void cpu_gemm_rows(const struct weight *w, const float *x, int n, float *out, int r0, int r1, float *scratch) {}

#endif
