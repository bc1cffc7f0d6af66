// cuda_common.cuh — private to the CUDA backend: its state, error latching, bf16/fp8
// helpers and the entry points shared between its translation units: cuda_backend.cu (table,
// memory, elementwise ops), cuda_gemm.cu (products, sublayer ops), cuda_step.cu (graphs, logits),
// cuda_kv_write.cu (kv_write, RoPE + kv_write, per-layer scales) and the attention translation
// units (cuda_attention.cu and its families, cuda_attention.cuh).
// Invariant: every op runs on `stream`; the first failure is latched in `error` and
// reported by sync(); later ops become no-ops.
#pragma once

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

extern "C" {
#include "../../base/check.h"
#include "../backend.h"
#include "../rope_table.h"
#include "../weight.h"
#include "cuda_tuning.h"
}

typedef __nv_bfloat16 bf16;

#include "cuda_kv_store.cuh"
#include "cuda_pdl.cuh"

struct cuda_batch {            // device mirror of struct batch (one allocation)
    int n_tokens, n_seqs, n_logits, max_blocks_per_seq;
    int32_t *tok, *pos, *slot, *qstart, *seq_lens, *btab, *rows, *tok_seq;
    int max_ctx;               // largest seq_len in the batch
    int max_q;                 // most query tokens of one sequence in the batch
    // the FP8 prefill's Vᵀ tiles (cuda_prefill_vt.cuh): sequence s owns 128-key tiles
    // [vt_start[s], vt_start[s + 1]) of the pre-transposed V (none: its kernel transposes V itself)
    int32_t *vt_start;         // [n_seqs + 1]
    int vt_tiles;              // vt_start[n_seqs]
};

// A captured decode step for one (batch size, block-table width); state 0 new, 1 warmed
// up (ran eagerly once), 2 captured.
struct decode_graph { int n_seqs, max_blocks, state; unsigned meta_gen; cudaGraphExec_t exec; };

// A cached cuBLASLt plan for one product shape and kind (cuda_gemm.cu's plan_for; kind 0: bf16 weights,
// else an FP8 weight's scheme), or the memory that cuBLASLt has none for it (none).
struct gemm_plan {
    int64_t rows, cols;
    int n, kind;
    bool none;
    cudaDataType_t out_type;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatmulAlgo_t algo;
    bool valid;
};
#define N_PLANS 256

#define CUDA_ROPE_SLOTS 4

struct cuda_scale_slot;  // cuda_kv_write.cu: a layer's scales and K offsets on the device
struct cuda_sink_slot;   // cuda_attention.cu: a layer's attention sinks on the device

