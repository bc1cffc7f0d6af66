// cuda_attention.cu — the attention dispatcher: the kernel table (every attention kernel the CUDA
// backend has, in preference order, each with the shapes it fits), cuda_attention() (the backend
// op: the first entry that fits runs, with the layer's attention sinks as f32 on the device), the C
// entry points tests and tools use to list the table, see which entry a shape takes and run a named
// one, and the families' one-time set-up. The kernel families live in their own translation units
// (cuda_attention.cuh says which).
#include <stdlib.h>
#include <string.h>

#include "cuda_attention.cuh"
#include "cuda_tuning.h"

// ---------------------------------------------------------------- the table

// Which steps an entry serves: the fast kernels by default, the batch-invariant ones under
// --batch-invariant (a token's numbers independent of how its step was batched), the generic kernel
// in both (one query row at a time, invariant too).
// SOFTCAP: the entry also honours attn_params.softcap (Gemma 2's attention logit soft-capping); an
// entry without it is passed over for soft-capped calls.
// TOKSCALE: the entry applies per-token-head K and V scales (fp8_per_token_head layers,
// kv_layer.k_tok_scale); an entry without it is passed over for such layers.
enum { FAST = 1, INVARIANT = 2, BOTH = 3, SOFTCAP = 4, TOKSCALE = 8 };
struct attn_entry {
    struct attn_kernel k;
    int serves;
};

static const struct attn_entry kernels[] = {
    // one query token a sequence, head_dim 64 / 128 / 256, G <= 8: keys on the MMA's M side
    {{"decode_t", attn_decode_t_fits, attn_decode_t_launch}, FAST | SOFTCAP | TOKSCALE},
    // e4m3 (per-token-head too), head_dim 64 / 128, blocks TMA can box: FP8 wgmma, warp-specialised
    {{"prefill_fp8_tma", attn_prefill_fp8_tma_fits, attn_prefill_fp8_tma_launch}, FAST | SOFTCAP | TOKSCALE},
    // e4m3 / e5m2, head_dim 256, blocks TMA can box: the 16-bit wgmma kernel on the tiles converted to
    // f16 in shared memory (FP8 wgmma's two accumulators do not fit the registers at 256 dims); per-token-head
    // e4m3 the TMA kernel does not take (head_dim 256, 64 % G != 0): the rows times their scales, as bf16
    {{"prefill_f16_cvt", attn_prefill_f16_cvt_fits, attn_prefill_f16_cvt_launch}, FAST | SOFTCAP | TOKSCALE},
    // e4m3, head_dim 64 / 128 / 256: FP8 wgmma, two warpgroups sharing each tile
    {{"prefill_fp8_wgmma", attn_prefill_fp8_wgmma_fits, attn_prefill_fp8_wgmma_launch}, FAST | SOFTCAP},
    // bf16 / f16, head_dim 64 / 128 / 256, blocks TMA can box: 16-bit wgmma, warp-specialised
    {{"prefill_bf16_tma", attn_prefill_bf16_tma_fits, attn_prefill_bf16_tma_launch}, FAST | SOFTCAP},
    // bf16 / e4m3 / e5m2, head_dim 64 / 128, 16·2^k-token blocks: mma.sync
    {{"prefill_mma", attn_prefill_mma_fits, attn_prefill_mma_launch}, FAST | SOFTCAP},
    // head_dim 64 / 128 / 256 where a 16-token part fits shared memory: SIMT
    {{"prefill_simt", attn_prefill_simt_fits, attn_prefill_simt_launch}, FAST | SOFTCAP | TOKSCALE},
    // --batch-invariant, head_dim 64 / 128, G <= 8: every row through the decode kernel
    {{"decode_invariant", attn_decode_invariant_fits, attn_decode_invariant_launch}, INVARIANT | SOFTCAP | TOKSCALE},
    // everything else (head_dim <= 512): a warp per (token, query head)
    {{"generic", attn_generic_fits, attn_generic_launch}, BOTH | SOFTCAP | TOKSCALE},
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
    a.tok = l->k_tok_scale != nullptr;
    return a;
}

// The entry a call takes: the forced one (struct cuda_tuning's attn_kernel) if it fits, else the
// first that serves this mode and fits; -1 when none does.
static int attn_pick(const struct attn_call *a) {
    const char *force = a->c->tune.attn_kernel;
    const int mode = a->c->base.batch_invariant ? INVARIANT : FAST;
    const bool cap = a->p->softcap > 0;
    for (int i = 0; i < N_KERNELS; i++) {
        const bool can = (!cap || (kernels[i].serves & SOFTCAP)) && (!a->tok || (kernels[i].serves & TOKSCALE));
        if (force) {
            if (!strcmp(force, kernels[i].k.name)) return can && kernels[i].k.fits(a) ? i : -1;
        } else if ((kernels[i].serves & mode) && can && kernels[i].k.fits(a)) {
            return i;
        }
    }
    return -1;
}

// ---------------------------------------------------------------- attention sinks

// A sinks weight (kv_layer.sinks, [1][n_heads] f32 / bf16 / f16 host values) widened to f32 on the
// device: the values it was made from and their copy. A layer's first attention call uploads it;
// later calls compare the host values (a few dozen) and upload again only when they changed, so a
// captured decode step issues no copy.
struct cuda_sink_slot {
    const struct weight *w;
    int n;
    float *host, *dev;  // [n] each
};

static float sink_host_value(const struct weight *w, size_t i) {
    if (w->dtype == DT_F32) return ((const float *)w->data)[i];
    const uint16_t u = ((const uint16_t *)w->data)[i];
    if (w->dtype == DT_BF16) {
        const uint32_t bits = (uint32_t)u << 16;
        float f;
        memcpy(&f, &bits, 4);
        return f;
    }
    __half_raw hr;
    hr.x = u;
    return __half2float(__half(hr));
}

