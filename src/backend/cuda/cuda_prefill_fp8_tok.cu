// cuda_prefill_fp8_tok.cu — the FP8 TMA prefill (cuda_prefill_fp8_tma.cuh) for per-token-head
// (fp8_per_token_head) layers: its twelve instances (head_dim 64 / 128, three accumulation modes, with
// and without soft-capping) in a translation unit of their own, which compiles beside
// cuda_prefill_fp8.cu's. Owns their launch (attn_prefill_fp8_tma_launch hands such layers here) and
// their shared-memory limits.
#include "cuda_attention.cuh"
#include "cuda_decode_mma.cuh"  // (the cp.async helpers the older kernel shares)
#include "cuda_prefill_fp8.cuh"
#include "cuda_prefill_fp8_tma.cuh"

void attn_prefill_fp8_tma_tok_launch(const struct attn_call *a) { launch_prefill_fp8_tma_any<true>(a); }

bool cuda_prefill_fp8_tok_init(struct cuda_backend *c) { return fp8tma_init<64, true>(c) && fp8tma_init<128, true>(c); }
