// advise_range.c — the quick K/V range check behind `octet advise --model`: a short text goes
// through the model with an unquantized cache while inspect_stats judges every layer's K and V
// as an e4m3 cache at scale 1.0 would store them; the worst layer's saturated (|x| >= 464) and
// underflowing (below e4m3's smallest normal, 2^-6) fractions decide whether static scale 1.0 is
// safe or per-token-head scales (or calibration) are needed.
#include <stdlib.h>
#include <string.h>

#include "../base/check.h"
#include "../model/model.h"
#include "../model/tokenizer.h"
#include "advise.h"
#include "inspect_stats.h"
#include "stats_util.h"

#define RANGE_TOKENS 256

// Used when no --file is given: plain prose any tokenizer encodes.
static const char default_text[] =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her "
    "friends. One day, she saw a big red ball under a tree. She ran to the ball and kicked it very high. "
    "The ball flew over the fence and into the garden of an old man. Lily was sad, but the old man smiled "
    "and gave the ball back to her. They became good friends and played together every day after that. "
    "The sun was warm, the birds sang in the trees, and everyone in the town was happy.";

int advise_range_check(const char *model_path, const char *text_path, json_t **out) {
    struct model *m = NULL;
    struct runner r = {0};
    struct inspect_stats st = {0};
    char *text = NULL;
    int32_t *ids = NULL;
    int n_ids = 0, rc;
    size_t len = sizeof default_text - 1;
    if (text_path && !(text = stats_read_file("--file", text_path, &len))) return OCT_EINVAL;
    if ((rc = model_load(&m, model_path)) < 0) goto done;
    rc = tokenizer_encode(m->tok, text ? text : default_text, len, true, false, &ids, &n_ids);
    if (rc == OCT_OK && n_ids < 2) rc = err_set(OCT_EINVAL, "range check: too little text (%d tokens)", n_ids);
    if (rc < 0) goto done;
    if (n_ids > RANGE_TOKENS) n_ids = RANGE_TOKENS;
    if (n_ids > m->cfg.max_pos) n_ids = m->cfg.max_pos;
    struct runner_options ro;
    runner_options_default(&ro);
    ro.max_ctx = n_ids;
    snprintf(ro.kv.dtype, sizeof ro.kv.dtype, "auto");  // observe the unquantized values
    if ((rc = runner_init(&r, m, &ro)) < 0) goto done;
    if ((rc = inspect_stats_init(&st, &m->cfg, DT_E4M3, &r.kv)) < 0) goto done;
    for (int l = 0; l < m->cfg.n_layers; l++)  // judge scale 1.0, whatever the cache holds
        for (int h = 0; h < m->cfg.n_kv_heads; h++) r.kv.layers[l].k_scale[h] = r.kv.layers[l].v_scale[h] = 1.0f;
    r.fw.probe = inspect_probe;
    r.fw.probe_ctx = &st;
    if ((rc = runner_feed(&r, ids, n_ids, false, NULL)) < 0) goto done;
    double worst_sat = 0, worst_under = 0, amax = 0;
    int sat_layer = -1, under_layer = -1;
    for (int l = 0; l < m->cfg.n_layers; l++)
        for (int k = PROBE_K; k <= PROBE_V; k++) {
            const struct inspect_acc *a = inspect_acc_of(&st, l, (enum probe_kind)k);
            double n = a->real.n ? (double)a->real.n : 1;
            double sat = (double)a->n_sat / n, under = (double)a->n_sub / n;  // n_sub includes the flushed
            if (sat > worst_sat) { worst_sat = sat; sat_layer = l; }
            if (under > worst_under) { worst_under = under; under_layer = l; }
            amax = a->real.max_abs > amax ? a->real.max_abs : amax;
        }
    json_t *o = json_object();
    json_object_set_new(o, "tokens", json_integer(n_ids));
    json_object_set_new(o, "max_abs", json_real(amax));
    json_object_set_new(o, "saturated", json_real(worst_sat));
    json_object_set_new(o, "saturated_layer", json_integer(sat_layer));
    json_object_set_new(o, "underflow", json_real(worst_under));
    json_object_set_new(o, "underflow_layer", json_integer(under_layer));
    *out = o;
done:
    inspect_stats_free(&st);
    if (r.m) runner_free(&r);
    free(ids);
    free(text);
    model_free(m);
    return rc;
}
