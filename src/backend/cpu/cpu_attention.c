// cpu_attention.c — the reference paged attention and kv_write (the FP8 rules of
// docs/kv_format.md in their plainest form). Attention reads the cache in its stored
// dtype and widens one key/value row at a time (no f32 copy of the cache); K's scale is
// applied to the dot product and V's to the accumulated output; per-token-head scales
// (fp8_per_token_head) multiply each key's score and each value row's P. One task = a tile of up to
// QT_MAX query tokens of one sequence × one KV head, so the query heads sharing that KV head (GQA) and the
// tile's tokens (prefill) widen each block once; each token's arithmetic is the same as alone.
// Two passes (scores, then softmax·V) over the exact max make the result independent
// of how tokens were grouped into steps. Rows are widened one block-run at a time into a
// [kv_block_tokens][head_dim] tile (L1-resident), never the whole cache. Attention sinks (gpt-oss) join
// each query head's max and softmax denominator as one more logit with no value row.
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "../../base/check.h"
#include "../../base/fp8.h"
#include "../../base/half.h"
#include "../weight.h"
#include "cpu.h"

// e4m3 → binary16 bit pattern: the sign to bit 15, the 7 magnitude bits to bits 13..7.
// That is the same number times 2^-8 for normals and subnormals alike (the exponent bias
// differs by 8), so widening is two shifts, a hardware f16 → f32 convert and ×256, all
// exact: the same values the decode table gives. e5m2 is simply the top byte of an f16.
static void widen_fp8(bool e4m3, const uint8_t *s, int n, float *dst) {
    int i = 0;
#if defined(__AVX512F__) && defined(__AVX2__)
    const __m256i m80 = _mm256_set1_epi16(0x80), m7f = _mm256_set1_epi16(0x7F);
    const __m512 k256 = _mm512_set1_ps(256.0f);
    for (; i + 16 <= n; i += 16) {
        __m256i w = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(s + i)));
        __m256i h = e4m3 ? _mm256_or_si256(_mm256_slli_epi16(_mm256_and_si256(w, m80), 8),
                                           _mm256_slli_epi16(_mm256_and_si256(w, m7f), 7))
                         : _mm256_slli_epi16(w, 8);
        __m512 f = _mm512_cvtph_ps(h);
        _mm512_storeu_ps(dst + i, e4m3 ? _mm512_mul_ps(f, k256) : f);
    }
#elif defined(__AVX2__) && defined(__F16C__)
    const __m128i m80 = _mm_set1_epi16(0x80), m7f = _mm_set1_epi16(0x7F);
    const __m256 k256 = _mm256_set1_ps(256.0f);
    for (; i + 8 <= n; i += 8) {
        __m128i w = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)(s + i)));
        __m128i h =
            e4m3 ? _mm_or_si128(_mm_slli_epi16(_mm_and_si128(w, m80), 8), _mm_slli_epi16(_mm_and_si128(w, m7f), 7))
                 : _mm_slli_epi16(w, 8);
        __m256 f = _mm256_cvtph_ps(h);
        _mm256_storeu_ps(dst + i, e4m3 ? _mm256_mul_ps(f, k256) : f);
    }
#endif
    const float *table = e4m3 ? fp8_e4m3_table : fp8_e5m2_table;
    for (; i < n; i++) dst[i] = table[s[i]];
}

// Widen n stored elements at `src` (element index `idx`) into dst as f32 (unscaled).
static void widen_row(enum dtype dt, const void *base, size_t idx, int n, float *dst) {
    switch (dt) {
    case DT_F32: memcpy(dst, (const float *)base + idx, (size_t)n * 4); break;
    case DT_F16: f16_row_to_f32((const uint16_t *)base + idx, dst, (size_t)n); break;
    case DT_BF16: bf16_row_to_f32((const uint16_t *)base + idx, dst, (size_t)n); break;
    case DT_E4M3: widen_fp8(true, (const uint8_t *)base + idx, n, dst); break;
    case DT_E5M2: widen_fp8(false, (const uint8_t *)base + idx, n, dst); break;
    default: memset(dst, 0, (size_t)n * 4);
    }
}

static bool is_fp8(enum dtype dt) { return dt == DT_E4M3 || dt == DT_E5M2; }

// Store n f32 values as dtype; FP8 stores RNE(value / scale), saturating.
static void narrow_row(enum dtype dt, void *base, size_t idx, int n, const float *src, float scale) {
    switch (dt) {
    case DT_F32: memcpy((float *)base + idx, src, (size_t)n * 4); break;
    case DT_F16: for (int i = 0; i < n; i++) ((uint16_t *)base)[idx + i] = f32_to_f16(src[i]); break;
    case DT_BF16: for (int i = 0; i < n; i++) ((uint16_t *)base)[idx + i] = f32_to_bf16(src[i]); break;
    case DT_E4M3: for (int i = 0; i < n; i++) ((uint8_t *)base)[idx + i] = fp8_e4m3_from_f32(src[i] / scale); break;
    case DT_E5M2: for (int i = 0; i < n; i++) ((uint8_t *)base)[idx + i] = fp8_e5m2_from_f32(src[i] / scale); break;
    default: break;
    }
}

