// kv_pool.h — who owns which KV block, and which blocks hold reusable prefixes
// (owns: refcounts, the LRU free queue, per-block prefix hashes and the hash → block
// map; not: the page memory, which kv_cache holds).
// Invariants: a block is in the free queue exactly when its refcount is 0; a block in
// the free queue may still carry a prefix hash (cached, evictable): allocation takes
// the least recently freed block and forgets its hash. n_free counts the free queue.
#ifndef OCTET_KV_POOL_H
#define OCTET_KV_POOL_H

#include <stdbool.h>
#include <stdint.h>

struct kv_pool {
    int n_blocks, n_free;
    int32_t *refcount;          // [n_blocks]
    int32_t *prev, *next;       // [n_blocks] free queue links (-1 = none)
    int head, tail;             // free queue ends (head is evicted first)
    // prefix cache
    int kv_block_tokens;
    uint64_t *hash;             // [n_blocks] valid when has_hash
    bool *has_hash;             // [n_blocks]
    uint64_t *parent;           // [n_blocks] hash of the previous block (0 for the first)
    int32_t *tokens;            // [n_blocks][kv_block_tokens] token ids, to verify hits
    int32_t *map;               // [map_cap] open addressing: block id or -1 (empty), -2 (deleted)
    int map_cap;
};

int kv_pool_init(struct kv_pool *p, int n_blocks, int kv_block_tokens);
void kv_pool_free(struct kv_pool *p);
// Takes the least recently freed block (refcount 1, its old prefix hash dropped).
// Returns the id, or OCT_EFULL when none is free.
int kv_pool_alloc(struct kv_pool *p);
// Another owner shares block id (a cached block with refcount 0 leaves the free queue).
void kv_pool_ref(struct kv_pool *p, int id);
// Drops one reference; at 0 the block joins the free queue's tail (still cached).
void kv_pool_unref(struct kv_pool *p, int id);

// Hash of a full block: its parent's hash, its tokens and a salt (the cache's dtype and
// scales digest), never 0.
uint64_t kv_block_hash(uint64_t parent, const int32_t *tokens, int n, uint64_t salt);
// Finds a cached block with this hash, parent and tokens; -1 if none.
int kv_pool_lookup(const struct kv_pool *p, uint64_t hash, uint64_t parent, const int32_t *tokens);
// Records that block id (full, computed) holds these tokens. If another block already
// holds the same prefix, nothing changes.
void kv_pool_commit(struct kv_pool *p, int id, uint64_t hash, uint64_t parent, const int32_t *tokens);

// Debug check of the invariants; returns 0 if they hold.
int kv_pool_check(const struct kv_pool *p);

#endif
