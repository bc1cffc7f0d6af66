// cpu_quant.h — the CPU backend's GGUF block types (owns: the row dequantizers of cpu_quant.c and
// cpu_kquant.c, and the integer dot products against 8-bit-quantized x of cpu_qdot.c (Q8_0, Q4_0 and the
// matmul) and cpu_kquant.c (Q4_K, Q5_K, Q6_K)). Layouts are in base/dtype.h and cpu_kquant.c; the math of
// the integer products is in cpu_qdot.c's header comment.
#ifndef OCTET_CPU_QUANT_H
#define OCTET_CPU_QUANT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "../../base/dtype.h"
#include "../../base/half.h"
#if defined(__F16C__)
#include <immintrin.h>
#endif

struct cpu_backend;
struct weight;

// The f16 scale stored at p (any alignment) as f32: the F16C instruction where the build has it.
static inline float quant_f16(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
#if defined(__F16C__)
    return _cvtsh_ss(h);
#else
    return f16_to_f32(h);
#endif
}

// The reference: dst[0..n) = the n elements (whole blocks) of one Q8_0 or Q4_0 row at src.
void q8_0_row_to_f32(const void *src, float *dst, int64_t n);
void q4_0_row_to_f32(const void *src, float *dst, int64_t n);
void q4_k_row_to_f32(const void *src, float *dst, int64_t n);
void q5_k_row_to_f32(const void *src, float *dst, int64_t n);
void q6_k_row_to_f32(const void *src, float *dst, int64_t n);
// Dequantizes a row of t (a block type) into dst; returns 0, or -1 if t is not a block type.
int quant_row_to_f32(enum dtype t, const void *src, float *dst, int64_t n);

// r[k] = cpu_dot(x, dequantized w_k, n) for nr rows w_k at w + k·row_bytes of block type t (tmp: n
// floats): the f32 product of the block types without an integer kernel (MXFP4).
void quant_dot_rows(enum dtype t, const void *w, size_t row_bytes, int nr, const float *x, int n, float *tmp,
                    float *r);

// ---- integer dot products (cpu_qdot.c, cpu_kquant.c) ----
// The instruction sets a kernel runs on: every path compiled in gives the same bits.
enum { QX_C = 0, QX_AVX2 = 1, QX_AVX512 = 2 };
int qx_has_path(int path);  // whether this build has it
int qx_best_path(void);
// Elements per block of x for weights of t: 32 (Q8_0, Q4_0), 256 (Q4_K, Q5_K, Q6_K), 0 (no integer kernel).
int qx_block(enum dtype t);
// Bytes of one token's quantized x for n columns of weights of t (0 if t has no kernel or n is not whole blocks).
size_t qx_bytes(enum dtype t, int n);
// qx[qx_bytes] = x[0..n) quantized (the scalar code, or the AVX-512 one: equal bits).
void qx_quantize(enum dtype t, const float *x, int n, void *qx);
void qx_quantize_path(int path, enum dtype t, const float *x, int n, void *qx);
// One token's quantized x: q[n], d[n / qx_block], and for the K-quants bsum[n / 16] (sums of 16 q).
struct qx_view { const int8_t *q; const float *d; const int16_t *bsum; };
struct qx_view qx_view(enum dtype t, const void *qx, int n);
// r[k] = the integer dot product of nr <= 4 rows w_k at w + k·row_bytes (type t, n elements) with qx.
void qx_dot_rows(enum dtype t, const void *w, size_t row_bytes, int nr, const void *qx, int n, float *r);
void qx_dot_rows_path(int path, enum dtype t, const void *w, size_t row_bytes, int nr, const void *qx, int n,
                      float *r);
// The K-quants' part of it (cpu_kquant.c).
void kq_dot_rows(int path, enum dtype t, const uint8_t *w, size_t row_bytes, int nr, struct qx_view x, int n,
                 float *r);
// The K-quants' prefill tile (AVX-512 builds; AVX2 builds for Q4_K and Q5_K): out[t·ostride + k] for 4 rows at
// w + k·row_bytes and the tokens x[0..T), the bits of kq_dot_rows; returns T (4), or 0 where there is no tile
// (then nothing is done).
int kq_tile(enum dtype t, const uint8_t *w, size_t row_bytes, const struct qx_view *x, int n, float *out,
            size_t ostride);
// Q4_K rows repacked in groups of 8 for the decode product (cpu_kq8.c has the layout): whether this build has
// the kernel (AVX-512 VNNI and VBMI), the bytes of one group of cols columns, the bytes of the whole groups of a
// rows × cols weight (0 where it is not repacked: no kernel, rows < 8, or cols not whole super-blocks), the
// repack of rows [0, 8·(rows / 8)) at w (rows of rb bytes) into dst[kq8_bytes], and r[0..8) = the rows of
// group gp against one token's x, the bits of kq_dot_rows.
int kq8_built(void);
size_t kq8_group_bytes(int64_t cols);
size_t kq8_bytes(int64_t rows, int64_t cols);
void kq8_repack(const uint8_t *w, size_t rb, int64_t rows, int64_t cols, uint8_t *dst);
void kq8_dot_group(const uint8_t *gp, int cols, struct qx_view x, float *r);
// Q6_K rows repacked in groups of 8 for the decode product (cpu_kq6x8.c has the layout), as the Q4_K ones:
// whether this build has the kernel (AVX-512 VNNI), the bytes of one group and of a weight's whole groups (0
// where it is not repacked), the repack, and r[0..8) = the rows of group gp against x, the bits of kq_dot_rows.
int kq6x8_built(void);
size_t kq6x8_group_bytes(int64_t cols);
size_t kq6x8_bytes(int64_t rows, int64_t cols);
void kq6x8_repack(const uint8_t *w, size_t rb, int64_t rows, int64_t cols, uint8_t *dst);
void kq6x8_dot_group(const uint8_t *gp, int cols, struct qx_view x, float *r);
// Q8_0 rows repacked in groups of 8 for the decode product (cpu_kq8_0x8.c has the layout), as the Q6_K ones:
// whether this build has the kernel (AVX-512 VNNI), the bytes of one group and of a weight's whole groups (0
// where it is not repacked), the repack, and r[0..8) = the rows of group gp against x, the bits of qx_dot_rows.
int kq80x8_built(void);
size_t kq80x8_group_bytes(int64_t cols);
size_t kq80x8_bytes(int64_t rows, int64_t cols);
void kq80x8_repack(const uint8_t *w, size_t rb, int64_t rows, int64_t cols, uint8_t *dst);
void kq80x8_dot_group(const uint8_t *gp, int cols, struct qx_view x, float *r);
// The CPU backend's repacked copy of w (a Q4_K, Q6_K or Q8_0 weight, cpu_backend.c), or NULL where it holds none.
const uint8_t *cpu_kq8_of(const struct cpu_backend *c, const struct weight *w);
// Whether cpu_quant_matmul takes weights of t, and out[n][rows] = x[n][cols]·Wᵀ through it (x quantized
// once per call, each output one integer dot product: results do not depend on n or the thread count).
int cpu_quant_takes(enum dtype t);
void cpu_quant_matmul(struct cpu_backend *c, float *out, const float *x, const struct weight *w, int n);

#endif
