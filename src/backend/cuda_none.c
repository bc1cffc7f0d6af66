// cuda_none.c — the CUDA entry points of a build without CUDA (compiled only when the
// Makefile's CUDA=1 is off): they report that clearly instead of failing to link.
#include "../base/check.h"
#include "backend.h"

struct backend *backend_cuda_create(int device_index) {
    (void)device_index;
    err_set(OCT_EUNSUP, "this octet was built without CUDA (rebuild with `make CUDA=1`)");
    return NULL;
}

bool backend_cuda_available(void) { return false; }

// cuda_tuning.h's entry points: a build without CUDA has no tuning and no attention table.
#include "cuda/cuda_tuning.h"

struct cuda_tuning cuda_tuning_default(void) { return (struct cuda_tuning){0}; }
void cuda_tuning_get(const struct backend *b, struct cuda_tuning *out) { (void)b; *out = cuda_tuning_default(); }
void cuda_tuning_set(struct backend *b, const struct cuda_tuning *t) { (void)b; (void)t; }
int cuda_attention_kernel_count(void) { return 0; }
const char *cuda_attention_kernel_name(int i) { (void)i; return NULL; }
const char *cuda_attention_pick(struct backend *b, const struct kv_layer *l, const struct attn_params *p,
                                const struct batch *bt) {
    (void)b; (void)l; (void)p; (void)bt;
    return NULL;
}
