// cuda_fp8w.cuh — FP8 (e4m3) weights on the GPU (included by cuda_gemm.cu): their device layout, the
// per-token activation quantizer of the cuBLASLt products (k_fp8w_quant), and the skinny FP8 GEMM of
// decode steps (k_gemv8), which quantizes its rows of x in its own prologue (and, as a step's Q|K|V
// launch, applies RoPE and writes the cache in its epilogue). The math is
// docs/fp8_weights.md's, the CPU backend's (cpu_fp8w.c) the reference: activation codes and scales
// as the CPU computes them, every product of two fp8 values exact, sums in f32.
//
// Device layout of a weight (w->dev, one allocation, cuda_backend.cu's upload):
//   codes  [rows][kp] e4m3 bytes, kp = cols rounded up to 16 (cuBLASLt's FP8 alignment), zero-padded;
//   scales at fp8w_scale_off: WSCALE_TENSOR and WSCALE_CHANNEL: [rows] f32 (a tensor's one scale
//          repeated, so both take one path); WSCALE_BLOCK (128 only): [ceil(rows/128)][kbp] f32 with
//          kbp = ceil(cols/128) rounded up to 4 (the 128×128 block-scale layout cuBLASLt reads).
//
// k_gemv8 shape: a CTA owns 16 weight rows (the M of mma.sync m16n8k32) and up to 8 rows of x (its N);
// its GEMV8_WARPS warps take the 128-column chunks of K in turn (warp w: chunks w, w + WARPS, ...).
// In a chunk a lane loads 16 bytes of weight row g and of row g + 8 (g = lane / 4) and 16 bytes of
// x̂ row g from shared memory at column 16·(lane % 4) of each 64-column half, and four MMAs (k32 each)
// consume them: the k order inside an MMA is a permutation shared by both operands, so the sum is the
// same dot product. Each chunk's MMA sum (f32) is added into the lane's f32 totals (times the chunk's
// block scale for WSCALE_BLOCK), so no more than 128 products ever meet in the tensor core's own
// accumulator. The warps' totals meet in shared memory in a fixed order, so a token's results do not
// depend on n or on the other tokens (grid.y takes further groups of 8 tokens).
#pragma once

#include <cuda_fp8.h>

#include "cuda_gemv.cuh"
#include "cuda_pdl.cuh"
#include "cuda_rmsnorm.cuh"

#define GEMV8_WARPS 8
#define FP8W_BLOCK 128

// Bytes of a weight row on the device and the offset of its scales (see above).
static inline int64_t fp8w_pitch(int64_t cols) { return (cols + 15) / 16 * 16; }
static inline int64_t fp8w_kblocks(int64_t cols) { return (cols + FP8W_BLOCK - 1) / FP8W_BLOCK; }
static inline int64_t fp8w_kblocks_padded(int64_t cols) { return (fp8w_kblocks(cols) + 3) / 4 * 4; }
static inline size_t fp8w_scale_off(int64_t rows, int64_t cols) {
    return ((size_t)rows * (size_t)fp8w_pitch(cols) + 255) / 256 * 256;
}
static inline size_t fp8w_scale_count(const struct weight *w) {
    if (w->fp8.wscale == WSCALE_BLOCK)
        return (size_t)((w->rows + FP8W_BLOCK - 1) / FP8W_BLOCK) * (size_t)fp8w_kblocks_padded(w->cols);
    return (size_t)w->rows;
}

// How a product quantizes its activations (one weight's struct weight_fp8, as the kernels read it).
struct fp8w_act {
    float fmax;          // 448 (e4m3) or 57344 (e5m2)
    float fixed;         // > 0: the static per-tensor scale; 0: dynamic per token
    int e5m2;            // codes in e5m2
};
static inline fp8w_act fp8w_act_of(const struct weight *w) {
    fp8w_act a;
    a.e5m2 = w->fp8.act_e5m2;
    a.fmax = a.e5m2 ? 57344.0f : 448.0f;
    a.fixed = w->fp8.ascale == ASCALE_STATIC_TENSOR ? w->fp8.input_scale : 0.0f;
    return a;
}

