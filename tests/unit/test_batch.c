// test_batch.c — the step batch builder (src/engine/batch.c): a mixed batch of a prefill, a
// decode and a prefill chunk that returns no logits gives the right ids, positions, KV slots,
// query starts, context lengths, block tables and logits rows; a reset starts over; a batch that
// asks for every row's logits lists them all.
#include "../../src/base/check.h"
#include "../../src/engine/batch.h"
#include "../test.h"

#define ARR_EQ(got, ...)                                                         \
    do {                                                                         \
        const int32_t want_[] = {__VA_ARGS__};                                   \
        int n_ = (int)(sizeof want_ / sizeof want_[0]);                          \
        for (int i_ = 0; i_ < n_; i_++) CHECK_EQ_INT((got)[i_], want_[i_]);      \
    } while (0)

TEST(slot_of_a_position) {
    const int32_t blocks[] = {7, 2, 9};
    CHECK_EQ_INT(batch_slot(blocks, 4, 0), 28);
    CHECK_EQ_INT(batch_slot(blocks, 4, 3), 31);
    CHECK_EQ_INT(batch_slot(blocks, 4, 4), 8);
    CHECK_EQ_INT(batch_slot(blocks, 4, 10), 38);
    CHECK_EQ_INT(batch_slot(blocks, 16, 17), 2 * 16 + 1);
}

TEST(mixed_prefill_and_decode) {
    struct batch_builder b;
    CHECK_OK(batch_builder_init(&b, 16, 4, 4, 4));
    const int32_t ta[] = {10, 11, 12, 13, 14}, ba[] = {7, 2};   // a 5-token prompt, whole
    const int32_t tb[] = {-1}, bb[] = {5, 1, 3};               // a decode at position 9 (its pick: row 0)
    const int32_t tc[] = {30, 31}, bc[] = {6, 0};              // a chunk at positions 3..4, more to come
    batch_reset(&b);
    batch_add(&b, ta, 5, 0, ba, 2, BATCH_LOGITS_LAST);
    batch_add(&b, tb, 1, 9, bb, 3, BATCH_LOGITS_LAST);
    batch_add(&b, tc, 2, 3, bc, 2, BATCH_LOGITS_NONE);
    const struct batch *bt = &b.bt;
    CHECK_EQ_INT(bt->n_tokens, 8);
    CHECK_EQ_INT(bt->n_seqs, 3);
    CHECK_EQ_INT(bt->max_blocks_per_seq, 4);
    ARR_EQ(bt->token_ids, 10, 11, 12, 13, 14, -1, 30, 31);
    ARR_EQ(bt->positions, 0, 1, 2, 3, 4, 9, 3, 4);
    ARR_EQ(bt->slot_mapping, 28, 29, 30, 31, 8, 13, 27, 0);
    ARR_EQ(bt->query_start, 0, 5, 6, 8);
    ARR_EQ(bt->seq_lens, 5, 10, 5);
    CHECK_EQ_INT(bt->n_logits, 2);
    ARR_EQ(bt->logits_rows, 4, 5);
    ARR_EQ(bt->block_tables, 7, 2);
    ARR_EQ(bt->block_tables + 4, 5, 1, 3);
    ARR_EQ(bt->block_tables + 8, 6, 0);
    // a reset starts an empty batch over the same arrays
    batch_reset(&b);
    CHECK(bt->n_tokens == 0 && bt->n_seqs == 0 && bt->n_logits == 0 && bt->query_start[0] == 0);
    batch_add(&b, tc, 2, 3, bc, 2, BATCH_LOGITS_ALL);
    batch_add(&b, ta, 3, 0, ba, 1, BATCH_LOGITS_ALL);
    CHECK_EQ_INT(bt->n_logits, 5);
    ARR_EQ(bt->logits_rows, 0, 1, 2, 3, 4);
    ARR_EQ(bt->query_start, 0, 2, 5);
    ARR_EQ(bt->seq_lens, 5, 3);
    ARR_EQ(bt->slot_mapping, 27, 0, 28, 29, 30);
    batch_builder_free(&b);
}

int main(void) {
    RUN(slot_of_a_position);
    RUN(mixed_prefill_and_decode);
    return test_summary("batch");
}
