// cuda_attention.cu — paged decode attention (flash-decoding: split-KV across CTAs + a combine
// kernel, cuda_combine.cuh; the query heads of one KV head processed together; FP8 widened in
// registers) and paged prefill attention (tiled over query tokens and key blocks, causal, windows), plus a
// generic warp-per-head path for head dims / block sizes the fast kernels don't cover. (Writing
// the cache, and the per-layer scales both read, live in cuda_kv_write.cu.)
//
// Data layout (docs/kv_format.md): cache [n_blocks][n_kv_heads][kv_block_tokens][head_dim];
// q, out [n_tokens][n_heads][head_dim] bf16; k, v inputs [n_tokens][n_kv_heads][head_dim] bf16.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda_common.cuh"
#include "cuda_decode_mma.cuh"
#include "cuda_prefill_mma.cuh"
#include "cuda_prefill_fp8.cuh"
#include "cuda_prefill_fp8_tma.cuh"
#include "cuda_decode_prof.cuh"
#include "cuda_decode_t.cuh"
#include "cuda_combine.cuh"

// ---------------------------------------------------------------- element access

template <int DT> struct kv_elem;
template <> struct kv_elem<DT_BF16> { typedef bf16 T; static __device__ float f(T v) { return __bfloat162float(v); } };
template <> struct kv_elem<DT_E4M3> {
    typedef __nv_fp8_storage_t T;
    static __device__ float f(T v) { return __half2float(__half(__nv_cvt_fp8_to_halfraw(v, __NV_E4M3))); }
};
template <> struct kv_elem<DT_E5M2> {
    typedef __nv_fp8_storage_t T;
    static __device__ float f(T v) { return __half2float(__half(__nv_cvt_fp8_to_halfraw(v, __NV_E5M2))); }
};

__device__ static float load_any(const void *base, size_t i, int dt) {
    switch (dt) {
    case DT_F32: return ((const float *)base)[i];
    case DT_F16: return __half2float(((const __half *)base)[i]);
    case DT_BF16: return __bfloat162float(((const bf16 *)base)[i]);
    case DT_E4M3: return kv_elem<DT_E4M3>::f(((const uint8_t *)base)[i]);
    case DT_E5M2: return kv_elem<DT_E5M2>::f(((const uint8_t *)base)[i]);
    }
    return 0.0f;
}

// ---------------------------------------------------------------- decode (split-KV)

// One CTA = (sequence, KV head, split). 4 warps; each lane group of LPR lanes holds one
// key row (16 bytes per lane), a warp covers one 16-token block per iteration.
template <int HD, int G, int DT>
__global__ void __launch_bounds__(128) k_decode(bf16 *out, float *part, const bf16 *q, const void *kc, const void *vc,
                                                const int32_t *qstart, const int32_t *seq_lens, const int32_t *btab,
                                                int max_blocks, int lgr, int n_kv, int window, float scale, const float *scales,
                                                int n_splits, int blocks_per_split) {
    typedef typename kv_elem<DT>::T T;
    constexpr int E = 16 / sizeof(T);        // elements per 16-byte load
    constexpr int LPR = HD / E;              // lanes per key row
    constexpr int ROWS = 32 / LPR;           // key rows per warp load
    constexpr int BS = 16;                   // tokens per step (a cache block is 2^lgr of them)
    constexpr int U = BS / ROWS;             // loads per lane per block
    const int s = blockIdx.x, g = blockIdx.y, split = blockIdx.z;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, r = lane / LPR, cidx = lane % LPR;
    const int ctx = seq_lens[s], pos = ctx - 1;
    const int lo = window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
    const int b_first = lo / BS, b_last = pos / BS;
    const int b0 = b_first + split * blocks_per_split;
    const int b1 = min(b_last + 1, b0 + blocks_per_split);
    const int t = qstart[s];  // the sequence's (only) query token
    const float kscale = DT == DT_BF16 ? 1.0f : scales[g], vscale = DT == DT_BF16 ? 1.0f : scales[KV_MAX_HEADS + g];
    const float sc = scale * kscale;

    float qr[G][E], acc[G][E], m[G], l[G];
#pragma unroll
    for (int h = 0; h < G; h++) {
        const bf16 *qh = q + ((size_t)t * n_kv * G + g * G + h) * HD + cidx * E;
#pragma unroll
        for (int i = 0; i < E; i++) { qr[h][i] = __bfloat162float(qh[i]); acc[h][i] = 0.0f; }
        m[h] = -INFINITY;
        l[h] = 0.0f;
    }
    const int32_t *bt = btab + (size_t)s * max_blocks;
    for (int blk = b0 + warp; blk < b1; blk += 4) {
        size_t base = kv_sub_block(bt, blk, n_kv, g, lgr) * BS * HD;
        uint4 kr[U], vr[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            size_t off = base + (size_t)(u * ROWS + r) * HD + cidx * E;
            kr[u] = *(const uint4 *)((const T *)kc + off);
            vr[u] = *(const uint4 *)((const T *)vc + off);
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            int kp = blk * BS + u * ROWS + r;
            const T *kk = (const T *)&kr[u], *vv = (const T *)&vr[u];
            float kf[E], vf[E];
#pragma unroll
            for (int i = 0; i < E; i++) { kf[i] = kv_elem<DT>::f(kk[i]); vf[i] = kv_elem<DT>::f(vv[i]); }
            bool valid = kp >= lo && kp <= pos;
#pragma unroll
            for (int h = 0; h < G; h++) {
                float d = 0.0f;
#pragma unroll
                for (int i = 0; i < E; i++) d += qr[h][i] * kf[i];
#pragma unroll
                for (int o = LPR / 2; o > 0; o >>= 1) d += __shfl_xor_sync(0xffffffff, d, o);
                if (!valid) continue;
                float sv = d * sc, mn = fmaxf(m[h], sv);
                float alpha = __expf(m[h] - mn), p = __expf(sv - mn);
                l[h] = l[h] * alpha + p;
#pragma unroll
                for (int i = 0; i < E; i++) acc[h][i] = acc[h][i] * alpha + p * vf[i];
                m[h] = mn;
            }
        }
    }
    // merge the lane groups of the warp (same dims, different keys)
#pragma unroll
    for (int h = 0; h < G; h++) {
#pragma unroll
        for (int o = LPR; o < 32; o <<= 1) {
            float mo = __shfl_xor_sync(0xffffffff, m[h], o), lo_ = __shfl_xor_sync(0xffffffff, l[h], o);
            float mn = fmaxf(m[h], mo);
            float a = mn == -INFINITY ? 0.0f : __expf(m[h] - mn), bb = mn == -INFINITY ? 0.0f : __expf(mo - mn);
#pragma unroll
            for (int i = 0; i < E; i++) {
                float ao = __shfl_xor_sync(0xffffffff, acc[h][i], o);
                acc[h][i] = acc[h][i] * a + ao * bb;
            }
            l[h] = l[h] * a + lo_ * bb;
            m[h] = mn;
        }
    }
    // merge the 4 warps through shared memory
    __shared__ float sm_m[4][16], sm_l[4][16], sm_acc[4][8][HD];
    if (r == 0) {
#pragma unroll
        for (int h = 0; h < G; h++) {
#pragma unroll
            for (int i = 0; i < E; i++) sm_acc[warp][h][cidx * E + i] = acc[h][i];
            if (cidx == 0) { sm_m[warp][h] = m[h]; sm_l[warp][h] = l[h]; }
        }
    }
    __syncthreads();
    merge_warps_store<HD>(sm_m, sm_l, sm_acc, G, t, n_kv, g, vscale, out, part, s, split, n_splits);
}

