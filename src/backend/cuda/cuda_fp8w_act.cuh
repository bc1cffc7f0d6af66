// cuda_fp8w_act.cuh — the kernels that produce an activation and quantize it for the FP8 products
// that read it, in the same launch (included by cuda_gemm.cu): k_rmsnorm_fp8 (the sublayer's norm: the
// codes and per-token scales of xn for up to two activation schemes, as Q|K|V or gate|up need) and
// k_act_mul_fp8 (the SwiGLU / GeGLU epilogue: act's codes for the down projection). Each computes its
// bf16 row as k_rmsnorm or the act_mul op does, keeping the absmax of those values, then writes their
// codes with k_fp8w_quant's arithmetic — the norm from the values still in its registers, the SwiGLU
// epilogue from the row kept in shared memory — so the codes and scales are bit for bit those of k_rmsnorm
// or the act_mul op followed by k_fp8w_quant: the fused path changes no result, only removes the separate
// passes over the row. Neither stores its bf16 row where the codes are all its readers take (measured
// beside the forms that did: bench/fp8_weights/RESULTS.md, "Prefill: the activation codes' kernels").
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
// A kernel parameter: its loops over d are unrolled to the constant bound 2 (j < count tested inside), so
// that every index is a constant. An index known only at run time makes each thread copy the whole struct
// to its stack first (88 bytes a thread): a local-memory store stream larger than the norm's own traffic
// (bench/fp8_weights/RESULTS.md, "Prefill: the activation codes' kernels").
struct fp8w_dsts {
    fp8w_dst d[2];
    int count;  // 1 or 2
};

// The CTA's row r (bf16, cols, written by this CTA and visible to all of it) into each destination,
// amax its absmax (unused by a static scale).
__device__ __forceinline__ void fp8w_quant_row(const bf16 *row, int cols, int r, int n, const fp8w_dsts &q,
                                               float amax) {
#pragma unroll
    for (int j = 0; j < 2; j++) {
        if (j >= q.count) break;
        const fp8w_dst &d = q.d[j];
        const float s = fp8w_row_scale(d.a.fixed > 0 ? 0.0f : amax, d.a);
        fp8w_row_encode(d.xq + (size_t)r * d.kp, row, cols, d.kp, 1.0f / s, d.a.e5m2);
        if (threadIdx.x == 0)
            for (int k = 0; k < d.rep; k++) d.sx[(size_t)k * n + r] = s;
    }
}

// A thread's runs of row r (16-byte runs at run indices idx[u], u < nk, valid where idx[u] < runs) into
// each destination: the codes of fp8w_row_encode from the values in registers, the zeros past cols by
// every thread, the scales by thread 0. Every destination's codes must be 8-byte aligned (fp8w_kept_ok).
template <int NK>
__device__ __forceinline__ void fp8w_quant_kept(const uint4 (&kept)[NK], const int (&idx)[NK], int runs, int cols,
                                                int r, int n, const fp8w_dsts &q, float amax) {
#pragma unroll
    for (int j = 0; j < 2; j++) {
        if (j >= q.count) break;
        const fp8w_dst &d = q.d[j];
        const float s = fp8w_row_scale(d.a.fixed > 0 ? 0.0f : amax, d.a), inv = 1.0f / s;
        uint8_t *xq = d.xq + (size_t)r * d.kp;
#pragma unroll
        for (int u = 0; u < NK; u++)
            if (idx[u] < runs) *(uint2 *)(xq + 8 * idx[u]) = fp8w_encode8(kept[u], inv, d.a.e5m2);
        for (int i = cols + threadIdx.x; i < d.kp; i += blockDim.x) xq[i] = 0;
        if (threadIdx.x == 0)
            for (int k = 0; k < d.rep; k++) d.sx[(size_t)k * n + r] = s;
    }
}
// Whether row r's codes in every destination start 8-byte aligned (the 8-code stores of fp8w_quant_kept).
__device__ __forceinline__ bool fp8w_kept_ok(const fp8w_dsts &q, int r) {
    bool ok = true;
#pragma unroll
    for (int j = 0; j < 2; j++) ok &= j >= q.count || ((uintptr_t)(q.d[j].xq + (size_t)r * q.d[j].kp) & 7) == 0;
    return ok;
}

