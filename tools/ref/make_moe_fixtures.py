#!/usr/bin/env python3
"""make_moe_fixtures.py — tiny mixture-of-experts checkpoints (Mixtral, Qwen3-MoE) whose exact outputs
transformers has already computed: each is derived from a dense fixture of tests/data/hf/ (saved by
transformers 5 with its ref.json, tools/ref/make_hf_fixtures.py) so that the MoE layer computes the
same function as the dense MLP, and the dense ref.json is the reference (stdlib only).

Two constructions, each exact in bf16:
  identical experts   every expert is the dense MLP; the router is random. Any top-k with weights
                      renormalised to sum 1 (Mixtral; Qwen3-MoE with norm_topk_prob) gives the MLP.
  split experts       the dense MLP's F hidden units cut into E experts of F/E units each (gate and
                      up rows, down columns), down multiplied by E (a power of two); the router is
                      zero, so softmax gives 1/E each, and with top-k = E the weighted sum is the MLP.
The checkpoints are written in both layouts octet reads: one 2-D tensor per expert (Mixtral's
block_sparse_moe.experts.E.w1/w2/w3, Qwen3-MoE's mlp.experts.E.gate_proj/up_proj/down_proj) and
transformers 5's 3-D mlp.experts.gate_up_proj [E][2F][D] / mlp.experts.down_proj [E][D][F]; and as
GGUF files laid out as llama.cpp's converter lays out MoE models (ffn_gate_inp, ffn_{gate,up,down}_exps).
Usage (from the repo root): python3 tools/ref/make_moe_fixtures.py [HF_OUT [GGUF_OUT]]
"""
import json
import os
import random
import shutil
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_to_gguf_fixture import (ARR, BOOL, F32, GGML_BF16, GGML_F32, STR, U32, bf16_to_f32_list,  # noqa: E402
                                permute_rows, read_safetensors, write_gguf)

E = 4
FIXTURES = {
    # name: (dense source, HF architecture, model_type, experts used, norm_topk, construction, layout)
    "mixtral": ("mistral", "MixtralForCausalLM", "mixtral", 2, True, "identical", "per_expert"),
    "mixtral_fused": ("mistral", "MixtralForCausalLM", "mixtral", 4, True, "split", "fused"),
    "qwen3_moe": ("qwen3", "Qwen3MoeForCausalLM", "qwen3_moe", 4, False, "split", "fused"),
    "qwen3_moe_topk": ("qwen3", "Qwen3MoeForCausalLM", "qwen3_moe", 2, True, "identical", "per_expert"),
}
GGUF = {"mixtral": "llama", "qwen3_moe_topk": "qwen3moe"}  # fixture → GGUF architecture


def bf16_scaled(raw, s):
    """bf16 values times s (a power of two: exact)."""
    vals = [x * s for x in bf16_to_f32_list(raw)]
    return b"".join(struct.pack("<H", struct.unpack("<I", struct.pack("<f", v))[0] >> 16) for v in vals)


def random_bf16(n, rng, std):
    return b"".join(struct.pack("<H", struct.unpack("<I", struct.pack("<f", rng.gauss(0, std)))[0] >> 16)
                    for _ in range(n))


def cols(raw, rows, ncols, c0, c1):
    """Columns [c0, c1) of a bf16 [rows][ncols] matrix."""
    return b"".join(raw[(r * ncols + c0) * 2:(r * ncols + c1) * 2] for r in range(rows))


