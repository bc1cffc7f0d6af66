#!/usr/bin/env bash
# test_bench_llama.sh — `octet bench model` in llama-bench's language (src/tools/bench_model.c): -p / -n / -d
# lists (-p 0 and -n 0 skip a test), -r, -t, -o md|json|jsonl with llama-bench's field names (mean ±
# sample stddev, median, samples in measurement order), --cache-type-k / --cache-type-v (llama.cpp's
# f16/f32 names, several types in one process, V following K), and the refusals: different K and V
# types, llama.cpp's quantized caches, nothing to measure, conflicting formats. No timing thresholds.
set -u
. tests/lib.sh
BUILD=${BUILD:-build}
O=$BUILD/octet
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
M="-m dummy:tiny -t 2"

# -o jsonl: one object per (cache type, depth, test), in that order; -p 0 leaves out pp
# shellcheck disable=SC2086
out=$("$O" bench model $M -p 0 -n 4,8 -d 0,16 -r 3 -ctk f16,fp8 -o jsonl 2>"$tmp/err")
if python3 - "$out" <<'PY'
import json, math, statistics, sys
rows = [json.loads(l) for l in sys.argv[1].splitlines()]
want = [(d, k, n) for d in (0, 16) for k in ("f16", "fp8_e4m3") for n in (4, 8)]
assert [(r["n_depth"], r["type_k"], r["n_gen"]) for r in rows] == want, rows
for r in rows:
    assert r["n_prompt"] == 0 and r["type_v"] == r["type_k"] and r["n_threads"] == 2 and r["backends"] == "cpu"
    s = r["samples_ts"]
    assert len(s) == 3 and len(r["samples_ns"]) == 3 and all(x > 0 for x in s)
    assert abs(r["avg_ts"] - statistics.mean(s)) <= 1e-9 * r["avg_ts"]
    assert abs(r["stddev_ts"] - statistics.stdev(s)) <= 1e-9 * max(1, r["stddev_ts"])
    assert abs(r["median_ts"] - statistics.median(s)) <= 1e-9 * r["median_ts"]
    assert all(abs(ns - r["n_gen"] / ts * 1e9) <= 1e-6 * ns for ns, ts in zip(r["samples_ns"], s))
    assert r["model_filename"] == "dummy:tiny" and r["model_size"] > 0 and r["model_n_params"] > 0
    assert ("tg_ms_diff_paired_median" in r) == (r["type_k"] == "fp8_e4m3")
PY
then ok; else bad "-o jsonl: $out $(cat "$tmp/err")"; fi

# -o json: one JSON array; -n 0 leaves out tg; -r 1 gives a zero stddev; --output FILE gets the same text
# shellcheck disable=SC2086
out=$("$O" bench model $M -p 8,16 -n 0 -r 1 -o json --output "$tmp/b.json" 2>"$tmp/err")
if python3 - "$out" <<'PY' && [ "$out" = "$(cat "$tmp/b.json")" ]
import json, sys
rows = json.loads(sys.argv[1])
assert [(r["n_prompt"], r["n_gen"], r["n_depth"]) for r in rows] == [(8, 0, 0), (16, 0, 0)], rows
assert all(r["stddev_ts"] == 0 and r["avg_ts"] == r["samples_ts"][0] for r in rows)
assert all(r["type_k"] == "bf16" for r in rows)  # the dummy's auto cache
PY
then ok; else bad "-o json: $out $(cat "$tmp/err")"; fi

# -o md: llama-bench's header, one row per test, t/s as mean ± stddev beside the median; -d in the test name
# shellcheck disable=SC2086
out=$("$O" bench model $M -p 8 -n 2 -d 0,8 -r 2 -ctk f32 -o md 2>"$tmp/err")
if echo "$out" | head -1 | grep -q "^| model | size | backend | threads | type_k | type_v | test | t/s | median t/s |$" &&
   [ "$(echo "$out" | grep -c '| f32 | f32 |')" = 4 ] && echo "$out" | grep -q "| tg2 @ d8 | [0-9.]* ± [0-9.]* | [0-9.]* |$" &&
   echo "$out" | grep -q "| pp8 | "; then ok; else bad "-o md: $out $(cat "$tmp/err")"; fi

# the default table gains mean ± stddev; --json lines gain mean and stddev and, with -p 0, no pp fields
# shellcheck disable=SC2086
out=$("$O" bench model $M --pp 8 --tg 2 --reps 2 2>/dev/null)
if echo "$out" | grep -q "| dummy:tiny | auto (bf16) | 2 | pp8 | [0-9.]* | [0-9.]* ± [0-9.]* |"; then ok; else bad "table: $out"; fi
# shellcheck disable=SC2086
out=$("$O" bench model $M -p 0 -n 2 -r 2 --json 2>/dev/null)
if python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert "pp_tok_s_median" not in d and d["tg"]==2 and d["tg_tok_s_mean"]>0 and d["tg_tok_s_stddev"]>=0' "$out"
then ok; else bad "--json with -p 0: $out"; fi

# refusals, each naming the problem (exit 2)
refuse() {  # expected-text flags...
  local want=$1; shift
  # shellcheck disable=SC2086
  "$O" bench model $M "$@" >/dev/null 2>"$tmp/err"; local rc=$?
  if [ $rc = 2 ] && grep -q -- "$want" "$tmp/err"; then ok; else bad "bench model $*: rc $rc $(cat "$tmp/err")"; fi
}
refuse "octet's cache stores K and V in one type" -ctk f16 -ctv fp8
refuse "cache type 'q8_0' is llama.cpp's" -ctk q8_0
refuse "cache type 'q4_0' is llama.cpp's" --cache-type-k f16 --cache-type-v q4_0
refuse "give V as many as K" -ctk f16,fp8 -ctv f16
refuse "nothing to measure" -p 0 -n 0
refuse "use -o json or -o jsonl for several" --json -p 8,16
refuse "give one output format" --json -o md
refuse "-o csv: octet writes md, json or jsonl" -o csv
refuse "name the same thing" --kv-cache-dtype fp8 -ctk f16
refuse "'0' is not an integer in 1..1000" -r 0

echo "test_bench_llama: $pass passed, $fail failed"
