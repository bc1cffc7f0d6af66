// sampler.c — logits processing (logit_bias, min_tokens, penalties) and temperature / top-k /
// top-p / min-p sampling over one logits row.
#include "sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../base/check.h"

void sampling_params_default(struct sampling_params *p) {
    *p = (struct sampling_params){.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = 0,
                                  .repetition_penalty = 1.0f};
}

int sampling_params_check(const struct sampling_params *p) {
    if (!(p->temperature >= 0) || !isfinite(p->temperature))
        return err_set(OCT_EINVAL, "temperature %g must be finite and >= 0", p->temperature);
    if (!(p->top_p > 0 && p->top_p <= 1)) return err_set(OCT_EINVAL, "top_p %g must be in (0, 1]", p->top_p);
    if (!(p->min_p >= 0 && p->min_p <= 1)) return err_set(OCT_EINVAL, "min_p %g must be in [0, 1]", p->min_p);
    if (!(p->repetition_penalty > 0) || !isfinite(p->repetition_penalty))
        return err_set(OCT_EINVAL, "repetition_penalty %g must be finite and > 0", p->repetition_penalty);
    if (!isfinite(p->frequency_penalty)) return err_set(OCT_EINVAL, "frequency_penalty must be finite");
    if (!isfinite(p->presence_penalty)) return err_set(OCT_EINVAL, "presence_penalty must be finite");
    if (p->min_tokens < 0) return err_set(OCT_EINVAL, "min_tokens %d must be >= 0", p->min_tokens);
    if (p->n_bias < 0 || (p->n_bias && !p->bias) || p->n_mask < 0 || (p->n_mask && !p->mask_ids))
        return err_set(OCT_EINVAL, "sampling parameters: a list without its entries");
    for (int i = 0; i < p->n_bias; i++)
        if (!isfinite(p->bias[i].bias)) return err_set(OCT_EINVAL, "logit_bias for token %d must be finite",
                                                      p->bias[i].id);
    return OCT_OK;
}

static bool has_penalty(const struct sampling_params *p) {
    return p->repetition_penalty != 1 || p->frequency_penalty != 0 || p->presence_penalty != 0;
}

bool sampler_processes(const struct sampler *s) {
    return s->p.n_bias > 0 || (s->p.min_tokens > 0 && s->p.n_mask > 0) || has_penalty(&s->p);
}

bool sampler_plain_greedy(const struct sampler *s) {
    return s->p.temperature < SAMPLER_GREEDY_EPS && !sampler_processes(s);
}

int sampler_init(struct sampler *s, const struct sampling_params *p, int n_vocab) {
    memset(s, 0, sizeof *s);
    TRY(sampling_params_check(p));
    for (int i = 0; i < p->n_bias; i++)
        if (p->bias[i].id < 0 || p->bias[i].id >= n_vocab)
            return err_set(OCT_EINVAL, "logit_bias: token %d is outside the vocabulary (0..%d)", p->bias[i].id,
                           n_vocab - 1);
    s->p = *p;
    s->p.bias = NULL;
    s->p.mask_ids = NULL;
    s->n_vocab = n_vocab;
    rng_seed(&s->rng, p->seed);
    s->probs = malloc((size_t)n_vocab * sizeof(float));
    s->idx = malloc((size_t)n_vocab * sizeof(int32_t));
    bool ok = s->probs && s->idx;
    if (p->n_bias) {
        struct logit_bias *b = malloc(sizeof *b * (size_t)p->n_bias);
        if (b) memcpy(b, p->bias, sizeof *b * (size_t)p->n_bias);
        s->p.bias = b;
        ok = ok && b;
    }
    if (p->n_mask) {
        int32_t *m = malloc(sizeof *m * (size_t)p->n_mask);
        if (m) memcpy(m, p->mask_ids, sizeof *m * (size_t)p->n_mask);
        s->p.mask_ids = m;
        ok = ok && m;
    }
    if (sampler_processes(s)) ok = ok && (s->work = malloc((size_t)n_vocab * sizeof(float)));
    if (has_penalty(p)) ok = ok && (s->count = calloc((size_t)n_vocab, sizeof(int32_t)));
    if (!ok) { sampler_free(s); return err_set(OCT_ENOMEM, "sampler: out of memory"); }
    return OCT_OK;
}

