// fp8.c — FP8 e4m3/e5m2 encode (RNE, saturating) and decode; see fp8.h for the rules.
// Encoding works on the float's bits: a normal result rounds the 23-bit mantissa to the
// format's bits with the integer ties-to-even step (a carry moves into the exponent, as it
// must), and a subnormal one is the integer nearest x·2^(mbits−emin), exact in float and
// rounded by rintf (ties to even in the default rounding mode). No double arithmetic and no
// libm call but rintf: quantizing a 70B model's weights at load runs this 70 billion times.
#include "fp8.h"

#include <math.h>
#include <string.h>

float fp8_e4m3_table[256];
float fp8_e5m2_table[256];

// A format with `mbits` mantissa bits and exponent `bias`; `max_code` is its largest finite
// code (sign clear) and `max_bits` the float32 bits of that code's value.
static inline uint8_t encode(float x, int mbits, int bias, uint8_t max_code, uint32_t max_bits) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    const uint8_t sign = (uint8_t)((u >> 24) & 0x80);
    u &= 0x7FFFFFFFu;
    if (u > 0x7F800000u) return 0x7F;             // NaN, either sign
    if (u >= max_bits) return sign | max_code;    // saturate (also ±inf)
    const uint32_t min_normal = (uint32_t)(128 - bias) << 23;  // 2^(1 - bias)
    if (u >= min_normal) {
        const int drop = 23 - mbits;
        const uint32_t r = (u + ((1u << (drop - 1)) - 1) + ((u >> drop) & 1)) >> drop;
        // below max_bits, the rounded value is at most the largest finite code
        return sign | (uint8_t)(r - ((uint32_t)(127 - bias) << mbits));
    }
    float a;
    memcpy(&a, &u, sizeof a);
    return sign | (uint8_t)rintf(a * (float)(1 << (mbits + bias - 1)));  // (8 = 2^mbits: the smallest normal)
}

uint8_t fp8_e4m3_from_f32(float x) { return encode(x, 3, 7, 0x7E, 0x43E00000u); }    // 448
uint8_t fp8_e5m2_from_f32(float x) { return encode(x, 2, 15, 0x7B, 0x47600000u); }  // 57344

static float decode(uint8_t v, int mbits, int bias) {
    int ebits = 7 - mbits;
    unsigned exp = (v >> mbits) & ((1u << ebits) - 1);
    unsigned man = v & ((1u << mbits) - 1);
    double mag;
    if (exp == 0) mag = ldexp((double)man, 1 - bias - mbits);
    else mag = ldexp(1.0 + (double)man / (1 << mbits), (int)exp - bias);
    return (float)((v & 0x80) ? -mag : mag);
}

float fp8_e4m3_to_f32(uint8_t v) {
    if ((v & 0x7F) == 0x7F) return NAN;
    return decode(v, 3, 7);
}

float fp8_e5m2_to_f32(uint8_t v) {
    unsigned low = v & 0x7F;
    if (low == 0x7C) return (v & 0x80) ? -INFINITY : INFINITY;
    if (low > 0x7C) return NAN;
    return decode(v, 2, 15);
}

__attribute__((constructor)) static void fp8_tables_init(void) {
    for (int i = 0; i < 256; i++) {
        fp8_e4m3_table[i] = fp8_e4m3_to_f32((uint8_t)i);
        fp8_e5m2_table[i] = fp8_e5m2_to_f32((uint8_t)i);
    }
}
