// cuda_gemv.cuh — the skinny GEMM of decode steps (included by cuda_gemm.cu and by the lab programs
// dev/cuda/gemv_bench.cu and gemv_step_probe.cu): out[n][rows] = x[n][cols] · W[rows][cols]ᵀ for
// n <= 8 rows of x, BF16 weights and activations, f32 accumulation, BF16 or f32 output; and its fused
// forms (enum gemv_policy): the residual add, SwiGLU, and Q|K|V with the rmsnorm before it and RoPE
// and the cache write after it.
// Why: a decode step is bound by reading the weights once, and cuBLASLt's M=1 kernels read them well
// below the copy rate (bench/decode_attention/RESULTS.md has the whole-model figures).
// The launchers at the end (gemv_launch, gemv_fused_launch, gemv_qkv_launch) run k_gemv below (CUDA cores)
// for one row of x, and the tensor-core form k_gemv_mma (cuda_gemv_mma.cuh), whose time does not grow with
// n, for 2 to 8 rows; the lab times both.
// k_gemv's shape: KSPLIT warps share one weight row (KSPLIT = 1: a warp per row; or one warp RPW rows, their
// loads in flight together: the fused Q|K|V launch for n <= 4, cuda_gemm.cu), WARPS warps per CTA;
// each lane streams 16-byte runs (8 weights) of its row, UNROLL runs in flight before any
// math, and multiplies them with the same 8 columns of each of the n rows of x (read through
// the L1 cache: every warp of the grid reads all of x). Partial sums reduce across the warp
// with shuffles, then across the row's KSPLIT warps in shared memory; one lane writes the n
// outputs. The order of every sum is fixed by (cols, KSPLIT, UNROLL) alone, so a row's result
// does not depend on n. Needs cols % 8 == 0 and 16-byte aligned rows; other shapes stay on
// cuBLASLt.
#pragma once

#include "cuda_kv_store.cuh"
#include "cuda_pdl.cuh"
#include "cuda_rmsnorm.cuh"

// What a launch computes (the kernel's one policy). The fused forms round the product to bf16
// first, as the separate matmul then add / silu_mul kernels do, so they give the unfused GPU path's
// numbers.
enum gemv_policy {
    GEMV_STORE,         // out = x·Wᵀ
    GEMV_ADD,           // out += x·Wᵀ (the residual add after a projection)
    GEMV_SWIGLU,        // out = silu(x·Wᵀ) ⊙ (x·W2ᵀ)
    GEMV_SWIGLU_DEFER,  // GEMV_SWIGLU of x's rmsnorm, its scale applied to the sums (DEFER below)
    GEMV_QKV,           // the products of up to three weights sharing x (Q, K and V) from one launch: the
                        // grid's CTAs split into segments, each with its own weight, output and row count
    GEMV_QKV_NORM,      // GEMV_QKV of x's rmsnorm, normalised in the CTA's prologue (NORM below)
    GEMV_QKV_ROPE,      // GEMV_QKV_NORM with RoPE and the cache write in the epilogue (gemv_rope)
};

// NORM (GEMV_QKV_NORM, GEMV_QKV_ROPE): x is the residual stream and each CTA first normalises
// its n rows into shared memory with k_rmsnorm's arithmetic (cuda_rmsnorm.cuh, the same T
// threads), so the products equal rmsnorm then the GEMM bit for bit and the rmsnorm launch goes.
// The CTA's first weight runs are loaded before it (they do not depend on x).
// DEFER (GEMV_SWIGLU_DEFER): the product of x's RMSNorm taken as r·Σ_k W[k]·(x[k]·g[k]),
// r = 1/sqrt(Σ x²/cols + eps) — each warp sums x² of the runs it reads anyway and scales its sums at
// the end: no prologue, no shared memory, no barrier, so SwiGLU runs faster than with NORM. The
// values lose k_rmsnorm's bf16 rounding of the normalised x (they are nearer the CPU's). On Q|K|V
// the same form is slower, so Q|K|V keeps NORM.
struct gemv_norm {
    const bf16 *w = nullptr;  // [cols] the norm's weight
    float eps = 0;
    int threads = 0;          // T: k_rmsnorm's threads for a row of cols (rms_threads)
};

