// cuda_decode_mma.cuh — paged decode attention on tensor cores (mma.sync m16n8k16, f32
// accumulation), included by cuda_decode.cu. Owns the decode kernels' shared device code (operand
// traits, ring copies, split ranges, the warp merge, the fused split combine) and the heads-on-M
// kernel that --batch-invariant runs for every query row. One warp streams 16-token blocks of one
// KV head for all its query heads (the G heads fill the M=16 rows; unused rows are zero).
//
// Layout trick: a dot product does not care about the order of its terms, so the head
// dimension is permuted so that every lane's operand fragments are contiguous in memory.
//   S = Q·Kᵀ: lane (n = lane/4, c = lane%4) loads key n of each 8-key tile as two runs of
//     HD/8 dims, [c·HD/8, +HD/8) and [HD/2 + c·HD/8, +HD/8); virtual k-chunk j maps to 4
//     consecutive real dims of those runs, and Q is loaded with the same map.
//   O = P·V: lane n' = lane/4 loads dims [n'·NT, n'·NT + NT) (NT = HD/8) of keys 2c, 2c+1,
//     2c+8, 2c+9; output tile t, column n holds real dim n·NT + t.
// FP8 values are widened in registers (e4m3/e5m2 → f16 is exact) and the MMAs run in f16
// (Q converted from bf16); a BF16 cache runs bf16 MMAs directly.
#pragma once

template <int DT> struct mma_traits;
template <> struct mma_traits<DT_BF16> {
    typedef uint16_t E;  // bf16 bits
    static __device__ uint32_t pair(uint32_t two) { return two; }  // already 2 x bf16
    static __device__ uint32_t q2(float a, float b) {
        __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
        return *(uint32_t *)&h;
    }
    static __device__ void mma(float *d, const uint32_t *a, uint32_t b0, uint32_t b1) {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
};
template <int DT> struct mma_traits_fp8 {
    typedef uint8_t E;
    // two fp8 (low 16 bits) → two f16
    static __device__ uint32_t pair(uint32_t two) {
        __half2_raw h =
            __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(two & 0xFFFF), DT == DT_E4M3 ? __NV_E4M3 : __NV_E5M2);
        return (uint32_t)h.x | ((uint32_t)h.y << 16);
    }
    static __device__ uint32_t q2(float a, float b) {
        __half2 h = __floats2half2_rn(a, b);
        return *(uint32_t *)&h;
    }
    static __device__ void mma(float *d, const uint32_t *a, uint32_t b0, uint32_t b1) {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
};
template <> struct mma_traits<DT_E4M3> : mma_traits_fp8<DT_E4M3> {};
template <> struct mma_traits<DT_E5M2> : mma_traits_fp8<DT_E5M2> {};

// Loads N bytes (8, 16 or 32) as 32-bit words.
template <int N> __device__ __forceinline__ void load_words(uint32_t *w, const void *p) {
    if constexpr (N == 8) { uint2 v = *(const uint2 *)p; w[0] = v.x; w[1] = v.y; }
    else if constexpr (N == 16) { uint4 v = *(const uint4 *)p; w[0] = v.x; w[1] = v.y; w[2] = v.z; w[3] = v.w; }
    else { uint4 v = ((const uint4 *)p)[0], u = ((const uint4 *)p)[1];
           w[0] = v.x; w[1] = v.y; w[2] = v.z; w[3] = v.w; w[4] = u.x; w[5] = u.y; w[6] = u.z; w[7] = u.w; }
}

__device__ __forceinline__ void cp_async16(void *smem, const void *gmem) {
    unsigned sa = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(sa), "l"(gmem));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N)); }

// Element i (16-bit for bf16, 8-bit for fp8) of a word array, as the low bits of a word.
template <int DT> __device__ __forceinline__ uint32_t elem_bits(const uint32_t *w, int i) {
    if constexpr (DT == DT_BF16) return (w[i >> 1] >> ((i & 1) * 16)) & 0xFFFF;
    else return (w[i >> 2] >> ((i & 3) * 8)) & 0xFF;
}

