"""Perplexity the way llama.cpp's `llama-perplexity` computes it (default mode).

Algorithm:
  1. tokenize the whole file once, with BOS prepended (SPM: one leading '▁').
  2. n_chunk = floor(n_tokens / n_ctx); chunk c = tokens[c*n_ctx : (c+1)*n_ctx].
  3. in each chunk, the first token is replaced by BOS; the chunk is evaluated
     from an empty cache (positions 0..n_ctx-1).
  4. positions first = n_ctx/2 .. n_ctx-2 are scored: the NLL of the token at
     position j+1 (the ORIGINAL token, from the full token list) given logits at
     position j. That is n_ctx - 1 - n_ctx/2 scored tokens per chunk.
  5. ppl = exp(sum NLL / count)   (float64 log-softmax).

Writes tests/golden/stories260K_ppl.json with an entry per context size.

Run from the repo root:  /usr/bin/python3 tools/ref/ref_ppl.py
"""
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_llama import Model, DEFAULT_MODEL  # noqa: E402

TEXT = "tests/data/heldout.txt"
OUT = "tests/golden/stories260K_ppl.json"
CTXS = (128, 256)


def log_softmax(lg):
    m = lg.max(axis=-1, keepdims=True)
    return lg - m - np.log(np.exp(lg - m).sum(axis=-1, keepdims=True))


def perplexity(model, tokens, n_ctx):
    n_chunk = len(tokens) // n_ctx
    first = n_ctx // 2
    nll_sum, count = 0.0, 0
    per_chunk = []
    for c in range(n_chunk):
        start = c * n_ctx
        chunk = list(tokens[start:start + n_ctx])
        chunk[0] = model.bos
        lp = log_softmax(model.forward(chunk))
        tgt = np.asarray(tokens[start + first + 1:start + n_ctx])
        nll = -lp[np.arange(first, n_ctx - 1), tgt]
        nll_sum += float(nll.sum())
        count += len(nll)
        per_chunk.append(math.exp(nll_sum / count))  # running estimate, as printed by llama.cpp
    return {
        "n_ctx": n_ctx,
        "n_chunks": n_chunk,
        "n_scored": count,
        "scored_per_chunk": n_ctx - 1 - first,
        "first_scored_pos": first,
        "mean_nll": nll_sum / count,
        "ppl": math.exp(nll_sum / count),
        "running_ppl_per_chunk": [float("%.6g" % p) for p in per_chunk],
    }


def main():
    model = Model(DEFAULT_MODEL)
    with open(TEXT, "rb") as f:
        text = f.read().decode("utf-8")
    tokens = model.encode_heap(text, add_bos=True)
    # cross-check: the plain O(n^2) greedy-merge encoder must agree (about 15 s)
    assert tokens == model.encode(text, add_bos=True), "tokenizer implementations disagree"
    assert model.decode(tokens) == text, "detokenize round trip failed"
    out = {
        "model": os.path.basename(DEFAULT_MODEL),
        "text_file": TEXT,
        "text_bytes": len(text.encode("utf-8")),
        "n_tokens_file": len(tokens),
        "tokenization": "SPM, BOS prepended, leading space added once; n_tokens_file includes BOS",
        "first_tokens": tokens[:16],
        "precision": "float64",
        "results": {},
    }
    for n_ctx in CTXS:
        r = perplexity(model, tokens, n_ctx)
        out["results"][str(n_ctx)] = r
        print("n_ctx=%d chunks=%d scored=%d ppl=%.6f" % (n_ctx, r["n_chunks"], r["n_scored"], r["ppl"]))
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print("n_tokens_file=%d -> %s" % (len(tokens), OUT))


if __name__ == "__main__":
    main()
