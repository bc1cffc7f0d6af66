// half.c — binary16 conversions (scalar reference + F16C row path when compiled in).
#include "half.h"

#include <math.h>
#if defined(__F16C__) || defined(__AVX2__)
#include <immintrin.h>
#endif

float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1F, man = h & 0x3FF;
    float f;
    if (exp == 0) {
        f = ldexpf((float)man, -24);  // zero or subnormal
        return sign ? -f : f;
    }
    uint32_t u;
    if (exp == 31) u = sign | 0x7F800000u | (man << 13);
    else u = sign | ((exp + 112) << 23) | (man << 13);
    memcpy(&f, &u, 4);
    return f;
}

uint16_t f32_to_f16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    float a = fabsf(f);
    if (isnan(f)) return sign | 0x7E00;
    if (a >= 65520.0f) return sign | 0x7C00;  // rounds to inf
    if (a < 6.103515625e-05f) {               // subnormal range: units of 2^-24
        return sign | (uint16_t)nearbyintf(a * 16777216.0f);
    }
    int e;
    float m = frexpf(a, &e);  // a = m*2^e, m in [0.5,1)
    uint32_t q = (uint32_t)nearbyintf((m * 2.0f - 1.0f) * 1024.0f);
    uint32_t code = ((uint32_t)(e - 1 + 15) << 10) + q;
    return sign | (uint16_t)code;
}

void f16_row_to_f32(const uint16_t *src, float *dst, size_t n) {
    size_t i = 0;
#if defined(__F16C__)
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
#endif
    for (; i < n; i++) dst[i] = f16_to_f32(src[i]);
}

void bf16_row_to_f32(const uint16_t *src, float *dst, size_t n) {
    size_t i = 0;
#if defined(__AVX2__)
    for (; i + 8 <= n; i += 8) {
        __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(src + i)));
        _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
    }
#endif
    for (; i < n; i++) dst[i] = bf16_to_f32(src[i]);
}
