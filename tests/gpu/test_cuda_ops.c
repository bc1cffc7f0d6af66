// test_cuda_ops.c — every CUDA backend op against the CPU backend on identical inputs at
// real shapes (run by scripts/gpu_check.sh on the GPU machine; built with `make CUDA=1
// gpu-tests`). Inputs are bf16-representable so both backends see the same numbers;
// kv_write must be byte-identical; other ops are bounded by NMSE (bf16 activations).
// Every entry of the attention kernel table is checked on the shapes it fits (attention_table).
// Prints one line per check, a JSON summary to the file in argv[1], and "N passed, N failed".
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/backend/backend.h"
#include "../../src/backend/cuda/cuda_tuning.h"
#include "../../src/base/argmax.h"
#include "../../src/base/check.h"
#include "../../src/base/half.h"
#include "../../src/base/rng.h"
#include "../../src/model/model.h"
#include "../../src/model/rope.h"
#include "../test.h"

#include "cuda_ops_util.h"

TEST(elementwise_and_gemm) {
    int n = 7, dim = 4096, ffn = 14336;
    struct tb t;
    int nq[1] = {n}, ctx[1] = {131000};
    make_batch(&t, 1, nq, ctx, 16, 8192);
    CHECK_OK(cpu->ops->batch_begin(cpu, &t.b));
    CHECK_OK(gpu->ops->batch_begin(gpu, &t.b));
    struct weight w_norm = make_weight(1, dim, 1.0f), w_up = make_weight(ffn, dim, 0.03f), emb = make_weight(512, dim, 1.0f);
    struct backend *bs[2] = {cpu, gpu};
    for (int i = 0; i < 2; i++) { bs[i]->ops->weight_upload(bs[i], &w_norm); if (i == 1) w_norm.dev = NULL; }
    // separate copies of the weight structs per backend (dev pointers differ)
    struct weight wn[2] = {w_norm, w_norm}, wu[2] = {w_up, w_up}, we[2] = {emb, emb};
    for (int i = 0; i < 2; i++) {
        wn[i].dev = wu[i].dev = we[i].dev = NULL;
        CHECK_OK(bs[i]->ops->weight_upload(bs[i], &wn[i]));
        CHECK_OK(bs[i]->ops->weight_upload(bs[i], &wu[i]));
        CHECK_OK(bs[i]->ops->weight_upload(bs[i], &we[i]));
    }
    float *x = rand_vec((size_t)n * dim, 2.0f), *y = rand_vec((size_t)n * dim, 1.0f), *g = rand_vec((size_t)n * ffn, 3.0f);
    float *res[2][7];
    for (int i = 0; i < 2; i++) {
        struct backend *b = bs[i];
        void *dx = to_dev(b, x, (size_t)n * dim), *dy = to_dev(b, y, (size_t)n * dim), *dg = to_dev(b, g, (size_t)n * ffn);
        void *o1 = b->ops->alloc(b, (size_t)n * ffn * 4), *o2 = b->ops->alloc(b, (size_t)n * dim * 4);
        b->ops->rmsnorm(b, o2, dx, &wn[i], n, 1e-5f);
        res[i][0] = to_host(b, o2, (size_t)n * dim);
        b->ops->matmul(b, o1, dx, &wu[i], n);
        res[i][1] = to_host(b, o1, (size_t)n * ffn);
        b->ops->silu_mul(b, o1, dg, o1, (int64_t)n * ffn);
        res[i][2] = to_host(b, o1, (size_t)n * ffn);
        b->ops->add(b, dx, dy, (int64_t)n * dim);
        res[i][3] = to_host(b, dx, (size_t)n * dim);
        struct rope_config rc = {.theta = 500000, .n_rot = 128, .scaling = ROPE_SCALING_LLAMA3, .factor = 8, .orig_max_pos = 8192,
                                 .low_freq_factor = 1, .high_freq_factor = 4};
        struct rope_table rt;
        rope_table_init(&rt, &rc);
        b->ops->rope(b, dy, 32, 128, &rt, &t.b);  // positions near 131000
        res[i][4] = to_host(b, dy, (size_t)n * dim);
        b->ops->get_rows(b, o2, &we[i], &t.b);
        res[i][5] = to_host(b, o2, (size_t)n * dim);
        res[i][6] = malloc((size_t)n * ffn * 4);
        b->ops->logits(b, res[i][6], dx, &wu[i], n);
        CHECK_OK(b->ops->sync(b));
        b->ops->free(b, dx); b->ops->free(b, dy); b->ops->free(b, dg); b->ops->free(b, o1); b->ops->free(b, o2);
    }
    record("rmsnorm [7 x 4096]", nmse(res[1][0], res[0][0], (size_t)n * dim), 1e-4, NULL);
    record("matmul [7 x 4096] x [14336 x 4096]^T", nmse(res[1][1], res[0][1], (size_t)n * ffn), 1e-4, NULL);
    record("silu_mul [7 x 14336]", nmse(res[1][2], res[0][2], (size_t)n * ffn), 1e-4, NULL);
    record("add [7 x 4096]", nmse(res[1][3], res[0][3], (size_t)n * dim), 1e-4, NULL);
    record("rope llama3 x8, positions ~131000", nmse(res[1][4], res[0][4], (size_t)n * dim), 1e-4, NULL);
    record("get_rows [7 of 512 x 4096]", nmse(res[1][5], res[0][5], (size_t)n * dim), 0, NULL);
    record("logits f32 [7 x 4096] x [14336 x 4096]^T", nmse(res[1][6], res[0][6], (size_t)n * ffn), 1e-4, NULL);
    for (int i = 0; i < 2; i++) { for (int k = 0; k < 7; k++) free(res[i][k]); }
    free(x); free(y); free(g);
    free((void *)w_norm.data); free((void *)w_up.data); free((void *)emb.data);
}

// The CPU reference's FP8 math, the GPU's accumulation mode and the NMSE bound for the next
// attention_case calls (FP8 wgmma prefill is compared with the CPU's emulation of it).
#define WGMMA_BOUND 2e-3
static enum attn_fp8_math case_math = ATTN_FP8_EXACT;
static int case_acc = 0;
// attn_params.softcap of the next cases (0: none)
static float case_softcap = 0.0f;
static double case_bound = 2e-5;
static int case_bs = 16;  // kv_block_tokens of the next cases
// Per-channel K offsets ([n_kv][hd], kv_layer.k_offset) for the next cases, or NULL.
static const float *case_k_offset = NULL;
// Elements by which the GPU's q starts into its buffer in the next cases (1: a bf16 q off 16-byte
// alignment, which takes the FP8 prefill's 2-byte Q loads).
static int case_q_shift = 0;
// The amplitude of the next cases' random q (1e-37: rows whose FP8 scale amax/448 is so small that its
// reciprocal overflows, which the FP8 prefill's Q quantisation divides for; fp8_prefill_tiny_q).
static float case_q_amp = 1.0f;

// --batch-invariant (the backend's identity mode): every GEMM on the invariant kernel.
static bool identity_mode(void) { return gpu->batch_invariant; }

