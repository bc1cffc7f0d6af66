#!/usr/bin/env bash
# `octet advise --model` learns when to recommend fp8_per_token_head (advise.c, advise_range.c):
# a quick K/V range check of the model at scale 1.0 keeps static fp8 for stories260K, and
# recommends fp8_per_token_head for equivalent copies whose K and V are 1000x larger (saturation)
# or 1000x smaller (underflow; tools/scale_kv_gguf.py); with a calibration file it keeps fp8 with
# --kv-scales and names the dynamic cache as the alternative; an accuracy result below 95% without
# calibration also leads to fp8_per_token_head. The sweep JSON is a minimal hand-written one.
set -u
BUILD=${BUILD:-build}
OCTET="$BUILD/octet"
MODEL=../shared/models/stories260K.gguf
. tests/lib.sh
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for f in 1000 0.001; do
  python3 tools/scale_kv_gguf.py "$MODEL" "$tmp/x$f.gguf" --factor $f >/dev/null 2>"$tmp/err" || bad "scale_kv_gguf: $(cat "$tmp/err")"
done
sweep() {  # $1 = model path, $2 = output file
  cat >"$2" <<JSON
{"model": "$1", "max_model_len": 512, "input_lens": [64, 128, 256],
 "configs": [{"name": "auto", "flags": ["--kv-cache-dtype", "auto"],
              "itl_fit": {"slope_ms_per_token": 0.01, "intercept_ms": 5, "r2": 0.99}},
             {"name": "fp8", "flags": ["--kv-cache-dtype", "fp8"],
              "itl_fit": {"slope_ms_per_token": 0.005, "intercept_ms": 5, "r2": 0.99},
              "vs_first": {"slope_ratio_pct": 50, "intercept_delta_ms": 0, "break_even": "always",
                           "break_even_tokens": 0}}]}
JSON
}
check() {  # label, python assertions over d, then advise flags
  local label=$1 cond=$2; shift 2
  if "$OCTET" advise "$@" --output "$tmp/a.json" >"$tmp/out" 2>"$tmp/err" &&
     python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); exec(sys.argv[2])' "$tmp/a.json" "$cond" 2>"$tmp/pyerr"
  then ok; else bad "$label: $(cat "$tmp/err" "$tmp/pyerr" "$tmp/out")"; fi
}
sweep "$MODEL" "$tmp/s0.json"
check original 'assert d["verdict"]=="fp8" and d["per_token_head"] is False and d["range_saturated"]==0
assert d["range_underflow"] < 0.1 and d["command"].endswith("--kv-cache-dtype fp8")' --sweep "$tmp/s0.json" --model "$MODEL"
for f in 1000 0.001; do
  sweep "$tmp/x$f.gguf" "$tmp/s$f.json"
  check "x$f" 'assert d["verdict"]=="fp8_per_token_head" and d["per_token_head"] is True
assert d["command"].endswith("--kv-cache-dtype fp8_per_token_head")
assert d["range_saturated"] > 0.5 if "x1000" in d["command"] else d["range_underflow"] > 0.5
assert any(i["topic"]=="range" and "fp8_per_token_head" in i["text"] for i in d["items"])' \
    --sweep "$tmp/s$f.json" --model "$tmp/x$f.gguf" --file tests/data/heldout.txt
done
printf '{"format": "octet-kv-scales/1", "model": "x", "layers": [%s]}' \
  "$(python3 -c 'print(",".join(["{\"k_scale\": 50.0, \"v_scale\": 5.0}"] * 5))')" >"$tmp/cal.json"
check "x1000 calibrated" 'assert d["verdict"]=="fp8" and d["per_token_head"] is False and "--kv-scales" in d["command"]
assert any(i["topic"]=="range" and "alternative" in i["text"] for i in d["items"])' \
  --sweep "$tmp/s1000.json" --model "$tmp/x1000.gguf" --calibration "$tmp/cal.json"
echo '{"ppl": 5.0, "ref_ppl": 4.5}' >"$tmp/acc.json"
sweep "dummy:tiny" "$tmp/sd.json"
check "low recovery, no calibration" 'assert d["calibrate_first"] and d["per_token_head"] and d["verdict"]=="fp8_per_token_head"' \
  --sweep "$tmp/sd.json" --accuracy "$tmp/acc.json"
"$OCTET" advise --sweep "$tmp/s0.json" --model "$MODEL" --file "$tmp/none.txt" >/dev/null 2>"$tmp/err"; rc=$?
if [ $rc -eq 1 ] && grep -q "none.txt" "$tmp/err"; then ok; else bad "advise --file missing: rc $rc $(cat "$tmp/err")"; fi
echo "advise_range: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
