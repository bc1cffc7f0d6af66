// dtype.h — element types and the tensor view shared by the model loaders and backends.
// Owns: enum dtype, its sizes, block layouts and names, struct tensor_info (a view into mapped file
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
    DT_Q8_0,  // GGUF Q8_0: blocks of 32 elements, 34 bytes: f16 scale d, int8 q[32]; w = d·q
    DT_Q4_0,  // GGUF Q4_0: blocks of 32 elements, 18 bytes: f16 scale d, 16 bytes whose low nibbles
              // are elements 0..15 and high nibbles 16..31; w = d·(nibble - 8)
    DT_COUNT
};

#define QK8_0 32  // elements per Q8_0 block
#define QK4_0 32  // elements per Q4_0 block

// Bytes per element of `t` (1, 2, 4 or 8); 0 for the block types (Q8_0, Q4_0): use dtype_row_bytes.
size_t dtype_size(enum dtype t);
// Elements per block: 1 for the element types, 32 for Q8_0 and Q4_0.
int dtype_block_elems(enum dtype t);
// Bytes per block: dtype_size for the element types, 34 (Q8_0), 18 (Q4_0); 0 if unknown.
size_t dtype_block_bytes(enum dtype t);
// Bytes of n contiguous elements; 0 if n is not a whole number of blocks or t is unknown.
size_t dtype_row_bytes(enum dtype t, int64_t n);
// Alignment a tensor of t needs to be read in place: its element size, or 2 (the f16 scale) for blocks.
size_t dtype_align(enum dtype t);
// Lower-case name: "f32", "f16", "bf16", "fp8_e4m3", "fp8_e5m2", "i32", "i64", "q8_0", "q4_0".
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
