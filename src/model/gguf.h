// gguf.h — read-only GGUF v2/v3 files, memory-mapped or read into memory (owns: the mapping and the parsed
// metadata/tensor index; not: interpretation of keys as a model config).
// Invariant: every offset and length is validated against the file size at open time,
// so no accessor can read outside the mapping; a bad file fails gguf_open with a message
// naming the path and the key or tensor at fault.
#ifndef OCTET_GGUF_H
#define OCTET_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../base/dtype.h"
#include "weights_mem.h"

// GGUF metadata value types (values as in the GGUF spec).
enum gguf_type {
    GGUF_U8 = 0, GGUF_I8 = 1, GGUF_U16 = 2, GGUF_I16 = 3, GGUF_U32 = 4, GGUF_I32 = 5,
    GGUF_F32 = 6, GGUF_BOOL = 7, GGUF_STRING = 8, GGUF_ARRAY = 9, GGUF_U64 = 10,
    GGUF_I64 = 11, GGUF_F64 = 12,
};

struct gguf;

// Maps and parses `path`. Tensor types supported: F32, F16, BF16 (others: OCT_EUNSUP
// naming the tensor and its ggml type). On error *out is NULL and err_msg() explains.
int gguf_open(struct gguf **out, const char *path);
// Same, with the file mapped (WEIGHTS_LOAD_MMAP, AUTO) or read into 2 MiB-page memory (READ: weights_mem.h).
int gguf_open_load(struct gguf **out, const char *path, enum weights_load how);
// Same as gguf_open, but parses `n_bytes` at `data` (not copied: the caller keeps the
// bytes alive and unchanged until gguf_close). `name` stands in for the path in messages.
// Tensor data is aligned only as far as `data` itself is. Used by tests and the fuzzer.
int gguf_open_mem(struct gguf **out, const void *data, size_t n_bytes, const char *name);
void gguf_close(struct gguf *g);
const char *gguf_path(const struct gguf *g);
// How the file's bytes are held (zero for gguf_open_mem).
const struct weights_mem *gguf_weights_mem(const struct gguf *g);
int gguf_version(const struct gguf *g);

// Metadata lookups. Each returns 0 on success, OCT_EINVAL if the key is absent
// (without setting a message: absence is often fine) or has an incompatible type
// (with a message naming the key and both types).
bool gguf_has_key(const struct gguf *g, const char *key);
int gguf_get_int(const struct gguf *g, const char *key, int64_t *out);   // any integer type or bool
int gguf_get_float(const struct gguf *g, const char *key, double *out);  // f32/f64 or any integer
int gguf_get_bool(const struct gguf *g, const char *key, bool *out);
// String value: not NUL-terminated; points into the mapping.
int gguf_get_str(const struct gguf *g, const char *key, const char **s, size_t *len);
// Array value: element type and count.
int gguf_get_arr_info(const struct gguf *g, const char *key, enum gguf_type *elem, size_t *n);
// Numeric array data (elem type must not be STRING/ARRAY): pointer to n packed elements
// of the element type, inside the mapping (may be unaligned: copy with memcpy).
int gguf_get_arr_data(const struct gguf *g, const char *key, const void **data);
// i-th string of a string array (O(1): offsets are indexed at open).
int gguf_get_arr_str(const struct gguf *g, const char *key, size_t i, const char **s, size_t *len);

// Tensors, in file order. data points into the mapping and is read in place, so open refuses a
// tensor that does not start at a multiple of its element size in the file (possible under a
// general.alignment of 1 or 2), naming it and the alignment; llama.cpp's writers use 32.
int gguf_n_tensors(const struct gguf *g);
const struct tensor_info *gguf_tensor(const struct gguf *g, int i);
const struct tensor_info *gguf_find_tensor(const struct gguf *g, const char *name); // NULL if absent

#endif
