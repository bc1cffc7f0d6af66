// argmax.c — logits_argmax (argmax.h).
#include "argmax.h"

// The first index of the largest logit (NaNs never win; a NaN at index 0 gives 0). Two passes:
// the maximum in 8 independent lanes, then the first index holding it. A one-pass loop
// (logits[i] > logits[best]) chains every compare on the load before it, 23 times slower over a
// 128k vocabulary, and every greedy decode step waits for this pick (bench/host/RESULTS.md).
int logits_argmax(const float *logits, int n) {
    if (n <= 0) return 0;
    float lane[8];
    for (int j = 0; j < 8; j++) lane[j] = logits[0];
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) lane[j] = logits[i + j] > lane[j] ? logits[i + j] : lane[j];
    float m = lane[0];
    for (int j = 1; j < 8; j++) m = lane[j] > m ? lane[j] : m;
    for (; i < n; i++) m = logits[i] > m ? logits[i] : m;
    if (m != m) return 0;  // logits[0] is NaN and nothing compares above it
    for (i = 0; i < n; i++) if (logits[i] == m) return i;
    return 0;
}
