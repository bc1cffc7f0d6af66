"""Independent model of OCP FP8 (E4M3FN and E5M2), written from the OCP 8-bit
floating point spec; encode is a brute-force nearest search, not bit tricks.

Run from the repo root:  /usr/bin/python3 tools/ref/ref_fp8.py
Writes tests/golden/fp8.json:
{
  "formats": {
    "e4m3": {"bias": 7,  "max": 448.0,   "nan_codes": [127, 255], "inf_codes": [],
             "decode": [256 entries]},
    "e5m2": {"bias": 15, "max": 57344.0, "nan_codes": [125,126,127,253,254,255],
             "inf_codes": [124, 252], "decode": [256 entries]}
  },
  "encode_rule": text,
  "encode": [ {"hex": float.hex(x), "value": x | "nan" | "inf" | "-inf",
               "e4m3": code, "e5m2": code}, ... ]
}
decode[code] is a number (exact: every FP8 value is a float64 with few bits), null for
NaN, and the strings "inf" / "-inf" for the e5m2 infinities. -0.0 is written as -0.0.

Encode rule (saturating, round to nearest, ties to even):
  NaN -> 0x7F (both formats); +inf -> +max code; -inf -> -max code;
  finite x: the sign bit is x's sign bit (so -0.0 and negative values that round to
  zero give 0x80); the magnitude code is the finite non-negative code whose value is
  nearest |x| (exact rational arithmetic); on a tie, the code whose mantissa LSB
  (bit 0 of the code) is 0. Values beyond max therefore give max: same as rounding
  RNE with an unbounded exponent and clamping to +-max afterwards.
All inputs are float32-exact.
"""
import json
import math
import os
import random
import struct
from fractions import Fraction

import numpy as np

OUT = "tests/golden/fp8.json"

FMT = {
    "e4m3": {"ebits": 4, "mbits": 3, "bias": 7},
    "e5m2": {"ebits": 5, "mbits": 2, "bias": 15},
}


def decode(fmt, code):
    """Returns a Fraction, or 'nan', 'inf', '-inf'. Signed zero: returns ('-0') for 0x80."""
    eb, mb, bias = FMT[fmt]["ebits"], FMT[fmt]["mbits"], FMT[fmt]["bias"]
    s = (code >> 7) & 1
    e = (code >> mb) & ((1 << eb) - 1)
    m = code & ((1 << mb) - 1)
    emax = (1 << eb) - 1
    if fmt == "e4m3":
        if e == emax and m == (1 << mb) - 1:
            return "nan"
    else:
        if e == emax:
            if m == 0:
                return "-inf" if s else "inf"
            return "nan"
    if e == 0:
        v = Fraction(m, 1 << mb) * Fraction(2) ** (1 - bias)
    else:
        v = (1 + Fraction(m, 1 << mb)) * Fraction(2) ** (e - bias)
    if s:
        return "-0" if v == 0 else -v
    return v


def decode_json(fmt, code):
    v = decode(fmt, code)
    if v == "nan":
        return None
    if v in ("inf", "-inf"):
        return v
    if v == "-0":
        return -0.0
    f = float(v)
    assert Fraction(f) == v
    return f


def finite_pos_codes(fmt):
    out = []
    for c in range(128):
        v = decode(fmt, c)
        if isinstance(v, Fraction):
            out.append((c, v))
    return out


_POS = {f: finite_pos_codes(f) for f in FMT}
MAXCODE = {f: max(_POS[f], key=lambda cv: cv[1])[0] for f in FMT}


def encode(fmt, x):
    x = float(x)
    if math.isnan(x):
        return 0x7F
    sign = 0x80 if math.copysign(1.0, x) < 0 else 0
    if math.isinf(x):
        return sign | MAXCODE[fmt]
    mag = Fraction(abs(x))
    best = None
    for c, v in _POS[fmt]:
        d = abs(v - mag)
        if best is None or d < best[1] or (d == best[1] and (c & 1) == 0 and (best[0] & 1) == 1):
            best = (c, d)
    return sign | best[0]


def f32(x):
    return float(np.float32(x))


def f32_next(x, direction):
    return float(np.nextafter(np.float32(x), np.float32(direction), dtype=np.float32))


