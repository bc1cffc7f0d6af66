// cuda_fp8w_act.cuh — the kernels that produce an activation and quantize it for the FP8 products
// that read it, in the same launch (included by cuda_gemm.cu): k_rmsnorm_fp8 (the sublayer's norm:
// xn in bf16, and its codes and per-token scales for up to two activation schemes, as Q|K|V or
// gate|up need) and k_act_mul_fp8 (the SwiGLU / GeGLU epilogue: act in bf16 and its codes for the
// down projection). Each writes its bf16 row first, then quantizes what it wrote with k_fp8w_quant's
// row functions, so the codes and scales are bit for bit those of k_rmsnorm or k_act_mul followed by
// k_fp8w_quant: the fused path changes no result, only removes the separate passes over the row.
// One CTA a row.
#pragma once

#include "cuda_act.cuh"
#include "cuda_fp8w.cuh"

// Where one activation scheme's codes go: xq [n][kp] (zero past the row's columns), sx [rep][n]
// (every one of the rep scales the token's: block weights read one per 128 columns).
struct fp8w_dst {
    uint8_t *xq;
    float *sx;
    fp8w_act a;
    int kp, rep;
};
struct fp8w_dsts {
    fp8w_dst d[2];
    int count;  // 1 or 2
};

// The CTA's row r (bf16, cols, just written by this CTA) into each destination.
__device__ __forceinline__ void fp8w_quant_written(const bf16 *row, int cols, int r, int n, const fp8w_dsts &q,
                                                   float *red) {
    __syncthreads();  // (the row's writes by every thread of the CTA are visible to all of it)
    const float amax = fp8w_row_amax(row, cols, red);
    for (int j = 0; j < q.count; j++) {
        const fp8w_dst &d = q.d[j];
        const float s = fp8w_row_scale(d.a.fixed > 0 ? 0.0f : amax, d.a);
        fp8w_row_encode(d.xq + (size_t)r * d.kp, row, cols, d.kp, 1.0f / s, d.a.e5m2);
        if (threadIdx.x == 0)
            for (int k = 0; k < d.rep; k++) d.sx[(size_t)k * n + r] = s;
    }
}

// out = rmsnorm(x) ⊙ w (k_rmsnorm's arithmetic and launch shape), then its codes into q.
static __global__ void __launch_bounds__(1024) k_rmsnorm_fp8(bf16 *out, const bf16 *x, const bf16 *w, int dim,
                                                              float eps, int n, fp8w_dsts q) {
    bf16 *o = out + (size_t)blockIdx.x * dim;
    __shared__ float red[32];
    rms_row(o, x + (size_t)blockIdx.x * dim, w, dim, eps, red);
    fp8w_quant_written(o, dim, blockIdx.x, n, q, red);
}

// out = act(g) ⊙ u (k_act_mul's arithmetic, k_silu_mul's for SiLU) for a row of cols, then its codes
// into q. out may be u itself (each thread rewrites only what it read).
template <int ACT>
static __global__ void k_act_mul_fp8(bf16 *out, const bf16 *g, const bf16 *u, int cols, int n, fp8w_dsts q) {
    const size_t base = (size_t)blockIdx.x * cols;
    for (int i = threadIdx.x; i < cols; i += blockDim.x) {
        const float a = ffn_act<ACT>(__bfloat162float(g[base + i]));
        out[base + i] = __float2bfloat16_rn(a * __bfloat162float(u[base + i]));
    }
    __shared__ float red[32];
    fp8w_quant_written(out + base, cols, blockIdx.x, n, q, red);
}
