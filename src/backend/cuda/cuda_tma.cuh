// cuda_tma.cuh — the Hopper tensor copies the warp-specialised prefill kernels share
// (cuda_prefill_fp8_tma.cuh, cuda_prefill_bf16.cuh): TMA tensor loads and L2 prefetches, and on the host
// the driver's tensor-map encoder. Owns those members of namespace tmah (each kernel family's namespace
// takes it with a using-directive; cuda_mbar.cuh holds its barriers and 1-D copies) and cuda_tma_encoder.
#pragma once

#include <cuda.h>  // CUtensorMap (the type only)
#include <stdint.h>

#include "cuda_common.cuh"
#include "cuda_mbar.cuh"

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
