// needle_attn.c — the synthetic needle-in-a-haystack attention problem and its float64
// reference; runs the CPU backend's kv_write + attention ops (the same ones the model
// uses) on it for each KV dtype and FP8 math path.
// Why synthetic: the exact answer is known, lengths reach 131072 without a trained model,
// and the distributions (outlier channels) are chosen to stress FP8's range and precision.
#include "needle_attn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../base/check.h"
#include "../base/half.h"
#include "../base/rng.h"
#include "stats_util.h"

#define K_OUTLIERS 4
#define V_OUTLIERS 2

static double gauss(struct rng *r) {
    double u1 = rng_double(r), u2 = rng_double(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

// Outlier channel choice per (kind, kv head): distinct channels, deterministic.
static void pick_channels(struct rng *r, int hd, int n, int *out) {
    for (int i = 0; i < n; i++) {
        int c, dup;
        do {
            c = (int)(rng_next(r) % (uint64_t)hd);
            dup = 0;
            for (int j = 0; j < i; j++) dup |= out[j] == c;
        } while (dup);
        out[i] = c;
    }
}

// One value row of head g: Gaussian, outlier channels wider.
static void fill_v(struct rng *r, float *dst, int hd, const int *vo, float bias) {
    for (int i = 0; i < hd; i++) dst[i] = (float)gauss(r);
    for (int i = 0; i < V_OUTLIERS; i++) dst[vo[i]] = dst[vo[i]] * 8.0f + bias;
}

// A distinctive value row: Gaussian on every channel (no outlier pattern shared with the
// haystack), with a haystack row's typical norm.
static void fill_distinct(struct rng *r, float *dst, int hd) {
    double nn = 0, target = sqrt((double)(hd - V_OUTLIERS) + 64.0 * V_OUTLIERS);
    for (int i = 0; i < hd; i++) { dst[i] = (float)gauss(r); nn += (double)dst[i] * dst[i]; }
    for (int i = 0; i < hd; i++) dst[i] = (float)(dst[i] * target / sqrt(nn));
}

// Scores of query qh against every cached key of head g (float64), into s[length].
static void ref_scores(const struct needle_problem *p, const float *qh, int g, double ss, double *s) {
    int nkv = p->s.n_kv_heads, hd = p->s.head_dim;
    for (int j = 0; j < p->length; j++) {
        const float *kr = p->k + ((size_t)j * nkv + g) * hd;
        double d = 0;
        for (int i = 0; i < hd; i++) d += (double)qh[i] * kr[i];
        s[j] = d * ss;
    }
}

int needle_problem_init(struct needle_problem *p, struct needle_shape s, int length, double depth,
                        double weight, uint64_t seed) {
    memset(p, 0, sizeof *p);
    if (s.n_kv_heads < 1 || s.n_kv_heads > KV_MAX_HEADS || s.n_heads % s.n_kv_heads || s.head_dim < 8)
        return err_set(OCT_EINVAL, "needle: bad shape %d/%d/%d", s.n_heads, s.n_kv_heads, s.head_dim);
    if (length < 32) return err_set(OCT_EINVAL, "needle: length %d is below 32", length);
    if (!(weight > 0 && weight < 1)) return err_set(OCT_EINVAL, "--needle-weight %g must be in (0, 1)", weight);
    p->s = s;
    p->length = length;
    int nkv = s.n_kv_heads, hd = s.head_dim, nh = s.n_heads, group = nh / nkv;
    size_t n = (size_t)length * nkv * hd;
    p->k = malloc(n * sizeof(float));
    p->v = malloc(n * sizeof(float));
    p->q = malloc((size_t)nh * hd * sizeof(float));
    p->ref = calloc((size_t)nh * hd, sizeof(double));
    p->n_distractors = 16;
    p->distractor_pos = malloc((size_t)p->n_distractors * sizeof(int));
    double *sc = malloc((size_t)length * sizeof(double));
    if (!p->k || !p->v || !p->q || !p->ref || !p->distractor_pos || !sc) {
        free(sc);
        needle_problem_free(p);
        return err_set(OCT_ENOMEM, "needle: no memory for a %d-token problem (%zu MB)", length, 2 * n * 4 >> 20);
    }
    struct rng r;
    rng_seed(&r, seed ^ ((uint64_t)length << 20) ^ ((uint64_t)nh << 8) ^ (uint64_t)nkv);
    int ko[KV_MAX_HEADS][K_OUTLIERS], vo[KV_MAX_HEADS][V_OUTLIERS];
    float kmu[KV_MAX_HEADS][K_OUTLIERS];
    for (int g = 0; g < nkv; g++) {
        pick_channels(&r, hd, K_OUTLIERS, ko[g]);
        pick_channels(&r, hd, V_OUTLIERS, vo[g]);
        for (int i = 0; i < K_OUTLIERS; i++) kmu[g][i] = (rng_next(&r) & 1) ? 10.0f : -10.0f;
    }
    for (int j = 0; j < length; j++)
        for (int g = 0; g < nkv; g++) {
            float *kr = p->k + ((size_t)j * nkv + g) * hd, *vr = p->v + ((size_t)j * nkv + g) * hd;
            for (int i = 0; i < hd; i++) kr[i] = (float)gauss(&r);
            for (int i = 0; i < K_OUTLIERS; i++) kr[ko[g][i]] = kmu[g][i] + 3.0f * kr[ko[g][i]];
            fill_v(&r, vr, hd, vo[g], s.v_bias);
        }
    // queries: a shared direction per KV group plus 30% per-head noise, scaled so that
    // scores against random keys have std ≈ 1.5 (a realistic attention entropy)
    double ss = 1.0 / sqrt((double)hd);
    for (int g = 0; g < nkv; g++) {
        float base[512];
        for (int i = 0; i < hd; i++) base[i] = (float)gauss(&r);
        double var = 0;
        for (int i = 0; i < hd; i++) {
            double sd = 1.0;
            for (int o = 0; o < K_OUTLIERS; o++) sd = ko[g][o] == i ? 3.0 : sd;
            var += (double)base[i] * base[i] * sd * sd;
        }
        double c = 1.5 / (ss * sqrt(var));
        for (int h = 0; h < group; h++) {
            float *qh = p->q + (size_t)(g * group + h) * hd;
            for (int i = 0; i < hd; i++) qh[i] = (float)(c * (base[i] + (h ? 0.3 * gauss(&r) : 0.0)));
        }
    }
    // the needle: one position, its key moved along the group's query direction
    p->needle_pos = (int)lround(depth * (length - 1));
    for (int g = 0; g < nkv; g++) {
        const float *q0 = p->q + (size_t)g * group * hd;
        float *kn = p->k + ((size_t)p->needle_pos * nkv + g) * hd;
        double q0n = 0, t = -INFINITY;
        for (int i = 0; i < hd; i++) q0n += (double)q0[i] * q0[i];
        q0n = sqrt(q0n);
        for (int h = 0; h < group; h++) {  // the shift that gives head h the weight; keep the largest
            const float *qh = q0 + (size_t)h * hd;
            ref_scores(p, qh, g, ss, sc);
            double m = -INFINITY, z = 0, qu = 0, qk = 0;
            for (int j = 0; j < length; j++) if (j != p->needle_pos && sc[j] > m) m = sc[j];
            for (int j = 0; j < length; j++) if (j != p->needle_pos) z += exp(sc[j] - m);
            for (int i = 0; i < hd; i++) { qu += (double)qh[i] * q0[i] / q0n; qk += (double)qh[i] * kn[i]; }
            double s_star = m + log(weight / (1 - weight) * z);   // needle score giving `weight`
            if (qu > 0) t = fmax(t, (s_star / ss - qk) / qu);
        }
        if (isfinite(t)) for (int i = 0; i < hd; i++) kn[i] += (float)(t * q0[i] / q0n);
        fill_distinct(&r, p->v + ((size_t)p->needle_pos * nkv + g) * hd, hd);
    }
    // distractors: ordinary keys holding values of the needle's kind (the candidates the
    // needle must win against); chosen after the needle key so its weight stays as set
    for (int d = 0; d < p->n_distractors; d++) {
        int j, dup;
        do {
            j = (int)(rng_next(&r) % (uint64_t)length);
            dup = j == p->needle_pos;
            for (int e = 0; e < d; e++) dup |= p->distractor_pos[e] == j;
        } while (dup);
        p->distractor_pos[d] = j;
        for (int g = 0; g < nkv; g++) fill_distinct(&r, p->v + ((size_t)j * nkv + g) * hd, hd);
    }
    // float64 reference output and the needle's actual weight
    double wsum = 0;
    for (int h = 0; h < nh; h++) {
        int g = h / group;
        ref_scores(p, p->q + (size_t)h * hd, g, ss, sc);
        double m = -INFINITY, z = 0;
        for (int j = 0; j < length; j++) m = sc[j] > m ? sc[j] : m;
        double *o = p->ref + (size_t)h * hd;
        for (int j = 0; j < length; j++) {
            double e = exp(sc[j] - m);
            z += e;
            const float *vr = p->v + ((size_t)j * nkv + g) * hd;
            for (int i = 0; i < hd; i++) o[i] += e * vr[i];
        }
        for (int i = 0; i < hd; i++) o[i] /= z;
        wsum += exp(sc[p->needle_pos] - m) / z;
    }
    p->needle_weight = wsum / nh;
    for (int g = 0; g < nkv; g++) {
        double ka = 0, va = 0;
        for (int j = 0; j < length; j++)
            for (int i = 0; i < hd; i++) {
                ka = fmax(ka, fabs(p->k[((size_t)j * nkv + g) * hd + i]));
                va = fmax(va, fabs(p->v[((size_t)j * nkv + g) * hd + i]));
            }
        p->k_amax[g] = (float)ka;
        p->v_amax[g] = (float)va;
    }
    free(sc);
    return OCT_OK;
}

void needle_problem_free(struct needle_problem *p) {
    free(p->k); free(p->v); free(p->q); free(p->ref); free(p->distractor_pos);
    memset(p, 0, sizeof *p);
}

static double cosine_fd(const float *a, const float *b, int n) {
    double ab = 0, aa = 0, bb = 0;
    for (int i = 0; i < n; i++) { ab += (double)a[i] * b[i]; aa += (double)a[i] * a[i]; bb += (double)b[i] * b[i]; }
    return aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : 0;
}

// Uploads n floats as the backend's activation dtype (f32 or bf16).
static void upload_act(struct backend *b, void *dst, const float *src, size_t n, uint16_t *stage) {
    if (b->ops->act_dtype == DT_F32) { b->ops->upload(b, dst, src, n * 4); return; }
    for (size_t i = 0; i < n; i++) stage[i] = f32_to_bf16(src[i]);
    b->ops->upload(b, dst, stage, n * 2);
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int needle_problem_run(const struct needle_problem *p, struct backend *b, const struct needle_run *run,
                       struct needle_result *out) {
    memset(out, 0, sizeof *out);
    enum dtype dt = run->dt;
    bool calibrated = run->calibrated;
    double cos_threshold = run->cos_threshold;
    const struct backend_ops *op = b->ops;
    int nkv = p->s.n_kv_heads, hd = p->s.head_dim, nh = p->s.n_heads, group = nh / nkv, L = p->length;
    int bs = 16, n_blocks = (L + bs - 1) / bs, chunk = 2048;
    struct kv_layer l = {.dtype = dt, .n_kv_heads = nkv, .head_dim = hd, .kv_block_tokens = bs, .n_blocks = n_blocks};
    float fmax8 = stats_fp8_max(dt);
    for (int g = 0; g < nkv; g++) {
        l.k_scale[g] = calibrated && fmax8 > 0 && p->k_amax[g] > 0 ? p->k_amax[g] / fmax8 : 1.0f;
        l.v_scale[g] = calibrated && fmax8 > 0 && p->v_amax[g] > 0 ? p->v_amax[g] / fmax8 : 1.0f;
    }
    size_t bytes = (size_t)n_blocks * nkv * bs * hd * dtype_size(dt);
    int32_t *slots = malloc((size_t)(L > chunk ? L : chunk) * sizeof(int32_t));
    int32_t *wpos = malloc((size_t)chunk * sizeof(int32_t)), *wtok = calloc((size_t)chunk, sizeof(int32_t));
    int32_t *btab = malloc((size_t)n_blocks * sizeof(int32_t));
    int nq = run->query_rows == 2 ? 2 : 1;
    float *o = malloc((size_t)nq * nh * hd * sizeof(float));
    uint16_t *stage = malloc((size_t)chunk * nkv * hd * 2 + (size_t)nq * nh * hd * 2);
    l.k = op->alloc(b, bytes);
    l.v = op->alloc(b, bytes);
    void *kd = op->alloc(b, (size_t)chunk * nkv * hd * 4), *vd = op->alloc(b, (size_t)chunk * nkv * hd * 4);
    void *qd = op->alloc(b, (size_t)nq * nh * hd * 4), *od = op->alloc(b, (size_t)nq * nh * hd * 4);
    int rc = OCT_OK;
    if (!slots || !wpos || !wtok || !btab || !o || !stage || !l.k || !l.v || !kd || !vd || !qd || !od) {
        rc = err_set(OCT_ENOMEM, "needle: cannot allocate the %d-token %s cache", L, dtype_name(dt));
        goto done;
    }
    for (int i = 0; i < n_blocks; i++) btab[i] = i;
    for (int t0 = 0; t0 < L; t0 += chunk) {  // kv_write in chunks, as prefill steps would
        int n = L - t0 < chunk ? L - t0 : chunk;
        for (int i = 0; i < n; i++) slots[i] = wpos[i] = t0 + i;
        size_t off = (size_t)t0 * nkv * hd, cnt = (size_t)n * nkv * hd * 4;
        upload_act(b, kd, p->k + off, cnt / 4, stage);
        upload_act(b, vd, p->v + off, cnt / 4, stage);
        // a whole prefill-step batch: a GPU backend reads the slots from its batch_begin copy
        int32_t wq[2] = {0, n}, wlen = t0 + n;
        struct batch wb = {.n_tokens = n, .token_ids = wtok, .positions = wpos, .slot_mapping = slots, .n_seqs = 1,
                           .query_start = wq, .seq_lens = &wlen, .block_tables = btab, .max_blocks_per_seq = n_blocks};
        if (op->batch_begin && (rc = op->batch_begin(b, &wb)) < 0) goto done;
        op->kv_write(b, &l, kd, vd, &wb);
    }
    // the scored query sits at position L-1; with query_rows 2 it is the last of a 2-token chunk
    int32_t pos[2] = {L - nq, L - 1}, qs[2] = {0, nq}, seq_len = L, row = 0, tok[2] = {0, 0};
    struct batch ab = {.n_tokens = nq, .token_ids = tok, .positions = pos, .slot_mapping = pos, .n_seqs = 1,
                       .query_start = qs, .seq_lens = &seq_len, .block_tables = btab, .max_blocks_per_seq = n_blocks,
                       .n_logits = 0, .logits_rows = &row};
    struct attn_params ap = {.n_heads = nh, .softmax_scale = (float)(1.0 / sqrt((double)hd)), .fp8_math = run->math,
                             .fp8_accum = run->accum};
    float *qq = malloc((size_t)nq * nh * hd * sizeof(float));
    if (!qq) { rc = err_set(OCT_ENOMEM, "needle: out of memory"); goto done; }
    for (int i = 0; i < nq; i++) memcpy(qq + (size_t)i * nh * hd, p->q, (size_t)nh * hd * sizeof(float));
    upload_act(b, qd, qq, (size_t)nq * nh * hd, stage);
    free(qq);
    if ((rc = op->sync(b)) < 0) goto done;
    if (op->batch_begin && (rc = op->batch_begin(b, &ab)) < 0) goto done;
    double t0 = now_ms();
    op->attention(b, od, qd, &l, &ap, &ab);
    rc = op->sync(b);
    out->attn_ms = now_ms() - t0;
    if (rc < 0) goto done;
    op->download_f32(b, o, od, (size_t)nq * nh * hd);
    double num = 0, den = 0;
    float *o_all = o;
    o += (size_t)(nq - 1) * nh * hd;  // the row at position L-1
    out->retrieved = true;
    for (int h = 0; h < nh; h++) {
        int g = h / group;
        const float *oh = o + (size_t)h * hd;
        for (int i = 0; i < hd; i++) {
            double d = oh[i] - p->ref[(size_t)h * hd + i];
            num += d * d;
            den += p->ref[(size_t)h * hd + i] * p->ref[(size_t)h * hd + i];
        }
        double cn = cosine_fd(oh, p->v + ((size_t)p->needle_pos * nkv + g) * hd, hd), best = -1;
        for (int d = 0; d < p->n_distractors; d++) {
            double cd = cosine_fd(oh, p->v + ((size_t)p->distractor_pos[d] * nkv + g) * hd, hd);
            best = cd > best ? cd : best;
        }
        out->cos_needle += cn / nh;
        out->cos_distractor += best / nh;
        if (!(cn > cos_threshold && cn > best)) out->retrieved = false;
    }
    out->rel_l2 = den > 0 ? sqrt(num / den) : 0;
    o = o_all;
done:
    if (l.k) op->free(b, l.k);
    if (l.v) op->free(b, l.v);
    if (kd) op->free(b, kd);
    if (vd) op->free(b, vd);
    if (qd) op->free(b, qd);
    if (od) op->free(b, od);
    free(slots); free(wpos); free(wtok); free(btab); free(o); free(stage);
    return rc;
}
