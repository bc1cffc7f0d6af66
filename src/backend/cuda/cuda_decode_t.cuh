// cuda_decode_t.cuh — paged decode attention with the keys on the MMA's M side (decode for
// G <= 8 at head_dim 64, 128 and 256), included by cuda_decode.cu after cuda_decode_mma.cuh, whose
// operand traits, ring copies, split ranges, warp merge and fused combine it shares. Owns: the
// transposed kernel, its fragment layouts and its lazily rescaled softmax.
//
// Why: with one query token, a KV head's G query heads are the only rows there are. The plain
// kernel puts them on M (16 rows, 4 used for Llama-3's G = 4), so three quarters of every MMA
// is padding and each 16-key block costs 32 MMAs. Here the 16 keys of a block are M and the
// G <= 8 heads are N:
//   Sᵀ = K·Qᵀ   m16n8k16, A = the block's K (16 keys × 16 dims), B = Qᵀ; HD/16 MMAs a block
//   Oᵀ += Vᵀ·Pᵀ m16n8k16, A = Vᵀ (16 dims × 16 keys), B = Pᵀ;     HD/16 MMAs a block
// half the MMAs and half the accumulator registers (Oᵀ: 4·HD/16 floats a lane).
// Dot products do not care about the order of their terms, so dims are permuted to make each
// lane's operands contiguous runs in memory:
//   Sᵀ: lane (g = lane/4, c = lane%4) reads keys g and g+8, dims [c·HD/4, +HD/4); chunk j's
//       positions 2c, 2c+1, 2c+8, 2c+9 are dims c·HD/4 + 4j + 0..3 (Q loaded with the same map).
//   Oᵀ: lane (g, c) reads keys 2c, 2c+1, 2c+8, 2c+9, dims [g·HD/8, +HD/8); tile t's rows g and
//       g+8 are dims g·HD/8 + 2t and + 1.
// Pᵀ moves from the Sᵀ accumulator layout (a lane holds keys g, g+8 of heads 2c, 2c+1) to the B
// operand layout (keys 2c, 2c+1, 2c+8, 2c+9 of head g) with four shuffles.
// Softmax in the log2 domain with a lazily raised maximum: the running max m of a head moves
// (a warp-wide reduction and a rescale of Oᵀ and l) only when some score exceeds m + 8, so
// P <= 2^8 — exact in the f16/bf16 operand and in the FP32 sums; the result does not depend on
// which m was used. The ring's 16-byte chunks are XOR-swizzled by row so that the lanes' reads
// of 8 different rows fall in different banks.
// Per-token-head scales (TS, e4m3 only): the ring also carries each block's 16 K and 16 V row
// scales (64 bytes each, beside the rows in the pages' allocation), so they arrive with the rows. A
// lane's scores are of keys gr and gr+8, and so are its P values before the shuffle, so it needs
// just those two keys' scales: the score is (q·k_stored)·s_k before the score map; V's scale goes
// into P as p·s_v/r, where r is the warp's running reference, the largest V scale it has seen — so
// the f16 operand stays <= 2^8 — raised like the maximum (Oᵀ rescaled by r_old/r_new when a block
// holds a larger scale), and Oᵀ is multiplied by r before the warps merge. l sums the unscaled p.
// Attention sinks (attn_args.sinks) join the denominator where the output is normalised: in the
// warp merge when the context is one split, else in the combine (merge_warps_store, k_combine,
// split_arrive_combine), once.
#pragma once