// The dynamic scale of one stored row (fp8_per_token_head): absmax / 448, one IEEE f32
// division; 1.0 when that is not a positive normal float (an all-zero row, a subnormal absmax,
// or an infinite one), so the division in narrow_row never meets 0 or inf.
static float kv_token_scale(const float *x, int n) {
    float amax = 0.0f;
    for (int i = 0; i < n; i++) amax = fmaxf(amax, fabsf(x[i]));
    float s = amax / FP8_E4M3_MAX;
    return s >= FLT_MIN && s <= FLT_MAX ? s : 1.0f;
}

void cpu_kv_write(struct backend *b, struct kv_layer *l, const void *k, const void *v, const struct batch *bt) {
    const float *kf = k, *vf = v;
    int hd = l->head_dim, nkv = l->n_kv_heads, bs = l->kv_block_tokens;
    for (int t = 0; t < bt->n_tokens; t++) {
        int slot = bt->slot_mapping[t];
        if (slot < 0) continue;  // padding token: nothing to store
        int blk = slot / bs, off = slot % bs;
        for (int h = 0; h < nkv; h++) {
            size_t dst = (((size_t)blk * nkv + h) * bs + off) * hd;
            size_t src = ((size_t)t * nkv + h) * hd;
            const float *krow = kf + src;
            float centred[512];  // head_dim <= 512 (model_config)
            if (l->k_offset && is_fp8(l->dtype)) {  // FP8 layers with a K offset store RNE((k − o) / scale)
                const float *o = l->k_offset + (size_t)h * hd;
                for (int i = 0; i < hd; i++) centred[i] = krow[i] - o[i];
                krow = centred;
            }
            float ks = l->k_scale[h], vs = l->v_scale[h];
            if (l->k_tok_scale) {  // per-token-head: each row's own scale, stored beside the pages
                size_t si = ((size_t)blk * nkv + h) * bs + off;
                l->k_tok_scale[si] = ks = kv_token_scale(krow, hd);
                l->v_tok_scale[si] = vs = kv_token_scale(vf + src, hd);
            }
            narrow_row(l->dtype, l->k, dst, hd, krow, ks);
            narrow_row(l->dtype, l->v, dst, hd, vf + src, vs);
        }
    }
}

struct attn_ctx {
    struct cpu_backend *c;
    float *out;
    const float *q;
    const struct kv_layer *l;
    const struct attn_params *p;
    const struct batch *bt;
    int max_ctx;
    const int32_t *tiles;  // [n_tiles][2]: a query tile's first token and its count (one sequence)
};

// Index of the sequence that owns token t (query_start is sorted).
static int seq_of_token(const struct batch *bt, int t) {
    int lo = 0, hi = bt->n_seqs - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (bt->query_start[mid] <= t) lo = mid; else hi = mid - 1;
    }
    return lo;
}

#define KT 16  // keys scored together: one vector of 16 scores
#define QT_MAX 8  // query tokens of one sequence sharing each widened K/V block and transposed key slice
#define QT_SCORES ((size_t)1 << 22)  // a query tile's scores, at most (floats)

// e^x for x <= 0 (softmax numerators), Cephes' single-precision polynomial (≈1 ulp);
// the same arithmetic in every lane and in the scalar tail (fmaf), so a score's value
// never depends on where it falls in the row.
#define EXP_LO (-87.0f)
static inline float exp_tail(float x) {
    x = x < EXP_LO ? EXP_LO : x;
    float n = floorf(fmaf(x, 1.44269504088896341f, 0.5f));
    float r = fmaf(n, -0.693359375f, x);
    r = fmaf(n, 2.12194440e-4f, r);
    float p = 1.9875691500e-4f;
    p = fmaf(p, r, 1.3981999507e-3f); p = fmaf(p, r, 8.3334519073e-3f); p = fmaf(p, r, 4.1665795894e-2f);
    p = fmaf(p, r, 1.6666665459e-1f); p = fmaf(p, r, 5.0000001201e-1f);
    float y = fmaf(p, r * r, r) + 1.0f;
    return ldexpf(y, (int)n);
}

// The vector of each ISA (pvec, PV_W f32 lanes) and the operations the softmax exponent and P·V use;
// pv_scale2(y, n) is y · 2^n for integral n in [-125, 0]: exact, as ldexpf.
#if defined(__AVX512F__)
#define PV_W 16
typedef __m512 pvec;
#define pv_load _mm512_loadu_ps
#define pv_store _mm512_storeu_ps
#define pv_set1 _mm512_set1_ps
#define pv_fma _mm512_fmadd_ps
#define pv_add _mm512_add_ps
#define pv_sub _mm512_sub_ps
#define pv_mul _mm512_mul_ps
#define pv_max _mm512_max_ps
#define pv_floor(x) _mm512_roundscale_ps(x, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC)
#define pv_scale2 _mm512_scalef_ps
#elif defined(__AVX2__) && defined(__FMA__)
#define PV_W 8
typedef __m256 pvec;
#define pv_load _mm256_loadu_ps
#define pv_store _mm256_storeu_ps
#define pv_set1 _mm256_set1_ps
#define pv_fma _mm256_fmadd_ps
#define pv_add _mm256_add_ps
#define pv_sub _mm256_sub_ps
#define pv_mul _mm256_mul_ps
#define pv_max _mm256_max_ps
#define pv_floor _mm256_floor_ps
// (one product with the float 2^n, a normal number: y is at least 0.7, so y · 2^n is normal and exact)
static inline __m256 pv_scale2(__m256 y, __m256 n) {
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}
#endif

