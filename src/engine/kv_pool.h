// kv_pool.h — who owns which KV block (owns: free list and refcounts of block ids
// 0..n_blocks-1; not: the page memory, which kv_cache holds).
// Invariant: a block is on the free list exactly when its refcount is 0;
// n_free + (blocks with refcount > 0) == n_blocks.
#ifndef OCTET_KV_POOL_H
#define OCTET_KV_POOL_H

#include <stdint.h>

struct kv_pool {
    int n_blocks, n_free;
    int32_t *free_list;   // [n_blocks] stack of free block ids (top = n_free-1)
    int32_t *refcount;    // [n_blocks]
};

int kv_pool_init(struct kv_pool *p, int n_blocks);
void kv_pool_free(struct kv_pool *p);
// Takes one free block (refcount 1). Returns the id, or OCT_EFULL when none is free.
int kv_pool_alloc(struct kv_pool *p);
// Another owner shares block id.
void kv_pool_ref(struct kv_pool *p, int id);
// Drops one reference; the block returns to the free list at 0.
void kv_pool_unref(struct kv_pool *p, int id);
// Debug check of the invariant; returns 0 if it holds.
int kv_pool_check(const struct kv_pool *p);

#endif
