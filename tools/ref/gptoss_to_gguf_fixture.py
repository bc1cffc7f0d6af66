#!/usr/bin/env python3
"""gptoss_to_gguf_fixture.py — the gpt-oss fixtures of tests/data/hf/ (tools/ref/make_gptoss_fixtures.py) as
GGUF files laid out as llama.cpp's converter lays out GptOssForCausalLM (general.architecture "gpt-oss"), so
test_gptoss checks octet's GGUF loader against the same transformers reference (stdlib only):

  gptoss_mxfp4.gguf  MXFP4 experts (ggml type 39): each 32-element block is its e8m0 exponent byte, then 16
                     bytes whose byte i holds element i in the low nibble and element i + 16 in the high
                     (HF's blocks hold elements 2i, 2i + 1); gate_up split into ffn_gate_exps (HF's even
                     rows) and ffn_up_exps (odd rows), as the converter does by default; 2-D biases bf16.
  gptoss.gguf        bf16 experts transposed to [E][out][in], gate and up fused into ffn_gate_up_exps (the
                     converter's --fuse-gate-up-exps: an expert's gate rows, then its up rows); biases f32.

Both: blk.N.post_attention_norm for HF's post_attention_layernorm (the norm before the experts),
blk.N.attn_sinks.weight, ffn_gate_inp.{weight,bias}, q/k/v/o biases, norms and 1-D tensors in f32, no Q/K
row permutation (gpt-oss rotates halves), YaRN keys rope.scaling.{type,factor,original_context_length,
yarn_beta_fast,yarn_beta_slow}, attention.sliding_window (the alternating pattern is the family's), and
expert_feed_forward_length.
Usage (from the repo root): python3 tools/ref/gptoss_to_gguf_fixture.py [OUT_DIR]
"""
import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_to_gguf_fixture import F32, GGML_BF16, GGML_F32, STR, U32, bf16_to_f32_list, read_safetensors, write_gguf  # noqa: E402,E501

GGML_MXFP4 = 39
ARCH = "gpt-oss"


def f32_bytes(raw, dt):
    assert dt == "BF16", dt
    vals = bf16_to_f32_list(raw)
    return struct.pack(f"<{len(vals)}f", *vals)


def rows_of(raw, n_rows, pick):
    """The rows pick(i) of a raw [n_rows][...] tensor, concatenated."""
    rb = len(raw) // n_rows
    return b"".join(raw[r * rb:(r + 1) * rb] for r in pick)


def transpose(raw, a, b, es=2):
    """[a][b] elements of es bytes → [b][a]."""
    return b"".join(raw[(i * b + j) * es:(i * b + j + 1) * es] for j in range(b) for i in range(a))


def ggml_block(scale, blk16):
    """HF's 16 bytes (byte i: elements 2i low, 2i + 1 high) → ggml's (byte i: element i low, i + 16 high)."""
    el = []
    for x in blk16:
        el += [x & 15, x >> 4]
    return bytes([scale]) + bytes(el[i] | el[i + 16] << 4 for i in range(16))


def mxfp4_rows(blocks, scales, E, R, G, pick):
    """HF blocks [E][R][G][16] and scales [E][R][G] → ggml MXFP4 rows of pick(r) for r in range(n) of each expert."""
    out = []
    for e in range(E):
        for r in pick:
            for g in range(G):
                i = (e * R + r) * G + g
                out.append(ggml_block(scales[i], blocks[i * 16:(i + 1) * 16]))
    return b"".join(out)


