#!/usr/bin/env python3
"""ref_numpy.py — the NumPy twin of the passkey model: reads the GGUF that export_gguf.py
writes and computes logits and greedy tokens, written from the formulas (no torch).

Owns: a GGUF v3 reader (F32/F16/BF16 tensors), the forward pass, greedy decoding.
It mirrors train.py's torch model line by line; both mirror octet's src/model/forward.c:
    x = token_embd[ids]
    per layer:  h = rmsnorm(x) * attn_norm            rmsnorm(v) = v / sqrt(mean(v^2) + eps)
                q, k, v = h Wq^T, h Wk^T, h Wv^T       (W as stored: [out, in])
                RoPE on q, k: pairs (2i, 2i+1) rotated by pos * theta^(-2i/head_dim)
                query head h reads KV head h // (n_heads / n_kv_heads); causal softmax(q.k/sqrt(hd))
                x += attn Wo^T;  h = rmsnorm(x) * ffn_norm;  x += (silu(h Wg^T) * (h Wu^T)) Wd^T
    logits = (rmsnorm(x) * output_norm) Wout^T
CLI (/usr/bin/python3 has numpy):
  ref_numpy.py --model M.gguf --prompt TEXT [--max-tokens 8] [--dtype f32|f64]   -> JSON with tokens
  ref_numpy.py --model M.gguf --needle LENGTH,DEPTH,KEY                           -> greedy answer
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import data  # noqa: E402

_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<B", 10: "<Q", 11: "<q", 12: "<d"}


def read_gguf(path):
    """-> (metadata dict, {tensor name: float32 ndarray in numpy shape = reversed ne})."""
    buf = open(path, "rb").read()
    pos = 0

    def rd(fmt):
        nonlocal pos
        v = struct.unpack_from(fmt, buf, pos)[0]
        pos += struct.calcsize(fmt)
        return v

    def rstr():
        nonlocal pos
        n = rd("<Q")
        s = buf[pos:pos + n].decode("utf-8")
        pos += n
        return s

    def rval(t):
        if t == 8:
            return rstr()
        if t == 9:
            et, n = rd("<I"), rd("<Q")
            return [rval(et) for _ in range(n)]
        return rd(_SCALAR[t])

    assert buf[:4] == b"GGUF", "not a GGUF file"
    pos = 4
    version, n_t, n_kv = rd("<I"), rd("<Q"), rd("<Q")
    assert version == 3, version
    meta = {}
    for _ in range(n_kv):
        k = rstr()
        meta[k] = rval(rd("<I"))
    infos = []
    for _ in range(n_t):
        name = rstr()
        nd = rd("<I")
        ne = [rd("<Q") for _ in range(nd)]
        infos.append((name, ne, rd("<I"), rd("<Q")))
    align = meta.get("general.alignment", 32)
    start = pos + (-pos) % align
    tens = {}
    for name, ne, gt, off in infos:
        n = int(np.prod(ne))
        shape = tuple(ne[::-1])
        if gt == 0:
            a = np.frombuffer(buf, np.float32, n, start + off)
        elif gt == 1:
            a = np.frombuffer(buf, np.float16, n, start + off).astype(np.float32)
        elif gt == 30:
            a = (np.frombuffer(buf, np.uint16, n, start + off).astype(np.uint32) << 16).view(np.float32)
        else:
            raise ValueError("%s: ggml type %d" % (name, gt))
        tens[name] = a.reshape(shape).copy()
    return meta, tens


def config_from_meta(m):
    a = m["general.architecture"]
    dim, nh = m[a + ".embedding_length"], m[a + ".attention.head_count"]
    return dict(dim=dim, n_layers=m[a + ".block_count"], n_heads=nh,
                n_kv_heads=m.get(a + ".attention.head_count_kv", nh),
                head_dim=m.get(a + ".attention.key_length", dim // nh), ffn_dim=m[a + ".feed_forward_length"],
                vocab=len(m["tokenizer.ggml.tokens"]), norm_eps=m.get(a + ".attention.layer_norm_rms_epsilon", 1e-5),
                rope_theta=m.get(a + ".rope.freq_base", 10000.0), context_length=m.get(a + ".context_length", 2048))


def params_from_tensors(cfg, t):
    p = {"tok_embd": t["token_embd.weight"], "out_norm": t["output_norm.weight"],
         "out": t.get("output.weight", t["token_embd.weight"])}
    for i in range(cfg["n_layers"]):
        for short, g in (("attn_norm", "attn_norm"), ("wq", "attn_q"), ("wk", "attn_k"), ("wv", "attn_v"),
                         ("wo", "attn_output"), ("ffn_norm", "ffn_norm"), ("w_gate", "ffn_gate"),
                         ("w_up", "ffn_up"), ("w_down", "ffn_down")):
            p["layers.%d.%s" % (i, short)] = t["blk.%d.%s.weight" % (i, g)]
    return p


def rmsnorm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope_tables(T, head_dim, theta):
    """cos, sin [T, head_dim/2]: angle pos * theta^(-2i/head_dim), in float64 (as octet)."""
    inv = 1.0 / theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    ang = np.arange(T, dtype=np.float64)[:, None] * inv[None, :]
    return np.cos(ang), np.sin(ang)


def rope(x, cos, sin):
    """x [T, H, hd]; rotates adjacent pairs (x[2i], x[2i+1])."""
    x0, x1 = x[..., 0::2], x[..., 1::2]
    c, s = cos[:, None, :], sin[:, None, :]
    out = np.empty_like(x)
    out[..., 0::2] = x0 * c - x1 * s
    out[..., 1::2] = x0 * s + x1 * c
    return out


def forward(cfg, p, ids, dtype=np.float32):
    """ids [T] -> logits [T, vocab] (one sequence, causal)."""
    T = len(ids)
    H, KV, hd, eps = cfg["n_heads"], cfg["n_kv_heads"], cfg["head_dim"], cfg["norm_eps"]
    G = H // KV
    P = {k: v.astype(dtype) for k, v in p.items()}
    cos, sin = rope_tables(T, hd, cfg["rope_theta"])
    cos, sin = cos.astype(dtype), sin.astype(dtype)
    x = P["tok_embd"][np.asarray(ids)]
    mask = np.triu(np.full((T, T), -np.inf, dtype), 1)
    for i in range(cfg["n_layers"]):
        L = lambda n: P["layers.%d.%s" % (i, n)]  # noqa: E731
        h = rmsnorm(x, L("attn_norm"), eps)
        q = (h @ L("wq").T).reshape(T, H, hd)
        k = (h @ L("wk").T).reshape(T, KV, hd)
        v = (h @ L("wv").T).reshape(T, KV, hd)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        att = np.empty((T, H, hd), dtype)
        for hh in range(H):
            kv = hh // G
            s = (q[:, hh, :] @ k[:, kv, :].T) / np.sqrt(hd) + mask
            s = np.exp(s - s.max(axis=-1, keepdims=True))
            s /= s.sum(axis=-1, keepdims=True)
            att[:, hh, :] = s @ v[:, kv, :]
        x = x + att.reshape(T, H * hd) @ L("wo").T
        h = rmsnorm(x, L("ffn_norm"), eps)
        g = h @ L("w_gate").T
        x = x + ((g / (1 + np.exp(-g))) * (h @ L("w_up").T)) @ L("w_down").T
    return rmsnorm(x, P["out_norm"], eps) @ P["out"].T


def greedy(cfg, p, ids, n, dtype=np.float32, stop_eos=True):
    ids = list(int(i) for i in ids)
    out = []
    for _ in range(n):
        t = int(np.argmax(forward(cfg, p, ids, dtype)[-1]))
        if stop_eos and t == data.EOS:
            break
        out.append(t)
        ids.append(t)
    return out


def load(path):
    meta, t = read_gguf(path)
    cfg = config_from_meta(meta)
    return cfg, params_from_tensors(cfg, t)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompt")
    ap.add_argument("--needle", help="LENGTH,DEPTH,KEY: octet's passkey prompt")
    ap.add_argument("--max-tokens", type=int, default=8)
    ap.add_argument("--dtype", default="f32", choices=("f32", "f64"))
    a = ap.parse_args(argv)
    cfg, p = load(a.model)
    dt = np.float32 if a.dtype == "f32" else np.float64
    if a.needle:
        ln, dp, key = a.needle.split(",")
        ids = data.octet_prompt(int(ln), int(dp), key)
    else:
        ids = np.concatenate([[data.BOS], data.enc(a.prompt)]).astype(np.int32)
    toks = greedy(cfg, p, ids, a.max_tokens, dt, stop_eos=False)
    print(json.dumps({"prompt_tokens": [int(i) for i in ids] if len(ids) <= 64 else len(ids),
                      "tokens": toks, "text": data.decode(toks)}))


if __name__ == "__main__":
    main()
