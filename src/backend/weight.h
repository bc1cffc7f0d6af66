// weight.h — one weight matrix as the backends see it (owns: struct weight). The model layer
// fills it from a checkpoint (model.h); a backend's weight_upload sets dev.
#ifndef OCTET_WEIGHT_H
#define OCTET_WEIGHT_H

#include <stdint.h>

#include "../base/dtype.h"

struct weight {
    enum dtype dtype;     // F32, F16 or BF16; the CPU backend's matmul also takes Q8_0 and Q4_0
    int64_t rows, cols;   // [rows][cols], cols contiguous (1-D weights: rows = 1)
    const void *data;     // host bytes, rows*cols elements (rows of dtype_row_bytes(dtype, cols) for blocks)
    void *dev;            // backend copy or alias (set by backend weight_upload)
};

#endif
