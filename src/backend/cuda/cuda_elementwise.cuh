// cuda_elementwise.cuh — the CUDA backend's elementwise kernels (get_rows, rmsnorm, rope with
// dynamic NTK, the two-operand ops add / silu_mul / act_mul, bias_add, scale, gather_rows), included by
// cuda_backend.cu, whose ops launch them.
#pragma once

#include "cuda_act.cuh"
#include "cuda_rmsnorm.cuh"

// ids[t] < 0: the greedy pick -1-ids[t] of the last logits_argmax (feed, cuda_greedy.cuh).
__global__ void k_get_rows(bf16 *out, const bf16 *table, const int32_t *ids, const int32_t *feed, int dim) {
    int t = blockIdx.x, id = ids[t];
    if (id < 0) id = -1 - id < BACKEND_FEED_ROWS ? feed[-1 - id] : 0;
    const bf16 *src = table + (size_t)id * dim;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) out[(size_t)t * dim + i] = src[i];
}

// k_rmsnorm, the elementwise ops (k_ew, k_ew8) and the attention kernels (which a decode GEMM follows) call
// pdl_trigger() first, so that a GEMM launched as their programmatic dependent may start early
// (cuda_pdl.cuh).
// One CTA a row (cuda_rmsnorm.cuh's rms_row, which the skinny GEMM's NORM prologue shares).
__global__ void __launch_bounds__(1024) k_rmsnorm(bf16 *out, const bf16 *x, const bf16 *w, int dim, float eps) {
    pdl_trigger();
    __shared__ float red[32];
    rms_row(out + (size_t)blockIdx.x * dim, x + (size_t)blockIdx.x * dim, w, dim, eps, red);
}

// Dynamic NTK (rope_table.dyn_max_pos > 0): a token of a sequence whose context after the step is
// L > max_pos rotates with base theta·(factor·L/max_pos − factor + 1)^(n_rot/(n_rot − 2)), as the CPU.
struct rope_dyn {
    const int32_t *tok_seq, *seq_lens;  // [n_tokens] each token's sequence; [n_seqs] contexts
    int max_pos;                        // 0: off
    double theta, factor;
    int n_rot;
};

// One thread per (token, head, pair). Angles in double, as the CPU backend.
__global__ void k_rope(bf16 *x, const int32_t *pos, const double *inv_freq, int n_tokens, int n_heads,
                       int head_dim, int half, int neox, float attn_factor, const rope_dyn dyn) {
    long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    long total = (long)n_tokens * n_heads * half;
    if (idx >= total) return;
    int i = (int)(idx % half);
    long th = idx / half;
    int t = (int)(th / n_heads);
    bf16 *hv = x + th * head_dim;
    int a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
    double f = inv_freq[i];
    if (dyn.max_pos > 0) {
        const int len = dyn.seq_lens[dyn.tok_seq[t]], d = dyn.n_rot;
        if (len > dyn.max_pos) {
            const double growth = dyn.factor * len / dyn.max_pos - (dyn.factor - 1);
            const double base = dyn.theta * pow(growth, (double)d / (d - 2));
            f = 1.0 / pow(base, (2.0 * i) / d);
        }
    }
    rope_pair(hv[a], hv[b], pos[t], f, attn_factor);
}

// x[i][j] += bias[j] (projection biases), the sum in f32.
__global__ void k_bias_add(bf16 *x, const bf16 *bias, int cols, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = __float2bfloat16_rn(__bfloat162float(x[i]) + __bfloat162float(bias[i % cols]));
}

// The two-operand elementwise ops, one bf16 result from one element of each operand (the sum in f32
// and its rounding as the CPU's): x + y, and act(g) ⊙ u for GeGLU (tanh or erf GELU) and SwiGLU.
struct ew_add {
    __device__ bf16 operator()(bf16 x, bf16 y) const {
        return __float2bfloat16_rn(__bfloat162float(x) + __bfloat162float(y));
    }
};
template <int ACT> struct ew_act_mul {
    __device__ bf16 operator()(bf16 g, bf16 u) const {
        return __float2bfloat16_rn(ffn_act<ACT>(__bfloat162float(g)) * __bfloat162float(u));
    }
};

// out[i] = F(x[i], y[i]), a thread an element (out may be x or y: each thread rewrites only what it read).
template <typename F> __global__ void k_ew(bf16 *out, const bf16 *x, const bf16 *y, long n) {
    pdl_trigger();
    const long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = F()(x[i], y[i]);
}
// The same, 8 elements a thread in 16-byte loads and stores (n8 = n / 8; every pointer 16-byte aligned:
// ew_launch checks): prefill's activations stream at the copy rate instead of two bytes an access.
template <typename F> __global__ void k_ew8(bf16 *out, const bf16 *x, const bf16 *y, long n8) {
    pdl_trigger();
    const long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n8) return;
    const uint4 xv = ((const uint4 *)x)[i], yv = ((const uint4 *)y)[i];
    uint4 ov;
    const bf16 *xe = (const bf16 *)&xv, *ye = (const bf16 *)&yv;
    bf16 *oe = (bf16 *)&ov;
#pragma unroll
    for (int e = 0; e < 8; e++) oe[e] = F()(xe[e], ye[e]);
    ((uint4 *)out)[i] = ov;
}

// x *= s (the embedding scale).
__global__ void k_scale(bf16 *x, long n, float s) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = __float2bfloat16_rn(__bfloat162float(x[i]) * s);
}

__global__ void k_gather(bf16 *out, const bf16 *x, const int32_t *rows, int dim) {
    const bf16 *src = x + (size_t)rows[blockIdx.x] * dim;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) out[(size_t)blockIdx.x * dim + i] = src[i];
}