// The layer's sinks on the device, or null (*ok false after latching an error: a sinks weight of
// another dtype, fewer logits than query heads, no host values, or a failed upload).
static const float *attn_sinks(struct cuda_backend *c, const struct kv_layer *l, int n_heads, bool *ok) {
    *ok = true;
    const struct weight *w = l->sinks;
    if (!w) return nullptr;
    *ok = false;
    const int64_t n = w->rows * w->cols;
    if (w->dtype != DT_F32 && w->dtype != DT_BF16 && w->dtype != DT_F16) {
        cuda_latch(c, OCT_EUNSUP, "attention: sinks of dtype %s (f32, bf16 or f16)", dtype_name(w->dtype));
        return nullptr;
    }
    if (n < n_heads || !w->data) {
        cuda_latch(c, OCT_EINVAL, "attention: the sinks weight has %lld logits%s for %d query heads", (long long)n,
                   w->data ? "" : " and no host values", n_heads);
        return nullptr;
    }
    struct cuda_sink_slot *s = nullptr;
    for (int i = 0; i < c->n_sink_slots && !s; i++)
        if (c->sink_slots[i].w == w) s = &c->sink_slots[i];
    if (s && s->n == (int)n) {
        bool same = true;
        for (int64_t i = 0; i < n && same; i++) {
            const float v = sink_host_value(w, (size_t)i);
            same = !memcmp(&v, &s->host[i], 4);
        }
        if (same) { *ok = true; return s->dev; }
    }
    if (!s) {
        struct cuda_sink_slot *grown = (struct cuda_sink_slot *)realloc(
            c->sink_slots, (size_t)(c->n_sink_slots + 1) * sizeof *grown);
        if (!grown) { cuda_fail(c, cudaErrorMemoryAllocation, "attention sinks (host table)"); return nullptr; }
        c->sink_slots = grown;
        s = &c->sink_slots[c->n_sink_slots++];
        *s = {};
        s->w = w;
    }
    if (s->n != (int)n) {
        free(s->host);
        if (s->dev) cudaFree(s->dev);
        s->host = nullptr, s->dev = nullptr, s->n = 0;
        if (!(s->host = (float *)malloc((size_t)n * sizeof(float)))) {
            cuda_fail(c, cudaErrorMemoryAllocation, "attention sinks (host copy)");
            return nullptr;
        }
        if (cuda_fail(c, cudaMalloc((void **)&s->dev, (size_t)n * sizeof(float)), "cudaMalloc(attention sinks)"))
            return nullptr;
        s->n = (int)n;
    }
    // (on the backend's stream, so the kernels after it see the values; pageable memory is staged at the call)
    for (int64_t i = 0; i < n; i++) s->host[i] = sink_host_value(w, (size_t)i);
    if (cuda_fail(c, cudaMemcpyAsync(s->dev, s->host, (size_t)n * sizeof(float), cudaMemcpyHostToDevice, c->stream),
                  "upload attention sinks"))
        return nullptr;
    *ok = true;
    return s->dev;
}

void cuda_attention_release(struct cuda_backend *c) {
    for (int i = 0; i < c->n_sink_slots; i++) {
        free(c->sink_slots[i].host);
        if (c->sink_slots[i].dev) cudaFree(c->sink_slots[i].dev);
    }
    free(c->sink_slots);
    c->sink_slots = nullptr;
    c->n_sink_slots = 0;
}

// ---------------------------------------------------------------- the backend op

extern "C" void cuda_attention(struct backend *b, void *out, const void *q, const struct kv_layer *l,
                               const struct attn_params *p, const struct batch *bt) {
    struct cuda_backend *c = (struct cuda_backend *)b;
    if (CUDA_SKIP(c) || !bt->n_tokens) return;
    const float *sc = cuda_layer_scales(c, l);
    if (!sc) return;
    bool sinks_ok;
    const float *sinks = attn_sinks(c, l, p->n_heads, &sinks_ok);
    if (!sinks_ok) return;
    struct attn_call a = attn_call_of(c, out, q, l, p, bt, sc);
    a.sinks = sinks;
    const int i = attn_pick(&a);
    if (i < 0) {
        if (c->tune.attn_kernel)
            cuda_latch(c, OCT_EINVAL,
                       "attention: kernel '%s' does not fit head_dim %d, %d query heads a KV head, %s cache%s%s",
                       c->tune.attn_kernel, l->head_dim, a.G, dtype_name(l->dtype),
                       p->softcap > 0 ? ", soft-capped scores" : "", a.tok ? ", per-token-head scales" : "");
        else
            cuda_latch(c, OCT_EUNSUP, "attention: head_dim %d > 512", l->head_dim);
        return;
    }
    kernels[i].k.launch(&a);
}

// ---------------------------------------------------------------- C entry points (cuda_tuning.h)

extern "C" int cuda_attention_kernel_count(void) { return N_KERNELS; }
extern "C" const char *cuda_attention_kernel_name(int i) {
    return i >= 0 && i < N_KERNELS ? kernels[i].k.name : NULL;
}

extern "C" const char *cuda_attention_pick(struct backend *b, const struct kv_layer *l, const struct attn_params *p,
                                           const struct batch *bt) {
    struct cuda_backend *c = (struct cuda_backend *)b;
    const struct attn_call a = attn_call_of(c, NULL, NULL, l, p, bt, NULL);
    const int i = attn_pick(&a);
    return i < 0 ? NULL : kernels[i].k.name;
}

bool cuda_attention_init(struct cuda_backend *c) {
    return cuda_decode_init(c) && cuda_prefill_fp8_init(c) && cuda_prefill_bf16_init(c);
}
