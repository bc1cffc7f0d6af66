// cuda_kv_write.cu — writing K and V into the paged cache: kv_write (quantize into the pages,
// bytes identical to the CPU's; per-token-head layers through k_kv_write_tok, which also stores
// each row's scale), cuda_rope_kv_write (RoPE on Q and K and the same write in one
// launch, attn_in's tail for the steps its fused GEMM does not take), and the per-layer FP8 scales
// and K offsets uploaded for them and for the attention kernels (cuda_layer_scales), kept in the
// backend (struct cuda_backend.scale_slots).
//
// Data layout (docs/kv_format.md): cache [n_blocks][n_kv_heads][kv_block_tokens][head_dim];
// k, v inputs [n_tokens][n_kv_heads][head_dim] bf16.
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_common.cuh"

// ---------------------------------------------------------------- kv_write

// (to_fp8, k_store, v_store, kv_store: cuda_kv_store.cuh)

// The cache side of a write: n_tokens tokens' K and V into a layer's pages at their slots.
struct kv_dst {
    void *kc, *vc;             // the layer's K and V pages
    const int32_t *slot;       // [n_tokens] (< 0: not stored)
    int n_tokens, n_kv, hd, bs, dt;
    const float *ks, *vs;      // [n_kv] scales
    const float *ko;           // [n_kv][hd] K offsets subtracted (in f32, as the CPU does) before an FP8 store, or NULL
    // fp8_per_token_head: [n_blocks][n_kv][bs] row scales beside the pages (kv_layer.k_tok_scale /
    // v_tok_scale), or NULL. When set, the per-element kernels leave the pages alone and
    // k_kv_write_tok stores the rows.
    float *kts, *vts;
};

// The rotation: RoPE table and the batch's positions.
struct rope_src {
    const int32_t *pos;        // [n_tokens]
    const double *inv_freq;    // [half]
    int n_heads, half, neox;
    float attn_factor;
};

__global__ void k_kv_write(const bf16 *k, const bf16 *v, const kv_dst dst) {
    void *const kc = dst.kc, *const vc = dst.vc;
    const int32_t *const slot = dst.slot;
    const int n_tokens = dst.n_tokens, n_kv = dst.n_kv, hd = dst.hd, bs = dst.bs, dt = dst.dt;
    const float *const ks = dst.ks, *const vs = dst.vs, *const ko = dst.ko;
    long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    long per_tok = (long)n_kv * hd;
    if (idx >= (long)n_tokens * per_tok) return;
    int t = (int)(idx / per_tok), h = (int)((idx % per_tok) / hd), d = (int)(idx % hd);
    int s = slot[t];
    if (s < 0) return;
    const size_t at = kv_index(s, h, d, n_kv, bs, hd);
    kv_store(kc, vc, at, k[idx], v[idx], dt, ks[h], vs[h], ko ? ko + h * hd + d : nullptr);
}

