// fp8.h — the bit-exact FP8 reference codec (owns: e4m3/e5m2 encode and decode).
// e4m3 is OCP E4M3FN (bias 7, max ±448, no infinities, NaN = 0x7F/0xFF); e5m2 is OCP
// E5M2 (bias 15, max ±57344, inf 0x7C/0xFC, NaN 0x7D–0x7F/0xFD–0xFF).
// Encoding rounds to nearest, ties to even, and SATURATES: any finite input (and ±inf)
// becomes at most ±max, never NaN or inf; a NaN input becomes 0x7F. Every backend's
// kv_write must produce exactly these bytes (docs/kv_format.md).
#ifndef OCTET_FP8_H
#define OCTET_FP8_H

#include <math.h>
#include <stdint.h>
#include <string.h>

// Encoding works on the float's bits: a normal result rounds the 23-bit mantissa to the format's
// bits with the integer ties-to-even step (a carry moves into the exponent, as it must), and a
// subnormal one is the integer nearest x·2^(mbits−emin), exact in float and rounded by rintf (ties
// to even in the default rounding mode). Inline, with no double arithmetic and no libm call but
// rintf: quantizing a 70B model's weights at load runs it 70 billion times.
// fp8_encode_: a format with `mbits` mantissa bits and exponent `bias`; `max_code` is its largest
// finite code (sign clear) and `max_bits` the float32 bits of that code's value.
static inline uint8_t fp8_encode_(float x, int mbits, int bias, uint8_t max_code, uint32_t max_bits) {
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

static inline uint8_t fp8_e4m3_from_f32(float x) { return fp8_encode_(x, 3, 7, 0x7E, 0x43E00000u); }    // 448
static inline uint8_t fp8_e5m2_from_f32(float x) { return fp8_encode_(x, 2, 15, 0x7B, 0x47600000u); }  // 57344

float fp8_e4m3_to_f32(uint8_t v);
float fp8_e5m2_to_f32(uint8_t v);

// Decode tables (256 entries each), filled before main() runs; the CPU attention reads
// the cache through these, widening in registers.
extern float fp8_e4m3_table[256];
extern float fp8_e5m2_table[256];

#define FP8_E4M3_MAX 448.0f
#define FP8_E5M2_MAX 57344.0f

#endif
