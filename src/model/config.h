// config.h — the architecture description every loader produces (owns: struct
// model_config, struct rope_config and their validation; not: weights or tokenizer).
// Invariant: after config_validate() succeeds, dims are positive and consistent
// (n_heads % n_kv_heads == 0, head_dim even and in [2, 512], n_layers <= MODEL_MAX_LAYERS).
#ifndef OCTET_CONFIG_H
#define OCTET_CONFIG_H

#include <stdbool.h>

#define MODEL_MAX_LAYERS 256

enum rope_scaling {
    ROPE_SCALING_NONE = 0,
    ROPE_SCALING_LINEAR,   // positions divided by factor
    ROPE_SCALING_NTK,      // NTK-aware: base *= alpha^(d/(d-2)) (alpha = factor)
    ROPE_SCALING_DYNAMIC,  // dynamic NTK, evaluated statically at max_pos*factor (as vLLM)
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
    double attn_factor;       // yarn: attention (mscale) override; 0 = 0.1*ln(factor)+1
    int n_rot;                // rotated dims per head (<= head_dim, even)
    bool neox;                // true: rotate halves (HF layout); false: adjacent pairs (GGUF llama)
    int n_freq_factors;       // >0: GGUF rope_freqs (per-pair divisors of inv_freq, Llama-3 GGUFs)
    float freq_factors[256];  // [n_rot/2]
};

struct model_config {
    char arch[32];            // "llama" (others map onto it when compatible)
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
};

// Checks the invariant above; the message names the offending field.
int config_validate(const struct model_config *c);

// KV bytes per token for `elem_bytes[layer]` bytes per element (K and V together).
long config_kv_bytes_per_token(const struct model_config *c, const int *elem_bytes);

#endif
