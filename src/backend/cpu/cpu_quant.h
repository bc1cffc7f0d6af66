// cpu_quant.h — the CPU backend's GGUF block types (owns: Q8_0 / Q4_0 row dequantizers and the
// dequantize-in-register dot products of cpu_quant.c). Layouts are in base/dtype.h.
#ifndef OCTET_CPU_QUANT_H
#define OCTET_CPU_QUANT_H

#include <stdint.h>

#include "../../base/dtype.h"

// The reference: dst[0..n) = the n elements (whole blocks) of one Q8_0 or Q4_0 row at src.
void q8_0_row_to_f32(const void *src, float *dst, int64_t n);
void q4_0_row_to_f32(const void *src, float *dst, int64_t n);
// Dequantizes a row of t (Q8_0 or Q4_0) into dst; returns 0, or -1 if t is not a block type.
int quant_row_to_f32(enum dtype t, const void *src, float *dst, int64_t n);

// r[k] = Σ_i x[i]·w_k[i] for nr ≤ 4 rows w_k at w + k·row_bytes of type t (Q8_0 or Q4_0), n
// elements each (whole blocks); each equal bit for bit to cpu_dot(x, dequantized w_k, n).
// tmp: n floats of scratch (used by the builds without AVX-512).
void quant_dot_rows(enum dtype t, const void *w, size_t row_bytes, int nr, const float *x, int n, float *tmp,
                    float *r);

#endif
