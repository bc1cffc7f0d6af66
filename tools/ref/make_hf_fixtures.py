#!/usr/bin/env python3
"""make_hf_fixtures.py — tiny random-weight Hugging Face checkpoints of every dense architecture
octet serves (for tests/unit/test_arch_hf.c) and of the mixtures of experts mixtral_routed and
qwen3_moe_routed (random routers, top-2 of 4 experts, so each token takes its own experts; Mixtral
renormalises the top-k weights, this Qwen3-MoE has norm_topk_prob false; for tests/unit/test_arch_moe.c),
with transformers' own greedy tokens, teacher-forced log-probabilities and perplexity.

Needs torch and transformers 5 (the GPU machine has both; the computation runs on the CPU in
float32, eager attention). Each fixture is a directory NAME/ holding config.json and
model.safetensors as save_pretrained writes them (bf16: every weight is rounded to bf16 first,
so the float32 reference computes on exactly the stored values), the small BPE tokenizer of
tests/data/tok_bpe, and ref.json:
  tokens       the fixed teacher-forced sequence (40 ids)
  logprobs     log p(tokens[i+1] | tokens[..i]) for i = 0..38, from one forward call
  ppl          exp(-mean(logprobs))
  prompt, gen  the greedy prompt (20 ids) and model.generate's 16 greedy tokens (with its cache)
  margins      top-1 minus top-2 logit at each greedy step (a near tie makes a token fragile)
  last_logits  the logits after the last of tokens
  inv_freq     every rotary module's inv_freq and attention scaling, for diagnosis
Usage: python3 make_hf_fixtures.py OUT_DIR [TOKENIZER_DIR [NAME,NAME...]] (default: every fixture)
"""
import json
import math
import os
import shutil
import sys
import traceback

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM

H = dict(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
         vocab_size=320, max_position_embeddings=128, rms_norm_eps=1e-6,
         bos_token_id=None, eos_token_id=None, pad_token_id=None)


def cfg(model_type, **kw):
    d = dict(H)
    d.update(kw)
    return model_type, d


FIXTURES = {
    # Llama saved by transformers 5: rope_parameters with llama3 scaling, untied head
    "llama3_rope": cfg("llama", num_hidden_layers=2, tie_word_embeddings=False,
                       rope_parameters=dict(rope_type="llama3", rope_theta=500000.0, factor=8.0,
                                            low_freq_factor=1.0, high_freq_factor=4.0,
                                            original_max_position_embeddings=16)),
    # YaRN with mscale / mscale_all_dim and truncate false; q/k/v/o and MLP biases; exact GELU
    "llama_yarn_bias": cfg("llama", num_hidden_layers=2, tie_word_embeddings=False, attention_bias=True,
                           mlp_bias=True, hidden_act="gelu",
                           rope_parameters=dict(rope_type="yarn", rope_theta=10000.0, factor=4.0,
                                                original_max_position_embeddings=32, beta_fast=16.0,
                                                beta_slow=2.0, mscale=0.707, mscale_all_dim=1.0,
                                                truncate=False)),
    # linear scaling, tanh GELU, tied head
    "llama_linear": cfg("llama", num_hidden_layers=2, tie_word_embeddings=True, hidden_act="gelu_pytorch_tanh",
                        rope_parameters=dict(rope_type="linear", rope_theta=10000.0, factor=2.0)),
    # dynamic NTK: max_position_embeddings 24, so both sequences run past it
    "llama_dynamic": cfg("llama", num_hidden_layers=2, tie_word_embeddings=False, max_position_embeddings=24,
                         rope_parameters=dict(rope_type="dynamic", rope_theta=10000.0, factor=2.0)),
    "qwen2": cfg("qwen2", num_hidden_layers=2, tie_word_embeddings=True, use_sliding_window=True,
                 sliding_window=8, max_window_layers=1, rope_parameters=dict(rope_type="default",
                                                                              rope_theta=1000000.0)),
    "qwen3": cfg("qwen3", num_hidden_layers=2, tie_word_embeddings=False, head_dim=32,
                 rope_parameters=dict(rope_type="default", rope_theta=1000000.0)),
    "mistral": cfg("mistral", num_hidden_layers=2, tie_word_embeddings=False, head_dim=16, sliding_window=8,
                   rope_parameters=dict(rope_type="default", rope_theta=1000000.0)),
    "gemma2": cfg("gemma2", num_hidden_layers=2, head_dim=32, query_pre_attn_scalar=24,
                  attn_logit_softcapping=5.0, final_logit_softcapping=3.0, sliding_window=8,
                  hidden_activation="gelu_pytorch_tanh",
                  rope_parameters=dict(rope_type="default", rope_theta=10000.0)),
    "gemma3": cfg("gemma3_text", num_hidden_layers=3, num_attention_heads=2, num_key_value_heads=1,
                  head_dim=256, query_pre_attn_scalar=256, sliding_window=8,
                  layer_types=["sliding_attention", "sliding_attention", "full_attention"],
                  hidden_activation="gelu_pytorch_tanh",
                  rope_parameters={"full_attention": dict(rope_type="linear", rope_theta=1000000.0, factor=8.0),
                                   "sliding_attention": dict(rope_type="default", rope_theta=10000.0)}),
    "phi3": cfg("phi3", num_hidden_layers=2, tie_word_embeddings=False,
                rope_parameters=dict(rope_type="default", rope_theta=10000.0)),
    # mixtures of experts with random routers (top-k really routes: each token picks its own experts)
    "mixtral_routed": cfg("mixtral", num_hidden_layers=2, tie_word_embeddings=False, num_local_experts=4,
                          num_experts_per_tok=2, rope_parameters=dict(rope_type="default", rope_theta=1000000.0)),
    "qwen3_moe_routed": cfg("qwen3_moe", num_hidden_layers=2, tie_word_embeddings=False, head_dim=32, num_experts=4,
                            num_experts_per_tok=2, moe_intermediate_size=64, norm_topk_prob=False,
                            decoder_sparse_step=1, mlp_only_layers=[],
                            rope_parameters=dict(rope_type="default", rope_theta=1000000.0)),
}

