// cuda_prefill_bf16.cuh — paged causal prefill attention over a bf16 or f16 cache on Hopper's
// 16-bit tensor cores (wgmma .bf16 / .f16, HGMMA in SASS), built as the FP8 TMA kernel is
// (cuda_prefill_fp8_tma.cuh): a TMA copy warp, two or three consumer warpgroups taking turns at the tensor
// cores, K and V in a ring of mbarrier-guarded stages. Included by cuda_prefill_bf16.cu (the
// kernel-table entry) and dev/cuda/prefill_bf16.cu (the lab). Owns: the kernel, its shared-memory
// layout, its TMA tensor maps and the wgmma operand descriptors; it shares the FP8 kernels' CTA
// tiling, row set-up, online softmax and output store (fp8pf::, cuda_prefill_fp8.cuh).
//
// One CTA = (sequence, 64·NC query rows, KV head), 128·(NC + 1) threads (NC consumers: 3 at head_dim 64
// over a 16-bit cache without soft-capping, else 2, consumers<> below); a query row is one (token, query
// head of the KV head's group) pair, so the G heads share every K/V load:
//   warpgroup 0, the producer (24 registers): one thread issues the TMA boxes — per cache block of a
//     tile and per 64-element (128-byte) column chunk of a row, straight from the paged cache
//     through the block table — waiting for free slots itself; its other threads exit;
//   warpgroups 1 .. NC, the consumers (240 registers; 160 when three), 64 query rows each: per KV tile i,
//     S(i) = Q·K(i)ᵀ  (wgmma SS, Q and K K-major) issued with O += P(i−1)·V(i−1) (wgmma RS, P in
//     registers, V read MN-major from its rows: 16-bit types need no Vᵀ), the softmax of S(i) under
//     the P·V, then O·α(i) and P(i) packed into the registers the next P·V reads. Over 16-bit
//     caches a warp's running maxima stay put until one would grow by more than 2^7 (P, 16-bit, then
//     reaches 2^15), so after a row's first tiles α is 1 and the rescale of O is skipped (+5-10 %,
//     bench/prefill_attention/RESULTS.md#lazy-maxima-in-the-16-bit-kernel). The
//     warpgroups take turns issuing (a named-barrier ring), so one's softmax runs under the
//     others' tensor-core work. O is the wgmma accumulator itself (16-bit products accumulate in
//     FP32 in the tensor core, unlike e4m3's).
// Shared memory (1024-byte aligned): Q of the NC consumers, then K and V rings of KS stages. Every
// operand is stored as 128-byte-swizzled row chunks: [chunk c of 64 elements][row][128 bytes], the
// 16-byte unit u of row r at (u ^ r % 8)·16 — TMA's 128-byte swizzle, which wgmma's descriptors
// name with layout 1 (8-row atoms of 1024 bytes).
// Tiles sit at absolute key positions (BN keys a tile: 128, or 64 at head_dim 256), as the FP8
// kernels' do. A tile's rows past the context's last key hold whatever shared memory held (an
// earlier tile's or CTA's bytes, or zeros in the 8-bit forms) or, in the last block loaded, unwritten
// cache bytes: K's are masked to −inf before the softmax, and V's are zeroed by the consumers before
// the last P·V, so NaN bytes never reach the output.
#pragma once

#include <cuda.h>  // CUtensorMap and cuTensorMapEncodeTiled's enums (types only; the function comes from cudart)

#include "cuda_decode_mma.cuh"  // (the cp.async helpers cuda_prefill_fp8.cuh uses)
#include "cuda_prefill_fp8.cuh"
#include "cuda_tma.cuh"