namespace dect {

// byte offset of (row r, byte b) of a block's [16][ROWB] rows in the ring, chunks swizzled
template <int ROWB> __device__ __forceinline__ int swz(int r, int b) {
    constexpr int NCHK = ROWB / 16 < 8 ? ROWB / 16 : 8;
    return r * ROWB + ((((b >> 4) ^ (r & (NCHK - 1)))) << 4) + (b & 15);
}

// N bytes (a multiple of 8) of row r from byte b on, as words, through the swizzle
template <int ROWB, int N> __device__ __forceinline__ void load_run(uint32_t *w, const char *blk, int r, int b) {
    if constexpr (N == 8) {
        uint2 v = *(const uint2 *)(blk + swz<ROWB>(r, b));
        w[0] = v.x; w[1] = v.y;
    } else {
#pragma unroll
        for (int i = 0; i < N / 16; i++) {
            uint4 v = *(const uint4 *)(blk + swz<ROWB>(r, b + 16 * i));
            w[4 * i] = v.x; w[4 * i + 1] = v.y; w[4 * i + 2] = v.z; w[4 * i + 3] = v.w;
        }
    }
}

template <int HD, int DT> struct frags {
    static constexpr int ES = DT == DT_BF16 ? 2 : 1, ROWB = HD * ES;
    static constexpr int KB = HD / 4 * ES, VB = HD / 8 * ES;  // bytes a lane reads of a K row, of a V row
    uint32_t k[2][KB / 4], v[4][VB / 4];
    __device__ __forceinline__ void load_k(const char *kb, int g, int c) {
        load_run<ROWB, KB>(k[0], kb, g, c * KB);
        load_run<ROWB, KB>(k[1], kb, g + 8, c * KB);
    }
    __device__ __forceinline__ void load_v(const char *vb, int g, int c) {
        const int vk[4] = {2 * c, 2 * c + 1, 2 * c + 8, 2 * c + 9};
#pragma unroll
        for (int i = 0; i < 4; i++) load_run<ROWB, VB>(v[i], vb, vk[i], g * VB);
    }
};

}  // namespace dect

