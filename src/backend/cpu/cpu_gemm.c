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

// The vector of each ISA: GEMM_VW f32 lanes (gvec), a and b each GEMM_VW of every GEMM_W2 columns, gv_sum
// cpu_dot's final reduction of a + b; GEMM_E4M3: the e4m3 forms (widening, block scales) exist.
#if defined(__AVX512F__)
#define GEMM_R 6      // weight rows of the micro kernel
#define GEMM_T 4      // tokens of the micro kernel
#define GEMM_X_FLOATS (1 << 17)  // a token tile's x, at most (512 KB: half of a 1 MB L2; 128 KB ran slower)
#define GEMM_VW 16
#define GEMM_E4M3 1
typedef __m512 gvec;
#define gv_load _mm512_loadu_ps
#define gv_store _mm512_storeu_ps
#define gv_zero _mm512_setzero_ps
#define gv_fma _mm512_fmadd_ps
#define gv_sum(a, b) _mm512_reduce_add_ps(_mm512_add_ps(a, b))
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define GEMM_R 4      // AVX2: 12 accumulators, 3 x vectors and a weight vector in the 16 ymm registers
#define GEMM_T 3      // (6 × 2 and 5 × 2 ran level with it on the 1.2B shape's pp512, 3 × 4 a quarter slower)
#define GEMM_VW 8
#define GEMM_X_FLOATS (1 << 15)  // 128 KB: a quarter of a 512 KB L2 (256 KB ran 1-4 %, 512 KB 4-6 % slower)
#define GEMM_E4M3 0
typedef __m256 gvec;
#define gv_load _mm256_loadu_ps
#define gv_store _mm256_storeu_ps
#define gv_zero _mm256_setzero_ps
#define gv_fma _mm256_fmadd_ps
#define gv_sum(a, b) cpu_hsum256(_mm256_add_ps(a, b))
#else
#define GEMM_R 6      // (no vector product: the sizes shape only the scratch and the token tile)
#define GEMM_T 4
#define GEMM_X_FLOATS (1 << 17)
#endif
#define GEMM_W2 (2 * GEMM_VW)
#define GEMM_KC 2048  // columns of a row block held in L1 while the tile's tokens pass (a multiple of 32)
#define GEMM_TT 64    // the most tokens whose x is reused by every row block
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


// The 16 values at element i of a row of dtype dt as f32 (loadv). An e4m3 code's exponent and mantissa bits at a
// float's bits 20-26 make a float 2^120 times its value (subnormal codes too): the bytes are sign-extended,
// shifted there, masked to those bits and the sign, and multiplied by 2^120, exactly (the weight holds no
// NaN code: cpu weight_upload refuses one).
static inline __attribute__((always_inline)) __m512 loadv(enum dtype dt, const void *row, size_t i) {
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
        const __m512i f = _mm512_castps_si512(loadv(DT_E4M3, src, (size_t)i));
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
    return _mm512_mul_ps(_mm512_mul_ps(loadv(DT_E4M3, row, (size_t)c), _mm512_set1_ps(0x1p-8f)), s);
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
                             _mm512_mul_ps(_mm512_mul_ps(loadv(DT_E4M3, row, (size_t)c), _mm512_set1_ps(0x1p-8f)), s));
    }
}

#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