// Cases each entry of the attention kernel table ran (attention_case counts them).
#define MAX_KERNELS 32
static int kernel_cases[MAX_KERNELS];
static void count_kernel(const char *name) {
    for (int i = 0; i < cuda_attention_kernel_count() && i < MAX_KERNELS; i++)
        if (name && !strcmp(name, cuda_attention_kernel_name(i))) kernel_cases[i]++;
}
// An entry forced through struct cuda_tuning's attn_kernel (attention_table): attention_case skips
// the shapes it does not fit.
static const char *case_forced = NULL;
// Entries whose e4m3 arithmetic is the FP8 tensor cores' (Q and P in e4m3): compared with the
// CPU's emulation; every other entry widens FP8 exactly.
static bool fp8_mma_kernel(const char *name) { return name && !strncmp(name, "prefill_fp8", 11); }

// kv_write on both backends, compare pages byte for byte, then attention on each.
static void attention_case(const char *label, enum dtype dt, int hd, int n_kv, int G, int window, int n_seqs,
                           const int *n_q, const int *ctx) {
    int bs = case_bs, max_ctx = 0;
    for (int s = 0; s < n_seqs; s++) if (ctx[s] > max_ctx) max_ctx = ctx[s];
    int max_blocks = (max_ctx + bs - 1) / bs, n_blocks = max_blocks * n_seqs;
    struct tb *t = malloc(sizeof *t);
    make_batch(t, n_seqs, n_q, ctx, bs, max_blocks);
    // the whole context goes through kv_write first (a "prefill" batch of every position)
    struct tb *w = malloc(sizeof *w);
    struct kv_layer L[2];
    size_t bytes = (size_t)n_blocks * n_kv * bs * hd * dtype_size(dt);
    struct backend *bk[2] = {cpu, gpu};
    for (int i = 0; i < 2; i++) {
        L[i] = (struct kv_layer){.dtype = dt, .n_kv_heads = n_kv, .head_dim = hd, .kv_block_tokens = bs, .n_blocks = n_blocks, .window = window};
        for (int h = 0; h < n_kv; h++) { L[i].k_scale[h] = 0.5f + 0.25f * h; L[i].v_scale[h] = 0.125f * (h + 1); }
        L[i].k_offset = case_k_offset;
        L[i].k = bk[i]->ops->alloc(bk[i], bytes);
        L[i].v = bk[i]->ops->alloc(bk[i], bytes);
    }
    // the table entry this shape takes (or, forced, whether the entry fits it)
    const struct attn_params ap0 = {n_kv * G, 1.0f / sqrtf((float)hd), case_math, case_acc, case_softcap};
    gpu->ops->batch_begin(gpu, &t->b);
    const char *kernel = cuda_attention_pick(gpu, &L[1], &ap0, &t->b);
    if (case_forced && !kernel) {
        for (int i = 0; i < 2; i++) { bk[i]->ops->free(bk[i], L[i].k); bk[i]->ops->free(bk[i], L[i].v); }
        free(t); free(w);
        return;
    }
    count_kernel(kernel);
    int total = 0;
    for (int s = 0; s < n_seqs; s++) total += ctx[s];
    float *k = rand_vec((size_t)total * n_kv * hd, 3.0f), *v = rand_vec((size_t)total * n_kv * hd, 2.0f);
    float *q = rand_vec((size_t)t->b.n_tokens * n_kv * G * hd, case_q_amp);
    CHECK_OK(kv_fill(bk, L, w, t, k, v, n_seqs, ctx, n_kv, hd, bs, max_blocks));
    // byte-identical pages
    char *pg = malloc(bytes), *pc = malloc(bytes);
    int diff = 0;
    for (int kvv = 0; kvv < 2; kvv++) {
        gpu->ops->download(gpu, pg, kvv ? L[1].v : L[1].k, bytes);
        memcpy(pc, kvv ? L[0].v : L[0].k, bytes);
        diff += memcmp(pg, pc, bytes) != 0;
    }
    char name[160];
    snprintf(name, sizeof name, "kv_write %s bytes identical (%s)", dtype_name(dt), label);
    record(name, diff ? 1.0 : 0.0, 0, NULL);
    float *out[2];
    size_t nout = (size_t)t->b.n_tokens * n_kv * G * hd;
    enum attn_fp8_math math = case_math;
    double bound = case_bound;
    struct attn_params ap = {n_kv * G, 1.0f / sqrtf((float)hd), math, case_acc, case_softcap};
    if (dt == DT_E4M3 && !fp8_mma_kernel(kernel)) { math = ATTN_FP8_EXACT; bound = 2e-5; }
    ap.fp8_math = math;
    for (int i = 0; i < 2; i++) {
        const int sh = bk[i] == gpu ? case_q_shift : 0;
        float *qs = sh ? calloc(nout + sh, sizeof(float)) : NULL;
        if (qs) memcpy(qs + sh, q, nout * sizeof(float));
        void *dq = to_dev(bk[i], qs ? qs : q, nout + sh), *dout = bk[i]->ops->alloc(bk[i], nout * 4);
        free(qs);
        bk[i]->ops->batch_begin(bk[i], &t->b);
        bk[i]->ops->attention(bk[i], dout, (char *)dq + (size_t)sh * dtype_size(bk[i]->ops->act_dtype), &L[i], &ap, &t->b);
        CHECK_OK(bk[i]->ops->sync(bk[i]));
        out[i] = to_host(bk[i], dout, nout);
        if (sh) {  // the same q aligned (the 16-byte loads) must give the same bytes
            void *da = to_dev(gpu, q, nout);
            gpu->ops->attention(gpu, dout, da, &L[i], &ap, &t->b);
            CHECK_OK(gpu->ops->sync(gpu));
            float *oa = to_host(gpu, dout, nout);
            char nm[200];
            snprintf(nm, sizeof nm, "attention %s %s: bytes as with q aligned", dtype_name(dt), label);
            record(nm, memcmp(oa, out[i], nout * sizeof(float)) ? 1.0 : 0.0, 0, NULL);
            free(oa);
            gpu->ops->free(gpu, da);
        }
        bk[i]->ops->free(bk[i], dq);
        bk[i]->ops->free(bk[i], dout);
        bk[i]->ops->free(bk[i], L[i].k);
        bk[i]->ops->free(bk[i], L[i].v);
    }
    snprintf(name, sizeof name, "attention %s %s%s%s%s", dtype_name(dt), label, math == ATTN_FP8_EMULATE ? " vs emulate" : "",
             case_forced ? " on " : "", case_forced ? case_forced : "");
    // the GPU output's bytes hashed (FNV-1a) into the record's detail, so that two builds can be
    // compared bit for bit (scripts/gpu_check.sh compare), and the table entry that ran
    char detail[96];
    snprintf(detail, sizeof detail, "gpu_fnv1a %016llx kernel %s", (unsigned long long)rng_hash_bytes(out[1], nout * sizeof(float)),
             kernel ? kernel : "none");
    record(name, nmse(out[1], out[0], nout), bound, detail);
    free(out[0]); free(out[1]); free(k); free(v); free(q); free(pg); free(pc); free(t); free(w);
}