// dst[j] = e^(src[j] - m) for j < n.
static void exp_shifted(float *dst, const float *src, float m, int n) {
    int j = 0;
#if defined(PV_W)
    const pvec vm = pv_set1(m), lo = pv_set1(EXP_LO);
    for (; j + PV_W <= n; j += PV_W) {
        pvec x = pv_max(pv_sub(pv_load(src + j), vm), lo);
        pvec fl = pv_floor(pv_fma(x, pv_set1(1.44269504088896341f), pv_set1(0.5f)));
        pvec r = pv_fma(fl, pv_set1(-0.693359375f), x);
        r = pv_fma(fl, pv_set1(2.12194440e-4f), r);
        pvec p = pv_set1(1.9875691500e-4f);
        p = pv_fma(p, r, pv_set1(1.3981999507e-3f));
        p = pv_fma(p, r, pv_set1(8.3334519073e-3f));
        p = pv_fma(p, r, pv_set1(4.1665795894e-2f));
        p = pv_fma(p, r, pv_set1(1.6666665459e-1f));
        p = pv_fma(p, r, pv_set1(5.0000001201e-1f));
        pvec y = pv_add(pv_fma(p, pv_mul(r, r), r), pv_set1(1.0f));
        pv_store(dst + j, pv_scale2(y, fl));  // y · 2^n, exact like ldexpf
    }
#endif
    for (; j < n; j++) dst[j] = exp_tail(src[j] - m);
}

// ac[0..hd) += Σ_r p[r] · rows[r][0..hd): the accumulator stays in registers across the
// rows (elementwise, in row order, so the result does not depend on the vector width).
#if defined(PV_W)
// pv_rows for U PV_W-column slices at once (U independent FMA chains: the loop runs at the FMA units' rate
// rather than one FMA's latency).
static inline __attribute__((always_inline)) void pv_slices(float *ac, const float *p, const float *rows, int n_rows,
                                                            int hd, int U) {
    pvec a[8];
#pragma GCC unroll 8
    for (int u = 0; u < U; u++) a[u] = pv_load(ac + PV_W * u);
    for (int r = 0; r < n_rows; r++) {
        const pvec pr = pv_set1(p[r]);
        const float *row = rows + (size_t)r * hd;
#pragma GCC unroll 8
        for (int u = 0; u < U; u++) a[u] = pv_fma(pr, pv_load(row + PV_W * u), a[u]);
    }
#pragma GCC unroll 8
    for (int u = 0; u < U; u++) pv_store(ac + PV_W * u, a[u]);
}
#endif

static inline void pv_rows(float *ac, const float *p, const float *rows, int n_rows, int hd) {
    int i = 0;
#if defined(PV_W)
    for (; i + 8 * PV_W <= hd; i += 8 * PV_W) pv_slices(ac + i, p, rows + i, n_rows, hd, 8);
    for (; i + 4 * PV_W <= hd; i += 4 * PV_W) pv_slices(ac + i, p, rows + i, n_rows, hd, 4);
    for (; i + PV_W <= hd; i += PV_W) pv_slices(ac + i, p, rows + i, n_rows, hd, 1);
#endif
    for (; i < hd; i++)
        for (int r = 0; r < n_rows; r++) ac[i] = fmaf(p[r], rows[(size_t)r * hd + i], ac[i]);
}

// Rounds toward zero to a multiple of ulp.
static inline float chop(float x, float ulp) { return truncf(x / ulp) * ulp; }

// One MMA of the model for columns d0..d1 of t: t[d] = chop(t[d]) + Σ_j chop(g[j][d]·f[j]) in order
// of j, every term cut to the grid of the largest one's leading bit (14 significant bits);
// columns whose terms are all zero are left as they are. (g[j][d]·f[j] is exact: e4m3 × e4m3.)
static void mma_add_cols(float *t, const float *g, const float *f, int n, int hd, int d0, int d1) {
    for (int d = d0; d < d1; d++) {
        float m = fabsf(t[d]);
        for (int j = 0; j < n; j++) m = fmaxf(m, fabsf(g[(size_t)j * hd + d] * f[j]));
        if (m == 0.0f) continue;
        int e;
        frexpf(m, &e);  // m = f·2^e, f in [0.5, 1): leading bit 2^(e-1)
        float ulp = ldexpf(1.0f, e - 1 - 13), s = chop(t[d], ulp);
        for (int j = 0; j < n; j++) s += chop(g[(size_t)j * hd + d] * f[j], ulp);
        t[d] = s;
    }
}

