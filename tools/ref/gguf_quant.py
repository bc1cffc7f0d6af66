"""gguf_quant.py — NumPy quantizers and dequantizers of the GGUF block types octet reads:
Q8_0 (ggml type 8), Q4_0 (2), Q4_K (12), Q5_K (13), Q6_K (14). Written from the block layouts
(documented in src/backend/cpu/cpu_kquant.c and src/base/dtype.h), not from another engine.

The dequantizers are the reference octet's CPU dequantizers are checked against: every step is a
float32 operation in the kernels' order ((d*scale)*q - (dmin*min)), so they give the same f32
numbers, bit for bit. The quantizers are simple (per-block min/max, no error search): they make
valid blocks of random weights for tests and benchmarks, not good quantizations.

The CPU matmul multiplies these weights by x quantized to 8 bits (integer dot products; the math is
in src/backend/cpu/cpu_qdot.c and cpu_kquant.c). quantize_x and qdot compute exactly that, with the
same f32 roundings in the same order, so octet's results equal qdot's bit for bit.

    quantize(name, x)   x: float array [rows, cols], cols a whole number of blocks -> uint8 [rows, row_bytes]
    dequantize(gtype, raw, n_elems) -> float32 array of n_elems values
    quantize_x(x, block) -> (q int8 [n], d float32 [n / block], bsum int32 [n / 16])
    qdot(gtype, rows, x) rows: uint8 [R, row_bytes], x: float32 [n] -> float32 [R]
    qx_block(gtype) -> 32 or 256: the block x is quantized in for weights of gtype
"""
import numpy as np

QK_K = 256
# ggml type id -> (name, elements per block, bytes per block)
TYPES = {8: ("q8_0", 32, 34), 2: ("q4_0", 32, 18), 12: ("q4_k", 256, 144), 13: ("q5_k", 256, 176),
         14: ("q6_k", 256, 210)}
IDS = {v[0]: k for k, v in TYPES.items()}

f32 = np.float32


def _f16(a):
    """float -> float16 (the stored scale) and back to float32 exactly."""
    h = np.asarray(a, dtype=np.float32).astype(np.float16)
    return h, h.astype(np.float32)


def _safe_div(a, b):
    return np.where(b != 0, a / np.where(b != 0, b, 1), 0).astype(np.float32)


# ---- Q8_0: f16 d, int8 q[32]; w = d*q ----
def q8_0_quantize(x):
    b = x.reshape(-1, 32).astype(np.float32)
    dh, d = _f16(np.abs(b).max(axis=1) / 127.0)
    q = np.clip(np.rint(_safe_div(b, d[:, None])), -127, 127).astype(np.int8)
    out = np.empty((b.shape[0], 34), np.uint8)
    out[:, :2] = dh.view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q.view(np.uint8)
    return out


def q8_0_dequantize(raw):
    b = raw.reshape(-1, 34)
    d = b[:, :2].copy().view(np.float16).astype(f32).reshape(-1)
    return (d[:, None] * b[:, 2:].view(np.int8).astype(f32)).reshape(-1)


# ---- Q4_0: f16 d, qs[16]: low nibbles elements 0..15, high 16..31; w = d*(q - 8) ----
def q4_0_quantize(x):
    b = x.reshape(-1, 32).astype(np.float32)
    dh, d = _f16(np.abs(b).max(axis=1) / 7.0)
    q = (np.clip(np.rint(_safe_div(b, d[:, None])), -8, 7) + 8).astype(np.uint8)
    out = np.empty((b.shape[0], 18), np.uint8)
    out[:, :2] = dh.view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q[:, :16] | (q[:, 16:] << 4)
    return out


def q4_0_dequantize(raw):
    b = raw.reshape(-1, 18)
    d = b[:, :2].copy().view(np.float16).astype(f32).reshape(-1)
    q = np.concatenate([b[:, 2:] & 15, b[:, 2:] >> 4], axis=1).astype(np.int32) - 8
    return (d[:, None] * q.astype(f32)).reshape(-1)


# ---- Q4_K / Q5_K: f16 d, f16 dmin, 12 bytes of 6-bit scales and mins, [qh[32]], qs[128] ----
def _pack_scales(sc, m):
    """sc, m: uint8 [nb, 8] of 6-bit values -> [nb, 12] bytes."""
    s = np.zeros((sc.shape[0], 12), np.uint8)
    s[:, 0:4] = sc[:, 0:4] | ((sc[:, 4:8] >> 4) << 6)
    s[:, 4:8] = m[:, 0:4] | ((m[:, 4:8] >> 4) << 6)
    s[:, 8:12] = (sc[:, 4:8] & 15) | ((m[:, 4:8] & 15) << 4)
    return s


