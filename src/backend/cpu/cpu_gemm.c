// cpu_gemm.c — the prefill product of F32/F16/BF16 (and, for cpu_fp8w.c, e4m3) weights on AVX-512, and of
// F32/F16/BF16 weights on AVX2 + FMA + F16C (cpu_gemm_rows): out[t][r] = x[t]·W[r] for a range of weight
// rows and every token (a 128×128-block e4m3 weight: of its values times their block's scale,
// fp8w_bscaled), register-blocked so that the machine's FMA units, not its loads, set the pace, with each
// output's arithmetic exactly cpu_dot's on the widened row: lane-wise f32 FMAs into two accumulators (a:
// the first 16 of each 32 columns, b: the last 16), one more 16-column step into a where 16 remain,
// reduce_add(a + b), then the scalar tail in column order. So prefill equals the decode GEMV
// (cpu_matmul.c's gemv16) and the reference bit for bit, and a token's outputs do not depend on the
// batch around it.
//
// Blocking (per thread, for its rows): tokens in tiles of up to GEMM_TT, fewer where their x would
// pass GEMM_X_FLOATS (so a tile's x stays in L2); inside a tile, rows in blocks of GEMM_R, each
// block's columns in chunks of GEMM_KC (the chunk's weight bytes stay in L1 while every token of the
// tile passes). The micro kernel (micro) runs GEMM_R rows × GEMM_T tokens, one of the two accumulators
// at a time (24 of the 32 zmm registers), widening each 16-bit weight vector in its register as it is
// loaded (the conversion issues beside the FMAs, so it costs no time, where a widened copy's stores
// did). Each tile's x is first copied packed (pack_x): per group of GEMM_T tokens, a's columns of every
// 32, then b's, the group's tokens side by side, so each pass reads its tokens' x as one contiguous
// stream (against one per token, 2 threads ran 6-8 % slower). Between chunks and passes the
// accumulators wait in scratch, which moves them exactly. AVX2 builds run the same blocking with 8-lane
// vectors, 16-column a/b steps and a 4-row × 3-token micro kernel (16 ymm registers), matching cpu_dot's AVX2
// arithmetic; builds with neither keep cpu_matmul.c's row-at-a-time path (cpu_gemm_fits is false there).
#include <stdint.h>
#include <string.h>

#include "../../base/fp8.h"
#include "../../base/half.h"
#include "../weight.h"
#include "cpu.h"
#include "cpu_fp8w.h"
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__) && defined(__F16C__))
#include <immintrin.h>
#endif

#if defined(__AVX512F__)
#define GEMM_R 6      // weight rows of the micro kernel
#define GEMM_T 4      // tokens of the micro kernel
#else
#define GEMM_R 4      // AVX2: 12 accumulators, 3 x vectors and a weight vector in the 16 ymm registers
#define GEMM_T 3      // (6 × 2 and 5 × 2 ran level with it on the 1.2B shape's pp512, 3 × 4 a quarter slower)
#endif
#define GEMM_KC 2048  // columns of a row block held in L1 while the tile's tokens pass (a multiple of 32)
#define GEMM_TT 64    // the most tokens whose x is reused by every row block
#define GEMM_X_FLOATS (1 << 17)  // a token tile's x, at most (512 KB: half the L2 cache)
#define GEMM_TMIN (3 * GEMM_T)   // the fewest tokens of a tile, however wide the rows
#define GEMM_XPAD 16  // floats after each packed half of a token group's x

// A token tile's packed x, at most: (n32 / 2 * GEMM_T + GEMM_XPAD) floats a half, two halves a group
// of GEMM_T tokens, and a tile's tokens a multiple of GEMM_T.
static size_t x_tile_floats(int64_t cols) {
    size_t t = (size_t)GEMM_TMIN * (size_t)cols;
    return (t > GEMM_X_FLOATS ? t : GEMM_X_FLOATS) + (size_t)GEMM_TT * 2 * GEMM_XPAD;
}

// 16 floats of slack to align the start to 64 bytes, the accumulators, a row block's chunk of e4m3 weights
// widened (to bf16, or block weights to f32 in chunks of half the columns), the packed x.
size_t cpu_gemm_scratch_floats(int64_t cols) {
    return 16 + (size_t)GEMM_TT * GEMM_R * 32 + GEMM_R * GEMM_KC / 2 + x_tile_floats(cols);
}

