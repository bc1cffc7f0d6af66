// config_hf.h — reading a Hugging Face config.json into struct model_config (config_hf.c).
#ifndef OCTET_CONFIG_HF_H
#define OCTET_CONFIG_HF_H

#include <jansson.h>

#include "../backend/weight.h"
#include "config.h"

// An FP8 checkpoint's quantization_config: quant_method fp8 (weight_scale_inv, or weight_scale, per tensor or
// in weight_block_size blocks) or compressed-tensors float-quantized (weight_scale per tensor, channel or
// block). Every linear layer not named by `ignore` holds e4m3 codes and scales.
struct hf_quant {
    bool fp8;                  // an FP8 quantization_config is present (and supported)
    bool mxfp4;                // quant_method mxfp4: the experts may be stored as *_blocks / *_scales
    bool compressed;           // compressed-tensors: scales are "<module>.weight_scale"
    enum wscale wscale;
    int block;                 // WSCALE_BLOCK: 128
    enum ascale ascale;        // static: "<module>.input_scale" per linear layer
    const json_t *ignore[2];   // arrays of module names or "re:" patterns kept unquantized (borrowed), or NULL
};

// Fills c from cfg (all but n_vocab, which the embedding's rows give). Every key that changes
// the math is applied or refused; err_msg() names the key. `where` prefixes messages.
int config_from_hf(struct model_config *c, const json_t *cfg, const char *where);

// Reads cfg's quantization_config into q (q->fp8 false when there is none). Any scheme octet does not
// implement is refused with an error naming the key and value.
int config_hf_quant(struct hf_quant *q, const json_t *cfg, const char *where);
// True when `module` ("model.layers.0.mlp.down_proj", "lm_head") is named by q's ignore lists: an entry
// that is a substring of it, or a "re:" pattern matching from its start. <0 + err_msg() on a bad pattern.
int config_hf_quant_ignored(const struct hf_quant *q, const char *module);

#endif
