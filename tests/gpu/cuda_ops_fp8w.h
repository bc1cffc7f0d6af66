// cuda_ops_fp8w.h — test_cuda_ops.c's FP8-weight cases (owns: fp8 test weights and the checks of
// every CUDA FP8-weight product against the CPU backend's reference, cpu_fp8w.c). Included by
// test_cuda_ops.c after its sublayer helpers.
// What must hold: the activation codes and scales are the CPU's (docs/fp8_weights.md), the fp8
// products exact, so the GPU's outputs differ from the CPU's by the order of f32 sums, the bf16 rounding
// of the output and, in cuBLASLt's outer-vector products with bf16 outputs, its fast accumulation (NMSE
// bound 2e-5 on bf16 outputs, about 4e-6 measured; 1e-6 on the f32 logits, whose sums stay promoted). Cases cover
// the skinny FP8 GEMM (n <= 8; grid.y groups of 8 under --batch-invariant) and cuBLASLt's FP8 GEMM
// (n > 8: outer-vector scales for tensor and channel weights, 128×128 block scaling for blocks), rows
// and columns that are not multiples of 16 or 128, e5m2 activations (the SwiGLU gate's), static
// activation scales that saturate some tokens, all-zero tokens, and the sublayer ops, whose FP8 prefill
// takes its codes from the kernels that write the activations (the norm, the SwiGLU epilogue): bit for
// bit the codes of the composition's separate quantization.
#ifndef OCTET_CUDA_OPS_FP8W_H
#define OCTET_CUDA_OPS_FP8W_H

#include "../../src/base/fp8.h"

// An fp8_e4m3 weight [rows][cols] of random values whose rows span two orders of magnitude, in one
// of the three scale schemes (block: 128×128), as quant_fp8.c makes them (scale = amax / 448).
struct fp8w_case { int rows, cols; enum wscale ws; bool e5m2; float static_scale; };
static struct weight make_fp8_weight(const struct fp8w_case *fc) {
    const int rows = fc->rows, cols = fc->cols, B = 128;
    float *f = malloc((size_t)rows * cols * sizeof(float));
    for (int r = 0; r < rows; r++) {
        const float amp = 0.002f * powf(100.0f, (float)((r * 37) % 101) / 100.0f);
        for (int c = 0; c < cols; c++) f[(size_t)r * cols + c] = (2 * rng_float(&rng) - 1) * amp;
    }
    struct weight w = {DT_E4M3, rows, cols, NULL, NULL, {0}, 0};
    w.fp8.wscale = fc->ws;
    w.fp8.block = fc->ws == WSCALE_BLOCK ? B : 0;
    w.fp8.act_e5m2 = fc->e5m2;
    w.fp8.ascale = fc->static_scale > 0 ? ASCALE_STATIC_TENSOR : ASCALE_DYNAMIC_TOKEN;
    w.fp8.input_scale = fc->static_scale;
    const int64_t ns = weight_fp8_n_scales(&w), nbc = (cols + B - 1) / B;
    float *s = calloc((size_t)ns, sizeof(float));
    uint8_t *q = malloc((size_t)rows * cols);
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {  // the group's amax, then the codes
            const int64_t si = fc->ws == WSCALE_TENSOR ? 0 : fc->ws == WSCALE_CHANNEL ? r : (r / B) * nbc + c / B;
            s[si] = fmaxf(s[si], fabsf(f[(size_t)r * cols + c]));
        }
    for (int64_t i = 0; i < ns; i++) s[i] = s[i] > 0 ? s[i] / FP8_E4M3_MAX : 1.0f;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            const int64_t si = fc->ws == WSCALE_TENSOR ? 0 : fc->ws == WSCALE_CHANNEL ? r : (r / B) * nbc + c / B;
            q[(size_t)r * cols + c] = fp8_e4m3_from_f32(f[(size_t)r * cols + c] / s[si]);
        }
    free(f);
    w.data = q;
    w.fp8.scale = s;
    return w;
}
static void free_fp8_weight(struct weight *w) { free((void *)w->data); free((void *)w->fp8.scale); }

