// weight.h — one weight matrix as the backends see it (owns: struct weight and the FP8 scale
// schemes of struct weight_fp8). The model layer fills it from a checkpoint (model.h, or
// quant_fp8.c at load); a backend's weight_upload sets dev. The FP8 math is docs/fp8_weights.md.
#ifndef OCTET_WEIGHT_H
#define OCTET_WEIGHT_H

#include <stdbool.h>
#include <stdint.h>

#include "../base/dtype.h"

// How an fp8_e4m3 weight's f32 scales cover it: element (r, c) = e4m3 value × scale.
enum wscale {
    WSCALE_TENSOR = 0,   // one scale: scale[0]
    WSCALE_CHANNEL,      // one per output row: scale[r]
    WSCALE_BLOCK,        // one per block×block tile: scale[r / block][c / block], a row of ceil(cols/block)
};

// How the activations x multiplying an fp8 weight are quantized (each row of x to the activation dtype).
enum ascale {
    ASCALE_DYNAMIC_TOKEN = 0,  // per token at run time: scale = amax(|x row|) / max of the dtype
    ASCALE_STATIC_TENSOR,      // one scale from the checkpoint (input_scale) for every token
};

// The FP8 parts of a DT_E4M3 weight (zero for every other dtype).
struct weight_fp8 {
    enum wscale wscale;
    int block;              // WSCALE_BLOCK: the tile edge (128)
    const float *scale;     // [1], [rows] or [ceil(rows/block)][ceil(cols/block)] (model-owned)
    enum ascale ascale;
    float input_scale;      // ASCALE_STATIC_TENSOR: the activation scale (> 0)
    bool act_e5m2;          // activations go to e5m2 (max 57344) instead of e4m3 (max 448): the SwiGLU gate
};

struct weight {
    enum dtype dtype;     // F32, F16, BF16 or E4M3 (with fp8); the CPU backend's matmul also takes Q8_0 and Q4_0
    int64_t rows, cols;   // [rows][cols], cols contiguous (1-D weights: rows = 1)
    const void *data;     // host bytes, rows*cols elements (rows of dtype_row_bytes(dtype, cols) for blocks)
    void *dev;            // backend copy or alias (set by backend weight_upload)
    struct weight_fp8 fp8;
    uint32_t dev_flags;   // what the backend's weight_upload records of dev's layout with it (cuda: CUDA_WFLAG_*)
};

// Number of f32 scales of an fp8 weight (1, rows, or the block grid).
static inline int64_t weight_fp8_n_scales(const struct weight *w) {
    if (w->fp8.wscale == WSCALE_CHANNEL) return w->rows;
    if (w->fp8.wscale == WSCALE_BLOCK) {
        int64_t b = w->fp8.block;
        return ((w->rows + b - 1) / b) * ((w->cols + b - 1) / b);
    }
    return 1;
}

#endif
