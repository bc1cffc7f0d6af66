// cuda_moe.cuh — the kernels of the CUDA backend's mixture-of-experts FFN (included by cuda_moe.cu, which owns
// the op, its scratch and the MXFP4 upload): routing (softmax and top-k per token), the grouping of the
// (token, slot) pairs by expert (counts, offsets, the tile list and the permutation, all on the device), the
// grouped expert GEMM on tensor cores, the FP8 activation quantizer and the per-token combine.
//
// The grouped GEMM (k_moe_gemm): out = x · Wᵀ of one expert's rows for up to 8·NB of its grouped tokens. A
// CTA takes one tile of the list (an expert and a run of its grouped rows) and 16·MT weight rows (MT M tiles
// of mma.sync m16n8k16: the weight is the A operand, the tokens the B operand, NB n8 tiles of them). Its 4
// warps take the 128-column chunks of K in turn (warp w: chunks w, w + 4, ...); in a chunk a lane holds
// 32 consecutive columns [32·(lane % 4), +32) of weight rows g and g + 8 and of token g of each n8 tile
// (g = lane / 4) and runs 8 MMAs over them, 8 columns each: the k order inside an MMA is a permutation
// shared by both operands, so every sum is still the dot product. Weights are widened to bf16 in
// registers, exactly: bf16 as stored; fp8 e4m3 codes (the activations then hold e4m3 / e5m2 values of
// x / s_x, also exact in bf16, so every product is the CPU's exact product); MXFP4 e2m1 codes times
// their block's power-of-two scale. FP8 128×128 block scales multiply each chunk's sum (a chunk is one
// block); row and tensor scales multiply the total, as cpu_fp8w.c does. The warps' sums meet in shared
// memory as ((w0 + w1) + w2) + w3, so an output element is the same sum in the same order whatever NB,
// the tile or the other tokens are: a token's result does not depend on its batch. Prefill tiles of bf16
// and MXFP4 experts (NB = 8) run cuda_moe_tc.cuh's shared-memory tiled form of the same sums.
#pragma once

#include <cuda_fp8.h>

#define MOE_WARPS 4
#define MOE_CHUNK 128    // columns a warp takes at a time (a lane: 32 of them)
#define MOE_MAX_EXPERTS 1024

// How a stacked expert weight is stored on the device.
enum moe_fmt {
    MOE_W_BF16 = 0,   // bf16 [rows][cols] (f32 and f16 checkpoints are converted at upload)
    MOE_W_FP8,        // cuda_fp8w.cuh's layout with a scale a row (per-tensor: repeated)
    MOE_W_FP8_BLOCK,  // cuda_fp8w.cuh's layout with 128×128 block scales
    MOE_W_MXFP4,      // e2m1 codes [rows][cols / 2], each 32-bit word of 8 in moe_mx_rot_word's bit order,
                      // then e8m0 scales [rows][spitch]; every scale <= 2^1 (e8m0 <= 128)
    MOE_W_MXFP4_WIDE, // the same bytes, any scale (the weights cuda_mxfp4_upload flags CUDA_WFLAG_MX_WIDE)
};

struct moe_w {
    const uint8_t *q;   // row r at q + r·pitch
    const void *s;      // FP8: f32 scales (fp8w_scale_off); MXFP4: e8m0 bytes, spitch a row
    int64_t pitch;
    int kbp;            // FP8_BLOCK: scales a row of blocks
    int spitch;         // MXFP4: scale bytes a row (cols / 32 rounded up to 4, cuda_moe.cu's mx_spitch)
};

