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
