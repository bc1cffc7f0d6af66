#!/usr/bin/env bash
# Several engines on one loaded model in one process: `bench model --kv-cache-dtype A,B` on a
# 2-layer GGUF with Llama-3.1-8B's vocabulary and FFN width (F16 weights; 14336-wide rows, wider
# than the CPU backend's initial scratch) and a narrow hidden size, so the file stays ~44 MB. The
# second engine never uploads the shared weights; under ASan (make test-full) any overrun of its
# per-thread scratch is reported, and a plain build used to abort in free().
set -u
BUILD=${BUILD:-build}
OCTET="$BUILD/octet"
. tests/lib.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

gguf="$tmp/llama8b-shape.gguf"
if python3 tools/make_shape_gguf.py "$gguf" --vocab 128256 --dim 64 --heads 4 --kv-heads 1 --ffn 14336 --layers 2 \
   --dtype f16; then ok; else bad "make_shape_gguf.py"; fi
for dts in fp16,fp8 fp8,fp16 fp16,fp16 bf16,fp8_e5m2,fp32; do
  "$OCTET" bench model --model "$gguf" --kv-cache-dtype "$dts" --pp 32 --tg 2 --reps 1 --threads 2 --json \
    >"$tmp/out" 2>"$tmp/err"; rc=$?
  n=$(grep -c '"tg_tok_s_median"' "$tmp/out")
  want=$(tr ',' '\n' <<<"$dts" | wc -l)
  if [ $rc -eq 0 ] && [ "$n" -eq "$want" ]; then ok
  else bad "bench model --kv-cache-dtype $dts: exit $rc, $n JSON rows: $(tail -5 "$tmp/err")"; fi
done

echo "shared_model: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