def _unpack_scales(s):
    s = s.astype(np.int32)
    sc = np.empty((s.shape[0], 8), np.int32)
    m = np.empty((s.shape[0], 8), np.int32)
    sc[:, 0:4] = s[:, 0:4] & 63
    m[:, 0:4] = s[:, 4:8] & 63
    sc[:, 4:8] = (s[:, 8:12] & 15) | ((s[:, 0:4] >> 6) << 4)
    m[:, 4:8] = (s[:, 8:12] >> 4) | ((s[:, 4:8] >> 6) << 4)
    return sc, m


def _k45_quantize(x, qmax):
    b = x.reshape(-1, 8, 32).astype(np.float32)
    lo = np.minimum(b.min(axis=2), 0)
    hi = b.max(axis=2)
    scale, mn = (hi - lo) / qmax, -lo                     # per sub-block, both >= 0
    dh, d = _f16(scale.max(axis=1) / 63.0)
    mh, dmin = _f16(mn.max(axis=1) / 63.0)
    sc = np.clip(np.rint(_safe_div(scale, d[:, None])), 0, 63).astype(np.uint8)
    m = np.clip(np.rint(_safe_div(mn, dmin[:, None])), 0, 63).astype(np.uint8)
    ds = d[:, None] * sc.astype(f32)
    dm = dmin[:, None] * m.astype(f32)
    q = np.clip(np.rint(_safe_div(b + dm[:, :, None], ds[:, :, None])), 0, qmax).astype(np.uint8)
    return dh, mh, _pack_scales(sc, m), q                 # q: [nb, 8, 32]


def q4_k_quantize(x):
    dh, mh, s, q = _k45_quantize(x, 15)
    out = np.empty((q.shape[0], 144), np.uint8)
    out[:, 0:2] = dh.view(np.uint8).reshape(-1, 2)
    out[:, 2:4] = mh.view(np.uint8).reshape(-1, 2)
    out[:, 4:16] = s
    out[:, 16:] = (q[:, 0::2, :] | (q[:, 1::2, :] << 4)).reshape(-1, 128)
    return out


def q5_k_quantize(x):
    dh, mh, s, q = _k45_quantize(x, 31)
    out = np.empty((q.shape[0], 176), np.uint8)
    out[:, 0:2] = dh.view(np.uint8).reshape(-1, 2)
    out[:, 2:4] = mh.view(np.uint8).reshape(-1, 2)
    out[:, 4:16] = s
    qh = np.zeros((q.shape[0], 32), np.uint8)
    for sb in range(8):
        qh |= ((q[:, sb, :] >> 4) & 1) << sb
    out[:, 16:48] = qh
    lo = q & 15
    out[:, 48:] = (lo[:, 0::2, :] | (lo[:, 1::2, :] << 4)).reshape(-1, 128)
    return out


def _k45_dequantize(raw, bpb, q5):
    b = raw.reshape(-1, bpb)
    d = b[:, 0:2].copy().view(np.float16).astype(f32).reshape(-1)
    dmin = b[:, 2:4].copy().view(np.float16).astype(f32).reshape(-1)
    sc, m = _unpack_scales(b[:, 4:16])
    qs = b[:, 48:] if q5 else b[:, 16:]
    qs = qs.reshape(-1, 4, 32).astype(np.int32)
    q = np.empty((b.shape[0], 8, 32), np.int32)
    q[:, 0::2, :] = qs & 15
    q[:, 1::2, :] = qs >> 4
    if q5:
        qh = b[:, 16:48].astype(np.int32)
        for sb in range(8):
            q[:, sb, :] |= ((qh >> sb) & 1) << 4
    ds = d[:, None] * sc.astype(f32)
    dm = dmin[:, None] * m.astype(f32)
    return (ds[:, :, None] * q.astype(f32) - dm[:, :, None]).reshape(-1)


def q4_k_dequantize(raw):
    return _k45_dequantize(raw, 144, False)


def q5_k_dequantize(raw):
    return _k45_dequantize(raw, 176, True)


