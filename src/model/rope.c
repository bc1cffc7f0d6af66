// rope.c — inverse-frequency tables for plain, linear, NTK, dynamic-NTK, YaRN and
// Llama-3 RoPE (formulas as in HF transformers' rope utilities). Dynamic NTK runs as
// transformers runs it by default (plain up to max_pos, then a base that grows with the
// sequence: the table carries the parameters, the backend's rope op applies them), or in
// vLLM's fixed form (rope_config.dyn_fixed: evaluated once at max_pos*factor).
#include "rope.h"

#include <math.h>

static double yarn_find_dim(double n_rot_turns, int d, double base, int max_pos) {
    return (d * log(max_pos / (n_rot_turns * 2.0 * M_PI))) / (2.0 * log(base));
}

// transformers' get_mscale(scale, mscale).
static double yarn_mscale(double scale, double mscale) { return scale <= 1 ? 1.0 : 0.1 * mscale * log(scale) + 1.0; }

double rope_yarn_attn_factor(const struct rope_config *rc) {
    if (rc->attn_factor > 0) return rc->attn_factor;
    if (rc->mscale != 0 && rc->mscale_all_dim != 0)
        return yarn_mscale(rc->factor, rc->mscale) / yarn_mscale(rc->factor, rc->mscale_all_dim);
    return yarn_mscale(rc->factor, 1.0);
}

void rope_table_init(struct rope_table *t, const struct rope_config *rc) {
    int d = rc->n_rot, half = d / 2;
    double base = rc->theta, f = rc->factor;
    t->n_rot = d;
    t->neox = rc->neox;
    t->attn_factor = 1.0f;
    t->dyn_max_pos = 0;
    t->dyn_theta = t->dyn_factor = 0;
    if (rc->scaling == ROPE_SCALING_NTK)
        base = base * pow(f, (double)d / (d - 2));
    else if (rc->scaling == ROPE_SCALING_DYNAMIC && rc->dyn_fixed)  // HF's formula at seq_len = max_pos*f
        base = base * pow(f * f - f + 1.0, (double)d / (d - 2));
    else if (rc->scaling == ROPE_SCALING_DYNAMIC) {
        t->dyn_max_pos = rc->dyn_max_pos;
        t->dyn_theta = base;
        t->dyn_factor = f;
    }
    for (int i = 0; i < half; i++) t->inv_freq[i] = 1.0 / pow(base, (2.0 * i) / d);

    switch (rc->scaling) {
    case ROPE_SCALING_LINEAR:
        for (int i = 0; i < half; i++) t->inv_freq[i] /= f;
        break;
    case ROPE_SCALING_YARN: {
        double lo = yarn_find_dim(rc->beta_fast, d, base, rc->orig_max_pos);
        double hi = yarn_find_dim(rc->beta_slow, d, base, rc->orig_max_pos);
        if (rc->truncate) { lo = floor(lo); hi = ceil(hi); }
        if (lo < 0) lo = 0;
        if (hi > d - 1) hi = d - 1;
        if (lo == hi) hi += 0.001;
        for (int i = 0; i < half; i++) {
            double ramp = (i - lo) / (hi - lo);
            ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
            double extrap_w = 1.0 - ramp;  // 1 → keep original frequency
            double inter = t->inv_freq[i] / f, extra = t->inv_freq[i];
            t->inv_freq[i] = inter * (1.0 - extrap_w) + extra * extrap_w;
        }
        t->attn_factor = (float)rope_yarn_attn_factor(rc);
        break;
    }
    case ROPE_SCALING_LLAMA3: {
        double lo_wl = rc->orig_max_pos / rc->low_freq_factor;
        double hi_wl = rc->orig_max_pos / rc->high_freq_factor;
        for (int i = 0; i < half; i++) {
            double fr = t->inv_freq[i], wl = 2.0 * M_PI / fr;
            if (wl < hi_wl) continue;               // high frequency: unchanged
            if (wl > lo_wl) { t->inv_freq[i] = fr / f; continue; }
            double smooth = (rc->orig_max_pos / wl - rc->low_freq_factor) /
                            (rc->high_freq_factor - rc->low_freq_factor);
            t->inv_freq[i] = (1.0 - smooth) * fr / f + smooth * fr;
        }
        break;
    }
    default:
        break;
    }
    for (int i = 0; i < rc->n_freq_factors && i < half; i++) t->inv_freq[i] /= rc->freq_factors[i];
}

void rope_apply_ref(const struct rope_table *t, float *x, int pos) {
    int half = t->n_rot / 2;
    for (int i = 0; i < half; i++) {
        double ang = pos * t->inv_freq[i];
        float c = (float)cos(ang) * t->attn_factor, s = (float)sin(ang) * t->attn_factor;
        int a = t->neox ? i : 2 * i, b = t->neox ? i + half : 2 * i + 1;
        float x0 = x[a], x1 = x[b];
        x[a] = x0 * c - x1 * s;
        x[b] = x0 * s + x1 * c;
    }
}
