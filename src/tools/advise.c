// advise.c — `octet advise` and the advice section of `bench sweep`: the FP8 rules
// over measured numbers (break-even and slope ratio from the ITL fits, prefill cost from the
// TTFT fits, head_dim and sliding windows from the model, recovery from an eval ppl JSON).
// Owns only the wording and the rules; each rule adds one item {topic, text} to the JSON.
// Inputs from different models (a configuration that ran another --model, a --model, scales
// file or accuracy result whose model differs from the sweep's) are refused, not advised on.
#include "advise.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/check.h"
#include "../model/model.h"
#include "cli.h"
#include "fit.h"
#include "tools.h"

#define SMALL_WINDOW_TOKENS 1024  // windows this small hold too little KV for FP8 to pay
#define RANGE_SAT_MAX 1e-4        // K/V fraction an e4m3 cache at scale 1.0 may saturate (stories260K: 0)
#define RANGE_UNDER_MAX 0.10      // ... and may store below e4m3's smallest normal (stories260K: <= 4%)

int advise_model_info(const char *path, bool allow_full_load, json_t **info) {
    struct model_config c;
    struct model *m = NULL;
    size_t n = strlen(path);
    const char *weights = "bf16";  // dummy weights are bf16
    if (!strncmp(path, "dummy:", 6)) TRY(dummy_config(path + 6, &c));
    else if (allow_full_load || (n > 5 && !strcmp(path + n - 5, ".gguf"))) {
        TRY(model_load(&m, path));
        c = m->cfg;
        weights = cli_kv_dtype_resolved("auto", m->weight_dtype);
        model_free(m);
    } else {
        return err_set(OCT_EUNSUP, "%s: model facts need a full load (pass --model to octet advise)", path);
    }
    int n_sliding = 0;
    for (int i = 0; i < c.n_layers; i++) n_sliding += c.sliding_window > 0 && c.layer_sliding[i];
    json_t *o = json_object();
    json_object_set_new(o, "head_dim", json_integer(c.head_dim));
    json_object_set_new(o, "n_layers", json_integer(c.n_layers));
    json_object_set_new(o, "n_kv_heads", json_integer(c.n_kv_heads));
    json_object_set_new(o, "max_pos", json_integer(c.max_pos));
    json_object_set_new(o, "sliding_window", json_integer(c.sliding_window));
    json_object_set_new(o, "n_sliding_layers", json_integer(n_sliding));
    json_object_set_new(o, "weight_dtype", json_string(weights));
    *info = o;
    return OCT_OK;
}

struct advice {
    FILE *out;
    json_t *items;
    char auto_label[48];    // "auto (bf16)": what --kv-cache-dtype auto runs as, when the model is known
    const char *weights;    // the weights' type ("bf16"), or "the weights' type"
};