// ---------------------------------------------------------------- prefill (tiled, SIMT)

// One CTA = (sequence, query tile, KV head). THR = HD/32 threads own one query row
// (32 dims each: q and the accumulator in registers); ROWS = 128/THR rows per CTA =
// ROWS/G query tokens × G heads. Keys stream through shared memory in chunks of sub tokens:
// 16-token parts of a block whose size is a multiple of 16 (else, or with OCTET_PREFILL_CHUNK=0, the
// whole block), one key at a time, so the chunk size does not change the numbers. Why: at the CUDA
// default of 64-token blocks a whole block of f32 K and V at head_dim 256 is 128 KB, one CTA an SM;
// with 16-token parts (32 KB) bf16 d256 prefill went 1.07 → 1.85 TFLOP/s at 4k and 1.10 → 1.94 at
// 16k, and dummy:gemma-hd256's bf16 TTFT at 16k 8.1 → 5.0 s (H200, bench/NOTES.md, session 34).
template <int HD>
__global__ void __launch_bounds__(128) k_prefill(bf16 *out, const bf16 *q, const void *kc, const void *vc, int dt,
                                                 const int32_t *qstart, const int32_t *pos_arr, const int32_t *btab,
                                                 int max_blocks, int n_kv, int G, int bs, int window, float scale,
                                                 const float *scales, int sub) {
    constexpr int THR = HD / 32, ROWS = 128 / THR;
    extern __shared__ float smem[];
    float *sk = smem, *sv = smem + (size_t)sub * HD;  // [sub][HD] each
    const int s = blockIdx.x, tile = blockIdx.y, g = blockIdx.z;
    const int QT = ROWS / G;
    const int t_begin = qstart[s], n_q = qstart[s + 1] - t_begin;
    const int q0 = tile * QT;
    if (q0 >= n_q) return;
    const int row = threadIdx.x / THR, part = threadIdx.x % THR;
    const int qi = q0 + row / G, h = row % G;
    const bool active = qi < n_q;
    const int t = t_begin + (active ? qi : q0);
    const int my_pos = pos_arr[t];
    const int my_lo = window > 0 && my_pos - window + 1 > 0 ? my_pos - window + 1 : 0;
    const bool fp8 = dt == DT_E4M3 || dt == DT_E5M2;
    const float kscale = fp8 ? scales[g] : 1.0f, vscale = fp8 ? scales[KV_MAX_HEADS + g] : 1.0f;
    float qr[32], acc[32], m = -INFINITY, l = 0.0f;
    const bf16 *qp = q + ((size_t)t * n_kv * G + g * G + h) * HD + part * 32;
#pragma unroll
    for (int i = 0; i < 32; i++) { qr[i] = __bfloat162float(qp[i]) * scale * kscale; acc[i] = 0.0f; }
    // the tile's key range: from the first query's window start to the last query's position
    const int p_first = pos_arr[t_begin + q0], p_last = pos_arr[t_begin + min(q0 + QT, n_q) - 1];
    const int k_lo = window > 0 && p_first - window + 1 > 0 ? p_first - window + 1 : 0;
    const int32_t *bt = btab + (size_t)s * max_blocks;
    for (int ch = k_lo / sub; ch <= p_last / sub; ch++) {
        const int kp0 = ch * sub;
        size_t base = (((size_t)bt[kp0 / bs] * n_kv + g) * bs + kp0 % bs) * HD;
        __syncthreads();
        for (int i = threadIdx.x; i < sub * HD; i += blockDim.x) {
            sk[i] = load_any(kc, base + i, dt);
            sv[i] = load_any(vc, base + i, dt);
        }
        __syncthreads();
        for (int j = 0; j < sub; j++) {
            int kp = kp0 + j;
            const float *kr = sk + (size_t)j * HD + part * 32;
            float d = 0.0f;
#pragma unroll
            for (int i = 0; i < 32; i++) d += qr[i] * kr[i];
#pragma unroll
            for (int o = THR / 2; o > 0; o >>= 1) d += __shfl_xor_sync(0xffffffff, d, o);
            if (!active || kp < my_lo || kp > my_pos) continue;
            float mn = fmaxf(m, d), alpha = __expf(m - mn), p = __expf(d - mn);
            l = l * alpha + p;
            const float *vr = sv + (size_t)j * HD + part * 32;
#pragma unroll
            for (int i = 0; i < 32; i++) acc[i] = acc[i] * alpha + p * vr[i];
            m = mn;
        }
    }
    if (!active) return;
    bf16 *op = out + ((size_t)t * n_kv * G + g * G + h) * HD + part * 32;
    float f = l > 0 ? vscale / l : 0.0f;
#pragma unroll
    for (int i = 0; i < 32; i++) op[i] = __float2bfloat16_rn(acc[i] * f);
}

// ---------------------------------------------------------------- generic (any head_dim / block size)

