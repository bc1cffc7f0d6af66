#!/usr/bin/env bash
# fp8_per_token_head where static FP8 scales fail: equivalent copies of stories260K whose K and V
# are 1000x larger and 1000x smaller (tools/scale_kv_gguf.py, written to a temporary directory)
# keep their fp32-cache perplexity, and an fp8_per_token_head cache stays within 1.010 of it on
# both (held-out text, ctx 128), while a static fp8 cache at scale 1.0 collapses (> 2x).
set -u
BUILD=${BUILD:-build}
OCTET="$BUILD/octet"
MODEL=../shared/models/stories260K.gguf
. tests/lib.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

ppl() {  # model dtype -> "ppl ref_ppl" (fp32 cache as the reference)
  "$OCTET" eval ppl --model "$1" --file tests/data/heldout.txt --ctx 128 --kv-cache-dtype "$2" \
    --ref-kv-cache-dtype fp32 --json 2>"$tmp/err" |
    python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["ppl"], j["ref_ppl"])'
}
ratio_within() {  # "ppl ref" bound -> success when ppl / ref <= bound
  python3 -c 'import sys; p,r,b=map(float,sys.argv[1:]); sys.exit(0 if p/r <= b else 1)' $1 "$2"
}

read -r _ ref0 <<<"$(ppl "$MODEL" fp32)"
for f in 1000 0.001; do
  out="$tmp/scaled_$f.gguf"
  if python3 tools/scale_kv_gguf.py "$MODEL" "$out" --factor "$f" >/dev/null; then ok; else bad "scale_kv_gguf.py --factor $f"; continue; fi
  r=$(ppl "$out" fp8_per_token_head)
  read -r p ref <<<"$r"
  # the copy is equivalent: its fp32-cache perplexity is the original's (to float32 rounding)
  if python3 -c 'import sys; a,b=map(float,sys.argv[1:]); sys.exit(0 if abs(a/b-1) < 1e-4 else 1)' "$ref" "$ref0"; then ok
  else bad "x$f copy: fp32-cache perplexity $ref, original $ref0"; fi
  if ratio_within "$r" 1.010; then ok; else bad "x$f fp8_per_token_head: perplexity $p vs fp32 cache $ref (> 1.010)"; fi
done
r=$(ppl "$tmp/scaled_1000.gguf" fp8)
if ! ratio_within "$r" 2.0; then ok; else bad "x1000 static fp8 stayed within 2x ($r): the test would not see saturation"; fi
if ! python3 tools/scale_kv_gguf.py "$MODEL" "$tmp/x.gguf" --factor 0 2>/dev/null; then ok; else bad "--factor 0 accepted"; fi

# K offsets and a softmax that does not cancel their shift (attention sinks: the gpt-oss fixture): calibrate
# chooses scales without offsets, refuses --k-offset mean and an fp8_per_token_head target (nothing left to
# calibrate), each naming the sinks
G=tests/data/hf/gptoss
head -c 12380 tests/data/heldout.txt >"$tmp/cal.txt"
if "$OCTET" calibrate --model "$G" --file "$tmp/cal.txt" --ctx 32 --output "$tmp/g.json" >/dev/null 2>"$tmp/err" &&
   ! grep -q k_offset "$tmp/g.json"; then ok; else bad "calibrate $G: offsets written or failed: $(cat "$tmp/err")"; fi
for extra in "--k-offset mean" "--kv-cache-dtype fp8_per_token_head"; do
  # shellcheck disable=SC2086
  if ! "$OCTET" calibrate --model "$G" --file "$tmp/cal.txt" --ctx 32 --output "$tmp/g2.json" $extra >/dev/null \
       2>"$tmp/err" && grep -q "sinks" "$tmp/err"; then ok; else bad "calibrate $G $extra: $(cat "$tmp/err")"; fi
done

echo "kv_token_scales: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