// mma_add_cols over all hd columns, 8 at a time (AVX2) where each column's largest term is a
// normal float of biased exponent E in [14, 254]: then its grid is ulp = 2^(E−140), and x / ulp
// is x · 2^(140−E), the same real number and so the same rounded float — the same bytes, with a
// multiply in place of the division, in vectors (the CPU reference of the GPU's FP8 prefill tests
// spends nearly all its time here). Other columns, any tail of hd, and builds without AVX2 take
// mma_add_cols.
static void mma_add(float *t, const float *g, const float *f, int n, int hd) {
    int d0 = 0;
#if defined(__AVX2__)
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256i e_lo = _mm256_set1_epi32(14), e_hi = _mm256_set1_epi32(254), k267 = _mm256_set1_epi32(267),
                  k13 = _mm256_set1_epi32(13);
    for (; d0 + 8 <= hd; d0 += 8) {
        __m256 m = _mm256_andnot_ps(sign, _mm256_loadu_ps(t + d0));
        for (int j = 0; j < n; j++)  // (maxps keeps m when a term is NaN; a NaN t takes the slow path)
            m = _mm256_max_ps(
                _mm256_andnot_ps(sign, _mm256_mul_ps(_mm256_loadu_ps(g + (size_t)j * hd + d0), _mm256_set1_ps(f[j]))),
                m);
        const __m256i E = _mm256_srli_epi32(_mm256_castps_si256(m), 23);
        const __m256i bad = _mm256_or_si256(_mm256_cmpgt_epi32(e_lo, E), _mm256_cmpgt_epi32(E, e_hi));
        if (!_mm256_testz_si256(bad, bad)) { mma_add_cols(t, g, f, n, hd, d0, d0 + 8); continue; }
        const __m256 inv = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_sub_epi32(k267, E), 23));
        const __m256 ulp = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_sub_epi32(E, k13), 23));
        __m256 s = _mm256_mul_ps(
            _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(t + d0), inv), _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC), ulp);
        for (int j = 0; j < n; j++) {
            const __m256 x = _mm256_mul_ps(_mm256_loadu_ps(g + (size_t)j * hd + d0), _mm256_set1_ps(f[j]));
            s = _mm256_add_ps(
                s, _mm256_mul_ps(_mm256_round_ps(_mm256_mul_ps(x, inv), _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC), ulp));
        }
        _mm256_storeu_ps(t + d0, s);
    }
#endif
    mma_add_cols(t, g, f, n, hd, d0, hd);
}

void cpu_wgmma_mma_add(float *t, const float *g, const float *f, int n, int hd, int vec) {
    if (vec) mma_add(t, g, f, n, hd);
    else mma_add_cols(t, g, f, n, hd, 0, hd);
}

// P·V as the GPU's FP8 prefill computes it on wgmma (ATTN_FP8_EMULATE, e4m3 caches), a model
// fitted to the probe in bench/accuracy/RESULTS.md: each MMA adds 32 products (keys 32k..32k+31,
// absolute positions) into an accumulator T keeping 14 significant bits — every term,
// T included, is cut toward zero to the grid 2^(e−13) set by the largest term's leading bit
// 2^e. T is added into the FP32 sum after each BN-key tile (two-level, accum 0), after every
// N tiles (every:N, accum N), or only at the end (single, accum < 0). BN is the kernel's
// tile: 128 keys, 64 at head_dim 256. p [group][n_keys] holds P / 256 already rounded to
// e4m3; acc [group][hd] receives Σ (256·p)·v_stored; gbuf [32][hd] and t [hd] are scratch.
static void pv_wgmma_model(const struct kv_layer *l, const int32_t *btab, int g, int lo, int n_keys,
                           const float *p, int group, int accum, float *acc, float *gbuf, float *t) {
    int hd = l->head_dim, bs = l->kv_block_tokens, nkv = l->n_kv_heads, bn = hd <= 128 ? 128 : 64;
    int end = lo + n_keys;
    for (int h = 0; h < group; h++) {
        const float *ph = p + (size_t)h * n_keys;
        float *o = acc + (size_t)h * hd;
        memset(t, 0, (size_t)hd * sizeof(float));
        for (int k0 = lo; k0 < end;) {
            int k1 = (k0 / 32 + 1) * 32 < end ? (k0 / 32 + 1) * 32 : end;
            float pf[32];
            for (int kp = k0; kp < k1; kp++) {
                pf[kp - k0] = ph[kp - lo] * ATTN_FP8_P_SCALE;
                size_t vi = ((size_t)btab[kp / bs] * nkv + g) * bs + kp % bs;
                float *row = gbuf + (size_t)(kp - k0) * hd;
                widen_row(l->dtype, l->v, vi * hd, hd, row);
                for (int d = 0; l->v_tok_scale && d < hd; d++) row[d] *= l->v_tok_scale[vi];  // real V
            }
            mma_add(t, gbuf, pf, k1 - k0, hd);
            bool tile_end = k1 % bn == 0 || k1 == end;
            int tile = (k1 - 1) / bn;
            bool promote = k1 == end || (tile_end && (accum <= 1 ? accum >= 0 : (tile + 1) % accum == 0));
            if (promote)
                for (int d = 0; d < hd; d++) { o[d] += t[d]; t[d] = 0.0f; }
            k0 = k1;
        }
    }
}

// s[0..KT) = q · rows of kt, where kt is a transposed key tile [hd][KT]: each score sums
// its hd terms in order (a product, then a sum: no fused multiply-add), and the KT scores advance
// together in one vector.
static inline void score_tile(float *s, const float *q, const float *kt, int hd) {
    for (int r = 0; r < KT; r++) s[r] = 0.0f;
    for (int i = 0; i < hd; i++) {
        float qi = q[i];
        const float *t = kt + (size_t)i * KT;
        for (int r = 0; r < KT; r++) s[r] += qi * t[r];
    }
}

