// argmax.h — the greedy pick over a row of logits (owns: logits_argmax; shared by the sampler and
// the CPU backend's device-side greedy op, which must pick the same ids).
#ifndef OCTET_ARGMAX_H
#define OCTET_ARGMAX_H

// The first index of the largest of logits[0..n) (NaNs never win; a NaN at index 0 gives 0;
// +0 and -0 are equal). 0 when n <= 0.
int logits_argmax(const float *logits, int n);

#endif