TEST(kv_write_and_attention) {
    enum dtype dts[3] = {DT_BF16, DT_E4M3, DT_E5M2};
    for (int d = 0; d < 3; d++) {
        int q1[3] = {1, 1, 1}, c1[3] = {1, 777, 20000};
        attention_case("decode hd128 G4 B3", dts[d], 128, 8, 4, 0, 3, q1, c1);
        int q2[2] = {1, 1}, c2[2] = {5000, 33};
        attention_case("decode hd64 G8 B2", dts[d], 64, 8, 8, 0, 2, q2, c2);
        attention_case("decode hd64 G8 window 128", dts[d], 64, 8, 8, 128, 2, q2, c2);
        // group sizes the decode kernels pad (the transposed one puts heads on N = 8: 1, 3, 6, 7 leave
        // columns empty; odd G splits a lane's head pair)
        attention_case("decode hd128 G1 B2", dts[d], 128, 8, 1, 0, 2, q2, c2);
        attention_case("decode hd128 G3 B2", dts[d], 128, 4, 3, 0, 2, q2, c2);
        attention_case("decode hd64 G6 window 200", dts[d], 64, 2, 6, 200, 2, q2, c2);
        attention_case("decode hd128 G7 B3", dts[d], 128, 2, 7, 0, 3, q1, c1);
        int q3[1] = {1}, c3[1] = {3000}, c6[1] = {40000};  // (40k tokens, one sequence: every split busy)
        attention_case("decode hd128 G4 B1 40k", dts[d], 128, 8, 4, 0, 1, q3, c6);
        attention_case("decode hd256 G2", dts[d], 256, 4, 2, 0, 1, q3, c3);
        attention_case("decode hd256 G2 window 512", dts[d], 256, 4, 2, 512, 1, q3, c3);
        attention_case("decode hd256 G8 B2", dts[d], 256, 2, 8, 0, 2, q2, c2);
        attention_case("decode hd256 G3 B3", dts[d], 256, 2, 3, 0, 3, q1, c1);
        attention_case("decode hd256 G1 B1 40k", dts[d], 256, 8, 1, 0, 1, q3, c6);
        int q4[2] = {300, 1}, c4[2] = {500, 900};  // chunked prefill (200 cached) + a decode, one batch
        // e4m3 prefill runs on FP8 wgmma (Q and P in e4m3): compared with the CPU's emulation
        bool wg = dts[d] == DT_E4M3;
        case_math = wg ? ATTN_FP8_EMULATE : ATTN_FP8_EXACT;
        case_bound = wg ? WGMMA_BOUND : 2e-5;
        attention_case("prefill+decode hd128 G4", dts[d], 128, 8, 4, 0, 2, q4, c4);
        attention_case("prefill hd64 G8 window 128", dts[d], 64, 8, 8, 128, 2, q4, c4);
        attention_case("prefill hd256 G2", dts[d], 256, 4, 2, 0, 2, q4, c4);
        // head_dim 256 over many tiles (rings and, for e4m3, the staging tiles reused), G 8 and 1
        int q8[1] = {2000}, c8[1] = {2000}, q9[2] = {700, 1}, c9[2] = {1500, 3000};
        attention_case("prefill hd256 G8 2000", dts[d], 256, 2, 8, 0, 1, q8, c8);
        case_bs = 64;
        attention_case("prefill+decode hd256 G1 window 512 bs64", dts[d], 256, 4, 1, 512, 2, q9, c9);
        case_bs = 128;
        attention_case("prefill+decode hd256 G4 bs128", dts[d], 256, 2, 4, 0, 2, q9, c9);
        case_bs = 16;
        case_math = ATTN_FP8_EXACT;
        case_bound = 2e-5;
        int q5[2] = {40, 1}, c5[2] = {100, 300};
        attention_case("generic hd8 G2 (stories260K shape)", dts[d], 8, 4, 2, 0, 2, q5, c5);
        attention_case("generic hd96 G4", dts[d], 96, 2, 4, 0, 2, q5, c5);
        // cache blocks of 32-128 tokens: the 16-token decode and prefill kernels take each as 16-token
        // sub-blocks (kv_sub_block)
        static const int bss[3] = {32, 64, 128};
        for (int b = 0; b < 3; b++) {
            char label[96];
            case_bs = bss[b];
            snprintf(label, sizeof label, "decode hd128 G4 B3 bs%d", bss[b]);
            attention_case(label, dts[d], 128, 8, 4, 0, 3, q1, c1);
            snprintf(label, sizeof label, "decode hd64 G8 window 200 bs%d", bss[b]);
            attention_case(label, dts[d], 64, 8, 8, 200, 2, q2, c2);
            snprintf(label, sizeof label, "decode hd256 G2 bs%d", bss[b]);
            attention_case(label, dts[d], 256, 4, 2, 0, 1, q3, c3);
            case_math = wg ? ATTN_FP8_EMULATE : ATTN_FP8_EXACT;
            case_bound = wg ? WGMMA_BOUND : 2e-5;
            snprintf(label, sizeof label, "prefill+decode hd128 G4 bs%d", bss[b]);
            attention_case(label, dts[d], 128, 8, 4, 0, 2, q4, c4);
            // head_dim 256 over 32- to 128-token blocks: TMA boxes of a tile (bf16) or a half-tile (8-bit)
            snprintf(label, sizeof label, "prefill hd256 G2 bs%d", bss[b]);
            attention_case(label, dts[d], 256, 4, 2, 0, 2, q4, c4);
            case_math = ATTN_FP8_EXACT;
            case_bound = 2e-5;
        }
        case_bs = 16;
    }
    int q1[1] = {1}, c1[1] = {1000};
    attention_case("decode hd128 G4 (fp32 cache, generic)", DT_F32, 128, 8, 4, 0, 1, q1, c1);
    // K offsets (docs/kv_format.md): both backends store K − o, bytes identical; attention
    // ignores o on both, so the outputs still agree
    float *ko = rand_vec(8 * 128, 4.0f);
    case_k_offset = ko;
    for (int d = 1; d < 3; d++) {
        int qo[3] = {1, 1, 1}, co[3] = {1, 777, 20000};
        attention_case("decode hd128 G4 B3, K offsets", dts[d], 128, 8, 4, 0, 3, qo, co);
        int qg[2] = {40, 1}, cg[2] = {100, 300};
        attention_case("generic hd8 G2, K offsets", dts[d], 8, 4, 2, 0, 2, qg, cg);
    }
    case_math = ATTN_FP8_EMULATE;
    case_bound = WGMMA_BOUND;
    int qp[2] = {300, 1}, cp[2] = {500, 900};
    attention_case("prefill+decode hd128 G4, K offsets", DT_E4M3, 128, 8, 4, 0, 2, qp, cp);
    case_math = ATTN_FP8_EXACT;
    case_bound = 2e-5;
    case_k_offset = NULL;
    free(ko);
}

