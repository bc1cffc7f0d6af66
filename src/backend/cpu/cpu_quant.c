// cpu_quant.c — GGUF Q8_0 and Q4_0 weights on the CPU: the scalar reference dequantizers (exact: a scale
// times a quant is exact in f32), the dispatch of every block type's dequantizer (quant_row_to_f32: token
// embeddings, inspection tools, MXFP4 rows), and quant_dot_rows, the f32 product of the block types without
// an integer kernel (a row dequantized, then cpu_dot). The matmul of Q8_0, Q4_0 and the K-quants is
// cpu_qdot.c's integer product.
#include <string.h>

#include "../../base/half.h"
#include "cpu.h"
#include "cpu_quant.h"

void q8_0_row_to_f32(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / QK8_0; b++, p += 2 + QK8_0) {
        float d = quant_f16(p);
        for (int j = 0; j < QK8_0; j++) dst[b * QK8_0 + j] = d * (float)(int8_t)p[2 + j];
    }
}

void q4_0_row_to_f32(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / QK4_0; b++, p += 2 + QK4_0 / 2) {
        float d = quant_f16(p);
        for (int j = 0; j < QK4_0 / 2; j++) {
            dst[b * QK4_0 + j] = d * (float)((p[2 + j] & 0x0F) - 8);
            dst[b * QK4_0 + j + QK4_0 / 2] = d * (float)((p[2 + j] >> 4) - 8);
        }
    }
}

int quant_row_to_f32(enum dtype t, const void *src, float *dst, int64_t n) {
    if (t == DT_Q8_0) q8_0_row_to_f32(src, dst, n);
    else if (t == DT_Q4_0) q4_0_row_to_f32(src, dst, n);
    else if (t == DT_Q4_K) q4_k_row_to_f32(src, dst, n);
    else if (t == DT_Q5_K) q5_k_row_to_f32(src, dst, n);
    else if (t == DT_Q6_K) q6_k_row_to_f32(src, dst, n);
    else if (t == DT_MXFP4) mxfp4_row_to_f32(src, dst, n);  // (cpu_moe.c: gpt-oss's experts)
    else return -1;
    return 0;
}

void quant_dot_rows(enum dtype t, const void *w, size_t row_bytes, int nr, const float *x, int n, float *tmp,
                    float *r) {
    for (int k = 0; k < nr; k++) {
        quant_row_to_f32(t, (const uint8_t *)w + k * row_bytes, tmp, n);
        r[k] = cpu_dot(x, tmp, n);
    }
}
