// backend.h — the seam between the forward pass and the hardware (owns: the op table,
// struct batch (one step's flattened inputs) and struct kv_layer (one layer's paged cache
// storage); not: scheduling, block allocation, sampling).
// A backend is a small table of memory functions and ops over the whole flattened
// batch. Activations live in backend memory in the backend's activation dtype (f32 on
// the CPU); the forward pass only passes pointers and sizes. Ops are asynchronous on one
// stream; errors are sticky and reported by sync(). The CPU backend is the reference:
// every other backend's ops are tested against it.
#ifndef OCTET_BACKEND_H
#define OCTET_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../base/dtype.h"

struct weight;
struct rope_table;

// The FFN's gate activation: act(x·w_gateᵀ) ⊙ (x·w_upᵀ).
enum ffn_act {
    FFN_ACT_SILU = 0,         // SwiGLU (Llama, Qwen, Mistral, Phi-3)
    FFN_ACT_GELU_TANH,        // GeGLU with tanh-approximated GELU (Gemma: gelu_pytorch_tanh)
    FFN_ACT_GELU,             // GeGLU with exact (erf) GELU
};

// One engine step, flattened over sequences (vLLM's vocabulary).
struct batch {
    int n_tokens;
    const int32_t *token_ids;    // [n_tokens]; -1-j: the id logits_argmax last picked for its row j
    const int32_t *positions;    // [n_tokens] absolute position in its sequence
    const int32_t *slot_mapping; // [n_tokens] block*kv_block_tokens + offset where K/V go
    int n_seqs;
    const int32_t *query_start;  // [n_seqs+1] token offsets of each sequence's queries
    const int32_t *seq_lens;     // [n_seqs] context length after this step
    const int32_t *block_tables; // [n_seqs][max_blocks_per_seq] physical block ids
    int max_blocks_per_seq;
    int n_logits;
    const int32_t *logits_rows;  // [n_logits] token indices whose logits are returned
};

// The most rows one logits_argmax call picks for (and later batches may name by -1-j).
#define BACKEND_FEED_ROWS 1024

// How attention treats an FP8 cache.
enum attn_fp8_math {
    ATTN_FP8_EXACT = 0,  // widen K/V to f32, f32 math (CPU default)
    ATTN_FP8_EMULATE,    // also round Q and softmax P to e4m3 as the GPU's FP8 MMA does
};

#define KV_MAX_HEADS 64

// One layer's paged cache: K and V each [n_blocks][n_kv_heads][kv_block_tokens][head_dim]
// of `dtype`; FP8 elements store value/scale (per KV head; per-tensor = all equal).
struct kv_layer {
    enum dtype dtype;       // F32, F16, BF16, E4M3, E5M2
    int n_kv_heads, head_dim, kv_block_tokens, n_blocks;
    int window;             // sliding window in tokens (0 = full attention)
    float k_scale[KV_MAX_HEADS], v_scale[KV_MAX_HEADS]; // [n_kv_heads]
    // [n_kv_heads][head_dim] subtracted from K before an FP8 layer stores it, or NULL.
    // Attention ignores it: q·(k − o) = q·k − q·o, and q·o is the same for every key of a
    // query, so softmax is unchanged (docs/kv_format.md). Host memory; the CUDA backend
    // uploads a copy for its kv_write.
    const float *k_offset;
    void *k, *v;            // backend memory
    // fp8_per_token_head: kv_write gives every (token, KV head) row of K and of V its own f32
    // scale (absmax / 448), stored [n_blocks][n_kv_heads][kv_block_tokens] right after the
    // pages' data in the same allocation (k_tok_scale inside k, v_tok_scale inside v);
    // k_scale/v_scale are then 1.0 and unused. NULL for every other layer (docs/kv_format.md).
    float *k_tok_scale, *v_tok_scale;
    // Attention sinks of the layer (gpt-oss; NULL = none; ops->attn_sinks says whether a backend honours
    // them): [1][n_heads] f32/bf16/f16 logits, one per query head, that join that head's softmax max and
    // denominator as they are (p_j = e^(s_j) / (e^(sink) + Σ_k e^(s_k)), s the scaled scores) and add no
    // value. A model weight, not cache memory: the forward pass sets it before each attention call.
    const struct weight *sinks;
};

struct attn_params {
    int n_heads;            // query heads (n_heads / n_kv_heads share a KV head)
    float softmax_scale;    // usually 1/sqrt(head_dim)
    enum attn_fp8_math fp8_math;
    // P·V accumulation of the GPU's FP8 tensor-core attention (--fp8-attention-accumulation):
    // 0 = two-level (each KV tile's partial sum added into FP32 registers; the default),
    // N > 0 = every:N tiles, ATTN_ACC_SINGLE = single (left in the MMA accumulator).
    int fp8_accum;
    float softcap;          // > 0: each scaled score s becomes softcap·tanh(s/softcap) (Gemma 2); 0 = none
};
#define ATTN_ACC_SINGLE (-1)

