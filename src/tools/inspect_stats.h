// inspect_stats.h — per-layer FP8 diagnostics of one activation kind (owns: accumulators
// for K, V, Q and the SwiGLU gate of every layer — |x| histograms in real units and in
// units of the FP8 scale, saturation / subnormal / flush-to-zero counts and the FP8
// round-trip error — fed by the forward probe; not: the runner or the sensitivity runs).
// Scales: K and V use the cache's per-head scales, Q the dynamic per-(token, head) scale
// amax/448 of the FP8 attention path, the gate 1.0 (it is not cached; SPEC.md §4). With
// token_scales (fp8_per_token_head) K and V also get each row's own amax/448, as kv_write computes.
#ifndef OCTET_INSPECT_STATS_H
#define OCTET_INSPECT_STATS_H

#include "../engine/runner.h"
#include "stats_util.h"

#define INSPECT_KINDS 4   // enum probe_kind: Q, K, V, GATE

struct inspect_acc {
    struct stats_hist real;     // |x|
    struct stats_hist scaled;   // |x / scale| (FP8's own units: range lines are fixed)
    struct stats_hist rounded;  // |fp8(x / scale)| (zeros: flushed values)
    uint64_t n_sat, n_sub, n_flush;  // beyond fp8 max; nonzero below min normal; nonzero → 0
    double sq_err, sq;          // Σ (x − rt(x))², Σ x²
    float scale_min, scale_max; // the scales applied (K/V; Q's range of dynamic scales)
};

struct inspect_stats {
    int n_layers, n_heads, n_kv_heads, head_dim;
    enum dtype dt;              // the FP8 format judged (e4m3 or e5m2)
    bool token_scales;          // K/V scales per (token, KV head) from the row's amax (fp8_per_token_head)
    const struct kv_cache *kv;  // scales source for K/V
    struct inspect_acc *acc;    // [n_layers][INSPECT_KINDS]
};

int inspect_stats_init(struct inspect_stats *s, const struct model_config *c, enum dtype dt, const struct kv_cache *kv);
void inspect_stats_free(struct inspect_stats *s);
struct inspect_acc *inspect_acc_of(const struct inspect_stats *s, int layer, enum probe_kind kind);
// The forward probe (probe_ctx = the stats).
void inspect_probe(void *ctx, int layer, enum probe_kind kind, const float *x, int n_tokens, int width);

#endif
