#!/usr/bin/env bash
# calibration_choice_stories260K.sh — the "calibration that never hurts" record of bench/accuracy/RESULTS.md:
# `octet calibrate` on the first half of tests/data/heldout.txt, evaluated on the disjoint second half against
# the fp32 cache (perplexity, KLD, top-1 agreement): scale 1.0, fixed recipes (per-tensor max, per-head max,
# per-head max + K offsets), the per-layer choice by attention-output error (calibrate's default) and
# fp8_per_token_head, on stories260K and its copies with K and V 1000x larger / smaller (tools/scale_kv_gguf.py).
# Usage: bash bench/accuracy/calibration_choice_stories260K.sh [BUILD_DIR]   (prints a markdown table)
set -eu
BUILD=${1:-build}
OCTET="$BUILD/octet"
MODEL=../shared/models/stories260K.gguf
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
head -c 12380 tests/data/heldout.txt > "$tmp/calib.txt"
tail -c +12381 tests/data/heldout.txt > "$tmp/eval.txt"
python3 tools/scale_kv_gguf.py "$MODEL" "$tmp/x1000.gguf" --factor 1000 >/dev/null
python3 tools/scale_kv_gguf.py "$MODEL" "$tmp/x0.001.gguf" --factor 0.001 >/dev/null
row() {  # model-label path dtype scales-label [eval args...]
  local label=$1 path=$2 d=$3 s=$4; shift 4
  j=$("$OCTET" eval ppl --model "$path" --file "$tmp/eval.txt" --ctx 256 --kv-cache-dtype "$d" "$@" \
      --ref-kv-cache-dtype fp32 --json 2>/dev/null)
  python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print("| %s | %s | %s | %.4f | %.4f | %.4f | %.4g | %.4g | %.4f |" % (sys.argv[2], sys.argv[3], sys.argv[4], d["ref_ppl"], d["ppl"], d["ppl"]/d["ref_ppl"], d["kld_mean"], d["kld_p99"], d["top1_agree"]))' \
    "$j" "$label" "$d" "$s"
}
echo "| model | kv cache | scales | fp32-cache ppl | ppl | ppl / fp32 | KLD mean | KLD p99 | top-1 agree |"
echo "|---|---|---|---:|---:|---:|---:|---:|---:|"
for m in original x1000 x0.001; do
  path=$MODEL; [ $m != original ] && path="$tmp/$m.gguf"
  cal() { "$OCTET" calibrate --model "$path" --file "$tmp/calib.txt" --output "$tmp/$m.$1.json" "${@:2}" >/dev/null 2>&1; }
  cal tensor --granularity tensor --method max
  cal head --granularity head --method max
  cal head_off --granularity head --method max --k-offset mean
  cal chosen
  row "$m" "$path" fp8 "1.0"
  row "$m" "$path" fp8 "per tensor max" --kv-scales "$tmp/$m.tensor.json"
  row "$m" "$path" fp8 "per head max" --kv-scales "$tmp/$m.head.json"
  row "$m" "$path" fp8 "per head max + K offset" --kv-scales "$tmp/$m.head_off.json"
  row "$m" "$path" fp8 "chosen per layer (default)" --kv-scales "$tmp/$m.chosen.json"
  row "$m" "$path" fp8_per_token_head "dynamic"
  row "$m" "$path" fp8_per_token_head "dynamic + K offset" --kv-scales "$tmp/$m.head_off.json"
done