// The launch policies (enum decode_policy, cuda_decode_mma.cuh) as this kernel runs them:
//   DECODE_PDL and DECODE_FUSED, programmatic dependents (what the fused form's dependence saves a
//     one-sequence step: bench/fp8_weights/RESULTS.md): in a decode step the kernel before it is the
//     Q|K|V launch with RoPE and the cache write, which writes Q and the newest token's K and V, so
//     the CTA's start, its split plan, block-table reads and first copies overlap that kernel's end.
//     Before pdl_wait() a CTA reads only what the host uploaded and cache blocks older than the step;
//     the split holding the newest block waits before its first copy, every other split just before
//     Q; an empty DECODE_PDL split waits before writing its empty partial (a fused step's partials
//     and output were last read by kernels that ended before the Q|K|V launch began). FP8 caches
//     refill a ring stage as soon as the stage's fragments are in registers, before computing them
//     (EARLY: one more block in flight while it computes, in the same shared memory); bf16 refills
//     at the top of the next iteration, which is as fast for it.
//   DECODE_PLAIN: an ordinary launch; a stage is refilled at the top of the next iteration.
template <int HD, int DT, int STAGES, decode_policy P, bool CAP, bool TS>
__device__ __forceinline__ void decode_t_body(bf16 *out, float *part, const bf16 *q, const void *kc, const void *vc,
                                              const int32_t *qstart, const int32_t *seq_lens, const int32_t *btab,
                                              int max_blocks, int lgr, int n_kv, int G, int window, float scale,
                                              const float *scales, int n_splits, int min_split,
                                              const int32_t *seq_of, int abs_split, int *arrive, float softcap,
                                              const float *kts, const float *vts, const float *sinks) {
    static_assert(STAGES >= 2, "the ring is required");
    static_assert(!TS || DT == DT_E4M3, "per-token-head scales are e4m3 only");
    constexpr bool PDLW = P == DECODE_PDL || P == DECODE_FUSED, EARLY = PDLW && DT != DT_BF16;
    // LATE_V: a bf16 block at head_dim 256 is 128 words of K and V fragments a lane; V's are read after
    // the scores, when K's are dead, so that Qᵀ, Oᵀ and one operand fit the registers (no spills)
    constexpr bool LATE_V = HD == 256 && !EARLY && DT == DT_BF16;
    typedef mma_traits<DT> TR;
    pdl_trigger();
    constexpr int ES = DT == DT_BF16 ? 2 : 1, NJ = HD / 16;  // NJ: MMAs per block for Sᵀ and for Oᵀ
    const int s = blockIdx.x, g = blockIdx.y, split = blockIdx.z;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gr = lane >> 2, c = lane & 3;
    decode_cta cta = {};
    if (!cta.begin<HD, DT, P>(out, part, arrive, qstart, seq_lens, window, scales, n_kv, G, n_splits, min_split,
                              abs_split, sinks))
        return;
    const int pos = cta.pos, lo = cta.lo, b0 = cta.b0, b1 = cta.b1, t = cta.t;
    const float kscale = cta.kscale, vscale = cta.vscale;
    // scores → log2 units (CAP: soft-capped)
    const score_map<CAP> sc2(scale * kscale * 1.4426950408889634f, softcap, 1.4426950408889634f);

    const int32_t *bt = btab + (size_t)(seq_of ? seq_of[s] : s) * max_blocks;
    const char *K = (const char *)kc, *V = (const char *)vc;
    constexpr int ROWB = HD * ES, BLK_BYTES = 16 * ROWB;
    extern __shared__ __align__(16) char ring_t[];  // [4 warps][STAGES][K, V][BLK_BYTES], swizzled rows
    char *my_ring = ring_t + (size_t)warp * STAGES * 2 * BLK_BYTES;
    // TS: then [4 warps][STAGES][K, V][16] f32 row scales
    float *my_sc = (float *)(ring_t + (size_t)4 * STAGES * 2 * BLK_BYTES) + (size_t)warp * STAGES * 32;
    auto issue = [&](int blk, int stage) {
        if (blk < b1) {
            const size_t sub = kv_sub_block(bt, blk, n_kv, g, lgr), base = sub * BLK_BYTES;  // blk: 16-token sub-block
            const char *kg = K + base, *vg = V + base;
            char *ks = my_ring + (size_t)stage * 2 * BLK_BYTES, *vs = ks + BLK_BYTES;
#pragma unroll
            for (int o = lane * 16; o < BLK_BYTES; o += 32 * 16) {
                int so = dect::swz<ROWB>(o / ROWB, o % ROWB);
                cp_async16(ks + so, kg + o);
                cp_async16(vs + so, vg + o);
            }
            if constexpr (TS) {  // lanes 0-3: K's 16 scales, 4-7: V's
                if (lane < 8)
                    cp_async16(my_sc + stage * 32 + 4 * lane,
                               lane < 4 ? kts + sub * 16 + 4 * lane : vts + sub * 16 + 4 * (lane - 4));
            }
        }
        cp_async_commit();
    };
    const bool hot = PDLW && b1 > pos / 16;  // this split holds the newest block (PDLW)
    if constexpr (PDLW) {
        if (hot) pdl_wait();
    }
#pragma unroll
    for (int i = 0; i < STAGES - (EARLY ? 0 : 1); i++) issue(b0 + warp + 4 * i, i);
    if constexpr (PDLW) {
        if (!hot) pdl_wait();  // Q next
    }

    // Qᵀ as B fragments: head gr (zero past G), dims c·HD/4 + 4j + {0,1} and {2,3}
    uint32_t qb[NJ][2];
    {
        const bf16 *q0 = q + ((size_t)t * n_kv * G + g * G + gr) * HD + c * (HD / 4);
#pragma unroll
        for (int j = 0; j < NJ; j++) {
            float x[4] = {0, 0, 0, 0};
            if (gr < G)
#pragma unroll
                for (int e = 0; e < 4; e++) x[e] = __bfloat162float(q0[4 * j + e]);
            qb[j][0] = TR::q2(x[0], x[1]);
            qb[j][1] = TR::q2(x[2], x[3]);
        }
    }
    float o[NJ][4];  // Oᵀ tile jt: rows gr, gr+8 = dims gr·HD/8 + 2jt, +1; columns 2c, 2c+1 = heads
#pragma unroll
    for (int i = 0; i < NJ; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
    // heads 2c, 2c+1 (m: log2 units; l: this lane's keys)
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    float vref = 0.0f, vrinv = 0.0f;  // TS: the warp's reference V scale r and 1/r
    dect::frags<HD, DT> f;
    int stage = 0;
    for (int blk = b0 + warp; blk < b1; blk += 4) {
        if constexpr (!EARLY) issue(blk + 4 * (STAGES - 1), (stage + STAGES - 1) % STAGES);
        cp_async_wait<STAGES - 1>();  // (EARLY: STAGES groups outstanding, so this stage's has landed)
        __syncwarp();
        const char *ks = my_ring + (size_t)stage * 2 * BLK_BYTES;
        f.load_k(ks, gr, c);
        float tk[2] = {1.0f, 1.0f}, tv[2] = {0.0f, 0.0f};  // TS: keys gr, gr+8's K and V scales
        if constexpr (TS) {
            const float *sc = my_sc + stage * 32;
            tk[0] = sc[gr]; tk[1] = sc[gr + 8];
            tv[0] = sc[16 + gr]; tv[1] = sc[24 + gr];
        }
        if constexpr (!LATE_V) {
            f.load_v(ks + BLK_BYTES, gr, c);
            __syncwarp();  // every lane has its words before the stage is refilled
        }
        if constexpr (EARLY) issue(blk + 4 * STAGES, stage);
        stage = (stage + 1) % STAGES;

        // Sᵀ: two accumulator chains (even and odd chunks) for half the dependent latency
        float sa[4] = {0, 0, 0, 0}, sb[4] = {0, 0, 0, 0};
#pragma unroll
        for (int j = 0; j < NJ; j++) {
            uint32_t a[4];
            if constexpr (DT == DT_BF16) {
                a[0] = f.k[0][2 * j]; a[1] = f.k[1][2 * j];
                a[2] = f.k[0][2 * j + 1]; a[3] = f.k[1][2 * j + 1];
            } else {
                a[0] = TR::pair(f.k[0][j]); a[1] = TR::pair(f.k[1][j]);
                a[2] = TR::pair(f.k[0][j] >> 16); a[3] = TR::pair(f.k[1][j] >> 16);
            }
            TR::mma(j & 1 ? sb : sa, a, qb[j][0], qb[j][1]);
        }
        // x[i]: (key gr, head 2c), (key gr, head 2c+1), (key gr+8, head 2c), (key gr+8, head 2c+1)
        float x[4];
#pragma unroll
        for (int i = 0; i < 4; i++) x[i] = sc2(TS ? (sa[i] + sb[i]) * tk[i >> 1] : sa[i] + sb[i]);
        if (blk * 16 < lo || blk * 16 + 15 > pos) {  // a block at the window's start or past the position
            const int kp = blk * 16 + gr;
            if (kp < lo || kp > pos) { x[0] = x[1] = -INFINITY; tv[0] = 0.0f; }  // (TS: unwritten rows' scales)
            if (kp + 8 < lo || kp + 8 > pos) { x[2] = x[3] = -INFINITY; tv[1] = 0.0f; }
        }
        const bool raise = x[0] > m[0] + 8.0f || x[2] > m[0] + 8.0f || x[1] > m[1] + 8.0f || x[3] > m[1] + 8.0f;
        if (__any_sync(0xffffffff, raise)) {  // both heads' new maxima, across the 8 lanes of each column
            float mx[2] = {fmaxf(x[0], x[2]), fmaxf(x[1], x[3])};
#pragma unroll
            for (int h = 0; h < 2; h++) {
#pragma unroll
                for (int off = 4; off < 32; off <<= 1)
                    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffff, mx[h], off));
                const float mn = fmaxf(m[h], mx[h]);
                const float alpha = mn == -INFINITY ? 1.0f : fp8pf::ex2(m[h] - mn);
                l[h] *= alpha;
#pragma unroll
                for (int jt = 0; jt < NJ; jt++) { o[jt][h] *= alpha; o[jt][2 + h] *= alpha; }
                m[h] = mn;
            }
        }
        const float ms0 = m[0] == -INFINITY ? 0.0f : m[0], ms1 = m[1] == -INFINITY ? 0.0f : m[1];
        float p0 = fp8pf::ex2(x[0] - ms0), p1 = fp8pf::ex2(x[1] - ms1), p2 = fp8pf::ex2(x[2] - ms0),
              p3 = fp8pf::ex2(x[3] - ms1);
        l[0] += p0 + p2;
        l[1] += p1 + p3;
        if constexpr (TS) {  // P·diag(s_v / r), r raised to the block's largest V scale first
            // (a vote first: the block's maximum across the lanes only when some scale exceeds r, which
            // gives the same r as taking it every block)
            if (__any_sync(0xffffffff, tv[0] > vref || tv[1] > vref)) {
                float bm = fmaxf(tv[0], tv[1]);
#pragma unroll
                for (int off = 4; off < 32; off <<= 1) bm = fmaxf(bm, __shfl_xor_sync(0xffffffff, bm, off));
                const float alpha = vref / bm;
#pragma unroll
                for (int jt = 0; jt < NJ; jt++)
#pragma unroll
                    for (int e = 0; e < 4; e++) o[jt][e] *= alpha;
                vref = bm;
                vrinv = 1.0f / bm;
            }
            const float f0 = tv[0] * vrinv, f1 = tv[1] * vrinv;
            p0 *= f0; p1 *= f0; p2 *= f1; p3 *= f1;
        }
        // Pᵀ → B operand: lane (gr, c) wants keys 2c, 2c+1 (b0) and 2c+8, 2c+9 (b1) of head gr; lane
        // 4k + gr/2 holds keys k, k+8 of heads gr & ~1 (ev) and gr | 1 (od)
        const uint32_t ev = TR::q2(p0, p2), od = TR::q2(p1, p3);
        const int src = 8 * c + (gr >> 1);
        const uint32_t e1 = __shfl_sync(0xffffffff, ev, src), o1 = __shfl_sync(0xffffffff, od, src);
        const uint32_t e2 = __shfl_sync(0xffffffff, ev, src + 4), o2 = __shfl_sync(0xffffffff, od, src + 4);
        const uint32_t w1 = gr & 1 ? o1 : e1, w2 = gr & 1 ? o2 : e2;  // (key 2c, 2c+8), (key 2c+1, 2c+9)
        const uint32_t pb0 = __byte_perm(w1, w2, 0x5410), pb1 = __byte_perm(w1, w2, 0x7632);
        if constexpr (LATE_V) {
            f.load_v(ks + BLK_BYTES, gr, c);
            __syncwarp();  // (the stage is refilled at the top of the next iteration)
        }
        // Oᵀ += Vᵀ·Pᵀ: tile jt's A rows gr, gr+8 = the lane's V dims 2jt, 2jt+1 of keys 2c, 2c+1 |
        // 2c+8, 2c+9
#pragma unroll
        for (int jt = 0; jt < NJ; jt++) {
            uint32_t a[4];
            if constexpr (DT == DT_BF16) {
                a[0] = __byte_perm(f.v[0][jt], f.v[1][jt], 0x5410);
                a[1] = __byte_perm(f.v[0][jt], f.v[1][jt], 0x7632);
                a[2] = __byte_perm(f.v[2][jt], f.v[3][jt], 0x5410);
                a[3] = __byte_perm(f.v[2][jt], f.v[3][jt], 0x7632);
            } else {
                const unsigned b = 2 * (jt & 1), s0 = b | ((4 + b) << 4), s1 = (b + 1) | ((5 + b) << 4);
                const int w = jt >> 1;
                a[0] = TR::pair(__byte_perm(f.v[0][w], f.v[1][w], s0));
                a[1] = TR::pair(__byte_perm(f.v[0][w], f.v[1][w], s1));
                a[2] = TR::pair(__byte_perm(f.v[2][w], f.v[3][w], s0));
                a[3] = TR::pair(__byte_perm(f.v[2][w], f.v[3][w], s1));
            }
            TR::mma(o[jt], a, pb0, pb1);
        }
    }
    // each head's l over its column's 8 lanes; then the 4 warps merge through shared memory