void sampler_free(struct sampler *s) {
    free(s->probs);
    free(s->idx);
    free(s->work);
    free(s->count);
    free((void *)s->p.bias);
    free((void *)s->p.mask_ids);
    s->probs = s->work = NULL;
    s->idx = s->count = NULL;
    s->p.bias = NULL;
    s->p.mask_ids = NULL;
    s->p.n_bias = s->p.n_mask = 0;
}

void logits_log_norm(const float *logits, int n, float *max, double *log_sum) {
    float m = logits[logits_argmax(logits, n)];
    double sum = 0;
    for (int i = 0; i < n; i++) sum += exp((double)logits[i] - m);
    *max = m;
    *log_sum = log(sum);
}

double logits_logprob(const float *logits, int n, int id) {
    float m;
    double ls;
    logits_log_norm(logits, n, &m, &ls);
    return (double)logits[id] - m - ls;
}

int logits_top_k(const float *logits, int n, int k, int32_t *ids) {
    if (k > n) k = n;
    int have = 0;
    for (int v = 0; v < n && k > 0; v++) {
        float x = logits[v];
        if (have == k && !(x > logits[ids[k - 1]])) continue;  // (a tie keeps the earlier id)
        int at = have < k ? have++ : k - 1;
        while (at > 0 && x > logits[ids[at - 1]]) { ids[at] = ids[at - 1]; at--; }
        ids[at] = v;
    }
    return have;
}

double logits_kld(const float *ref, const float *x, int n) {
    double mr = ref[logits_argmax(ref, n)], mx = x[logits_argmax(x, n)], zr = 0, zx = 0;
    for (int i = 0; i < n; i++) { zr += exp(ref[i] - mr); zx += exp(x[i] - mx); }
    double lzr = log(zr), lzx = log(zx), kl = 0;
    for (int i = 0; i < n; i++) {
        double lpr = ref[i] - mr - lzr, lpx = x[i] - mx - lzx;
        kl += exp(lpr) * (lpr - lpx);
    }
    return kl > 0 ? kl : 0;
}

static int by_prob_desc(const void *a, const void *b, void *ctx) {
    const float *probs = ctx;
    float pa = probs[*(const int32_t *)a], pb = probs[*(const int32_t *)b];
    if (pa != pb) return pa < pb ? 1 : -1;
    return *(const int32_t *)a - *(const int32_t *)b;
}

// The filters' cut over candidates idx[0..nc) sorted by probability, the most probable first
// (every other token less probable than all of them, and, with min_p, less than its threshold):
// n_keep <= nc, or -1 when the cut needs tokens past the candidates.
static int cut(const struct sampler *s, int nc, int n) {
    int n_keep = n;
    if (s->p.top_k > 0 && s->p.top_k < n_keep) {
        n_keep = s->p.top_k;
        if (n_keep > nc) return -1;
    }
    if (s->p.top_p < 1) {
        double cum = 0;
        int i = 0;
        for (; i < n_keep && i < nc; i++) {
            cum += s->probs[s->idx[i]];
            if (cum >= s->p.top_p) break;
        }
        if (i < n_keep && i < nc) n_keep = i + 1;  // reached top_p
        else if (i == nc && nc < n_keep) return -1;  // ran off the candidates
    }
    if (n_keep > nc) n_keep = nc;  // (min_p alone: the candidates hold every token above its threshold)
    if (s->p.min_p > 0) {
        float thr = s->p.min_p * s->probs[s->idx[0]];
        int k = 1;
        while (k < n_keep && s->probs[s->idx[k]] >= thr) k++;
        n_keep = k;
    }
    return n_keep;
}