namespace bf16pf {

using namespace tmah;  // (the copy and barrier primitives, cuda_tma.cuh)

// Shared-memory layout for head_dim HD with KS K/V stages; CVT (an e4m3 cache): K and V staging of
// e4m3 bytes as TMA lands them, two half-tile slots each ([2][BN/2][HD]), beside the 16-bit rings;
// TS (per-token-head scales): the converters' row scales of two tiles ([2][K, V][BN] f32) after the
// barriers.
template <int HD, int KS, bool CVT = false, bool TS = false, int NC = 2> struct lay {
    static constexpr int BN = HD == 256 ? 64 : 128;  // keys a tile
    static constexpr int NCH = HD / 64;               // 128-byte chunks of a row
    static constexpr int Q_BYTES = 64 * HD * 2, TILE_BYTES = BN * HD * 2, RAW_BYTES = CVT ? BN * HD : 0;
    static constexpr int OFF_K = NC * Q_BYTES, OFF_V = OFF_K + KS * TILE_BYTES, OFF_RAW = OFF_V + KS * TILE_BYTES;
    static constexpr int OFF_BAR = OFF_RAW + 2 * RAW_BYTES, OFF_SC = OFF_BAR + (4 * KS + 8) * 8;
    static constexpr int SMEM = OFF_SC + (TS ? 4 * BN * 4 : 0) + 1024;  // (+ the alignment slack)
};
// The default ring depth: what fits beside Q in 227 KB.
template <int HD> struct stages { static constexpr int KS = HD == 64 ? 4 : 2; };
// Consumer warpgroups a CTA: three at head_dim 64 over a 16-bit cache, where a tile's MMAs are half of
// head_dim 128's and its softmax the same, so a third warpgroup's softmax fills the tensor cores'
// gaps (1.03-1.18x two, bench/prefill_attention/RESULTS.md#three-consumers-in-the-16-bit-kernel);
// two elsewhere (head_dim 128's o, S and P take 160 registers, three consumers' whole allotment;
// soft-capped scores spill 44 bytes in them; the 8-bit forms' converters need the producer's registers).
constexpr int n_consumers(int hd, int dt, bool cap) {
    return hd == 64 && !cap && (dt == DT_BF16 || dt == DT_F16) ? 3 : 2;
}
template <int HD, int DT, bool CAP> struct consumers { static constexpr int NC = n_consumers(HD, DT, CAP); };

// named barriers (0 is __syncthreads): BAR_Q + wg, BAR_TURN + wg (wg < 3), BAR_CVT (the converters, TS)
enum { BAR_Q = 1, BAR_TURN = 4, BAR_CVT = 7 };

// wgmma descriptor of a 128-byte-swizzled operand at shared address addr: lbo / sbo in bytes (K-major:
// sbo = 1024 between 8-row groups, lbo unused; MN-major: lbo between 64-element column chunks, sbo
// between 8-row groups along K)
__device__ __forceinline__ uint64_t desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
    return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)(lbo >> 4) << 16) | ((uint64_t)(sbo >> 4) << 32) |
           ((uint64_t)1 << 62);
}

// The 16-bit type's wgmma shapes: S = Q·Kᵀ (N = keys) and O += P·V (N = head_dim)
template <int DT, int N> __device__ __forceinline__ void ss(float *d, uint64_t a, uint64_t b, int sd) {
    if constexpr (DT == DT_BF16) {
        if constexpr (N == 64) wgmma_ss_bf16_n64(d, a, b, sd); else wgmma_ss_bf16_n128(d, a, b, sd);
    } else {
        if constexpr (N == 64) wgmma_ss_f16_n64(d, a, b, sd); else wgmma_ss_f16_n128(d, a, b, sd);
    }
}
template <int DT, int N> __device__ __forceinline__ void rs(float *d, const uint32_t *a, uint64_t b, int sd) {
    if constexpr (DT == DT_BF16) {
        if constexpr (N == 64) wgmma_rs_bf16_n64_bmn(d, a, b, sd);
        else if constexpr (N == 128) wgmma_rs_bf16_n128_bmn(d, a, b, sd);
        else wgmma_rs_bf16_n256_bmn(d, a, b, sd);
    } else {
        if constexpr (N == 64) wgmma_rs_f16_n64_bmn(d, a, b, sd);
        else if constexpr (N == 128) wgmma_rs_f16_n128_bmn(d, a, b, sd);
        else wgmma_rs_f16_n256_bmn(d, a, b, sd);
    }
}
// two floats as the type's pair (the lower element in the low half)
template <int DT> __device__ __forceinline__ uint32_t pack2(float a, float b) {
    if constexpr (DT == DT_BF16) {
        const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
        return *(const uint32_t *)&h;
    } else {
        const __half2 h = __floats2half2_rn(a, b);
        return *(const uint32_t *)&h;
    }
}

