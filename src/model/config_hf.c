// config_hf.c — a Hugging Face config.json → struct model_config (owns: the family table by
// `architectures` name, both RoPE layouts (transformers 5's rope_parameters and the older
// rope_theta / rope_scaling), the sliding-window switches of each family, and the refusal of
// every key that would change the math in a way octet does not implement, and the FP8 and MXFP4 schemes
// of a quantization_config; not: tensors).
// Numbers are parsed strictly: a key that is present must hold a number (or null), so a float
// written as a string is an error that names the key, never a silent default.
#include <math.h>
#include <stdio.h>
#include <string.h>
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "../base/check.h"
#include "config_hf.h"

// Defaults of a family's config class for keys a checkpoint may leave out (transformers'
// Gemma2Config / Gemma3TextConfig; Gemma 3's multimodal text_config omits most of them).
struct hf_defaults {
    int layers, hidden, heads, kv_heads, ffn, head_dim, max_pos, window;
    double attn_softcap, final_softcap;  // used when the key is absent (null: none)
};

static const struct hf_defaults gemma2_defaults = {26, 2304, 8, 4, 9216, 256, 8192, 4096, 50.0, 30.0};
static const struct hf_defaults gemma3_defaults = {26, 2304, 8, 4, 9216, 256, 131072, 4096, 0, 0};

struct family {
    const char *hf_name, *arch;
    bool qkv_bias;        // q, k, v biases always (Qwen2)
    bool reads_attn_bias; // attention_bias switches q, k, v and o biases
    bool reads_mlp_bias;  // mlp_bias switches gate, up and down biases
    bool qk_norm, gemma;  // per-head q/k norms; Gemma's norms, scales, soft-caps and GeGLU
    bool window_all;      // sliding_window applies to every layer (Mistral, Phi-3)
    bool qwen_window;     // use_sliding_window / max_window_layers (Qwen2, Qwen3)
    bool tie_default;     // tie_word_embeddings when the key is absent
    const struct hf_defaults *def; // or NULL: the shape keys are required
    bool multimodal;      // the text model sits in text_config (vision tensors are skipped by the loader)
};

static const struct family families[] = {
    {"LlamaForCausalLM", "llama", false, true, true, false, false, false, false, false, NULL, false},
    {"MistralForCausalLM", "mistral", false, false, false, false, false, true, false, false, NULL, false},
    {"Qwen2ForCausalLM", "qwen2", true, false, false, false, false, false, true, false, NULL, false},
    {"Qwen3ForCausalLM", "qwen3", false, true, false, true, false, false, true, false, NULL, false},
    {"Gemma2ForCausalLM", "gemma2", false, true, false, false, true, false, false, true, &gemma2_defaults, false},
    {"Gemma3ForCausalLM", "gemma3", false, true, false, true, true, false, false, true, &gemma3_defaults, false},
    {"Gemma3ForConditionalGeneration", "gemma3", false, true, false, true, true, false, false, true,
     &gemma3_defaults, true},
    {"Phi3ForCausalLM", "phi3", false, false, false, false, false, true, false, false, NULL, false},
    {"MixtralForCausalLM", "mixtral", false, false, false, false, false, true, false, false, NULL, false},
    {"Qwen3MoeForCausalLM", "qwen3moe", false, true, false, true, false, false, true, false, NULL, false},
    {"GptOssForCausalLM", "gptoss", false, true, false, false, false, false, false, false, NULL, false},
};

#define FAIL(...) return err_set(OCT_EINVAL, __VA_ARGS__)

// A number under key: absent or null → def; anything but a JSON number is an error.
static int num(const json_t *o, const char *key, double def, double *out, const char *where) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) { *out = def; return OCT_OK; }
    if (!json_is_number(v))
        FAIL("%s: '%s' must be a number, not %s", where, key, json_is_string(v) ? "a string" : "another JSON type");
    *out = json_number_value(v);
    if (!isfinite(*out)) FAIL("%s: '%s' is not finite", where, key);
    return OCT_OK;
}

static int integer(const json_t *o, const char *key, bool required, int def, int *out, const char *where) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        if (required) FAIL("%s: missing key '%s'", where, key);
        *out = def;
        return OCT_OK;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > (1 << 30))
        FAIL("%s: '%s' must be a non-negative integer", where, key);
    *out = (int)json_integer_value(v);
    return OCT_OK;
}

static int boolean(const json_t *o, const char *key, bool def, bool *out, const char *where) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) { *out = def; return OCT_OK; }
    if (!json_is_boolean(v)) FAIL("%s: '%s' must be true or false", where, key);
    *out = json_is_true(v);
    return OCT_OK;
}

