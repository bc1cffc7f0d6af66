// cuda_tuning.h — the CUDA backend's tuning constants in one struct, and the C entry points tests and
// tools use to reach the attention kernel table (owns: struct cuda_tuning and these declarations;
// the defaults live in cuda_backend.cu's cuda_tuning_default, the table in cuda_attention.cu).
// Every field has one production default; nothing here is read from the environment. A field
// exists where a threshold is a measured trade-off worth naming, or where a test must reach a
// non-default path; losing variants are not fields: they are lab programs in dev/cuda/.
// C-compatible: included by the CUDA backend and by tests/gpu and src/tools (C11). CPU-only builds
// get stand-ins from cuda_none.c.
#ifndef OCTET_CUDA_TUNING_H
#define OCTET_CUDA_TUNING_H

#include <stdbool.h>

struct backend;
struct kv_layer;
struct attn_params;
struct batch;

struct cuda_tuning {
    // ---- attention (cuda_attention.cu and its families)
    int fp8_vt_min_q;           // the FP8 prefill pre-transposes V for sequences of at least this many query tokens
    int fp8_vt_min_ctx;         // ... and at least this much context (fp8_vt_min_q 0: the pass is off)
    int decode_min_split_fp8;   // each busy decode split takes at least this many 16-token blocks (FP8 caches)
    int decode_min_split_bf16;  // ... (bf16 caches; 0: the plan's even share)
    const char *attn_kernel;    // run this entry of the attention table (tests); NULL: the first that fits
};

// The production values.
struct cuda_tuning cuda_tuning_default(void);
// Reads / replaces a CUDA backend's tuning (b must be a CUDA backend).
void cuda_tuning_get(const struct backend *b, struct cuda_tuning *out);
void cuda_tuning_set(struct backend *b, const struct cuda_tuning *t);

// The attention kernel table: its entries in preference order, and the entry a layer's attention
// takes in the step last given to batch_begin (NULL: none fits).
int cuda_attention_kernel_count(void);
const char *cuda_attention_kernel_name(int i);
const char *cuda_attention_pick(struct backend *b, const struct kv_layer *l, const struct attn_params *p,
                                const struct batch *bt);

#endif
