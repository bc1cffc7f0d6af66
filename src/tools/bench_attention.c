// bench_attention.c — `octet bench attention`: times one layer's paged attention op on a
// backend at a given shape (decode: one query per sequence against --ctx cached tokens;
// prefill: causal over --ctx tokens, or its last --queries tokens against the whole context, as a
// chunk of a chunked prefill), and prints µs, the K+V bytes read and GB/s (decode) or TFLOP/s
// (prefill, FLOPs = 4·(N·L − N²/2)·d·H for N queries: 4·L²·d·H/2 for all L), as a table line and
// JSON. The cache holds random data written through the backend's own kv_write. Timing: warm-up,
// then --iters back-to-back launches between two syncs (launch overhead hides behind the queue),
// the median of --reps such rounds. --list prints the backend's attention kernels and the one the
// shape takes (the CUDA kernel table; the CPU has one kernel).
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../backend/backend.h"
#include "../base/check.h"
#include "../base/half.h"
#include "../base/rng.h"
#include "../backend/cuda/cuda_tuning.h"
#include "../model/kv_cache.h"
#include "cli.h"
#include "tools.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}
static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// Fills n activation elements of backend memory with uniform(-amp, amp).
static int fill_random(struct backend *b, void *dst, size_t n, float amp, uint64_t seed) {
    struct rng r;
    rng_seed(&r, seed);
    bool bf = b->ops->act_dtype == DT_BF16;
    size_t es = bf ? 2 : 4, chunk = 1 << 22;
    void *h = malloc(chunk * es);
    if (!h) return err_set(OCT_ENOMEM, "out of memory");
    for (size_t o = 0; o < n; o += chunk) {
        size_t m = n - o < chunk ? n - o : chunk;
        for (size_t i = 0; i < m; i++) {
            float v = (2 * rng_float(&r) - 1) * amp;
            if (bf) ((uint16_t *)h)[i] = f32_to_bf16(v); else ((float *)h)[i] = v;
        }
        b->ops->upload(b, (char *)dst + o * es, h, m * es);
    }
    free(h);
    return OCT_OK;
}

