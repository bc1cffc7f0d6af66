// cuda_prefill.cu — prefill attention for bf16 and e5m2 caches (and e4m3 where the FP8 kernels do
// not fit): the mma.sync kernel (cuda_prefill_mma.cuh) for head_dim 64 / 128 and the SIMT kernel
// for what it does not take (head_dim 256, GQA groups that do not divide its tile). Owns their
// fits / launch entries of the attention kernel table. The SIMT kernel also takes per-token-head
// (fp8_per_token_head) layers.
#include "cuda_attention.cuh"
#include "cuda_decode_mma.cuh"  // (the operand traits and fragment loads k_prefill_mma shares)
#include "cuda_prefill_mma.cuh"

// ---------------------------------------------------------------- tensor cores (prefill_mma)

bool attn_prefill_mma_fits(const struct attn_call *a) {
    const int hd = a->l->head_dim;
    return a->fast_dtype && (hd == 64 || hd == 128) && a->lgr >= 0 && a->G <= 16 && 16 % a->G == 0;
}

template <bool CAP> static void prefill_mma_launch(const struct attn_call *a) {
    struct cuda_backend *c = a->c;
    const struct kv_layer *l = a->l;
    const int qt = 64 / a->G;
    const dim3 grid(a->bt->n_seqs, (c->cb.max_q + qt - 1) / qt, l->n_kv_heads);
    const attn_args args = attn_args_of(a);
    if (l->head_dim == 64) {
        if (l->dtype == DT_BF16) k_prefill_mma<64, DT_BF16, CAP><<<grid, 128, 0, c->stream>>>(args);
        else if (l->dtype == DT_E4M3) k_prefill_mma<64, DT_E4M3, CAP><<<grid, 128, 0, c->stream>>>(args);
        else k_prefill_mma<64, DT_E5M2, CAP><<<grid, 128, 0, c->stream>>>(args);
    } else {
        if (l->dtype == DT_BF16) k_prefill_mma<128, DT_BF16, CAP><<<grid, 128, 0, c->stream>>>(args);
        else if (l->dtype == DT_E4M3) k_prefill_mma<128, DT_E4M3, CAP><<<grid, 128, 0, c->stream>>>(args);
        else k_prefill_mma<128, DT_E5M2, CAP><<<grid, 128, 0, c->stream>>>(args);
    }
    CUDA_LAUNCHED(c, "attention prefill (mma)");
}

void attn_prefill_mma_launch(const struct attn_call *a) {
    if (a->p->softcap > 0) prefill_mma_launch<true>(a);
    else prefill_mma_launch<false>(a);
}

// ---------------------------------------------------------------- SIMT (prefill_simt)

// One CTA = (sequence, query tile, KV head). THR = HD/32 threads own one query row
// (32 dims each: q and the accumulator in registers); ROWS = 128/THR rows per CTA =
// ROWS/G query tokens × G heads. Keys stream through shared memory in chunks of sub tokens:
// 16-token parts of a block whose size is a multiple of 16 (else the whole block), one key at a
// time, so the part size does not change the numbers. Why parts: at the CUDA default of 64-token
// blocks a whole block of f32 K and V at head_dim 256 is 128 KB, one CTA an SM; a 16-token part is
// 32 KB, several CTAs an SM. CAP: soft-capped scores (score_map). TS: per-token-head scales (kts,
// vts: [n_blocks][n_kv][bs], docs/kv_format.md): each K and V row is multiplied by its scale as it is
// widened into shared memory, so k·q carries s_k and p·v carries s_v: the CPU's score·s_k and
// (p·s_v)·v reassociated; the sum l keeps the unscaled p. Attention sinks (attn_args.sinks) join l at
// the end as e^(sink − m), m the row's maximum in natural units.
template <int HD, bool CAP, bool TS>
__device__ __forceinline__ void prefill_simt_body(bf16 *out, const bf16 *q, const void *kc, const void *vc, int dt,
                                                  const int32_t *qstart, const int32_t *pos_arr, const int32_t *btab,
                                                  int max_blocks, int n_kv, int G, int bs, int window, float scale,
                                                  const float *scales, int sub, float softcap, const float *kts,
                                                  const float *vts, const float *sinks) {
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
            if constexpr (TS) {  // (rows past the context may hold anything: their keys are skipped below)
                sk[i] *= kts[(base + i) / HD];
                sv[i] *= vts[(base + i) / HD];
            }
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
            if constexpr (CAP) d = softcap * tanhf(d / softcap);  // (q carries the scales: d in natural units)
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
    if (sinks) l += __expf(sinks[g * G + h] - m);
    bf16 *op = out + ((size_t)t * n_kv * G + g * G + h) * HD + part * 32;
    float f = l > 0 ? vscale / l : 0.0f;
#pragma unroll
    for (int i = 0; i < 32; i++) op[i] = __float2bfloat16_rn(acc[i] * f);
}