// One RoPE parameter set (a rope_parameters object, or the older rope_scaling merged with the
// top-level rope_theta). top_orig: a top-level original_max_position_embeddings (Phi-3), or 0.
static int rope_from(struct rope_config *r, const json_t *p, double theta_def, int max_pos, int top_orig,
                     int head_dim, const char *where) {
    static const char *const known[] = {"rope_type", "type", "rope_theta", "factor", "original_max_position_embeddings",
                                        "low_freq_factor", "high_freq_factor", "beta_fast", "beta_slow", "mscale",
                                        "mscale_all_dim", "attention_factor", "truncate", "partial_rotary_factor",
                                        NULL};
    const char *key;
    json_t *val;
    memset(r, 0, sizeof *r);
    r->n_rot = head_dim;
    r->neox = false;  // HF rows are permuted into adjacent pairs at load
    r->truncate = true;
    r->low_freq_factor = 1;
    r->high_freq_factor = 4;
    r->beta_fast = 32;
    r->beta_slow = 1;
    r->dyn_max_pos = max_pos;
    TRY(num(p, "rope_theta", theta_def, &r->theta, where));
    if (!p) return OCT_OK;
    json_object_foreach((json_t *)p, key, val) {
        bool ok = false;
        for (int i = 0; known[i]; i++) ok = ok || !strcmp(key, known[i]);
        if (!ok) FAIL("%s: RoPE parameter '%s' is not supported", where, key);
    }
    json_t *t = json_object_get(p, "rope_type");
    if (!t || json_is_null(t)) t = json_object_get(p, "type");
    const char *type = t ? json_string_value(t) : "default";
    if (!type) FAIL("%s: 'rope_type' must be a string", where);
    double prf;
    TRY(num(p, "partial_rotary_factor", 1.0, &prf, where));
    if (prf != 1.0) FAIL("%s: partial_rotary_factor %g is not supported (only 1.0)", where, prf);
    if (!strcmp(type, "default")) return OCT_OK;
    if (!strcmp(type, "linear")) r->scaling = ROPE_SCALING_LINEAR;
    else if (!strcmp(type, "dynamic")) r->scaling = ROPE_SCALING_DYNAMIC;
    else if (!strcmp(type, "yarn")) r->scaling = ROPE_SCALING_YARN;
    else if (!strcmp(type, "llama3")) r->scaling = ROPE_SCALING_LLAMA3;
    else return err_set(OCT_EUNSUP, "%s: rope type '%s' is not supported (default, linear, dynamic, yarn, llama3)",
                        where, type);
    double orig;
    TRY(num(p, "original_max_position_embeddings", max_pos, &orig, where));
    if (top_orig > 0 && (r->scaling == ROPE_SCALING_YARN || r->scaling == ROPE_SCALING_LLAMA3)) orig = top_orig;
    if (!(orig >= 1 && orig <= (1 << 30))) FAIL("%s: original_max_position_embeddings %g out of range", where, orig);
    r->orig_max_pos = (int)orig;
    double factor_def = r->scaling == ROPE_SCALING_YARN ? (double)max_pos / r->orig_max_pos : NAN;
    TRY(num(p, "factor", factor_def, &r->factor, where));
    if (isnan(r->factor)) FAIL("%s: rope type '%s' needs 'factor'", where, type);
    if (!(r->factor > 0)) FAIL("%s: rope 'factor' %g must be positive", where, r->factor);
    TRY(num(p, "low_freq_factor", 1.0, &r->low_freq_factor, where));
    TRY(num(p, "high_freq_factor", 4.0, &r->high_freq_factor, where));
    TRY(num(p, "beta_fast", 32.0, &r->beta_fast, where));
    TRY(num(p, "beta_slow", 1.0, &r->beta_slow, where));
    TRY(num(p, "mscale", 0.0, &r->mscale, where));
    TRY(num(p, "mscale_all_dim", 0.0, &r->mscale_all_dim, where));
    TRY(num(p, "attention_factor", 0.0, &r->attn_factor, where));
    TRY(boolean(p, "truncate", true, &r->truncate, where));
    if (r->beta_fast == 0) r->beta_fast = 32;  // transformers: `or 32`
    if (r->beta_slow == 0) r->beta_slow = 1;
    if (r->scaling == ROPE_SCALING_LLAMA3 && !(r->high_freq_factor > r->low_freq_factor))
        FAIL("%s: rope high_freq_factor must exceed low_freq_factor", where);
    if (r->attn_factor < 0) FAIL("%s: rope attention_factor %g must be positive", where, r->attn_factor);
    return OCT_OK;
}

