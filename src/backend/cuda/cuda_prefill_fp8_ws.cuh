// cuda_prefill_fp8_ws.cuh — the FP8 wgmma prefill with a producer warpgroup (kernel lab,
// OCTET_FP8_WS=1; correct, and slower than the default: 207 vs 235 TFLOP/s at 16k d128 on the
// H200, bench/NOTES.md, session 13), included by cuda_attention.cu after
// cuda_prefill_fp8.cuh, whose layouts, helpers and per-tile math (fp8pf::) it shares. Owns: the
// warp-specialised kernel and its stage hand-over.
//
// Why: the default kernel's two warpgroups (240 registers each thread: one CTA, 8 warps an SM)
// do everything in lockstep — issue the tile's copies, QK, transpose V, softmax, PV — so the
// tensor cores idle while the SM transposes and exponentiates (bench/NOTES.md, session 12).
// Here a third warpgroup produces: it copies tile t's K and raw V into stage t % 2, transposes
// V into that stage's own Vᵀ, and hands the stage over; the two consumer warpgroups (64 query
// rows each, as before) only run QK, softmax and PV. Registers: the producer gives its share
// away (setmaxnreg.dec 40) and the consumers take it (setmaxnreg.inc 232): 128·40 + 256·232 =
// 64,512 of 65,536.
//
// Hand-over with named barriers, each a rendezvous of all 384 threads:
//   READY[st] (ids 2, 3): the producer arrives once stage st holds tile t (K, Vᵀ, fenced for
//             the async proxy); the consumers wait on it before their QK.
//   FREE[st]  (ids 4, 5): the consumers arrive when they are done with stage st's tile; the
//             producer waits on it before refilling st with tile t + 2. The consumers skip it
//             for the last two tiles, which no refill follows, so every arrival is awaited.
//   id 1: the consumers' own barrier (Q and its scales written); id 6: the producer's (all
//         copies landed before the transpose reads them).
#pragma once

namespace fp8ws {

__device__ __forceinline__ void bar_sync(int id, int n) { asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory"); }
__device__ __forceinline__ void bar_arrive(int id, int n) { asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(n) : "memory"); }
template <int N> __device__ __forceinline__ void reg_dealloc() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N)); }
template <int N> __device__ __forceinline__ void reg_alloc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N)); }

enum { BAR_CONS = 1, BAR_READY = 2, BAR_FREE = 4, BAR_PROD = 6 };

template <int HD> struct cfg {
    using C = fp8pf::cfg<HD>;
    static constexpr int SMEM = 2 * C::Q_BYTES + 2 * C::K_BYTES + 2 * C::VRAW_BYTES + 2 * C::VT_BYTES + 128 * 4;
};

}  // namespace fp8ws

template <int HD, int ACC>
__global__ void __launch_bounds__(384, 1) k_prefill_fp8_ws(bf16 *out, const bf16 *q, const uint8_t *kc, const uint8_t *vc,
                                                         const int32_t *qstart, const int32_t *pos_arr, const int32_t *btab,
                                                         int max_blocks, int n_kv, int G, int bs, int window, float scale,
                                                         const float *scales, int n_every) {
    using C = fp8pf::cfg<HD>;
    constexpr int BN = C::BN, ROWS = 128;
    extern __shared__ __align__(128) uint8_t fp8ws_smem[];
    uint8_t *Qs = fp8ws_smem, *Ks = Qs + 2 * C::Q_BYTES, *Vr = Ks + 2 * C::K_BYTES, *Vt = Vr + 2 * C::VRAW_BYTES;
    float *qscale_s = (float *)(Vt + 2 * C::VT_BYTES);
    const int s = blockIdx.x, g = blockIdx.z;
    fp8pf::cta_tiles ct = {};
    if (!ct.begin(qstart, pos_arr, ROWS, G, window, BN)) return;  // (the whole CTA, before any barrier)
    const int t_begin = ct.t_begin, n_q = ct.n_q, tok_per_cta = ct.tok_per_cta, q0 = ct.q0, p_last = ct.p_last, t0 = ct.t0, t1 = ct.t1;
    const int n_heads = n_kv * G;

    if (threadIdx.x < 128) {  // ---- producer: copies and the V transpose, two stages ahead at most
        fp8ws::reg_dealloc<40>();
        const int ptid = threadIdx.x, lane = ptid & 31;
        const int32_t *bt = btab + (size_t)s * max_blocks;
        for (int t = t0, st = 0; t <= t1; t++, st ^= 1) {
            if (t - t0 >= 2) fp8ws::bar_sync(fp8ws::BAR_FREE + st, 384);  // tile t − 2 is done with stage st
            fp8pf::load_tile<HD>(Ks + st * C::K_BYTES, Vr + st * C::VRAW_BYTES, kc, vc, bt, t, p_last, n_kv, g, bs, ptid, 128);
            cp_async_commit();
            cp_async_wait<0>();
            fp8ws::bar_sync(fp8ws::BAR_PROD, 128);  // every producer thread's copies have landed
            fp8pf::transpose_v<HD>(Vr + st * C::VRAW_BYTES, Vt + st * C::VT_BYTES, ptid >> 5, lane, 4);
            fence_proxy_async();  // K (cp.async) and Vᵀ (stores) visible to the consumers' wgmma
            fp8ws::bar_arrive(fp8ws::BAR_READY + st, 384);
        }
        return;
    }

    // ---- consumers: warpgroups 1 and 2, 64 query rows each
    fp8ws::reg_alloc<232>();
    const int tid = threadIdx.x - 128, warp = tid >> 5, lane = tid & 31, rr = lane >> 2, c = lane & 3;
    fp8pf::load_q<HD>(Qs, qscale_s, q, tid, q0, n_q, tok_per_cta, t_begin, n_heads, g, G);
    fp8pf::rows2 rw;
    rw.setup(warp, rr, q0, n_q, tok_per_cta, G, t_begin, pos_arr, window);
    fence_proxy_async();  // Q visible to the wgmma
    fp8ws::bar_sync(fp8ws::BAR_CONS, 256);
    const float vscale = scales[KV_MAX_HEADS + g];
    rw.scales(qscale_s, warp, rr, scales[g], scale);
    const uint8_t *qw = Qs + (warp >> 2) * C::Q_BYTES;  // this warpgroup's 64 rows

    fp8pf::acc_state<HD, ACC> a;
    a.init();

    for (int t = t0, st = 0; t <= t1; t++, st ^= 1) {
        fp8ws::bar_sync(fp8ws::BAR_READY + st, 384);  // stage st holds tile t
        float sacc[BN / 2];
        const uint8_t *kt = Ks + st * C::K_BYTES;
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < HD / 32; kk++)
            fp8pf::ss<BN>(sacc, wgmma_desc(qw + kk * 256, 128, HD * 8), wgmma_desc(kt + kk * 256, 128, HD * 8), kk > 0);
        wgmma_commit();
        wgmma_wait<0>();
        fp8pf::fence_acc<BN>(sacc);
        fp8pf::softmax_pv<HD, ACC>(sacc, t, t0, t1, n_every, c, rw.sc, rw.lo, rw.pos, a.m, a.l, a.o, a.tacc, Vt + st * C::VT_BYTES);
        if (t + 2 <= t1) fp8ws::bar_arrive(fp8ws::BAR_FREE + st, 384);  // the producer may refill stage st
    }
    fp8pf::store_rows<HD>(out, a.result(), a.l, rw.on, rw.tok, rw.head, n_heads, g, G, vscale, c);
}
