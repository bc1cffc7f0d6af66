#!/usr/bin/env bash
# kv_token_scales_stories260K.sh — the fp8_per_token_head record of bench/accuracy/RESULTS.md:
# perplexity, KLD and top-1 agreement against the fp32 cache on stories260K and on two equivalent
# copies whose K and V are 1000x larger and 1000x smaller (tools/scale_kv_gguf.py, in a temporary
# directory). Table 1: the whole of tests/data/heldout.txt, uncalibrated. Table 2: K offsets
# (`octet calibrate --k-offset mean`) from the first half, evaluated on the disjoint second half,
# beside the best static recipe (per-head max scales + K offsets).
# Usage: bash bench/accuracy/kv_token_scales_stories260K.sh [BUILD_DIR]   (prints markdown tables)
set -eu
BUILD=${1:-build}
OCTET="$BUILD/octet"
MODEL=../shared/models/stories260K.gguf
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
head -c 12380 tests/data/heldout.txt > "$tmp/calib.txt"
tail -c +12381 tests/data/heldout.txt > "$tmp/eval.txt"
python3 tools/scale_kv_gguf.py "$MODEL" "$tmp/x1000.gguf" --factor 1000 >/dev/null
python3 tools/scale_kv_gguf.py "$MODEL" "$tmp/x0.001.gguf" --factor 0.001 >/dev/null
row() {  # model-label path text dtype scales-label [eval args...]
  local label=$1 path=$2 text=$3 d=$4 s=$5; shift 5
  j=$("$OCTET" eval ppl --model "$path" --file "$text" --ctx 256 --kv-cache-dtype "$d" "$@" \
      --ref-kv-cache-dtype fp32 --json 2>/dev/null)
  python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print("| %s | %s | %s | %.4f | %.4f | %.4f | %.4g | %.4g | %.4f |" % (sys.argv[2], sys.argv[3], sys.argv[4], d["ref_ppl"], d["ppl"], d["ppl"]/d["ref_ppl"], d["kld_mean"], d["kld_p99"], d["top1_agree"]))' \
    "$j" "$label" "$d" "$s"
}
hdr() {
  echo "| model | kv cache | scales | fp32-cache ppl | ppl | ppl / fp32 | KLD mean | KLD p99 | top-1 agree |"
  echo "|---|---|---|---:|---:|---:|---:|---:|---:|"
}
echo "Whole heldout.txt, uncalibrated:"
echo
hdr
for m in original x1000 x0.001; do
  path=$MODEL; [ $m != original ] && path="$tmp/$m.gguf"
  row "$m" "$path" tests/data/heldout.txt fp8 "1.0"
  row "$m" "$path" tests/data/heldout.txt fp8_per_token_head "dynamic"
done
echo
echo "Calibrated on the first half, evaluated on the second:"
echo
hdr
for m in original x1000 x0.001; do
  path=$MODEL; [ $m != original ] && path="$tmp/$m.gguf"
  "$OCTET" calibrate --model "$path" --file "$tmp/calib.txt" --granularity head --k-offset mean \
    --output "$tmp/$m.head_off.json" >/dev/null 2>&1
  row "$m" "$path" "$tmp/eval.txt" fp8 "1.0"
  row "$m" "$path" "$tmp/eval.txt" fp8 "per head max + K offset" --kv-scales "$tmp/$m.head_off.json"
  row "$m" "$path" "$tmp/eval.txt" fp8_per_token_head "dynamic"
  row "$m" "$path" "$tmp/eval.txt" fp8_per_token_head "dynamic + K offset" --kv-scales "$tmp/$m.head_off.json"
done
