// config.c — validation and derived sizes of struct model_config.
#include "config.h"

#include "../base/check.h"

int config_validate(const struct model_config *c) {
#define NEED(cond, ...) do { if (!(cond)) return err_set(OCT_EINVAL, __VA_ARGS__); } while (0)
    NEED(c->n_layers > 0 && c->n_layers <= MODEL_MAX_LAYERS,
         "config: n_layers %d outside 1..%d", c->n_layers, MODEL_MAX_LAYERS);
    NEED(c->dim > 0, "config: hidden size %d must be positive", c->dim);
    NEED(c->n_heads > 0 && c->n_kv_heads > 0, "config: head counts %d/%d must be positive", c->n_heads, c->n_kv_heads);
    NEED(c->n_heads % c->n_kv_heads == 0,
         "config: n_heads %d not a multiple of n_kv_heads %d", c->n_heads, c->n_kv_heads);
    NEED(c->head_dim >= 2 && c->head_dim <= 512 && c->head_dim % 2 == 0,
         "config: head_dim %d must be even, 2..512", c->head_dim);
    NEED(c->ffn_dim > 0, "config: intermediate size %d must be positive", c->ffn_dim);
    NEED(c->n_vocab > 0, "config: vocab size %d must be positive", c->n_vocab);
    NEED(c->max_pos > 0, "config: context length %d must be positive", c->max_pos);
    NEED(c->norm_eps > 0 && c->norm_eps < 1, "config: rms norm eps %g out of range", c->norm_eps);
    NEED(c->rope.theta > 1, "config: rope theta %g must be > 1", c->rope.theta);
    NEED(c->rope.n_rot >= 2 && c->rope.n_rot <= c->head_dim && c->rope.n_rot % 2 == 0,
         "config: rope dims %d must be even and <= head_dim %d", c->rope.n_rot, c->head_dim);
    NEED(c->rope.scaling == ROPE_SCALING_NONE || c->rope.factor > 0,
         "config: rope scaling factor %g must be positive", c->rope.factor);
    NEED(c->embed_scale >= 0, "config: embedding scale %g must be >= 0", c->embed_scale);
    NEED(c->attn_scale >= 0 && c->attn_softcap >= 0 && c->final_softcap >= 0,
         "config: attention scale and soft-caps must be >= 0");
    NEED(!c->local_rope || (c->rope_local.theta > 1 && c->rope_local.n_rot == c->rope.n_rot),
         "config: local rope theta %g must be > 1", c->rope_local.theta);
    NEED(c->sliding_window >= 0, "config: sliding_window %d must be >= 0", c->sliding_window);
    NEED(c->n_experts >= 0 && c->n_experts <= 4096, "config: %d experts (0..4096)", c->n_experts);
    NEED(!c->n_experts || (c->n_experts_used >= 1 && c->n_experts_used <= c->n_experts),
         "config: %d experts used per token of %d", c->n_experts_used, c->n_experts);
    NEED(c->moe_act != MOE_ACT_SWIGLU_CLAMP || (c->swiglu_alpha > 0 && c->swiglu_limit > 0),
         "config: swiglu_alpha %g and swiglu_limit %g must be positive", c->swiglu_alpha, c->swiglu_limit);
#undef NEED
    return OCT_OK;
}

long config_kv_bytes_per_token(const struct model_config *c, const int *elem_bytes) {
    long total = 0;
    for (int l = 0; l < c->n_layers; l++) total += 2L * c->n_kv_heads * c->head_dim * elem_bytes[l];
    return total;
}

bool config_is_plain_llama(const struct model_config *c) {
    return c->act == FFN_ACT_SILU && !c->attn_bias && !c->o_bias && !c->mlp_bias && !c->qk_norm && !c->post_norms;
}
