#!/usr/bin/env python3
"""export_gguf.py — a GGUF v3 writer for the passkey model (stdlib struct + numpy), and a
random-model generator for checking octet against the NumPy twin (ref_numpy.py).

Owns: the on-disk layout octet reads (src/model/gguf.c, model.c, tokenizer.c): llama
metadata keys, tensor names, F32/F16/BF16 tensor data, and the byte-level "gpt2"
tokenizer (256 byte tokens in GPT-2's byte->unicode order = ids 0..255, then <s> = 256
and </s> = 257, no merges), so one byte is one token.
Not here: training (train.py), reading GGUF (ref_numpy.py).
Layout: a torch Linear weight [out, in] (row-major) is written as is; GGUF's ne is the
reversed numpy shape, [in, out]. Q/K rows are NOT permuted: the torch model applies
RoPE to adjacent pairs (2i, 2i+1), which is what octet does for GGUF llama files.

CLI:
  export_gguf.py --random OUT.gguf [--seed S] [--init-std 0.2] [--dtype f32|f16|bf16] [--layers N ...]
  export_gguf.py --convert IN.gguf OUT.gguf --dtype bf16
"""
import argparse
import struct
import sys

import numpy as np

GGUF_U32, GGUF_I32, GGUF_F32, GGUF_BOOL, GGUF_STR, GGUF_ARR, GGUF_U64 = 4, 5, 6, 7, 8, 9, 10
GGML_F32, GGML_F16, GGML_BF16 = 0, 1, 30
ALIGN = 32

DEFAULT_CFG = dict(dim=256, n_layers=4, n_heads=4, n_kv_heads=2, head_dim=64, ffn_dim=768, vocab=258,
                   norm_eps=1e-5, rope_theta=1e6, context_length=32768)


def bytes_to_unicode():
    """GPT-2's reversible byte -> code point map."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + \
        list(range(ord("\xae"), ord("\xff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def _str(s):
    b = s.encode("utf-8") if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def _val(t, v):
    if t == GGUF_U32:
        return struct.pack("<I", v)
    if t == GGUF_I32:
        return struct.pack("<i", v)
    if t == GGUF_U64:
        return struct.pack("<Q", v)
    if t == GGUF_F32:
        return struct.pack("<f", v)
    if t == GGUF_BOOL:
        return struct.pack("<B", 1 if v else 0)
    if t == GGUF_STR:
        return _str(v)
    raise ValueError("gguf value type %d" % t)


def f32_to_bf16_bits(a):
    """float32 -> bf16 bit patterns (uint16), round to nearest even (NaN kept)."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(a)
    if nan.any():
        r[nan] = 0x7FC0
    return r


