// dtype.c — sizes, block layouts and names of the element types in dtype.h.
#include "dtype.h"

size_t dtype_size(enum dtype t) {
    switch (t) {
    case DT_F32: case DT_I32: return 4;
    case DT_F16: case DT_BF16: return 2;
    case DT_E4M3: case DT_E5M2: case DT_U8: return 1;
    case DT_I64: return 8;
    default: return 0;
    }
}

int dtype_block_elems(enum dtype t) {
    switch (t) {
    case DT_Q8_0: return QK8_0;
    case DT_Q4_0: return QK4_0;
    case DT_MXFP4: case DT_MXFP4_GGML: return QK_MXFP4;
    case DT_Q4_K: case DT_Q5_K: case DT_Q6_K: return QK_K;
    default: return 1;
    }
}

size_t dtype_block_bytes(enum dtype t) {
    switch (t) {
    case DT_Q8_0: return 2 + QK8_0;
    case DT_Q4_0: return 2 + QK4_0 / 2;
    case DT_Q4_K: return 4 + 12 + QK_K / 2;
    case DT_Q5_K: return 4 + 12 + QK_K / 8 + QK_K / 2;
    case DT_Q6_K: return QK_K / 2 + QK_K / 4 + QK_K / 16 + 2;
    case DT_MXFP4: case DT_MXFP4_GGML: return 1 + QK_MXFP4 / 2;
    default: return dtype_size(t);
    }
}

size_t dtype_row_bytes(enum dtype t, int64_t n) {
    int be = dtype_block_elems(t);
    if (n < 0 || n % be) return 0;
    return (size_t)(n / be) * dtype_block_bytes(t);
}

size_t dtype_align(enum dtype t) {
    if (t == DT_MXFP4 || t == DT_MXFP4_GGML) return 1;
    return dtype_block_elems(t) > 1 ? 2 : dtype_size(t);
}

int dtype_is_block(enum dtype t) { return dtype_block_elems(t) > 1; }

const char *dtype_name(enum dtype t) {
    static const char *names[DT_COUNT] = {"f32", "f16", "bf16", "fp8_e4m3", "fp8_e5m2", "i32", "i64", "q8_0", "q4_0",
                                             "q4_k", "q5_k", "q6_k", "mxfp4", "u8", "mxfp4_ggml"};
    return (unsigned)t < DT_COUNT ? names[t] : "?";
}

int64_t tensor_n_elems(const struct tensor_info *t) {
    int64_t n = 1;
    for (int i = 0; i < t->n_dims; i++) n *= t->ne[i];
    return n;
}