struct gemv_segs {
    void *out[3];          // [n][rows[s]] each
    const bf16 *w[3];      // [rows[s]][cols] each
    int rows[3];
    int cta0[3];           // the segment's first CTA
};

// ROPE (GEMV_QKV_ROPE; decode steps): RoPE on Q and K and the cache write of K and V in the
// epilogue, as k_rope_kv_write after the products
// (cuda_kv_write.cu; the same element arithmetic, cuda_kv_store.cuh), so a decode step loses a
// launch a layer. A CTA's R = WARPS · RPW rows of Q or K are R / 2 rotation pairs: with neox pairs
// (j, j + hd / 2) its slots i < R / 2 take rows j of a head and the rest rows j + hd / 2 (needs
// n_rot = hd); with interleaved pairs (2j, 2j + 1) the rows stay in order. The products meet in
// shared memory, rounded to bf16 as stored, then each thread rotates a pair of one token and
// stores it (and K's into the pages); V's go to the pages as they are. Every row of every segment
// is live (rows % R == 0), so that the barrier is reached by all.
// Each CTA triggers the decode kernel after it (a programmatic dependent) once its products are
// summed: triggered at the CTA's start, the decode kernel's CTAs take SM slots the products still
// need.
struct gemv_rope {
    const int32_t *pos = nullptr, *slot = nullptr;  // [n tokens] each (the batch's)
    const double *inv_freq = nullptr;               // [n_rot / 2]
    void *kc = nullptr, *vc = nullptr;              // the layer's pages (null: RoPE only, no cache write)
    const float *ks = nullptr, *vs = nullptr, *ko = nullptr;  // [n_kv] scales; [n_kv][hd] K offsets or NULL
    int hd = 0, half = 0, neox = 0, n_kv = 0, bs = 0, dt = 0;
    float attn_factor = 1;
};

// The ROPE epilogue's per-element work, shared by the bf16 and FP8 skinny GEMMs: V element rw of token r
// (v as stored) into out and the pages; and a rotation pair of token r, rows ra and rb of Q or K (x0,
// x1 as stored; k: the K segment), rotated, into out and (K) the pages.
__device__ __forceinline__ void rope_v_store(const gemv_rope &rp, bf16 *out, int rows, int r, int rw, bf16 v) {
    out[(size_t)r * rows + rw] = v;
    const int s = rp.slot[r];
    if (s >= 0 && rp.vc)
        v_store(rp.vc, kv_index(s, rw / rp.hd, rw % rp.hd, rp.n_kv, rp.bs, rp.hd), v, rp.dt, rp.vs[rw / rp.hd]);
}
__device__ __forceinline__ void rope_pair_store(const gemv_rope &rp, bf16 *out, int rows, int r, int ra, int rb,
                                                bf16 x0, bf16 x1, bool k) {
    const int h = ra / rp.hd, da = ra % rp.hd;
    const int j = rp.neox ? da : da / 2;  // the pair's index (rotated below half)
    if (j < rp.half) rope_pair(x0, x1, rp.pos[r], rp.inv_freq[j], rp.attn_factor);
    out[(size_t)r * rows + ra] = x0;
    out[(size_t)r * rows + rb] = x1;
    const int s = rp.slot[r];
    if (k && s >= 0 && rp.kc) {
        const int db = rb % rp.hd;
        const float *kof = rp.ko ? rp.ko + (size_t)h * rp.hd : nullptr;
        k_store(rp.kc, kv_index(s, h, da, rp.n_kv, rp.bs, rp.hd), x0, rp.dt, rp.ks[h], kof ? kof + da : nullptr);
        k_store(rp.kc, kv_index(s, h, db, rp.n_kv, rp.bs, rp.hd), x1, rp.dt, rp.ks[h], kof ? kof + db : nullptr);
    }
}

// One launch's operands (the kernel's one parameter).
struct gemv_args {
    void *out = nullptr;           // [n][rows] OUT elements (GEMV_QKV*: the segments' outputs instead)
    const bf16 *x = nullptr;       // [n][cols]
    const bf16 *w = nullptr;       // [rows][cols]
    const bf16 *w2 = nullptr;      // [rows][cols] GEMV_SWIGLU*'s up weight
    int rows = 0, cols = 0;
    gemv_segs seg = {};            // GEMV_QKV*: the segments
    gemv_norm nrm;                 // NORM, DEFER: x's rmsnorm
    gemv_rope rp;                  // GEMV_QKV_ROPE: RoPE and the cache write
};