struct cuda_backend {
    struct backend base;
    int device, n_sm;
    size_t smem_optin;  // the most shared memory a CTA may opt in to (cudaDeviceProp::sharedMemPerBlockOptin)
    cudaStream_t stream;
    cublasLtHandle_t lt;
    void *workspace;
    size_t workspace_bytes;
    struct gemm_plan plans[N_PLANS];  // keyed by shape, this backend's own (a process may hold several)
    int n_plans;
    int error;
    char msg[256];
    // batch metadata
    int32_t *h_meta, *d_meta;   // pinned host staging and its device copy
    size_t meta_cap;            // int32 elements
    struct cuda_batch cb;
    // rope tables' inverse frequencies (double) on the device, CUDA_ROPE_SLOTS of them keyed by their
    // values (a model has one, or two with a separate RoPE for its sliding-window layers)
    double *d_inv_freq;         // [CUDA_ROPE_SLOTS][ROPE_MAX_PAIRS]
    double rope_key[CUDA_ROPE_SLOTS][ROPE_MAX_PAIRS];
    int rope_half[CUDA_ROPE_SLOTS], n_rope;
    // split-KV decode scratch
    float *d_part;              // [n_parts][n_heads][head_dim + 2]
    // FP8-weight products on cuBLASLt: the activations' codes and per-token scales (cuda_gemm.cu)
    uint8_t *d_xq;              // [n][kp]
    size_t xq_cap;              // bytes
    float *d_sx;                // [ceil(cols / 128) or 1][n]
    size_t sx_cap;              // floats
    float *d_acc;               // [n][rows] f32 sums of the FP8 GEMM whose scales k_fp8w_scale_out applies
    size_t acc_cap;             // floats
    // codes of an activation that the kernel writing it quantized for the FP8 product reading it next (the
    // SwiGLU epilogue's, for the down projection), in d_xq / d_sx; read once; x NULL: none
    struct cuda_fp8_codes { const void *x; const struct weight *w; int n; } fp8_codes;
    size_t part_cap;            // floats
    uint8_t *d_vt;              // the FP8 prefill's pre-transposed V: [vt_tiles][n_kv_heads][head_dim·128 bytes]
    size_t vt_cap;              // bytes
    int32_t *d_pseudo;          // identity mode: [2][n_tokens] pseudo-sequence starts and lengths
    int *d_arrive; // the fused combine: [n_seqs][n_kv_heads] split arrival counters (zero between launches)
    size_t arrive_cap;          // ints
    size_t pseudo_cap;          // int32 elements
    // logits
    float *d_logits;
    size_t logits_cap;
    bf16 *h_stage;              // pinned host staging for downloads
    size_t stage_cap;
    // CUDA graphs of decode steps, one per (batch size, block-table width): the first step
    // of a shape runs eagerly (allocations, uploads), the second is captured, later ones replay
    struct decode_graph graphs[64];
    int n_graphs;
    bool graphs_on;             // off after a capture failed (and under --enforce-eager: base.enforce_eager)
    bool capturing, replaying;  // this step: recording ops / ops are no-ops (the graph runs)
    bool fixed_plan;            // decode step: split-KV plan from the table width, not the contexts
    struct decode_graph *cur;
    unsigned meta_gen;          // bumped when the metadata or a scratch buffer moves (graphs then go stale)
#ifdef CUDA_STEP_TIMING
    // step timing (cuda_step.cu): events around each replayed decode step (start, graph done, logits
    // copied, the previous step's copy) and their sums, printed when the backend is destroyed
    cudaEvent_t tev[5];         // (and [4]: before batch_begin's metadata upload)
    double t_graph, t_copy, t_idle, t_upload;
    int t_n, t_idle_n;
    // and host clocks (seconds): the previous step's return, this step's batch_begin, and the sums
    // of the host's time outside the backend (sampling, the engine) and inside it up to the launch
    double h_ret, h_begin, h_outside, h_inside, h_launch, h_sync;
    int h_n;
#endif
    // asynchronous scheduling (cuda_greedy.cuh): the last greedy picks on the device, their
    // argmax keys, and for the last two logits_argmax calls the host buffer and its copy's event
    int32_t *d_ids;                 // [BACKEND_FEED_ROWS]
    unsigned long long *d_keys;     // [BACKEND_FEED_ROWS] zero between steps
    const int32_t *ids_host[2];
    cudaEvent_t ids_ev[2];
    int ids_next;
    // the metadata staging's two halves (batch_begin alternates) and their copies' events
    int meta_half;
    cudaEvent_t meta_ev[2];
    // per-layer FP8 scales and K offsets on the device (cuda_kv_write.cu; allocated on first use)
    struct cuda_scale_slot *scale_slots;
    // attention sinks as f32 on the device, one slot a sinks weight (cuda_attention.cu; on first use)
    struct cuda_sink_slot *sink_slots;
    int n_sink_slots;
    // tuning (cuda_tuning.h) and what the attention families set up once (cuda_attention_init)
    struct cuda_tuning tune;
    int decode_resident[3][3];  // [head_dim 64, 128, 256][bf16, e4m3, e5m2]: CTAs of the decode kernel an SM holds
    void *tma_encode;           // cuTensorMapEncodeTiled, from cudart's driver entry point
    struct cuda_moe *moe;       // moe_ffn's scratch (cuda_moe.cu; allocated on first use)
};

// Ops return at once when an error is latched or a captured graph replays the step.
#define CUDA_SKIP(c) ((c)->error || (c)->replaying)

// Latches the first error; returns true if `e` is an error.
bool cuda_fail(struct cuda_backend *c, cudaError_t e, const char *what);
int cuda_upload_staged(struct cuda_backend *c, struct weight *w, void *h, size_t bytes);
#define CUDA_OK(c, call) (!cuda_fail((c), (call), #call))
// Checks the last launch.
#define CUDA_LAUNCHED(c, what) cuda_fail((c), cudaGetLastError(), (what))