#include "cuda_ops_fp8_prefill.h"  // fp8_wgmma_prefill, fp8_prefill_unaligned_q, fp8_prefill_tiny_q, fp8_prefill_vt_pass
#include "cuda_ops_arch.h"         // arch_ops, attention_softcap, attention_table_softcap
#include "cuda_ops_tok_scale.h"    // tok_scale_attention (fp8_per_token_head)
#include "cuda_ops_sinks.h"        // attention_sinks (gpt-oss: kv_layer.sinks)

// Rows of a product computed in a small batch and inside a larger n: equal bit for bit from n = 2 to 8
// (the skinny GEMM's tensor-core form; one row of x takes its CUDA-core form), and from n = 1 to any n
// in the identity mode (the batch-invariant GEMM).
static void rows_invariant(int rows) {
    const int cols = 4096, nbig = identity_mode() ? 37 : 7;
    struct weight w = make_weight(rows, cols, 0.03f);
    CHECK_OK(gpu->ops->weight_upload(gpu, &w));
    float *x = rand_vec((size_t)nbig * cols, 2.0f);
    void *dx = to_dev(gpu, x, (size_t)nbig * cols), *dbig = gpu->ops->alloc(gpu, (size_t)nbig * rows * 4);
    void *done = gpu->ops->alloc(gpu, (size_t)2 * rows * 4);
    gpu->ops->matmul(gpu, dbig, dx, &w, nbig);
    float *big = to_host(gpu, dbig, (size_t)nbig * rows);
    double worst = 0;
    const int picks[3] = {0, 4, nbig - 2}, m = identity_mode() ? 1 : 2;  // (m tokens from each pick)
    for (int k = 0; k < 3; k++) {
        void *dxr = to_dev(gpu, x + (size_t)picks[k] * cols, (size_t)m * cols);
        gpu->ops->matmul(gpu, done, dxr, &w, m);
        float *one = to_host(gpu, done, (size_t)m * rows);
        for (int r = 0; r < m * rows; r++)
            worst = fmax(worst, fabs((double)one[r] - big[(size_t)picks[k] * rows + r]));
        free(one);
        gpu->ops->free(gpu, dxr);
    }
    CHECK_OK(gpu->ops->sync(gpu));
    char name[96];
    snprintf(name, sizeof name, "matmul rows (%d x %d): n=%d vs inside n=%d, max |diff|", rows, cols,
             identity_mode() ? 1 : 2, nbig);
    record(name, worst, 0, NULL);
    gpu->ops->free(gpu, dx); gpu->ops->free(gpu, dbig); gpu->ops->free(gpu, done);
    free(big); free(x); free((void *)w.data);
}
TEST(gemm_rows_invariant) {
    rows_invariant(1024);
    rows_invariant(4096);
}

// One sequence of 700 tokens: attention of a 700-row prefill vs 1-row decode steps at several
// positions, same cache. Identity mode: equal bit for bit; otherwise close (other kernels).
static void prefill_decode_identity_run(void) {
    const int hd = 128, n_kv = 8, G = 4, bs = 16, ctx = 700, max_blocks = (ctx + bs - 1) / bs;
    const bool ident = identity_mode();
    enum dtype dts[2] = {DT_BF16, DT_E4M3};
    for (int d = 0; d < 2; d++) {
        struct tb *t = malloc(sizeof *t);
        int nq[1] = {ctx}, cx[1] = {ctx};
        make_batch(t, 1, nq, cx, bs, max_blocks);
        struct kv_layer L = {.dtype = dts[d], .n_kv_heads = n_kv, .head_dim = hd, .kv_block_tokens = bs, .n_blocks = max_blocks};
        for (int h = 0; h < n_kv; h++) { L.k_scale[h] = 0.5f; L.v_scale[h] = 0.25f; }
        size_t bytes = (size_t)max_blocks * n_kv * bs * hd * dtype_size(dts[d]), row = (size_t)n_kv * G * hd;
        L.k = gpu->ops->alloc(gpu, bytes);
        L.v = gpu->ops->alloc(gpu, bytes);
        float *k = rand_vec((size_t)ctx * n_kv * hd, 3.0f), *v = rand_vec((size_t)ctx * n_kv * hd, 2.0f), *q = rand_vec(ctx * row, 1.0f);
        void *dk = to_dev(gpu, k, (size_t)ctx * n_kv * hd), *dv = to_dev(gpu, v, (size_t)ctx * n_kv * hd);
        void *dq = to_dev(gpu, q, ctx * row), *dout = gpu->ops->alloc(gpu, ctx * row * 4), *d1 = gpu->ops->alloc(gpu, row * 4);
        struct attn_params ap = {n_kv * G, 1.0f / sqrtf((float)hd), ATTN_FP8_EXACT, 0, 0.0f};
        gpu->ops->batch_begin(gpu, &t->b);
        gpu->ops->kv_write(gpu, &L, dk, dv, &t->b);
        gpu->ops->attention(gpu, dout, dq, &L, &ap, &t->b);
        float *pre = to_host(gpu, dout, ctx * row);
        const int at[5] = {0, 15, 16, 300, ctx - 1};
        double worst = 0, num = 0, den = 0;
        for (int i = 0; i < 5; i++) {
            struct tb *u = malloc(sizeof *u);
            int one[1] = {1}, c1[1] = {at[i] + 1};
            make_batch(u, 1, one, c1, bs, max_blocks);  // the same block table
            void *dq1 = to_dev(gpu, q + (size_t)at[i] * row, row);
            gpu->ops->batch_begin(gpu, &u->b);
            gpu->ops->attention(gpu, d1, dq1, &L, &ap, &u->b);
            float *dec = to_host(gpu, d1, row);
            for (size_t j = 0; j < row; j++) {
                double a = dec[j], b = pre[(size_t)at[i] * row + j];
                worst = fmax(worst, fabs(a - b));
                num += (a - b) * (a - b);
                den += b * b;
            }
            free(dec);
            gpu->ops->free(gpu, dq1);
            free(u);
        }
        CHECK_OK(gpu->ops->sync(gpu));
        char name[128];
        if (ident) {
            snprintf(name, sizeof name, "prefill vs decode rows %s (identity mode), max |diff|", dtype_name(dts[d]));
            record(name, worst, 0, NULL);
        } else {
            snprintf(name, sizeof name, "prefill vs decode rows %s (default kernels)", dtype_name(dts[d]));
            record(name, den > 0 ? num / den : num, dts[d] == DT_BF16 ? 1e-3 : 5e-2, NULL);
        }
        gpu->ops->free(gpu, dk); gpu->ops->free(gpu, dv); gpu->ops->free(gpu, dq); gpu->ops->free(gpu, dout);
        gpu->ops->free(gpu, d1); gpu->ops->free(gpu, L.k); gpu->ops->free(gpu, L.v);
        free(k); free(v); free(q); free(pre); free(t);
    }
}

TEST(prefill_decode_identity) { prefill_decode_identity_run(); }

