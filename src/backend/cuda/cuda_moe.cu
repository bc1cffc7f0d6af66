// cuda_moe.cu — the CUDA backend's mixture-of-experts FFN (owns: moe_ffn, its device scratch and the upload of
// MXFP4 expert weights; the kernels are cuda_moe.cuh's). The op follows struct moe_ffn_args and cpu_moe.c:
// router logits in f32 (cuda_gemm), then on the device, with no host synchronization, so that a decode step
// holding it can be captured into a graph (every launch's shape depends on n and the weights' shapes only):
//   1. k_moe_route: softmax, top-k and weights per token, and the experts' counts;
//   2. k_moe_scan: each expert's offset among the n·K grouped rows and its tiles of up to 8·NB rows;
//   3. k_moe_place: the permutation of the (token, slot) entries into their groups
//      (1–3 in one launch for steps of up to 64 tokens: k_moe_route_small);
//   4. k_moe_gemm (gate and up): h = act(x·gateᵀ + b_gate, x·upᵀ + b_up) per grouped row;
//   5. k_moe_gemm (down): y[t][j] = p_tj · (h·downᵀ + b_down) per entry, f32;
//      (4 and 5 for tiles of 64 grouped rows of bf16 or MXFP4 experts: k_moe_gemm_tc, the same bits)
//   6. k_moe_combine: out[t] = Σ_j y[t][j] in slot order, so a token's result is independent of its batch.
// The GEMM launches cover the most tiles n·K entries can make (n·K / (8·NB) + min(E, n·K)); the CTAs past the
// tiles in use return at once. FP8 experts (cuda_fp8w.cuh's layout) take their activations through
// k_moe_xq first (per-token scales as the CPU's; the down projection's from f32 h). MXFP4 experts stay
// packed on the device: codes [rows][cols / 2] then e8m0 scales [rows][mx_spitch] (cuda_mxfp4_upload).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_common.cuh"
#include "cuda_fp8w.cuh"
#include "cuda_moe.cuh"
#include "cuda_moe_tc.cuh"

// The op's device scratch: one allocation, carved at each call for its shapes (grown, never shrunk; moving
// it makes captured graphs stale, as cuda_gemm.cu's FP8 scratch does).
struct cuda_moe {
    void *mem;
    size_t cap;
    bool tc_ready;  // k_moe_gemm_tc's shared-memory limits are set
};

void cuda_moe_release(struct cuda_backend *c) {
    if (!c->moe) return;
    cudaFree(c->moe->mem);
    free(c->moe);
    c->moe = nullptr;
}

static size_t al256(size_t b) { return (b + 255) / 256 * 256; }

static size_t mx_scale_off(int64_t rows, int64_t cols) { return al256((size_t)rows * (size_t)(cols / 2)); }
// Scale bytes a row: cols / 32 rounded up to 4, so that a 128-column chunk's four are one aligned 4-byte copy
// (k_moe_gemm_tc); the padding holds 127 (2^0), the scale k_moe_gemm gives columns past the end.
static int64_t mx_spitch(int64_t cols) { return (cols / QK_MXFP4 + 3) / 4 * 4; }