// RoPE on Q and K and kv_write in one launch (a decode step's three small kernels a layer become
// one): one thread per (token, pair of dims, group of hpt heads of Q then K), so the pair's angle
// (a double sincos) and the thread's index arithmetic are paid once for hpt heads — prefill
// launches take 6 heads a thread, decode-sized ones 1 (enough threads to fill the GPU). Pairs below
// half are the rotated ones (as k_rope: (i, i + half) or (2i, 2i + 1)); the rest cover the dims
// past n_rot two at a time. A K head's thread stores its two K and V elements as k_kv_write does
// (kv_store), so the pages get the same bytes as rope, rope, kv_write. pdl_trigger() first, so the
// decode kernel after it, a programmatic dependent, may launch while this grid still runs
// (cuda_pdl.cuh; it waits for this grid before it reads Q or the newest block).
__global__ void k_rope_kv_write(bf16 *q /*[n_tokens][n_heads][hd]*/, bf16 *k /*[n_tokens][n_kv][hd]*/, const bf16 *v,
                                const rope_src rs, const kv_dst dst, int hpt) {
    void *const kc = dst.kc, *const vc = dst.vc;
    const int n_tokens = dst.n_tokens, n_heads = rs.n_heads, n_kv = dst.n_kv, hd = dst.hd, half = rs.half,
              neox = rs.neox;
    const int bs = dst.bs, dt = dst.dt;
    const float *const ks = dst.ks, *const vs = dst.vs, *const ko = dst.ko;
    pdl_trigger();
    const long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    const int pairs = hd / 2, nh = n_heads + n_kv, groups = (nh + hpt - 1) / hpt;
    if (idx >= (long)n_tokens * groups * pairs) return;
    const int j = (int)(idx % pairs);
    const long tg = idx / pairs;
    const int grp = (int)(tg % groups), t = (int)(tg / groups);
    const bool rot = j < half;
    const int a = rot && neox ? j : 2 * j, b = rot && neox ? j + half : 2 * j + 1;  // (2·half = n_rot)
    float c = 1.0f, sn = 0.0f;
    if (rot) rope_angle(rs.pos[t], rs.inv_freq[j], rs.attn_factor, c, sn);
    const int s = dst.slot[t], h1 = min(nh, (grp + 1) * hpt);
    for (int h = grp * hpt; h < h1; h++) {
        const bool is_k = h >= n_heads;
        bf16 *hv = is_k ? k + ((size_t)t * n_kv + (h - n_heads)) * hd : q + ((size_t)t * n_heads + h) * hd;
        if (rot) rope_rotate(hv[a], hv[b], c, sn);
        if (!is_k || dst.kts || s < 0) continue;  // (per-token-head rows: k_kv_write_tok after this launch)
        const int kh = h - n_heads;
        const size_t base = (((size_t)(s / bs) * n_kv + kh) * bs + s % bs) * hd;
        const bf16 *vh = v + ((size_t)t * n_kv + kh) * hd;
        const float *kof = ko ? ko + (size_t)kh * hd : nullptr;
        kv_store(kc, vc, base + a, hv[a], vh[a], dt, ks[kh], vs[kh], kof ? kof + a : nullptr);
        kv_store(kc, vc, base + b, hv[b], vh[b], dt, ks[kh], vs[kh], kof ? kof + b : nullptr);
    }
}

// Per-token-head rows (fp8_per_token_head, docs/kv_format.md): one warp per (token, KV head). The
// CPU's arithmetic (cpu_kv_write): K as f32 minus its channel offset (one f32 subtraction), the row's
// amax = max |x| (NaN does not enter: fmaxf), s = amax / 448 (one IEEE division), 1.0 when s is not a
// positive normal float, then every element stored as encode(x / s) (to_fp8); the same for V without
// the offset. Max is exact in any order, so scales and codes equal the CPU's bit for bit. Lane 0
// stores the scales at the row's index divided by head_dim.
__global__ void k_kv_write_tok(const bf16 *k /*[n_tokens][n_kv][hd]*/, const bf16 *v, const kv_dst dst) {
    pdl_trigger();
    const int warps = blockDim.x >> 5, lane = threadIdx.x & 31;
    const long row = (long)blockIdx.x * warps + (threadIdx.x >> 5);
    const int n_kv = dst.n_kv, hd = dst.hd, bs = dst.bs, dt = dst.dt;
    if (row >= (long)dst.n_tokens * n_kv) return;
    const int t = (int)(row / n_kv), h = (int)(row % n_kv), s = dst.slot[t];
    if (s < 0) return;
    const bf16 *kr = k + (size_t)row * hd, *vr = v + (size_t)row * hd;
    const float *ko = dst.ko ? dst.ko + (size_t)h * hd : nullptr;
    float ka = 0.0f, va = 0.0f;
    for (int d = lane; d < hd; d += 32) {
        float kf = __bfloat162float(kr[d]);
        if (ko) kf = __fsub_rn(kf, ko[d]);
        ka = fmaxf(ka, fabsf(kf));
        va = fmaxf(va, fabsf(__bfloat162float(vr[d])));
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        ka = fmaxf(ka, __shfl_xor_sync(0xffffffff, ka, o));
        va = fmaxf(va, __shfl_xor_sync(0xffffffff, va, o));
    }
    float ks = __fdiv_rn(ka, 448.0f), vs = __fdiv_rn(va, 448.0f);
    ks = ks >= FLT_MIN && ks <= FLT_MAX ? ks : 1.0f;
    vs = vs >= FLT_MIN && vs <= FLT_MAX ? vs : 1.0f;
    const size_t base = kv_index(s, h, 0, n_kv, bs, hd);
    for (int d = lane; d < hd; d += 32)
        kv_store(dst.kc, dst.vc, base + d, kr[d], vr[d], dt, ks, vs, ko ? ko + d : nullptr);
    if (lane == 0) {
        dst.kts[base / hd] = ks;
        dst.vts[base / hd] = vs;
    }
}