// Operand words of one 16-token KV block for one lane: two K runs per 8-key tile (for
// S = Q·Kᵀ) and slices of four V rows (for O = P·V), read from global or shared memory
// (same layout). Shared by the decode and prefill kernels.
template <int HD, int DT> struct kv_frags {
    static constexpr int ES = DT == DT_BF16 ? 2 : 1, SEG = HD / 8, KW = SEG * ES / 4;
    uint32_t k[2][2][KW], v[4][KW];
    // kb, vb: the block's rows of one KV head ([16][HD] elements each)
    __device__ __forceinline__ void load(const char *kb, const char *vb, int rr, int c) {
#pragma unroll
        for (int t = 0; t < 2; t++) {
            size_t row = (size_t)(t * 8 + rr) * HD;
            load_words<SEG * ES>(k[t][0], kb + (row + c * SEG) * ES);
            load_words<SEG * ES>(k[t][1], kb + (row + HD / 2 + c * SEG) * ES);
        }
        const int vk[4] = {2 * c, 2 * c + 1, 2 * c + 8, 2 * c + 9};
#pragma unroll
        for (int i = 0; i < 4; i++) load_words<SEG * ES>(v[i], vb + ((size_t)vk[i] * HD + rr * SEG) * ES);
    }
};

// sv[tile][0..3] = the m16n8 score fragments of the block's two 8-key tiles.
template <int HD, int DT>
__device__ __forceinline__ void qk_block(float (&sv)[2][4], const uint32_t (&qa)[HD / 16][4],
                                         const kv_frags<HD, DT> &f) {
    typedef mma_traits<DT> TR;
    constexpr int NCH = HD / 16;
#pragma unroll
    for (int t = 0; t < 2; t++) {
        sv[t][0] = sv[t][1] = sv[t][2] = sv[t][3] = 0.0f;
#pragma unroll
        for (int j = 0; j < NCH; j++) {
            const uint32_t *run = f.k[t][j < NCH / 2 ? 0 : 1];
            int e = 4 * (j % (NCH / 2));
            uint32_t kb0, kb1;
            if constexpr (DT == DT_BF16) { kb0 = run[e / 2]; kb1 = run[e / 2 + 1]; }
            else { uint32_t w4 = run[e / 4]; kb0 = TR::pair(w4); kb1 = TR::pair(w4 >> 16); }  // 4 fp8 = dims e..e+3
            TR::mma(sv[t], qa[j], kb0, kb1);
        }
    }
}

// o += P·V for the block; pa = the P fragment (keys 2c, 2c+1, 2c+8, 2c+9).
template <int HD, int DT>
__device__ __forceinline__ void pv_block(float (&o)[HD / 8][4], const uint32_t (&pa)[4], const kv_frags<HD, DT> &f) {
    typedef mma_traits<DT> TR;
#pragma unroll
    for (int tt = 0; tt < HD / 8; tt++) {
        // one byte permute gathers element tt of two key rows into a pair
        uint32_t vb0, vb1;
        if constexpr (DT == DT_BF16) {
            unsigned sel = (tt & 1) ? 0x7632u : 0x5410u;  // high or low halves of both words
            vb0 = __byte_perm(f.v[0][tt >> 1], f.v[1][tt >> 1], sel);
            vb1 = __byte_perm(f.v[2][tt >> 1], f.v[3][tt >> 1], sel);
        } else {
            unsigned b = tt & 3, sel = b | ((4 + b) << 4);
            vb0 = TR::pair(__byte_perm(f.v[0][tt >> 2], f.v[1][tt >> 2], sel));
            vb1 = TR::pair(__byte_perm(f.v[2][tt >> 2], f.v[3][tt >> 2], sel));
        }
        TR::mma(o[tt], pa, vb0, vb1);
    }
}