// One launch of k_moe_gemm. Gate/up (GU): w[0] gate, w[1] up, x[j] rows by token (perm[i] / K), the
// output h[i][R] (grouped row i; bf16, or f32 with h_f32 for an FP8 down projection to quantize);
// down: w[0], x[0] rows by grouped index, the output y[perm[i]][R] in f32 weighted by wts[perm[i]].
struct moe_gemm_args {
    moe_w w[2];
    const bf16 *x[2];         // [..][cols] bf16 B operands (x[1] == x[0] when gate and up share them)
    const float *sx[2];       // FP8: the B rows' scales (same index as x); NULL otherwise
    const bf16 *bias[2];      // [E·R] or NULL
    const int4 *tiles;        // [max_tiles] {expert, first grouped row, rows, 0}
    const int *n_tiles;       // tiles in use
    const int *perm;          // [n·K] grouped row → entry t·K + j
    const float *wts;         // [n·K] routing weights by entry
    void *out;
    int K, cols, R, act, h_f32;
    float alpha, limit;
};

__device__ __forceinline__ void moe_mma(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                        uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// A lane's 32 columns of one weight row, as loaded.
template <int F> struct moe_raw { uint4 v[4]; };                      // bf16: 64 bytes
template <> struct moe_raw<MOE_W_FP8> { uint4 v[2]; };                // e4m3: 32 bytes
template <> struct moe_raw<MOE_W_FP8_BLOCK> { uint4 v[2]; };
template <> struct moe_raw<MOE_W_MXFP4> { uint4 v; uint32_t s; };       // 16 bytes of codes, the scale·2^126 as bf16x2
template <> struct moe_raw<MOE_W_MXFP4_WIDE> { uint4 v; uint32_t s; };  // (the scale as bf16x2)

__device__ __forceinline__ uint4 moe_ld(const void *p) { return __ldg((const uint4 *)p); }

// MXFP4 on the device. A code (bits m, e0, e1, s: value ±{0, .5, 1, 1.5, 2, 3, 4, 6}) placed as a bf16's bits
// 6, 7, 8 and 15 is its value times 2^-126 exactly (e = e1e0 the exponent field, m the top mantissa bit; e = 0
// gives the subnormal 0.5·2^-126), so a word of 8 codes widens with shifts and masks instead of a table. At
// upload (cuda_mxfp4_upload) each 32-bit word of 8 codes (code i in bits [4i, 4i + 4)) is stored in the bit
// order moe_e2m1x8 reads: bf16 pairs 0-2 (codes 0-5) are the word rotated left by 0, 3 and 6 under one mask,
// pair 3 (codes 6, 7) three pieces of the remaining 8 bits. Then one bf16 multiply a pair by 2^(s-1) =
// 2^(s-127)·2^126 gives code·2^(s-127), exactly; for e8m0 scales above 128, whose 2^(s-1) bf16 cannot hold
// (MOE_W_MXFP4_WIDE), a multiply by 2^126 comes first. About 11 shift and logic instructions and 4 multiplies
// for 8 values, where a byte-permute table took 19 and 4 (bench/moe/RESULTS.md).
__device__ __host__ __forceinline__ uint32_t moe_rotl(uint32_t x, int r) { return r ? x << r | x >> (32 - r) : x; }
#define MOE_MX_MASK 0x81C081C0u  // bits 6, 7, 8, 15 of both halves
__device__ __forceinline__ uint4 moe_e2m1x8(uint32_t w) {  // the 8 codes of a stored word times 2^-126, 4 bf16 pairs
    const uint32_t o3 =
        (moe_rotl(w, 28) & 0x00C000C0u) | (moe_rotl(w, 27) & 0x01000100u) | (moe_rotl(w, 1) & 0x80008000u);
    return make_uint4(w & MOE_MX_MASK, moe_rotl(w, 3) & MOE_MX_MASK, moe_rotl(w, 6) & MOE_MX_MASK, o3);
}
// The stored word of 8 codes c (code i in bits [4i, 4i + 4)).
__device__ __host__ inline uint32_t moe_mx_rot_word(uint32_t c) {
    const int lo[4] = {6, 7, 8, 15}, rest[4] = {10, 11, 13, 14};  // a pair's low code's bits m, e0, e1, s
    uint32_t w = 0;
    for (int i = 0; i < 8; i++) {
        const int k = i / 2, hi = (i & 1) * 16;  // pair k; its high code: + 16
        for (int b = 0; b < 4; b++) {
            const int pos = k < 3 ? (lo[b] + hi - 3 * k + 32) % 32 : rest[b] + hi;
            w |= ((c >> (4 * i + b)) & 1u) << pos;
        }
    }
    return w;
}
// The scale byte s as the bf16 pair moe_mx_widen multiplies by: 2^(s-1) (s <= 128), WIDE 2^(s-127) (255: NaN).
template <bool WIDE> __device__ __forceinline__ uint32_t moe_mx_scale(uint32_t s) {
    const uint32_t b = !WIDE ? (s + 126) << 7 : s == 255 ? 0x7FC0u : s == 0 ? 0x0040u : s << 7;
    return b | b << 16;
}
// The 8 codes of a stored word times their block's scale (moe_mx_scale's pair), exactly, as 4 bf16 pairs.
template <bool WIDE> __device__ __forceinline__ uint4 moe_mx_widen(uint32_t w, uint32_t s) {
    const uint4 e = moe_e2m1x8(w);
    const uint32_t in[4] = {e.x, e.y, e.z, e.w};
    uint32_t o[4];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        __nv_bfloat162 y = *(const __nv_bfloat162 *)&in[i];
        if constexpr (WIDE) y = __hmul2(y, __floats2bfloat162_rn(0x1p126f, 0x1p126f));
        y = __hmul2(y, *(const __nv_bfloat162 *)&s);
        o[i] = *(const uint32_t *)&y;
    }
    return make_uint4(o[0], o[1], o[2], o[3]);
}

