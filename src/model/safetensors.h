// safetensors.h — a Hugging Face model directory: config.json, one or many
// *.safetensors files (model.safetensors or a sharded model.safetensors.index.json),
// each memory-mapped or read into memory (owns: their bytes, the parsed headers, the config JSON).
// Invariant: every tensor's byte range is checked against its file and its shape×dtype
// at open time; a bad file fails st_open with a message naming the file and tensor.
// Tensors are read in place, so each must start at a multiple of its element size in the
// file: the format pads the header to a multiple of 8 bytes, and a file whose header length
// leaves a tensor misaligned is refused (naming the tensor and the header length), not copied.
#ifndef OCTET_SAFETENSORS_H
#define OCTET_SAFETENSORS_H

#include <jansson.h>

#include "../base/dtype.h"
#include "weights_mem.h"

struct st_dir;

// Opens directory `dir` (must contain config.json and weights). Supported dtypes:
// F32, F16, BF16, F8_E4M3, F8_E5M2, I32, I64 (others: OCT_EUNSUP naming the tensor).
// Shapes are reported in GGUF order (ne[0] = last safetensors dim).
int st_open(struct st_dir **out, const char *dir);
// Same, each file mapped (WEIGHTS_LOAD_MMAP, AUTO) or read into 2 MiB-page memory (READ: weights_mem.h).
int st_open_load(struct st_dir **out, const char *dir, enum weights_load how);
void st_close(struct st_dir *d);
const char *st_path(const struct st_dir *d);
// Adds how each file's bytes are held to *info.
void st_weights_info(const struct st_dir *d, struct weights_load_info *info);
// config.json as parsed by jansson (borrowed; lives as long as d).
const json_t *st_config(const struct st_dir *d);
int st_n_tensors(const struct st_dir *d);
const struct tensor_info *st_tensor(const struct st_dir *d, int i);
const struct tensor_info *st_find_tensor(const struct st_dir *d, const char *name); // NULL if absent

#endif
