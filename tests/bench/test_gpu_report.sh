#!/usr/bin/env bash
# test_gpu_report.sh — scripts/gpu_report.py on recorded GPU outputs (no GPU needed): every kind gpu_check.sh
# prints must turn a real file into the numbers it holds. Inputs: the H200 records kept in bench/<topic>/,
# recorded outputs kept as fixtures in tests/data/gpu_report/ (an H200's: model, depth, ncu kernel times, gemv,
# prefill vs decode, a sweep without per-quarter ITL, a load run of both caches (2026-12-02), a load run whose
# requests failed; a 2-core CPU's: a load run on dummy:tiny with the engine's step counters),
# tests/data/ncu_prof_sample.csv (raw ncu CSV rows, whose data rows lack the header's rule columns),
# tests/data/ncu_step_sample.csv (ncu's kernel-time CSV of two forward passes, made up),
# tests/data/ncu_source_sample.csv (13 rows of the H200's per-SASS page of the TMA FP8 prefill) and
# tests/data/pd_bs_sample.jsonl (pd lines with PD_BS=64 modes, perplexities made up).
set -u
. tests/lib.sh
R=scripts/gpu_report.py
B=bench
F=tests/data/gpu_report

# expect NAME PATTERN KIND ARGS...: the report's output matches the extended regex PATTERN
expect() {
  local name=$1 pat=$2; shift 2
  local out; out=$(python3 "$R" "$@" 2>&1)
  if grep -Eq -- "$pat" <<<"$out"; then ok; else bad "$name: /$pat/ not in: $(head -c 400 <<<"$out")"; fi
}

