#!/usr/bin/env python3
"""gguf_to_safetensors.py: convert a llama-architecture GGUF (F32/F16/BF16 tensors) into a
Hugging Face model directory (config.json + model.safetensors, or N shards plus
model.safetensors.index.json). Standard library only (CI has no numpy).

Tensor bytes are copied unchanged, except attn_q / attn_k, whose rows are un-permuted from
llama.cpp's interleaved RoPE layout back to HF's rotate-half layout: per head of head_dim hd,
HF row (i*hd/2 + j) = GGUF row (2*j + i) for i in {0, 1}, j in [0, hd/2).

usage: gguf_to_safetensors.py IN.gguf OUT_DIR [--shards N]
"""
import argparse
import json
import mmap
import os
import struct
import sys

GGML_TYPES = {0: ("F32", 4, "float32"), 1: ("F16", 2, "float16"), 30: ("BF16", 2, "bfloat16")}
SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
           10: "<Q", 11: "<q", 12: "<d"}


class Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, n):
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError("truncated GGUF at offset %d" % self.pos)
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def unpack(self, fmt):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self):
        return bytes(self.take(self.unpack("<Q"))).decode("utf-8", errors="replace")

    def value(self, t):
        if t in SCALARS:
            return self.unpack(SCALARS[t])
        if t == 8:
            return self.string()
        if t == 9:
            et, n = self.unpack("<I"), self.unpack("<Q")
            return [self.value(et) for _ in range(n)]
        raise ValueError("bad GGUF value type %d" % t)


def read_gguf(path):
    with open(path, "rb") as f:  # mapped, not read: models can be large
        data = memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))
    r = Reader(data)
    if bytes(r.take(4)) != b"GGUF":
        raise ValueError("%s: not a GGUF file" % path)
    version = r.unpack("<I")
    if version not in (2, 3):
        raise ValueError("%s: GGUF version %d not supported" % (path, version))
    n_tensors, n_kv = r.unpack("<Q"), r.unpack("<Q")
    kv = {}
    for _ in range(n_kv):
        key = r.string()
        kv[key] = r.value(r.unpack("<I"))
    infos = []
    for _ in range(n_tensors):
        name = r.string()
        n_dims = r.unpack("<I")
        ne = [r.unpack("<Q") for _ in range(n_dims)]
        gtype, off = r.unpack("<I"), r.unpack("<Q")
        if gtype not in GGML_TYPES:
            raise ValueError("%s: tensor %s: ggml type %d not supported (F32/F16/BF16 only)"
                             % (path, name, gtype))
        infos.append((name, ne, gtype, off))
    align = kv.get("general.alignment", 32)
    start = (r.pos + align - 1) // align * align
    tensors = {}
    for name, ne, gtype, off in infos:
        n = GGML_TYPES[gtype][1]
        for d in ne:
            n *= d
        if start + off + n > len(data):
            raise ValueError("%s: tensor %s: data out of range" % (path, name))
        tensors[name] = (ne, gtype, data[start + off:start + off + n])
    return kv, tensors


