// backend.c — picks a backend by name (--device cpu|cuda|auto).
#include <stdlib.h>
#include <string.h>

#include "../base/check.h"
#include "backend.h"

void *backend_host_alloc(struct backend *b, size_t bytes) {
    return b->ops->host_alloc ? b->ops->host_alloc(b, bytes) : malloc(bytes);
}

void backend_host_free(struct backend *b, void *p) {
    if (!p) return;
    if (b->ops->host_free) b->ops->host_free(b, p);
    else free(p);
}

struct backend *backend_create(const char *device, int n_threads) {
    if (!device || !device[0] || !strcmp(device, "auto")) {
        if (backend_cuda_available()) return backend_cuda_create(0);
        device = "cpu";
    }
    if (!strcmp(device, "cpu")) {
        struct backend *b = backend_cpu_create(n_threads);
        if (!b) err_set(OCT_ENOMEM, "cannot create the cpu backend");
        return b;
    }
    if (!strcmp(device, "cuda")) return backend_cuda_create(0);
    err_set(OCT_EINVAL, "--device: unknown device '%s' (choose cpu, cuda or auto)", device);
    return NULL;
}