__device__ __forceinline__ uint8_t fp8w_encode(float v, int e5m2) {
    return (uint8_t)__nv_cvt_float_to_fp8(v, __NV_SATFINITE, e5m2 ? __NV_E5M2 : __NV_E4M3);
}
// The codes of 8 bf16 values (one 16-byte run) times inv, in order.
__device__ __forceinline__ uint2 fp8w_encode8(const uint4 &v, float inv, int e5m2) {
    const __nv_bfloat162 *p = (const __nv_bfloat162 *)&v;
    uint8_t b[8];
#pragma unroll
    for (int e = 0; e < 4; e++) {
        const float2 f = __bfloat1622float2(p[e]);
        b[2 * e] = fp8w_encode(f.x * inv, e5m2);
        b[2 * e + 1] = fp8w_encode(f.y * inv, e5m2);
    }
    return *(const uint2 *)b;
}

// A row's scale from its absmax, as cpu_fp8w.c's fp8w_quant_row: amax / fmax, 1 for a zero (or
// non-finite) result; the static scale where there is one.
__device__ __forceinline__ float fp8w_row_scale(float amax, const fp8w_act &a) {
    if (a.fixed > 0) return a.fixed;
    float s = amax / a.fmax;
    return (s > 0 && isfinite(s)) ? s : 1.0f;
}

// The CTA's largest m (each thread's own; every thread calls it; red: 32 shared floats, free again when it
// returns). Its barriers also make what the CTA's threads wrote before it visible to all of them.
__device__ __forceinline__ float fp8w_cta_max(float m, float *red) {
    for (int s = 16; s > 0; s >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, s));
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = m;
    __syncthreads();
    if (threadIdx.x < 32) {
        float v = (int)threadIdx.x < (int)(blockDim.x + 31) / 32 ? red[threadIdx.x] : 0;
        for (int s = 16; s > 0; s >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, s));
        if (threadIdx.x == 0) red[0] = v;
    }
    __syncthreads();
    const float total = red[0];
    __syncthreads();  // (red is reused by the next row)
    return total;
}

// The CTA's absmax of one bf16 row (every thread calls it; red: 32 shared floats).
__device__ __forceinline__ float fp8w_row_amax(const bf16 *xr, int cols, float *red) {
    float m = 0;
    if (cols % 8 == 0 && (uintptr_t)xr % 16 == 0) {
        for (int i = threadIdx.x; i < cols / 8; i += blockDim.x) {
            uint4 v = ((const uint4 *)xr)[i];
            const __nv_bfloat162 *p = (const __nv_bfloat162 *)&v;
#pragma unroll
            for (int e = 0; e < 4; e++) {
                float2 f = __bfloat1622float2(p[e]);
                m = fmaxf(m, fmaxf(fabsf(f.x), fabsf(f.y)));
            }
        }
    } else {
        for (int i = threadIdx.x; i < cols; i += blockDim.x) m = fmaxf(m, fabsf(__bfloat162float(xr[i])));
    }
    return fp8w_cta_max(m, red);
}

// q[0, kp) = codes of xr[0, cols) · inv, zero past cols.
__device__ __forceinline__ void fp8w_row_encode(uint8_t *q, const bf16 *xr, int cols, int kp, float inv, int e5m2) {
    if (cols % 8 == 0 && (uintptr_t)xr % 16 == 0 && (uintptr_t)q % 8 == 0) {
        for (int i = threadIdx.x; i < cols / 8; i += blockDim.x)
            *(uint2 *)(q + 8 * i) = fp8w_encode8(((const uint4 *)xr)[i], inv, e5m2);
    } else {
        for (int i = threadIdx.x; i < cols; i += blockDim.x) q[i] = fp8w_encode(__bfloat162float(xr[i]) * inv, e5m2);
    }
    for (int i = cols + threadIdx.x; i < kp; i += blockDim.x) q[i] = 0;
}

