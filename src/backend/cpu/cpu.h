// cpu.h — private to the CPU backend: its state and the op functions split across
// cpu_backend.c (memory, elementwise, rope), cpu_matmul.c and cpu_attention.c.
#ifndef OCTET_CPU_H
#define OCTET_CPU_H

#include "../../base/threadpool.h"
#include "../backend.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
// The sum of v's 8 lanes in cpu_dot's AVX2 order (lower and upper halves, then two pairwise adds):
// every AVX2 kernel that must equal cpu_dot bit for bit reduces with it.
static inline float cpu_hsum256(__m256 v) {
    __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_add_ps(lo, hi);
    lo = _mm_hadd_ps(lo, lo);
    lo = _mm_hadd_ps(lo, lo);
    return _mm_cvtss_f32(lo);
}
#endif

struct cpu_backend {
    struct backend base;
    struct threadpool *tp;
    int n_threads;
    float *scratch;         // [n_threads][scratch_floats] per-thread rows
    size_t scratch_floats;
    float *lg;              // logits_argmax: [lg_floats] the rows' logits
    size_t lg_floats;
    int32_t feed[BACKEND_FEED_ROWS];  // logits_argmax's last picks (batch token ids -1-j)
    int error;              // a failed logits_argmax's code, returned (once) by sync
    void **kq8;             // [n_kq8] the Q4_K / Q6_K weights' repacked copies it owns (cpu_kq8.c, cpu_kq6x8.c)
    int n_kq8;
    size_t kq8_room;        // bytes more repacked copies may take: the memory available at creation less
                            // 512 MiB of headroom (SIZE_MAX where unknown); past it weights stay unrepacked
    size_t kq8_used;        // bytes the repacked copies take
    int kq8_told;           // (the notice that a weight stayed unrepacked is printed once)
};

// Per-thread scratch of at least n floats (grown between runs only).
float *cpu_scratch(struct cpu_backend *c, int thread);
int cpu_reserve_scratch(struct cpu_backend *c, size_t n_floats);

float cpu_dot(const float *a, const float *b, int n);
// Widen a weight row (any weight dtype) into dst; returns dst or the row itself if F32.
const float *cpu_weight_row(const struct weight *w, int64_t row, float *dst);

void cpu_matmul(struct backend *b, void *out, const void *x, const struct weight *w, int n);
// The register-blocked prefill product (cpu_gemm.c): whether it takes w for n tokens (AVX-512 and AVX2
// builds, F32/F16/BF16, n >= 4; AVX-512 builds of cpu_fp8w.c also hand it e4m3 weights without NaN
// codes), its per-thread scratch in floats, and out[t][r] = x[t]·W[r] for rows [r0, r1) of every token,
// bit for bit cpu_dot's result on the widened row (a 128×128-block e4m3 weight's row widened as
// fp8w_bscaled gives it).
int cpu_gemm_fits(const struct weight *w, int n);
size_t cpu_gemm_scratch_floats(int64_t cols);
// The tokens cpu_gemm_rows packs and multiplies at a time for rows of cols columns (its x tile in L2): a
// caller that splits a product by tokens splits it at multiples of this, so each piece packs its x once.
int cpu_gemm_tile_tokens(int64_t cols);
void cpu_gemm_rows(const struct weight *w, const float *x /*[n][cols]*/, int n, float *out /*[n][rows]*/, int r0,
                   int r1, float *scratch);
void cpu_kv_write(struct backend *b, struct kv_layer *l, const void *k, const void *v,
                  const struct batch *bt);
void cpu_attention(struct backend *b, void *out, const void *q, const struct kv_layer *l,
                   const struct attn_params *p, const struct batch *bt);

// The mixture-of-experts FFN (cpu_moe.c; struct moe_ffn_args says what it computes).
void cpu_moe_ffn(struct backend *b, const struct moe_ffn_args *a, int n);
// One token's routing: softmax over n_experts logits, the k largest (ties: the lower index) into
// ids[k] with their probabilities in w[k], renormalised to sum 1 when norm_topk.
void moe_route(const float *logits, int n_experts, int k, bool norm_topk, int *ids, float *w);
// gpt-oss's clamped SwiGLU of one gate/up pair: g = min(g, limit), u = clamp(u, ±limit), g·σ(alpha·g)·(u + 1).
float moe_swiglu_clamp(float g, float u, float alpha, float limit);
// dst[0..n) = the n elements (whole 32-element blocks) of one DT_MXFP4 row at src (cpu_moe.c), exactly
// (code × 2^(s-127); inf where that passes f32's range, only for codes of 2 or more at s = 254 or 253).
void mxfp4_row_to_f32(const void *src, float *dst, int64_t n);

// One MMA of the FP8 wgmma model (cpu_attention.c): t[0..hd) = t + Σ_j g[j]·f[j] (n ≤ 32 rows of
// hd), every term and t cut to 14 significant bits; vec = 0 forces the scalar form, which the
// vector form must match bit for bit (tests/unit/test_attention.c).
void cpu_wgmma_mma_add(float *t, const float *g, const float *f, int n, int hd, int vec);

// Attention softmax P is multiplied by this before rounding to e4m3 in the emulation
// mode (a power of two: exact, and maps P's [0,1] into e4m3's normal range).
#define ATTN_FP8_P_SCALE 256.0f

#endif