// The sublayer ops (attn_in, proj_add, ffn_in) at Llama-3.1-8B's shapes. A run on one backend with
// its table's ops (compose 0: the GPU's fused launches for n <= 8) or with backend.c's composition
// of its primitive ops (compose 1); a BF16 cache takes attn_in's K and V.
struct sublayer_out { float *q, *k, *v, *x, *act, *gate; };
static void sublayer_run(struct backend *b, int compose, struct weight *w /*[7] wq wk wv wo wg wu wn*/, const float *x,
                         const float *in, struct tb *t, const struct rope_table *rt, bool keep_gate, struct sublayer_out *o) {
    const int n = t->b.n_tokens, dim = (int)w[0].cols, qd = (int)w[0].rows, kvd = (int)w[1].rows, ffn = (int)w[4].rows;
    const int hd = 128, bs = 16, mb = 64;
    struct kv_layer L = {.dtype = DT_BF16, .n_kv_heads = kvd / hd, .head_dim = hd, .kv_block_tokens = bs, .n_blocks = mb * 8};
    for (int h = 0; h < L.n_kv_heads; h++) L.k_scale[h] = L.v_scale[h] = 1.0f;
    size_t bytes = (size_t)L.n_blocks * kvd * bs * dtype_size(L.dtype);
    L.k = b->ops->alloc(b, bytes);
    L.v = b->ops->alloc(b, bytes);
    void *dx = to_dev(b, x, (size_t)n * dim), *din = to_dev(b, in, (size_t)n * dim), *xn = b->ops->alloc(b, (size_t)n * dim * 4);
    void *q = b->ops->alloc(b, (size_t)n * qd * 4), *k = b->ops->alloc(b, (size_t)n * kvd * 4), *v = b->ops->alloc(b, (size_t)n * kvd * 4);
    void *g = b->ops->alloc(b, (size_t)n * ffn * 4), *act = b->ops->alloc(b, (size_t)n * ffn * 4), *sc = b->ops->alloc(b, (size_t)n * dim * 4);
    CHECK_OK(b->ops->batch_begin(b, &t->b));
    const struct attn_in_args ai = {q, k, v, xn, dx, &w[6], &w[0], &w[1], &w[2], 1e-5f, qd / hd, rt, &L};
    const struct ffn_in_args fi = {act, g, xn, dx, &w[6], &w[4], &w[5], 1e-5f, keep_gate, NULL};
    if (compose) {
        backend_attn_in(b, &ai, &t->b);
        backend_ffn_in(b, &fi, n);
        backend_proj_add(b, dx, sc, din, &w[3], n);
    } else {
        b->ops->attn_in(b, &ai, &t->b);
        b->ops->ffn_in(b, &fi, n);
        b->ops->proj_add(b, dx, sc, din, &w[3], n);
    }
    o->q = to_host(b, q, (size_t)n * qd);
    o->k = to_host(b, k, (size_t)n * kvd);
    o->v = to_host(b, v, (size_t)n * kvd);
    o->x = to_host(b, dx, (size_t)n * dim);
    o->act = to_host(b, act, (size_t)n * ffn);
    o->gate = to_host(b, g, (size_t)n * ffn);
    CHECK_OK(b->ops->sync(b));
    void *bufs[] = {dx, din, xn, q, k, v, g, act, sc, L.k, L.v};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) b->ops->free(b, bufs[i]);
}
static void sublayer_free(struct sublayer_out *o) { free(o->q); free(o->k); free(o->v); free(o->x); free(o->act); free(o->gate); }

// The GPU's sublayer ops (one launch each for n <= 8: the norm inside the skinny GEMM at n = 1, 4
// and 5; at 6, 7 and 8 the rows are too wide for its shared memory and k_rmsnorm runs first; n = 37
// composes them) vs the CPU's (NMSE); proj_add and Q vs the GPU's composition bit for bit (the same
// values rounded alike; K and V of 1024 rows take the plain GEMM's 2 warps a row there, so they are
// compared with the CPU only, and attn_in_case checks them at 4096 rows); ffn_in by NMSE (the fused
// SwiGLU scales its sums by the norm — cuda_gemv.cuh DEFER — instead of rounding the normalised x);
// with keep_gate (the probe), the gate's pre-activation vs the CPU's.
static void fused_case(int n) {
    const int dim = 4096, ffn = 14336, kvd = 1024;
    struct weight w0[7] = {make_weight(dim, dim, 0.03f), make_weight(kvd, dim, 0.03f), make_weight(kvd, dim, 0.03f),
                           make_weight(dim, dim, 0.03f), make_weight(ffn, dim, 0.03f), make_weight(ffn, dim, 0.03f),
                           make_weight(1, dim, 1.0f)};
    struct weight w[2][7];
    struct backend *bs[2] = {cpu, gpu};
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 7; k++) { w[i][k] = w0[k]; w[i][k].dev = NULL; CHECK_OK(bs[i]->ops->weight_upload(bs[i], &w[i][k])); }
    struct rope_config rc = {.theta = 500000, .n_rot = 128, .scaling = ROPE_SCALING_LLAMA3, .factor = 8, .orig_max_pos = 8192,
                             .low_freq_factor = 1, .high_freq_factor = 4};
    struct rope_table rt;
    rope_table_init(&rt, &rc);
    struct tb *t = malloc(sizeof *t);
    int nq[8], ctx[8];
    const int n_seqs = n <= 8 ? n : 1;
    for (int s = 0; s < n_seqs; s++) { nq[s] = n <= 8 ? 1 : n; ctx[s] = 300 + 97 * s + nq[s]; }
    make_batch(t, n_seqs, nq, ctx, 16, 64);
    float *x = rand_vec((size_t)n * dim, 2.0f), *in = rand_vec((size_t)n * dim, 1.0f);
    struct sublayer_out c, g, gc, gk;
    sublayer_run(cpu, 0, w[0], x, in, t, &rt, true, &c);
    sublayer_run(gpu, 0, w[1], x, in, t, &rt, false, &g);
    sublayer_run(gpu, 1, w[1], x, in, t, &rt, false, &gc);
    sublayer_run(gpu, 0, w[1], x, in, t, &rt, true, &gk);
    char name[128];
    snprintf(name, sizeof name, "attn_in [%d x %d] -> q, k, v [%d|%d|%d] vs cpu", n, dim, dim, kvd, kvd);
    record(name, fmax(nmse(g.q, c.q, (size_t)n * dim), fmax(nmse(g.k, c.k, (size_t)n * kvd), nmse(g.v, c.v, (size_t)n * kvd))), 1e-4,
           NULL);
    snprintf(name, sizeof name, "proj_add [%d x %d] vs cpu", n, dim);
    record(name, nmse(g.x, c.x, (size_t)n * dim), 1e-4, NULL);
    snprintf(name, sizeof name, "ffn_in [%d x %d] vs cpu", n, ffn);
    record(name, nmse(g.act, c.act, (size_t)n * ffn), 1e-4, NULL);
    snprintf(name, sizeof name, "ffn_in [%d x %d] keep_gate: the gate's pre-activation vs cpu", n, ffn);
    record(name, nmse(gk.gate, c.gate, (size_t)n * ffn) + nmse(gk.act, c.act, (size_t)n * ffn), 1e-4, NULL);
    double d = 0;
    for (size_t i = 0; i < (size_t)n * dim; i++) d = fmax(d, fmax(fabs((double)g.x[i] - gc.x[i]), fabs((double)g.q[i] - gc.q[i])));
    snprintf(name, sizeof name, "gpu proj_add and attn_in's q = the composition's, n=%d, max |diff|", n);
    record(name, d, 0, NULL);
    snprintf(name, sizeof name, "gpu ffn_in vs the composition's, n=%d", n);
    record(name, nmse(g.act, gc.act, (size_t)n * ffn), n <= 8 ? 5e-5 : 0, NULL);
    sublayer_free(&c); sublayer_free(&g); sublayer_free(&gc); sublayer_free(&gk);
    for (int i = 0; i < 2; i++) for (int k = 0; k < 7; k++) bs[i]->ops->weight_release(bs[i], &w[i][k]);
    for (int k = 0; k < 7; k++) free((void *)w0[k].data);
    free(x); free(in); free(t);
}
TEST(fused_projections) {
    for (int n = 1; n <= 8; n++)
        if (n != 2 && n != 3) fused_case(n);
    fused_case(37);
}

