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
    // K-quants: super-blocks of 256 elements (QK_K), sub-blocks with 6-bit (Q4_K/Q5_K) or int8 (Q6_K)
    // scales under an f16 super-scale; the exact layouts are in backend/cpu/cpu_kquant.c.
    DT_Q4_K,  // 144 bytes: f16 d, f16 dmin, 12 bytes of packed 6-bit scales and mins, 128 bytes of nibbles
    DT_Q5_K,  // 176 bytes: as Q4_K plus 32 bytes of fifth bits (qh) before the nibbles
    DT_Q6_K,  // 210 bytes: 128 bytes of low nibbles, 64 of high 2-bit pairs, int8 scales[16], f16 d
    // OCP MXFP4 (gpt-oss experts): blocks of 32 elements, 17 bytes: one e8m0 exponent s (scale 2^(s-127);
    // 255 is NaN), then 16 bytes whose low nibble is element 2i and high nibble element 2i+1 (HF's order),
    // each an e2m1 code: bit 3 the sign, bits 0-2 index {0, 0.5, 1, 1.5, 2, 3, 4, 6}; w = code value * scale
    DT_MXFP4,
    DT_U8,    // bytes (safetensors U8: MXFP4's *_blocks and *_scales before they are packed)
    // GGUF's MXFP4 (ggml type 39) as the file holds it: DT_MXFP4's 17-byte blocks with the nibbles in
    // llama.cpp's order (byte i: element i low, element i + 16 high). The GGUF loader repacks it to
    // DT_MXFP4; nothing computes with it.
    DT_MXFP4_GGML,
    DT_COUNT
};

#define QK8_0 32  // elements per Q8_0 block
#define QK4_0 32  // elements per Q4_0 block
#define QK_K 256  // elements per K-quant super-block
#define QK_MXFP4 32  // elements per MXFP4 block

// Bytes per element of `t` (1, 2, 4 or 8); 0 for the block types (Q8_0, Q4_0, Q*_K, MXFP4s): use dtype_row_bytes.
size_t dtype_size(enum dtype t);
// Elements per block: 1 for the element types, 32 for Q8_0, Q4_0 and the MXFP4s, 256 for the K-quants.
int dtype_block_elems(enum dtype t);
// Bytes per block: dtype_size for the element types, 34 (Q8_0), 18 (Q4_0), 144 (Q4_K), 176 (Q5_K),
// 210 (Q6_K), 17 (the MXFP4s); 0 if unknown.
size_t dtype_block_bytes(enum dtype t);
// Bytes of n contiguous elements; 0 if n is not a whole number of blocks or t is unknown.
size_t dtype_row_bytes(enum dtype t, int64_t n);
// Alignment a tensor of t needs to be read in place: its element size, 2 (the f16 scales) for the GGUF
// blocks, 1 for the MXFP4s (byte scales).
size_t dtype_align(enum dtype t);
// Whether t is a block type (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, the MXFP4s): rows are dtype_row_bytes long.
int dtype_is_block(enum dtype t);
// Lower-case name: "f32", "f16", "bf16", "fp8_e4m3", "fp8_e5m2", "i32", "i64", "q8_0", "q4_0", "q4_k",
// "q5_k", "q6_k", "mxfp4", "u8", "mxfp4_ggml".
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
