// test_attention.c — the CPU backend's kv_write and paged attention against a plain
// float64 attention written here, over every KV dtype, head_dim 8..256, GQA groups,
// sliding windows, per-head scales, shuffled block tables and several sequences per
// batch; plus the FP8 byte contract of kv_write and chunking invariance; per-token-head
// scales (fp8_per_token_head): their round trip and the same float64 comparison.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/backend/backend.h"
#include "../../src/backend/cpu/cpu.h"
#include "../../src/base/check.h"
#include "../../src/base/fp8.h"
#include "../../src/base/half.h"
#include "../../src/base/rng.h"
#include "../test.h"

struct setup {
    int hd, n_kv, n_heads, bs, window, n_seqs;
    enum dtype dt;
    int seq_len[4];  // context length of each sequence (all tokens are queries)
    bool tok;        // fp8_per_token_head: per-(token, KV head) scales written by kv_write (e4m3)
};

// The scale of stored row `row` ([n_blocks][n_kv][bs] index) of K or V: its own with per-token-head scales.
static float row_scale(const struct kv_layer *L, bool is_k, size_t row, int h) {
    const float *ts = is_k ? L->k_tok_scale : L->v_tok_scale;
    return ts ? ts[row] : is_k ? L->k_scale[h] : L->v_scale[h];
}

// value a stored element decodes to, scale applied (what attention must see)
static double stored(enum dtype dt, const void *base, size_t i, float scale) {
    switch (dt) {
    case DT_F32: return ((const float *)base)[i];
    case DT_F16: return f16_to_f32(((const uint16_t *)base)[i]);
    case DT_BF16: return bf16_to_f32(((const uint16_t *)base)[i]);
    case DT_E4M3: return (double)fp8_e4m3_to_f32(((const uint8_t *)base)[i]) * scale;
    case DT_E5M2: return (double)fp8_e5m2_to_f32(((const uint8_t *)base)[i]) * scale;
    default: return 0;
    }
}

