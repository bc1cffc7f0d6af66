// cpu_quant.h — the CPU backend's GGUF block types (owns: the Q8_0 / Q4_0 row dequantizers and
// dequantize-in-register dot products of cpu_quant.c, and the K-quants' (Q4_K, Q5_K, Q6_K) of
// cpu_kquant.c). Layouts are in base/dtype.h and cpu_kquant.c.
#ifndef OCTET_CPU_QUANT_H
#define OCTET_CPU_QUANT_H

#include <stdint.h>

#include "../../base/dtype.h"

// The reference: dst[0..n) = the n elements (whole blocks) of one Q8_0 or Q4_0 row at src.
void q8_0_row_to_f32(const void *src, float *dst, int64_t n);
void q4_0_row_to_f32(const void *src, float *dst, int64_t n);
void q4_k_row_to_f32(const void *src, float *dst, int64_t n);
void q5_k_row_to_f32(const void *src, float *dst, int64_t n);
void q6_k_row_to_f32(const void *src, float *dst, int64_t n);
// Dequantizes a row of t (a block type) into dst; returns 0, or -1 if t is not a block type.
int quant_row_to_f32(enum dtype t, const void *src, float *dst, int64_t n);

// r[k] = Σ_i x[i]·w_k[i] for nr ≤ 4 rows w_k at w + k·row_bytes of block type t, n
// elements each (whole blocks); each equal bit for bit to cpu_dot(x, dequantized w_k, n).
// tmp: n floats of scratch (used by the builds without AVX-512).
void quant_dot_rows(enum dtype t, const void *w, size_t row_bytes, int nr, const float *x, int n, float *tmp,
                    float *r);
// The K-quants' part of quant_dot_rows, in registers (AVX-512 builds); -1 where it has no kernel.
int kquant_dot_rows(enum dtype t, const void *w, size_t row_bytes, int nr, const float *x, int n, float *r);

#endif
