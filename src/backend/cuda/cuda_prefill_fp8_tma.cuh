// cuda_prefill_fp8_tma.cuh — the FP8 wgmma prefill built the FA3 way (the default at head_dim
// 128 in every accumulation mode; OCTET_FP8_TMA=0 selects the older kernel), included by
// cuda_attention.cu after cuda_prefill_fp8.cuh, whose Q load, row set-up, softmax and output
// store (fp8pf::) it shares. Owns: the TMA tensor maps of a layer's cache, the copy warp (TMA),
// the mbarrier pipeline, the producer's V transpose from a swizzled stage, the two
// consumers' ping-pong. For long prefills V comes transposed already (cuda_prefill_vt.cuh): the
// copy warp bulk-loads each tile of Vᵀ into the raw-V ring slot and the transposers sit out.
//
// Why (bench/NOTES.md, session 15): per score the older kernel issues ≈ 27 instructions
// (an SM has 8 issue slots per score at the FP8 tensor rate), ≈ 4 of them computing cp.async
// addresses (a division by the block size per 16 bytes) and ≈ 2 transposing V, and its two
// warpgroups run in lockstep behind __syncthreads, so both exponentiate while the tensor
// cores idle (busy 12.6 % at 16k).
//
// One CTA = 384 threads = (sequence, 128 query rows, KV head), as the older kernel's 2 warpgroups:
//   warpgroup 0, the producer (40 registers): warp 0 copies K and raw V, straight from the paged
//     cache through the block table into 128-byte-swizzled rows, waiting for free slots itself —
//     its lane 0 issues one TMA box per cache block (no address arithmetic per 16 bytes; TMA
//     costs ≈ 250 cycles a box, which holds 16-token blocks to 473 TFLOP/s at 16k); warps 1-3
//     transpose each raw V tile into Vᵀ (the older kernel's core-matrix layout and key
//     permutation) with ldmatrix.trans / stmatrix, zeroing keys past the CTA's last position;
//   warpgroups 1 and 2, the consumers (232 registers), 64 query rows each: per tile, under a
//     named-barrier turn that alternates between them (ping-pong), Q·Kᵀ(t) and P·V(t−1) are
//     issued together; then S(t)'s softmax runs while P·V(t−1) and the other warpgroup's MMAs
//     are in flight; then T(t−1) is folded (two-level: o = o·α(t−1) + T; every:N: after absolute
//     tiles N−1, 2N−1, … o = o·A + T, A the product of the α since the last promotion; then T ·= α(t)
//     for every:N and single) and P(t) packed into the registers P·V(t−1) read.
// Two-level at head_dim 128 (the default mode) runs three consumers instead (512 threads, 192 rows,
// no ping-pong, no P·V under a warpgroup's own softmax; instead the softmax takes turns among a
// sub-partition's three consumer warps: NC above the kernel; OCTET_FP8_TMA_NC=2 selects the two above).
// Stages: K and raw V in 3 ring slots (4 for three consumers; mbarriers kfull/vfull with TMA byte counts or the copy
// warp's 32 arrivals, kempty from the consumers after their Q·Kᵀ, vempty from the transposers),
// Vᵀ in 2 (tfull from the transposers, tempty after P·V). The query tiles run longest first.
// H200, 16k d128 two-level (bench/NOTES.md, sessions 15-16): 4-byte transposes 397 TFLOP/s,
// ldmatrix transposes 483 (474-483 at 16-token blocks, 621-633 at 64 and 128).
// The numbers are those of the older kernel: the same tiles at the same absolute key positions,
// the same softmax and the same fold per tile (checked by test_cuda_ops against the CPU's FP8
// emulation: 396/396 on the H200, session 15) — except the three consumers' row sums l, which
// since session 35 are Σ of the e4m3 P a tile from the tensor core, not Σ of the FP32 P.
#pragma once

#include <type_traits>

#include <cuda.h>  // CUtensorMap and cuTensorMapEncodeTiled's enums (types only; the function comes from cudart)

namespace fp8tma {

constexpr int BN = 128;  // keys a tile
// K / raw-V ring slots: 3 for two consumers, 4 for three (+0.5 % at 16k with the exponentials'
// turns, session 37; level without them)
template <int NC> struct ring { static constexpr int KS = NC == 3 ? 4 : 3; };
constexpr int N_BARS = 4 * 4 + 4;  // (room for 4 slots)
// shared memory from a 1024-byte-aligned base (swizzle atoms: 8 rows of HD bytes): Q of the NC
// consumers, K ring, raw V ring, Vᵀ pair, Q scales, mbarriers, and (three consumers) 256 bytes of
// e4m3 ones: the B operand of the n8 MMA that sums each row's P
template <int HD, int NC = 2> struct lay {
    static constexpr int KS = ring<NC>::KS;
    static constexpr int Q_BYTES = 64 * HD, TILE_BYTES = BN * HD;
    static constexpr int OFF_K = NC * Q_BYTES, OFF_V = OFF_K + KS * TILE_BYTES, OFF_VT = OFF_V + KS * TILE_BYTES;
    static constexpr int OFF_QS = OFF_VT + 2 * TILE_BYTES, OFF_BAR = OFF_QS + 64 * NC * 4;
    static constexpr int OFF_ONE = (OFF_BAR + N_BARS * 8 + 127) / 128 * 128, ONE_BYTES = NC == 3 ? 256 : 0;
    static constexpr int SMEM = OFF_ONE + ONE_BYTES + 1024;  // (+ the alignment slack)
};
enum { BAR_Q = 2, BAR_TURN = 5 };   // named barriers (0 is __syncthreads): BAR_Q + wg, BAR_TURN + wg; the three
// consumers' softmax turns take 1 and 5-15 (the turns are off under BAR_TURN's lab bit)
__device__ __forceinline__ void bar_sync(int id, int n) { asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory"); }
__device__ __forceinline__ void bar_arrive(int id, int n) { asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(n) : "memory"); }
// registers moved between warpgroups (setmaxnreg): the producer gives, the consumers take
template <int N> __device__ __forceinline__ void reg_dealloc() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N)); }
template <int N> __device__ __forceinline__ void reg_alloc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N)); }