// One warp per (query token, query head); lane owns dims lane, lane+32, ...
__global__ void k_generic(bf16 *out, const bf16 *q, const void *kc, const void *vc, int dt, const int32_t *tok_seq,
                          const int32_t *pos_arr, const int32_t *btab, int max_blocks, int n_kv, int G, int hd, int bs,
                          int window, float scale, const float *scales) {
    const int t = blockIdx.x, qh = blockIdx.y, g = qh / G, lane = threadIdx.x;
    const int s = tok_seq[t], pos = pos_arr[t];
    const int lo = window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
    const bool fp8 = dt == DT_E4M3 || dt == DT_E5M2;
    const float kscale = fp8 ? scales[g] : 1.0f, vscale = fp8 ? scales[KV_MAX_HEADS + g] : 1.0f;
    constexpr int MAXD = 16;  // head_dim <= 512
    float qr[MAXD], acc[MAXD], m = -INFINITY, l = 0.0f;
    const bf16 *qp = q + ((size_t)t * n_kv * G + qh) * hd;
#pragma unroll
    for (int i = 0; i < MAXD; i++) {
        int d = lane + 32 * i;
        qr[i] = d < hd ? __bfloat162float(qp[d]) * scale * kscale : 0.0f;
        acc[i] = 0.0f;
    }
    const int32_t *bt = btab + (size_t)s * max_blocks;
    for (int kp = lo; kp <= pos; kp++) {
        size_t base = (((size_t)bt[kp / bs] * n_kv + g) * bs + kp % bs) * hd;
        float d = 0.0f;
#pragma unroll
        for (int i = 0; i < MAXD; i++) { int dd = lane + 32 * i; if (dd < hd) d += qr[i] * load_any(kc, base + dd, dt); }
        for (int o = 16; o > 0; o >>= 1) d += __shfl_xor_sync(0xffffffff, d, o);
        float mn = fmaxf(m, d), alpha = __expf(m - mn), p = __expf(d - mn);
        l = l * alpha + p;
#pragma unroll
        for (int i = 0; i < MAXD; i++) { int dd = lane + 32 * i; if (dd < hd) acc[i] = acc[i] * alpha + p * load_any(vc, base + dd, dt); }
        m = mn;
    }
    bf16 *op = out + ((size_t)t * n_kv * G + qh) * hd;
#pragma unroll
    for (int i = 0; i < MAXD; i++) { int dd = lane + 32 * i; if (dd < hd) op[dd] = __float2bfloat16_rn(acc[i] * vscale / l); }
}

// ---------------------------------------------------------------- dispatch

// Splits the longest context into per-CTA block ranges. `resident` is how many CTAs of the
// kernel fit on the GPU at once; the grid is a whole number of such waves (default one:
// every CTA streams one long range, so no partly filled last wave and no per-CTA pipeline
// fill repeated many times), at least one block per warp each.
// Kernel lab: OCTET_DECODE_WAVES=N (N waves), OCTET_DECODE_CTAS_PER_SM=K (the earlier plan:
// ceil(n_sm·K / CTAs) splits regardless of residency).
// The 16-token kernels take cache blocks of 16·2^lgr tokens (kv_sub_block in cuda_common.cuh):
// lgr for this layer's kv_block_tokens, or −1 when it is not 16, 32, 64, 128 or 256.
static int kv_sub_lg(const struct kv_layer *l) {
    for (int lg = 0; lg <= 4; lg++)
        if (l->kv_block_tokens == 16 << lg) return lg;
    return -1;
}

static void plan_splits(struct cuda_backend *c, const struct kv_layer *l, int n_seqs, int resident, int *n_splits_out,
                        int *per_split_out) {
    // a captured decode step must not depend on the contexts: plan for the table's width
    int nb_max = c->fixed_plan ? c->cb.max_blocks_per_seq << kv_sub_lg(l) : (c->cb.max_ctx + 15) / 16;  // 16-token sub-blocks
    if (l->window > 0 && nb_max > l->window / 16 + 2) nb_max = l->window / 16 + 2;
    int ctas = n_seqs * l->n_kv_heads;
    static int per_sm = -1, waves = 0;
    if (per_sm < 0) {
        const char *e = getenv("OCTET_DECODE_CTAS_PER_SM"), *w = getenv("OCTET_DECODE_WAVES");
        per_sm = e && atoi(e) > 0 ? atoi(e) : 0;
        waves = w && atoi(w) > 0 ? atoi(w) : 1;
    }
    int n_splits;
    if (per_sm) n_splits = (c->n_sm * per_sm + ctas - 1) / ctas;
    else n_splits = (resident > 0 ? resident : c->n_sm) * waves / ctas;
    int max_splits = (nb_max + 3) / 4;
    if (n_splits > max_splits) n_splits = max_splits;
    if (n_splits < 1) n_splits = 1;
    int per_split = (nb_max + n_splits - 1) / n_splits;
    *n_splits_out = (nb_max + per_split - 1) / per_split;
    *per_split_out = per_split;
}

typedef void (*decode_mma_fn)(bf16 *, float *, const bf16 *, const void *, const void *, const int32_t *, const int32_t *,
                              const int32_t *, int, int, int, int, int, float, const float *, int, int, const int32_t *, int, int *);

template <int HD, int DT, bool FUSED>
static decode_mma_fn pick_decode_mma(int stages, bool tr) {
    if (tr) return stages == 2 ? k_decode_t<HD, DT, 2, FUSED> : k_decode_t<HD, DT, 3, FUSED>;
    if (stages == 0) return k_decode_mma<HD, DT, 0, false>;  // (the fused combine needs the ring)
    if (stages == 2) return k_decode_mma<HD, DT, 2, FUSED>;
    if (stages == 3) return k_decode_mma<HD, DT, 3, FUSED>;
    return k_decode_mma<HD, DT, 4, FUSED>;
}