// The cuBLASLt products' activations: row t of x (bf16 [n][cols]) into xq[t] (codes [n][kp]) and its
// scale into sx[j·n + t] for j < rep (block weights read one scale per 128 columns; every one is the
// token's). One CTA a row.
static __global__ void k_fp8w_quant(uint8_t *xq, float *sx, const bf16 *x, int n, int cols, int kp, fp8w_act a,
                                    int rep) {
    __shared__ float red[32];
    const int t = blockIdx.x;
    const bf16 *xr = x + (size_t)t * cols;
    const float s = fp8w_row_scale(a.fixed > 0 ? 0.0f : fp8w_row_amax(xr, cols, red), a);
    fp8w_row_encode(xq + (size_t)t * kp, xr, cols, kp, 1.0f / s, a.e5m2);
    if (threadIdx.x == 0)
        for (int j = 0; j < rep; j++) sx[(size_t)j * n + t] = s;
}

// What a k_gemv8 launch writes.
enum gemv8_policy {
    GEMV8_STORE,   // out = x·Wᵀ (bf16 or f32)
    GEMV8_ADD,     // out += x·Wᵀ (bf16: the residual add, the product rounded first as the add kernel sees it)
    GEMV8_SWIGLU,  // out = silu(x·Wᵀ) ⊙ (x·W2ᵀ) (bf16, each product rounded first as the silu_mul op sees them)
};

struct gemv8_w {
    const uint8_t *q;     // [rows][kp] codes
    const float *s;       // the scales (layout above)
    fp8w_act act;
};

struct gemv8_args {
    void *out;            // [n][rows]
    const bf16 *x;        // [n][cols] (NORM: the residual stream, normalised in the prologue)
    gemv8_w w, w2;        // w2: GEMV8_SWIGLU's up weight (w is the gate's)
    int n, rows, cols, kp, kbp;
    int tpc;              // tokens a CTA (<= 8; fewer where 8 rows of x̂ would not fit shared memory)
    int tiles;            // 16-row tiles of the launch (every segment's with SEG), taken gridDim.x apart
    // SEG (GEMV8_STORE): up to three weights of x's columns and activation scheme (Q, K and V) in one
    // launch; segment s owns the tiles from cta0[s] (w, out and rows above are unused)
    gemv8_w sw[3];
    void *sout[3];        // [n][srows[s]] each
    int srows[3], cta0[3];
    // NORM: x's RMSNorm first, with k_rmsnorm's arithmetic and norm_threads (its T) threads, so the
    // x̂ codes are those of k_rmsnorm's bf16 output
    const bf16 *norm;     // [cols]
    float eps;
    int norm_threads;
    // ROPE (SEG, decode steps): RoPE on Q and K and the cache write of K and V in the epilogue, as the
    // bf16 GEMM's GEMV_QKV_ROPE (cuda_gemv.cuh's gemv_rope; gemv8_rope_fits below says when)
    gemv_rope rp;
};

// Whether a Q|K|V launch of 16-row tiles can take RoPE and the cache write (ROPE): every tile inside one
// head, a neox tile's rows the 8 pairs (j, j + hd / 2), and a block-scaled tile inside one 128-row block.
static inline bool gemv8_rope_fits(const gemv_rope &rp, const int rows[3], bool block) {
    return rp.hd > 0 && rp.hd % 16 == 0 && (!rp.neox || rp.half * 2 == rp.hd) && rows[1] == rows[2] &&
           rows[1] == rp.n_kv * rp.hd && rows[0] % rp.hd == 0 && (!block || FP8W_BLOCK % rp.hd == 0);
}

// mma.sync m16n8k32, e4m3 A (16×32, row) times B (32×8, col) of e4m3 or e5m2, f32 accumulators.
template <bool BE5M2>
__device__ __forceinline__ void mma_fp8(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                        uint32_t b1) {
    if constexpr (BE5M2)
        asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    else
        asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// One 128-column chunk of one weight: the four MMAs of its two 64-column halves (wa: row g, wb: row
// g + 8, xb: x̂ row g), summed from zero.
template <bool BE5M2>
__device__ __forceinline__ void gemv8_chunk(float (&d)[4], const uint4 (&wa)[2], const uint4 (&wb)[2],
                                            const uint4 (&xb)[2]) {
    d[0] = d[1] = d[2] = d[3] = 0.0f;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        mma_fp8<BE5M2>(d, wa[h].x, wb[h].x, wa[h].y, wb[h].y, xb[h].x, xb[h].y);
        mma_fp8<BE5M2>(d, wa[h].z, wb[h].z, wa[h].w, wb[h].w, xb[h].z, xb[h].w);
    }
}

