// cuda_prefill_fp8_ov.cuh — the FP8 wgmma prefill with the next tile's Q·Kᵀ in flight under this
// tile's softmax (kernel lab, OCTET_FP8_OV=1; correct, and on the H200 at 16k d128 single 247 ->
// 262 TFLOP/s, two-level 243 -> 236: bench/NOTES.md, session 14), included by cuda_attention.cu
// after cuda_prefill_fp8.cuh, whose layouts, helpers and per-tile math (fp8pf::) it shares.
// Owns: the overlapped tile loop and its three-stage ring.
//
// Why: the default kernel runs each tile as a chain — copies land, Q·Kᵀ, wait, softmax, P·V,
// wait — behind three __syncthreads, and its tensor pipe is busy 12.6 % of the time at 16k
// (bench/NOTES.md, session 13; halving the softmax's instructions gained 3 %). Here, as in FA3's
// intra-warpgroup pipelining, tile t+1's Q·Kᵀ is issued before tile t's softmax, so the MMA runs
// while the warps exponentiate; the V transpose of tile t+1 sits under that MMA too, and one
// __syncthreads a tile remains.
// Per iteration t (S_cur = tile t's scores, complete; Vᵀ(t) ready; K(t+1), raw V(t+1) landed):
//   copies of tile t+2 → stage (t+2) % 3        (that stage last held tile t−1, done with)
//   Q·Kᵀ(t+1) → S_next, committed, not waited
//   transpose V(t+1) → Vᵀ[(t+1) % 2]            (that buffer last held Vᵀ(t−1), done with)
//   softmax(t) and P·V(t) (its wait covers Q·Kᵀ(t+1) too), into the accumulators
//   wait for tile t+2's copies; __syncthreads
// Registers: both score tiles are live during the softmax, beside o and T. BN (keys a tile) is a
// parameter: `single` fits with the default tiles (d128: 128 keys, 242 registers); two-level at
// d128 takes 64-key tiles. every:N and two-level at d256 spill, so they keep the default kernel.
#pragma once

namespace fp8ov {

template <int HD, int BN> struct cfg {
    using C = fp8pf::cfg<HD, BN>;
    static constexpr int SMEM = 2 * C::Q_BYTES + 3 * C::K_BYTES + 3 * C::VRAW_BYTES + 2 * C::VT_BYTES + 128 * 4;
};

}  // namespace fp8ov