__device__ __forceinline__ uint32_t sa(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void mbar_init(uint64_t *b, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(sa(b)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(uint64_t *b, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(sa(b)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t *b) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(sa(b)) : "memory");
}
// (spin, lab: a suspend-time hint of 0, so that try_wait returns at once)
__device__ __forceinline__ void mbar_wait(uint64_t *b, uint32_t parity, bool spin = false) {
    uint32_t done;
    do {
        // (with a suspend-time hint the warp sleeps until the phase completes instead of spinning
        // on the issue slots the producer needs)
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2, %3;\nselp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(sa(b)), "r"(parity), "r"(spin ? 0u : 0x989680u)
                     : "memory");
    } while (!done);
}
// one box of a 4-d tensor map into shared memory, completing `bytes` on mbarrier b
__device__ __forceinline__ void tma_load(void *dst, const CUtensorMap *map, uint64_t *b, int c0, int c1, int c2, int c3) {
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], [%6];" ::"r"(
                     sa(dst)),
                 "l"((uint64_t)map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(sa(b))
                 : "memory");
}
// `bytes` contiguous bytes (a multiple of 16, both ends 16-byte aligned) into shared memory,
// completing them on mbarrier b
__device__ __forceinline__ void bulk_load(void *dst, const void *src, uint32_t bytes, uint64_t *b) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(sa(dst)), "l"(src),
                 "r"(bytes), "r"(sa(b))
                 : "memory");
}
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
// word of 4 key positions), one stmatrix.x4 — ≈ 8 instructions for 512 bytes a warp, where
// session 15's 4-byte loads and stores spent ≈ 108 (ncu, session 16: the consumers waited for Vᵀ
// in 22 % of all samples).
// Lanes give the row addresses: ldmatrix's rows are swizzled key rows (conflict-free), stmatrix's
// rows are Vᵀ rows (one d each); each stmatrix matrix mixes even and odd d (rows j < 4: d = 2j
// (+1), j ≥ 4: 2j + 1 (−1)) so its 8 rows hit 32 banks. Emulated bit for bit against transpose_sw
// (every lane, every unit) against session 15's transpose before it ran.
template <int HD>
__device__ __forceinline__ void transpose_ldsm(const uint8_t *vr, uint8_t *vt, int warp, int lane, int nwarp, int klim) {
    const int m = lane >> 3, j = lane & 7, c = lane & 3;
    // the row's chunk 2s + (m>>1), swizzled by the key's row bits: key % 8 = j (128-byte rows), or
    // (key / 2) % 4 = (j / 2) % 4 (64-byte rows; a unit's keys start at multiples of 16)
    const uint32_t x = (uint32_t)((m >> 1) ^ (HD == 128 ? j : (j >> 1) & 3));
    const uint32_t ld0 = sa(vr) + (uint32_t)(((m & 1) * 8 + j) * HD);       // key (m&1)·8 + j of the unit
    const int dr = 16 * (m >> 1) + 2 * j + ((m & 1) ^ (j >> 2));            // the stmatrix row's d within the unit
    const uint32_t st0 = sa(vt) + (uint32_t)((dr >> 3) * 1024 + (dr & 7) * 16);
    const uint32_t s0 = (lane >> 2) < 4 ? 0x6420u : 0x7531u, s1 = s0 ^ 0x1111u;  // even-d / odd-d bytes (swapped for rows j >= 4)
    for (int kg = warp; kg < BN / 16; kg += nwarp) {
        uint32_t mask = 0xffffffffu;
        if (kg * 16 + 15 > klim) {  // keys past klim as 0 (the CTA's last tile)
            const int k0 = kg * 16 + 2 * c;
            mask = (k0 <= klim ? 0xffu : 0u) | (k0 + 1 <= klim ? 0xff00u : 0u) | (k0 + 8 <= klim ? 0xff0000u : 0u) |
                   (k0 + 9 <= klim ? 0xff000000u : 0u);
        }
        // two units' loads before their stores (one unit at a time waited out each ldmatrix);
        // at the producer's 40 registers ptxas still permutes the first unit before the second
        // load, so the phase only went 1,855 → 1,747 cycles a tile (bench/NOTES.md, session 18)
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
                const uint32_t e0 = __byte_perm(r[u][0], r[u][1], s0) & mask, o0 = __byte_perm(r[u][0], r[u][1], s1) & mask;
                const uint32_t e1 = __byte_perm(r[u][2], r[u][3], s0) & mask, o1 = __byte_perm(r[u][2], r[u][3], s1) & mask;
                asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(st0 + (uint32_t)kg * 128u +
                                                                                                       (uint32_t)(s + u) * 4096u),
                             "r"(e0), "r"(o0), "r"(e1), "r"(o1)
                             : "memory");
            }
        }
    }
}

}  // namespace fp8tma

// PROF (kernel lab, OCTET_FP8_TMA_PROF=1): where a tile's cycles go. One thread of each role adds
// the clock64 deltas between its phase marks into prof[role·8 + phase] (role 0, 1: the consumer
// warpgroups, 2: the copy thread, 3: a transposing warp; slot 7: its tiles), and the host prints
// the means per tile after each launch (launch_prefill_fp8_tma).
template <bool ON> struct phase_clock {
    long long acc[7] = {0, 0, 0, 0, 0, 0, 0}, t = 0;
    __device__ __forceinline__ static long long now() {
        long long v;
        asm volatile("mov.u64 %0, %%clock64;" : "=l"(v)::"memory");
        return v;
    }
    __device__ __forceinline__ void start() { if constexpr (ON) t = now(); }
    __device__ __forceinline__ void mark(int k) {
        if constexpr (ON) { const long long v = now(); acc[k] += v - t; t = v; }
    }
    __device__ __forceinline__ void flush(unsigned long long *prof, int role, int tiles) {
        if constexpr (ON) {
            for (int k = 0; k < 7; k++) atomicAdd(prof + role * 8 + k, (unsigned long long)acc[k]);
            atomicAdd(prof + role * 8 + 7, (unsigned long long)tiles);
        }
    }
};