// Bytes of a k_gemv8 CTA's x̂ rows for nx tokens (16-byte aligned: the warps' totals follow them).
__host__ __device__ static inline size_t gemv8_xs_bytes(int kp, int nx, bool swiglu) {
    return ((swiglu ? 2 : 1) * (size_t)nx * (size_t)(kp + 16) + 15) / 16 * 16;
}
// Shared memory of a k_gemv8 launch with n tokens a CTA: the x̂ rows, then the warps' totals.
static inline size_t gemv8_smem(int kp, int n, bool swiglu) {
    const int nx = n < 8 ? n : 8;
    return gemv8_xs_bytes(kp, nx, swiglu) + (swiglu ? 2 : 1) * GEMV8_WARPS * 32 * 4 * sizeof(float);
}
// CTAs of a k_gemv8 launch of tiles 16-row tiles in gy groups of tokens: as many as the GPU holds at once
// (sms multiprocessors, blocks_per_sm each for the kernel and its shared memory), at most one a tile.
static inline unsigned gemv8_ctas(int tiles, int gy, int blocks_per_sm, int sms) {
    long cap = (long)blocks_per_sm * sms / (gy > 0 ? gy : 1);
    if (cap < 1) cap = 1;
    return (unsigned)(tiles < cap ? tiles : cap);
}

// BLOCK: WSCALE_BLOCK weights (a scale a chunk); E5M2 / E5M2_2: x̂ of w / w2 in e5m2.
// Persistent: a CTA quantizes its tokens once, then takes the 16-row tiles blockIdx.x, + gridDim.x, ...
// (gemv8_ctas: as many CTAs as fit the GPU at once), so the prologue is paid once a CTA, not once a
// tile. Each warp's chunks of its tiles form one stream: the next LA chunks' weights (of the next tile
// after a tile's last) are in flight during this chunk's MMAs and across the tile's reduction.
// Launched as a programmatic dependent (cuda_pdl.cuh): the first LA + 1 chunks' weights are requested
// before pdl_wait(), the only reads that do not depend on the kernel before it.
template <gemv8_policy P, typename OUT, bool BLOCK, bool E5M2, bool E5M2_2, bool NORM = false, bool SEG = false,
          bool ROPE = false>
