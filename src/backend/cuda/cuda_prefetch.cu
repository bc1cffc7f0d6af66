// cuda_prefetch.cu — the CUDA backend's weight prefetch (backend op `prefetch`, kernel lab:
// OCTET_L2_PREFETCH=MB, 0 = off, the default). Owns: the side stream, its fork/join events, and
// the kernel that asks L2 for a weight's first bytes.
// Why: in a decode step HBM idles while the small kernels between two skinny GEMMs run (norms,
// RoPE + kv_write, attention, combine: ≈ 20 µs a layer of dummy:llama-3.1-8b's ≈ 140; bench/
// NOTES.md, session 15). Forked onto a side stream right after a GEMM, warps issue bulk L2
// prefetches of the next GEMM's weight (cp.async.bulk.prefetch.L2, fire and forget), so its
// bytes move while those kernels run; the GEMM then finds them in L2. The side stream rejoins
// the main one before the step's end (a captured step: a parallel branch of the graph).
// Results cannot change: the prefetch only reads weights.
#include "cuda_common.cuh"

#define PF_CHUNK (32 << 10)      // bytes a prefetch instruction
#define PF_CTA (32 * PF_CHUNK)     // bytes a CTA (one warp, an instruction a lane)

// One CTA per 1 MB: a single SM's bulk prefetches ran at ≈ 0.4 TB/s (a 16 MB hint cost 42 µs on
// the side stream, and the step waited for it at the join: 4.6 → 10 ms a token; H200, session 16).
__global__ void __launch_bounds__(32) k_l2_prefetch(const uint8_t *p /*[bytes]*/, size_t bytes) {
    const size_t o = (size_t)blockIdx.x * PF_CTA + (size_t)threadIdx.x * PF_CHUNK;
    if (o >= bytes) return;
    const uint32_t sz = (uint32_t)(bytes - o < PF_CHUNK ? bytes - o : PF_CHUNK);
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p + o), "r"(sz) : "memory");
}

static size_t prefetch_cap(void) {  // bytes a call (OCTET_L2_PREFETCH in MB; 0: off)
    static long mb = -1;
    if (mb < 0) mb = cuda_env_int("OCTET_L2_PREFETCH", 0);
    return (size_t)mb << 20;
}

extern "C" void cuda_prefetch(struct backend *b, const struct weight *w, int n) {
    struct cuda_backend *c = (struct cuda_backend *)b;
    const size_t cap = prefetch_cap();
    if (CUDA_SKIP(c) || !cap || n > 8 || !w->dev) return;  // (decode steps only: prefill's GEMMs are not memory-bound)
    size_t bytes = (size_t)w->rows * (size_t)w->cols * sizeof(bf16);
    if (bytes > cap) bytes = cap;
    bytes &= ~(size_t)15;
    if (!bytes || ((uintptr_t)w->dev & 15)) return;
    if (!c->pf_stream) {
        if (cuda_fail(c, cudaStreamCreateWithFlags(&c->pf_stream, cudaStreamNonBlocking), "prefetch stream") ||
            cuda_fail(c, cudaEventCreateWithFlags(&c->pf_fork, cudaEventDisableTiming), "prefetch event") ||
            cuda_fail(c, cudaEventCreateWithFlags(&c->pf_join, cudaEventDisableTiming), "prefetch event"))
            return;
    }
    if (!CUDA_OK(c, cudaEventRecord(c->pf_fork, c->stream)) || !CUDA_OK(c, cudaStreamWaitEvent(c->pf_stream, c->pf_fork, 0))) return;
    k_l2_prefetch<<<(unsigned)((bytes + PF_CTA - 1) / PF_CTA), 32, 0, c->pf_stream>>>((const uint8_t *)w->dev, bytes);
    if (CUDA_LAUNCHED(c, "l2 prefetch")) return;
    if (CUDA_OK(c, cudaEventRecord(c->pf_join, c->pf_stream))) c->pf_open = true;
}

// The main stream waits for the side stream's prefetches (before a capture ends, or a sync).
void cuda_prefetch_join(struct cuda_backend *c) {
    if (!c->pf_open) return;
    c->pf_open = false;
    cuda_fail(c, cudaStreamWaitEvent(c->stream, c->pf_join, 0), "prefetch join");
}

void cuda_prefetch_destroy(struct cuda_backend *c) {
    if (c->pf_stream) cudaStreamDestroy(c->pf_stream);
    if (c->pf_fork) cudaEventDestroy(c->pf_fork);
    if (c->pf_join) cudaEventDestroy(c->pf_join);
}
