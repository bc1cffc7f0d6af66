#!/usr/bin/env bash
# kv_token_scales_hf_fixtures.sh — fp8_per_token_head against calibrated static FP8 caches on the
# transformers fixtures (tests/data/hf/*: small random-weight models of each family): KLD and top-1
# agreement against the fp32 cache on the second half of tests/data/heldout.txt, the scales calibrated
# (`octet calibrate`) on the first half. Perplexity is omitted: the weights are random.
# Usage: bash bench/accuracy/kv_token_scales_hf_fixtures.sh [BUILD_DIR]   (prints a markdown table)
set -eu
BUILD=${1:-build}
OCTET="$BUILD/octet"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
head -c 12380 tests/data/heldout.txt > "$tmp/calib.txt"
tail -c +12381 tests/data/heldout.txt > "$tmp/eval.txt"
cell() {  # path dtype [eval args...] -> "KLD mean / top-1"
  local path=$1 d=$2; shift 2
  j=$("$OCTET" eval ppl --model "$path" --file "$tmp/eval.txt" --ctx "$CTX" --kv-cache-dtype "$d" "$@" \
      --ref-kv-cache-dtype fp32 --json 2>/dev/null) || { echo "failed"; return; }
  python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print("%.3g / %.3f" % (d["kld_mean"], d["top1_agree"]))' "$j"
}
echo "KLD mean / top-1 agreement against the fp32 cache:"
echo
echo "| fixture | fp8, 1.0 | fp8, per tensor max | fp8, per head max | fp8, per head max + K offset | fp8, chosen (default) | fp8_per_token_head | fp8_per_token_head + K offset |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
for dir in tests/data/hf/*/; do
  f=$(basename "$dir")
  # 128 tokens, or the fixture's whole context where that is shorter (gpt-oss's fixtures: 64, llama_dynamic: 24)
  CTX=$(python3 -c 'import json,sys; print(min(128, json.load(open(sys.argv[1])).get("max_position_embeddings", 128)))' \
        "$dir/config.json")
  cal() { "$OCTET" calibrate --model "$dir" --file "$tmp/calib.txt" --ctx "$CTX" --output "$tmp/$f.$1.json" "${@:2}" \
            >/dev/null 2>"$tmp/cal.err" || { echo "calibrate $f $1: $(tail -n 1 "$tmp/cal.err")" >&2
              grep -q "does not cancel" "$tmp/cal.err" && : >"$tmp/$f.$1.refused"; }; }
  # a column's cell; "refused" where calibrate declined (K offsets for a model whose attention has sinks or
  # soft-capping, which they would not cancel in), "failed" where it failed otherwise
  cs() {
    if [ -f "$tmp/$f.$2.json" ]; then cell "$dir" "$1" --kv-scales "$tmp/$f.$2.json"
    elif [ -f "$tmp/$f.$2.refused" ]; then echo "refused"; else echo "failed"; fi
  }
  cal tensor --granularity tensor --method max
  cal head --granularity head --method max
  cal head_off --granularity head --method max --k-offset mean
  cal chosen
  echo "| $f | $(cell "$dir" fp8) | $(cs fp8 tensor) | $(cs fp8 head) | $(cs fp8 head_off) | $(cs fp8 chosen) |" \
       "$(cell "$dir" fp8_per_token_head) | $(cs fp8_per_token_head head_off) |"
done