// The RoPE settings in either layout. Gemma 3 keeps a second set for its sliding layers.
static int rope_config_hf(struct model_config *c, const json_t *cfg, const struct family *f, const char *where) {
    json_t *rp = json_object_get(cfg, "rope_parameters"), *rs = json_object_get(cfg, "rope_scaling");
    if (rp && json_is_null(rp)) rp = NULL;
    if (rs && json_is_null(rs)) rs = NULL;
    if (rp && !json_is_object(rp)) FAIL("%s: 'rope_parameters' must be an object", where);
    if (rs && !json_is_object(rs)) FAIL("%s: 'rope_scaling' must be an object", where);
    if (rp && rs) FAIL("%s: both 'rope_parameters' and 'rope_scaling' given", where);
    int top_orig;
    TRY(integer(cfg, "original_max_position_embeddings", false, 0, &top_orig, where));
    double theta_top, prf;
    bool gemma3 = !strcmp(f->arch, "gemma3"), gptoss = !strcmp(f->arch, "gptoss");
    TRY(num(cfg, "rope_theta", gemma3 ? 1e6 : gptoss ? 150000 : 1e4, &theta_top, where));
    TRY(num(cfg, "partial_rotary_factor", 1.0, &prf, where));
    if (prf != 1.0) FAIL("%s: partial_rotary_factor %g is not supported (only 1.0)", where, prf);
    json_t *global = rp ? rp : rs, *local = NULL;
    json_t *full = rp ? json_object_get(rp, "full_attention") : NULL;
    if (full) {  // per layer type (transformers 5, Gemma 3)
        global = full;
        local = json_object_get(rp, "sliding_attention");
        const char *key;
        json_t *val;
        json_object_foreach(rp, key, val) if (strcmp(key, "full_attention") && strcmp(key, "sliding_attention"))
            FAIL("%s: rope_parameters for layer type '%s' not supported", where, key);
    }
    char w[300];
    snprintf(w, sizeof w, "%s rope%s", where, full ? " (full_attention)" : "");
    json_t *dflt = NULL;
    if (!global && gptoss)  // GptOssConfig's default: YaRN x32 over 4096 positions, not truncated
        global = dflt = json_pack("{s:s, s:f, s:f, s:f, s:b, s:i}", "rope_type", "yarn", "factor", 32.0, "beta_fast",
                                  32.0, "beta_slow", 1.0, "truncate", 0, "original_max_position_embeddings", 4096);
    int rc = rope_from(&c->rope, global, theta_top, c->max_pos, top_orig, c->head_dim, w);
    json_decref(dflt);
    TRY(rc);
    if (c->rope.scaling == ROPE_SCALING_DYNAMIC)
        fprintf(stderr, "octet: %s: dynamic NTK RoPE as transformers runs it: plain up to %d tokens, then a base "
                "that grows with each sequence's length (not vLLM's fixed form)\n", where, c->max_pos);
    if (gemma3) {
        double local_theta;
        TRY(num(cfg, "rope_local_base_freq", 1e4, &local_theta, where));
        snprintf(w, sizeof w, "%s rope (sliding_attention)", where);
        TRY(rope_from(&c->rope_local, local, local_theta, c->max_pos, 0, c->head_dim, w));
        c->local_rope = true;
    } else if (local) {
        FAIL("%s: rope_parameters for sliding_attention layers are not read by %s", where, f->hf_name);
    }
    return OCT_OK;
}

static int activation(struct model_config *c, const json_t *cfg, const struct family *f, const char *where) {
    const char *key = "hidden_act";
    json_t *v = json_object_get(cfg, key);
    if (f->gemma && json_object_get(cfg, "hidden_activation")) v = json_object_get(cfg, key = "hidden_activation");
    const char *a = v && !json_is_null(v) ? json_string_value(v) : (f->gemma ? "gelu_pytorch_tanh" : "silu");
    if (!a) FAIL("%s: '%s' must be a string", where, key);
    if (!strcmp(a, "silu") || !strcmp(a, "swish")) c->act = FFN_ACT_SILU;
    else if (!strcmp(a, "gelu_pytorch_tanh") || !strcmp(a, "gelu_new")) c->act = FFN_ACT_GELU_TANH;
    else if (!strcmp(a, "gelu")) c->act = FFN_ACT_GELU;
    else return err_set(OCT_EUNSUP, "%s: %s '%s' is not supported (silu, gelu, gelu_pytorch_tanh)", where, key, a);
    return OCT_OK;
}

