// cuda_pdl.cuh — programmatic dependent launch (Hopper, sm_90): a kernel launched with the
// programmatic-stream-serialization attribute may start while the kernel before it in the
// stream still runs; it must call pdl_wait() before it reads anything that kernel writes.
// pdl_trigger() in the earlier kernel lets such a dependent launch once every CTA of the
// earlier kernel has called it (so it never takes slots the earlier grid still needs); for a
// dependent launched the ordinary way both instructions do nothing. pdl_config() builds such a
// launch's configuration for cudaLaunchKernelEx.
#pragma once

__device__ __forceinline__ void pdl_trigger() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }

// The configuration of a programmatic dependent launch (attr: storage for its one attribute).
static inline cudaLaunchConfig_t pdl_config(dim3 grid, dim3 block, size_t smem, cudaStream_t st,
                                            cudaLaunchAttribute *attr) {
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = st;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    return cfg;
}
