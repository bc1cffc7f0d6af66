"""RoPE frequency tables from the published formulas (HF transformers
`modeling_rope_utils` semantics), computed in float64.

Run from the repo root:  /usr/bin/python3 tools/ref/ref_rope.py
Writes tests/golden/rope.json:
{
  "precision": "float64",
  "configs": [ { "name", "rope_type", "params": {...}, "dim",
                 "inv_freq": [d/2 floats],   # rotation pair i turns by pos*inv_freq[i]
                 "attention_factor": float,  # multiply cos and sin by this (YaRN mscale); 1.0 otherwise
                 "extra": {...} } ... ],     # intermediate values (effective base, yarn low/high, ...)
  "rotations": [ { "config", "dim", "pos", "x": [d], "normal": [d], "neox": [d] } ... ]
}
Layouts:  normal = adjacent pairs (x[2i], x[2i+1]) (llama.cpp LLAMA_ROPE_TYPE_NORM, Meta/GGUF llama);
          neox   = half split   (x[i],  x[i+d/2])  (HF rotate_half, GPT-NeoX).
Both:  y_a = x_a cos(p*f_i) - x_b sin(p*f_i);  y_b = x_a sin(p*f_i) + x_b cos(p*f_i).
No attention_factor is applied in "rotations" (they use the default config).

Formulas (inv_freq_default[i] = base^(-2i/d), i = 0..d/2-1):
  default : inv_freq_default, attention_factor 1.
  linear  : inv_freq_default / factor.
  dynamic (vLLM's static form): max_len = max_pos*factor,
            base' = base * ((factor*max_len/max_pos) - (factor-1)) ** (d/(d-2))
                  = base * (factor^2 - factor + 1) ** (d/(d-2)).
            NB: this is NOT base*factor^(d/(d-2)); for factor 2 the bracket is 3.
            Same as HF `dynamic` evaluated at seq_len = max_pos*factor.
            An HF entry at seq_len = 1.5*max_pos (bracket = 2) is also given.
  ntk_alpha: base' = base * alpha ** (d/(d-2)).
  yarn    : HF _compute_yarn_parameters with truncate=True (default):
            find_correction_dim(r) = d*ln(max_pos_orig/(r*2pi)) / (2 ln base)
            low = max(floor(fcd(beta_fast)), 0); high = min(ceil(fcd(beta_slow)), d-1)
            ramp[i] = clamp((i - low)/(high - low), 0, 1), i = 0..d/2-1 (high += 0.001 if equal)
            extrap = 1 - ramp
            inv_freq = (inv_freq_default/factor)*(1-extrap) + inv_freq_default*extrap
            attention_factor = 0.1*ln(factor) + 1 (factor > 1).
  llama3  : wavelen = 2pi/inv_freq_default; low_wl = old_ctx/low_ff; high_wl = old_ctx/high_ff
            wavelen > low_wl            -> inv_freq/factor
            wavelen < high_wl           -> inv_freq
            otherwise: s = (old_ctx/wavelen - low_ff)/(high_ff - low_ff),
                       (1-s)*inv_freq/factor + s*inv_freq
"""
import json
import math
import os

import numpy as np

OUT = "tests/golden/rope.json"


def inv_freq_default(base, d):
    return base ** (-np.arange(0, d, 2, dtype=np.float64) / d)


def cfg(name, rope_type, params, d, inv, att=1.0, extra=None):
    return {"name": name, "rope_type": rope_type, "params": params, "dim": d,
            "inv_freq": [float(v) for v in inv], "attention_factor": float(att),
            "extra": extra or {}}