// HD: head_dim, 128 or 64. ACC: 0 two-level, 2 single. kmap /
// vmap: the layer's K and V cache as 4-d tensors {head_dim bytes, kv_block_tokens, n_kv_heads,
// n_blocks}, boxes of {head_dim, rows, 1, 1}, swizzled.
// Measured and removed (bench/NOTES.md): a cp.async copy warp instead of TMA (session 16: 270
// against 473 TFLOP/s at 16-token blocks), the softmax's max and sum in 4 chains each instead of
// one (session 17: 633 against 632 at 128-token blocks).
// Also measured and removed (session 17, PROF beside): the two consumers' softmaxes taking turns
// (slower: 631 → 582), P·V(i − 1) waited for before the softmax (the same), one kempty/tempty
// arrival a warp instead of a thread (the same). Session 18: a quarter or half of the
// exponentials on the FMA pipe (FA4's polynomial: 629 → 609 / 545 TFLOP/s) — the MUFU is not
// what holds the tile (ncu: XU pipe 36 %, tensor 33 %, issue 45 %). The softmax's rows side by
// side cut its phase ≈ 200 cycles and the turn wait grew as much (632 TFLOP/s). In the SASS the
// wait for P·V(i − 1) sits before the softmax, so a warpgroup's own P·V never runs under its
// softmax (bench/NOTES.md). Not for want of registers, as session 18 read it: with o moved to
// shared memory (64 registers freed, session 26) the SASS order was the same. The PTX has the
// wait after the exponentials and ptxas hoists it — plausibly to interleave the two-level fold
// after it (64 FMAs on T and o that do not depend on the softmax) with the MUFU work. Moving
// that fold to the next tile (DEFER, session 26) made ptxas serialise every wgmma ("insufficient
// register resources", C7511): 628 → 573 TFLOP/s at 16k on the H200 (session 27).
// Keeping the wait after the exponentials (LATE, session 27: a loop that never runs in front of
// it, which ptxas does not move code across) gave the SASS order asked for, bit-identical
// results, 36 bytes of spills instead of 8 — and 628 → 618 TFLOP/s at 16k, 745 → 726 at 64k: a
// warpgroup's own P·V under its softmax is worth nothing while the other warpgroup's GEMMs
// already fill that time (ping-pong). Both removed.
// Session 30 (H200, 16k d128 two-level, 630 TFLOP/s here; bench/NOTES.md): slower or level, and
// removed — clean tiles run without the mask test in a loop of their own (the later loops' index is
// then not uniform, so the descriptors' arithmetic leaves the uniform datapath: 547), descriptors
// precomputed in registers (spills: 578 with the above and the next), the Vᵀ wait after the Q·Kᵀ
// issue (alone: 629, level), P·V(i − 1) issued before Q·Kᵀ(i) and folded under it (614), the turn
// handed over after the row maxima (592). Upper bounds from probes that break the results: no V transpose 637, no MUFU in
// the exponentials 695, neither 726, no row sums 613, no max tree 682, no sums, maxima or MUFU 762
// (its tile still ≈ 2,060 cycles) — so no trimming of this shape of kernel reaches the issue's
// 1.5× cuDNN (≈ 980).
// ACC: 0 two-level, 1 every:N (n_every tiles), 2 single — the older kernel's modes (cuda_prefill_fp8.cuh,
// softmax_pv), with tile t's rescale and P·V(t) a tile apart. every:N rescales o once a promotion by
// the product of the tiles' α (the older kernel: by each α in turn, o·α·α·α — the same up to float
// rounding; the CPU emulation needs no rescale, it knows the exact max): 504 → 632 TFLOP/s at 16k on
// the H200 against rescaling o every tile (bench/NOTES.md, session 21).
// NC: consumer warpgroups (2, or 3 — the default for two-level at head_dim 128 and only there: three
// consumer warps a sub-partition to hide the softmax chain's latency, 192 query rows a CTA). At 512
// threads the entry has 128 registers; ptxas honours the consumers' setmaxnreg.inc to 152 (o 64 + S
// 64 + P 16 compile with 4 bytes of spills; the producer keeps 40: at 32 or 24 the transposers
// spill 52 / 88 bytes). So no P·V under its own softmax, and T is taken in two 64-column halves
// (n64 wgmmas into 32 registers) folded one after the other. Session 31 (H200, same binary, one call): 132/132
// against the CPU emulation; 16k 673 against 632 TFLOP/s (1.07× cuDNN BF16), 64k 807 against 742
// (1.35×), 4k level (370). Session 32 (four calls): bit-identical to NC=2 in all 33 of test_cuda_ops'
// FP8 prefill outputs; the Q·Kᵀ issues no longer take turns (with the ring, lab bit 4: 682 against
// 695); 16k 695 against 632 (NC=2), 64k 817 against 747. Single does not fit (compiled, not run): o as the P·V
// accumulator next to S, ptxas serialises the wgmmas and spills 772 bytes (C7512); every:N's T lives
// across tiles beside o and S.
// Session 34 (H200, 16k two-level, ≈ 812–815 TFLOP/s here; bench/NOTES.md): upper bounds from probes
// that break the results — no softmax at all (S packed as P) 1,210, no MUFU in the exponentials 933,
// no fold (o = T) 895, no row sums 882 — and a quarter of the exponentials on the FMA pipe (degree-3
// polynomial) 781, slower. The descriptors as a base plus the offset / 16: bit-identical, +0.5–1 %
// (three consumers only: in the two-consumer loop the descriptors held live took ptxas from 8 to
// 84–120 bytes of spills at head_dim 128, and every:4 measured 697 at 16k against session 33's 737).
// Session 35 (H200; bench/NOTES.md): the three consumers' row sums from the tensor core (an m64n8k32
// of P against e4m3 ones, beside P·V's first half) instead of 64 FADDs a thread a tile, and their
// descriptors' low words in 32 bits: the loop 760 → 673 SASS instructions, 16k 817–824 → 855–859
// TFLOP/s, 64k 839–847 → 868 (the descriptors alone +1.6 %, bit-identical). l then sums the e4m3
// weights P·V used instead of the FP32 P: the needle errors against float64 moved −1 % to +2 %
// (8k–128k), the KLD against bf16 on dummy:llama-3.1-8b −0.1 % / +0.6 % (2k / 8k context). As a
// wider P·V half (n72) the same sums measured 4.5 % slower (session 34). Packed f16x2 / bf16x2
// exponentials are no way round the MUFU: they compile to two MUFU.EX2.F16 and run at its f32
// rate, 16 values a cycle an SM (dev/cuda/pipe_rate.cu). The same n8 MMA in the two-consumer loop
// (beside P·V(i − 1), l folded with it in every mode) measured −4.5 % at head_dim 64 two-level, −1 %
// to level for every:4 and +1.5 % for single at 128: not kept there (its FADDs run under the other
// warpgroup's MMAs).
// Session 36 (H200; bench/NOTES.md): P against the running max with no max tree (redo with the exact
// max when a P byte reached 0x7E) was correct and 11 % slower at 16k: one row of 64 whose max rose
// by ≥ 0.75 sent the warpgroup round again in 25 % of the tiles of the bench's random scores.
// Session 37 (H200; bench/NOTES.md): the softmax's turns among a sub-partition's three warps (at the
// consumer loop) and 4 ring slots: 16k 860–862 → 887–889 TFLOP/s (+3 %; 891 = 1.49× the same call's
// cuDNN), 64k +1.3 %, 4k +1 %, bit-identical. Measured level or slower in the same session: P·V in four n32
// quarters with two in flight, Vᵀ in 3 slots, the mbarrier waits without the suspend hint, the turn
// taken before the Q·Kᵀ issue (−15 %) or a warpgroup at a time (−1 %). Probes: no V transpose +6 %,
// no n8 row-sum MMAs +3 %, P against the running max without its redo +5 %.
// Session 38 (H200; bench/NOTES.md): V transposed by a pass ahead of the kernel for long prefills (vtg,
// cuda_prefill_vt.cuh): 16k 885 → 909 TFLOP/s (+2.7 %), 64k +4.4 %, bit-identical; not the probe's +6 %.
// Session 39 (H200; bench/NOTES.md): a persistent form — one CTA an SM taking (sequence, query tile, KV
// head) items from an atomic counter, its ring running on from item to item — was bit-identical and level
// (16k 926 → 928, 64k 934 → 924 TFLOP/s), and five ring slots −1.7 % at 16k: both removed.
// Session 40 (H200; bench/NOTES.md): a form for batches that all take the Vᵀ pass — no transposing code,
// the producer at 32 registers and the consumers at 160 — was 2 % slower at 16k with P·V in halves, and with
// P·V as one n128 (64 registers, 48 bytes of spills) it hung in the bench; both removed.
// Session 41 (H200; bench/NOTES.md): Q·Kᵀ as two n64 groups, the max tree begun on the first while the
// second runs, was 3–5 % slower (Q read twice); Q·Kᵀ with Q's fragments in registers spilled 88–212 bytes at
// 152 registers and was level at 160 (producer at 32): both removed. softmax_s's mask test as one warp
// vote (a uniform branch instead of divergent ones and their reconvergence): 16k +1.8 %, bit-identical, kept.
template <int HD, int ACC, bool PROF = false, int NC = 2>
__global__ void __launch_bounds__(128 * (NC + 1), 1) k_prefill_fp8_tma(const __grid_constant__ CUtensorMap kmap, const __grid_constant__ CUtensorMap vmap,
                                                         bf16 *out, const bf16 *q, const int32_t *qstart, const int32_t *pos_arr,
                                                         const int32_t *btab, int max_blocks, int n_kv, int G, int bs, int rows_box,
                                                         int window, float scale, const float *scales, int lab,
                                                         int n_every, unsigned long long *prof, const uint8_t *vtg,
                                                         const int32_t *vt_start) {
    using namespace fp8tma;
    static_assert(NC == 2 || (NC == 3 && ACC == 0 && !PROF), "three consumers: two-level, no PROF");
    typedef lay<HD, NC> L;
    constexpr int KS = L::KS;
    extern __shared__ uint8_t fp8tma_smem_raw[];
    // (an offset into the shared array, not integer arithmetic on its address, so that the
    // compiler keeps every access in the shared space: 32-bit LDS/STS, not generic LD/ST)
    uint8_t *sm = fp8tma_smem_raw + ((1024u - (sa(fp8tma_smem_raw) & 1023u)) & 1023u);
    uint8_t *Qs = sm, *Ks = sm + L::OFF_K, *Vs = sm + L::OFF_V, *Vt = sm + L::OFF_VT;
    float *qscale_s = (float *)(sm + L::OFF_QS);
    uint64_t *bars = (uint64_t *)(sm + L::OFF_BAR);
    uint64_t *kfull = bars, *vfull = bars + KS, *kempty = bars + 2 * KS, *tfull = bars + 3 * KS, *tempty = tfull + 2, *vempty = tempty + 2;
    // Producer warp 0 issues the copies alone (it waits for free slots itself) and warps 1-3
    // transpose: 395 against 300 TFLOP/s at 16k d128 with all four warps transposing and thread 0
    // copying between transposes (H200, bench/NOTES.md, session 15). The query tiles run longest
    // first (the grid's y in reverse): 394 → 405 TFLOP/s at 16k, 256 → 281 at 4k (session 16).
    // Kernel lab (OCTET_FP8_TMA_LAB): bit 0 turns the consumers' ping-pong off (no difference
    // measured, sessions 15-16); bit 2 waits on the mbarriers without the suspend hint (the same);
    // bit 3 runs the query tiles in the grid's order; bit 4 puts three consumers' Q·Kᵀ issues back
    // under a turn that goes round them (off by default: 682 against 695 TFLOP/s at 16k, session 32;
    // it takes the exponentials' turns off, whose barriers it shares); bit 5 takes the three
    // consumers' exponential turns off;
    const bool pingpong = NC == 2 ? !(lab & 1) : (lab & 16) != 0, spin = lab & 4;
    const bool turns = NC == 3 && !(lab & (16 | 32));
    constexpr int n_tr = 96;  // transposing threads
    const int s = blockIdx.x, g = blockIdx.z;
    fp8pf::cta_tiles ct = {};
    if (!ct.begin(qstart, pos_arr, 64 * NC, G, window, BN, !(lab & 8))) return;  // (the whole CTA, before any barrier)
    const int n = ct.t1 - ct.t0 + 1, t0 = ct.t0, p_last = ct.p_last;
    // pre: this sequence's Vᵀ tiles come from k_prefill_vt (cuda_prefill_vt.cuh) — the copy warp
    // loads each into the raw-V ring slot beside its K (vfull), the consumers read it there and free
    // the slot after P·V (vempty), and the transposers sit out
    const int vt0 = vtg ? vt_start[s] : 0;
    const bool pre = __shfl_sync(0xffffffffu, vtg && vt_start[s + 1] > vt0 ? 1 : 0, 0) != 0;
    const uint8_t *vt_seq = pre ? vtg + ((size_t)vt0 * n_kv + g) * L::TILE_BYTES : nullptr;  // tile t at + t·n_kv·TILE_BYTES
    if (threadIdx.x == 0) {
        for (int i = 0; i < KS; i++) { mbar_init(&kfull[i], 1); mbar_init(&vfull[i], 1); mbar_init(&kempty[i], 128 * NC); }
        for (int i = 0; i < 2; i++) { mbar_init(&tfull[i], n_tr); mbar_init(&tempty[i], 128 * NC); }
        for (int i = 0; i < KS; i++) mbar_init(&vempty[i], pre ? 128 * NC : n_tr);
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
                phase_clock<PROF> pc;
                pc.start();
                for (int i = 0; i < n; i++) {
                    const int t = t0 + i, st = i % KS, nb = min(BN / rows_box, (p_last - t * BN) / rows_box + 1);
                    if (i >= KS) {
                        mbar_wait(&kempty[st], ((i / KS) - 1) & 1, spin);
                        mbar_wait(&vempty[st], ((i / KS) - 1) & 1, spin);
                    }
                    pc.mark(0);
                    const uint32_t bytes = (uint32_t)(nb * rows_box * HD);
                    mbar_expect_tx(&kfull[st], bytes);
                    mbar_expect_tx(&vfull[st], pre ? (uint32_t)L::TILE_BYTES : bytes);
                    if (pre) bulk_load(Vs + st * L::TILE_BYTES, vt_seq + (size_t)t * n_kv * L::TILE_BYTES, L::TILE_BYTES, &vfull[st]);
                    for (int j = 0; j < nb; j++) {
                        const int kp = t * BN + j * rows_box, blk = bt[kp / bs], r0 = kp % bs;
                        tma_load(Ks + st * L::TILE_BYTES + j * rows_box * HD, &kmap, &kfull[st], 0, r0, g, blk);
                        if (!pre) tma_load(Vs + st * L::TILE_BYTES + j * rows_box * HD, &vmap, &vfull[st], 0, r0, g, blk);
                    }
                    pc.mark(1);
                }
                pc.flush(prof, 2, n);
            }
            return;
        }
        if (pre) return;
        phase_clock<PROF> pc;
        pc.start();
        for (int i = 0; i < n; i++) {
            const int st = i % KS, b = i & 1;
            mbar_wait(&vfull[st], (i / KS) & 1, spin);
            pc.mark(0);
            if (i >= 2) mbar_wait(&tempty[b], ((i >> 1) - 1) & 1, spin);  // P·V(i − 2) done with Vᵀ slot b
            pc.mark(1);
            transpose_ldsm<HD>(Vs + st * L::TILE_BYTES, Vt + b * L::TILE_BYTES, (ptid >> 5) - 1, ptid & 31, 3, p_last - (t0 + i) * BN);
            fence_proxy_async();  // Vᵀ (generic-proxy stores) visible to the wgmma
            mbar_arrive(&tfull[b]);
            mbar_arrive(&vempty[st]);
            pc.mark(2);
        }
        if (ptid == 32) pc.flush(prof, 3, n);
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
    if constexpr (NC == 3) {  // per tile: Q·Kᵀ (lab: under a turn that goes round the three), softmax, P, then
        // T = P·Vᵀ in two 64-column halves, each folded into o (o = o·α + T, two-level's numbers), and
        // the rows' sums of P from the tensor core: P against a ones column (m64n8k32 beside the first
        // half), l = l·α + Σ e4m3(P) a tile — the weights P·V used, so o / l normalises exactly what
        // was summed. (The FADD sums of the FP32 P, which the other loops keep, cost ≈ 5 % at 16k
        // against this n8 MMA: H200, session 35, above the kernel.)
        // The descriptors' low words (start address / 16 in bits 0-13, which hold any shared address
        // without carrying, and the leading byte offset) as a base plus the operand's byte offset /
        // 16, their high words (stride, swizzle) constants; the warpgroup index goes through a shuffle
        // so that ptxas knows it uniform and keeps Q's descriptors in uniform registers (session 35:
        // 32 fewer SASS instructions a tile, bit-identical, 16k +1.6 %).
        const int wgu = __shfl_sync(0xffffffffu, wg, 0);
        const uint32_t qlo = (uint32_t)wgmma_desc(Qs + wgu * L::Q_BYTES, 128, HD * 8), klo = (uint32_t)desc_sw<HD>(Ks),
                       vlo = (uint32_t)wgmma_desc(pre ? Vs : Vt, 128, BN * 8), olo = (uint32_t)wgmma_desc(sm + L::OFF_ONE, 128, 256);
        constexpr uint32_t QHI = (uint32_t)(HD * 8 >> 4), KHI = (uint32_t)(8 * HD >> 4) | ((uint32_t)(HD == 128 ? 1 : 2) << 30),
                           VHI = (uint32_t)(BN * 8 >> 4), OHI = 256 >> 4;
        auto dj = [](uint32_t lo, uint32_t hi) { return ((uint64_t)hi << 32) | (uint64_t)lo; };
        if (pingpong && wg == NC - 1) fp8tma::bar_arrive(BAR_TURN, 256);  // the last hands warpgroup 1 (wg 0) the first turn
        // The softmax takes turns among the three consumer warps of a sub-partition (warp k of each
        // warpgroup: they share its MUFU): warp (w, k) waits on named barrier tok(w, k) — 64 threads,
        // itself and the arrival of warp (w − 1, k) — before its max tree and arrives on tok(w + 1, k)
        // after packing P. ptxas moves that arrival up into the exponentials (after ≈ 33 of the 64 here;
        // written before the packing it lands after ≈ 7: level), so a warp's turn is its max tree and
        // its first exponentials, and the next warp's max tree runs under its remaining ones.
        // The wait must come before the max tree (after it: 828 at 16k), and pinning the arrival after
        // more exponentials was slower (737 after all 64): staggering the max trees seems to be what
        // pays, not MUFU exclusion (H200, session 37; figures above the kernel and in bench/NOTES.md).
        const int kw = __shfl_sync(0xffffffffu, warp & 3, 0);
        auto tok = [](int w, int k) { const int j = 4 * w + k; return j == 0 ? 1 : 4 + j; };  // ids 1, 5 .. 15
        const int tok_mine = tok(wgu, kw), tok_next = tok((wgu + 1) % NC, kw);
        int st = 0;          // K's ring slot, i % KS
        uint32_t kpar = 0;   // its phase parity, (i / KS) & 1
        uint32_t kof = 0, vof = 0;  // K's slot and Vᵀ's slot ((i & 1)) as byte offsets / 16
        // The CTA's rows (ci, KV head gi) as a function called once: the same numbers as the code written
        // inline, and 1–2 % faster (16k 911 → 921, 64k 917 → 934 TFLOP/s; H200, session 39). ptxas
        // schedules the two differently (4,168 SASS instructions each); nothing in the source says why.
        auto run = [&](const fp8pf::cta_tiles &ci, int gi) {
            const int n = ci.t1 - ci.t0 + 1, t0 = ci.t0;
            fp8pf::rows2 rw;
            const float vscale = q_rows(rw, ci, gi);
            float o3[HD / 2], m3[2] = {-INFINITY, -INFINITY}, l3[2] = {0.0f, 0.0f};
#pragma unroll
            for (int j = 0; j < HD / 2; j++) o3[j] = 0.0f;
            if (turns && wgu == NC - 1 && n > 0) fp8tma::bar_arrive(tok(0, kw), 64);  // warpgroup 1 starts
            for (int i = 0; i < n; i++) {
                mbar_wait(&kfull[st], kpar, spin);
                float sacc[BN / 2];
                if (pingpong) fp8tma::bar_sync(BAR_TURN + wg, 256);
                wgmma_fence();
#pragma unroll
                for (int kk = 0; kk < HD / 32; kk++)
                    fp8pf::ss<BN>(sacc, dj(qlo + (uint32_t)(kk * 16), QHI), dj(klo + kof + (uint32_t)(kk * 2), KHI), kk > 0);
                wgmma_commit();
                if (pingpong && (wg != NC - 1 || i + 1 < n)) fp8tma::bar_arrive(BAR_TURN + (wg + 1) % NC, 256);  // (n turns each)
                wgmma_wait<0>();
                fp8pf::fence_acc<BN>(sacc);
                mbar_arrive(&kempty[st]);
                float alpha[2];
                if (turns) fp8tma::bar_sync(tok_mine, 64);
                fp8pf::softmax_s<BN, false>(sacc, t0 + i, c, rw.sc, rw.lo, rw.pos, m3, l3, alpha);
                uint32_t pa3[BN / 32][4];
                fp8pf::pack_p<BN>(sacc, pa3);
                if (turns && (wgu != NC - 1 || i + 1 < n)) fp8tma::bar_arrive(tok_next, 64);  // (n turns each)
                if (pre) mbar_wait(&vfull[st], kpar, spin);
                else mbar_wait(&tfull[i & 1], (i >> 1) & 1, spin);
                float ts[4];  // the n8 MMA's rows rr and rr + 8 (its 8 columns equal): Σ e4m3(P) a row
#pragma unroll
                for (int h = 0; h < 2; h++) {  // d in [h·HD/2, (h+1)·HD/2): o3[h·HD/4 ..] (8 columns a 4 registers)
                    float th[HD / 4];
                    wgmma_fence();
#pragma unroll
                    for (int kk = 0; kk < BN / 32; kk++)
                        fp8pf::rs<HD / 2>(th, pa3[kk], dj(vlo + vof + (uint32_t)((h * (HD / 2) * BN + kk * 256) >> 4), VHI), kk > 0);
                    if (h == 0) {
#pragma unroll
                        for (int kk = 0; kk < BN / 32; kk++) wgmma_rs_n8(ts, pa3[kk], dj(olo, OHI), kk > 0);
                    }
                    wgmma_commit();
                    wgmma_wait<0>();
                    fp8pf::fence_acc<HD / 2>(th);
                    if (h == 0) {
                        wgmma_fence_acc4(ts);
                        l3[0] = fmaf(l3[0], alpha[0], ts[0]);  // row rr (columns 2c, 2c + 1)
                        l3[1] = fmaf(l3[1], alpha[1], ts[2]);  // row rr + 8
                    }
#pragma unroll
                    for (int j = 0; j < HD / 4; j++) o3[h * (HD / 4) + j] = fmaf(o3[h * (HD / 4) + j], alpha[(j >> 1) & 1], th[j]);
                }
                mbar_arrive(pre ? &vempty[st] : &tempty[i & 1]);
                if (++st == KS) st = 0, kpar ^= 1;
                kof = (uint32_t)st * (uint32_t)(L::TILE_BYTES >> 4);
                vof = pre ? kof : vof ^ (uint32_t)(L::TILE_BYTES >> 4);
            }
            fp8pf::rows2 ro;
            ro.setup(warp, rr, ci.q0, ci.n_q, ci.tok_per_cta, G, ci.t_begin, pos_arr, window);
            fp8pf::store_rows<HD, false>(out, o3, l3, ro.on, ro.tok, ro.head, n_heads, gi, G, vscale, c);
        };
        run(ct, g);
        return;
    }
    fp8pf::rows2 rw;
    const float vscale = q_rows(rw, ct, g);
    const uint8_t *qw = Qs + wg * L::Q_BYTES;

    float o[ACC != 2 ? HD / 2 : 1], tacc[HD / 2], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}, alpha_prev[2] = {1.0f, 1.0f};
