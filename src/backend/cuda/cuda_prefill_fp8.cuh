// cuda_prefill_fp8.cuh — paged causal prefill attention on Hopper's FP8 tensor cores
// (wgmma e4m3, QGMMA in SASS), included by cuda_prefill_fp8.cu. Owns: the kernel for the shapes the
// TMA kernel does not take (head_dim 256, cache blocks it cannot box), its shared-memory layouts,
// the P·V accumulation modes (--fp8-attention-accumulation) and the device helpers the TMA kernel
// shares (fp8pf::).
//
// One CTA = two warpgroups (256 threads) = (sequence, tile of 64 query rows per warpgroup, KV
// head); a query row is one (token, query head) pair of the KV head's group, so GQA heads share
// every K/V load (as in cuda_prefill_mma.cuh). Per KV tile of BN keys:
//   S = Q·Kᵀ    wgmma m64nBNk32, A = Q (e4m3; registers at HD 64, shared memory otherwise),
//               B = K (the e4m3 cache bytes, copied to shared memory)
//   P = 2^(S·scale·log2e − m + 8) (= P·256) → e4m3 in registers (online softmax, FP32 row max
//               and sum)
//   T = P·V     wgmma m64nHDk32, A = P (registers), B = Vᵀ (shared, transposed in-kernel)
// Q is quantized here with a per-(token, head) scale amax/448, as the CPU emulation
// (cpu_attention.c, ATTN_FP8_EMULATE) does; K/V descales, the Q scale and the softmax scale
// are folded into one factor on S, and v_scale / l into the final normalisation. Attention sinks
// (attn_args.sinks) start each row's max and sum (rows2::sink_init).
//
// Accumulation (wgmma keeps only part of FP32's mantissa when it adds into D; dev/cuda/wgmma_probe.cu),
// enum fp8_accum_mode from attn_params.fp8_accum (0 or 1, N > 1, < 0):
//   FP8_TWO_LEVEL  each tile's P·V starts from zero in the MMA accumulator and is added into a
//                  separate FP32 register accumulator O;
//   FP8_EVERY_N    T carries across N tiles, promoted into O after absolute tiles N−1, 2N−1, …
//                  (and the last);
//   FP8_SINGLE     T carries over the whole context (fastest, least accurate).
// Tiles sit at absolute key positions (tile t = keys [t·BN, (t+1)·BN)), so where a promotion
// happens does not depend on how a prefill was chunked.
//
// Shared-memory operands use wgmma's no-swizzle layout: 8-row × 16-byte core matrices of
// 128 contiguous bytes; element (row r, byte b) of an R × KB operand lives at
// (r/8)·KB·8 + (b/16)·128 + (r%8)·16 + b%16 (LBO = 128 along K, SBO = KB·8 along rows).
// Vᵀ's key order is permuted inside each 32-key group so that a thread's S accumulators
// become its P operand registers without shuffles: operand position p = 16h + 4c + i holds
// key 16h + 2c + (i&1) + 8(i>>1).
#pragma once

#include "cuda_wgmma_ops.cuh"

// The P·V accumulation mode (above), the FP8 kernels' policy parameter.
enum fp8_accum_mode { FP8_TWO_LEVEL = 0, FP8_EVERY_N = 1, FP8_SINGLE = 2 };

// The kernels' accumulation mode from the layer's parameters (fp8_accum: 0 or 1 two-level, N > 1
// every:N, < 0 single), and every:N's N (1 in the other modes).
static inline fp8_accum_mode fp8_mode(const struct attn_params *p) {
    return p->fp8_accum < 0 ? FP8_SINGLE : p->fp8_accum > 1 ? FP8_EVERY_N : FP8_TWO_LEVEL;
}
static inline int fp8_every(const struct attn_params *p) { return fp8_mode(p) == FP8_EVERY_N ? p->fp8_accum : 1; }

namespace fp8pf {

// The kernel's shared memory: the Q of its two warpgroups (64 query rows each), K and raw V in two
// stages, one Vᵀ and the rows' Q scales.
template <int HD> struct cfg {
    static constexpr int BN = HD <= 128 ? 128 : 64;  // keys per tile
    static constexpr int NWG = 2;                    // consumer warpgroups a CTA, sharing every K/V tile
    static constexpr int VROW = HD + 16;             // padded row of the raw V stage
    static constexpr int Q_BYTES = 64 * HD;
    static constexpr int K_BYTES = BN * HD;
    static constexpr int VRAW_BYTES = BN * VROW;
    static constexpr int VT_BYTES = HD * BN;
    static constexpr int SMEM = NWG * Q_BYTES + 2 * K_BYTES + 2 * VRAW_BYTES + VT_BYTES + NWG * 64 * 4;
};

__device__ __forceinline__ uint32_t cm_off(int r, int b, int kb) {  // core-matrix layout offset
    return (uint32_t)((r >> 3) * kb * 8 + (b >> 4) * 128 + (r & 7) * 16 + (b & 15));
}

__device__ __forceinline__ void cp_async16_zfill(void *smem, const void *gmem, bool valid) {
    unsigned sa = (unsigned)__cvta_generic_to_shared(smem);
    int n = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(sa), "l"(gmem), "r"(n));
}