struct backend;

// attn_in's operands: xn = rmsnorm(x, norm, eps); q, k, v = xn · wqᵀ, xn · wkᵀ, xn · wvᵀ; RoPE (rope)
// on q's n_heads and k's layer->n_kv_heads heads at the batch's positions; k and v written into
// layer's pages at the batch's slots. q, k, v hold the roped q and k and v afterwards (the
// calibration probe reads them); xn is scratch the op may or may not write.
struct attn_in_args {
    void *q;               // [n_tokens][n_heads][hd]
    void *k, *v;           // [n_tokens][n_kv_heads][hd]
    void *xn;              // [n_tokens][wq.cols] scratch
    const void *x;         // [n_tokens][wq.cols] the residual stream
    const struct weight *norm, *wq, *wk, *wv;
    float eps;
    int n_heads;
    const struct rope_table *rope;
    struct kv_layer *layer;
};

// attn_in's optional operands (backend_attn_in_ext; NULL = none): biases added to q, k, v after the
// projections, and per-head RMSNorm weights [hd] applied to q and k before RoPE (with attn_in's eps).
struct attn_in_extra {
    const struct weight *bq, *bk, *bv, *q_norm, *k_norm;
};

// ffn_in's operands: act = silu(xn · w_gateᵀ) ⊙ (xn · w_upᵀ) with xn = rmsnorm(x, norm, eps); gate and
// xn are scratch the op may or may not write, except that with keep_gate gate holds xn · w_gateᵀ
// (the gate's pre-activation, which the calibration probe reads) afterwards.
struct ffn_in_args {
    void *act;             // [n][w_up.rows]
    void *gate;            // [n][w_gate.rows]
    void *xn;              // [n][w_gate.cols] scratch
    const void *x;         // [n][w_gate.cols] the residual stream
    const struct weight *norm, *w_gate, *w_up;
    float eps;
    bool keep_gate;
    const struct weight *w_down;  // the product that reads act next (NULL: not said), so that a backend
                                  // may quantize act for it as it computes act (the CUDA FP8 prefill),
                                  // and then leave act unwritten: only proj_add of act by w_down may
                                  // follow, before the next sublayer op
};

// ffn_in's optional operands (backend_ffn_in_ext): biases after the gate and up projections (NULL =
// none) and the activation (FFN_ACT_SILU: silu_mul; the others need act_mul).
struct ffn_in_extra {
    const struct weight *b_gate, *b_up;
    enum ffn_act fn;
};

// The experts' gated activation.
enum moe_act {
    MOE_ACT_SILU = 0,       // silu(g) ⊙ u (Mixtral, Qwen3-MoE)
    MOE_ACT_SWIGLU_CLAMP,   // gpt-oss: g = min(g, limit), u = clamp(u, -limit, limit), g·σ(alpha·g) ⊙ (u + 1)
};

// moe_ffn's operands: the FFN sublayer of a mixture-of-experts layer, after its RMSNorm. Per token:
// logits = xn · routerᵀ (+ router_bias); p = softmax(logits) over the n_experts; the n_used largest
// (ties: the lower index); their weights p_e, divided by their sum when norm_topk (which is softmax over
// the top-k logits: Mixtral's order and gpt-oss's top-k-then-softmax are the same function);
// out = Σ p_e · (act(xn · gate_eᵀ + b_gate_e, xn · up_eᵀ + b_up_e) · down_eᵀ + b_down_e). Experts are
// stacked: expert e's gate and up are rows [e·ffn, (e+1)·ffn) of gate and up, its down rows
// [e·dim, (e+1)·dim) of down, its biases the same ranges of the bias rows. The optional operands (NULL /
// 0 = none, SiLU) are appended, so initializers that stop at norm_topk keep their meaning.
struct moe_ffn_args {
    void *out;                         // [n][dim]
    const void *xn;                    // [n][dim]
    const struct weight *router;       // [n_experts][dim]
    const struct weight *gate, *up;    // [n_experts·ffn][dim] (f32/f16/bf16, or mxfp4 / fp8_e4m3 on the CPU)
    const struct weight *down;         // [n_experts·dim][ffn]
    int n_experts, n_used;
    bool norm_topk;
    const struct weight *router_bias;  // [1][n_experts] or NULL
    const struct weight *b_gate, *b_up; // [1][n_experts·ffn] or NULL
    const struct weight *b_down;       // [1][n_experts·dim] or NULL
    enum moe_act act;
    float alpha, limit;                // MOE_ACT_SWIGLU_CLAMP's sigmoid gain (1.702) and clamp (7.0)
};

