// calib_scales.h — KV (and Q) scale calibration (owns: per-layer, per-head |x| histograms
// of the pre-quantization Q/K/V a runner's probe observes, the scale rule
// scale = statistic(|x|) / fp8_max, and the scales-file writer; not: the runner or model).
// Invariant: every computed scale is a positive finite number (a head that only ever saw
// zeros gets 1.0), so the file always loads with --kv-scales (docs/kv_format.md).
#ifndef OCTET_CALIB_SCALES_H
#define OCTET_CALIB_SCALES_H

#include <stdbool.h>
#include <stdint.h>

#include "../engine/runner.h"
#include "stats_util.h"

enum calib_granularity { CALIB_TENSOR = 0, CALIB_HEAD };

struct calib_method {
    bool percentile;    // false: max-abs
    double pct;         // percentile in (0, 100] when percentile
};

// "tensor" | "head"; errors name --granularity and the value.
int calib_parse_granularity(const char *s, enum calib_granularity *g);
// "max" | "percentile:P" (0 < P <= 100); errors name --method and the value.
int calib_parse_method(const char *s, struct calib_method *m);

// The first `cap` tokens each layer's probe sees (one chunk of text, in order): the Q, K and V
// attention reads, kept so calib_choose can measure each candidate's attention-output error.
struct calib_sample {
    int cap;        // tokens kept per layer (<= the chunk length, so they are one causal sequence)
    int *n;         // [n_layers] tokens kept so far
    float *q, *k, *v; // [n_layers][cap][n_heads * head_dim]; K and V use n_kv_heads
};

struct calib_stats {
    int n_layers, n_heads, n_kv_heads, head_dim;
    long n_tokens;              // tokens observed (per layer)
    struct stats_hist *h;       // [n_layers][3 (Q, K, V)][n_heads]; K/V use n_kv_heads
    double *k_sum;              // [n_layers][n_kv_heads][head_dim] sum of K per channel
    float *k_off;               // NULL, or the K offsets subtracted before K's histograms
    struct calib_sample *sample; // NULL, or where the probe keeps the first tokens' raw Q, K, V
};

int calib_stats_init(struct calib_stats *s, const struct model_config *c);
void calib_stats_free(struct calib_stats *s);
// Allocates a sample of cap tokens per layer for s (freed by calib_sample_free).
int calib_sample_init(struct calib_sample *p, const struct calib_stats *s, int cap);
void calib_sample_free(struct calib_sample *p);
struct stats_hist *calib_hist(const struct calib_stats *s, int layer, enum probe_kind kind, int head);
// The forward probe: pass as r.fw.probe with probe_ctx = the stats.
void calib_probe(void *ctx, int layer, enum probe_kind kind, const float *x, int n_tokens, int width);

// Runs ids through r in chunks of ctx tokens (each chunk's first token replaced by BOS
// when the vocabulary has one, as eval ppl does), observing every layer into s.
int calib_collect(struct runner *r, int32_t *ids, int n_ids, int ctx, struct calib_stats *s);

// K offsets = the mean of K per (layer, KV head, channel) over the tokens observed so far;
// then the histograms restart, so the next calib_collect measures |K − offset| (the
// values an FP8 layer with these offsets stores).
int calib_offsets_from_mean(struct calib_stats *s);

struct calib_scales {
    int n_layers, n_kv_heads, n_heads, head_dim;
    const float *k_off;     // [n_layers][n_kv_heads][head_dim] (the stats' offsets), or NULL
    const bool *k_off_layer; // [n_layers] which layers write k_offset, or NULL (all, when k_off)
    const char *const *k_choice, *const *v_choice; // [n_layers] chosen candidates' names, or NULL
    enum calib_granularity granularity;
    float *k, *v;       // [n_layers][n_kv_heads] (per tensor: all heads equal)
    float *q;           // [n_layers][n_heads]
    float *k_amax, *v_amax; // [n_layers] observed max |x| over the whole layer
};

// scale = stat(|x|) / fp8_max for K and V, and stat(|x|) / 448 for Q (Q is always e4m3).
int calib_scales_compute(const struct calib_stats *s, enum calib_granularity g, struct calib_method m,
                         float fp8_max, struct calib_scales *out);
void calib_scales_free(struct calib_scales *c);
// Writes the octet-kv-scales/1 JSON (numbers per tensor, arrays per head; k_offset as
// [n_kv_heads][head_dim] arrays when the stats had offsets).
int calib_scales_write(const char *path, const struct calib_scales *c, const char *model_name,
                       const char *method, long num_tokens, const char *kv_dtype);

#endif
