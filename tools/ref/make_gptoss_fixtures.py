#!/usr/bin/env python3
"""make_gptoss_fixtures.py — tiny random-weight GptOssForCausalLM checkpoints run by transformers, for
tests/unit/test_gptoss.c (gptoss_fixtures_match_transformers):

  gptoss        bf16 experts, as save_pretrained writes them (mlp.experts.gate_up_proj [E][D][2F] with
                the gate in the even columns, gate_up_proj_bias, down_proj [E][F][D], down_proj_bias)
  gptoss_mxfp4  the same architecture with MXFP4 experts as openai/gpt-oss ships them: *_blocks
                [E][out][in/32][16] (uint8, two e2m1 codes a byte, the low nibble first) and *_scales
                [E][out][in/32] (uint8 e8m0 exponents, 2^(s-127)), quantization_config quant_method mxfp4.
                The random expert weights are quantized here in NumPy (per 32 inputs: the smallest
                exponent that brings the block's max magnitude to 6 or less, then the nearest e2m1 value,
                ties to the smaller), and transformers runs on the dequantized values, which are exact
                in bf16 and f32, so both sides compute the same function.

Both: 4 layers alternating sliding_attention (window 8, so the window matters on the 40-token
sequence) and full_attention, hidden 64, 4 query / 2 KV heads of 16, 4 experts of 64 (top 2), q/k/v/o
biases, attention sinks, YaRN (factor 4 over 16 positions, truncate false), swiglu_limit 7 with gate/up
weights large enough that the clamp acts. Eager attention (the one with sinks), float32 on the CPU.

Each fixture is NAME/ holding config.json, model.safetensors, the BPE tokenizer of tests/data/tok_bpe
and ref.json in make_hf_fixtures.py's schema (tokens, logprobs, ppl, prompt, gen, margins, last_logits,
inv_freq), plus clamped: the fraction of gate and up values the clamp changed in the teacher-forced run.

Needs torch, transformers 5 and numpy (the GPU machine has them; no network). From the repo root:
  python3 tools/ref/make_gptoss_fixtures.py tests/data/hf [tests/data/tok_bpe [NAME,NAME]]
"""
import json
import math
import os
import shutil
import sys
import traceback

import numpy as np
import torch
import transformers
from safetensors import safe_open
from safetensors.torch import save_file
from transformers import AutoConfig, AutoModelForCausalLM

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_hf_fixtures import rotary_info  # noqa: E402

E, D, F, LAYERS = 4, 64, 64, 4
KW = dict(hidden_size=D, intermediate_size=F, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
          num_hidden_layers=LAYERS, layer_types=["sliding_attention", "full_attention"] * (LAYERS // 2),
          sliding_window=8, num_local_experts=E, num_experts_per_tok=2, vocab_size=320, max_position_embeddings=64,
          rms_norm_eps=1e-5, tie_word_embeddings=False, attention_bias=True, swiglu_limit=7.0,
          rope_parameters=dict(rope_type="yarn", rope_theta=150000.0, factor=4.0, beta_fast=32.0, beta_slow=1.0,
                               truncate=False, original_max_position_embeddings=16),
          bos_token_id=None, eos_token_id=None, pad_token_id=None)

FP4 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=np.float64)


def init_weights(model, gen):
    """Random weights, each rounded to bf16 (the stored values are exactly what the reference uses)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            r = torch.randn(p.shape, generator=gen)
            if name.endswith("norm.weight"):
                v = 1.0 + 0.1 * r
            elif "embed_tokens" in name:
                v = 0.5 * r
            elif "lm_head" in name:
                v = 3.0 * r / math.sqrt(D)
            elif name.endswith("self_attn.sinks"):
                v = 1.0 * r
            elif name.endswith("experts.gate_up_proj"):  # [E][D][2F]: fan-in D; std 3 so the clamp acts
                v = 3.0 * r / math.sqrt(p.shape[1])
            elif name.endswith("experts.down_proj"):     # [E][F][D]: fan-in F
                v = 0.3 * r / math.sqrt(p.shape[1])
            elif name.endswith("_bias") or name.endswith(".bias"):
                v = 0.3 * r
            else:                                         # nn.Linear [out][in] (attention, router)
                v = r / math.sqrt(p.shape[-1])
            p.copy_(v.to(torch.bfloat16).to(torch.float32))


def quantize_mxfp4(w):
    """w [E][R][C] float → (blocks [E][R][C/32][16] uint8, scales [E][R][C/32] uint8, dequantized [E][R][C])."""
    e_, r_, c_ = w.shape
    g = w.astype(np.float64).reshape(e_, r_, c_ // 32, 32)
    amax = np.abs(g).max(axis=-1)
    with np.errstate(divide="ignore"):
        ex = np.where(amax > 0, np.ceil(np.log2(amax / 6.0)), -127.0)
    ex = np.clip(ex, -127, 127)
    ex = np.where(amax / np.exp2(ex) > 6.0, ex + 1, ex)  # (log2 rounding at an exact power of two)
    scaled = g / np.exp2(ex)[..., None]
    idx = np.abs(np.abs(scaled)[..., None] - FP4).argmin(axis=-1)  # nearest, ties to the smaller magnitude
    code = (idx | np.where(scaled < 0, 8, 0)).astype(np.uint8)
    deq = np.where(code & 8, -1.0, 1.0) * FP4[code & 7] * np.exp2(ex)[..., None]
    blocks = (code[..., 0::2] | (code[..., 1::2] << 4)).astype(np.uint8)
    scales = (ex + 127).astype(np.uint8)
    assert np.all(np.abs(scaled) <= 6.0) and np.all(np.abs(deq - g) <= np.exp2(ex)[..., None])
    return blocks, scales, deq.reshape(e_, r_, c_)


def clamp_stats(model, tokens):
    """Fraction of every expert's gate and up values (routed or not) that the clamp changes over the
    teacher-forced run; None where this transformers version's experts module is not the one read here."""
    counts = [0, 0]

    def hook(mod, args, kwargs):
        x = args[0].reshape(-1, mod.hidden_size) if args else kwargs["hidden_states"].reshape(-1, mod.hidden_size)
        gu = torch.einsum("td,edf->etf", x, mod.gate_up_proj) + mod.gate_up_proj_bias[:, None, :]
        gate, up = gu[..., ::2], gu[..., 1::2]
        lim = getattr(mod, "limit", 7.0)
        counts[0] += int((gate > lim).sum()) + int((up.abs() > lim).sum())
        counts[1] += gate.numel() + up.numel()

    hs = [m.register_forward_pre_hook(hook, with_kwargs=True) for m in model.modules()
          if type(m).__name__ == "GptOssExperts"]
    try:
        with torch.no_grad():
            model(tokens[None])
    except Exception:  # (a diagnostic only)
        return None
    finally:
        for h in hs:
            h.remove()
    return counts[0] / counts[1] if counts[1] else None


