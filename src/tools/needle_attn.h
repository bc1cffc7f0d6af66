// needle_attn.h — the attention-level needle problem (owns: a synthetic decode-attention
// instance — Gaussian K/V with outlier channels, one needle key aligned with the queries,
// a distinctive needle value — its float64 reference output, and running it through a
// backend's kv_write + attention for one KV dtype and FP8 math path; not: the CLI).
// Invariant: the problem is a pure function of (shape, length, seed, needle weight), so
// every dtype and path is measured on identical inputs against one reference.
#ifndef OCTET_NEEDLE_ATTN_H
#define OCTET_NEEDLE_ATTN_H

#include <stdbool.h>
#include <stdint.h>

#include "../backend/backend.h"

struct needle_shape {
    int n_heads, n_kv_heads, head_dim;
    float v_bias;               // mean of V's outlier channels (0: centred). A shared offset makes
                                // every haystack key add the same sign, as real V channels often do
};

struct needle_problem {
    struct needle_shape s;
    int length;                 // cached tokens; the query sits at position length-1
    int needle_pos;
    float *k, *v;               // [length][n_kv_heads][head_dim] unquantized cache contents
    float *q;                   // [n_heads][head_dim] the decode query
    double *ref;                // [n_heads][head_dim] float64 attention output
    double needle_weight;       // mean softmax weight of the needle over query heads (reference)
    int n_distractors;
    int *distractor_pos;        // [n_distractors] ordinary keys holding needle-like values
    float k_amax[KV_MAX_HEADS], v_amax[KV_MAX_HEADS]; // per KV head max |x|
};

// Builds the problem: K ~ N(0,1) with 4 outlier channels per head (mean ±10, std 3), V ~
// N(0,1) with 2 outlier channels (std 8, mean s.v_bias); queries of one KV group share a direction; the
// needle key at depth × (length-1) is shifted along it until the needle's softmax weight
// (float64) is at least `weight` (0 < weight < 1) for every head of the group. The needle
// value, and the values of 16 random distractor positions (ordinary keys), are plain
// Gaussian rows (no outlier channels) with a haystack row's typical norm.
int needle_problem_init(struct needle_problem *p, struct needle_shape s, int length, double depth,
                        double weight, uint64_t seed);
void needle_problem_free(struct needle_problem *p);

struct needle_result {
    double rel_l2;          // ||out − ref||₂ / ||ref||₂ over all query heads
    double cos_needle;      // mean over heads of cos(out_h, needle value of its KV head)
    double cos_distractor;  // mean over heads of the best distractor's cosine
    bool retrieved;         // every head: cos(out, needle) > threshold and > every distractor's
    double attn_ms;         // wall time of the attention op
};

struct needle_run {
    enum dtype dt;              // KV cache element type
    enum attn_fp8_math math;    // attention path for FP8 caches (CPU)
    int accum;                  // struct attn_params.fp8_accum (GPU FP8 tensor-core path)
    int query_rows;             // 1: one decode query; 2: the last two positions as a prefill
                                // chunk, so a GPU runs its prefill kernel (the scored row is the last)
    bool calibrated;            // FP8 scales max|x|/fp8_max per KV head (else 1.0)
    double cos_threshold;       // retrieval needs cos(out, needle) above this
};

// Stores the problem's K/V as run->dt on backend b, runs one attention step, scores it.
int needle_problem_run(const struct needle_problem *p, struct backend *b, const struct needle_run *run,
                       struct needle_result *out);

#endif
