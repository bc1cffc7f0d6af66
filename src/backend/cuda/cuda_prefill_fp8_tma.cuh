// cuda_prefill_fp8_tma.cuh — the FP8 (e4m3) wgmma prefill built the FA3 way, for head_dim 64 and
// 128 in every accumulation mode; included by cuda_prefill_fp8.cu after cuda_prefill_fp8.cuh, whose
// Q load, row set-up, softmax and output store (fp8pf::) it shares. Owns: the TMA tensor maps of a
// layer's cache, the copy warp, the mbarrier pipeline, the producer's V transpose from a swizzled
// stage and the consumers' schedules. For long prefills V arrives transposed already
// (cuda_prefill_vt.cuh): the copy warp bulk-loads each tile of Vᵀ into the raw-V ring slot and the
// transposers sit out.
//
// Why this shape: a paged cache costs the older kernel (cuda_prefill_fp8.cuh) address arithmetic
// per 16 bytes and a V transpose inside its consumers, and its two warpgroups run in lockstep, so
// both exponentiate while the tensor cores idle. Here one TMA box per cache block needs no address
// arithmetic, dedicated warps transpose V, and the consumers' schedules keep the tensor cores fed.
//
// One CTA = (sequence, 64·NC query rows, KV head), 128·(NC + 1) threads:
//   warpgroup 0, the producer (40 registers): warp 0 copies K and raw V straight from the paged
//     cache through the block table into HD-byte-swizzled rows, waiting for free slots itself —
//     its lane 0 issues one TMA box per cache block (≈ 250 cycles a box, which is why CUDA's
//     default cache block is 64 tokens, not 16); warps 1-3 transpose each raw V tile into Vᵀ (the
//     older kernel's core-matrix layout and key permutation) with ldmatrix.trans / stmatrix,
//     zeroing keys past the CTA's last position; for per-token-head layers (TS) warps 1-2
//     transpose and warp 3 turns each tile's K and V row scales into the consumers' factors
//     (tok_slot);
//   NC = 2 (single and every:N): two consumer warpgroups (232 registers), 64 query rows each,
//     which take turns (a named-barrier ping-pong) issuing Q·Kᵀ(t) with P·V(t−1), so one's softmax
//     runs under the other's tensor-core work; then every:N folds T(t−1) after absolute tiles N−1,
//     2N−1, … (o = o·A + T, A the product of the α since the last promotion), T ·= α(t), and P(t)
//     is packed into the registers P·V(t−1) read;
//   NC = 3 (two-level, the default mode, at head_dim 64 and 128): three consumer warpgroups of
//     152 registers, no ping-pong; the softmax takes turns among a sub-partition's three consumer
//     warps, which share its MUFU; T in two 64-column halves (head_dim 128) or one (64); the rows'
//     sums of P from the tensor core. At head_dim 64 a tile's MMAs are half of head_dim 128's and its
//     softmax the same, so the third warp a sub-partition pays most there: 1.2-1.4× two consumers
//     (bench/prefill_attention/RESULTS.md#three-consumers-at-head_dim-64).
// Stages: K and raw V in KS ring slots (mbarriers kfull/vfull with TMA byte counts, kempty from the
// consumers after their Q·Kᵀ, vempty from the transposers), Vᵀ in 2 (tfull from the transposers,
// tempty after P·V). The query tiles run longest first.
// The numbers are those of the older kernel — the same tiles at the same absolute key positions,
// the same softmax and the same fold per tile (test_cuda_ops checks both against the CPU's FP8
// emulation) — except the three consumers' row sums l, which are Σ of the e4m3 P a tile, the
// weights P·V uses, not Σ of the FP32 P. Figures and the variants measured and not kept:
// bench/prefill_attention/RESULTS.md.
#pragma once

#include <type_traits>

#include <cuda.h>  // CUtensorMap and cuTensorMapEncodeTiled's enums (types only; the function comes from cudart)

#include "cuda_tma.cuh"