// This warpgroup's 64 query rows (CTA rows 64·wg ..) into Qw, swizzled: thread tid of 128 moves
// 16-byte units (row r, unit u); an f16 cache takes Q converted to f16 (saturated at ±65504).
// Rows past the CTA's tokens are zero.
template <int HD, int DT>
__device__ __forceinline__ void load_q(uint8_t *Qw, const bf16 *q, int tid, int wg, const fp8pf::cta_tiles &ct,
                                       int n_heads, int g, int G) {
    constexpr int UPR = HD / 8;  // 16-byte units a row
    const bool aligned = ((uintptr_t)q & 15) == 0;
    for (int idx = tid; idx < 64 * UPR; idx += 128) {
        const int r = idx / UPR, u = idx % UPR, row = 64 * wg + r, qi = ct.q0 + row / G;
        const bool on = row < ct.tok_per_cta * G && qi < ct.n_q;
        const bf16 *src = q + ((size_t)(ct.t_begin + qi) * n_heads + g * G + row % G) * HD + u * 8;
        uint4 w = make_uint4(0u, 0u, 0u, 0u);
        if (on) {
            if (aligned) {
                w = __ldg(reinterpret_cast<const uint4 *>(src));
            } else {
                uint16_t e[8];
                for (int k = 0; k < 8; k++) e[k] = __ldg(reinterpret_cast<const unsigned short *>(src) + k);
                w = make_uint4(e[0] | (uint32_t)e[1] << 16, e[2] | (uint32_t)e[3] << 16, e[4] | (uint32_t)e[5] << 16,
                               e[6] | (uint32_t)e[7] << 16);
            }
        }
        if constexpr (DT == DT_F16) {
            uint32_t *x = &w.x;
#pragma unroll
            for (int k = 0; k < 4; k++) {
                const float a = fminf(fmaxf(__uint_as_float(x[k] << 16), -65504.0f), 65504.0f),
                            b = fminf(fmaxf(__uint_as_float(x[k] & 0xffff0000u), -65504.0f), 65504.0f);
                x[k] = pack2<DT_F16>(a, b);
            }
        }
        *(uint4 *)(Qw + (u >> 3) * (64 * 128) + r * 128 + (((u & 7) ^ (r & 7)) << 4)) = w;
    }
}

// `rows` e4m3 or e5m2 (DT) rows (raw: [rows][HD] bytes) into rows r0.. of a 16-bit ring stage as f16
// (exact: every e4m3 and e5m2 value is an f16), swizzled as TMA would have: thread ct of nt moves
// 16-byte units, UN at a time (their shared-memory loads in flight together). TS (per-token-head
// scales): row i's values times rsc[i] (f32), as bf16 (round to nearest even; bf16 keeps f32's range,
// which f16 would not for a scaled row). The loop is bound by the converters' issue, so its addressing is
// hoisted: 1.08× the same loop computing each unit's row and column from its index, where removing the
// stores' 2-way bank conflicts at that cost was 0.9× (bench/prefill_attention/RESULTS.md#head_dim-256).
template <int HD, int BN, int DT, bool TS = false>
__device__ __forceinline__ void cvt_rows(uint8_t *dst, const uint8_t *raw, int r0, int rows, int ct, int nt,
                                         const float *rsc = nullptr) {
    constexpr int UPR = HD / 16, UN = 2;  // 16-byte e4m3 units a row; units a thread has in flight
    // (nt a multiple of UPR: a thread's unit of a row stays the same, its rows step by nt / UPR)
    const int u = ct % UPR, rs = nt / UPR, w0 = (2 * u) & 7;  // w0: the unit's first 16-bit unit in its chunk
    const uint8_t *src = raw + u * 16;
    uint8_t *chunk = dst + (u >> 2) * (BN * 128);  // (the 16 elements are one 128-byte chunk's units w0, w0 + 1)
    for (int l0 = ct / UPR; l0 < rows; l0 += UN * rs) {
        uint4 w[UN];
#pragma unroll
        for (int k = 0; k < UN; k++)
            if (l0 + k * rs < rows) w[k] = *(const uint4 *)(src + (l0 + k * rs) * HD);
#pragma unroll
        for (int k = 0; k < UN; k++) {
            const int l = l0 + k * rs, r = r0 + l;
            if (l >= rows) break;
            const uint32_t x[4] = {w[k].x, w[k].y, w[k].z, w[k].w};
            uint32_t h[8];
#pragma unroll
            for (int e = 0; e < 4; e++) {
                if constexpr (DT == DT_E4M3) {
                    asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h[2 * e]) : "h"((uint16_t)(x[e] & 0xffffu)));
                    asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h[2 * e + 1]) : "h"((uint16_t)(x[e] >> 16)));
                } else {
                    asm("cvt.rn.f16x2.e5m2x2 %0, %1;" : "=r"(h[2 * e]) : "h"((uint16_t)(x[e] & 0xffffu)));
                    asm("cvt.rn.f16x2.e5m2x2 %0, %1;" : "=r"(h[2 * e + 1]) : "h"((uint16_t)(x[e] >> 16)));
                }
            }
            if constexpr (TS) {
                const float sc = rsc[l];
#pragma unroll
                for (int e = 0; e < 8; e++) {
                    const float2 f = __half22float2(*(const __half2 *)&h[e]);
                    h[e] = pack2<DT_BF16>(f.x * sc, f.y * sc);
                }
            }
            uint8_t *row = chunk + r * 128;
            *(uint4 *)(row + ((w0 ^ (r & 7)) << 4)) = make_uint4(h[0], h[1], h[2], h[3]);
            *(uint4 *)(row + (((w0 + 1) ^ (r & 7)) << 4)) = make_uint4(h[4], h[5], h[6], h[7]);
        }
    }
}

}  // namespace bf16pf

