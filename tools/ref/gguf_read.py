"""Minimal GGUF v2/v3 reader (stdlib struct + numpy).

Usage:
    from gguf_read import read_gguf
    meta, tensors = read_gguf("model.gguf")

meta     : dict key -> value (arrays become Python lists; strings are str)
tensors  : dict name -> numpy array. Shape is numpy order, i.e. reversed GGUF ne:
           a GGUF tensor with ne=[64,512] becomes an array of shape (512, 64)
           (ne[0] is the contiguous, fastest-varying axis).
F32, F16 and BF16 tensors are decoded as they are; the block types Q8_0, Q4_0, Q4_K, Q5_K and
Q6_K are dequantized to float32 (gguf_quant.py, the reference octet's CPU kernels are checked
against); other types raise NotImplementedError.
Also: read_gguf(..., info=True) returns a third item, the list of
(name, ne, ggml_type, offset) tensor infos.
"""
import struct
import sys

import os

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_quant  # noqa: E402

GGUF_MAGIC = b"GGUF"

# GGUF metadata value types
T_UINT8, T_INT8, T_UINT16, T_INT16, T_UINT32, T_INT32, T_FLOAT32, T_BOOL, \
    T_STRING, T_ARRAY, T_UINT64, T_INT64, T_FLOAT64 = range(13)

_SCALAR = {
    T_UINT8: "<B", T_INT8: "<b", T_UINT16: "<H", T_INT16: "<h",
    T_UINT32: "<I", T_INT32: "<i", T_FLOAT32: "<f", T_BOOL: "<?",
    T_UINT64: "<Q", T_INT64: "<q", T_FLOAT64: "<d",
}
_NP_SCALAR = {
    T_UINT8: "<u1", T_INT8: "<i1", T_UINT16: "<u2", T_INT16: "<i2",
    T_UINT32: "<u4", T_INT32: "<i4", T_FLOAT32: "<f4", T_BOOL: "<u1",
    T_UINT64: "<u8", T_INT64: "<i8", T_FLOAT64: "<f8",
}

# ggml tensor types we decode
GGML_F32, GGML_F16, GGML_BF16 = 0, 1, 30


class _Reader:
    def __init__(self, buf):
        self.buf = buf
        self.pos = 0

    def unpack(self, fmt):
        v = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += struct.calcsize(fmt)
        return v[0]

    def string(self):
        n = self.unpack("<Q")
        s = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return s.decode("utf-8", errors="surrogateescape")

    def value(self, t):
        if t in _SCALAR:
            return self.unpack(_SCALAR[t])
        if t == T_STRING:
            return self.string()
        if t == T_ARRAY:
            et = self.unpack("<I")
            n = self.unpack("<Q")
            if et in _NP_SCALAR:
                dt = np.dtype(_NP_SCALAR[et])
                a = np.frombuffer(self.buf, dtype=dt, count=n, offset=self.pos)
                self.pos += n * dt.itemsize
                out = a.tolist()
                if et == T_BOOL:
                    out = [bool(x) for x in out]
                return out
            return [self.value(et) for _ in range(n)]
        raise ValueError("unknown GGUF value type %d" % t)


def read_layout(path):
    """The file's layout, for tools that rewrite it: (bytes, kv_end, infos, data_start, alignment),
    where bytes[:kv_end] is the header and metadata and infos the (name, ne, ggml_type, offset) list."""
    with open(path, "rb") as f:
        buf = f.read()
    r = _Reader(buf)
    if buf[:4] != GGUF_MAGIC:
        raise ValueError("not a GGUF file")
    r.pos = 4
    r.unpack("<I")
    n_tensors, n_kv = r.unpack("<Q"), r.unpack("<Q")
    meta = {}
    for _ in range(n_kv):
        key = r.string()
        meta[key] = r.value(r.unpack("<I"))
    kv_end = r.pos
    infos = []
    for _ in range(n_tensors):
        name = r.string()
        nd = r.unpack("<I")
        ne = [r.unpack("<Q") for _ in range(nd)]
        infos.append((name, ne, r.unpack("<I"), r.unpack("<Q")))
    align = int(meta.get("general.alignment", 32))
    return buf, kv_end, infos, (r.pos + align - 1) // align * align, align


def read_gguf(path, info=False):
    with open(path, "rb") as f:
        buf = f.read()
    r = _Reader(buf)
    if buf[:4] != GGUF_MAGIC:
        raise ValueError("not a GGUF file")
    r.pos = 4
    version = r.unpack("<I")
    if version not in (2, 3):
        raise ValueError("unsupported GGUF version %d" % version)
    n_tensors = r.unpack("<Q")
    n_kv = r.unpack("<Q")
    meta = {"GGUF.version": version}
    for _ in range(n_kv):
        key = r.string()
        t = r.unpack("<I")
        meta[key] = r.value(t)
    infos = []
    for _ in range(n_tensors):
        name = r.string()
        nd = r.unpack("<I")
        ne = [r.unpack("<Q") for _ in range(nd)]
        gt = r.unpack("<I")
        off = r.unpack("<Q")
        infos.append((name, ne, gt, off))
    align = int(meta.get("general.alignment", 32))
    data_start = (r.pos + align - 1) // align * align
    tensors = {}
    for name, ne, gt, off in infos:
        n = 1
        for d in ne:
            n *= d
        shape = tuple(reversed(ne))
        if gt == GGML_F32:
            a = np.frombuffer(buf, dtype="<f4", count=n, offset=data_start + off)
        elif gt == GGML_F16:
            a = np.frombuffer(buf, dtype="<f2", count=n, offset=data_start + off)
        elif gt == GGML_BF16:
            u = np.frombuffer(buf, dtype="<u2", count=n, offset=data_start + off)
            a = (u.astype(np.uint32) << 16).view(np.float32)
        elif gt in gguf_quant.TYPES:
            _, be, bb = gguf_quant.TYPES[gt]
            if ne[0] % be:
                raise ValueError("tensor %s: rows of %d elements are not whole %d-element blocks" % (name, ne[0], be))
            nbytes = n // be * bb
            if data_start + off + nbytes > len(buf):
                raise ValueError("tensor %s: data runs past the end of the file" % name)
            raw = np.frombuffer(buf, dtype=np.uint8, count=nbytes, offset=data_start + off)
            a = gguf_quant.dequantize(gt, raw, n)
        else:
            raise NotImplementedError("ggml type %d (tensor %s)" % (gt, name))
        tensors[name] = a.reshape(shape)
    if info:
        return meta, tensors, infos
    return meta, tensors


if __name__ == "__main__":
    meta, tensors, infos = read_gguf(sys.argv[1], info=True)
    for k, v in meta.items():
        if isinstance(v, list):
            print("%-45s [%d items] %r" % (k, len(v), v[:5]))
        else:
            print("%-45s %r" % (k, v))
    for name, ne, gt, off in infos:
        print("%-28s ne=%-12s type=%d off=%d" % (name, ne, gt, off))