__device__ __forceinline__ uint32_t pack4_e4m3(float a, float b, float c, float d) {
    __nv_fp8x2_storage_t lo = __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3);
    __nv_fp8x2_storage_t hi = __nv_cvt_float2_to_fp8x2(make_float2(c, d), __NV_SATFINITE, __NV_E4M3);
    return (uint32_t)lo | ((uint32_t)hi << 16);
}

__device__ __forceinline__ float ex2(float x) {  // 2^x (MUFU.EX2; -inf -> 0)
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

template <int N> __device__ __forceinline__ void ss(float *d, uint64_t a, uint64_t b, int sd) {
    if constexpr (N == 64) wgmma_ss_n64(d, a, b, sd); else wgmma_ss_n128(d, a, b, sd);
}
template <int N> __device__ __forceinline__ void rs(float *d, const uint32_t *a, uint64_t b, int sd) {
    if constexpr (N == 64) wgmma_rs_n64(d, a, b, sd);
    else if constexpr (N == 128) wgmma_rs_n128(d, a, b, sd);
    else wgmma_rs_n256(d, a, b, sd);
}
template <int N> __device__ __forceinline__ void fence_acc(float *d) {
    if constexpr (N == 64) wgmma_fence_acc32(d);
    else if constexpr (N == 128) wgmma_fence_acc64(d);
    else wgmma_fence_acc128(d);
}

// T (+)= P·Vᵀ[cols c0 .. c0+N) over the tile's BN keys; sd0 = 0 starts T from zero.
template <int HD, int N>
__device__ __forceinline__ void pv(float *t, const uint32_t (*pa)[4], const uint8_t *vt, int c0, int sd0) {
    constexpr int BN = cfg<HD>::BN;
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BN / 32; kk++)
        rs<N>(t, pa[kk], wgmma_desc(vt + (c0 / 8) * BN * 8 + kk * 256, 128, BN * 8), kk > 0 ? 1 : sd0);
    wgmma_commit();
    wgmma_wait<0>();
    fence_acc<N>(t);
}

// A thread's running state over the KV tiles: the FP32 accumulator o (two-level, every:N), the
// MMA accumulator tacc, and its two rows' softmax max m and sum l. Two-level's tacc spans 64
// output columns (P·V in column chunks) at HD 256.
template <int HD, fp8_accum_mode ACC> struct acc_state {
    static constexpr int NO = HD / 2;
    float o[ACC == FP8_SINGLE ? 1 : NO];
    float tacc[ACC == FP8_TWO_LEVEL ? (HD <= 128 ? NO : 32) : NO];
    float m[2], l[2];
    __device__ __forceinline__ void init() {
#pragma unroll
        for (int i = 0; i < (ACC == FP8_SINGLE ? 1 : NO); i++) o[i] = 0.0f;
#pragma unroll
        for (int i = 0; i < (int)(sizeof tacc / sizeof tacc[0]); i++) tacc[i] = 0.0f;
        m[0] = m[1] = -INFINITY;
        l[0] = l[1] = 0.0f;
    }
    __device__ __forceinline__ const float *result() const { return ACC == FP8_SINGLE ? tacc : o; }
};