template <int F>
__device__ __forceinline__ moe_raw<F> moe_load(const moe_w &w, int64_t row, int k0, bool ok) {
    moe_raw<F> r;
    if constexpr (F == MOE_W_BF16) {
#pragma unroll
        for (int i = 0; i < 4; i++)
            r.v[i] = ok ? moe_ld(w.q + row * w.pitch + (size_t)(k0 + 8 * i) * 2) : make_uint4(0, 0, 0, 0);
    } else if constexpr (F == MOE_W_MXFP4 || F == MOE_W_MXFP4_WIDE) {
        r.v = ok ? moe_ld(w.q + row * w.pitch + k0 / 2) : make_uint4(0, 0, 0, 0);
        r.s = moe_mx_scale<F == MOE_W_MXFP4_WIDE>(ok ? ((const uint8_t *)w.s)[row * w.spitch + k0 / 32] : 127);
    } else {
#pragma unroll
        for (int i = 0; i < 2; i++) r.v[i] = ok ? moe_ld(w.q + row * w.pitch + k0 + 16 * i) : make_uint4(0, 0, 0, 0);
    }
    return r;
}

// Two e4m3 codes (low byte first) as a bf16 pair, exactly.
__device__ __forceinline__ uint32_t moe_e4m3x2(uint32_t two) {
    const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)two, __NV_E4M3);
    const float2 f = __half22float2(*(const __half2 *)&h);
    const __nv_bfloat162 b = __floats2bfloat162_rn(f.x, f.y);
    return *(const uint32_t *)&b;
}

// Columns [8v, 8v + 8) of the lane's 32 as bf16.
template <int F>
__device__ __forceinline__ uint4 moe_sub(const moe_raw<F> &r, int v) {
    if constexpr (F == MOE_W_BF16) {
        return r.v[v];
    } else if constexpr (F == MOE_W_MXFP4 || F == MOE_W_MXFP4_WIDE) {
        return moe_mx_widen<F == MOE_W_MXFP4_WIDE>(v == 0 ? r.v.x : v == 1 ? r.v.y : v == 2 ? r.v.z : r.v.w, r.s);
    } else {
        const uint4 q = r.v[v >> 1];
        const uint32_t lo = (v & 1) ? q.z : q.x, hi = (v & 1) ? q.w : q.y;
        return make_uint4(moe_e4m3x2(lo & 0xFFFF), moe_e4m3x2(lo >> 16), moe_e4m3x2(hi & 0xFFFF), moe_e4m3x2(hi >> 16));
    }
}