// Which layers slide, from layer_types where the config has it, else each family's older switches.
static int windows(struct model_config *c, const json_t *cfg, const struct family *f, const char *where) {
    TRY(integer(cfg, "sliding_window", false, 0, &c->sliding_window, where));
    if (f->def && !json_object_get(cfg, "sliding_window")) c->sliding_window = f->def->window;
    if (!strcmp(f->arch, "gptoss") && !json_object_get(cfg, "sliding_window")) c->sliding_window = 128;  // (default)
    bool use = true;
    if (f->qwen_window) TRY(boolean(cfg, "use_sliding_window", false, &use, where));
    if (!use) c->sliding_window = 0;
    json_t *lt = json_object_get(cfg, "layer_types");
    if (lt && json_is_null(lt)) lt = NULL;
    if (lt && (!json_is_array(lt) || json_array_size(lt) != (size_t)c->n_layers))
        FAIL("%s: 'layer_types' must list %d layer types", where, c->n_layers);
    int mwl = 0, pattern = 6;
    bool gptoss = !strcmp(f->arch, "gptoss");
    if (f->qwen_window) TRY(integer(cfg, "max_window_layers", false, 0, &mwl, where));
    if (!strcmp(f->arch, "gemma3")) {
        TRY(integer(cfg, "sliding_window_pattern", false, 6, &pattern, where));
        if (pattern < 1) FAIL("%s: sliding_window_pattern must be positive", where);
    }
    for (int l = 0; l < c->n_layers; l++) {
        bool slide;
        if (lt) {
            const char *t = json_string_value(json_array_get(lt, (size_t)l));
            if (!t || (strcmp(t, "sliding_attention") && strcmp(t, "full_attention")))
                return err_set(OCT_EUNSUP, "%s: layer type '%s' (layer %d) is not supported", where, t ? t : "?", l);
            slide = !strcmp(t, "sliding_attention");
            if (!f->gemma && !f->qwen_window && !f->window_all && !gptoss) slide = false;  // Llama reads no windows
            if (f->window_all) slide = true;
        } else if (f->qwen_window) {
            slide = l >= mwl;
        } else if (!strcmp(f->arch, "gemma2") || gptoss) {  // (GptOssConfig's default layer_types)
            slide = l % 2 == 0;
        } else if (!strcmp(f->arch, "gemma3")) {
            slide = (l + 1) % pattern != 0;
        } else {
            slide = f->window_all;
        }
        c->layer_sliding[l] = slide && c->sliding_window > 0;
    }
    if (f->gemma && c->sliding_window == 0) {
        for (int l = 0; l < c->n_layers; l++)
            if (lt && !strcmp(json_string_value(json_array_get(lt, (size_t)l)), "sliding_attention"))
                FAIL("%s: sliding_attention layers without a 'sliding_window'", where);
    }
    return OCT_OK;
}

// Keys whose non-default value changes the math in ways octet does not implement.
static int refusals(const json_t *cfg, const char *where) {
    bool b = false;
    TRY(boolean(cfg, "use_bidirectional_attention", false, &b, where));
    if (b) return err_set(OCT_EUNSUP, "%s: use_bidirectional_attention is not supported", where);
    static const char *const unsupported[] = {"attention_chunk_size", "no_rope_layers", "logits_scaling",
                                              "embedding_multiplier", "residual_multiplier", "attention_multiplier",
                                              NULL};
    for (int i = 0; unsupported[i]; i++) {
        json_t *v = json_object_get(cfg, unsupported[i]);
        if (v && !json_is_null(v)) return err_set(OCT_EUNSUP, "%s: '%s' is not supported", where, unsupported[i]);
    }
    int tp;
    TRY(integer(cfg, "pretraining_tp", false, 1, &tp, where));  // a training detail: the math is the same
    return OCT_OK;
}

// gpt-oss (GptOssConfig): num_local_experts experts of intermediate_size in every layer, num_experts_per_tok
// of them per token (the original checkpoint's experts_per_token must agree), routed by top-k of the biased
// router logits then softmax over those k (moe_norm_topk), the clamped SwiGLU (swiglu_limit, swiglu_alpha),
// biases everywhere, and one attention sink per query head. router_aux_loss_coef and output_router_logits
// only act in training; initial_context_length is informational (YaRN reads its own original length).
static int experts_gptoss(struct model_config *c, const json_t *cfg, const char *where) {
    if (!json_object_get(cfg, "num_local_experts") && json_object_get(cfg, "num_experts"))
        FAIL("%s: gpt-oss names its expert count 'num_local_experts' (found 'num_experts')", where);
    TRY(integer(cfg, "num_local_experts", true, 0, &c->n_experts, where));
    TRY(integer(cfg, "num_experts_per_tok", true, 0, &c->n_experts_used, where));
    if (c->n_experts < 1 || c->n_experts > 4096)
        FAIL("%s: 'num_local_experts' %d must be 1..4096", where, c->n_experts);
    if (c->n_experts_used < 1 || c->n_experts_used > c->n_experts)
        FAIL("%s: 'num_experts_per_tok' %d must be 1..%d", where, c->n_experts_used, c->n_experts);
    int ept;
    TRY(integer(cfg, "experts_per_token", false, c->n_experts_used, &ept, where));
    if (ept != c->n_experts_used)
        FAIL("%s: 'experts_per_token' %d disagrees with 'num_experts_per_tok' %d", where, ept, c->n_experts_used);
    double alpha, limit;
    TRY(num(cfg, "swiglu_alpha", 1.702, &alpha, where));
    TRY(num(cfg, "swiglu_limit", 7.0, &limit, where));
    if (!(alpha > 0) || !(limit > 0))
        FAIL("%s: 'swiglu_alpha' %g and 'swiglu_limit' %g must be positive", where, alpha, limit);
    c->swiglu_alpha = (float)alpha;
    c->swiglu_limit = (float)limit;
    c->moe_act = MOE_ACT_SWIGLU_CLAMP;
    c->moe_norm_topk = true;  // softmax over the top-k logits
    c->moe_bias = true;
    c->attn_sinks = true;
    c->act = FFN_ACT_SILU;    // (hidden_act is not read by gpt-oss's experts)
    c->mlp_bias = false;
    return OCT_OK;
}