# ---- Q6_K: ql[128], qh[64], int8 scales[16] (one per 16 elements), f16 d; w = d*scale*(q - 32) ----
def q6_k_quantize(x):
    b = x.reshape(-1, 16, 16).astype(np.float32)            # [nb, group, 16]
    gs = np.abs(b).max(axis=2) / 31.0                      # per-group scale >= 0
    dh, d = _f16(gs.max(axis=1) / 127.0)
    sc = np.clip(np.rint(_safe_div(gs, d[:, None])), 0, 127).astype(np.int8)
    ds = d[:, None] * sc.astype(f32)
    q = (np.clip(np.rint(_safe_div(b, ds[:, :, None])), -32, 31) + 32).astype(np.uint8).reshape(-1, 2, 4, 32)
    nb = b.shape[0]
    ql = np.zeros((nb, 2, 2, 32), np.uint8)
    qh = np.zeros((nb, 2, 32), np.uint8)
    for j in range(4):
        ql[:, :, j % 2, :] |= (q[:, :, j, :] & 15) << (4 * (j // 2))
        qh |= (q[:, :, j, :] >> 4) << (2 * j)
    out = np.empty((nb, 210), np.uint8)
    out[:, 0:128] = ql.reshape(nb, 128)
    out[:, 128:192] = qh.reshape(nb, 64)
    out[:, 192:208] = sc.view(np.uint8)
    out[:, 208:210] = dh.view(np.uint8).reshape(-1, 2)
    return out


def q6_k_dequantize(raw):
    b = raw.reshape(-1, 210)
    nb = b.shape[0]
    ql = b[:, 0:128].reshape(nb, 2, 2, 32).astype(np.int32)
    qh = b[:, 128:192].reshape(nb, 2, 32).astype(np.int32)
    sc = b[:, 192:208].copy().view(np.int8).astype(f32)      # [nb, 16]
    d = b[:, 208:210].copy().view(np.float16).astype(f32).reshape(-1)
    q = np.empty((nb, 2, 4, 32), np.int32)
    for j in range(4):
        q[:, :, j, :] = (((ql[:, :, j % 2, :] >> (4 * (j // 2))) & 15) | (((qh >> (2 * j)) & 3) << 4)) - 32
    ds = (d[:, None] * sc).reshape(nb, 16, 1)
    return (ds * q.reshape(nb, 16, 16).astype(f32)).reshape(-1)


_Q = {"q8_0": q8_0_quantize, "q4_0": q4_0_quantize, "q4_k": q4_k_quantize, "q5_k": q5_k_quantize,
      "q6_k": q6_k_quantize}
_D = {"q8_0": q8_0_dequantize, "q4_0": q4_0_dequantize, "q4_k": q4_k_dequantize, "q5_k": q5_k_dequantize,
      "q6_k": q6_k_dequantize}


def row_bytes(name, cols):
    gt = IDS[name]
    be, bb = TYPES[gt][1], TYPES[gt][2]
    if cols % be:
        raise ValueError("%s rows of %d elements are not whole %d-element blocks" % (name, cols, be))
    return cols // be * bb


def quantize(name, x):
    """x: [rows, cols] floats -> uint8 [rows, row_bytes(name, cols)]."""
    x = np.asarray(x, dtype=np.float32)
    rows, cols = x.shape
    return _Q[name](x).reshape(rows, row_bytes(name, cols))


def dequantize(gtype, raw, n_elems):
    """raw: the tensor's bytes (uint8); gtype: its ggml type id -> float32 [n_elems]."""
    name, be, bb = TYPES[gtype]
    raw = np.frombuffer(raw, dtype=np.uint8, count=n_elems // be * bb) if not isinstance(raw, np.ndarray) else raw
    return _D[name](np.ascontiguousarray(raw[:n_elems // be * bb]))


# ---- x quantized to 8 bits and the integer dot products of the CPU matmul ----
def qx_block(gtype):
    return 32 if TYPES[gtype][0] in ("q8_0", "q4_0") else QK_K


def quantize_x(x, block):
    """One token's x (float32 [n]) in blocks: d = amax / 127, q = rint(x / d) (half to even; 0 where d = 0)."""
    b = np.asarray(x, dtype=np.float32).reshape(-1, block)
    d = (np.abs(b).max(axis=1) / f32(127)).astype(f32)
    safe = np.where(d != 0, d, f32(1)).astype(f32)
    v = np.where(d[:, None] != 0, b / safe[:, None], f32(0)).astype(f32)
    q = np.rint(np.clip(v, -127, 127)).astype(np.int8)
    bsum = q.reshape(-1, 16).astype(np.int32).sum(axis=1)
    return q.reshape(-1), d, bsum


def _tree16(acc):
    """acc: float32 [R, 16] -> float32 [R], reduced as u_i = a_i + a_(i+8), then + 4 apart, + 2, + 1."""
    u = (acc[:, :8] + acc[:, 8:]).astype(f32)
    v = (u[:, :4] + u[:, 4:]).astype(f32)
    w = (v[:, :2] + v[:, 2:]).astype(f32)
    return (w[:, 0] + w[:, 1]).astype(f32)


def _qdot_32(name, rows, x):
    R = rows.shape[0]
    q, dx, _ = quantize_x(x, 32)
    nb = q.size // 32
    bb = 34 if name == "q8_0" else 18
    blk = rows.reshape(R, nb, bb)
    dw = blk[:, :, :2].copy().view(np.float16).astype(f32).reshape(R, nb)
    if name == "q8_0":
        wq = blk[:, :, 2:].view(np.int8).astype(np.int32)
    else:
        wq = np.concatenate([blk[:, :, 2:] & 15, blk[:, :, 2:] >> 4], axis=2).astype(np.int32) - 8
    p = (wq.reshape(R, nb, 8, 4) * q.reshape(1, nb, 8, 4).astype(np.int32)).sum(axis=3)   # [R, nb, 8] lane sums
    s = (dw * dx[None, :]).astype(f32)
    acc = np.zeros((R, 16), f32)
    for b in range(nb):
        o = 8 * (b % 2)
        acc[:, o:o + 8] = (acc[:, o:o + 8] + (s[:, b:b + 1] * p[:, b, :].astype(f32)).astype(f32)).astype(f32)
    return _tree16(acc)


def _qdot_k(name, rows, x):
    R = rows.shape[0]
    q, dx, bsum = quantize_x(x, QK_K)
    nb = q.size // QK_K
    bb = TYPES[IDS[name]][2]
    blk = rows.reshape(R * nb, bb)
    qx = q.reshape(1, nb, QK_K).astype(np.int64)
    if name in ("q4_k", "q5_k"):
        d = blk[:, 0:2].copy().view(np.float16).astype(f32).reshape(R, nb)
        dmin = blk[:, 2:4].copy().view(np.float16).astype(f32).reshape(R, nb)
        sc, m = _unpack_scales(blk[:, 4:16])
        qs = (blk[:, 48:] if name == "q5_k" else blk[:, 16:]).reshape(-1, 4, 32).astype(np.int32)
        wq = np.empty((R * nb, 8, 32), np.int32)
        wq[:, 0::2, :] = qs & 15
        wq[:, 1::2, :] = qs >> 4
        if name == "q5_k":
            qh = blk[:, 16:48].astype(np.int32)
            for sb in range(8):
                wq[:, sb, :] |= ((qh >> sb) & 1) << 4
        isum = (wq.reshape(R, nb, 8, 32).astype(np.int64) * qx.reshape(1, nb, 8, 32)).sum(axis=3)   # [R, nb, 8]
        A = (sc.reshape(R, nb, 8) * isum).sum(axis=2)
        bs2 = bsum.reshape(nb, 8, 2).sum(axis=2)
        M = (m.reshape(R, nb, 8) * bs2[None, :, :]).sum(axis=2)
        t1 = ((d * dx[None, :]).astype(f32) * A.astype(f32)).astype(f32)
        t2 = ((dmin * dx[None, :]).astype(f32) * M.astype(f32)).astype(f32)
        t = (t1 - t2).astype(f32)
    else:  # q6_k
        ql = blk[:, 0:128].reshape(-1, 2, 2, 32).astype(np.int32)
        qh = blk[:, 128:192].reshape(-1, 2, 32).astype(np.int32)
        sc = blk[:, 192:208].copy().view(np.int8).astype(np.int64).reshape(R, nb, 16)
        d = blk[:, 208:210].copy().view(np.float16).astype(f32).reshape(R, nb)
        wq = np.empty((R * nb, 2, 4, 32), np.int32)
        for j in range(4):
            wq[:, :, j, :] = ((ql[:, :, j % 2, :] >> (4 * (j // 2))) & 15) | (((qh >> (2 * j)) & 3) << 4)
        isum = (wq.reshape(R, nb, 16, 16).astype(np.int64) * qx.reshape(1, nb, 16, 16)).sum(axis=3)   # [R, nb, 16]
        A = (sc * (isum - 32 * bsum.reshape(1, nb, 16))).sum(axis=2)
        t = ((d * dx[None, :]).astype(f32) * A.astype(f32)).astype(f32)
    acc = np.zeros(R, f32)
    for b in range(nb):
        acc = (acc + t[:, b]).astype(f32)
    return acc


def qdot(gtype, rows, x):
    """rows: uint8 [R, row_bytes] of ggml type gtype; x: float32 [n] -> float32 [R], octet's CPU matmul bit for bit."""
    name = TYPES[gtype][0]
    rows = np.ascontiguousarray(rows, dtype=np.uint8).reshape(rows.shape[0], -1)
    return _qdot_32(name, rows, x) if name in ("q8_0", "q4_0") else _qdot_k(name, rows, x)