namespace fp8tma {

using namespace tmah;  // (the copy and barrier primitives, cuda_tma.cuh)

constexpr int BN = 128;  // keys a tile
// Consumer warpgroups a CTA: three for two-level (three warps a sub-partition hide the softmax
// chain's latency), else two (single and every:N do not fit three consumers' registers).
template <int HD, fp8_accum_mode ACC> struct consumers {
    static constexpr int NC = ACC == FP8_TWO_LEVEL ? 3 : 2;
};
// K / raw-V ring slots: 3 for two consumers, 4 for three
template <int NC> struct ring { static constexpr int KS = NC == 3 ? 4 : 3; };
constexpr int N_BARS = 6 * 4 + 4;  // (six rings of up to 4 slots, and the Vᵀ pair's full / empty)
// Per-token-head scales (fp8_per_token_head): a tile's per-key factors, written by producer warp 3
// (tok_load, tok_store) into a ring of KS slots beside K's (sfull / sempty): ks, the keys' K scales;
// ws, their V scales over the CTA's running reference r (the largest V scale of its tiles so far, so
// P·ws stays within P's e4m3 range); rho = r(previous tile) / r, which the consumers fold into the α
// of o; r. Keys past the CTA's last position get 0 (their pages may hold anything).
struct tok_slot {
    float ks[BN], ws[BN];
    float rho, r, pad[2];
};
constexpr int TOK_SLOT_BYTES = (int)sizeof(tok_slot);
// shared memory from a 1024-byte-aligned base (swizzle atoms: 8 rows of HD bytes): Q of the NC
// consumers, K ring, raw V ring, Vᵀ pair, Q scales, mbarriers, and (three consumers) 256 bytes of
// e4m3 ones: the B operand of the n8 MMA that sums each row's P
template <int HD, int NC> struct lay {
    static constexpr int KS = ring<NC>::KS;
    static constexpr int Q_BYTES = 64 * HD, TILE_BYTES = BN * HD;
    static constexpr int OFF_K = NC * Q_BYTES, OFF_V = OFF_K + KS * TILE_BYTES, OFF_VT = OFF_V + KS * TILE_BYTES;
    static constexpr int OFF_QS = OFF_VT + 2 * TILE_BYTES, OFF_BAR = OFF_QS + 64 * NC * 4;
    static constexpr int OFF_ONE = (OFF_BAR + N_BARS * 8 + 127) / 128 * 128, ONE_BYTES = NC == 3 ? 256 : 0;
    static constexpr int OFF_TS = OFF_ONE + ONE_BYTES;  // per-token-head factors: KS slots of tok_slot
    static constexpr int SMEM = OFF_TS + KS * TOK_SLOT_BYTES + 1024;  // (+ the alignment slack)
};
enum { BAR_Q = 2, BAR_TURN = 5 };   // named barriers (0 is __syncthreads): BAR_Q + wg, BAR_TURN + wg; the three
// consumers' softmax turns take 1 and 5-15
// wgmma descriptor of a K-major operand in HD-byte swizzled rows: head_dim 128, 128-byte swizzle
// (8-row atoms of 1024 bytes, mode 1); head_dim 64, 64-byte swizzle (atoms of 512 bytes, mode 2).
// The k-step's 32 bytes are added to the start address.
template <int HD> __device__ __forceinline__ uint64_t desc_sw(const void *smem) {
    static_assert(HD == 64 || HD == 128, "TMA kernel: head_dim 64 or 128");
    return (uint64_t)((sa(smem) & 0x3FFFF) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)(8 * HD >> 4) << 32) |
           ((uint64_t)(HD == 128 ? 1 : 2) << 62);
}

// Vᵀ (the older kernel's core-matrix layout and key permutation, as fp8pf::transpose_v writes it)
// from a raw stage in HD-byte swizzled rows (head_dim 128: key r's 16-byte chunk j at
// r·128 + (j ^ r%8)·16; head_dim 64: at r·64 + (j ^ (r/2)%4)·16, TMA's 64-byte swizzle),
// keys past klim (tile-relative) as 0, with the matrix-transpose loads and stores: per unit of
// 16 keys × 32 bytes, one
// ldmatrix.x4.trans (8 × 8 16-bit matrices: byte pairs of one key, 2 keys a register after the
// transpose), 4 byte permutes (keys 2c, 2c+1 from one matrix and 2c+8, 2c+9 from the next: one
// word of 4 key positions), one stmatrix.x4 — ≈ 8 instructions for 512 bytes a warp, where 4-byte
// loads and stores spend ≈ 108.
// Lanes give the row addresses: ldmatrix's rows are swizzled key rows (conflict-free), stmatrix's
// rows are Vᵀ rows (one d each); each stmatrix matrix mixes even and odd d (rows j < 4: d = 2j
// (+1), j ≥ 4: 2j + 1 (−1)) so its 8 rows hit 32 banks.
template <int HD>
__device__ __forceinline__ void transpose_ldsm(const uint8_t *vr, uint8_t *vt, int warp, int lane, int nwarp,
                                               int klim) {
    const int m = lane >> 3, j = lane & 7, c = lane & 3;
    // the row's chunk 2s + (m>>1), swizzled by the key's row bits: key % 8 = j (128-byte rows), or
    // (key / 2) % 4 = (j / 2) % 4 (64-byte rows; a unit's keys start at multiples of 16)
    const uint32_t x = (uint32_t)((m >> 1) ^ (HD == 128 ? j : (j >> 1) & 3));
    const uint32_t ld0 = sa(vr) + (uint32_t)(((m & 1) * 8 + j) * HD);       // key (m&1)·8 + j of the unit
    const int dr = 16 * (m >> 1) + 2 * j + ((m & 1) ^ (j >> 2));            // the stmatrix row's d within the unit
    const uint32_t st0 = sa(vt) + (uint32_t)((dr >> 3) * 1024 + (dr & 7) * 16);
    const uint32_t s0 = (lane >> 2) < 4 ? 0x6420u : 0x7531u,
                   s1 = s0 ^ 0x1111u; // even-d / odd-d bytes (swapped for rows j >= 4)
    for (int kg = warp; kg < BN / 16; kg += nwarp) {
        uint32_t mask = 0xffffffffu;
        if (kg * 16 + 15 > klim) {  // keys past klim as 0 (the CTA's last tile)
            const int k0 = kg * 16 + 2 * c;
            mask = (k0 <= klim ? 0xffu : 0u) | (k0 + 1 <= klim ? 0xff00u : 0u) | (k0 + 8 <= klim ? 0xff0000u : 0u) |
                   (k0 + 9 <= klim ? 0xff000000u : 0u);
        }
        // two units' loads before their stores (one unit at a time waits out each ldmatrix)
#pragma unroll
        for (int s = 0; s < HD / 32; s += 2) {
            uint32_t r[2][4];
#pragma unroll
            for (int u = 0; u < 2; u++)
                asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                             : "=r"(r[u][0]), "=r"(r[u][1]), "=r"(r[u][2]), "=r"(r[u][3])
                             : "r"(ld0 + (uint32_t)(kg * 16 * HD) + ((((uint32_t)(2 * (s + u))) ^ x) << 4))
                             : "memory");
#pragma unroll
            for (int u = 0; u < 2; u++) {
                const uint32_t e0 = __byte_perm(r[u][0], r[u][1], s0) & mask,
                               o0 = __byte_perm(r[u][0], r[u][1], s1) & mask;
                const uint32_t e1 = __byte_perm(r[u][2], r[u][3], s0) & mask,
                               o1 = __byte_perm(r[u][2], r[u][3], s1) & mask;
                asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(
                                 st0 + (uint32_t)kg * 128u + (uint32_t)(s + u) * 4096u),
                             "r"(e0), "r"(o0), "r"(e1), "r"(o1)
                             : "memory");
            }
        }
    }
}

