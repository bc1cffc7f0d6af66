// config.h — the architecture description every loader produces (owns: struct
// model_config, struct rope_config and their validation; not: weights or tokenizer).
// Invariant: after config_validate() succeeds, dims are positive and consistent
// (n_heads % n_kv_heads == 0, head_dim even and in [2, 512], n_layers <= MODEL_MAX_LAYERS).
#ifndef OCTET_CONFIG_H
#define OCTET_CONFIG_H

#include <stdbool.h>

#include "../backend/backend.h"  // enum ffn_act

#define MODEL_MAX_LAYERS 256

enum rope_scaling {
    ROPE_SCALING_NONE = 0,
    ROPE_SCALING_LINEAR,   // positions divided by factor
    ROPE_SCALING_NTK,      // NTK-aware: base *= alpha^(d/(d-2)) (alpha = factor)
    ROPE_SCALING_DYNAMIC,  // dynamic NTK (transformers: base grows with the sequence past max_pos)
    ROPE_SCALING_YARN,     // YaRN: ramp between interpolation and extrapolation + mscale
    ROPE_SCALING_LLAMA3,   // Llama-3.1 frequency-band scaling
};

struct rope_config {
    enum rope_scaling scaling;
    double theta;             // base, e.g. 10000 or 500000
    double factor;            // scaling factor (linear/ntk/dynamic/yarn/llama3)
    int orig_max_pos;         // original_max_position_embeddings (yarn, llama3, dynamic)
    double low_freq_factor;   // llama3 (default 1)
    double high_freq_factor;  // llama3 (default 4)
    double beta_fast, beta_slow; // yarn (defaults 32, 1)
    double attn_factor;       // yarn: attention factor given by the config; 0 = from factor and mscale
    double mscale, mscale_all_dim; // yarn: 0 = absent (transformers' get_mscale arguments)
    bool truncate;            // yarn: floor/ceil the correction range (transformers' default true)
    int dyn_max_pos;          // dynamic: the length past which the base grows (max_position_embeddings)
    bool dyn_fixed;           // dynamic: vLLM's form, the base evaluated once at dyn_max_pos*factor
    int n_rot;                // rotated dims per head (<= head_dim, even)
    bool neox;                // true: rotate halves (HF layout); false: adjacent pairs (GGUF llama)
    int n_freq_factors;       // >0: GGUF rope_freqs (per-pair divisors of inv_freq, Llama-3 GGUFs)
    float freq_factors[256];  // [n_rot/2]
};

struct model_config {
    char arch[32];            // family: llama, mistral, qwen2, qwen3, gemma2, gemma3, phi3, mixtral, qwen3moe, gptoss
    int n_layers;
    int dim;                  // hidden size
    int n_heads, n_kv_heads, head_dim;
    int ffn_dim;
    int n_vocab;
    int max_pos;              // trained / declared context length
    float norm_eps;
    bool tied_output;         // output head shares token embeddings
    int sliding_window;       // tokens; 0 = no sliding-window layers
    bool layer_sliding[MODEL_MAX_LAYERS]; // layer i uses the window
    struct rope_config rope;
    // What differs between the families, as data (the forward pass reads these; defaults = Llama)
    enum ffn_act act;
    bool attn_bias;           // q, k, v projections have biases (Qwen2, attention_bias)
    bool o_bias;              // the output projection has a bias (attention_bias)
    bool mlp_bias;            // gate, up and down projections have biases (mlp_bias)
    bool qk_norm;             // per-head RMSNorm of q and k before RoPE (Qwen3, Gemma 3)
    bool post_norms;          // RMSNorm of the attention and FFN outputs before the residual add (Gemma 2/3)
    float embed_scale;        // the embeddings are multiplied by this (Gemma: sqrt(dim)); 0 or 1 = none
    float attn_scale;         // softmax scale (1/sqrt(query_pre_attn_scalar) on Gemma); 0 = 1/sqrt(head_dim)
    float attn_softcap;       // scores → cap·tanh(scores/cap) before softmax; 0 = none
    float final_softcap;      // logits → cap·tanh(logits/cap); 0 = none
    bool local_rope;          // sliding-window layers use rope_local (Gemma 3's separate base)
    // Mixture of experts (Mixtral, Qwen3-MoE): every layer's FFN is n_experts SwiGLU experts of
    // ffn_dim, n_experts_used of them per token by the router's softmax; 0 = a dense FFN.
    int n_experts, n_experts_used;
    bool moe_norm_topk;       // the chosen experts' weights renormalised to sum 1 (norm_topk_prob;
                              // Mixtral always: the same as softmax over the top-k logits; gpt-oss)
    bool moe_bias;            // router, gate/up and down biases (gpt-oss)
    enum moe_act moe_act;     // the experts' activation (gpt-oss: the clamped SwiGLU)
    float swiglu_alpha, swiglu_limit; // MOE_ACT_SWIGLU_CLAMP's parameters (gpt-oss: 1.702, 7.0)
    bool attn_sinks;          // one learned softmax-denominator logit per query head (gpt-oss)
    struct rope_config rope_local;
};

// True when the layers need nothing beyond Llama's sublayers (no biases, q/k norms, post-norms, GeGLU).
bool config_is_plain_llama(const struct model_config *c);

// Checks the invariant above; the message names the offending field.
int config_validate(const struct model_config *c);

// KV bytes per token for `elem_bytes[layer]` bytes per element (K and V together).
long config_kv_bytes_per_token(const struct model_config *c, const int *elem_bytes);

#endif
