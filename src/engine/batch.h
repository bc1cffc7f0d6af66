// batch.h — builds one step's struct batch (src/backend/backend.h) from sequences: token ids,
// positions, KV slots, query starts, context lengths, block tables and the rows whose logits
// come back (owns: the step arrays; not: the requests or their blocks). The engine's step, its
// step launched ahead and the single-sequence runner all fill their batches here.
#ifndef OCTET_BATCH_H
#define OCTET_BATCH_H

#include <stdint.h>

#include "../backend/backend.h"

// Where position pos of a sequence with this block table has its K/V in the paged cache.
static inline int32_t batch_slot(const int32_t *block_table, int kv_block_tokens, int pos) {
    return block_table[pos / kv_block_tokens] * kv_block_tokens + pos % kv_block_tokens;
}

// Which of a sequence's new tokens return logits.
enum batch_logits { BATCH_LOGITS_NONE, BATCH_LOGITS_LAST, BATCH_LOGITS_ALL };

struct batch_builder {
    int max_tokens, max_seqs, max_blocks_per_seq, kv_block_tokens;
    int32_t *tok, *pos, *slot, *rows;   // [max_tokens]
    int32_t *qstart;                    // [max_seqs + 1]
    int32_t *seq_lens;                  // [max_seqs]
    int32_t *btab;                      // [max_seqs][max_blocks_per_seq]
    struct batch bt;                    // the batch built so far (pointing at the arrays above)
};

int batch_builder_init(struct batch_builder *b, int max_tokens, int max_seqs, int max_blocks_per_seq,
                       int kv_block_tokens);
void batch_builder_free(struct batch_builder *b);

// Starts an empty batch.
void batch_reset(struct batch_builder *b);
// Adds a sequence: its n new tokens (ids; -1-j names row j of the previous logits_argmax) at
// positions pos0 .. pos0+n−1, after which its context is pos0+n tokens long, with its block
// table blocks[0 .. n_blocks) covering them. The caller keeps within max_tokens and max_seqs.
void batch_add(struct batch_builder *b, const int32_t *tokens, int n, int pos0, const int32_t *blocks, int n_blocks,
               enum batch_logits logits);

#endif
