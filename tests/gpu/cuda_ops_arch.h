// cuda_ops_arch.h — test_cuda_ops.c's checks of what the architectures beyond Llama's need of the
// CUDA backend (owns: bias_add, act_mul, scale, the per-head q/k RMSNorm, RoPE with two tables and
// with dynamic NTK, and attention soft-capping on the entries the table picks and on every entry
// forced), each against the CPU backend. Included by test_cuda_ops.c only (after attention_case).
#ifndef OCTET_CUDA_OPS_ARCH_H
#define OCTET_CUDA_OPS_ARCH_H

// The ops on both backends on the same inputs: two sequences of 3 and 2 query tokens at contexts 100
// and 5000, so that dynamic NTK (max_pos 2048) rotates the second with a grown base and the first
// with the table's.
TEST(arch_ops) {
    const int n = 5, heads = 8, hd = 128, dim = heads * hd, ffn = 3000;
    struct tb t;
    int nq[2] = {3, 2}, ctx[2] = {100, 5000};
    make_batch(&t, 2, nq, ctx, 16, 320);
    struct backend *bs[2] = {cpu, gpu};
    struct weight bias = make_weight(1, dim, 2.0f), qn = make_weight(1, hd, 1.5f);
    struct weight wb[2] = {bias, bias}, wq[2] = {qn, qn};
    struct rope_config ra = {.theta = 10000, .n_rot = 128, .neox = true};
    struct rope_config rb = {.theta = 1e6, .n_rot = 128, .neox = true};
    // transformers' dynamic NTK, factor 4 past 2048 tokens
    struct rope_config rd = {.scaling = ROPE_SCALING_DYNAMIC, .theta = 10000, .factor = 4, .dyn_max_pos = 2048,
                             .n_rot = 128, .neox = true};
    struct rope_table ta, tbl, td;
    rope_table_init(&ta, &ra);
    rope_table_init(&tbl, &rb);
    rope_table_init(&td, &rd);
    CHECK(td.dyn_max_pos == 2048);
    float *x = rand_vec((size_t)n * dim, 3.0f), *g = rand_vec((size_t)n * ffn, 4.0f);
    float *u = rand_vec((size_t)n * ffn, 2.0f);
    enum { N_RES = 8 };
    float *res[2][N_RES];
    for (int i = 0; i < 2; i++) {
        struct backend *b = bs[i];
        wb[i].dev = wq[i].dev = NULL;
        CHECK_OK(b->ops->weight_upload(b, &wb[i]));
        CHECK_OK(b->ops->weight_upload(b, &wq[i]));
        CHECK_OK(b->ops->batch_begin(b, &t.b));
        void *dx = to_dev(b, x, (size_t)n * dim), *dg = to_dev(b, g, (size_t)n * ffn);
        void *du = to_dev(b, u, (size_t)n * ffn);
        void *o = b->ops->alloc(b, (size_t)n * ffn * 4);
        b->ops->bias_add(b, dx, &wb[i], n);
        res[i][0] = to_host(b, dx, (size_t)n * dim);
        for (int a = 0; a < 3; a++) {  // FFN_ACT_SILU, FFN_ACT_GELU_TANH, FFN_ACT_GELU
            b->ops->act_mul(b, o, dg, du, (int64_t)n * ffn, (enum ffn_act)a);
            res[i][1 + a] = to_host(b, o, (size_t)n * ffn);
        }
        b->ops->scale(b, dx, (int64_t)n * dim, 32.0f);  // (Gemma's sqrt(hidden) at 1024)
        res[i][4] = to_host(b, dx, (size_t)n * dim);
        b->ops->rmsnorm(b, o, dx, &wq[i], n * heads, 1e-6f);  // per head: [n·heads][hd]
        res[i][5] = to_host(b, o, (size_t)n * dim);
        // two tables in turn, as a model with a local RoPE for its sliding layers runs them
        b->ops->rope(b, o, heads, hd, &ta, &t.b);
        b->ops->rope(b, o, heads, hd, &tbl, &t.b);
        b->ops->rope(b, o, heads, hd, &ta, &t.b);
        res[i][6] = to_host(b, o, (size_t)n * dim);
        b->ops->rope(b, dx, heads, hd, &td, &t.b);
        res[i][7] = to_host(b, dx, (size_t)n * dim);
        CHECK_OK(b->ops->sync(b));
        b->ops->free(b, dx); b->ops->free(b, dg); b->ops->free(b, du); b->ops->free(b, o);
        if (b == gpu) { gpu->ops->weight_release(gpu, &wb[i]); gpu->ops->weight_release(gpu, &wq[i]); }
    }
    static const char *names[N_RES] = {"bias_add [5 x 1024]",
                                       "act_mul silu [5 x 3000]",
                                       "act_mul gelu_tanh [5 x 3000]",
                                       "act_mul gelu (erf) [5 x 3000]",
                                       "scale x32 [5 x 1024]",
                                       "rmsnorm per head [40 x 128] (q/k norm)",
                                       "rope two tables in turn (theta 1e4, 1e6)",
                                       "rope dynamic NTK (contexts 100, 5000 of 2048)"};
    for (int k = 0; k < N_RES; k++) {
        const size_t len = k >= 1 && k <= 3 ? (size_t)n * ffn : (size_t)n * dim;
        record(names[k], nmse(res[1][k], res[0][k], len), 1e-4, NULL);
    }
    // the grown base changes the second sequence's rotation: a backend that ignored it would differ
    float *plain = NULL;
    {
        void *dx = to_dev(cpu, x, (size_t)n * dim);
        cpu->ops->batch_begin(cpu, &t.b);
        cpu->ops->bias_add(cpu, dx, &wb[0], n);
        cpu->ops->scale(cpu, dx, (int64_t)n * dim, 32.0f);
        cpu->ops->rope(cpu, dx, heads, hd, &ta, &t.b);
        plain = to_host(cpu, dx, (size_t)n * dim);
        cpu->ops->free(cpu, dx);
    }
    const size_t tail = (size_t)3 * dim;  // (tokens 3 and 4: the 5000-token sequence)
    record("rope dynamic NTK differs from the table's past max_pos",
           nmse(plain + tail, res[0][7] + tail, (size_t)2 * dim) > 1e-3 ? 0.0 : 1.0, 0, NULL);
    free(plain);
    for (int i = 0; i < 2; i++) for (int k = 0; k < N_RES; k++) free(res[i][k]);
    free(x); free(g); free(u);
    free((void *)bias.data); free((void *)qn.data);
}

