// bench_ids.h — the token ids `octet bench model` feeds (owns only these two formulas):
// deterministic, spread over the vocabulary, in 64-bit arithmetic so that any depth up to
// --depth's limit (2^24 tokens) stays inside the vocabulary (the 32-bit form overflowed past
// 20,504 tokens and gave negative ids).
#ifndef OCTET_BENCH_IDS_H
#define OCTET_BENCH_IDS_H

#include <stdint.h>

// Token i of the untimed fill that puts --depth tokens in the cache.
static inline int32_t bench_fill_id(long i, int n_vocab) { return (int32_t)(((int64_t)i * 104729 + 7) % n_vocab); }
// Token i of the timed prompt (pp).
static inline int32_t bench_prompt_id(long i, int n_vocab) { return (int32_t)(((int64_t)i * 7919 + 13) % n_vocab); }

#endif
