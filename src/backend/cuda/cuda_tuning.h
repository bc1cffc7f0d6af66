// cuda_tuning.h — the CUDA backend's tuning constants in one struct (owns: struct cuda_tuning, its
// defaults, and the setter the GPU tests and dev/cuda lab programs use to reach non-default entries).
// Every field has one production default (cuda_tuning_default); nothing here is read from the
// environment. A field exists only where a real alternative stays in src/ (a fallback the tests must
// cover) or where a threshold is a measured trade-off worth naming; losing variants are not fields:
// they live as lab programs in dev/cuda/.
// C-compatible: included by the CUDA backend and by tests/gpu (C11).
#ifndef OCTET_CUDA_TUNING_H
#define OCTET_CUDA_TUNING_H

#include <stdbool.h>

struct backend;

struct cuda_tuning {
    // ---- attention (cuda_attention*.cu)
    int fp8_vt_min_q;    // the FP8 prefill pre-transposes V for sequences with at least this many query tokens
    int fp8_vt_min_ctx;  // ... and at least this many tokens of context

    // ---- projections, elementwise, steps (cuda_backend.cu)
    bool cuda_graphs;    // capture and replay decode steps (off: --enforce-eager)
};

// The production values.
struct cuda_tuning cuda_tuning_default(void);
// Reads / replaces a CUDA backend's tuning (for tests and lab programs; b must be a CUDA backend).
void cuda_tuning_get(const struct backend *b, struct cuda_tuning *out);
void cuda_tuning_set(struct backend *b, const struct cuda_tuning *t);

#endif