// Merges the 4 warps' (m, l, acc) of rows [0, G) through shared memory and writes either
// the normalised output (one split) or the split's partial result. Call with all threads. sinks
// (attn_args.sinks): a head's sink logit joins its denominator where the output is normalised, as
// e^(sink − m) with m in natural-log units: here with one split, else in the combine, once.
template <int HD>
__device__ __forceinline__ void merge_warps_store(const float (*sm_m)[16], const float (*sm_l)[16],
                                                  const float (*sm_acc)[8][HD], int G, int t, int n_kv, int g,
                                                  float vscale, bf16 *out, float *part, int s, int split,
                                                  int n_splits, const float *sinks) {
    // each head's maximum, warp weights and l first (one thread a head), then the elements: the
    // same values and sums as computing them in every element, without 4 exponentials an element.
    __shared__ float wf[4][16], wm[16], wl[16];
    if (threadIdx.x < G) {
        const int h = threadIdx.x;
        float mm = -INFINITY;
        for (int w = 0; w < 4; w++) mm = fmaxf(mm, sm_m[w][h]);
        float ll = 0.0f;
        for (int w = 0; w < 4; w++) {
            const float f = sm_m[w][h] == -INFINITY ? 0.0f : __expf(sm_m[w][h] - mm);
            wf[w][h] = f;
            ll += sm_l[w][h] * f;
        }
        if (sinks && n_splits == 1) ll += __expf(sinks[g * G + h] - mm);
        wm[h] = mm;
        wl[h] = ll;
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < G * HD; idx += blockDim.x) {
        int h = idx / HD, d = idx % HD;
        const float mm = wm[h], ll = wl[h];
        float aa = 0.0f;
        for (int w = 0; w < 4; w++) aa += sm_acc[w][h][d] * wf[w][h];
        int qh = g * G + h;
        if (n_splits == 1) {
            out[((size_t)t * n_kv * G + qh) * HD + d] = __float2bfloat16_rn(ll > 0 ? aa * vscale / ll : 0.0f);
        } else {
            float *pp = part + (((size_t)s * n_kv * G + qh) * n_splits + split) * (HD + 2);
            pp[2 + d] = aa * vscale;
            if (d == 0) { pp[0] = mm; pp[1] = ll; }
        }
    }
}

