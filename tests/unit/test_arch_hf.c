// test_arch_hf.c — every dense family against transformers 5 itself: the tiny random-weight
// checkpoints of tests/data/hf/ (tools/ref/make_hf_fixtures.py) with transformers' greedy tokens,
// teacher-forced log-probabilities and perplexity (ref.json). On the CPU backend (hf_fixture.h): greedy
// tokens identical, log-probabilities, perplexity ratio and last logits within 1e-4 — also with the config
// rewritten in the older layout (rope_theta / rope_scaling), and as GGUF files. Then the refusals: each config key
// or tensor octet cannot honour is an error that names it.
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/base/argmax.h"
#include "../../src/base/check.h"
#include "../../src/engine/engine.h"
#include "../../src/engine/runner.h"
#include "../../src/engine/sampler.h"
#include "../../src/model/forward.h"
#include "../../src/model/model.h"
#include "../../src/server/chat_template.h"
#include "../test.h"
#include "hf_fixture.h"

static const char *const fixtures[] = {"llama3_rope", "llama_yarn_bias", "llama_linear", "llama_dynamic", "qwen2",
                                       "qwen3",       "mistral",         "gemma2",       "gemma3",        "phi3"};
#define N_FIXTURES (sizeof fixtures / sizeof fixtures[0])

TEST(every_family_matches_transformers) {
    for (size_t i = 0; i < N_FIXTURES; i++) {
        json_t *ref = hf_load_ref(fixtures[i]);
        CHECK(ref != NULL);
        if (!ref) continue;
        char dir[256];
        snprintf(dir, sizeof dir, "tests/data/hf/%s", fixtures[i]);
        hf_check_against_ref(dir, ref, fixtures[i]);
        json_decref(ref);
    }
}

// The same checkpoints as GGUF files laid out as llama.cpp's converter lays them out
// (tools/ref/hf_to_gguf_fixture.py): general.architecture llama, mistral, qwen2, qwen3, gemma3, phi3.
TEST(gguf_files_match_transformers) {
    static const char *const names[] = {"llama3_rope", "mistral", "qwen2", "qwen3", "gemma3", "phi3"};
    for (int i = 0; i < 6; i++) hf_check_gguf(names[i]);
}

TEST(gguf_refusals_name_the_problem) {
    hf_gguf_refused("qwen2", "qwen2", "qwenx", "architecture 'qwenx'");
    hf_gguf_refused("gemma3", "gemma3", "gemma2", "attn_q_norm.weight");  // q/k norms: not a gemma2 tensor
    hf_gguf_refused("phi3", "attn_qkv", "attn_qkx", "attn_qkv.weight");   // renamed away: missing, then unused
}

// transformers 5's rope_parameters → the older rope_theta + rope_scaling (+ rope_local_base_freq).
static void to_old_layout(json_t *cfg) {
    json_t *rp = json_incref(json_object_get(cfg, "rope_parameters"));
    json_object_del(cfg, "rope_parameters");
    json_t *full = json_object_get(rp, "full_attention");
    if (full) {
        json_object_set(cfg, "rope_local_base_freq",
                        json_object_get(json_object_get(rp, "sliding_attention"), "rope_theta"));
        json_t *tmp = json_incref(full);
        json_decref(rp);
        rp = tmp;
    }
    json_object_set(cfg, "rope_theta", json_object_get(rp, "rope_theta"));
    json_object_del(rp, "rope_theta");
    const char *type = json_string_value(json_object_get(rp, "rope_type"));
    if (type && strcmp(type, "default")) {
        json_object_set_new(rp, "type", json_string(type));  // the oldest spelling of the key
        json_object_del(rp, "rope_type");
        json_object_set(cfg, "rope_scaling", rp);
    }
    json_decref(rp);
}