def experts_of(model, layer):
    return model.model.layers[layer].mlp.experts


def make(name, out_dir, tok_dir):
    gen = torch.Generator().manual_seed(4321)
    config = AutoConfig.for_model("gpt_oss", **KW)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager", dtype=torch.float32)
    model.eval()
    init_weights(model, gen)
    ex0 = experts_of(model, 0)
    if tuple(ex0.gate_up_proj.shape) != (E, D, 2 * F) or tuple(ex0.down_proj.shape) != (E, F, D):
        raise RuntimeError(f"GptOssExperts holds gate_up_proj {tuple(ex0.gate_up_proj.shape)} and down_proj "
                           f"{tuple(ex0.down_proj.shape)}, not [E][D][2F] / [E][F][D]: octet's loader "
                           "(src/model/model_st.c) reads that layout; check this transformers version's experts")
    packed = {}
    if name == "gptoss_mxfp4":
        with torch.no_grad():
            for l in range(LAYERS):
                ex = experts_of(model, l)
                # HF's blocks run over each output row's inputs: gate_up rows are its 2F outputs, down's its D
                gb, gs, gd = quantize_mxfp4(ex.gate_up_proj.detach().numpy().transpose(0, 2, 1))
                db, ds, dd = quantize_mxfp4(ex.down_proj.detach().numpy().transpose(0, 2, 1))
                ex.gate_up_proj.copy_(torch.from_numpy(gd.transpose(0, 2, 1).copy()).float())
                ex.down_proj.copy_(torch.from_numpy(dd.transpose(0, 2, 1).copy()).float())
                p = f"model.layers.{l}.mlp.experts."
                packed.update({p + "gate_up_proj_blocks": gb, p + "gate_up_proj_scales": gs,
                               p + "down_proj_blocks": db, p + "down_proj_scales": ds})
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
    clamped = clamp_stats(model, tokens)
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    model.to(torch.bfloat16)
    if not packed:
        model.save_pretrained(d)
        with safe_open(os.path.join(d, "model.safetensors"), "pt") as f:
            shape = list(f.get_slice("model.layers.0.mlp.experts.gate_up_proj").get_shape())
        if shape != [E, D, 2 * F]:
            raise RuntimeError(f"save_pretrained wrote experts.gate_up_proj as {shape}, not [{E}, {D}, {2 * F}]")
    else:  # the MXFP4 checkpoint: the model's tensors with the experts' weights as blocks and scales
        sd = {k: v.detach().contiguous() for k, v in model.state_dict().items()
              if not k.endswith("experts.gate_up_proj") and not k.endswith("experts.down_proj")}
        sd.update({k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in packed.items()})
        save_file(sd, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
        model.config.save_pretrained(d)
        with open(os.path.join(d, "config.json")) as f:
            cj = json.load(f)
        cj.update(architectures=["GptOssForCausalLM"], dtype="bfloat16")  # (what save_pretrained adds)
        cj["quantization_config"] = {"quant_method": "mxfp4", "modules_to_not_convert": [
            "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cj, f, indent=2)
    for fn in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(tok_dir, fn), d)
    ref = dict(transformers=transformers.__version__, tokens=[int(t) for t in tokens], logprobs=logprobs,
               ppl=math.exp(-sum(logprobs) / len(logprobs)), prompt=[int(t) for t in tokens[:20]], gen=gen_ids,
               margins=margins, last_logits=[float(x) for x in logits[-1]], inv_freq=rotary_info(model),
               clamped=clamped)
    with open(os.path.join(d, "ref.json"), "w") as f:
        json.dump(ref, f, indent=0)
    print(f"{name}: gen {gen_ids[:8]}... ppl {ref['ppl']:.4f} min margin {min(margins):.4f} "
          f"clamped {clamped}", flush=True)


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "tests/data/hf"
    tok_dir = sys.argv[2] if len(sys.argv) > 2 else "tests/data/tok_bpe"
    names = ["gptoss", "gptoss_mxfp4"]
    only = sys.argv[3].split(",") if len(sys.argv) > 3 else names
    torch.set_num_threads(4)
    failed = 0
    for name in only:
        if name not in names:
            print(f"{name}: no such fixture ({', '.join(names)})")
            return 2
        try:
            make(name, out_dir, tok_dir)
        except Exception:
            failed += 1
            print(f"{name}: FAILED", flush=True)
            traceback.print_exc()
    print(f"transformers {transformers.__version__}, torch {torch.__version__}: {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
