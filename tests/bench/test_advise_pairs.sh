#!/usr/bin/env bash
# `octet advise` picks its pair by each configuration's KV cache type, not by its place in the sweep or by
# any flag that says "fp8" (advise.c): an fp8,auto sweep with --quantization fp8 on both servers is advised
# as fp8 against bf16, and the recommended command keeps the weights' flags it was measured with; a sweep
# of one configuration recommends nothing. The sweep JSONs are minimal hand-written ones.
set -u
BUILD=${BUILD:-build}
OCTET="$BUILD/octet"
. tests/lib.sh
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

cfg() {  # name, kv dtype, ITL slope, intercept[, the intercept's standard error]: one configuration served with FP8 weights
  printf '{"name": "%s", "flags": ["--kv-cache-dtype", "%s", "--quantization", "fp8", "--quantization-block", "128"],
           "itl_fit": {"slope_ms_per_token": %s, "intercept_ms": %s, "intercept_se_ms": %s, "r2": 0.99}}' \
    "$1" "$2" "$3" "$4" "${5:-null}"
}
sweep() {  # output file, configurations...
  local out=$1; shift
  local IFS=,
  printf '{"model": "dummy:tiny", "max_model_len": 4096, "input_lens": [256, 1024, 4096], "configs": [%s]}' "$*" >"$out"
}
check() {  # label, sweep file, python assertions over d (the advice JSON) and out (its text)
  local label=$1 file=$2 cond=$3
  if "$OCTET" advise --sweep "$file" --output "$tmp/a.json" >"$tmp/out" 2>"$tmp/err" &&
     python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); out=open(sys.argv[2]).read(); exec(sys.argv[3])' \
       "$tmp/a.json" "$tmp/out" "$cond" 2>"$tmp/pyerr"
  then ok; else bad "$label: $(cat "$tmp/err" "$tmp/pyerr" "$tmp/out")"; fi
}

# fp8 first, faster at every length: fp8 is recommended with the weights' flags
sweep "$tmp/fp8_first.json" "$(cfg fp8 fp8 0.005 3.0)" "$(cfg auto auto 0.010 3.2)"
check "fp8 first" "$tmp/fp8_first.json" '
assert d["verdict"] == "fp8", d
assert d["fp8_config"] == "fp8" and d["break_even"] == "always", d
assert abs(d["slope_ratio_pct"] - 50) < 1e-9, d
assert d["command"] == "octet serve --model dummy:tiny --quantization fp8 --quantization-block 128 --kv-cache-dtype fp8", d
assert "decodes at least as fast as" in out, out'

# the same pair with fp8 slower at every length: bf16, the weights' flags kept
sweep "$tmp/never.json" "$(cfg fp8 fp8 0.011 3.3)" "$(cfg auto auto 0.010 3.2)"
check "fp8 never pays" "$tmp/never.json" '
assert d["verdict"] == "bf16" and d["break_even"] == "never", d
assert d["command"] == "octet serve --model dummy:tiny --quantization fp8 --quantization-block 128 --kv-cache-dtype auto", d'

# auto first, fp8 crossing at 1,000 tokens (intercept +5 ms, slope 0.005 ms/token less)
sweep "$tmp/cross.json" "$(cfg auto auto 0.010 3.0)" "$(cfg fp8 fp8 0.005 8.0)"
check "break-even" "$tmp/cross.json" '
assert d["verdict"] == "fp8_above_break_even" and abs(d["break_even_tokens"] - 1000) < 1e-6, d
assert d["break_even_significant"] is True and d["intercept_diff_se_ms"] is None, d'

# the same crossing with the intercepts known to 0.1 ms: the 5 ms fixed cost is shown
sweep "$tmp/cross_se.json" "$(cfg auto auto 0.010 3.0 0.1)" "$(cfg fp8 fp8 0.005 8.0 0.1)"
check "break-even, fixed cost shown" "$tmp/cross_se.json" '
assert d["break_even_significant"] is True and abs(d["intercept_diff_ms"] - 5) < 1e-9, d
assert "within the fits" not in out, out'

# a crossing at 4 tokens from a 0.02 ms difference with errors of 0.01 and 0.02 ms: the advice keeps the
# fitted break-even and says the fixed cost behind it is not shown
sweep "$tmp/cross_noise.json" "$(cfg auto auto 0.010 3.0 0.01)" "$(cfg fp8 fp8 0.005 3.02 0.02)"
check "break-even within noise" "$tmp/cross_noise.json" '
assert d["verdict"] == "fp8_above_break_even" and abs(d["break_even_tokens"] - 4) < 1e-6, d
assert d["break_even_significant"] is False and abs(d["intercept_diff_se_ms"] - 0.0005 ** 0.5) < 1e-12, d
assert "within the fits" in out and "+0.020 ± 0.022 ms" in out, out'

# one configuration: no recommendation
sweep "$tmp/one.json" "$(cfg fp8 fp8 0.005 3.0)"
check "one configuration" "$tmp/one.json" '
assert d["verdict"] == "unmeasured" and d["command"] is None, d
assert "Recommendation: none" in out and "--kv-cache-dtype auto,fp8" in out, out'
echo "advise_pairs: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
