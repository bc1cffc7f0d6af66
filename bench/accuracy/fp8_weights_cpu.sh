#!/usr/bin/env bash
# fp8_weights_cpu.sh — what FP8 weights cost in accuracy, on the CPU reference (docs/fp8_weights.md):
# perplexity, mean/p99 KLD and top-1 agreement of each FP8 scheme against the same model unquantized
# (`octet eval ppl --ref-model`), on stories260K (tests/data/heldout.txt), models/passkey.gguf (pass-key
# prompts from tools/train_passkey/data.py, seed 44) and the transformers fixtures (tests/data/hf; random
# weights, so only KLD / top-1 mean anything there).
# Schemes: `--quantization fp8` per output channel and in 128x128 blocks, with the gate's activations in
# e4m3 or e5m2, with the first and last layers and lm_head skipped; and checkpoints written by
# tools/make_fp8_checkpoint.py (per tensor, dynamic or static activations; per channel, static) where the
# model has a Hugging Face form with its tokenizer (passkey: tools/gguf_to_safetensors.py, byte tokens;
# stories260K's SentencePiece tokenizer has no tokenizer.json, so it gets the --quantization rows only).
# Static activation scales are one uncalibrated value for every layer: input_amax / 448.
# Usage: bash bench/accuracy/fp8_weights_cpu.sh [BUILD_DIR]   (markdown table on stdout, JSON lines on stderr)
set -eu
BUILD=${1:-build}
OCTET="$BUILD/octet"
PY=/usr/bin/python3
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$PY" - "$tmp/passkey.txt" <<'PYEOF'
import sys
sys.path.insert(0, "tools/train_passkey")
import numpy as np
from data import sample, decode
rng = np.random.default_rng(44)
out = [decode(sample(rng, 1000, ("octet", "varied", "multi")[i % 3])[0]) for i in range(24)]
open(sys.argv[1], "w").write("\n".join(out) + "\n")
PYEOF
row() {  # model-label scheme-label model ref text ctx [flags...]
  local label=$1 scheme=$2 m=$3 r=$4 text=$5 ctx=$6; shift 6
  # (the checkpoints this script writes live in a temporary folder: the record names them <generated>/...)
  j=$("$OCTET" eval ppl -m "$m" --ref-model "$r" -f "$text" -c "$ctx" --json "$@" 2>/dev/null |
    sed "s|$tmp/|<generated>/|g")
  echo "{\"model\": \"$label\", \"scheme\": \"$scheme\", \"eval\": $j}" >&2
  "$PY" -c 'import json,sys; d=json.loads(sys.argv[1]); print("| %s | %s | %.4f | %.4f | %+.2f%% | %.3g | %.3g | %.4f |" % (sys.argv[2], sys.argv[3], d["ref_ppl"], d["ppl"], 100*(d["ppl"]/d["ref_ppl"]-1), d["kld_mean"], d["kld_p99"], d["top1_agree"]))' \
    "$j" "$label" "$scheme"
}
flag_rows() {  # label model text ctx last-layer
  local label=$1 m=$2 text=$3 ctx=$4 last=$5
  row "$label" "channel, dynamic" "$m" "$m" "$text" "$ctx" --quantization fp8
  row "$label" "channel, dynamic, gate e5m2" "$m" "$m" "$text" "$ctx" --quantization fp8 --fp8-gate-dtype e5m2
  row "$label" "block 128, dynamic" "$m" "$m" "$text" "$ctx" --quantization fp8 --quantization-block 128
  row "$label" "block 128, dynamic, gate e5m2" "$m" "$m" "$text" "$ctx" --quantization fp8 --quantization-block 128 \
    --fp8-gate-dtype e5m2
  row "$label" "channel, skip 0,$last,lm_head" "$m" "$m" "$text" "$ctx" --quantization fp8 \
    --quantization-skip-layers "0,$last,lm_head"
}
ckpt_rows() {  # label hf-dir text ctx amax...
  local label=$1 d=$2 text=$3 ctx=$4; shift 4
  "$PY" tools/make_fp8_checkpoint.py "$d" "$tmp/t" --format fp8 --weights tensor >/dev/null
  row "$label" "tensor, dynamic (fp8 ckpt)" "$tmp/t" "$d" "$text" "$ctx"
  row "$label" "tensor, dynamic, gate e5m2 (fp8 ckpt)" "$tmp/t" "$d" "$text" "$ctx" --fp8-gate-dtype e5m2
  for a in "$@"; do
    "$PY" tools/make_fp8_checkpoint.py "$d" "$tmp/ts" --format fp8 --weights tensor --activations static \
      --input-amax "$a" >/dev/null
    row "$label" "tensor, static amax $a (fp8 ckpt)" "$tmp/ts" "$d" "$text" "$ctx"
    "$PY" tools/make_fp8_checkpoint.py "$d" "$tmp/cs" --format compressed-tensors --weights channel \
      --activations static --input-amax "$a" >/dev/null
    row "$label" "channel, static amax $a (c-t ckpt)" "$tmp/cs" "$d" "$text" "$ctx"
  done
  rm -rf "$tmp/t" "$tmp/ts" "$tmp/cs"
}
echo "| model | scheme | ref ppl | ppl | ppl change | KLD mean | KLD p99 | top-1 agree |"
echo "|---|---|---:|---:|---:|---:|---:|---:|"
flag_rows stories260K ../shared/models/stories260K.gguf tests/data/heldout.txt 256 4
"$PY" tools/gguf_to_safetensors.py models/passkey.gguf "$tmp/passkey" >/dev/null
flag_rows passkey models/passkey.gguf "$tmp/passkey.txt" 512 3
ckpt_rows passkey "$tmp/passkey" "$tmp/passkey.txt" 512 4 16 64
for f in llama3_rope qwen2 qwen3 mistral phi3 gemma2; do
  flag_rows "hf/$f" "tests/data/hf/$f" tests/data/heldout.txt 128 1
  ckpt_rows "hf/$f" "tests/data/hf/$f" tests/data/heldout.txt 128 8
done