// The decode kernel for a layer's cache type and a ring depth (0, 2, 3 or 4); fused: it combines
// the splits itself (the default; OCTET_FUSE=0: k_combine after it); tr: the transposed kernel
// (cuda_decode_t.cuh, ring depth 2 or 3).
template <int HD>
static decode_mma_fn decode_mma_for(const struct kv_layer *l, int stages, bool fused = false, bool tr = false) {
    if (fused)
        return l->dtype == DT_BF16   ? pick_decode_mma<HD, DT_BF16, true>(stages, tr)
               : l->dtype == DT_E4M3 ? pick_decode_mma<HD, DT_E4M3, true>(stages, tr)
                                     : pick_decode_mma<HD, DT_E5M2, true>(stages, tr);
    return l->dtype == DT_BF16   ? pick_decode_mma<HD, DT_BF16, false>(stages, tr)
           : l->dtype == DT_E4M3 ? pick_decode_mma<HD, DT_E4M3, false>(stages, tr)
                                 : pick_decode_mma<HD, DT_E5M2, false>(stages, tr);
}

// The DYN transposed kernel (OCTET_COMBINE_DYN=1) for a layer's cache type and ring depth (2 or 3).
template <int HD>
static decode_mma_fn decode_dyn_for(const struct kv_layer *l, int stages) {
    if (l->dtype == DT_BF16) return stages == 2 ? k_decode_t<HD, DT_BF16, 2, true, true> : k_decode_t<HD, DT_BF16, 3, true, true>;
    if (l->dtype == DT_E4M3) return stages == 2 ? k_decode_t<HD, DT_E4M3, 2, true, true> : k_decode_t<HD, DT_E4M3, 3, true, true>;
    return stages == 2 ? k_decode_t<HD, DT_E5M2, 2, true, true> : k_decode_t<HD, DT_E5M2, 3, true, true>;
}

// The PROF transposed kernel (OCTET_DECODE_PROF=1, head_dim 128, bf16/e4m3; cuda_decode_prof.cuh), or null.
template <int HD>
static decode_mma_fn decode_prof_for(const struct kv_layer *l, int stages) {
    if constexpr (HD != 128) {
        return nullptr;
    } else {
        if (l->dtype == DT_BF16) return stages == 2 ? k_decode_t<HD, DT_BF16, 2, false, false, true> : k_decode_t<HD, DT_BF16, 3, false, false, true>;
        if (l->dtype == DT_E4M3) return stages == 2 ? k_decode_t<HD, DT_E4M3, 2, false, false, true> : k_decode_t<HD, DT_E4M3, 3, false, false, true>;
        return nullptr;
    }
}

// The PDLW transposed kernel (the default at ring depth 2; OCTET_DECODE_PDL=0 turns it off) for a
// layer's cache type.
template <int HD>
static decode_mma_fn decode_pdl_for(const struct kv_layer *l, int stages) {
    // FP8 caches refill a ring stage before computing it (EARLY in cuda_decode_t.cuh, which has its
    // timings; OCTET_DECODE_EARLY=0 turns it off): the ITL slope ratio 0.520 -> 0.514 (bench/NOTES.md, session 29)
    static const bool early = cuda_env_int("OCTET_DECODE_EARLY", 1) != 0;
    if (stages != 2) return nullptr;
    if (l->dtype == DT_BF16) return k_decode_t<HD, DT_BF16, 2, false, false, false, true>;
    if (l->dtype == DT_E4M3)
        return early ? k_decode_t<HD, DT_E4M3, 2, false, false, false, true, true> : k_decode_t<HD, DT_E4M3, 2, false, false, false, true>;
    return early ? k_decode_t<HD, DT_E5M2, 2, false, false, false, true, true> : k_decode_t<HD, DT_E5M2, 2, false, false, false, true>;
}

// Decode on the transposed kernel (keys on the MMA's M side; cuda_decode_t.cuh) by default:
// on the H200 B=1 L=128k fp8 78.6 -> 75.4 us, B=8 L=32k 164.7 -> 157.1, bf16 1-3 % faster
// (bench/NOTES.md, session 13). OCTET_DECODE_T=0 selects the plain kernel.
static bool decode_t_on(void) {
    static const bool on = cuda_env_int("OCTET_DECODE_T", 1) != 0;
    return on;
}

