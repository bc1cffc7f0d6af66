// hf_fixture.h — the transformers fixtures of tests/data/hf/ (tools/ref/make_hf_fixtures.py) as the
// unit tests use them (owns: reading ref.json, the check of a checkpoint against it on the CPU backend —
// greedy tokens identical, teacher-forced log-probabilities within 1e-4, perplexity ratio within 1e-4,
// the last position's logits within 1e-4 —,
// the scratch folder, copies of a fixture with an edited config.json or of a GGUF fixture with bytes
// replaced, and the checks that a load or a backend lacking an op is refused with an error naming the
// problem). Included after test.h by the tests of the fixtures.
#ifndef OCTET_HF_FIXTURE_H
#define OCTET_HF_FIXTURE_H

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/base/argmax.h"
#include "../../src/base/check.h"
#include "../../src/engine/runner.h"
#include "../../src/engine/sampler.h"
#include "../../src/model/forward.h"
#include "../../src/model/model.h"
#include "../test.h"

static char hf_tmpdir[64];  // the scratch folder of hf_tmpdir_make, removed by hf_tmpdir_remove

static inline int hf_tmpdir_make(const char *prefix) {
    snprintf(hf_tmpdir, sizeof hf_tmpdir, "/tmp/%s_XXXXXX", prefix);
    return mkdtemp(hf_tmpdir) ? 0 : -1;
}

static inline void hf_tmpdir_remove(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", hf_tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", hf_tmpdir);
}

// The integers of JSON array a into out[0..max); returns the array's length.
static inline int hf_ints(json_t *a, int32_t *out, int max) {
    int n = (int)json_array_size(a);
    for (int i = 0; i < n && i < max; i++) out[i] = (int32_t)json_integer_value(json_array_get(a, (size_t)i));
    return n;
}

// tests/data/hf/NAME/ref.json (transformers' numbers), or NULL with the parse error on stderr.
static inline json_t *hf_load_ref(const char *name) {
    char p[256];
    snprintf(p, sizeof p, "tests/data/hf/%s/ref.json", name);
    json_error_t e;
    json_t *j = json_load_file(p, 0, &e);
    if (!j) fprintf(stderr, "%s: %s\n", p, e.text);
    return j;
}

// A CPU runner of 2 threads and 128 positions over m with a KV cache of kv_dtype.
static inline int hf_runner(struct runner *r, struct model *m, const char *kv_dtype) {
    struct runner_options o;
    runner_options_default(&o);
    snprintf(o.kv.dtype, sizeof o.kv.dtype, "%s", kv_dtype);
    snprintf(o.device, sizeof o.device, "cpu");
    o.max_ctx = 128;
    o.n_threads = 2;
    return runner_init(r, m, &o);
}

// Checks the loaded model m against ref; label names it in failures (and in TEST_VERBOSE's worst errors).
static inline void hf_check_model(struct model *m, json_t *ref, const char *label) {
    int V = m->cfg.n_vocab;
    int32_t tok[64], prompt[64], gen[64];
    int n = hf_ints(json_object_get(ref, "tokens"), tok, 64);
    int np = hf_ints(json_object_get(ref, "prompt"), prompt, 64);
    int ng = hf_ints(json_object_get(ref, "gen"), gen, 64);
    struct runner r;
    int rc = hf_runner(&r, m, "fp32");
    CHECK_MSG(rc == 0, "%s: %s", label, err_msg());
    if (rc) return;
    // teacher-forced: one step over the whole sequence, as transformers' single forward call
    float *lg = malloc((size_t)n * V * sizeof(float));
    CHECK_OK(runner_feed(&r, tok, n, true, lg));
    json_t *lps = json_object_get(ref, "logprobs");
    double worst = 0, nll = 0;
    for (int i = 0; i + 1 < n; i++) {
        double lp = logits_logprob(lg + (size_t)i * V, V, tok[i + 1]);
        double d = fabs(lp - json_number_value(json_array_get(lps, (size_t)i)));
        worst = d > worst ? d : worst;
        nll -= lp;
    }
    double ppl = exp(nll / (n - 1)), want = json_number_value(json_object_get(ref, "ppl"));
    json_t *last = json_object_get(ref, "last_logits");  // the logits after the last token
    double worst_last = 0;
    for (int v = 0; v < V && (int)json_array_size(last) == V; v++) {
        double d = fabs(lg[(size_t)(n - 1) * V + v] - json_number_value(json_array_get(last, (size_t)v)));
        worst_last = d > worst_last ? d : worst_last;
    }
    if (getenv("TEST_VERBOSE"))
        fprintf(stderr, "%s: worst logprob diff %.3g, ppl ratio-1 %.3g, last logits %.3g\n", label, worst,
                ppl / want - 1, worst_last);
    CHECK_MSG(worst < 1e-4, "%s: teacher-forced log-probabilities differ by up to %g", label, worst);
    CHECK_MSG(json_array_size(last) == (size_t)V, "%s: ref.json has no last_logits of %d", label, V);
    CHECK_MSG(worst_last < 1e-4, "%s: the last position's logits differ by up to %g", label, worst_last);
    CHECK_MSG(fabs(ppl / want - 1) < 1e-4, "%s: perplexity %.6f, transformers %.6f", label, ppl, want);
    // greedy: the prompt in one step, then one token a step (transformers' generate with its cache)
    runner_reset(&r);
    CHECK_OK(runner_feed(&r, prompt, np, false, lg));
    int mismatch = -1;
    for (int k = 0; k < ng; k++) {
        int32_t id = logits_argmax(lg, V);
        if (id != gen[k] && mismatch < 0) mismatch = k;
        id = gen[k];  // stay on the reference path
        CHECK_OK(runner_feed(&r, &id, 1, false, lg));
    }
    CHECK_MSG(mismatch < 0, "%s: greedy token %d differs from transformers'", label, mismatch);
    free(lg);
    runner_free(&r);
}

