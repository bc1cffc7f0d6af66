// needle_model.c — passkey retrieval prompts (the Landmark-Attention recipe) and greedy
// scoring through a runner. Pieces are tokenized separately and concatenated, so a prompt
// of any length is built without re-tokenizing megabytes of filler.
#include "needle_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/check.h"
#include "../base/rng.h"
#include "../engine/sampler.h"
#include "../model/model.h"
#include "../model/tokenizer.h"

static const char *const filler_text[5] = {
    "The grass is green.", "The sky is blue.", "The sun is yellow.", "Here we go.", "There and back again.",
};

// Tokenizes a non-initial piece: a word boundary before it (SPM adds ▁ itself).
static int encode_piece(const struct tokenizer *t, const char *s, bool first, int32_t **ids, int *n) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s%s", (first || tokenizer_add_space_prefix(t)) ? "" : " ", s);
    return tokenizer_encode(t, buf, strlen(buf), first && tokenizer_add_bos(t), false, ids, n);
}

int passkey_recipe_init(struct passkey_recipe *rc, const struct tokenizer *t) {
    memset(rc, 0, sizeof *rc);
    rc->tok = t;
    int rcode = encode_piece(t, "There is an important info hidden inside a lot of irrelevant text. "
                                "Find it and memorize it. I will quiz you about the important information there.",
                             true, &rc->intro, &rc->n_intro);
    if (rcode == OCT_OK)
        rcode = encode_piece(t, "What is the pass key? The pass key is", false, &rc->question, &rc->n_question);
    for (int i = 0; i < 5 && rcode == OCT_OK; i++)
        rcode = encode_piece(t, filler_text[i], false, &rc->filler[i], &rc->n_filler[i]);
    if (rcode < 0) passkey_recipe_free(rc);
    return rcode;
}

void passkey_recipe_free(struct passkey_recipe *rc) {
    free(rc->intro);
    free(rc->question);
    for (int i = 0; i < 5; i++) free(rc->filler[i]);
    memset(rc, 0, sizeof *rc);
}

int passkey_prompt(const struct passkey_recipe *rc, int length, int depth_pct, const char *key,
                   int32_t **ids, int *n_ids, int *needle_at) {
    char nt[128];
    snprintf(nt, sizeof nt, "The pass key is %s. Remember it. %s is the pass key.", key, key);
    int32_t *needle = NULL;
    int n_needle = 0;
    TRY(encode_piece(rc->tok, nt, false, &needle, &n_needle));
    int budget = length - rc->n_intro - n_needle - rc->n_question;
    if (budget < 0) {
        free(needle);
        return err_set(OCT_EINVAL, "--lengths: %d tokens cannot hold the passkey prompt (needs at least %d)", length,
                       length - budget);
    }
    // how many filler sentences fit, and where the needle goes among them
    int n_sent = 0, filler_tokens = 0;
    while (filler_tokens + rc->n_filler[n_sent % 5] <= budget) filler_tokens += rc->n_filler[n_sent++ % 5];
    double target = depth_pct / 100.0 * filler_tokens;
    int insert_after = 0, best = 1 << 30, cum = 0;
    for (int s = 0; s <= n_sent; s++) {
        int d = abs(cum - (int)(target + 0.5));
        if (d < best) { best = d; insert_after = s; }
        if (s < n_sent) cum += rc->n_filler[s % 5];
    }
    int total = rc->n_intro + filler_tokens + n_needle + rc->n_question;
    int32_t *out = malloc((size_t)total * sizeof(int32_t));
    if (!out) { free(needle); return err_set(OCT_ENOMEM, "passkey: out of memory for a %d-token prompt", total); }
    int at = 0;
    memcpy(out, rc->intro, (size_t)rc->n_intro * 4);
    at += rc->n_intro;
    for (int s = 0; s <= n_sent; s++) {
        if (s == insert_after) {
            *needle_at = at;
            memcpy(out + at, needle, (size_t)n_needle * 4);
            at += n_needle;
        }
        if (s < n_sent) {
            memcpy(out + at, rc->filler[s % 5], (size_t)rc->n_filler[s % 5] * 4);
            at += rc->n_filler[s % 5];
        }
    }
    memcpy(out + at, rc->question, (size_t)rc->n_question * 4);
    at += rc->n_question;
    free(needle);
    *ids = out;
    *n_ids = at;
    return OCT_OK;
}

int passkey_run_cell(struct runner *r, const struct passkey_recipe *rc, int length, int depth_pct,
                     const struct passkey_opts *o, struct passkey_cell *out) {
    int trials = o->trials, max_new = o->max_new;
    uint64_t seed = o->seed;
    memset(out, 0, sizeof *out);
    out->length = length;
    out->depth = depth_pct;
    out->trials = trials;
    int nv = r->m->cfg.n_vocab;
    float *logits = malloc((size_t)nv * sizeof(float));
    if (!logits) return err_set(OCT_ENOMEM, "passkey: out of memory");
    struct rng g;
    rng_seed(&g, seed ^ ((uint64_t)length << 16) ^ (uint64_t)depth_pct);
    int rcode = OCT_OK;
    for (int t = 0; t < trials && rcode == OCT_OK; t++) {
        char key[16], text[512];
        snprintf(key, sizeof key, "%05d", 10000 + (int)(rng_next(&g) % 90000));
        int32_t *ids = NULL;
        int n = 0, needle_at = 0;
        if ((rcode = passkey_prompt(rc, length, depth_pct, key, &ids, &n, &needle_at)) < 0) break;
        out->prompt_tokens = n;
        runner_reset(r);
        rcode = runner_feed(r, ids, n, false, logits);
        free(ids);
        size_t len = 0;
        struct detok d = {0};
        for (int i = 0; i < max_new && rcode == OCT_OK; i++) {
            int32_t tok = logits_argmax(logits, nv);
            if (tokenizer_is_eog(rc->tok, tok)) break;
            if (sizeof text - len > 72) len += detok_push(rc->tok, &d, tok, text + len, sizeof text - len - 1);
            if (i + 1 < max_new) rcode = runner_feed(r, &tok, 1, false, logits);
        }
        if (rcode < 0) break;
        if (sizeof text - len > 72) len += detok_flush(&d, text + len, sizeof text - len - 1);
        text[len] = 0;
        out->correct += strstr(text, key) != NULL;
        size_t keep = len < sizeof out->sample - 1 ? len : sizeof out->sample - 1;  // truncated for the table
        memcpy(out->sample, text, keep);
        out->sample[keep] = 0;
    }
    free(logits);
    return rcode;
}