def bf16_bits_to_f32(b):
    return (np.asarray(b, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def tokenizer_kvs():
    b2u = bytes_to_unicode()
    tokens = [b2u[b] for b in range(256)] + ["<s>", "</s>"]
    types = [1] * 256 + [3, 3]  # NORMAL, then CONTROL
    return [("tokenizer.ggml.model", GGUF_STR, "gpt2"),
            ("tokenizer.ggml.pre", GGUF_STR, "gpt-2"),
            ("tokenizer.ggml.tokens", GGUF_ARR, (GGUF_STR, tokens)),
            ("tokenizer.ggml.token_type", GGUF_ARR, (GGUF_I32, types)),
            ("tokenizer.ggml.merges", GGUF_ARR, (GGUF_STR, [])),
            ("tokenizer.ggml.bos_token_id", GGUF_U32, 256),
            ("tokenizer.ggml.eos_token_id", GGUF_U32, 257),
            ("tokenizer.ggml.add_bos_token", GGUF_BOOL, True),
            ("tokenizer.ggml.add_eos_token", GGUF_BOOL, False)]


def model_kvs(cfg, name="octet-passkey"):
    a = "llama"
    return [("general.architecture", GGUF_STR, a),
            ("general.name", GGUF_STR, name),
            ("general.license", GGUF_STR, "same licence as the octet repository"),
            ("%s.block_count" % a, GGUF_U32, cfg["n_layers"]),
            ("%s.context_length" % a, GGUF_U32, cfg["context_length"]),
            ("%s.embedding_length" % a, GGUF_U32, cfg["dim"]),
            ("%s.feed_forward_length" % a, GGUF_U32, cfg["ffn_dim"]),
            ("%s.attention.head_count" % a, GGUF_U32, cfg["n_heads"]),
            ("%s.attention.head_count_kv" % a, GGUF_U32, cfg["n_kv_heads"]),
            ("%s.attention.key_length" % a, GGUF_U32, cfg["head_dim"]),
            ("%s.attention.value_length" % a, GGUF_U32, cfg["head_dim"]),
            ("%s.attention.layer_norm_rms_epsilon" % a, GGUF_F32, cfg["norm_eps"]),
            ("%s.rope.freq_base" % a, GGUF_F32, cfg["rope_theta"]),
            ("%s.rope.dimension_count" % a, GGUF_U32, cfg["head_dim"]),
            ("%s.vocab_size" % a, GGUF_U32, cfg["vocab"])]


def write_gguf(path, kvs, tensors, dtype="f32"):
    """kvs: [(key, type, value)], arrays as (key, GGUF_ARR, (elem_type, list)).
    tensors: [(name, float32 ndarray)]; 1-D tensors (norms) are always F32."""
    out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)))
    for key, t, v in kvs:
        out += _str(key) + struct.pack("<I", t)
        if t == GGUF_ARR:
            et, items = v
            out += struct.pack("<IQ", et, len(items))
            for x in items:
                out += _val(et, x)
        else:
            out += _val(t, v)
    blobs, off = [], 0
    for name, a in tensors:
        a = np.ascontiguousarray(a, dtype=np.float32)
        if a.ndim == 1 or dtype == "f32":
            gt, raw = GGML_F32, a.tobytes()
        elif dtype == "f16":
            gt, raw = GGML_F16, a.astype(np.float16).tobytes()
        elif dtype == "bf16":
            gt, raw = GGML_BF16, f32_to_bf16_bits(a).tobytes()
        else:
            raise ValueError("dtype %s" % dtype)
        ne = list(a.shape[::-1])  # GGUF ne[0] is the contiguous (input) dimension
        out += _str(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", n) for n in ne)
        out += struct.pack("<IQ", gt, off)
        blobs.append(raw)
        off += len(raw) + (-len(raw)) % ALIGN
    out += b"\0" * ((-len(out)) % ALIGN)
    for raw in blobs:
        out += raw + b"\0" * ((-len(raw)) % ALIGN)
    with open(path, "wb") as f:
        f.write(out)


def tensor_list(cfg, p):
    """p: dict of float32 arrays with torch-style names -> [(gguf name, array)] in file order."""
    t = [("token_embd.weight", p["tok_embd"])]
    for i in range(cfg["n_layers"]):
        for short, gname in (("attn_norm", "attn_norm"), ("wq", "attn_q"), ("wk", "attn_k"), ("wv", "attn_v"),
                             ("wo", "attn_output"), ("ffn_norm", "ffn_norm"), ("w_gate", "ffn_gate"),
                             ("w_up", "ffn_up"), ("w_down", "ffn_down")):
            t.append(("blk.%d.%s.weight" % (i, gname), p["layers.%d.%s" % (i, short)]))
    t.append(("output_norm.weight", p["out_norm"]))
    t.append(("output.weight", p["out"]))
    return t


def export(path, cfg, params, dtype="f32", name="octet-passkey", extra_kvs=()):
    """params: dict name -> float32 ndarray (names as in tensor_list)."""
    write_gguf(path, model_kvs(cfg, name) + list(extra_kvs) + tokenizer_kvs(), tensor_list(cfg, params), dtype)


def random_params(cfg, seed, std):
    """Random weights, norms near 1; std large enough that greedy outputs are not degenerate."""
    r = np.random.default_rng(seed)
    D, F, V, hd = cfg["dim"], cfg["ffn_dim"], cfg["vocab"], cfg["head_dim"]
    H, KV = cfg["n_heads"], cfg["n_kv_heads"]
    g = lambda *s: (r.standard_normal(s) * std / np.sqrt(s[-1]) * np.sqrt(D)).astype(np.float32)  # noqa: E731
    p = {"tok_embd": (r.standard_normal((V, D)) * 1.0).astype(np.float32),
         "out_norm": (1 + 0.1 * r.standard_normal(D)).astype(np.float32),
         "out": g(V, D)}
    for i in range(cfg["n_layers"]):
        p["layers.%d.attn_norm" % i] = (1 + 0.1 * r.standard_normal(D)).astype(np.float32)
        p["layers.%d.ffn_norm" % i] = (1 + 0.1 * r.standard_normal(D)).astype(np.float32)
        p["layers.%d.wq" % i] = g(H * hd, D)
        p["layers.%d.wk" % i] = g(KV * hd, D)
        p["layers.%d.wv" % i] = g(KV * hd, D)
        p["layers.%d.wo" % i] = g(D, H * hd)
        p["layers.%d.w_gate" % i] = g(F, D)
        p["layers.%d.w_up" % i] = g(F, D)
        p["layers.%d.w_down" % i] = g(D, F)
    return p


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--random", metavar="OUT")
    ap.add_argument("--convert", nargs=2, metavar=("IN", "OUT"))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--init-std", type=float, default=0.15)
    ap.add_argument("--dtype", default="f32", choices=("f32", "f16", "bf16"))
    for k in ("dim", "n_layers", "n_heads", "n_kv_heads", "head_dim", "ffn_dim"):
        ap.add_argument("--" + k.replace("_", "-"), type=int, default=DEFAULT_CFG[k])
    ap.add_argument("--rope-theta", type=float, default=DEFAULT_CFG["rope_theta"])
    a = ap.parse_args(argv)
    if a.random:
        cfg = dict(DEFAULT_CFG, dim=a.dim, n_layers=a.n_layers, n_heads=a.n_heads, n_kv_heads=a.n_kv_heads,
                   head_dim=a.head_dim, ffn_dim=a.ffn_dim, rope_theta=a.rope_theta)
        export(a.random, cfg, random_params(cfg, a.seed, a.init_std), a.dtype, name="octet-passkey-random")
    elif a.convert:
        sys.path.insert(0, __file__.rsplit("/", 1)[0])
        from ref_numpy import read_gguf, config_from_meta, params_from_tensors
        meta, tens = read_gguf(a.convert[0])
        cfg = config_from_meta(meta)
        extra = [(k, GGUF_STR, v) for k, v in meta.items() if k.startswith("octet.train.") and isinstance(v, str)]
        export(a.convert[1], cfg, params_from_tensors(cfg, tens), a.dtype, name=meta.get("general.name", "octet-passkey"),
               extra_kvs=extra)
    else:
        ap.error("give --random OUT or --convert IN OUT")


if __name__ == "__main__":
    main()