// rmsnorm(x) ⊙ w (k_rmsnorm's arithmetic and launch shape), then its codes into q: the absmax from the
// values each thread computed, the codes from the same values still in its registers (the 16-byte path;
// otherwise from the row stored to out and re-read) — bit for bit what a reading pass computes from
// k_rmsnorm's row. The 16-byte path does not store out: the FP8 products read the codes only (out is
// the sublayer ops' xn, scratch that an op may leave unwritten).
static __global__ void __launch_bounds__(1024) k_rmsnorm_fp8(bf16 *out, const bf16 *x, const bf16 *w, int dim,
                                                              float eps, int n, fp8w_dsts q) {
    const int r = blockIdx.x;
    bf16 *o = out + (size_t)r * dim;
    __shared__ float red[32];
    float m = 0;
    uint4 kept[RMS_VEC];
    const bool vec = rms_row(o, x + (size_t)r * dim, w, dim, eps, red, &m, kept, !fp8w_kept_ok(q, r));
    const float amax = fp8w_cta_max(m, red);
    if (vec && fp8w_kept_ok(q, r)) {
        int idx[RMS_VEC];
#pragma unroll
        for (int u = 0; u < RMS_VEC; u++) idx[u] = threadIdx.x + u * blockDim.x;  // (rms_row's runs of a thread)
        fp8w_quant_kept<RMS_VEC>(kept, idx, dim / 8, dim, r, n, q, amax);
    } else {
        fp8w_quant_row(o, dim, r, n, q, amax);
    }
}

// One 16-byte run of act(g) ⊙ u (8 bf16 values, the act_mul op's rounding); m takes their largest |value|.
template <int ACT> __device__ __forceinline__ uint4 act_mul8(const uint4 &gv, const uint4 &uv, float &m) {
    uint4 ov;
    const bf16 *ge = (const bf16 *)&gv, *ue = (const bf16 *)&uv;
    bf16 *oe = (bf16 *)&ov;
#pragma unroll
    for (int e = 0; e < 8; e++) {
        oe[e] = __float2bfloat16_rn(ffn_act<ACT>(__bfloat162float(ge[e])) * __bfloat162float(ue[e]));
        m = fmaxf(m, fabsf(__bfloat162float(oe[e])));
    }
    return ov;
}

// act = act(g) ⊙ u (the act_mul op's arithmetic) for a row of cols, 8 elements a thread in 16-byte accesses
// where the row allows, then its codes into q, the absmax taken from the values computed. With out, act is
// stored there (out may be u itself: each thread rewrites only what it read) and re-read for the codes.
// With out NULL (cols % 8 == 0, g and u 16-byte aligned, cols · 2 bytes of dynamic shared memory) the row
// stays in shared memory and act is never written: the down projection reads its codes only, and the
// bf16 row's trip through memory (written, read back, evicted) was half of the launch's bytes.
template <int ACT>
static __global__ void k_act_mul_fp8(bf16 *out, const bf16 *g, const bf16 *u, int cols, int n, fp8w_dsts q) {
    extern __shared__ __align__(16) uint4 act_row[];  // [cols / 8] (out NULL)
    const size_t base = (size_t)blockIdx.x * cols;
    bf16 *o = out ? out + base : (bf16 *)act_row;
    const bf16 *gr = g + base, *ur = u + base;
    float m = 0;
    if (cols % 8 == 0 && !(((uintptr_t)o | (uintptr_t)gr | (uintptr_t)ur) & 15)) {
        for (int i = threadIdx.x; i < cols / 8; i += blockDim.x) {
            const uint4 gv = ((const uint4 *)gr)[i], uv = ((const uint4 *)ur)[i];
            ((uint4 *)o)[i] = act_mul8<ACT>(gv, uv, m);
        }
    } else {
        for (int i = threadIdx.x; i < cols; i += blockDim.x) {
            o[i] = __float2bfloat16_rn(ffn_act<ACT>(__bfloat162float(gr[i])) * __bfloat162float(ur[i]));
            m = fmaxf(m, fabsf(__bfloat162float(o[i])));
        }
    }
    __shared__ float red[32];
    fp8w_quant_row(o, cols, blockIdx.x, n, q, fp8w_cta_max(m, red));
}
