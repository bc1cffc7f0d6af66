// cuda_prefill_fp8.cu — prefill attention over an e4m3 cache on Hopper's FP8 tensor cores: the TMA
// kernel for head_dim 64 / 128 (cuda_prefill_fp8_tma.cuh, with the Vᵀ pass of
// cuda_prefill_vt.cuh) and the older two-warpgroup kernel for head_dim 256 and the cache blocks
// TMA cannot box (cuda_prefill_fp8.cuh). Owns their fits / launch entries of the attention kernel
// table and their per-backend set-up. --fp8-attention-accumulation picks the mode in both, with or
// without soft-capped scores (Gemma 2).
#include "cuda_attention.cuh"
#include "cuda_decode_mma.cuh"  // (the cp.async helpers the older kernel shares)
#include "cuda_prefill_fp8.cuh"
#include "cuda_prefill_fp8_tma.cuh"

// ---------------------------------------------------------------- TMA (prefill_fp8_tma)

// (per-token-head layers too: their instances are cuda_prefill_fp8_tok.cu's)
bool attn_prefill_fp8_tma_fits(const struct attn_call *a) {
    return a->l->dtype == DT_E4M3 && fp8tma_fits(a->l, a->G);
}

void attn_prefill_fp8_tma_launch(const struct attn_call *a) {
    if (a->tok) attn_prefill_fp8_tma_tok_launch(a);
    else launch_prefill_fp8_tma_any<false>(a);
}

// ---------------------------------------------------------------- two warpgroups (prefill_fp8_wgmma)

// Two consumer warpgroups a CTA share each K/V tile, its loads and its Vᵀ transpose.
template <int HD, fp8_accum_mode ACC, bool CAP = false> static bool fp8_wgmma_init1(struct cuda_backend *c) {
    return !cuda_fail(c,
                      cudaFuncSetAttribute(k_prefill_fp8<HD, ACC, CAP>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           fp8pf::cfg<HD>::SMEM),
                      "fp8 prefill: shared-memory limit");
}
template <int HD, bool CAP> static bool fp8_wgmma_init_cap(struct cuda_backend *c) {
    return fp8_wgmma_init1<HD, FP8_TWO_LEVEL, CAP>(c) && fp8_wgmma_init1<HD, FP8_EVERY_N, CAP>(c) &&
           fp8_wgmma_init1<HD, FP8_SINGLE, CAP>(c);
}
template <int HD> static bool fp8_wgmma_init(struct cuda_backend *c) {
    return fp8_wgmma_init_cap<HD, false>(c) && fp8_wgmma_init_cap<HD, true>(c);
}

bool attn_prefill_fp8_wgmma_fits(const struct attn_call *a) {
    const int hd = a->l->head_dim;
    return a->l->dtype == DT_E4M3 && (hd == 64 || hd == 128 || hd == 256) && 64 % a->G == 0;
}

template <int HD, bool CAP> static void fp8_wgmma_launch(const struct attn_call *a) {
    typedef fp8pf::cfg<HD> C;
    struct cuda_backend *c = a->c;
    const fp8_accum_mode acc = fp8_mode(a->p);
    const int qt = 64 * C::NWG / a->G;
    const dim3 grid(a->bt->n_seqs, (c->cb.max_q + qt - 1) / qt, a->l->n_kv_heads);
    attn_args args = attn_args_of(a);
    args.n_every = acc == FP8_SINGLE ? 0 : fp8_every(a->p);
    const dim3 block(128 * C::NWG);
    switch (acc) {
    case FP8_TWO_LEVEL: k_prefill_fp8<HD, FP8_TWO_LEVEL, CAP><<<grid, block, C::SMEM, c->stream>>>(args); break;
    case FP8_EVERY_N: k_prefill_fp8<HD, FP8_EVERY_N, CAP><<<grid, block, C::SMEM, c->stream>>>(args); break;
    case FP8_SINGLE: k_prefill_fp8<HD, FP8_SINGLE, CAP><<<grid, block, C::SMEM, c->stream>>>(args); break;
    }
    CUDA_LAUNCHED(c, "attention prefill (fp8 wgmma)");
}

template <bool CAP> static void fp8_wgmma_cap(const struct attn_call *a) {
    const int hd = a->l->head_dim;
    if (hd == 64) fp8_wgmma_launch<64, CAP>(a);
    else if (hd == 128) fp8_wgmma_launch<128, CAP>(a);
    else fp8_wgmma_launch<256, CAP>(a);
}

void attn_prefill_fp8_wgmma_launch(const struct attn_call *a) {
    if (a->p->softcap > 0) fp8_wgmma_cap<true>(a);
    else fp8_wgmma_cap<false>(a);
}

bool cuda_prefill_fp8_init(struct cuda_backend *c) {
    return fp8tma_init<64, false>(c) && fp8tma_init<128, false>(c) && cuda_prefill_fp8_tok_init(c) &&
           fp8_wgmma_init<64>(c) && fp8_wgmma_init<128>(c) && fp8_wgmma_init<256>(c);
}