def convert(src, dst, fused):
    cfg = json.load(open(os.path.join(src, "config.json")))
    st = read_safetensors(os.path.join(src, "model.safetensors"))
    L, H, KV, D = cfg["num_hidden_layers"], cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["hidden_size"]
    F, E, hd, rp = cfg["intermediate_size"], cfg["num_local_experts"], cfg["head_dim"], cfg["rope_parameters"]
    a = ARCH
    kvs = [("general.architecture", STR, a), (f"{a}.block_count", U32, L), (f"{a}.embedding_length", U32, D),
           (f"{a}.feed_forward_length", U32, F), (f"{a}.expert_feed_forward_length", U32, F),
           (f"{a}.attention.head_count", U32, H), (f"{a}.attention.head_count_kv", U32, KV),
           (f"{a}.attention.key_length", U32, hd), (f"{a}.attention.value_length", U32, hd),
           (f"{a}.context_length", U32, cfg["max_position_embeddings"]),
           (f"{a}.attention.layer_norm_rms_epsilon", F32, cfg["rms_norm_eps"]),
           (f"{a}.rope.freq_base", F32, rp["rope_theta"]), (f"{a}.expert_count", U32, E),
           (f"{a}.expert_used_count", U32, cfg["num_experts_per_tok"]),
           (f"{a}.attention.sliding_window", U32, cfg["sliding_window"]),
           (f"{a}.rope.scaling.type", STR, "yarn"), (f"{a}.rope.scaling.factor", F32, rp["factor"]),
           (f"{a}.rope.scaling.original_context_length", U32, rp["original_max_position_embeddings"]),
           (f"{a}.rope.scaling.yarn_beta_fast", F32, rp["beta_fast"]),
           (f"{a}.rope.scaling.yarn_beta_slow", F32, rp["beta_slow"])]
    assert cfg["layer_types"] == ["sliding_attention", "full_attention"] * (L // 2)
    tensors = []

    def add(gname, hname, f32=False):
        dt, shape, raw = st[hname]
        if f32 or len(shape) == 1:
            tensors.append((gname, GGML_F32, list(reversed(shape)), f32_bytes(raw, dt)))
        else:
            tensors.append((gname, GGML_BF16, list(reversed(shape)), raw))

    add("token_embd.weight", "model.embed_tokens.weight")
    add("output_norm.weight", "model.norm.weight")
    add("output.weight", "lm_head.weight")
    for i in range(L):
        p, b = f"model.layers.{i}.", f"blk.{i}."
        add(b + "attn_norm.weight", p + "input_layernorm.weight")
        add(b + "post_attention_norm.weight", p + "post_attention_layernorm.weight")
        for x, y in (("q", "q"), ("k", "k"), ("v", "v"), ("output", "o")):
            add(b + f"attn_{x}.weight", p + f"self_attn.{y}_proj.weight")
            add(b + f"attn_{x}.bias", p + f"self_attn.{y}_proj.bias")
        add(b + "attn_sinks.weight", p + "self_attn.sinks")
        add(b + "ffn_gate_inp.weight", p + "mlp.router.weight")
        add(b + "ffn_gate_inp.bias", p + "mlp.router.bias")
        x = p + "mlp.experts."
        gate, up = range(0, 2 * F, 2), range(1, 2 * F, 2)
        _, _, gub = st[x + "gate_up_proj_bias"]
        bias_dt = GGML_F32 if fused else GGML_BF16
        bias = (lambda r: f32_bytes(r, "BF16")) if fused else (lambda r: r)
        if x + "gate_up_proj_blocks" in st:
            blk, sc = st[x + "gate_up_proj_blocks"][2], st[x + "gate_up_proj_scales"][2]
            G = D // 32
            parts = [("ffn_gate_up_exps", list(gate) + list(up))] if fused else \
                [("ffn_gate_exps", gate), ("ffn_up_exps", up)]
            for name, pick in parts:
                tensors.append((b + name + ".weight", GGML_MXFP4, [D, len(pick), E], mxfp4_rows(blk, sc, E, 2 * F, G,
                                                                                              pick)))
            blk, sc = st[x + "down_proj_blocks"][2], st[x + "down_proj_scales"][2]
            tensors.append((b + "ffn_down_exps.weight", GGML_MXFP4, [F, D, E],
                            mxfp4_rows(blk, sc, E, D, F // 32, range(D))))
        else:
            gu = st[x + "gate_up_proj"][2]  # [E][D][2F]
            t = b"".join(transpose(gu[e * D * 2 * F * 2:(e + 1) * D * 2 * F * 2], D, 2 * F) for e in range(E))
            parts = [("ffn_gate_up_exps", list(gate) + list(up))] if fused else \
                [("ffn_gate_exps", gate), ("ffn_up_exps", up)]
            for name, pick in parts:
                w = b"".join(rows_of(t[e * 2 * F * D * 2:(e + 1) * 2 * F * D * 2], 2 * F, pick) for e in range(E))
                tensors.append((b + name + ".weight", GGML_BF16, [D, len(pick), E], w))
            dn = st[x + "down_proj"][2]  # [E][F][D]
            t = b"".join(transpose(dn[e * F * D * 2:(e + 1) * F * D * 2], F, D) for e in range(E))
            tensors.append((b + "ffn_down_exps.weight", GGML_BF16, [F, D, E], t))
        for name, pick in ([("ffn_gate_up_exps", list(gate) + list(up))] if fused else
                           [("ffn_gate_exps", gate), ("ffn_up_exps", up)]):
            raw = b"".join(rows_of(gub[e * 2 * F * 2:(e + 1) * 2 * F * 2], 2 * F, pick) for e in range(E))
            tensors.append((b + name + ".bias", bias_dt, [len(pick), E], bias(raw)))
        _, _, db = st[x + "down_proj_bias"]
        tensors.append((b + "ffn_down_exps.bias", bias_dt, [D, E], bias(db)))
    write_gguf(dst, kvs, tensors)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/data/hf_gguf"
    os.makedirs(out, exist_ok=True)
    for name, fused in (("gptoss_mxfp4", False), ("gptoss", True)):
        convert(os.path.join("tests/data/hf", name), os.path.join(out, name + ".gguf"), fused)
        print(name, "->", ARCH, "gguf", "(fused gate_up)" if fused else "")


if __name__ == "__main__":
    main()