// The gemma3 fixture rewritten as Gemma3ForConditionalGeneration (the form of google/gemma-3-4b-it):
// the text config under text_config, the language model's tensors under pfx, one vision tensor.
static const char *as_multimodal(const char *pfx) {
    static char dir[128];
    char p[512];
    snprintf(dir, sizeof dir, "%s/gemma3_mm", hf_tmpdir);
    snprintf(p, sizeof p, "rm -rf '%s' && mkdir -p '%s' && cp tests/data/hf/gemma3/tokenizer*.json '%s'", dir, dir,
             dir);
    if (system(p) != 0) return NULL;
    json_t *text = json_load_file("tests/data/hf/gemma3/config.json", 0, NULL);
    if (!text) return NULL;
    json_object_del(text, "architectures");
    json_t *cfg = json_object(), *archs = json_array();
    json_array_append_new(archs, json_string("Gemma3ForConditionalGeneration"));
    json_object_set_new(cfg, "architectures", archs);
    json_object_set_new(cfg, "model_type", json_string("gemma3"));
    json_object_set_new(cfg, "text_config", text);
    json_object_set_new(cfg, "vision_config", json_object());
    snprintf(p, sizeof p, "%s/config.json", dir);
    int rc = json_dump_file(cfg, p, 0);
    json_decref(cfg);
    FILE *f = fopen("tests/data/hf/gemma3/model.safetensors", "rb");
    if (rc || !f) return NULL;
    uint64_t hn;
    static char buf[1 << 21];
    size_t got = fread(&hn, 8, 1, f) == 1 && hn < 65536 ? fread(buf, 1, sizeof buf, f) : 0;
    fclose(f);
    if (got <= hn) return NULL;
    json_t *hdr = json_loadb(buf, hn, 0, NULL), *out = json_object();
    const char *key;
    json_t *val;
    size_t data_len = got - hn;
    json_object_foreach(hdr, key, val) {
        char name[256];
        bool meta = !strcmp(key, "__metadata__");
        snprintf(name, sizeof name, "%s%s", meta ? "" : pfx, key + (meta ? 0 : 6));  // "model." → pfx
        json_object_set(out, name, val);
    }
    json_object_set_new(out, "model.vision_tower.vision_model.post_layernorm.weight",
                        json_pack("{s:s, s:[i], s:[I, I]}", "dtype", "F32", "shape", 4, "data_offsets",
                                  (json_int_t)data_len, (json_int_t)data_len + 16));
    char *h = json_dumps(out, JSON_COMPACT);
    json_decref(hdr);
    json_decref(out);
    size_t n = strlen(h), padded = (n + 7) / 8 * 8;
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    f = fopen(p, "wb");
    bool ok = f != NULL;
    uint64_t hl = padded;
    static const char zeros[16], spaces[8] = "        ";
    ok = ok && fwrite(&hl, 8, 1, f) == 1 && fwrite(h, 1, n, f) == n && fwrite(spaces, 1, padded - n, f) == padded - n;
    ok = ok && fwrite(buf + hn, 1, data_len, f) == data_len && fwrite(zeros, 1, 16, f) == 16;
    if (f && fclose(f)) ok = false;
    free(h);
    return ok ? dir : NULL;
}

TEST(gemma3_multimodal_checkpoint_serves_its_text_model) {
    json_t *ref = hf_load_ref("gemma3");
    const char *pfx[2] = {"model.language_model.", "language_model.model."};
    for (int i = 0; i < 2 && ref; i++) {
        const char *dir = as_multimodal(pfx[i]);
        CHECK_MSG(dir != NULL, "cannot write the multimodal copy");
        char label[64];
        snprintf(label, sizeof label, "gemma3 as ConditionalGeneration (%s)", pfx[i]);
        if (dir) hf_check_against_ref(dir, ref, label);
    }
    json_decref(ref);
}

TEST(older_config_layout_gives_the_same_numbers) {
    const char *names[] = {"llama3_rope", "llama_yarn_bias", "llama_dynamic", "gemma3", "qwen2"};
    for (int i = 0; i < 5; i++) {
        json_t *ref = hf_load_ref(names[i]);
        const char *dir = hf_edited(names[i], to_old_layout);
        CHECK_MSG(dir != NULL, "%s: cannot write the edited copy", names[i]);
        if (dir && ref) {
            char label[64];
            snprintf(label, sizeof label, "%s (old layout)", names[i]);
            hf_check_against_ref(dir, ref, label);
        }
        json_decref(ref);
    }
}