#define GEMV_WARPS 8    // default: warps per CTA
#define GEMV_UNROLL 4   // default: 16-byte weight loads in flight per lane
#define GEMV_KSPLIT 1   // default: warps per weight row (2 for weights of <= 2048 rows)

// DEFER: xg = x ⊙ g of one 16-byte run as floats, and Σ x² of the run added into ss.
__device__ __forceinline__ void gemv_xg8(float (&xg)[8], float &ss, uint4 x, uint4 g) {
    const __nv_bfloat162 *xp = (const __nv_bfloat162 *)&x, *gp = (const __nv_bfloat162 *)&g;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        float2 a = __bfloat1622float2(xp[i]), b = __bfloat1622float2(gp[i]);
        ss = fmaf(a.x, a.x, ss);
        ss = fmaf(a.y, a.y, ss);
        xg[2 * i] = a.x * b.x;
        xg[2 * i + 1] = a.y * b.y;
    }
}
__device__ __forceinline__ void gemv_dotf8(float &acc, uint4 w, const float (&xg)[8]) {
    const __nv_bfloat162 *wp = (const __nv_bfloat162 *)&w;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        float2 a = __bfloat1622float2(wp[i]);
        acc = fmaf(a.x, xg[2 * i], acc);
        acc = fmaf(a.y, xg[2 * i + 1], acc);
    }
}

__device__ __forceinline__ void gemv_dot8(float &acc, uint4 w, uint4 x) {
    const __nv_bfloat162 *wp = (const __nv_bfloat162 *)&w, *xp = (const __nv_bfloat162 *)&x;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        float2 a = __bfloat1622float2(wp[i]), b = __bfloat1622float2(xp[i]);
        acc = fmaf(a.x, b.x, acc);
        acc = fmaf(a.y, b.y, acc);
    }
}

template <int NR, typename OUT, gemv_policy P, int WARPS = GEMV_WARPS, int UNROLL = GEMV_UNROLL,
          int KSPLIT = GEMV_KSPLIT, int RPW = 1>