static double run_case(const struct setup *s, int *fails) {
    struct backend *b = backend_cpu_create(2);
    struct rng r;
    rng_seed(&r, (uint64_t)(s->hd * 131 + s->dt * 7 + s->window));
    int n_tok = 0, max_blocks = 0;
    for (int q = 0; q < s->n_seqs; q++) {
        n_tok += s->seq_len[q];
        int nb = (s->seq_len[q] + s->bs - 1) / s->bs;
        if (nb > max_blocks) max_blocks = nb;
    }
    int n_blocks = max_blocks * s->n_seqs + 3;
    // shuffled physical blocks
    int32_t *perm = malloc(sizeof(int32_t) * n_blocks);
    rng_permutation(&r, perm, n_blocks);
    int32_t *btab = calloc((size_t)s->n_seqs * max_blocks, sizeof(int32_t));
    for (int q = 0, k = 0; q < s->n_seqs; q++) for (int i = 0; i < max_blocks; i++) btab[q * max_blocks + i] = perm[k++];
    int32_t *tok = calloc((size_t)n_tok, 4), *pos = malloc(4 * (size_t)n_tok), *slot = malloc(4 * (size_t)n_tok);
    int32_t qs[5] = {0}, sl[4];
    for (int q = 0, t = 0; q < s->n_seqs; q++) {
        for (int p = 0; p < s->seq_len[q]; p++, t++) {
            pos[t] = p;
            slot[t] = btab[q * max_blocks + p / s->bs] * s->bs + p % s->bs;
        }
        qs[q + 1] = t;
        sl[q] = s->seq_len[q];
    }
    size_t kvn = (size_t)n_tok * s->n_kv * s->hd, qn = (size_t)n_tok * s->n_heads * s->hd;
    float *k = malloc(kvn * 4), *v = malloc(kvn * 4), *qv = malloc(qn * 4), *out = malloc(qn * 4);
    for (size_t i = 0; i < kvn; i++) {
        k[i] = (2 * rng_float(&r) - 1) * 3;
        v[i] = (2 * rng_float(&r) - 1) * 2;
        if (i % 37 == 0) k[i] *= 20;   // outlier channels
    }
    for (size_t i = 0; i < qn; i++) qv[i] = (2 * rng_float(&r) - 1);
    struct kv_layer L = {.dtype = s->dt, .n_kv_heads = s->n_kv, .head_dim = s->hd, .kv_block_tokens = s->bs,
                         .n_blocks = n_blocks, .window = s->window};
    for (int h = 0; h < s->n_kv; h++) { L.k_scale[h] = 0.05f * (h + 1); L.v_scale[h] = 0.02f * (h + 2); }
    size_t bytes = (size_t)n_blocks * s->n_kv * s->bs * s->hd * dtype_size(s->dt);
    L.k = b->ops->alloc(b, bytes);
    L.v = b->ops->alloc(b, bytes);
    if (s->tok) {  // static scales are 1.0 then (kv_cache_plan); the rows carry their own
        for (int h = 0; h < s->n_kv; h++) L.k_scale[h] = L.v_scale[h] = 1.0f;
        L.k_tok_scale = b->ops->alloc(b, (size_t)n_blocks * s->n_kv * s->bs * sizeof(float));
        L.v_tok_scale = b->ops->alloc(b, (size_t)n_blocks * s->n_kv * s->bs * sizeof(float));
    }
    struct batch bt = {.n_tokens = n_tok, .token_ids = tok, .positions = pos, .slot_mapping = slot, .n_seqs = s->n_seqs,
                       .query_start = qs, .seq_lens = sl, .block_tables = btab, .max_blocks_per_seq = max_blocks};
    b->ops->kv_write(b, &L, k, v, &bt);
    // FP8 byte contract: stored byte == codec(value / scale)
    if (s->dt == DT_E4M3 || s->dt == DT_E5M2) {
        int bad = 0;
        for (int t = 0; t < n_tok; t++)
            for (int h = 0; h < s->n_kv; h++)
                for (int d = 0; d < s->hd; d++) {
                    size_t src = ((size_t)t * s->n_kv + h) * s->hd + d;
                    size_t dst = (((size_t)(slot[t] / s->bs) * s->n_kv + h) * s->bs + slot[t] % s->bs) * s->hd + d;
                    float ks = row_scale(&L, true, dst / s->hd, h);
                    uint8_t want = s->dt == DT_E4M3 ? fp8_e4m3_from_f32(k[src] / ks) : fp8_e5m2_from_f32(k[src] / ks);
                    if (((uint8_t *)L.k)[dst] != want) bad++;
                }
        CHECK_EQ_INT(bad, 0);
    }
    struct attn_params ap = {.n_heads = s->n_heads, .softmax_scale = 1.0f / sqrtf((float)s->hd), .fp8_math = ATTN_FP8_EXACT};
    b->ops->attention(b, out, qv, &L, &ap, &bt);
    // float64 reference over the stored values
    int group = s->n_heads / s->n_kv;
    double worst = 0;
    double *sc = malloc(sizeof(double) * 4096), *acc = malloc(sizeof(double) * s->hd);
    for (int q = 0, t = 0; q < s->n_seqs; q++)
        for (int p = 0; p < s->seq_len[q]; p++, t++)
            for (int hq = 0; hq < s->n_heads; hq++) {
                int g = hq / group, lo = s->window && p - s->window + 1 > 0 ? p - s->window + 1 : 0;
                double m = -INFINITY, sum = 0;
                for (int j = lo; j <= p; j++) {
                    size_t base = (((size_t)btab[q * max_blocks + j / s->bs] * s->n_kv + g) * s->bs + j % s->bs) * s->hd;
                    double d = 0;
                    float ks = row_scale(&L, true, base / s->hd, g);
                    for (int i = 0; i < s->hd; i++) d += (double)qv[((size_t)t * s->n_heads + hq) * s->hd + i] * stored(s->dt, L.k, base + i, ks);
                    sc[j - lo] = d / sqrt((double)s->hd);
                    if (sc[j - lo] > m) m = sc[j - lo];
                }
                memset(acc, 0, sizeof(double) * s->hd);
                for (int j = lo; j <= p; j++) {
                    double w = exp(sc[j - lo] - m);
                    sum += w;
                    size_t base = (((size_t)btab[q * max_blocks + j / s->bs] * s->n_kv + g) * s->bs + j % s->bs) * s->hd;
                    float vs = row_scale(&L, false, base / s->hd, g);
                    for (int i = 0; i < s->hd; i++) acc[i] += w * stored(s->dt, L.v, base + i, vs);
                }
                for (int i = 0; i < s->hd; i++) {
                    double e = fabs(acc[i] / sum - out[((size_t)t * s->n_heads + hq) * s->hd + i]);
                    if (e > worst) worst = e;
                }
            }
    if (worst > 2e-5) (*fails)++;
    // chunking invariance: the same queries one sequence at a time, one token at a time
    if (s->n_seqs == 1) {
        float *out1 = malloc(qn * 4);
        for (int t = 0; t < n_tok; t++) {
            int32_t qs1[2] = {0, 1}, sl1 = t + 1;
            struct batch b1 = {.n_tokens = 1, .token_ids = tok, .positions = pos + t, .slot_mapping = slot + t, .n_seqs = 1,
                               .query_start = qs1, .seq_lens = &sl1, .block_tables = btab, .max_blocks_per_seq = max_blocks};
            b->ops->attention(b, out1 + (size_t)t * s->n_heads * s->hd, qv + (size_t)t * s->n_heads * s->hd, &L, &ap, &b1);
        }
        if (memcmp(out1, out, qn * 4) != 0) (*fails)++;
        free(out1);
    }
    b->ops->free(b, L.k); b->ops->free(b, L.v);
    if (s->tok) { b->ops->free(b, L.k_tok_scale); b->ops->free(b, L.v_tok_scale); }
    free(sc); free(acc); free(perm); free(btab); free(tok); free(pos); free(slot); free(k); free(v); free(qv); free(out);
    b->ops->destroy(b);
    return worst;
}