#pragma unroll
    for (int h = 0; h < 2; h++)
#pragma unroll
        for (int off = 4; off < 32; off <<= 1) l[h] += __shfl_xor_sync(0xffffffff, l[h], off);
    // (in the ring's bytes, free once every warp has left its loop: 16 KB less shared memory a CTA)
    float(*sm_acc)[8][HD] = (float(*)[8][HD])ring_t;
    float(*sm_m)[16] = (float(*)[16])(ring_t + sizeof(float) * 4 * 8 * HD), (*sm_l)[16] = sm_m + 4;
    static_assert(4 * STAGES * 2 * BLK_BYTES >= (int)sizeof(float) * (4 * 8 * HD + 2 * 4 * 16),
                  "the merge fits the ring");
    if constexpr (TS) {  // Oᵀ in real units (r = 0: a warp with no keys, Oᵀ = 0)
#pragma unroll
        for (int jt = 0; jt < NJ; jt++)
#pragma unroll
            for (int e = 0; e < 4; e++) o[jt][e] *= vref;
    }
    __syncthreads();
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int head = 2 * c + h;
        if (head >= G) continue;
        if (gr == 0) {  // (m in natural-log units)
            sm_m[warp][head] = m[h] * 0.6931471805599453f;
            sm_l[warp][head] = l[h];
        }
