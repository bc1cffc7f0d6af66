// rng.h — small deterministic generators (owns: splitmix64 and xoshiro256** state).
// Same seed → same stream on every machine; used for dummy weights, sampling and tests.
#ifndef OCTET_RNG_H
#define OCTET_RNG_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct rng { uint64_t s[4]; };

static inline uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline void rng_seed(struct rng *r, uint64_t seed) {
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

static inline uint64_t rng_next(struct rng *r) {
    uint64_t *s = r->s, x = s[1] * 5;
    uint64_t out = ((x << 7) | (x >> 57)) * 9, t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3]; s[2] ^= t;
    s[3] = (s[3] << 45) | (s[3] >> 19);
    return out;
}

// ids 0 … n−1 in a (Fisher–Yates) random order of r's stream.
static inline void rng_permutation(struct rng *r, int32_t *ids, int n) {
    for (int i = 0; i < n; i++) ids[i] = i;
    for (int i = n - 1; i > 0; i--) {
        const int j = (int)(rng_next(r) % (uint64_t)(i + 1));
        const int32_t t = ids[i];
        ids[i] = ids[j], ids[j] = t;
    }
}

// Uniform in [0, 1) with 24 random bits.
static inline float rng_float(struct rng *r) { return (float)(rng_next(r) >> 40) * (1.0f / 16777216.0f); }
// Uniform in [0, 1) with 53 random bits.
static inline double rng_double(struct rng *r) { return (double)(rng_next(r) >> 11) * (1.0 / 9007199254740992.0); }

// FNV-1a of n bytes (a test's output compared across runs) and of a string (a stable per-name
// seed component).
static inline uint64_t rng_hash_bytes(const void *p, size_t n) {
    const unsigned char *b = (const unsigned char *)p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) { h ^= b[i]; h *= 0x100000001b3ull; }
    return h;
}
static inline uint64_t rng_hash_str(const char *s) { return rng_hash_bytes(s, strlen(s)); }

#endif