// Tokens of x: random of amplitude 1..16 by row, token 2 (where present) all zero.
static float *fp8w_tokens(int n, int cols) {
    float *x = rand_vec((size_t)n * cols, 1.0f);
    for (int t = 0; t < n; t++)
        for (int c = 0; c < cols; c++) x[(size_t)t * cols + c] = bf16_to_f32(f32_to_bf16(x[(size_t)t * cols + c] * (float)(1 + t % 16)));
    if (n > 2) memset(x + 2 * (size_t)cols, 0, (size_t)cols * sizeof(float));
    return x;
}

static const char *wscale_name(enum wscale s) { return s == WSCALE_TENSOR ? "tensor" : s == WSCALE_CHANNEL ? "channel" : "block"; }

// matmul (bf16 out) and logits (f32 out) of one weight at n tokens, GPU vs CPU.
static void fp8w_matmul_case(const struct fp8w_case *fc, int n) {
    struct weight w0 = make_fp8_weight(fc), w[2] = {w0, w0};
    struct backend *bs[2] = {cpu, gpu};
    float *x = fp8w_tokens(n, fc->cols), *res[2], *lg[2];
    for (int i = 0; i < 2; i++) {
        struct backend *b = bs[i];
        CHECK_OK(b->ops->weight_upload(b, &w[i]));
        void *dx = to_dev(b, x, (size_t)n * fc->cols), *o = b->ops->alloc(b, (size_t)n * fc->rows * 4);
        b->ops->matmul(b, o, dx, &w[i], n);
        res[i] = to_host(b, o, (size_t)n * fc->rows);
        lg[i] = malloc((size_t)n * fc->rows * sizeof(float));
        b->ops->logits(b, lg[i], dx, &w[i], n);
        CHECK_OK(b->ops->sync(b));
        b->ops->free(b, dx); b->ops->free(b, o);
        b->ops->weight_release(b, &w[i]);
    }
    char name[160];
    snprintf(name, sizeof name, "fp8 matmul %s%s%s [%d x %d] x [%d x %d]^T", wscale_name(fc->ws), fc->e5m2 ? " e5m2-act" : "",
             fc->static_scale > 0 ? " static" : "", n, fc->cols, fc->rows, fc->cols);
    record(name, nmse(res[1], res[0], (size_t)n * fc->rows), 2e-5, NULL);
    snprintf(name, sizeof name, "fp8 logits f32 %s [%d x %d] x [%d x %d]^T", wscale_name(fc->ws), n, fc->cols, fc->rows, fc->cols);
    record(name, nmse(lg[1], lg[0], (size_t)n * fc->rows), 1e-6, NULL);
    for (int i = 0; i < 2; i++) { free(res[i]); free(lg[i]); }
    free(x);
    free_fp8_weight(&w0);
}

