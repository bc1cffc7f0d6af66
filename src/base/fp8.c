// fp8.c — FP8 e4m3/e5m2 decode and the decode tables (the encoders are inline in fp8.h).
#include "fp8.h"

#include <math.h>

float fp8_e4m3_table[256];
float fp8_e5m2_table[256];

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