static void say(struct advice *a, const char *topic, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(struct advice *a, const char *topic, const char *fmt, ...) {
    char text[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (a->out) fprintf(a->out, "- %s\n", text);
    json_t *o = json_object();
    json_object_set_new(o, "topic", json_string(topic));
    json_object_set_new(o, "text", json_string(text));
    json_array_append_new(a->items, o);
}

static const char *str_or(const char *s, const char *def) { return s ? s : def; }

static double num(const json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

// TTFT fit of cfg evaluated at len (NAN without a fit).
static double ttft_at(const json_t *cfg, double len) {
    json_t *f = json_object_get(cfg, "ttft_fit");
    if (!json_is_object(f)) return NAN;
    return num(f, "a") * len * len + num(f, "b") * len + num(f, "c");
}

static const char *cfg_name(const json_t *cfg) { return str_or(json_string_value(json_object_get(cfg, "name")), "?"); }

// The KV cache type a configuration ran: the value of its last --kv-cache-dtype flag (a server takes the
// last), else the resolved type the sweep recorded, else NULL (a measured server known by its name only).
static const char *kv_of(const json_t *cfg) {
    const json_t *fl = json_object_get(cfg, "flags");
    const char *kv = NULL;
    for (size_t i = 0; i + 1 < json_array_size(fl); i++)
        if (!strcmp(str_or(json_string_value(json_array_get(fl, i)), ""), "--kv-cache-dtype"))
            kv = json_string_value(json_array_get(fl, i + 1));
    return kv ? kv : json_string_value(json_object_get(cfg, "kv_cache_dtype_resolved"));
}

// Whether a configuration's cache is FP8 (its cache type, not any other flag: --quantization fp8 names the
// weights' type).
static bool fp8_cache(const json_t *cfg) {
    const char *kv = kv_of(cfg);
    if (!kv) return strstr(cfg_name(cfg), "fp8") != NULL;
    return !strncmp(kv, "fp8", 3) || strstr(kv, "e4m3") || strstr(kv, "e5m2");
}

// A configuration's ITL line from its "itl_fit" (false without one).
static bool itl_line(const json_t *cfg, struct fit_line *l) {
    const json_t *f = json_object_get(cfg, "itl_fit");
    if (!json_is_object(f)) return false;
    *l = (struct fit_line){.slope = num(f, "slope_ms_per_token"), .intercept = num(f, "intercept_ms"),
                           .r2 = num(f, "r2"), .slope_se = num(f, "slope_se_ms_per_token"), .n = (int)num(f, "n"),
                           .intercept_se = num(f, "intercept_se_ms")};  // (NAN from sweeps that predate it)
    return isfinite(l->slope) && isfinite(l->intercept);
}

// The file name of a model path ("dir/x.gguf" -> "x.gguf"; "dummy:tiny" stays).
static const char *base_name(const char *p) {
    const char *s = strrchr(p, '/');
    if (s && s[1]) return s + 1;
    return p;
}

static bool same_name(const char *a, const char *b) { return !strcmp(base_name(a), base_name(b)); }

// The value of --model/-m in a configuration's flags, or NULL.
static const char *config_model(const json_t *cfg) {
    json_t *fl = json_object_get(cfg, "flags");
    for (size_t i = 0; i < json_array_size(fl); i++) {
        const char *f = json_string_value(json_array_get(fl, i));
        if (!f) continue;
        if (!strncmp(f, "--model=", 8)) return f + 8;
        if ((!strcmp(f, "--model") || !strcmp(f, "-m")) && i + 1 < json_array_size(fl))
            return json_string_value(json_array_get(fl, i + 1));
    }
    return NULL;
}

// Compares the shape facts a served command depends on (layers for --kv-scales and skip-layers,
// KV heads and head_dim for per-head scales); what names the first mismatch into why.
static bool same_shape(const json_t *a, const json_t *b, char *why, size_t n) {
    static const char *const keys[] = {"n_layers", "n_kv_heads", "head_dim"};
    for (int k = 0; k < 3; k++) {
        json_t *x = json_object_get(a, keys[k]), *y = json_object_get(b, keys[k]);
        if (json_is_integer(x) && json_is_integer(y) && json_integer_value(x) != json_integer_value(y)) {
            snprintf(why, n, "%s %lld vs %lld", keys[k], (long long)json_integer_value(x),
                     (long long)json_integer_value(y));
            return false;
        }
    }
    return true;
}

int advise_check_inputs(const struct advise_inputs *in) {
    const json_t *sweep = in->sweep, *cfgs = json_object_get(sweep, "configs");
    const char *model = json_string_value(json_object_get(sweep, "model"));
    const json_t *sweep_info = json_object_get(sweep, "model_info");
    char why[160];
    for (size_t i = 0; model && i < json_array_size(cfgs); i++) {
        const char *cm = config_model(json_array_get(cfgs, i));
        if (cm && strcmp(cm, model))
            return err_set(OCT_EINVAL, "sweep JSON: configuration '%s' ran --model %s, the sweep's model is %s: advice "
                           "compares configurations of one model (sweep each model on its own)",
                           cfg_name(json_array_get(cfgs, i)), cm, model);
    }
    if (in->model_info && json_is_object(sweep_info) && !same_shape(in->model_info, sweep_info, why, sizeof why))
        return err_set(OCT_EINVAL, "--model %s is not the model the sweep measured (%s: %s)",
                       in->model ? in->model : "?", model ? model : "?", why);
    if (in->model && model && !json_is_object(sweep_info) && !same_name(in->model, model))
        return err_set(OCT_EINVAL, "--model %s is not the model the sweep measured (%s)", in->model, model);
    const json_t *info = in->model_info ? in->model_info : json_is_object(sweep_info) ? sweep_info : NULL;
    if (in->accuracy && model) {
        const char *am = json_string_value(json_object_get(in->accuracy, "model"));
        if (am && !same_name(am, model) && !(in->model && same_name(am, in->model)))
            return err_set(OCT_EINVAL, "--accuracy: measured on %s, the sweep measured %s", am, model);
    }
    if (in->calibration) {
        json_error_t je;
        json_t *sc = json_load_file(in->calibration, 0, &je);
        if (!sc) return err_set(OCT_EINVAL, "--calibration %s: %s (line %d)", in->calibration, je.text, je.line);
        json_t *layers = json_object_get(sc, "layers");
        const char *sm = json_string_value(json_object_get(sc, "model"));
        int rc = OCT_OK;
        if (!json_is_array(layers)) {
            rc = err_set(OCT_EINVAL, "--calibration %s: no \"layers\" array (write it with octet calibrate)",
                         in->calibration);
        } else if (info && json_is_integer(json_object_get(info, "n_layers")) &&
                   (json_int_t)json_array_size(layers) != json_integer_value(json_object_get(info, "n_layers"))) {
            rc = err_set(OCT_EINVAL, "--calibration %s: %zu layers (model %s), the sweep's model %s has %lld: "
                         "serving with it would fail", in->calibration, json_array_size(layers), sm ? sm : "?",
                         model ? model : "?", (long long)json_integer_value(json_object_get(info, "n_layers")));
        } else if (!info && sm && model && !same_name(sm, model) && !(in->model && same_name(sm, in->model))) {
            rc = err_set(OCT_EINVAL, "--calibration %s: calibrated on %s, the sweep measured %s", in->calibration, sm,
                         model);
        }
        json_decref(sc);
        TRY(rc);
    }
    return OCT_OK;
}

// The decode-speed rule: returns 1 if FP8 is recommended (above *stay_below, 0 = always).
static int speed_rule(struct advice *a, json_t *res, const json_t *sweep, const json_t *base, const json_t *fp8,
                      double *stay_below) {
    struct fit_line bl, fl;
    if (!itl_line(base, &bl) || !itl_line(fp8, &fl)) {
        say(a, "speed", "No ITL fit for '%s' against '%s' (too few successful requests): no break-even to advise from.",
            cfg_name(fp8), cfg_name(base));
        return -1;
    }
    // (from the two lines, not the sweep's vs_first: the bf16 configuration need not be the sweep's first)
    const struct fit_break brk = fit_break_even(&bl, &fl);
    char kind_s[32];
    const char *kind = fit_break_str(brk, kind_s, sizeof kind_s);  // "always", "never" or the length
    const double ratio = bl.slope != 0 ? 100 * fl.slope / bl.slope : NAN, d_int = fl.intercept - bl.intercept;
    const double be = brk.kind == FIT_BREAK_AT ? brk.x : NAN;
    double max_ctx = num(sweep, "max_model_len"), longest = 0;
    size_t i;
    json_t *l;
    json_array_foreach(json_object_get(sweep, "input_lens"), i, l) longest = fmax(longest, json_number_value(l));
    json_object_set_new(res, "fp8_config", json_string(cfg_name(fp8)));
    json_object_set_new(res, "slope_ratio_pct", json_real(ratio));
    json_object_set_new(res, "break_even", json_string(kind));
    int rec = 0;
    double r2b = bl.r2, r2f = fl.r2, sb = bl.slope;
    if (!(sb > 0) || r2b < 0.5 || r2f < 0.5) {  // noise, not a trend: no line to cross
        say(a, "speed", "Inconclusive: the ITL fits do not show a trend to compare (R2 %.3f and %.3f, baseline slope "
            "%.3g ms/token), so there is no trustworthy break-even. Repeat with --num-requests-per-len 3, longer "
            "--input-lens and an otherwise idle machine; until then stay in %s for speed.", r2b, r2f, sb,
            a->auto_label);
        json_object_set_new(res, "break_even", json_string("inconclusive"));
        json_object_set_new(res, "break_even_tokens", json_null());
        return 0;
    }
    if (!strcmp(kind, "always")) {
        say(a, "speed", "'%s' decodes at least as fast as '%s' at every length (ITL slope %.1f%% of it, "
            "intercept %+.3f ms): use it at all context lengths.", cfg_name(fp8), cfg_name(base), ratio, d_int);
        *stay_below = 0;
        rec = 1;
    } else if (!strcmp(kind, "never") || (max_ctx > 0 && be > max_ctx)) {
        if (!strcmp(kind, "never"))
            say(a, "speed", "'%s' never becomes faster than '%s' here (ITL slope %.1f%% of it, intercept %+.3f ms): "
                "stay in %s for speed; FP8 still halves KV memory, so use it only when you need the "
                "capacity (twice the context or concurrent requests).", cfg_name(fp8), cfg_name(base), ratio, d_int,
                a->auto_label);
        else
            say(a, "speed", "The ITL lines cross at ~%.0f tokens, beyond this model's max_model_len %.0f: on this "
                "machine '%s' does not pay for speed; stay in %s unless you need the KV capacity.",
                be, max_ctx, cfg_name(fp8), a->auto_label);
    } else {
        say(a, "speed", "Use '%s' for contexts above ~%.0f tokens: its ITL grows at %.1f%% of '%s''s rate per token "
            "of context (ideal 50%%), which repays its fixed cost (intercept %+.3f ms) from the break-even on. "
            "Stay in %s for requests below ~%.0f tokens.",
            cfg_name(fp8), be, ratio, cfg_name(base), d_int, a->auto_label, be);
        if (be > longest && longest > 0)
            say(a, "speed", "The break-even is extrapolated: the longest measured prompt was %.0f tokens; extend "
                "--input-lens past %.0f to confirm it.", longest, be);
        // the break-even is the intercepts' difference over the slopes'; where that difference is inside two
        // standard errors of the two fits, the fixed cost it repays is not shown by the measurements
        const double se_d = sqrt(bl.intercept_se * bl.intercept_se + fl.intercept_se * fl.intercept_se);
        const bool shown = !(d_int < 2 * se_d);  // (true when either error is unknown)
        json_object_set_new(res, "intercept_diff_ms", json_real(d_int));
        json_object_set_new(res, "intercept_diff_se_ms", isfinite(se_d) ? json_real(se_d) : json_null());
        json_object_set_new(res, "break_even_significant", json_boolean(shown));
        if (!shown)
            say(a, "speed", "The fixed cost behind that break-even is within the fits' noise (intercepts %+.3f ± %.3f "
                "ms): the measurements do not show that '%s' has one. Repeat with --num-requests-per-len 3 and more "
                "lengths below ~%.0f tokens to pin the break-even down.", d_int, se_d, cfg_name(fp8), be);
        *stay_below = be;
        rec = 1;
    }
    json_object_set_new(res, "break_even_tokens", rec && *stay_below > 0 ? json_real(*stay_below) : json_null());
    if (r2b < 0.9 || r2f < 0.9)
        say(a, "speed", "The ITL fits are noisy (R2 %.3f and %.3f): repeat the sweep with --num-requests-per-len 3 or "
            "longer input lengths before relying on the break-even.", r2b, r2f);
    return rec;
}

// The range rule (from advise_range_check): returns true when static scale 1.0 saturates or
// underflows K/V and no calibration is given, so per-token-head scales are the recommendation.
static bool range_rule(struct advice *a, json_t *res, const struct advise_inputs *in, const char *model) {
    if (!in->range) return false;
    double sat = num(in->range, "saturated"), under = num(in->range, "underflow"), amax = num(in->range, "max_abs");
    int sl = (int)num(in->range, "saturated_layer"), ul = (int)num(in->range, "underflow_layer");
    json_object_set_new(res, "range_saturated", json_real(sat));
    json_object_set_new(res, "range_underflow", json_real(under));
    bool bad_sat = sat > RANGE_SAT_MAX, bad_under = under > RANGE_UNDER_MAX;
    if (!bad_sat && !bad_under) {
        say(a, "range", "K and V fit e4m3 at scale 1.0 (worst layer: %.2g%% saturated, %.2g%% below the smallest "
            "normal; max |x| %.4g over %lld tokens): static scales work here.", 100 * sat, 100 * under, amax,
            (long long)num(in->range, "tokens"));
        return false;
    }
    char what[200];
    if (bad_sat)
        snprintf(what, sizeof what, "%.2g%% of layer %d's K or V saturate e4m3 at scale 1.0 (max |x| %.4g, e4m3's "
                 "max 448)", 100 * sat, sl, amax);
    else
        snprintf(what, sizeof what, "%.2g%% of layer %d's K or V fall below e4m3's smallest normal at scale 1.0 "
                 "(max |x| %.4g)", 100 * under, ul, amax);
    if (in->calibration) {
        say(a, "range", "%s: your calibrated --kv-scales %s set the range; --kv-cache-dtype fp8_per_token_head "
            "(a scale per token and KV head, no calibration) is the alternative if your traffic is unlike the "
            "calibration text.", what, in->calibration);
        return false;
    }
    say(a, "range", "%s: serve with --kv-cache-dtype fp8_per_token_head, which computes a scale per token and KV head "
        "as each token is written and needs no calibration (on the GPU its prefill runs at about 0.7x the per-tensor "
        "FP8 rate, bench/prefill_attention/RESULTS.md), or calibrate (octet calibrate --model %s --file YOUR_TEXT "
        "--output scales.json) and serve fp8 with --kv-scales scales.json.", what, model);
    return true;
}

// The flags of cfg that set the weights' type (--quantization and its companions), as " FLAG VALUE" pairs for
// the recommended command: the speeds advised on were measured with them.
static void weight_flags(const json_t *cfg, char *buf, size_t cap) {
    static const char *const names[] = {"--quantization", "--quantization-block", "--quantization-skip-layers",
                                        "--fp8-gate-dtype", NULL};
    const json_t *fl = json_object_get(cfg, "flags");
    size_t used = 0;
    buf[0] = 0;
    for (size_t i = 0; i + 1 < json_array_size(fl); i++) {
        const char *f = str_or(json_string_value(json_array_get(fl, i)), "");
        for (int k = 0; names[k]; k++)
            if (!strcmp(f, names[k]) && used < cap) {
                used += (size_t)snprintf(buf + used, cap - used, " %s %s", f,
                                         str_or(json_string_value(json_array_get(fl, i + 1)), ""));
                i++;
                break;
            }
    }
}

int advise_report(const struct advise_inputs *in, FILE *out, json_t **advice) {
    const json_t *sweep = in->sweep, *cfgs = json_object_get(sweep, "configs");
    if (!json_is_array(cfgs) || json_array_size(cfgs) == 0)
        return err_set(OCT_EINVAL, "sweep JSON: no \"configs\" array (is it a sweep.json from octet bench sweep?)");
    const json_t *info = in->model_info ? in->model_info : json_object_get(sweep, "model_info");
    const char *model = str_or(json_string_value(json_object_get(sweep, "model")), "MODEL");
    struct advice a = {out, json_array(), "auto", "the weights' type"};
    const char *wt = info ? json_string_value(json_object_get(info, "weight_dtype")) : NULL;
    if (wt) {
        snprintf(a.auto_label, sizeof a.auto_label, "auto (%s)", wt);
        a.weights = wt;
    }
    json_t *res = json_object();
    TRY(advise_check_inputs(in));
    if (out) fprintf(out, "Advice for %s (FP8 KV cache):\n", model);
    // the baseline: the first configuration with a 16- or 32-bit cache; against it, the first with an FP8 cache,
    // in whichever order the sweep ran them (a sweep of two other kinds compares its second with its first)
    const json_t *base = NULL, *fp8 = NULL;
    for (size_t i = 0; i < json_array_size(cfgs); i++) {
        const json_t *c = json_array_get(cfgs, i);
        if (!fp8_cache(c)) base = base ? base : c;
        else fp8 = fp8 ? fp8 : c;
    }
    if (!base || !fp8) {
        base = json_array_get(cfgs, 0);
        fp8 = json_array_size(cfgs) > 1 ? json_array_get(cfgs, 1) : NULL;
    }
    double stay_below = 0;
    int rec = -1;
    if (!fp8)
        say(&a, "speed", "The sweep has one configuration: run it with --kv-cache-dtype auto,fp8 to measure "
            "a break-even.");
    else
        rec = speed_rule(&a, res, sweep, base, fp8, &stay_below);

    // prefill: head_dim 256 caveat and the measured TTFT change at the longest length
    double longest = 0;
    size_t i;
    json_t *l;
    json_array_foreach(json_object_get(sweep, "input_lens"), i, l) longest = fmax(longest, json_number_value(l));
    double tb = fp8 ? ttft_at(base, longest) : NAN, tf = fp8 ? ttft_at(fp8, longest) : NAN;
    int hd = info ? (int)num(info, "head_dim") : 0;
    if (hd == 256)
        say(&a, "prefill", "head_dim is 256: the GPU prefills an FP8 cache there at about 0.6x the bf16 rate "
            "(bench/prefill_attention/RESULTS.md); for prefill-bound workloads (long prompts, short answers) keep %s "
            "unless TTFT allows it%s.",
            a.auto_label, isfinite(tb) && isfinite(tf) && tb > 0 ? " (see the TTFT change below)" : "");
    if (isfinite(tb) && isfinite(tf) && tb > 0) {
        double pct = 100 * (tf / tb - 1);
        json_object_set_new(res, "ttft_change_pct_at_longest", json_real(pct));
        if (pct > 10)
            say(&a, "prefill", "Prefill is slower with '%s': fitted TTFT at %.0f tokens is %+.0f%% vs '%s'; weigh "
                "that against the decode gain for prompt-heavy traffic.", cfg_name(fp8), longest, pct, cfg_name(base));
    }

    // sliding windows
    bool skip_swa = false;
    if (!info) {
        say(&a, "model", "Model shape unknown (pass --model): head_dim and sliding-window advice skipped.");
    } else {
        int w = (int)num(info, "sliding_window");
        int ns = (int)num(info, "n_sliding_layers"), nl = (int)num(info, "n_layers");
        if (w > 0 && ns > 0) {
            skip_swa = w <= SMALL_WINDOW_TOKENS;
            if (skip_swa)
                say(&a, "sliding_window", "%d of %d layers use a %d-token sliding window: their KV never exceeds "
                    "%d tokens, so FP8 saves little memory or bandwidth there while still costing accuracy. Keep them "
                    "in %s: --kv-cache-dtype-skip-layers sliding_window.", ns, nl, w, w, a.weights);
            else
                say(&a, "sliding_window", "%d of %d layers use a %d-token sliding window: large enough for FP8 to "
                    "pay there too; skipping them (--kv-cache-dtype-skip-layers sliding_window) is optional.",
                    ns, nl, w);
        }
    }
    json_object_set_new(res, "skip_sliding_window", json_boolean(skip_swa));

    // accuracy: recovery = reference ppl / FP8 ppl (or a "recovery" key)
    bool calibrate_first = false;
    if (in->accuracy) {
        double rcv = num(in->accuracy, "recovery"), ppl = num(in->accuracy, "ppl"), ref = num(in->accuracy, "ref_ppl");
        double top1 = num(in->accuracy, "top1_agree"), kld = num(in->accuracy, "kld_mean");
        if (!isfinite(rcv) && ppl > 0 && ref > 0) rcv = ref / ppl;
        if (!isfinite(rcv)) {
            say(&a, "accuracy", "The accuracy JSON has neither \"recovery\" nor \"ppl\" and \"ref_ppl\" (use "
                "octet eval ppl --kv-cache-dtype fp8 --ref-kv-cache-dtype bf16 --json).");
        } else {
            json_object_set_new(res, "recovery", json_real(rcv));
            calibrate_first = rcv < 0.95;
            char extra[160] = "";
            if (isfinite(kld) && isfinite(top1))
                snprintf(extra, sizeof extra, "; KLD %.4g, top-1 agreement %.1f%%", kld, 100 * top1);
            if (calibrate_first && in->calibration)
                say(&a, "accuracy", "FP8 keeps only %.1f%% of the reference quality%s: serve with --kv-scales %s "
                    "and re-check with octet eval ppl --kv-scales %s.", 100 * rcv, extra, in->calibration,
                    in->calibration);
            else if (calibrate_first)
                say(&a, "accuracy", "FP8 keeps only %.1f%% of the reference quality (below 95%%)%s: calibrate first "
                    "(octet calibrate --model %s --file YOUR_TEXT --output scales.json), then serve with "
                    "--kv-scales scales.json.", 100 * rcv, extra, model);
            else
                say(&a, "accuracy", "FP8 keeps %.1f%% of the reference quality%s: no calibration needed.",
                    100 * rcv, extra);
        }
    } else if (in->calibration) {
        say(&a, "accuracy", "Serve with --kv-scales %s (your calibrated scales) and confirm recovery >= 95%% with "
            "octet eval ppl --kv-scales %s.", in->calibration, in->calibration);
    } else {
        say(&a, "accuracy", "No accuracy result given: measure recovery with octet eval ppl --kv-cache-dtype fp8 "
            "(pass it as --accuracy FILE); calibrate first if it is below 95%%.");
    }
    json_object_set_new(res, "calibrate_first", json_boolean(calibrate_first));
    bool dynamic = range_rule(&a, res, in, model);
    if (calibrate_first && !in->calibration && !dynamic) {
        say(&a, "accuracy", "Without calibration text, --kv-cache-dtype fp8_per_token_head needs none: it computes a "
            "scale per token and KV head as each token is written.");
        dynamic = true;
    }
    json_object_set_new(res, "per_token_head", json_boolean(dynamic));

    char cmd[1024], wf[256];
    weight_flags(rec == 1 ? fp8 : base, wf, sizeof wf);
    const char *verdict = !fp8 ? "unmeasured" : rec == 1 ? (stay_below > 0 ? "fp8_above_break_even" : "fp8") : "bf16";
    if (!fp8)
        snprintf(cmd, sizeof cmd, "none: one configuration ('%s') was measured, so there is nothing to choose between",
                 cfg_name(base));
    else if (rec == 1 && dynamic) {
        verdict = stay_below > 0 ? "fp8_per_token_head_above_break_even" : "fp8_per_token_head";
        snprintf(cmd, sizeof cmd, "octet serve --model %s%s --kv-cache-dtype fp8_per_token_head%s", model, wf,
                 skip_swa ? " --kv-cache-dtype-skip-layers sliding_window" : "");
    } else if (rec == 1)
        snprintf(cmd, sizeof cmd, "octet serve --model %s%s --kv-cache-dtype fp8%s%s%s", model, wf,
                 skip_swa ? " --kv-cache-dtype-skip-layers sliding_window" : "",
                 in->calibration ? " --kv-scales " : calibrate_first ? " --kv-scales scales.json" : "",
                 in->calibration ? in->calibration : "");
    else
        snprintf(cmd, sizeof cmd, "octet serve --model %s%s --kv-cache-dtype auto", model, wf);
    if (out) {
        fprintf(out, "Recommendation: %s", cmd);
        if (rec == 1 && stay_below > 0) fprintf(out, "   (for long-context traffic, above ~%.0f tokens)", stay_below);
        fprintf(out, "\n");
    }
    json_object_set_new(res, "verdict", json_string(verdict));
    json_object_set_new(res, "command", fp8 ? json_string(cmd) : json_null());
    json_object_set_new(res, "items", a.items);
    *advice = res;
    return OCT_OK;
}

static void usage(void) {
    fprintf(stderr,
            "usage: octet advise --sweep DIR/sweep.json [-m|--model M] [--accuracy EVAL.json] "
            "[--calibration scales.json]\n"
            "                    [--file TEXT] [-o|--output advice.json]\n"
            "  --sweep FILE        the JSON written by octet bench sweep (required)\n"
            "  --model M           the model (head_dim, sliding windows); default: the sweep's\n"
            "  --accuracy FILE     octet eval ppl JSON comparing FP8 with a reference (recovery)\n"
            "  --calibration FILE  K/V scales from octet calibrate that you can serve with\n"
            "  --file TEXT         text for the K/V range check of a --model (default: a built-in paragraph)\n"
            "  --output FILE       where to write the advice JSON (default: advice.json beside the sweep)\n"
            "Every input must come from the sweep's model (same layers, KV heads and head_dim).\n");
}

static json_t *load_json(const char *flag, const char *path) {
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);
    if (!j) err_set(OCT_EINVAL, "%s %s: %s (line %d)", flag, path, e.text, e.line);
    return j;
}

int cmd_advise(int argc, char **argv) {
    static const char *const flags[] = {"--sweep", "--model", "-m", "--accuracy", "--calibration", "--output", "-o",
                                        "--file", NULL};
    const char *sweep_path = NULL, *model = NULL, *acc_path = NULL, *calib = NULL, *output = NULL, *text = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { usage(); return 0; }
        const char *f = argv[i], *v;
        if (!cli_known(f, flags) || !(v = cli_value(argc, argv, &i))) goto bad;
        if (!strcmp(f, "--sweep")) sweep_path = v;
        else if (!strcmp(f, "--model") || !strcmp(f, "-m")) model = v;
        else if (!strcmp(f, "--accuracy")) acc_path = v;
        else if (!strcmp(f, "--calibration")) calib = v;
        else if (!strcmp(f, "--file")) text = v;
        else output = v;
    }
    if (!sweep_path) { err_set(OCT_EINVAL, "--sweep is required"); goto bad; }
    json_t *sweep = load_json("--sweep", sweep_path), *acc = NULL, *info = NULL, *advice = NULL, *range = NULL;
    int rc = 1;
    if (!sweep || (acc_path && !(acc = load_json("--accuracy", acc_path)))) goto done;
    if (model && advise_model_info(model, true, &info) < 0) { err_wrap(OCT_EINVAL, "--model: "); goto done; }
    // the range check runs a real model's text (dummy weights are random: nothing to learn)
    if (model && strncmp(model, "dummy:", 6) && advise_range_check(model, text, &range) < 0) {
        err_wrap(OCT_EINVAL, "range check: ");
        goto done;
    }
    struct advise_inputs in = {sweep, info, acc, calib, model, range};
    if (advise_report(&in, stdout, &advice) < 0) goto done;
    char def[4096];
    if (!output) {
        const char *slash = strrchr(sweep_path, '/');
        snprintf(def, sizeof def, "%.*sadvice.json", slash ? (int)(slash - sweep_path + 1) : 0, sweep_path);
        output = def;
    }
    if (json_dump_file(advice, output, JSON_INDENT(1)) != 0) {
        err_set(OCT_EIO, "--output: cannot write %s", output);
        goto done;
    }
    fprintf(stderr, "octet: wrote %s\n", output);
    rc = 0;
done:
    if (rc) fprintf(stderr, "octet advise: %s\n", err_msg());
    json_decref(sweep); json_decref(acc); json_decref(info); json_decref(advice); json_decref(range);
    return rc;
bad:
    return cli_usage_error();
}