// A lane's share of tile t's per-token-head scales kts / vts ([n_blocks][n_kv][bs]): keys 2·lane, +1,
// +64, +65, 0 past p_last. Loaded a tile ahead of tok_store, so that the loads' latency passes under
// the wait for a free slot.
struct tok_raw {
    float ks[4], vs[4];
};
__device__ __forceinline__ void tok_load(tok_raw &x, const float *kts, const float *vts, const int32_t *bt, int t,
                                         int p_last, int n_kv, int g, int bs, int lane) {
#pragma unroll
    for (int u = 0; u < 4; u++) {
        const int kp = t * BN + 2 * lane + (u & 1) + 64 * (u >> 1);
        x.ks[u] = x.vs[u] = 0.0f;
        if (kp <= p_last) {
            const size_t i = ((size_t)bt[kp / bs] * n_kv + g) * bs + kp % bs;
            x.ks[u] = kts[i];
            x.vs[u] = vts[i];
        }
    }
}
// The tile's tok_slot from the warp's tok_raw; r_run, the CTA's reference V scale, is raised to the
// tile's largest (the same in every lane).
__device__ __forceinline__ void tok_store(tok_slot *d, float &r_run, const tok_raw &x, int lane) {
    float mx = fmaxf(fmaxf(x.vs[0], x.vs[1]), fmaxf(x.vs[2], x.vs[3]));
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    const float r = fmaxf(r_run, mx), rinv = r > 0.0f ? 1.0f / r : 0.0f;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        *(float2 *)(d->ks + 2 * lane + 64 * h) = make_float2(x.ks[2 * h], x.ks[2 * h + 1]);
        *(float2 *)(d->ws + 2 * lane + 64 * h) = make_float2(x.vs[2 * h] * rinv, x.vs[2 * h + 1] * rinv);
    }
    if (lane == 0) d->rho = r > 0.0f ? r_run / r : 1.0f, d->r = r;
    r_run = r;
}
// A consumer's side of a tok_slot: tok_take waits for it (full, parity par) and multiplies the thread's
// scores by their keys' K scales; tok_done, after the softmax, folds rho into o's α (the softmax has
// already rescaled l with the plain α), keeps r for the store and frees the slot (empty).
__device__ __forceinline__ void tok_take(float *sacc, const tok_slot &d, uint64_t *full, uint32_t par, int c) {
    mbar_wait(full, par);
    fp8pf::key_scales<BN>(sacc, d.ks, c);
}
__device__ __forceinline__ void tok_done(const tok_slot &d, uint64_t *empty, float (&alpha)[2], float &rcur) {
    const float rho = d.rho;
    rcur = d.r;
    mbar_arrive(empty);
    alpha[0] *= rho, alpha[1] *= rho;
}

}  // namespace fp8tma