// Row r's f32 value at column j (the scalar tail).
static inline float elem(const struct weight *w, int64_t r, int64_t j) {
    const size_t i = (size_t)r * (size_t)w->cols + (size_t)j;
    if (w->dtype == DT_E4M3 && w->fp8.wscale == WSCALE_BLOCK) {
        const int64_t B = w->fp8.block, nbc = (w->cols + B - 1) / B;
        return fp8w_bscaled(((const uint8_t *)w->data)[i], w->fp8.scale[(size_t)((r / B) * nbc + j / B)]);
    }
    if (w->dtype == DT_F16) return f16_to_f32(((const uint16_t *)w->data)[i]);
    if (w->dtype == DT_BF16) return bf16_to_f32(((const uint16_t *)w->data)[i]);
    if (w->dtype == DT_E4M3) return fp8_e4m3_table[((const uint8_t *)w->data)[i]];
    return ((const float *)w->data)[i];
}

int cpu_gemm_tile_tokens(int64_t cols) {
    int64_t tile = GEMM_X_FLOATS / (cols > 0 ? cols : 1);  // the token tile's x in L2: fewer tokens for wider rows
    return (int)(tile > GEMM_TT ? GEMM_TT : tile < GEMM_TMIN ? GEMM_TMIN : tile) / GEMM_T * GEMM_T;
}


#if defined(__AVX512F__)

int cpu_gemm_fits(const struct weight *w, int n) {
    return n >= 4 && (w->dtype == DT_F32 || w->dtype == DT_F16 || w->dtype == DT_BF16);
}