def unpermute_rows(raw, ne, gtype, n_heads):
    """Rows (ne[1] of them, ne[0] elements each): per head, HF row i*hd/2+j = GGUF row 2j+i."""
    row_bytes = ne[0] * GGML_TYPES[gtype][1]
    n_rows = len(raw) // row_bytes
    hd = n_rows // n_heads
    if hd * n_heads != n_rows or hd % 2:
        raise ValueError("cannot un-permute %d rows into %d heads" % (n_rows, n_heads))
    out = bytearray(len(raw))
    for h in range(n_heads):
        for i in range(2):
            for j in range(hd // 2):
                dst = (h * hd + i * hd // 2 + j) * row_bytes
                src = (h * hd + 2 * j + i) * row_bytes
                out[dst:dst + row_bytes] = raw[src:src + row_bytes]
    return bytes(out)


def hf_name(name):
    simple = {"token_embd.weight": "model.embed_tokens.weight",
              "output_norm.weight": "model.norm.weight", "output.weight": "lm_head.weight"}
    if name in simple:
        return simple[name]
    parts = name.split(".")
    if len(parts) == 4 and parts[0] == "blk" and parts[1].isdigit() and parts[3] == "weight":
        per_layer = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
                     "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
                     "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
                     "ffn_down": "mlp.down_proj", "attn_norm": "input_layernorm",
                     "ffn_norm": "post_attention_layernorm"}
        if parts[2] in per_layer:
            return "model.layers.%s.%s.weight" % (parts[1], per_layer[parts[2]])
    return None


def make_config(kv, tensors):
    arch = kv.get("general.architecture")
    if arch != "llama":
        raise ValueError("architecture %r is not llama" % arch)

    def get(key, default=None):
        v = kv.get("llama." + key, default)
        if v is None:
            raise ValueError("missing key llama.%s" % key)
        return v
    n_head = get("attention.head_count")
    hidden = get("embedding_length")
    embd_ne = tensors["token_embd.weight"][0]
    vocab = embd_ne[1]  # the embedding's rows are the truth HF loaders check against
    cfg = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_act": "silu",
        "hidden_size": hidden,
        "intermediate_size": get("feed_forward_length"),
        "num_attention_heads": n_head,
        "num_key_value_heads": get("attention.head_count_kv", n_head),
        "num_hidden_layers": get("block_count"),
        "rms_norm_eps": float(get("attention.layer_norm_rms_epsilon", 1e-5)),
        "rope_theta": float(get("rope.freq_base", 10000.0)),
        "vocab_size": vocab,
        "max_position_embeddings": get("context_length", 2048),
        "tie_word_embeddings": "output.weight" not in tensors,
        "torch_dtype": GGML_TYPES[tensors["token_embd.weight"][1]][2],
        "head_dim": get("attention.key_length", hidden // n_head),
    }
    for k in ("bos", "eos"):
        if "tokenizer.ggml.%s_token_id" % k in kv:
            cfg["%s_token_id" % k] = kv["tokenizer.ggml.%s_token_id" % k]
    return cfg


def write_safetensors(path, items):
    """items: list of (name, gguf ne, ggml type, bytes). Shapes are written in HF order."""
    header, off = {"__metadata__": {"format": "pt"}}, 0
    for name, ne, gtype, raw in items:
        header[name] = {"dtype": GGML_TYPES[gtype][0], "shape": list(reversed(ne)),
                        "data_offsets": [off, off + len(raw)]}
        off += len(raw)
    hb = json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * (-len(hb) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for _, _, _, raw in items:
            f.write(raw)
    return off


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("gguf")
    ap.add_argument("out_dir")
    ap.add_argument("--shards", type=int, default=1)
    args = ap.parse_args()
    if args.shards < 1:
        ap.error("--shards must be >= 1")
    kv, tensors = read_gguf(args.gguf)
    cfg = make_config(kv, tensors)
    items = []
    for name, (ne, gtype, raw) in tensors.items():
        hf = hf_name(name)
        if hf is None:
            print("skipping tensor %s (no HF name)" % name, file=sys.stderr)
            continue
        if name.endswith(".attn_q.weight"):
            raw = unpermute_rows(raw, ne, gtype, cfg["num_attention_heads"])
        elif name.endswith(".attn_k.weight"):
            raw = unpermute_rows(raw, ne, gtype, cfg["num_key_value_heads"])
        items.append((hf, ne, gtype, bytes(raw)))
    os.makedirs(args.out_dir, exist_ok=True)
    with open(os.path.join(args.out_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    if args.shards == 1:
        write_safetensors(os.path.join(args.out_dir, "model.safetensors"), items)
        return
    # split in file order into shards of roughly equal bytes
    total = sum(len(it[3]) for it in items)
    n = min(args.shards, len(items))
    groups, cur, acc = [], [], 0
    for it in items:
        cur.append(it)
        acc += len(it[3])
        if len(groups) < n - 1 and acc >= total * (len(groups) + 1) / n:
            groups.append(cur)
            cur = []
    groups.append(cur)
    weight_map = {}
    for k, group in enumerate(groups):
        fname = "model-%05d-of-%05d.safetensors" % (k + 1, len(groups))
        write_safetensors(os.path.join(args.out_dir, fname), group)
        for it in group:
            weight_map[it[0]] = fname
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    with open(os.path.join(args.out_dir, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    try:
        main()
    except (ValueError, KeyError, OSError) as e:
        print("gguf_to_safetensors: error: %s" % e, file=sys.stderr)
        sys.exit(1)