int cmd_bench_attention(int argc, char **argv) {
    static const char *const valued[] = {"--mode", "--batch", "--ctx", "--heads", "--kv-heads", "--head-dim", "--iters",
                                         "--reps", "--kv-cache-dtype", "--device", "--window",
                                         "--fp8-attention-accumulation", "--kv-block-tokens", "--block-order",
                                         "--queries", "--softcap", NULL};
    const char *mode = "decode", *dtype_s = "bf16", *device = "auto", *order = "shuffled";
    int accum = 0;
    double softcap = 0.0;  // > 0: Gemma 2's attention logit soft-capping (attn_params.softcap)
    bool list = false;  // --list: which attention kernel the shape takes, then exit
    // bs_l -1: the backend's; nql (prefill): the queries a sequence, its last positions
    long batch = 1, ctx = 8192, heads = 32, kv_heads = 8, hd = 128, iters = 20, reps = 5, window = 0, bs_l = -1;
    long nql = -1;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v;
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) {
            fprintf(stderr,
                    "usage: octet bench attention [--mode decode|prefill] [--batch B] [--ctx L] [--heads 32]\n"
                    "       [--kv-heads 8] [--head-dim 128]\n"
                    "       [--kv-cache-dtype bf16|fp8|fp8_e5m2|fp8_per_token_head|fp32] [--window W]\n"
                    "       [--device cpu|cuda] [--iters N] [--reps N]\n"
                    "       [--fp8-attention-accumulation two-level|every:N|single] [--softcap C (scores soft-capped\n"
                    "        at C, as Gemma 2's attention; default none)]\n"
                    "       [--kv-block-tokens N (default: the backend's, 16 CPU / 64 CUDA)]\n"
                    "       [--block-order shuffled|sequential (the cache blocks' physical order; default shuffled)]\n"
                    "       [--queries N (prefill: the last N of the --ctx positions query, a chunked prefill's\n"
                    "        chunk; default all)]\n"
                    "       [--list (print the backend's attention kernels and which one this shape takes, then\n"
                    "        exit)]\n");
            return 0;
        }
        if (!strcmp(f, "--list")) { list = true; continue; }
        if (!cli_known(f, valued) || !(v = cli_value(argc, argv, &i))) goto bad;
        long *dst = !strcmp(f, "--batch")             ? &batch
                    : !strcmp(f, "--ctx")             ? &ctx
                    : !strcmp(f, "--heads")           ? &heads
                    : !strcmp(f, "--kv-heads")        ? &kv_heads
                    : !strcmp(f, "--head-dim")        ? &hd
                    : !strcmp(f, "--iters")           ? &iters
                    : !strcmp(f, "--reps")            ? &reps
                    : !strcmp(f, "--window")          ? &window
                    : !strcmp(f, "--kv-block-tokens") ? &bs_l
                    : !strcmp(f, "--queries")         ? &nql
                                                      : NULL;
        if (dst) { if (cli_int(f, v, 0, 1L << 24, dst) < 0) goto bad; }
        else if (!strcmp(f, "--mode")) mode = v;
        else if (!strcmp(f, "--kv-cache-dtype")) dtype_s = v;
        else if (!strcmp(f, "--block-order")) order = v;
        else if (!strcmp(f, "--fp8-attention-accumulation")) { if (cli_parse_accum(f, v, &accum) < 0) goto bad; }
        else if (!strcmp(f, "--softcap")) {
            if (cli_float(f, v, &softcap) < 0) goto bad;
            if (softcap < 0) { err_set(OCT_EINVAL, "--softcap %s: a cap >= 0 (0: none)", v); goto bad; }
        }
        else device = v;
    }
    bool decode = !strcmp(mode, "decode");
    if (!decode && strcmp(mode, "prefill")) { err_set(OCT_EINVAL, "--mode: '%s' (decode or prefill)", mode); goto bad; }
    if (nql == -1) nql = ctx;
    if (nql < 1 || nql > ctx || (decode && nql != ctx)) {
        err_set(OCT_EINVAL, "--queries %ld: prefill only, 1 to --ctx (%ld)", nql, ctx);
        goto bad;
    }
    const bool shuffled = !strcmp(order, "shuffled");
    if (!shuffled && strcmp(order, "sequential")) {
        err_set(OCT_EINVAL, "--block-order: '%s' (shuffled or sequential)", order);
        goto bad;
    }
    enum dtype dt;
    if (kv_dtype_parse(dtype_s, DT_BF16, &dt) < 0) goto bad;
    // fp8_per_token_head: e4m3 pages with a scale per (token, KV head) after the data (kv_layer_bytes)
    const bool tok = kv_dtype_token_scales(dtype_s);
    if (batch < 1 || ctx < 1 || heads < 1 || kv_heads < 1 || heads % kv_heads || hd < 2 || iters < 1 || reps < 1 ||
        kv_heads > KV_MAX_HEADS || (bs_l != -1 && (bs_l < 1 || bs_l > 1024))) {
        err_set(OCT_EINVAL, "bad shape: batch %ld ctx %ld heads %ld/%ld head_dim %ld kv_block_tokens %ld", batch, ctx,
                heads, kv_heads, hd, bs_l);
        goto bad;
    }
    struct backend *b = backend_create(device, 0);
    if (!b) { fprintf(stderr, "octet: %s\n", err_msg()); return 1; }
    b->enforce_eager = true;  // one op in a loop, not a forward step: no graphs
    const int bs = bs_l > 0 ? (int)bs_l : b->ops->kv_block_tokens;
    int blocks_per_seq = (int)((ctx + bs - 1) / bs), n_blocks = blocks_per_seq * (int)batch;
    int n_q = decode ? (int)batch : (int)(batch * nql);
    struct kv_layer L = {.dtype = dt, .n_kv_heads = (int)kv_heads, .head_dim = (int)hd, .kv_block_tokens = bs,
                         .n_blocks = n_blocks, .window = (int)window};
    for (int h = 0; h < kv_heads; h++) L.k_scale[h] = L.v_scale[h] = 1.0f;
    size_t scales_at, cache_bytes = kv_layer_bytes(&L, tok, n_blocks, &scales_at);
    size_t es = dtype_size(b->ops->act_dtype);
    L.k = b->ops->alloc(b, cache_bytes);
    L.v = b->ops->alloc(b, cache_bytes);
    if (tok && L.k && L.v) {
        L.k_tok_scale = (float *)((char *)L.k + scales_at);
        L.v_tok_scale = (float *)((char *)L.v + scales_at);
    }
    size_t chunk_tok = 8192;  // kv_write in chunks of tokens
    void *kin = b->ops->alloc(b, chunk_tok * kv_heads * hd * es);
    void *vin = b->ops->alloc(b, chunk_tok * kv_heads * hd * es);
    void *q = b->ops->alloc(b, (size_t)n_q * heads * hd * es), *out = b->ops->alloc(b, (size_t)n_q * heads * hd * es);
    int32_t *btab = malloc(sizeof(int32_t) * n_blocks), *pos = malloc(sizeof(int32_t) * chunk_tok);
    int32_t *slot = malloc(sizeof(int32_t) * chunk_tok);
    int32_t *qs = malloc(sizeof(int32_t) * (batch + 1)), *sl = malloc(sizeof(int32_t) * batch);
    int32_t *qpos = malloc(sizeof(int32_t) * n_q), *qtok = calloc((size_t)n_q, sizeof(int32_t));
    int32_t *qslot = malloc(sizeof(int32_t) * n_q);
    int rc = 1;
    if (!L.k || !L.v || !kin || !vin || !q || !out || !btab || !pos || !slot || !qs || !sl || !qpos || !qslot) {
        fprintf(stderr, "octet: cannot allocate the benchmark's buffers (%s)\n", err_msg());
        goto done;
    }
    // shuffled physical blocks, as a long-running server's pool would hand out (sequential: as a
    // fresh server's pool hands a first long request its blocks, in order)
    struct rng r;
    rng_seed(&r, 1);
    if (shuffled) rng_permutation(&r, btab, n_blocks);
    else for (int i = 0; i < n_blocks; i++) btab[i] = i;
    fill_random(b, q, (size_t)n_q * heads * hd, 1.0f, 2);
    for (long s = 0; s < batch && !list; s++) {
        for (long t0 = 0; t0 < ctx; t0 += (long)chunk_tok) {
            int m = (int)(ctx - t0 < (long)chunk_tok ? ctx - t0 : (long)chunk_tok);
            fill_random(b, kin, (size_t)m * kv_heads * hd, 2.0f, 100 + (uint64_t)(s * 7919 + t0));
            fill_random(b, vin, (size_t)m * kv_heads * hd, 1.0f, 200 + (uint64_t)(s * 7919 + t0));
            for (int i = 0; i < m; i++) {
                long p = t0 + i;
                pos[i] = (int32_t)p;
                slot[i] = btab[s * blocks_per_seq + p / bs] * bs + (int32_t)(p % bs);
            }
            int32_t q2[2] = {0, m}, sl1 = (int32_t)(t0 + m);
            struct batch wb = {.n_tokens = m, .token_ids = qtok, .positions = pos, .slot_mapping = slot, .n_seqs = 1,
                               .query_start = q2, .seq_lens = &sl1, .block_tables = btab + s * blocks_per_seq,
                               .max_blocks_per_seq = blocks_per_seq};
            b->ops->batch_begin(b, &wb);
            b->ops->kv_write(b, &L, kin, vin, &wb);
        }
    }
    for (long s = 0; s < batch; s++) {
        sl[s] = (int32_t)ctx;
        qs[s] = decode ? (int32_t)s : (int32_t)(s * nql);
        if (decode) { qpos[s] = (int32_t)(ctx - 1); qslot[s] = -1; }
        else for (long p = 0; p < nql; p++) { qpos[s * nql + p] = (int32_t)(ctx - nql + p); qslot[s * nql + p] = -1; }
    }
    qs[batch] = n_q;
    struct batch bt = {.n_tokens = n_q, .token_ids = qtok, .positions = qpos, .slot_mapping = qslot,
                       .n_seqs = (int)batch, .query_start = qs, .seq_lens = sl, .block_tables = btab,
                       .max_blocks_per_seq = blocks_per_seq};
    struct attn_params ap = {(int)heads, 1.0f / sqrtf((float)hd), ATTN_FP8_EXACT, accum, (float)softcap};
    if (b->ops->batch_begin(b, &bt) < 0 || b->ops->sync(b) < 0) {
        fprintf(stderr, "octet: %s\n", err_msg());
        goto done;
    }
    const bool on_cuda = !strcmp(b->ops->name, "cuda");
    const char *kernel = on_cuda ? cuda_attention_pick(b, &L, &ap, &bt) : "cpu";  // (the CPU has one kernel)
    if (list) {
        printf("attention kernels of the %s backend, in preference order (* = this shape's):\n", b->ops->name);
        if (!on_cuda) printf("* cpu\n");
        for (int i = 0; on_cuda && i < cuda_attention_kernel_count(); i++) {
            const char *name = cuda_attention_kernel_name(i);
            printf("%c %s\n", kernel && !strcmp(kernel, name) ? '*' : ' ', name);
        }
        rc = 0;
        goto done;
    }
    for (int i = 0; i < 3; i++) b->ops->attention(b, out, q, &L, &ap, &bt);
    if (b->ops->sync(b) < 0) { fprintf(stderr, "octet: %s\n", err_msg()); goto done; }
    double *ts = calloc((size_t)reps, sizeof(double));
    for (int k = 0; k < reps; k++) {
        double t0 = now_s();
        for (int i = 0; i < iters; i++) b->ops->attention(b, out, q, &L, &ap, &bt);
        if (b->ops->sync(b) < 0) { fprintf(stderr, "octet: %s\n", err_msg()); free(ts); goto done; }
        ts[k] = (now_s() - t0) / iters;
    }
    qsort(ts, (size_t)reps, sizeof(double), cmp_d);
    double us = ts[reps / 2] * 1e6;
    // the bytes a decode step reads: K and V rows, and their scales (4 bytes a row) per token and KV head
    double kv_bytes = 2.0 * batch * kv_heads * (window > 0 && window < ctx ? window : ctx) *
                      ((double)hd * dtype_size(dt) + (tok ? sizeof(float) : 0));
    const char *dname = tok ? "fp8_per_token_head" : dtype_name(dt);
    double flops = 4.0 * batch * heads * hd * ((double)nql * ctx - (double)nql * nql / 2);
    char qn[32] = "";  // (a chunk: its queries)
    if (!decode && nql < ctx) snprintf(qn, sizeof qn, " Q=%ld", nql);
    printf("| %s | %s | %s | B=%ld L=%ld%s H=%ld/%ld d=%ld | %.1f us | ", b->ops->name, mode, dname, batch,
           ctx, qn, heads, kv_heads, hd, us);
    const double rate = decode ? kv_bytes / (us * 1e-6) / 1e9 : flops / (us * 1e-6) / 1e12;
    if (decode) printf("%.1f GB/s |\n", rate);
    else printf("%.1f TFLOP/s |\n", rate);
    json_t *o = json_pack("{s:s,s:s,s:s,s:i,s:i,s:i,s:i,s:i,s:i,s:f,s:f,s:f}", "backend", b->ops->name, "mode", mode,
                          "kv_dtype", dname, "batch", (int)batch, "len", (int)ctx, "heads", (int)heads,
                          "kv_heads", (int)kv_heads, "head_dim", (int)hd, "window", (int)window, "us", us, "us_min",
                          ts[0] * 1e6, decode ? "kv_GBps" : "TFLOPs", rate);
    char an[24];
    json_object_set_new(o, "accumulation", json_string(cli_accum_name(accum, an, sizeof an)));
    json_object_set_new(o, "kv_block_tokens", json_integer(bs));
    json_object_set_new(o, "softcap", json_real(softcap));
    if (!decode) json_object_set_new(o, "queries", json_integer(nql));
    json_object_set_new(o, "block_order", json_string(order));
    json_object_set_new(o, "kernel", json_string(kernel ? kernel : "none"));
    char *js = json_dumps(o, JSON_COMPACT);
    printf("%s\n", js);
    free(js);
    json_decref(o);
    free(ts);
    rc = 0;
done:
    if (L.k) b->ops->free(b, L.k);
    if (L.v) b->ops->free(b, L.v);
    if (kin) b->ops->free(b, kin);
    if (vin) b->ops->free(b, vin);
    if (q) b->ops->free(b, q);
    if (out) b->ops->free(b, out);
    free(btab); free(pos); free(slot); free(qs); free(sl); free(qpos); free(qtok); free(qslot);
    b->ops->destroy(b);
    return rc;
bad:
    return cli_usage_error();
}
