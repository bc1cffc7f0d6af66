// cpu_fp8w.h — the CPU reference of the FP8-weight matmul (cpu_fp8w.c; the contract is
// docs/fp8_weights.md): activation rows quantized to e4m3 (or e5m2) with their scales, dotted in
// f32 with the e4m3 weights, times both scales.
#ifndef OCTET_CPU_FP8W_H
#define OCTET_CPU_FP8W_H

#include "../../base/fp8.h"
#include "../weight.h"
#include "cpu.h"

// A 128×128-block weight's value as the product reads it: w̃ = fl(2^-8 · ŵ · s), the code's value ŵ (an
// e4m3 value: 2^-8·ŵ is exact) times its block's scale s, one f32 rounding. The product sums x̂·w̃ and
// multiplies the sum by 256·s_x (docs/fp8_weights.md).
static inline float fp8w_bscaled(uint8_t code, float s) { return fp8_e4m3_table[code] * 0x1p-8f * s; }

// One activation row x[n] as the weight's scheme quantizes it: xq[i] = the fp8 value (decoded, exact
// in f32) of x[i] / scale; returns the row's scale (dynamic: amax / fp8 max, 1 for an all-zero row;
// static: fp8.input_scale).
float fp8w_quant_row(const float *x, int n, const struct weight_fp8 *f, float *xq);

// Rows [r0, r0 + n) of a DT_E4M3 weight as a weight of its own, its scales with it (per-tensor: the same
// one; per-channel: from scale[r0]; blocks: from r0's band, so r0 must be a multiple of the block, which
// the caller checks): one expert of a stacked mixture-of-experts weight.
struct weight fp8w_rows(const struct weight *w, int64_t r0, int64_t n);

// OCT_OK, or an error naming the weight and row when a DT_E4M3 weight holds a NaN code (0x7F / 0xFF), which
// no model file should and the decode product does not widen (cpu weight_upload refuses such a weight).
int cpu_fp8w_check(const struct weight *w);

// out[n][w.rows] = x[n][w.cols] · Wᵀ for a DT_E4M3 weight (cpu_matmul's dispatch).
void cpu_fp8w_matmul(struct cpu_backend *c, float *out, const float *x, const struct weight *w, int n);

#endif