// One e2m1 code (bit 3 the sign) as bf16 bits, and a code byte (element 2i in the low nibble) as a bf16 pair:
// the definition moe_mx_widen is checked against (dev/cuda/moe_bench.cu).
__device__ __forceinline__ uint32_t moe_e2m1_bf16(uint32_t c) {
    const uint32_t e = (c >> 1) & 3, m = c & 1;
    const uint32_t mag = e ? ((126 + e) << 7) | (m << 6) : m ? 0x3F00u : 0u;  // {0, .5, 1, 1.5, 2, 3, 4, 6}
    return mag | ((c & 8) ? 0x8000u : 0u);
}
__device__ __forceinline__ uint32_t moe_e2m1_pair(uint32_t byte) {
    return moe_e2m1_bf16(byte & 15) | moe_e2m1_bf16(byte >> 4) << 16;
}

__device__ __forceinline__ float moe_bias(const bf16 *b, int64_t i) { return b ? __bfloat162float(b[i]) : 0.0f; }

// gpt-oss's clamped SwiGLU and SiLU, as cpu_moe.c.
__device__ __forceinline__ float moe_act(float g, float u, int act, float alpha, float limit) {
    if (act == MOE_ACT_SWIGLU_CLAMP) {
        g = g > limit ? limit : g;
        u = u > limit ? limit : u < -limit ? -limit : u;
        return g / (1.0f + expf(-alpha * g)) * (u + 1.0f);
    }
    return g / (1.0f + expf(-g)) * u;
}

// 16-row M tiles a warp of k_moe_gemm takes (MT): 2 for the bf16 down projection of tiles of 64 tokens, so
// each x fragment a lane loads feeds twice the MMAs (prefill is bound by those loads); 1 otherwise (decode:
// more CTAs; gate/up and the packed formats: their registers would spill). Which rows a warp takes does not
// change any sum or its order.
__host__ __device__ constexpr int moe_mt(int f, int nb, bool gu) { return nb >= 8 && !gu && f == MOE_W_BF16 ? 2 : 1; }