TEST(fp8_weight_matmul) {
    const enum wscale schemes[3] = {WSCALE_TENSOR, WSCALE_CHANNEL, WSCALE_BLOCK};
    const int ns[6] = {1, 3, 8, 9, 40, 300};
    for (int s = 0; s < 3; s++) {
        struct fp8w_case big = {1024, 4096, schemes[s], false, 0};
        for (int k = 0; k < 6; k++) fp8w_matmul_case(&big, ns[k]);
        struct fp8w_case odd = {200, 176, schemes[s], false, 0};  // 200 rows: a part tile; 176 columns: a part chunk
        fp8w_matmul_case(&odd, 5);
        fp8w_matmul_case(&odd, 24);
        struct fp8w_case ragged = {72, 100, schemes[s], false, 0};  // columns not a multiple of 16 (padded on the GPU)
        fp8w_matmul_case(&ragged, 2);
        fp8w_matmul_case(&ragged, 17);
    }
    // 5,616 columns at 8 tokens: the x̂ rows and the warps' totals take exactly 48 KB of dynamic shared
    // memory, which a kernel with static shared memory of its own gets only by opting in
    struct fp8w_case edge = {256, 5616, WSCALE_CHANNEL, false, 0};
    fp8w_matmul_case(&edge, 8);
    // 28,528 columns at 8 tokens: the x̂ rows and totals take exactly sm_90's opt-in maximum (227 KB), which
    // the kernel's static shared memory leaves no room for, so a CTA takes 7 tokens
    struct fp8w_case optin = {64, 28528, WSCALE_CHANNEL, false, 0};
    fp8w_matmul_case(&optin, 8);
    struct fp8w_case gate = {2048, 1024, WSCALE_CHANNEL, true, 0}, gate_blk = {2048, 1024, WSCALE_BLOCK, true, 0};
    fp8w_matmul_case(&gate, 4);
    fp8w_matmul_case(&gate, 33);
    fp8w_matmul_case(&gate_blk, 4);
    fp8w_matmul_case(&gate_blk, 33);
    // a static activation scale that tokens of amplitude > 0.02 · 448 ≈ 9 saturate
    struct fp8w_case stat = {512, 1024, WSCALE_CHANNEL, false, 0.02f}, stat_t = {512, 1024, WSCALE_TENSOR, false, 0.02f};
    fp8w_matmul_case(&stat, 6);
    fp8w_matmul_case(&stat, 20);
    fp8w_matmul_case(&stat_t, 20);
}

// The sublayer ops with FP8 projections (the gate's activations e5m2 where asked): decode steps (the
// skinny FP8 GEMM's ADD and SwiGLU launches) and a 37-token chunk (cuBLASLt). Against the GPU's own
// composition (backend.c: k_rmsnorm, the products, add, silu_mul) bit for bit: the fused launches
// round as the separate kernels do. Against the CPU by a looser NMSE: the GPU normalises x in bf16
// (its activation dtype) before quantizing it, so a value within bf16 rounding of an e4m3 rounding
// boundary (about 3 % of them) takes the neighbouring code, one step (2^-3 relative) away: about
// 5e-4 of NMSE, the size of the quantization's own error.
static void fp8w_sublayer_case(enum wscale ws, bool gate_e5m2, int n) {
    const int dim = 1024, qd = 1024, kvd = 256, ffn = 2816;
    struct fp8w_case shapes[6] = {{qd, dim, ws, false, 0}, {kvd, dim, ws, false, 0}, {kvd, dim, ws, false, 0},
                                  {dim, qd, ws, false, 0}, {ffn, dim, ws, gate_e5m2, 0}, {ffn, dim, ws, false, 0}};
    struct weight w0[7], w[2][7];
    for (int k = 0; k < 6; k++) w0[k] = make_fp8_weight(&shapes[k]);
    w0[6] = make_weight(1, dim, 1.0f);
    struct backend *bs[2] = {cpu, gpu};
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 7; k++) { w[i][k] = w0[k]; w[i][k].dev = NULL; CHECK_OK(bs[i]->ops->weight_upload(bs[i], &w[i][k])); }
    struct rope_config rc = {.theta = 10000, .n_rot = 128};
    struct rope_table rt;
    rope_table_init(&rt, &rc);
    struct tb *t = malloc(sizeof *t);
    int nq[8], ctx[8];
    const int n_seqs = n <= 8 ? n : 1;
    for (int s = 0; s < n_seqs; s++) { nq[s] = n <= 8 ? 1 : n; ctx[s] = 100 + 31 * s + nq[s]; }
    make_batch(t, n_seqs, nq, ctx, 16, 64);
    float *x = rand_vec((size_t)n * dim, 2.0f), *in = rand_vec((size_t)n * dim, 1.0f);
    struct sublayer_out c, g, gc;
    sublayer_run(cpu, 0, w[0], x, in, t, &rt, false, &c);
    sublayer_run(gpu, 0, w[1], x, in, t, &rt, false, &g);
    sublayer_run(gpu, 1, w[1], x, in, t, &rt, false, &gc);
    char name[160];
    snprintf(name, sizeof name, "fp8 %s attn_in, n=%d: q, k, v vs cpu", wscale_name(ws), n);
    record(name, fmax(nmse(g.q, c.q, (size_t)n * qd), fmax(nmse(g.k, c.k, (size_t)n * kvd), nmse(g.v, c.v, (size_t)n * kvd))),
           2e-3, NULL);
    snprintf(name, sizeof name, "fp8 %s proj_add, n=%d vs cpu", wscale_name(ws), n);
    record(name, nmse(g.x, c.x, (size_t)n * dim), 2e-5, NULL);
    snprintf(name, sizeof name, "fp8 %s ffn_in%s, n=%d vs cpu", wscale_name(ws), gate_e5m2 ? " (gate e5m2)" : "", n);
    record(name, nmse(g.act, c.act, (size_t)n * ffn), 2e-3, NULL);
    double d = 0;
    for (size_t i = 0; i < (size_t)n * dim; i++) d = fmax(d, fmax(fabs((double)g.x[i] - gc.x[i]), fabs((double)g.q[i] - gc.q[i])));
    for (size_t i = 0; n > 8 && i < (size_t)n * kvd; i++)  // (cuBLASLt: K and V from the norm's codes too)
        d = fmax(d, fmax(fabs((double)g.k[i] - gc.k[i]), fabs((double)g.v[i] - gc.v[i])));
    for (size_t i = 0; i < (size_t)n * ffn; i++) d = fmax(d, fabs((double)g.act[i] - gc.act[i]));
    snprintf(name, sizeof name, "fp8 %s gpu sublayer ops = the gpu composition's, n=%d, max |diff|", wscale_name(ws), n);
    record(name, d, 0, NULL);
    sublayer_free(&c); sublayer_free(&g); sublayer_free(&gc);
    for (int i = 0; i < 2; i++) for (int k = 0; k < 7; k++) bs[i]->ops->weight_release(bs[i], &w[i][k]);
    for (int k = 0; k < 6; k++) free_fp8_weight(&w0[k]);
    free((void *)w0[6].data);
    free(x); free(in); free(t);
}

