// cuda_attention.cuh — the seam between the attention dispatcher (cuda_attention.cu: the kernel
// table and cuda_attention()) and the kernel families, each its own translation unit
// (decode: cuda_decode.cu; prefill: cuda_prefill.cu, cuda_prefill_fp8.cu; the generic and
// batch-invariant paths). Owns: struct attn_call (one layer's attention call as every family
// receives it) and struct attn_kernel (one table entry).
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
    int lgr;                     // log2(kv_block_tokens / 16), or -1 when the block is not 16·2^k tokens
    bool decode;                 // every sequence has exactly one query token this step
};

// One entry of the attention kernel table (cuda_attention.cu), in preference order: the first
// entry whose fits() is true runs.
struct attn_kernel {
    const char *name;
    bool (*fits)(const struct attn_call *a);
    void (*launch)(const struct attn_call *a);
};