// grid (ceil(R / (16·MT)), max_tiles), MOE_WARPS warps (see the header comment).
template <int F, int NB, bool GU>
__global__ void __launch_bounds__(MOE_WARPS * 32) k_moe_gemm(const __grid_constant__ moe_gemm_args a) {
    constexpr int NW = GU ? 2 : 1, MT = moe_mt(F, NB, GU);
    constexpr bool BLOCK = F == MOE_W_FP8_BLOCK, FP8 = F == MOE_W_FP8 || F == MOE_W_FP8_BLOCK;
    __shared__ float red[MOE_WARPS][NW * NB * 4][32];
    if ((int)blockIdx.y >= *a.n_tiles) return;  // (the whole CTA)
    const int4 tl = a.tiles[blockIdx.y];
    const int e = tl.x, start = tl.y, cnt = tl.z;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
    const int r0 = blockIdx.x * 16 * MT, R = a.R, cols = a.cols;
    int64_t rowA[MT];
    bool okA[MT], okB[MT];
#pragma unroll
    for (int m = 0; m < MT; m++) {
        rowA[m] = (int64_t)e * R + r0 + 16 * m + g;  // (row B: + 8)
        okA[m] = r0 + 16 * m + g < R;
        okB[m] = r0 + 16 * m + g + 8 < R;
    }
    int xr[NB];
    bool xok[NB];
#pragma unroll
    for (int nb = 0; nb < NB; nb++) {
        const int col = nb * 8 + g;
        xok[nb] = col < cnt;
        xr[nb] = xok[nb] ? (GU ? a.perm[start + col] / a.K : start + col) : 0;
    }
    const bool same_x = a.x[1] == a.x[0];
    float acc[NW][MT][NB][4];
#pragma unroll
    for (int w = 0; w < NW; w++)
#pragma unroll
        for (int m = 0; m < MT; m++)
#pragma unroll
            for (int nb = 0; nb < NB; nb++)
#pragma unroll
                for (int i = 0; i < 4; i++) acc[w][m][nb][i] = 0.0f;
    const int nch = (cols + MOE_CHUNK - 1) / MOE_CHUNK;
    // the lane's weight runs of chunk cc (zeros past the columns); with PF the next chunk's are requested
    // before this chunk's MMAs and widening (few tokens, packed weights: the registers are free; bf16 runs
    // are four times the bytes already, and doubling them would cost CTAs an SM)
    constexpr bool PF = NB <= 2 && F != MOE_W_BF16;
    auto load = [&](int cc, moe_raw<F>(&xa)[NW][MT], moe_raw<F>(&xb)[NW][MT]) {
        const int kk = cc * MOE_CHUNK + t4 * 32;
#pragma unroll
        for (int w = 0; w < NW; w++)
#pragma unroll
            for (int m = 0; m < MT; m++) {
                xa[w][m] = moe_load<F>(a.w[w], rowA[m], kk, kk < cols && okA[m]);
                xb[w][m] = moe_load<F>(a.w[w], rowA[m] + 8, kk, kk < cols && okB[m]);
            }
    };
    moe_raw<F> ra[NW][MT], rb[NW][MT];
    if constexpr (PF) load(warp, ra, rb);
    for (int c = warp; c < nch; c += MOE_WARPS) {
        const int k0 = c * MOE_CHUNK + t4 * 32;
        const bool kin = k0 < cols;  // (cols % 32 == 0: a lane's run is whole or absent)
        moe_raw<F> pa[NW][MT], pb[NW][MT];
        if constexpr (PF) load(c + MOE_WARPS, pa, pb);
        else load(c, ra, rb);
        float d[NW][MT][NB][4];
#pragma unroll
        for (int w = 0; w < NW; w++)
#pragma unroll
            for (int m = 0; m < MT; m++)
#pragma unroll
                for (int nb = 0; nb < NB; nb++)
#pragma unroll
                    for (int i = 0; i < 4; i++) d[w][m][nb][i] = BLOCK ? 0.0f : acc[w][m][nb][i];
#pragma unroll
        for (int v = 0; v < 4; v++) {
            uint4 xv[NW][NB];
#pragma unroll
            for (int nb = 0; nb < NB; nb++) {
                const size_t off = (size_t)xr[nb] * cols + k0 + 8 * v;
                const bool in = kin && xok[nb];
                xv[0][nb] = in ? moe_ld(a.x[0] + off) : make_uint4(0, 0, 0, 0);
                if constexpr (GU)
                    xv[NW - 1][nb] = same_x ? xv[0][nb] : in ? moe_ld(a.x[1] + off) : make_uint4(0, 0, 0, 0);
            }
#pragma unroll
            for (int w = 0; w < NW; w++)
#pragma unroll
                for (int m = 0; m < MT; m++) {
                    const uint4 wa = moe_sub<F>(ra[w][m], v), wb = moe_sub<F>(rb[w][m], v);
#pragma unroll
                    for (int nb = 0; nb < NB; nb++) {
                        moe_mma(d[w][m][nb], wa.x, wb.x, wa.y, wb.y, xv[w][nb].x, xv[w][nb].y);
                        moe_mma(d[w][m][nb], wa.z, wb.z, wa.w, wb.w, xv[w][nb].z, xv[w][nb].w);
                    }
                }
        }
#pragma unroll
        for (int w = 0; w < NW; w++)
#pragma unroll
            for (int m = 0; m < MT; m++) {
                float sc = 1.0f;
                if constexpr (BLOCK)
                    sc = okA[m] ? __ldg((const float *)a.w[w].s + (rowA[m] / 128) * a.w[w].kbp + c) : 0.0f;
#pragma unroll
                for (int nb = 0; nb < NB; nb++)
#pragma unroll
                    for (int i = 0; i < 4; i++)
                        acc[w][m][nb][i] = BLOCK ? fmaf(d[w][m][nb][i], sc, acc[w][m][nb][i]) : d[w][m][nb][i];
            }
        if constexpr (PF)
#pragma unroll
            for (int w = 0; w < NW; w++)
#pragma unroll
                for (int m = 0; m < MT; m++) ra[w][m] = pa[w][m], rb[w][m] = pb[w][m];
    }
    // per M tile: the warps' sums in warp order; element i of a lane: weight row g (+8 for i >= 2), token
    // 2·t4 + (i & 1)
#pragma unroll
    for (int m = 0; m < MT; m++) {
        if (m) __syncthreads();  // (the tile before is read)
#pragma unroll
        for (int w = 0; w < NW; w++)
#pragma unroll
            for (int nb = 0; nb < NB; nb++)
#pragma unroll
                for (int i = 0; i < 4; i++) red[warp][(w * NB + nb) * 4 + i][lane] = acc[w][m][nb][i];
        __syncthreads();
        for (int nb = warp; nb < NB; nb += MOE_WARPS) {
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int row = r0 + 16 * m + g + (i >> 1) * 8, col = nb * 8 + 2 * t4 + (i & 1);
                if (row >= R || col >= cnt) continue;
                const int gi = start + col, entry = a.perm[gi];
                const int xrow = GU ? entry / a.K : gi;
                const int64_t grow = (int64_t)e * R + row;
                float y[NW];
#pragma unroll
                for (int w = 0; w < NW; w++) {
                    const int j = (w * NB + nb) * 4 + i;
                    float s = ((red[0][j][lane] + red[1][j][lane]) + red[2][j][lane]) + red[3][j][lane];
                    if constexpr (BLOCK) s *= a.sx[w][xrow];
                    else if constexpr (FP8) s *= a.sx[w][xrow] * __ldg((const float *)a.w[w].s + grow);
                    y[w] = s;
                }
                if constexpr (GU) {
                    const float h = moe_act(y[0] + moe_bias(a.bias[0], grow), y[NW - 1] + moe_bias(a.bias[1], grow),
                                            a.act, a.alpha, a.limit);
                    if (a.h_f32) ((float *)a.out)[(size_t)gi * R + row] = h;
                    else ((bf16 *)a.out)[(size_t)gi * R + row] = __float2bfloat16_rn(h);
                } else {
                    ((float *)a.out)[(size_t)entry * R + row] = a.wts[entry] * (y[0] + moe_bias(a.bias[0], grow));
                }
            }
        }
    }
}