// HD: head_dim, 128 or 64. ACC: the accumulation mode (every:N with N = a.n_every) — the older
// kernel's modes (cuda_prefill_fp8.cuh, softmax_pv), with tile t's rescale and P·V(t) a tile apart.
// every:N rescales o once a promotion by the product of the tiles' α (the older kernel: by each α in
// turn — the same up to float rounding; the CPU emulation needs no rescale, it knows the exact max).
// NC (consumers above): with three, at 512 threads, the consumers take 152 registers (head_dim 128:
// o 64 + S 64 + P 16), so no P·V under a warpgroup's own softmax and T in two 64-column halves. kmap / vmap: the
// layer's K and V cache as 4-d tensors {head_dim bytes, kv_block_tokens, n_kv_heads, n_blocks},
// boxes of {head_dim, rows, 1, 1}, swizzled. CAP: soft-capped scores (fp8pf::softmax_s). TS:
// per-token-head scales (attn_args.kts, vts): producer warp 3 (which then does not transpose) writes
// each tile's tok_slot, the consumers wait for it (sfull) before their softmax, which applies it, and
// free it (sempty) after; o's α carries rho, the store the last r; the three-consumer loop sums l in
// FP32 (P·ws is not the P the denominator sums).
template <int HD, fp8_accum_mode ACC, bool CAP = false, bool TS = false>
__global__ void __launch_bounds__(128 * (fp8tma::consumers<HD, ACC>::NC + 1), 1)
    k_prefill_fp8_tma(const __grid_constant__ CUtensorMap kmap, const __grid_constant__ CUtensorMap vmap,
                      const __grid_constant__ attn_args a) {
    using namespace fp8tma;
    constexpr int NC = consumers<HD, ACC>::NC;
    bf16 *out = a.out;
    const bf16 *q = a.q;
    const int32_t *qstart = a.qstart, *pos_arr = a.pos, *btab = a.btab, *vt_start = a.vt_start;
    const int max_blocks = a.max_blocks, n_kv = a.n_kv, G = a.G, bs = a.bs, rows_box = a.rows_box, window = a.window;
    const int n_every = a.n_every;
    const float scale = a.scale, *scales = a.scales;
    const float cap2 = a.softcap * 1.4426950408889634f;  // (CAP) the cap in log2 units
    const uint8_t *vtg = a.vtg;
    typedef lay<HD, NC> L;
    constexpr int KS = L::KS;
    extern __shared__ uint8_t fp8tma_smem_raw[];
    // (an offset into the shared array, not integer arithmetic on its address, so that the
    // compiler keeps every access in the shared space: 32-bit LDS/STS, not generic LD/ST)
    uint8_t *sm = fp8tma_smem_raw + ((1024u - (sa(fp8tma_smem_raw) & 1023u)) & 1023u);
    uint8_t *Qs = sm, *Ks = sm + L::OFF_K, *Vs = sm + L::OFF_V, *Vt = sm + L::OFF_VT;
    float *qscale_s = (float *)(sm + L::OFF_QS);
    tok_slot *tsl = (tok_slot *)(sm + L::OFF_TS);  // (TS) [KS], beside K's ring slots
    uint64_t *bars = (uint64_t *)(sm + L::OFF_BAR);
    uint64_t *kfull = bars, *vfull = bars + KS, *kempty = bars + 2 * KS, *tfull = bars + 3 * KS, *tempty = tfull + 2,
             *vempty = tempty + 2, *sfull = vempty + KS, *sempty = sfull + KS;
    // Producer warp 0 issues the copies alone (it waits for free slots itself) and warps 1-3
    // transpose. The query tiles run longest first (the grid's y in reverse). Two consumers take
    // turns issuing their MMAs (ping-pong); three take turns in their softmax instead (their loop below).
    constexpr bool pingpong = NC == 2;
    constexpr int n_tr = TS ? 64 : 96;  // transposing threads (TS: warp 3 prepares the scales instead)
    const int s = blockIdx.x, g = blockIdx.z;
    fp8pf::cta_tiles ct = {};
    if (!ct.begin(qstart, pos_arr, 64 * NC, G, window, BN, true)) return;  // (the whole CTA, before any barrier)
    const int n = ct.t1 - ct.t0 + 1, t0 = ct.t0, p_last = ct.p_last;
    // pre: this sequence's Vᵀ tiles come from k_prefill_vt (cuda_prefill_vt.cuh) — the copy warp
    // loads each into the raw-V ring slot beside its K (vfull), the consumers read it there and free
    // the slot after P·V (vempty), and the transposers sit out
    const int vt0 = vtg ? vt_start[s] : 0;
    const bool pre = __shfl_sync(0xffffffffu, vtg && vt_start[s + 1] > vt0 ? 1 : 0, 0) != 0;
    const uint8_t *vt_seq =
        pre ? vtg + ((size_t)vt0 * n_kv + g) * L::TILE_BYTES : nullptr; // tile t at + t·n_kv·TILE_BYTES
    if (threadIdx.x == 0) {
        for (int i = 0; i < KS; i++) {
            mbar_init(&kfull[i], 1);
            mbar_init(&vfull[i], 1);
            mbar_init(&kempty[i], 128 * NC);
        }
        for (int i = 0; i < 2; i++) { mbar_init(&tfull[i], n_tr); mbar_init(&tempty[i], 128 * NC); }
        for (int i = 0; i < KS; i++) {
            mbar_init(&vempty[i], pre ? 128 * NC : n_tr);
            mbar_init(&sfull[i], 32);
            mbar_init(&sempty[i], 128 * NC);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    if constexpr (L::ONE_BYTES > 0) {  // the ones block (e4m3 1.0 = 0x38), made visible to the wgmma's async proxy
        if (threadIdx.x < L::ONE_BYTES / 4) {
            ((uint32_t *)(sm + L::OFF_ONE))[threadIdx.x] = 0x38383838u;
            fence_proxy_async();
        }
    }
    __syncthreads();

    if (threadIdx.x < 128) {  // ---- producer
        fp8tma::reg_dealloc<40>();
        const int ptid = threadIdx.x;
        const int32_t *bt = btab + (size_t)s * max_blocks;
        // warp 0 copies, warps 1-3 transpose.
        if (ptid < 32) {
            if (ptid == 0) {  // one TMA box per cache block (or per 128-key tile of a larger block)
                for (int i = 0; i < n; i++) {
                    const int t = t0 + i, st = i % KS, nb = min(BN / rows_box, (p_last - t * BN) / rows_box + 1);
                    if (i >= KS) {
                        mbar_wait(&kempty[st], ((i / KS) - 1) & 1);
                        mbar_wait(&vempty[st], ((i / KS) - 1) & 1);
                    }
                    const uint32_t bytes = (uint32_t)(nb * rows_box * HD);
                    mbar_expect_tx(&kfull[st], bytes);
                    mbar_expect_tx(&vfull[st], pre ? (uint32_t)L::TILE_BYTES : bytes);
                    if (pre)
                        bulk_load(Vs + st * L::TILE_BYTES, vt_seq + (size_t)t * n_kv * L::TILE_BYTES, L::TILE_BYTES,
                                  &vfull[st]);
                    for (int j = 0; j < nb; j++) {
                        const int kp = t * BN + j * rows_box, blk = bt[kp / bs], r0 = kp % bs;
                        tma_load(Ks + st * L::TILE_BYTES + j * rows_box * HD, &kmap, &kfull[st], 0, r0, g, blk);
                        if (!pre)
                            tma_load(Vs + st * L::TILE_BYTES + j * rows_box * HD, &vmap, &vfull[st], 0, r0, g, blk);
                    }
                }
            }
            return;
        }
        if (TS && ptid >= 96) {  // warp 3: each tile's tok_slot, up to KS tiles ahead
            const int lane = ptid & 31;
            float r_run = 0.0f;  // the CTA's reference V scale
            tok_raw nx;
            if (n > 0) tok_load(nx, a.kts, a.vts, bt, t0, p_last, n_kv, g, bs, lane);
            for (int i = 0; i < n; i++) {
                const tok_raw cur = nx;
                if (i + 1 < n) tok_load(nx, a.kts, a.vts, bt, t0 + i + 1, p_last, n_kv, g, bs, lane);
                const int st = i % KS;
                if (i >= KS) mbar_wait(&sempty[st], ((i / KS) - 1) & 1);
                tok_store(tsl + st, r_run, cur, lane);
                mbar_arrive(&sfull[st]);
            }
            return;
        }
        if (pre) return;
        for (int i = 0; i < n; i++) {
            const int st = i % KS, b = i & 1;
            mbar_wait(&vfull[st], (i / KS) & 1);
            if (i >= 2) mbar_wait(&tempty[b], ((i >> 1) - 1) & 1);  // P·V(i − 2) done with Vᵀ slot b
            transpose_ldsm<HD>(Vs + st * L::TILE_BYTES, Vt + b * L::TILE_BYTES, (ptid >> 5) - 1, ptid & 31, n_tr / 32,
                               p_last - (t0 + i) * BN);
            fence_proxy_async();  // Vᵀ (generic-proxy stores) visible to the wgmma
            mbar_arrive(&tfull[b]);
            mbar_arrive(&vempty[st]);
        }
        return;
    }

    // ---- consumers: warpgroups 1 .. NC, 64 query rows each
    fp8tma::reg_alloc<NC == 2 ? 232 : 152>();
    const int tid = threadIdx.x - 128, wg = tid >> 7, warp = tid >> 5, lane = tid & 31, rr = lane >> 2, c = lane & 3;
    const int n_heads = n_kv * G;
    // this warpgroup's Q rows of ci (e4m3, per-row scales) into shared memory, its threads' rows rw set
    // up against KV head gi; returns the head's V descale
    auto q_rows = [&](fp8pf::rows2 &rw, const fp8pf::cta_tiles &ci, int gi) {
        fp8pf::load_q<HD>(Qs, qscale_s, q, tid, ci.q0, ci.n_q, ci.tok_per_cta, ci.t_begin, n_heads, gi, G);
        rw.setup(warp, rr, ci.q0, ci.n_q, ci.tok_per_cta, G, ci.t_begin, pos_arr, window);
        fence_proxy_async();                   // Q visible to the wgmma
        fp8tma::bar_sync(BAR_Q + wg, 128);      // this warpgroup's Q rows and scales written
        rw.scales(qscale_s, warp, rr, scales[gi], scale);
        return scales[KV_MAX_HEADS + gi];
    };
    if constexpr (NC == 3) {  // per tile: Q·Kᵀ, softmax, P, then
        // T = P·Vᵀ in two 64-column halves, each folded into o (o = o·α + T, two-level's numbers), and
        // the rows' sums of P from the tensor core: P against a ones column (m64n8k32 beside the first
        // half), l = l·α + Σ e4m3(P) a tile — the weights P·V used, so o / l normalises exactly what
        // was summed (cheaper than 64 FADDs a thread a tile, which the other loops keep).
        // The descriptors' low words (start address / 16 in bits 0-13, which hold any shared address
        // without carrying, and the leading byte offset) as a base plus the operand's byte offset /
        // 16, their high words (stride, swizzle) constants; the warpgroup index goes through a shuffle
        // so that ptxas knows it uniform and keeps Q's descriptors in uniform registers.
        const int wgu = __shfl_sync(0xffffffffu, wg, 0);
        const uint32_t qlo = (uint32_t)wgmma_desc(Qs + wgu * L::Q_BYTES, 128, HD * 8), klo = (uint32_t)desc_sw<HD>(Ks),
                       vlo = (uint32_t)wgmma_desc(pre ? Vs : Vt, 128, BN * 8),
                       olo = (uint32_t)wgmma_desc(sm + L::OFF_ONE, 128, 256);
        constexpr uint32_t QHI = (uint32_t)(HD * 8 >> 4),
                           KHI = (uint32_t)(8 * HD >> 4) | ((uint32_t)(HD == 128 ? 1 : 2) << 30),
                           VHI = (uint32_t)(BN * 8 >> 4), OHI = 256 >> 4;
        auto dj = [](uint32_t lo, uint32_t hi) { return ((uint64_t)hi << 32) | (uint64_t)lo; };
        // The softmax takes turns among the three consumer warps of a sub-partition (warp k of each
        // warpgroup: they share its MUFU): warp (w, k) waits on named barrier tok(w, k) — 64 threads,
        // itself and the arrival of warp (w − 1, k) — before its max tree and arrives on tok(w + 1, k)
        // after packing P. ptxas moves that arrival up into the exponentials (after ≈ 33 of the 64 here;
        // written before the packing it lands after ≈ 7: level), so a warp's turn is its max tree and
        // its first exponentials, and the next warp's max tree runs under its remaining ones.
        // The wait comes before the max tree: staggering the max trees is what pays, not excluding the
        // other warps from the MUFU (the variants are in bench/prefill_attention/RESULTS.md).
        const int kw = __shfl_sync(0xffffffffu, warp & 3, 0);
        auto tok = [](int w, int k) { const int j = 4 * w + k; return j == 0 ? 1 : 4 + j; };  // ids 1, 5 .. 15
        const int tok_mine = tok(wgu, kw), tok_next = tok((wgu + 1) % NC, kw);
        int st = 0;          // K's ring slot, i % KS
        uint32_t kpar = 0;   // its phase parity, (i / KS) & 1
        uint32_t kof = 0, vof = 0;  // K's slot and Vᵀ's slot ((i & 1)) as byte offsets / 16
        // The CTA's rows (ci, KV head gi) as a function called once: the same numbers as the code
        // written inline, which ptxas schedules 1–2 % slower.
        auto run = [&](const fp8pf::cta_tiles &ci, int gi) {
            const int n = ci.t1 - ci.t0 + 1, t0 = ci.t0;
            fp8pf::rows2 rw;
            const float vscale = q_rows(rw, ci, gi);
            float o3[HD / 2], m3[2] = {-INFINITY, -INFINITY}, l3[2] = {0.0f, 0.0f}, rcur = 1.0f;
#pragma unroll
            for (int j = 0; j < HD / 2; j++) o3[j] = 0.0f;
            if (a.sinks) rw.sink_init(m3, l3, a.sinks, gi, G, c, !TS);  // (l3: the tensor core's row sums, TS a lane's)
            if (wgu == NC - 1 && n > 0) fp8tma::bar_arrive(tok(0, kw), 64);  // warpgroup 1 starts
            for (int i = 0; i < n; i++) {
                mbar_wait(&kfull[st], kpar);
                float sacc[BN / 2];
                wgmma_fence();
#pragma unroll
                for (int kk = 0; kk < HD / 32; kk++)
                    fp8pf::ss<BN>(sacc, dj(qlo + (uint32_t)(kk * 16), QHI), dj(klo + kof + (uint32_t)(kk * 2), KHI),
                                  kk > 0);
                wgmma_commit();
                wgmma_wait<0>();
                fp8pf::fence_acc<BN>(sacc);
                mbar_arrive(&kempty[st]);
                float alpha[2];
                if constexpr (TS) tok_take(sacc, tsl[st], &sfull[st], kpar, c);  // (before the turn: no MUFU)
                fp8tma::bar_sync(tok_mine, 64);
                fp8pf::softmax_s<BN, TS, CAP, TS>(sacc, t0 + i, c, rw.sc, rw.lo, rw.pos, m3, l3, alpha, cap2,
                                                  tsl[st].ws);
                if constexpr (TS) tok_done(tsl[st], &sempty[st], alpha, rcur);
                uint32_t pa3[BN / 32][4];
                fp8pf::pack_p<BN>(sacc, pa3);
                if (wgu != NC - 1 || i + 1 < n) fp8tma::bar_arrive(tok_next, 64);  // (n turns each)
                if (pre) mbar_wait(&vfull[st], kpar);
                else mbar_wait(&tfull[i & 1], (i >> 1) & 1);
                float ts[4];  // the n8 MMA's rows rr and rr + 8 (its 8 columns equal): Σ e4m3(P) a row
                constexpr int TW = HD == 128 ? HD / 2 : HD;  // T's columns a pass
                // d in [h·TW, (h+1)·TW): o3[h·TW/2 ..] (8 columns a 4 registers)
#pragma unroll
                for (int h = 0; h < HD / TW; h++) {
                    float th[TW / 2];
                    wgmma_fence();
#pragma unroll
                    for (int kk = 0; kk < BN / 32; kk++)
                        fp8pf::rs<TW>(th, pa3[kk], dj(vlo + vof + (uint32_t)((h * TW * BN + kk * 256) >> 4), VHI),
                                      kk > 0);
                    if (h == 0 && !TS) {
#pragma unroll
                        for (int kk = 0; kk < BN / 32; kk++) wgmma_rs_n8(ts, pa3[kk], dj(olo, OHI), kk > 0);
                    }
                    wgmma_commit();
                    wgmma_wait<0>();
                    fp8pf::fence_acc<TW>(th);
                    if (h == 0 && !TS) {
                        wgmma_fence_acc4(ts);
                        l3[0] = fmaf(l3[0], alpha[0], ts[0]);  // row rr (columns 2c, 2c + 1)
                        l3[1] = fmaf(l3[1], alpha[1], ts[2]);  // row rr + 8
                    }
#pragma unroll
                    for (int j = 0; j < TW / 2; j++)
                        o3[h * (TW / 2) + j] = fmaf(o3[h * (TW / 2) + j], alpha[(j >> 1) & 1], th[j]);
                }
                mbar_arrive(pre ? &vempty[st] : &tempty[i & 1]);
                if (++st == KS) st = 0, kpar ^= 1;
                kof = (uint32_t)st * (uint32_t)(L::TILE_BYTES >> 4);
                vof = pre ? kof : vof ^ (uint32_t)(L::TILE_BYTES >> 4);
            }
            fp8pf::rows2 ro;
            ro.setup(warp, rr, ci.q0, ci.n_q, ci.tok_per_cta, G, ci.t_begin, pos_arr, window);
            fp8pf::store_rows<HD, TS>(out, o3, l3, m3, nullptr, ro.on, ro.tok, ro.head, n_heads, gi, G, vscale * rcur,
                                      c);
        };
        run(ct, g);
        return;
    }
    // (two consumers: every:N and single; two-level returned above)
    fp8pf::rows2 rw;
    const float vscale = q_rows(rw, ct, g);
    const uint8_t *qw = Qs + wg * L::Q_BYTES;

    float o[ACC != FP8_SINGLE ? HD / 2 : 1], tacc[HD / 2], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f},
                                                           rcur = 1.0f;
#pragma unroll
    for (int j = 0; j < HD / 2; j++) tacc[j] = 0.0f;
#pragma unroll
    for (int j = 0; j < (ACC != FP8_SINGLE ? HD / 2 : 1); j++) o[j] = 0.0f;
    if (a.sinks) rw.sink_init(m, l, a.sinks, g, G, c, false);
    // o = o·a + T (a: one factor per row, picked by (j >> 1) & 1): every:N's promotion
    auto fold = [&](const float (&a)[2]) {
        if constexpr (ACC != FP8_SINGLE) {  // (single has no o)
#pragma unroll
            for (int j = 0; j < HD / 2; j++) o[j] = fmaf(o[j], a[(j >> 1) & 1], tacc[j]);
        }
    };
    // every:N: tile t's P·V starts T afresh at the CTA's first tile and at multiples of N, and T is
    // promoted into o after tiles N−1, 2N−1, … and the last (absolute tile indices). ph = t % N of
    // the next tile whose P·V is issued; amul = the α product since the last promotion.
    int ph = ACC == FP8_EVERY_N ? t0 % n_every : 0;
    float amul[2] = {1.0f, 1.0f};
    uint32_t pa[BN / 32][4];
    auto v_wait = [&](int i) {  // tile i's Vᵀ in place
        if (pre) mbar_wait(&vfull[i % KS], (i / KS) & 1);
        else mbar_wait(&tfull[i & 1], (i >> 1) & 1);
    };
    auto pv_issue = [&](int i) {  // T (+)= P(i)·Vᵀ(i) (every:N starts T from zero when fresh)
        const uint8_t *vt = pre ? Vs + (i % KS) * L::TILE_BYTES : Vt + (i & 1) * L::TILE_BYTES;
        const int sd0 = ACC == FP8_EVERY_N && (i == 0 || ph == 0) ? 0 : 1;
#pragma unroll
        for (int kk = 0; kk < BN / 32; kk++)
            fp8pf::rs<HD>(tacc, pa[kk], wgmma_desc(vt + kk * 256, 128, BN * 8), kk == 0 ? sd0 : 1);
        wgmma_commit();
    };
    // one tile i; FIRST (tile 0) has no P·V(i − 1) to issue. (Two instances rather than
    // branches: ptxas serialises every wgmma when a wait's group count depends on a branch.)
    auto tile = [&](auto first, int i) {
        constexpr bool FIRST = decltype(first)::value;
        const int st = i % KS;
        mbar_wait(&kfull[st], (i / KS) & 1);
        if constexpr (!FIRST) v_wait(i - 1);
        float sacc[BN / 2];
        if (pingpong) fp8tma::bar_sync(BAR_TURN + wg, 256);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < HD / 32; kk++)
            fp8pf::ss<BN>(sacc, wgmma_desc(qw + kk * 256, 128, HD * 8), desc_sw<HD>(Ks + st * L::TILE_BYTES + kk * 32),
                          kk > 0);
        wgmma_commit();
        if constexpr (!FIRST) pv_issue(i - 1);
        if (pingpong && (wg == 0 || i + 1 < n))
            fp8tma::bar_arrive(BAR_TURN + (wg ^ 1), 256); // (turns balance: n each way)
        if constexpr (FIRST) wgmma_wait<0>();
        else wgmma_wait<1>();  // Q·Kᵀ(i) done, P·V(i − 1) may still run
        fp8pf::fence_acc<BN>(sacc);
        mbar_arrive(&kempty[st]);
        float alpha[2];
        if constexpr (TS) tok_take(sacc, tsl[st], &sfull[st], (uint32_t)(i / KS) & 1, c);
        fp8pf::softmax_s<BN, true, CAP, TS>(sacc, t0 + i, c, rw.sc, rw.lo, rw.pos, m, l, alpha, cap2, tsl[st].ws);
        if constexpr (TS) tok_done(tsl[st], &sempty[st], alpha, rcur);
        if constexpr (!FIRST) {  // P·V(i − 1) done: its P registers free for P(i)
            wgmma_wait<0>();
            fp8pf::fence_acc<HD>(tacc);
            mbar_arrive(pre ? &vempty[(i - 1) % KS] : &tempty[(i - 1) & 1]);
            if constexpr (ACC == FP8_EVERY_N) {
                if (ph == n_every - 1) {
                    fold(amul);
                    amul[0] = amul[1] = 1.0f;
                }
                ph = ph + 1 == n_every ? 0 : ph + 1;
            }
        }
        if constexpr (ACC == FP8_EVERY_N) amul[0] *= alpha[0], amul[1] *= alpha[1];
#pragma unroll
        for (int j = 0; j < HD / 2; j++) tacc[j] *= alpha[(j >> 1) & 1];
        fp8pf::pack_p<BN>(sacc, pa);
    };
    if (pingpong && wg == 1) fp8tma::bar_arrive(BAR_TURN, 256);  // warpgroup 1 (wg 0) takes the first turn
    tile(std::true_type(), 0);
    for (int i = 1; i < n; i++) tile(std::false_type(), i);
    v_wait(n - 1);
    wgmma_fence();
    pv_issue(n - 1);
    wgmma_wait<0>();
    fp8pf::fence_acc<HD>(tacc);
    if constexpr (ACC == FP8_EVERY_N) fold(amul);  // (the last tile is always promoted)
    fp8pf::rows2 ro;  // (the rows' tokens and heads again: not kept live through the tile loop)
    ro.setup(warp, rr, ct.q0, ct.n_q, ct.tok_per_cta, G, ct.t_begin, pos_arr, window);
    fp8pf::store_rows<HD>(out, ACC != FP8_SINGLE ? o : tacc, l, m, nullptr, ro.on, ro.tok, ro.head, n_heads, g, G,
                          vscale * rcur, c);
}

