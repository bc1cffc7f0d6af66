#!/usr/bin/env python3
"""scale_kv_gguf.py — writes an equivalent copy of a llama GGUF whose attention K and V are
FACTOR times larger (or smaller, with a factor below 1), for range tests of the FP8 KV cache.
Standard library only.

Owns: rescaling four weights per layer, nothing else (metadata, tokenizer and every other
tensor are copied byte for byte):
  attn_k × F and attn_q / F   (q·k, so every score, is unchanged)
  attn_v × F and attn_output / F   (o = W_o (P·V) is unchanged)
In exact arithmetic the logits are identical; in float32 each weight is rounded once more.
Model families whose K or V pass a norm (qk-norm) before the cache are refused: a norm would
undo the factor. Tensor types: F32, F16, BF16 (stories260K is F32).

  scale_kv_gguf.py IN.gguf OUT.gguf --factor 1000      (K and V 1000× larger)
  scale_kv_gguf.py IN.gguf OUT.gguf --factor 0.001     (K and V 1000× smaller)
"""
import argparse
import array
import struct
import sys

from gguf_to_safetensors import GGML_TYPES, Reader

SCALE = {"attn_k": 1, "attn_q": -1, "attn_v": 1, "attn_output": -1}  # × F, or / F


def tensor_spans(data):
    """[(name, ggml type, absolute byte offset, byte length)] of a GGUF v2/v3 file."""
    r = Reader(data)
    if bytes(r.take(4)) != b"GGUF" or r.unpack("<I") not in (2, 3):
        raise ValueError("not a GGUF v2/v3 file")
    n_tensors, n_kv = r.unpack("<Q"), r.unpack("<Q")
    kv = {}
    for _ in range(n_kv):
        key = r.string()
        kv[key] = r.value(r.unpack("<I"))
    infos = []
    for _ in range(n_tensors):
        name = r.string()
        ne = [r.unpack("<Q") for _ in range(r.unpack("<I"))]
        gtype, off = r.unpack("<I"), r.unpack("<Q")
        infos.append((name, ne, gtype, off))
    align = kv.get("general.alignment", 32)
    start = (r.pos + align - 1) // align * align
    spans = []
    for name, ne, gtype, off in infos:
        n = 1
        for d in ne:
            n *= d
        size = n * GGML_TYPES[gtype][1] if gtype in GGML_TYPES else None
        spans.append((name, gtype, start + off, size))
    return kv, spans


def scaled(raw, gtype, f):
    if gtype == 0:  # F32
        a = array.array("f", raw)
        for i in range(len(a)):
            a[i] = a[i] * f
        return a.tobytes()
    if gtype == 1:  # F16 (struct's "e" rounds to nearest even)
        n = len(raw) // 2
        vals = struct.unpack("<%de" % n, raw)
        return struct.pack("<%de" % n, *[v * f for v in vals])
    # BF16: widen to f32, scale, round to nearest even back to the top 16 bits
    n = len(raw) // 2
    out = bytearray(len(raw))
    for i, h in enumerate(struct.unpack("<%dH" % n, raw)):
        x = struct.unpack("<f", struct.pack("<I", h << 16))[0] * f
        u = struct.unpack("<I", struct.pack("<f", x))[0]
        u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16 if (u & 0x7F800000) != 0x7F800000 else u >> 16
        struct.pack_into("<H", out, 2 * i, u & 0xFFFF)
    return bytes(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("inp")
    ap.add_argument("out")
    ap.add_argument("--factor", type=float, required=True, help="K and V become FACTOR × as large")
    args = ap.parse_args()
    if not args.factor > 0:
        ap.error("--factor must be positive")
    with open(args.inp, "rb") as fh:
        data = bytearray(fh.read())
    try:
        kv, spans = tensor_spans(memoryview(data))
    except (ValueError, struct.error) as e:
        sys.exit("scale_kv_gguf: %s: %s" % (args.inp, e))
    n_done = 0
    for name, gtype, pos, size in spans:
        parts = name.split(".")
        if len(parts) >= 3 and parts[0] == "blk" and parts[2] in ("attn_k_norm", "attn_q_norm"):
            sys.exit("scale_kv_gguf: %s has %s: a K/Q norm would undo the factor" % (args.inp, name))
        if not (len(parts) == 4 and parts[0] == "blk" and parts[2] in SCALE and parts[3] == "weight"):
            continue
        if size is None:
            sys.exit("scale_kv_gguf: %s: tensor %s has ggml type %d (F32/F16/BF16 only)" % (args.inp, name, gtype))
        f = args.factor if SCALE[parts[2]] > 0 else 1.0 / args.factor
        data[pos:pos + size] = scaled(bytes(data[pos:pos + size]), gtype, f)
        n_done += 1
    if n_done == 0 or n_done % 4:
        sys.exit("scale_kv_gguf: %s: found %d of the attn_q/k/v/output weights (want 4 per layer)"
                 % (args.inp, n_done))
    with open(args.out, "wb") as fh:
        fh.write(data)
    print("scale_kv_gguf: %s: %d tensors rescaled (K, V × %g) -> %s" % (args.inp, n_done, args.factor, args.out))


if __name__ == "__main__":
    main()
