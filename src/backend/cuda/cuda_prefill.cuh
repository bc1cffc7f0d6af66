// cuda_prefill.cuh — the prefill kernel families' entries of the attention kernel table
// (cuda_attention.cu): each family's fits() (the shapes it takes, in the table's preference order)
// and launch(), and the FP8 family's per-backend set-up. Defined in cuda_prefill_fp8.cu (e4m3 on
// FP8 wgmma) and cuda_prefill.cu (bf16 / e4m3 / e5m2 on mma.sync, and the SIMT kernel).
#pragma once

struct attn_call;
struct cuda_backend;

// e4m3, head_dim 64 / 128, 64 % G == 0, blocks of a multiple of 8 tokens that divide or are divided
// by the 128-key tile: the TMA kernel (cuda_prefill_fp8_tma.cuh)
bool attn_prefill_fp8_tma_fits(const struct attn_call *a);
void attn_prefill_fp8_tma_launch(const struct attn_call *a);
// e4m3, head_dim 64 / 128 / 256, 64 % G == 0: the two-warpgroup kernel (cuda_prefill_fp8.cuh)
bool attn_prefill_fp8_wgmma_fits(const struct attn_call *a);
void attn_prefill_fp8_wgmma_launch(const struct attn_call *a);
// the FP8 kernels' shared-memory limits, set once per backend (false: an error is latched)
// the TMA kernel for per-token-head (fp8_per_token_head) layers, its own translation unit
// (cuda_prefill_fp8_tok.cu), and its shared-memory limits
void attn_prefill_fp8_tma_tok_launch(const struct attn_call *a);
bool cuda_prefill_fp8_tok_init(struct cuda_backend *c);
bool cuda_prefill_fp8_init(struct cuda_backend *c);
// bf16 / e4m3 / e5m2, head_dim 64 / 128, blocks of 16·2^k tokens, 16 % G == 0: mma.sync
// (cuda_prefill_mma.cuh)
bool attn_prefill_mma_fits(const struct attn_call *a);
void attn_prefill_mma_launch(const struct attn_call *a);
// head_dim 64 / 128 / 256, (128 / (head_dim / 32)) % G == 0, a key part's f32 K and V within the
// shared memory a CTA may opt in to: SIMT
bool attn_prefill_simt_fits(const struct attn_call *a);
void attn_prefill_simt_launch(const struct attn_call *a);