def write_safetensors(path, tensors):
    """tensors: name → (shape, bf16 bytes)."""
    header, off = {}, 0
    for name, (shape, raw) in tensors.items():
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [off, off + len(raw)]}
        off += len(raw)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((-len(h)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for _, raw in tensors.values():
            f.write(raw)


def experts_of(st, p, D, F, k_used, construction, rng):
    """Router [E][D] and per expert (gate [Fe][D], up [Fe][D], down [D][Fe]) from the dense MLP at prefix p."""
    g, u, d = (st[p + f"mlp.{x}_proj.weight"][2] for x in ("gate", "up", "down"))
    if construction == "identical":
        return random_bf16(E * D, rng, 0.4), F, [(g, u, d)] * E
    assert k_used == E and F % E == 0
    fe = F // E
    row = D * 2
    ex = [(g[e * fe * row:(e + 1) * fe * row], u[e * fe * row:(e + 1) * fe * row],
           bf16_scaled(cols(d, D, F, e * fe, (e + 1) * fe), float(E))) for e in range(E)]
    return b"\0" * (E * D * 2), fe, ex


def make(name, spec, out_dir):
    src_name, arch, mtype, k_used, norm, construction, layout = spec
    src = os.path.join("tests/data/hf", src_name)
    cfg = json.load(open(os.path.join(src, "config.json")))
    st = read_safetensors(os.path.join(src, "model.safetensors"))
    D, F, L = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    rng = random.Random(name)
    out = {}
    for key, (dt, shape, raw) in st.items():
        if ".mlp." not in key:
            out[key] = (shape, raw)
    blk = "block_sparse_moe" if mtype == "mixtral" and layout == "per_expert" else "mlp"
    for layer in range(L):
        p = f"model.layers.{layer}."
        router, fe, ex = experts_of(st, p, D, F, k_used, construction, rng)
        out[p + blk + ".gate.weight"] = ([E, D], router)
        if layout == "fused":
            out[p + blk + ".experts.gate_up_proj"] = ([E, 2 * fe, D], b"".join(g + u for g, u, _ in ex))
            out[p + blk + ".experts.down_proj"] = ([E, D, fe], b"".join(d for _, _, d in ex))
        else:
            names = ("w1", "w3", "w2") if mtype == "mixtral" else ("gate_proj", "up_proj", "down_proj")
            for e, mats in enumerate(ex):
                for nm, raw, shape in zip(names, mats, ([fe, D], [fe, D], [D, fe])):
                    out[f"{p}{blk}.experts.{e}.{nm}.weight"] = (shape, raw)
    cfg["architectures"], cfg["model_type"] = [arch], mtype
    cfg["num_experts_per_tok"] = k_used
    cfg["router_aux_loss_coef"] = 0.001
    cfg["output_router_logits"] = False
    if mtype == "mixtral":
        cfg["num_local_experts"] = E
        cfg["intermediate_size"] = fe
        cfg["router_jitter_noise"] = 0.0
    else:
        cfg.update(num_experts=E, moe_intermediate_size=fe, norm_topk_prob=norm, decoder_sparse_step=1,
                   mlp_only_layers=[])
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    write_safetensors(os.path.join(d, "model.safetensors"), out)
    ref = json.load(open(os.path.join(src, "ref.json")))
    ref["derived_from"] = f"tests/data/hf/{src_name} ({construction} experts, top-{k_used} of {E})"
    with open(os.path.join(d, "ref.json"), "w") as f:
        json.dump(ref, f, indent=0)
    for fn in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        shutil.copy(os.path.join(src, fn), d)
    return cfg, out


def to_gguf(cfg, st, arch, path):
    L, H, KV, D = cfg["num_hidden_layers"], cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["hidden_size"]
    hd = cfg.get("head_dim") or D // H
    fe = cfg.get("moe_intermediate_size") or cfg["intermediate_size"]
    rp = cfg["rope_parameters"]
    kvs = [("general.architecture", STR, arch), (f"{arch}.block_count", U32, L), (f"{arch}.embedding_length", U32, D),
           (f"{arch}.feed_forward_length", U32, fe), (f"{arch}.attention.head_count", U32, H),
           (f"{arch}.attention.head_count_kv", U32, KV), (f"{arch}.attention.key_length", U32, hd),
           (f"{arch}.attention.value_length", U32, hd), (f"{arch}.context_length", U32, cfg["max_position_embeddings"]),
           (f"{arch}.attention.layer_norm_rms_epsilon", F32, cfg["rms_norm_eps"]),
           (f"{arch}.rope.freq_base", F32, rp["rope_theta"]), (f"{arch}.rope.dimension_count", U32, hd),
           (f"{arch}.expert_count", U32, E), (f"{arch}.expert_used_count", U32, cfg["num_experts_per_tok"])]
    if arch == "qwen3moe":
        kvs.append((f"{arch}.expert_feed_forward_length", U32, fe))
    if cfg.get("sliding_window"):
        kvs.append((f"{arch}.attention.sliding_window", U32, cfg["sliding_window"]))
    permute = arch == "llama"
    tensors = []

    def add(gname, shape, raw, perm_heads=0, norm=False):
        if perm_heads:
            raw = permute_rows(raw, shape[0], perm_heads)
        if norm:
            vals = bf16_to_f32_list(raw)
            tensors.append((gname, GGML_F32, list(reversed(shape)), struct.pack(f"<{len(vals)}f", *vals)))
        else:
            tensors.append((gname, GGML_BF16, list(reversed(shape)), raw))

    def t(n):
        return st[n][0], st[n][1]

    add("token_embd.weight", *t("model.embed_tokens.weight"))
    add("output_norm.weight", *t("model.norm.weight"), norm=True)
    if "lm_head.weight" in st:
        add("output.weight", *t("lm_head.weight"))
    for i in range(L):
        p, b = f"model.layers.{i}.", f"blk.{i}."
        blk = p + ("block_sparse_moe" if p + "block_sparse_moe.gate.weight" in st else "mlp")
        names = ("w1", "w3", "w2") if "block_sparse_moe" in blk else ("gate_proj", "up_proj", "down_proj")
        add(b + "attn_norm.weight", *t(p + "input_layernorm.weight"), norm=True)
        add(b + "attn_q.weight", *t(p + "self_attn.q_proj.weight"), H if permute else 0)
        add(b + "attn_k.weight", *t(p + "self_attn.k_proj.weight"), KV if permute else 0)
        add(b + "attn_v.weight", *t(p + "self_attn.v_proj.weight"))
        add(b + "attn_output.weight", *t(p + "self_attn.o_proj.weight"))
        if p + "self_attn.q_norm.weight" in st:
            add(b + "attn_q_norm.weight", *t(p + "self_attn.q_norm.weight"), norm=True)
            add(b + "attn_k_norm.weight", *t(p + "self_attn.k_norm.weight"), norm=True)
        add(b + "ffn_norm.weight", *t(p + "post_attention_layernorm.weight"), norm=True)
        add(b + "ffn_gate_inp.weight", *t(blk + ".gate.weight"))
        for g, nm, shape in zip(("ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"), names,
                                ([E, fe, D], [E, fe, D], [E, D, fe])):
            raw = b"".join(st[f"{blk}.experts.{e}.{nm}.weight"][1] for e in range(E))
            add(b + g + ".weight", shape, raw)
    write_gguf(path, kvs, tensors)


def main():
    hf_out = sys.argv[1] if len(sys.argv) > 1 else "tests/data/hf"
    gguf_out = sys.argv[2] if len(sys.argv) > 2 else "tests/data/hf_gguf"
    os.makedirs(gguf_out, exist_ok=True)
    for name, spec in FIXTURES.items():
        cfg, st = make(name, spec, hf_out)
        print(name, "<-", spec[0], spec[5], "experts", spec[6])
        if name in GGUF:
            to_gguf(cfg, st, GGUF[name], os.path.join(gguf_out, name + ".gguf"))
            print(name, "->", GGUF[name], "gguf")


if __name__ == "__main__":
    main()