TEST(all_dtypes_and_shapes) {
    enum dtype dts[] = {DT_F32, DT_F16, DT_BF16, DT_E4M3, DT_E5M2};
    struct { int hd, n_kv, n_heads, bs, window; } shapes[] = {
        {8, 4, 8, 16, 0}, {64, 2, 8, 16, 0}, {128, 1, 4, 16, 0}, {256, 2, 4, 32, 0}, {24, 3, 6, 7, 0}, {64, 2, 4, 16, 5},
    };
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
            struct setup s = {shapes[i].hd, shapes[i].n_kv, shapes[i].n_heads, shapes[i].bs, shapes[i].window, 1, dts[d], {45}, false};
            int fails = 0;
            double w = run_case(&s, &fails);
            CHECK_MSG(fails == 0, "dtype %s hd %d window %d: worst error %g", dtype_name(dts[d]), s.hd, s.window, w);
            s.n_seqs = 3; s.seq_len[0] = 17; s.seq_len[1] = 1; s.seq_len[2] = 33;
            fails = 0;
            w = run_case(&s, &fails);
            CHECK_MSG(fails == 0, "3 seqs, dtype %s hd %d: worst error %g", dtype_name(dts[d]), s.hd, w);
        }
}

TEST(padding_slots_are_skipped) {
    struct backend *b = backend_cpu_create(1);
    struct kv_layer L = {.dtype = DT_E4M3, .n_kv_heads = 1, .head_dim = 8, .kv_block_tokens = 4, .n_blocks = 1};
    L.k_scale[0] = L.v_scale[0] = 1;
    L.k = b->ops->alloc(b, 32);
    L.v = b->ops->alloc(b, 32);
    float k[16], v[16];
    for (int i = 0; i < 16; i++) k[i] = v[i] = 1.0f;
    int32_t slot[2] = {-1, 2}, pos[2] = {0, 0};
    struct batch bt = {.n_tokens = 2, .positions = pos, .slot_mapping = slot};
    b->ops->kv_write(b, &L, k, v, &bt);
    int nonzero = 0;
    for (int i = 0; i < 32; i++) nonzero += ((uint8_t *)L.k)[i] != 0;
    CHECK_EQ_INT(nonzero, 8);  // only slot 2's row
    CHECK_EQ_INT(((uint8_t *)L.k)[16], 0x38);  // 1.0 in e4m3
    b->ops->free(b, L.k); b->ops->free(b, L.v);
    b->ops->destroy(b);
}