#if defined(__AVX512F__)
// score_tile for N query heads at once (N independent chains of the same operations).
static inline __attribute__((always_inline)) void score_n(float *s /*[N][KT]*/, const float *q /*[N][hd]*/, int N,
                                                          const float *kt, int hd) {
    __m512 a[8];
#pragma GCC unroll 8
    for (int h = 0; h < N; h++) a[h] = _mm512_setzero_ps();
    for (int i = 0; i < hd; i++) {
        const __m512 k = _mm512_loadu_ps(kt + (size_t)i * KT);
#pragma GCC unroll 8
        for (int h = 0; h < N; h++) a[h] = _mm512_add_ps(a[h], _mm512_mul_ps(_mm512_set1_ps(q[(size_t)h * hd + i]), k));
    }
#pragma GCC unroll 8
    for (int h = 0; h < N; h++) _mm512_storeu_ps(s + (size_t)h * KT, a[h]);
}
#elif defined(__AVX2__)
// score_tile for N query heads at once, each head's KT scores in two 8-lane halves.
static inline __attribute__((always_inline)) void score_n(float *s /*[N][KT]*/, const float *q /*[N][hd]*/, int N,
                                                          const float *kt, int hd) {
    __m256 a[4][2];
#pragma GCC unroll 4
    for (int h = 0; h < N; h++) a[h][0] = a[h][1] = _mm256_setzero_ps();
    for (int i = 0; i < hd; i++) {
        const __m256 k0 = _mm256_loadu_ps(kt + (size_t)i * KT), k1 = _mm256_loadu_ps(kt + (size_t)i * KT + 8);
#pragma GCC unroll 4
        for (int h = 0; h < N; h++) {
            const __m256 qi = _mm256_set1_ps(q[(size_t)h * hd + i]);
            a[h][0] = _mm256_add_ps(a[h][0], _mm256_mul_ps(qi, k0));
            a[h][1] = _mm256_add_ps(a[h][1], _mm256_mul_ps(qi, k1));
        }
    }
#pragma GCC unroll 4
    for (int h = 0; h < N; h++) {
        _mm256_storeu_ps(s + (size_t)h * KT, a[h][0]);
        _mm256_storeu_ps(s + (size_t)h * KT + 8, a[h][1]);
    }
}
#endif

// s[h][0..KT) = score_tile(q[h]) for the n query heads of q [n][hd].
static void score_heads(float *s /*[n][KT]*/, const float *q /*[n][hd]*/, int n, const float *kt, int hd) {
    int h = 0;
#if defined(__AVX512F__) && KT == 16
    for (; h + 8 <= n; h += 8) score_n(s + (size_t)h * KT, q + (size_t)h * hd, 8, kt, hd);
    for (; h + 4 <= n; h += 4) score_n(s + (size_t)h * KT, q + (size_t)h * hd, 4, kt, hd);
    for (; h + 2 <= n; h += 2) score_n(s + (size_t)h * KT, q + (size_t)h * hd, 2, kt, hd);
#elif defined(__AVX2__) && KT == 16
    for (; h + 4 <= n; h += 4) score_n(s + (size_t)h * KT, q + (size_t)h * hd, 4, kt, hd);
    for (; h + 2 <= n; h += 2) score_n(s + (size_t)h * KT, q + (size_t)h * hd, 2, kt, hd);
#endif
    for (; h < n; h++) score_tile(s + (size_t)h * KT, q + (size_t)h * hd, kt, hd);
}

