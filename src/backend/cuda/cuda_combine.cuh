// cuda_combine.cuh — the split-KV combine of the decode kernels (flash-decoding's second step),
// included by cuda_decode.cu after the decode kernels: the kernel k_combine, which merges each
// (sequence, query head)'s split partials [n_splits][m, l, acc[hd]] into its bf16 output row, and
// its launch.
#pragma once

// Combines the splits of one (sequence, query head) in one round of loads: a CTA per (sequence,
// query head), its threads in R rows of hd / 2 lanes (2 dims a lane; head_dim is even). Row r takes
// splits r, r + R, ..., up to P = 16 of them at once: their m, l and accumulator values are all
// loaded before the first is used, then merged into the row's own maximum M_r, Σ l·w and Σ acc·w
// (w = e^(m − M_r)); the rows are merged through shared memory: out = Σ_r acc_r·e^(M_r − M) /
// Σ_r l_r·e^(M_r − M). Empty splits hold m = −inf, l = 0, acc = 0 (weight 0). The launch picks as
// few rows as load every split in one round: one round of loads, not a pass for the maximum, one
// for the weights and dependent rounds for the sums. sinks (attn_args.sinks, or null): the query
// head's sink logit joins the final denominator, L += e^(sink − M), once for all splits.
#define COMBINE_SPLITS 16  // splits one row of lanes loads in a round (k_combine and its launch)
__global__ void __launch_bounds__(512) k_combine(bf16 *out, const float *part, const int32_t *qstart, int n_heads,
                                                 int hd, int n_splits, const float *sinks = nullptr) {
    constexpr int P = COMBINE_SPLITS;  // splits a lane loads at once
    pdl_trigger();  // the output projection's GEMM may launch (it waits for this grid's results)
    pdl_wait();     // (the partials are the decode kernel's, whose programmatic dependent this is)
    extern __shared__ float shm[];  // [R][hd] row accumulators, then [R] maxima, [R] sums
    const int s = blockIdx.x, qh = blockIdx.y, tid = threadIdx.x;
    constexpr int V = 2;  // dims a lane
    const int lanes = hd / V, R = blockDim.x / lanes, r = tid / lanes, d = (tid % lanes) * V;
    const int t = qstart[s];
    const size_t stride = (size_t)hd + 2;
    const float *pp = part + ((size_t)s * n_heads + qh) * n_splits * stride;  // [n_splits][m, l, acc[hd]]
    const int n = n_splits;
    float *sM = shm + (size_t)R * hd, *sL = sM + R;
    float mr = -INFINITY, lr = 0.0f, ar[V];
#pragma unroll
    for (int j = 0; j < V; j++) ar[j] = 0.0f;
    if (r < R) {
        for (int i0 = r; i0 < n; i0 += P * R) {
            float mi[P], li[P], vi[P][V];
#pragma unroll
            for (int k = 0; k < P; k++) {
                const int i = i0 + k * R;
                mi[k] = -INFINITY, li[k] = 0.0f;
#pragma unroll
                for (int j = 0; j < V; j++) vi[k][j] = 0.0f;
                if (i < n) {
                    const float *p = pp + (size_t)i * stride;
                    mi[k] = p[0], li[k] = p[1];
                    const float2 v2 = *(const float2 *)(p + 2 + d);  // (8-byte aligned: hd + 2 is even)
                    vi[k][0] = v2.x, vi[k][1] = v2.y;
                }
            }
            float mx = mr;
#pragma unroll
            for (int k = 0; k < P; k++) mx = fmaxf(mx, mi[k]);
            if (mx == -INFINITY) continue;  // all empty so far
            const float f = mr == -INFINITY ? 0.0f : __expf(mr - mx);
            lr *= f;
#pragma unroll
            for (int j = 0; j < V; j++) ar[j] *= f;
#pragma unroll
            for (int k = 0; k < P; k++) {
                const float w = mi[k] == -INFINITY ? 0.0f : __expf(mi[k] - mx);
                lr += li[k] * w;
#pragma unroll
                for (int j = 0; j < V; j++) ar[j] += vi[k][j] * w;
            }
            mr = mx;
        }
#pragma unroll
        for (int j = 0; j < V; j++) shm[(size_t)r * hd + d + j] = ar[j];
        if (d == 0) sM[r] = mr, sL[r] = lr;
    }
    __syncthreads();
    for (int dd = tid; dd < hd; dd += blockDim.x) {
        float M = -INFINITY;
        for (int k = 0; k < R; k++) M = fmaxf(M, sM[k]);
        float L = 0.0f, acc = 0.0f;
        for (int k = 0; k < R; k++) {
            const float w = sM[k] == -INFINITY ? 0.0f : __expf(sM[k] - M);
            L += sL[k] * w;
            acc += shm[(size_t)k * hd + dd] * w;
        }
        if (sinks) L += __expf(sinks[qh] - M);
        out[((size_t)t * n_heads + qh) * hd + dd] = __float2bfloat16_rn(L > 0 ? acc / L : 0.0f);
    }
}

// Launches the split combine (k_combine), a programmatic dependent of the decode kernel (its launch
// staged while that kernel runs): as few rows of hd / 2 lanes as load every split in one round, at
// most 512 threads.
static void launch_combine(struct cuda_backend *c, void *out, int n_seqs, int n_heads, int hd, int n_splits,
                           const int32_t *qstart /* [n_seqs] output row of each */, const float *sinks) {
    const int lanes = hd / 2;
    if (hd % 2 || lanes > 512) {  // (model configs are checked: even, at most 512)
        cuda_fail(c, cudaErrorInvalidValue, "attention combine: head_dim must be even and at most 1024");
        return;
    }
    int rows = (n_splits + COMBINE_SPLITS - 1) / COMBINE_SPLITS;
    if (rows > 512 / lanes) rows = 512 / lanes;
    const size_t smem = ((size_t)rows * hd + 2 * (size_t)rows) * sizeof(float);
    cudaLaunchAttribute attr[1];
    const cudaLaunchConfig_t cfg = pdl_config(dim3(n_seqs, n_heads), dim3(rows * lanes), smem, c->stream, attr);
    cuda_fail(c, cudaLaunchKernelEx(&cfg, k_combine, (bf16 *)out, (const float *)c->d_part, qstart, n_heads, hd,
                                    n_splits, sinks),
              "attention combine");
}
