// kv_pool.c — a stack of free block ids plus refcounts.
#include "kv_pool.h"

#include <assert.h>
#include <stdlib.h>

#include "../base/check.h"

int kv_pool_init(struct kv_pool *p, int n_blocks) {
    if (n_blocks <= 0) return err_set(OCT_EINVAL, "kv pool: %d blocks", n_blocks);
    p->n_blocks = n_blocks;
    p->free_list = malloc((size_t)n_blocks * sizeof(int32_t));
    p->refcount = calloc((size_t)n_blocks, sizeof(int32_t));
    if (!p->free_list || !p->refcount) {
        kv_pool_free(p);
        return err_set(OCT_ENOMEM, "kv pool: cannot allocate %d blocks", n_blocks);
    }
    // lowest ids on top so a fresh pool hands out 0, 1, 2, ...
    for (int i = 0; i < n_blocks; i++) p->free_list[i] = n_blocks - 1 - i;
    p->n_free = n_blocks;
    return OCT_OK;
}

void kv_pool_free(struct kv_pool *p) {
    free(p->free_list);
    free(p->refcount);
    p->free_list = p->refcount = NULL;
    p->n_blocks = p->n_free = 0;
}

int kv_pool_alloc(struct kv_pool *p) {
    if (p->n_free == 0) return err_set(OCT_EFULL, "kv pool: all %d blocks in use", p->n_blocks);
    int id = p->free_list[--p->n_free];
    p->refcount[id] = 1;
    return id;
}

void kv_pool_ref(struct kv_pool *p, int id) {
    assert(id >= 0 && id < p->n_blocks && p->refcount[id] > 0);
    p->refcount[id]++;
}

void kv_pool_unref(struct kv_pool *p, int id) {
    assert(id >= 0 && id < p->n_blocks && p->refcount[id] > 0);
    if (--p->refcount[id] == 0) p->free_list[p->n_free++] = id;
}

int kv_pool_check(const struct kv_pool *p) {
    int in_use = 0;
    for (int i = 0; i < p->n_blocks; i++) {
        if (p->refcount[i] < 0) return err_set(OCT_EINVAL, "kv pool: block %d refcount %d", i, p->refcount[i]);
        if (p->refcount[i] > 0) in_use++;
    }
    if (in_use + p->n_free != p->n_blocks)
        return err_set(OCT_EINVAL, "kv pool: %d in use + %d free != %d", in_use, p->n_free, p->n_blocks);
    for (int i = 0; i < p->n_free; i++)
        if (p->refcount[p->free_list[i]] != 0) return err_set(OCT_EINVAL, "kv pool: free block %d has refs", p->free_list[i]);
    return OCT_OK;
}