def build_inputs():
    xs = []
    xs += [0.0, -0.0, math.inf, -math.inf, math.nan]
    for v in (448, 464, 480, 1e6, 57344, 61440, 416, 432, 240, 49152, 53248, 60000, 65504, 65536,
              3.4028234663852886e38, 1e-45, 1e-10, 1.0, 0.1, 1.0 / 3):
        xs += [f32(v), f32(-v)]
    # e4m3 tiny / subnormal region (min subnormal 2^-9, min normal 2^-6)
    for k in (1, 2, 3, 5, 7, 9, 13, 15, 16, 17):
        xs.append(k * 2.0 ** -10)
    xs += [-(2.0 ** -10), -(3 * 2.0 ** -10), 2.0 ** -11, 2.0 ** -10 + 2.0 ** -30, 2.0 ** -10 - 2.0 ** -33]
    # e5m2 tiny / subnormal region (min subnormal 2^-16, min normal 2^-14)
    for k in (1, 2, 3, 5, 7, 9):
        xs.append(k * 2.0 ** -17)
    xs += [-(2.0 ** -17), -(5 * 2.0 ** -17), 2.0 ** -18, 2.0 ** -17 + 2.0 ** -40, 2.0 ** -149]
    # exact codes, ties (midpoints) and midpoints +- 1 float32 ulp
    for fmt, step, start in (("e4m3", 3, 0), ("e5m2", 3, 1)):
        pos = _POS[fmt]
        for i in range(start, len(pos) - 1, step):
            a, b = pos[i][1], pos[i + 1][1]
            mid = float((a + b) / 2)
            xs.append(mid)
            if i % 2 == 0:
                xs.append(-mid)
        for i in range(1, len(pos) - 1, 9):
            a, b = pos[i][1], pos[i + 1][1]
            mid = float((a + b) / 2)
            xs += [f32_next(mid, math.inf), f32_next(mid, -math.inf)]
            xs.append(float(pos[i][1]))
        # the two largest: midpoint below max, and max +- ulp
        mx = float(pos[-1][1])
        xs += [f32_next(mx, math.inf), f32_next(mx, -math.inf)]
    # random float32 values, log-uniform magnitude 2^-20 .. 2^17, random sign
    rng = random.Random(12345)
    for _ in range(80):
        e = rng.uniform(-20, 17)
        v = f32((2.0 ** e) * (1 if rng.random() < 0.5 else -1))
        xs.append(v)
    # dedupe (keep order; -0.0 and 0.0 and nan distinct by bit pattern)
    seen, out = set(), []
    for x in xs:
        x = f32(x) if not math.isnan(x) else x
        key = struct.pack("<f", x)
        if key not in seen:
            seen.add(key)
            out.append(x)
    return out


def jnum(x):
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def self_check():
    # Spot values from the OCP spec.
    assert float(decode("e4m3", 0x7E)) == 448 and decode("e4m3", 0x7F) == "nan"
    assert float(decode("e4m3", 0x01)) == 2.0 ** -9 and float(decode("e4m3", 0x08)) == 2.0 ** -6
    assert float(decode("e5m2", 0x7B)) == 57344 and decode("e5m2", 0x7C) == "inf"
    assert float(decode("e5m2", 0x01)) == 2.0 ** -16 and float(decode("e5m2", 0x04)) == 2.0 ** -14
    assert float(decode("e4m3", 0x38)) == 1.0 and float(decode("e5m2", 0x3C)) == 1.0
    for f in FMT:
        for c in range(256):
            v = decode(f, c)
            if isinstance(v, Fraction) or v == "-0":
                assert encode(f, -0.0 if v == "-0" else float(v)) == c, (f, c)
    assert encode("e4m3", 464) == 0x7E and encode("e4m3", 1e6) == 0x7E and encode("e4m3", -480) == 0xFE
    assert encode("e4m3", 2.0 ** -10) == 0x00 and encode("e4m3", 3 * 2.0 ** -10) == 0x02
    assert encode("e4m3", -(2.0 ** -12)) == 0x80
    assert encode("e5m2", 61440) == 0x7B and encode("e5m2", math.inf) == 0x7B


def main():
    self_check()
    out = {"formats": {}, "encode_rule": __doc__.split("Encode rule")[1].split("All inputs")[0].strip()}
    for f in FMT:
        dec = [decode_json(f, c) for c in range(256)]
        out["formats"][f] = {
            "bias": FMT[f]["bias"], "exp_bits": FMT[f]["ebits"], "man_bits": FMT[f]["mbits"],
            "max": float(max(v for _, v in _POS[f])),
            "max_code": MAXCODE[f],
            "nan_codes": [c for c in range(256) if dec[c] is None],
            "inf_codes": [c for c in range(256) if isinstance(dec[c], str)],
            "decode": dec,
        }
    inputs = build_inputs()
    out["encode"] = [{"hex": float.hex(x), "value": jnum(x),
                      "e4m3": encode("e4m3", x), "e5m2": encode("e5m2", x)} for x in inputs]
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as fh:
        json.dump(out, fh, indent=0)
        fh.write("\n")
    print("max e4m3 %g (code 0x%02X), e5m2 %g (code 0x%02X)" % (
        out["formats"]["e4m3"]["max"], MAXCODE["e4m3"], out["formats"]["e5m2"]["max"], MAXCODE["e5m2"]))
    print("nan codes e4m3 %s e5m2 %s; inf e5m2 %s" % (
        out["formats"]["e4m3"]["nan_codes"], out["formats"]["e5m2"]["nan_codes"],
        out["formats"]["e5m2"]["inf_codes"]))
    print("%d encode inputs -> %s (%d bytes)" % (len(inputs), OUT, os.path.getsize(OUT)))


if __name__ == "__main__":
    main()