// The FP8 prefill FFN on cuBLASLt (n > 8): ffn_in told its down projection (the norm writes xn's codes for
// gate and up, the SwiGLU epilogue act's for the down weight), then proj_add of act by the down weight,
// against the GPU's composition (k_rmsnorm, each product quantizing its input in k_fp8w_quant, silu_mul,
// the add) bit for bit: the producing kernels quantize exactly what the composition's kernels write. Against
// the CPU by NMSE (as fp8w_sublayer_case). Gate and up in different schemes (e5m2 gate) take two code slots;
// a down weight of another scale scheme its own codes. Only x is compared: told its reader, ffn_in may hand
// act to it as codes and leave act itself unwritten (ffn_in_args; fp8w_sublayer_case compares act).
static void fp8w_ffn_chain_case(enum wscale ws, bool gate_e5m2, enum wscale down_ws, int ffn, int n, int dim) {
    struct fp8w_case shapes[3] = {{ffn, dim, ws, gate_e5m2, 0}, {ffn, dim, ws, false, 0}, {dim, ffn, down_ws, false, 0}};
    struct weight w0[4], w[2][4];
    for (int k = 0; k < 3; k++) w0[k] = make_fp8_weight(&shapes[k]);
    w0[3] = make_weight(1, dim, 1.0f);
    struct backend *bs[2] = {cpu, gpu};
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 4; k++) { w[i][k] = w0[k]; w[i][k].dev = NULL; CHECK_OK(bs[i]->ops->weight_upload(bs[i], &w[i][k])); }
    float *x = rand_vec((size_t)n * dim, 2.0f), *out_x[3];
    for (int run = 0; run < 3; run++) {  // cpu, gpu ops, gpu composition
        struct backend *b = run ? gpu : cpu;
        struct weight *wb = w[run ? 1 : 0];
        void *dx = to_dev(b, x, (size_t)n * dim), *xn = b->ops->alloc(b, (size_t)n * dim * 4);
        void *g = b->ops->alloc(b, (size_t)n * ffn * 4), *act = b->ops->alloc(b, (size_t)n * ffn * 4);
        void *sc = b->ops->alloc(b, (size_t)n * dim * 4);
        const struct ffn_in_args fi = {act, g, xn, dx, &wb[3], &wb[0], &wb[1], 1e-5f, false, &wb[2]};
        if (run == 2) {
            backend_ffn_in(b, &fi, n);
            backend_proj_add(b, dx, sc, act, &wb[2], n);
        } else {
            b->ops->ffn_in(b, &fi, n);
            b->ops->proj_add(b, dx, sc, act, &wb[2], n);
        }
        out_x[run] = to_host(b, dx, (size_t)n * dim);
        CHECK_OK(b->ops->sync(b));
        void *bufs[] = {dx, xn, g, act, sc};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) b->ops->free(b, bufs[i]);
    }
    char name[200];
    snprintf(name, sizeof name, "fp8 %s ffn_in%s + down (%s) proj_add, dim %d, ffn %d, n=%d: x vs cpu",
             wscale_name(ws), gate_e5m2 ? " (gate e5m2)" : "", wscale_name(down_ws), dim, ffn, n);
    record(name, nmse(out_x[1], out_x[0], (size_t)n * dim), 2e-3, NULL);
    double d = 0;
    for (size_t i = 0; i < (size_t)n * dim; i++) d = fmax(d, fabs((double)out_x[1][i] - out_x[2][i]));
    snprintf(name, sizeof name, "fp8 %s ffn_in%s + down (%s) = the gpu composition's, dim %d, ffn %d, n=%d, max |diff|",
             wscale_name(ws), gate_e5m2 ? " (gate e5m2)" : "", wscale_name(down_ws), dim, ffn, n);
    record(name, d, 0, NULL);
    for (int run = 0; run < 3; run++) free(out_x[run]);
    for (int i = 0; i < 2; i++) for (int k = 0; k < 4; k++) bs[i]->ops->weight_release(bs[i], &w[i][k]);
    for (int k = 0; k < 3; k++) free_fp8_weight(&w0[k]);
    free((void *)w0[3].data);
    free(x);
}