// Sorts only the tokens of probability >= theta (a prefix of the whole sorted order: every other
// token is less probable than all of them), lowering theta until the filters' cut falls inside
// them (theta = 0 takes every token). Same cut, same order as sorting the whole vocabulary, which
// cost tens of ms a token over 128k logits (bench/host/RESULTS.md).
static int filter(struct sampler *s, int n, float p_max) {
    float theta = p_max / 16;
    if (s->p.min_p > 0 && s->p.min_p * p_max < theta) theta = s->p.min_p * p_max;  // (min_p's cut then fits)
    for (;;) {
        int nc = 0;
        if (theta > 0) {
            for (int i = 0; i < n; i++) if (s->probs[i] >= theta) s->idx[nc++] = i;
        } else {
            for (; nc < n; nc++) s->idx[nc] = nc;  // every token (NaNs too, as a whole sort takes them)
        }
        qsort_r(s->idx, (size_t)nc, sizeof(int32_t), by_prob_desc, s->probs);
        int n_keep = cut(s, nc, n);
        if (n_keep >= 0) return n_keep;
        if (theta == 0) return n;  // (unreachable: with every token the cut never runs off them)
        theta = theta > 1e-30f ? theta / 16 : 0;
    }
}

// e^x for x <= 0 (0 below -87, where floats stop being normal; NaN stays NaN), in arithmetic the
// compiler vectorises: e^x = 2^k · e^r with k = round(x·log2 e), r = x − k·ln 2 in two parts
// (Cody and Waite) so that r is exact to float precision, and e^r (|r| <= 0.35) by its Taylor
// series to r^6. Relative error below 2.5e-7 over [-87, 0] (the test holds it).
static inline float exp_nonpos(float x) {
    float k = floorf(x * 1.44269504088896341f + 0.5f);
    float r = x - k * 0.693145751953125f;
    r = r - k * 1.428606765330187e-06f;
    float p = 1.3888889e-3f;
    p = p * r + 8.3333333e-3f;
    p = p * r + 4.1666667e-2f;
    p = p * r + 1.6666667e-1f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    k = k > -126.0f ? k : -126.0f;  // (NaN too: the result is NaN through p)
    union { int32_t i; float f; } sc = {.i = ((int32_t)k + 127) * (1 << 23)};
    return x < -87.0f ? 0.0f : p * sc.f;
}

int logits_softmax(const float *logits, int n, float temperature, float *probs) {
    const int best = logits_argmax(logits, n);
    const float m = logits[best], inv_t = 1.0f / temperature;
    int i = 0;
    for (; i + 8 <= n; i += 8)  // (blocks of 8 independent lanes: vector code at -O2)
        for (int j = 0; j < 8; j++) probs[i + j] = exp_nonpos((logits[i + j] - m) * inv_t);
    for (; i < n; i++) probs[i] = exp_nonpos((logits[i] - m) * inv_t);
    double lane[8] = {0}, sum = 0;
    for (i = 0; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) lane[j] += probs[i + j];
    for (; i < n; i++) sum += probs[i];
    for (int j = 0; j < 8; j++) sum += lane[j];
    const float inv = (float)(1.0 / sum);
    for (i = 0; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) probs[i + j] *= inv;
    for (; i < n; i++) probs[i] *= inv;
    return best;
}

// Whether any of x[0..n) is NaN or +inf (-inf is a masked token). 8 lanes: vector code at -O2.
static bool row_bad(const float *x, int n) {
    int lane[8] = {0}, bad = 0, i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) lane[j] |= !(x[i + j] < INFINITY);
    for (; i < n; i++) bad |= !(x[i] < INFINITY);
    for (int j = 0; j < 8; j++) bad |= lane[j];
    return bad;
}

// count[] flags beside the output counts (the counts stay far below them)
#define SEEN (1 << 29)     // the repetition penalty has been applied to this token
#define APPLIED (1 << 30)  // the frequency and presence penalties have been applied

