// kv_cache.h — the paged K/V storage of every layer and the options that shape it
// (owns: per-layer dtype choice, skip layers, scales (default, checkpoint, or a JSON
// scales file), and the backend memory of the pages; not: which block belongs to whom —
// that is kv_pool's job). Layout and rounding: docs/kv_format.md.
#ifndef OCTET_KV_CACHE_H
#define OCTET_KV_CACHE_H

#include <stdbool.h>

#include "../backend/backend.h"
#include "config.h"

struct model;

// What the user asked for (flags --kv-cache-dtype, --kv-cache-dtype-skip-layers,
// --kv-scales, --kv-block-tokens).
struct kv_options {
    char dtype[24];                     // auto|fp32|fp16|bf16|fp8|fp8_e4m3|fp8_e5m2|fp8_per_token_head
    bool skip[MODEL_MAX_LAYERS];        // layers kept in the model dtype
    bool skip_sliding;                  // "sliding_window" in the skip list
    char scales_path[512];              // JSON scales file, "" = none
    int kv_block_tokens;                // 0: the backend's (kv_cache_plan's default_block_tokens)
};

void kv_options_default(struct kv_options *o);
// Parses the dtype name (errors name the value and list the choices).
int kv_options_set_dtype(struct kv_options *o, const char *s);
// Parses "0 2 23", "0,2,23" or "sliding_window" (mixable); errors name the bad item.
int kv_options_set_skip(struct kv_options *o, const char *s);

struct kv_cache {
    struct backend *b;
    int n_layers, n_blocks, kv_block_tokens;
    struct kv_layer layers[MODEL_MAX_LAYERS];
    size_t bytes;                       // total page memory
    float *k_offsets;                   // [n_layers][n_kv_heads][head_dim] from the scales file, or NULL
    bool tok_scales[MODEL_MAX_LAYERS];  // layer l is fp8_per_token_head (dynamic scales; not a skip layer)
};

// Resolves each layer's dtype for model m (auto → the model's weight dtype; f32 stays
// f32 on the CPU), and its scales: 1.0, then the checkpoint's, then the scales file's.
// Fills kv->layers (without memory) so sizes can be planned before allocating.
// default_block_tokens: the block size when o has none (the backend's: backend_ops.kv_block_tokens).
int kv_cache_plan(struct kv_cache *kv, const struct model *m, const struct kv_options *o, int default_block_tokens);
// KV bytes per token of a planned cache (all layers, K and V, per-token-head scales included).
long kv_cache_bytes_per_token(const struct kv_cache *kv);
// Allocates n_blocks pages per layer on backend b, and the per-token-head scales after the
// pages of fp8_per_token_head layers (refused when b's ops lack kv_token_scales).
int kv_cache_alloc(struct kv_cache *kv, struct backend *b, int n_blocks);
void kv_cache_free(struct kv_cache *kv);

// Loads a scales file into a planned cache (format in docs/kv_format.md): k_scale and
// v_scale per layer, and an optional k_offset (per-channel K offset of FP8 layers).
int kv_scales_load(struct kv_cache *kv, const char *path);
// Why model c cannot take K offsets (docs/kv_format.md: an offset shifts all of a query's scores by q·o,
// which only a plain softmax cancels), or NULL when it can. kv_cache_plan refuses a scales file with
// offsets for such a model; octet calibrate neither writes nor chooses them.
const char *kv_offsets_refused(const struct model_config *c);
// Frees the K offsets of kv and clears every layer's pointer to them.
void kv_offsets_drop(struct kv_cache *kv);

// Resolve a dtype name alone ("fp8" → DT_E4M3, "fp8_per_token_head" → DT_E4M3, "auto" → model_dtype).
int kv_dtype_parse(const char *s, enum dtype model_dtype, enum dtype *out);
// True for the dtype names with dynamic per-(token, KV head) scales ("fp8_per_token_head").
bool kv_dtype_token_scales(const char *s);
// Bytes of one layer's K (or V) allocation for n_blocks blocks: the pages, then (token-scaled
// layers) the scales [n_blocks][n_kv_heads][kv_block_tokens] f32 at offset *scales_at (64-aligned).
size_t kv_layer_bytes(const struct kv_layer *l, bool tok_scales, int n_blocks, size_t *scales_at);

#endif