static void no_architectures(json_t *c) { json_object_del(c, "architectures"); }
static void theta_string(json_t *c) {
    json_object_set_new(json_object_get(c, "rope_parameters"), "rope_theta", json_string("500000.0"));
}
static void eps_string(json_t *c) { json_object_set_new(c, "rms_norm_eps", json_string("1e-6")); }
static void untie(json_t *c) { json_object_set_new(c, "tie_word_embeddings", json_false()); }
static void relu(json_t *c) { json_object_set_new(c, "hidden_act", json_string("relu")); }
static void no_attention_bias(json_t *c) { json_object_set_new(c, "attention_bias", json_false()); }
static void no_mlp_bias(json_t *c) { json_object_set_new(c, "mlp_bias", json_false()); }
static void longrope(json_t *c) {
    json_object_set_new(json_object_get(c, "rope_parameters"), "rope_type", json_string("longrope"));
}
static void unknown_rope_key(json_t *c) {
    json_object_set_new(json_object_get(c, "rope_parameters"), "short_factor", json_array());
}
static void partial_rotary(json_t *c) {
    json_object_set_new(json_object_get(c, "rope_parameters"), "partial_rotary_factor", json_real(0.5));
}
static void yarn_no_orig(json_t *c) {
    json_t *rp = json_object_get(c, "rope_parameters");
    json_object_set_new(rp, "original_max_position_embeddings", json_string("32"));
}
static void bidirectional(json_t *c) { json_object_set_new(c, "use_bidirectional_attention", json_true()); }
static void chunked(json_t *c) {
    json_t *lt = json_array();
    for (int i = 0; i < 2; i++) json_array_append_new(lt, json_string("chunked_attention"));
    json_object_set_new(c, "layer_types", lt);
}
static void gemma_as_llama(json_t *c) {
    json_t *a = json_array();
    json_array_append_new(a, json_string("LlamaForCausalLM"));
    json_object_set_new(c, "architectures", a);
}
static void unknown_arch(json_t *c) {
    json_t *a = json_array();
    json_array_append_new(a, json_string("FalconForCausalLM"));
    json_object_set_new(c, "architectures", a);
}

TEST(what_cannot_be_honoured_is_refused_by_name) {
    hf_refused("llama3_rope", no_architectures, "architectures");
    hf_refused("llama3_rope", unknown_arch, "FalconForCausalLM");
    hf_refused("llama3_rope", theta_string, "rope_theta");
    hf_refused("llama3_rope", eps_string, "rms_norm_eps");
    hf_refused("qwen2", untie, "lm_head.weight");
    hf_refused("llama3_rope", relu, "relu");
    hf_refused("llama_yarn_bias", no_attention_bias, "_proj.bias");
    hf_refused("llama_yarn_bias", no_mlp_bias, "mlp.");
    hf_refused("llama3_rope", longrope, "longrope");
    hf_refused("llama3_rope", unknown_rope_key, "short_factor");
    hf_refused("llama3_rope", partial_rotary, "partial_rotary_factor");
    hf_refused("llama_yarn_bias", yarn_no_orig, "original_max_position_embeddings");
    hf_refused("gemma3", bidirectional, "use_bidirectional_attention");
    hf_refused("qwen2", chunked, "chunked_attention");
    hf_refused("gemma2", gemma_as_llama, "post_feedforward_layernorm");  // Gemma tensors unused by Llama
}

// A backend without an op the family needs refuses at forward_init, naming the op (as the CUDA
// backend does for the ops it lacks).
static void no_softcap(struct backend_ops *ops) { ops->attn_softcap = false; }
static void no_act_mul(struct backend_ops *ops) { ops->act_mul = NULL; }

TEST(a_backend_lacking_an_op_refuses_the_model) {
    struct model *m;
    CHECK_OK(model_load(&m, "tests/data/hf/gemma2"));
    int rc = hf_forward_init_lacking(m, no_softcap);
    CHECK(rc == OCT_EUNSUP);
    CHECK_MSG(strstr(err_msg(), "soft-capping") && strstr(err_msg(), "gemma2"), "message: %s", err_msg());
    rc = hf_forward_init_lacking(m, no_act_mul);
    CHECK_MSG(rc == OCT_EUNSUP && strstr(err_msg(), "act_mul"), "message: %s", err_msg());
    model_free(m);
}

