// cuda_prefill_bf16.cu — prefill attention on Hopper's 16-bit tensor cores (cuda_prefill_bf16.cuh:
// TMA copies, two or three consumer warpgroups, wgmma), soft-capped scores (Gemma 2) included: over a bf16 or
// f16 cache, and over an e4m3 or e5m2 cache at head_dim 256, converted to f16 in shared memory (a
// per-token-head e4m3 cache at head_dim 64, 128 and 256: scaled and converted to bf16). Owns the
// prefill_bf16_tma and prefill_f16_cvt entries of the attention kernel table (fits / launch) and
// their per-backend set-up.
#include "cuda_attention.cuh"
#include "cuda_prefill_bf16.cuh"

template <int HD, int DT, bool CAP = false, bool TS = false> static constexpr auto bf16tma_kernel() {
    return k_prefill_bf16<HD, DT, bf16pf::stages<HD>::KS, true, CAP, TS, bf16pf::consumers<HD, DT, CAP>::NC>;
}
template <int HD, int DT, bool CAP, bool TS = false> static constexpr int bf16tma_smem() {
    return bf16pf::lay<HD, bf16pf::stages<HD>::KS, DT == DT_E4M3 || DT == DT_E5M2, TS,
                       bf16pf::consumers<HD, DT, CAP>::NC>::SMEM;
}
// query rows a CTA: 64 a consumer warpgroup
static int bf16tma_rows(const struct attn_call *a) {
    return 64 * bf16pf::n_consumers(a->l->head_dim, a->l->dtype, a->p->softcap > 0);
}

template <int HD, int DT, bool CAP, bool TS = false> static bool bf16tma_init1(struct cuda_backend *c) {
    constexpr int smem = bf16tma_smem<HD, DT, CAP, TS>();
    return !cuda_fail(c,
                      cudaFuncSetAttribute(bf16tma_kernel<HD, DT, CAP, TS>(),
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, smem),
                      "bf16 prefill: shared-memory limit");
}
template <int HD> static bool bf16tma_init_tok(struct cuda_backend *c) {
    return bf16tma_init1<HD, DT_E4M3, false, true>(c) && bf16tma_init1<HD, DT_E4M3, true, true>(c);
}
template <int HD> static bool bf16tma_init(struct cuda_backend *c) {
    return bf16tma_init1<HD, DT_BF16, false>(c) && bf16tma_init1<HD, DT_F16, false>(c) &&
           bf16tma_init1<HD, DT_BF16, true>(c) && bf16tma_init1<HD, DT_F16, true>(c);
}

bool cuda_prefill_bf16_init(struct cuda_backend *c) {
    return bf16tma_init<64>(c) && bf16tma_init<128>(c) && bf16tma_init<256>(c) &&
           bf16tma_init1<256, DT_E4M3, false>(c) && bf16tma_init1<256, DT_E4M3, true>(c) &&
           bf16tma_init1<256, DT_E5M2, false>(c) && bf16tma_init1<256, DT_E5M2, true>(c) &&
           bf16tma_init_tok<64>(c) && bf16tma_init_tok<128>(c) && bf16tma_init_tok<256>(c);
}

bool attn_prefill_bf16_tma_fits(const struct attn_call *a) {
    const struct kv_layer *l = a->l;
    const int qt = bf16tma_rows(a) / (a->G > 0 ? a->G : 1);  // query tokens a CTA (the grid's y covers max_q)
    return (l->dtype == DT_BF16 || l->dtype == DT_F16) && bf16pf_fits(l->head_dim, l->kv_block_tokens, a->G) &&
           (a->c->cb.max_q + qt - 1) / qt <= 65535;
}

