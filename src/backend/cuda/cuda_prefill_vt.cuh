// cuda_prefill_vt.cuh — V transposed ahead of the FP8 TMA prefill, included by
// cuda_prefill_fp8_tma.cuh before its host side. Owns k_prefill_vt and its launch: each 128-key tile of a
// sequence's V (the e4m3 cache, read through the block table) written once per layer and step as
// the P·V wgmma's K-major Vᵀ operand — the core-matrix layout and key permutation that
// fp8tma::transpose_ldsm writes into shared memory (the same function writes it here), keys past
// the sequence's end as 0 — into the backend's scratch c->d_vt, [vt_tiles][n_kv][HD·128 bytes].
// The prefill kernel's copy warp then moves a tile of Vᵀ with one bulk copy into the ring slot
// beside its K, and its three transposing warps sit out.
//
// Which sequences: those with at least cuda_tuning.fp8_vt_min_q query tokens and fp8_vt_min_ctx of
// context (vt_plan in cuda_backend.cu). The pass reads V once and writes it once (2 bytes moved per V byte, ≈ 1 % of
// the kernel at 16k), where the kernel reads V once per query tile — a sequence with few query
// tokens gains less than the pass costs. The cache format is unchanged: decode, the older prefill
// kernel and the CPU backend read the same blocks (docs/kv_format.md).
#pragma once

// One CTA = (tile, KV head): 128 threads load the tile's raw rows into a 128-byte-swizzled stage
// (64-byte at head_dim 64: TMA's layout, which transpose_ldsm reads), transpose it, and store it.
template <int HD>
__global__ void __launch_bounds__(128)
    k_prefill_vt(uint8_t *vt /* [vt_tiles][n_kv][HD·BN] */, const uint8_t *v /* [n_blocks][n_kv][bs][HD] */,
                 const int32_t *vt_start /* [n_seqs + 1] */, const int32_t *seq_lens /* [n_seqs] */,
                 const int32_t *btab /* [n_seqs][max_blocks] */, int max_blocks, int n_seqs, int n_kv, int bs) {
    constexpr int BN = fp8tma::BN, TB = BN * HD, CH = HD / 16;  // 16-byte chunks a key row
    __shared__ __align__(1024) uint8_t raw[TB];
    __shared__ __align__(1024) uint8_t tr[TB];
    const int tile = blockIdx.x, g = blockIdx.y, tid = threadIdx.x;
    int lo = 0, hi = n_seqs - 1;  // the sequence: the last s with vt_start[s] <= tile
    while (lo < hi) {
        const int mid = (lo + hi + 1) >> 1;
        if (vt_start[mid] <= tile) lo = mid;
        else hi = mid - 1;
    }
    const int s = lo, t = tile - vt_start[s], len = seq_lens[s];
    const int32_t *bt = btab + (size_t)s * max_blocks;
    for (int q = tid; q < BN * CH; q += 128) {
        const int r = q / CH, j = q % CH, kp = t * BN + r;
        if (kp >= len) continue;  // (masked to 0 by the transpose)
        const uint8_t *src = v + (((size_t)bt[kp / bs] * n_kv + g) * bs + kp % bs) * HD + j * 16;
        const int x = HD == 128 ? r & 7 : (r >> 1) & 3;
        *(uint4 *)(raw + r * HD + ((j ^ x) << 4)) = *(const uint4 *)src;
    }
    __syncthreads();
    fp8tma::transpose_ldsm<HD>(raw, tr, tid >> 5, tid & 31, 4, len - 1 - t * BN);
    __syncthreads();
    uint4 *dst = (uint4 *)(vt + ((size_t)tile * n_kv + g) * TB);
    for (int q = tid; q < TB / 16; q += 128) dst[q] = ((const uint4 *)tr)[q];
}

// The pass for this layer, into c->d_vt; returns it, or nullptr when no sequence takes it or its
// scratch cannot be had (the kernel then transposes every tile itself; nothing is latched).
template <int HD>
static const uint8_t *launch_prefill_vt(struct cuda_backend *c, const struct kv_layer *l, const struct batch *bt) {
    const int tiles = c->cb.vt_tiles;
    if (tiles <= 0) return nullptr;
    const size_t need = (size_t)tiles * l->n_kv_heads * fp8tma::BN * HD;
    if (need > c->vt_cap) {
        cudaFree(c->d_vt);
        c->d_vt = nullptr;
        c->vt_cap = 0;
        if (cudaMalloc((void **)&c->d_vt, need) != cudaSuccess) {
            (void)cudaGetLastError();  // (out of memory: not an error of the step)
            return nullptr;
        }
        c->vt_cap = need;
    }
    k_prefill_vt<HD><<<dim3((unsigned)tiles, (unsigned)l->n_kv_heads), 128, 0, c->stream>>>(
        c->d_vt, (const uint8_t *)l->v, c->cb.vt_start, c->cb.seq_lens, c->cb.btab, bt->max_blocks_per_seq, bt->n_seqs,
        l->n_kv_heads, l->kv_block_tokens);
    if (CUDA_LAUNCHED(c, "attention prefill (fp8 Vᵀ pass)")) return nullptr;
    return c->d_vt;
}
