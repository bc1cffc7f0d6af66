// cuda_moe_tc.cuh — the prefill form of the grouped expert GEMM (included by cuda_moe.cu after cuda_moe.cuh):
// k_moe_gemm_tc, the same products as k_moe_gemm<F, 8, GU> for bf16 and MXFP4 experts, bit for bit, with each
// weight and token tile staged once in shared memory for the whole CTA instead of read by every warp from L2.
//
// Why bit for bit: a token's result must not depend on its batch (cuda_moe.cuh's header), and decode steps run
// k_moe_gemm. So the sums keep k_moe_gemm's order: k_moe_gemm's warp w sums the 128-column chunks w, w + 4, ...
// (its "class" w) in one MMA chain from zero, and the classes meet as ((c0 + c1) + c2) + c3. Here a CTA walks
// the chunks class by class (0, 4, 8, ..., then 1, 5, ...), each warp chaining a class's MMAs into `part` and
// adding it to `tot` at the class's end, in that order; inside a chunk the MMAs and their operands are
// k_moe_gemm's (a lane's 32 columns [32·(lane % 4), +32) of the chunk, 8 at a time: v = 0..3, two MMAs each).
//
// Shape: a CTA takes one tile of the list (an expert and up to 64 of its grouped rows: NB = 8) and 128 weight
// rows; its 8 warps are 4 (rows) × 2 (tokens) of 32 rows × 32 tokens (2 × 4 m16n8 tiles a weight), or for
// MXFP4 8 × 1 of 16 rows × 64 tokens (1 × 8), so that one warp widens each code.
// Shared memory holds a ring of moe_tc_stages chunks (cp.async, the next chunks' copies in flight during this
// one's MMAs; 4 deep for MXFP4, 2 for bf16, whose stages are 48-80 KB): the weights' 128 rows (bf16: 256 bytes a
// row in 16-byte units XOR-swizzled as moe_tc_swz says; MXFP4: the 64 bytes of codes a row, whose 16-byte
// runs the lanes read without conflicts as stored, and the row's 4 scale bytes, cuda_moe.cu's mx_spitch
// keeping them 4-byte aligned) and the 64 token rows of x (bf16, swizzled as bf16 weights). Zero-filled past
// the weight rows and the tile's tokens, and past the columns (where MXFP4's padding scale bytes are 127, the
// scale k_moe_gemm gives columns past the end), as k_moe_gemm's loads are.
#pragma once

#define MOE_TC_ROWS 128   // weight rows a CTA
#define MOE_TC_TOKENS 64  // grouped rows a CTA (one tile of 8·NB, NB = 8)
#define MOE_TC_WARPS 8

// The 16-byte unit holding unit u (0..15) of row r of a 256-byte row: the units a quarter-warp reads at once
// (rows 2q and 2q + 1, units 4·t + v for t = 0..3) fall in eight different bank groups.
__device__ __forceinline__ int moe_tc_swz(int r, int u) { return u ^ ((u >> 2) & 2) ^ (r & 1); }

// cp.async of 16 bytes, zero-filled where !ok (no bytes read)
__device__ __forceinline__ void moe_tc_cp16(void *dst, const void *src, bool ok) {
    const uint32_t d = (uint32_t)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(d), "l"(src), "r"(ok ? 16 : 0));
}

// cp.async of 4 bytes (MXFP4 scales), zero-filled where !ok
__device__ __forceinline__ void moe_tc_cp4(void *dst, const void *src, bool ok) {
    const uint32_t d = (uint32_t)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(d), "l"(src), "r"(ok ? 4 : 0));
}

