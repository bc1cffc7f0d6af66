"""Per-channel K offsets for an FP8 KV cache, in the float64 NumPy reference.

What it checks: octet's `calibrate --k-offset mean` + `--kv-scales` (docs/kv_format.md)
stores K as e4m3(K - mean) and never adds the mean back, because q.mean shifts every
score of a query by the same amount and softmax cancels it. This script computes the same
thing independently (ref_llama's forward pass, ref_fp8's code table, ref_ppl's method)
and prints the perplexity of:
  fp32          no rounding
  e4m3          K and V rounded to e4m3 at scale 1.0
  e4m3+offset   K - mean rounded (mean per layer, KV head and channel of K after RoPE,
                over the calibration text), V rounded, both at scale 1.0
on the second half of tests/data/heldout.txt (calibration on the first 12,380 bytes, as
bench/accuracy/calibration_stories260K.sh does) and on the whole file.

Run from the repo root:  /usr/bin/python3 tools/ref/ref_kv_offset.py   (a few minutes)
Rounding here is float64 with ties to even over ref_fp8's table of e4m3 values; octet
rounds the float32 quotient, so figures agree to rounding, not bit for bit.
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ref_fp8  # noqa: E402
import ref_ppl  # noqa: E402
from ref_llama import Model, DEFAULT_MODEL  # noqa: E402

TEXT = "tests/data/heldout.txt"
CALIB_BYTES = 12380
CTX = 256

# positive finite e4m3 values in code order (increasing), and their codes
_CODES = [c for c, _ in ref_fp8._POS["e4m3"]]
_VALS = np.array([float(v) for _, v in ref_fp8._POS["e4m3"]])


def e4m3(x):
    """Round to the nearest e4m3 value, ties to the even code, saturating at +-448."""
    a = np.minimum(np.abs(x), _VALS[-1])
    hi = np.clip(np.searchsorted(_VALS, a), 1, len(_VALS) - 1)
    lo = hi - 1
    dlo, dhi = a - _VALS[lo], _VALS[hi] - a
    even_hi = (np.array(_CODES)[hi] & 1) == 0
    pick_hi = (dhi < dlo) | ((dhi == dlo) & even_hi)
    return np.sign(x) * np.where(pick_hi, _VALS[hi], _VALS[lo])


class KVModel(Model):
    """ref_llama's forward pass with the K/V the cache would hold (mode: fp32, e4m3, offset)."""

    mode = "fp32"
    offsets = None      # [n_layers][n_kv_heads][head_dim], for mode "offset"
    collect = None      # list per layer of K arrays [T][n_kv][hd], when collecting

    def cache(self, li, k, v):
        if self.collect is not None:
            self.collect[li].append(k.copy())
        if self.mode == "offset":
            return e4m3(k - self.offsets[li][None]), e4m3(v)   # the mean is never added back
        if self.mode == "e4m3":
            return e4m3(k), e4m3(v)
        return k, v

    def forward(self, tokens, return_hidden=False):
        return Model.forward(self, tokens, return_hidden, kv_hook=self.cache)


def main():
    m = KVModel(DEFAULT_MODEL)
    text = open(TEXT).read()
    calib, held = text[:CALIB_BYTES], text[CALIB_BYTES:]
    # offsets: mean of K over the calibration text's chunks (first token of each -> BOS)
    ids = m.encode(calib)[:4096]
    m.collect = [[] for _ in m.layers]
    for at in range(0, len(ids), CTX):
        chunk = list(ids[at:at + CTX])
        chunk[0] = m.bos
        m.forward(chunk)
    m.offsets = [np.concatenate(ks, axis=0).mean(axis=0) for ks in m.collect]
    m.collect = None
    out = {"model": os.path.basename(DEFAULT_MODEL), "ctx": CTX, "calibration_tokens": len(ids), "rows": []}
    for name, t in (("second half", held), ("whole file", text)):
        toks = m.encode(t)
        ppl = {}
        for mode in ("fp32", "e4m3", "offset"):
            m.mode = mode
            ppl[mode] = ref_ppl.perplexity(m, toks, CTX)["ppl"]
        out["rows"].append({"text": name, "ppl_fp32": ppl["fp32"], "ppl_e4m3": ppl["e4m3"], "ppl_e4m3_offset": ppl["offset"]})
        print("%-11s fp32 %.4f | e4m3 %.4f (%+.2f %%) | e4m3 + K offsets %.4f (%+.2f %%)" % (
            name, ppl["fp32"], ppl["e4m3"], 100 * (ppl["e4m3"] / ppl["fp32"] - 1),
            ppl["offset"], 100 * (ppl["offset"] / ppl["fp32"] - 1)), flush=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
