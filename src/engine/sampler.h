// sampler.h — logits → next token (owns: the sampling parameters, the seeded RNG and
// scratch; not: the logits, nor the sequence the penalties read). Order as in vLLM: logit_bias
// and the min_tokens mask, then the repetition, frequency and presence penalties (on a copy of
// the row), then temperature, top-k, top-p, min-p and a draw. A temperature below
// SAMPLER_GREEDY_EPS is greedy (argmax, lowest id on ties). A row holding NaN or +inf is an
// error, never a draw.
#ifndef OCTET_SAMPLER_H
#define OCTET_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>

#include "../base/argmax.h"  // logits_argmax
#include "../base/rng.h"

// Temperatures below this are greedy (vLLM's _SAMPLING_EPS): 1/T would overflow the softmax.
#define SAMPLER_GREEDY_EPS 1e-5f

struct logit_bias {
    int32_t id;
    float bias;         // added to the token's logit
};

struct sampling_params {
    float temperature;  // < SAMPLER_GREEDY_EPS = greedy
    int top_k;          // 0 or <0 = off
    float top_p;        // 1 = off
    float min_p;        // 0 = off
    uint64_t seed;
    // Penalties (vLLM's semantics), over the sequence passed to sampler_sample_seq:
    float repetition_penalty;   // 1 = off; a token in the prompt or the output: logit / p if > 0, else logit * p
    float frequency_penalty;    // 0 = off; minus this times the token's count in the output
    float presence_penalty;     // 0 = off; minus this once for a token the output holds
    int min_tokens;             // mask_ids cannot be drawn before the output holds this many tokens
    const struct logit_bias *bias;  // [n_bias] (copied by sampler_init)
    int n_bias;
    const int32_t *mask_ids;    // [n_mask] the stop ids min_tokens holds back (copied by sampler_init)
    int n_mask;
};

void sampling_params_default(struct sampling_params *p);
// Errors name the parameter: temperature < 0 or not finite, top_p outside (0,1], min_p outside
// [0,1], repetition_penalty <= 0 or not finite, a penalty or bias not finite, min_tokens < 0.
int sampling_params_check(const struct sampling_params *p);

struct sampler {
    struct sampling_params p;   // bias and mask_ids point at the sampler's own copies
    struct rng rng;
    int n_vocab;
    float *probs;    // [n_vocab]
    int32_t *idx;    // [n_vocab]
    float *work;     // [n_vocab] the processed row (NULL: no bias, penalty or mask)
    int32_t *count;  // [n_vocab] zero between calls (NULL: no penalty)
};

int sampler_init(struct sampler *s, const struct sampling_params *p, int n_vocab);
void sampler_free(struct sampler *s);
// The next token after prompt[0..n_prompt) + output[0..n_output) (the penalties' and min_tokens'
// inputs; NULL/0 for none). Returns the id, or <0 with err_msg() when the row holds NaN or +inf
// or every token is masked.
int sampler_sample_seq(struct sampler *s, const float *logits /*[n_vocab]*/, const int32_t *prompt, int n_prompt,
                       const int32_t *output, int n_output);
// sampler_sample_seq with no sequence.
int sampler_sample(struct sampler *s, const float *logits /*[n_vocab]*/);
// Whether draws are greedy argmaxes of the model's own logits (no bias, penalty or mask).
bool sampler_plain_greedy(const struct sampler *s);
// Whether the row is processed (bias, penalty or min_tokens mask) before the pick.
bool sampler_processes(const struct sampler *s);

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