TEST(fp8_emulation_is_close_but_rounded) {
    // Emulation (Q and P in e4m3) stays within a few percent of the exact FP8 path.
    struct backend *b = backend_cpu_create(2);
    int hd = 64, n = 200;
    struct kv_layer L = {.dtype = DT_E4M3, .n_kv_heads = 1, .head_dim = hd, .kv_block_tokens = 16, .n_blocks = 13};
    L.k_scale[0] = L.v_scale[0] = 1;
    L.k = b->ops->alloc(b, 13 * 16 * hd);
    L.v = b->ops->alloc(b, 13 * 16 * hd);
    struct rng r;
    rng_seed(&r, 5);
    float *k = malloc(sizeof(float) * n * hd), *v = malloc(sizeof(float) * n * hd), *q = malloc(sizeof(float) * 2 * hd);
    float o1[128], o2[128];
    for (int i = 0; i < n * hd; i++) { k[i] = 2 * rng_float(&r) - 1; v[i] = 2 * rng_float(&r) - 1; }
    for (int i = 0; i < 2 * hd; i++) q[i] = 4 * (2 * rng_float(&r) - 1);
    int32_t *pos = malloc(4 * n), *slot = malloc(4 * n), btab[13], qs[2] = {0, n}, sl = n;
    for (int i = 0; i < n; i++) { pos[i] = i; slot[i] = i; }
    for (int i = 0; i < 13; i++) btab[i] = i;
    struct batch bt = {.n_tokens = n, .positions = pos, .slot_mapping = slot, .n_seqs = 1, .query_start = qs,
                       .seq_lens = &sl, .block_tables = btab, .max_blocks_per_seq = 13};
    b->ops->kv_write(b, &L, k, v, &bt);
    int32_t p1 = n - 1, qs1[2] = {0, 1};
    struct batch b1 = {.n_tokens = 1, .positions = &p1, .slot_mapping = &p1, .n_seqs = 1, .query_start = qs1,
                       .seq_lens = &sl, .block_tables = btab, .max_blocks_per_seq = 13};
    struct attn_params ex = {.n_heads = 2, .softmax_scale = 0.125f, .fp8_math = ATTN_FP8_EXACT},
                       em = {.n_heads = 2, .softmax_scale = 0.125f, .fp8_math = ATTN_FP8_EMULATE};
    b->ops->attention(b, o1, q, &L, &ex, &b1);
    b->ops->attention(b, o2, q, &L, &em, &b1);
    double num = 0, den = 0;
    for (int i = 0; i < 2 * hd; i++) { num += (o1[i] - o2[i]) * (o1[i] - o2[i]); den += o1[i] * o1[i]; }
    CHECK_MSG(num / den < 5e-3 && num > 0, "emulation NMSE %g", num / den);
    b->ops->free(b, L.k); b->ops->free(b, L.v);
    free(k); free(v); free(q); free(pos); free(slot);
    b->ops->destroy(b);
}