// The codes in moe_mx_rot_word's bit order (cuda_moe.cuh), the scales as they are; a weight with a scale
// above 2^1 (e8m0 > 128) is flagged CUDA_WFLAG_MX_WIDE, its products run MOE_W_MXFP4_WIDE. moe_mx_rot_word
// moves each bit on its own, so a word's stored form is the OR of its four bytes' (tab, 4 lookups a word;
// the function itself, a loop over the 32 bits, would take minutes over gpt-oss-20b's 2.4 G words).
int cuda_mxfp4_upload(struct cuda_backend *c, struct weight *w) {
    if (w->cols % QK_MXFP4 || w->cols > (1 << 24) || w->rows > (1 << 30))
        return err_set(OCT_EUNSUP, "cuda: an mxfp4 weight of [%lld x %lld] (columns must be a multiple of 32)",
                       (long long)w->rows, (long long)w->cols);
    const int64_t nb = w->cols / QK_MXFP4, rb = nb * (1 + QK_MXFP4 / 2), sp = mx_spitch(w->cols);
    const size_t off = mx_scale_off(w->rows, w->cols), bytes = off + (size_t)w->rows * sp;
    uint8_t *h = (uint8_t *)malloc(bytes);
    if (!h) return err_set(OCT_ENOMEM, "cuda: out of host memory staging an mxfp4 weight");
    memset(h + off, 127, (size_t)w->rows * sp);
    uint32_t tab[4][256];
    for (int k = 0; k < 4; k++)
        for (uint32_t v = 0; v < 256; v++) tab[k][v] = moe_mx_rot_word(v << (8 * k));
    bool wide = false;
    for (int64_t r = 0; r < w->rows; r++) {
        const uint8_t *src = (const uint8_t *)w->data + (size_t)r * rb;
        uint8_t *q = h + (size_t)r * (w->cols / 2), *s = h + off + (size_t)r * sp;
        for (int64_t b = 0; b < nb; b++, src += 1 + QK_MXFP4 / 2) {
            s[b] = src[0];
            wide |= src[0] > 128;
            for (int i = 0; i < QK_MXFP4 / 2; i += 4) {  // (little-endian words: code j in bits [4j, 4j + 4))
                uint32_t word;
                memcpy(&word, src + 1 + i, 4);
                word = tab[0][word & 255] | tab[1][(word >> 8) & 255] | tab[2][(word >> 16) & 255] | tab[3][word >> 24];
                memcpy(q + b * (QK_MXFP4 / 2) + i, &word, 4);
            }
        }
    }
    const int rc = cuda_upload_staged(c, w, h, bytes);
    if (rc == OCT_OK) w->dev_flags = wide ? CUDA_WFLAG_MX_WIDE : 0;
    return rc;
}

static int fmt_of(const struct weight *w) {
    if (w->dtype == DT_MXFP4) return w->dev_flags & CUDA_WFLAG_MX_WIDE ? MOE_W_MXFP4_WIDE : MOE_W_MXFP4;
    if (w->dtype == DT_E4M3) return w->fp8.wscale == WSCALE_BLOCK ? MOE_W_FP8_BLOCK : MOE_W_FP8;
    return MOE_W_BF16;
}

// The format's family (the MXFP4 forms share their bytes: gate and up may run either together).
static int fmt_family(int f) { return f == MOE_W_MXFP4_WIDE ? MOE_W_MXFP4 : f; }

static moe_w moe_weight(const struct weight *w) {
    moe_w m = {};
    m.q = (const uint8_t *)w->dev;
    if (w->dtype == DT_MXFP4) {
        m.pitch = w->cols / 2;
        m.s = m.q + mx_scale_off(w->rows, w->cols);
        m.spitch = (int)mx_spitch(w->cols);
    } else if (w->dtype == DT_E4M3) {
        m.pitch = fp8w_pitch(w->cols);
        m.s = m.q + fp8w_scale_off(w->rows, w->cols);
        m.kbp = (int)fp8w_kblocks_padded(w->cols);
    } else {
        m.pitch = w->cols * 2;
    }
    return m;
}