// Soft-capped attention (cap 1: scores of about ±1 bend hard, so a kernel that skipped the cap would
// be far outside the bounds) on the shapes of the cases above, each through the entry the table
// picks: decode (decode_t at head_dim 64 / 128 / 256), e4m3 prefill (prefill_fp8_tma,
// prefill_fp8_wgmma at 256, in every accumulation mode), bf16 prefill (prefill_bf16_tma), e5m2
// prefill (prefill_mma, prefill_simt at 256) and the fixtures' small head dims (generic).
TEST(attention_softcap) {
    const enum dtype dts[3] = {DT_BF16, DT_E4M3, DT_E5M2};
    case_softcap = 1.0f;
    for (int d = 0; d < 3; d++) {
        const bool wg = dts[d] == DT_E4M3;
        int q1[3] = {1, 1, 1}, c1[3] = {1, 777, 5000}, q2[2] = {1, 1}, c2[2] = {5000, 33};
        int q4[2] = {300, 1}, c4[2] = {500, 900}, q5[2] = {40, 1}, c5[2] = {100, 300};
        attention_case("softcap decode hd128 G4 B3", dts[d], 128, 8, 4, 0, 3, q1, c1);
        attention_case("softcap decode hd64 G8 window 128", dts[d], 64, 8, 8, 128, 2, q2, c2);
        attention_case("softcap decode hd256 G2 window 512", dts[d], 256, 4, 2, 512, 2, q2, c2);
        case_math = wg ? ATTN_FP8_EMULATE : ATTN_FP8_EXACT;
        case_bound = wg ? WGMMA_BOUND : 2e-5;
        case_bs = 64;
        attention_case("softcap prefill+decode hd128 G4 bs64", dts[d], 128, 8, 4, 0, 2, q4, c4);
        attention_case("softcap prefill+decode hd256 G2 bs64", dts[d], 256, 4, 2, 0, 2, q4, c4);
        case_bs = 16;
        attention_case("softcap prefill hd64 G8 window 128", dts[d], 64, 8, 8, 128, 2, q4, c4);
        attention_case("softcap prefill hd256 G2 window 512", dts[d], 256, 4, 2, 512, 2, q4, c4);
        case_acc = 4;  // every:4 and single: the FP8 kernels cap the scores in every accumulation mode
        attention_case("softcap prefill+decode hd128 G4 every:4", dts[d], 128, 8, 4, 0, 2, q4, c4);
        case_bs = 64;
        attention_case("softcap prefill hd256 G2 bs64 every:4", dts[d], 256, 4, 2, 0, 2, q4, c4);
        case_acc = -1;
        attention_case("softcap prefill hd256 G2 bs64 single", dts[d], 256, 4, 2, 0, 2, q4, c4);
        case_bs = 16;
        attention_case("softcap prefill+decode hd64 G8 single", dts[d], 64, 8, 8, 0, 2, q4, c4);
        case_acc = 0;
        case_math = ATTN_FP8_EXACT;
        case_bound = 2e-5;
        attention_case("softcap generic hd32 G2 window 8 (gemma2 fixture)", dts[d], 32, 2, 2, 8, 2, q5, c5);
        attention_case("softcap generic hd96 G4", dts[d], 96, 2, 4, 0, 2, q5, c5);
    }
    case_softcap = 0.0f;
}

