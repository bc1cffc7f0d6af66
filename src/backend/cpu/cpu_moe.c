// cpu_moe.c — the CPU reference of a mixture-of-experts FFN (owns: the router's softmax and top-k,
// and moe_ffn: tokens grouped by expert, each expert's gated FFN run as three matmuls over its group —
// SiLU, or gpt-oss's clamped SwiGLU with its biases —, the outputs added into each token's row with its
// routing weight; and the MXFP4 row decoder the CPU matmul widens gpt-oss's packed experts with). FP8
// (e4m3) experts run through cpu_fp8w.c on each expert's rows with their scales: every token's activation
// row is quantized on its own, so a token's results do not depend on the batch or its expert group.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../base/check.h"
#include "../../base/half.h"
#include "../weight.h"
#include "cpu.h"
#include "cpu_fp8w.h"
#if defined(__AVX2__)
#include <immintrin.h>
#endif

void moe_route(const float *logits, int n_experts, int k, bool norm_topk, int *ids, float *w) {
    float mx = logits[0];
    for (int e = 1; e < n_experts; e++) mx = logits[e] > mx ? logits[e] : mx;
    double sum = 0;
    for (int e = 0; e < n_experts; e++) sum += exp((double)logits[e] - mx);
    double picked = 0;
    for (int j = 0; j < k; j++) {  // the j-th largest; ties go to the lower index
        int best = -1;
        for (int e = 0; e < n_experts; e++) {
            bool taken = false;
            for (int i = 0; i < j && !taken; i++) taken = ids[i] == e;
            if (!taken && (best < 0 || logits[e] > logits[best])) best = e;
        }
        ids[j] = best;
        w[j] = (float)(exp((double)logits[best] - mx) / sum);
        picked += w[j];
    }
    if (norm_topk)
        for (int j = 0; j < k; j++) w[j] = (float)(w[j] / picked);
}

float moe_swiglu_clamp(float g, float u, float alpha, float limit) {
    g = g > limit ? limit : g;  // (comparisons keep a NaN, as torch's clamp does)
    u = u > limit ? limit : u < -limit ? -limit : u;
    return g / (1.0f + expf(-alpha * g)) * (u + 1.0f);
}

// e2m1 code values (bit 3 the sign); an e8m0 exponent s scales by 2^(s-127), and 255 is NaN.
static const float e2m1[16] __attribute__((unused)) = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                               -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

#if defined(__AVX2__)
// Eight codes (one per 32-bit lane) → their values times s: the magnitude from an 8-entry table, the sign
// bit 3 moved to bit 31; the same products as the scalar loop.
static inline __m256 e2m1x8(__m256i code, __m256 s) {
    static const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    const __m256 m = _mm256_permutevar8x32_ps(_mm256_loadu_ps(mag), code);  // (uses the low 3 bits)
    const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(code, _mm256_set1_epi32(8)), 28);
    return _mm256_mul_ps(_mm256_xor_ps(m, _mm256_castsi256_ps(sign)), s);
}
#endif

void mxfp4_row_to_f32(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / QK_MXFP4; b++, p += 1 + QK_MXFP4 / 2) {
        const float s = p[0] == 255 ? NAN : ldexpf(1.0f, (int)p[0] - 127);  // exact, down to 2^-127
        float *o = dst + b * QK_MXFP4;
#if defined(__AVX2__)
        const __m256 vs = _mm256_set1_ps(s);
        for (int i = 0; i < QK_MXFP4 / 2; i += 8) {  // 8 bytes: elements 2i .. 2i+15
            const __m256i by = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p + 1 + i)));
            const __m256 lo = e2m1x8(_mm256_and_si256(by, _mm256_set1_epi32(15)), vs);  // even elements
            const __m256 hi = e2m1x8(_mm256_srli_epi32(by, 4), vs);                     // odd elements
            const __m256 a = _mm256_unpacklo_ps(lo, hi), c = _mm256_unpackhi_ps(lo, hi);  // pairs within lanes
            _mm256_storeu_ps(o + 2 * i, _mm256_permute2f128_ps(a, c, 0x20));
            _mm256_storeu_ps(o + 2 * i + 8, _mm256_permute2f128_ps(a, c, 0x31));
        }
#else
        for (int i = 0; i < QK_MXFP4 / 2; i++) {
            o[2 * i] = e2m1[p[1 + i] & 0x0F] * s;      // code × 2^k: exact in f32 (3 significant bits)
            o[2 * i + 1] = e2m1[p[1 + i] >> 4] * s;
        }
#endif
    }
}

// Rows [r0, r0 + n) of a stacked expert weight, as a weight of its own.
static struct weight expert_rows(const struct weight *w, int64_t r0, int64_t n) {
    if (w->dtype == DT_E4M3) return fp8w_rows(w, r0, n);
    struct weight v = *w;
    v.rows = n;
    v.data = (const char *)w->data + (size_t)r0 * dtype_row_bytes(w->dtype, w->cols);
    v.dev = (void *)v.data;
    return v;
}

// Element i of a bias row (f32, bf16 or f16), 0 without one.
static float bias_at(const struct weight *b, int64_t i) {
    if (!b) return 0.0f;
    if (b->dtype == DT_F32) return ((const float *)b->data)[i];
    uint16_t u = ((const uint16_t *)b->data)[i];
    return b->dtype == DT_BF16 ? bf16_to_f32(u) : f16_to_f32(u);
}

static bool dtype_ok(enum dtype t, bool matrix) {
    return t == DT_F32 || t == DT_F16 || t == DT_BF16 || (matrix && (t == DT_MXFP4 || t == DT_E4M3));
}

