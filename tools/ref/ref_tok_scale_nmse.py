"""Model of the CUDA per-token-head FP8 attention arithmetic against the exact attention over the
same e4m3 cache (docs/kv_format.md, "On the GPU"), to size the NMSE bounds of
tests/gpu/cuda_ops_tok_scale.h. Pure Python (no numpy), seeded, a few minutes.

Inputs as the test draws them: K uniform in (-3, 3), V in (-2, 2), q in (-1, 1), all bf16; "vary"
scales row j of K by 2^((5j mod 9) - 4) and of V by 2^((5j + 4 mod 9) - 4). Each row is stored as
e4m3 codes with its scale amax/448 (round to 4 significant bits here, no subnormal detail).
  decode_t: 4 warps each take every 4th 16-key block; lazy max (raised when a score passes m + 8,
    log2 units); P·s_v/r rounded to f16 with r the warp's largest V scale so far; the warps merged.
  prefill_f16_cvt: K and V rows as bf16(code · s), P rounded to bf16, exact max.
Prints each model's NMSE against the exact result.

Run from the repo root:  python3 tools/ref/ref_tok_scale_nmse.py
"""
import math
import random
import struct

rnd = random.Random(1)


def f16(x):
    return struct.unpack('e', struct.pack('e', x))[0]


def bf16(x):
    b = struct.unpack('I', struct.pack('f', x))[0]
    b = (b + 0x7fff + ((b >> 16) & 1)) & 0xffff0000
    return struct.unpack('f', struct.pack('I', b))[0]


def e4m3(x):
    ax = abs(x)
    if ax == 0:
        return 0.0
    e = max(math.floor(math.log2(ax)), -6)
    step = 2.0 ** (e - 3)
    return math.copysign(min(round(ax / step) * step, 448.0), x)


def inputs(n, hd, G, vary):
    k = [[bf16(rnd.uniform(-3, 3)) for _ in range(hd)] for _ in range(n)]
    v = [[bf16(rnd.uniform(-2, 2)) for _ in range(hd)] for _ in range(n)]
    if vary:
        for j in range(n):
            fk, fv = 2.0 ** ((j * 5) % 9 - 4), 2.0 ** ((j * 5 + 4) % 9 - 4)
            k[j] = [x * fk for x in k[j]]
            v[j] = [x * fv for x in v[j]]
    q = [[bf16(rnd.uniform(-1, 1)) for _ in range(hd)] for _ in range(G)]
    sk = [max(abs(x) for x in r) / 448 for r in k]
    sv = [max(abs(x) for x in r) / 448 for r in v]
    kc = [[e4m3(x / sk[j]) for x in k[j]] for j in range(n)]
    vc = [[e4m3(x / sv[j]) for x in v[j]] for j in range(n)]
    return q, kc, vc, sk, sv


def exact(q, kc, vc, sk, sv, hd):
    n, sc = len(kc), 1 / math.sqrt(hd)
    s = [sum(a * b for a, b in zip(q, kc[j])) * sc * sk[j] for j in range(n)]
    mx = max(s)
    p = [math.exp(x - mx) for x in s]
    tot = sum(p)
    return [sum(p[j] * sv[j] * vc[j][d] for j in range(n)) / tot for d in range(hd)]


def decode_t(q, kc, vc, sk, sv, hd, warps=4):
    n, sc, l2e = len(kc), 1 / math.sqrt(hd), 1 / math.log(2)
    parts = []
    for w in range(warps):
        m, l, o, r = -math.inf, 0.0, [0.0] * hd, 0.0
        for b in range(w, (n + 15) // 16, warps):
            keys = range(16 * b, min(16 * b + 16, n))
            x = {j: sum(a * c for a, c in zip(q, kc[j])) * sk[j] * sc * l2e for j in keys}
            xm = max(x.values())
            if xm > m + 8:
                alpha = 1.0 if m == -math.inf else 2.0 ** (m - xm)
                l, o, m = l * alpha, [a * alpha for a in o], xm
            p = {j: 2.0 ** (x[j] - m) for j in keys}
            l += sum(p.values())
            bm = max(sv[j] for j in keys)
            if bm > r:
                o, r = [a * r / bm for a in o], bm
            for j in keys:
                pp = f16(p[j] * (sv[j] * (1 / r)))
                o = [a + pp * c for a, c in zip(o, vc[j])]
        parts.append((m * math.log(2), l, [a * r for a in o]))
    mm = max(pt[0] for pt in parts)
    wts = [math.exp(pt[0] - mm) if pt[0] > -math.inf else 0.0 for pt in parts]
    lt = sum(pt[1] * wt for pt, wt in zip(parts, wts))
    return [sum(pt[2][d] * wt for pt, wt in zip(parts, wts)) / lt for d in range(hd)]


def f16_cvt(q, kc, vc, sk, sv, hd):
    n, sc = len(kc), 1 / math.sqrt(hd)
    kb = [[bf16(c * sk[j]) for c in kc[j]] for j in range(n)]
    vb = [[bf16(c * sv[j]) for c in vc[j]] for j in range(n)]
    s = [sum(a * b for a, b in zip(q, kb[j])) * sc for j in range(n)]
    mx = max(s)
    p = [math.exp(x - mx) for x in s]
    tot = sum(p)
    return [sum(bf16(p[j]) * vb[j][d] for j in range(n)) / tot for d in range(hd)]


def nmse(model, n, hd, G, vary):
    q, kc, vc, sk, sv = inputs(n, hd, G, vary)
    num = den = 0.0
    for h in range(G):
        ref = exact(q[h], kc, vc, sk, sv, hd)
        got = model(q[h], kc, vc, sk, sv, hd)
        num += sum((a - b) ** 2 for a, b in zip(got, ref))
        den += sum(b * b for b in ref)
    return num / den


for name, model in (("decode_t", decode_t), ("prefill_f16_cvt", f16_cvt)):
    for n, hd, G, vary in ((700, 64, 4, False), (700, 64, 4, True), (1500, 128, 1, False)):
        print(f"{name:16s} n={n:5d} hd={hd:3d} G={G} {'rows 2^-4..2^4' if vary else 'uniform':15s} "
              f"NMSE {nmse(model, n, hd, G, vary):.3g}")