expect "prof decode line" '^prof decode fp8 L=131072: Duration 73,824 ns; DRAM Throughput 76.30 %' prof tests/data/ncu_prof_sample.csv
expect "prof stalls" 'top stalls \(warps per issue\) long_scoreboard 1.58, wait 1.21' prof tests/data/ncu_prof_sample.csv
expect "prof pipes" '^prof prefill fp8 L=16384: .*pipe_tensor_cycles_active 12.6$' prof tests/data/ncu_prof_sample.csv
n=$(python3 "$R" prof tests/data/ncu_prof_sample.csv | grep -c '^prof .*Duration')
[ "$n" = 2 ] && ok || bad "prof: $n lines with a duration, want 2"
expect "attn ratio" '^\| B=1 L=131072 \| fp8_e4m3 \| 71.0 \| 3780 \| 147.9 \| 0.480 \|$' attn $B/decode_attention/h200.jsonl
expect "fp8prefill" '^\| 16384 \| 128 \| fp8_e4m3 \| two-level \| 949 \| 614 \| 1.54 \|$' fp8prefill $B/prefill_attention/h200_fp8.jsonl
expect "model" '\(--batch-invariant\): pp64 3660 tok/s, tg64 156.4 tok/s = 6.40 ms/token$' model $F/model.jsonl
expect "depth" 'd1024: 5.928/6.003 \(\+81 us paired\)' depth $F/depth.jsonl
expect "ncu times" 'k_combine x32 median 6.08 us' ncu_times $F/ncu_times.csv
expect "step: the last forward pass only" '^step ncu_step_sample: 300.0 us in 7 kernels; k_gemv x3 286.8 us \(96 %\), k_decode_t x1 8.0 us' step tests/data/ncu_step_sample.csv
expect "itl fits" '^itl fp8: slope 1.542e-05 ms/token, intercept 4.27 ms' itl $B/itl_study/h200_llama-3.1-8b.json
expect "itl ratio" '^itl fp8/auto slope = 0.514 ± 0.010, break-even 1792$' itl $B/itl_study/h200_llama-3.1-8b.json
expect "itl increments" '^itl fp8/auto increments: 256->1024 .*, 65536->130944 0.517$' itl $F/itl_no_quarters.json
expect "itl quarters" '^itl fp8 quarters \(first/last ms\): 256 4.225/4.236, .*, 130944 6.285/6.330$' itl $B/itl_study/h200_llama-3.1-8b_repeat.json
n=$(python3 "$R" itl $F/itl_no_quarters.json | grep -c quarters)
[ "$n" = 0 ] && ok || bad "itl: a sweep without itl_quarters_ms printed $n quarters lines"
expect "load" 'fp8 / auto = 1.424$' load $F/load_h200.json
expect "load failures named" '^load auto: 6 of 8 requests FAILED \(server error in stream: backend cuda: gemv rmsnorm \+ Q\|K\|V: invalid argument\): not a throughput' load $F/load_failed.json
expect "load steps" '^load steps fp8: decode 137 x 1.18 ms \(forward 1.03, host 0.15; 3.6 decode \+ 0 prefill tokens; 14 % of the time\); prefill 1 x 167.90 ms .*; mixed 6 x 143.14 ms \(forward 142.67, host 0.47; 2.5 decode \+ 1390 prefill tokens; 72 % of the time\)$' load $F/load_steps_cpu.json
n=$(python3 "$R" load $F/load_h200.json | grep -c 'load steps')
[ "$n" = 0 ] && ok || bad "load: a run without step counters printed $n steps lines"
n=$(python3 "$R" load $F/load_h200.json | grep -c FAILED)
[ "$n" = 0 ] && ok || bad "load: a run without failures printed $n FAILED lines"
expect "pd identical" 'prefill vs decode \(--batch-invariant\), dummy:llama-3.1-8b fp8: .*rel. diff 0.00e\+00 \(identical\)' pd $F/pd.jsonl
expect "pd block size" '^prefill vs decode \(--batch-invariant, 64-token blocks\), dummy:llama-3.1-8b fp8: .*rel. diff 0.00e\+00 \(identical\)$' pd tests/data/pd_bs_sample.jsonl
expect "pd vs 16-token blocks" '^  64- vs 16-token blocks \(default, bf16, step 256\): 100.25 vs 100.5, rel. diff 2.49e-03$' pd tests/data/pd_bs_sample.jsonl
expect "ttft" '^ttft dummy:llama-3.1-8b: .*fp8/auto quadratic = 0.757$' ttft $B/itl_study/h200_ttft_llama-3.1-8b.json dummy:llama-3.1-8b
expect "gemv" '^gemv output n=1: default 242.5 us \(4333 GB/s, 1.02 of copy\)' gemv $F/gemv.jsonl
expect "source total" '^source: 13 instructions, 539108 stall samples, 554474348 warp instructions executed$' source tests/data/ncu_source_sample.csv
expect "source top" '^source top: 83.65 % of samples, executed 2080768: @!P1  BRA 0x7f6e237b2970 [(]after: SYNCS.PHASECHK.TRANS64.TRYWAIT P1, [[]R89[+]UR12[+]0x24248[]], R88[)] [[]long_sb 100 %, not_selected 0 %[]]$' source tests/data/ncu_source_sample.csv 2
expect "source stall reasons" '^source top: 15.89 % of samples, executed 1056768: @P0   BRA 0x7f6e237b28b0 [[]barrier 100 %, wait 0 %[]]$' source tests/data/ncu_source_sample.csv 2
expect "source region" '^source region: 84.00 % of samples, 7 instructions executed 2080768 times each, from: ULOP3.LUT.* [[]long_sb 99 %, wait 0 %, selected 0 %[]]$' source tests/data/ncu_source_sample.csv 2
expect "source by opcode" '^source by opcode: BRA 99.5 %' source tests/data/ncu_source_sample.csv
expect "needle" '^\| 8192 \| bf16 \| gpu decode \| 3.897e-03 \| 0.9862 \|' needle $B/accuracy/h200_needle_attention.json
expect "slopes across files" '^fp8_per_token_head: ITL slope 2.242e-05 ms/token, intercept 5.48 ms, slope / auto 0.747; ITL/TTFT ms by length: 256 5.46/10, ' slopes $B/itl_study/h200_llama-3.1-8b.json $B/itl_study/h100_llama-3.1-8b_per_token_head.json
n=$(python3 "$R" slopes $B/itl_study/h200_llama-3.1-8b.json $B/itl_study/h100_llama-3.1-8b_per_token_head.json | grep -c 'ITL slope')
[ "$n" = 5 ] && ok || bad "slopes: $n configurations from two sweeps of 2 and 3, want 5"
expect "study" '^\| --kv-cache-dtype fp8 \| 2.389e-06 \| 3.41 \| 0.510 \| 5.854e-08 \| 1.497 \| 2784 @ 130944 \|$' study $B/itl_study/h200_gemma-3-4b.json
# a kind it does not know, and no file: a usage line naming the kinds, exit 1
out=$(python3 "$R" bogus x 2>&1); rc=$?
[ $rc = 1 ] && grep -q 'usage: gpu_report.py {prof|attn' <<<"$out" && ok || bad "unknown kind: rc $rc: $out"
# same: two test_cuda_ops reports (made up here), compared by their outputs' hashes; records
# without one, or in one report only, are left out
T=$(mktemp -d)
printf '%s\n' '[{"check":"a","nmse":0,"bound":1,"ok":true,"detail":"gpu_fnv1a 0000000000000001"},' \
  '{"check":"b","nmse":0,"bound":1,"ok":true,"detail":"gpu_fnv1a 0000000000000002"},' \
  '{"check":"c","nmse":0,"bound":1,"ok":true},{"check":"d","nmse":0,"bound":1,"ok":true,"detail":"gpu_fnv1a 0000000000000004"}]' > "$T/x.json"