#include "cuda_prefill_vt.cuh"  // (the Vᵀ pass: its kernel uses transpose_ldsm above, its launch is used below)

// ---------------------------------------------------------------- host side


// A layer's K or V cache as {head_dim bytes, kv_block_tokens, n_kv_heads, n_blocks}, boxes of
// {head_dim bytes, rows, 1, 1} in head_dim-byte swizzle (128 or 64). False (message latched) if it
// cannot be encoded.
static bool fp8tma_map(struct cuda_backend *c, CUtensorMap *map, void *base, const struct kv_layer *l, int rows) {
    const cuda_tma_encode_fn encode = cuda_tma_encoder(c, "fp8 prefill (TMA)");
    if (!encode) return false;
    const cuuint64_t hd = (cuuint64_t)l->head_dim, bs = (cuuint64_t)l->kv_block_tokens;
    const cuuint64_t dims[4] = {hd, bs, (cuuint64_t)l->n_kv_heads, (cuuint64_t)l->n_blocks};
    const cuuint64_t strides[3] = {hd, hd * bs, hd * bs * (cuuint64_t)l->n_kv_heads};
    const cuuint32_t box[4] = {(cuuint32_t)hd, (cuuint32_t)rows, 1, 1}, es[4] = {1, 1, 1, 1};
    CUresult r =
        encode(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 4, base, dims, strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
               hd == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) {
        cuda_latch(c, OCT_EUNSUP, "fp8 prefill (TMA): cuTensorMapEncodeTiled failed (%d)", (int)r);
        return false;
    }
    return true;
}

