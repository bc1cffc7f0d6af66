// cuda_attention.cuh — the seam between the attention dispatcher (cuda_attention.cu: the kernel
// table and cuda_attention()) and the kernel families, each its own translation unit: decode
// (cuda_decode.cu), bf16 / e5m2 prefill (cuda_prefill.cu), FP8 prefill (cuda_prefill_fp8.cu), bf16 /
// f16 wgmma prefill (cuda_prefill_bf16.cu), and the generic kernel (cuda_attn_generic.cu). Owns:
// struct attn_call (one layer's attention call as every family receives it), struct attn_kernel
// (one table entry), struct attn_args (what every attention kernel takes, as one parameter) and the
// cache-element helpers the SIMT kernels share.
#pragma once

#include "cuda_common.cuh"

// One layer's attention call: what every kernel family's fits() and launch() receive.
struct attn_call {
    struct cuda_backend *c;
    bf16 *out;                   // [n_tokens][n_heads][head_dim]
    const bf16 *q;               // [n_tokens][n_heads][head_dim]
    const struct kv_layer *l;    // the layer's paged cache (docs/kv_format.md)
    const struct attn_params *p;
    const struct batch *bt;      // host view of the step (device mirror: c->cb)
    const float *scales;         // device [2][KV_MAX_HEADS]: K's scales, then V's
    int G;                       // query heads per KV head
    int lgr;                     // log2(kv_block_tokens / 16), or -1 when the block is not 16·2^k tokens (k <= 4)
    bool decode;                 // every sequence has exactly one query token this step
    bool fast_dtype;             // the cache is bf16, e4m3 or e5m2
    bool tok;                    // the layer has per-token-head scales (fp8_per_token_head)
    const float *sinks;          // device [n_heads] f32 sink logits (kv_layer.sinks), or null
};

// One entry of the attention kernel table (cuda_attention.cu), in preference order: the first
// entry whose fits() is true runs.
struct attn_kernel {
    const char *name;
    bool (*fits)(const struct attn_call *a);
    void (*launch)(const struct attn_call *a);
};

// The arguments of every attention kernel, passed as one __grid_constant__ parameter (fields a
// kernel does not use are left zero).
struct attn_args {
    bf16 *out;                   // [n_tokens][n_heads][head_dim]
    const bf16 *q;               // [n_tokens][n_heads][head_dim]
    const void *kc, *vc;         // [n_blocks][n_kv][kv_block_tokens][head_dim] of the cache type
    const int32_t *qstart;       // [n_seqs + 1] query token offsets (decode: each sequence's one row)
    const int32_t *seq_lens;     // [n_seqs] context after this step
    const int32_t *pos;          // [n_tokens] positions
    const int32_t *tok_seq;      // [n_tokens] each token's sequence
    const int32_t *btab;         // [n_seqs][max_blocks] block tables
    const float *scales;         // [2][KV_MAX_HEADS] K's, then V's descales
    // fp8_per_token_head: each row's K and V scale, [n_blocks][n_kv][kv_block_tokens] (the row's cache
    // index divided by head_dim; docs/kv_format.md), or null
    const float *kts, *vts;
    int max_blocks, n_kv, G, bs, lgr, window;
    float scale;                 // softmax scale
    float softcap;               // > 0: each scaled score s becomes softcap·tanh(s/softcap) (score_map); 0: none
    // split-KV decode: partials [n_rows][n_heads][n_splits][hd + 2], splits of at least min_split
    // blocks, or of abs_split blocks at absolute positions (--batch-invariant), seq_of: a row's
    // sequence (block table) when rows are not sequences, arrive: the fused combine's counters
    float *part;
    int n_splits, min_split, abs_split;
    const int32_t *seq_of;
    int *arrive;
    // FP8 prefill: every:N's N, the TMA box rows, the pre-transposed V tiles and each sequence's first
    int n_every, rows_box;
    const uint8_t *vtg;          // [vt_tiles][n_kv][head_dim·128] or null
    const int32_t *vt_start;     // [n_seqs + 1]
    // attention sinks (gpt-oss): query head h's logit sinks[h] joins its softmax denominator as
    // e^(sinks[h] − m) at the final normalisation (m the row's running max, in the kernel's units) and
    // adds no value; null: none (docs/kv_format.md, "Attention sinks")
    const float *sinks;          // [n_heads] f32
};