// Loads path (a checkpoint folder or GGUF file) and checks it against ref.
static inline void hf_check_against_ref(const char *path, json_t *ref, const char *label) {
    struct model *m;
    int rc = model_load(&m, path);
    CHECK_MSG(rc == 0, "%s: %s", label, err_msg());
    if (rc) return;
    hf_check_model(m, ref, label);
    model_free(m);
}

// A copy of fixture `name` in hf_tmpdir/name with its config.json passed through edit() (the other
// files are links to the fixture's); NULL if it cannot be written.
static inline const char *hf_edited(const char *name, void (*edit)(json_t *cfg)) {
    static char dir[128];
    char src[128], p[512], q[512], cmd[700], cwd[256];
    snprintf(dir, sizeof dir, "%s/%s", hf_tmpdir, name);
    snprintf(src, sizeof src, "tests/data/hf/%s", name);
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", dir, dir);
    if (system(cmd) != 0 || !getcwd(cwd, sizeof cwd)) return NULL;
    static const char *const files[] = {"model.safetensors", "tokenizer.json", "tokenizer_config.json"};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s/%s", cwd, src, files[i]);
        snprintf(q, sizeof q, "%s/%s", dir, files[i]);
        if (symlink(p, q) != 0) return NULL;
    }
    snprintf(p, sizeof p, "%s/config.json", src);
    json_t *cfg = json_load_file(p, 0, NULL);
    if (!cfg) return NULL;
    edit(cfg);
    snprintf(q, sizeof q, "%s/config.json", dir);
    int rc = json_dump_file(cfg, q, JSON_INDENT(1));
    json_decref(cfg);
    return rc == 0 ? dir : NULL;
}

// Loading path (label: what it is a copy of) must fail with a message containing want.
static inline void hf_load_refused(const char *path, const char *label, const char *want) {
    CHECK_MSG(path != NULL, "%s: cannot write the edited copy", label);
    if (!path) return;
    struct model *m;
    int rc = model_load(&m, path);
    CHECK_MSG(rc < 0, "%s: loaded, expected an error naming '%s'", label, want);
    if (rc < 0) CHECK_MSG(strstr(err_msg(), want) != NULL, "error '%s' does not name '%s'", err_msg(), want);
    else model_free(m);
}

// Loading fixture name with edit applied must fail with a message containing want.
static inline void hf_refused(const char *name, void (*edit)(json_t *), const char *want) {
    hf_load_refused(hf_edited(name, edit), name, want);
}

// tests/data/hf_gguf/NAME.gguf (a fixture written as llama.cpp lays it out) against tests/data/hf/NAME's ref.json.
static inline void hf_check_gguf(const char *name) {
    json_t *ref = hf_load_ref(name);
    CHECK_MSG(ref != NULL, "%s: no ref.json", name);
    char path[256], label[64];
    snprintf(path, sizeof path, "tests/data/hf_gguf/%s.gguf", name);
    snprintf(label, sizeof label, "%s (gguf)", name);
    if (ref) hf_check_against_ref(path, ref, label);
    json_decref(ref);
}

// tests/data/hf_gguf/NAME.gguf copied to hf_tmpdir with every `from` replaced by `to` (same length).
static inline const char *hf_gguf_patched(const char *name, const char *from, const char *to) {
    static char out[128];
    char in[128];
    snprintf(in, sizeof in, "tests/data/hf_gguf/%s.gguf", name);
    snprintf(out, sizeof out, "%s/%s_patched.gguf", hf_tmpdir, name);
    FILE *f = fopen(in, "rb");
    if (!f) return NULL;
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    if (n == sizeof buf) return NULL;  // (larger than the fixtures this copies)
    size_t k = strlen(from);
    for (size_t i = 0; i + k <= n; i++)
        if (!memcmp(buf + i, from, k)) memcpy(buf + i, to, k);
    f = fopen(out, "wb");
    if (!f) return NULL;
    bool ok = fwrite(buf, 1, n, f) == n;
    return fclose(f) == 0 && ok ? out : NULL;
}

// Loading that patched copy of tests/data/hf_gguf/NAME.gguf must fail with a message containing want.
static inline void hf_gguf_refused(const char *name, const char *from, const char *to, const char *want) {
    hf_load_refused(hf_gguf_patched(name, from, to), name, want);
}

// forward_init of m on a CPU backend named "lacking" whose op table edit() has changed (an op taken
// away, as the CUDA backend's table lacks some): the return code, with err_msg() naming the problem.
static inline int hf_forward_init_lacking(struct model *m, void (*edit)(struct backend_ops *ops)) {
    struct backend *cpu = backend_cpu_create(1);
    struct backend_ops ops = *cpu->ops;
    ops.name = "lacking";
    edit(&ops);
    struct backend fake = *cpu;
    fake.ops = &ops;
    struct forward f;
    int rc = forward_init(&f, m, &fake, 4, 1);
    if (rc == 0) forward_free(&f);
    cpu->ops->destroy(cpu);
    return rc;
}

#endif
