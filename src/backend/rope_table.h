// rope_table.h — a rotary position embedding table as the backends' rope ops read it (owns:
// struct rope_table; not: building it from a model's RoPE scaling, which model/rope.c does).
// Invariant: the rotation angle of pair i at position p is p * inv_freq[i] (linear scaling folds
// 1/factor in); cos and sin of it are multiplied by attn_factor.
#ifndef OCTET_ROPE_TABLE_H
#define OCTET_ROPE_TABLE_H

#include <stdbool.h>

#define ROPE_MAX_PAIRS 256

struct rope_table {
    int n_rot;                       // rotated dims (pairs = n_rot/2)
    bool neox;                       // pair (i, i+n_rot/2) instead of (2i, 2i+1)
    float attn_factor;               // multiplies cos/sin (YaRN mscale), else 1
    double inv_freq[ROPE_MAX_PAIRS]; // [n_rot/2]
    // Dynamic NTK as transformers runs it (dyn_max_pos > 0): a token of a sequence whose length
    // after the step is L > dyn_max_pos rotates with the base
    // dyn_theta·(dyn_factor·L/dyn_max_pos − dyn_factor + 1)^(n/(n−2)) instead of inv_freq's
    // (a backend that cannot says so: backend_ops.rope_dynamic).
    int dyn_max_pos;
    double dyn_theta, dyn_factor;
};

#endif
