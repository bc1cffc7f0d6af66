// fp8_gemm_rate.cu — cuBLASLt's prefill GEMMs at Llama-3.1-8B's products (q|k|v, o, gate|up, down) for
// n = 2048 and 8192 tokens, in the forms octet's prefill can take: bf16 weights and activations; e4m3
// with a scale a weight row and a token (outer-vector scaling, `--quantization fp8`'s default), the same
// with cuBLASLt's fast accumulation, e4m3 with 128×128 weight blocks and 1×128 token blocks
// (`--quantization-block 128`), and plain per-tensor e4m3 with fast accumulation (the fastest FP8 GEMM
// there is, for reference). Layouts are cuda_fp8w.cuh's: W [rows][cols] row-major, x [n][cols], out
// [n][rows] bf16; block scales [ceil(rows/128)][kbp] for W (kbp = ceil(cols/128) rounded up to 4) and
// [cols/128][n] for x.
// Each (product, n, form) asks cuBLASLt's heuristic for up to 8 algorithms and times them all; it prints
// the heuristic's first choice (what octet runs) and the fastest. Before timing, every form's output is
// checked against a float64 CPU product of the same codes and scales on sampled (row, token) pairs: the
// printed error ("acc err") is the sampled outputs' RMS error over their RMS (bf16 output rounding alone
// gives about 2e-3), where fast accumulation shows its cost; "quant err" is the same against the product
// of the values the e4m3 codes were rounded from (uniform in [-400, 400)), the cost of FP8 itself.
// Prints a table, then one JSON object per line. A timed interval holds BURST launches back to back.
// Build: make CUDA=1 gpu-tests (build-cuda/gpu/fp8_gemm_rate); run: build-cuda/gpu/fp8_gemm_rate [reps]
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

typedef __nv_bfloat16 bf16;
#include "lab_util.cuh"

#define LT(x) do { cublasStatus_t s_ = (x); if (s_ != CUBLAS_STATUS_SUCCESS) { fprintf(stderr, "%s: %d\n", #x, (int)s_); exit(1); } } while (0)

enum form { F_BF16, F_CH, F_CH_FAST, F_BLK, F_TENSOR_FAST, N_FORMS };
static const char *form_name[N_FORMS] = {"bf16", "fp8 channel", "fp8 channel fast-acc", "fp8 128x128 blocks",
                                         "fp8 tensor fast-acc"};

// deterministic pseudo-random values on the device: uniform in [-1, 1) from (seed, i)
__host__ __device__ __forceinline__ float hrand(uint64_t seed, size_t i) {
    uint64_t z = seed + 0x9E3779B97F4A7C15ull * (i + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull; z = (z ^ (z >> 27)) * 0x94D049BB133111EBull; z ^= z >> 31;
    return (float)((z >> 40) * (1.0 / (1 << 23))) - 1.0f;
}
// codes of values spread over e4m3's range, and the bf16 values of the same size
__global__ void k_fill(uint8_t *q, bf16 *h, size_t count, uint64_t seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x) {
        const float v = hrand(seed, i);
        q[i] = (uint8_t)__nv_cvt_float_to_fp8(v * 400.0f, __NV_SATFINITE, __NV_E4M3);
        h[i] = __float2bfloat16_rn(v);
    }
}
__global__ void k_fill_scale(float *s, size_t count, uint64_t seed) {  // in [0.5, 1.5) · 2^-9
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x)
        s[i] = (1.0f + 0.5f * hrand(seed, i)) * (1.0f / 512);
}

static float e4m3_value(uint8_t c) {
    __half_raw h = __nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)c, __NV_E4M3);
    return __half2float(__half(h));
}
static float bf16_value(bf16 v) { return __bfloat162float(v); }

struct plan {
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, ld;
    std::vector<cublasLtMatmulHeuristicResult_t> algos;
};

// D[rows x n] (col-major) = op(A) · B with A = W as stored (col-major [cols x rows], transposed)
static plan make_plan(cublasLtHandle_t lt, form f, int rows, int cols, int n, const float *sa, const float *sb,
                      size_t ws_bytes) {
    plan p;
    const bool fp8 = f != F_BF16;
    const cudaDataType_t t = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    LT(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    LT(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    LT(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    LT(cublasLtMatrixLayoutCreate(&p.la, t, cols, rows, cols));
    LT(cublasLtMatrixLayoutCreate(&p.lb, t, cols, n, cols));
    LT(cublasLtMatrixLayoutCreate(&p.ld, CUDA_R_16BF, rows, n, rows));
    if (fp8) {
        int32_t ma = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F, mb = ma;
        if (f == F_CH || f == F_CH_FAST) ma = mb = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
        if (f == F_BLK) { ma = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F; mb = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F; }
        LT(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &ma, sizeof ma));
        LT(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mb, sizeof mb));
        LT(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof sa));
        LT(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof sb));
        const int8_t fast = f == F_CH_FAST || f == F_TENSOR_FAST;
        LT(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast));
    }
    cublasLtMatmulPreference_t pref;
    LT(cublasLtMatmulPreferenceCreate(&pref));
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof ws_bytes));
    cublasLtMatmulHeuristicResult_t res[8];
    int got = 0;
    if (cublasLtMatmulAlgoGetHeuristic(lt, p.op, p.la, p.lb, p.ld, p.ld, pref, 8, res, &got) != CUBLAS_STATUS_SUCCESS)
        got = 0;
    for (int i = 0; i < got; i++) p.algos.push_back(res[i]);
    cublasLtMatmulPreferenceDestroy(pref);
    return p;
}