template <int HD>
static void launch_decode_mma(struct cuda_backend *c, void *out, const void *q, const struct kv_layer *l, int G, float scale,
                              const float *sc, const struct batch *bt) {
    // Ring depth 2 for both caches (OCTET_DECODE_STAGES=N overrides; 0: the unpipelined variant, a
    // kernel lab). FP8 ran with 3 until session 19: depth 2 was faster in every sample on the H200 —
    // B=1 L=128k 73.2/73.9 us vs 74.0-75.1, B=8 L=32k 132.1/134.7 vs 134.4-137.9 (two calls, each
    // beside depth 3), and OCTET_DECODE_PROF put the first block's bytes at 3.9 us after a CTA's
    // start instead of 5.3: fewer requests queue in front of each warp's first (bench/NOTES.md).
    static const int stages_env = cuda_env_int("OCTET_DECODE_STAGES", -1);
    int stages = stages_env >= 0 ? stages_env : 2;
    if (stages != 0 && stages != 2 && stages != 3) stages = 4;
    const bool fuse = cuda_fuse_mode() && stages > 0, tr = decode_t_on() && stages > 0;
    if (tr && stages == 4) stages = 3;
    decode_mma_fn kern = decode_mma_for<HD>(l, stages, fuse, tr), plain = decode_mma_for<HD>(l, stages, false, tr);
    // OCTET_COMBINE_DYN=1 (kernel lab): the transposed kernel decides the combine per sequence from
    // its busy splits (DYN in cuda_decode_mma.cuh), for any split count
    static const bool dyn_env = cuda_env_int("OCTET_COMBINE_DYN", 0) == 1;
    const bool dyn = dyn_env && fuse && tr && 2 * G * DECODE_FUSED_MAX + G <= 32 * HD;
    if (dyn) kern = decode_dyn_for<HD>(l, stages);
    size_t ring = stages ? (size_t)4 * stages * 2 * 16 * HD * (l->dtype == DT_BF16 ? 2 : 1) : 0;
    // residency of this kernel instance (registers and shared memory decide it), asked once
    static int resident[3][5][2][2];
    int di = l->dtype == DT_BF16 ? 0 : l->dtype == DT_E4M3 ? 1 : 2;
    if (!resident[di][stages][fuse][tr]) {
        if (ring) {
            cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)ring);
            cudaFuncSetAttribute(plain, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)ring);  // (fused's fallback)
        }
        int per = 0;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, kern, 128, ring) != cudaSuccess || per < 1) per = 1;
        resident[di][stages][fuse][tr] = per;
    }
    int n_splits, per_split;
    plan_splits(c, l, bt->n_seqs, c->n_sm * resident[di][stages][fuse][tr], &n_splits, &per_split);
    size_t need = (size_t)bt->n_seqs * l->n_kv_heads * G * n_splits * (HD + 2);
    if (n_splits > 1 && !cuda_reserve(c, &c->d_part, &c->part_cap, need)) return;
    // Every busy split takes at least min_split blocks of its context, so short contexts use fewer,
    // fuller splits (the rest write empty partials and leave). FP8 caches: 8 — 16 from session 12
    // (in captured decode steps with a 128k table on dummy:llama-3.1-8b the ITL break-even went from
    // 8,375 to 1,485 tokens against none) until session 24, when the decode kernel began to start
    // under the Q|K|V launch's epilogue (gemv_rope): fp8 steps at depths 256 / 1024 / 4096 took
    // 4.368 / 4.400 / 4.538 ms with 16, 4.352 / 4.387 / 4.512 with 8 (means of two rounds, H200), and the
    // ITL study's break-even fell from 3,178-3,496 tokens to 1,641 (bench/NOTES.md, session 24).
    // bf16: off (no gain measured). OCTET_DECODE_MIN_SPLIT=N overrides both (0: off),
    // OCTET_DECODE_MIN_SPLIT_FP8=N the FP8 caches' alone.
    static const int min_split_env = cuda_env_int("OCTET_DECODE_MIN_SPLIT", -1),
                     min_split_fp8 = cuda_env_int("OCTET_DECODE_MIN_SPLIT_FP8", min_split_env >= 0 ? min_split_env : 8);
    const int min_split = l->dtype == DT_BF16 ? (min_split_env >= 0 ? min_split_env : 0) : min_split_fp8;
    // By default (OCTET_FUSE=0: off) the last CTA of each (sequence, KV head) combines the splits
    // of a one-sequence step, when there are at most 16 of them (and their weights fit the
    // kernel's shared scratch); arrival counters start at zero and are reset by it. More splits go
    // to k_combine: one CTA summing 49 splits for its 4 heads left the GPU idle behind it — B=1
    // L=128k took 101 us instead of 78 (fp8) and 165 instead of 134 (bf16) on the H200 — and so
    // do batches: at B=8 L=32k (8 splits) the fused combine took 157 us against 137 (fp8) and 292
    // against 255 (bf16) with k_combine (bench/NOTES.md, sessions 13 and 15).
    int *arrive = nullptr;
    if ((dyn && n_splits > 1) ||
        (fuse && bt->n_seqs == 1 && n_splits > 1 && n_splits <= DECODE_FUSED_MAX && 2 * G * n_splits + G <= 32 * HD)) {
        const size_t cap = c->arrive_cap, cnt = (size_t)bt->n_seqs * l->n_kv_heads;
        if (!cuda_reserve(c, &c->d_arrive, &c->arrive_cap, cnt)) return;
        if (c->arrive_cap != cap && cuda_fail(c, cudaMemsetAsync(c->d_arrive, 0, cnt * sizeof(int), c->stream), "cudaMemset")) return;
        arrive = c->d_arrive;
    } else {  // one split, or too many for the scratch: the plain kernel and k_combine
        kern = plain;
    }
    dim3 grid(bt->n_seqs, l->n_kv_heads, n_splits);
    // kernel lab: the launch's timeline (the plain kernel and k_combine only)
    static const bool prof_on = cuda_env_int("OCTET_DECODE_PROF", 0) == 1;
    static decode_prof dp;
    const size_t n_ctas = (size_t)grid.x * grid.y * grid.z;
    decode_mma_fn pk = prof_on && kern == plain && tr ? decode_prof_for<HD>(l, stages) : nullptr;
    cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    if (pk && (cudaStreamIsCapturing(c->stream, &cap) != cudaSuccess || cap != cudaStreamCaptureStatusNone))
        pk = nullptr;  // (its report synchronises: not inside a captured step)
    if (pk) {
        if (ring && cuda_fail(c, cudaFuncSetAttribute(pk, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)ring), "prof attr")) return;
        if (!dprof_begin(c, &dp, n_ctas)) return;
        kern = pk;
    }
    // The plain transposed kernel runs as a programmatic dependent of the kernel before it (PDLW in
    // cuda_decode_t.cuh), so its start overlaps that kernel's end: on the H200 B=1 L=128k fp8
    // 72.7/72.9 -> 71.5/71.4 us, bf16 -0.9 to -1.1, B=8 L=32k -0.8 to -1.2, B=1 L=8k -1.1 to -1.4;
    // steps at depth 16384 -0.05 ms a token (bench/NOTES.md, session 21). OCTET_DECODE_PDL=0: an
    // ordinary launch.
    static const bool pdl_env = cuda_env_int("OCTET_DECODE_PDL", 1) == 1;
    decode_mma_fn wk = pdl_env && !pk && kern == plain && tr ? decode_pdl_for<HD>(l, stages) : nullptr;
    if (wk) {
        static bool wk_attr[3];
        if (!wk_attr[di]) {
            if (cuda_fail(c, cudaFuncSetAttribute(wk, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)ring), "decode pdl attr")) return;
            wk_attr[di] = true;
        }
        cudaLaunchAttribute attr[1];
        const cudaLaunchConfig_t cfg = pdl_config(grid, dim3(128), ring, c->stream, attr);
        if (cuda_fail(c, cudaLaunchKernelEx(&cfg, wk, (bf16 *)out, c->d_part, (const bf16 *)q, l->k, l->v, c->cb.qstart, c->cb.seq_lens,
                                            c->cb.btab, bt->max_blocks_per_seq, kv_sub_lg(l), l->n_kv_heads, G, l->window, scale, sc,
                                            n_splits, min_split, (const int32_t *)nullptr, 0, (int *)nullptr),
                      "attention decode (mma, pdl)"))
            return;
    } else {
        kern<<<grid, 128, ring, c->stream>>>((bf16 *)out, c->d_part, (const bf16 *)q, l->k, l->v, c->cb.qstart, c->cb.seq_lens,
                                             c->cb.btab, bt->max_blocks_per_seq, kv_sub_lg(l), l->n_kv_heads, G, l->window, scale, sc,
                                             n_splits, min_split, nullptr, 0, arrive);
        if (CUDA_LAUNCHED(c, "attention decode (mma)")) return;
    }
    if (pk) dprof_event(c, &dp, 1);
    if (n_splits > 1 && (!arrive || (dyn && n_splits > DECODE_FUSED_MAX)))
        launch_combine(c, out, bt->n_seqs, l->n_kv_heads * G, HD, n_splits, c->cb.qstart, dyn, c->cb.seq_lens, l->window, min_split);
    if (pk) {
        dprof_event(c, &dp, 2);
        dprof_report(c, &dp, n_ctas, 2.0 * (double)l->n_kv_heads * HD * (l->dtype == DT_BF16 ? 2 : 1) * (double)c->cb.max_ctx * bt->n_seqs);
    }
}