// rmsnorm at row widths of every path: 16-byte runs with few threads (64: stories260K), one
// run a thread (4096 above), two (8192), the strided loop (100: not whole runs; 20000: past
// 16384); in place at 8192, as the final norm runs.
TEST(rmsnorm_shapes) {
    const int dims[4] = {64, 100, 8192, 20000}, n = 3;
    for (int k = 0; k < 4; k++) {
        int dim = dims[k];
        struct weight wn[2] = {make_weight(1, dim, 1.0f), make_weight(1, dim, 1.0f)};
        memcpy((void *)wn[1].data, wn[0].data, (size_t)dim * 2);
        float *x = rand_vec((size_t)n * dim, 2.0f), *res[2];
        struct backend *bs[2] = {cpu, gpu};
        for (int i = 0; i < 2; i++) {
            struct backend *b = bs[i];
            CHECK_OK(b->ops->weight_upload(b, &wn[i]));
            void *dx = to_dev(b, x, (size_t)n * dim), *o = dim == 8192 ? dx : b->ops->alloc(b, (size_t)n * dim * 4);
            b->ops->rmsnorm(b, o, dx, &wn[i], n, 1e-5f);
            res[i] = to_host(b, o, (size_t)n * dim);
            CHECK_OK(b->ops->sync(b));
            if (o != dx) b->ops->free(b, o);
            b->ops->free(b, dx);
            b->ops->weight_release(b, &wn[i]);
        }
        char name[64];
        snprintf(name, sizeof name, "rmsnorm [%d x %d]%s", n, dim, dim == 8192 ? " in place" : "");
        record(name, nmse(res[1], res[0], (size_t)n * dim), 1e-4, NULL);
        free(res[0]); free(res[1]); free(x); free((void *)wn[0].data); free((void *)wn[1].data);
    }
}

// attn_in on the GPU (decode steps: Q|K|V, RoPE and the cache write in the skinny GEMM's launch, or
// the products then RoPE and the cache write in one launch) vs backend.c's composition on the GPU
// (k_rmsnorm, the GEMMs, rope, rope, kv_write): q, k, v and both caches' bytes identical, for every
// cache type, full and partial RoPE (neox and interleaved pairs; a neox RoPE on part of head_dim
// is not fused), K offsets, n decode tokens of n sequences and a 37-token chunk. K and V have 4096
// rows, so that the composition's GEMM sums them in the fused launch's order.
// attn_in against the composition with given weights (w: wq [4096][1024], wk, wv [4096][1024], the norm's
// [1][1024], uploaded; the FP8-weight cases in cuda_ops_fp8w.h), out of a (dt) cache, for n tokens.
static void attn_in_case_w(enum dtype dt, int n_rot, bool neox, bool offsets, int n, struct weight w[4],
                           const char *what) {
    const int dim = 1024, hd = 128, nh = 32, nkv = 32, bs = 16, mb = 64, qd = nh * hd, kd = nkv * hd;
    struct tb *t = malloc(sizeof *t);
    int nq[8], ctx[8];
    const int n_seqs = n <= 8 ? n : 1;
    for (int s = 0; s < n_seqs; s++) { nq[s] = n <= 8 ? 1 : n; ctx[s] = 300 + 97 * s + nq[s]; }
    make_batch(t, n_seqs, nq, ctx, bs, mb);
    struct rope_config rc = {.theta = 500000, .n_rot = n_rot, .neox = neox, .scaling = ROPE_SCALING_LLAMA3, .factor = 8,
                             .orig_max_pos = 8192, .low_freq_factor = 1, .high_freq_factor = 4};
    struct rope_table rt;
    rope_table_init(&rt, &rc);
    float *x = rand_vec((size_t)n * dim, 2.0f), *ko = offsets ? rand_vec((size_t)kd, 1.0f) : NULL, *out[2][3];
    size_t bytes = (size_t)mb * n_seqs * kd * bs * dtype_size(dt);
    char *pages[2][2];
    CHECK_OK(gpu->ops->batch_begin(gpu, &t->b));
    for (int i = 0; i < 2; i++) {  // 0: the table's attn_in; 1: the composition
        struct kv_layer L = {.dtype = dt, .n_kv_heads = nkv, .head_dim = hd, .kv_block_tokens = bs, .n_blocks = mb * n_seqs};
        for (int h = 0; h < nkv; h++) { L.k_scale[h] = 0.5f + 0.25f * (h % 8); L.v_scale[h] = 0.125f * (h % 8 + 1); }
        L.k_offset = ko;
        L.k = gpu->ops->alloc(gpu, bytes), L.v = gpu->ops->alloc(gpu, bytes);
        char *zero = calloc(1, bytes);
        gpu->ops->upload(gpu, L.k, zero, bytes), gpu->ops->upload(gpu, L.v, zero, bytes), free(zero);
        void *dx = to_dev(gpu, x, (size_t)n * dim), *xn = gpu->ops->alloc(gpu, (size_t)n * dim * 4), *d[3];
        const int wd[3] = {qd, kd, kd};
        for (int k = 0; k < 3; k++) d[k] = gpu->ops->alloc(gpu, (size_t)n * wd[k] * 4);
        const struct attn_in_args a = {d[0], d[1], d[2], xn, dx, &w[3], &w[0], &w[1], &w[2], 1e-5f, nh, &rt, &L};
        if (i == 0) gpu->ops->attn_in(gpu, &a, &t->b);
        else backend_attn_in(gpu, &a, &t->b);
        for (int k = 0; k < 3; k++) out[i][k] = to_host(gpu, d[k], (size_t)n * wd[k]);
        for (int kv = 0; kv < 2; kv++) gpu->ops->download(gpu, pages[i][kv] = malloc(bytes), kv ? L.v : L.k, bytes);
        CHECK_OK(gpu->ops->sync(gpu));
        for (int k = 0; k < 3; k++) gpu->ops->free(gpu, d[k]);
        gpu->ops->free(gpu, dx); gpu->ops->free(gpu, xn); gpu->ops->free(gpu, L.k); gpu->ops->free(gpu, L.v);
    }
    char name[160];
    snprintf(name, sizeof name, "attn_in = the composition (%s%s, n_rot %d%s%s, n=%d)", what, dtype_name(dt), n_rot,
             neox ? " neox" : "", offsets ? ", K offsets" : "", n);
    int diff = 0;
    for (int k = 0; k < 3; k++) diff += memcmp(out[0][k], out[1][k], (size_t)n * (k ? kd : qd) * 4) != 0;
    diff += (memcmp(pages[0][0], pages[1][0], bytes) != 0) + (memcmp(pages[0][1], pages[1][1], bytes) != 0);
    record(name, diff, 0, NULL);
    for (int i = 0; i < 2; i++) { for (int k = 0; k < 3; k++) free(out[i][k]); free(pages[i][0]); free(pages[i][1]); }
    free(x); free(ko); free(t);
}
static void attn_in_case(enum dtype dt, int n_rot, bool neox, bool offsets, int n) {
    struct weight w[4] = {make_weight(4096, 1024, 0.05f), make_weight(4096, 1024, 0.05f), make_weight(4096, 1024, 0.05f),
                          make_weight(1, 1024, 1.0f)};
    for (int k = 0; k < 4; k++) CHECK_OK(gpu->ops->weight_upload(gpu, &w[k]));
    attn_in_case_w(dt, n_rot, neox, offsets, n, w, "");
    for (int k = 0; k < 4; k++) { gpu->ops->weight_release(gpu, &w[k]); free((void *)w[k].data); }
}
TEST(attn_in_fused) {
    const enum dtype dts[4] = {DT_BF16, DT_E4M3, DT_E5M2, DT_F32};
    for (int d = 0; d < 4; d++) {
        attn_in_case(dts[d], 128, false, false, 1);
        attn_in_case(dts[d], 64, true, false, 37);
    }
    attn_in_case(DT_BF16, 128, true, false, 1);
    attn_in_case(DT_E4M3, 128, true, true, 1);
    attn_in_case(DT_E4M3, 128, true, false, 8);
    attn_in_case(DT_E4M3, 128, true, true, 37);
    attn_in_case(DT_E5M2, 64, false, true, 4);
    attn_in_case(DT_E5M2, 96, false, true, 1);
    attn_in_case(DT_F32, 128, false, false, 3);
    attn_in_case(DT_E4M3, 64, true, false, 2);
    // 64 tokens and more: k_rope_kv_write's threads take 6 heads each (a group across the Q/K boundary, a
    // part group at the end)
    attn_in_case(DT_E4M3, 128, true, true, 100);
    attn_in_case(DT_BF16, 64, false, false, 70);
}