// The shapes and dtypes the kernels take, or the error latched naming the first mismatch.
static bool moe_check(struct cuda_backend *c, const struct moe_ffn_args *a, int64_t dim, int64_t F) {
    const int E = a->n_experts, K = a->n_used;
    if (E <= 0 || K <= 0 || K > E || a->router->rows != E || F <= 0 || a->gate->rows != E * F ||
        a->up->rows != E * F || a->down->rows != E * dim || a->down->cols != F || a->gate->cols != dim ||
        a->up->cols != dim) {
        cuda_latch(c, OCT_EINVAL, "cuda: moe_ffn: %d experts (%d used) do not match the expert weights' shapes", E, K);
        return false;
    }
    if (E > MOE_MAX_EXPERTS || dim % 32 || F % 32) {
        cuda_latch(c, OCT_EUNSUP, "cuda: moe_ffn: %d experts of [%lld x %lld] (at most %d experts, rows and columns "
                   "multiples of 32)", E, (long long)F, (long long)dim, MOE_MAX_EXPERTS);
        return false;
    }
    const struct weight *mats[3] = {a->gate, a->up, a->down};
    for (int i = 0; i < 3; i++) {
        const struct weight *m = mats[i];
        const bool ok = m->dtype == DT_F32 || m->dtype == DT_F16 || m->dtype == DT_BF16 || m->dtype == DT_MXFP4 ||
                        m->dtype == DT_E4M3;
        if (!ok || !m->dev) {
            cuda_latch(c, OCT_EUNSUP, "cuda: moe_ffn: expert weights of dtype %s (f32, f16, bf16, mxfp4 or fp8_e4m3, "
                       "uploaded)", dtype_name(m->dtype));
            return false;
        }
        const int64_t per = i < 2 ? F : dim;
        if (m->dtype == DT_E4M3 && m->fp8.wscale == WSCALE_BLOCK && per % FP8W_BLOCK) {
            cuda_latch(c, OCT_EUNSUP, "cuda: moe_ffn: fp8 experts of %lld rows each in 128x128 blocks (an expert's "
                       "rows must be whole blocks)", (long long)per);
            return false;
        }
    }
    if (fmt_family(fmt_of(a->gate)) != fmt_family(fmt_of(a->up))) {
        cuda_latch(c, OCT_EUNSUP, "cuda: moe_ffn: expert gate (%s) and up (%s) weights of different formats",
                   dtype_name(a->gate->dtype), dtype_name(a->up->dtype));
        return false;
    }
    const struct weight *bs[4] = {a->router_bias, a->b_gate, a->b_up, a->b_down};
    const int64_t len[4] = {E, E * F, E * F, E * dim};
    for (int i = 0; i < 4; i++)
        if (bs[i] && (bs[i]->rows * bs[i]->cols != len[i] || !bs[i]->dev ||
                      (bs[i]->dtype != DT_F32 && bs[i]->dtype != DT_F16 && bs[i]->dtype != DT_BF16))) {
            cuda_latch(c, OCT_EINVAL, "cuda: moe_ffn: a bias of %lld %s values (want %lld f32/f16/bf16)",
                       (long long)(bs[i]->rows * bs[i]->cols), dtype_name(bs[i]->dtype), (long long)len[i]);
            return false;
        }
    return true;
}

// n8 tiles of tokens a CTA: room for twice the expected rows of an expert (n·K / E), at most 8, so that an
// expert's tokens rarely spill into a second tile, which reads its weights again (a decode batch is bound by
// those reads).
static int moe_nb(int n, int E, int K) {
    const long per = ((long)n * K + E - 1) / E;
    return per <= 4 ? 1 : per <= 8 ? 2 : per <= 16 ? 4 : 8;
}

// k_moe_gemm_tc's shared-memory limits, once per backend.
static bool moe_tc_init(struct cuda_backend *c) {
    if (c->moe->tc_ready) return true;
    const struct {
        const void *k;
        size_t smem;
    } ks[] = {{(const void *)k_moe_gemm_tc<MOE_W_BF16, true>, moe_tc_smem(MOE_W_BF16, true)},
              {(const void *)k_moe_gemm_tc<MOE_W_BF16, false>, moe_tc_smem(MOE_W_BF16, false)},
              {(const void *)k_moe_gemm_tc<MOE_W_MXFP4, true>, moe_tc_smem(MOE_W_MXFP4, true)},
              {(const void *)k_moe_gemm_tc<MOE_W_MXFP4, false>, moe_tc_smem(MOE_W_MXFP4, false)},
              {(const void *)k_moe_gemm_tc<MOE_W_MXFP4_WIDE, true>, moe_tc_smem(MOE_W_MXFP4_WIDE, true)},
              {(const void *)k_moe_gemm_tc<MOE_W_MXFP4_WIDE, false>, moe_tc_smem(MOE_W_MXFP4_WIDE, false)}};
    for (const auto &k : ks)
        if (cuda_fail(c, cudaFuncSetAttribute(k.k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)k.smem),
                      "moe expert GEMM: shared-memory limit"))
            return false;
    c->moe->tc_ready = true;
    return true;
}