// The arguments every kernel shares, from one call (the step's device metadata in c->cb).
static inline attn_args attn_args_of(const struct attn_call *a) {
    const struct cuda_backend *c = a->c;
    attn_args r = {};
    r.out = a->out;
    r.q = a->q;
    r.kc = a->l->k;
    r.vc = a->l->v;
    r.qstart = c->cb.qstart;
    r.seq_lens = c->cb.seq_lens;
    r.pos = c->cb.pos;
    r.tok_seq = c->cb.tok_seq;
    r.btab = c->cb.btab;
    r.scales = a->scales;
    r.kts = a->l->k_tok_scale;
    r.vts = a->l->v_tok_scale;
    r.max_blocks = a->bt->max_blocks_per_seq;
    r.n_kv = a->l->n_kv_heads;
    r.G = a->G;
    r.bs = a->l->kv_block_tokens;
    r.lgr = a->lgr;
    r.window = a->l->window;
    r.scale = a->p->softmax_scale;
    r.softcap = a->p->softcap;
    r.sinks = a->sinks;
    return r;
}

// ---------------------------------------------------------------- cache elements (SIMT kernels)

template <int DT> struct kv_elem;
template <> struct kv_elem<DT_BF16> {
    typedef bf16 T;
    static __device__ float f(T v) { return __bfloat162float(v); }
};
template <> struct kv_elem<DT_E4M3> {
    typedef __nv_fp8_storage_t T;
    static __device__ float f(T v) { return __half2float(__half(__nv_cvt_fp8_to_halfraw(v, __NV_E4M3))); }
};
template <> struct kv_elem<DT_E5M2> {
    typedef __nv_fp8_storage_t T;
    static __device__ float f(T v) { return __half2float(__half(__nv_cvt_fp8_to_halfraw(v, __NV_E5M2))); }
};

__device__ static inline float load_any(const void *base, size_t i, int dt) {
    switch (dt) {
    case DT_F32: return ((const float *)base)[i];
    case DT_F16: return __half2float(((const __half *)base)[i]);
    case DT_BF16: return __bfloat162float(((const bf16 *)base)[i]);
    case DT_E4M3: return kv_elem<DT_E4M3>::f(((const uint8_t *)base)[i]);
    case DT_E5M2: return kv_elem<DT_E5M2>::f(((const uint8_t *)base)[i]);
    }
    return 0.0f;
}

// ---------------------------------------------------------------- the families' entries

// decode (cuda_decode.cu)
bool attn_decode_invariant_fits(const struct attn_call *a);
void attn_decode_invariant_launch(const struct attn_call *a);
bool attn_decode_t_fits(const struct attn_call *a);
void attn_decode_t_launch(const struct attn_call *a);
bool cuda_decode_init(struct cuda_backend *c);
// FP8 prefill (cuda_prefill_fp8.cu)
bool attn_prefill_fp8_tma_fits(const struct attn_call *a);
void attn_prefill_fp8_tma_launch(const struct attn_call *a);
bool attn_prefill_fp8_wgmma_fits(const struct attn_call *a);
void attn_prefill_fp8_wgmma_launch(const struct attn_call *a);
// the TMA prefill's per-token-head instances (cuda_prefill_fp8_tok.cu; attn_prefill_fp8_tma_launch hands such
// layers to the launch)
void attn_prefill_fp8_tma_tok_launch(const struct attn_call *a);
bool cuda_prefill_fp8_tok_init(struct cuda_backend *c);
bool cuda_prefill_fp8_init(struct cuda_backend *c);
// bf16 / f16 wgmma prefill (cuda_prefill_bf16.cu)
bool attn_prefill_f16_cvt_fits(const struct attn_call *a);
void attn_prefill_f16_cvt_launch(const struct attn_call *a);
bool attn_prefill_bf16_tma_fits(const struct attn_call *a);
void attn_prefill_bf16_tma_launch(const struct attn_call *a);
bool cuda_prefill_bf16_init(struct cuda_backend *c);
// bf16 / e5m2 prefill (cuda_prefill.cu)
bool attn_prefill_mma_fits(const struct attn_call *a);
void attn_prefill_mma_launch(const struct attn_call *a);
bool attn_prefill_simt_fits(const struct attn_call *a);
void attn_prefill_simt_launch(const struct attn_call *a);
// any shape up to head_dim 512 (cuda_attn_generic.cu)
bool attn_generic_fits(const struct attn_call *a);
void attn_generic_launch(const struct attn_call *a);