// Greedy ids on the device (asynchronous scheduling): each row's pick equals logits_argmax over
// the same backend's logits at the 8B vocabulary — a tie between two equal weight rows going to the
// lower index, a NaN logit never picked, a NaN at index 0 giving 0 — and a later batch's get_rows
// reads token -1-j as pick j.
static void get_rows_of(const int32_t *tok, int nt, const struct weight *table, float *out) {
    int32_t pos[4] = {0, 1, 2, 3}, qs[2] = {0, nt}, sl[1] = {nt}, bt0[1] = {0};
    struct batch b = {.n_tokens = nt, .token_ids = tok, .positions = pos, .slot_mapping = pos, .n_seqs = 1, .query_start = qs,
                      .seq_lens = sl, .block_tables = bt0, .max_blocks_per_seq = 1};
    void *d = gpu->ops->alloc(gpu, (size_t)nt * table->cols * 2);
    CHECK_OK(gpu->ops->batch_begin(gpu, &b));
    gpu->ops->get_rows(gpu, d, table, &b);
    gpu->ops->download_f32(gpu, out, d, (size_t)nt * table->cols);
    gpu->ops->free(gpu, d);
}
TEST(greedy_ids) {
    const int n = 5, dim = 256, V = 128256;
    struct weight w = make_weight(V, dim, 0.05f);
    float *x = rand_vec((size_t)n * dim, 1.0f), *lg = malloc((size_t)n * V * sizeof(float));
    uint16_t *h = (uint16_t *)w.data;
    for (int r = 0; r < n; r++)  // rows 7+r and 900+r equal x[r]: row r's largest logit, twice
        for (int k = 0; k < dim; k++) h[(size_t)(7 + r) * dim + k] = h[(size_t)(900 + r) * dim + k] = f32_to_bf16(x[r * dim + k]);
    h[(size_t)50 * dim] = 0x7fc0;  // a NaN weight: logit 50 is NaN in every row
    CHECK_OK(gpu->ops->weight_upload(gpu, &w));
    void *dx = to_dev(gpu, x, (size_t)n * dim);
    int32_t *ids = backend_host_alloc(gpu, (size_t)n * sizeof(int32_t));
    gpu->ops->logits(gpu, lg, dx, &w, n);
    gpu->ops->logits_argmax(gpu, ids, dx, &w, n);
    CHECK_OK(gpu->ops->wait_ids(gpu, ids));
    int bad = 0, tie = 0;
    for (int r = 0; r < n; r++) {
        bad += ids[r] != logits_argmax(lg + (size_t)r * V, V);
        tie += ids[r] == 7 + r;
    }
    record("greedy ids == logits_argmax, 5 rows of 128256 (ties, NaN): rows differing", bad, 0, NULL);
    record("greedy ids: the tie's lower index, rows not taking it", n - tie, 0, NULL);
    // the feed: tokens -1 and -3 are picks 0 and 2
    int32_t fed[3] = {-1, -3, 42}, named[3] = {ids[0], ids[2], 42};
    float *a = malloc(3 * dim * sizeof(float)), *b = malloc(3 * dim * sizeof(float));
    get_rows_of(fed, 3, &w, a);
    get_rows_of(named, 3, &w, b);
    record("get_rows of tokens -1-j == of the picks themselves", memcmp(a, b, 3 * dim * sizeof(float)) ? 1 : 0, 0, NULL);
    // a NaN logit at index 0: pick 0, as logits_argmax
    gpu->ops->weight_release(gpu, &w);
    h[0] = 0x7fc0;
    CHECK_OK(gpu->ops->weight_upload(gpu, &w));
    gpu->ops->logits_argmax(gpu, ids, dx, &w, n);
    CHECK_OK(gpu->ops->wait_ids(gpu, ids));
    int nz = 0;
    for (int r = 0; r < n; r++) nz += ids[r] != 0;
    record("greedy ids with logit 0 NaN: rows not picking 0", nz, 0, NULL);
    gpu->ops->weight_release(gpu, &w);
    backend_host_free(gpu, ids);
    gpu->ops->free(gpu, dx);
    free(a); free(b); free(x); free(lg); free((void *)w.data);
}

