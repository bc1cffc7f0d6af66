// cuda_decode_gsync.cuh — kernel lab (OCTET_DECODE_GSYNC=1): the split combine inside the decode
// kernel behind a grid-wide barrier, included by cuda_attention.cu before cuda_decode_t.cuh.
// Why: k_combine costs 5.6 µs of a 74 µs decode call at B=1 L=128k (fp8, H200, session 19), and
// merging in the last CTA of each (sequence, KV head) was slower still (its merge, 66 partials
// on one CTA, took 5-8 µs). Here every CTA of the one-wave grid, after writing its partial,
// arrives at a counter and waits until all have; then the CTAs merge slices of 32 output dims
// each (a warp per quarter of the splits, lanes = dims), so the merge is one or two load rounds
// spread over the GPU instead of many on one SM.
// Needs every CTA resident at once: the decode plan sizes the grid to one wave of resident CTAs
// (plan_splits), and only the lab launches it (no cooperative-launch guarantee; a bench that
// hangs is killed by its timeout). gsync[0] counts arrivals, gsync[1] departures; the last to
// depart resets both for the next launch (which cannot start before this grid has finished).
// Sums: weights exp(m_i − M) with M the maximum over the splits, Σ l_i·w_i in split order, each
// warp's Σ acc_i·w_i over splits w, w + 4, ... in order (their values loaded in one round before
// the weights are known), then the 4 warps' sums in order —
// deterministic, not the same order as k_combine's (4 interleaved groups of the same splits).
#pragma once

template <int HD>
__device__ __noinline__ void gsync_combine(bf16 *out, const float *part, int *gsync, const int32_t *qstart, int n_kv, int G,
                                           int n_splits) {
    const unsigned total = gridDim.x * gridDim.y * gridDim.z;
    const unsigned cta = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    __syncthreads();  // the CTA's partial stores before thread 0's fence (cumulative)
    if (threadIdx.x == 0) {
        __threadfence();
        atomicAdd(&gsync[0], 1);
        while (*(volatile int *)&gsync[0] < (int)total) __nanosleep(100);
        __threadfence();
    }
    __syncthreads();
    constexpr int NQ = HD / 32, KX = 32;  // 32-dim slices of a head; splits a warp holds in registers
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    __shared__ float sm_mm[512], sm_ll[512], red[4][32], stat;
    const int n_sl = gridDim.x * n_kv * G * NQ;
    for (int sl = cta; sl < n_sl; sl += total) {
        const int dq = sl % NQ, row = sl / NQ;  // row = s·n_kv·G + qh
        const int s = row / (n_kv * G), qh = row % (n_kv * G);
        const float *pp = part + (size_t)row * n_splits * (HD + 2);
        const int d = dq * 32 + lane;
        float x[KX];  // this warp's splits warp, warp + 4, ... (one load round, before the weights are known)
#pragma unroll
        for (int k = 0; k < KX; k++) {
            const int i = warp + 4 * k;
            x[k] = i < n_splits ? __ldcg(pp + (size_t)i * (HD + 2) + 2 + d) : 0.0f;
        }
        for (int i = threadIdx.x; i < n_splits; i += blockDim.x) {
            const float2 ml = __ldcg((const float2 *)(pp + (size_t)i * (HD + 2)));
            sm_mm[i] = ml.x;
            sm_ll[i] = ml.y;
        }
        __syncthreads();
        if (warp == 0) {  // M, the weights and L: lanes stride the splits, then a tree
            float mm = -INFINITY;
            for (int i = lane; i < n_splits; i += 32) mm = fmaxf(mm, sm_mm[i]);
            for (int o = 16; o > 0; o >>= 1) mm = fmaxf(mm, __shfl_xor_sync(0xffffffff, mm, o));
            float ls = 0.0f;
            for (int i = lane; i < n_splits; i += 32) {
                const float f = sm_mm[i] == -INFINITY ? 0.0f : __expf(sm_mm[i] - mm);
                sm_mm[i] = f;  // (now the weight)
                ls += sm_ll[i] * f;
            }
            for (int o = 16; o > 0; o >>= 1) ls += __shfl_xor_sync(0xffffffff, ls, o);
            if (lane == 0) stat = ls;
        }
        __syncthreads();
        float aa = 0.0f;
#pragma unroll
        for (int k = 0; k < KX; k++) {
            const int i = warp + 4 * k;
            if (i < n_splits) aa += x[k] * sm_mm[i];
        }
        for (int i = warp + 4 * KX; i < n_splits; i += 4) aa += __ldcg(pp + (size_t)i * (HD + 2) + 2 + d) * sm_mm[i];
        red[warp][lane] = aa;
        __syncthreads();
        if (warp == 0) {
            const float sum = ((red[0][lane] + red[1][lane]) + red[2][lane]) + red[3][lane];
            out[((size_t)qstart[s] * n_kv * G + qh) * HD + d] = __float2bfloat16_rn(stat > 0 ? sum / stat : 0.0f);
        }
        __syncthreads();
    }
    if (threadIdx.x == 0 && atomicAdd(&gsync[1], 1) == (int)total - 1) {
        gsync[0] = 0;
        gsync[1] = 0;
        __threadfence();
    }
}