__global__ void __launch_bounds__(WARPS * 32) k_gemv(const __grid_constant__ gemv_args a) {
    constexpr bool SW = P == GEMV_SWIGLU || P == GEMV_SWIGLU_DEFER, DEFER = P == GEMV_SWIGLU_DEFER;
    constexpr bool QKV = P == GEMV_QKV || P == GEMV_QKV_NORM || P == GEMV_QKV_ROPE;
    constexpr bool NORM = P == GEMV_QKV_NORM || P == GEMV_QKV_ROPE, ROPE = P == GEMV_QKV_ROPE;
    static_assert(WARPS % KSPLIT == 0, "a CTA holds whole rows");
    static_assert(P == GEMV_STORE || (KSPLIT == 1 && sizeof(OUT) == 2), "fused epilogues: bf16 out, a warp a row");
    static_assert(RPW == 1 || (KSPLIT == 1 && (P == GEMV_STORE || QKV)), "RPW: stored products, a warp its rows");
    OUT *out = (OUT *)a.out;
    const bf16 *w = a.w, *const x = a.x, *const w2 = a.w2;
    int rows = a.rows;
    const int cols = a.cols;
    const gemv_segs &seg = a.seg;
    const gemv_norm &nrm = a.nrm;
    const gemv_rope &rp = a.rp;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, part = warp % KSPLIT;
    int blk = blockIdx.x, sg = 0;
    if constexpr (QKV) {  // this CTA's segment: its weight, output and rows
        sg = blk >= seg.cta0[2] ? 2 : blk >= seg.cta0[1] ? 1 : 0;
        blk -= seg.cta0[sg];
        out = (OUT *)seg.out[sg];
        w = seg.w[sg];
        rows = seg.rows[sg];
    }
    // RPW rows a warp, WARPS / KSPLIT apart (the CTA's first row block, then the next); their
    // loads in flight together, each row's sum in the same order as with RPW = 1
    constexpr int R = WARPS / KSPLIT * RPW;  // rows a CTA
    // ROPE: slot i of the CTA's rows -> its row in the segment (neox pairs of Q and K: see gemv_rope)
    auto row_of = [&](int i) -> int {
        if constexpr (ROPE) {
            if (sg < 2 && rp.neox) {
                const int per_head = rp.hd / R, p = blk % per_head;
                return (blk / per_head) * rp.hd + p * (R / 2) + i % (R / 2) + (i >= R / 2 ? rp.half : 0);
            }
        }
        return blk * R + i;
    };
    int rowq[RPW];
    bool liveq[RPW];
#pragma unroll
    for (int q = 0; q < RPW; q++) {
        rowq[q] = row_of(q * (WARPS / KSPLIT) + warp / KSPLIT);
        liveq[q] = rowq[q] < rows;
    }
    const int row = rowq[0];
    const bool live = liveq[0];
    if constexpr (KSPLIT == 1 && !NORM) {  // (with KSPLIT > 1 or NORM every warp reaches the barriers)
        if (!live) return;
    }
    const int runs = cols / 8;     // 16-byte runs per row
    const uint4 *wrq[RPW];         // (a row past the end reads row 0 and stores nothing)
#pragma unroll
    for (int q = 0; q < RPW; q++) wrq[q] = (const uint4 *)(w + (size_t)(liveq[q] ? rowq[q] : 0) * cols);
    const uint4 *wr = wrq[0];
    const uint4 *wr2 = SW ? (const uint4 *)(w2 + (size_t)(live ? row : 0) * cols) : nullptr;
    const uint4 *xr = (const uint4 *)x;
    extern __shared__ uint4 gemv_xs[];  // NORM: [NR][runs] the normalised rows of x
    float accq[RPW][NR], acc2[SW ? NR : 1], ss[DEFER ? NR : 1];
    float (&acc)[NR] = accq[0];
#pragma unroll
    for (int q = 0; q < RPW; q++)
#pragma unroll
        for (int r = 0; r < NR; r++) accq[q][r] = 0.0f;
#pragma unroll
    for (int r = 0; r < (SW ? NR : 1); r++) acc2[r] = 0.0f;
#pragma unroll
    for (int r = 0; r < (DEFER ? NR : 1); r++) ss[r] = 0.0f;
    const uint4 *gr = (const uint4 *)nrm.w;  // DEFER: the norm's weight in runs
    constexpr int STRIDE = 32 * KSPLIT;  // the row's KSPLIT warps interleave their runs
    int i = part * 32 + lane;
    constexpr bool EARLY = NORM;
    uint4 first[EARLY ? UNROLL : 1];  // NORM: the first runs, loaded before the prologue needs x
    bool have_first = false;
    if constexpr (EARLY) {
        if (live && i + STRIDE * (UNROLL - 1) < runs) {
#pragma unroll
            for (int u = 0; u < UNROLL; u++) first[u] = __ldcs(wr + i + STRIDE * u);
            have_first = true;
        }
    }
    if constexpr (NORM) {  // each row of x normalised into gemv_xs, as k_rmsnorm would
        __shared__ float red[32];
#pragma unroll 1
        for (int r = 0; r < NR; r++) {
            uint4 xv[RMS_VEC], nv[RMS_VEC];
            const float ss = rms_partial(x + (size_t)r * cols, nrm.w, runs, nrm.threads, xv, nv);
            const float sc = rsqrtf(rms_reduce(ss, nrm.threads, red) / cols + nrm.eps);
            rms_store((bf16 *)(gemv_xs + (size_t)r * runs), xv, nv, sc, runs, nrm.threads);
        }
        __syncthreads();
        if (!live) return;
    }
    auto xload = [&](int r, int k) -> uint4 {  // run k of row r of x (normalised: from shared memory)
        if constexpr (NORM) return gemv_xs[(size_t)r * runs + k];
        else return __ldg(xr + (size_t)r * runs + k);
    };
    if (live) {
        for (; i + STRIDE * (UNROLL - 1) < runs; i += STRIDE * UNROLL) {
            uint4 wv[UNROLL], wv2[SW ? UNROLL : 1];
#pragma unroll
            for (int u = 0; u < UNROLL; u++)  // streamed once: do not keep in L2
                wv[u] = EARLY && have_first ? first[u % (EARLY ? UNROLL : 1)] : __ldcs(wr + i + STRIDE * u);
            if constexpr (SW) {
#pragma unroll
                for (int u = 0; u < UNROLL; u++) wv2[u] = __ldcs(wr2 + i + STRIDE * u);
            }
            have_first = false;
            if constexpr (DEFER) {
#pragma unroll
                for (int u = 0; u < UNROLL; u++) {
                    const uint4 g = __ldg(gr + i + STRIDE * u);
#pragma unroll
                    for (int r = 0; r < NR; r++) {
                        float xg[8];
                        gemv_xg8(xg, ss[r], xload(r, i + STRIDE * u), g);
                        gemv_dotf8(acc[r], wv[u], xg);
                        if constexpr (SW) gemv_dotf8(acc2[r], wv2[u], xg);
                    }
                }
            } else {
                uint4 wvq[RPW > 1 ? RPW - 1 : 1][UNROLL];  // the further rows' runs
#pragma unroll
                for (int q = 1; q < RPW; q++)
#pragma unroll
                    for (int u = 0; u < UNROLL; u++) wvq[q - 1][u] = __ldcs(wrq[q] + i + STRIDE * u);
#pragma unroll
                for (int u = 0; u < UNROLL; u++)
#pragma unroll
                    for (int r = 0; r < NR; r++) {
                        uint4 xv = xload(r, i + STRIDE * u);
                        gemv_dot8(acc[r], wv[u], xv);
                        if constexpr (SW) gemv_dot8(acc2[r], wv2[u], xv);
#pragma unroll
                        for (int q = 1; q < RPW; q++) gemv_dot8(accq[q][r], wvq[q - 1][u], xv);
                    }
            }
        }
        for (; i < runs; i += STRIDE) {
            uint4 wv = __ldcs(wr + i);
            if constexpr (DEFER) {
                const uint4 g = __ldg(gr + i), wv2 = SW ? __ldcs(wr2 + i) : wv;
#pragma unroll
                for (int r = 0; r < NR; r++) {
                    float xg[8];
                    gemv_xg8(xg, ss[r], xload(r, i), g);
                    gemv_dotf8(acc[r], wv, xg);
                    if constexpr (SW) gemv_dotf8(acc2[r], wv2, xg);
                }
            } else {
                uint4 wvq[RPW > 1 ? RPW - 1 : 1];
#pragma unroll
                for (int q = 1; q < RPW; q++) wvq[q - 1] = __ldcs(wrq[q] + i);
#pragma unroll
                for (int r = 0; r < NR; r++) {
                    uint4 xv = xload(r, i);
                    gemv_dot8(acc[r], wv, xv);
                    if constexpr (SW) gemv_dot8(acc2[r], __ldcs(wr2 + i), xv);
#pragma unroll
                    for (int q = 1; q < RPW; q++) gemv_dot8(accq[q][r], wvq[q - 1], xv);
                }
            }
        }
    }
#pragma unroll
    for (int q = 1; q < RPW; q++)
#pragma unroll
        for (int r = 0; r < NR; r++)
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) accq[q][r] += __shfl_xor_sync(0xffffffff, accq[q][r], o);
#pragma unroll
    for (int r = 0; r < NR; r++)
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            acc[r] += __shfl_xor_sync(0xffffffff, acc[r], o);
            if constexpr (SW) acc2[r] += __shfl_xor_sync(0xffffffff, acc2[r], o);
            if constexpr (DEFER) ss[r] += __shfl_xor_sync(0xffffffff, ss[r], o);
        }
    if constexpr (DEFER) {  // the RMSNorm's scale r of each row of x, on the finished sums
#pragma unroll
        for (int r = 0; r < NR; r++) {
            const float sc = rsqrtf(ss[r] / cols + nrm.eps);
            acc[r] *= sc;
            if constexpr (SW) acc2[r] *= sc;
        }
    }
    if constexpr (KSPLIT > 1) {  // the row's warps add their sums in a fixed order
        __shared__ float red[WARPS][NR];
        if (lane == 0) {
#pragma unroll
            for (int r = 0; r < NR; r++) red[warp][r] = acc[r];
        }
        __syncthreads();
        if (part != 0) return;
#pragma unroll
        for (int r = 0; r < NR; r++) {
            float s = red[warp][r];
#pragma unroll
            for (int k = 1; k < KSPLIT; k++) s += red[warp + k][r];
            acc[r] = s;
        }
    }
    if constexpr (ROPE) {  // the products by slot, as stored (bf16), then rotated and written
        pdl_trigger();  // the decode kernel after it, a programmatic dependent, may launch (it waits before reading Q)
        __shared__ float rs[R][NR];
        if (lane == 0) {
#pragma unroll
            for (int q = 0; q < RPW; q++)
#pragma unroll
                for (int r = 0; r < NR; r++)
                    rs[q * WARPS + warp][r] = __bfloat162float(__float2bfloat16_rn(accq[q][r]));
        }
        __syncthreads();
        if (sg == 2) {  // V: stored, and into the pages
            for (int e = threadIdx.x; e < R * NR; e += WARPS * 32) {
                const int i = e % R, r = e / R;
                rope_v_store(rp, out, rows, r, row_of(i), __float2bfloat16_rn(rs[i][r]));
            }
        } else {  // Q, K: a pair of one token a thread
            for (int e = threadIdx.x; e < R / 2 * NR; e += WARPS * 32) {
                const int pi = e % (R / 2), r = e / (R / 2);
                const int ia = rp.neox ? pi : 2 * pi, ib = rp.neox ? pi + R / 2 : 2 * pi + 1;
                rope_pair_store(rp, out, rows, r, row_of(ia), row_of(ib), __float2bfloat16_rn(rs[ia][r]),
                                __float2bfloat16_rn(rs[ib][r]), sg == 1);
            }
        }
    } else {
#pragma unroll
        for (int q = 1; q < RPW; q++)  // (plain or Q|K|V stores only)
            if (lane == 0 && liveq[q]) {
#pragma unroll
                for (int r = 0; r < NR; r++) {
                    OUT *o = out + (size_t)r * rows + rowq[q];
                    if constexpr (sizeof(OUT) == 4) *o = accq[q][r];
                    else *o = __float2bfloat16_rn(accq[q][r]);
                }
            }
    }
    if (!ROPE && lane == 0 && live) {
#pragma unroll
        for (int r = 0; r < NR; r++) {
            OUT *o = out + (size_t)r * rows + row;
            if constexpr (sizeof(OUT) == 4) *o = acc[r];
            else if constexpr (P == GEMV_STORE || QKV) *o = __float2bfloat16_rn(acc[r]);
            else if constexpr (P == GEMV_ADD) {
                *o = __float2bfloat16_rn(__bfloat162float(*o) + __bfloat162float(__float2bfloat16_rn(acc[r])));
            } else {  // as the silu_mul op (ew_act_mul) on the rounded gate and up products
                float gv = __bfloat162float(__float2bfloat16_rn(acc[r]));
                *o = __float2bfloat16_rn(gv / (1.0f + expf(-gv)) * __bfloat162float(__float2bfloat16_rn(acc2[r])));
            }
        }
    }
}

