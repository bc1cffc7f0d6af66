// rope.h — rotary position embedding tables (owns: inverse frequencies and the
// attention factor for every scaling variant in config.h; not: applying them, which
// each backend's rope op does from this table).
// Invariant: a table is a pure function of (rope_config, head_dim); the rotation angle
// of pair i at position p is p * inv_freq[i] (linear scaling folds 1/factor in).
#ifndef OCTET_ROPE_H
#define OCTET_ROPE_H

#include "config.h"

#define ROPE_MAX_PAIRS 256

struct rope_table {
    int n_rot;                      // rotated dims (pairs = n_rot/2)
    bool neox;                      // pair (i, i+n_rot/2) instead of (2i, 2i+1)
    float attn_factor;              // multiplies cos/sin (YaRN mscale), else 1
    double inv_freq[ROPE_MAX_PAIRS]; // [n_rot/2]
};

void rope_table_init(struct rope_table *t, const struct rope_config *rc);

// Reference rotation of one head vector x[head_dim] at position pos (in place).
void rope_apply_ref(const struct rope_table *t, float *x, int pos);

#endif
