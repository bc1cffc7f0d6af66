// cuda_kv_store.cuh — the per-element arithmetic of writing K and V into the paged cache and of
// RoPE, shared by every kernel that does either (cuda_kv_write.cu's kv_write and rope_kv_write,
// and the skinny GEMM's Q|K|V launch with RoPE and the cache write in its epilogue,
// cuda_gemv.cuh), so that all of them give the CPU backend's bytes.
// The includer defines bf16 (__nv_bfloat16).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <stdint.h>

extern "C" {
#include "../../base/dtype.h"
}

// Same rule as src/base/fp8.h: RNE, saturating to ±max, NaN → 0x7F; IEEE division.
__device__ __forceinline__ uint8_t to_fp8(float x, float scale, __nv_fp8_interpretation_t kind) {
    if (isnan(x)) return 0x7F;
    float y = __fdiv_rn(x, scale);
    if (isnan(y)) return 0x7F;
    return (uint8_t)__nv_cvt_float_to_fp8(y, __NV_SATFINITE, kind);
}

// One value f into a cache at dst (cache element index) as dtype dt with the head's scale sc; raw
// is the bf16 it came from, stored as it is in a bf16 cache.
__device__ __forceinline__ void elem_store(void *cache, size_t dst, float f, bf16 raw, int dt, float sc) {
    switch (dt) {
    case DT_F32: ((float *)cache)[dst] = f; break;
    case DT_F16: ((__half *)cache)[dst] = __float2half_rn(f); break;
    case DT_BF16: ((bf16 *)cache)[dst] = raw; break;
    case DT_E4M3: ((uint8_t *)cache)[dst] = to_fp8(f, sc, __NV_E4M3); break;
    case DT_E5M2: ((uint8_t *)cache)[dst] = to_fp8(f, sc, __NV_E5M2); break;
    }
}

// One element of K (kb, roped) into the K pages; ko_d: the element's channel K offset (subtracted
// in f32, as the CPU does, before an FP8 store) or NULL.
__device__ __forceinline__ void k_store(void *kc, size_t dst, bf16 kb, int dt, float ks, const float *ko_d) {
    float kv = __bfloat162float(kb);
    if (ko_d && (dt == DT_E4M3 || dt == DT_E5M2)) kv = __fsub_rn(kv, *ko_d);
    elem_store(kc, dst, kv, kb, dt, ks);
}

// One element of V into the V pages.
__device__ __forceinline__ void v_store(void *vc, size_t dst, bf16 vb, int dt, float vs) {
    elem_store(vc, dst, __bfloat162float(vb), vb, dt, vs);
}

// One element pair's K and V into the pages at dst.
__device__ __forceinline__ void kv_store(void *kc, void *vc, size_t dst, bf16 kb, bf16 vb, int dt, float ks, float vs,
                                         const float *ko_d) {
    k_store(kc, dst, kb, dt, ks, ko_d);
    v_store(vc, dst, vb, dt, vs);
}

// Element d of KV head h of the token in slot s: its index in a cache laid out
// [n_blocks][n_kv][bs][hd] (docs/kv_format.md).
__device__ __forceinline__ size_t kv_index(int s, int h, int d, int n_kv, int bs, int hd) {
    return (((size_t)(s / bs) * n_kv + h) * bs + s % bs) * hd + d;
}

// RoPE of one pair (x0, x1) at position pos with the pair's inverse frequency: the angle in double,
// as the CPU backend (k_rope, k_rope_kv_write and the GEMM's epilogue share it, so their numbers agree).
// rope_angle gives the pair's factors once (a kernel that rotates several heads at one position
// reuses them), rope_rotate applies them; rope_pair is the two.
__device__ __forceinline__ void rope_angle(int pos, double inv_freq, float attn_factor, float &c, float &sn) {
    double s, cs;
    sincos((double)pos * inv_freq, &s, &cs);
    c = (float)cs * attn_factor;
    sn = (float)s * attn_factor;
}
__device__ __forceinline__ void rope_rotate(bf16 &x0, bf16 &x1, float c, float sn) {
    const float a = __bfloat162float(x0), b = __bfloat162float(x1);
    x0 = __float2bfloat16_rn(a * c - b * sn);
    x1 = __float2bfloat16_rn(a * sn + b * c);
}
__device__ __forceinline__ void rope_pair(bf16 &x0, bf16 &x1, int pos, double inv_freq, float attn_factor) {
    float c, sn;
    rope_angle(pos, inv_freq, attn_factor, c, sn);
    rope_rotate(x0, x1, c, sn);
}