// Per-layer scales live in constant-sized device arrays, N_SCALE_SLOTS a backend (uploaded when a
// layer's scales change; 64 KV heads max, see KV_MAX_HEADS).
// K offsets (kv_layer.k_offset) are uploaded when their contents differ from the slot's copy.
struct cuda_scale_slot {
    const struct kv_layer *l;
    float k[KV_MAX_HEADS], v[KV_MAX_HEADS];
    float *dev;
    float *off_host;        // host copy of what off_dev holds ([off_n] floats)
    float *off_dev;         // [n_kv][hd] or NULL
    size_t off_n;
};
#define N_SCALE_SLOTS 512

static struct cuda_scale_slot *find_slot(struct cuda_backend *c, const struct kv_layer *l) {
    for (int i = 0; c->scale_slots && i < N_SCALE_SLOTS; i++) if (c->scale_slots[i].l == l) return &c->scale_slots[i];
    return nullptr;
}

void cuda_kv_release(struct cuda_backend *c) {
    if (!c->scale_slots) return;
    for (int i = 0; i < N_SCALE_SLOTS; i++) {
        struct cuda_scale_slot *s = &c->scale_slots[i];
        if (s->dev) cudaFree(s->dev);
        if (s->off_dev) cudaFree(s->off_dev);
        free(s->off_host);
    }
    free(c->scale_slots);
    c->scale_slots = nullptr;
}

float *cuda_layer_scales(struct cuda_backend *c, const struct kv_layer *l) {
    if (!c->scale_slots &&
        !(c->scale_slots = (struct cuda_scale_slot *)calloc(N_SCALE_SLOTS, sizeof *c->scale_slots))) {
        cuda_fail(c, cudaErrorMemoryAllocation, "layer scales (host table)");
        return nullptr;
    }
    int free_i = -1;
    for (int i = 0; i < N_SCALE_SLOTS; i++) {
        struct cuda_scale_slot *s = &c->scale_slots[i];
        if (s->l == l) {
            if (memcmp(s->k, l->k_scale, sizeof s->k) || memcmp(s->v, l->v_scale, sizeof s->v)) break;  // changed
            return s->dev;
        }
        if (!s->l && free_i < 0) free_i = i;
    }
    struct cuda_scale_slot *s = find_slot(c, l);
    if (!s) s = &c->scale_slots[free_i >= 0 ? free_i : 0];
    if (!s->dev && cuda_fail(c, cudaMalloc((void **)&s->dev, 2 * KV_MAX_HEADS * sizeof(float)), "cudaMalloc(scales)"))
        return nullptr;
    s->l = l;
    memcpy(s->k, l->k_scale, sizeof s->k);
    memcpy(s->v, l->v_scale, sizeof s->v);
    float both[2 * KV_MAX_HEADS];
    memcpy(both, s->k, sizeof s->k);
    memcpy(both + KV_MAX_HEADS, s->v, sizeof s->v);
    if (cuda_fail(c, cudaMemcpy(s->dev, both, sizeof both, cudaMemcpyHostToDevice), "upload scales")) return nullptr;
    return s->dev;
}

const float *cuda_layer_offsets(struct cuda_backend *c, const struct kv_layer *l) {
    if (!l->k_offset) return nullptr;
    struct cuda_scale_slot *s = find_slot(c, l);
    if (!s) { cuda_fail(c, cudaErrorInvalidValue, "kv_write: K offsets of a layer without scales"); return nullptr; }
    size_t n = (size_t)l->n_kv_heads * l->head_dim, bytes = n * sizeof(float);
    if (s->off_dev && s->off_n == n && !memcmp(s->off_host, l->k_offset, bytes)) return s->off_dev;
    if (s->off_dev) { cudaFree(s->off_dev); s->off_dev = nullptr; }
    free(s->off_host);
    s->off_n = 0;
    if (!(s->off_host = (float *)malloc(bytes))) {
        cuda_fail(c, cudaErrorMemoryAllocation, "K offsets (host copy)");
        return nullptr;
    }
    if (cuda_fail(c, cudaMalloc((void **)&s->off_dev, bytes), "cudaMalloc(K offsets)")) return nullptr;
    if (cuda_fail(c, cudaMemcpy(s->off_dev, l->k_offset, bytes, cudaMemcpyHostToDevice), "upload K offsets"))
        return nullptr;
    memcpy(s->off_host, l->k_offset, bytes);
    s->off_n = n;
    return s->off_dev;
}