// Grows a device buffer to at least n elements of T (contents not kept). A captured decode graph holds
// the old address (the split-K partials, the logits, the FP8 scratch), so a move makes every graph stale:
// each re-warms and re-captures before it replays again, instead of writing to freed memory.
template <typename T> static inline bool cuda_reserve(struct cuda_backend *c, T **p, size_t *cap, size_t n) {
    if (n <= *cap) return true;
    c->meta_gen++;
    if (*p) cudaFree(*p);
    *p = nullptr;
    *cap = 0;
    if (cuda_fail(c, cudaMalloc((void **)p, n * sizeof(T)), "cudaMalloc")) return false;
    *cap = n;
    return true;
}

// Latches the first error with a message (printf-style); later errors are dropped.
__attribute__((format(printf, 3, 4))) static inline void cuda_latch(struct cuda_backend *c, int code, const char *fmt,
                                                                    ...) {
    if (c->error) return;
    c->error = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->msg, sizeof c->msg, fmt, ap);
    va_end(ap);
}

// The most dynamic shared memory a kernel with attributes fa can opt in to: the device's per-block maximum
// less the kernel's static shared memory.
static inline size_t cuda_smem_room(const struct cuda_backend *c, const cudaFuncAttributes &fa) {
    return c->smem_optin > fa.sharedSizeBytes ? c->smem_optin - fa.sharedSizeBytes : 0;
}
// The same for kern, cached in *room (0: not yet asked); 0 with the error latched where the attributes fail.
template <typename K>
static inline size_t cuda_smem_room_of(struct cuda_backend *c, K kern, size_t *room, const char *what) {
    if (*room) return *room;
    cudaFuncAttributes fa;
    if (cuda_fail(c, cudaFuncGetAttributes(&fa, (const void *)kern), what)) return 0;
    return *room = cuda_smem_room(c, fa);
}

// Lets kern launch with smem bytes of dynamic shared memory. Without opting in a kernel gets 48 KB less its
// own static shared memory (so a launch of exactly 48 KB fails where it has any); opted in, the device's
// per-block maximum less it. The opt-in is always to that maximum, so call sites in other translation units
// that share a kernel (a template in a header) never lower one another's limit. *allowed caches the limit
// for the caller's kernel (0: not yet asked). False, with the error latched, where smem cannot fit.
template <typename K>
static inline bool cuda_smem_allow(struct cuda_backend *c, K kern, size_t smem, size_t *allowed, const char *what) {
    if (smem <= *allowed) return true;
    cudaFuncAttributes fa;
    if (cuda_fail(c, cudaFuncGetAttributes(&fa, (const void *)kern), what)) return false;
    *allowed = (size_t)fa.maxDynamicSharedSizeBytes;
    if (smem <= *allowed) return true;
    const size_t most = cuda_smem_room(c, fa);
    if (smem > most) {
        cuda_latch(c, OCT_EUNSUP, "%s: %zu bytes of shared memory a CTA, beyond the device's %zu (with %zu static)",
                   what, smem, c->smem_optin, (size_t)fa.sharedSizeBytes);
        return false;
    }
    if (cuda_fail(c, cudaFuncSetAttribute((const void *)kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)most),
                  what))
        return false;
    *allowed = most;
    return true;
}

// Sets up the attention kernels (shared-memory limits, the decode kernel's residency) once, at the
// backend's creation; false with the error latched.
bool cuda_attention_init(struct cuda_backend *c);
void cuda_attention_release(struct cuda_backend *c);  // (the attention sinks' device copies)

// The 16-token kernels (decode, bf16 prefill) stream a cache block of kv_block_tokens = 16·2^lgr
// tokens as 2^lgr sub-blocks: sub-block j of a sequence (tokens 16j .. 16j + 15) of KV head g lies
// at row 16·(j mod 2^lgr) of block bt[j >> lgr] ([n_blocks][n_kv][kv_block_tokens][head_dim]),
// so its offset in units of 16 rows is returned (multiply by 16·head_dim·element size).
__device__ __forceinline__ size_t kv_sub_block(const int32_t *bt, int j, int n_kv, int g, int lgr) {
    return ((((size_t)bt[j >> lgr] * n_kv + g) << lgr) + (j & ((1 << lgr) - 1)));
}

// The device copy of a rope table's inverse frequencies (uploaded the first time these values are
// seen), or NULL after latching an error.
const double *cuda_rope_freqs(struct cuda_backend *c, const struct rope_table *rt);