def yarn(base, d, factor, orig_max, beta_fast, beta_slow, truncate=True):
    def fcd(rot):
        return (d * math.log(orig_max / (rot * 2 * math.pi))) / (2 * math.log(base))
    low, high = fcd(beta_fast), fcd(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, d - 1)
    lo, hi = float(low), float(high)
    if lo == hi:
        hi += 0.001
    ramp = np.clip((np.arange(d // 2, dtype=np.float64) - lo) / (hi - lo), 0.0, 1.0)
    extrap = 1.0 - ramp
    f = inv_freq_default(base, d)
    inv = (f / factor) * (1.0 - extrap) + f * extrap
    att = 0.1 * math.log(factor) + 1.0 if factor > 1 else 1.0
    return inv, att, {"low": low, "high": high,
                      "low_untruncated": fcd(beta_fast), "high_untruncated": fcd(beta_slow),
                      "extrapolation_factor": [float(v) for v in extrap]}


def llama3(base, d, factor, low_ff, high_ff, old_ctx):
    f = inv_freq_default(base, d)
    wl = 2 * math.pi / f
    low_wl, high_wl = old_ctx / low_ff, old_ctx / high_ff
    out = np.where(wl > low_wl, f / factor, f)
    s = (old_ctx / wl - low_ff) / (high_ff - low_ff)
    smooth = (1 - s) * out / factor + s * out
    medium = ~(wl < high_wl) & ~(wl > low_wl)
    out = np.where(medium, smooth, out)
    band = ["low_freq_scaled" if w > low_wl else ("high_freq_kept" if w < high_wl else "smoothed")
            for w in wl]
    return out, {"band": band}


def rotate(x, pos, inv, layout):
    x = np.asarray(x, dtype=np.float64)
    d = len(x)
    y = x.copy()
    for i in range(d // 2):
        a, b = (2 * i, 2 * i + 1) if layout == "normal" else (i, i + d // 2)
        c, s = math.cos(pos * inv[i]), math.sin(pos * inv[i])
        y[a] = x[a] * c - x[b] * s
        y[b] = x[a] * s + x[b] * c
    return y


def main():
    C = []
    C.append(cfg("default_d128", "default", {"theta": 10000.0}, 128, inv_freq_default(10000.0, 128)))
    C.append(cfg("default_d8", "default", {"theta": 10000.0}, 8, inv_freq_default(10000.0, 8)))
    C.append(cfg("linear_f4_d128", "linear", {"theta": 10000.0, "factor": 4.0}, 128,
                 inv_freq_default(10000.0, 128) / 4.0))
    d, base, fac, mp = 128, 10000.0, 2.0, 4096
    max_len = mp * fac
    nb = base * ((fac * max_len / mp) - (fac - 1)) ** (d / (d - 2))
    C.append(cfg("dynamic_vllm_static_f2_d128", "dynamic",
                 {"theta": base, "factor": fac, "max_position_embeddings": mp, "seq_len": max_len},
                 d, inv_freq_default(nb, d), 1.0, {"effective_base": nb,
                 "note": "base*((factor*max_len/max_pos)-(factor-1))**(d/(d-2)), max_len=max_pos*factor"}))
    sl = 6144
    nb2 = base * ((fac * sl / mp) - (fac - 1)) ** (d / (d - 2))
    C.append(cfg("dynamic_hf_f2_seq6144_d128", "dynamic",
                 {"theta": base, "factor": fac, "max_position_embeddings": mp, "seq_len": sl},
                 d, inv_freq_default(nb2, d), 1.0, {"effective_base": nb2}))
    alpha = 4.0
    nb3 = base * alpha ** (d / (d - 2))
    C.append(cfg("ntk_alpha4_d128", "ntk_alpha", {"theta": base, "alpha": alpha}, d,
                 inv_freq_default(nb3, d), 1.0, {"effective_base": nb3}))
    inv, att, ex = yarn(10000.0, 128, 4.0, 4096, 32.0, 1.0)
    C.append(cfg("yarn_f4_d128", "yarn", {"theta": 10000.0, "factor": 4.0,
                 "original_max_position_embeddings": 4096, "beta_fast": 32.0, "beta_slow": 1.0,
                 "truncate": True}, 128, inv, att, ex))
    inv, ex = llama3(500000.0, 128, 8.0, 1.0, 4.0, 8192)
    C.append(cfg("llama3_f8_d128", "llama3", {"theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                 "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}, 128, inv, 1.0, ex))

    inv8 = inv_freq_default(10000.0, 8)
    x = [0.5, -1.25, 2.0, 0.75, -0.5, 1.5, -2.25, 1.0]  # float32-exact
    R = []
    for pos in (0, 1, 7, 100, 4095):
        R.append({"config": "default_d8", "dim": 8, "pos": pos, "x": x,
                  "normal": [float(v) for v in rotate(x, pos, inv8, "normal")],
                  "neox": [float(v) for v in rotate(x, pos, inv8, "neox")]})
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump({"precision": "float64", "configs": C, "rotations": R}, f, indent=1)
        f.write("\n")
    for c in C:
        print("%-30s att=%.6f inv[0]=%.6g inv[1]=%.6g inv[-1]=%.6g %s" % (
            c["name"], c["attention_factor"], c["inv_freq"][0], c["inv_freq"][1], c["inv_freq"][-1],
            {k: v for k, v in c["extra"].items() if k in ("effective_base", "low", "high")}))
    print("wrote", OUT, os.path.getsize(OUT), "bytes")


if __name__ == "__main__":
    main()
