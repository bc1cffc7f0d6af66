// kv_pool.c — refcounted blocks, an O(1) doubly linked LRU free queue, and an open
// addressing hash map from prefix hash to cached block (vLLM v1's block manager shape).
#include "kv_pool.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "../base/check.h"

#define MAP_EMPTY (-1)
#define MAP_DELETED (-2)

static void queue_remove(struct kv_pool *p, int id) {
    int a = p->prev[id], b = p->next[id];
    if (a >= 0) p->next[a] = b; else p->head = b;
    if (b >= 0) p->prev[b] = a; else p->tail = a;
    p->prev[id] = p->next[id] = -1;
    p->n_free--;
}

static void queue_push_tail(struct kv_pool *p, int id) {
    p->prev[id] = p->tail;
    p->next[id] = -1;
    if (p->tail >= 0) p->next[p->tail] = id; else p->head = id;
    p->tail = id;
    p->n_free++;
}

int kv_pool_init(struct kv_pool *p, int n_blocks, int kv_block_tokens) {
    memset(p, 0, sizeof *p);
    if (n_blocks <= 0 || kv_block_tokens <= 0)
        return err_set(OCT_EINVAL, "kv pool: %d blocks of %d tokens", n_blocks, kv_block_tokens);
    p->n_blocks = n_blocks;
    p->kv_block_tokens = kv_block_tokens;
    p->map_cap = 16;
    while (p->map_cap < 2 * n_blocks) p->map_cap *= 2;
    p->refcount = calloc((size_t)n_blocks, sizeof(int32_t));
    p->prev = malloc((size_t)n_blocks * sizeof(int32_t));
    p->next = malloc((size_t)n_blocks * sizeof(int32_t));
    p->hash = calloc((size_t)n_blocks, sizeof(uint64_t));
    p->parent = calloc((size_t)n_blocks, sizeof(uint64_t));
    p->has_hash = calloc((size_t)n_blocks, sizeof(bool));
    p->tokens = malloc((size_t)n_blocks * kv_block_tokens * sizeof(int32_t));
    p->map = malloc((size_t)p->map_cap * sizeof(int32_t));
    if (!p->refcount || !p->prev || !p->next || !p->hash || !p->parent || !p->has_hash || !p->tokens || !p->map) {
        kv_pool_free(p);
        return err_set(OCT_ENOMEM, "kv pool: cannot allocate %d blocks", n_blocks);
    }
    for (int i = 0; i < p->map_cap; i++) p->map[i] = MAP_EMPTY;
    p->head = p->tail = -1;
    for (int i = 0; i < n_blocks; i++) queue_push_tail(p, i);  // ids 0, 1, 2... first
    return OCT_OK;
}

void kv_pool_free(struct kv_pool *p) {
    free(p->refcount); free(p->prev); free(p->next); free(p->hash); free(p->parent);
    free(p->has_hash); free(p->tokens); free(p->map);
    memset(p, 0, sizeof *p);
}

static int map_slot(const struct kv_pool *p, uint64_t h) { return (int)(h & (uint64_t)(p->map_cap - 1)); }

static void map_remove(struct kv_pool *p, int id) {
    for (int i = map_slot(p, p->hash[id]), k = 0; k < p->map_cap; i = (i + 1) & (p->map_cap - 1), k++) {
        if (p->map[i] == MAP_EMPTY) return;
        if (p->map[i] == id) { p->map[i] = MAP_DELETED; return; }
    }
}

int kv_pool_alloc(struct kv_pool *p) {
    if (p->n_free == 0) return err_set(OCT_EFULL, "kv pool: all %d blocks in use", p->n_blocks);
    int id = p->head;
    queue_remove(p, id);
    if (p->has_hash[id]) { map_remove(p, id); p->has_hash[id] = false; }  // evict
    p->refcount[id] = 1;
    return id;
}

void kv_pool_ref(struct kv_pool *p, int id) {
    assert(id >= 0 && id < p->n_blocks);
    if (p->refcount[id] == 0) queue_remove(p, id);
    p->refcount[id]++;
}

void kv_pool_unref(struct kv_pool *p, int id) {
    assert(id >= 0 && id < p->n_blocks && p->refcount[id] > 0);
    if (--p->refcount[id] == 0) queue_push_tail(p, id);
}

uint64_t kv_block_hash(uint64_t parent, const int32_t *tokens, int n, uint64_t salt) {
    uint64_t h = parent ^ (salt * 0x9E3779B97F4A7C15ull) ^ 0x243F6A8885A308D3ull;
    for (int i = 0; i < n; i++) {
        h ^= (uint64_t)(uint32_t)tokens[i] + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
        h *= 0xBF58476D1CE4E5B9ull;
        h ^= h >> 31;
    }
    return h ? h : 1;
}

int kv_pool_lookup(const struct kv_pool *p, uint64_t hash, uint64_t parent, const int32_t *tokens) {
    size_t row = (size_t)p->kv_block_tokens * sizeof(int32_t);
    for (int i = map_slot(p, hash), k = 0; k < p->map_cap; i = (i + 1) & (p->map_cap - 1), k++) {
        int id = p->map[i];
        if (id == MAP_EMPTY) return -1;
        if (id >= 0 && p->hash[id] == hash && p->parent[id] == parent &&
            memcmp(p->tokens + (size_t)id * p->kv_block_tokens, tokens, row) == 0)
            return id;
    }
    return -1;
}

void kv_pool_commit(struct kv_pool *p, int id, uint64_t hash, uint64_t parent, const int32_t *tokens) {
    if (p->has_hash[id] || kv_pool_lookup(p, hash, parent, tokens) >= 0) return;
    p->hash[id] = hash;
    p->parent[id] = parent;
    p->has_hash[id] = true;
    memcpy(p->tokens + (size_t)id * p->kv_block_tokens, tokens, (size_t)p->kv_block_tokens * sizeof(int32_t));
    for (int i = map_slot(p, hash);; i = (i + 1) & (p->map_cap - 1))
        if (p->map[i] < 0) { p->map[i] = id; return; }  // the map is at most half full
}

int kv_pool_check(const struct kv_pool *p) {
    int n_queue = 0;
    for (int id = p->head; id >= 0; id = p->next[id]) {
        if (p->refcount[id] != 0)
            return err_set(OCT_EINVAL, "kv pool: free block %d has refcount %d", id, p->refcount[id]);
        if (++n_queue > p->n_blocks) return err_set(OCT_EINVAL, "kv pool: free queue has a cycle");
    }
    if (n_queue != p->n_free) return err_set(OCT_EINVAL, "kv pool: queue holds %d, n_free %d", n_queue, p->n_free);
    int n_zero = 0;
    for (int i = 0; i < p->n_blocks; i++) {
        if (p->refcount[i] < 0) return err_set(OCT_EINVAL, "kv pool: block %d refcount %d", i, p->refcount[i]);
        n_zero += p->refcount[i] == 0;
    }
    if (n_zero != p->n_free) return err_set(OCT_EINVAL, "kv pool: %d blocks at refcount 0, %d free", n_zero, p->n_free);
    return OCT_OK;
}
