// advise.h — the plain-language FP8 KV recommendation (owns: turning a sweep's fits, the
// model's shape and optional accuracy/calibration results into advice text + JSON; not:
// measuring anything). Used by `octet advise` and as the last section of `bench sweep`.
// Invariant: every statement names the number it rests on (break-even, slope ratio, R²,
// window size, recovery), so a reader can check it against the sweep's table.
#ifndef OCTET_ADVISE_H
#define OCTET_ADVISE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

// The model facts advice needs: {"head_dim", "n_layers", "n_kv_heads", "max_pos",
// "sliding_window", "n_sliding_layers"}. dummy:NAME and GGUF files are cheap; other paths
// are loaded in full only when allow_full_load. Returns <0 with a message if unreadable.
int advise_model_info(const char *path, bool allow_full_load, json_t **info);

struct advise_inputs {
    const json_t *sweep;        // sweep.json (required)
    const json_t *model_info;   // or NULL: taken from sweep["model_info"] when present
    const json_t *accuracy;     // an `eval ppl` JSON comparing FP8 against a reference, or NULL
    const char *calibration;    // a scales.json path the user has, or NULL
    const char *model;          // the --model given with model_info, or NULL (for messages)
    const json_t *range;        // advise_range_check's result, or NULL (not measured)
};

// The quick K/V range check (advise_range.c): up to 256 tokens of text_path (NULL: a built-in
// paragraph) through model_path with an unquantized cache; *out = {"tokens", "max_abs",
// "saturated", "saturated_layer", "underflow", "underflow_layer"}: the worst layer's fractions of
// K or V values that an e4m3 cache at scale 1.0 saturates or stores below its smallest normal.
int advise_range_check(const char *model_path, const char *text_path, json_t **out);

// Refuses inputs that are not all from the sweep's model (see advise.c); advise_report calls it.
int advise_check_inputs(const struct advise_inputs *in);

// Prints the advice to out (if not NULL) and returns it as JSON (*advice, caller decrefs).
int advise_report(const struct advise_inputs *in, FILE *out, json_t **advice);

#endif