TEST(fp8_weight_sublayers) {
    const int ns[4] = {1, 5, 8, 37};
    for (int k = 0; k < 4; k++) {
        fp8w_sublayer_case(WSCALE_CHANNEL, false, ns[k]);
        fp8w_sublayer_case(WSCALE_BLOCK, false, ns[k]);
    }
    fp8w_sublayer_case(WSCALE_CHANNEL, true, 3);
    fp8w_sublayer_case(WSCALE_CHANNEL, true, 37);
    fp8w_ffn_chain_case(WSCALE_CHANNEL, false, WSCALE_CHANNEL, 2816, 37, 1024);
    fp8w_ffn_chain_case(WSCALE_BLOCK, false, WSCALE_BLOCK, 2816, 300, 1024);
    fp8w_ffn_chain_case(WSCALE_CHANNEL, true, WSCALE_BLOCK, 2816, 45, 1024);
    fp8w_ffn_chain_case(WSCALE_TENSOR, false, WSCALE_CHANNEL, 2816, 9, 1024);
    // 24,576 columns of act: the SwiGLU epilogue's row of act takes exactly 48 KB of dynamic shared memory
    // (k_act_mul_fp8 has static shared memory too, so it must opt in)
    fp8w_ffn_chain_case(WSCALE_CHANNEL, false, WSCALE_CHANNEL, 24576, 9, 1024);
    // 116,224 columns: the row takes exactly sm_90's opt-in maximum (227 KB), which the kernel's static
    // shared memory leaves no room for, so act goes through memory instead of the shared row
    fp8w_ffn_chain_case(WSCALE_CHANNEL, false, WSCALE_CHANNEL, 116224, 9, 256);
}