// One KV tile t after S = Q·Kᵀ (sacc, BN/2 values of the thread's rows rr and rr + 8): online
// softmax (scaled in place into P), the running max m and sum l, and the factor alpha on the
// rows' earlier accumulators.
// The two rows run side by side, in one basic block (the masking is one branch for both): row by
// row, ptxas compiles two sequential halves, each a 17-deep max chain, two shuffles and then 32
// exponentials. Per row the values and the order of the sum are the same either way.
// LSUM = false leaves l to the caller (only m and alpha are updated): the three-consumer TMA loop
// takes each tile's sum from the tensor core instead, as Σ of the e4m3 P (cuda_prefill_fp8_tma.cuh).
// CAP: soft-capping (score_map) with cap2 = the cap in log2 units: each score becomes
// tanh(s·row_sc/cap2)·cap2 first, and the factor on the capped scores is 1.
// TS: per-token-head scales (fp8_per_token_head): the scores come in times their keys' K scales
// already (key_scales, before the cap and the max, as the CPU multiplies the score), and each P is
// multiplied by ws[key] after its exponential (its V scale over the CTA's reference,
// fp8tma::tok_store) — l sums the P before that factor, so the denominator stays Σ P; the sum runs
// as two chains a row (even and odd keys), half as long.
// LAZY (16-bit P only): a warp keeps its rows' running maxima until one of them would grow by more
// than LAZY_MAX; P then reaches 2^(8 + LAZY_MAX), which bf16 and f16 hold, and the tile's α is 1, so
// the caller skips the rescale of o. Returns whether the maxima moved (uniform over the warp).
constexpr float LAZY_MAX = 7.0f;
template <int BN, bool LSUM = true, bool CAP = false, bool TS = false, bool LAZY = false>
__device__ __forceinline__ bool softmax_s(float *sacc, int t, int c, const float (&row_sc)[2], const int (&row_lo)[2],
                                          const int (&row_pos)[2], float (&m)[2], float (&l)[2], float (&alpha)[2],
                                          float cap2 = 0.0f, const float *ws = nullptr /* [BN] */) {
    constexpr int NJ = BN / 8;
    float rsc[2] = {row_sc[0], row_sc[1]};  // the factor on sacc from here on
    if constexpr (CAP) {
        const float k[2] = {row_sc[0] / cap2, row_sc[1] / cap2};
#pragma unroll
        for (int j = 0; j < NJ; j++)
#pragma unroll
            for (int h = 0; h < 2; h++)
#pragma unroll
                for (int e = 0; e < 2; e++) sacc[4 * j + 2 * h + e] = tanhf(sacc[4 * j + 2 * h + e] * k[h]) * cap2;
        rsc[0] = rsc[1] = 1.0f;
    }
    // online softmax on rows rr (h = 0) and rr + 8 (h = 1), in the log2 domain scaled by
    // row_sc (> 0, so the raw scores' max is the scaled scores' max): one FFMA and one ex2 per
    // score, P·256 as 2^(s·sc − m + 8); l sums P·256. Only tiles that cross a row's window
    // start or its position are masked (with causal rows, the diagonal tiles).
    // The test is one warp vote, so the branch is uniform (a per-thread short-circuit test compiles
    // to divergent branches and their reconvergence on every tile); masking a row that needs none
    // changes nothing.
    const bool edge =
        (t * BN < row_lo[0]) | (t * BN + BN - 1 > row_pos[0]) | (t * BN < row_lo[1]) | (t * BN + BN - 1 > row_pos[1]);
    if (__any_sync(0xffffffffu, edge)) {
        const int k0 = t * BN + 2 * c;
#pragma unroll
        for (int j = 0; j < NJ; j++)
#pragma unroll
            for (int h = 0; h < 2; h++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const int kp = k0 + 8 * j + e;
                    if (kp < row_lo[h] || kp > row_pos[h]) sacc[4 * j + 2 * h + e] = -INFINITY;
                }
    }
    // row maxima as trees (depth log2(BN/4) + 1 instead of BN/4 + 1), both rows at once
    float mx[2][NJ];
#pragma unroll
    for (int j = 0; j < NJ; j++)
#pragma unroll
        for (int h = 0; h < 2; h++) mx[h][j] = fmaxf(sacc[4 * j + 2 * h], sacc[4 * j + 2 * h + 1]);
    static_assert(NJ == 16 || NJ == 8, "tiles of 64 or 128 keys");
    if constexpr (NJ == 16) {
#pragma unroll
        for (int j = 0; j < 8; j++)
#pragma unroll
            for (int h = 0; h < 2; h++) mx[h][j] = fmaxf(mx[h][j], mx[h][j + 8]);
    }
#pragma unroll
    for (int j = 0; j < 4; j++)
#pragma unroll
        for (int h = 0; h < 2; h++) mx[h][j] = fmaxf(mx[h][j], mx[h][j + 4]);
#pragma unroll
    for (int j = 0; j < 2; j++)
#pragma unroll
        for (int h = 0; h < 2; h++) mx[h][j] = fmaxf(mx[h][j], mx[h][j + 2]);
#pragma unroll
    for (int h = 0; h < 2; h++) mx[h][0] = fmaxf(mx[h][0], mx[h][1]);
#pragma unroll
    for (int h = 0; h < 2; h++) mx[h][0] = fmaxf(mx[h][0], __shfl_xor_sync(0xffffffff, mx[h][0], 1));
#pragma unroll
    for (int h = 0; h < 2; h++) mx[h][0] = fmaxf(mx[h][0], __shfl_xor_sync(0xffffffff, mx[h][0], 2));
    float off[2], sum[2] = {0.0f, 0.0f}, sum_odd[2] = {0.0f, 0.0f};
    bool moved = true;
    if constexpr (LAZY)  // (a row's m of −inf moves at its first finite score)
        moved = __any_sync(0xffffffffu, mx[0][0] * rsc[0] > m[0] + LAZY_MAX || mx[1][0] * rsc[1] > m[1] + LAZY_MAX);
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const float mn = moved ? fmaxf(m[h], mx[h][0] * rsc[h]) : m[h];
        alpha[h] = mn == -INFINITY ? 1.0f : ex2(m[h] - mn);
        off[h] = mn == -INFINITY ? 0.0f : 8.0f - mn;  // (all masked so far: every x is −inf → P = 0)
        m[h] = mn;
    }
