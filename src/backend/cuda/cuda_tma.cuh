// cuda_tma.cuh — the Hopper copy and synchronisation primitives the warp-specialised prefill kernels
// share (cuda_prefill_fp8_tma.cuh, cuda_prefill_bf16.cuh): shared-memory addresses, named barriers,
// setmaxnreg, mbarriers and TMA tensor copies, and on the host the driver's tensor-map encoder. Owns
// namespace tmah (each kernel family's namespace takes it with a using-directive) and cuda_tma_encoder.
#pragma once

#include <cuda.h>  // CUtensorMap (the type only)
#include <stdint.h>

#include "cuda_common.cuh"

// cuTensorMapEncodeTiled's type
typedef CUresult (*cuda_tma_encode_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                                       const cuuint64_t *, const cuuint32_t *, const cuuint32_t *,
                                       CUtensorMapInterleave, CUtensorMapSwizzle, CUtensorMapL2promotion,
                                       CUtensorMapFloatOOBfill);

// cuTensorMapEncodeTiled, reached once per backend through cudart's driver entry point (no libcuda
// link) and kept in c->tma_encode; NULL, with an error naming `who` latched, where the driver lacks it.
static inline cuda_tma_encode_fn cuda_tma_encoder(struct cuda_backend *c, const char *who) {
    if (!c->tma_encode) {
        void *fn = NULL;
        cudaDriverEntryPointQueryResult qr;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &qr) !=
                cudaSuccess ||
            qr != cudaDriverEntryPointSuccess || !fn) {
            cuda_latch(c, OCT_EUNSUP, "%s: cuTensorMapEncodeTiled unavailable", who);
            return NULL;
        }
        c->tma_encode = fn;
    }
    return (cuda_tma_encode_fn)c->tma_encode;
}

namespace tmah {

__device__ __forceinline__ uint32_t sa(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
// named barriers (0 is __syncthreads): n threads, a multiple of 32
__device__ __forceinline__ void bar_sync(int id, int n) {
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory");
}
__device__ __forceinline__ void bar_arrive(int id, int n) {
    asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(n) : "memory");
}
// registers moved between warpgroups (setmaxnreg): the producer gives, the consumers take
template <int N> __device__ __forceinline__ void reg_dealloc() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N));
}
template <int N> __device__ __forceinline__ void reg_alloc() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N));
}
__device__ __forceinline__ void mbar_init(uint64_t *b, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(sa(b)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(uint64_t *b, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(sa(b)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t *b) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(sa(b)) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t *b, uint32_t parity) {
    uint32_t done;
    do {
        // (with a suspend-time hint the warp sleeps until the phase completes instead of spinning
        // on the issue slots the producer needs)
        asm volatile(
            "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2, %3;\nselp.u32 %0, 1, 0, p;\n}\n"
            : "=r"(done)
            : "r"(sa(b)), "r"(parity), "r"(0x989680u)
            : "memory");
    } while (!done);
}
// one box of a 4-d tensor map into shared memory, completing its bytes on mbarrier b
__device__ __forceinline__ void tma_load(void *dst, const CUtensorMap *map, uint64_t *b, int c0, int c1, int c2,
                                         int c3) {
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, "
                 "%5}], [%6];" ::"r"(sa(dst)),
                 "l"((uint64_t)map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(sa(b))
                 : "memory");
}
// one box of a 4-d tensor map into L2 (no shared memory, no barrier): bytes a later tma_load will want
__device__ __forceinline__ void tma_prefetch(const CUtensorMap *map, int c0, int c1, int c2, int c3) {
    asm volatile("cp.async.bulk.prefetch.tensor.4d.L2.global.tile [%0, {%1, %2, %3, %4}];" ::"l"((uint64_t)map),
                 "r"(c0), "r"(c1), "r"(c2), "r"(c3)
                 : "memory");
}

}  // namespace tmah
