// cuda_prefill_fp8.cu — prefill attention over an e4m3 cache on Hopper's FP8 tensor cores: the TMA
// kernel for head_dim 64 / 128 (cuda_prefill_fp8_tma.cuh, with the Vᵀ pass of
// cuda_prefill_vt.cuh) and the older two-warpgroup kernel for head_dim 256 and the cache blocks
// TMA cannot box (cuda_prefill_fp8.cuh). Owns their fits / launch entries of the attention kernel
// table and their per-backend set-up. --fp8-attention-accumulation picks the mode in both.
#include "cuda_attention.cuh"
#include "cuda_decode_mma.cuh"  // (the cp.async helpers the older kernel shares)
#include "cuda_prefill_fp8.cuh"
#include "cuda_prefill_fp8_tma.cuh"

// The kernels' accumulation mode (0 two-level, 1 every:N, 2 single) and N, from the layer's
// parameters (every:1 is two-level).
static int fp8_acc(const struct attn_params *p) { return p->fp8_accum < 0 ? 2 : p->fp8_accum > 1 ? 1 : 0; }

// ---------------------------------------------------------------- TMA (prefill_fp8_tma)

bool attn_prefill_fp8_tma_fits(const struct attn_call *a) {
    return a->l->dtype == DT_E4M3 && fp8tma_fits(a->l, a->G);
}

void attn_prefill_fp8_tma_launch(const struct attn_call *a) {
    const int acc = fp8_acc(a->p), n_every = acc == 1 ? a->p->fp8_accum : 1;
    if (a->l->head_dim == 64) launch_prefill_fp8_tma<64>(a, acc, n_every);
    else launch_prefill_fp8_tma<128>(a, acc, n_every);
}

// ---------------------------------------------------------------- two warpgroups (prefill_fp8_wgmma)

// Two consumer warpgroups a CTA share each K/V tile, its loads and its Vᵀ transpose.
template <int HD, int ACC> static constexpr int fp8_wgmma_smem() { return fp8pf::cfg<HD>::smem(2); }
template <int HD> static bool fp8_wgmma_init(struct cuda_backend *c) {
    const int smem = fp8_wgmma_smem<HD, 0>();
    return !cuda_fail(c,
                      cudaFuncSetAttribute(k_prefill_fp8<HD, 0, 2>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem),
                      "fp8 prefill: shared-memory limit") &&
           !cuda_fail(c,
                      cudaFuncSetAttribute(k_prefill_fp8<HD, 1, 2>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem),
                      "fp8 prefill: shared-memory limit") &&
           !cuda_fail(c,
                      cudaFuncSetAttribute(k_prefill_fp8<HD, 2, 2>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem),
                      "fp8 prefill: shared-memory limit");
}

bool attn_prefill_fp8_wgmma_fits(const struct attn_call *a) {
    const int hd = a->l->head_dim;
    return a->l->dtype == DT_E4M3 && (hd == 64 || hd == 128 || hd == 256) && 64 % a->G == 0;
}

template <int HD> static void fp8_wgmma_launch(const struct attn_call *a) {
    struct cuda_backend *c = a->c;
    const int acc = fp8_acc(a->p), qt = 128 / a->G;
    const dim3 grid(a->bt->n_seqs, (c->cb.max_q + qt - 1) / qt, a->l->n_kv_heads);
    attn_args args = attn_args_of(a);
    args.n_every = acc == 1 ? a->p->fp8_accum : acc == 0 ? 1 : 0;
    const int smem = fp8_wgmma_smem<HD, 0>();
    if (acc == 0) k_prefill_fp8<HD, 0, 2><<<grid, 256, smem, c->stream>>>(args);
    else if (acc == 1) k_prefill_fp8<HD, 1, 2><<<grid, 256, smem, c->stream>>>(args);
    else k_prefill_fp8<HD, 2, 2><<<grid, 256, smem, c->stream>>>(args);
    CUDA_LAUNCHED(c, "attention prefill (fp8 wgmma)");
}

void attn_prefill_fp8_wgmma_launch(const struct attn_call *a) {
    const int hd = a->l->head_dim;
    if (hd == 64) fp8_wgmma_launch<64>(a);
    else if (hd == 128) fp8_wgmma_launch<128>(a);
    else fp8_wgmma_launch<256>(a);
}

bool cuda_prefill_fp8_init(struct cuda_backend *c) {
    return fp8tma_init<64>(c) && fp8tma_init<128>(c) && fp8_wgmma_init<64>(c) && fp8_wgmma_init<128>(c) &&
           fp8_wgmma_init<256>(c);
}
