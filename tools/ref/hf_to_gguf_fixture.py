#!/usr/bin/env python3
"""hf_to_gguf_fixture.py — the tiny Hugging Face fixtures of tests/data/hf/ as GGUF files laid out
as llama.cpp's converter lays them out (stdlib only), so test_arch_gguf can check octet's GGUF
loader against the same transformers reference (ref.json beside each checkpoint).

Conventions followed: tensor names blk.N.*; llama / mistral Q and K rows permuted from rotate-half
into adjacent pairs (the other families stay in HF order and rotate halves); Llama-3 scaling as
rope_freqs.weight; Gemma's norms stored as 1 + w in f32; Phi-3's fused attn_qkv and gate+up in
ffn_up; norms f32, matrices bf16 as stored. Sliding layers that the family's default period does
not give are written as ARCH.attention.sliding_window_pattern.
Usage (from the repo root): python3 tools/ref/hf_to_gguf_fixture.py [OUT_DIR]
"""
import json
import math
import os
import struct
import sys

U32, I32, F32, BOOL, STR, ARR = 4, 5, 6, 7, 8, 9
GGML_F32, GGML_BF16 = 0, 30

FIXTURES = {  # fixture → GGUF architecture
    "llama3_rope": "llama", "mistral": "mistral", "qwen2": "qwen2", "qwen3": "qwen3", "gemma3": "gemma3",
    "phi3": "phi3",
}


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        out[name] = (t["dtype"], t["shape"], data[a:b])
    return out


def bf16_to_f32_list(raw):
    return [struct.unpack("<f", struct.pack("<I", u << 16))[0] for u in struct.unpack(f"<{len(raw) // 2}H", raw)]