// Whether the TMA kernel covers this layer: head_dim 128 or 64, whole swizzle atoms per box
// (kv_block_tokens a multiple of 8) and tiles made of whole boxes.
static bool fp8tma_fits(const struct kv_layer *l, int G) {
    const int bs = l->kv_block_tokens;
    return (l->head_dim == 128 || l->head_dim == 64) && 64 % G == 0 && bs % 8 == 0 &&
           (fp8tma::BN % bs == 0 || bs % fp8tma::BN == 0);
}

// The kernel for head_dim HD in mode ACC (soft-capped: CAP; per-token-head scales: TS): its consumer count,
// threads and shared memory.
template <int HD, fp8_accum_mode ACC, bool CAP = false, bool TS = false> struct fp8tma_kernel {
    static constexpr int NC = fp8tma::consumers<HD, ACC>::NC;
    static constexpr int THREADS = 128 * (NC + 1), SMEM = fp8tma::lay<HD, NC>::SMEM;
    // its shared-memory limit (once per backend, at its creation)
    static bool init(struct cuda_backend *c) {
        return !cuda_fail(c,
                          cudaFuncSetAttribute(k_prefill_fp8_tma<HD, ACC, CAP, TS>,
                                               cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM),
                          "cudaFuncSetAttribute(k_prefill_fp8_tma)");
    }
};