template <int HD, int ACC, int BN>
__global__ void __launch_bounds__(256) k_prefill_fp8_ov(bf16 *out, const bf16 *q, const uint8_t *kc, const uint8_t *vc,
                                                       const int32_t *qstart, const int32_t *pos_arr, const int32_t *btab,
                                                       int max_blocks, int n_kv, int G, int bs, int window, float scale,
                                                       const float *scales, int n_every) {
    using C = fp8pf::cfg<HD, BN>;
    constexpr int ROWS = 128;
    constexpr bool NARROW = ACC == 0 && BN < fp8pf::cfg<HD>::BN;  // (two-level on 64-key tiles: P·V in 64-column chunks too)
    extern __shared__ __align__(128) uint8_t fp8ov_smem[];
    uint8_t *Qs = fp8ov_smem, *Ks = Qs + 2 * C::Q_BYTES, *Vr = Ks + 3 * C::K_BYTES, *Vt = Vr + 3 * C::VRAW_BYTES;
    float *qscale_s = (float *)(Vt + 2 * C::VT_BYTES);
    const int s = blockIdx.x, g = blockIdx.z, tid = threadIdx.x;
    const int warp = tid >> 5, lane = tid & 31, rr = lane >> 2, c = lane & 3;
    fp8pf::cta_tiles ct = {};
    if (!ct.begin(qstart, pos_arr, ROWS, G, window, BN)) return;
    const int t_begin = ct.t_begin, n_q = ct.n_q, tok_per_cta = ct.tok_per_cta, q0 = ct.q0, p_last = ct.p_last, t0 = ct.t0, t1 = ct.t1;
    const int n_heads = n_kv * G;

    fp8pf::load_q<HD>(Qs, qscale_s, q, tid, q0, n_q, tok_per_cta, t_begin, n_heads, g, G);
    fp8pf::rows2 rw;
    rw.setup(warp, rr, q0, n_q, tok_per_cta, G, t_begin, pos_arr, window);
    const float kscale = scales[g], vscale = scales[KV_MAX_HEADS + g];
    const int32_t *bt = btab + (size_t)s * max_blocks;
    const uint8_t *qw = Qs + (warp >> 2) * C::Q_BYTES;  // this warpgroup's 64 rows

    auto issue = [&](int t) {  // tile t's copies into stage t % 3 (an empty group past the last tile)
        if (t <= t1) fp8pf::load_tile<HD, BN>(Ks + (t % 3) * C::K_BYTES, Vr + (t % 3) * C::VRAW_BYTES, kc, vc, bt, t, p_last, n_kv, g, bs, tid, 256);
        cp_async_commit();
    };
    auto qk = [&](float *sacc, int t) {  // S = Q·Kᵀ(t), committed, not waited
        const uint8_t *kt = Ks + (t % 3) * C::K_BYTES;
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < HD / 32; kk++)
            fp8pf::ss<BN>(sacc, wgmma_desc(qw + kk * 256, 128, HD * 8), wgmma_desc(kt + kk * 256, 128, HD * 8), kk > 0);
        wgmma_commit();
    };
    auto transpose = [&](int t) { fp8pf::transpose_v<HD, BN>(Vr + (t % 3) * C::VRAW_BYTES, Vt + (t % 2) * C::VT_BYTES, warp, lane, 8); };

    // prologue: tiles t0 and t0+1 copied, Q·Kᵀ(t0) complete, Vᵀ(t0) transposed
    issue(t0);
    issue(t0 + 1);
    cp_async_wait<0>();
    fence_proxy_async();  // Q (stores) and K (cp.async) visible to the wgmma
    __syncthreads();      // qscale_s and every thread's copies
    rw.scales(qscale_s, warp, rr, kscale, scale);
    fp8pf::acc_state<HD, ACC, NARROW> a;
    a.init();
    float sa[BN / 2], sb[BN / 2];
    qk(sa, t0);
    transpose(t0);
    fence_proxy_async();
    wgmma_wait<0>();
    fp8pf::fence_acc<BN>(sa);
    __syncthreads();  // Vᵀ(t0) complete

    // one tile: S_cur complete on entry, S_next = Q·Kᵀ(t+1) complete on exit
    auto step = [&](float *s_cur, float *s_next, int t) {
        issue(t + 2);
        if (t + 1 <= t1) {
            qk(s_next, t + 1);
            transpose(t + 1);
            fence_proxy_async();
        }
        fp8pf::softmax_pv<HD, ACC, BN>(s_cur, t, t0, t1, n_every, c, rw.sc, rw.lo, rw.pos, a.m, a.l, a.o, a.tacc, Vt + (t % 2) * C::VT_BYTES);
        wgmma_wait<0>();  // (softmax_pv waited already; this orders S_next's registers for the compiler)
        fp8pf::fence_acc<BN>(s_next);
        cp_async_wait<0>();
        fence_proxy_async();
        __syncthreads();  // tile t+2 landed; Vᵀ(t+1) complete; Vᵀ(t) and stage t free
    };
    int t = t0;
    for (; t + 1 <= t1; t += 2) {  // unrolled by two so that S_cur and S_next are named registers
        step(sa, sb, t);
        step(sb, sa, t + 1);
    }
    if (t <= t1) step(sa, sb, t);
    fp8pf::store_rows<HD>(out, a.result(), a.l, rw.on, rw.tok, rw.head, n_heads, g, G, vscale, c);
}
