"""ref_gguf_run.py — the NumPy reference (ref_llama.py, float64) run on any Llama GGUF, its block-type
weights dequantized by gguf_read.py / gguf_quant.py: what tests/cli/test_quant_gguf.sh compares
octet's greedy tokens, logits and perplexity on the same file with. As octet's CPU matmul does, a
product with block-type weights takes x as float32 quantized to 8 bits per block (gguf_quant.quantize_x),
then multiplies in float64.

  ref_gguf_run.py MODEL --prompt TEXT [--gen N] [--follow "ID ..."] [--ppl-file FILE --ctx N [--chunks N]]

Prints one JSON object: prompt_tokens, tokens (greedy, no EOS stop), logits (of the prompt's last
position), margin (the smallest gap between the best and second-best logit over the greedy steps, so
a test can tell a near-tie from a difference), and ppl (llama-perplexity's method, ref_ppl.py) when
--ppl-file is given; with --follow (another engine's greedy tokens after the prompt), follow_gaps: at each
of those steps, the reference's best logit minus its logit for that token (0 where they agree).
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_llama import Model  # noqa: E402
from gguf_read import read_layout  # noqa: E402
import gguf_quant  # noqa: E402
import ref_ppl  # noqa: E402


class QuantX:
    """Stands for W.T of a block-type weight W (float64 [out, in], dequantized): h @ QuantX gives
    dequant(quantize_x(float32(h))) @ W.T, row by row."""
    __array_ufunc__ = None  # (so that ndarray @ QuantX comes here)

    def __init__(self, w, block):
        self.w, self.block = w, block

    def __rmatmul__(self, h):
        h = np.atleast_2d(np.asarray(h, dtype=np.float32))
        xh = np.empty(h.shape, np.float64)
        for i, row in enumerate(h):
            q, d, _ = gguf_quant.quantize_x(row, self.block)
            xh[i] = (q.reshape(-1, self.block).astype(np.float64) * d[:, None]).reshape(-1)
        return xh @ self.w.T


class Quant:
    def __init__(self, w, block):
        self.T = QuantX(w, block)


def quantize_activations(m, path):
    """Replace m's block-type matrices (the layers' and the output's) by Quant stand-ins."""
    gtypes = {name: gt for name, _, gt, _ in read_layout(path)[2]}

    def wrap(name, w):
        return Quant(w, gguf_quant.qx_block(gtypes[name])) if gtypes.get(name) in gguf_quant.TYPES else w
    for i, L in enumerate(m.layers):
        for k in ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"):
            L[k] = wrap("blk.%d.%s.weight" % (i, k), L[k])
    m.out_w = wrap("output.weight" if "output.weight" in gtypes else "token_embd.weight", m.out_w)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--prompt", required=True)
    ap.add_argument("--gen", type=int, default=8)
    ap.add_argument("--ppl-file")
    ap.add_argument("--ctx", type=int, default=128)
    ap.add_argument("--chunks", type=int, default=0)
    ap.add_argument("--follow", default="")
    a = ap.parse_args()
    m = Model(a.model)
    quantize_activations(m, a.model)
    ids = m.encode(a.prompt)
    out = {"prompt_tokens": ids}
    seq, gen, margin = list(ids), [], float("inf")
    for i in range(a.gen):
        lg = m.forward(seq)[-1]
        if i == 0:
            out["logits"] = [float(v) for v in lg]
        top = np.sort(lg)[-2:]
        margin = min(margin, float(top[1] - top[0]))
        t = int(np.argmax(lg))
        gen.append(t)
        seq.append(t)
    out["tokens"], out["margin"] = gen, margin
    if a.follow:
        seq, gaps = list(ids), []
        for t in map(int, a.follow.split()):
            lg = m.forward(seq)[-1]
            gaps.append(float(lg.max() - lg[t]))
            seq.append(t)
        out["follow_gaps"] = gaps
    if a.ppl_file:
        with open(a.ppl_file, encoding="utf-8") as f:
            toks = m.encode(f.read())
        if a.chunks:
            toks = toks[:a.chunks * a.ctx]
        out["ppl"] = ref_ppl.perplexity(m, toks, a.ctx)["ppl"]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
