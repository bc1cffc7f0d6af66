// cuda_attention.cu — the attention dispatcher: the kernel table (every attention kernel the CUDA
// backend has, in preference order, each with the shapes it fits), cuda_attention() (the backend
// op: the first entry that fits runs), the generic kernel that fits every shape, and the C entry
// points tests and tools use to list the table, see which entry a shape takes and run a named one.
// The kernel families live in their own translation units (cuda_attention.cuh says which).
//
// Data layout (docs/kv_format.md): cache [n_blocks][n_kv_heads][kv_block_tokens][head_dim];
// q, out [n_tokens][n_heads][head_dim] bf16.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cuda_attention.cuh"
#include "cuda_tuning.h"

// ---------------------------------------------------------------- generic (any head_dim <= 512, any block size)

// One warp per (query token, query head); lane owns dims lane, lane+32, ...
__device__ __forceinline__ void generic_body(bf16 *out, const bf16 *q, const void *kc, const void *vc, int dt,
                                             const int32_t *tok_seq, const int32_t *pos_arr, const int32_t *btab,
                                             int max_blocks, int n_kv, int G, int hd, int bs, int window, float scale,
                                             const float *scales) {
    const int t = blockIdx.x, qh = blockIdx.y, g = qh / G, lane = threadIdx.x;
    const int s = tok_seq[t], pos = pos_arr[t];
    const int lo = window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
    const bool fp8 = dt == DT_E4M3 || dt == DT_E5M2;
    const float kscale = fp8 ? scales[g] : 1.0f, vscale = fp8 ? scales[KV_MAX_HEADS + g] : 1.0f;
    constexpr int MAXD = 16;  // head_dim <= 512
    float qr[MAXD], acc[MAXD], m = -INFINITY, l = 0.0f;
    const bf16 *qp = q + ((size_t)t * n_kv * G + qh) * hd;
#pragma unroll
    for (int i = 0; i < MAXD; i++) {
        int d = lane + 32 * i;
        qr[i] = d < hd ? __bfloat162float(qp[d]) * scale * kscale : 0.0f;
        acc[i] = 0.0f;
    }
    const int32_t *bt = btab + (size_t)s * max_blocks;
    for (int kp = lo; kp <= pos; kp++) {
        size_t base = (((size_t)bt[kp / bs] * n_kv + g) * bs + kp % bs) * hd;
        float d = 0.0f;
#pragma unroll
        for (int i = 0; i < MAXD; i++) { int dd = lane + 32 * i; if (dd < hd) d += qr[i] * load_any(kc, base + dd, dt); }
        for (int o = 16; o > 0; o >>= 1) d += __shfl_xor_sync(0xffffffff, d, o);
        float mn = fmaxf(m, d), alpha = __expf(m - mn), p = __expf(d - mn);
        l = l * alpha + p;
#pragma unroll
        for (int i = 0; i < MAXD; i++) { int dd = lane + 32 * i; if (dd < hd) acc[i] = acc[i] * alpha + p * load_any(vc, base + dd, dt); }
        m = mn;
    }
    bf16 *op = out + ((size_t)t * n_kv * G + qh) * hd;
#pragma unroll
    for (int i = 0; i < MAXD; i++) { int dd = lane + 32 * i; if (dd < hd) op[dd] = __float2bfloat16_rn(acc[i] * vscale / l); }
}

__global__ void k_generic(const __grid_constant__ attn_args a, int dt, int hd) {
    generic_body(a.out, a.q, a.kc, a.vc, dt, a.tok_seq, a.pos, a.btab, a.max_blocks, a.n_kv, a.G, hd, a.bs, a.window, a.scale,
                 a.scales);
}

static bool attn_generic_fits(const struct attn_call *a) { return a->l->head_dim <= 512; }

static void attn_generic_launch(const struct attn_call *a) {
    struct cuda_backend *c = a->c;
    k_generic<<<dim3(a->bt->n_tokens, a->p->n_heads), 32, 0, c->stream>>>(attn_args_of(a), (int)a->l->dtype,
                                                                          a->l->head_dim);
    CUDA_LAUNCHED(c, "attention generic");
}

// ---------------------------------------------------------------- the table

// Which steps an entry serves: the fast kernels by default, the batch-invariant ones under
// --batch-invariant (a token's numbers independent of how its step was batched), the generic kernel
// in both (one query row at a time, invariant too).
enum { FAST = 1, INVARIANT = 2, BOTH = 3 };
struct attn_entry {
    struct attn_kernel k;
    int serves;
};