#pragma unroll
    for (int j = 0; j < NJ; j++) {
        float2 w = make_float2(1.0f, 1.0f);
        if constexpr (TS) w = *(const float2 *)(ws + 8 * j + 2 * c);
#pragma unroll
        for (int h = 0; h < 2; h++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const float x = fmaf(sacc[4 * j + 2 * h + e], rsc[h], off[h]);
                const float p = ex2(x);
                if constexpr (LSUM) (TS && e ? sum_odd[h] : sum[h]) += p;
                sacc[4 * j + 2 * h + e] = TS ? p * (e ? w.y : w.x) : p;
            }
    }
    if constexpr (LSUM && TS) sum[0] += sum_odd[0], sum[1] += sum_odd[1];
    if constexpr (LSUM) {
#pragma unroll
        for (int h = 0; h < 2; h++) l[h] = l[h] * alpha[h] + sum[h];
    }
    return moved;
}
// Per-token-head scales: the thread's scores (S = Q·Kᵀ, before softmax_s) times their keys' K scales
// ks[key] (keys 8j + 2c, + 1: one 8-byte load a pair)
template <int BN> __device__ __forceinline__ void key_scales(float *sacc, const float *ks /* [BN] */, int c) {
#pragma unroll
    for (int j = 0; j < BN / 8; j++) {
        const float2 f = *(const float2 *)(ks + 8 * j + 2 * c);
#pragma unroll
        for (int h = 0; h < 2; h++) sacc[4 * j + 2 * h] *= f.x, sacc[4 * j + 2 * h + 1] *= f.y;
    }
}

// P (sacc after softmax_s) as e4m3 wgmma A fragments, in Vᵀ's key order
template <int BN> __device__ __forceinline__ void pack_p(const float *sacc, uint32_t (&pa)[BN / 32][4]) {
#pragma unroll
    for (int kk = 0; kk < BN / 32; kk++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const float *s0 = sacc + 4 * (4 * kk) + 2 * h;
            pa[kk][h] = pack4_e4m3(s0[0], s0[1], s0[4], s0[5]);           // keys 2c, 2c+1, 2c+8, 2c+9
            pa[kk][2 + h] = pack4_e4m3(s0[8], s0[9], s0[12], s0[13]);     // + 16
        }
}

// One KV tile t after S = Q·Kᵀ: softmax_s and pack_p, then P·V into the accumulators per accumulation mode
// ACC (o: FP32, tacc: the MMA's); vt is the tile's Vᵀ.
template <int HD, fp8_accum_mode ACC, bool CAP, int NO_O, int NO_T>
__device__ __forceinline__ void softmax_pv(float *sacc, int t, int t0, int t1, int n_every, int c,
                                           const float (&row_sc)[2], const int (&row_lo)[2], const int (&row_pos)[2],
                                           float (&m)[2], float (&l)[2], float (&o)[NO_O], float (&tacc)[NO_T],
                                           const uint8_t *vt, float cap2) {
    constexpr int NO = HD / 2, BN = cfg<HD>::BN;
    float alpha[2];
    uint32_t pa[BN / 32][4];
    softmax_s<BN, true, CAP>(sacc, t, c, row_sc, row_lo, row_pos, m, l, alpha, cap2);
    pack_p<BN>(sacc, pa);
    // rescale the running accumulators (fragment element i belongs to row rr + 8·((i>>1)&1))
    if constexpr (ACC == FP8_EVERY_N) {  // (two-level rescales o in the FFMA that adds the tile)
#pragma unroll
        for (int i = 0; i < NO; i++) o[i] *= alpha[(i >> 1) & 1];
    }
    if constexpr (ACC != FP8_TWO_LEVEL) {
#pragma unroll
        for (int i = 0; i < NO; i++) tacc[i] *= alpha[(i >> 1) & 1];
    }
    if constexpr (ACC == FP8_TWO_LEVEL) {
        if constexpr (NO_T == NO) {
            pv<HD, HD>(tacc, pa, vt, 0, 0);
#pragma unroll
            for (int i = 0; i < NO; i++) o[i] = fmaf(o[i], alpha[(i >> 1) & 1], tacc[i]);
        } else {
#pragma unroll
            for (int c0 = 0; c0 < HD; c0 += 64) {
                pv<HD, 64>(tacc, pa, vt, c0, 0);
#pragma unroll
                for (int i = 0; i < 32; i++) o[c0 / 2 + i] = fmaf(o[c0 / 2 + i], alpha[(i >> 1) & 1], tacc[i]);
            }
        }
    } else if constexpr (ACC == FP8_EVERY_N) {
        bool fresh = t == t0 || t % n_every == 0;
        pv<HD, HD>(tacc, pa, vt, 0, fresh ? 0 : 1);
        if ((t + 1) % n_every == 0 || t == t1) {
#pragma unroll
            for (int i = 0; i < NO; i++) o[i] += tacc[i];
        }
    } else {
        pv<HD, HD>(tacc, pa, vt, 0, t == t0 ? 0 : 1);
    }
}
// x / s, rounded as the division rounds it, from one reciprocal of s: the division's own fast path
// (y = x·r, then y + (x − y·s)·r by FMA), with r = 1/s once a row instead of a reciprocal, its
// refinement and a range check for each of a row's 64 or 128 elements (the SASS of x / s: ≈ 10
// instructions and a branch an element, ≈ 1,000 a thread in a CTA's set-up beside ≈ 400 a KV tile).
// Checked against x / s on the CPU over a million (bf16 x, bf16 amax) pairs: equal
// but for x below ≈ 1e-37, whose residual underflows (a last-bit difference, far below e4m3's
// rounding). A scale so small that 1/s overflows (amax below ≈ 5e-36) takes the division.
struct q_div {
    float s, r;
    bool fast;
    __device__ __forceinline__ explicit q_div(float s_) : s(s_), r(1.0f / s_), fast(r <= 3.0e38f) {}
    __device__ __forceinline__ float operator()(float x) const {
        if (!fast) return x / s;
        const float y = x * r;
        return fmaf(fmaf(-y, s, x), r, y);
    }
};