static void free_plan(plan &p) {
    cublasLtMatmulDescDestroy(p.op);
    cublasLtMatrixLayoutDestroy(p.la); cublasLtMatrixLayoutDestroy(p.lb); cublasLtMatrixLayoutDestroy(p.ld);
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 10;
    if (reps < 3) reps = 3;
    struct shape { const char *name; int rows, cols; };
    const shape shapes[] = {{"q|k|v", 6144, 4096}, {"o", 4096, 4096}, {"gate|up", 28672, 4096}, {"down", 4096, 14336}};
    const int ns[] = {2048, 8192};
    const int max_rows = 28672, max_cols = 14336, max_n = 8192;
    cudaStream_t st;
    CK(cudaStreamCreate(&st));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    cublasLtHandle_t lt;
    LT(cublasLtCreate(&lt));
    const size_t ws_bytes = 64u << 20;
    void *ws;
    CK(cudaMalloc(&ws, ws_bytes));
    const size_t wsz = (size_t)max_rows * 4096 > (size_t)4096 * max_cols ? (size_t)max_rows * 4096 : (size_t)4096 * max_cols;
    const size_t xsz = (size_t)max_n * max_cols, dsz = (size_t)max_n * max_rows;
    uint8_t *wq, *xq;
    bf16 *wh, *xh, *d;
    float *sw, *sx;
    CK(cudaMalloc(&wq, wsz)); CK(cudaMalloc(&wh, wsz * 2));
    CK(cudaMalloc(&xq, xsz)); CK(cudaMalloc(&xh, xsz * 2));
    CK(cudaMalloc(&d, dsz * 2));
    const size_t n_sw = (size_t)(max_rows / 128 + 1) * 128, n_sx = (size_t)(max_cols / 128 + 1) * max_n;
    CK(cudaMalloc(&sw, n_sw * 4)); CK(cudaMalloc(&sx, n_sx * 4));
    k_fill<<<1024, 256, 0, st>>>(wq, wh, wsz, 1);
    k_fill<<<1024, 256, 0, st>>>(xq, xh, xsz, 2);
    k_fill_scale<<<64, 256, 0, st>>>(sw, n_sw, 3);
    k_fill_scale<<<64, 256, 0, st>>>(sx, n_sx, 4);
    CK(cudaStreamSynchronize(st));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    int lt_ver = (int)cublasLtGetVersion();
    printf("fp8_gemm_rate: %s, cuBLASLt %d, %d reps of %d launches\n", prop.name, lt_ver, reps, BURST);
    printf("%-8s %6s %-22s %10s %10s %9s %9s %5s %9s %9s\n", "product", "n", "form", "first us", "best us", "first TF",
           "best TF", "algos", "acc err", "quant err");
    std::vector<char> json;
    bool all_ok = true;
    for (const shape &sh : shapes)
        for (int n : ns) {
            const double flop = 2.0 * sh.rows * (double)sh.cols * n;
            const int kb = (sh.cols + 127) / 128, kbp = (kb + 3) / 4 * 4;
            // sampled outputs' reference inputs: W rows and x tokens, copied back once
            const int NS = 48;
            std::vector<int> sr(NS), stk(NS);
            for (int i = 0; i < NS; i++) {
                sr[i] = (int)((urand() * 0.5f + 0.5f) * (sh.rows - 1));
                stk[i] = (int)((urand() * 0.5f + 0.5f) * (n - 1));
            }
            std::vector<uint8_t> wrow((size_t)NS * sh.cols), xrow((size_t)NS * sh.cols);
            std::vector<bf16> whrow((size_t)NS * sh.cols), xhrow((size_t)NS * sh.cols);
            for (int i = 0; i < NS; i++) {
                CK(cudaMemcpy(&wrow[(size_t)i * sh.cols], wq + (size_t)sr[i] * sh.cols, sh.cols, cudaMemcpyDeviceToHost));
                CK(cudaMemcpy(&xrow[(size_t)i * sh.cols], xq + (size_t)stk[i] * sh.cols, sh.cols, cudaMemcpyDeviceToHost));
                CK(cudaMemcpy(&whrow[(size_t)i * sh.cols], wh + (size_t)sr[i] * sh.cols, 2 * sh.cols, cudaMemcpyDeviceToHost));
                CK(cudaMemcpy(&xhrow[(size_t)i * sh.cols], xh + (size_t)stk[i] * sh.cols, 2 * sh.cols, cudaMemcpyDeviceToHost));
            }
            std::vector<float> hsw(n_sw), hsx(n_sx);
            CK(cudaMemcpy(hsw.data(), sw, n_sw * 4, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(hsx.data(), sx, n_sx * 4, cudaMemcpyDeviceToHost));
            for (int f = 0; f < N_FORMS; f++) {
                const bool fp8 = f != F_BF16;
                plan p = make_plan(lt, (form)f, sh.rows, sh.cols, n, sw, sx, ws_bytes);
                if (p.algos.empty()) {
                    printf("%-8s %6d %-22s   (cuBLASLt has no algorithm)\n", sh.name, n, form_name[f]);
                    free_plan(p);
                    continue;
                }
                const float one = 1.0f, zero = 0.0f;
                auto run = [&](const cublasLtMatmulAlgo_t *algo) {
                    return cublasLtMatmul(lt, p.op, &one, fp8 ? (const void *)wq : (const void *)wh, p.la,
                                          fp8 ? (const void *)xq : (const void *)xh, p.lb, &zero, d, p.ld, d, p.ld, algo,
                                          ws, ws_bytes, st);
                };
                // check the heuristic's first choice against the CPU on the sampled outputs
                LT(run(&p.algos[0].algo));
                CK(cudaStreamSynchronize(st));
                double se = 0, sr2 = 0, sq = 0, sx2 = 0;
                for (int i = 0; i < NS; i++) {
                    const uint8_t *a = &wrow[(size_t)i * sh.cols], *b = &xrow[(size_t)i * sh.cols];
                    double ref = 0, exact = 0;
                    if (!fp8) {
                        for (int k = 0; k < sh.cols; k++)
                            ref += (double)bf16_value(whrow[(size_t)i * sh.cols + k]) * bf16_value(xhrow[(size_t)i * sh.cols + k]);
                        exact = ref;
                    } else {
                        for (int blk = 0; blk < kb; blk++) {
                            double part = 0, part_x = 0;
                            for (int k = blk * 128; k < sh.cols && k < blk * 128 + 128; k++) {
                                part += (double)e4m3_value(a[k]) * e4m3_value(b[k]);
                                part_x += 400.0 * hrand(1, (size_t)sr[i] * sh.cols + k) * 400.0 *
                                          hrand(2, (size_t)stk[i] * sh.cols + k);
                            }
                            const double s = f == F_BLK ? (double)hsw[(size_t)(sr[i] / 128) * kbp + blk] *
                                                              hsx[(size_t)blk * n + stk[i]]
                                             : f == F_TENSOR_FAST ? (double)hsw[0] * hsx[0]
                                                                  : (double)hsw[sr[i]] * hsx[stk[i]];
                            ref += part * s;
                            exact += part_x * s;
                        }
                    }
                    bf16 got;
                    CK(cudaMemcpy(&got, d + (size_t)stk[i] * sh.rows + sr[i], 2, cudaMemcpyDeviceToHost));
                    const double e = bf16_value(got) - ref, eq = bf16_value(got) - exact;
                    se += e * e;
                    sr2 += ref * ref;
                    sq += eq * eq;
                    sx2 += exact * exact;
                }
                const double rel = sqrt(se / (sr2 > 0 ? sr2 : 1)), qrel = sqrt(sq / (sx2 > 0 ? sx2 : 1));
                const bool ok = rel < (f == F_CH_FAST || f == F_TENSOR_FAST ? 5e-2 : 1e-2);
                all_ok &= ok;
                float first = 0, best = 1e30f;
                int best_i = 0;
                for (size_t a = 0; a < p.algos.size(); a++) {
                    if (run(&p.algos[a].algo) != CUBLAS_STATUS_SUCCESS) continue;  // (warm-up; some may refuse)
                    const float ms = burst_ms(st, e0, e1, reps, [&](int) { LT(run(&p.algos[a].algo)); });
                    if (a == 0) first = ms;
                    if (ms < best) { best = ms; best_i = (int)a; }
                }
                printf("%-8s %6d %-22s %10.1f %10.1f %9.0f %9.0f %5zu %9.2e %9.2e%s\n", sh.name, n, form_name[f],
                       first * 1e3, best * 1e3, flop / (first * 1e-3) / 1e12, flop / (best * 1e-3) / 1e12,
                       p.algos.size(), rel, qrel, ok ? "" : "  FAILED");
                char line[512];
                const int len = snprintf(line, sizeof line,
                                         "{\"product\":\"%s\",\"rows\":%d,\"cols\":%d,\"n\":%d,\"form\":\"%s\",\"first_us\":%.2f,"
                                         "\"best_us\":%.2f,\"best_index\":%d,\"algos\":%zu,\"acc_err\":%.3e,\"quant_err\":%.3e,\"ok\":%s}\n",
                                         sh.name, sh.rows, sh.cols, n, form_name[f], first * 1e3, best * 1e3, best_i,
                                         p.algos.size(), rel, qrel, ok ? "true" : "false");
                json.insert(json.end(), line, line + len);
                free_plan(p);
            }
        }
    fwrite(json.data(), 1, json.size(), stdout);
    printf("fp8_gemm_rate: %s\n", all_ok ? "all forms agree with the CPU" : "some form FAILED its CPU check");
    return all_ok ? 0 : 1;
}
