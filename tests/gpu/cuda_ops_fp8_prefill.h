// cuda_ops_fp8_prefill.h — test_cuda_ops.c's FP8 wgmma prefill tests against the CPU's FP8 emulation
// (lengths, head dims, windows, GQA, block sizes, unaligned q, tiny q, the Vᵀ pass), in each accumulation mode.
// Included by test_cuda_ops.c after attention_case and its case_* settings, which these tests drive.
#pragma once

// the accumulation modes the FP8 prefill tests run
static const int accs[3] = {0, 4, ATTN_ACC_SINGLE};
static const char *const acc_names[3] = {"two-level", "every:4", "single"};

// A chunked FP8 prefill (200 and 77 new tokens after 8192 and 3000 cached) at head dims 128 (G4),
// 64 (G8) and 256 (G2); what goes into the labels before the accumulation mode.
static void chunked_head_dims(const char *what, const char *acc_name) {
    int qb[2] = {200, 77}, cb[2] = {8192, 3000};
    static const int hds[3] = {128, 64, 256}, gs[3] = {4, 8, 2}, kvs[3] = {8, 8, 4};
    for (int i = 0; i < 3; i++) {
        char label[128];
        snprintf(label, sizeof label, "wgmma chunked prefill hd%d G%d L8192%s %s", hds[i], gs[i], what, acc_name);
        attention_case(label, DT_E4M3, hds[i], kvs[i], gs[i], 0, 2, qb, cb);
    }
}

// chunked_head_dims in each accumulation mode against the CPU's FP8 emulation (then the defaults back)
static void chunked_every_mode(const char *what) {
    case_math = ATTN_FP8_EMULATE;
    case_bound = WGMMA_BOUND;
    for (int a = 0; a < 3; a++) {
        case_acc = accs[a];
        chunked_head_dims(what, acc_names[a]);
    }
    case_acc = 0;
    case_math = ATTN_FP8_EXACT;
    case_bound = 2e-5;
}

// FP8 wgmma prefill against the CPU's FP8 emulation: lengths, head dims, windows, GQA
// groups and each accumulation mode (every mode must stay close at these lengths).
TEST(fp8_wgmma_prefill) {
    case_math = ATTN_FP8_EMULATE;
    case_bound = WGMMA_BOUND;
    for (int a = 0; a < 3; a++) {
        case_acc = accs[a];
        char label[128];
        int qa[1] = {1024}, ca[1] = {1024};
        snprintf(label, sizeof label, "wgmma prefill hd128 G4 L1024 %s", acc_names[a]);
        attention_case(label, DT_E4M3, 128, 8, 4, 0, 1, qa, ca);
        chunked_head_dims("", acc_names[a]);
        int qb[2] = {200, 77}, cb[2] = {8192, 3000};
        snprintf(label, sizeof label, "wgmma chunked prefill hd128 G1 window 1000 %s", acc_names[a]);
        attention_case(label, DT_E4M3, 128, 4, 1, 1000, 2, qb, cb);
        int qc[1] = {64}, cc[1] = {32768};
        snprintf(label, sizeof label, "wgmma prefill tail hd128 G4 L32768 %s", acc_names[a]);
        attention_case(label, DT_E4M3, 128, 8, 4, 0, 1, qc, cc);
        // other block sizes: one TMA box a block (16 above); blocks larger than the 128-key tiles
        // give a tile part of a block
        static const int bss[5] = {8, 32, 64, 128, 256};
        for (int b = 0; b < 5; b++) {
            case_bs = bss[b];
            snprintf(label, sizeof label, "wgmma chunked prefill hd128 G4 L8192 bs%d %s", bss[b], acc_names[a]);
            attention_case(label, DT_E4M3, 128, 8, 4, 0, 2, qb, cb);
        }
        case_bs = 16;
    }
    case_acc = 0;
    case_math = ATTN_FP8_EXACT;
    case_bound = 2e-5;
}

// Q rows of amplitude 1e-37 (bf16 subnormals among them): a scale amax/448 whose reciprocal
// overflows, for which the Q quantisation (fp8pf::q_div) divides instead of multiplying by it.
TEST(fp8_prefill_tiny_q) {
    case_q_amp = 1e-37f;
    chunked_every_mode(" tiny q");
    case_q_amp = 1.0f;
}

// FP8 wgmma prefill whose V is transposed ahead of the kernel (cuda_prefill_vt.cuh; here for
// sequences of at least 512 query tokens, the defaults lowered for the CPU's sake) beside a sequence
// whose V the kernel transposes itself, in one batch: against the CPU's emulation at head dims 128
// (block sizes 16 and 256) and 64, in each mode.
TEST(fp8_prefill_vt_pass) {
    struct cuda_tuning saved, t;
    cuda_tuning_get(gpu, &saved);
    t = saved;
    t.fp8_vt_min_q = 512;
    t.fp8_vt_min_ctx = 1;
    cuda_tuning_set(gpu, &t);
    case_math = ATTN_FP8_EMULATE;
    case_bound = WGMMA_BOUND;
    int qs[3] = {520, 77, 1024}, cs[3] = {4096, 3000, 1024};
    static const int hds[3] = {128, 128, 64}, gs[3] = {4, 4, 8}, bss[3] = {16, 256, 16};
    for (int a = 0; a < 3; a++) {
        case_acc = accs[a];
        for (int i = 0; i < 3; i++) {
            char label[128];
            case_bs = bss[i];
            snprintf(label, sizeof label, "wgmma prefill Vt pass hd%d G%d bs%d %s", hds[i], gs[i], bss[i], acc_names[a]);
            attention_case(label, DT_E4M3, hds[i], 8, gs[i], 0, 3, qs, cs);
        }
    }
    case_bs = 16;
    case_acc = 0;
    case_math = ATTN_FP8_EXACT;
    case_bound = 2e-5;
    cuda_tuning_set(gpu, &saved);
}

// FP8 wgmma prefill with q off 16-byte alignment (its 2-byte Q loads; an aligned q takes 16-byte
// loads): close to the CPU's emulation, and the same bytes as the same q aligned, at head dims
// 128, 64 and 256 in each accumulation mode. (A test of its own, so that fp8_wgmma_prefill's
// inputs, and so its output hashes, stay those of the runs before it.)
TEST(fp8_prefill_unaligned_q) {
    case_q_shift = 1;
    chunked_every_mode(" unaligned q");
    case_q_shift = 0;
}