// HD: head_dim 64, 128 or 256. DT: DT_BF16 or DT_F16 (the cache's type; Q is bf16 and converted), or
// DT_E4M3 or DT_E5M2 at head_dim 256 (CVT): TMA lands each 8-bit half-tile in one of two staging
// slots, warps 1-3 of the producer warpgroup convert it to f16 into the ring (the next half lands
// meanwhile) and the consumers compute as for an f16 cache, the K scale folded into the softmax's and
// the V scale into the output's (at head_dim 256 the FP8 kernels' two accumulators, 256 registers a
// thread, do not fit).
// KS: K/V ring stages. PINGPONG: the consumers take turns issuing their MMAs. CAP: soft-capped scores
// (attn_args.softcap, fp8pf::softmax_s). TS: per-token-head scales (e4m3, head_dim 64 / 128 / 256): the
// converters multiply every row by its scale (attn_args.kts / vts, in shared memory a tile ahead of
// its conversion) and store bf16, and the consumers run as for a bf16 cache (static scales 1): the row
// scales are in K and V themselves, so the softmax, its sum and the output need nothing more.
// kmap / vmap: the layer's K and V cache as 4-d tensors {head_dim, kv_block_tokens, n_kv_heads,
// n_blocks} of 16-bit elements, boxes of {64, rows_box, 1, 1}, 128-byte swizzle (CVT: bf16pf_map_8bit's).
// NC: consumer warpgroups (consumers<> above), which take turns in a ring when PINGPONG.
// Registers: setmaxnreg moves them within the CTA's allocation at launch (168 a thread at 384
// threads), so what the producer gives, 128·(168 − 24), must cover what the consumers take,
// 256·(240 − 168) (CVT: 56 and 224, the converters' loop needing more; three consumers at 512
// threads: 128·(128 − 24) against 384·(160 − 128)); a consumer's setmaxnreg.inc
// waits until the pool holds it, for ever if it never does.
template <int HD, int DT, int KS, bool PINGPONG, bool CAP = false, bool TS = false, int NC = 2>
__global__ void __launch_bounds__(128 * (NC + 1), 1)
    k_prefill_bf16(const __grid_constant__ CUtensorMap kmap, const __grid_constant__ CUtensorMap vmap,
                   const __grid_constant__ attn_args a) {
    using namespace bf16pf;
    constexpr bool CVT = DT == DT_E4M3 || DT == DT_E5M2;
    constexpr int WT = TS ? DT_BF16 : CVT ? DT_F16 : DT;  // the wgmma operands' type
    static_assert(!CVT || HD == 256 || TS, "8-bit caches run this kernel at head_dim 256 only (or with row scales)");
    static_assert(!TS || DT == DT_E4M3, "per-token-head scales are e4m3 only");
    static_assert(NC == 2 || (NC == 3 && !CVT), "three consumers over 16-bit caches only");
    typedef lay<HD, KS, CVT, TS, NC> L;
    constexpr int BN = L::BN, NCH = L::NCH;
    extern __shared__ uint8_t bf16pf_smem_raw[];
    // (an offset into the shared array, so that every access stays in the shared space)
    uint8_t *sm = bf16pf_smem_raw + ((1024u - (sa(bf16pf_smem_raw) & 1023u)) & 1023u);
    uint8_t *Qs = sm, *Ks = sm + L::OFF_K, *Vs = sm + L::OFF_V;
    uint64_t *bars = (uint64_t *)(sm + L::OFF_BAR);
    uint64_t *kfull = bars, *vfull = bars + KS, *kempty = bars + 2 * KS, *vempty = bars + 3 * KS;
    // (CVT) the staging slots: TMA completes rkfull / rvfull, the converters arrive on rkempty / rvempty
    uint64_t *rkfull = bars + 4 * KS, *rvfull = rkfull + 2, *rkempty = rkfull + 4, *rvempty = rkfull + 6;
    uint8_t *rawk = sm + L::OFF_RAW, *rawv = rawk + L::RAW_BYTES;
    constexpr int NCV = 96, HALF = BN / 2 * HD;  // (CVT) converting threads: warps 1-3; a slot's bytes
    static_assert(NCV % (HD / 16) == 0, "cvt_rows: the converting threads a multiple of a row's units");
    const int s = blockIdx.x, g = blockIdx.z, G = a.G;
    fp8pf::cta_tiles ct = {};
    if (!ct.begin(a.qstart, a.pos, 64 * NC, G, a.window, BN, true)) return;  // (the whole CTA, before any barrier)
    const int n = ct.t1 - ct.t0 + 1, t0 = ct.t0, p_last = ct.p_last;
    if (threadIdx.x == 0) {
        for (int i = 0; i < KS; i++) {
            mbar_init(&kfull[i], CVT ? NCV : 1);
            mbar_init(&vfull[i], CVT ? NCV : 1);
            mbar_init(&kempty[i], 128 * NC);
            mbar_init(&vempty[i], 128 * NC);
        }
        if constexpr (CVT) {
            for (int i = 0; i < 2; i++) {
                mbar_init(&rkfull[i], 1);
                mbar_init(&rvfull[i], 1);
                mbar_init(&rkempty[i], NCV);
                mbar_init(&rvempty[i], NCV);
            }
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    // Over 16-bit caches the rings are not cleared (see the head of the file for the rows a tile does not
    // load). The 8-bit forms (CVT) clear them and rescale O every tile: without both, ptxas spills 8-16
    // bytes a thread in their 224-register consumers.
    if constexpr (CVT) {
        for (int i = threadIdx.x; i < 2 * KS * L::TILE_BYTES / 16; i += 128 * (NC + 1))
            ((uint4 *)Ks)[i] = make_uint4(0u, 0u, 0u, 0u);
        fence_proxy_async();
    }
    __syncthreads();

    if (threadIdx.x < 128) {  // ---- producer
        reg_dealloc<CVT ? 56 : 24>();
        if (CVT && threadIdx.x == 0) {  // e4m3 half-tiles (boxes of rows_box <= BN / 2 rows) into the slots
            const int32_t *bt = a.btab + (size_t)s * a.max_blocks;
            const int rows = a.rows_box, bs = a.bs, hb = BN / 2 / rows;  // boxes a half-tile
            // half h of tile t into slot (2i + h) % 2: its boxes j0 .. j1 - 1 (none past the last key: then
            // the slot's phase completes with no bytes)
            auto half = [&](const CUtensorMap *map, uint8_t *raw, uint64_t *full, uint64_t *empty, int i, int h) {
                const int t = t0 + i, q = 2 * i + h, sl = q & 1;
                const int nb = min(BN / rows, (p_last - t * BN) / rows + 1), j0 = h * hb, j1 = min(nb, j0 + hb);
                if (q >= 2) mbar_wait(&empty[sl], ((q >> 1) - 1) & 1);
                mbar_expect_tx(&full[sl], (uint32_t)(j1 > j0 ? (j1 - j0) * rows * HD : 0));
                for (int j = j0; j < j1; j++) {
                    const int kp = t * BN + j * rows;
                    tma_load(raw + sl * HALF + (j - j0) * rows * HD, map, &full[sl], 0, kp % bs, g, bt[kp / bs]);
                }
            };
            for (int i = 0; i < n; i++) {
                half(&kmap, rawk, rkfull, rkempty, i, 0);
                half(&kmap, rawk, rkfull, rkempty, i, 1);
                half(&vmap, rawv, rvfull, rvempty, i, 0);
                half(&vmap, rawv, rvfull, rvempty, i, 1);
                const int t = t0 + i;
                if (i + 1 < n) {  // the next tile into L2 while this one is converted
                    const int nb1 = min(BN / rows, (p_last - (t + 1) * BN) / rows + 1);
                    for (int j = 0; j < nb1; j++) {
                        const int kp = (t + 1) * BN + j * rows;
                        tma_prefetch(&kmap, 0, kp % bs, g, bt[kp / bs]);
                        tma_prefetch(&vmap, 0, kp % bs, g, bt[kp / bs]);
                    }
                }
            }
        } else if (CVT && threadIdx.x >= 32) {  // the converters: staging slots → ring stage, as f16
            const int ct = threadIdx.x - 32, rows = a.rows_box, hb = BN / 2 / rows;
            // (TS) the row scales of tile i in rsc[i & 1] ([K, V][BN]): tile i + 1's are read from global
            // memory into registers (rows ct and ct + NCV) while tile i converts, stored after it, then one
            // barrier (a buffer is rewritten a tile after its last reader passed that barrier)
            float *rsc = (float *)(sm + L::OFF_SC);
            const int32_t *bt = a.btab + (size_t)s * a.max_blocks;
            float pk[2] = {0.0f, 0.0f}, pv[2] = {0.0f, 0.0f};
            auto fetch = [&](int i) {  // (rows past the tile's last box are not loaded, nor their scales)
                const int t = t0 + i, nrow = min(BN / rows, (p_last - t * BN) / rows + 1) * rows;
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const int r = ct + e * NCV;
                    if (r < nrow) {
                        const int kp = t * BN + r;
                        const size_t idx = ((size_t)bt[kp / a.bs] * a.n_kv + g) * a.bs + kp % a.bs;
                        pk[e] = a.kts[idx];
                        pv[e] = a.vts[idx];
                    }
                }
            };
            auto put = [&](int i) {
                float *d = rsc + (i & 1) * 2 * BN;
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const int r = ct + e * NCV;
                    if (r < BN) { d[r] = pk[e]; d[BN + r] = pv[e]; }
                }
            };
            // tile i's K or V, both halves, into ring stage st (TS: sc, the tile's row scales)
            auto conv = [&](uint8_t *ring, const uint8_t *raw, uint64_t *full, uint64_t *empty, int i,
                            const float *sc) {
                const int t = t0 + i, nb = min(BN / rows, (p_last - t * BN) / rows + 1);
                for (int h = 0; h < 2; h++) {
                    const int q = 2 * i + h, sl = q & 1, nr = max(0, min(nb, (h + 1) * hb) - h * hb) * rows;
                    mbar_wait(&full[sl], (q >> 1) & 1);
                    cvt_rows<HD, BN, DT, TS>(ring, raw + sl * HALF, h * (BN / 2), nr, ct, NCV, sc + h * (BN / 2));
                    mbar_arrive(&empty[sl]);
                }
                fence_proxy_async();  // (the ring's generic-proxy writes, before the wgmma reads them)
            };
            if constexpr (TS) {
                fetch(0);
                put(0);
                bar_sync(BAR_CVT, NCV);
            }
            for (int i = 0; i < n; i++) {
                const int st = i % KS;
                if constexpr (TS) {
                    if (i + 1 < n) fetch(i + 1);
                }
                const float *sck = rsc + (i & 1) * 2 * BN;
                if (i >= KS) mbar_wait(&kempty[st], ((i / KS) - 1) & 1);
                conv(Ks + st * L::TILE_BYTES, rawk, rkfull, rkempty, i, sck);
                mbar_arrive(&kfull[st]);
                if (i >= KS) mbar_wait(&vempty[st], ((i / KS) - 1) & 1);
                conv(Vs + st * L::TILE_BYTES, rawv, rvfull, rvempty, i, sck + BN);
                mbar_arrive(&vfull[st]);
                if constexpr (TS) {
                    if (i + 1 < n) {
                        put(i + 1);
                        bar_sync(BAR_CVT, NCV);
                    }
                }
            }
        } else if (!CVT && threadIdx.x == 0) {
            const int32_t *bt = a.btab + (size_t)s * a.max_blocks;
            const int rows = a.rows_box, bs = a.bs;
            for (int i = 0; i < n; i++) {
                const int t = t0 + i, st = i % KS, nb = min(BN / rows, (p_last - t * BN) / rows + 1);
                const uint32_t bytes = (uint32_t)(nb * rows * HD * 2);
                uint8_t *kd = Ks + st * L::TILE_BYTES, *vd = Vs + st * L::TILE_BYTES;
                if (i >= KS) mbar_wait(&kempty[st], ((i / KS) - 1) & 1);
                mbar_expect_tx(&kfull[st], bytes);
                for (int j = 0; j < nb; j++) {
                    const int kp = t * BN + j * rows, blk = bt[kp / bs], r0 = kp % bs;
#pragma unroll
                    for (int ch = 0; ch < NCH; ch++)
                        tma_load(kd + ch * (BN * 128) + j * rows * 128, &kmap, &kfull[st], ch * 64, r0, g, blk);
                }
                if (i >= KS) mbar_wait(&vempty[st], ((i / KS) - 1) & 1);
                mbar_expect_tx(&vfull[st], bytes);
                for (int j = 0; j < nb; j++) {
                    const int kp = t * BN + j * rows, blk = bt[kp / bs], r0 = kp % bs;
#pragma unroll
                    for (int ch = 0; ch < NCH; ch++)
                        tma_load(vd + ch * (BN * 128) + j * rows * 128, &vmap, &vfull[st], ch * 64, r0, g, blk);
                }
            }
        }
        return;
    }

    // ---- consumers: warpgroups 1 .. NC, 64 query rows each (registers: the kernel's comment)
    reg_alloc<CVT ? 224 : NC == 3 ? 160 : 240>();
    const int tid = threadIdx.x - 128, wg = tid >> 7, warp = tid >> 5, lane = tid & 31, rr = lane >> 2, c = lane & 3;
    const int n_heads = a.n_kv * G;
    load_q<HD, WT>(Qs + wg * L::Q_BYTES, a.q, tid & 127, wg, ct, n_heads, g, G);
    fp8pf::rows2 rw;
    rw.setup(warp, rr, ct.q0, ct.n_q, ct.tok_per_cta, G, ct.t_begin, a.pos, a.window);
    const float kscale = CVT && !TS ? a.scales[g] : 1.0f, vscale = CVT && !TS ? a.scales[KV_MAX_HEADS + g] : 1.0f;
    rw.sc[0] = rw.sc[1] = a.scale * kscale * 1.4426950408889634f;
    const float cap2 = a.softcap * 1.4426950408889634f;  // (CAP) the cap in log2 units
    fence_proxy_async();              // Q visible to the wgmma
    bar_sync(BAR_Q + wg, 128);        // this warpgroup's Q rows written
    // descriptors' shared addresses: Q chunk (kk / 4) at 8 KB steps, a k-step 32 bytes into it; K and V
    // chunks at BN·128-byte steps; V's k-step (16 keys) 2 KB
    const uint32_t qa = sa(Qs + wg * L::Q_BYTES), ka = sa(Ks), va = sa(Vs);
    float o[HD / 2], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
#pragma unroll
    for (int j = 0; j < HD / 2; j++) o[j] = 0.0f;
    uint32_t pa[BN / 16][4];
    auto pv_issue = [&](int i) {  // O += P(i)·V(i)
        const uint32_t v0 = va + (uint32_t)((i % KS) * L::TILE_BYTES);
#pragma unroll
        for (int kk = 0; kk < BN / 16; kk++) rs<WT, HD>(o, pa[kk], desc(v0 + kk * 2048, BN * 128, 1024), 1);
        wgmma_commit();
    };
    // one tile i; FIRST (tile 0) has no P·V(i − 1) to issue. (Two instances rather than branches:
    // ptxas serialises every wgmma when a wait's group count depends on a branch.)
    auto tile = [&](auto first, int i) {
        constexpr bool FIRST = decltype(first)::value;
        const int st = i % KS;
        mbar_wait(&kfull[st], (i / KS) & 1);
        if constexpr (!FIRST) mbar_wait(&vfull[(i - 1) % KS], ((i - 1) / KS) & 1);
        float sacc[BN / 2];
        if (PINGPONG) bar_sync(BAR_TURN + wg, 256);
        wgmma_fence();
        const uint32_t k0 = ka + (uint32_t)(st * L::TILE_BYTES);
#pragma unroll
        for (int kk = 0; kk < HD / 16; kk++)
            ss<WT, BN>(sacc, desc(qa + (kk >> 2) * (64 * 128) + (kk & 3) * 32, 16, 1024),
                       desc(k0 + (kk >> 2) * (BN * 128) + (kk & 3) * 32, 16, 1024), kk > 0);
        wgmma_commit();
        if constexpr (!FIRST) pv_issue(i - 1);
        if (PINGPONG && (wg != NC - 1 || i + 1 < n)) bar_arrive(BAR_TURN + (wg + 1) % NC, 256);  // (n turns each)
        if constexpr (FIRST) wgmma_wait<0>();
        else wgmma_wait<1>();  // S(i) done, P·V(i − 1) may still run
        fp8pf::fence_acc<BN>(sacc);
        mbar_arrive(&kempty[st]);
        float alpha[2];
        // (lazy maxima over 16-bit caches: P is 16-bit, so a warp's rows keep their max until it would grow
        // by more than fp8pf::LAZY_MAX, and o is rescaled only on the tiles where it moved)
        const bool moved = fp8pf::softmax_s<BN, true, CAP, false, !CVT>(sacc, t0 + i, c, rw.sc, rw.lo, rw.pos, m, l,
                                                                       alpha, cap2);
        if constexpr (!FIRST) {  // P·V(i − 1) done: its V stage free, its P registers free for P(i)
            wgmma_wait<0>();
            fp8pf::fence_acc<HD>(o);
            mbar_arrive(&vempty[(i - 1) % KS]);
        }
        if (moved) {
#pragma unroll
            for (int j = 0; j < HD / 2; j++) o[j] *= alpha[(j >> 1) & 1];
        }
        // P (= 256·softmax weights, as fp8pf's softmax scales them) as the A fragments of the k-steps:
        // k-step kk's keys 16kk + 2c (+1) and 16kk + 8 + 2c (+1), rows rr and rr + 8
#pragma unroll
        for (int kk = 0; kk < BN / 16; kk++) {
            const float *p = sacc + 8 * kk;
            pa[kk][0] = pack2<WT>(p[0], p[1]);
            pa[kk][1] = pack2<WT>(p[2], p[3]);
            pa[kk][2] = pack2<WT>(p[4], p[5]);
            pa[kk][3] = pack2<WT>(p[6], p[7]);
        }
    };
    if (PINGPONG && wg == NC - 1) bar_arrive(BAR_TURN, 256);  // warpgroup 1 (wg 0) takes the first turn
    tile(std::true_type(), 0);
    for (int i = 1; i < n; i++) tile(std::false_type(), i);
    {  // the last tile: V rows past the last key zeroed (unwritten cache bytes could be NaN), then its P·V
        const int st = (n - 1) % KS, klim = p_last - (t0 + n - 1) * BN;
        mbar_wait(&vfull[st], ((n - 1) / KS) & 1);
        if (klim < BN - 1) {
            uint8_t *v0 = Vs + st * L::TILE_BYTES;
            const int nz = (BN - 1 - klim) * 8;  // 16-byte units a chunk
            for (int idx = tid & 127; idx < NCH * nz; idx += 128)
                *(uint4 *)(v0 + (idx / nz) * (BN * 128) + (klim + 1) * 128 + (idx % nz) * 16) =
                    make_uint4(0u, 0u, 0u, 0u);
            fence_proxy_async();
            bar_sync(BAR_Q + wg, 128);
        }
        wgmma_fence();
        pv_issue(n - 1);
        wgmma_wait<0>();
        fp8pf::fence_acc<HD>(o);
    }
    fp8pf::rows2 ro;  // (the rows' tokens and heads again: not kept live through the tile loop)
    ro.setup(warp, rr, ct.q0, ct.n_q, ct.tok_per_cta, G, ct.t_begin, a.pos, a.window);
    fp8pf::store_rows<HD>(a.out, o, l, m, a.sinks, ro.on, ro.tok, ro.head, n_heads, g, G, vscale, c);
}