// One GEMV_STORE launch of k_gemv<NR, ...> with one variant's sizes.
template <int NR, typename OUT, int WARPS, int UNROLL, int KSPLIT>
static void gemv_launch_nr(cudaStream_t st, OUT *out, const bf16 *x, const bf16 *w, int rows, int cols) {
    dim3 grid((unsigned)((rows + WARPS / KSPLIT - 1) / (WARPS / KSPLIT))), block(WARPS * 32);
    gemv_args a;
    a.out = out;
    a.x = x;
    a.w = w;
    a.rows = rows;
    a.cols = cols;
    k_gemv<NR, OUT, GEMV_STORE, WARPS, UNROLL, KSPLIT><<<grid, block, 0, st>>>(a);
}

// The launch for n rows of x (1..8) with one variant's sizes.
template <typename OUT, int WARPS, int UNROLL, int KSPLIT>
static void gemv_launch_variant(cudaStream_t st, OUT *out, const bf16 *x, const bf16 *w, int rows, int cols, int n) {
    switch (n) {
    case 1: gemv_launch_nr<1, OUT, WARPS, UNROLL, KSPLIT>(st, out, x, w, rows, cols); break;
    case 2: gemv_launch_nr<2, OUT, WARPS, UNROLL, KSPLIT>(st, out, x, w, rows, cols); break;
    case 3: gemv_launch_nr<3, OUT, WARPS, UNROLL, KSPLIT>(st, out, x, w, rows, cols); break;
    case 4: gemv_launch_nr<4, OUT, WARPS, UNROLL, KSPLIT>(st, out, x, w, rows, cols); break;
    case 5: gemv_launch_nr<5, OUT, WARPS, UNROLL, KSPLIT>(st, out, x, w, rows, cols); break;
    case 6: gemv_launch_nr<6, OUT, WARPS, UNROLL, KSPLIT>(st, out, x, w, rows, cols); break;
    case 7: gemv_launch_nr<7, OUT, WARPS, UNROLL, KSPLIT>(st, out, x, w, rows, cols); break;
    default: gemv_launch_nr<8, OUT, WARPS, UNROLL, KSPLIT>(st, out, x, w, rows, cols); break;
    }
}