// The experts of Mixtral (num_local_experts, every layer) and Qwen3-MoE (num_experts, which transformers 5
// saves as num_local_experts; moe_intermediate_size, norm_topk_prob; decoder_sparse_step and mlp_only_layers
// must leave every layer sparse). The load-balancing and router-noise keys only act in training and are accepted.
static int experts(struct model_config *c, const json_t *cfg, const struct family *f, const char *where) {
    bool mixtral = !strcmp(f->arch, "mixtral");
    if (!strcmp(f->arch, "gptoss")) return experts_gptoss(c, cfg, where);
    if (!mixtral && strcmp(f->arch, "qwen3moe")) return OCT_OK;
    bool local = mixtral || !json_object_get(cfg, "num_experts");
    if (!mixtral && local && !json_object_get(cfg, "num_local_experts"))
        FAIL("%s: missing key 'num_experts' (or transformers 5's 'num_local_experts')", where);
    TRY(integer(cfg, local ? "num_local_experts" : "num_experts", true, 0, &c->n_experts, where));
    TRY(integer(cfg, "num_experts_per_tok", true, 0, &c->n_experts_used, where));
    if (c->n_experts < 1 || c->n_experts > 4096)
        FAIL("%s: '%s' %d must be 1..4096", where, local ? "num_local_experts" : "num_experts", c->n_experts);
    if (c->n_experts_used < 1 || c->n_experts_used > c->n_experts)
        FAIL("%s: 'num_experts_per_tok' %d must be 1..%d", where, c->n_experts_used, c->n_experts);
    c->moe_norm_topk = true;
    if (mixtral) return OCT_OK;
    TRY(boolean(cfg, "norm_topk_prob", false, &c->moe_norm_topk, where));
    TRY(integer(cfg, "moe_intermediate_size", true, 0, &c->ffn_dim, where));
    int step;
    TRY(integer(cfg, "decoder_sparse_step", false, 1, &step, where));
    if (step != 1)
        return err_set(OCT_EUNSUP, "%s: decoder_sparse_step %d is not supported (only 1: every layer's FFN is "
                       "experts)", where, step);
    json_t *mlp_only = json_object_get(cfg, "mlp_only_layers");
    if (mlp_only && !json_is_null(mlp_only) && !json_is_array(mlp_only))
        FAIL("%s: 'mlp_only_layers' must be a list of layer indices", where);
    if (json_array_size(mlp_only) > 0)
        return err_set(OCT_EUNSUP, "%s: mlp_only_layers (dense FFN layers among the experts) is not supported", where);
    return OCT_OK;
}

