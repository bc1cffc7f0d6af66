// cuda_gemv_mma.cuh — the skinny GEMM of decode steps on tensor cores (included by cuda_gemv.cuh after
// k_gemv's policies and helpers): out[n][rows] = x[n][cols] · W[rows][cols]ᵀ for n <= 8 rows of x, BF16
// weights and activations, f32 accumulation, with every fused form of enum gemv_policy (the residual add,
// SwiGLU with the deferred RMSNorm, Q|K|V with the RMSNorm before it and RoPE and the cache write after).
// Why: k_gemv multiplies each weight with each token's x on the CUDA cores, about 110 instructions for 16
// bytes of weights at 8 tokens, so a batched decode step reads its weights at 0.55-0.65 of the copy rate
// where one token's reads them at 0.96; two m16n8k16 MMAs per 32 columns take the same time at 1 and 8
// tokens (bench/throughput/RESULTS.md, "the decode GEMM at 8 tokens").
// Shape: a CTA of GEMV_MMA_WARPS warps takes a tile of 16 weight rows (slots; the ROPE form maps slots to
// rows as k_gemv's row_of does), warp w the 32-column chunks w, w + WARPS, ...; lane (g = lane / 4,
// c = lane % 4) loads 16 bytes of slots g and g + 8 and of token g's x at columns 8c .. 8c + 7 of a chunk,
// which are the A and B fragments of two MMAs once the chunk's k order is permuted alike in both (logical
// k 2c, 2c + 1, 2c + 8, 2c + 9 of the first MMA are columns 8c .. 8c + 3, of the second 8c + 4 .. 8c + 7);
// tokens past n and columns past cols read zeros. The warps' 16 × 8 sums meet in shared memory and are
// added in warp order, so a row's result does not depend on n. DEFER: the B fragment is x ⊙ g (the norm's
// weight) rounded to bf16, each lane sums x² of its token's columns, and the sums are scaled by
// rsqrt(Σx²/cols + eps) at the end. The epilogues are k_gemv's, on the same bf16-rounded products.
#pragma once

#define GEMV_MMA_WARPS 16  // warps a CTA (one 16-row tile; dev/cuda/gemv_bench.cu times 8 and 16)
#define GEMV_MMA_UNROLL 2  // 32-column chunks a warp has in flight (two 16-byte weight loads a lane each)

__device__ __forceinline__ void gemv_mma16816(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                              uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
// The chunk's two MMAs: a, b the 16-byte runs of slots g and g + 8, x token g's
__device__ __forceinline__ void gemv_mma_chunk(float (&d)[4], uint4 a, uint4 b, uint4 x) {
    gemv_mma16816(d, a.x, b.x, a.y, b.y, x.x, x.y);
    gemv_mma16816(d, a.z, b.z, a.w, b.w, x.z, x.w);
}
// DEFER: x ⊙ g of one run rounded to bf16 (the B fragment), Σ x² of the run added into ss
__device__ __forceinline__ uint4 gemv_mma_xg(uint4 x, uint4 g, float &ss) {
    const __nv_bfloat162 *xp = (const __nv_bfloat162 *)&x, *gp = (const __nv_bfloat162 *)&g;
    uint4 o;
    __nv_bfloat162 *op = (__nv_bfloat162 *)&o;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const float2 a = __bfloat1622float2(xp[i]), b = __bfloat1622float2(gp[i]);
        ss = fmaf(a.x, a.x, ss);
        ss = fmaf(a.y, a.y, ss);
        op[i] = __floats2bfloat162_rn(a.x * b.x, a.y * b.y);
    }
    return o;
}

// Dynamic shared memory of a launch: the warps' partial sums (one or two accumulators: SwiGLU's gate and
// up), and for NORM the n normalised rows of x first (the sums reuse them once every warp is done).
template <gemv_policy P, int WARPS = GEMV_MMA_WARPS> static inline size_t gemv_mma_smem(int n, int cols) {
    constexpr bool SW = P == GEMV_SWIGLU || P == GEMV_SWIGLU_DEFER;
    constexpr bool NORM = P == GEMV_QKV_NORM || P == GEMV_QKV_ROPE;
    const size_t part = (size_t)WARPS * 32 * 4 * (SW ? 2 : 1) * sizeof(float);
    const size_t xs = NORM ? (size_t)n * cols * sizeof(bf16) : 0;
    return part > xs ? part : xs;
}