def permute_rows(raw, rows, n_heads):
    """HF rotate-half row order → adjacent pairs: row h*hd + i*hd/2 + j goes to h*hd + 2j + i."""
    rb = len(raw) // rows
    hd = rows // n_heads
    out = [None] * rows
    for h in range(n_heads):
        for i in range(2):
            for j in range(hd // 2):
                out[h * hd + 2 * j + i] = raw[(h * hd + i * hd // 2 + j) * rb:(h * hd + i * hd // 2 + j + 1) * rb]
    return b"".join(out)


def gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gval(t, v):
    return {U32: lambda: struct.pack("<I", v), F32: lambda: struct.pack("<f", v), BOOL: lambda: struct.pack("<B", v),
            STR: lambda: gstr(v)}[t]()


def write_gguf(path, kvs, tensors):
    """kvs: (key, type, value) or (key, ARR, (elem_type, items)); tensors: (name, ggml_type, ne, bytes)."""
    out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)))
    for key, t, v in kvs:
        out += gstr(key) + struct.pack("<I", t)
        if t == ARR:
            out += struct.pack("<IQ", v[0], len(v[1])) + b"".join(gval(v[0], x) for x in v[1])
        else:
            out += gval(t, v)
    offset = 0
    for name, gt, ne, raw in tensors:
        out += gstr(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", x) for x in ne)
        out += struct.pack("<IQ", gt, offset)
        offset += len(raw) + (-len(raw)) % 32
    out += b"\0" * ((-len(out)) % 32)
    for _, _, _, raw in tensors:
        out += raw + b"\0" * ((-len(raw)) % 32)
    with open(path, "wb") as f:
        f.write(out)


def llama3_factors(rp, hd):
    """Llama-3 scaling as llama.cpp stores it: per-pair divisors of the plain inverse frequencies."""
    base, f = rp["rope_theta"], rp["factor"]
    lo, hi, orig = rp["low_freq_factor"], rp["high_freq_factor"], rp["original_max_position_embeddings"]
    out = []
    for i in range(hd // 2):
        fr = 1.0 / base ** (2 * i / hd)
        wl = 2 * math.pi / fr
        if wl < orig / hi:
            new = fr
        elif wl > orig / lo:
            new = fr / f
        else:
            s = (orig / wl - lo) / (hi - lo)
            new = (1 - s) * fr / f + s * fr
        out.append(fr / new)
    return out


def convert(name, arch, src, dst):
    cfg = json.load(open(os.path.join(src, "config.json")))
    st = read_safetensors(os.path.join(src, "model.safetensors"))
    L, H, KV = cfg["num_hidden_layers"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or cfg["hidden_size"] // H
    gemma = arch.startswith("gemma")
    permute = arch in ("llama", "mistral")
    rp = cfg["rope_parameters"]
    global_rp = rp.get("full_attention", rp)
    kvs = [("general.architecture", STR, arch), (f"{arch}.block_count", U32, L),
           (f"{arch}.embedding_length", U32, cfg["hidden_size"]), (f"{arch}.feed_forward_length", U32,
                                                                   cfg["intermediate_size"]),
           (f"{arch}.attention.head_count", U32, H), (f"{arch}.attention.head_count_kv", U32, KV),
           (f"{arch}.attention.key_length", U32, hd), (f"{arch}.attention.value_length", U32, hd),
           (f"{arch}.context_length", U32, cfg["max_position_embeddings"]),
           (f"{arch}.attention.layer_norm_rms_epsilon", F32, cfg["rms_norm_eps"]),
           (f"{arch}.rope.freq_base", F32, global_rp["rope_theta"]), (f"{arch}.rope.dimension_count", U32, hd)]
    if global_rp.get("rope_type") == "linear":
        kvs += [(f"{arch}.rope.scaling.type", STR, "linear"), (f"{arch}.rope.scaling.factor", F32, global_rp["factor"])]
    if "sliding_attention" in rp:
        kvs.append((f"{arch}.rope.freq_base_swa", F32, rp["sliding_attention"]["rope_theta"]))
    window = cfg.get("sliding_window") or 0
    if arch == "qwen2" and not cfg.get("use_sliding_window"):
        window = 0
    if window:
        kvs.append((f"{arch}.attention.sliding_window", U32, window))
        lt = cfg.get("layer_types")
        if lt and arch != "mistral":
            kvs.append((f"{arch}.attention.sliding_window_pattern", ARR, (BOOL, [t == "sliding_attention" for t in lt])))
    tensors = []

    def add(gname, hname, perm_heads=0, norm=False):
        dt, shape, raw = st[hname]
        assert dt == "BF16", (hname, dt)
        if perm_heads:
            raw = permute_rows(raw, shape[0], perm_heads)
        if norm:
            vals = [x + 1.0 for x in bf16_to_f32_list(raw)] if gemma else bf16_to_f32_list(raw)
            tensors.append((gname, GGML_F32, list(reversed(shape)), struct.pack(f"<{len(vals)}f", *vals)))
        else:
            tensors.append((gname, GGML_BF16, list(reversed(shape)), raw))

    add("token_embd.weight", "model.embed_tokens.weight")
    add("output_norm.weight", "model.norm.weight", norm=True)
    if "lm_head.weight" in st and not cfg.get("tie_word_embeddings"):
        add("output.weight", "lm_head.weight")
    if global_rp.get("rope_type") == "llama3":
        fac = llama3_factors(global_rp, hd)
        tensors.append(("rope_freqs.weight", GGML_F32, [len(fac)], struct.pack(f"<{len(fac)}f", *fac)))
    for i in range(L):
        p, b = f"model.layers.{i}.", f"blk.{i}."
        add(b + "attn_norm.weight", p + "input_layernorm.weight", norm=True)
        if arch == "phi3":
            add(b + "attn_qkv.weight", p + "self_attn.qkv_proj.weight")
            add(b + "ffn_up.weight", p + "mlp.gate_up_proj.weight")
        else:
            add(b + "attn_q.weight", p + "self_attn.q_proj.weight", H if permute else 0)
            add(b + "attn_k.weight", p + "self_attn.k_proj.weight", KV if permute else 0)
            add(b + "attn_v.weight", p + "self_attn.v_proj.weight")
            add(b + "ffn_gate.weight", p + "mlp.gate_proj.weight")
            add(b + "ffn_up.weight", p + "mlp.up_proj.weight")
        add(b + "attn_output.weight", p + "self_attn.o_proj.weight")
        add(b + "ffn_down.weight", p + "mlp.down_proj.weight")
        for x in ("q", "k", "v"):
            if p + f"self_attn.{x}_proj.bias" in st:
                add(b + f"attn_{x}.bias", p + f"self_attn.{x}_proj.bias")
        if p + "self_attn.q_norm.weight" in st:
            add(b + "attn_q_norm.weight", p + "self_attn.q_norm.weight", norm=True)
            add(b + "attn_k_norm.weight", p + "self_attn.k_norm.weight", norm=True)
        if gemma:
            add(b + "post_attention_norm.weight", p + "post_attention_layernorm.weight", norm=True)
            add(b + "ffn_norm.weight", p + "pre_feedforward_layernorm.weight", norm=True)
            add(b + "post_ffw_norm.weight", p + "post_feedforward_layernorm.weight", norm=True)
        else:
            add(b + "ffn_norm.weight", p + "post_attention_layernorm.weight", norm=True)
    write_gguf(dst, kvs, tensors)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/data/hf_gguf"
    os.makedirs(out, exist_ok=True)
    for name, arch in FIXTURES.items():
        convert(name, arch, os.path.join("tests/data/hf", name), os.path.join(out, name + ".gguf"))
        print(name, "->", arch)


if __name__ == "__main__":
    main()