// The operands of a fused launch's product out = f(x · wᵀ [, x · w2ᵀ]); rows past the kernel's int
// range make a.rows -1, which gemv_fused_launch declines.
static inline gemv_args gemv_product(bf16 *out, const bf16 *x, const bf16 *w, const bf16 *w2, int64_t rows,
                                     int64_t cols) {
    gemv_args a;
    a.out = out;
    a.x = x;
    a.w = w;
    a.w2 = w2;
    a.rows = rows > (int64_t)1 << 30 ? -1 : (int)rows;
    a.cols = (int)cols;
    return a;
}

#include "cuda_gemv_mma.cuh"

// A fused launch (GEMV_ADD into a.out, GEMV_SWIGLU* with a.w2, or GEMV_QKV* over a.seg's segments,
// whose seg_ctas CTAs of 16 rows then make the grid) for n <= 8 rows of x; false when the shapes do not
// fit (the caller composes the unfused ops instead). One row of x takes k_gemv (Q|K|V two rows a warp,
// so its CTAs hold 16 rows too), where the tensor-core form is 2-7 % slower and a single request's
// decode step 14 % (bench/throughput/RESULTS.md); 2 to 8 rows take k_gemv_mma, whose time does not grow
// with them. A row's result is then the same at every n from 2 to 8 (and at n = 1 its own).
// NORM (GEMV_QKV_NORM, GEMV_QKV_ROPE): x is normalised first (gemv_norm_fits must hold).
template <gemv_policy P>
static bool gemv_fused_launch(cudaStream_t st, const gemv_args &a, int n, unsigned seg_ctas = 0) {
    constexpr bool QKV = P == GEMV_QKV || P == GEMV_QKV_NORM || P == GEMV_QKV_ROPE;
    constexpr bool NORM = P == GEMV_QKV_NORM || P == GEMV_QKV_ROPE;
    if (n < 1 || n > 8 || a.cols % 8 || ((uintptr_t)a.w | (uintptr_t)a.x | (uintptr_t)a.w2) % 16 || a.rows < 0)
        return false;
    if (n > 1) {
        gemv_mma_launch<P>(st, a, n, QKV ? seg_ctas : (unsigned)((a.rows + 15) / 16));
        return true;
    }
    constexpr int RPW = QKV ? 2 : 1;  // (GEMV_WARPS · RPW = 16 rows a CTA for Q|K|V, as seg_ctas counts them)
    const dim3 grid(QKV ? seg_ctas : (unsigned)((a.rows + GEMV_WARPS - 1) / GEMV_WARPS)), block(GEMV_WARPS * 32);
    const size_t smem = NORM ? (size_t)a.cols * sizeof(bf16) : 0;
    k_gemv<1, bf16, P, GEMV_WARPS, GEMV_UNROLL, 1, RPW><<<grid, block, smem, st>>>(a);
    return true;
}