// Sets the TMA kernels' shared-memory limits at head_dim HD, every mode with and without soft-capping
// (once per backend, at its creation), with or without per-token-head scales (TS).
template <int HD, bool CAP, bool TS> static bool fp8tma_init_cap(struct cuda_backend *c) {
    return fp8tma_kernel<HD, FP8_TWO_LEVEL, CAP, TS>::init(c) && fp8tma_kernel<HD, FP8_EVERY_N, CAP, TS>::init(c) &&
           fp8tma_kernel<HD, FP8_SINGLE, CAP, TS>::init(c);
}
template <int HD, bool TS> static bool fp8tma_init(struct cuda_backend *c) {
    return fp8tma_init_cap<HD, false, TS>(c) && fp8tma_init_cap<HD, true, TS>(c);
}

// n_every: every:N's N (1 in the other modes)
template <int HD, fp8_accum_mode ACC, bool CAP = false, bool TS = false>
static void launch_prefill_fp8_tma(const struct attn_call *a, int n_every) {
    typedef fp8tma_kernel<HD, ACC, CAP, TS> K;
    struct cuda_backend *c = a->c;
    const struct kv_layer *l = a->l;
    const int rows = l->kv_block_tokens < fp8tma::BN ? l->kv_block_tokens : fp8tma::BN;
    CUtensorMap km, vm;
    if (!fp8tma_map(c, &km, l->k, l, rows) || !fp8tma_map(c, &vm, l->v, l, rows)) return;
    attn_args args = attn_args_of(a);
    args.rows_box = rows;
    args.n_every = n_every;
    args.vtg = launch_prefill_vt<HD>(c, l, a->bt);  // (cuda_prefill_vt.cuh)
    args.vt_start = c->cb.vt_start;
    const int qt = 64 * K::NC / a->G;
    dim3 grid(a->bt->n_seqs, (c->cb.max_q + qt - 1) / qt, l->n_kv_heads);
    k_prefill_fp8_tma<HD, ACC, CAP, TS><<<grid, K::THREADS, K::SMEM, c->stream>>>(km, vm, args);
    CUDA_LAUNCHED(c, "attention prefill (fp8 wgmma, TMA)");
}

// The call's instance by head_dim, accumulation mode and soft-capping (TS: per-token-head layers').
template <int HD, bool CAP, bool TS> static void launch_prefill_fp8_tma_mode(const struct attn_call *a) {
    const int n_every = fp8_every(a->p);
    switch (fp8_mode(a->p)) {
    case FP8_TWO_LEVEL: launch_prefill_fp8_tma<HD, FP8_TWO_LEVEL, CAP, TS>(a, n_every); break;
    case FP8_EVERY_N: launch_prefill_fp8_tma<HD, FP8_EVERY_N, CAP, TS>(a, n_every); break;
    case FP8_SINGLE: launch_prefill_fp8_tma<HD, FP8_SINGLE, CAP, TS>(a, n_every); break;
    }
}
template <bool TS> static void launch_prefill_fp8_tma_any(const struct attn_call *a) {
    const bool cap = a->p->softcap > 0, hd64 = a->l->head_dim == 64;
    if (cap) hd64 ? launch_prefill_fp8_tma_mode<64, true, TS>(a) : launch_prefill_fp8_tma_mode<128, true, TS>(a);
    else hd64 ? launch_prefill_fp8_tma_mode<64, false, TS>(a) : launch_prefill_fp8_tma_mode<128, false, TS>(a);
}