// One expert-GEMM launch: tiles of 64 grouped rows (nb = 8, prefill) of bf16 or MXFP4 experts take the
// shared-memory tiled form (cuda_moe_tc.cuh, the same bits), everything else k_moe_gemm with rows R (grid.x
// counts 16·MT-row blocks); tiles grid.y.
template <int F, bool GU>
static void gemm_go(struct cuda_backend *c, const moe_gemm_args &a, int nb, dim3 grid) {
    const char *what = GU ? "moe gate/up" : "moe down";
    if constexpr (F == MOE_W_BF16 || F == MOE_W_MXFP4 || F == MOE_W_MXFP4_WIDE) {
        if (nb == 8 && !a.h_f32 && a.x[1] == a.x[0]) {
            if (!moe_tc_init(c)) return;
            grid.x = (unsigned)((a.R + MOE_TC_ROWS - 1) / MOE_TC_ROWS);
            k_moe_gemm_tc<F, GU><<<grid, MOE_TC_WARPS * 32, moe_tc_smem(F, GU), c->stream>>>(a);
            CUDA_LAUNCHED(c, what);
            return;
        }
    }
    const int rows = 16 * moe_mt(F, nb, GU);
    grid.x = (unsigned)((a.R + rows - 1) / rows);
    switch (nb) {
    case 1: k_moe_gemm<F, 1, GU><<<grid, MOE_WARPS * 32, 0, c->stream>>>(a); break;
    case 2: k_moe_gemm<F, 2, GU><<<grid, MOE_WARPS * 32, 0, c->stream>>>(a); break;
    case 4: k_moe_gemm<F, 4, GU><<<grid, MOE_WARPS * 32, 0, c->stream>>>(a); break;
    default: k_moe_gemm<F, 8, GU><<<grid, MOE_WARPS * 32, 0, c->stream>>>(a); break;
    }
    CUDA_LAUNCHED(c, what);
}

template <bool GU> static void gemm_launch(struct cuda_backend *c, int fmt, const moe_gemm_args &a, int nb, dim3 grid) {
    switch (fmt) {
    case MOE_W_FP8: gemm_go<MOE_W_FP8, GU>(c, a, nb, grid); break;
    case MOE_W_FP8_BLOCK: gemm_go<MOE_W_FP8_BLOCK, GU>(c, a, nb, grid); break;
    case MOE_W_MXFP4: gemm_go<MOE_W_MXFP4, GU>(c, a, nb, grid); break;
    case MOE_W_MXFP4_WIDE: gemm_go<MOE_W_MXFP4_WIDE, GU>(c, a, nb, grid); break;
    default: gemm_go<MOE_W_BF16, GU>(c, a, nb, grid); break;
    }
}

// Whether two FP8 weights quantize their activations the same way (one k_moe_xq pass serves both).
static bool same_act(const struct weight *x, const struct weight *y) {
    const fp8w_act p = fp8w_act_of(x), q = fp8w_act_of(y);
    return p.e5m2 == q.e5m2 && p.fixed == q.fixed;
}