// Identity mode (--batch-invariant; OCTET_IDENTITY=1 forces it): every query row, decode or prefill, runs the
// decode kernel's arithmetic with splits at absolute block positions (IDENTITY_SPLIT blocks
// each, as many as the block table is wide), always through the combine. A prefill row is a
// pseudo-sequence of its own (context = its position + 1, block table of its sequence), so a
// token's attention is the same sum in the same order whether it was decoded or prefilled.
#define IDENTITY_SPLIT 64
__global__ void k_pseudo_seqs(int32_t *qs, int32_t *sl, const int32_t *pos, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { qs[i] = i; sl[i] = pos[i] + 1; }
}

template <int HD>
static void launch_decode_identity(struct cuda_backend *c, void *out, const void *q, const struct kv_layer *l, int G,
                                   float scale, const float *sc, const struct batch *bt) {
    constexpr int STAGES = 3;
    const size_t ring = (size_t)4 * STAGES * 2 * 16 * HD * (l->dtype == DT_BF16 ? 2 : 1);
    decode_mma_fn kern = decode_mma_for<HD>(l, STAGES);
    static bool attr[3];
    int di = l->dtype == DT_BF16 ? 0 : l->dtype == DT_E4M3 ? 1 : 2;
    if (!attr[di]) {
        if (cuda_fail(c, cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)ring), "decode attr")) return;
        attr[di] = true;
    }
    // the same split count for every step of a table width: at least 2, so the combine always runs
    int n_splits = ((bt->max_blocks_per_seq << kv_sub_lg(l)) + IDENTITY_SPLIT - 1) / IDENTITY_SPLIT;
    if (n_splits < 2) n_splits = 2;
    const bool decode = c->cb.max_q == 1;
    int n_rows = decode ? bt->n_seqs : bt->n_tokens;  // decode: one row per sequence; else one per token
    const int32_t *qs = c->cb.qstart, *sl = c->cb.seq_lens, *seq_of = nullptr;
    if (!decode) {
        if (!cuda_reserve(c, &c->d_pseudo, &c->pseudo_cap, (size_t)2 * n_rows)) return;
        k_pseudo_seqs<<<(n_rows + 255) / 256, 256, 0, c->stream>>>(c->d_pseudo, c->d_pseudo + n_rows, c->cb.pos, n_rows);
        if (CUDA_LAUNCHED(c, "identity pseudo-sequences")) return;
        qs = c->d_pseudo;
        sl = c->d_pseudo + n_rows;
        seq_of = c->cb.tok_seq;
    }
    // rows in groups whose partials fit in 128 MB
    const size_t per_row = (size_t)l->n_kv_heads * G * n_splits * (HD + 2);
    int group = (int)(((size_t)128 << 20) / per_row);
    if (group < 1) group = 1;
    if (group > n_rows) group = n_rows;
    if (!cuda_reserve(c, &c->d_part, &c->part_cap, per_row * group)) return;
    for (int r0 = 0; r0 < n_rows; r0 += group) {
        int n = n_rows - r0 < group ? n_rows - r0 : group;
        dim3 grid(n, l->n_kv_heads, n_splits);
        kern<<<grid, 128, ring, c->stream>>>((bf16 *)out, c->d_part, (const bf16 *)q, l->k, l->v, qs + r0, sl + r0, c->cb.btab,
                                             bt->max_blocks_per_seq, kv_sub_lg(l), l->n_kv_heads, G, l->window, scale, sc, n_splits, 0,
                                             seq_of ? seq_of + r0 : nullptr, IDENTITY_SPLIT, nullptr);
        if (CUDA_LAUNCHED(c, "attention (identity mode)")) return;
        launch_combine(c, out, n, l->n_kv_heads * G, HD, n_splits, qs + r0);
    }
}

bool cuda_identity_mode(const struct cuda_backend *c) {
    static const bool forced = cuda_env_int("OCTET_IDENTITY", 0) == 1;
    return forced || c->base.batch_invariant;
}

template <int HD, int G>
static bool launch_decode_g(struct cuda_backend *c, void *out, const void *q, const struct kv_layer *l, float scale,
                            const float *sc, const struct batch *bt) {
    int nb_max = c->fixed_plan ? c->cb.max_blocks_per_seq << kv_sub_lg(l) : (c->cb.max_ctx + 15) / 16;
    if (l->window > 0 && nb_max > l->window / 16 + 2) nb_max = l->window / 16 + 2;
    int ctas = bt->n_seqs * l->n_kv_heads;
    int target = c->n_sm * 4;
    int n_splits = (target + ctas - 1) / ctas;
    int max_splits = (nb_max + 3) / 4;  // at least ~4 blocks (one per warp) per split
    if (n_splits > max_splits) n_splits = max_splits;
    if (n_splits < 1) n_splits = 1;
    int per_split = (nb_max + n_splits - 1) / n_splits;
    n_splits = (nb_max + per_split - 1) / per_split;
    size_t need = (size_t)bt->n_seqs * l->n_kv_heads * G * n_splits * (HD + 2);
    if (n_splits > 1 && !cuda_reserve(c, &c->d_part, &c->part_cap, need)) return true;
    dim3 grid(bt->n_seqs, l->n_kv_heads, n_splits);
#define LAUNCH(DTV) k_decode<HD, G, DTV><<<grid, 128, 0, c->stream>>>((bf16 *)out, c->d_part, (const bf16 *)q, l->k, l->v, \
        c->cb.qstart, c->cb.seq_lens, c->cb.btab, bt->max_blocks_per_seq, kv_sub_lg(l), l->n_kv_heads, l->window, scale, sc, n_splits, per_split)
    if (l->dtype == DT_BF16) LAUNCH(DT_BF16);
    else if (l->dtype == DT_E4M3) LAUNCH(DT_E4M3);
    else LAUNCH(DT_E5M2);
