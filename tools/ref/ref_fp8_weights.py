"""Independent NumPy model of octet's FP8-weight matmul (docs/fp8_weights.md), written from
that contract: out[t][r] = x[t] . W[r] with W in OCP e4m3 plus f32 scales and each activation
row quantized to e4m3 (or e5m2) with its own scale.

Run from the repo root:  /usr/bin/python3 tools/ref/ref_fp8_weights.py
Writes tests/golden/fp8_weights.json:
{
  "rows": R, "cols": C, "n": N, "block": 128,
  "x": [N*C floats],                       activations, row-major [N][C]
  "w_codes": hex string of R*C bytes,      e4m3 codes, row-major [R][C]
  "cases": [ {"name": str, "wscale": "tensor"|"channel"|"block", "scale": [floats],
              "ascale": "dynamic"|"static", "input_scale": float, "act_dtype": "e4m3"|"e5m2",
              "x_scale": [N floats], "xq_codes": hex string of N*C bytes,
              "out": [N*R floats], "out_abs": [N*R floats] } ... ]
}
Quantization (float32 arithmetic, as the C code): dynamic s = float32(amax|x row|) / float32(fmax),
1 when that is 0; static s = input_scale; inv = float32(1) / s; code = encode(float32(x * inv)),
encode = saturating round-to-nearest-even found by nearest search over the format's finite values
(ties: the even code). out is computed in float64 from the decoded values:
tensor/channel: (sum_k xq*wq) * (s_x * s_w); block: s_x * sum_j s_w[r/128][j] * (sum_{k in tile j} xq*wq).
out_abs is the same with |terms|: the scale of the f32 rounding the C test allows.
"""
import json

import numpy as np

OUT = "tests/golden/fp8_weights.json"
FMT = {"e4m3": (3, 7, 0x7E), "e5m2": (2, 15, 0x7B)}  # mantissa bits, bias, largest finite code


def decode_table(fmt):
    mb, bias, _ = FMT[fmt]
    t = np.zeros(256)
    for c in range(256):
        e, m = (c >> mb) & ((1 << (7 - mb)) - 1), c & ((1 << mb) - 1)
        v = m * 2.0 ** (1 - bias - mb) if e == 0 else (1 + m / 2 ** mb) * 2.0 ** (e - bias)
        t[c] = -v if c & 0x80 else v
    return t


def encode(y, fmt):
    """float32 array -> codes (saturating RNE by nearest search)."""
    _, _, maxc = FMT[fmt]
    vals = decode_table(fmt)[: maxc + 1]  # non-negative finite values, increasing with the code
    a = np.abs(y.astype(np.float64))
    hi = np.clip(np.searchsorted(vals, a), 0, maxc)
    lo = np.clip(hi - 1, 0, maxc)
    dlo, dhi = np.abs(a - vals[lo]), np.abs(vals[hi] - a)
    pick = np.where(dlo < dhi, lo, np.where(dhi < dlo, hi, np.where(lo % 2 == 0, lo, hi)))
    pick = np.where(a >= vals[maxc], maxc, pick)
    return (pick | np.where(np.signbit(y), 0x80, 0)).astype(np.uint8)


def quant_rows(x, ascale, input_scale, fmt):
    fmax = np.float32(448.0 if fmt == "e4m3" else 57344.0)
    codes, scales = [], []
    for row in x:
        if ascale == "static":
            s = np.float32(input_scale)
        else:
            s = np.float32(np.max(np.abs(row)) / fmax)
            if not s > 0:
                s = np.float32(1.0)
        inv = np.float32(1.0) / s
        codes.append(encode((row * inv).astype(np.float32), fmt))
        scales.append(s)
    return np.array(codes), np.array(scales, dtype=np.float32)


def matmul(xq, sx, wq, wscale, sw, block):
    n, r_, c_ = xq.shape[0], wq.shape[0], wq.shape[1]
    out, out_abs = np.zeros((n, r_)), np.zeros((n, r_))
    for t in range(n):
        for r in range(r_):
            p = xq[t] * wq[r]
            if wscale == "block":
                nbc = (c_ + block - 1) // block
                tiles = [(sw[(r // block) * nbc + j], p[j * block:(j + 1) * block]) for j in range(nbc)]
                out[t, r] = float(sx[t]) * sum(float(s) * q.sum() for s, q in tiles)
                out_abs[t, r] = float(sx[t]) * sum(abs(float(s)) * np.abs(q).sum() for s, q in tiles)
            else:
                s = float(np.float32(sx[t]) * np.float32(sw[r if wscale == "channel" else 0]))
                out[t, r], out_abs[t, r] = p.sum() * s, np.abs(p).sum() * abs(s)
    return out, out_abs


def main():
    rng = np.random.default_rng(44)
    R, C, N, B = 136, 260, 3, 128
    x = (rng.standard_normal((N, C)) * 3).astype(np.float32)
    x[0, 5], x[1, 77], x[2, 200] = 900.0, -2500.0, 0.0  # outliers beyond e4m3's 448 at a unit scale
    x[2, :] = np.where(np.arange(C) % 7 == 0, 0.0, x[2, :])
    w_codes = rng.integers(0, 256, size=(R, C), dtype=np.uint8)
    w_codes[(w_codes & 0x7F) == 0x7F] = 0x3C  # no NaN codes
    wq = decode_table("e4m3")[w_codes]
    nbr, nbc = (R + B - 1) // B, (C + B - 1) // B
    wscales = {
        "tensor": np.array([0.0123], dtype=np.float32),
        "channel": (rng.uniform(0.001, 0.05, R)).astype(np.float32),
        "block": (rng.uniform(0.001, 0.05, nbr * nbc)).astype(np.float32),
    }
    cases = []
    for ws in ("tensor", "channel", "block"):
        for asc, isc, fmt in (("dynamic", 0.0, "e4m3"), ("static", 2.5, "e4m3"), ("dynamic", 0.0, "e5m2"),
                              ("static", 0.01, "e5m2")):
            codes, sx = quant_rows(x, asc, isc, fmt)
            xq = decode_table(fmt)[codes]
            out, out_abs = matmul(xq, sx, wq, ws, wscales[ws], B)
            cases.append({"name": f"{ws}/{asc}/{fmt}", "wscale": ws, "scale": [float(v) for v in wscales[ws]],
                          "ascale": asc, "input_scale": isc, "act_dtype": fmt,
                          "x_scale": [float(v) for v in sx], "xq_codes": codes.tobytes().hex(),
                          "out": [float(v) for v in out.ravel()], "out_abs": [float(v) for v in out_abs.ravel()]})
    doc = {"rows": R, "cols": C, "n": N, "block": B, "x": [float(v) for v in x.ravel()],
           "w_codes": w_codes.tobytes().hex(), "cases": cases}
    with open(OUT, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {OUT}: {len(cases)} cases of [{N}x{C}] . [{R}x{C}]^T")


if __name__ == "__main__":
    main()