// Attention over an e4m3 layer with a per-channel K offset o equals attention over an f32
// layer holding K = x + o, where x are e4m3 values (so RNE(K − o) = x is stored exactly):
// q·o is the same for every key of a query, and softmax does not see it. Without the
// offset, the e4m3 layer must round K = x + o and the output moves.
static double offset_case(struct backend *b, bool use_offset, int n, int hd, const float *k, const float *v,
                          const float *q, const float *off, float *out_f32_ref, bool fill_ref) {
    const int nb = (n + 15) / 16;
    struct kv_layer E = {.dtype = DT_E4M3, .n_kv_heads = 1, .head_dim = hd, .kv_block_tokens = 16, .n_blocks = nb};
    struct kv_layer F = {.dtype = DT_F32, .n_kv_heads = 1, .head_dim = hd, .kv_block_tokens = 16, .n_blocks = nb};
    E.k_scale[0] = E.v_scale[0] = F.k_scale[0] = F.v_scale[0] = 1;
    E.k_offset = use_offset ? off : NULL;
    E.k = b->ops->alloc(b, (size_t)nb * 16 * hd);
    E.v = b->ops->alloc(b, (size_t)nb * 16 * hd);
    F.k = b->ops->alloc(b, (size_t)nb * 16 * hd * 4);
    F.v = b->ops->alloc(b, (size_t)nb * 16 * hd * 4);
    int32_t *pos = malloc(4 * (size_t)n), *btab = malloc(4 * (size_t)nb), qs[2] = {0, n}, sl = n;
    for (int i = 0; i < n; i++) pos[i] = i;
    for (int i = 0; i < nb; i++) btab[i] = i;
    struct batch bt = {.n_tokens = n, .positions = pos, .slot_mapping = pos, .n_seqs = 1, .query_start = qs,
                       .seq_lens = &sl, .block_tables = btab, .max_blocks_per_seq = nb};
    b->ops->kv_write(b, &E, k, v, &bt);
    b->ops->kv_write(b, &F, k, v, &bt);
    int32_t p1 = n - 1, qs1[2] = {0, 1};
    struct batch b1 = {.n_tokens = 1, .positions = &p1, .slot_mapping = &p1, .n_seqs = 1, .query_start = qs1,
                       .seq_lens = &sl, .block_tables = btab, .max_blocks_per_seq = nb};
    struct attn_params ex = {.n_heads = 2, .softmax_scale = 1.0f / sqrtf((float)hd), .fp8_math = ATTN_FP8_EXACT};
    float *o = malloc(sizeof(float) * 2 * hd);
    if (fill_ref) b->ops->attention(b, out_f32_ref, q, &F, &ex, &b1);
    b->ops->attention(b, o, q, &E, &ex, &b1);
    double worst = 0;
    for (int i = 0; i < 2 * hd; i++) worst = fmax(worst, fabs(o[i] - out_f32_ref[i]));
    free(o); free(pos); free(btab);
    b->ops->free(b, E.k); b->ops->free(b, E.v); b->ops->free(b, F.k); b->ops->free(b, F.v);
    return worst;
}

TEST(k_offset_leaves_attention_unchanged) {
    struct backend *b = backend_cpu_create(1);
    const int n = 150, hd = 64;
    struct rng r;
    rng_seed(&r, 11);
    float *k = malloc(sizeof(float) * n * hd), *v = malloc(sizeof(float) * n * hd), q[2 * 64], off[64], ref[2 * 64];
    // offsets: multiples of 2^-10 below 15 in magnitude, so x + o and (x + o) − o are exact in f32
    for (int i = 0; i < hd; i++) off[i] = roundf((30 * rng_float(&r) - 15) * 1024) / 1024;
    for (int t = 0; t < n; t++)
        for (int i = 0; i < hd; i++) {
            float x = fp8_e4m3_to_f32(fp8_e4m3_from_f32(2 * rng_float(&r) - 1));
            k[t * hd + i] = x + off[i];
            v[t * hd + i] = fp8_e4m3_to_f32(fp8_e4m3_from_f32(2 * rng_float(&r) - 1));
        }
    for (int i = 0; i < 2 * hd; i++) q[i] = 2 * rng_float(&r) - 1;
    double with = offset_case(b, true, n, hd, k, v, q, off, ref, true);
    double without = offset_case(b, false, n, hd, k, v, q, off, ref, false);
    fprintf(stderr, "k_offset: worst |e4m3 - f32| %.3g with the offset, %.3g without\n", with, without);
    CHECK_MSG(with < 1e-4, "with the offset the e4m3 layer differs from f32 by %g", with);
    CHECK_MSG(without > 100 * with && without > 1e-3, "without the offset: %g (with: %g)", without, with);
    free(k); free(v);
    b->ops->destroy(b);
}

