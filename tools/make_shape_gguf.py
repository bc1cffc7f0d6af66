#!/usr/bin/env python3
"""make_shape_gguf.py — writes a Llama GGUF of any shape with deterministic F16/BF16/F32
weights (Python standard library only), for tests that need a real model's tensor shapes
without its weights or its size: e.g. Llama-3.1-8B's widths with 2 layers.

Owns: the shapes and metadata keys octet's GGUF loader reads (src/model/model.c); no
tokenizer (octet then uses its byte stand-in). Values: a fixed cycle of small numbers
(|w| <= 0.05, norms 1.0), so the forward pass stays finite; they mean nothing.
The file streams to disk tensor by tensor, so an 8B-wide file needs no 8B of memory.

  make_shape_gguf.py OUT.gguf [--vocab 128256] [--dim 4096] [--layers 2] [--heads 32]
                     [--kv-heads 8] [--head-dim D] [--ffn 14336] [--dtype f16|bf16|f32]
                     [--alignment 32]
Defaults are Llama-3.1-8B's widths with 2 layers (about 2.5 GB in F16).
"""
import argparse
import struct
import sys

GGUF_U32, GGUF_F32, GGUF_STR = 4, 6, 8
GGML = {"f32": (0, 4), "f16": (1, 2), "bf16": (30, 2)}
CYCLE = 4099  # a prime, so consecutive rows start at different phases


def _str(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def cycle_bytes(dtype):
    vals = [0.05 * (((i * 7919) % 201) - 100) / 100.0 for i in range(CYCLE)]
    if dtype == "f32":
        return b"".join(struct.pack("<f", v) for v in vals)
    if dtype == "f16":
        return b"".join(struct.pack("<e", v) for v in vals)
    return b"".join(struct.pack("<I", struct.unpack("<I", struct.pack("<f", v))[0])[2:] for v in vals)


def write_data(f, n_elems, elem, block):
    """n_elems values of `elem` bytes each: the cycle repeated, written in chunks."""
    total = n_elems * elem
    chunk = block * max(1, (1 << 24) // len(block))
    while total >= len(chunk):
        f.write(chunk)
        total -= len(chunk)
    while total >= len(block):
        f.write(block)
        total -= len(block)
    f.write(block[:total])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--vocab", type=int, default=128256)
    ap.add_argument("--dim", type=int, default=4096)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=0, help="default: dim / heads")
    ap.add_argument("--ffn", type=int, default=14336)
    ap.add_argument("--dtype", default="f16", choices=sorted(GGML))
    ap.add_argument("--alignment", type=int, default=32)
    a = ap.parse_args(argv)
    hd = a.head_dim or a.dim // a.heads
    arch = "llama"
    kvs = [("general.architecture", GGUF_STR, arch), ("general.name", GGUF_STR, "octet-shape-test"),
           ("general.alignment", GGUF_U32, a.alignment),
           (arch + ".block_count", GGUF_U32, a.layers), (arch + ".context_length", GGUF_U32, 131072),
           (arch + ".embedding_length", GGUF_U32, a.dim), (arch + ".feed_forward_length", GGUF_U32, a.ffn),
           (arch + ".attention.head_count", GGUF_U32, a.heads),
           (arch + ".attention.head_count_kv", GGUF_U32, a.kv_heads),
           (arch + ".attention.key_length", GGUF_U32, hd), (arch + ".attention.value_length", GGUF_U32, hd),
           (arch + ".attention.layer_norm_rms_epsilon", GGUF_F32, 1e-5),
           (arch + ".rope.freq_base", GGUF_F32, 500000.0), (arch + ".vocab_size", GGUF_U32, a.vocab)]
    # (name, [ne0 (contiguous), ne1]); 1-D tensors are F32 norms
    D, F, V = a.dim, a.ffn, a.vocab
    tensors = [("token_embd.weight", [D, V])]
    for l in range(a.layers):
        p = "blk.%d." % l
        tensors += [(p + "attn_norm.weight", [D]), (p + "attn_q.weight", [D, a.heads * hd]),
                    (p + "attn_k.weight", [D, a.kv_heads * hd]), (p + "attn_v.weight", [D, a.kv_heads * hd]),
                    (p + "attn_output.weight", [a.heads * hd, D]), (p + "ffn_norm.weight", [D]),
                    (p + "ffn_gate.weight", [D, F]), (p + "ffn_up.weight", [D, F]), (p + "ffn_down.weight", [F, D])]
    tensors += [("output_norm.weight", [D]), ("output.weight", [D, V])]

    al = a.alignment
    head = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)))
    for key, t, v in kvs:
        head += _str(key) + struct.pack("<I", t)
        head += _str(v) if t == GGUF_STR else struct.pack("<I" if t == GGUF_U32 else "<f", v)
    sizes, off = [], 0
    for name, ne in tensors:
        gt, es = (0, 4) if len(ne) == 1 else GGML[a.dtype]
        n = 1
        for d in ne:
            n *= d
        head += _str(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        head += struct.pack("<IQ", gt, off)
        sizes.append((n, es, len(ne) == 1))
        off += n * es + (-(n * es)) % al
    head += b"\0" * ((-len(head)) % al)
    block, ones = cycle_bytes(a.dtype), struct.pack("<f", 1.0) * 1024
    with open(a.out, "wb") as f:
        f.write(head)
        for n, es, is_norm in sizes:
            write_data(f, n, 4 if is_norm else es, ones if is_norm else block)
            f.write(b"\0" * ((-(n * es)) % al))
    return 0


if __name__ == "__main__":
    sys.exit(main())