// The cache side of a write of the batch's tokens into l, or false (error latched) when its scales
// or offsets cannot be uploaded.
static bool kv_dst_of(struct cuda_backend *c, const struct kv_layer *l, const struct batch *bt, kv_dst *d) {
    const float *sc = cuda_layer_scales(c, l);
    if (!sc) return false;
    const float *ko = cuda_layer_offsets(c, l);
    if (l->k_offset && !ko) return false;
    *d = {l->k, l->v, c->cb.slot, bt->n_tokens, l->n_kv_heads, l->head_dim, l->kv_block_tokens, (int)l->dtype,
          sc, sc + KV_MAX_HEADS, ko, l->k_tok_scale, l->v_tok_scale};
    return true;
}

// The per-token-head rows of a write (k_kv_write_tok): kv_write's only launch for such a layer, and
// rope_kv_write's second (after k_rope_kv_write has roped Q and K and left the pages alone).
static void kv_write_tok_launch(struct cuda_backend *c, const void *k, const void *v, const kv_dst &dst) {
    const long rows = (long)dst.n_tokens * dst.n_kv;
    k_kv_write_tok<<<(unsigned)((rows + 7) / 8), 256, 0, c->stream>>>((const bf16 *)k, (const bf16 *)v, dst);
    CUDA_LAUNCHED(c, "kv_write (per-token-head scales)");
}

void cuda_kv_write(struct backend *b, struct kv_layer *l, const void *k, const void *v, const struct batch *bt) {
    struct cuda_backend *c = (struct cuda_backend *)b;
    kv_dst dst;
    if (CUDA_SKIP(c) || !bt->n_tokens || !kv_dst_of(c, l, bt, &dst)) return;
    if (dst.kts) {
        kv_write_tok_launch(c, k, v, dst);
        return;
    }
    long n = (long)bt->n_tokens * l->n_kv_heads * l->head_dim;
    k_kv_write<<<(unsigned)((n + 255) / 256), 256, 0, c->stream>>>((const bf16 *)k, (const bf16 *)v, dst);
    CUDA_LAUNCHED(c, "kv_write");
}

void cuda_rope_kv_write(struct cuda_backend *c, void *q, void *k, const void *v, int n_heads,
                        const struct rope_table *rt, struct kv_layer *l, const struct batch *bt) {
    kv_dst dst;
    if (CUDA_SKIP(c) || !bt->n_tokens || !kv_dst_of(c, l, bt, &dst)) return;
    const double *freqs = cuda_rope_freqs(c, rt);
    if (!freqs) return;
    const rope_src rs = {c->cb.pos, freqs, n_heads, rt->n_rot / 2, rt->neox, rt->attn_factor};
    // heads a thread: 6 once the tokens alone give the GPU a few thousand threads (a Llama-3's 32 + 8
    // heads in 7 groups, one across the Q/K boundary, as test_cuda_ops' attn_in cases of 64 heads)
    const int nh = n_heads + l->n_kv_heads, hpt = bt->n_tokens >= 64 ? 6 : 1;
    const long n = (long)bt->n_tokens * ((nh + hpt - 1) / hpt) * (l->head_dim / 2);
    k_rope_kv_write<<<(unsigned)((n + 255) / 256), 256, 0, c->stream>>>((bf16 *)q, (bf16 *)k, (const bf16 *)v, rs, dst,
                                                                        hpt);
    if (CUDA_LAUNCHED(c, "rope + kv_write") || !dst.kts) return;
    kv_write_tok_launch(c, k, v, dst);  // the roped K's rows and V's with their scales
}
