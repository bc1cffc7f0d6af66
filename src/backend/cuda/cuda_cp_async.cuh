// cuda_cp_async.cuh — the asynchronous 16-byte global-to-shared copy (cp.async, sm_80+) and its
// groups, shared by the decode kernels (cuda_decode_mma.cuh) and the skinny GEMM's prefetching
// form (cuda_gemv.cuh).
#pragma once

__device__ __forceinline__ void cp_async16(void *smem, const void *gmem) {
    unsigned sa = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(sa), "l"(gmem));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N)); }