// The wgmma model's MMA in its vector form (AVX2, where built) against its scalar form, bit for
// bit: e4m3 rows times e4m3 P·256, 1-32 rows, head dims with and without an 8-column tail, and
// columns of zeros, −0, and NaN in T or in a term (those take the scalar path inside the vector form).
TEST(wgmma_model_vector_matches_scalar) {
    struct rng r;
    rng_seed(&r, 99);
    static const int hds[6] = {8, 20, 64, 96, 128, 256};
    float g[32 * 256], f[32], ta[256], tb[256];
    int diff = 0, cases = 0;
    for (int k = 0; k < 6; k++) {
        const int hd = hds[k];
        for (int trial = 0; trial < 40; trial++) {
            const int n = 1 + (int)(rng_next(&r) % 32);
            for (int i = 0; i < n * hd; i++) {
                uint8_t b = (uint8_t)(rng_next(&r) & 0xff);
                if ((b & 0x7f) == 0x7f) b = 0;  // (e4m3's NaN codes as zeros)
                g[i] = fp8_e4m3_to_f32(b);
            }
            for (int j = 0; j < n; j++) f[j] = fp8_e4m3_to_f32((uint8_t)(rng_next(&r) % 0x7f)) * 256.0f;
            for (int d = 0; d < hd; d++) ta[d] = tb[d] = 0.0f;
            cpu_wgmma_mma_add(ta, g, f, n, hd, 0);  // a T that already holds one MMA's sum
            memcpy(tb, ta, sizeof(float) * hd);
            if (trial % 4 == 1) {  // special columns
                for (int j = 0; j < n; j++) g[j * hd + 1] = 0.0f;
                ta[1] = tb[1] = -0.0f;
                ta[hd - 1] = tb[hd - 1] = NAN;
                g[(n - 1) * hd + hd / 2] = NAN;
            }
            for (int i = 0; i < n * hd; i++) g[i] = -g[i];  // (a second MMA of other signs)
            cpu_wgmma_mma_add(ta, g, f, n, hd, 0);
            cpu_wgmma_mma_add(tb, g, f, n, hd, 1);
            diff += memcmp(ta, tb, sizeof(float) * hd) != 0;
            cases++;
        }
    }
    CHECK_MSG(diff == 0, "%d of %d MMAs differ between the vector and scalar forms", diff, cases);
}

// fp8_per_token_head against the float64 reference over the stored bytes and each row's own
// scales: GQA, head_dim 8..256, odd block sizes, a sliding window, several sequences; run_case
// also checks the byte contract with each row's scale and that token-by-token equals whole.
TEST(token_scales_against_float64) {
    struct { int hd, n_kv, n_heads, bs, window; } shapes[] = {
        {8, 4, 8, 16, 0}, {64, 2, 8, 16, 0}, {128, 1, 4, 16, 0}, {256, 2, 4, 32, 0}, {24, 3, 6, 7, 0}, {64, 2, 4, 16, 5},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        struct setup s = {shapes[i].hd, shapes[i].n_kv, shapes[i].n_heads, shapes[i].bs, shapes[i].window, 1, DT_E4M3,
                          {45}, true};
        int fails = 0;
        double w = run_case(&s, &fails);
        CHECK_MSG(fails == 0, "per-token-head hd %d window %d: worst error %g", s.hd, s.window, w);
        s.n_seqs = 3; s.seq_len[0] = 17; s.seq_len[1] = 1; s.seq_len[2] = 33;
        fails = 0;
        w = run_case(&s, &fails);
        CHECK_MSG(fails == 0, "per-token-head 3 seqs hd %d: worst error %g", s.hd, w);
    }
}