// Token t's routing by one warp: logits (+ the router bias), softmax in f64 as the CPU, the K largest (ties:
// the lower index), their weights (renormalised with norm) into ids / wts, and each pick added to counts
// (global or shared). l: E floats of the warp's; taken: ceil(E / 32) words of the warp's.
__device__ __forceinline__ void moe_route_token(int t, int *ids, float *wts, int *counts, const float *logits,
                                                const bf16 *rbias, int E, int K, int norm, float *l,
                                                unsigned *taken) {
    const int lane = threadIdx.x & 31;
    float mx = -INFINITY;
    for (int e = lane; e < E; e += 32) {
        l[e] = logits[(size_t)t * E + e] + moe_bias(rbias, e);
        mx = fmaxf(mx, l[e]);
    }
    for (int e = lane; e < (E + 31) / 32; e += 32) taken[e] = 0;
    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, o));
    double sum = 0;
    for (int e = lane; e < E; e += 32) sum += exp((double)l[e] - mx);
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffff, sum, o);
    __syncwarp();
    double picked = 0;
    for (int j = 0; j < K; j++) {
        int best = -1;
        float bv = 0;
        for (int e = lane; e < E; e += 32)
            if (!(taken[e >> 5] >> (e & 31) & 1) && (best < 0 || l[e] > bv)) best = e, bv = l[e];
        for (int o = 16; o > 0; o >>= 1) {
            const int ob = __shfl_xor_sync(0xffffffff, best, o);
            const float ov = __shfl_xor_sync(0xffffffff, bv, o);
            if (ob >= 0 && (best < 0 || ov > bv || (ov == bv && ob < best))) best = ob, bv = ov;
        }
        const float w = (float)(exp((double)bv - mx) / sum);
        picked += w;
        if (lane == 0) {
            ids[(size_t)t * K + j] = best;
            wts[(size_t)t * K + j] = w;
            taken[best >> 5] |= 1u << (best & 31);
            atomicAdd(&counts[best], 1);
        }
        __syncwarp();
    }
    if (norm && lane == 0)  // (the weights this thread wrote above)
        for (int j = 0; j < K; j++) wts[(size_t)t * K + j] = (float)(wts[(size_t)t * K + j] / picked);
}

