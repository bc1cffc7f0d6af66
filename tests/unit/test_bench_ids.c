// test_bench_ids.c — the token ids `octet bench model` feeds (src/tools/bench_ids.h) stay inside
// the vocabulary at every depth --depth accepts (the 32-bit form went negative past 20,504).
#include "../../src/tools/bench_ids.h"
#include "../test.h"

TEST(ids_in_vocab_at_any_depth) {
    static const int vocabs[3] = {512, 32000, 128256};
    for (int v = 0; v < 3; v++) {
        int bad_fill = 0, bad_prompt = 0;
        for (long i = 0; i <= (1L << 24); i += (i < 100000 ? 1 : 997)) {
            int32_t f = bench_fill_id(i, vocabs[v]), p = bench_prompt_id(i, vocabs[v]);
            bad_fill += f < 0 || f >= vocabs[v];
            bad_prompt += p < 0 || p >= vocabs[v];
        }
        CHECK_EQ_INT(bad_fill, 0);
        CHECK_EQ_INT(bad_prompt, 0);
    }
    CHECK_EQ_INT(bench_fill_id(20505, 128256), (int32_t)((20505LL * 104729 + 7) % 128256));  // past the old overflow
    CHECK_EQ_INT(bench_fill_id(0, 128256), 7);
    CHECK_EQ_INT(bench_prompt_id(1, 128256), 7932);
}

int main(void) {
    RUN(ids_in_vocab_at_any_depth);
    return test_summary("bench_ids");
}