// The NORM launches' dynamic shared memory (the n normalised rows of x) must leave room under the
// 48 KB a CTA gets without opting in for the kernel's static shared memory (ptxas: 128 bytes, the
// rmsnorm's reduction): the rows alone at exactly 48 KB (n = 6 at 4096 columns) failed every launch
// with "invalid argument" (6-row decode steps at 4096 columns occur under load); such steps take
// k_rmsnorm and the plain fused GEMM.
#define GEMV_NORM_SMEM_MAX (47 * 1024)
// Whether the fused launches can normalise n rows of x of cols with the norm weight nw: the
// rows fit k_rmsnorm's vector path in at most the CTA's threads, and the CTA's shared memory.
static inline bool gemv_norm_fits(const bf16 *x, const bf16 *nw, int64_t cols, int n) {
    const int T = rms_threads(cols);
    return cols % 8 == 0 && cols / 8 <= (int64_t)RMS_VEC * T && T <= GEMV_WARPS * 32 &&
           ((uintptr_t)x | (uintptr_t)nw) % 16 == 0 && (size_t)n * cols * sizeof(bf16) <= GEMV_NORM_SMEM_MAX;
}

// Q, K and V products of one x in one launch (P: GEMV_QKV, GEMV_QKV_NORM or GEMV_QKV_ROPE); false
// when the shapes do not fit.
// NORM: of x's rmsnorm (nrm; gemv_norm_fits checked by the caller).
// ROPE: RoPE and the cache write in the epilogue (rp; false when the shapes do not fit it: every
// segment whole 16-row tiles, a head whole tiles).
template <gemv_policy P>
static inline bool gemv_qkv_launch(cudaStream_t st, bf16 *const out[3], const bf16 *x, const bf16 *const w[3],
                                   const int64_t rows[3], int64_t cols, int n, gemv_norm nrm = gemv_norm(),
                                   gemv_rope rp = gemv_rope()) {
    if constexpr (P == GEMV_QKV_ROPE) {
        const bool fits = rp.hd > 0 && rp.hd % 16 == 0 && (!rp.neox || rp.half * 2 == rp.hd) && rows[1] == rows[2] &&
                          rows[1] == (int64_t)rp.n_kv * rp.hd && rows[0] % rp.hd == 0;
        if (!fits) return false;
    }
    gemv_args a = gemv_product(out[0], x, w[0], nullptr, rows[0], cols);
    unsigned ctas = 0;
    for (int k = 0; k < 3; k++) {
        if ((uintptr_t)w[k] % 16 || rows[k] < 1 || rows[k] > (int64_t)1 << 28) return false;
        a.seg.out[k] = out[k];
        a.seg.w[k] = w[k];
        a.seg.rows[k] = (int)rows[k];
        a.seg.cta0[k] = (int)ctas;
        ctas += (unsigned)((rows[k] + 15) / 16);
    }
    a.nrm = nrm;
    a.rp = rp;
    return gemv_fused_launch<P>(st, a, n, ctas);
}