template <int HD, int DT, bool CAP, bool TS = false> static void bf16tma_launch(const struct attn_call *a) {
    struct cuda_backend *c = a->c;
    const struct kv_layer *l = a->l;
    const cuda_tma_encode_fn enc = cuda_tma_encoder(c, "16-bit prefill (TMA)");
    if (!enc) return;
    // rows a box: a block, or a tile's (e4m3: a half-tile's, the staging slot) when the block is larger
    constexpr bool CVT = DT == DT_E4M3 || DT == DT_E5M2;
    const int box = bf16pf::lay<HD, 2>::BN / (CVT ? 2 : 1);
    const int rows = l->kv_block_tokens < box ? l->kv_block_tokens : box;
    CUtensorMap km, vm;
    const auto map = CVT ? bf16pf_map_8bit : bf16pf_map;
    CUresult r = map(enc, &km, l->k, HD, l->kv_block_tokens, l->n_kv_heads, l->n_blocks, rows);
    if (r == CUDA_SUCCESS) r = map(enc, &vm, l->v, HD, l->kv_block_tokens, l->n_kv_heads, l->n_blocks, rows);
    if (r != CUDA_SUCCESS) {
        cuda_latch(c, OCT_EUNSUP, "bf16 prefill (TMA): cuTensorMapEncodeTiled failed (%d)", (int)r);
        return;
    }
    attn_args args = attn_args_of(a);
    args.rows_box = rows;
    // one CTA a (sequence, 64·NC query rows, KV head)
    constexpr int NC = bf16pf::consumers<HD, DT, CAP>::NC;
    const int qt = 64 * NC / a->G;
    const dim3 grid(a->bt->n_seqs, (c->cb.max_q + qt - 1) / qt, l->n_kv_heads);
    constexpr int smem = bf16tma_smem<HD, DT, CAP, TS>();
    bf16tma_kernel<HD, DT, CAP, TS>()<<<grid, 128 * (NC + 1), smem, c->stream>>>(km, vm, args);
    CUDA_LAUNCHED(c, TS ? "attention prefill (per-token-head fp8 as bf16, wgmma, TMA)"
                     : CVT ? "attention prefill (fp8 as f16, wgmma, TMA)"
                           : "attention prefill (bf16 wgmma, TMA)");
}

template <int HD, bool CAP> static void bf16tma_launch_hd(const struct attn_call *a) {
    if (a->l->dtype == DT_F16) bf16tma_launch<HD, DT_F16, CAP>(a);
    else bf16tma_launch<HD, DT_BF16, CAP>(a);
}
template <bool CAP> static void bf16tma_launch_cap(const struct attn_call *a) {
    switch (a->l->head_dim) {
    case 64: bf16tma_launch_hd<64, CAP>(a); break;
    case 128: bf16tma_launch_hd<128, CAP>(a); break;
    default: bf16tma_launch_hd<256, CAP>(a); break;
    }
}
void attn_prefill_bf16_tma_launch(const struct attn_call *a) {
    if (a->p->softcap > 0) bf16tma_launch_cap<true>(a);
    else bf16tma_launch_cap<false>(a);
}

// ---------------------------------------------------------------- fp8 at head_dim 256 (prefill_f16_cvt)
// (and per-token-head e4m3 at head_dim 64, 128 and 256: the rows scaled into bf16)

bool attn_prefill_f16_cvt_fits(const struct attn_call *a) {
    const struct kv_layer *l = a->l;
    const int qt = 128 / (a->G > 0 ? a->G : 1);
    const bool shape =
        a->tok ? l->dtype == DT_E4M3 : (l->dtype == DT_E4M3 || l->dtype == DT_E5M2) && l->head_dim == 256;
    return shape && bf16pf_fits(l->head_dim, l->kv_block_tokens, a->G) && (a->c->cb.max_q + qt - 1) / qt <= 65535;
}

template <int HD> static void f16_cvt_tok_launch(const struct attn_call *a) {
    if (a->p->softcap > 0) bf16tma_launch<HD, DT_E4M3, true, true>(a);
    else bf16tma_launch<HD, DT_E4M3, false, true>(a);
}

void attn_prefill_f16_cvt_launch(const struct attn_call *a) {
    const bool cap = a->p->softcap > 0;
    if (a->tok) {
        if (a->l->head_dim == 64) f16_cvt_tok_launch<64>(a);
        else if (a->l->head_dim == 128) f16_cvt_tok_launch<128>(a);
        else f16_cvt_tok_launch<256>(a);
        return;
    }
    if (a->l->dtype == DT_E5M2) cap ? bf16tma_launch<256, DT_E5M2, true>(a) : bf16tma_launch<256, DT_E5M2, false>(a);
    else cap ? bf16tma_launch<256, DT_E4M3, true>(a) : bf16tma_launch<256, DT_E4M3, false>(a);
}