// The shapes and dtypes moe_ffn needs, or an error naming the first mismatch.
static int moe_check(const struct moe_ffn_args *a, int64_t dim, int64_t F) {
    const int E = a->n_experts, K = a->n_used;
    if (E <= 0 || K <= 0 || K > E || a->router->rows != E || F <= 0 || a->gate->rows != E * F ||
        a->up->rows != E * F || a->down->rows != E * dim || a->down->cols != F || a->gate->cols != dim)
        return err_set(OCT_EINVAL, "cpu: moe_ffn: %d experts (%d used) do not match the expert weights' shapes", E, K);
    const struct weight *mats[3] = {a->gate, a->up, a->down};
    for (int i = 0; i < 3; i++)
        if (!dtype_ok(mats[i]->dtype, true))
            return err_set(OCT_EUNSUP, "cpu: moe_ffn: expert weights of dtype %s (f32, f16, bf16, mxfp4 or "
                           "fp8_e4m3 only)", dtype_name(mats[i]->dtype));
    for (int i = 0; i < 3; i++) {  // 128x128 block scales: no tile may straddle two experts
        const struct weight *m = mats[i];
        const int64_t per = i < 2 ? F : dim;
        if (m->dtype == DT_E4M3 && m->fp8.wscale == WSCALE_BLOCK && (m->fp8.block <= 0 || per % m->fp8.block))
            return err_set(OCT_EUNSUP, "cpu: moe_ffn: fp8 experts of %lld rows each in %dx%d blocks (an expert's "
                           "rows must be whole blocks)", (long long)per, m->fp8.block, m->fp8.block);
    }
    const struct weight *bs[4] = {a->router_bias, a->b_gate, a->b_up, a->b_down};
    const int64_t len[4] = {E, E * F, E * F, E * dim};
    for (int i = 0; i < 4; i++)
        if (bs[i] && (!dtype_ok(bs[i]->dtype, false) || bs[i]->rows * bs[i]->cols != len[i]))
            return err_set(OCT_EINVAL, "cpu: moe_ffn: a bias of %lld %s values (want %lld f32/f16/bf16)",
                           (long long)(bs[i]->rows * bs[i]->cols), dtype_name(bs[i]->dtype), (long long)len[i]);
    return OCT_OK;
}

void cpu_moe_ffn(struct backend *b, const struct moe_ffn_args *a, int n) {
    struct cpu_backend *c = (struct cpu_backend *)b;
    const int E = a->n_experts, K = a->n_used;
    const int64_t dim = a->router->cols, F = E > 0 ? a->gate->rows / E : 0;
    int rc = moe_check(a, dim, F);
    if (rc < 0) {
        c->error = rc;
        return;
    }
    float *logits = malloc((size_t)n * E * sizeof(float)), *wts = malloc((size_t)n * K * sizeof(float));
    int *ids = malloc((size_t)n * K * sizeof(int)), *rows = malloc((size_t)n * sizeof(int));
    float *rw = malloc((size_t)n * sizeof(float)), *xs = malloc((size_t)n * dim * sizeof(float));
    float *g = malloc((size_t)n * F * sizeof(float)), *u = malloc((size_t)n * F * sizeof(float));
    float *y = malloc((size_t)n * dim * sizeof(float));
    float *out = a->out;
    const float *xn = a->xn;
    if (!logits || !wts || !ids || !rows || !rw || !xs || !g || !u || !y) {
        c->error = err_set(OCT_ENOMEM, "cpu: no memory for the experts of %d tokens", n);
        goto done;
    }
    cpu_matmul(b, logits, xn, a->router, n);  // [n][E]
    for (int t = 0; t < n; t++) {
        float *lt = logits + (size_t)t * E;
        for (int e = 0; a->router_bias && e < E; e++) lt[e] += bias_at(a->router_bias, e);
        moe_route(lt, E, K, a->norm_topk, ids + (size_t)t * K, wts + (size_t)t * K);
    }
    memset(out, 0, (size_t)n * dim * sizeof(float));
    for (int e = 0; e < E; e++) {
        int cnt = 0;
        for (int t = 0; t < n; t++)
            for (int j = 0; j < K; j++)
                if (ids[t * K + j] == e) {
                    rows[cnt] = t;
                    rw[cnt++] = wts[t * K + j];
                }
        if (!cnt) continue;
        for (int i = 0; i < cnt; i++)
            memcpy(xs + (size_t)i * dim, xn + (size_t)rows[i] * dim, (size_t)dim * sizeof(float));
        const struct weight wg = expert_rows(a->gate, e * F, F), wu = expert_rows(a->up, e * F, F);
        const struct weight wd = expert_rows(a->down, e * dim, dim);
        cpu_matmul(b, g, xs, &wg, cnt);  // [cnt][F]
        cpu_matmul(b, u, xs, &wu, cnt);
        for (int i = 0; i < cnt; i++)
            for (int64_t f = 0; f < F; f++) {
                const size_t k = (size_t)i * F + f;
                const float gv = g[k] + bias_at(a->b_gate, e * F + f), uv = u[k] + bias_at(a->b_up, e * F + f);
                g[k] = a->act == MOE_ACT_SWIGLU_CLAMP ? moe_swiglu_clamp(gv, uv, a->alpha, a->limit)
                                                      : gv / (1.0f + expf(-gv)) * uv;
            }
        cpu_matmul(b, y, g, &wd, cnt);   // [cnt][dim]
        for (int i = 0; i < cnt; i++) {
            float *o = out + (size_t)rows[i] * dim;
            const float *yi = y + (size_t)i * dim;
            for (int64_t d = 0; d < dim; d++) o[d] += rw[i] * (yi[d] + bias_at(a->b_down, e * dim + d));
        }
    }
done:
    free(logits), free(wts), free(ids), free(rows), free(rw), free(xs), free(g), free(u), free(y);
}