#pragma unroll
    for (int j = 0; j < HD / 2; j++) tacc[j] = 0.0f;
#pragma unroll
    for (int j = 0; j < (ACC != 2 ? HD / 2 : 1); j++) o[j] = 0.0f;
    // o = o·a + T (a: one factor per row, picked by (j >> 1) & 1): two-level's fold, every:N's promotion
    auto fold = [&](const float (&a)[2]) {
        if constexpr (ACC != 2) {  // (single has no o)
#pragma unroll
            for (int j = 0; j < HD / 2; j++) o[j] = fmaf(o[j], a[(j >> 1) & 1], tacc[j]);
        }
    };
    // every:N: tile t's P·V starts T afresh at the CTA's first tile and at multiples of N, and T is
    // promoted into o after tiles N−1, 2N−1, … and the last (absolute tile indices). ph = t % N of
    // the next tile whose P·V is issued; amul = the α product since the last promotion.
    int ph = ACC == 1 ? t0 % n_every : 0;
    float amul[2] = {1.0f, 1.0f};
    uint32_t pa[BN / 32][4];
    phase_clock<PROF> pc;
    pc.start();
    auto v_wait = [&](int i) {  // tile i's Vᵀ in place
        if (pre) mbar_wait(&vfull[i % KS], (i / KS) & 1, spin);
        else mbar_wait(&tfull[i & 1], (i >> 1) & 1, spin);
    };
    auto pv_issue = [&](int i) {  // T (+)= P(i)·Vᵀ(i) (two-level starts T from zero each tile, every:N when fresh)
        const uint8_t *vt = pre ? Vs + (i % KS) * L::TILE_BYTES : Vt + (i & 1) * L::TILE_BYTES;
        const int sd0 = ACC == 0 || (ACC == 1 && (i == 0 || ph == 0)) ? 0 : 1;
#pragma unroll
        for (int kk = 0; kk < BN / 32; kk++)
            fp8pf::rs<HD>(tacc, pa[kk], wgmma_desc(vt + kk * 256, 128, BN * 8), kk == 0 ? sd0 : 1);
        wgmma_commit();
    };
    // one tile i; FIRST (tile 0) has no P·V(i − 1) to issue or fold. (Two instances rather than
    // branches: ptxas serialises every wgmma when a wait's group count depends on a branch.)
    auto tile = [&](auto first, int i) {
        constexpr bool FIRST = decltype(first)::value;
        const int st = i % KS;
        mbar_wait(&kfull[st], (i / KS) & 1, spin);
        if constexpr (!FIRST) v_wait(i - 1);
        pc.mark(0);
        float sacc[BN / 2];
        if (pingpong) fp8tma::bar_sync(BAR_TURN + wg, 256);
        pc.mark(1);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < HD / 32; kk++)
            fp8pf::ss<BN>(sacc, wgmma_desc(qw + kk * 256, 128, HD * 8), desc_sw<HD>(Ks + st * L::TILE_BYTES + kk * 32), kk > 0);
        wgmma_commit();
        if constexpr (!FIRST) pv_issue(i - 1);
        if (pingpong && (wg == 0 || i + 1 < n)) fp8tma::bar_arrive(BAR_TURN + (wg ^ 1), 256);  // (turns balance: n each way)
        pc.mark(2);
        if constexpr (FIRST) wgmma_wait<0>();
        else wgmma_wait<1>();  // Q·Kᵀ(i) done, P·V(i − 1) may still run
        fp8pf::fence_acc<BN>(sacc);
        pc.mark(3);
        mbar_arrive(&kempty[st]);
        float alpha[2];
        fp8pf::softmax_s<BN>(sacc, t0 + i, c, rw.sc, rw.lo, rw.pos, m, l, alpha);
        pc.mark(4);
        if constexpr (!FIRST) {  // P·V(i − 1) done: T folded, its P registers free for P(i)
            wgmma_wait<0>();
            fp8pf::fence_acc<HD>(tacc);
            mbar_arrive(pre ? &vempty[(i - 1) % KS] : &tempty[(i - 1) & 1]);
            if constexpr (ACC == 0) fold(alpha_prev);
            if constexpr (ACC == 1) {
                if (ph == n_every - 1) {
                    fold(amul);
                    amul[0] = amul[1] = 1.0f;
                }
                ph = ph + 1 == n_every ? 0 : ph + 1;
            }
        }
        pc.mark(5);
        if constexpr (ACC == 1) amul[0] *= alpha[0], amul[1] *= alpha[1];
        if constexpr (ACC != 0) {
#pragma unroll
            for (int j = 0; j < HD / 2; j++) tacc[j] *= alpha[(j >> 1) & 1];
        }
        fp8pf::pack_p<BN>(sacc, pa);
        alpha_prev[0] = alpha[0];
        alpha_prev[1] = alpha[1];
        pc.mark(6);
    };
    if (pingpong && wg == 1) fp8tma::bar_arrive(BAR_TURN, 256);  // warpgroup 1 (wg 0) takes the first turn
    tile(std::true_type(), 0);
    for (int i = 1; i < n; i++) tile(std::false_type(), i);
    if ((tid & 127) == 0) pc.flush(prof, wg, n);
    v_wait(n - 1);
    wgmma_fence();
    pv_issue(n - 1);
    wgmma_wait<0>();
    fp8pf::fence_acc<HD>(tacc);
    if constexpr (ACC == 0) fold(alpha_prev);
    if constexpr (ACC == 1) fold(amul);  // (the last tile is always promoted)
    fp8pf::rows2 ro;  // (the rows' tokens and heads again: not kept live through the tile loop)
    ro.setup(warp, rr, ct.q0, ct.n_q, ct.tok_per_cta, G, ct.t_begin, pos_arr, window);
    fp8pf::store_rows<HD>(out, ACC != 2 ? o : tacc, l, ro.on, ro.tok, ro.head, n_heads, g, G, vscale, c);
}