// Q of a CTA's query rows (row = (token, head of the KV head's group)): per-row scale amax/448,
// e4m3 in the core-matrix layout; 2 threads a row (tid < 2·rows), the scales into qscale.
// A row half (HD bytes from a multiple of HD bytes) is read as HD/16 16-byte loads into registers
// when q is 16-byte aligned (always, from the engine's buffers): 2-byte loads, each value read
// twice, stall the whole CTA's set-up on the load pipe. The 2-byte form stays for an unaligned q
// (test_cuda_ops runs one); both give the same values.
template <int HD>
__device__ __forceinline__ void load_q(uint8_t *Qs, float *qscale, const bf16 *q, int tid, int q0, int n_q,
                                       int tok_per_cta, int t_begin, int n_heads, int g, int G) {
    int row = tid >> 1, half = tid & 1, qi = q0 + row / G;
    bool on = row < tok_per_cta * G && qi < n_q;
    const bf16 *src = q + ((size_t)(t_begin + (on ? qi : q0)) * n_heads + g * G + row % G) * HD + half * (HD / 2);
    if (((uintptr_t)q & 15) == 0) {  // (uniform)
        uint32_t w[HD / 4];  // the half's HD/2 bf16, two a word (element 2k in the low 16 bits)
#pragma unroll
        for (int k = 0; k < HD / 16; k++) {
            const uint4 u = on ? __ldg(reinterpret_cast<const uint4 *>(src) + k) : make_uint4(0u, 0u, 0u, 0u);
            w[4 * k] = u.x, w[4 * k + 1] = u.y, w[4 * k + 2] = u.z, w[4 * k + 3] = u.w;
        }
        float va = 0.0f;
#pragma unroll
        for (int k = 0; k < HD / 4; k++)
            va = fmaxf(fmaxf(va, fabsf(__uint_as_float(w[k] << 16))), fabsf(__uint_as_float(w[k] & 0xffff0000u)));
        va = fmaxf(va, __shfl_xor_sync(0xffffffff, va, 1));
        const float vs = va > 0.0f ? va / 448.0f : 1.0f;
        const q_div qd(vs);
#pragma unroll
        for (int i = 0; i < HD / 2; i += 4) {
            const uint32_t a = w[i / 2], b = w[i / 2 + 1];
            *(uint32_t *)(Qs + cm_off(row, half * (HD / 2) + i, HD)) =
                pack4_e4m3(qd(__uint_as_float(a << 16)), qd(__uint_as_float(a & 0xffff0000u)),
                           qd(__uint_as_float(b << 16)), qd(__uint_as_float(b & 0xffff0000u)));
        }
        if (!half) qscale[row] = vs;
        return;
    }
    float amax = 0.0f;
    if (on)
        for (int i = 0; i < HD / 2; i++) amax = fmaxf(amax, fabsf(__bfloat162float(src[i])));
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffff, amax, 1));
    float qs = amax > 0.0f ? amax / 448.0f : 1.0f;
    const q_div qd(qs);
    for (int i = 0; i < HD / 2; i += 4) {
        float x[4];
        for (int e = 0; e < 4; e++) x[e] = on ? qd(__bfloat162float(src[i + e])) : 0.0f;
        *(uint32_t *)(Qs + cm_off(row, half * (HD / 2) + i, HD)) = pack4_e4m3(x[0], x[1], x[2], x[3]);
    }
    if (!half) qscale[row] = qs;
}

