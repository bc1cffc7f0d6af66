// cuda_decode.cu — the decode attention family (one query token per sequence, split-KV across
// CTAs; every kernel also in a soft-capped form, attn_params.softcap): the transposed tensor-core
// kernel for head_dim 64 / 128 / 256 with G <= 8 (cuda_decode_t.cuh),
// the batch-invariant path (cuda_decode_mma.cuh's kernel for every query row, splits at absolute
// positions), the split plan and the combine (cuda_combine.cuh). Owns their fits / launch entries of
// the kernel table and their per-backend set-up (shared-memory limits, residency).
//
// Per-token-head (fp8_per_token_head) e4m3 layers run the TS forms of both kernels. Attention sinks
// (attn_args.sinks) enter where a row is normalised: the one-split warp merge, or the combine.
//
// Data layout (docs/kv_format.md): cache [n_blocks][n_kv_heads][kv_block_tokens][head_dim];
// q, out [n_tokens][n_heads][head_dim] bf16.
#include <math.h>

#include "cuda_attention.cuh"
#include "cuda_decode_mma.cuh"
#include "cuda_prefill_fp8.cuh"  // (fp8pf::ex2, the exponential the transposed kernel shares)
#include "cuda_decode_t.cuh"
#include "cuda_combine.cuh"

// ---------------------------------------------------------------- split plans

// 16-token sub-blocks of the longest context a split plan covers: in a captured decode step the
// plan must not depend on the contexts, so it is planned for the block table's width.
static int plan_blocks(const struct attn_call *a) {
    const struct cuda_backend *c = a->c;
    int nb_max = c->fixed_plan ? c->cb.max_blocks_per_seq << a->lgr : (c->cb.max_ctx + 15) / 16;
    if (a->l->window > 0 && nb_max > a->l->window / 16 + 2) nb_max = a->l->window / 16 + 2;
    return nb_max;
}

// Splits the longest context into per-CTA block ranges: the grid is one wave of the `resident`
// CTAs the GPU holds at once (one long stream per CTA beats several waves of short ones: no partly
// filled last wave, no pipeline fill repeated), at least 4 blocks (one a warp) a split.
static void plan_splits(const struct attn_call *a, int resident, int *n_splits_out, int *per_split_out) {
    const int nb_max = plan_blocks(a), ctas = a->bt->n_seqs * a->l->n_kv_heads;
    int n_splits = resident / ctas;
    const int max_splits = (nb_max + 3) / 4;
    if (n_splits > max_splits) n_splits = max_splits;
    if (n_splits < 1) n_splits = 1;
    const int per_split = (nb_max + n_splits - 1) / n_splits;
    *n_splits_out = (nb_max + per_split - 1) / per_split;
    *per_split_out = per_split;
}

static int dtype_index(enum dtype dt) { return dt == DT_BF16 ? 0 : dt == DT_E4M3 ? 1 : 2; }

// ---------------------------------------------------------------- the transposed kernel (decode_t)

typedef void (*decode_fn)(attn_args);

// The transposed kernel's ring depth (cuda_decode_t.cuh says why 2).
#define DECODE_T_STAGES 2

// The transposed kernel for head_dim HD, cache type index di (bf16, e4m3, e5m2), launch policy and
// soft-capping (CAP).
template <int HD, bool CAP = false> static decode_fn decode_t_kernel(int di, decode_policy p) {
    constexpr int S = DECODE_T_STAGES;
    if (p == DECODE_FUSED)
        return di == 0   ? k_decode_t<HD, DT_BF16, S, DECODE_FUSED, CAP>
               : di == 1 ? k_decode_t<HD, DT_E4M3, S, DECODE_FUSED, CAP>
                         : k_decode_t<HD, DT_E5M2, S, DECODE_FUSED, CAP>;
    return di == 0   ? k_decode_t<HD, DT_BF16, S, DECODE_PDL, CAP>
           : di == 1 ? k_decode_t<HD, DT_E4M3, S, DECODE_PDL, CAP>
                     : k_decode_t<HD, DT_E5M2, S, DECODE_PDL, CAP>;
}
// The ring's bytes: 4 warps, the stages, K and V, 16 rows of HD elements (ts: and their 16 f32 scales).
static constexpr size_t decode_ring(int hd, int stages, int di, bool ts = false) {
    return (size_t)4 * stages * 2 * 16 * (hd * (di == 0 ? 2 : 1) + (ts ? 4 : 0));
}
// The transposed kernel's per-token-head form (e4m3 only).
template <int HD, bool CAP> static decode_fn decode_t_tok_kernel(decode_policy p) {
    constexpr int S = DECODE_T_STAGES;
    return p == DECODE_FUSED ? k_decode_t<HD, DT_E4M3, S, DECODE_FUSED, CAP, true>
                             : k_decode_t<HD, DT_E4M3, S, DECODE_PDL, CAP, true>;
}