// The 16 values at element i of a row of dtype dt as f32. An e4m3 code's exponent and mantissa bits at a
// float's bits 20-26 make a float 2^120 times its value (subnormal codes too): the bytes are sign-extended,
// shifted there, masked to those bits and the sign, and multiplied by 2^120, exactly (the weight holds no
// NaN code: cpu weight_upload refuses one).
static inline __attribute__((always_inline)) __m512 load16(enum dtype dt, const void *row, size_t i) {
    if (dt == DT_F32) return _mm512_loadu_ps((const float *)row + i);
    if (dt == DT_E4M3) {
        const __m128i q = _mm_loadu_si128((const __m128i *)((const uint8_t *)row + i));
        const __m512i bits = _mm512_and_si512(_mm512_slli_epi32(_mm512_cvtepi8_epi32(q), 20),
                                              _mm512_set1_epi32((int)0x87F00000u));
        return _mm512_mul_ps(_mm512_castsi512_ps(bits), _mm512_set1_ps(0x1p120f));
    }
    const __m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)row + i));
    if (dt == DT_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// len (a multiple of 16) e4m3 codes as bf16, exactly (an e4m3 value has 3 significant bits): a row
// block's chunk is widened once for all of the tile's token groups, which then take the bf16 loads.
static void widen_e4m3(const uint8_t *src, uint16_t *dst, int len) {
    for (int i = 0; i < len; i += 16) {
        const __m512i f = _mm512_castps_si512(load16(DT_E4M3, src, (size_t)i));
        _mm256_storeu_si256((__m256i *)(dst + i), _mm512_cvtepi32_epi16(_mm512_srli_epi32(f, 16)));
    }
}

// A block weight's 16 values of row r from column c (row: the row's codes at column 0) as fp8w_bscaled
// gives them: 2^-8·ŵ (exact) times the lanes' block scales, one rounding.
static inline __m512 bscaled16(const struct weight *w, const uint8_t *row, int64_t r, int c) {
    const int B = w->fp8.block, nbc = (int)((w->cols + B - 1) / B);
    const float *bs = w->fp8.scale + (size_t)(r / B) * nbc;
    __m512 s;
    if (c / B == (c + 15) / B) s = _mm512_set1_ps(bs[c / B]);
    else {
        float f[16];
        for (int l = 0; l < 16; l++) f[l] = bs[(c + l) / B];
        s = _mm512_loadu_ps(f);
    }
    return _mm512_mul_ps(_mm512_mul_ps(load16(DT_E4M3, row, (size_t)c), _mm512_set1_ps(0x1p-8f)), s);
}

// Columns [c0, c0 + len) (len a multiple of 16) of a block weight's row r as bscaled16 gives them, a tile's
// scale broadcast once for its columns.
static void widen_bscaled(const struct weight *w, int64_t r, int c0, int len, float *dst /*[len]*/) {
    const int B = w->fp8.block, nbc = (int)((w->cols + B - 1) / B);
    const uint8_t *row = (const uint8_t *)w->data + (size_t)r * (size_t)w->cols;
    if (B % 16) {
        for (int i = 0; i < len; i += 16) _mm512_storeu_ps(dst + i, bscaled16(w, row, r, c0 + i));
        return;
    }
    const float *bs = w->fp8.scale + (size_t)(r / B) * nbc;
    for (int c = c0; c < c0 + len;) {
        const int end = (c / B + 1) * B < c0 + len ? (c / B + 1) * B : c0 + len;
        const __m512 s = _mm512_set1_ps(bs[c / B]);
        for (; c < end; c += 16)
            _mm512_storeu_ps(dst + (c - c0),
                             _mm512_mul_ps(_mm512_mul_ps(load16(DT_E4M3, row, (size_t)c), _mm512_set1_ps(0x1p-8f)), s));
    }
}

// The tile's x packed for the micro kernel: for each group of GEMM_T tokens and each half h (a: columns
// 32j..32j+15 of every group j of 32, b: 32j+16..32j+31), the groups j in order, each the GEMM_T tokens'
// 16 floats side by side, then GEMM_XPAD floats; hs floats a half, 2 hs a token group. A micro step then
// reads its GEMM_T tokens' x as one contiguous 256-byte stream.
static void pack_x(const float *x /*[nt][cols]*/, int nt, int cols, int n32, size_t hs,
                   float *xs /*[nt / GEMM_T][2][hs]*/) {
    for (int t = 0; t < nt; t++) {
        const float *src = x + (size_t)t * cols;
        float *da = xs + (size_t)(t / GEMM_T) * 2 * hs + (t % GEMM_T) * 16, *db = da + hs;
        for (int i = 0; i < n32; i += 32) {
            _mm512_storeu_ps(da + i * GEMM_T / 2, _mm512_loadu_ps(src + i));
            _mm512_storeu_ps(db + i * GEMM_T / 2, _mm512_loadu_ps(src + i + 16));
        }
    }
}

// One of each output's two accumulators (h = 0: a, the first 16 of each 32 columns; h = 1: b, the last
// 16) for NR rows × NT tokens over the chunk's len columns of w[r] (dtype dt, at the chunk's start) and
// x (the token group's packed half h at the chunk's start: token t's 16 floats of step k at k * GEMM_T / 2
// + 16 t); acc holds them between calls as [t][r][a|b][16] floats;
// fresh starts them at zero. Taking a and b in separate passes leaves each its own FMAs in column order
// (cpu_dot's arithmetic) while only one of them is live.
static inline __attribute__((always_inline)) void micro(enum dtype dt, int nr, int nt, const void *const *w,
                                                        const float *x, int len, int h, float *acc,
                                                        int fresh) {
    __m512 c[GEMM_R][GEMM_T];
#pragma GCC unroll 8
    for (int r = 0; r < GEMM_R; r++)  // (every entry defined: edge tiles use fewer)
#pragma GCC unroll 4
        for (int t = 0; t < GEMM_T; t++) c[r][t] = _mm512_setzero_ps();
    if (!fresh)
#pragma GCC unroll 8
        for (int r = 0; r < nr; r++)
#pragma GCC unroll 4
            for (int t = 0; t < nt; t++) c[r][t] = _mm512_loadu_ps(acc + ((size_t)t * GEMM_R + r) * 32 + 16 * h);
    for (int k = 0; k < len; k += 32) {
        __m512 xv[GEMM_T];
#pragma GCC unroll 4
        for (int t = 0; t < GEMM_T; t++)
            xv[t] = t < nt ? _mm512_loadu_ps(x + k * GEMM_T / 2 + 16 * t) : _mm512_setzero_ps();
#pragma GCC unroll 8
        for (int r = 0; r < nr; r++) {
            __m512 wv = load16(dt, w[r], (size_t)k + 16 * (size_t)h);
            __asm__("" : "+v"(wv));  // one load for the NT FMAs (not one folded into each)
#pragma GCC unroll 4
            for (int t = 0; t < nt; t++) c[r][t] = _mm512_fmadd_ps(xv[t], wv, c[r][t]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < nr; r++)
#pragma GCC unroll 4
        for (int t = 0; t < nt; t++) _mm512_storeu_ps(acc + ((size_t)t * GEMM_R + r) * 32 + 16 * h, c[r][t]);
}

// Both passes of micro over one chunk for dtype dt: the full tile's sizes known to the compiler keep its
// accumulators in registers; edge tiles take the general form. x0 is the token group's packed x at the
// chunk's start, hs the floats between its halves.
static inline __attribute__((always_inline)) void micro_dt(enum dtype dt, int nr, int nt, const void *const *w,
                                                           const float *x0, size_t hs, int len, float *acc,
                                                           int fresh) {
    for (int h = 0; h < 2; h++) {
        const float *xr = x0 + (size_t)h * hs;
        if (nr == GEMM_R && nt == GEMM_T) micro(dt, GEMM_R, GEMM_T, w, xr, len, h, acc, fresh);
        else micro(dt, nr, nt, w, xr, len, h, acc, fresh);
    }
}

static void micro_any(enum dtype dt, int nr, int nt, const void *const *w, const float *x0, size_t hs,
                      int len, float *acc, int fresh) {
    if (dt == DT_F16) micro_dt(DT_F16, nr, nt, w, x0, hs, len, acc, fresh);
    else if (dt == DT_BF16) micro_dt(DT_BF16, nr, nt, w, x0, hs, len, acc, fresh);
    else if (dt == DT_E4M3) micro_dt(DT_E4M3, nr, nt, w, x0, hs, len, acc, fresh);
    else micro_dt(DT_F32, nr, nt, w, x0, hs, len, acc, fresh);
}

void cpu_gemm_rows(const struct weight *w, const float *x /*[n][cols]*/, int n, float *out /*[n][rows]*/, int r0,
                   int r1, float *scratch) {
    const int cols = (int)w->cols, rows = (int)w->rows, n32 = cols / 32 * 32;
    const size_t esz = dtype_size(w->dtype), hs = (size_t)n32 / 2 * GEMM_T + GEMM_XPAD;
    const bool bw = w->dtype == DT_E4M3 && w->fp8.wscale == WSCALE_BLOCK;  // (widened to f32 with the scales)
    const int kc = bw ? GEMM_KC / 2 : GEMM_KC;
    // [GEMM_TT][GEMM_R][32], [GEMM_R][GEMM_KC] bf16 or [GEMM_R][GEMM_KC / 2] f32, [tile][2][hs], 64-byte aligned
    float *acc = (float *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    uint16_t *wide = (uint16_t *)(acc + (size_t)GEMM_TT * GEMM_R * 32);
    float *wide32 = (float *)wide;
    float *xs = (float *)(wide + GEMM_R * GEMM_KC);
    const int tile = cpu_gemm_tile_tokens(cols);
    for (int t0 = 0; t0 < n; t0 += tile) {
        const int tt = n - t0 < tile ? n - t0 : tile;
        pack_x(x + (size_t)t0 * cols, tt, cols, n32, hs, xs);
        for (int rb = r0; rb < r1; rb += GEMM_R) {
            const int nr = r1 - rb < GEMM_R ? r1 - rb : GEMM_R;
            for (int k0 = 0; k0 < n32 || k0 == 0; k0 += kc) {
                const int len = n32 - k0 < kc ? n32 - k0 : kc;
                const void *wr[GEMM_R];
                for (int r = 0; r < nr; r++) wr[r] = (const char *)w->data + ((size_t)(rb + r) * cols + k0) * esz;
                enum dtype dt = w->dtype;
                if (bw) {  // (every chunk: the scales are in the values)
                    for (int r = 0; r < nr; r++) {
                        widen_bscaled(w, rb + r, k0, len, wide32 + r * kc);
                        wr[r] = wide32 + r * kc;
                    }
                    dt = DT_F32;
                } else if (dt == DT_E4M3 && tt > 2 * GEMM_T) {  // (widened once, read by three or more token groups)
                    for (int r = 0; r < nr; r++) {
                        widen_e4m3(wr[r], wide + r * GEMM_KC, len);
                        wr[r] = wide + r * GEMM_KC;
                    }
                    dt = DT_BF16;
                }
                for (int t = 0; t < tt; t += GEMM_T) {
                    const int nt = tt - t < GEMM_T ? tt - t : GEMM_T;
                    const float *xr = xs + (size_t)(t / GEMM_T) * 2 * hs + (size_t)k0 * GEMM_T / 2;
                    micro_any(dt, nr, nt, wr, xr, hs, len, acc + (size_t)t * GEMM_R * 32, k0 == 0);
                }
                if (len <= 0) break;
            }
            // cpu_dot's ending: one 16-column step into a, reduce_add(a + b), the scalar tail
            for (int t = 0; t < tt; t++) {
                const float *xt = x + (size_t)(t0 + t) * cols;
                for (int r = 0; r < nr; r++) {
                    const float *p = acc + ((size_t)t * GEMM_R + r) * 32;
                    const char *row = (const char *)w->data + (size_t)(rb + r) * cols * esz;
                    __m512 a = _mm512_loadu_ps(p), b = _mm512_loadu_ps(p + 16);
                    int j = n32;
                    if (j + 16 <= cols) {
                        const __m512 v = bw ? bscaled16(w, (const uint8_t *)row, rb + r, j)
                                            : load16(w->dtype, row, (size_t)j);
                        a = _mm512_fmadd_ps(_mm512_loadu_ps(xt + j), v, a);
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

#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

// AVX2 + FMA + F16C: the same blocking with 8-lane vectors and cpu_dot's AVX2 arithmetic (a: the first 8 of each
// 16 columns, b: the last 8, one more 8-column step into a, cpu_hsum256(a + b), the scalar tail), for F32, F16 and
// BF16 weights (FP8 weights keep cpu_fp8w.c's row path here).

int cpu_gemm_fits(const struct weight *w, int n) {
    return n >= 4 && (w->dtype == DT_F32 || w->dtype == DT_F16 || w->dtype == DT_BF16);
}

// The 8 values at element i of a row of dtype dt (F32, F16 or BF16) as f32.
static inline __attribute__((always_inline)) __m256 load8(enum dtype dt, const void *row, size_t i) {
    if (dt == DT_F32) return _mm256_loadu_ps((const float *)row + i);
    const __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)row + i));
    if (dt == DT_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

// pack_x with 8-lane halves: a holds columns 16j..16j+7 of every group j of 16, b 16j+8..16j+15.
static void pack_x(const float *x /*[nt][cols]*/, int nt, int cols, int n16, size_t hs,
                   float *xs /*[nt / GEMM_T][2][hs]*/) {
    for (int t = 0; t < nt; t++) {
        const float *src = x + (size_t)t * cols;
        float *da = xs + (size_t)(t / GEMM_T) * 2 * hs + (t % GEMM_T) * 8, *db = da + hs;
        for (int i = 0; i < n16; i += 16) {
            _mm256_storeu_ps(da + i * GEMM_T / 2, _mm256_loadu_ps(src + i));
            _mm256_storeu_ps(db + i * GEMM_T / 2, _mm256_loadu_ps(src + i + 8));
        }
    }
}

// micro with 8-lane accumulators: acc holds them between calls as [t][r][a|b][8] floats.
static inline __attribute__((always_inline)) void micro(enum dtype dt, int nr, int nt, const void *const *w,
                                                        const float *x, int len, int h, float *acc,
                                                        int fresh) {
    __m256 c[GEMM_R][GEMM_T];
#pragma GCC unroll 8
    for (int r = 0; r < GEMM_R; r++)
#pragma GCC unroll 4
        for (int t = 0; t < GEMM_T; t++) c[r][t] = _mm256_setzero_ps();
    if (!fresh)
#pragma GCC unroll 8
        for (int r = 0; r < nr; r++)
#pragma GCC unroll 4
            for (int t = 0; t < nt; t++) c[r][t] = _mm256_loadu_ps(acc + ((size_t)t * GEMM_R + r) * 16 + 8 * h);
    for (int k = 0; k < len; k += 16) {
        __m256 xv[GEMM_T];
#pragma GCC unroll 4
        for (int t = 0; t < GEMM_T; t++)
            xv[t] = t < nt ? _mm256_loadu_ps(x + k * GEMM_T / 2 + 8 * t) : _mm256_setzero_ps();
#pragma GCC unroll 8
        for (int r = 0; r < nr; r++) {
            __m256 wv = load8(dt, w[r], (size_t)k + 8 * (size_t)h);
#pragma GCC unroll 4
            for (int t = 0; t < nt; t++) c[r][t] = _mm256_fmadd_ps(xv[t], wv, c[r][t]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < nr; r++)
#pragma GCC unroll 4
        for (int t = 0; t < nt; t++) _mm256_storeu_ps(acc + ((size_t)t * GEMM_R + r) * 16 + 8 * h, c[r][t]);
}

static inline __attribute__((always_inline)) void micro_dt(enum dtype dt, int nr, int nt, const void *const *w,
                                                           const float *x0, size_t hs, int len, float *acc,
                                                           int fresh) {
    for (int h = 0; h < 2; h++) {
        const float *xr = x0 + (size_t)h * hs;
        if (nr == GEMM_R && nt == GEMM_T) micro(dt, GEMM_R, GEMM_T, w, xr, len, h, acc, fresh);
        else micro(dt, nr, nt, w, xr, len, h, acc, fresh);
    }
}

static void micro_any(enum dtype dt, int nr, int nt, const void *const *w, const float *x0, size_t hs,
                      int len, float *acc, int fresh) {
    if (dt == DT_F16) micro_dt(DT_F16, nr, nt, w, x0, hs, len, acc, fresh);
    else if (dt == DT_BF16) micro_dt(DT_BF16, nr, nt, w, x0, hs, len, acc, fresh);
    else micro_dt(DT_F32, nr, nt, w, x0, hs, len, acc, fresh);
}

void cpu_gemm_rows(const struct weight *w, const float *x /*[n][cols]*/, int n, float *out /*[n][rows]*/, int r0,
                   int r1, float *scratch) {
    const int cols = (int)w->cols, rows = (int)w->rows, n16 = cols / 16 * 16;
    const size_t esz = dtype_size(w->dtype), hs = (size_t)n16 / 2 * GEMM_T + GEMM_XPAD;
    // [GEMM_TT][GEMM_R][16] accumulators, then [tile][2][hs] packed x, 64-byte aligned (within the scratch
    // cpu_gemm_scratch_floats sizes for the AVX-512 layout, which is larger)
    float *acc = (float *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    float *xs = acc + (size_t)GEMM_TT * GEMM_R * 32;
    const int tile = cpu_gemm_tile_tokens(cols);
    for (int t0 = 0; t0 < n; t0 += tile) {
        const int tt = n - t0 < tile ? n - t0 : tile;
        pack_x(x + (size_t)t0 * cols, tt, cols, n16, hs, xs);
        for (int rb = r0; rb < r1; rb += GEMM_R) {
            const int nr = r1 - rb < GEMM_R ? r1 - rb : GEMM_R;
            for (int k0 = 0; k0 < n16 || k0 == 0; k0 += GEMM_KC) {
                const int len = n16 - k0 < GEMM_KC ? n16 - k0 : GEMM_KC;
                const void *wr[GEMM_R];
                for (int r = 0; r < nr; r++) wr[r] = (const char *)w->data + ((size_t)(rb + r) * cols + k0) * esz;
                for (int t = 0; t < tt; t += GEMM_T) {
                    const int nt = tt - t < GEMM_T ? tt - t : GEMM_T;
                    const float *xr = xs + (size_t)(t / GEMM_T) * 2 * hs + (size_t)k0 * GEMM_T / 2;
                    micro_any(w->dtype, nr, nt, wr, xr, hs, len, acc + (size_t)t * GEMM_R * 16, k0 == 0);
                }
                if (len <= 0) break;
            }
            // cpu_dot's ending: one 8-column step into a, cpu_hsum256(a + b), the scalar tail
            for (int t = 0; t < tt; t++) {
                const float *xt = x + (size_t)(t0 + t) * cols;
                for (int r = 0; r < nr; r++) {
                    const float *p = acc + ((size_t)t * GEMM_R + r) * 16;
                    const char *row = (const char *)w->data + (size_t)(rb + r) * cols * esz;
                    __m256 a = _mm256_loadu_ps(p), b = _mm256_loadu_ps(p + 8);
                    int j = n16;
                    if (j + 8 <= cols) {
                        a = _mm256_fmadd_ps(_mm256_loadu_ps(xt + j), load8(w->dtype, row, (size_t)j), a);
                        j += 8;
                    }
                    float s = cpu_hsum256(_mm256_add_ps(a, b));
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