int config_from_hf(struct model_config *c, const json_t *cfg, const char *where) {
    memset(c, 0, sizeof *c);
    json_t *archs = json_object_get(cfg, "architectures");
    const char *a0 = json_string_value(json_array_get(archs, 0));
    if (!a0) FAIL("%s: no 'architectures' (which model class wrote this checkpoint?)", where);
    const struct family *f = NULL;
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++)
        if (!strcmp(families[i].hf_name, a0)) f = &families[i];
    if (!f)
        return err_set(OCT_EUNSUP, "%s: architecture '%s' is not supported (LlamaForCausalLM, MistralForCausalLM, "
                       "Qwen2ForCausalLM, Qwen3ForCausalLM, Gemma2ForCausalLM, Gemma3ForCausalLM, Phi3ForCausalLM, "
                       "MixtralForCausalLM, Qwen3MoeForCausalLM, GptOssForCausalLM)",
                       where, a0);
    snprintf(c->arch, sizeof c->arch, "%s", f->arch);
    bool tie_top = f->tie_default;
    if (f->multimodal) {  // the language model's config; the top level says whether the head is tied
        TRY(boolean(cfg, "tie_word_embeddings", f->tie_default, &tie_top, where));
        cfg = json_object_get(cfg, "text_config");
        if (!json_is_object(cfg)) FAIL("%s: %s needs a 'text_config' object", where, f->hf_name);
    }
    const struct hf_defaults *d = f->def;
    TRY(integer(cfg, "num_hidden_layers", !d, d ? d->layers : 0, &c->n_layers, where));
    TRY(integer(cfg, "hidden_size", !d, d ? d->hidden : 0, &c->dim, where));
    TRY(integer(cfg, "num_attention_heads", !d, d ? d->heads : 0, &c->n_heads, where));
    TRY(integer(cfg, "num_key_value_heads", false, d ? d->kv_heads : c->n_heads, &c->n_kv_heads, where));
    TRY(integer(cfg, "intermediate_size", !d, d ? d->ffn : 0, &c->ffn_dim, where));
    TRY(integer(cfg, "max_position_embeddings", false, d ? d->max_pos : 2048, &c->max_pos, where));
    if (c->n_heads <= 0) FAIL("%s: num_attention_heads must be positive", where);
    TRY(integer(cfg, "head_dim", false, d ? d->head_dim : c->dim / c->n_heads, &c->head_dim, where));
    if (c->n_layers > MODEL_MAX_LAYERS)
        return err_set(OCT_EUNSUP, "%s: %d layers (max %d)", where, c->n_layers, MODEL_MAX_LAYERS);
    double eps;
    TRY(num(cfg, "rms_norm_eps", !strcmp(f->arch, "gptoss") ? 1e-5 : 1e-6, &eps, where));
    c->norm_eps = (float)eps;
    TRY(boolean(cfg, "tie_word_embeddings", tie_top, &c->tied_output, where));
    TRY(activation(c, cfg, f, where));
    bool ab = false, mb = false;
    if (f->reads_attn_bias) TRY(boolean(cfg, "attention_bias", !strcmp(f->arch, "gptoss"), &ab, where));
    if (f->reads_mlp_bias) TRY(boolean(cfg, "mlp_bias", false, &mb, where));
    c->attn_bias = f->qkv_bias || ab;
    c->o_bias = ab;
    c->mlp_bias = mb;
    c->qk_norm = f->qk_norm;
    c->post_norms = f->gemma;
    if (f->gemma) {
        double qpas, acap, fcap;
        TRY(num(cfg, "query_pre_attn_scalar", 256, &qpas, where));
        if (!(qpas > 0)) FAIL("%s: query_pre_attn_scalar %g must be positive", where, qpas);
        c->attn_scale = (float)(1.0 / sqrt(qpas));
        // absent: the class default; null: none
        TRY(num(cfg, "attn_logit_softcapping", json_object_get(cfg, "attn_logit_softcapping") ? 0 : d->attn_softcap,
                &acap, where));
        TRY(num(cfg, "final_logit_softcapping", json_object_get(cfg, "final_logit_softcapping") ? 0 : d->final_softcap,
                &fcap, where));
        if (acap < 0 || fcap < 0) FAIL("%s: soft-capping values must be positive", where);
        c->attn_softcap = (float)acap;
        c->final_softcap = (float)fcap;
        c->embed_scale = (float)sqrt((double)c->dim);  // rounded to the weights' dtype by the loader
    }
    TRY(rope_config_hf(c, cfg, f, where));
    TRY(windows(c, cfg, f, where));
    TRY(experts(c, cfg, f, where));
    TRY(refusals(cfg, where));
    return OCT_OK;
}

// ---- quantization_config (FP8 checkpoints) ----

static int one_of_keys(const json_t *o, const char *const *known, const char *what, const char *where) {
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)o, key, val) {
        bool ok = false;
        for (int i = 0; known[i]; i++) ok = ok || !strcmp(key, known[i]);
        if (!ok && !json_is_null(val))
            return err_set(OCT_EUNSUP, "%s: %s key '%s' is not supported", where, what, key);
    }
    return OCT_OK;
}

static const char *str_or(const json_t *o, const char *key, const char *def) {
    const json_t *v = json_object_get(o, key);
    return v && json_is_string(v) ? json_string_value(v) : def;
}

// quant_method "fp8" (transformers' FineGrainedFP8Config, vLLM's Fp8Config).
static int quant_fp8(struct hf_quant *q, const json_t *qc, const char *where) {
    static const char *const known[] = {"quant_method", "activation_scheme", "weight_block_size", "fmt",
                                        "modules_to_not_convert", "ignored_layers", "dequantize", NULL};
    TRY(one_of_keys(qc, known, "quantization_config", where));
    const char *act = str_or(qc, "activation_scheme", "dynamic"), *fmt = str_or(qc, "fmt", "e4m3");
    if (!strcmp(act, "static")) q->ascale = ASCALE_STATIC_TENSOR;
    else if (strcmp(act, "dynamic"))
        return err_set(OCT_EUNSUP, "%s: quantization_config activation_scheme '%s' is not supported (dynamic, "
                       "static)", where, act);
    if (strcmp(fmt, "e4m3")) return err_set(OCT_EUNSUP, "%s: quantization_config fmt '%s' is not supported (e4m3)",
                                            where, fmt);
    bool deq = false;
    TRY(boolean(qc, "dequantize", false, &deq, where));
    if (deq) return err_set(OCT_EUNSUP, "%s: quantization_config dequantize true is not supported", where);
    const json_t *bs = json_object_get(qc, "weight_block_size");
    q->wscale = WSCALE_TENSOR;
    if (bs && !json_is_null(bs)) {
        if (!json_is_array(bs) || json_array_size(bs) != 2 || json_integer_value(json_array_get(bs, 0)) != 128 ||
            json_integer_value(json_array_get(bs, 1)) != 128)
            return err_set(OCT_EUNSUP, "%s: quantization_config weight_block_size is not supported (only [128, 128])",
                           where);
        q->wscale = WSCALE_BLOCK;
        q->block = 128;
        if (q->ascale == ASCALE_STATIC_TENSOR)
            return err_set(OCT_EUNSUP, "%s: quantization_config weight_block_size with activation_scheme static is "
                           "not supported (block checkpoints use dynamic activations)", where);
    }
    q->ignore[0] = json_object_get(qc, "modules_to_not_convert");
    q->ignore[1] = json_object_get(qc, "ignored_layers");
    return OCT_OK;
}

