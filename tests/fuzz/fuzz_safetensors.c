// fuzz_safetensors.c — libFuzzer harness for src/model/safetensors.c (owns nothing but
// the harness). Writes the input as model.safetensors into a private temp directory that
// holds a fixed config.json, opens it with st_open, and touches the first and last byte
// of every tensor. Any crash or sanitizer report is a bug.
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/model/safetensors.h"

static char dir[64];
static char st_path_buf[128];

static char config_path[128];

static void cleanup(void) {
    unlink(st_path_buf);
    unlink(config_path);
    rmdir(dir);
}

static int setup(void) {
    snprintf(dir, sizeof dir, "/tmp/fuzz_st_XXXXXX");
    if (!mkdtemp(dir)) return -1;
    snprintf(config_path, sizeof config_path, "%s/config.json", dir);
    FILE *f = fopen(config_path, "w");
    if (!f) return -1;
    fputs("{\"hidden_size\": 64}", f);
    fclose(f);
    snprintf(st_path_buf, sizeof st_path_buf, "%s/model.safetensors", dir);
    atexit(cleanup);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!dir[0] && setup() < 0) abort();
    FILE *f = fopen(st_path_buf, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    fclose(f);
    struct st_dir *d = NULL;
    if (st_open(&d, dir) < 0) return 0;
    volatile uint8_t sink = 0;
    for (int i = 0; i < st_n_tensors(d); i++) {
        const struct tensor_info *t = st_tensor(d, i);
        if (st_find_tensor(d, t->name) != t) __builtin_trap();
        const uint8_t *b = t->data;
        if (t->n_bytes) sink ^= b[0] ^ b[t->n_bytes - 1];
        if (tensor_n_elems(t) * (int64_t)dtype_size(t->dtype) != (int64_t)t->n_bytes)
            __builtin_trap();
    }
    st_close(d);
    return 0;
}
