#!/usr/bin/env bash
# calibration_stories260K.sh — reproduces the calibration table of bench/accuracy/RESULTS.md (KV-scale
# calibration on stories260K).
# Calibrates on the first half of tests/data/heldout.txt, measures perplexity and KLD vs
# the fp32 cache on the second half (disjoint text), for the original model and for a
# rescaled copy (K x64, V x2^-12, compensated in Q and attn_output: identical in fp32,
# but its K saturates e4m3 and its V falls into e4m3's subnormals at scale 1.0).
# Usage: bash bench/accuracy/calibration_stories260K.sh [BUILD_DIR]   (prints a markdown table)
set -eu
BUILD=${1:-build}
OCTET="$BUILD/octet"
MODEL=../shared/models/stories260K.gguf
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
head -c 12380 tests/data/heldout.txt > "$tmp/calib.txt"
tail -c +12381 tests/data/heldout.txt > "$tmp/eval.txt"
# the rescaled GGUF: same stdlib rewriter as tests/diag/test_diag.sh
sed -n '/^python3 - "\$MODEL"/,/^EOF$/p' tests/diag/test_diag.sh | sed '1d;$d' > "$tmp/rescale.py"
python3 "$tmp/rescale.py" "$MODEL" "$tmp/rescaled.gguf"

echo "| model | kv cache | scales | ppl | ppl / fp32 | KLD mean | KLD p99 | top-1 agree |"
echo "|---|---|---|---:|---:|---:|---:|---:|"
for m in original rescaled; do
  path=$MODEL; [ $m = rescaled ] && path="$tmp/rescaled.gguf"
  "$OCTET" calibrate --model "$path" --file "$tmp/calib.txt" --output "$tmp/$m.tensor.json" >/dev/null 2>&1
  "$OCTET" calibrate --model "$path" --file "$tmp/calib.txt" --granularity head --method percentile:99.9 \
    --output "$tmp/$m.head.json" >/dev/null 2>&1
  "$OCTET" calibrate --model "$path" --file "$tmp/calib.txt" --kv-cache-dtype fp8_e5m2 --output "$tmp/$m.e5m2.json" >/dev/null 2>&1
  "$OCTET" calibrate --model "$path" --file "$tmp/calib.txt" --k-offset mean --output "$tmp/$m.tensor_off.json" >/dev/null 2>&1
  "$OCTET" calibrate --model "$path" --file "$tmp/calib.txt" --granularity head --k-offset mean --output "$tmp/$m.head_off.json" >/dev/null 2>&1
  base=""
  for cfg in "fp32|-" "fp8|1.0" "fp8|tensor max" "fp8|head p99.9" "fp8|tensor max + K offset" "fp8|head max + K offset" \
             "fp8_e5m2|1.0" "fp8_e5m2|tensor max"; do
    d=${cfg%%|*}; s=${cfg##*|}; extra=()
    case "$s" in
      "tensor max") extra=(--kv-scales "$tmp/$m.tensor.json"); [ "$d" = fp8_e5m2 ] && extra=(--kv-scales "$tmp/$m.e5m2.json");;
      "head p99.9") extra=(--kv-scales "$tmp/$m.head.json");;
      "tensor max + K offset") extra=(--kv-scales "$tmp/$m.tensor_off.json");;
      "head max + K offset") extra=(--kv-scales "$tmp/$m.head_off.json");;
    esac
    j=$("$OCTET" eval ppl --model "$path" --file "$tmp/eval.txt" --ctx 256 --kv-cache-dtype "$d" "${extra[@]}" \
        --ref-kv-cache-dtype fp32 --json 2>/dev/null)
    python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print("| %s | %s | %s | %.4f | %.4f | %.4g | %.4g | %.4f |" % (sys.argv[2], sys.argv[3], sys.argv[4], d["ppl"], d["ppl"]/d["ref_ppl"], d["kld_mean"], d["kld_p99"], d["top1_agree"]))' \
      "$j" "$m" "$d" "$s"
  done
done
