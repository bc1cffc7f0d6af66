// fuzz_gguf.c — libFuzzer harness for src/model/gguf.c (owns nothing but the harness).
// Parses the input with gguf_open_mem (libFuzzer's buffer is exactly `size` bytes, so
// ASan flags any read past the end), then walks every accessor a loader would use and
// touches the first and last byte of every tensor. Any crash or sanitizer report is a bug.
#include <stdint.h>
#include <stddef.h>

#include "../../src/model/gguf.h"

static const char *keys[] = {
    "general.architecture", "general.alignment", "general.name", "llama.block_count",
    "llama.attention.layer_norm_rms_epsilon", "tokenizer.ggml.tokens",
    "tokenizer.ggml.scores", "tokenizer.ggml.token_type", "tokenizer.ggml.merges",
    "tokenizer.ggml.bos_token_id", "k", "a", "nested", "tok.list",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct gguf *g = NULL;
    if (gguf_open_mem(&g, data, size, "fuzz.gguf") < 0) return 0;
    volatile uint8_t sink = 0;
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        int64_t iv;
        double fv;
        bool bv;
        const char *s;
        size_t len, n;
        enum gguf_type et;
        const void *p;
        (void)gguf_has_key(g, keys[k]);
        (void)gguf_get_int(g, keys[k], &iv);
        (void)gguf_get_float(g, keys[k], &fv);
        (void)gguf_get_bool(g, keys[k], &bv);
        if (gguf_get_str(g, keys[k], &s, &len) == 0 && len) sink ^= (uint8_t)(s[0] ^ s[len - 1]);
        if (gguf_get_arr_info(g, keys[k], &et, &n) == 0) {
            if (gguf_get_arr_data(g, keys[k], &p) == 0 && n) sink ^= *(const uint8_t *)p;
            for (size_t i = 0; i <= n && i < 4096; i++)
                if (gguf_get_arr_str(g, keys[k], i, &s, &len) == 0 && len)
                    sink ^= (uint8_t)(s[0] ^ s[len - 1]);
        }
    }
    for (int i = 0; i < gguf_n_tensors(g); i++) {
        const struct tensor_info *t = gguf_tensor(g, i);
        if (gguf_find_tensor(g, t->name) != t) __builtin_trap();
        const uint8_t *d = t->data;
        if (t->n_bytes) sink ^= d[0] ^ d[t->n_bytes - 1];
        if (dtype_row_bytes(t->dtype, tensor_n_elems(t)) != t->n_bytes)  // (block types: whole blocks)
            __builtin_trap();
    }
    gguf_close(g);
    return 0;
}