// kt [hd][KT] = the first nr rows of src [nr][hd] transposed, rows past nr zero.
static void transpose_keys(float *kt, const float *src, int nr, int hd) {
    int i0 = 0;
#if defined(__AVX512F__) && KT == 16
    for (; i0 + 16 <= hd; i0 += 16) {  // one 16 x 16 block: pairs, then quads, then 128-bit quarters twice
        __m512 r[16], t[16];
#pragma GCC unroll 16
        for (int k = 0; k < 16; k++) r[k] = k < nr ? _mm512_loadu_ps(src + (size_t)k * hd + i0) : _mm512_setzero_ps();
#pragma GCC unroll 16
        for (int k = 0; k < 16; k += 2) {
            t[k] = _mm512_unpacklo_ps(r[k], r[k + 1]);
            t[k + 1] = _mm512_unpackhi_ps(r[k], r[k + 1]);
        }
#pragma GCC unroll 16
        for (int k = 0; k < 16; k += 4) {  // r[k + m], quarter c: column 4c + m of rows k..k+3
            const __m512d t0 = _mm512_castps_pd(t[k]), t1 = _mm512_castps_pd(t[k + 1]);
            const __m512d t2 = _mm512_castps_pd(t[k + 2]), t3 = _mm512_castps_pd(t[k + 3]);
            r[k] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
            r[k + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
            r[k + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
            r[k + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
        }
#pragma GCC unroll 4
        for (int m = 0; m < 4; m++) {  // column 4c + m: quarter c of r[m], r[4 + m], r[8 + m], r[12 + m]
            const __m512 u = _mm512_shuffle_f32x4(r[m], r[4 + m], 0x88), v = _mm512_shuffle_f32x4(r[m], r[4 + m], 0xDD);
            const __m512 u2 = _mm512_shuffle_f32x4(r[8 + m], r[12 + m], 0x88);
            const __m512 v2 = _mm512_shuffle_f32x4(r[8 + m], r[12 + m], 0xDD);
            _mm512_storeu_ps(kt + (size_t)(i0 + m) * KT, _mm512_shuffle_f32x4(u, u2, 0x88));
            _mm512_storeu_ps(kt + (size_t)(i0 + 4 + m) * KT, _mm512_shuffle_f32x4(v, v2, 0x88));
            _mm512_storeu_ps(kt + (size_t)(i0 + 8 + m) * KT, _mm512_shuffle_f32x4(u, u2, 0xDD));
            _mm512_storeu_ps(kt + (size_t)(i0 + 12 + m) * KT, _mm512_shuffle_f32x4(v, v2, 0xDD));
        }
    }
#elif defined(__AVX2__) && KT == 16
    for (; i0 + 8 <= hd; i0 += 8)  // two 8 x 8 blocks (rows 0-7, 8-15): pairs, then quads, then 128-bit halves
        for (int b = 0; b < 16; b += 8) {
            __m256 r[8], t[8];
#pragma GCC unroll 8
            for (int k = 0; k < 8; k++)
                r[k] = b + k < nr ? _mm256_loadu_ps(src + (size_t)(b + k) * hd + i0) : _mm256_setzero_ps();
#pragma GCC unroll 8
            for (int k = 0; k < 8; k += 2) {
                t[k] = _mm256_unpacklo_ps(r[k], r[k + 1]);
                t[k + 1] = _mm256_unpackhi_ps(r[k], r[k + 1]);
            }
#pragma GCC unroll 8
            for (int k = 0; k < 8; k += 4) {  // r[k + m], half c: column 4c + m of rows k..k+3
                r[k] = _mm256_shuffle_ps(t[k], t[k + 2], 0x44);
                r[k + 1] = _mm256_shuffle_ps(t[k], t[k + 2], 0xEE);
                r[k + 2] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0x44);
                r[k + 3] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0xEE);
            }
#pragma GCC unroll 4
            for (int m = 0; m < 4; m++) {
                _mm256_storeu_ps(kt + (size_t)(i0 + m) * KT + b, _mm256_permute2f128_ps(r[m], r[4 + m], 0x20));
                _mm256_storeu_ps(kt + (size_t)(i0 + 4 + m) * KT + b, _mm256_permute2f128_ps(r[m], r[4 + m], 0x31));
            }
        }
#endif
    for (int r = 0; r < nr; r++)
        for (int i = i0; i < hd; i++) kt[(size_t)i * KT + r] = src[(size_t)r * hd + i];
    for (int r = nr; r < KT; r++)
        for (int i = i0; i < hd; i++) kt[(size_t)i * KT + r] = 0.0f;
}

// Query head h's sink logit (attn_params.sinks: f32, bf16 or f16).
static float sink_logit(const struct weight *w, int h) {
    if (w->dtype == DT_F32) return ((const float *)w->data)[h];
    uint16_t u = ((const uint16_t *)w->data)[h];
    return w->dtype == DT_BF16 ? bf16_to_f32(u) : f16_to_f32(u);
}

// The largest of x[0..n) (-inf when n = 0); a NaN never replaces the running max, as in a scalar
// `m = x > m ? x : m` (MAXPS returns its second operand unless the first is greater).
static float row_max(const float *x, int n) {
    float m = -INFINITY;
    int j = 0;
#if defined(PV_W)
    pvec vm = pv_set1(-INFINITY);
    for (; j + PV_W <= n; j += PV_W) vm = pv_max(pv_load(x + j), vm);
    float lanes[PV_W];
    pv_store(lanes, vm);
    for (int i = 0; i < PV_W; i++) m = lanes[i] > m ? lanes[i] : m;
#endif
    for (; j < n; j++) m = x[j] > m ? x[j] : m;
    return m;
}

static void attn_task(void *ctx, int task, int thread) {
    struct attn_ctx *a = ctx;
    const struct kv_layer *l = a->l;
    const struct batch *bt = a->bt;
    int nkv = l->n_kv_heads, hd = l->head_dim, bs = l->kv_block_tokens;
    int group = a->p->n_heads / nkv;
    int g = task % nkv, t0 = a->tiles[2 * (task / nkv)], nt = a->tiles[2 * (task / nkv) + 1];
    int s = seq_of_token(bt, t0);
    const int32_t *btab = bt->block_tables + (size_t)s * bt->max_blocks_per_seq;
    bool emulate = a->p->fp8_math == ATTN_FP8_EMULATE && is_fp8(l->dtype);
    bool wg_model = emulate && l->dtype == DT_E4M3;  // e4m3 prefill runs on wgmma on a GPU

    float *scratch = cpu_scratch(a->c, thread);
    float *tile = scratch;                         // [bs][hd] one block's widened K or V rows
    float *kt = tile + (size_t)bs * hd;            // [hd][KT] a transposed slice of the K tile
    float *qv = kt + (size_t)hd * KT;              // [nt][group][hd] queries (maybe FP8-rounded)
    float *acc = qv + (size_t)nt * group * hd;     // [nt][group][hd]
    float *scores = acc + (size_t)nt * group * hd; // [nt][group × max_ctx]: token u's [group][n_keys[u]]
    float *gbuf = scores + (size_t)nt * group * a->max_ctx; // [32][hd] + [hd]: the wgmma model's scratch
    float qscale[QT_MAX][64], sv[64 * KT], sum[QT_MAX][64];  // group <= 64
    int lo[QT_MAX], pos[QT_MAX], n_keys[QT_MAX], klo = INT32_MAX, khi = -1;

    for (int u = 0; u < nt; u++) {
        pos[u] = bt->positions[t0 + u];
        lo[u] = (l->window > 0 && pos[u] - l->window + 1 > 0) ? pos[u] - l->window + 1 : 0;
        n_keys[u] = pos[u] - lo[u] + 1;
        klo = lo[u] < klo ? lo[u] : klo;
        khi = pos[u] > khi ? pos[u] : khi;
        for (int h = 0; h < group; h++) {
            const float *src = a->q + ((size_t)(t0 + u) * a->p->n_heads + g * group + h) * hd;
            float *dst = qv + ((size_t)u * group + h) * hd;
            qscale[u][h] = 1.0f;
            if (emulate) {  // dynamic per-(token, head) scale amax/448, then e4m3 rounding
                float amax = 0;
                for (int i = 0; i < hd; i++) amax = fmaxf(amax, fabsf(src[i]));
                qscale[u][h] = amax > 0 ? amax / FP8_E4M3_MAX : 1.0f;
                for (int i = 0; i < hd; i++) dst[i] = fp8_e4m3_to_f32(fp8_e4m3_from_f32(src[i] / qscale[u][h]));
            } else {
                memcpy(dst, src, (size_t)hd * 4);
            }
        }
    }
    float kscale = is_fp8(l->dtype) ? l->k_scale[g] : 1.0f, cap = a->p->softcap;
    const float *kts = l->k_tok_scale, *vts = l->v_tok_scale;  // [n_blocks][nkv][bs] or NULL
    // pass 1: scores, one block (a contiguous [rows][hd] run for head g) at a time, each widened and each
    // KT-key slice transposed once for every token of the tile
    for (int kp = klo; kp <= khi;) {
        int off = kp % bs, rows = bs - off < khi - kp + 1 ? bs - off : khi - kp + 1;
        size_t idx = (((size_t)btab[kp / bs] * nkv + g) * bs + off) * hd;
        widen_row(l->dtype, l->k, idx, rows * hd, tile);
        const float *rks = kts ? kts + idx / hd : NULL;  // the rows' K scales
        for (int r0 = 0; r0 < rows; r0 += KT) {
            int nr = rows - r0 < KT ? rows - r0 : KT, c0 = kp + r0, c1 = c0 + nr;  // keys [c0, c1)
            transpose_keys(kt, tile + (size_t)r0 * hd, nr, hd);
            for (int u = 0; u < nt; u++) {
                int k0 = c0 > lo[u] ? c0 : lo[u], k1 = c1 < pos[u] + 1 ? c1 : pos[u] + 1;
                if (k0 >= k1) continue;
                score_heads(sv, qv + (size_t)u * group * hd, group, kt, hd);
                for (int h = 0; h < group; h++) {
                    float f = qscale[u][h] * kscale * a->p->softmax_scale;
                    float *sc = scores + (size_t)u * group * a->max_ctx + (size_t)h * n_keys[u] - lo[u];
                    for (int k = k0; k < k1; k++) sc[k] = sv[(size_t)h * KT + k - c0] * f;
                    if (rks)  // per-token-head K scale: one more f32 product on the score
                        for (int k = k0; k < k1; k++) sc[k] *= rks[r0 + k - c0];
                    if (cap > 0)  // soft-capping (Gemma 2): cap·tanh(s/cap) on the scaled score
                        for (int k = k0; k < k1; k++) sc[k] = cap * tanhf(sc[k] / cap);
                }
            }
        }
        kp += rows;
    }
    // softmax denominators with the exact max (a sink logit counts in both, and adds no value); each head's
    // sum in key order, the group's heads side by side (independent chains)
    const struct weight *sinks = l->sinks;
    for (int u = 0; u < nt; u++) {
        float *su = scores + (size_t)u * group * a->max_ctx;
        double l_sum[64];
        for (int h = 0; h < group; h++) {
            float *sc = su + (size_t)h * n_keys[u], m = row_max(sc, n_keys[u]);
            float sink = sinks ? sink_logit(sinks, g * group + h) : -INFINITY;
            m = sink > m ? sink : m;
            exp_shifted(sc, sc, m, n_keys[u]);
            l_sum[h] = sinks ? exp_tail(sink - m) : 0;
        }
        int h = 0, nk = n_keys[u];
        for (; h + 4 <= group; h += 4) {  // four chains in registers
            const float *p0 = su + (size_t)h * nk, *p1 = p0 + nk, *p2 = p1 + nk, *p3 = p2 + nk;
            double s0 = l_sum[h], s1 = l_sum[h + 1], s2 = l_sum[h + 2], s3 = l_sum[h + 3];
            for (int j = 0; j < nk; j++) {
                s0 += p0[j];
                s1 += p1[j];
                s2 += p2[j];
                s3 += p3[j];
            }
            l_sum[h] = s0, l_sum[h + 1] = s1, l_sum[h + 2] = s2, l_sum[h + 3] = s3;
        }
        for (; h < group; h++) {
            double s0 = l_sum[h];
            for (int j = 0; j < nk; j++) s0 += su[(size_t)h * nk + j];
            l_sum[h] = s0;
        }
        for (int h = 0; h < group; h++) {
            float *sc = su + (size_t)h * n_keys[u];
            if (emulate)
                for (int j = 0; j < n_keys[u]; j++)
                    sc[j] = fp8_e4m3_to_f32(fp8_e4m3_from_f32(sc[j] * ATTN_FP8_P_SCALE)) / ATTN_FP8_P_SCALE;
            sum[u][h] = (float)l_sum[h];
            memset(acc + ((size_t)u * group + h) * hd, 0, (size_t)hd * 4);
        }
    }
    // pass 2: P·V, each block widened once for every token of the tile; a token adds its rows in key order
    if (wg_model)
        for (int u = 0; u < nt; u++)
            pv_wgmma_model(l, btab, g, lo[u], n_keys[u], scores + (size_t)u * group * a->max_ctx, group,
                           a->p->fp8_accum, acc + (size_t)u * group * hd, gbuf, gbuf + (size_t)32 * hd);
    for (int kp = klo; kp <= khi && !wg_model;) {
        int off = kp % bs, rows = bs - off < khi - kp + 1 ? bs - off : khi - kp + 1;
        size_t idx = (((size_t)btab[kp / bs] * nkv + g) * bs + off) * hd;
        widen_row(l->dtype, l->v, idx, rows * hd, tile);
        for (int u = 0; u < nt; u++) {
            int k0 = kp > lo[u] ? kp : lo[u], k1 = kp + rows < pos[u] + 1 ? kp + rows : pos[u] + 1;
            if (k0 >= k1) continue;
            for (int h = 0; h < group; h++) {
                const float *p = scores + (size_t)u * group * a->max_ctx + (size_t)h * n_keys[u] + (k0 - lo[u]);
                float *ac = acc + ((size_t)u * group + h) * hd, pv[1024];  // rows <= kv_block_tokens <= 1024
                if (vts) {  // per-token-head V scale folded into P (the denominator keeps P unscaled)
                    for (int r = 0; r < k1 - k0; r++) pv[r] = p[r] * vts[idx / hd + (k0 - kp) + r];
                    p = pv;
                }
                pv_rows(ac, p, tile + (size_t)(k0 - kp) * hd, k1 - k0, hd);
            }
        }
        kp += rows;
    }
    float vscale = is_fp8(l->dtype) ? l->v_scale[g] : 1.0f;
    for (int u = 0; u < nt; u++)
        for (int h = 0; h < group; h++) {
            float *o = a->out + ((size_t)(t0 + u) * a->p->n_heads + g * group + h) * hd;
            float f = vscale / sum[u][h] / (wg_model ? ATTN_FP8_P_SCALE : 1.0f);
            const float *ac = acc + ((size_t)u * group + h) * hd;
            int i = 0;
#if defined(PV_W)
            for (; i + PV_W <= hd; i += PV_W) pv_store(o + i, pv_mul(pv_load(ac + i), pv_set1(f)));
#endif
            for (; i < hd; i++) o[i] = ac[i] * f;
        }
}

void cpu_attention(struct backend *b, void *out, const void *q, const struct kv_layer *l,
                   const struct attn_params *p, const struct batch *bt) {
    struct cpu_backend *c = (struct cpu_backend *)b;
    int group = p->n_heads / l->n_kv_heads;
    int max_ctx = 0;
    for (int t = 0; t < bt->n_tokens; t++) {
        int n = bt->positions[t] + 1;
        if (l->window > 0 && n > l->window) n = l->window;
        if (n > max_ctx) max_ctx = n;
    }
    // query tiles: up to qt consecutive tokens of one sequence, their scores at most QT_SCORES floats
    int qt = (int)(QT_SCORES / ((size_t)group * (max_ctx > 0 ? max_ctx : 1)));
    qt = qt < 1 ? 1 : qt > QT_MAX ? QT_MAX : qt;
    int32_t *tiles = malloc((size_t)2 * (bt->n_tokens > 0 ? bt->n_tokens : 1) * sizeof *tiles);
    size_t need = (size_t)l->head_dim * (l->kv_block_tokens + KT + 2 * (size_t)qt * group + 33) +
                  (size_t)qt * group * max_ctx;
    if (!tiles || cpu_reserve_scratch(c, need) < 0) {
        free(tiles);
        c->error = err_set(OCT_ENOMEM, "cpu: no memory for attention over %d tokens", max_ctx);
        return;
    }
    int n_tiles = 0;
    for (int t = 0; t < bt->n_tokens;) {
        int s = seq_of_token(bt, t), n = 1;
        while (n < qt && t + n < bt->n_tokens && seq_of_token(bt, t + n) == s) n++;
        tiles[2 * n_tiles] = t;
        tiles[2 * n_tiles++ + 1] = n;
        t += n;
    }
    struct attn_ctx a = {c, out, q, l, p, bt, max_ctx, tiles};
    int n_tasks = n_tiles * l->n_kv_heads;
    // small steps (decode at short context) run on this thread: waking a worker costs more
    double macs = 2.0 * bt->n_tokens * p->n_heads * (double)max_ctx * l->head_dim;
    if (macs < 262144)
        for (int i = 0; i < n_tasks; i++) attn_task(&a, i, 0);
    else
        threadpool_run(c->tp, n_tasks, attn_task, &a);
    free(tiles);
}