// Shared-memory limits of the decode kernels and the residency the split plan assumes (asked of
// the fused instance, whose registers and shared memory decide it), once per backend.
template <int HD> static bool decode_init_hd(struct cuda_backend *c, int hi) {
    for (int di = 0; di < 3; di++) {
        const int ring = (int)decode_ring(HD, DECODE_T_STAGES, di);
        for (decode_policy p : {DECODE_FUSED, DECODE_PDL})
            for (decode_fn k : {decode_t_kernel<HD, false>(di, p), decode_t_kernel<HD, true>(di, p)}) {
                const cudaError_t e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, ring);
                if (cuda_fail(c, e, "decode attention: shared-memory limit")) return false;
            }
        if (di == 1) {
            const int ring_ts = (int)decode_ring(HD, DECODE_T_STAGES, di, true);
            for (decode_policy p : {DECODE_FUSED, DECODE_PDL})
                for (decode_fn k : {decode_t_tok_kernel<HD, false>(p), decode_t_tok_kernel<HD, true>(p)}) {
                    const cudaError_t e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, ring_ts);
                    if (cuda_fail(c, e, "decode attention (per-token-head): shared-memory limit")) return false;
                }
        }
        int per = 0;
        const decode_fn fused = decode_t_kernel<HD>(di, DECODE_FUSED);
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, fused, 128, ring) != cudaSuccess || per < 1) per = 1;
        c->decode_resident[hi][di] = per;
    }
    return true;
}

bool attn_decode_t_fits(const struct attn_call *a) {
    const int hd = a->l->head_dim;
    return a->decode && a->fast_dtype && a->lgr >= 0 && a->G <= 8 && (hd == 64 || hd == 128 || hd == 256) &&
           (!a->tok || a->l->dtype == DT_E4M3);
}

// decode_resident's first index
static constexpr int hd_index(int hd) { return hd == 64 ? 0 : hd == 128 ? 1 : 2; }

template <int HD, bool CAP> static decode_fn decode_t_pick(const struct attn_call *a, decode_policy p) {
    return a->tok ? decode_t_tok_kernel<HD, CAP>(p) : decode_t_kernel<HD, CAP>(dtype_index(a->l->dtype), p);
}