// ---------------------------------------------------------------- host side


// A layer's K or V cache of 16-bit elements as {head_dim, kv_block_tokens, n_kv_heads, n_blocks},
// boxes of {64, rows, 1, 1} (one 128-byte chunk of `rows` rows) in 128-byte swizzle.
static inline CUresult bf16pf_map(cuda_tma_encode_fn encode, CUtensorMap *map, void *base, int hd, int bs, int n_kv,
                                  int n_blocks, int rows) {
    const cuuint64_t e = 2, dims[4] = {(cuuint64_t)hd, (cuuint64_t)bs, (cuuint64_t)n_kv, (cuuint64_t)n_blocks};
    const cuuint64_t strides[3] = {hd * e, hd * e * bs, hd * e * bs * n_kv};
    const cuuint32_t box[4] = {64, (cuuint32_t)rows, 1, 1}, es[4] = {1, 1, 1, 1};
    return encode(map, CU_TENSOR_MAP_DATA_TYPE_UINT16, 4, base, dims, strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
                  CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

// A layer's 8-bit (e4m3 / e5m2) K or V cache as {head_dim, kv_block_tokens, n_kv_heads, n_blocks}
// bytes, boxes of {head_dim, rows, 1, 1} (whole rows, unswizzled: the converters read them as they lie).
static inline CUresult bf16pf_map_8bit(cuda_tma_encode_fn encode, CUtensorMap *map, void *base, int hd, int bs,
                                       int n_kv, int n_blocks, int rows) {
    const cuuint64_t dims[4] = {(cuuint64_t)hd, (cuuint64_t)bs, (cuuint64_t)n_kv, (cuuint64_t)n_blocks};
    const cuuint64_t strides[3] = {(cuuint64_t)hd, (cuuint64_t)hd * bs, (cuuint64_t)hd * bs * n_kv};
    const cuuint32_t box[4] = {(cuuint32_t)hd, (cuuint32_t)rows, 1, 1}, es[4] = {1, 1, 1, 1};
    return encode(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 4, base, dims, strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
                  CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

// Whether the kernel covers a cache of head_dim hd, blocks of bs tokens, G query heads a KV head:
// whole swizzle atoms per box (bs a multiple of 8), tiles made of whole boxes, at least one token
// in a CTA's 128 rows.
static inline bool bf16pf_fits(int hd, int bs, int G) {
    const int bn = hd == 256 ? 64 : 128;
    return (hd == 64 || hd == 128 || hd == 256) && G >= 1 && G <= 128 && bs % 8 == 0 && (bn % bs == 0 || bs % bn == 0);
}
