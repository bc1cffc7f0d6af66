#!/usr/bin/env python3
"""gguf_dequant.py — rewrites a GGUF with every block-type tensor (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K)
dequantized to F32 by the NumPy reference (tools/ref/gguf_quant.py); metadata and the other tensors
are copied unchanged. Running octet on both files tells its packed-weight kernels from its f32
path on any architecture (tests/cli/test_quant_gguf.sh does so for Phi-3's fused QKV).

  gguf_dequant.py IN.gguf OUT.gguf
"""
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "ref"))
import numpy as np  # noqa: E402
import gguf_quant  # noqa: E402
from gguf_read import read_layout  # noqa: E402


def main(argv):
    if len(argv) != 2:
        sys.exit(__doc__)
    buf, kv_end, infos, data_start, align = read_layout(argv[0])
    out_infos, blobs, off = bytearray(), [], 0
    for name, ne, gt, o in infos:
        n = int(np.prod(ne))
        if gt in gguf_quant.TYPES:
            _, be, bb = gguf_quant.TYPES[gt]
            raw = np.frombuffer(buf, np.uint8, n // be * bb, data_start + o)
            data, gt = gguf_quant.dequantize(gt, raw, n).astype("<f4").tobytes(), 0
        else:
            size = {0: 4, 1: 2, 30: 2}.get(gt)
            if size is None:
                sys.exit("gguf_dequant: tensor %s: ggml type %d is not handled" % (name, gt))
            data = buf[data_start + o:data_start + o + n * size]
        nb = name.encode()
        out_infos += struct.pack("<Q", len(nb)) + nb + struct.pack("<I", len(ne))
        out_infos += b"".join(struct.pack("<Q", d) for d in ne) + struct.pack("<IQ", gt, off)
        blobs.append(data)
        off += len(data) + (-len(data)) % align
    head = bytearray(buf[:kv_end]) + out_infos
    if int(struct.unpack_from("<I", buf, 4)[0]) < 2:
        sys.exit("gguf_dequant: GGUF v1 is not handled")
    head += b"\0" * ((-len(head)) % align)
    with open(argv[1], "wb") as f:
        f.write(head)
        for d in blobs:
            f.write(d)
            f.write(b"\0" * ((-len(d)) % align))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