__global__ void __launch_bounds__(GEMV8_WARPS * 32) k_gemv8(const __grid_constant__ gemv8_args a) {
    constexpr bool SW = P == GEMV8_SWIGLU;
    constexpr int NW = SW ? 2 : 1;
    static_assert(!SEG || P == GEMV8_STORE, "segments store their products");
    static_assert(!ROPE || (SEG && sizeof(OUT) == 2), "RoPE is the Q|K|V launch's");
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c4 = lane & 3;
    const int t0 = blockIdx.y * a.tpc;
    const int nt = min(a.tpc, a.n - t0), nx = min(a.tpc, a.n);  // this CTA's tokens; x̂ rows a weight
    const int kp = a.kp, xs_pitch = kp + 16;  // (+16: the rows of x̂ fall in different banks)
    const int nchunks = (kp + 127) / 128, ntiles = a.tiles;
    extern __shared__ __align__(16) uint8_t gemv8_xs[];  // [NW][nx][xs_pitch] x̂ codes, then the totals
    float *const tot = (float *)(gemv8_xs + gemv8_xs_bytes(kp, nx, SW));  // [NW][WARPS][32][4]
    __shared__ float sxs[NW][8];
    __shared__ float red[32];
    const gemv_rope &rp = a.rp;

    // A tile's segment (SEG: Q, K or V), its index there, and MMA row m's row in the segment (ROPE, a
    // neox tile of Q or K: rows j and j + hd / 2 of 8 rotation pairs).
    auto seg_of = [&](int tl) -> int {
        if constexpr (SEG) return tl >= a.cta0[2] ? 2 : tl >= a.cta0[1] ? 1 : 0;
        return 0;
    };
    auto row_of = [&](int sg, int tl, int m) -> int {
        const int tile = tl - (SEG ? a.cta0[sg] : 0);
        if constexpr (ROPE) {
            if (sg < 2 && rp.neox) {
                const int per_head = rp.hd / 16, p = tile % per_head;
                return (tile / per_head) * rp.hd + p * 8 + (m & 7) + (m >= 8 ? rp.half : 0);
            }
        }
        return tile * 16 + m;
    };
    auto wt = [&](int sg, int j) -> const gemv8_w & { return j ? a.w2 : SEG ? a.sw[sg] : a.w; };
    // the lane's weight runs of chunk ch of tile tl (zero past the row's end or past rows)
    // the stream's chunks in registers: slot 0 the one being multiplied, slots 1..LA requested ahead. One
    // matrix keeps two chunks ahead (64 KB of weights in flight an SM at the full grid: 1.1 % off an 8B
    // model's fp8 decode step on an H100 against one ahead, bench/fp8_weights/RESULTS.md); two matrices
    // (gate|up) keep one, as their registers hold twice the chunk.
    constexpr int LA = NW == 1 ? 2 : 1;
    uint4 qa[LA + 1][NW][2], qb[LA + 1][NW][2];
    auto load_w = [&](int tl, int ch, uint4 (&la)[NW][2], uint4 (&lb)[NW][2], bool ok = true) {
        const int sg = seg_of(tl), rows = SEG ? a.srows[sg] : a.rows;
        const int rowa = row_of(sg, tl, g), rowb = row_of(sg, tl, g + 8);
#pragma unroll
        for (int j = 0; j < NW; j++) {
            const uint8_t *q = wt(sg, j).q;
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int k = ch * 128 + h * 64 + c4 * 16;
                const bool in = ok && k < kp;
                const uint4 z = make_uint4(0, 0, 0, 0);
                la[j][h] = in && rowa < rows ? __ldcs((const uint4 *)(q + (size_t)rowa * kp + k)) : z;
                lb[j][h] = in && rowb < rows ? __ldcs((const uint4 *)(q + (size_t)rowb * kp + k)) : z;
            }
        }
    };
    // the first LA + 1 chunks' weights are in flight before the prologue needs x
    int tl = blockIdx.x, ch = warp;
    // (pt, pc): the stream position of the last chunk requested; the next is this tile's chunk pc + WARPS,
    // else the next tile's chunk warp
    int pt = tl, pc = warp;
    auto advance = [&]() {
        if (pc + GEMV8_WARPS < nchunks) pc += GEMV8_WARPS;
        else { pt += gridDim.x; pc = warp; }
    };
    if (ch < nchunks) {
        load_w(tl, ch, qa[0], qb[0]);
#pragma unroll
        for (int i = 1; i <= LA; i++) {
            advance();
            load_w(pt, pc, qa[i], qb[i], pt < ntiles);
        }
    }
    const gemv8_w *const ws[2] = {SEG ? &a.sw[0] : &a.w, &a.w2};  // (the segments share one activation scheme)
    pdl_wait();  // (x is the kernel before's output)
    // prologue: this CTA's rows of x quantized into shared memory (as k_fp8w_quant would)
    for (int t = 0; t < nt; t++) {
        const bf16 *xr = a.x + (size_t)(t0 + t) * a.cols;
        if constexpr (NORM) {  // k_rmsnorm's bf16 row in registers (rms_store's values), then its codes
            uint4 xv[RMS_VEC], nv[RMS_VEC];
            const int runs = a.cols / 8, T = a.norm_threads;
            const float ss = rms_partial(xr, a.norm, runs, T, xv, nv);
            const float r = rsqrtf(rms_reduce(ss, T, red) / a.cols + a.eps);
            float y[RMS_VEC][8], m = 0;
#pragma unroll
            for (int u = 0; u < RMS_VEC; u++) {
                const bool mine = (int)threadIdx.x < T && (int)threadIdx.x + u * T < runs;
                const __nv_bfloat162 *xp = (const __nv_bfloat162 *)&xv[u], *wp = (const __nv_bfloat162 *)&nv[u];
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    float2 xf = mine ? __bfloat1622float2(xp[e]) : make_float2(0, 0);
                    float2 gf = mine ? __bfloat1622float2(wp[e]) : make_float2(0, 0);
                    const __nv_bfloat162 o = __floats2bfloat162_rn(xf.x * r * gf.x, xf.y * r * gf.y);
                    y[u][2 * e] = __low2float(o);
                    y[u][2 * e + 1] = __high2float(o);
                    m = fmaxf(m, fmaxf(fabsf(y[u][2 * e]), fabsf(y[u][2 * e + 1])));
                }
            }
            for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, o));
            if (lane == 0) red[warp] = m;
            __syncthreads();
            float amax = 0;
