// batch.c — the step arrays behind struct batch and the one loop that fills them.
#include "batch.h"

#include <stdlib.h>
#include <string.h>

#include "../base/check.h"

int batch_builder_init(struct batch_builder *b, int max_tokens, int max_seqs, int max_blocks_per_seq,
                       int kv_block_tokens) {
    memset(b, 0, sizeof *b);
    b->max_tokens = max_tokens;
    b->max_seqs = max_seqs;
    b->max_blocks_per_seq = max_blocks_per_seq;
    b->kv_block_tokens = kv_block_tokens;
    size_t t = (size_t)max_tokens, s = (size_t)max_seqs;
    b->tok = malloc(t * sizeof(int32_t));
    b->pos = malloc(t * sizeof(int32_t));
    b->slot = malloc(t * sizeof(int32_t));
    b->rows = malloc(t * sizeof(int32_t));
    b->qstart = malloc((s + 1) * sizeof(int32_t));
    b->seq_lens = malloc(s * sizeof(int32_t));
    // (zeroed: a backend may copy whole rows, past a sequence's last block)
    b->btab = calloc(s * (size_t)max_blocks_per_seq, sizeof(int32_t));
    if (!b->tok || !b->pos || !b->slot || !b->rows || !b->qstart || !b->seq_lens || !b->btab) {
        batch_builder_free(b);
        return err_set(OCT_ENOMEM, "batch: out of memory for %d tokens, %d sequences", max_tokens, max_seqs);
    }
    batch_reset(b);
    return OCT_OK;
}

void batch_builder_free(struct batch_builder *b) {
    free(b->tok); free(b->pos); free(b->slot); free(b->rows);
    free(b->qstart); free(b->seq_lens); free(b->btab);
    memset(b, 0, sizeof *b);
}

void batch_reset(struct batch_builder *b) {
    b->qstart[0] = 0;
    b->bt = (struct batch){.token_ids = b->tok, .positions = b->pos, .slot_mapping = b->slot,
                           .query_start = b->qstart, .seq_lens = b->seq_lens, .block_tables = b->btab,
                           .max_blocks_per_seq = b->max_blocks_per_seq, .logits_rows = b->rows};
}

void batch_add(struct batch_builder *b, const int32_t *tokens, int n, int pos0, const int32_t *blocks, int n_blocks,
               enum batch_logits logits) {
    struct batch *bt = &b->bt;
    int i = bt->n_seqs, t0 = bt->n_tokens;
    for (int j = 0; j < n; j++) {
        b->tok[t0 + j] = tokens[j];
        b->pos[t0 + j] = pos0 + j;
        b->slot[t0 + j] = batch_slot(blocks, b->kv_block_tokens, pos0 + j);
    }
    if (logits == BATCH_LOGITS_ALL)
        for (int j = 0; j < n; j++) b->rows[bt->n_logits++] = t0 + j;
    else if (logits == BATCH_LOGITS_LAST) b->rows[bt->n_logits++] = t0 + n - 1;
    b->seq_lens[i] = pos0 + n;
    memcpy(b->btab + (size_t)i * b->max_blocks_per_seq, blocks, (size_t)n_blocks * sizeof(int32_t));
    bt->n_tokens = t0 + n;
    bt->n_seqs = i + 1;
    b->qstart[i + 1] = bt->n_tokens;
}