// attn_in with FP8 weights for decode-sized steps: RoPE and the cache write in the skinny FP8 GEMM's
// Q|K|V epilogue (neox tiles of 8 pairs, interleaved pairs, block scales) against the composition
// (the products, then k_rope_kv_write): the same q, k, v and cache bytes. Partial rotary with neox
// pairs (n_rot 64 of 128) does not fit the epilogue and takes the composition itself.
TEST(fp8_weight_attn_in_rope) {
    const struct { enum wscale ws; enum dtype dt; int n_rot; bool neox, offsets; int n; } cs[] = {
        {WSCALE_CHANNEL, DT_BF16, 128, true, false, 1}, {WSCALE_BLOCK, DT_E4M3, 128, true, true, 8},
        {WSCALE_TENSOR, DT_E4M3, 128, false, false, 3}, {WSCALE_CHANNEL, DT_E5M2, 96, false, true, 5},
        {WSCALE_BLOCK, DT_BF16, 64, true, false, 2},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        struct fp8w_case fc = {4096, 1024, cs[i].ws, false, 0};
        struct weight w[4] = {make_fp8_weight(&fc), make_fp8_weight(&fc), make_fp8_weight(&fc), make_weight(1, 1024, 1.0f)};
        for (int k = 0; k < 4; k++) CHECK_OK(gpu->ops->weight_upload(gpu, &w[k]));
        char what[64];
        snprintf(what, sizeof what, "fp8 %s weights, ", wscale_name(cs[i].ws));
        attn_in_case_w(cs[i].dt, cs[i].n_rot, cs[i].neox, cs[i].offsets, cs[i].n, w, what);
        for (int k = 0; k < 4; k++) gpu->ops->weight_release(gpu, &w[k]);
        for (int k = 0; k < 3; k++) free_fp8_weight(&w[k]);
        free((void *)w[3].data);
    }
}

// --batch-invariant: a token's FP8 products are the same alone and inside a batch of any size
// (every n on the skinny FP8 GEMM, 8 tokens a CTA).
TEST(fp8_weight_batch_invariant) {
    const bool was = gpu->batch_invariant;
    gpu->batch_invariant = true;
    struct fp8w_case fc = {512, 2048, WSCALE_BLOCK, false, 0};
    struct weight w = make_fp8_weight(&fc);
    CHECK_OK(gpu->ops->weight_upload(gpu, &w));
    const int nbig = 45;
    float *x = fp8w_tokens(nbig, fc.cols);
    void *dx = to_dev(gpu, x, (size_t)nbig * fc.cols), *o = gpu->ops->alloc(gpu, (size_t)nbig * fc.rows * 4);
    gpu->ops->matmul(gpu, o, dx, &w, nbig);
    float *big = to_host(gpu, o, (size_t)nbig * fc.rows);
    double d = 0;
    for (int t = 0; t < nbig; t += 11) {
        void *x1 = to_dev(gpu, x + (size_t)t * fc.cols, (size_t)fc.cols);
        gpu->ops->matmul(gpu, o, x1, &w, 1);
        float *one = to_host(gpu, o, (size_t)fc.rows);
        for (int r = 0; r < fc.rows; r++) d = fmax(d, fabs((double)one[r] - big[(size_t)t * fc.rows + r]));
        free(one);
        gpu->ops->free(gpu, x1);
    }
    CHECK_OK(gpu->ops->sync(gpu));
    record("fp8 matmul --batch-invariant: token alone vs inside n=45, max |diff|", d, 0, NULL);
    gpu->ops->free(gpu, dx); gpu->ops->free(gpu, o);
    gpu->ops->weight_release(gpu, &w);
    free(big); free(x);
    free_fp8_weight(&w);
    gpu->batch_invariant = was;
}

#endif