// Attention logit soft-capping (Gemma 2, attn_params.softcap): each score s, in natural units after
// the softmax scale, becomes cap·tanh(s/cap), before masking and the softmax. A kernel keeps its
// scores as raw dot products times a factor into its own units (natural, or log2 for exp2);
// score_map<CAP> does that step, with the cap in between when CAP: raw·k, or
// tanh(raw·k/cap_u)·cap_u with cap_u = cap in the kernel's units (the map is the same in either units).
template <bool CAP> struct score_map {
    float k, k_cap, cap;  // k_cap = k / cap_u, cap = cap_u
    // k: raw score → the kernel's units; unit: natural → the kernel's units (1 or log2 e)
    __device__ __forceinline__ score_map(float k_, float softcap, float unit) {
        k = k_;
        cap = softcap * unit;
        k_cap = CAP ? k_ / cap : 0.0f;
    }
    __device__ __forceinline__ float operator()(float raw) const {
        if constexpr (CAP) return tanhf(raw * k_cap) * cap;
        else return raw * k;
    }
};

// The device copy of a layer's K and V scales ([2][KV_MAX_HEADS] floats: K's, then V's), uploaded
// when they change (cuda_kv_write.cu); NULL after latching an error.
float *cuda_layer_scales(struct cuda_backend *c, const struct kv_layer *l);
// The device copy of l->k_offset ([n_kv][hd] floats; uploaded when it changes), NULL when the
// layer has none or after latching an error.
const float *cuda_layer_offsets(struct cuda_backend *c, const struct kv_layer *l);

// Frees the per-layer scales and offsets (cuda_kv_write.cu), at the backend's destruction.
void cuda_kv_release(struct cuda_backend *c);

// Ops of the table defined in the other translation units.
void cuda_kv_write(struct backend *b, struct kv_layer *l, const void *k, const void *v, const struct batch *bt);
// q and k roped in place (as rope on each) and k, v written into l's pages (as kv_write): one launch
void cuda_rope_kv_write(struct cuda_backend *c, void *q, void *k, const void *v, int n_heads,
                        const struct rope_table *rt, struct kv_layer *l, const struct batch *bt);
void cuda_matmul(struct backend *b, void *out, const void *x, const struct weight *w, int n);
void cuda_attn_in(struct backend *b, const struct attn_in_args *a, const struct batch *bt);
void cuda_proj_add(struct backend *b, void *x, void *scratch, const void *in, const struct weight *w, int n);
void cuda_ffn_in(struct backend *b, const struct ffn_in_args *a, int n);
void cuda_logits(struct backend *b, float *host_out, const void *x, const struct weight *w, int n);
void cuda_logits_argmax(struct backend *b, int32_t *host_ids, const void *x, const struct weight *w, int n);
int cuda_wait_ids(struct backend *b, const int32_t *host_ids);
// The mixture-of-experts FFN (cuda_moe.cu), the upload of an MXFP4 expert weight (kept packed on the
// device) and the release of the op's scratch.
void cuda_moe_ffn(struct backend *b, const struct moe_ffn_args *a, int n);
int cuda_mxfp4_upload(struct cuda_backend *c, struct weight *w);
#define CUDA_WFLAG_MX_WIDE 1u  // (struct weight dev_flags) an mxfp4 weight with a block scale above 2^1
void cuda_moe_release(struct cuda_backend *c);

// out[n][w.rows] = x · wᵀ with out bf16 or f32 (cuda_gemm.cu): the batch-invariant GEMM under
// --batch-invariant, the skinny GEMM for n <= 8, else cuBLASLt; cuda_gemm_release frees the plans.
void cuda_gemm(struct cuda_backend *c, void *out, cudaDataType_t out_type, const void *x, const struct weight *w,
               int n);
void cuda_gemm_release(struct cuda_backend *c);
// Decides how the step batch_begin was given runs: eagerly, captured into a graph, or replayed (cuda_step.cu).
void cuda_graph_step_begin(struct cuda_backend *c, const struct batch *bt);
#ifdef CUDA_STEP_TIMING
double cuda_host_now(void);
void cuda_step_timing_report(struct cuda_backend *c);
#endif
extern "C" void cuda_attention(struct backend *b, void *out, const void *q, const struct kv_layer *l,
                               const struct attn_params *p, const struct batch *bt);
