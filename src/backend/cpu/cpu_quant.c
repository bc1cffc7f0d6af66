// cpu_quant.c — GGUF Q8_0 and Q4_0 weights on the CPU (the K-quants are in cpu_kquant.c, dispatched
// from here): the scalar reference dequantizers (what the prefill path widens a row with) and the
// decode dot products, which dequantize each
// 32-element block in registers (AVX-512) and accumulate in cpu_dot's order: a block's first 16
// elements into one accumulator, its last 16 into the other. A scale times a quant is exact in
// f32 (11 + 8 significant bits), so the in-register and widened values are the same numbers and
// decode equals prefill bit for bit. Without AVX-512 a row is widened into tmp and cpu_dot runs.
#include <string.h>

#include "../../base/half.h"
#include "cpu.h"
#include "cpu_quant.h"
#if defined(__AVX512F__) || defined(__F16C__)
#include <immintrin.h>
#endif

static inline float scale_of(const uint8_t *blk) {
    uint16_t h;
    memcpy(&h, blk, 2);
#if defined(__F16C__)
    return _cvtsh_ss(h);
#else
    return f16_to_f32(h);
#endif
}

void q8_0_row_to_f32(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / QK8_0; b++, p += 2 + QK8_0) {
        float d = scale_of(p);
        for (int j = 0; j < QK8_0; j++) dst[b * QK8_0 + j] = d * (float)(int8_t)p[2 + j];
    }
}

void q4_0_row_to_f32(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / QK4_0; b++, p += 2 + QK4_0 / 2) {
        float d = scale_of(p);
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

// Prefetch distance, bytes ahead in each row: without it Q8_0 decode read 8-18 GB/s, with 512
// about 22 (dev/cpu/gemv_bench, 2 threads, shared machine)
#define QPF 512
#if defined(__AVX512F__)
// The two 16-element halves of one block, as f32 (scale applied).
static inline void q8_0_block(const uint8_t *p, __m512 *lo, __m512 *hi) {
    __m512 d = _mm512_set1_ps(scale_of(p));
    __m128i q0 = _mm_loadu_si128((const __m128i *)(p + 2)), q1 = _mm_loadu_si128((const __m128i *)(p + 18));
    *lo = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q0)));
    *hi = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q1)));
}

static inline void q4_0_block(const uint8_t *p, __m512 *lo, __m512 *hi) {
    __m512 d = _mm512_set1_ps(scale_of(p));
    __m128i q = _mm_loadu_si128((const __m128i *)(p + 2)), m = _mm_set1_epi8(0x0F);
    __m512i eight = _mm512_set1_epi32(8);
    __m512i l = _mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm_and_si128(q, m)), eight);
    __m512i h = _mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(q, 4), m)), eight);
    *lo = _mm512_mul_ps(d, _mm512_cvtepi32_ps(l));
    *hi = _mm512_mul_ps(d, _mm512_cvtepi32_ps(h));
}

static inline __attribute__((always_inline)) void qdot(const uint8_t *w, size_t rb, int nr, const float *x, int n,
                                                       int q4, float *r) {
    __m512 a[4], b[4];
    size_t bb = q4 ? 2 + QK4_0 / 2 : 2 + QK8_0;
#pragma GCC unroll 4
    for (int k = 0; k < nr; k++) a[k] = b[k] = _mm512_setzero_ps();
    for (int i = 0, blk = 0; i < n; i += 32, blk++) {
        __m512 xl = _mm512_loadu_ps(x + i), xh = _mm512_loadu_ps(x + i + 16);
#pragma GCC unroll 4
        for (int k = 0; k < nr; k++) {
            __m512 lo, hi;
            _mm_prefetch((const char *)w + k * rb + blk * bb + QPF, _MM_HINT_T0);
            if (q4) q4_0_block(w + k * rb + blk * bb, &lo, &hi);
            else q8_0_block(w + k * rb + blk * bb, &lo, &hi);
            a[k] = _mm512_fmadd_ps(xl, lo, a[k]);
            b[k] = _mm512_fmadd_ps(xh, hi, b[k]);
        }
    }
#pragma GCC unroll 4
    for (int k = 0; k < nr; k++) r[k] = _mm512_reduce_add_ps(_mm512_add_ps(a[k], b[k]));
}
#endif

void quant_dot_rows(enum dtype t, const void *w, size_t row_bytes, int nr, const float *x, int n, float *tmp,
                    float *r) {
    if (t != DT_Q8_0 && t != DT_Q4_0) {  // the K-quants
        if (kquant_dot_rows(t, w, row_bytes, nr, x, n, r) == 0) return;
        for (int k = 0; k < nr; k++) {
            quant_row_to_f32(t, (const uint8_t *)w + k * row_bytes, tmp, n);
            r[k] = cpu_dot(x, tmp, n);
        }
        return;
    }
#if defined(__AVX512F__)
    if (t == DT_Q4_0) {
        if (nr == 4) qdot(w, row_bytes, 4, x, n, 1, r);
        else for (int k = 0; k < nr; k++) qdot((const uint8_t *)w + k * row_bytes, 0, 1, x, n, 1, r + k);
    } else {
        if (nr == 4) qdot(w, row_bytes, 4, x, n, 0, r);
        else for (int k = 0; k < nr; k++) qdot((const uint8_t *)w + k * row_bytes, 0, 1, x, n, 0, r + k);
    }
#else
    for (int k = 0; k < nr; k++) {
        quant_row_to_f32(t, (const uint8_t *)w + k * row_bytes, tmp, n);
        r[k] = cpu_dot(x, tmp, n);
    }
#endif
}