GEMMA = ("gemma2", "gemma3_text")


def init_weights(model, model_type, gen):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                v = 0.1 * torch.randn(p.shape, generator=gen)
                if model_type not in GEMMA:
                    v += 1.0
            elif name.endswith(".bias"):
                v = 0.2 * torch.randn(p.shape, generator=gen)
            elif "embed_tokens" in name:
                v = 0.5 * torch.randn(p.shape, generator=gen)
            elif "lm_head" in name:
                v = 3.0 * torch.randn(p.shape, generator=gen) / math.sqrt(p.shape[1])
            else:  # (fan-in: the last dimension, also of transformers 5's 3-D expert tensors)
                v = torch.randn(p.shape, generator=gen) / math.sqrt(p.shape[-1])
            p.copy_(v.to(torch.bfloat16).to(torch.float32))


def rotary_info(model):
    out = {}
    for name, mod in model.named_modules():
        for bname, buf in mod.named_buffers(recurse=False):
            if "inv_freq" in bname:
                out[f"{name}.{bname}"] = [float(x) for x in buf.flatten()]
        if "Rotary" not in type(mod).__name__:
            continue
        for attr in list(vars(mod)):
            if "attention_scaling" in attr:
                v = getattr(mod, attr, None)
                if isinstance(v, (int, float)):
                    out[f"{name}.{attr}"] = float(v)
                elif isinstance(v, dict):
                    out[f"{name}.{attr}"] = {k: float(x) for k, x in v.items() if isinstance(x, (int, float))}
    return out


def make(name, model_type, kw, out_dir, tok_dir):
    gen = torch.Generator().manual_seed(1234)
    config = AutoConfig.for_model(model_type, **kw)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager", dtype=torch.float32)
    model.eval()
    init_weights(model, model_type, gen)
    if getattr(config, "tie_word_embeddings", False):
        model.tie_weights()
    tokens = torch.randint(0, 289, (40,), generator=gen)
    with torch.no_grad():
        logits = model(tokens[None]).logits[0].float()
        lp = torch.log_softmax(logits, dim=-1)
        logprobs = [float(lp[i, tokens[i + 1]]) for i in range(39)]
        prompt = tokens[:20][None]
        g = model.generate(prompt, do_sample=False, max_new_tokens=16, min_new_tokens=16,
                           return_dict_in_generate=True, output_logits=True, pad_token_id=0)
        gen_ids = [int(t) for t in g.sequences[0, 20:]]
        margins = []
        for lg in g.logits:
            top = torch.topk(lg[0].float(), 2).values
            margins.append(float(top[0] - top[1]))
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    model.to(torch.bfloat16).save_pretrained(d)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(tok_dir, f), d)
    ref = dict(transformers=transformers.__version__, tokens=[int(t) for t in tokens], logprobs=logprobs,
               ppl=math.exp(-sum(logprobs) / len(logprobs)), prompt=[int(t) for t in tokens[:20]], gen=gen_ids,
               margins=margins, last_logits=[float(x) for x in logits[-1]], inv_freq=rotary_info(model))
    with open(os.path.join(d, "ref.json"), "w") as f:
        json.dump(ref, f, indent=0)
    print(f"{name}: gen {gen_ids[:8]}... ppl {ref['ppl']:.4f} min margin {min(margins):.4f}", flush=True)


def main():
    out_dir = sys.argv[1]
    tok_dir = sys.argv[2] if len(sys.argv) > 2 else "tests/data/tok_bpe"
    torch.set_num_threads(4)
    failed = 0
    only = sys.argv[3].split(",") if len(sys.argv) > 3 else list(FIXTURES)
    for name in only:
        if name not in FIXTURES:
            print(f"{name}: no such fixture ({', '.join(FIXTURES)})")
            return 2
    for name, (mt, kw) in FIXTURES.items():
        if name not in only:
            continue
        try:
            make(name, mt, kw, out_dir, tok_dir)
        except Exception:
            failed += 1
            print(f"{name}: FAILED", flush=True)
            traceback.print_exc()
    print(f"transformers {transformers.__version__}, torch {torch.__version__}: {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