// Every entry of the attention kernel table, forced, on each of these shapes it fits, against the CPU;
// an entry that no shape reaches fails.
TEST(attention_table) {
    const enum dtype dts[3] = {DT_BF16, DT_E4M3, DT_E5M2};
    struct cuda_tuning saved, t;
    cuda_tuning_get(gpu, &saved);
    memset(kernel_cases, 0, sizeof kernel_cases);
    for (int e = 0; e < cuda_attention_kernel_count() && e < MAX_KERNELS; e++) {
        t = saved;
        t.attn_kernel = case_forced = cuda_attention_kernel_name(e);
        cuda_tuning_set(gpu, &t);
        for (int d = 0; d < 3; d++) {
            case_math = dts[d] == DT_E4M3 ? ATTN_FP8_EMULATE : ATTN_FP8_EXACT;
            case_bound = dts[d] == DT_E4M3 ? WGMMA_BOUND : 2e-5;
            int q1[3] = {1, 1, 1}, c1[3] = {1, 777, 5000}, q4[2] = {300, 1}, c4[2] = {500, 900}, c7[1] = {700};
            attention_case("table decode hd128 G4 B3", dts[d], 128, 8, 4, 0, 3, q1, c1);
            // one sequence of a few splits: decode_t combines them in its last CTA (the fused combine)
            attention_case("table decode hd128 G4 B1 700", dts[d], 128, 8, 4, 0, 1, q1, c7);
            attention_case("table decode hd64 G8 window 128", dts[d], 64, 8, 8, 128, 2, q1, c4);
            case_bs = 64;  // (CUDA's default block: 16-token sub-blocks, TMA boxes of a block)
            attention_case("table decode hd128 G4 B3 bs64", dts[d], 128, 8, 4, 0, 3, q1, c1);
            attention_case("table prefill+decode hd128 G4 bs64", dts[d], 128, 8, 4, 0, 2, q4, c4);
            case_bs = 16;
            attention_case("table decode hd256 G2", dts[d], 256, 4, 2, 0, 1, q1, c1 + 2);
            attention_case("table prefill+decode hd128 G4", dts[d], 128, 8, 4, 0, 2, q4, c4);
            attention_case("table prefill hd64 G8 window 128", dts[d], 64, 8, 8, 128, 2, q4, c4);
            attention_case("table prefill hd256 G2", dts[d], 256, 4, 2, 0, 2, q4, c4);
            attention_case("table prefill hd96 G4", dts[d], 96, 2, 4, 0, 2, q4, c4);
        }
    }
    cuda_tuning_set(gpu, &saved);
    case_forced = NULL;
    case_math = ATTN_FP8_EXACT;
    case_bound = 2e-5;
    for (int e = 0; e < cuda_attention_kernel_count() && e < MAX_KERNELS; e++) {
        char name[96];
        snprintf(name, sizeof name, "attention table: %s checked on a shape it fits (cases: %d)",
                 cuda_attention_kernel_name(e), kernel_cases[e]);
        record(name, kernel_cases[e] > 0 ? 0.0 : 1.0, 0, NULL);
    }
}

// An f16 cache (which attention_table's dtypes leave out) through the entries the table picks for
// it: prefill steps take the 16-bit wgmma prefill (prefill_bf16_tma) at head_dim 64 / 128 / 256,
// chunked (queries against a cached prefix), beside a decode row, windowed, in 16- and 64-token
// blocks; each against the CPU.
TEST(f16_cache_prefill) {
    int e = -1;
    for (int i = 0; i < cuda_attention_kernel_count() && i < MAX_KERNELS; i++)
        if (!strcmp(cuda_attention_kernel_name(i), "prefill_bf16_tma")) e = i;
    CHECK(e >= 0);
    if (e < 0) return;
    const int before = kernel_cases[e];
    int q4[2] = {300, 1}, c4[2] = {500, 900}, q7[1] = {700}, c7[1] = {700};
    case_bs = 64;
    attention_case("f16 prefill+decode hd128 G4 bs64", DT_F16, 128, 8, 4, 0, 2, q4, c4);
    attention_case("f16 prefill hd64 G8 window 128 bs64", DT_F16, 64, 8, 8, 128, 1, q7, c7);
    attention_case("f16 prefill+decode hd256 G2 bs64", DT_F16, 256, 4, 2, 0, 2, q4, c4);
    case_bs = 16;
    attention_case("f16 prefill+decode hd128 G3", DT_F16, 128, 4, 3, 0, 2, q4, c4);
    char name[96];
    snprintf(name, sizeof name, "f16 prefill on prefill_bf16_tma (cases: %d of 4)", kernel_cases[e] - before);
    record(name, kernel_cases[e] - before == 4 ? 0.0 : 1.0, 0, NULL);
}

// The batch-invariant mode (--batch-invariant): GEMM rows and attention rows independent of the
// step's batch, bit for bit.
TEST(batch_invariant_mode) {
    gpu->batch_invariant = true;
    rows_invariant(1024);
    rows_invariant(4096);
    prefill_decode_identity_run();
    gpu->batch_invariant = false;
}

#include "cuda_ops_fp8w.h"
#include "cuda_ops_moe.h"  // moe_ffn

int main(int argc, char **argv) {
    cpu = backend_cpu_create(0);
    gpu = backend_cuda_create(0);
    if (!gpu) { fprintf(stderr, "%s\n", err_msg()); return 1; }
    gpu->enforce_eager = true;  // raw ops, no forward pass: nothing to capture
    report = json_array();
    // each test's random inputs seeded from its name, so that a TEST_ONLY run sees the same inputs
    // as the whole run (the outputs' hashes compare across runs: gpu_report.py same)
#define RUN_SEEDED(name) do { rng_seed(&rng, rng_hash_str(#name)); RUN(name); } while (0)
    RUN_SEEDED(elementwise_and_gemm);
    RUN_SEEDED(kv_write_and_attention);
    RUN_SEEDED(fp8_wgmma_prefill);
    RUN_SEEDED(fp8_prefill_unaligned_q);
    RUN_SEEDED(fp8_prefill_tiny_q);
    RUN_SEEDED(fp8_prefill_vt_pass);
    RUN_SEEDED(gemm_rows_invariant);
    RUN_SEEDED(prefill_decode_identity);
    RUN_SEEDED(attention_table);
    RUN_SEEDED(f16_cache_prefill);
    RUN_SEEDED(batch_invariant_mode);
    RUN_SEEDED(fused_projections);
    RUN_SEEDED(rmsnorm_shapes);
    RUN_SEEDED(attn_in_fused);
    RUN_SEEDED(greedy_ids);
    RUN_SEEDED(arch_ops);
    RUN_SEEDED(attention_softcap);
    RUN_SEEDED(attention_table_softcap);
    RUN_SEEDED(tok_scale_attention);
    RUN_SEEDED(attention_sinks);
    RUN_SEEDED(fp8_weight_matmul);
    RUN_SEEDED(fp8_weight_sublayers);
    RUN_SEEDED(fp8_weight_attn_in_rope);
    RUN_SEEDED(fp8_weight_batch_invariant);
    RUN_SEEDED(moe_ffn);
    if (argc > 1) json_dump_file(report, argv[1], JSON_INDENT(1));
    json_decref(report);
    gpu->ops->destroy(gpu);
    cpu->ops->destroy(cpu);
    return test_summary("cuda_ops");
}
