// quant_fp8.h — FP8 weights after load (quant_fp8.c; the math is docs/fp8_weights.md): vLLM's
// `--quantization fp8` (F32/F16/BF16 projections, mixture-of-experts experts included, to e4m3 per
// output channel or in 128×128 blocks, chosen layers and the output head kept as they are),
// `--fp8-gate-dtype e5m2` (the SwiGLU gates' activations in e5m2), and the weight bytes by dtype the
// startup report shows.
#ifndef OCTET_QUANT_FP8_H
#define OCTET_QUANT_FP8_H

#include <stdbool.h>
#include <stddef.h>

#include "model.h"

struct quant_fp8_options {
    bool quantize;                      // --quantization fp8
    int block;                          // --quantization-block: 0 = per output channel, N = N×N blocks
    bool skip_layer[MODEL_MAX_LAYERS];  // --quantization-skip-layers: layers kept in their dtype
    bool skip_lm_head;                  // ... lm_head: the output head kept
    bool any_skip;
    bool gate_e5m2;                     // --fp8-gate-dtype e5m2
};

// Adds a --quantization-skip-layers list ("0,31,lm_head" or one word of it). <0 + err_msg() on a bad word.
int quant_fp8_parse_skip(struct quant_fp8_options *o, const char *list);

// Applies o to a loaded model: quantizes (per o) and marks the gate's activation dtype; recomputes
// m->weight_bytes. Weights an FP8 checkpoint stored in e4m3 stay as they are. <0 + err_msg() when an
// option cannot apply (a skipped layer index beyond the model, e5m2 gates without FP8 gate weights, ...).
int quant_fp8_apply(struct model *m, const struct quant_fp8_options *o);

// Quantizes one F32/F16/BF16 weight to e4m3 in place: per output channel (block 0) or block×block
// tiles, scale = amax / 448 (1 for an all-zero group), code = encode(w / scale); dynamic per-token
// activations. Codes and scales are owned by m.
int quant_fp8_weight(struct model *m, struct weight *w, int block);
// The same for a weight whose rows come from row(ctx, r, dst) (f32, w->cols of them; called from several
// threads at once) instead of w->data: w holds its rows and cols, and becomes the e4m3 weight.
int quant_fp8_rows(struct model *m, struct weight *w, int block, void (*row)(void *ctx, int64_t r, float *dst),
                   void *ctx);

// Bytes of the model's weights by dtype (an fp8 weight's scales counted with it; a tied head once);
// returns the total.
size_t model_weight_bytes_by_dtype(const struct model *m, size_t bytes[DT_COUNT]);
// "fp8_e4m3 6.1 MiB, bf16 1.2 MiB" (largest first) into buf.
const char *model_weight_dtypes_label(const struct model *m, char *buf, size_t n);

#endif