#undef LAUNCH
    if (CUDA_LAUNCHED(c, "attention decode")) return true;
    if (n_splits > 1) launch_combine(c, out, bt->n_seqs, l->n_kv_heads * G, HD, n_splits, c->cb.qstart);
    return true;
}

template <int HD>
static bool launch_decode(struct cuda_backend *c, void *out, const void *q, const struct kv_layer *l, int G, float scale,
                          const float *sc, const struct batch *bt) {
    switch (G) {
    case 1: return launch_decode_g<HD, 1>(c, out, q, l, scale, sc, bt);
    case 2: return launch_decode_g<HD, 2>(c, out, q, l, scale, sc, bt);
    case 4: return launch_decode_g<HD, 4>(c, out, q, l, scale, sc, bt);
    case 8: return launch_decode_g<HD, 8>(c, out, q, l, scale, sc, bt);
    }
    return false;
}

// False (nothing launched) when a chunk's K and V in f32 exceed the shared memory a CTA may opt in
// to (227 KB on the H200: whole 128-token blocks at head_dim 256, 256-token ones at 128; a 16-token
// chunk needs 32 KB at 256); the caller then takes the generic kernel, which needs none.
template <int HD>
static bool launch_prefill(struct cuda_backend *c, void *out, const void *q, const struct kv_layer *l, int G, float scale,
                           const float *sc, const struct batch *bt) {
    constexpr int ROWS = 128 / (HD / 32);
    int qt = ROWS / G;
    dim3 grid(bt->n_seqs, (c->cb.max_q + qt - 1) / qt, l->n_kv_heads);
    static const bool chunk16 = cuda_env_int("OCTET_PREFILL_CHUNK", 16) == 16;  // (0: whole blocks; above k_prefill)
    const int sub = chunk16 && l->kv_block_tokens % 16 == 0 ? 16 : l->kv_block_tokens;
    size_t smem = 2 * (size_t)sub * HD * sizeof(float);
    if (smem > c->smem_optin) return false;
    if (smem > 48 * 1024 &&
        cuda_fail(c, cudaFuncSetAttribute(k_prefill<HD>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem), "attention prefill: smem attr"))
        return true;  // (the error is latched)
    k_prefill<HD><<<grid, 128, smem, c->stream>>>((bf16 *)out, (const bf16 *)q, l->k, l->v, (int)l->dtype, c->cb.qstart,
                                                 c->cb.pos, c->cb.btab, bt->max_blocks_per_seq, l->n_kv_heads, G,
                                                 l->kv_block_tokens, l->window, scale, sc, sub);
    CUDA_LAUNCHED(c, "attention prefill");
    return true;
}

// FP8 (e4m3) prefill on wgmma (the older kernel). NWG: consumer warpgroups a CTA (1 or 2).
template <int HD, int ACC, int NWG>
static void launch_prefill_fp8_acc(struct cuda_backend *c, void *out, const void *q, const struct kv_layer *l, int G,
                                   float scale, const float *sc, const struct batch *bt, int every) {
    constexpr int SMEM = fp8pf::cfg<HD>::smem(NWG), ROWS = 64 * NWG, THREADS = 128 * NWG;
    auto kern = k_prefill_fp8<HD, ACC, NWG>;
    static bool attr_set = false;
    if (!attr_set) {
        if (cuda_fail(c, cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM), "cudaFuncSetAttribute(k_prefill_fp8)"))
            return;
        attr_set = true;
    }
    int qt = ROWS / G;
    dim3 grid(bt->n_seqs, (c->cb.max_q + qt - 1) / qt, l->n_kv_heads);
    kern<<<grid, THREADS, SMEM, c->stream>>>(
        (bf16 *)out, (const bf16 *)q, (const uint8_t *)l->k, (const uint8_t *)l->v, c->cb.qstart, c->cb.pos, c->cb.btab,
        bt->max_blocks_per_seq, l->n_kv_heads, G, l->kv_block_tokens, l->window, scale, sc, every);
    CUDA_LAUNCHED(c, "attention prefill (fp8 wgmma)");
}

template <int HD, int NWG>
static void launch_prefill_fp8_nwg(struct cuda_backend *c, void *out, const void *q, const struct kv_layer *l, int G,
                                   const struct attn_params *p, const float *sc, const struct batch *bt) {
    if (p->fp8_accum == 0 || p->fp8_accum == 1) launch_prefill_fp8_acc<HD, 0, NWG>(c, out, q, l, G, p->softmax_scale, sc, bt, 1);
    else if (p->fp8_accum > 1) launch_prefill_fp8_acc<HD, 1, NWG>(c, out, q, l, G, p->softmax_scale, sc, bt, p->fp8_accum);
    else launch_prefill_fp8_acc<HD, 2, NWG>(c, out, q, l, G, p->softmax_scale, sc, bt, 0);
}

