// test_gptoss_gguf.c — gpt-oss from GGUF files laid out as llama.cpp's converter lays them out
// (general.architecture "gpt-oss"; tools/ref/gptoss_to_gguf_fixture.py writes them from the transformers
// fixtures tests/data/hf/gptoss and gptoss_mxfp4): the configuration read as config.json gives it, the
// experts' bytes equal to the safetensors load's (ggml's MXFP4 nibble order repacked; gate and up split
// from llama.cpp's separate and fused layouts), the same numbers as transformers on the CPU backend, and
// the refusals naming what is missing.
#include <jansson.h>
#include <string.h>
#include <sys/stat.h>

#include "../../src/base/dtype.h"
#include "../../src/model/model.h"
#include "../test.h"
#include "hf_fixture.h"

// Bytes of a weight (rows × its row length in its dtype).
static size_t weight_bytes(const struct weight *w) { return (size_t)w->rows * dtype_row_bytes(w->dtype, w->cols); }

// Two loads of one model hold the same weight: dtype, shape and bytes.
static bool same_weight(const struct weight *a, const struct weight *b) {
    return a->dtype == b->dtype && a->rows == b->rows && a->cols == b->cols && a->data && b->data &&
           !memcmp(a->data, b->data, weight_bytes(a));
}

TEST(gguf_config_and_experts_equal_the_safetensors_load) {
    static const char *const names[] = {"gptoss_mxfp4", "gptoss"};  // (split gate/up; fused ffn_gate_up_exps)
    for (int i = 0; i < 2; i++) {
        char dir[128], path[128];
        snprintf(dir, sizeof dir, "tests/data/hf/%s", names[i]);
        snprintf(path, sizeof path, "tests/data/hf_gguf/%s.gguf", names[i]);
        struct model *h, *g;
        int rh = model_load(&h, dir), rg = rh ? -1 : model_load(&g, path);
        CHECK_MSG(rh == 0 && rg == 0, "%s: %s", names[i], err_msg());
        if (rh) continue;
        if (rg) { model_free(h); continue; }
        const struct model_config *a = &h->cfg, *b = &g->cfg;
        CHECK(!strcmp(b->arch, "gptoss") && b->attn_sinks && b->moe_bias && b->moe_norm_topk);
        CHECK(b->n_experts == a->n_experts && b->n_experts_used == a->n_experts_used && b->ffn_dim == a->ffn_dim);
        CHECK(b->moe_act == MOE_ACT_SWIGLU_CLAMP && b->swiglu_alpha == a->swiglu_alpha &&
              b->swiglu_limit == a->swiglu_limit);
        CHECK(b->sliding_window == a->sliding_window && b->attn_bias && b->o_bias);
        for (int l = 0; l < b->n_layers; l++) CHECK(b->layer_sliding[l] == a->layer_sliding[l]);
        CHECK(b->rope.scaling == ROPE_SCALING_YARN && !b->rope.truncate && b->rope.factor == a->rope.factor &&
              b->rope.orig_max_pos == a->rope.orig_max_pos && b->rope.beta_fast == a->rope.beta_fast &&
              b->rope.beta_slow == a->rope.beta_slow && b->rope.theta == a->rope.theta && b->rope.neox);
        CHECK_EQ_INT(g->layers[0].exp_gate.dtype, i == 0 ? DT_MXFP4 : DT_BF16);
        int differ = 0;
        for (int l = 0; l < b->n_layers; l++) {
            const struct layer_weights *x = &h->layers[l], *y = &g->layers[l];
            differ += !same_weight(&x->exp_gate, &y->exp_gate) + !same_weight(&x->exp_up, &y->exp_up) +
                      !same_weight(&x->exp_down, &y->exp_down);
        }
        CHECK_MSG(differ == 0, "%s: %d expert matrices differ from the safetensors load's", names[i], differ);
        model_free(g);
        model_free(h);
    }
}

// The same transformers reference as the safetensors fixtures (hf_fixture.h's bounds).
TEST(gguf_files_match_transformers) {
    static const char *const names[] = {"gptoss_mxfp4", "gptoss"};
    for (int i = 0; i < 2; i++) hf_check_gguf(names[i]);
}

TEST(gguf_refusals_name_the_problem) {
    hf_gguf_refused("gptoss_mxfp4", "gpt-oss.expert_count", "gpt-oss.expert_counx", "'gpt-oss.expert_count'");
    hf_gguf_refused("gptoss_mxfp4", "attn_sinks", "attn_sinkz", "blk.0.attn_sinks.weight");
    hf_gguf_refused("gptoss_mxfp4", "ffn_up_exps.bias", "ffn_up_exps.biaz", "blk.0.ffn_up_exps.bias");
    hf_gguf_refused("gptoss", "ffn_gate_up_exps.bias", "ffn_gate_up_exps.biaz", "blk.0.ffn_gate_up_exps.bias");
    hf_gguf_refused("gptoss_mxfp4", "post_attention_norm", "post_attention_norx", "post_attention_norm.weight");
    // another family's name over a gpt-oss file: its sinks and biases are tensors that family does not read
    hf_gguf_refused("gptoss_mxfp4", "gpt-oss", "qwen3xx", "architecture 'qwen3xx'");
}

int main(void) {
    struct stat st;
    if (stat("tests/data/hf_gguf/gptoss.gguf", &st) != 0) {
        fprintf(stderr, "test_gptoss_gguf: no tests/data/hf_gguf/gptoss.gguf (run from the repo root)\n");
        return 1;
    }
    if (hf_tmpdir_make("octet_gptoss_gguf")) return 1;
    RUN(gguf_config_and_experts_equal_the_safetensors_load);
    RUN(gguf_files_match_transformers);
    RUN(gguf_refusals_name_the_problem);
    hf_tmpdir_remove();
    return test_summary("test_gptoss_gguf");
}
