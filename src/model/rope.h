// rope.h — rotary position embedding tables (owns: inverse frequencies and the
// attention factor for every scaling variant in config.h; not: the table type, which the
// backends read (backend/rope_table.h), nor applying it, which each backend's rope op does).
// Invariant: a table is a pure function of (rope_config, head_dim); the rotation angle
// of pair i at position p is p * inv_freq[i] (linear scaling folds 1/factor in).
#ifndef OCTET_ROPE_H
#define OCTET_ROPE_H

#include "../backend/rope_table.h"  // struct rope_table
#include "config.h"

// YaRN's attention factor (multiplies cos and sin): the config's attention_factor, else from
// factor, mscale and mscale_all_dim as transformers computes it.
double rope_yarn_attn_factor(const struct rope_config *rc);

void rope_table_init(struct rope_table *t, const struct rope_config *rc);

// Reference rotation of one head vector x[head_dim] at position pos (in place).
void rope_apply_ref(const struct rope_table *t, float *x, int pos);

#endif