// At head_dim 128 the TMA kernel (cuda_prefill_fp8_tma.cuh) comes first; otherwise two consumer
// warpgroups per CTA share each K/V tile (the default), or one with OCTET_FP8_WG=1 (the previous
// kernel, kept for comparisons). (Two lab kernels — a producer warpgroup with named-barrier
// hand-over, and the next tile's Q·Kᵀ under this tile's softmax — measured slower or level
// and were removed in session 17; bench/NOTES.md sessions 13–14 has them.)
template <int HD>
static void launch_prefill_fp8(struct cuda_backend *c, void *out, const void *q, const struct kv_layer *l, int G,
                               const struct attn_params *p, const float *sc, const struct batch *bt) {
    // The TMA / warp-specialised / ping-pong kernel where it fits (head_dim 128, every accumulation
    // mode): 395 against 243 TFLOP/s at 16k on the H200 (bench/NOTES.md, session 15; every:N joined
    // it in session 21).
    // OCTET_FP8_TMA=0 selects the kernels below (as setting one of their lab switches does).
    static int tma = -1;
    if (tma < 0)
        tma = cuda_env_int("OCTET_FP8_TMA", getenv("OCTET_FP8_WG") ? 0 : 1);
    if ((HD == 128 || HD == 64) && tma == 1 && fp8tma_fits(l, G)) {
        const int acc = p->fp8_accum < 0 ? 2 : p->fp8_accum > 1 ? 1 : 0;  // (every:1 is two-level)
        launch_prefill_fp8_tma<HD == 64 ? 64 : 128>(c, out, q, l, G, p->softmax_scale, sc, bt, acc, acc == 1 ? p->fp8_accum : 1);
        return;
    }
    static const int nwg = cuda_env_int("OCTET_FP8_WG", 2) == 1 ? 1 : 2;
    if (nwg == 2) launch_prefill_fp8_nwg<HD, 2>(c, out, q, l, G, p, sc, bt);
    else launch_prefill_fp8_nwg<HD, 1>(c, out, q, l, G, p, sc, bt);
}

// OCTET_FP8_WGMMA=0 sends e4m3 prefill to the f16 mma.sync kernel instead (for comparisons).
static bool fp8_wgmma_on(void) {
    static const bool on = cuda_env_int("OCTET_FP8_WGMMA", 1) != 0;
    return on;
}

extern "C" void cuda_attention(struct backend *b, void *out, const void *q, const struct kv_layer *l,
                               const struct attn_params *p, const struct batch *bt) {
    struct cuda_backend *c = (struct cuda_backend *)b;
    if (CUDA_SKIP(c) || !bt->n_tokens) return;
    float *sc = cuda_layer_scales(c, l);
    if (!sc) return;
    int G = p->n_heads / l->n_kv_heads, hd = l->head_dim;
    bool fast_dtype = l->dtype == DT_BF16 || l->dtype == DT_E4M3 || l->dtype == DT_E5M2;
    bool fast_shape = (hd == 64 || hd == 128 || hd == 256) && kv_sub_lg(l) >= 0;
    const bool identity = cuda_identity_mode(c);
    if (identity && fast_dtype && fast_shape && G <= 8 && (hd == 64 || hd == 128)) {
        if (hd == 64) launch_decode_identity<64>(c, out, q, l, G, p->softmax_scale, sc, bt);
        else launch_decode_identity<128>(c, out, q, l, G, p->softmax_scale, sc, bt);
        return;
    }
    if (identity) goto generic;  // other shapes: the generic kernel, one query row at a time (invariant too)
    if (c->cb.max_q == 1 && fast_dtype && fast_shape && G <= 8 && (hd == 64 || hd == 128)) {
        if (hd == 64) launch_decode_mma<64>(c, out, q, l, G, p->softmax_scale, sc, bt);
        else launch_decode_mma<128>(c, out, q, l, G, p->softmax_scale, sc, bt);
        return;
    }
    if (c->cb.max_q == 1 && fast_dtype && fast_shape && (G == 1 || G == 2 || G == 4 || G == 8)) {
        bool ok = hd == 64 ? launch_decode<64>(c, out, q, l, G, p->softmax_scale, sc, bt)
                : hd == 128 ? launch_decode<128>(c, out, q, l, G, p->softmax_scale, sc, bt)
                            : launch_decode<256>(c, out, q, l, G, p->softmax_scale, sc, bt);
        if (ok) return;
    }
    if (l->dtype == DT_E4M3 && (hd == 64 || hd == 128 || hd == 256) && 64 % G == 0 && fp8_wgmma_on()) {
        if (hd == 64) launch_prefill_fp8<64>(c, out, q, l, G, p, sc, bt);
        else if (hd == 128) launch_prefill_fp8<128>(c, out, q, l, G, p, sc, bt);
        else launch_prefill_fp8<256>(c, out, q, l, G, p, sc, bt);
        return;
    }
    if (fast_dtype && (hd == 64 || hd == 128) && kv_sub_lg(l) >= 0 && G <= 16 && 16 % G == 0) {
        dim3 grid(bt->n_seqs, (c->cb.max_q + 64 / G - 1) / (64 / G), l->n_kv_heads);
#define PF(HDV, DTV) k_prefill_mma<HDV, DTV><<<grid, 128, 0, c->stream>>>((bf16 *)out, (const bf16 *)q, l->k, l->v, c->cb.qstart, \
            c->cb.pos, c->cb.btab, bt->max_blocks_per_seq, kv_sub_lg(l), l->n_kv_heads, G, l->window, p->softmax_scale, sc)
        if (hd == 64) { if (l->dtype == DT_BF16) PF(64, DT_BF16); else if (l->dtype == DT_E4M3) PF(64, DT_E4M3); else PF(64, DT_E5M2); }
        else { if (l->dtype == DT_BF16) PF(128, DT_BF16); else if (l->dtype == DT_E4M3) PF(128, DT_E4M3); else PF(128, DT_E5M2); }
#undef PF
        CUDA_LAUNCHED(c, "attention prefill (mma)");
        return;
    }
    if ((hd == 64 || hd == 128 || hd == 256) && (128 / (hd / 32)) % G == 0) {
        const bool done = hd == 64    ? launch_prefill<64>(c, out, q, l, G, p->softmax_scale, sc, bt)
                          : hd == 128 ? launch_prefill<128>(c, out, q, l, G, p->softmax_scale, sc, bt)
                                      : launch_prefill<256>(c, out, q, l, G, p->softmax_scale, sc, bt);
        if (done) return;
    }
generic:
    if (hd > 512) { if (!c->error) { c->error = OCT_EUNSUP; snprintf(c->msg, sizeof c->msg, "attention: head_dim %d > 512", hd); } return; }
    k_generic<<<dim3(bt->n_tokens, p->n_heads), 32, 0, c->stream>>>((bf16 *)out, (const bf16 *)q, l->k, l->v, (int)l->dtype,
                                                                   c->cb.tok_seq, c->cb.pos, c->cb.btab, bt->max_blocks_per_seq,
                                                                   l->n_kv_heads, G, hd, l->kv_block_tokens, l->window,
                                                                   p->softmax_scale, sc);
    CUDA_LAUNCHED(c, "attention generic");
}
