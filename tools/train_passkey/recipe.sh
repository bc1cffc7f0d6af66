#!/usr/bin/env bash
# recipe.sh OUTDIR — trains the committed models/passkey.gguf from nothing on one GPU (about
# 7 minutes on an H200) and compares the result's tensors with the committed file.
#   stage 1: train.py's defaults with seed 1 (2150 steps, lengths 256 -> 131072, ~250 s)
#   stage 2: 300 steps at 131072 tokens from stage 1's BF16 export, seed 3, 30 % of single needles
#            right after the intro (eval's depth 0 %), learning rate 3e-4 -> 3e-5 (~155 s)
# Both stages run PyTorch's deterministic kernels, so on the same GPU and software the tensors
# match exactly (the files differ only in the paths they record). Usage (repo root, GPU machine):
#   bash tools/train_passkey/recipe.sh /tmp/recipe
set -eu
OUT=${1:?usage: tools/train_passkey/recipe.sh OUTDIR}
export PYTHONUNBUFFERED=1 CUBLAS_WORKSPACE_CONFIG=:4096:8
STAGE2_ARGS=(--seed 3 --curriculum 300:131072-131072:131072+16384:early=0.5:first=0.3
             --lr 3e-4 --warmup 20 --lr-final 0.1 --eval-lengths 131072 --eval-keys 4)
python3 tools/train_passkey/train.py --out-dir "$OUT/stage1" --seed 1
python3 tools/train_passkey/train.py --out-dir "$OUT/stage2" --init "$OUT/stage1/passkey.gguf" "${STAGE2_ARGS[@]}"
python3 - "$OUT/stage2/passkey.gguf" models/passkey.gguf <<'PY'
import sys
import numpy as np
sys.path.insert(0, "tools/train_passkey")
import ref_numpy
a, b = (ref_numpy.load(p)[1] for p in sys.argv[1:3])
d = max(float(np.abs(a[k] - b[k]).max()) for k in a)
print("stage 2 vs %s: max |dw| = %.3e (%s)" % (sys.argv[2], d, "identical tensors" if d == 0 else "different"))
PY