// Routing, one warp a token (4 a CTA); counts must be zero before (k_moe_scan zeroes them after reading).
__global__ void __launch_bounds__(128) k_moe_route(int *ids, float *wts, int *counts, const float *logits,
                                                   const bf16 *rbias, int n, int E, int K, int norm) {
    __shared__ float sl[4][MOE_MAX_EXPERTS];
    __shared__ unsigned taken[4][MOE_MAX_EXPERTS / 32];
    const int warp = threadIdx.x >> 5, t = blockIdx.x * 4 + warp;
    if (t < n) moe_route_token(t, ids, wts, counts, logits, rbias, E, K, norm, sl[warp], taken[warp]);
}

// Inside one CTA of MOE_MAX_EXPERTS threads, c the count of expert threadIdx.x (0 past E): each expert's
// grouped offset (returned), its tiles of up to bn rows into tiles, and how many there are into n_tiles.
__device__ __forceinline__ int moe_scan_block(int4 *tiles, int *n_tiles, int c, int bn, int *s_rows, int *s_tiles) {
    const int e = threadIdx.x, nt = (c + bn - 1) / bn;
    s_rows[e] = c;
    s_tiles[e] = nt;
    __syncthreads();
    for (int o = 1; o < MOE_MAX_EXPERTS; o <<= 1) {  // inclusive scans
        const int a = e >= o ? s_rows[e - o] : 0, b = e >= o ? s_tiles[e - o] : 0;
        __syncthreads();
        s_rows[e] += a;
        s_tiles[e] += b;
        __syncthreads();
    }
    const int off = s_rows[e] - c, t0 = s_tiles[e] - nt;
    for (int j = 0; j < nt; j++) tiles[t0 + j] = make_int4(e, off + j * bn, min(bn, c - j * bn), 0);
    if (e == MOE_MAX_EXPERTS - 1) *n_tiles = s_tiles[e];
    return off;
}

// One CTA of MOE_MAX_EXPERTS threads: the offsets (cursor, where k_moe_place starts each expert) and tiles
// from the counts, which are zeroed for the next call.
__global__ void __launch_bounds__(MOE_MAX_EXPERTS) k_moe_scan(int4 *tiles, int *n_tiles, int *cursor, int *counts,
                                                              int E, int bn) {
    __shared__ int s_rows[MOE_MAX_EXPERTS], s_tiles[MOE_MAX_EXPERTS];
    const int e = threadIdx.x, c = e < E ? counts[e] : 0;
    const int off = moe_scan_block(tiles, n_tiles, c, bn, s_rows, s_tiles);
    if (e < E) {
        cursor[e] = off;
        counts[e] = 0;
    }
}

