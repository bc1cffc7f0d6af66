// cuda_gemm_inv.cuh — the batch-invariant GEMM of --batch-invariant (included by cuda_gemm.cu):
// out[n][rows] = x[n][cols] · W[rows][cols]ᵀ, BF16 in, f32 accumulation, BF16 or f32 out, for any n.
// Every output element is the same
// sum in the same order whatever n is and whichever rows share its tile, so a token's
// projections in a 2048-row prefill equal those of its 1-row decode step bit for bit.
// Shape: a CTA = 16 rows of x × 8 weight rows, 4 warps. Warp w takes the 32-wide K chunks
// w, w+4, w+8, … and runs two mma.sync m16n8k16 per chunk (f32 accumulators, chunks in
// ascending order); the 4 partial tiles are added in shared memory as ((w0 + w1) + w2) + w3.
// K layout trick: a lane (g = lane/4, t = lane%4) loads 8 consecutive values [8t, 8t+8) of a
// chunk (16 bytes) from its weight row and from x rows g and g+8; MMA 0 takes the first four as
// its k pairs {2t, 2t+1} and {2t+8, 2t+9}, MMA 1 the last four — a fixed permutation of k,
// the same for A and B, so each product is still x·w. Missing x rows and weight rows read as
// zero. Needs cols % 8 == 0 and 16-byte aligned rows (else the caller falls back).
// Cost: tiles are small, so a long prefill runs far below cuBLASLt; that is the price of the mode.
#pragma once

#define GEMM_INV_UNROLL 4  // chunks loaded before their MMAs

__device__ __forceinline__ void mma_bf16_16816(float *d, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                               uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// 16 bytes of row `r` at element k (zero when the row or the run is missing).
__device__ __forceinline__ uint4 inv_load(const bf16 *base, int r, int nrows, int k, int cols) {
    if (r >= nrows || k + 8 > cols) return make_uint4(0, 0, 0, 0);
    return *(const uint4 *)(base + (size_t)r * cols + k);
}

template <typename OUT>
__global__ void __launch_bounds__(128) k_gemm_inv(OUT *out /*[n][rows]*/, const bf16 *x /*[n][cols]*/,
                                                  const bf16 *w /*[rows][cols]*/, int n, int rows, int cols) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int m0 = blockIdx.y * 16, n0 = blockIdx.x * 8;
    const int chunks = (cols + 31) / 32;
    float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int c0 = warp; c0 < chunks; c0 += 4 * GEMM_INV_UNROLL) {
        uint4 wv[GEMM_INV_UNROLL], xa[GEMM_INV_UNROLL], xb[GEMM_INV_UNROLL];
#pragma unroll
        for (int u = 0; u < GEMM_INV_UNROLL; u++) {
            int k = (c0 + 4 * u) * 32 + 8 * t;  // beyond the last chunk: k >= cols, zeros
            wv[u] = inv_load(w, n0 + g, rows, k, cols);
            xa[u] = inv_load(x, m0 + g, n, k, cols);
            xb[u] = inv_load(x, m0 + g + 8, n, k, cols);
        }
#pragma unroll
        for (int u = 0; u < GEMM_INV_UNROLL; u++) {
            if (c0 + 4 * u >= chunks) break;  // (zeros would add nothing; skip the MMAs)
            mma_bf16_16816(d, xa[u].x, xb[u].x, xa[u].y, xb[u].y, wv[u].x, wv[u].y);
            mma_bf16_16816(d, xa[u].z, xb[u].z, xa[u].w, xb[u].w, wv[u].z, wv[u].w);
        }
    }
    __shared__ float red[4][32][4];
#pragma unroll
    for (int i = 0; i < 4; i++) red[warp][lane][i] = d[i];
    __syncthreads();
    if (warp != 0) return;
    float s[4];
#pragma unroll
    for (int i = 0; i < 4; i++) s[i] = ((red[0][lane][i] + red[1][lane][i]) + red[2][lane][i]) + red[3][lane][i];
    // s[0], s[1]: x row m0+g, weight rows n0+2t, +1; s[2], s[3]: x row m0+g+8
#pragma unroll
    for (int h = 0; h < 2; h++) {
        int m = m0 + g + 8 * h;
        if (m >= n) continue;
#pragma unroll
        for (int j = 0; j < 2; j++) {
            int r = n0 + 2 * t + j;
            if (r >= rows) continue;
            if constexpr (sizeof(OUT) == 4) out[(size_t)m * rows + r] = s[2 * h + j];
            else out[(size_t)m * rows + r] = __float2bfloat16_rn(s[2 * h + j]);
        }
    }
}

// True when the invariant GEMM takes this product (and launches it).
template <typename OUT>
static bool gemm_inv_launch(cudaStream_t st, OUT *out, const bf16 *x, const bf16 *w, int64_t rows, int64_t cols,
                            int n) {
    if (n < 1 || cols % 8 || ((uintptr_t)w | (uintptr_t)x) % 16 || rows > (int64_t)1 << 30 || cols > (int64_t)1 << 30)
        return false;
    dim3 grid((unsigned)((rows + 7) / 8), (unsigned)((n + 15) / 16));
    if (grid.y > 65535) return false;
    k_gemm_inv<OUT><<<grid, 128, 0, st>>>(out, x, w, n, (int)rows, (int)cols);
    return true;
}