struct backend_ops {
    const char *name;
    void (*destroy)(struct backend *b);
    enum dtype act_dtype;  // activation element type
    int kv_block_tokens;   // the cache block size when the user gives none (--kv-block-tokens)
    bool kv_token_scales;  // kv_write and attention implement per-token-head scales (fp8_per_token_head)
    bool fp8_weights;      // matmul takes fp8_e4m3 weights with their scales (docs/fp8_weights.md)
    // memory (bytes); alloc returns zeroed memory or NULL
    void *(*alloc)(struct backend *b, size_t bytes);
    void (*free)(struct backend *b, void *p);
    void (*upload)(struct backend *b, void *dst, const void *src, size_t bytes);
    void (*download)(struct backend *b, void *dst, const void *src, size_t bytes);
    // Downloads n activation elements as f32.
    void (*download_f32)(struct backend *b, float *dst, const void *src, size_t n);
    // Optional: host memory the backend copies into at full speed (page-locked on a GPU), for
    // buffers such as the logits that every step fills; NULL: malloc/free (backend_host_alloc).
    void *(*host_alloc)(struct backend *b, size_t bytes);
    void (*host_free)(struct backend *b, void *p);
    int (*sync)(struct backend *b);  // waits; returns the sticky error, if any
    // Makes w usable by ops (sets w->dev). Returns <0 on failure.
    int (*weight_upload)(struct backend *b, struct weight *w);
    void (*weight_release)(struct backend *b, struct weight *w);
    // Batch metadata must be passed to batch_begin before ops use it.
    int (*batch_begin)(struct backend *b, const struct batch *bt);

    // ops; shapes in elements of act_dtype
    void (*get_rows)(struct backend *b, void *out /*[n_tokens][dim]*/, const struct weight *table,
                     const struct batch *bt);
    void (*rmsnorm)(struct backend *b, void *out /*[n][dim]*/, const void *x /*[n][dim]*/,
                    const struct weight *w /*[dim]*/, int n, float eps);
    void (*matmul)(struct backend *b, void *out /*[n][w.rows]*/, const void *x /*[n][w.cols]*/,
                   const struct weight *w, int n);
    void (*rope)(struct backend *b, void *x /*[n_tokens][n_heads][head_dim]*/, int n_heads, int head_dim,
                 const struct rope_table *rt, const struct batch *bt);
    void (*kv_write)(struct backend *b, struct kv_layer *l, const void *k /*[n_tokens][n_kv][hd]*/,
                     const void *v /*[n_tokens][n_kv][hd]*/, const struct batch *bt);
    void (*attention)(struct backend *b, void *out /*[n_tokens][n_heads][hd]*/,
                      const void *q /*[n_tokens][n_heads][hd]*/, const struct kv_layer *l,
                      const struct attn_params *p, const struct batch *bt);
    void (*silu_mul)(struct backend *b, void *out /*[n]*/, const void *gate, const void *up, int64_t n);
    void (*add)(struct backend *b, void *x /*[n]*/, const void *y /*[n]*/, int64_t n); // x += y
    // out[i] = x[rows[i]] for the batch's logits_rows
    void (*gather_rows)(struct backend *b, void *out /*[n_logits][dim]*/, const void *x /*[n_tokens][dim]*/,
                        int dim, const struct batch *bt);
    // The sublayer ops the forward pass calls (one path for every backend). backend.c holds one
    // composition of each from the ops above (backend_attn_in, backend_proj_add, backend_ffn_in),
    // which the CPU backend's table names; a backend may fuse them where it has the kernels (the same
    // arithmetic, tested against the composition) and call the composition for the shapes it does not fuse.
    // x → rmsnorm → q, k, v projections → RoPE on q and k → k and v into the layer's pages.
    void (*attn_in)(struct backend *b, const struct attn_in_args *a, const struct batch *bt);
    // x += in · wᵀ (a projection and its residual add); scratch [n][w.rows] may be overwritten.
    void (*proj_add)(struct backend *b, void *x /*[n][w.rows]*/, void *scratch /*[n][w.rows]*/,
                     const void *in /*[n][w.cols]*/, const struct weight *w, int n);
    // x → rmsnorm → silu(xn · w_gateᵀ) ⊙ (xn · w_upᵀ).
    void (*ffn_in)(struct backend *b, const struct ffn_in_args *a, int n);
    // host_out = x · wᵀ in f32 (the logits of the sampled rows), synchronous.
    void (*logits)(struct backend *b, float *host_out /*[n][w.rows]*/, const void *x /*[n][w.cols]*/,
                   const struct weight *w, int n);
    // Optional (asynchronous scheduling; NULL: the engine samples from the logits). The greedy id
    // of each row of x · wᵀ — logits_argmax's pick (base/argmax.h) — into host_ids by the time sync
    // returns, without waiting: host_ids must be host_alloc memory. A later batch's token id -1-j
    // stands for the id this call picked for row j, so that batch can be queued before the ids
    // reach the host. n <= BACKEND_FEED_ROWS.
    void (*logits_argmax)(struct backend *b, int32_t *host_ids /*[n]*/, const void *x /*[n][w.cols]*/,
                          const struct weight *w, int n);
    // Optional beside logits_argmax (NULL: sync): waits until the call writing host_ids is done,
    // not for what was queued after it; returns the sticky error, if any.
    int (*wait_ids)(struct backend *b, const int32_t *host_ids);
    // Default KV budget in bytes, given what is allocated so far (call after the weights
    // and activations): CPU a quarter of RAM; GPU utilization × total − memory in use.
    size_t (*kv_budget_default)(struct backend *b, double gpu_memory_utilization);