// Small steps (n <= MOE_SMALL_N tokens, E <= MOE_SMALL_E): routing, the scan and the placement in one CTA of
// MOE_MAX_EXPERTS threads (its 32 warps route the tokens in turn), so a decode step spends one launch on them.
#define MOE_SMALL_N 64
#define MOE_SMALL_E 256
__global__ void __launch_bounds__(MOE_MAX_EXPERTS) k_moe_route_small(int *ids, float *wts, int4 *tiles, int *n_tiles,
                                                                     int *perm, const float *logits,
                                                                     const bf16 *rbias, int n, int E, int K, int norm,
                                                                     int bn) {
    __shared__ float sl[32][MOE_SMALL_E];
    __shared__ unsigned taken[32][MOE_SMALL_E / 32];
    __shared__ int s_rows[MOE_MAX_EXPERTS], s_tiles[MOE_MAX_EXPERTS], s_count[MOE_SMALL_E];
    const int warp = threadIdx.x >> 5;
    if (threadIdx.x < MOE_SMALL_E) s_count[threadIdx.x] = 0;
    __syncthreads();
    for (int t = warp; t < n; t += 32)
        moe_route_token(t, ids, wts, s_count, logits, rbias, E, K, norm, sl[warp], taken[warp]);
    __syncthreads();
    const int e = threadIdx.x, c = e < E ? s_count[e] : 0;
    const int off = moe_scan_block(tiles, n_tiles, c, bn, s_rows, s_tiles);
    __syncthreads();  // (every count read before it becomes a cursor)
    if (e < E) s_count[e] = off;
    __syncthreads();
    for (int i = threadIdx.x; i < n * K; i += blockDim.x) perm[atomicAdd(&s_count[ids[i]], 1)] = i;
}

// Each (token, slot) entry into its expert's group (the order inside a group does not matter: every row's
// results are its own).
__global__ void k_moe_place(int *perm, int *cursor, const int *ids, int nk) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < nk) perm[atomicAdd(&cursor[ids[i]], 1)] = i;
}

__device__ __forceinline__ float moe_f(float v) { return v; }
__device__ __forceinline__ float moe_f(bf16 v) { return __bfloat162float(v); }

// FP8 activations: row r of x (bf16 or f32) → the fp8 values of x / s (exact in bf16) and s, as
// cpu_fp8w.c's fp8w_quant_row. One CTA of 256 threads a row.
template <typename T>
__global__ void __launch_bounds__(256) k_moe_xq(bf16 *xq, float *sx, const T *x, int cols, fp8w_act fa) {
    __shared__ float red[8];
    const T *xr = x + (size_t)blockIdx.x * cols;
    float m = 0;
    if (fa.fixed <= 0) {
        for (int i = threadIdx.x; i < cols; i += blockDim.x) m = fmaxf(m, fabsf(moe_f(xr[i])));
        for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, o));
        if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = m;
        __syncthreads();
        m = 0;
        for (int w = 0; w < 8; w++) m = fmaxf(m, red[w]);
    }
    const float s = fp8w_row_scale(m, fa), inv = 1.0f / s;
    bf16 *q = xq + (size_t)blockIdx.x * cols;
    const __nv_fp8_interpretation_t kind = fa.e5m2 ? __NV_E5M2 : __NV_E4M3;
    for (int i = threadIdx.x; i < cols; i += blockDim.x) {
        const __nv_fp8_storage_t code = (__nv_fp8_storage_t)fp8w_encode(moe_f(xr[i]) * inv, fa.e5m2);
        const __half_raw h = __nv_cvt_fp8_to_halfraw(code, kind);
        q[i] = __float2bfloat16_rn(__half2float(*(const __half *)&h));
    }
    if (threadIdx.x == 0) sx[blockIdx.x] = s;
}

// out[t] = Σ_j y[t·K + j] in slot order (f32), rounded to bf16.
__global__ void k_moe_combine(bf16 *out, const float *y, int K, int dim) {
    const int t = blockIdx.x;
    for (int d = threadIdx.x; d < dim; d += blockDim.x) {
        float s = 0;
        for (int j = 0; j < K; j++) s += y[((size_t)t * K + j) * dim + d];
        out[(size_t)t * dim + d] = __float2bfloat16_rn(s);
    }
}
