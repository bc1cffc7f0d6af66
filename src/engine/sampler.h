// sampler.h — logits → next token (owns: the sampling parameters, the seeded RNG and
// scratch; not: the logits). Order as in vLLM: temperature, top-k, top-p, min-p, then a
// draw; temperature 0 is greedy (argmax, lowest id on ties).
#ifndef OCTET_SAMPLER_H
#define OCTET_SAMPLER_H

#include <stdint.h>

#include "../base/argmax.h"  // logits_argmax
#include "../base/rng.h"

struct sampling_params {
    float temperature;  // 0 = greedy
    int top_k;          // 0 or <0 = off
    float top_p;        // 1 = off
    float min_p;        // 0 = off
    uint64_t seed;
};

void sampling_params_default(struct sampling_params *p);
// Errors name the parameter: temperature < 0, top_p outside (0,1], min_p outside [0,1].
int sampling_params_check(const struct sampling_params *p);

struct sampler {
    struct sampling_params p;
    struct rng rng;
    int n_vocab;
    float *probs;    // [n_vocab]
    int32_t *idx;    // [n_vocab]
};

int sampler_init(struct sampler *s, const struct sampling_params *p, int n_vocab);
void sampler_free(struct sampler *s);
int sampler_sample(struct sampler *s, const float *logits /*[n_vocab]*/);

// log-softmax of logits[id] (for logprobs and perplexity), computed in double.
double logits_logprob(const float *logits, int n_vocab, int id);
// The log-softmax's normaliser in two parts, as logits_logprob computes it: *max the largest
// logit, *log_sum log Σ exp(logit − max); logprob(id) = logits[id] − *max − *log_sum.
void logits_log_norm(const float *logits, int n_vocab, float *max, double *log_sum);
// The ids of the k largest logits into ids[], largest first, the lower id first on ties; returns
// min(k, n_vocab). One pass over the logits.
int logits_top_k(const float *logits, int n_vocab, int k, int32_t *ids);
// probs = softmax(logits / temperature) (temperature > 0), as the sampler draws from it: a fast
// e^x (relative error below 2.5e-7) and a double sum. Returns logits_argmax (the likeliest id).
int logits_softmax(const float *logits, int n_vocab, float temperature, float *probs);
// KL(softmax(ref) || softmax(x)) over one row pair, in double (>= 0).
double logits_kld(const float *ref, const float *x, int n_vocab);

#endif
