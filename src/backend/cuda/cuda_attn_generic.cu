// cuda_attn_generic.cu — the generic attention kernel: any head_dim up to 512, any cache block
// size and element type, soft-capped scores or not, per-token-head scales or not, one query row at
// a time (so also batch-invariant). It is the table's last
// entry, for the shapes no faster kernel fits. Owns its fits / launch entry of the attention
// kernel table (cuda_attention.cu).
//
// Data layout (docs/kv_format.md): cache [n_blocks][n_kv_heads][kv_block_tokens][head_dim];
// q, out [n_tokens][n_heads][head_dim] bf16.
#include <math.h>

#include "cuda_attention.cuh"

// One warp per (query token, query head); lane owns dims lane, lane+32, ... CAP: soft-capped scores.
// TS: per-token-head scales (kts, vts: [n_blocks][n_kv][bs]): key j's score is multiplied by its K
// scale before soft-capping and softmax, and its p by its V scale before p·v (the sum l keeps the
// unscaled p), as the CPU reference does (docs/kv_format.md). sinks (attn_args.sinks, or null): the
// query head's sink logit joins l at the end as e^(sink − m), m the row's maximum in natural units.
template <bool CAP, bool TS>
__device__ __forceinline__ void generic_body(bf16 *out, const bf16 *q, const void *kc, const void *vc, int dt,
                                             const int32_t *tok_seq, const int32_t *pos_arr, const int32_t *btab,
                                             int max_blocks, int n_kv, int G, int hd, int bs, int window, float scale,
                                             const float *scales, float softcap, const float *kts, const float *vts,
                                             const float *sinks) {
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
        qr[i] = d < hd ? __bfloat162float(qp[d]) * scale * kscale : 0.0f;  // (scores in natural units)
        acc[i] = 0.0f;
    }
    const int32_t *bt = btab + (size_t)s * max_blocks;
    for (int kp = lo; kp <= pos; kp++) {
        size_t base = (((size_t)bt[kp / bs] * n_kv + g) * bs + kp % bs) * hd;
        float d = 0.0f;
#pragma unroll
        for (int i = 0; i < MAXD; i++) {
            int dd = lane + 32 * i;
            if (dd < hd) d += qr[i] * load_any(kc, base + dd, dt);
        }
        for (int o = 16; o > 0; o >>= 1) d += __shfl_xor_sync(0xffffffff, d, o);
        float pv = 1.0f;  // (TS: the row's V scale)
        if constexpr (TS) {
            d *= kts[base / hd];
            pv = vts[base / hd];
        }
        if constexpr (CAP) d = softcap * tanhf(d / softcap);
        float mn = fmaxf(m, d), alpha = __expf(m - mn), p = __expf(d - mn);
        l = l * alpha + p;
        if constexpr (TS) p *= pv;
#pragma unroll
        for (int i = 0; i < MAXD; i++) {
            int dd = lane + 32 * i;
            if (dd < hd) acc[i] = acc[i] * alpha + p * load_any(vc, base + dd, dt);
        }
        m = mn;
    }
    if (sinks) l += __expf(sinks[qh] - m);
    bf16 *op = out + ((size_t)t * n_kv * G + qh) * hd;
#pragma unroll
    for (int i = 0; i < MAXD; i++) {
        int dd = lane + 32 * i;
        if (dd < hd) op[dd] = __float2bfloat16_rn(acc[i] * vscale / l);
    }
}

template <bool CAP, bool TS = false> __global__ void k_generic(const __grid_constant__ attn_args a, int dt, int hd) {
    generic_body<CAP, TS>(a.out, a.q, a.kc, a.vc, dt, a.tok_seq, a.pos, a.btab, a.max_blocks, a.n_kv, a.G, hd, a.bs,
                          a.window, a.scale, a.scales, a.softcap, a.kts, a.vts, a.sinks);
}

bool attn_generic_fits(const struct attn_call *a) { return a->l->head_dim <= 512; }

void attn_generic_launch(const struct attn_call *a) {
    struct cuda_backend *c = a->c;
    const dim3 grid(a->bt->n_tokens, a->p->n_heads);
    const int dt = (int)a->l->dtype, hd = a->l->head_dim;
    const bool cap = a->p->softcap > 0;
    if (a->tok) {
        if (cap) k_generic<true, true><<<grid, 32, 0, c->stream>>>(attn_args_of(a), dt, hd);
        else k_generic<false, true><<<grid, 32, 0, c->stream>>>(attn_args_of(a), dt, hd);
    } else if (cap) {
        k_generic<true><<<grid, 32, 0, c->stream>>>(attn_args_of(a), dt, hd);
    } else {
        k_generic<false><<<grid, 32, 0, c->stream>>>(attn_args_of(a), dt, hd);
    }
    CUDA_LAUNCHED(c, "attention generic");
}