void cuda_moe_ffn(struct backend *b, const struct moe_ffn_args *a, int n) {
    struct cuda_backend *c = (struct cuda_backend *)b;
    if (CUDA_SKIP(c) || n <= 0) return;
    const int E = a->n_experts, K = a->n_used;
    const int64_t dim = a->router->cols, F = E > 0 ? a->gate->rows / E : 0;
    if (!moe_check(c, a, dim, F)) return;
    const int nk = n * K, nb = moe_nb(n, E, K), bn = 8 * nb;
    const long max_tiles = nk / bn + (E < nk ? E : nk);
    if (max_tiles > 65535) {
        cuda_latch(c, OCT_EUNSUP, "cuda: moe_ffn: %d tokens in one step are too many for the expert GEMM's grid", n);
        return;
    }
    // (gate and up run in one launch: the wide MXFP4 form when either needs it)
    const bool wide_gu = fmt_of(a->gate) == MOE_W_MXFP4_WIDE || fmt_of(a->up) == MOE_W_MXFP4_WIDE;
    const int fg = wide_gu ? MOE_W_MXFP4_WIDE : fmt_of(a->gate), fd = fmt_of(a->down);
    const bool fp8g = fg == MOE_W_FP8 || fg == MOE_W_FP8_BLOCK, fp8d = fd == MOE_W_FP8 || fd == MOE_W_FP8_BLOCK;
    const bool two_x = fp8g && !same_act(a->gate, a->up);
    // the scratch's parts (bytes, 256-aligned)
    // (the counts first, at a fixed place: zero between calls, k_moe_scan zeroes them after reading)
    size_t o = 0;
    auto part = [&](size_t bytes) { const size_t at = o; o += al256(bytes); return at; };
    const size_t p_counts = part((size_t)MOE_MAX_EXPERTS * 4), p_cursor = part((size_t)E * 4), p_ntiles = part(4);
    const size_t p_logits = part((size_t)n * E * 4), p_ids = part((size_t)nk * 4), p_wts = part((size_t)nk * 4);
    const size_t p_tiles = part((size_t)max_tiles * 16), p_perm = part((size_t)nk * 4);
    const size_t p_xq = part(fp8g ? (size_t)(two_x ? 2 : 1) * n * dim * 2 : 0);
    const size_t p_sx = part(fp8g ? (size_t)2 * n * 4 : 0);
    const size_t p_h = part((size_t)nk * F * (fp8d ? 4 : 2)), p_hq = part(fp8d ? (size_t)nk * F * 2 : 0);
    const size_t p_sh = part(fp8d ? (size_t)nk * 4 : 0), p_y = part((size_t)nk * dim * 4);
    if (!c->moe) {
        c->moe = (struct cuda_moe *)calloc(1, sizeof *c->moe);
        if (!c->moe) { cuda_latch(c, OCT_ENOMEM, "cuda: out of host memory"); return; }
    }
    struct cuda_moe *m = c->moe;
    if (o > m->cap) {
        if (c->capturing) {  // (a captured step runs the shapes of its eager warm-up, which grew the scratch)
            cuda_latch(c, OCT_EIO, "cuda: moe_ffn: scratch grew inside a graph capture");
            return;
        }
        cudaStreamSynchronize(c->stream);  // (a step in flight may still read it)
        c->meta_gen++;
        cudaFree(m->mem);
        m->mem = nullptr;
        m->cap = 0;
        if (cuda_fail(c, cudaMalloc(&m->mem, o + o / 2), "cudaMalloc(moe scratch)") ||
            cuda_fail(c, cudaMemsetAsync(m->mem, 0, (size_t)MOE_MAX_EXPERTS * 4, c->stream), "cudaMemset(moe counts)"))
            return;
        m->cap = o + o / 2;
    }
    char *base = (char *)m->mem;
    float *logits = (float *)(base + p_logits), *wts = (float *)(base + p_wts);
    int *ids = (int *)(base + p_ids), *counts = (int *)(base + p_counts), *cursor = (int *)(base + p_cursor);
    int *ntiles = (int *)(base + p_ntiles), *perm = (int *)(base + p_perm);
    int4 *tiles = (int4 *)(base + p_tiles);
    bf16 *xq = (bf16 *)(base + p_xq), *hq = (bf16 *)(base + p_hq);
    float *sx = (float *)(base + p_sx), *sh = (float *)(base + p_sh), *y = (float *)(base + p_y);
    void *h = base + p_h;

    // routing and grouping: one launch for small steps, else three
    cuda_gemm(c, logits, CUDA_R_32F, a->xn, a->router, n);
    const bf16 *rbias = a->router_bias ? (const bf16 *)a->router_bias->dev : nullptr;
    if (n <= MOE_SMALL_N && E <= MOE_SMALL_E) {
        k_moe_route_small<<<1, MOE_MAX_EXPERTS, 0, c->stream>>>(ids, wts, tiles, ntiles, perm, logits, rbias, n, E, K,
                                                                a->norm_topk, bn);
        CUDA_LAUNCHED(c, "moe route");
    } else {
        k_moe_route<<<(n + 3) / 4, 128, 0, c->stream>>>(ids, wts, counts, logits, rbias, n, E, K, a->norm_topk);
        CUDA_LAUNCHED(c, "moe route");
        k_moe_scan<<<1, MOE_MAX_EXPERTS, 0, c->stream>>>(tiles, ntiles, cursor, counts, E, bn);
        CUDA_LAUNCHED(c, "moe scan");
        k_moe_place<<<(nk + 255) / 256, 256, 0, c->stream>>>(perm, cursor, ids, nk);
        CUDA_LAUNCHED(c, "moe place");
    }

    // gate and up
    moe_gemm_args ga = {};
    ga.w[0] = moe_weight(a->gate);
    ga.w[1] = moe_weight(a->up);
    ga.x[0] = ga.x[1] = (const bf16 *)a->xn;
    if (fp8g) {
        k_moe_xq<bf16><<<n, 256, 0, c->stream>>>(xq, sx, (const bf16 *)a->xn, (int)dim, fp8w_act_of(a->gate));
        ga.x[0] = ga.x[1] = xq;
        ga.sx[0] = ga.sx[1] = sx;
        if (two_x) {
            k_moe_xq<bf16><<<n, 256, 0, c->stream>>>(xq + (size_t)n * dim, sx + n, (const bf16 *)a->xn, (int)dim,
                                                     fp8w_act_of(a->up));
            ga.x[1] = xq + (size_t)n * dim;
            ga.sx[1] = sx + n;
        }
        CUDA_LAUNCHED(c, "moe activation quantization");
    }
    ga.bias[0] = a->b_gate ? (const bf16 *)a->b_gate->dev : nullptr;
    ga.bias[1] = a->b_up ? (const bf16 *)a->b_up->dev : nullptr;
    ga.tiles = tiles;
    ga.n_tiles = ntiles;
    ga.perm = perm;
    ga.wts = wts;
    ga.out = h;
    ga.K = K;
    ga.cols = (int)dim;
    ga.R = (int)F;
    ga.act = a->act;
    ga.h_f32 = fp8d;
    ga.alpha = a->alpha;
    ga.limit = a->limit;
    gemm_launch<true>(c, fg, ga, nb, dim3(1, (unsigned)max_tiles));

    // down, weighted, then the slots summed per token
    moe_gemm_args da = ga;
    da.w[0] = da.w[1] = moe_weight(a->down);
    da.x[0] = da.x[1] = (const bf16 *)h;
    da.sx[0] = da.sx[1] = nullptr;
    if (fp8d) {
        k_moe_xq<float><<<nk, 256, 0, c->stream>>>(hq, sh, (const float *)h, (int)F, fp8w_act_of(a->down));
        CUDA_LAUNCHED(c, "moe activation quantization");
        da.x[0] = da.x[1] = hq;
        da.sx[0] = da.sx[1] = sh;
    }
    da.bias[0] = da.bias[1] = a->b_down ? (const bf16 *)a->b_down->dev : nullptr;
    da.out = y;
    da.cols = (int)F;
    da.R = (int)dim;
    da.h_f32 = 0;
    gemm_launch<false>(c, fd, da, nb, dim3(1, (unsigned)max_tiles));
    k_moe_combine<<<n, 256, 0, c->stream>>>((bf16 *)a->out, y, K, (int)dim);
    CUDA_LAUNCHED(c, "moe combine");
}