// Every entry of the kernel table forced on soft-capped shapes: each entry must take at least one
// (an entry named in no_softcap would not honour the cap, and the table would pass it over).
TEST(attention_table_softcap) {
    static const char *const no_softcap[] = {NULL};
    const enum dtype dts[3] = {DT_BF16, DT_E4M3, DT_E5M2};
    struct cuda_tuning saved, t;
    cuda_tuning_get(gpu, &saved);
    int before[MAX_KERNELS];
    memcpy(before, kernel_cases, sizeof before);
    case_softcap = 1.0f;
    for (int e = 0; e < cuda_attention_kernel_count() && e < MAX_KERNELS; e++) {
        t = saved;
        t.attn_kernel = case_forced = cuda_attention_kernel_name(e);
        cuda_tuning_set(gpu, &t);
        for (int d = 0; d < 3; d++) {
            case_math = dts[d] == DT_E4M3 ? ATTN_FP8_EMULATE : ATTN_FP8_EXACT;
            case_bound = dts[d] == DT_E4M3 ? WGMMA_BOUND : 2e-5;
            int q1[3] = {1, 1, 1}, c1[3] = {1, 777, 5000}, q4[2] = {300, 1}, c4[2] = {500, 900};
            attention_case("softcap table decode hd128 G4 B3", dts[d], 128, 8, 4, 0, 3, q1, c1);
            attention_case("softcap table decode hd256 G2", dts[d], 256, 4, 2, 0, 1, q1, c1 + 2);
            case_bs = 64;
            attention_case("softcap table prefill+decode hd128 G4 bs64", dts[d], 128, 8, 4, 0, 2, q4, c4);
            case_bs = 16;
            attention_case("softcap table prefill hd256 G2", dts[d], 256, 4, 2, 0, 2, q4, c4);
            attention_case("softcap table prefill hd64 G8 window 128", dts[d], 64, 8, 8, 128, 2, q4, c4);
        }
    }
    cuda_tuning_set(gpu, &saved);
    case_forced = NULL;
    case_softcap = 0.0f;
    case_math = ATTN_FP8_EXACT;
    case_bound = 2e-5;
    for (int e = 0; e < cuda_attention_kernel_count() && e < MAX_KERNELS; e++) {
        const char *nm = cuda_attention_kernel_name(e);
        bool capable = true;
        for (size_t k = 0; no_softcap[k]; k++) capable &= strcmp(nm, no_softcap[k]) != 0;
        const int n = kernel_cases[e] - before[e];
        char name[128];
        snprintf(name, sizeof name, "attention table: %s soft-capped on a shape it fits (cases: %d)%s", nm, n,
                 capable ? "" : ", passed over");
        record(name, capable ? (n > 0 ? 0.0 : 1.0) : (n == 0 ? 0.0 : 1.0), 0, NULL);
    }
}

#endif
