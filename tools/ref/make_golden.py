"""Greedy-decoding golden fixture for stories260K (NumPy float64 reference).

Run from the repo root:  /usr/bin/python3 tools/ref/make_golden.py
Writes tests/golden/stories260K_greedy.json.

JSON schema
-----------
{
  "model":        "stories260K.gguf",
  "model_sha256": hex digest of the GGUF file used,
  "precision":    "float64",             # reference arithmetic
  "logit_digits": 6,                     # logits rounded to 6 significant digits
  "n_vocab":      512,
  "n_gen":        32,                    # tokens generated per prompt, greedy argmax,
                                         # no EOS stopping, no sampling
  "n_logit_steps": 9,
  "prompts": [                           # 3 entries, in this order:
    {                                    # "Once upon a time", "The little dog", "Lily wanted to"
      "text":        prompt string,
      "prompt_ids":  [int],              # SPM tokenization, BOS (1) first
      "gen_ids":     [int] * 32,         # greedy continuation
      "gen_text":    decoded continuation (informational),
      "full_text":   decoded prompt+continuation (informational),
      "top2_margin": [float] * 32,       # logit(top1) - logit(top2) at each greedy step:
                                         # small values mean a fragile argmax
      "logits": [                        # n_logit_steps vectors of n_vocab floats:
        [float]*512,                     # logits[0] = at the LAST PROMPT position
        ...                              #   (position len(prompt_ids)-1), it picks gen_ids[0];
      ],                                 # logits[k] (k=1..8) = at the position of gen_ids[k-1]
                                         #   (position len(prompt_ids)-1+k), it picks gen_ids[k]
      "logit_positions": [int] * 9       # the absolute positions of the vectors above
    }, ...
  ],
  "teacher_forced": {                    # prompt 1 only
    "prompt_index": 0,
    "ids":   prompt_ids + gen_ids,       # 37 tokens, evaluated in ONE forward pass
    "logits": [[float]*512] * 37         # logits at every position 0..36 (row p predicts
  }                                      # the token at p+1; the last row predicts beyond)
}
Argmax ties would be resolved to the lowest token id (numpy argmax); none occur
(see top2_margin).
"""
import hashlib
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_llama import Model, DEFAULT_MODEL  # noqa: E402

OUT = "tests/golden/stories260K_greedy.json"
PROMPTS = ["Once upon a time", "The little dog", "Lily wanted to"]
N_GEN = 32
N_LOGIT_STEPS = 9
DIGITS = 6


def r6(v):
    return [float("%.*g" % (DIGITS, x)) for x in np.asarray(v, dtype=np.float64)]


def main():
    with open(DEFAULT_MODEL, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    m = Model(DEFAULT_MODEL)
    assert m.encode("Once upon a time") == [1, 403, 407, 261, 378]
    out = {
        "model": os.path.basename(DEFAULT_MODEL),
        "model_sha256": sha,
        "precision": "float64",
        "logit_digits": DIGITS,
        "n_vocab": m.vocab,
        "n_gen": N_GEN,
        "n_logit_steps": N_LOGIT_STEPS,
        "prompts": [],
    }
    for text in PROMPTS:
        ids = m.encode(text)
        assert ids == m.encode_heap(text)
        gen, step_logits = m.greedy(ids, N_GEN)
        margins = []
        for lg in step_logits:
            s = np.sort(lg)
            margins.append(float("%.6g" % (s[-1] - s[-2])))
        # consistency: one teacher-forced pass reproduces the step logits
        full = m.forward(ids + gen)
        for k in range(N_GEN):
            assert np.max(np.abs(full[len(ids) - 1 + k] - step_logits[k])) < 1e-9
        out["prompts"].append({
            "text": text,
            "prompt_ids": ids,
            "gen_ids": gen,
            "gen_text": m.decode(gen, strip_leading_space=False),
            "full_text": m.decode(ids + gen),
            "top2_margin": margins,
            "logits": [r6(step_logits[k]) for k in range(N_LOGIT_STEPS)],
            "logit_positions": [len(ids) - 1 + k for k in range(N_LOGIT_STEPS)],
        })
        print("%-18r %s" % (text, ids))
        print("   gen %s" % gen)
        print("   %r   (min top2 margin %.4f)" % (m.decode(ids + gen), min(margins)))
    p0 = out["prompts"][0]
    tf_ids = p0["prompt_ids"] + p0["gen_ids"]
    tf = m.forward(tf_ids)
    out["teacher_forced"] = {
        "prompt_index": 0,
        "ids": tf_ids,
        "logits": [r6(row) for row in tf],
    }
    # float32 cross-check (informational): same code in float32
    m32 = Model(DEFAULT_MODEL, dtype=np.float32)
    d = float(np.max(np.abs(m32.forward(tf_ids).astype(np.float64) - tf)))
    print("max |f32 - f64| logit diff over teacher-forced run: %.3g" % d)
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")
    print("wrote %s (%d bytes)" % (OUT, os.path.getsize(OUT)))


if __name__ == "__main__":
    main()
