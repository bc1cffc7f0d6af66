// fp8.h — the bit-exact FP8 reference codec (owns: e4m3/e5m2 encode and decode).
// e4m3 is OCP E4M3FN (bias 7, max ±448, no infinities, NaN = 0x7F/0xFF); e5m2 is OCP
// E5M2 (bias 15, max ±57344, inf 0x7C/0xFC, NaN 0x7D–0x7F/0xFD–0xFF).
// Encoding rounds to nearest, ties to even, and SATURATES: any finite input (and ±inf)
// becomes at most ±max, never NaN or inf; a NaN input becomes 0x7F. Every backend's
// kv_write must produce exactly these bytes (docs/kv_format.md).
#ifndef OCTET_FP8_H
#define OCTET_FP8_H

#include <stdint.h>

uint8_t fp8_e4m3_from_f32(float x);
uint8_t fp8_e5m2_from_f32(float x);
float fp8_e4m3_to_f32(uint8_t v);
float fp8_e5m2_to_f32(uint8_t v);

// Decode tables (256 entries each), filled before main() runs; the CPU attention reads
// the cache through these, widening in registers.
extern float fp8_e4m3_table[256];
extern float fp8_e5m2_table[256];

#define FP8_E4M3_MAX 448.0f
#define FP8_E5M2_MAX 57344.0f

#endif
