// forward.h — the transformer, written once as backend ops (owns: activation buffers of
// one step and the RoPE table; not: the weights (model), the cache (kv_cache) or which
// tokens run (the caller's batch)).
#ifndef OCTET_FORWARD_H
#define OCTET_FORWARD_H

#include "../backend/backend.h"
#include "model.h"
#include "rope.h"

struct kv_cache;

// Observation hook for diagnostics (calibrate, inspect): called during forward_run with
// host f32 copies of one layer's activations, x[n_tokens][width]: Q and K after RoPE and
// before any FP8 quantization, V, the SwiGLU gate pre-activation (dense FFNs), and the normed
// input of a mixture-of-experts FFN, which its router reads (width dim).
enum probe_kind { PROBE_Q = 0, PROBE_K, PROBE_V, PROBE_GATE, PROBE_MOE_IN };
typedef void (*forward_probe_fn)(void *ctx, int layer, enum probe_kind kind, const float *x, int n_tokens, int width);

struct forward {
    struct model *m;
    struct backend *b;
    int max_tokens, max_logits;
    enum attn_fp8_math fp8_math;
    int fp8_accum;          // struct attn_params.fp8_accum
    bool holds_weights;     // counted in the model's dev_users (released by forward_free)
    struct rope_table rope;
    struct rope_table rope_local;  // the sliding-window layers' table (Gemma 3), else a copy of rope
    // backend activations, act dtype
    void *x;        // [max_tokens][dim] residual stream
    void *xn;       // [max_tokens][dim] normed input of a sublayer
    void *q;        // [max_tokens][n_heads][hd]
    void *k, *v;    // [max_tokens][n_kv_heads][hd]
    void *att;      // [max_tokens][n_heads][hd]
    void *proj;     // [max_tokens][dim] sublayer output
    void *gate;     // [max_tokens][ffn] the gate projection (scratch; the probe reads it)
    void *act;      // [max_tokens][ffn] silu(gate) ⊙ up, the down projection's input
    void *last;     // [max_logits][dim]
    forward_probe_fn probe;  // NULL = no observation (the default)
    void *probe_ctx;
    float *probe_buf;        // host [max_tokens][max(n_heads*hd, ffn, dim)] (allocated on first use)
};

// Uploads weights to the backend and allocates buffers for steps of up to max_tokens
// tokens and max_logits logits rows.
int forward_init(struct forward *f, struct model *m, struct backend *b, int max_tokens, int max_logits);
void forward_free(struct forward *f);

// One step: embeds bt's tokens, runs every layer (writing their K/V into kv at
// bt->slot_mapping), and returns bt->n_logits rows of logits as f32 in logits_out
// [n_logits][n_vocab]. bt->n_tokens <= max_tokens, bt->n_logits <= max_logits.
int forward_run(struct forward *f, struct kv_cache *kv, const struct batch *bt, float *logits_out);
// The same step with each logits row's greedy id (logits_argmax's pick) into ids_out [n_logits]
// (backend host_alloc memory) instead of the logits, queued without waiting where the backend
// can (the backend's logits_argmax; OCT_EUNSUP without it): the ids are valid after
// forward_wait. A later batch may name them as token ids -1-j (struct batch), so it can be
// launched before they reach the host.
int forward_launch_greedy(struct forward *f, struct kv_cache *kv, const struct batch *bt, int32_t *ids_out);
// Waits for the queued work; the backend's error, if any.
int forward_wait(struct forward *f);
// Waits only until the forward_launch_greedy that writes ids is done (later launches may run on).
int forward_wait_ids(struct forward *f, const int32_t *ids);

#endif
