// calib_choose.h — calibration that keeps the scales that hurt least (owns: the candidate scale
// sets — 1.0, max and percentiles per tensor and per KV head, each with and without K offsets —,
// the error each causes in the attention output on the calibration text, the per-layer, per-K/V
// choice and its comparison table; not: the histograms (calib_scales.c) or the flags (calibrate.c)).
// Scale 1.0 is always a candidate and wins ties, so the choice is never worse than 1.0 on the
// calibration sample by this measure.
#ifndef OCTET_CALIB_CHOOSE_H
#define OCTET_CALIB_CHOOSE_H

#include <stdio.h>

#include "calib_scales.h"

#define CALIB_MAX_CAND 16

struct calib_cand {
    char name[32];           // "1.0", "tensor max", "head p99.9 +off", ...
    bool off;                // K is stored as K - offset (a K-only candidate)
    struct calib_scales sc;  // its scales (owned)
};

struct calib_choice {
    int n_layers, n_cand, sample_tokens;
    struct calib_cand cand[CALIB_MAX_CAND];
    double *err_k, *err_v;   // [n_layers][n_cand] relative squared error of the attention output; V: NaN for +off
    int *best_k, *best_v;    // [n_layers] chosen candidates
    bool *off_layer;         // [n_layers] the chosen K candidate stores K - offset
    const char **k_name, **v_name; // [n_layers] the chosen candidates' names
    struct calib_scales result;    // per-head arrays of the chosen scales (k_off: st's offsets)
};

// Runs ids through r twice (raw statistics and a sample of the first chunk's first min(ctx, 512)
// tokens, fewer where T² · n_heads · head_dim · n_layers would pass 8.6e9; then K − mean
// statistics), builds the candidates for fp8 dtype dt, measures each one's error in every
// layer's attention output over the sample (K first, with V exact; then V with the chosen K)
// and keeps the smallest. st must be freshly initialised; it keeps the offsets that
// result.k_off points to.
int calib_choose(struct calib_choice *ch, struct runner *r, int32_t *ids, int n_ids, int ctx, enum dtype dt,
                 struct calib_stats *st);
// The comparison table (markdown): one K and one V row per layer, a column per candidate,
// the chosen one marked with '*'.
void calib_choice_print(const struct calib_choice *ch, FILE *f);
void calib_choice_free(struct calib_choice *ch);

#endif
