// runner.c — a single sequence through forward_run: block reservation and chunking (batch.c
// fills each chunk's batch). The KV pool is sized for exactly one sequence of max_ctx tokens.
#include "runner.h"

#include <stdlib.h>
#include <string.h>

#include "../base/check.h"
#include "../model/model.h"

void runner_options_default(struct runner_options *o) {
    memset(o, 0, sizeof *o);
    kv_options_default(&o->kv);
    o->max_step_tokens = 512;
}

int runner_init(struct runner *r, struct model *m, const struct runner_options *o) {
    memset(r, 0, sizeof *r);
    r->m = m;
    r->o = *o;
    r->max_ctx = o->max_ctx > 0 ? o->max_ctx : m->cfg.max_pos;
    if (r->o.max_step_tokens <= 0) r->o.max_step_tokens = 512;
    int step = r->o.max_step_tokens;
    r->b = backend_create(o->device, o->n_threads);
    if (!r->b) return OCT_EINVAL;
    int rp = kv_cache_plan(&r->kv, m, &o->kv, r->b->ops->kv_block_tokens);
    if (rp < 0) { r->b->ops->destroy(r->b); r->b = NULL; return rp; }
    r->max_blocks = (r->max_ctx + r->kv.kv_block_tokens - 1) / r->kv.kv_block_tokens;
    r->b->batch_invariant = o->batch_invariant;
    r->b->enforce_eager = o->enforce_eager;
    int rc = forward_init(&r->fw, m, r->b, step, step);
    if (rc == OCT_OK) rc = kv_cache_alloc(&r->kv, r->b, r->max_blocks);
    if (rc == OCT_OK) rc = kv_pool_init(&r->pool, r->max_blocks, r->kv.kv_block_tokens);
    r->fw.fp8_math = o->fp8_math;
    r->fw.fp8_accum = o->fp8_accum;
    r->block_table = calloc((size_t)r->max_blocks, sizeof(int32_t));
    if (rc == OCT_OK) rc = batch_builder_init(&r->bb, step, 1, r->max_blocks, r->kv.kv_block_tokens);
    if (rc == OCT_OK && !r->block_table) rc = err_set(OCT_ENOMEM, "runner: out of memory");
    if (rc < 0) runner_free(r);
    return rc;
}

void runner_free(struct runner *r) {
    if (r->pool.refcount) runner_reset(r);
    kv_pool_free(&r->pool);
    kv_cache_free(&r->kv);
    forward_free(&r->fw);
    if (r->b) r->b->ops->destroy(r->b);
    batch_builder_free(&r->bb);
    free(r->block_table);
    memset(r, 0, sizeof *r);
}

void runner_reset(struct runner *r) {
    for (int i = 0; i < r->n_blocks_used; i++) kv_pool_unref(&r->pool, r->block_table[i]);
    r->n_blocks_used = 0;
    r->n_past = 0;
}

int runner_feed(struct runner *r, const int32_t *tokens, int n, bool all_logits, float *logits) {
    if (r->n_past + n > r->max_ctx)
        return err_set(OCT_EINVAL, "sequence of %d tokens exceeds the context limit %d", r->n_past + n, r->max_ctx);
    int bs = r->kv.kv_block_tokens, nv = r->m->cfg.n_vocab;
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= nv)
            return err_set(OCT_EINVAL, "token id %d outside the vocabulary (0..%d)", tokens[i], nv - 1);
    for (int done = 0; done < n;) {
        int m = n - done < r->o.max_step_tokens ? n - done : r->o.max_step_tokens;
        while (r->n_blocks_used * bs < r->n_past + m) {
            int id = kv_pool_alloc(&r->pool);
            if (id < 0) return id;
            r->block_table[r->n_blocks_used++] = id;
        }
        bool last = done + m == n;
        enum batch_logits which = !logits ? BATCH_LOGITS_NONE : all_logits ? BATCH_LOGITS_ALL
                                  : last ? BATCH_LOGITS_LAST : BATCH_LOGITS_NONE;
        batch_reset(&r->bb);
        batch_add(&r->bb, tokens + done, m, r->n_past, r->block_table, r->n_blocks_used, which);
        float *dst = !logits ? NULL : all_logits ? logits + (size_t)done * nv : logits;
        TRY(forward_run(&r->fw, &r->kv, &r->bb.bt, dst));
        r->n_past += m;
        done += m;
    }
    return OCT_OK;
}