template <int HD, bool CAP> static void decode_t_launch(const struct attn_call *a) {
    struct cuda_backend *c = a->c;
    const struct kv_layer *l = a->l;
    const int G = a->G, di = dtype_index(l->dtype);
    const size_t ring = decode_ring(HD, DECODE_T_STAGES, di, a->tok);
    int n_splits, per_split;
    plan_splits(a, c->n_sm * c->decode_resident[hd_index(HD)][di], &n_splits, &per_split);
    const size_t need = (size_t)a->bt->n_seqs * l->n_kv_heads * G * n_splits * (HD + 2);
    if (n_splits > 1 && !cuda_reserve(c, &c->d_part, &c->part_cap, need)) return;
    attn_args args = attn_args_of(a);
    args.part = c->d_part;
    args.n_splits = n_splits;
    // every busy split takes at least this many blocks of its context, so short contexts use fewer,
    // fuller splits (the rest write empty partials and leave)
    args.min_split = l->dtype == DT_BF16 ? c->tune.decode_min_split_bf16 : c->tune.decode_min_split_fp8;
    const dim3 grid(a->bt->n_seqs, l->n_kv_heads, n_splits);
    // The kernel runs as a programmatic dependent of the launch before it. A one-sequence step of
    // 2..DECODE_FUSED_MAX splits whose weights fit the kernel's shared scratch combines in the decode
    // kernel's last CTA; otherwise k_combine merges its splits.
    if (a->bt->n_seqs == 1 && n_splits > 1 && n_splits <= DECODE_FUSED_MAX && 2 * G * n_splits + G <= 32 * HD) {
        const size_t cap = c->arrive_cap, cnt = (size_t)a->bt->n_seqs * l->n_kv_heads;
        if (!cuda_reserve(c, &c->d_arrive, &c->arrive_cap, cnt)) return;
        if (c->arrive_cap != cap &&
            cuda_fail(c, cudaMemsetAsync(c->d_arrive, 0, cnt * sizeof(int), c->stream), "cudaMemset"))
            return;
        args.arrive = c->d_arrive;
        cudaLaunchAttribute attr[1];
        const cudaLaunchConfig_t cfg = pdl_config(grid, dim3(128), ring, c->stream, attr);
        cuda_fail(c, cudaLaunchKernelEx(&cfg, decode_t_pick<HD, CAP>(a, DECODE_FUSED), args),
                  "attention decode (fused combine)");
        return;
    }
    cudaLaunchAttribute attr[1];
    const cudaLaunchConfig_t cfg = pdl_config(grid, dim3(128), ring, c->stream, attr);
    if (cuda_fail(c, cudaLaunchKernelEx(&cfg, decode_t_pick<HD, CAP>(a, DECODE_PDL), args), "attention decode"))
        return;
    if (n_splits > 1)
        launch_combine(c, a->out, a->bt->n_seqs, l->n_kv_heads * G, HD, n_splits, c->cb.qstart, a->sinks);
}

void attn_decode_t_launch(const struct attn_call *a) {
    const bool cap = a->p->softcap > 0;
    if (a->l->head_dim == 64) cap ? decode_t_launch<64, true>(a) : decode_t_launch<64, false>(a);
    else if (a->l->head_dim == 128) cap ? decode_t_launch<128, true>(a) : decode_t_launch<128, false>(a);
    else cap ? decode_t_launch<256, true>(a) : decode_t_launch<256, false>(a);
}

// ---------------------------------------------------------------- --batch-invariant (decode_invariant)

// Every query row, decode or prefill, runs the heads-on-M decode kernel's arithmetic with splits at
// absolute block positions (INVARIANT_SPLIT blocks each, as many as the block table is wide),
// always through the combine. A prefill row is a pseudo-sequence of its own (context = its
// position + 1, the block table of its sequence), so a token's attention is the same sum in the
// same order whether it was decoded or prefilled.
#define INVARIANT_SPLIT 64
__global__ void k_pseudo_seqs(int32_t *qs, int32_t *sl, const int32_t *pos, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { qs[i] = i; sl[i] = pos[i] + 1; }
}

#define INVARIANT_STAGES 3  // the heads-on-M kernel's ring depth on this path
template <int HD, bool CAP = false> static decode_fn decode_invariant_kernel(int di) {
    constexpr int S = INVARIANT_STAGES;
    return di == 0   ? k_decode_mma<HD, DT_BF16, S, DECODE_PLAIN, CAP>
           : di == 1 ? k_decode_mma<HD, DT_E4M3, S, DECODE_PLAIN, CAP>
                     : k_decode_mma<HD, DT_E5M2, S, DECODE_PLAIN, CAP>;
}

// (TS: the per-token-head form, e4m3)
template <int HD, bool CAP> static decode_fn decode_invariant_tok_kernel() {
    return k_decode_mma<HD, DT_E4M3, INVARIANT_STAGES, DECODE_PLAIN, CAP, true>;
}

template <int HD> static bool decode_invariant_init(struct cuda_backend *c) {
    for (int di = 0; di < 3; di++)
        for (decode_fn k : {decode_invariant_kernel<HD, false>(di), decode_invariant_kernel<HD, true>(di)}) {
            const cudaError_t e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                       (int)decode_ring(HD, INVARIANT_STAGES, di));
            if (cuda_fail(c, e, "decode attention (batch-invariant): shared-memory limit")) return false;
        }
    for (decode_fn k : {decode_invariant_tok_kernel<HD, false>(), decode_invariant_tok_kernel<HD, true>()}) {
        const cudaError_t e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                   (int)decode_ring(HD, INVARIANT_STAGES, 1, true));
        if (cuda_fail(c, e, "decode attention (batch-invariant, per-token-head): shared-memory limit")) return false;
    }
    return true;
}