static void repeat(const struct sampler *s, float *w, const int32_t *ids, int n) {
    const float rp = s->p.repetition_penalty;
    for (int i = 0; i < n; i++) {
        int t = ids[i];
        if (t < 0 || t >= s->n_vocab || (s->count[t] & SEEN)) continue;
        s->count[t] |= SEEN;
        w[t] = w[t] > 0 ? w[t] / rp : w[t] * rp;
    }
}

// The row to pick from: the logits, or s->work holding them with the bias added, the stop ids
// masked (before min_tokens) and the penalties applied. The counts come from the sequence
// itself on every call, so a request recomputed after preemption draws the same.
static const float *process(struct sampler *s, const float *logits, const int32_t *prompt, int n_prompt,
                            const int32_t *out, int n_out) {
    if (!sampler_processes(s)) return logits;
    float *w = s->work;
    const int n = s->n_vocab;
    memcpy(w, logits, sizeof(float) * (size_t)n);
    for (int i = 0; i < s->p.n_bias; i++) w[s->p.bias[i].id] += s->p.bias[i].bias;
    if (n_out < s->p.min_tokens)
        for (int i = 0; i < s->p.n_mask; i++)
            if (s->p.mask_ids[i] >= 0 && s->p.mask_ids[i] < n) w[s->p.mask_ids[i]] = -INFINITY;
    if (!s->count) return w;
    for (int i = 0; i < n_out; i++)
        if (out[i] >= 0 && out[i] < n) s->count[out[i]]++;
    if (s->p.repetition_penalty != 1) {
        repeat(s, w, prompt, n_prompt);
        repeat(s, w, out, n_out);
    }
    const float fp = s->p.frequency_penalty, pp = s->p.presence_penalty;
    for (int i = 0; i < n_out; i++) {
        int t = out[i];
        if (t < 0 || t >= n || (s->count[t] & APPLIED)) continue;
        int c = s->count[t] & (SEEN - 1);
        w[t] -= fp * (float)c + pp;
        s->count[t] |= APPLIED;
    }
    for (int i = 0; i < n_prompt; i++)
        if (prompt[i] >= 0 && prompt[i] < n) s->count[prompt[i]] = 0;
    for (int i = 0; i < n_out; i++)
        if (out[i] >= 0 && out[i] < n) s->count[out[i]] = 0;
    return w;
}

int sampler_sample(struct sampler *s, const float *logits) { return sampler_sample_seq(s, logits, NULL, 0, NULL, 0); }

int sampler_sample_seq(struct sampler *s, const float *raw, const int32_t *prompt, int n_prompt,
                       const int32_t *output, int n_output) {
    int n = s->n_vocab;
    if (row_bad(raw, n)) return err_set(OCT_EINVAL, "the model's logits hold NaN or +inf");
    const float *logits = process(s, raw, prompt, n_prompt, output, n_output);
    int pick = logits_argmax(logits, n);
    if (logits[pick] == -INFINITY) return err_set(OCT_EINVAL, "every token is masked");
    if (s->p.temperature < SAMPLER_GREEDY_EPS) return pick;
    const int best = logits_softmax(logits, n, s->p.temperature, s->probs);
    // candidates sorted by probability (only when a filter needs the order)
    int n_keep = n;
    bool filtered = (s->p.top_k > 0 && s->p.top_k < n) || s->p.top_p < 1 || s->p.min_p > 0;
    if (filtered) n_keep = filter(s, n, s->probs[best]);
    else for (int i = 0; i < n; i++) s->idx[i] = i;
    double total = 0;
    for (int i = 0; i < n_keep; i++) total += s->probs[s->idx[i]];
    double r = rng_double(&s->rng) * total, cum = 0;
    for (int i = 0; i < n_keep; i++) {
        cum += s->probs[s->idx[i]];
        if (r < cum) return s->idx[i];
    }
    return s->idx[n_keep - 1];
}