// The thread's two query rows (warp·16 + rr and + 8): on, token, head, position, window start,
// and (set once the Q scales are written) the factor on S.
struct rows2 {
    bool on[2];
    int tok[2], head[2], pos[2], lo[2];
    float sc[2];
    __device__ __forceinline__ void setup(int warp, int rr, int q0, int n_q, int tok_per_cta, int G, int t_begin,
                                          const int32_t *pos_arr, int window) {
#pragma unroll
        for (int h = 0; h < 2; h++) {
            int row = warp * 16 + rr + 8 * h, qi = q0 + row / G;
            on[h] = row < tok_per_cta * G && qi < n_q;
            tok[h] = t_begin + (on[h] ? qi : q0);
            head[h] = row % G;
            pos[h] = on[h] ? pos_arr[tok[h]] : -1;
            lo[h] = window > 0 && pos[h] - window + 1 > 0 ? pos[h] - window + 1 : 0;
        }
    }
    // S's factor: the rows' Q scales, the K descale, the softmax scale and log2(e)
    __device__ __forceinline__ void scales(const float *qscale, int warp, int rr, float kscale, float scale) {
#pragma unroll
        for (int h = 0; h < 2; h++) sc[h] = qscale[warp * 16 + rr + 8 * h] * kscale * scale * 1.4426950408889634f;
    }
    // Attention sinks (attn_args.sinks, not null): the rows' running max starts at their query head's
    // sink logit in log2 units and their sum at 256 (2^(sink − m + 8) with m = sink, P's scale), so the
    // sink joins the max and the denominator as one more score with no value — and P is quantised to
    // e4m3 relative to the same maximum as the CPU's emulation (cpu_attention.c) takes. whole: each
    // lane holds its rows' whole sum (the tensor core's row sums); else the sums are the four lanes'
    // (store_rows adds them), and the 256 goes into one of them.
    __device__ __forceinline__ void sink_init(float (&m)[2], float (&l)[2], const float *sinks, int g, int G, int c,
                                              bool whole) const {
#pragma unroll
        for (int h = 0; h < 2; h++)
            if (on[h]) {
                m[h] = sinks[g * G + head[h]] * 1.4426950408889634f;
                l[h] = whole || c == 0 ? 256.0f : 0.0f;
            }
    }
};

// cp.async of tile t's K (core-matrix layout) and raw V rows into one stage (kd, vd) by nthr
// threads from tid; keys past p_last are zero-filled (their blocks may not exist), so
// 0·garbage never makes a NaN.
template <int HD>
__device__ __forceinline__ void load_tile(uint8_t *kd, uint8_t *vd, const uint8_t *kc, const uint8_t *vc,
                                          const int32_t *bt, int t, int p_last, int n_kv, int g, int bs, int tid,
                                          int nthr) {
    constexpr int BN = cfg<HD>::BN;
    for (int i = tid; i < BN * (HD / 16); i += nthr) {
        int r = i / (HD / 16), ch = i % (HD / 16), kp = t * BN + r;
        bool valid = kp <= p_last;
        size_t off = valid ? (((size_t)bt[kp / bs] * n_kv + g) * bs + kp % bs) * HD + ch * 16 : 0;
        cp_async16_zfill(kd + cm_off(r, ch * 16, HD), kc + off, valid);
        cp_async16_zfill(vd + r * cfg<HD>::VROW + ch * 16, vc + off, valid);
    }
}

// Vᵀ (permuted key order) from the raw stage vr into vt, by warps warp, warp + nwarp, …: a lane
// moves 4 keys × 4 bytes; a warp item covers 16 operand positions × 32 head-dim bytes. Lane
// bits pick the key group (lane & 3), the 4-byte column (lane >> 2) and a rotation of the 4
// stores (lane >> 3), so both the loads and the stores hit 32 different banks.
template <int HD>
__device__ __forceinline__ void transpose_v(const uint8_t *vr, uint8_t *vt, int warp, int lane, int nwarp) {
    constexpr int BN = cfg<HD>::BN, VROW = cfg<HD>::VROW;
    const int rot = (lane >> 3) & 3;
    for (int it = warp; it < (HD / 32) * (BN / 16); it += nwarp) {
        int d4 = (it % (HD / 32)) * 8 + (lane >> 2);
        int p0 = (it / (HD / 32)) * 16 + (lane & 3) * 4, kb = (p0 & ~15) + 2 * (lane & 3);
        uint32_t w0 = *(const uint32_t *)(vr + (kb + 0) * VROW + d4 * 4);
        uint32_t w1 = *(const uint32_t *)(vr + (kb + 1) * VROW + d4 * 4);
        uint32_t w2 = *(const uint32_t *)(vr + (kb + 8) * VROW + d4 * 4);
        uint32_t w3 = *(const uint32_t *)(vr + (kb + 9) * VROW + d4 * 4);
        uint32_t a0 = __byte_perm(w0, w1, 0x5140), a1 = __byte_perm(w0, w1, 0x7362);
        uint32_t a2 = __byte_perm(w2, w3, 0x5140), a3 = __byte_perm(w2, w3, 0x7362);
        uint32_t r4[4] = {__byte_perm(a0, a2, 0x5410), __byte_perm(a0, a2, 0x7632),
                          __byte_perm(a1, a3, 0x5410), __byte_perm(a1, a3, 0x7632)};
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int jj = (j + rot) & 3;
            uint32_t w = jj == 0 ? r4[0] : jj == 1 ? r4[1] : jj == 2 ? r4[2] : r4[3];
            *(uint32_t *)(vt + cm_off(d4 * 4 + jj, p0, BN)) = w;
        }
    }
}