static const struct attn_entry kernels[] = {
    // one query token a sequence, head_dim 64 / 128, G <= 8: keys on the MMA's M side
    {{"decode_t", attn_decode_t_fits, attn_decode_t_launch}, FAST},
    // one query token a sequence, head_dim 256 (and G in 1, 2, 4, 8 at 64 / 128): SIMT
    {{"decode_simt", attn_decode_simt_fits, attn_decode_simt_launch}, FAST},
    // e4m3, head_dim 64 / 128, blocks TMA can box: FP8 wgmma, warp-specialised
    {{"prefill_fp8_tma", attn_prefill_fp8_tma_fits, attn_prefill_fp8_tma_launch}, FAST},
    // e4m3, head_dim 64 / 128 / 256: FP8 wgmma, two warpgroups sharing each tile
    {{"prefill_fp8_wgmma", attn_prefill_fp8_wgmma_fits, attn_prefill_fp8_wgmma_launch}, FAST},
    // bf16 / e4m3 / e5m2, head_dim 64 / 128, 16·2^k-token blocks: mma.sync
    {{"prefill_mma", attn_prefill_mma_fits, attn_prefill_mma_launch}, FAST},
    // head_dim 64 / 128 / 256 where a 16-token part fits shared memory: SIMT
    {{"prefill_simt", attn_prefill_simt_fits, attn_prefill_simt_launch}, FAST},
    // --batch-invariant, head_dim 64 / 128, G <= 8: every row through the decode kernel
    {{"decode_invariant", attn_decode_invariant_fits, attn_decode_invariant_launch}, INVARIANT},
    // everything else (head_dim <= 512): a warp per (token, query head)
    {{"generic", attn_generic_fits, attn_generic_launch}, BOTH},
};
#define N_KERNELS ((int)(sizeof kernels / sizeof kernels[0]))

// The call's shape, from the layer, its parameters and the step (after batch_begin).
static struct attn_call attn_call_of(struct cuda_backend *c, void *out, const void *q, const struct kv_layer *l,
                                     const struct attn_params *p, const struct batch *bt, const float *scales) {
    struct attn_call a = {};
    a.c = c;
    a.out = (bf16 *)out;
    a.q = (const bf16 *)q;
    a.l = l;
    a.p = p;
    a.bt = bt;
    a.scales = scales;
    a.G = p->n_heads / l->n_kv_heads;
    a.lgr = -1;
    for (int lg = 0; lg <= 4; lg++)
        if (l->kv_block_tokens == 16 << lg) a.lgr = lg;
    a.decode = c->cb.max_q == 1;
    a.fast_dtype = l->dtype == DT_BF16 || l->dtype == DT_E4M3 || l->dtype == DT_E5M2;
    return a;
}

// The entry a call takes: the forced one (struct cuda_tuning's attn_kernel) if it fits, else the
// first that serves this mode and fits; -1 when none does.
static int attn_pick(const struct attn_call *a) {
    const char *force = a->c->tune.attn_kernel;
    const int mode = a->c->base.batch_invariant ? INVARIANT : FAST;
    for (int i = 0; i < N_KERNELS; i++) {
        if (force) {
            if (!strcmp(force, kernels[i].k.name)) return kernels[i].k.fits(a) ? i : -1;
        } else if ((kernels[i].serves & mode) && kernels[i].k.fits(a)) {
            return i;
        }
    }
    return -1;
}

bool cuda_identity_mode(const struct cuda_backend *c) { return c->base.batch_invariant; }

extern "C" void cuda_attention(struct backend *b, void *out, const void *q, const struct kv_layer *l,
                               const struct attn_params *p, const struct batch *bt) {
    struct cuda_backend *c = (struct cuda_backend *)b;
    if (CUDA_SKIP(c) || !bt->n_tokens) return;
    const float *sc = cuda_layer_scales(c, l);
    if (!sc) return;
    const struct attn_call a = attn_call_of(c, out, q, l, p, bt, sc);
    const int i = attn_pick(&a);
    if (i < 0) {
        if (c->tune.attn_kernel)
            cuda_latch(c, OCT_EINVAL, "attention: kernel '%s' does not fit head_dim %d, %d query heads a KV head, %s cache",
                       c->tune.attn_kernel, l->head_dim, a.G, dtype_name(l->dtype));
        else
            cuda_latch(c, OCT_EUNSUP, "attention: head_dim %d > 512", l->head_dim);
        return;
    }
    kernels[i].k.launch(&a);
}

// ---------------------------------------------------------------- C entry points (cuda_tuning.h)

extern "C" int cuda_attention_kernel_count(void) { return N_KERNELS; }
extern "C" const char *cuda_attention_kernel_name(int i) { return i >= 0 && i < N_KERNELS ? kernels[i].k.name : NULL; }

extern "C" const char *cuda_attention_pick(struct backend *b, const struct kv_layer *l, const struct attn_params *p,
                                           const struct batch *bt) {
    struct cuda_backend *c = (struct cuda_backend *)b;
    const struct attn_call a = attn_call_of(c, NULL, NULL, l, p, bt, NULL);
    const int i = attn_pick(&a);
    return i < 0 ? NULL : kernels[i].k.name;
}

bool cuda_attention_init(struct cuda_backend *c) { return cuda_decode_init(c) && cuda_prefill_fp8_init(c); }