#pragma unroll
            for (int w = 0; w < GEMV8_WARPS; w++) amax = fmaxf(amax, red[w]);
            __syncthreads();  // (red is reused by the next row)
#pragma unroll
            for (int j = 0; j < NW; j++) {
                const float s = fp8w_row_scale(amax, ws[j]->act), inv = 1.0f / s;
                uint8_t *q = gemv8_xs + ((size_t)j * nx + t) * xs_pitch;
#pragma unroll
                for (int u = 0; u < RMS_VEC; u++) {
                    const int i = threadIdx.x + u * T;
                    if ((int)threadIdx.x >= T || i >= runs) continue;
                    uint8_t b[8];
#pragma unroll
                    for (int e = 0; e < 8; e++) b[e] = fp8w_encode(y[u][e] * inv, ws[j]->act.e5m2);
                    *(uint2 *)(q + 8 * i) = *(const uint2 *)b;
                }
                for (int i = a.cols + threadIdx.x; i < kp; i += blockDim.x) q[i] = 0;
                if (threadIdx.x == 0) sxs[j][t] = s;
            }
        } else {
            const bool dyn = ws[0]->act.fixed == 0 || (SW && a.w2.act.fixed == 0);
            const float amax = dyn ? fp8w_row_amax(xr, a.cols, red) : 0.0f;
#pragma unroll
            for (int j = 0; j < NW; j++) {
                const float s = fp8w_row_scale(amax, ws[j]->act);
                fp8w_row_encode(gemv8_xs + ((size_t)j * nx + t) * xs_pitch, xr, a.cols, kp, 1.0f / s,
                                ws[j]->act.e5m2);
                if (threadIdx.x == 0) sxs[j][t] = s;
            }
        }
    }
    // tile tl's outputs from the warps' totals: thread (row slot i, token t) of the first 128 sums its
    // element (as the CPU: (s_x · s_w) once for tensor and channel scales; block sums carry theirs already)
    __shared__ bf16 rs[16][8];  // ROPE: the products as stored, by slot
    auto gemv8_store = [&](int sg, int tl, int rows) {
        void *const out_base = SEG ? a.sout[sg] : a.out;
        const int row0 = (tl - (SEG ? a.cta0[sg] : 0)) * 16;
        const int i = (threadIdx.x >> 3) & 15, t = threadIdx.x & 7, row = row_of(sg, tl, i);
        const bool mine = threadIdx.x < 128 && t < nt && row < rows;
        const int L = (i & 7) * 4 + (t >> 1), e = (i >> 3) * 2 + (t & 1);
        float y[NW] = {};
        if (mine) {
#pragma unroll
            for (int j = 0; j < NW; j++) {
                float s = 0;
#pragma unroll
                for (int w = 0; w < GEMV8_WARPS; w++) s += tot[((j * GEMV8_WARPS + w) * 32 + L) * 4 + e];
                y[j] = BLOCK ? s * sxs[j][t] : s * (sxs[j][t] * __ldg(wt(sg, j).s + row));
            }
        }
        if constexpr (ROPE) {  // the products as stored (bf16) by slot, then rotated and written (as gemv_rope)
            if (mine) rs[i][t] = __float2bfloat16_rn(y[0]);
            __syncthreads();
            bf16 *const out = (bf16 *)out_base;
            if (sg == 2) {  // V: stored, and into the pages
                if (threadIdx.x < 16 * nt) {
                    const int vi = threadIdx.x & 15, r = t0 + (threadIdx.x >> 4);
                    rope_v_store(rp, out, rows, r, row0 + vi, rs[vi][r - t0]);
                }
            } else if (threadIdx.x < 8 * nt) {  // Q, K: a pair of one token a thread
                const int pi = threadIdx.x & 7, r = t0 + (threadIdx.x >> 3);
                const int ia = rp.neox ? pi : 2 * pi, ib = rp.neox ? pi + 8 : 2 * pi + 1;
                rope_pair_store(rp, out, rows, r, row_of(sg, tl, ia), row_of(sg, tl, ib), rs[ia][r - t0],
                                rs[ib][r - t0], sg == 1);
            }
            return;
        }
        if (!mine) return;
        OUT *o = (OUT *)out_base + (size_t)(t0 + t) * rows + row;
        if constexpr (sizeof(OUT) == 4) *o = y[0];
        else if constexpr (P == GEMV8_STORE) *o = __float2bfloat16_rn(y[0]);
        else if constexpr (P == GEMV8_ADD)
            *o = __float2bfloat16_rn(__bfloat162float(*o) + __bfloat162float(__float2bfloat16_rn(y[0])));
        else {
            const float gv = __bfloat162float(__float2bfloat16_rn(y[0]));
            *o = __float2bfloat16_rn(gv / (1.0f + expf(-gv)) * __bfloat162float(__float2bfloat16_rn(y[SW ? 1 : 0])));
        }
    };

    __syncthreads();

    for (; tl < ntiles; tl += gridDim.x) {
        const int sg = seg_of(tl), rows = SEG ? a.srows[sg] : a.rows;
        const bool last = tl + (int)gridDim.x >= ntiles;
        float acc[NW][4] = {};
        for (ch = warp; ch < nchunks; ch += GEMV8_WARPS) {
            uint4 xb[NW][2];
#pragma unroll
            for (int j = 0; j < NW; j++)
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const int k = ch * 128 + h * 64 + c4 * 16;
                    xb[j][h] = g < nt && k < kp ? *(const uint4 *)(gemv8_xs + ((size_t)j * nx + g) * xs_pitch + k)
                                                : make_uint4(0, 0, 0, 0);
                }
            // the stream's chunk LA ahead in flight during the MMAs
            uint4 na[NW][2], nb[NW][2];
            advance();
            load_w(pt, pc, na, nb, pt < ntiles);  // (zeros past the stream's end, never multiplied)
            const int rowa = row_of(sg, tl, g);
#pragma unroll
            for (int j = 0; j < NW; j++) {
                float d[4];
                if (j == 0) gemv8_chunk<E5M2>(d, qa[0][j], qb[0][j], xb[j]);
                else gemv8_chunk<E5M2_2>(d, qa[0][j], qb[0][j], xb[j]);
                float sc = 1.0f;
                if constexpr (BLOCK) sc = __ldg(wt(sg, j).s + (size_t)(rowa / FP8W_BLOCK) * a.kbp + ch);
#pragma unroll
                for (int e = 0; e < 4; e++) acc[j][e] = BLOCK ? fmaf(d[e], sc, acc[j][e]) : acc[j][e] + d[e];
            }
#pragma unroll
            for (int i = 0; i < LA; i++)
#pragma unroll
                for (int j = 0; j < NW; j++)
#pragma unroll
                    for (int h = 0; h < 2; h++) { qa[i][j][h] = qa[i + 1][j][h]; qb[i][j][h] = qb[i + 1][j][h]; }
#pragma unroll
            for (int j = 0; j < NW; j++)
#pragma unroll
                for (int h = 0; h < 2; h++) { qa[LA][j][h] = na[j][h]; qb[LA][j][h] = nb[j][h]; }
        }
        if (last) pdl_trigger();  // (a dependent product may start loading its weights)
        // the warps' totals, summed in warp order: element (row i, token t) is lane (i % 8)·4 + t / 2,
        // accumulator (i / 8)·2 + t % 2
#pragma unroll
        for (int j = 0; j < NW; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) tot[((j * GEMV8_WARPS + warp) * 32 + lane) * 4 + e] = acc[j][e];
        __syncthreads();
        gemv8_store(sg, tl, rows);
        __syncthreads();  // (the totals and rs are the next tile's)
    }
}