// A compressed-tensors quantization args object: 8-bit float, symmetric.
static int ct_args(const json_t *a, const char *what, const char *where) {
    static const char *const known[] = {"num_bits", "type", "strategy", "dynamic", "symmetric", "group_size",
                                        "block_structure", "observer", "observer_kwargs", "actorder",
                                        "scale_dtype", "zp_dtype", NULL};
    if (!json_is_object(a)) FAIL("%s: compressed-tensors %s must be an object", where, what);
    TRY(one_of_keys(a, known, what, where));
    const char *type = str_or(a, "type", "?");
    json_int_t bits = json_integer_value(json_object_get(a, "num_bits"));
    const json_t *sym = json_object_get(a, "symmetric");
    if (strcmp(type, "float") || bits != 8 || (sym && json_is_false(sym)))
        return err_set(OCT_EUNSUP, "%s: compressed-tensors %s of type '%s', %lld bits%s is not supported (8-bit "
                       "float, symmetric)", where, what, type, (long long)bits,
                       sym && json_is_false(sym) ? ", asymmetric" : "");
    return OCT_OK;
}

static int quant_ct(struct hf_quant *q, const json_t *qc, const char *where) {
    q->compressed = true;
    const char *fmt = str_or(qc, "format", NULL);
    const json_t *groups = json_object_get(qc, "config_groups");
    if (!json_is_object(groups) || json_object_size(groups) != 1)
        return err_set(OCT_EUNSUP, "%s: compressed-tensors config_groups must hold one group (%zu given)", where,
                       json_is_object(groups) ? json_object_size(groups) : 0);
    const json_t *g = json_object_iter_value(json_object_iter((json_t *)groups));
    const char *gname = json_object_iter_key(json_object_iter((json_t *)groups));
    if (!fmt) fmt = str_or(g, "format", "?");
    if (strcmp(fmt, "float-quantized"))
        return err_set(OCT_EUNSUP, "%s: compressed-tensors format '%s' is not supported (float-quantized)", where,
                       fmt);
    const json_t *targets = json_object_get(g, "targets");
    const char *t0 = json_string_value(json_array_get(targets, 0));
    if (!json_is_array(targets) || json_array_size(targets) != 1 || !t0 || strcmp(t0, "Linear"))
        return err_set(OCT_EUNSUP, "%s: compressed-tensors group '%s' targets are not supported (only [\"Linear\"])",
                       where, gname);
    const json_t *w = json_object_get(g, "weights"), *in = json_object_get(g, "input_activations"),
                 *out = json_object_get(g, "output_activations");
    TRY(ct_args(w, "weights", where));
    const char *ws = str_or(w, "strategy", "?");
    if (!strcmp(ws, "tensor")) q->wscale = WSCALE_TENSOR;
    else if (!strcmp(ws, "channel")) q->wscale = WSCALE_CHANNEL;
    else if (!strcmp(ws, "block")) {
        const json_t *bs = json_object_get(w, "block_structure");
        if (json_integer_value(json_array_get(bs, 0)) != 128 || json_integer_value(json_array_get(bs, 1)) != 128)
            return err_set(OCT_EUNSUP, "%s: compressed-tensors weights block_structure is not supported (only "
                           "[128, 128])", where);
        q->wscale = WSCALE_BLOCK;
        q->block = 128;
    } else {
        return err_set(OCT_EUNSUP, "%s: compressed-tensors weights strategy '%s' is not supported (tensor, channel, "
                       "block)", where, ws);
    }
    if (json_is_true(json_object_get(w, "dynamic")))
        return err_set(OCT_EUNSUP, "%s: compressed-tensors dynamic weight scales are not supported", where);
    if (out && !json_is_null(out))
        return err_set(OCT_EUNSUP, "%s: compressed-tensors output_activations are not supported", where);
    if (!in || json_is_null(in))
        return err_set(OCT_EUNSUP, "%s: compressed-tensors without input_activations (FP8 weight-only) is not "
                       "supported", where);
    TRY(ct_args(in, "input_activations", where));
    const char *as = str_or(in, "strategy", "?");
    bool dyn = json_is_true(json_object_get(in, "dynamic"));
    if (!strcmp(as, "token") && dyn) q->ascale = ASCALE_DYNAMIC_TOKEN;
    else if (!strcmp(as, "tensor") && !dyn) q->ascale = ASCALE_STATIC_TENSOR;
    else
        return err_set(OCT_EUNSUP, "%s: compressed-tensors input_activations strategy '%s' with dynamic %s is not "
                       "supported (token dynamic, tensor static)", where, as, dyn ? "true" : "false");
    static const char *const off[] = {"sparsity_config", "transform_config", NULL};
    for (int i = 0; off[i]; i++) {
        const json_t *v = json_object_get(qc, off[i]);
        if (v && !json_is_null(v) && !(json_is_object(v) && json_object_size(v) == 0))
            return err_set(OCT_EUNSUP, "%s: compressed-tensors %s is not supported", where, off[i]);
    }
    q->ignore[0] = json_object_get(qc, "ignore");
    return OCT_OK;
}