#pragma unroll
        for (int jt = 0; jt < NJ; jt++) {
            sm_acc[warp][head][gr * (HD / 8) + 2 * jt] = o[jt][h];
            sm_acc[warp][head][gr * (HD / 8) + 2 * jt + 1] = o[jt][2 + h];
        }
    }
    __syncthreads();
    merge_warps_store<HD>(sm_m, sm_l, sm_acc, G, t, n_kv, g, vscale, out, part, s, split, n_splits, sinks);
    if constexpr (P == DECODE_FUSED) {
        if (n_splits > 1)
            split_arrive_combine<HD>(out, part, arrive, &sm_acc[0][0][0], t, n_kv, g, G, s, n_splits, sinks);
    }
}

// The transposed decode kernel. Production runs ring depth 2 (one block in flight while one
// computes; a third stage queues more requests ahead of every warp's first block and is slower)
// with DECODE_PDL or DECODE_FUSED; dev/cuda/attention_decode.cu times its other forms. CAP: soft-capped
// scores (attn_args.softcap > 0). TS: per-token-head scales (e4m3; attn_args.kts, vts).
template <int HD, int DT, int STAGES, decode_policy P, bool CAP = false, bool TS = false>
__global__ void __launch_bounds__(128) k_decode_t(const __grid_constant__ attn_args a) {
    decode_t_body<HD, DT, STAGES, P, CAP, TS>(a.out, a.part, a.q, a.kc, a.vc, a.qstart, a.seq_lens, a.btab,
                                              a.max_blocks, a.lgr, a.n_kv, a.G, a.window, a.scale, a.scales,
                                              a.n_splits, a.min_split, a.seq_of, a.abs_split, a.arrive, a.softcap,
                                              a.kts, a.vts, a.sinks);
}
