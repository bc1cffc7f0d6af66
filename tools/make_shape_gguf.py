#!/usr/bin/env python3
"""make_shape_gguf.py — writes a Llama GGUF of any shape with deterministic weights, for tests
and benchmarks that need a real model's tensor shapes without its weights or its size: e.g.
Llama-3.1-8B's widths with 2 layers.

Owns: the shapes and metadata keys octet's GGUF loader reads (src/model/model.c); no
tokenizer: tokenizer.ggml.model is "none" (llama.cpp's vocabulary-free files, which octet reads
as its byte stand-in), so llama.cpp's llama-bench runs the same file.
F16/BF16/F32 (Python standard library only): a fixed cycle of small numbers (|w| <= 0.05, norms
1.0), so the forward pass stays finite; they mean nothing.
GGUF block types (NumPy, tools/ref/gguf_quant.py): normal random matrices (std --std, seeded by
--seed and the tensor's index) quantized to q8_0, q4_0, q4_k, q5_k or q6_k, or q4_k_m: the mix
llama.cpp's Q4_K_M uses (Q6_K for output.weight and for attn_v / ffn_down in the first and last
eighth of the layers and every third between, Q4_K elsewhere); norms stay F32 ones.
The file streams to disk tensor by tensor (block types in slabs of rows), so an 8B-wide file
needs no 8B of memory.

  make_shape_gguf.py OUT.gguf [--vocab 128256] [--dim 4096] [--layers 2] [--heads 32]
                     [--kv-heads 8] [--head-dim D] [--ffn 14336]
                     [--dtype f16|bf16|f32|q8_0|q4_0|q4_k|q5_k|q6_k|q4_k_m] [--seed 0] [--std 0.02]
                     [--alignment 32] [--arch llama|phi3]
Defaults are Llama-3.1-8B's widths with 2 layers (about 2.5 GB in F16).
"""
import argparse
import os
import struct
import sys

GGUF_U32, GGUF_F32, GGUF_STR = 4, 6, 8
GGML = {"f32": (0, 4), "f16": (1, 2), "bf16": (30, 2)}
# the GGUF block types: name -> (ggml type, elements per block, bytes per block)
BLOCK = {"q8_0": (8, 32, 34), "q4_0": (2, 32, 18), "q4_k": (12, 256, 144), "q5_k": (13, 256, 176),
         "q6_k": (14, 256, 210)}
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


def q4_k_m_more_bits(layer, n_layers):
    """llama.cpp's Q4_K_M gives attn_v and ffn_down Q6_K in these layers."""
    return layer < n_layers // 8 or layer >= 7 * n_layers // 8 or (layer - n_layers // 8) % 3 == 2


def tensor_type(dtype, name, n_layers):
    """The type name of a matrix `name` ("blk.L.attn_v.weight", "output.weight", ...) in a file of `dtype`."""
    if dtype != "q4_k_m":
        return dtype
    if name == "output.weight":
        return "q6_k"
    if name.endswith("attn_v.weight") or name.endswith("ffn_down.weight"):
        return "q6_k" if q4_k_m_more_bits(int(name.split(".")[1]), n_layers) else "q4_k"
    return "q4_k"


def write_quant(f, qname, ne, seed, index, std):
    """A [ne[1], ne[0]] matrix of N(0, std) values quantized to qname, in slabs of rows."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "ref"))
    import numpy as np
    import gguf_quant
    cols, rows = ne
    rng = np.random.default_rng([seed, index])
    slab = max(1, (1 << 22) // cols)
    for r0 in range(0, rows, slab):
        n = min(slab, rows - r0)
        x = (rng.standard_normal((n, cols), dtype=np.float32) * np.float32(std))
        f.write(gguf_quant.quantize(qname, x).tobytes())


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
    ap.add_argument("--dtype", default="f16", choices=sorted(GGML) + sorted(BLOCK) + ["q4_k_m"])
    ap.add_argument("--seed", type=int, default=0, help="block types: the random matrices' seed")
    ap.add_argument("--std", type=float, default=0.02, help="block types: the random matrices' standard deviation")
    ap.add_argument("--alignment", type=int, default=32)
    ap.add_argument("--arch", default="llama", choices=["llama", "phi3"],
                    help="phi3: Q, K, V fused in attn_qkv and gate + up in ffn_up")
    a = ap.parse_args(argv)
    hd = a.head_dim or a.dim // a.heads
    arch = a.arch
    kvs = [("general.architecture", GGUF_STR, arch), ("general.name", GGUF_STR, "octet-shape-test"),
           ("general.alignment", GGUF_U32, a.alignment),
           (arch + ".block_count", GGUF_U32, a.layers), (arch + ".context_length", GGUF_U32, 131072),
           (arch + ".embedding_length", GGUF_U32, a.dim), (arch + ".feed_forward_length", GGUF_U32, a.ffn),
           (arch + ".attention.head_count", GGUF_U32, a.heads),
           (arch + ".attention.head_count_kv", GGUF_U32, a.kv_heads),
           (arch + ".attention.key_length", GGUF_U32, hd), (arch + ".attention.value_length", GGUF_U32, hd),
           (arch + ".attention.layer_norm_rms_epsilon", GGUF_F32, 1e-5),
           (arch + ".rope.freq_base", GGUF_F32, 500000.0), (arch + ".vocab_size", GGUF_U32, a.vocab),
           ("tokenizer.ggml.model", GGUF_STR, "none")]  # no vocabulary: llama.cpp's name, octet's byte stand-in
    # (name, [ne0 (contiguous), ne1]); 1-D tensors are F32 norms
    D, F, V = a.dim, a.ffn, a.vocab
    tensors = [("token_embd.weight", [D, V])]
    for l in range(a.layers):
        p = "blk.%d." % l
        if arch == "phi3":
            tensors += [(p + "attn_norm.weight", [D]), (p + "attn_qkv.weight", [D, (a.heads + 2 * a.kv_heads) * hd]),
                        (p + "attn_output.weight", [a.heads * hd, D]), (p + "ffn_norm.weight", [D]),
                        (p + "ffn_up.weight", [D, 2 * F]), (p + "ffn_down.weight", [F, D])]
            continue
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
        tt = "f32" if len(ne) == 1 else tensor_type(a.dtype, name, a.layers)
        n = 1
        for d in ne:
            n *= d
        if tt in BLOCK:
            gt, be, bb = BLOCK[tt]
            if ne[0] % be:
                sys.exit("make_shape_gguf: %s: rows of %d elements are not whole %d-element %s blocks"
                         % (name, ne[0], be, tt))
            nbytes = n // be * bb
        else:
            gt, es = GGML[tt]
            nbytes = n * es
        head += _str(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        head += struct.pack("<IQ", gt, off)
        sizes.append((n, nbytes, tt, ne))
        off += nbytes + (-nbytes) % al
    head += b"\0" * ((-len(head)) % al)
    ones = struct.pack("<f", 1.0) * 1024
    block = cycle_bytes(a.dtype) if a.dtype in GGML else None
    with open(a.out, "wb") as f:
        f.write(head)
        for i, (n, nbytes, tt, ne) in enumerate(sizes):
            if len(ne) == 1:
                write_data(f, n, 4, ones)
            elif tt in BLOCK:
                write_quant(f, tt, ne, a.seed, i, a.std)
            else:
                write_data(f, n, GGML[tt][1], block)
            f.write(b"\0" * ((-nbytes) % al))
    return 0


if __name__ == "__main__":
    sys.exit(main())