// GEMV_ADD (the o and down projections: 256 CTAs at 4,096 rows) is held to two CTAs an SM (64 registers at
// 16 warps; unbounded it takes 73, one CTA an SM, two waves on 132 SMs); the other forms take 64 or fewer
// unbounded (0: no minimum, which ptxas does not read as 1).
template <gemv_policy P, typename OUT, int WARPS = GEMV_MMA_WARPS, int UNROLL = GEMV_MMA_UNROLL>
__global__ void __launch_bounds__(WARPS * 32, P == GEMV_ADD ? 2 : 0)
    k_gemv_mma(const __grid_constant__ gemv_args a, int n) {
    constexpr int R = 16;
    constexpr bool SW = P == GEMV_SWIGLU || P == GEMV_SWIGLU_DEFER, DEFER = P == GEMV_SWIGLU_DEFER;
    constexpr bool QKV = P == GEMV_QKV || P == GEMV_QKV_NORM || P == GEMV_QKV_ROPE;
    constexpr bool NORM = P == GEMV_QKV_NORM || P == GEMV_QKV_ROPE, ROPE = P == GEMV_QKV_ROPE;
    static_assert(P == GEMV_STORE || sizeof(OUT) == 2, "fused epilogues: bf16 out");
    OUT *out = (OUT *)a.out;
    const bf16 *w = a.w;
    int rows = a.rows;
    const int cols = a.cols, runs = cols / 8, chunks = (cols + 31) / 32;
    const gemv_segs &seg = a.seg;
    const gemv_norm &nrm = a.nrm;
    const gemv_rope &rp = a.rp;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
    int blk = blockIdx.x, sg = 0;
    if constexpr (QKV) {  // this CTA's segment: its weight, output and rows
        sg = blk >= seg.cta0[2] ? 2 : blk >= seg.cta0[1] ? 1 : 0;
        blk -= seg.cta0[sg];
        out = (OUT *)seg.out[sg];
        w = seg.w[sg];
        rows = seg.rows[sg];
    }
    auto row_of = [&](int i) -> int {  // slot i of the tile -> its row (ROPE's neox pairs: see gemv_rope)
        if constexpr (ROPE) {
            if (sg < 2 && rp.neox) {
                const int per_head = rp.hd / R, p = blk % per_head;
                return (blk / per_head) * rp.hd + p * (R / 2) + i % (R / 2) + (i >= R / 2 ? rp.half : 0);
            }
        }
        return blk * R + i;
    };
    const int ra = row_of(g), rb = row_of(g + 8);  // (a row past the end reads row 0 and stores nothing)
    const uint4 *wa = (const uint4 *)(w + (size_t)(ra < rows ? ra : 0) * cols);
    const uint4 *wb = (const uint4 *)(w + (size_t)(rb < rows ? rb : 0) * cols);
    const uint4 *wa2 = nullptr, *wb2 = nullptr;
    if constexpr (SW) {
        wa2 = (const uint4 *)(a.w2 + (size_t)(ra < rows ? ra : 0) * cols);
        wb2 = (const uint4 *)(a.w2 + (size_t)(rb < rows ? rb : 0) * cols);
    }
    extern __shared__ uint4 gemv_mma_sm[];  // NORM: [n][runs] the normalised rows of x; then the partial sums
    if constexpr (NORM) {  // each row of x normalised, as k_rmsnorm would
        __shared__ float red[32];
        for (int r = 0; r < n; r++) {
            uint4 xv[RMS_VEC], nv[RMS_VEC];
            const float ss = rms_partial(a.x + (size_t)r * cols, nrm.w, runs, nrm.threads, xv, nv);
            const float sc = rsqrtf(rms_reduce(ss, nrm.threads, red) / cols + nrm.eps);
            rms_store((bf16 *)(gemv_mma_sm + (size_t)r * runs), xv, nv, sc, runs, nrm.threads);
        }
        __syncthreads();
    }
    const bool xlive = g < n;
    const uint4 *xr = (const uint4 *)(a.x + (size_t)(xlive ? g : 0) * cols);
    const uint4 *gr = (const uint4 *)nrm.w;  // DEFER: the norm's weight in runs
    auto xload = [&](int run) -> uint4 {     // run `run` of token g's x (normalised: from shared memory)
        if constexpr (NORM) return gemv_mma_sm[(size_t)g * runs + run];
        else return __ldg(xr + run);
    };
    float d[4] = {0, 0, 0, 0}, d2[4] = {0, 0, 0, 0}, ss = 0;
    const uint4 zero = make_uint4(0, 0, 0, 0);
    for (int k0 = warp; k0 < chunks; k0 += WARPS * UNROLL) {
        uint4 va[UNROLL], vb[UNROLL], va2[SW ? UNROLL : 1], vb2[SW ? UNROLL : 1], vx[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {  // weights streamed once (not kept in L2)
            const int run = (k0 + u * WARPS) * 4 + c;
            const bool in = k0 + u * WARPS < chunks && run < runs;
            va[u] = in ? __ldcs(wa + run) : zero;
            vb[u] = in ? __ldcs(wb + run) : zero;
            if constexpr (SW) {
                va2[u] = in ? __ldcs(wa2 + run) : zero;
                vb2[u] = in ? __ldcs(wb2 + run) : zero;
            }
            vx[u] = in && xlive ? xload(run) : zero;
            if constexpr (DEFER) vx[u] = gemv_mma_xg(vx[u], in ? __ldg(gr + run) : zero, ss);
        }
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            gemv_mma_chunk(d, va[u], vb[u], vx[u]);
            if constexpr (SW) gemv_mma_chunk(d2, va2[u], vb2[u], vx[u]);
        }
    }
    if constexpr (DEFER) {  // token g's Σ x² over the warp's columns (its 4 lanes)
        ss += __shfl_xor_sync(0xffffffff, ss, 1);
        ss += __shfl_xor_sync(0xffffffff, ss, 2);
    }
    // the warps' sums, added in warp order by warp 0: [WARPS][32 lanes][4 (+ 4)] floats, and Σ x² [WARPS][8]
    if constexpr (NORM) __syncthreads();  // (every warp done with the normalised x the sums overwrite)
    float *part = (float *)gemv_mma_sm;
    __shared__ float ssp[DEFER ? WARPS : 1][8];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        part[((size_t)warp * 32 + lane) * (SW ? 8 : 4) + i] = d[i];
        if constexpr (SW) part[((size_t)warp * 32 + lane) * 8 + 4 + i] = d2[i];
    }
    if constexpr (DEFER) {
        if (c == 0) ssp[warp][g] = ss;
    }
    if constexpr (ROPE) pdl_trigger();  // the decode kernel after it may launch (it waits before reading Q)
    __syncthreads();
    __shared__ float rs[ROPE ? R : 1][8];  // ROPE: the products by slot and token, as stored (bf16)
    if (warp == 0) {
        float s[4] = {0, 0, 0, 0}, s2[4] = {0, 0, 0, 0};
        for (int v = 0; v < WARPS; v++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                s[i] += part[((size_t)v * 32 + lane) * (SW ? 8 : 4) + i];
                if constexpr (SW) s2[i] += part[((size_t)v * 32 + lane) * 8 + 4 + i];
            }
        // s[0], s[1]: slot g, tokens 2c, 2c + 1; s[2], s[3]: slot g + 8
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int t = 2 * c + (i & 1), slot = g + (i >> 1) * 8, row = slot == g ? ra : rb;
            if (t >= n) continue;
            if constexpr (DEFER) {  // the RMSNorm's scale of token t, on the finished sums
                float tot = 0;
                for (int v = 0; v < WARPS; v++) tot += ssp[v][t];
                const float sc = rsqrtf(tot / cols + nrm.eps);
                s[i] *= sc;
                s2[i] *= sc;
            }
            if constexpr (ROPE) {
                rs[slot][t] = __bfloat162float(__float2bfloat16_rn(s[i]));
                continue;
            }
            if (row >= rows) continue;
            OUT *o = out + (size_t)t * rows + row;
            if constexpr (sizeof(OUT) == 4) *o = s[i];
            else if constexpr (P == GEMV_STORE || QKV) *o = __float2bfloat16_rn(s[i]);
            else if constexpr (P == GEMV_ADD) {
                *o = __float2bfloat16_rn(__bfloat162float(*o) + __bfloat162float(__float2bfloat16_rn(s[i])));
            } else {  // as the silu_mul op (ew_act_mul) on the rounded gate and up products
                const float gv = __bfloat162float(__float2bfloat16_rn(s[i]));
                *o = __float2bfloat16_rn(gv / (1.0f + expf(-gv)) * __bfloat162float(__float2bfloat16_rn(s2[i])));
            }
        }
    }
    if constexpr (ROPE) {  // k_gemv's epilogue: V stored and into the pages; Q, K a rotated pair a thread
        __syncthreads();
        if (sg == 2) {
            for (int e = threadIdx.x; e < R * n; e += WARPS * 32) {
                const int i = e % R, r = e / R;
                rope_v_store(rp, out, rows, r, row_of(i), __float2bfloat16_rn(rs[i][r]));
            }
        } else {
            for (int e = threadIdx.x; e < R / 2 * n; e += WARPS * 32) {
                const int pi = e % (R / 2), r = e / (R / 2);
                const int ia = rp.neox ? pi : 2 * pi, ib = rp.neox ? pi + R / 2 : 2 * pi + 1;
                rope_pair_store(rp, out, rows, r, row_of(ia), row_of(ib), __float2bfloat16_rn(rs[ia][r]),
                                __float2bfloat16_rn(rs[ib][r]), sg == 1);
            }
        }
    }
}

// One launch of k_gemv_mma<P> over a.rows rows (or, QKV, the seg_ctas CTAs of a.seg's segments).
// (WARPS, UNROLL: the production sizes, GEMV_MMA_WARPS and GEMV_MMA_UNROLL; dev/cuda/gemv_bench.cu times others)
template <gemv_policy P, typename OUT = bf16, int WARPS = GEMV_MMA_WARPS, int UNROLL = GEMV_MMA_UNROLL>
static inline void gemv_mma_launch(cudaStream_t st, const gemv_args &a, int n, unsigned ctas) {
    k_gemv_mma<P, OUT, WARPS, UNROLL><<<ctas, WARPS * 32, gemv_mma_smem<P, WARPS>(n, a.cols), st>>>(a, n);
}
