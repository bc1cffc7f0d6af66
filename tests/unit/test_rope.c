// test_rope.c — every RoPE variant's table against tests/golden/rope.json (published
// formulas evaluated in float64 by tools/ref/ref_rope.py), and rotations in both layouts.
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "../../src/base/check.h"
#include "../../src/model/rope.h"
#include "../test.h"

static json_t *golden;

static double pnum(json_t *params, const char *k, double def) {
    json_t *v = json_object_get(params, k);
    return v ? json_number_value(v) : def;
}

// Builds the rope_config a model would carry for a golden entry.
static void config_for(json_t *e, struct rope_config *rc) {
    json_t *p = json_object_get(e, "params");
    const char *type = json_string_value(json_object_get(e, "rope_type"));
    memset(rc, 0, sizeof *rc);
    rc->theta = pnum(p, "theta", 10000);
    rc->n_rot = (int)json_integer_value(json_object_get(e, "dim"));
    rc->factor = pnum(p, "factor", 1);
    rc->orig_max_pos = (int)pnum(p, "original_max_position_embeddings", pnum(p, "max_position_embeddings", 0));
    rc->low_freq_factor = pnum(p, "low_freq_factor", 1);
    rc->high_freq_factor = pnum(p, "high_freq_factor", 4);
    rc->beta_fast = pnum(p, "beta_fast", 32);
    rc->beta_slow = pnum(p, "beta_slow", 1);
    rc->truncate = true;
    rc->dyn_fixed = true;  // the golden's dynamic entry is vLLM's fixed form (the run-time form: test_arch_hf)
    if (!strcmp(type, "linear")) rc->scaling = ROPE_SCALING_LINEAR;
    else if (!strcmp(type, "dynamic")) rc->scaling = ROPE_SCALING_DYNAMIC;
    else if (!strcmp(type, "ntk_alpha")) { rc->scaling = ROPE_SCALING_NTK; rc->factor = pnum(p, "alpha", 1); }
    else if (!strcmp(type, "yarn")) rc->scaling = ROPE_SCALING_YARN;
    else if (!strcmp(type, "llama3")) rc->scaling = ROPE_SCALING_LLAMA3;
}

TEST(tables_match_formulas) {
    json_t *cfgs = json_object_get(golden, "configs");
    int n_checked = 0;
    for (size_t i = 0; i < json_array_size(cfgs); i++) {
        json_t *e = json_array_get(cfgs, i);
        const char *name = json_string_value(json_object_get(e, "name"));
        // HF's dynamic formula at a run-time seq_len: octet evaluates it statically (vLLM's choice)
        if (strstr(name, "dynamic_hf")) continue;
        struct rope_config rc;
        config_for(e, &rc);
        struct rope_table t;
        rope_table_init(&t, &rc);
        json_t *inv = json_object_get(e, "inv_freq");
        CHECK_EQ_INT(json_array_size(inv), rc.n_rot / 2);
        double worst = 0;
        for (int k = 0; k < rc.n_rot / 2; k++) {
            double want = json_number_value(json_array_get(inv, (size_t)k));
            double rel = fabs(t.inv_freq[k] - want) / want;
            if (rel > worst) worst = rel;
        }
        CHECK_MSG(worst < 1e-9, "%s: worst relative error %g", name, worst);
        CHECK_NEAR(t.attn_factor, json_number_value(json_object_get(e, "attention_factor")), 1e-6);
        n_checked++;
    }
    CHECK_EQ_INT(n_checked, 7);
}

TEST(rotations_both_layouts) {
    json_t *rots = json_object_get(golden, "rotations");
    CHECK(json_array_size(rots) >= 4);
    for (size_t i = 0; i < json_array_size(rots); i++) {
        json_t *r = json_array_get(rots, i);
        int d = (int)json_integer_value(json_object_get(r, "dim")), pos = (int)json_integer_value(json_object_get(r, "pos"));
        struct rope_config rc = {.theta = 10000, .n_rot = d};
        for (int layout = 0; layout < 2; layout++) {
            rc.neox = layout == 1;
            struct rope_table t;
            rope_table_init(&t, &rc);
            float x[64];
            for (int k = 0; k < d; k++) x[k] = (float)json_number_value(json_array_get(json_object_get(r, "x"), (size_t)k));
            rope_apply_ref(&t, x, pos);
            json_t *want = json_object_get(r, layout ? "neox" : "normal");
            for (int k = 0; k < d; k++) CHECK_NEAR(x[k], json_number_value(json_array_get(want, (size_t)k)), 2e-5);
        }
    }
}

TEST(llama3_bands) {
    // high frequencies unchanged, low ones divided by the factor, monotone in between
    struct rope_config plain = {.theta = 500000, .n_rot = 128};
    struct rope_config l3 = plain;
    l3.scaling = ROPE_SCALING_LLAMA3; l3.factor = 8; l3.orig_max_pos = 8192; l3.low_freq_factor = 1; l3.high_freq_factor = 4;
    struct rope_table a, b;
    rope_table_init(&a, &plain);
    rope_table_init(&b, &l3);
    CHECK(b.inv_freq[0] == a.inv_freq[0]);
    CHECK_NEAR(b.inv_freq[63] * 8, a.inv_freq[63], 1e-15);
    for (int i = 1; i < 64; i++) CHECK(b.inv_freq[i] < b.inv_freq[i - 1]);
}

int main(void) {
    json_error_t je;
    golden = json_load_file("tests/golden/rope.json", 0, &je);
    if (!golden) { fprintf(stderr, "tests/golden/rope.json: %s\n", je.text); return 1; }
    RUN(tables_match_formulas);
    RUN(rotations_both_layouts);
    RUN(llama3_bands);
    json_decref(golden);
    return test_summary("rope");
}