#include "cuda_prefill_vt.cuh"  // (the Vᵀ pass: its kernel uses transpose_ldsm above, its launch is used below)

// ---------------------------------------------------------------- host side

// cuTensorMapEncodeTiled through cudart's driver entry point (the backend does not link libcuda).
typedef CUresult (*fp8tma_encode_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *, const cuuint64_t *,
                                     const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,
                                     CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// A layer's K or V cache as {head_dim bytes, kv_block_tokens, n_kv_heads, n_blocks}, boxes of
// {head_dim bytes, rows, 1, 1} in head_dim-byte swizzle (128 or 64). False (message latched) if it
// cannot be encoded.
static bool fp8tma_map(struct cuda_backend *c, CUtensorMap *map, void *base, const struct kv_layer *l, int rows) {
    static fp8tma_encode_fn encode = NULL;
    if (!encode) {
        void *fn = NULL;
        cudaDriverEntryPointQueryResult qr;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &qr) != cudaSuccess ||
            qr != cudaDriverEntryPointSuccess || !fn) {
            if (!c->error) { c->error = OCT_EUNSUP; snprintf(c->msg, sizeof c->msg, "fp8 prefill (TMA): cuTensorMapEncodeTiled unavailable"); }
            return false;
        }
        encode = (fp8tma_encode_fn)fn;
    }
    const cuuint64_t hd = (cuuint64_t)l->head_dim, bs = (cuuint64_t)l->kv_block_tokens;
    const cuuint64_t dims[4] = {hd, bs, (cuuint64_t)l->n_kv_heads, (cuuint64_t)l->n_blocks};
    const cuuint64_t strides[3] = {hd, hd * bs, hd * bs * (cuuint64_t)l->n_kv_heads};
    const cuuint32_t box[4] = {(cuuint32_t)hd, (cuuint32_t)rows, 1, 1}, es[4] = {1, 1, 1, 1};
    CUresult r = encode(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 4, base, dims, strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
                        hd == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) {
        if (!c->error) { c->error = OCT_EUNSUP; snprintf(c->msg, sizeof c->msg, "fp8 prefill (TMA): cuTensorMapEncodeTiled failed (%d)", (int)r); }
        return false;
    }
    return true;
}

