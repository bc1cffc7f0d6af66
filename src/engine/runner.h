// runner.h — one sequence on one backend, the smallest engine (owns: backend, forward
// buffers, KV cache pages, block pool and the sequence's block table; not: the model).
// Used by `generate`, `eval` and tests; the serving engine schedules many sequences over
// the same pieces. Invariant: tokens [0, n_past) of the sequence are in the cache.
#ifndef OCTET_RUNNER_H
#define OCTET_RUNNER_H

#include "../model/forward.h"
#include "../model/kv_cache.h"
#include "batch.h"
#include "kv_pool.h"

struct runner_options {
    struct kv_options kv;
    char device[8];         // cpu | cuda | auto ("" = auto)
    int n_threads;          // CPU threads (0 = all cores)
    int max_ctx;            // tokens the sequence may reach (0 = model max_pos)
    int max_step_tokens;    // tokens per forward step (prefill chunk), default 512
    enum attn_fp8_math fp8_math;
    int fp8_accum;          // --fp8-attention-accumulation (struct attn_params.fp8_accum)
    bool batch_invariant;   // --batch-invariant (struct backend.batch_invariant)
    bool enforce_eager;     // --enforce-eager (struct backend.enforce_eager)
};

void runner_options_default(struct runner_options *o);

struct runner {
    struct model *m;
    struct backend *b;
    struct forward fw;
    struct kv_cache kv;
    struct kv_pool pool;
    struct runner_options o;
    int max_ctx, max_blocks;
    int32_t *block_table;   // [max_blocks]
    int n_blocks_used;
    int n_past;
    struct batch_builder bb;    // one step (max_step_tokens tokens, one sequence)
};

int runner_init(struct runner *r, struct model *m, const struct runner_options *o);
void runner_free(struct runner *r);
// Forget the sequence (blocks back to the pool).
void runner_reset(struct runner *r);
// Appends n tokens, running them in chunks of max_step_tokens. If logits is non-NULL
// it receives [n][n_vocab] (all_logits) or [1][n_vocab] for the last token.
int runner_feed(struct runner *r, const int32_t *tokens, int n, bool all_logits, float *logits);

#endif