// Each family's chat template: detected from the checkpoint's Jinja, or the family's own when it has none.
TEST(chat_templates_per_family) {
    struct model *m;
    CHECK_OK(model_load(&m, "tests/data/hf/phi3"));
    CHECK_EQ_INT(chat_template_for_arch(m->cfg.arch), CHAT_TEMPLATE_PHI3);
    model_free(m);
    CHECK_EQ_INT(chat_template_for_arch("qwen3"), CHAT_TEMPLATE_CHATML);
    CHECK_EQ_INT(chat_template_for_arch("gemma3"), CHAT_TEMPLATE_GEMMA);
    CHECK_EQ_INT(chat_template_for_arch("mistral"), CHAT_TEMPLATE_LLAMA2);
    CHECK_EQ_INT(chat_template_for_arch("llama"), CHAT_TEMPLATE_LLAMA3);
    // serving: the checkpoint's own template first, the family's where it has none
    CHECK_EQ_INT(chat_template_pick(NULL, "gemma2"), CHAT_TEMPLATE_GEMMA);
    CHECK_EQ_INT(chat_template_pick(NULL, "phi3"), CHAT_TEMPLATE_PHI3);
    CHECK_EQ_INT(chat_template_pick("<|im_start|>{{ m }}", "gemma2"), CHAT_TEMPLATE_CHATML);
    const char *phi3_jinja = "{% for message in messages %}{% if message['role'] == 'user' %}{{'<|user|>' + "
                             "message['content'] + '<|end|>'}}{% endif %}{% endfor %}";
    CHECK_EQ_INT(chat_template_detect(phi3_jinja), CHAT_TEMPLATE_PHI3);
    struct chat_msg msgs[] = {{.role = "system", .content = "Be brief."}, {.role = "user", .content = "Hi"}, {.role = "assistant", .content = "Hello"}, {.role = "user", .content = "Bye"}};
    char *out;
    CHECK_OK(chat_template_render(CHAT_TEMPLATE_PHI3, msgs, 4, true, "<s>", &out));
    CHECK_MSG(!strcmp(out, "<|system|>\nBe brief.<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\nHello<|end|>\n"
                           "<|user|>\nBye<|end|>\n<|assistant|>\n"), "phi3 rendered: %s", out);
    CHECK(!strcmp(chat_template_end_of_turn(CHAT_TEMPLATE_PHI3), "<|end|>"));
    free(out);
}

// The startup report gives the KV bytes per token of each layer type (Gemma 3: two 8-token-window
// layers and one full layer of 1 KV head x 256, bf16 → 1024 bytes a layer).
TEST(startup_report_kv_bytes_per_layer_type) {
    struct model *m;
    CHECK_OK(model_load(&m, "tests/data/hf/gemma3"));
    struct engine_options o;
    engine_options_default(&o);
    snprintf(o.kv.dtype, sizeof o.kv.dtype, "bf16");
    snprintf(o.device, sizeof o.device, "cpu");
    o.max_model_len = 64;
    o.n_threads = 1;
    o.num_kv_blocks = 64;
    struct engine *e;
    CHECK_OK(engine_create(&e, m, &o));
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    engine_memory_plan_log(e, f);
    fclose(f);
    CHECK_MSG(strstr(text, "1 full-attention layers: 1024 bytes (1024 a layer)") &&
              strstr(text, "2 sliding-window layers (8 tokens): 2048 bytes (1024 a layer)"), "report:\n%s", text);
    free(text);
    engine_destroy(e);
    model_free(m);
}

int main(void) {
    if (hf_tmpdir_make("octet_arch")) return 1;
    RUN(every_family_matches_transformers);
    RUN(older_config_layout_gives_the_same_numbers);
    RUN(gemma3_multimodal_checkpoint_serves_its_text_model);
    RUN(gguf_files_match_transformers);
    RUN(gguf_refusals_name_the_problem);
    RUN(what_cannot_be_honoured_is_refused_by_name);
    RUN(a_backend_lacking_an_op_refuses_the_model);
    RUN(chat_templates_per_family);
    RUN(startup_report_kv_bytes_per_layer_type);
    hf_tmpdir_remove();
    return test_summary("test_arch_hf");
}