    // Ops and abilities of architectures beyond Llama's (NULL / false: the backend lacks them, and
    // forward_init refuses a model that needs one, naming the architecture and the op).
    // x[i][j] += bias[j] for i < n (projection biases).
    void (*bias_add)(struct backend *b, void *x /*[n][bias.cols]*/, const struct weight *bias, int n);
    // out = act(gate) ⊙ up, elementwise (GeGLU; silu_mul is FFN_ACT_SILU's).
    void (*act_mul)(struct backend *b, void *out /*[n]*/, const void *gate, const void *up, int64_t n,
                    enum ffn_act act);
    // x *= s (Gemma's embedding scale).
    void (*scale)(struct backend *b, void *x /*[n]*/, int64_t n, float s);
    // The routed experts of a mixture-of-experts FFN (struct moe_ffn_args).
    void (*moe_ffn)(struct backend *b, const struct moe_ffn_args *a, int n);
    bool attn_softcap;      // attention honours attn_params.softcap
    bool rope_dynamic;      // rope honours rope_table.dyn_max_pos (dynamic NTK)
    bool attn_sinks;        // attention honours kv_layer.sinks (gpt-oss)
};

struct backend {
    const struct backend_ops *ops;
    // --batch-invariant: every token's numbers independent of how its step was batched (a
    // chunked prefill and token-by-token decoding give identical logits). The CPU backend
    // always is; the CUDA backend then runs its invariant GEMM and attention (slower).
    bool batch_invariant;
    // --enforce-eager (vLLM's name): every step runs eagerly; the CUDA backend then captures no
    // decode steps into CUDA graphs. Tools that time single ops set it too.
    bool enforce_eager;
};

// CPU backend with n_threads workers (0 = all cores).
struct backend *backend_cpu_create(int n_threads);
// CUDA backend on GPU `device_index` (src/backend/cuda/, built with `make CUDA=1`).
// NULL with err_msg() when not built with CUDA or no GPU is usable.
struct backend *backend_cuda_create(int device_index);
// True when built with CUDA and a GPU is present.
bool backend_cuda_available(void);
// Host buffers through ops->host_alloc when the backend has it, else malloc (NULL when out of
// memory); free them with backend_host_free before the backend is destroyed.
void *backend_host_alloc(struct backend *b, size_t bytes);
void backend_host_free(struct backend *b, void *p);
// The sublayer ops composed from a backend's elementwise ops, rmsnorm, matmul, rope and kv_write:
// the CPU backend's attn_in, proj_add and ffn_in, and the GPU's for the shapes it does not fuse.
void backend_attn_in(struct backend *b, const struct attn_in_args *a, const struct batch *bt);
void backend_proj_add(struct backend *b, void *x, void *scratch, const void *in, const struct weight *w, int n);
void backend_ffn_in(struct backend *b, const struct ffn_in_args *a, int n);
// The same compositions with the optional operands (biases, q/k norms, GeGLU; they need bias_add
// and act_mul), which the forward pass calls for the families that have them.
void backend_attn_in_ext(struct backend *b, const struct attn_in_args *a, const struct attn_in_extra *e,
                         const struct batch *bt);
void backend_ffn_in_ext(struct backend *b, const struct ffn_in_args *a, const struct ffn_in_extra *e, int n);
// By name: "cpu", "cuda", or "auto" (cuda when available, else cpu). NULL + err_msg().
struct backend *backend_create(const char *device, int n_threads);

#endif