// The thread's rows' outputs (bf16): acc · vscale / l (l sums P·256, as acc does), l summed over
// the row's 4 lanes (QUAD; false: each lane holds the row's whole l already, as the tensor core's
// row sums give it). sinks (attn_args.sinks, or null): the row's query head's sink logit joins l as
// 2^(sink·log2e − m + 8), m the row's maximum in log2 units (softmax_s), the same 256× scale as P
// (the 16-bit wgmma kernel; the FP8 kernels start their rows from the sink instead: rows2::sink_init).
template <int HD, bool QUAD = true>
__device__ __forceinline__ void store_rows(bf16 *out, const float *acc, float (&l)[2], const float (&m)[2],
                                           const float *sinks, const bool (&on)[2], const int (&tok)[2],
                                           const int (&head)[2], int n_heads, int g, int G, float vscale, int c) {
#pragma unroll
    for (int h = 0; h < 2; h++) {
        if constexpr (QUAD) {
            l[h] += __shfl_xor_sync(0xffffffff, l[h], 1);
            l[h] += __shfl_xor_sync(0xffffffff, l[h], 2);
        }
        if (!on[h]) continue;
        if (sinks) l[h] += ex2(fmaf(sinks[g * G + head[h]], 1.4426950408889634f, 8.0f - m[h]));
        bf16 *orow = out + ((size_t)tok[h] * n_heads + g * G + head[h]) * HD;
        float f = l[h] > 0.0f ? vscale / l[h] : 0.0f;
#pragma unroll
        for (int j = 0; j < HD / 8; j++)
            *(__nv_bfloat162 *)(orow + 8 * j + 2 * c) =
                __floats2bfloat162_rn(acc[4 * j + 2 * h] * f, acc[4 * j + 2 * h + 1] * f);
    }
}

// A CTA's share of the prefill (sequence blockIdx.x, query tile blockIdx.y): its query tokens
// [q0, q0 + tok_per_cta) of the sequence's n_q (rows = tokens × the KV head's G heads), the last
// one's position p_last, and the KV tiles [t0, t1] they attend (window start of the first token
// to the last one's position). begin() returns false for a tile past the sequence's queries.
struct cta_tiles {
    int t_begin, n_q, tok_per_cta, q0, p_last, t0, t1;
    // (rev: the grid's query tiles in reverse, so that the longest causal rows start first)
    __device__ __forceinline__ bool begin(const int32_t *qstart, const int32_t *pos_arr, int rows, int G, int window,
                                          int bn, bool rev = false) {
        t_begin = qstart[blockIdx.x];
        n_q = qstart[blockIdx.x + 1] - t_begin;
        tok_per_cta = rows / G;
        q0 = (rev ? gridDim.y - 1 - blockIdx.y : blockIdx.y) * tok_per_cta;
        if (q0 >= n_q) return false;
        const int last_tok = min(q0 + tok_per_cta, n_q) - 1, p_first = pos_arr[t_begin + q0];
        p_last = pos_arr[t_begin + last_tok];
        const int k_lo = window > 0 && p_first - window + 1 > 0 ? p_first - window + 1 : 0;
        t0 = k_lo / bn;
        t1 = p_last / bn;
        return true;
    }
};

}  // namespace fp8pf