// quant_method "mxfp4" (gpt-oss): the experts' weights are `*_blocks` and `*_scales` (model_st.c reads
// them); modules_to_not_convert lists the modules kept in their dtype. dequantize (transformers unpacks the
// experts to bf16 at load, the same values) changes nothing here.
static int quant_mxfp4(struct hf_quant *q, const json_t *qc, const char *where) {
    static const char *const known[] = {"quant_method", "modules_to_not_convert", "dequantize", NULL};
    TRY(one_of_keys(qc, known, "quantization_config", where));
    bool deq;
    TRY(boolean(qc, "dequantize", false, &deq, where));
    const json_t *l = json_object_get(qc, "modules_to_not_convert");
    if (l && !json_is_null(l) && !json_is_array(l))
        FAIL("%s: quantization_config modules_to_not_convert must be an array of module names", where);
    q->mxfp4 = true;
    return OCT_OK;
}

int config_hf_quant(struct hf_quant *q, const json_t *cfg, const char *where) {
    memset(q, 0, sizeof *q);
    const json_t *qc = json_object_get(cfg, "quantization_config");
    if (!qc || json_is_null(qc)) {
        const json_t *tc = json_object_get(cfg, "text_config");
        qc = tc ? json_object_get(tc, "quantization_config") : NULL;
        if (!qc || json_is_null(qc)) return OCT_OK;
    }
    if (!json_is_object(qc)) FAIL("%s: 'quantization_config' must be an object", where);
    const char *method = str_or(qc, "quant_method", NULL);
    if (!method) FAIL("%s: quantization_config has no quant_method", where);
    if (!strcmp(method, "mxfp4")) return quant_mxfp4(q, qc, where);
    if (!strcmp(method, "fp8")) TRY(quant_fp8(q, qc, where));
    else if (!strcmp(method, "compressed-tensors")) TRY(quant_ct(q, qc, where));
    else
        return err_set(OCT_EUNSUP, "%s: quantization_config quant_method '%s' is not supported (fp8, "
                       "compressed-tensors float-quantized, mxfp4)", where, method);
    for (int k = 0; k < 2; k++) {
        const json_t *l = q->ignore[k];
        if (l && !json_is_null(l) && !json_is_array(l))
            FAIL("%s: quantization_config ignore lists must be arrays of module names", where);
        for (size_t i = 0; json_is_array(l) && i < json_array_size(l); i++)
            if (!json_is_string(json_array_get(l, i)))
                FAIL("%s: quantization_config ignore lists must be arrays of module names", where);
    }
    q->fp8 = true;
    return OCT_OK;
}

int config_hf_quant_ignored(const struct hf_quant *q, const char *module) {
    for (int k = 0; k < 2; k++) {
        const json_t *l = q->ignore[k];
        for (size_t i = 0; json_is_array(l) && i < json_array_size(l); i++) {
            const char *e = json_string_value(json_array_get(l, i));
            if (strncmp(e, "re:", 3)) {
                if (strstr(module, e)) return 1;
                continue;
            }
            int ec;
            PCRE2_SIZE eo;
            pcre2_code *re = pcre2_compile((PCRE2_SPTR)(e + 3), PCRE2_ZERO_TERMINATED, PCRE2_ANCHORED, &ec, &eo,
                                           NULL);
            if (!re) return err_set(OCT_EINVAL, "quantization_config ignore pattern '%s' does not compile", e);
            pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
            int rc = md ? pcre2_match(re, (PCRE2_SPTR)module, PCRE2_ZERO_TERMINATED, 0, 0, md, NULL) : -1;
            pcre2_match_data_free(md);
            pcre2_code_free(re);
            if (rc >= 0) return 1;
        }
    }
    return 0;
}
