"""ref_gguf_run.py — the NumPy reference (ref_llama.py, float64) run on any Llama GGUF, its block-type
weights dequantized by gguf_read.py / gguf_quant.py: what tests/cli/test_quant_gguf.sh compares
octet's greedy tokens, logits and perplexity on the same file with.

  ref_gguf_run.py MODEL --prompt TEXT [--gen N] [--ppl-file FILE --ctx N [--chunks N]]

Prints one JSON object: prompt_tokens, tokens (greedy, no EOS stop), logits (of the prompt's last
position), margin (the smallest gap between the best and second-best logit over the greedy steps, so
a test can tell a near-tie from a difference), and ppl (llama-perplexity's method, ref_ppl.py) when
--ppl-file is given.
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_llama import Model  # noqa: E402
import ref_ppl  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--prompt", required=True)
    ap.add_argument("--gen", type=int, default=8)
    ap.add_argument("--ppl-file")
    ap.add_argument("--ctx", type=int, default=128)
    ap.add_argument("--chunks", type=int, default=0)
    a = ap.parse_args()
    m = Model(a.model)
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
    if a.ppl_file:
        with open(a.ppl_file, encoding="utf-8") as f:
            toks = m.encode(f.read())
        if a.chunks:
            toks = toks[:a.chunks * a.ctx]
        out["ppl"] = ref_ppl.perplexity(m, toks, a.ctx)["ppl"]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