// (at least five CTAs an SM: 102 registers at most, which it fits without spills — the sink's
// epilogue term otherwise moves ptxas to 116 and four CTAs)
template <int HD, bool CAP, bool TS = false>
__global__ void __launch_bounds__(128, 5) k_prefill(const __grid_constant__ attn_args a, int dt, int sub) {
    prefill_simt_body<HD, CAP, TS>(a.out, a.q, a.kc, a.vc, dt, a.qstart, a.pos, a.btab, a.max_blocks, a.n_kv, a.G,
                                   a.bs, a.window, a.scale, a.scales, sub, a.softcap, a.kts, a.vts, a.sinks);
}

// Keys stream through shared memory in parts of `sub` tokens: 16 where the block is a multiple of 16.
static int prefill_simt_part(const struct kv_layer *l) {
    return l->kv_block_tokens % 16 == 0 ? 16 : l->kv_block_tokens;
}
static size_t prefill_simt_smem(const struct kv_layer *l) {
    return 2 * (size_t)prefill_simt_part(l) * l->head_dim * sizeof(float);
}

// A part's K and V in f32 must fit the shared memory a CTA may opt in to (227 KB on the H200:
// whole 128-token blocks at head_dim 256 do not; the generic kernel, which needs none, takes those).
bool attn_prefill_simt_fits(const struct attn_call *a) {
    const int hd = a->l->head_dim;
    return (hd == 64 || hd == 128 || hd == 256) && (128 / (hd / 32)) % a->G == 0 &&
           prefill_simt_smem(a->l) <= a->c->smem_optin;
}

template <int HD, bool CAP, bool TS> static void prefill_simt_launch(const struct attn_call *a) {
    struct cuda_backend *c = a->c;
    const struct kv_layer *l = a->l;
    constexpr int ROWS = 128 / (HD / 32);
    const int qt = ROWS / a->G, sub = prefill_simt_part(l);
    const size_t smem = prefill_simt_smem(l);
    const dim3 grid(a->bt->n_seqs, (c->cb.max_q + qt - 1) / qt, l->n_kv_heads);
    static size_t allowed = 0;
    if (!cuda_smem_allow(c, k_prefill<HD, CAP, TS>, smem, &allowed, "attention prefill: shared-memory limit")) return;
    k_prefill<HD, CAP, TS><<<grid, 128, smem, c->stream>>>(attn_args_of(a), (int)l->dtype, sub);
    CUDA_LAUNCHED(c, "attention prefill (SIMT)");
}

template <bool CAP, bool TS> static void prefill_simt_cap(const struct attn_call *a) {
    const int hd = a->l->head_dim;
    if (hd == 64) prefill_simt_launch<64, CAP, TS>(a);
    else if (hd == 128) prefill_simt_launch<128, CAP, TS>(a);
    else prefill_simt_launch<256, CAP, TS>(a);
}

void attn_prefill_simt_launch(const struct attn_call *a) {
    if (a->tok) a->p->softcap > 0 ? prefill_simt_cap<true, true>(a) : prefill_simt_cap<false, true>(a);
    else if (a->p->softcap > 0) prefill_simt_cap<true, false>(a);
    else prefill_simt_cap<false, false>(a);
}