// Dynamic shared memory of a launch: a ring of stages, each NW weights' rows (MXFP4: codes, then 4 scale bytes
// a row) and the tokens' rows.
__host__ __device__ constexpr size_t moe_tc_wbytes(int f) {
    return (size_t)MOE_TC_ROWS * (f == MOE_W_MXFP4 || f == MOE_W_MXFP4_WIDE ? 64 + 4 : 256);
}
__host__ __device__ constexpr size_t moe_tc_stage(int f, bool gu) {
    return (gu ? 2 : 1) * moe_tc_wbytes(f) + (size_t)MOE_TC_TOKENS * 256;
}
__host__ __device__ constexpr int moe_tc_stages(int f, bool gu) { return f == MOE_W_BF16 ? 2 : 4; }
__host__ __device__ constexpr size_t moe_tc_smem(int f, bool gu) { return moe_tc_stages(f, gu) * moe_tc_stage(f, gu); }

// grid (ceil(R / 128), max_tiles), MOE_TC_WARPS warps; F: MOE_W_BF16 or an MXFP4 form; a.x[1] == a.x[0], !a.h_f32.
// Down projections run two CTAs an SM (128 registers, bf16's ring 2 deep to fit), which hides the ring's fill
// of their short K (Qwen3-30B-A3B: 6 chunks); gate/up's two weights need the registers of one.
template <int F, bool GU>
__global__ void __launch_bounds__(MOE_TC_WARPS * 32, GU ? 1 : 2)
    k_moe_gemm_tc(const __grid_constant__ moe_gemm_args a) {
    static_assert(F == MOE_W_BF16 || F == MOE_W_MXFP4 || F == MOE_W_MXFP4_WIDE, "bf16 and MXFP4 experts");
    constexpr int NW = GU ? 2 : 1;
    constexpr bool MX = F == MOE_W_MXFP4 || F == MOE_W_MXFP4_WIDE, WIDE = F == MOE_W_MXFP4_WIDE;
    constexpr size_t WB = moe_tc_wbytes(F), STAGE = moe_tc_stage(F, GU);
    constexpr int STAGES = moe_tc_stages(F, GU);
    extern __shared__ __align__(128) uint8_t moe_tc_sm[];  // [STAGES][NW weights' rows, then the tokens' rows]
    if ((int)blockIdx.y >= *a.n_tiles) return;
    const int4 tl = a.tiles[blockIdx.y];
    const int e = tl.x, start = tl.y, cnt = tl.z;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
    // a warp's MI m16 tiles of rows and NI n8 tiles of tokens: MXFP4 8 × 1 warps of 16 rows × 64 tokens, so
    // each code is widened by one warp; bf16 4 × 2 warps of 32 × 32
    constexpr int MI = MX ? 1 : 2, NI = MX ? 8 : 4, WN = MOE_TC_TOKENS / (8 * NI);
    const int wm = warp / WN, wn = warp % WN;
    const int r0 = blockIdx.x * MOE_TC_ROWS, R = a.R, cols = a.cols;
    const int nch = (cols + MOE_CHUNK - 1) / MOE_CHUNK;
    __shared__ int xrow[MOE_TC_TOKENS];  // the x row of each of the tile's tokens (-1 past them)
    for (int j = tid; j < MOE_TC_TOKENS; j += MOE_TC_WARPS * 32)
        xrow[j] = j < cnt ? (GU ? a.perm[start + j] / a.K : start + j) : -1;
    __syncthreads();

    // the copies of step s's chunk (classes in turn: chunk q + 4·i of class q) into stage s % STAGES
    auto chunk_of = [&](int s) {
        for (int q = 0; q < MOE_WARPS; q++) {
            const int nq = (nch - q + MOE_WARPS - 1) / MOE_WARPS;  // chunks of class q
            if (s < nq) return q + MOE_WARPS * s;
            s -= nq;
        }
        return -1;
    };
    auto issue = [&](int s) {
        const int c = chunk_of(s), k0 = c * MOE_CHUNK;
        uint8_t *st = moe_tc_sm + (size_t)(s % STAGES) * STAGE;
        constexpr int UNITS = MX ? 4 : 16;  // 16-byte units of a weight row in a chunk
#pragma unroll
        for (int w = 0; w < NW; w++)
            for (int i = tid; i < MOE_TC_ROWS * UNITS; i += MOE_TC_WARPS * 32) {
                const int r = i / UNITS, u = i % UNITS, row = r0 + r;
                const int kc = k0 + u * (MX ? 32 : 8);  // first column of the unit
                const bool ok = row < R && kc < cols;
                const uint8_t *src = a.w[w].q + (int64_t)(ok ? (int64_t)e * R + row : 0) * a.w[w].pitch +
                                     (ok ? (MX ? kc / 2 : kc * 2) : 0);
                uint8_t *dst = st + w * WB + (size_t)r * (MX ? 64 : 256) + 16 * (MX ? u : moe_tc_swz(r, u));
                moe_tc_cp16(dst, src, ok);
            }
        if constexpr (MX) {  // the 4 scale bytes of each row's chunk (the padding's are 127)
            for (int w = 0; w < NW; w++)
                for (int r = tid; r < MOE_TC_ROWS; r += MOE_TC_WARPS * 32) {
                    const int row = r0 + r;
                    const uint8_t *src = (const uint8_t *)a.w[w].s +
                                         (row < R ? ((int64_t)e * R + row) * a.w[w].spitch + 4 * c : 0);
                    moe_tc_cp4(st + w * WB + (size_t)MOE_TC_ROWS * 64 + 4 * r, src, row < R);
                }
        }
        for (int i = tid; i < MOE_TC_TOKENS * 16; i += MOE_TC_WARPS * 32) {
            const int j = i / 16, u = i % 16, kc = k0 + u * 8;
            const bool ok = xrow[j] >= 0 && kc < cols;
            const bf16 *src = a.x[0] + (ok ? (size_t)xrow[j] * cols + kc : 0);
            moe_tc_cp16(st + NW * WB + (size_t)j * 256 + 16 * moe_tc_swz(j, u), src, ok);
        }
        asm volatile("cp.async.commit_group;");
    };
    float part[NW][MI][NI][4] = {}, tot[NW][MI][NI][4] = {};

    // the ring: steps s + 1 .. s + STAGES - 1 in flight while step s computes (an empty group past the last
    // step keeps the wait count uniform)
    for (int p = 0; p < STAGES - 1; p++) {
        if (p < nch) issue(p);
        else asm volatile("cp.async.commit_group;");
    }
    int q = 0, left = (nch + MOE_WARPS - 1) / MOE_WARPS;  // the class of this step, and its chunks left
    // class q's sum (part) into tot = ((c0 + c1) + c2) + c3, as k_moe_gemm's warps meet; part is zero again
    auto merge = [&]() {
#pragma unroll
        for (int w = 0; w < NW; w++)
#pragma unroll
            for (int mi = 0; mi < MI; mi++)
#pragma unroll
                for (int ni = 0; ni < NI; ni++)
#pragma unroll
                    for (int i = 0; i < 4; i++) {
                        const float c = part[w][mi][ni][i];
                        tot[w][mi][ni][i] = q == 0 ? c : tot[w][mi][ni][i] + c;
                        part[w][mi][ni][i] = 0.0f;
                    }
        q++;
    };
    for (int s = 0; s < nch; s++) {
        asm volatile("cp.async.wait_group %0;" ::"n"(STAGES - 2) : "memory");
        __syncthreads();  // (step s's stage is complete, and every warp is past step s - 1, whose stage refills)
        if (s + STAGES - 1 < nch) issue(s + STAGES - 1);
        else asm volatile("cp.async.commit_group;");
        const uint8_t *st = moe_tc_sm + (size_t)(s % STAGES) * STAGE;
        const uint8_t *xs = st + NW * WB;
        // MXFP4: the lane's scale (its 32-column block of the chunk) of rows g and g + 8 of each m16 tile, as
        // a bf16 pair (k_moe_gemm's moe_load)
        uint32_t sc[NW][MI][2];
        if constexpr (MX) {
#pragma unroll
            for (int w = 0; w < NW; w++)
#pragma unroll
                for (int mi = 0; mi < MI; mi++)
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        const int r = wm * 16 * MI + mi * 16 + g + 8 * h;
                        sc[w][mi][h] = moe_mx_scale<WIDE>(st[w * WB + (size_t)MOE_TC_ROWS * 64 + 4 * r + t4]);
                    }
        }
        uint4 code[NW][MI][2];  // MXFP4: the lane's 32 codes of rows g, g + 8 of each m16 tile
        if constexpr (MX) {
#pragma unroll
            for (int w = 0; w < NW; w++)
#pragma unroll
                for (int mi = 0; mi < MI; mi++)
#pragma unroll
                    for (int h = 0; h < 2; h++)
                        code[w][mi][h] = *(const uint4 *)(st + w * WB +
                                                          (size_t)(wm * 16 * MI + mi * 16 + g + 8 * h) * 64 + 16 * t4);
        }
#pragma unroll
        for (int v = 0; v < 4; v++) {
            const int u = t4 * 4 + v;
            uint4 xb[NI];
#pragma unroll
            for (int ni = 0; ni < NI; ni++) {
                const int j = wn * 8 * NI + ni * 8 + g;
                xb[ni] = *(const uint4 *)(xs + (size_t)j * 256 + 16 * moe_tc_swz(j, u));
            }
#pragma unroll
            for (int w = 0; w < NW; w++)
#pragma unroll
                for (int mi = 0; mi < MI; mi++) {
                    uint4 wa, wb;
                    if constexpr (MX) {
                        const uint4 &ca = code[w][mi][0], &cb = code[w][mi][1];
                        wa = moe_mx_widen<WIDE>(v == 0 ? ca.x : v == 1 ? ca.y : v == 2 ? ca.z : ca.w, sc[w][mi][0]);
                        wb = moe_mx_widen<WIDE>(v == 0 ? cb.x : v == 1 ? cb.y : v == 2 ? cb.z : cb.w, sc[w][mi][1]);
                    } else {
                        const int ra = wm * 16 * MI + mi * 16 + g, rb = ra + 8;
                        wa = *(const uint4 *)(st + w * WB + (size_t)ra * 256 + 16 * moe_tc_swz(ra, u));
                        wb = *(const uint4 *)(st + w * WB + (size_t)rb * 256 + 16 * moe_tc_swz(rb, u));
                    }
#pragma unroll
                    for (int ni = 0; ni < NI; ni++) {
                        moe_mma(part[w][mi][ni], wa.x, wb.x, wa.y, wb.y, xb[ni].x, xb[ni].y);
                        moe_mma(part[w][mi][ni], wa.z, wb.z, wa.w, wb.w, xb[ni].z, xb[ni].w);
                    }
                }
        }
        if (--left == 0) {  // the class's last chunk
            merge();
            left = (nch - q + MOE_WARPS - 1) / MOE_WARPS;
        }
    }
    while (q < MOE_WARPS) merge();  // classes with no chunks (cols < 4 chunks) add k_moe_gemm's zero sums

    // k_moe_gemm's epilogue: element i of an m16n8 tile is weight row g (+8 for i >= 2), token 2·t4 + (i & 1)
#pragma unroll
    for (int mi = 0; mi < MI; mi++)
#pragma unroll
        for (int ni = 0; ni < NI; ni++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int row = r0 + wm * 16 * MI + mi * 16 + g + (i >> 1) * 8;
                const int col = wn * 8 * NI + ni * 8 + 2 * t4 + (i & 1);
                if (row >= R || col >= cnt) continue;
                const int gi = start + col, entry = a.perm[gi];
                const int64_t grow = (int64_t)e * R + row;
                if constexpr (GU) {
                    const float h = moe_act(tot[0][mi][ni][i] + moe_bias(a.bias[0], grow),
                                            tot[NW - 1][mi][ni][i] + moe_bias(a.bias[1], grow), a.act, a.alpha,
                                            a.limit);
                    ((bf16 *)a.out)[(size_t)gi * R + row] = __float2bfloat16_rn(h);
                } else {
                    ((float *)a.out)[(size_t)entry * R + row] =
                        a.wts[entry] * (tot[0][mi][ni][i] + moe_bias(a.bias[0], grow));
                }
            }
}
