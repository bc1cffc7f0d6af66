// dtype.h — element types and the tensor view shared by the model loaders and backends.
// Owns: enum dtype, its sizes and names, struct tensor_info (a view into mapped file
// bytes; it never owns memory). Shapes follow GGUF order: ne[0] is the contiguous
// (fastest) dimension, so a [out, in] PyTorch weight has ne = {in, out}.
#ifndef OCTET_DTYPE_H
#define OCTET_DTYPE_H

#include <stddef.h>
#include <stdint.h>

enum dtype {
    DT_F32 = 0,
    DT_F16,
    DT_BF16,
    DT_E4M3,  // OCP FP8 E4M3FN
    DT_E5M2,  // OCP FP8 E5M2
    DT_I32,
    DT_I64,
    DT_COUNT
};

// Bytes per element of `t` (1, 2, 4 or 8).
size_t dtype_size(enum dtype t);
// Lower-case name: "f32", "f16", "bf16", "fp8_e4m3", "fp8_e5m2", "i32", "i64".
const char *dtype_name(enum dtype t);

#define TENSOR_MAX_DIMS 4

struct tensor_info {
    const char *name;          // NUL-terminated, owned by the file object
    enum dtype dtype;
    int n_dims;                // 1..4
    int64_t ne[TENSOR_MAX_DIMS]; // ne[0] contiguous; unused dims are 1
    const void *data;          // points into the mapped file; n_bytes long
    size_t n_bytes;
};

// Number of elements (product of ne).
int64_t tensor_n_elems(const struct tensor_info *t);

#endif
