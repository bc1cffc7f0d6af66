// model.h — a loaded model: config, weights (views into mapped files or owned buffers),
// tokenizer, optional checkpoint KV scales (owns all of these; not: backend copies of the
// weights, which struct weight.dev points to and the backend frees).
// Sources: a GGUF file, a Hugging Face safetensors directory, or "dummy:NAME" (seeded
// random weights of a named architecture). All three produce the same layout: weights
// row-major [rows = out features][cols = in features], Q/K rows in GGUF's adjacent-pair
// RoPE order (safetensors Q/K are permuted on load), so the forward pass has one shape.
#ifndef OCTET_MODEL_H
#define OCTET_MODEL_H

#include <stdint.h>

#include "../backend/weight.h"  // struct weight
#include "../base/dtype.h"
#include "config.h"
#include "weights_mem.h"

struct layer_weights {
    struct weight attn_norm;      // [1][dim]
    struct weight wq, wk, wv, wo; // [n_heads*hd][dim], [n_kv*hd][dim] x2, [dim][n_heads*hd]
    struct weight ffn_norm;       // [1][dim]
    struct weight w_gate, w_up;   // [ffn][dim]
    struct weight w_down;         // [dim][ffn]
    // Present only where the family has them (data == NULL otherwise; struct model_config says which):
    struct weight bq, bk, bv, bo; // [1][n_heads*hd], [1][n_kv*hd] x2, [1][dim] projection biases
    struct weight q_norm, k_norm; // [1][hd] per-head RMSNorm weights (rows in the adjacent-pair order)
    struct weight post_attn_norm; // [1][dim] norm of the attention output (Gemma 2/3)
    struct weight post_ffn_norm;  // [1][dim] norm of the FFN output (Gemma 2/3)
    struct weight b_gate, b_up;   // [1][ffn]
    struct weight b_down;         // [1][dim]
    // Mixture-of-experts layers (cfg.n_experts > 0) have these instead of w_gate, w_up, w_down:
    struct weight ffn_router;     // [n_experts][dim]
    struct weight exp_gate, exp_up; // [n_experts*ffn][dim] the experts stacked (expert e: rows e*ffn..)
    struct weight exp_down;       // [n_experts*dim][ffn]
    // gpt-oss (cfg.moe_bias, cfg.attn_sinks): the router's and the experts' biases, the attention sinks
    struct weight ffn_router_b;   // [1][n_experts]
    struct weight exp_b_gate, exp_b_up; // [1][n_experts*ffn]
    struct weight exp_b_down;     // [1][n_experts*dim]
    struct weight attn_sinks;     // [1][n_heads]
};

// Every weight of a layer, for loops that treat them alike (upload, size, shape checks).
#define LAYER_N_WEIGHTS 29
void layer_weight_list(struct layer_weights *w, struct weight *out[LAYER_N_WEIGHTS]);
// The GGUF-style name of layer_weight_list's entry i ("attn_q", "ffn_down", ...).
const char *layer_weight_name(int i);

struct model {
    struct model_config cfg;
    char name[256];               // path or dummy:NAME
    enum dtype weight_dtype;      // dtype of the big matrices ("auto" KV dtype follows it)
    struct weight token_embd;     // [n_vocab][dim]
    struct weight output_norm;    // [1][dim]
    struct weight output;         // [n_vocab][dim] (aliases token_embd when tied)
    struct layer_weights layers[MODEL_MAX_LAYERS];
    struct tokenizer *tok;
    float *ckpt_k_scale, *ckpt_v_scale; // [n_layers][n_kv_heads] from the checkpoint, or NULL
    size_t weight_bytes;          // total bytes of all weights (tied counted once)
    // The weights' backend copies (struct weight.dev) belong to one backend type at a time: the
    // forwards using them (engines sharing the model) and that backend's ops (forward.c).
    int dev_users;
    const void *dev_ops;
    // ownership of backing storage
    enum weights_load weights_load; // how the loaders hold the files' bytes (mapped, or read into memory)
    struct gguf *gguf;
    struct st_dir *st;
    void **owned;                 // malloc'd buffers (dummy weights, permuted copies)
    int n_owned, cap_owned;
};

// Loads from a GGUF file, a safetensors directory, or "dummy:NAME". On failure returns
// <0, *out = NULL, err_msg() names the file/key/tensor.
int model_load(struct model **out, const char *path);

// A dummy model's projections drawn straight to e4m3 (--quantization fp8 on "dummy:NAME"): each is drawn in
// bf16 as always and quantized at once (quant_fp8_weight), its bf16 copy freed, so a model whose bf16
// weights would not fit host memory (dummy:llama-3.3-70b, 141 GB) loads in its fp8 size. The same codes
// as drawing bf16 and quantizing after the load. Other loaders ignore it (quant_fp8_apply runs after).
struct model_fp8_draw {
    int block;                  // 0: per output channel; 128: 128×128 blocks
    const bool *skip_layer;     // [MODEL_MAX_LAYERS] layers kept in bf16, or NULL
    bool skip_lm_head;          // the output head kept in bf16
};
// model_load with draw (NULL: model_load).
int model_load_ex(struct model **out, const char *path, const struct model_fp8_draw *draw);
struct model_load_options {
    const struct model_fp8_draw *draw;  // NULL: none (model_load_ex)
    enum weights_load weights;          // GGUF / safetensors files mapped (MMAP, AUTO) or read into memory (READ)
};
// model_load with the options (NULL: model_load).
int model_load_opts(struct model **out, const char *path, const struct model_load_options *o);
// How the model's files are held in memory, summed over them (n_files 0 for dummy models).
void model_weights_load_info(const struct model *m, struct weights_load_info *info);
void model_free(struct model *m);

// Internal helpers shared by the loaders (model.c).
void *model_own(struct model *m, size_t bytes);  // zeroed buffer freed with the model
// Replaces a norm weight w by an owned f32 copy of 1 + w (Gemma's norms scale by 1 + w).
int model_norm_plus_one(struct model *m, struct weight *w);
int model_finish(struct model *m);                // validates shapes, sums weight_bytes

// Loaders (model_gguf.c, model_st.c, dummy.c).
int model_load_gguf(struct model *m, const char *path);
int model_load_safetensors(struct model *m, const char *dir);
int model_load_dummy(struct model *m, const char *name, const struct model_fp8_draw *draw);
// The architecture of a dummy preset, without making weights.
int dummy_config(const char *name, struct model_config *c);
// Names of the dummy presets, NULL-terminated.
extern const char *const dummy_preset_names[];

#endif