// True when the skinny path takes this product (and launches it: k_gemv for one row of x, k_gemv_mma for
// 2 to 8, as gemv_fused_launch); false: use cuBLASLt.
template <typename OUT>
static bool gemv_launch(cudaStream_t st, OUT *out, const bf16 *x, const bf16 *w, int64_t rows, int64_t cols, int n) {
    if (n < 1 || n > 8 || cols % 8 || ((uintptr_t)w | (uintptr_t)x) % 16 || rows > (int64_t)1 << 30) return false;
    if (n == 1) {
        // Small weights (<= 2048 rows: the 8B model's 1024-row K and V products) get 2 warps a row, so
        // the grid still fills the GPU (dev/cuda/gemv_bench.cu times both).
        if (rows <= 2048) gemv_launch_variant<OUT, GEMV_WARPS, GEMV_UNROLL, 2>(st, out, x, w, (int)rows, (int)cols, 1);
        else gemv_launch_variant<OUT, GEMV_WARPS, GEMV_UNROLL, GEMV_KSPLIT>(st, out, x, w, (int)rows, (int)cols, 1);
        return true;
    }
    gemv_args a = gemv_product(nullptr, x, w, nullptr, rows, cols);
    a.out = out;
    gemv_mma_launch<GEMV_STORE, OUT>(st, a, n, (unsigned)((rows + 15) / 16));
    return true;
}