bool attn_decode_invariant_fits(const struct attn_call *a) {
    const int hd = a->l->head_dim;
    return a->fast_dtype && a->lgr >= 0 && a->G <= 8 && (hd == 64 || hd == 128) && (!a->tok || a->l->dtype == DT_E4M3);
}

template <int HD, bool CAP> static void decode_invariant_launch(const struct attn_call *a) {
    struct cuda_backend *c = a->c;
    const struct kv_layer *l = a->l;
    const struct batch *bt = a->bt;
    const int G = a->G, di = dtype_index(l->dtype);
    const size_t ring = decode_ring(HD, INVARIANT_STAGES, di, a->tok);
    const decode_fn kern = a->tok ? decode_invariant_tok_kernel<HD, CAP>() : decode_invariant_kernel<HD, CAP>(di);
    // the same split count for every step of a table width: at least 2, so the combine always runs
    int n_splits = ((bt->max_blocks_per_seq << a->lgr) + INVARIANT_SPLIT - 1) / INVARIANT_SPLIT;
    if (n_splits < 2) n_splits = 2;
    const int n_rows = a->decode ? bt->n_seqs : bt->n_tokens;  // decode: a row a sequence; else a row a token
    const int32_t *qs = c->cb.qstart, *sl = c->cb.seq_lens, *seq_of = nullptr;
    if (!a->decode) {
        if (!cuda_reserve(c, &c->d_pseudo, &c->pseudo_cap, (size_t)2 * n_rows)) return;
        k_pseudo_seqs<<<(n_rows + 255) / 256, 256, 0, c->stream>>>(c->d_pseudo, c->d_pseudo + n_rows, c->cb.pos,
                                                                    n_rows);
        if (CUDA_LAUNCHED(c, "attention (batch-invariant): pseudo-sequences")) return;
        qs = c->d_pseudo;
        sl = c->d_pseudo + n_rows;
        seq_of = c->cb.tok_seq;
    }
    // rows in groups whose partials fit in 128 MB
    const size_t per_row = (size_t)l->n_kv_heads * G * n_splits * (HD + 2);
    int group = (int)(((size_t)128 << 20) / per_row);
    if (group < 1) group = 1;
    if (group > n_rows) group = n_rows;
    if (!cuda_reserve(c, &c->d_part, &c->part_cap, per_row * group)) return;
    attn_args args = attn_args_of(a);
    args.part = c->d_part;
    args.n_splits = n_splits;
    args.abs_split = INVARIANT_SPLIT;
    for (int r0 = 0; r0 < n_rows; r0 += group) {
        const int n = n_rows - r0 < group ? n_rows - r0 : group;
        args.qstart = qs + r0;
        args.seq_lens = sl + r0;
        args.seq_of = seq_of ? seq_of + r0 : nullptr;
        kern<<<dim3(n, l->n_kv_heads, n_splits), 128, ring, c->stream>>>(args);
        if (CUDA_LAUNCHED(c, "attention (batch-invariant)")) return;
        launch_combine(c, a->out, n, l->n_kv_heads * G, HD, n_splits, qs + r0, a->sinks);
    }
}

void attn_decode_invariant_launch(const struct attn_call *a) {
    const bool cap = a->p->softcap > 0;
    if (a->l->head_dim == 64) cap ? decode_invariant_launch<64, true>(a) : decode_invariant_launch<64, false>(a);
    else cap ? decode_invariant_launch<128, true>(a) : decode_invariant_launch<128, false>(a);
}

bool cuda_decode_init(struct cuda_backend *c) {
    return decode_init_hd<64>(c, 0) && decode_init_hd<128>(c, 1) && decode_init_hd<256>(c, 2) &&
           decode_invariant_init<64>(c) &&
           decode_invariant_init<128>(c);
}