// kv_write's per-token-head scales: each row's scale is absmax / 448 (one f32 division), its
// absmax element stores ±448 (0x7E/0xFE), rows 1000x larger or smaller keep e4m3's relative
// precision, an all-zero row gets scale 1.0 (no division by 0), a K offset is subtracted before
// the absmax, and the static scales are not used.
TEST(token_scale_round_trip) {
    struct backend *b = backend_cpu_create(1);
    enum { HD = 16, N = 5, NKV = 2, BS = 4 };
    struct kv_layer L = {.dtype = DT_E4M3, .n_kv_heads = NKV, .head_dim = HD, .kv_block_tokens = BS, .n_blocks = 2};
    for (int h = 0; h < NKV; h++) L.k_scale[h] = L.v_scale[h] = 7.0f;  // must be ignored
    L.k = b->ops->alloc(b, 2 * NKV * BS * HD);
    L.v = b->ops->alloc(b, 2 * NKV * BS * HD);
    L.k_tok_scale = b->ops->alloc(b, 2 * NKV * BS * sizeof(float));
    L.v_tok_scale = b->ops->alloc(b, 2 * NKV * BS * sizeof(float));
    float k[N * NKV * HD], v[N * NKV * HD];
    const float mag[N] = {1.0f, 1000.0f, 1e-3f, 0.0f, 3.7f};
    struct rng r;
    rng_seed(&r, 5);
    for (int t = 0; t < N; t++)
        for (int i = 0; i < NKV * HD; i++) {
            k[t * NKV * HD + i] = (2 * rng_float(&r) - 1) * mag[t];
            v[t * NKV * HD + i] = (2 * rng_float(&r) - 1) * mag[t] * 0.5f;
        }
    int32_t slot[N] = {5, 0, 7, 2, 4}, pos[N] = {0, 1, 2, 3, 4};
    struct batch bt = {.n_tokens = N, .positions = pos, .slot_mapping = slot};
    b->ops->kv_write(b, &L, k, v, &bt);
    int bad_scale = 0, bad_max = 0, bad_rel = 0;
    for (int t = 0; t < N; t++)
        for (int h = 0; h < NKV; h++)
            for (int which = 0; which < 2; which++) {
                const float *x = (which ? v : k) + ((size_t)t * NKV + h) * HD;
                const uint8_t *st = (const uint8_t *)(which ? L.v : L.k);
                size_t row = ((size_t)(slot[t] / BS) * NKV + h) * BS + slot[t] % BS;
                float sc = (which ? L.v_tok_scale : L.k_tok_scale)[row], amax = 0;
                int at = 0;
                for (int i = 0; i < HD; i++) if (fabsf(x[i]) > amax) { amax = fabsf(x[i]); at = i; }
                float want = amax > 0 ? amax / 448.0f : 1.0f;
                bad_scale += sc != want;
                if (amax > 0) bad_max += (st[row * HD + at] & 0x7F) != 0x7E;
                for (int i = 0; i < HD; i++) {  // e4m3 normals: |error| <= 2^-4 relative
                    double y = (double)fp8_e4m3_to_f32(st[row * HD + i]) * sc;
                    if (fabs(x[i]) >= amax / 64 && fabs(y - x[i]) > fabs(x[i]) / 16) bad_rel++;
                    if (amax == 0 && (st[row * HD + i] & 0x7F) != 0) bad_rel++;  // ±0
                }
            }
    CHECK_EQ_INT(bad_scale, 0);
    CHECK_EQ_INT(bad_max, 0);
    CHECK_EQ_INT(bad_rel, 0);
    // a K offset: the scale is that of k − o
    float off[NKV * HD];
    for (int i = 0; i < NKV * HD; i++) off[i] = 100.0f;
    L.k_offset = off;
    b->ops->kv_write(b, &L, k, v, &bt);
    float amax = 0;
    for (int i = 0; i < HD; i++) amax = fmaxf(amax, fabsf(k[i] - 100.0f));  // token 0, head 0 → slot 5
    CHECK(L.k_tok_scale[(size_t)(5 / BS) * NKV * BS + 5 % BS] == amax / 448.0f);
    b->ops->free(b, L.k); b->ops->free(b, L.v); b->ops->free(b, L.k_tok_scale); b->ops->free(b, L.v_tok_scale);
    b->ops->destroy(b);
}

int main(void) {
    RUN(wgmma_model_vector_matches_scalar);
    RUN(all_dtypes_and_shapes);
    RUN(k_offset_leaves_attention_unchanged);
    RUN(padding_slots_are_skipped);
    RUN(fp8_emulation_is_close_but_rounded);
    RUN(token_scales_against_float64);
    RUN(token_scale_round_trip);
    return test_summary("attention");
}