// The split combine inside the decode kernel (DECODE_FUSED): every CTA of a
// (sequence, KV head) publishes its partial and arrives on a counter; the last to arrive resets
// the counter and merges the n_splits partials of its G heads — the same sums as k_combine's
// (weights exp(m_i − M), then Σ acc_i·w_i / Σ l_i·w_i), in split order — so no combine launch
// follows. scratch holds 2·G·n_splits + G floats (the caller's shared memory, free by then). sinks:
// each head's sink logit joins Σ l·w as e^(sink − M).
template <int HD>
__device__ void split_arrive_combine(bf16 *out, const float *part, int *arrive, float *scratch, int t, int n_kv, int g,
                                     int G, int s, int n_splits, const float *sinks) {
    const int n = n_splits;
    __shared__ int last;
    __threadfence();  // this CTA's partial is visible to the others before it arrives
    __syncthreads();
    if (threadIdx.x == 0) {
        int *cnt = arrive + (size_t)s * n_kv + g;
        last = atomicAdd(cnt, 1) == n - 1;
        if (last) *cnt = 0;  // ready for the next launch (graph replays too)
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    // head h's partials: base + h·n_splits·(HD+2)
    const float *base = part + ((size_t)s * n_kv * G + g * G) * n_splits * (HD + 2);
    float *w = scratch, *lv = scratch + G * n, *L = scratch + 2 * G * n;
    for (int idx = tid; idx < G * n; idx += blockDim.x) {  // m and l of every (head, split), from L2
        const float *p = base + (size_t)idx * (HD + 2);
        w[idx] = __ldcg(p);
        lv[idx] = __ldcg(p + 1);
    }
    __syncthreads();
    for (int h = warp; h < G; h += blockDim.x / 32) {  // a warp per head: M, the weights, Σ l·w
        float mm = -INFINITY;
        for (int i = lane; i < n; i += 32) mm = fmaxf(mm, w[h * n + i]);
        for (int o = 16; o > 0; o >>= 1) mm = fmaxf(mm, __shfl_xor_sync(0xffffffff, mm, o));
        float ls = 0.0f;
        for (int i = lane; i < n; i += 32) {
            float mi = w[h * n + i], f = mi == -INFINITY ? 0.0f : __expf(mi - mm);
            w[h * n + i] = f;
            ls += lv[h * n + i] * f;
        }
        for (int o = 16; o > 0; o >>= 1) ls += __shfl_xor_sync(0xffffffff, ls, o);
        if (lane == 0) L[h] = sinks ? ls + __expf(sinks[g * G + h] - mm) : ls;
    }
    __syncthreads();
    for (int idx = tid; idx < G * HD; idx += blockDim.x) {
        const int h = idx / HD, d = idx % HD;
        const float *p = base + (size_t)h * n_splits * (HD + 2) + 2 + d;
        float aa = 0.0f;
#pragma unroll 4
        for (int i = 0; i < n; i++) aa += __ldcg(p + (size_t)i * (HD + 2)) * w[h * n + i];
        out[((size_t)t * n_kv * G + g * G + h) * HD + d] = __float2bfloat16_rn(L[h] > 0 ? aa / L[h] : 0.0f);
    }
}

// Blocks [b0, b1) of a sequence's context (last position pos, window start lo) for one split:
// this sequence's own blocks split evenly over the grid's n_splits (a captured step's grid is
// planned for the table's width, yet every context still uses every split), each at least
// min_split blocks; --batch-invariant (abs_split > 0): split k holds blocks [k·abs_split,
// (k+1)·abs_split) of any context.
__device__ __forceinline__ void split_blocks(int &b0, int &b1, int pos, int lo, int split, int n_splits, int min_split,
                                             int abs_split) {
    if (abs_split > 0) {
        b0 = max(split * abs_split, lo / 16);
        b1 = min(pos / 16 + 1, (split + 1) * abs_split);
    } else {
        const int per_split = max((pos / 16 - lo / 16 + n_splits) / n_splits, min_split);
        b0 = lo / 16 + split * per_split;
        b1 = min(pos / 16 + 1, b0 + per_split);
    }
}

// The most splits the fused combine merges: one CTA summing more leaves the GPU idle behind it,
// so more go to k_combine.
#define DECODE_FUSED_MAX 16

// How a decode kernel is launched and how its splits end (one kernel instance each):
//   DECODE_PDL: a programmatic dependent of the kernel before it (cuda_pdl.cuh; the transposed
//     kernel, cuda_decode_t.cuh, says what it reads before pdl_wait()); partials go to k_combine.
//   DECODE_FUSED: the last CTA of each (sequence, KV head) combines the splits itself
//     (split_arrive_combine), for one-sequence steps of 2..DECODE_FUSED_MAX splits; the transposed
//     kernel runs it as a programmatic dependent too, this one as an ordinary launch.
//   DECODE_PLAIN: an ordinary launch whose partials go to k_combine (the batch-invariant path).
enum decode_policy { DECODE_PDL, DECODE_FUSED, DECODE_PLAIN };

// An empty split (min_split, --batch-invariant) writes m = −inf, l = 0, acc = 0; DECODE_FUSED: it
// arrives too, and the last split's CTA combines (scratch in the unused cp.async ring, which
// holds at least 64·HD floats: every decode kernel's ring has at least 2 stages).
template <int HD, decode_policy P>
__device__ void empty_split(bf16 *out, float *part, int *arrive, int t, int n_kv, int g, int G, int s, int split,
                            int n_splits, const float *sinks) {
    for (int idx = threadIdx.x; idx < G * (HD + 2); idx += blockDim.x) {
        int h = idx / (HD + 2), d = idx % (HD + 2);
        part[(((size_t)s * n_kv * G + g * G + h) * n_splits + split) * (HD + 2) + d] = d == 0 ? -INFINITY : 0.0f;
    }
    if constexpr (P == DECODE_FUSED) {
        extern __shared__ __align__(16) char ring_scratch[];
        split_arrive_combine<HD>(out, part, arrive, (float *)ring_scratch, t, n_kv, g, G, s, n_splits, sinks);
    }
}

// What a decode CTA (sequence s, KV head g, one split) starts from: its context's last position,
// window start, block range, output row and the KV head's descales. begin() returns false for an
// empty split, after writing its empty partial (and arriving, DECODE_FUSED). A programmatic
// dependent (DECODE_PDL) waits for the kernel before it to end before writing an empty partial
// (that kernel may still read the partials: k_combine).
struct decode_cta {
    int pos, lo, b0, b1, t;
    float kscale, vscale;
    template <int HD, int DT, decode_policy P>
    __device__ __forceinline__ bool begin(bf16 *out, float *part, int *arrive, const int32_t *qstart,
                                          const int32_t *seq_lens, int window, const float *scales, int n_kv, int G,
                                          int n_splits, int min_split, int abs_split, const float *sinks) {
        const int s = blockIdx.x, g = blockIdx.y, split = blockIdx.z;
        pos = seq_lens[s] - 1;
        lo = window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
        split_blocks(b0, b1, pos, lo, split, n_splits, min_split, abs_split);
        t = qstart[s];
        if ((min_split > 0 || abs_split > 0) && b0 >= b1) {
            if constexpr (P == DECODE_PDL) pdl_wait();
            empty_split<HD, P>(out, part, arrive, t, n_kv, g, G, s, split, n_splits, sinks);
            return false;
        }
        const bool fp8 = DT != DT_BF16;
        kscale = fp8 ? scales[g] : 1.0f;
        vscale = fp8 ? scales[KV_MAX_HEADS + g] : 1.0f;
        return true;
    }
};

// Each warp streams blocks through a ring of STAGES shared-memory buffers with cp.async (STAGES-1
// blocks in flight while one computes). seq_of (rows that are not sequences): a row's sequence,
// whose block table it reads. TS: per-token-head scales (e4m3; kts, vts), as the transposed kernel
// applies them (cuda_decode_t.cuh): the ring carries each block's 16 K and 16 V scales; a lane's
// scores and P values are of keys 2c, 2c+1, 2c+8, 2c+9, whose K scales multiply the scores and whose
// V scales go into P as s_v / r, r the warp's largest V scale so far (O rescaled when it rises, and
// multiplied by r before the merge). The blocks a warp reads, and so r's history, depend only on the
// row's position and the absolute splits, so the kernel stays batch-invariant.
template <int HD, int DT, int STAGES, decode_policy P, bool CAP, bool TS = false>
__device__ __forceinline__ void decode_mma_body(bf16 *out, float *part, const bf16 *q, const void *kc, const void *vc,
                                                const int32_t *qstart, const int32_t *seq_lens, const int32_t *btab,
                                                int max_blocks, int lgr, int n_kv, int G, int window, float scale,
                                                const float *scales, int n_splits, int min_split,
                                                const int32_t *seq_of, int abs_split, int *arrive, float softcap,
                                                const float *kts = nullptr, const float *vts = nullptr,
                                                const float *sinks = nullptr) {
    static_assert(STAGES >= 2, "the ring is required");
    static_assert(!TS || DT == DT_E4M3, "per-token-head scales are e4m3 only");
    static_assert(P != DECODE_PDL, "this kernel has no programmatic-dependent waits");
    typedef mma_traits<DT> TR;
    pdl_trigger();
    constexpr int ES = DT == DT_BF16 ? 2 : 1;   // bytes per element
    constexpr int SEG = HD / 8;                 // dims per K run and per V row slice
    constexpr int NCH = HD / 16;                // k-chunks of S = Q·Kᵀ
    constexpr int NT = HD / 8;                  // n-tiles of O = P·V
    const int s = blockIdx.x, g = blockIdx.y, split = blockIdx.z;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, rr = lane >> 2, c = lane & 3;
    decode_cta cta = {};
    if (!cta.begin<HD, DT, P>(out, part, arrive, qstart, seq_lens, window, scales, n_kv, G, n_splits, min_split,
                              abs_split, sinks))
        return;
    const int pos = cta.pos, lo = cta.lo, b0 = cta.b0, b1 = cta.b1, t = cta.t;
    const float kscale = cta.kscale, vscale = cta.vscale;
    const score_map<CAP> sc(scale * kscale, softcap, 1.0f);  // raw score → natural units (CAP: soft-capped)

    float o[NT][4];
#pragma unroll
    for (int i = 0; i < NT; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    float vref = 0.0f, vrinv = 0.0f;  // TS: the warp's reference V scale r and 1/r

    const int32_t *bt = btab + (size_t)(seq_of ? seq_of[s] : s) * max_blocks;
    const char *K = (const char *)kc, *V = (const char *)vc;
    constexpr int BLK_BYTES = 16 * HD * ES;              // one block's rows of one KV head (K or V)
    extern __shared__ __align__(16) char ring[];          // [4 warps][STAGES][K, V][BLK_BYTES]
    char *my_ring = ring + (size_t)warp * STAGES * 2 * BLK_BYTES;
    // TS: then [4 warps][STAGES][K, V][16] f32 row scales
    float *my_sc = (float *)(ring + (size_t)4 * STAGES * 2 * BLK_BYTES) + (size_t)warp * STAGES * 32;
    kv_frags<HD, DT> f;
    // blk: a 16-token sub-block
    auto block_base = [&](int blk) { return kv_sub_block(bt, blk, n_kv, g, lgr) * 16 * HD * ES; };
    auto issue = [&](int blk, int stage) {  // the whole warp copies one block's K and V rows
        if (blk < b1) {
            const char *kg = K + block_base(blk), *vg = V + block_base(blk);
            char *ks = my_ring + (size_t)stage * 2 * BLK_BYTES, *vs = ks + BLK_BYTES;
#pragma unroll
            for (int o = lane * 16; o < BLK_BYTES; o += 32 * 16) {
                cp_async16(ks + o, kg + o);
                cp_async16(vs + o, vg + o);
            }
            if constexpr (TS) {  // lanes 0-3: K's 16 scales, 4-7: V's
                const size_t sub = kv_sub_block(bt, blk, n_kv, g, lgr);
                if (lane < 8)
                    cp_async16(my_sc + stage * 32 + 4 * lane,
                               lane < 4 ? kts + sub * 16 + 4 * lane : vts + sub * 16 + 4 * (lane - 4));
            }
        }
        cp_async_commit();  // an empty group keeps the wait count uniform
    };
#pragma unroll
    for (int i = 0; i < STAGES - 1; i++) issue(b0 + warp + 4 * i, i);
    // Q fragments (rows rr and rr+8; rows >= G are zero), loaded once the ring's first copies
    // are in flight so that the two latencies overlap
    uint32_t qa[NCH][4];
    {
        const bf16 *q0 = q + ((size_t)t * n_kv * G + g * G + rr) * HD;
#pragma unroll
        for (int j = 0; j < NCH; j++) {
            int base = j < NCH / 2 ? c * SEG + 4 * j : HD / 2 + c * SEG + 4 * (j - NCH / 2);
            float x0 = 0, x1 = 0, x2 = 0, x3 = 0;
            if (rr < G) {
                x0 = __bfloat162float(q0[base]); x1 = __bfloat162float(q0[base + 1]);
                x2 = __bfloat162float(q0[base + 2]); x3 = __bfloat162float(q0[base + 3]);
            }
            qa[j][0] = TR::q2(x0, x1);
            qa[j][1] = 0;  // row rr+8: unused
            qa[j][2] = TR::q2(x2, x3);
            qa[j][3] = 0;
        }
    }
    int stage = 0;
    for (int blk = b0 + warp; blk < b1; blk += 4) {
        issue(blk + 4 * (STAGES - 1), (stage + STAGES - 1) % STAGES);
        cp_async_wait<STAGES - 1>();
        __syncwarp();
        const char *ks = my_ring + (size_t)stage * 2 * BLK_BYTES;
        f.load(ks, ks + BLK_BYTES, rr, c);
        float tk[4] = {1.0f, 1.0f, 1.0f, 1.0f}, tv[4] = {0.0f, 0.0f, 0.0f, 0.0f};  // TS: keys 2c, 2c+1, 2c+8, 2c+9
        if constexpr (TS) {
            const float *scs = my_sc + stage * 32;
            tk[0] = scs[2 * c]; tk[1] = scs[2 * c + 1]; tk[2] = scs[2 * c + 8]; tk[3] = scs[2 * c + 9];
            tv[0] = scs[16 + 2 * c]; tv[1] = scs[17 + 2 * c]; tv[2] = scs[24 + 2 * c]; tv[3] = scs[25 + 2 * c];
        }
        __syncwarp();  // every lane has its words before the stage is refilled
        stage = (stage + 1) % STAGES;
        float sv[2][4];  // S = Q·Kᵀ for the two 8-key tiles
        qk_block<HD, DT>(sv, qa, f);
        // online softmax on row rr (rows rr+8 are padding)
        float x[4];
        int kp0 = blk * 16 + 2 * c;
        if constexpr (TS) {
            x[0] = sc(sv[0][0] * tk[0]); x[1] = sc(sv[0][1] * tk[1]);
            x[2] = sc(sv[1][0] * tk[2]); x[3] = sc(sv[1][1] * tk[3]);
        } else {
            x[0] = sc(sv[0][0]); x[1] = sc(sv[0][1]); x[2] = sc(sv[1][0]); x[3] = sc(sv[1][1]);
        }
        const int kpos[4] = {kp0, kp0 + 1, kp0 + 8, kp0 + 9};
        float mx = -INFINITY;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            if (kpos[i] < lo || kpos[i] > pos) {
                x[i] = -INFINITY;
                tv[i] = 0.0f;  // (TS: an unwritten row's scale may be anything)
            }
            mx = fmaxf(mx, x[i]);
        }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 2));
        float mn = fmaxf(m, mx);
        float alpha = mn == -INFINITY ? 1.0f : __expf(m - mn);
        float p[4];
#pragma unroll
        for (int i = 0; i < 4; i++) p[i] = mn == -INFINITY ? 0.0f : __expf(x[i] - mn);
        l = l * alpha + p[0] + p[1] + p[2] + p[3];
        m = mn;
#pragma unroll
        for (int i = 0; i < NT; i++) { o[i][0] *= alpha; o[i][1] *= alpha; }
        if constexpr (TS) {  // P·diag(s_v / r), r raised to the block's largest V scale first
            float bm = fmaxf(fmaxf(tv[0], tv[1]), fmaxf(tv[2], tv[3]));
            bm = fmaxf(bm, __shfl_xor_sync(0xffffffff, bm, 1));
            bm = fmaxf(bm, __shfl_xor_sync(0xffffffff, bm, 2));
            if (bm > vref) {  // (warp-uniform: the scales depend on c only)
                const float av = vref / bm;
#pragma unroll
                for (int i = 0; i < NT; i++) { o[i][0] *= av; o[i][1] *= av; }
                vref = bm;
                vrinv = 1.0f / bm;
            }
#pragma unroll
            for (int i = 0; i < 4; i++) p[i] *= tv[i] * vrinv;
        }
        uint32_t pa[4] = {TR::q2(p[0], p[1]), 0u, TR::q2(p[2], p[3]), 0u};
        pv_block<HD, DT>(o, pa, f);  // O += P·V; tile tt holds dims n·NT + tt
    }
    l += __shfl_xor_sync(0xffffffff, l, 1);
    l += __shfl_xor_sync(0xffffffff, l, 2);
    if constexpr (TS) {  // O in real units (r = 0: a warp with no keys, O = 0)
#pragma unroll
        for (int i = 0; i < NT; i++) { o[i][0] *= vref; o[i][1] *= vref; }
    }
    // merge the 4 warps through shared memory (rows < G only)
    __shared__ float sm_m[4][16], sm_l[4][16], sm_acc[4][8][HD];
    if (rr < G) {
        if (c == 0) { sm_m[warp][rr] = m; sm_l[warp][rr] = l; }
#pragma unroll
        for (int tt = 0; tt < NT; tt++) {
            sm_acc[warp][rr][(2 * c) * NT + tt] = o[tt][0];
            sm_acc[warp][rr][(2 * c + 1) * NT + tt] = o[tt][1];
        }
    }
    __syncthreads();
    merge_warps_store<HD>(sm_m, sm_l, sm_acc, G, t, n_kv, g, vscale, out, part, s, split, n_splits, sinks);
    if constexpr (P == DECODE_FUSED) {  // (one split wrote its output directly)
        if (n_splits > 1)
            split_arrive_combine<HD>(out, part, arrive, &sm_acc[0][0][0], t, n_kv, g, G, s, n_splits, sinks);
    }
}

// The heads-on-M decode kernel. --batch-invariant runs it for every query row at ring depth 3
// with DECODE_PLAIN (splits at absolute block positions, partials always through k_combine);
// dev/cuda/attention_decode.cu times its other forms. CAP: soft-capped scores (attn_args.softcap > 0).
// TS: per-token-head scales (e4m3; attn_args.kts, vts).
template <int HD, int DT, int STAGES, decode_policy P, bool CAP = false, bool TS = false>
__global__ void __launch_bounds__(128) k_decode_mma(const __grid_constant__ attn_args a) {
    decode_mma_body<HD, DT, STAGES, P, CAP, TS>(a.out, a.part, a.q, a.kc, a.vc, a.qstart, a.seq_lens, a.btab,
                                                a.max_blocks, a.lgr, a.n_kv, a.G, a.window, a.scale, a.scales,
                                                a.n_splits, a.min_split, a.seq_of, a.abs_split, a.arrive, a.softcap,
                                                a.kts, a.vts, a.sinks);
}