printf '%s\n' '[{"check":"a","nmse":0,"bound":1,"ok":true,"detail":"gpu_fnv1a 0000000000000001"},' \
  '{"check":"b","nmse":0,"bound":1,"ok":true,"detail":"gpu_fnv1a 00000000000000ff"},{"check":"c","nmse":0,"bound":1,"ok":true}]' > "$T/y.json"
expect "same" '^same: 1 of 2 GPU outputs bit-identical; differ: b$' same "$T/x.json" "$T/y.json"
expect "same, identical" '^same: 3 of 3 GPU outputs bit-identical$' same "$T/x.json" "$T/x.json"
rm -rf "$T"
# pack: a gpu_check.sh raw folder becomes one JSON per stage (JSON parsed, JSON lines parsed line
# by line, logs as text), with the exceptions' files under their stage; pictures and the summary left out
T=$(mktemp -d); mkdir -p "$T/raw/ttft_llama" "$T/dest"
echo '{"ok":true}' > "$T/raw/ops_new.json"; printf '%s\n' '{"m":1}' '{"m":2}' > "$T/raw/compare.jsonl"
echo 'line' > "$T/raw/ops.log"; echo '{"ppl":4.0}' > "$T/raw/ko_cpu.json"; echo '{"s":1}' > "$T/raw/ttft_llama/sweep.json"
echo x > "$T/raw/ttft_llama/itl.png"; echo s > "$T/raw/summary.txt"
expect "pack" '^pack: compare.json \(2 files\), golden.json \(1 files\), ops.json \(1 files\), ttft.json \(1 files\)$' \
  pack "$T/raw" "$T/dest"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["stage"]=="compare"
assert d["files"]["compare.jsonl"]==[{"m":1},{"m":2}] and d["files"]["ops_new.json"]=={"ok":True}' "$T/dest/compare.json" \
  && ok || bad "pack: compare.json's content"
[ "$(ls "$T/dest" | tr '\n' ' ')" = "compare.json golden.json ops.json ttft.json " ] && ok || bad "pack: files $(ls "$T/dest")"
# gpu_check.sh refuses, before any stage, an unknown stage or a file it was given that is missing
out=$(bash scripts/gpu_check.sh "$T/gc" probe bogus 2>&1); rc=$?
[ $rc = 2 ] && grep -q "unknown stage 'bogus'" <<<"$out" && [ ! -e "$T/gc" ] && ok || bad "unknown stage: rc $rc: $out"
out=$(PEER="$T/none.py" bash scripts/gpu_check.sh "$T/gc" attn 2>&1); rc=$?
[ $rc = 2 ] && grep -q "PEER=$T/none.py not found" <<<"$out" && ok || bad "missing peer: rc $rc: $out"
out=$(BASE_BIN="$T/nobase" bash scripts/gpu_check.sh "$T/gc" compare 2>&1); rc=$?
[ $rc = 2 ] && grep -q "BASE_BIN=$T/nobase not found" <<<"$out" && ok || bad "missing base: rc $rc: $out"
rm -rf "$T"
echo "gpu_report: $pass passed, $fail failed"
