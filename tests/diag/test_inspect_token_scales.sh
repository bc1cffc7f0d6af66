#!/usr/bin/env bash
# `octet inspect --kv-cache-dtype fp8_per_token_head` (inspect.c, inspect_stats.c): the report and
# its JSON name the dynamic cache (not fp8_e4m3), and K/V are judged at each row's own amax/448
# scale as kv_write stores them: on a copy of stories260K whose K and V are 1000x larger
# (tools/scale_kv_gguf.py) nothing saturates and the round trip stays accurate, where fp8 at
# scale 1.0 saturates; eval ppl's resolved cache label is fp8_per_token_head as well.
set -u
BUILD=${BUILD:-build}
OCTET="$BUILD/octet"
MODEL=../shared/models/stories260K.gguf
TEXT=tests/data/heldout.txt
. tests/lib.sh
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
python3 tools/scale_kv_gguf.py "$MODEL" "$tmp/x1000.gguf" --factor 1000 >/dev/null 2>"$tmp/err" || bad "scale_kv_gguf: $(cat "$tmp/err")"
"$OCTET" inspect --model "$MODEL" --file "$TEXT" --num-tokens 512 --kv-cache-dtype fp8_per_token_head >"$tmp/out" 2>"$tmp/err"
if grep -q "FP8 = fp8_per_token_head" "$tmp/out" && grep -q "all layers fp8_per_token_head" "$tmp/out" &&
   ! grep -q "fp8_e4m3" "$tmp/out"; then ok; else bad "inspect fp8_per_token_head text: $(cat "$tmp/err"; head -3 "$tmp/out")"; fi
for d in fp8 fp8_per_token_head; do
  "$OCTET" inspect --model "$tmp/x1000.gguf" --file "$TEXT" --num-tokens 512 --kv-cache-dtype $d --json \
    >"$tmp/$d.json" 2>"$tmp/err" || bad "inspect $d: $(cat "$tmp/err")"
done
if python3 -c '
import json,sys
s=json.load(open(sys.argv[1])); d=json.load(open(sys.argv[2]))
assert s["kv_cache_dtype"]=="fp8_e4m3" and d["kv_cache_dtype"]=="fp8_per_token_head", (s["kv_cache_dtype"], d["kv_cache_dtype"])
for l in d["layers"]:
    for k in ("k","v"):
        assert l[k]["frac_saturated"]==0 and l[k]["rt_rel_err"]<0.05, (k, l[k])
assert max(l[k]["frac_saturated"] for l in s["layers"] for k in ("k","v")) > 0.01
assert d["kld_all_layers"] < 0.1 * s["kld_all_layers"], (d["kld_all_layers"], s["kld_all_layers"])' \
  "$tmp/fp8.json" "$tmp/fp8_per_token_head.json" 2>"$tmp/pyerr"; then ok
else bad "inspect fp8_per_token_head on the x1000 copy: $(cat "$tmp/pyerr")"; fi
# eval ppl's resolved label names the dynamic cache too (cli_kv_dtype_resolved)
"$OCTET" eval ppl --model "$MODEL" --file "$TEXT" --ctx 128 --chunks 1 --kv-cache-dtype fp8_per_token_head --json \
  >"$tmp/p.json" 2>"$tmp/err"
if python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["kv_cache_dtype_resolved"]=="fp8_per_token_head", d' \
   "$tmp/p.json" 2>"$tmp/pyerr"; then ok; else bad "eval ppl label: $(cat "$tmp/err" "$tmp/pyerr")"; fi
echo "inspect_token_scales: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
