// fp8.c — FP8 e4m3/e5m2 encode (RNE, saturating) and decode; see fp8.h for the rules.
// Encoding works on the exact binary value: a float32 input times a power of two is
// exact in double, so nearbyint() in the default rounding mode is exactly RNE.
#include "fp8.h"

#include <math.h>

float fp8_e4m3_table[256];
float fp8_e5m2_table[256];

// Generic encoder for a format with `mbits` mantissa bits, exponent `bias`, largest
// finite code `max_code` (sign bit clear) and value `max_val`.
static uint8_t encode(float x, int mbits, int bias, uint8_t max_code, double max_val) {
    if (isnan(x)) return 0x7F;
    uint8_t sign = signbit(x) ? 0x80 : 0x00;
    double a = fabs((double)x);
    if (a >= max_val) return sign | max_code;  // saturate (also ±inf)
    if (a == 0.0) return sign;
    int e;
    frexp(a, &e);       // a = f * 2^e, f in [0.5, 1)
    e -= 1;             // a = m * 2^e, m in [1, 2)
    int emin = 1 - bias;
    unsigned code;
    if (e < emin) {     // subnormal: a = q * 2^(emin - mbits)
        double q = nearbyint(ldexp(a, mbits - emin));
        code = (unsigned)q;  // q == 2^mbits lands exactly on the smallest normal
    } else {
        double q = nearbyint((ldexp(a, -e) - 1.0) * (double)(1 << mbits));
        code = ((unsigned)(e + bias) << mbits) + (unsigned)q;  // q == 2^mbits carries
    }
    if (code > max_code) code = max_code;
    return sign | (uint8_t)code;
}

uint8_t fp8_e4m3_from_f32(float x) { return encode(x, 3, 7, 0x7E, 448.0); }
uint8_t fp8_e5m2_from_f32(float x) { return encode(x, 2, 15, 0x7B, 57344.0); }

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
