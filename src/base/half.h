// half.h — IEEE binary16 and bfloat16 conversions (owns: scalar and row converters).
// f32 → f16/bf16 rounds to nearest even; NaN stays NaN. Used by loaders (F16/BF16
// weights), the CPU backend's 16-bit KV caches and the safetensors writer in tests.
#ifndef OCTET_HALF_H
#define OCTET_HALF_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline float bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint16_t f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x40);  // quiet NaN
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

// Widen n elements of a 16-bit row to f32 (vectorised where the CPU allows).
void f16_row_to_f32(const uint16_t *src, float *dst, size_t n);
void bf16_row_to_f32(const uint16_t *src, float *dst, size_t n);

#endif