// Whether the TMA kernel covers this layer: head_dim 128 or 64 (OCTET_FP8_TMA_D64=0 sends 64 to
// the older kernel: two-level 201 → 422 TFLOP/s at 16k, 0.45 → 0.94× cuDNN BF16, H200 session 23),
// whole swizzle atoms per box (kv_block_tokens a multiple of 8) and tiles made of whole boxes.
static bool fp8tma_fits(const struct kv_layer *l, int G) {
    static const bool d64 = cuda_env_int("OCTET_FP8_TMA_D64", 1) != 0;
    const int bs = l->kv_block_tokens;
    return (l->head_dim == 128 || (d64 && l->head_dim == 64)) && 64 % G == 0 && bs % 8 == 0 &&
           (fp8tma::BN % bs == 0 || bs % fp8tma::BN == 0);
}

// acc: 0 two-level, 1 every:N (n_every tiles), 2 single
template <int HD>
static void launch_prefill_fp8_tma(struct cuda_backend *c, void *out, const void *q, const struct kv_layer *l, int G, float scale,
                                   const float *sc, const struct batch *bt, int acc, int n_every) {
    const int rows = l->kv_block_tokens < fp8tma::BN ? l->kv_block_tokens : fp8tma::BN;
    CUtensorMap km, vm;
    if (!fp8tma_map(c, &km, l->k, l, rows) || !fp8tma_map(c, &vm, l->v, l, rows)) return;
    const uint8_t *vtg = launch_prefill_vt<HD>(c, l, bt);  // (cuda_prefill_vt.cuh)
    static const int lab = cuda_env_int("OCTET_FP8_TMA_LAB", 0);
    static const bool prof_on = cuda_env_int("OCTET_FP8_TMA_PROF", 0) == 1;  // kernel lab (PROF above the kernel)
    static unsigned long long *prof = nullptr;  // (lab: one buffer for the process, zeroed after each print)
    if (prof_on && !prof &&
        (cuda_fail(c, cudaMalloc((void **)&prof, 32 * sizeof *prof), "cudaMalloc (prof)") ||
         cuda_fail(c, cudaMemsetAsync(prof, 0, 32 * sizeof *prof, c->stream), "prof reset")))
        return;
    typedef decltype(&k_prefill_fp8_tma<HD, 0>) tma_fn;
    static const tma_fn kerns[6] = {k_prefill_fp8_tma<HD, 0, false>, k_prefill_fp8_tma<HD, 0, true>, k_prefill_fp8_tma<HD, 1, false>,
                                    k_prefill_fp8_tma<HD, 1, true>,  k_prefill_fp8_tma<HD, 2, false>, k_prefill_fp8_tma<HD, 2, true>};  // [acc][prof]
    // three consumer warpgroups for two-level at head_dim 128 (OCTET_FP8_TMA_NC=2: two, as every
    // other mode; PROF runs two)
    static const bool nc3 = cuda_env_int("OCTET_FP8_TMA_NC", 3) == 3;
    tma_fn kern3 = nullptr;
    if constexpr (HD == 128) kern3 = k_prefill_fp8_tma<HD, 0, false, 3>;
    const bool three = nc3 && acc == 0 && !prof_on && kern3;
    const int which = three ? 6 : acc * 2 + prof_on, smem = three ? fp8tma::lay<HD, 3>::SMEM : fp8tma::lay<HD>::SMEM;
    const tma_fn kern = three ? kern3 : kerns[which];
    static bool attr_set[7] = {};
    if (!attr_set[which]) {
        if (cuda_fail(c, cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem), "cudaFuncSetAttribute(k_prefill_fp8_tma)"))
            return;
        attr_set[which] = true;
    }
    const int qt = (three ? 192 : 128) / G;
    dim3 grid(bt->n_seqs, (c->cb.max_q + qt - 1) / qt, l->n_kv_heads);
    kern<<<grid, three ? 512 : 384, smem, c->stream>>>(km, vm, (bf16 *)out, (const bf16 *)q, c->cb.qstart, c->cb.pos, c->cb.btab,
                                                 bt->max_blocks_per_seq, l->n_kv_heads, G, l->kv_block_tokens, rows, l->window, scale, sc, lab,
                                                 n_every, prof, vtg, c->cb.vt_start);
    if (CUDA_LAUNCHED(c, "attention prefill (fp8 wgmma, TMA)") || !prof_on) return;
    unsigned long long h[32];
    if (cuda_fail(c, cudaMemcpyAsync(h, prof, sizeof h, cudaMemcpyDeviceToHost, c->stream), "prof copy") ||
        cuda_fail(c, cudaStreamSynchronize(c->stream), "prof sync") ||
        cuda_fail(c, cudaMemsetAsync(prof, 0, sizeof h, c->stream), "prof reset"))
        return;
    static const char *const names[4][7] = {{"waits", "turn", "issue", "qk wait", "softmax", "pv wait+fold", "pack"},
                                            {"waits", "turn", "issue", "qk wait", "softmax", "pv wait+fold", "pack"},
                                            {"slot waits", "issue", "", "", "", "", ""},
                                            {"vfull wait", "tempty wait", "transpose", "", "", "", ""}};
    static const char *const roles[4] = {"consumer wg0", "consumer wg1", "copy thread", "transposer"};
    for (int r = 0; r < 4; r++) {
        const double tiles = (double)(h[r * 8 + 7] ? h[r * 8 + 7] : 1);
        double tot = 0;
        fprintf(stderr, "fp8tma prof %s, cycles a tile:", roles[r]);
        for (int k = 0; k < 7 && names[r][k][0]; k++) { fprintf(stderr, " %s %.0f", names[r][k], h[r * 8 + k] / tiles); tot += h[r * 8 + k] / tiles; }
        fprintf(stderr, "; total %.0f (%llu tiles)\n", tot, h[r * 8 + 7]);
    }
}