// ACC: the accumulation mode (every:N with N = args.n_every). Two warpgroups a CTA, each with its
// own 64 query rows, share the CTA's K/V tiles and its Vᵀ transpose. CAP: soft-capped scores.
template <int HD, fp8_accum_mode ACC, bool CAP = false>
__global__ void __launch_bounds__(128 * fp8pf::cfg<HD>::NWG) k_prefill_fp8(const __grid_constant__ attn_args args) {
    bf16 *out = args.out;
    const bf16 *q = args.q;
    const uint8_t *kc = (const uint8_t *)args.kc, *vc = (const uint8_t *)args.vc;
    const int32_t *qstart = args.qstart, *pos_arr = args.pos, *btab = args.btab;
    const int max_blocks = args.max_blocks, n_kv = args.n_kv, G = args.G, bs = args.bs, window = args.window;
    const int n_every = args.n_every;
    const float scale = args.scale, *scales = args.scales;
    const float cap2 = args.softcap * 1.4426950408889634f;  // (CAP) the cap in log2 units
    using C = fp8pf::cfg<HD>;
    constexpr int BN = C::BN, NWG = C::NWG;
    constexpr int ROWS = 64 * NWG, NT = 128 * NWG, NWARP = 4 * NWG;
    extern __shared__ __align__(128) uint8_t fp8pf_smem[];
    uint8_t *Qs = fp8pf_smem, *Ks = Qs + NWG * C::Q_BYTES, *Vr = Ks + 2 * C::K_BYTES, *Vt = Vr + 2 * C::VRAW_BYTES;
    float *qscale_s = (float *)(Vt + C::VT_BYTES);
    const int s = blockIdx.x, g = blockIdx.z, tid = threadIdx.x;
    const int warp = tid >> 5, lane = tid & 31, rr = lane >> 2, c = lane & 3;
    fp8pf::cta_tiles ct = {};
    if (!ct.begin(qstart, pos_arr, ROWS, G, window, BN)) return;
    const int t_begin = ct.t_begin, n_q = ct.n_q, tok_per_cta = ct.tok_per_cta, q0 = ct.q0, p_last = ct.p_last,
              t0 = ct.t0, t1 = ct.t1;
    const int n_heads = n_kv * G;

    // ---- Q: per-(token, head) scale amax/448, e4m3, into the core-matrix layout (2 threads a row)
    fp8pf::load_q<HD>(Qs, qscale_s, q, tid, q0, n_q, tok_per_cta, t_begin, n_heads, g, G);
    // ---- this thread's two rows (warp*16 + rr, +8)
    fp8pf::rows2 rw;
    rw.setup(warp, rr, q0, n_q, tok_per_cta, G, t_begin, pos_arr, window);
    const float kscale = scales[g], vscale = scales[KV_MAX_HEADS + g];
    const int32_t *bt = btab + (size_t)s * max_blocks;

    // cp.async of tile t's K and raw V rows into stage st (an empty group past the last tile)
    auto issue = [&](int t, int st) {
        if (t <= t1)
            fp8pf::load_tile<HD>(Ks + st * C::K_BYTES, Vr + st * C::VRAW_BYTES, kc, vc, bt, t, p_last, n_kv, g, bs, tid,
                                 NT);
        cp_async_commit();
    };
    issue(t0, 0);
    __syncthreads();  // qscale_s
    rw.scales(qscale_s, warp, rr, kscale, scale);
    // Q as wgmma A fragments in registers at head_dim 64. At 128 they give wrong results on the
    // H200, with or without register fences around the wgmma (cause unknown), and at 256 the
    // registers go to the accumulators, so both read Q through a shared-memory descriptor.
    constexpr bool QREG = HD == 64;
    uint32_t qa[QREG ? HD / 32 : 1][4];
    if constexpr (QREG) {
#pragma unroll
        for (int kk = 0; kk < HD / 32; kk++)
#pragma unroll
            for (int i = 0; i < 4; i++)
                qa[kk][i] = *(const uint32_t *)(Qs + fp8pf::cm_off(warp * 16 + rr + 8 * (i & 1),
                                                                   32 * kk + 16 * (i >> 1) + 4 * c, HD));
    }

    fp8pf::acc_state<HD, ACC> a;
    a.init();
    if (args.sinks) rw.sink_init(a.m, a.l, args.sinks, g, G, c, false);

    for (int t = t0, st = 0; t <= t1; t++, st ^= 1) {
        issue(t + 1, st ^ 1);
        cp_async_wait<1>();
        fence_proxy_async();
        __syncthreads();
        // S = Q·Kᵀ, issued first so the transpose below overlaps it
        float sacc[BN / 2];
        const uint8_t *kt = Ks + st * C::K_BYTES;
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < HD / 32; kk++) {
            if constexpr (QREG) fp8pf::rs<BN>(sacc, qa[kk], wgmma_desc(kt + kk * 256, 128, HD * 8), kk > 0);
            else fp8pf::ss<BN>(sacc, wgmma_desc(Qs + (warp >> 2) * C::Q_BYTES + kk * 256, 128, HD * 8),
                               wgmma_desc(kt + kk * 256, 128, HD * 8), kk > 0);
        }
        wgmma_commit();
        fp8pf::transpose_v<HD>(Vr + st * C::VRAW_BYTES, Vt, warp, lane, NWARP);  // overlaps the QK wgmma
        fence_proxy_async();
        wgmma_wait<0>();
        fp8pf::fence_acc<BN>(sacc);
        __syncthreads();  // Vᵀ complete
        fp8pf::softmax_pv<HD, ACC, CAP>(sacc, t, t0, t1, n_every, c, rw.sc, rw.lo, rw.pos, a.m, a.l, a.o, a.tacc, Vt,
                                        cap2);
        __syncthreads();  // stage st and Vᵀ free for reuse
    }
    fp8pf::store_rows<HD>(out, a.result(), a.l, a.m, nullptr, rw.on, rw.tok, rw.head, n_heads, g, G, vscale, c);
}