// The 8 values at element i of a row of dtype dt (F32, F16 or BF16) as f32.
static inline __attribute__((always_inline)) __m256 loadv(enum dtype dt, const void *row, size_t i) {
    if (dt == DT_F32) return _mm256_loadu_ps((const float *)row + i);
    const __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)row + i));
    if (dt == DT_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

// cpu_hsum256(a + b) of eight a|b accumulator pairs at once, each sum added in cpu_hsum256's order
// ((v0 + v4) + (v1 + v5)) + ((v2 + v6) + (v3 + v7)): pairs 0-3 land in o0[0..3], pairs 4-7 in o1[0..3].
static inline __attribute__((always_inline)) void hsum8_ab(const float *p /*[8][a: 8, b: 8]*/, float *o0 /*[4]*/,
                                                           float *o1 /*[4]*/) {
#define HSUM8_V(i) _mm256_add_ps(_mm256_loadu_ps(p + 16 * (i)), _mm256_loadu_ps(p + 16 * (i) + 8))
#define HSUM8_U(v, w) _mm256_add_ps(_mm256_permute2f128_ps(v, w, 0x20), _mm256_permute2f128_ps(v, w, 0x31))
    // u: lanes 0-3 the lower + upper half of one pair's a + b, lanes 4-7 the next pair's
    const __m256 v0 = HSUM8_V(0), v1 = HSUM8_V(1), v2 = HSUM8_V(2), v3 = HSUM8_V(3);
    const __m256 v4 = HSUM8_V(4), v5 = HSUM8_V(5), v6 = HSUM8_V(6), v7 = HSUM8_V(7);
    const __m256 u0 = HSUM8_U(v0, v1), u1 = HSUM8_U(v2, v3), u2 = HSUM8_U(v4, v5), u3 = HSUM8_U(v6, v7);
#undef HSUM8_V
#undef HSUM8_U
    // in-lane pairwise sums twice: the lanes hold pairs 0, 2, 4, 6, 1, 3, 5, 7
    const __m256 s = _mm256_hadd_ps(_mm256_hadd_ps(u0, u1), _mm256_hadd_ps(u2, u3));
    const __m256 r = _mm256_permutevar8x32_ps(s, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm_storeu_ps(o0, _mm256_castps256_ps128(r));
    _mm_storeu_ps(o1, _mm256_extractf128_ps(r, 1));
}

#endif

#if defined(GEMM_VW)

int cpu_gemm_fits(const struct weight *w, int n) {
    return n >= 4 && (w->dtype == DT_F32 || w->dtype == DT_F16 || w->dtype == DT_BF16);
}

// The tile's x packed for the micro kernel: for each group of GEMM_T tokens and each half h (a: columns
// 32j..32j+15 of every group j of 32, b: 32j+16..32j+31; on AVX2 of every 16, 8 each), the groups j in
// order, each the GEMM_T tokens' GEMM_VW floats side by side, then GEMM_XPAD floats; hs floats a half, 2 hs
// a token group. A micro step then reads its GEMM_T tokens' x as one contiguous stream.
static void pack_x(const float *x /*[nt][cols]*/, int nt, int cols, int n32, size_t hs,
                   float *xs /*[nt / GEMM_T][2][hs]*/) {
    for (int t = 0; t < nt; t++) {
        const float *src = x + (size_t)t * cols;
        float *da = xs + (size_t)(t / GEMM_T) * 2 * hs + (t % GEMM_T) * GEMM_VW, *db = da + hs;
        for (int i = 0; i < n32; i += GEMM_W2) {
            gv_store(da + i * GEMM_T / 2, gv_load(src + i));
            gv_store(db + i * GEMM_T / 2, gv_load(src + i + GEMM_VW));
        }
    }
}

// One of each output's two accumulators (h = 0: a, the first GEMM_VW of each GEMM_W2 columns; h = 1: b,
// the last GEMM_VW) for NR rows × NT tokens over the chunk's len columns of w[r] (dtype dt, at the chunk's
// start) and x (the token group's packed half h at the chunk's start: token t's GEMM_VW floats of step k at
// k * GEMM_T / 2 + GEMM_VW t); acc holds them between calls as [t][r][a|b][GEMM_VW] floats;
// fresh starts them at zero. Taking a and b in separate passes leaves each its own FMAs in column order
// (cpu_dot's arithmetic) while only one of them is live.
static inline __attribute__((always_inline)) void micro(enum dtype dt, int nr, int nt, const void *const *w,
                                                        const float *x, int len, int h, float *acc,
                                                        int fresh) {
    gvec c[GEMM_R][GEMM_T];
#pragma GCC unroll 8
    for (int r = 0; r < GEMM_R; r++)  // (every entry defined: edge tiles use fewer)
#pragma GCC unroll 4
        for (int t = 0; t < GEMM_T; t++) c[r][t] = gv_zero();
    if (!fresh)
#pragma GCC unroll 8
        for (int r = 0; r < nr; r++)
#pragma GCC unroll 4
            for (int t = 0; t < nt; t++) c[r][t] = gv_load(acc + ((size_t)t * GEMM_R + r) * GEMM_W2 + GEMM_VW * h);
    for (int k = 0; k < len; k += GEMM_W2) {
        gvec xv[GEMM_T];
#pragma GCC unroll 4
        for (int t = 0; t < GEMM_T; t++)
            xv[t] = t < nt ? gv_load(x + k * GEMM_T / 2 + GEMM_VW * t) : gv_zero();
#pragma GCC unroll 8
        for (int r = 0; r < nr; r++) {
            gvec wv = loadv(dt, w[r], (size_t)k + GEMM_VW * (size_t)h);
#if defined(__AVX512F__)
            __asm__("" : "+v"(wv));  // one load for the NT FMAs (not one folded into each)
#endif
#pragma GCC unroll 4
            for (int t = 0; t < nt; t++) c[r][t] = gv_fma(xv[t], wv, c[r][t]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < nr; r++)
#pragma GCC unroll 4
        for (int t = 0; t < nt; t++) gv_store(acc + ((size_t)t * GEMM_R + r) * GEMM_W2 + GEMM_VW * h, c[r][t]);
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
#if GEMM_E4M3
    else if (dt == DT_E4M3) micro_dt(DT_E4M3, nr, nt, w, x0, hs, len, acc, fresh);
#endif
    else micro_dt(DT_F32, nr, nt, w, x0, hs, len, acc, fresh);
}

void cpu_gemm_rows(const struct weight *w, const float *x /*[n][cols]*/, int n, float *out /*[n][rows]*/, int r0,
                   int r1, float *scratch) {
    const int cols = (int)w->cols, rows = (int)w->rows, n32 = cols / GEMM_W2 * GEMM_W2;
    const size_t esz = dtype_size(w->dtype), hs = (size_t)n32 / 2 * GEMM_T + GEMM_XPAD;
    const bool bw = GEMM_E4M3 && w->dtype == DT_E4M3 && w->fp8.wscale == WSCALE_BLOCK;  // (widened with the scales)
    const int kc = bw ? GEMM_KC / 2 : GEMM_KC;
    // [GEMM_TT][GEMM_R][32] (of which AVX2 uses [GEMM_W2]), e4m3's [GEMM_R][GEMM_KC] bf16 or [GEMM_R][GEMM_KC / 2]
    // f32, [tile][2][hs], 64-byte aligned
    float *acc = (float *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    uint16_t *wide = (uint16_t *)(acc + (size_t)GEMM_TT * GEMM_R * 32);
    float *xs = GEMM_E4M3 ? (float *)(wide + GEMM_R * GEMM_KC) : (float *)wide;  // (AVX2 widens nothing)
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
#if GEMM_E4M3
                if (bw) {  // (every chunk: the scales are in the values)
                    for (int r = 0; r < nr; r++) {
                        widen_bscaled(w, rb + r, k0, len, (float *)wide + r * kc);
                        wr[r] = (float *)wide + r * kc;
                    }
                    dt = DT_F32;
                } else if (dt == DT_E4M3 && tt > 2 * GEMM_T) {  // (widened once, read by three or more token groups)
                    for (int r = 0; r < nr; r++) {
                        widen_e4m3(wr[r], wide + r * GEMM_KC, len);
                        wr[r] = wide + r * GEMM_KC;
                    }
                    dt = DT_BF16;
                }
#endif
                for (int t = 0; t < tt; t += GEMM_T) {
                    const int nt = tt - t < GEMM_T ? tt - t : GEMM_T;
                    const float *xr = xs + (size_t)(t / GEMM_T) * 2 * hs + (size_t)k0 * GEMM_T / 2;
                    micro_any(dt, nr, nt, wr, xr, hs, len, acc + (size_t)t * GEMM_R * GEMM_W2, k0 == 0);
                }
                if (len <= 0) break;
            }
            // cpu_dot's ending: one GEMM_VW-column step into a, the sum of a + b (gv_sum), the scalar tail
            int t = 0;
#if GEMM_VW == 8
            if (n32 == cols && nr == GEMM_R)  // AVX2: two tokens' four rows at once (one by one: 4 % slower)
                for (; t + 2 <= tt; t += 2) {
                    float *o = out + (size_t)(t0 + t) * rows + rb;
                    hsum8_ab(acc + (size_t)t * GEMM_R * GEMM_W2, o, o + rows);
                }
#endif
            for (; t < tt; t++) {
                const float *xt = x + (size_t)(t0 + t) * cols;
                for (int r = 0; r < nr; r++) {
                    const float *p = acc + ((size_t)t * GEMM_R + r) * GEMM_W2;
                    const char *row = (const char *)w->data + (size_t)(rb + r) * cols * esz;
                    gvec a = gv_load(p), b = gv_load(p + GEMM_VW);
                    int j = n32;
                    if (j + GEMM_VW <= cols) {
#if GEMM_E4M3
                        const gvec v = bw ? bscaled16(w, (const uint8_t *)row, rb + r, j)
                                          : loadv(w->dtype, row, (size_t)j);
#else
                        const gvec v = loadv(w->dtype, row, (size_t)j);
#endif
                        a = gv_fma(gv_load(xt + j), v, a);
                        j += GEMM_VW;
                    }
                    float s = gv_sum(a, b);
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
