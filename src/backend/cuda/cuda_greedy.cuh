// cuda_greedy.cuh — greedy ids on the GPU for asynchronous scheduling (owns: the argmax kernels
// over the logits rows and their launch; included by cuda_backend.cu, whose logits_argmax op
// queues them after a step's logits and copies the ids to the host without waiting).
// The pick is logits_argmax's (base/argmax.h): the first index of the largest logit, +0 and -0
// equal, NaN never chosen unless it sits at index 0 (then 0). ARGMAX_CTAS CTAs share a row; each
// folds its slice into one 64-bit key per row by atomicMax, key = ordered(value) << 32 | ~index,
// so the larger value wins and, between equal values, the lower index. k_argmax_ids turns the keys
// into ids and zeroes them for the next step. The ids stay on the device as well (d_ids): the next
// batch's get_rows reads token -1-j from there, so that batch can run before the host has them.
#pragma once

#define ARGMAX_CTAS 16

__device__ __forceinline__ unsigned long long argmax_key(float v, unsigned i) {
    const unsigned u = __float_as_uint(v == 0.0f ? 0.0f : v);                    // (-0 as +0)
    const unsigned o = v != v ? 0u : (u & 0x80000000u) ? ~u : (u | 0x80000000u);  // NaN below -inf
    return ((unsigned long long)o << 32) | (0xFFFFFFFFu - i);
}

// grid (ARGMAX_CTAS, rows): keys[row] = max over the row's slice of argmax_key.
__global__ void __launch_bounds__(256)
    k_argmax_keys(unsigned long long *keys /*[rows]*/, const float *logits /*[rows][V]*/, int V) {
    const float *lg = logits + (size_t)blockIdx.y * V;
    const int per = (V + gridDim.x - 1) / gridDim.x, lo = blockIdx.x * per, hi = min(V, lo + per);
    unsigned long long best = 0;
    for (int i = lo + (int)threadIdx.x; i < hi; i += blockDim.x) {
        const unsigned long long k = argmax_key(lg[i], (unsigned)i);
        best = k > best ? k : best;
    }
    for (int o = 16; o; o >>= 1) {
        const unsigned long long k = __shfl_xor_sync(0xffffffffu, best, o);
        best = k > best ? k : best;
    }
    if ((threadIdx.x & 31) == 0 && best) atomicMax(&keys[blockIdx.y], best);
}

// One CTA: ids from the keys (0 where the row's first logit is NaN), keys zeroed.
__global__ void k_argmax_ids(int32_t *ids /*[n]*/, unsigned long long *keys /*[n]*/, const float *logits /*[n][V]*/,
                             int V, int n) {
    for (int r = threadIdx.x; r < n; r += blockDim.x) {
        const float v0 = logits[(size_t)r * V];
        ids[r] = v0 != v0 ? 0 : (int32_t)(0xFFFFFFFFu - (unsigned)(keys[r] & 0xFFFFFFFFull));
        keys[r] = 0;
    }
}

// Queues the picks of the n rows of V logits at d_logits, their copy into host_ids (pinned) and
// an event the host can wait on; false (error latched) on a failed launch.
static bool greedy_ids_launch(struct cuda_backend *c, int32_t *host_ids, const float *d_logits, int V, int n) {
    k_argmax_keys<<<dim3(ARGMAX_CTAS, (unsigned)n), 256, 0, c->stream>>>(c->d_keys, d_logits, V);
    if (CUDA_LAUNCHED(c, "argmax")) return false;
    k_argmax_ids<<<1, 256, 0, c->stream>>>(c->d_ids, c->d_keys, d_logits, V, n);
    if (CUDA_LAUNCHED(c, "argmax ids")) return false;
    const int k = c->ids_next;
    c->ids_next ^= 1;
    c->ids_host[k] = host_ids;
    return CUDA_OK(c, cudaMemcpyAsync(host_ids, c->d_ids, (size_t)n * sizeof(int32_t), cudaMemcpyDeviceToHost,
                                      c->stream)) &&
           CUDA_OK(c, cudaEventRecord(c->ids_ev[k], c->stream));
}
