#!/usr/bin/env bash
# End-to-end checks of the octet command line on stories260K and dummy:tiny: generate
# (text and --json), eval ppl (--json keys, fp8 vs fp32), bench model, and the error
# paths (bad flags, bad values, missing or corrupt model files): each must exit non-zero
# with a message that names the problem, never crash.
set -u
BUILD=${BUILD:-build}
OCTET="$BUILD/octet"
MODEL=../shared/models/stories260K.gguf
. tests/lib.sh  # pass/fail counters, ok, bad
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# generate --json: the reference's greedy continuation (tools/ref, float64)
out=$("$OCTET" generate --model "$MODEL" --prompt "Once upon a time" --max-tokens 8 --kv-cache-dtype fp32 --json 2>"$tmp/err")
if python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["prompt_tokens"]==[1,403,407,261,378]; assert d["tokens"]==[432,383,286,261,376,298,315,421]; assert d["text"]==", there was a little girl"' "$out"; then ok; else bad "generate --json: $out"; fi

# plain text + timing line on stderr
txt=$("$OCTET" generate --model "$MODEL" --prompt "Once upon a time" --max-tokens 8 2>"$tmp/err")
if [ "$txt" = ", there was a little girl" ] && grep -q "decode .* tok/s" "$tmp/err" && grep -q "bytes/token" "$tmp/err"; then ok; else bad "generate text: '$txt' / $(cat "$tmp/err")"; fi

# sampling flags and skip layers are accepted; seeded sampling is reproducible
a=$("$OCTET" generate --model "$MODEL" --prompt "Tom" --max-tokens 12 --temperature 0.8 --top-p 0.9 --top-k 40 --min-p 0.05 --seed 7 --kv-cache-dtype fp8 --kv-cache-dtype-skip-layers 0 4 --json 2>/dev/null)
b=$("$OCTET" generate --model "$MODEL" --prompt "Tom" --max-tokens 12 --temperature 0.8 --top-p 0.9 --top-k 40 --min-p 0.05 --seed 7 --kv-cache-dtype fp8 --kv-cache-dtype-skip-layers 0,4 --json 2>/dev/null)
ta=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["tokens"])' "$a"); tb=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["tokens"])' "$b")
if [ -n "$ta" ] && [ "$ta" = "$tb" ]; then ok; else bad "seeded sampling not reproducible"; fi

# stop strings end the text before the stop string
s=$("$OCTET" generate --model "$MODEL" --prompt "Once upon a time" --max-tokens 30 --stop "Lily" --json 2>/dev/null)
if python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["text"]==", there was a little girl named " and d["finish_reason"]=="stop"' "$s"; then ok; else bad "stop string: $s"; fi

# eval ppl --json with a reference dtype
p=$("$OCTET" eval ppl --model "$MODEL" --file tests/data/heldout.txt --ctx 256 --chunks 8 --kv-cache-dtype fp8 --ref-kv-cache-dtype fp32 --json 2>/dev/null)
if python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert set(["ppl","n_tokens","kld_mean","kld_p99","top1_agree"])<=set(d); assert 1<d["ppl"]<10 and d["n_tokens"]==8*127 and 0<d["kld_mean"]<0.05 and d["top1_agree"]>0.85' "$p"; then ok; else bad "eval ppl json: $p"; fi
p=$("$OCTET" eval ppl --model "$MODEL" --file tests/data/heldout.txt --ctx 128 --chunks 4 --json 2>/dev/null)
if python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert "kld_mean" not in d and d["n_tokens"]==4*63' "$p"; then ok; else bad "eval ppl without ref: $p"; fi

# bench model prints its table on stdout (auto resolved to the weights' type), or with --json only JSON lines
# there (the table on stderr), and -o FILE writes the same lines to a file
bm=$("$OCTET" bench model --model dummy:tiny --pp 64 --tg 8 --reps 2 --threads 2 2>/dev/null)
if echo "$bm" | grep -q "| dummy:tiny | auto (bf16) | 2 | pp64 |" && ! echo "$bm" | grep -q '^{'; then ok; else bad "bench model table: $bm"; fi
bm=$("$OCTET" bench model --model dummy:tiny --pp 64 --tg 8 --reps 2 --threads 2 --json -o "$tmp/bm.jsonl" 2>"$tmp/bm.err")
if [ "$(echo "$bm" | wc -l)" = 1 ] && echo "$bm" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["pp_tok_s_median"]>0 and d["tg_tok_s_median"]>0 and d["kv_cache_dtype"]=="auto" and d["kv_cache_dtype_resolved"]=="bf16"' &&
   grep -q "| pp64 |" "$tmp/bm.err" && [ "$bm" = "$(cat "$tmp/bm.jsonl")" ]; then ok; else bad "bench model --json: $bm $(cat "$tmp/bm.err")"; fi
expect_err_x() { "$OCTET" "$@" >/dev/null 2>"$tmp/err"; }
expect_err_x bench model --model dummy:tiny --json out.jsonl
if grep -q -- "--json takes no value" "$tmp/err"; then ok; else bad "bench model --json FILE: $(cat "$tmp/err")"; fi
# bench attention: a table row and JSON naming the shape, the block size included; bad block sizes named
ba=$("$OCTET" bench attention --device cpu --mode prefill --ctx 64 --heads 4 --kv-heads 2 --head-dim 8 --kv-block-tokens 32 --iters 1 --reps 1 2>/dev/null)
if echo "$ba" | grep -q "| prefill | bf16 | B=1 L=64 H=4/2 d=8 |" && echo "$ba" | tail -n 1 | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["kv_block_tokens"]==32 and d["TFLOPs"]>0 and d["us"]>0'; then ok; else bad "bench attention: $ba"; fi
ba=$("$OCTET" bench attention --device cpu --kv-block-tokens 0 2>&1); rc=$?
if [ $rc = 2 ] && echo "$ba" | grep -q "kv_block_tokens 0"; then ok; else bad "bench attention --kv-block-tokens 0: rc $rc $ba"; fi
# --queries: a chunk (the last N positions) against the whole context, its FLOPs 4·(N·L − N²/2)·d·H; out of range named
ba=$("$OCTET" bench attention --device cpu --mode prefill --ctx 64 --queries 16 --heads 4 --kv-heads 2 --head-dim 8 --iters 1 --reps 1 2>/dev/null)
if echo "$ba" | grep -q "| prefill | bf16 | B=1 L=64 Q=16 H=4/2 d=8 |" && echo "$ba" | tail -n 1 | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["queries"]==16 and abs(d["TFLOPs"]*1e12*d["us"]*1e-6-4*(16*64-128)*8*4)<1e-3*4*896*32'; then ok; else bad "bench attention --queries 16: $ba"; fi
ba=$("$OCTET" bench attention --device cpu --mode prefill --ctx 64 --queries 65 2>&1); rc=$?
if [ $rc = 2 ] && echo "$ba" | grep -q "queries 65"; then ok; else bad "bench attention --queries 65: rc $rc $ba"; fi
# --block-order: the JSON names it; a bad order is named
ba=$("$OCTET" bench attention --device cpu --ctx 100 --heads 4 --kv-heads 2 --head-dim 8 --kv-block-tokens 16 --block-order sequential --iters 1 --reps 1 2>/dev/null)
if echo "$ba" | tail -n 1 | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["block_order"]=="sequential" and d["kv_GBps"]>0'; then ok; else bad "bench attention --block-order sequential: $ba"; fi
ba=$("$OCTET" bench attention --device cpu --block-order random 2>&1); rc=$?
if [ $rc = 2 ] && echo "$ba" | grep -q "block-order: 'random'"; then ok; else bad "bench attention --block-order random: rc $rc $ba"; fi
# fp8_per_token_head: its pages carry a scale per (token, KV head), counted in the bytes a decode step reads
# (100 tokens × 2 KV heads × (8 + 4) bytes, K and V)
ba=$("$OCTET" bench attention --device cpu --ctx 100 --heads 4 --kv-heads 2 --head-dim 8 --kv-cache-dtype fp8_per_token_head --iters 1 --reps 1 2>/dev/null)
if echo "$ba" | grep -q "| decode | fp8_per_token_head | B=1 L=100 H=4/2 d=8 |" && echo "$ba" | tail -n 1 | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["kv_dtype"]=="fp8_per_token_head" and abs(d["kv_GBps"]*1e9*d["us"]*1e-6-2*100*2*12)<1e-3*4800'; then ok; else bad "bench attention fp8_per_token_head: $ba"; fi
# bench model --depth: one table row per test and depth, one JSON line per depth
bm=$("$OCTET" bench model --model dummy:tiny --pp 16 --tg 4 --reps 1 --threads 2 --depth 0,48 --json 2>&1)
if echo "$bm" | grep -q "| tg4 @ d48 |" && echo "$bm" | grep '^{' | python3 -c '
import json,sys
d=[json.loads(l) for l in sys.stdin]
assert [x["depth"] for x in d]==[0,48] and all(x["tg_ms_per_token"]>0 and x["pp_tok_s_median"]>0 for x in d)'; then ok; else bad "bench model --depth: $bm"; fi
# bench model with two cache types: one engine each, measured in turn; fp8 rows carry the paired difference
# the paired difference is the median over reps of (ms/token of fp8 - ms/token of auto), rep by rep in
# measurement order, and the table's sign and word agree with it
bm=$("$OCTET" bench model --model dummy:tiny --pp 16 --tg 4 --reps 4 --threads 2 --depth 0,48 --kv-cache-dtype auto,fp8 --json 2>"$tmp/bm.err")
if echo "$bm" | grep '^{' | python3 -c '
import json,sys,statistics
d=[json.loads(l) for l in sys.stdin]
assert [(x["kv_cache_dtype"], x["depth"]) for x in d]==[("auto",0),("fp8",0),("auto",48),("fp8",48)]
assert all(("tg_ms_diff_paired_median" in x)==(x["kv_cache_dtype"]=="fp8") for x in d)
for base, x in ((d[0], d[1]), (d[2], d[3])):
    want = statistics.median(1e3/a - 1e3/b for a, b in zip(x["tg_tok_s_reps"], base["tg_tok_s_reps"]))
    assert abs(x["tg_ms_diff_paired_median"] - want) <= 1e-9 * max(1, abs(want)), (x, want)
    assert abs(x["tg_tok_s_median"] - statistics.median(x["tg_tok_s_reps"])) <= 1e-9 * x["tg_tok_s_median"]
' && python3 - "$bm" "$tmp/bm.err" <<'PY'
import json, re, sys
rows = [json.loads(l) for l in sys.argv[1].splitlines() if l.startswith("{")]
cells = [l for l in open(sys.argv[2]) if "| fp8 |" in l and "| tg4" in l]
assert len(cells) == 2, cells
for r, line in zip((rows[1], rows[3]), cells):
    m = re.search(r"\| ([+-][0-9.]+) us/token \((slower|faster|same)\) \|", line)
    v = r["tg_ms_diff_paired_median"] * 1e3
    assert m and abs(float(m.group(1)) - v) < 0.051 and m.group(2) == ("slower" if v > 0 else "faster" if v < 0 else "same"), (line, v)
PY
then ok; else bad "bench model auto,fp8: $bm $(cat "$tmp/bm.err")"; fi
# --batch-invariant: perplexity by token-by-token decoding equals one chunked prefill's, bit for bit
pa=$("$OCTET" eval ppl --model "$MODEL" --file tests/data/heldout.txt --ctx 128 --chunks 1 --kv-cache-dtype fp8 --batch-invariant --max-num-batched-tokens 1 --json 2>/dev/null)
pb=$("$OCTET" eval ppl --model "$MODEL" --file tests/data/heldout.txt --ctx 128 --chunks 1 --kv-cache-dtype fp8 --batch-invariant --max-num-batched-tokens 128 --json 2>/dev/null)
if python3 -c 'import json,sys; a,b=(json.loads(x)["ppl"] for x in sys.argv[1:]); assert a==b and 1<a<10' "$pa" "$pb"; then ok; else bad "--batch-invariant ppl: $pa vs $pb"; fi

# errors: exit code and a message naming the problem
expect_err() {  # $1 = expected exit code, $2 = text the message must contain, rest = args
  local code=$1 want=$2; shift 2
  "$OCTET" "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?
  if [ $rc -eq "$code" ] && grep -q -- "$want" "$tmp/err"; then ok; else bad "octet $* -> exit $rc, stderr: $(head -c 300 "$tmp/err")"; fi
}
expect_err 2 "unknown command" frobnicate
expect_err 2 "depth" bench model --model dummy:tiny --depth 0,x
expect_err 2 "above --max-model-len" bench model --model dummy:tiny --depth 1000 --max-model-len 100
expect_err 2 "bogus" bench model --model dummy:tiny --kv-cache-dtype auto,bogus
# --version names the commit the binary was built from
v=$("$OCTET" --version 2>&1)
if echo "$v" | grep -Eq '^octet ([0-9a-f]{7,}(-dirty)?|unknown(-dirty)?)$'; then ok; else bad "--version printed '$v'"; fi
expect_err 2 "unknown flag '--bogus'" generate --model "$MODEL" --prompt x --bogus
expect_err 2 "--kv-cache-dtype: unknown value 'int3'" generate --model "$MODEL" --prompt x --kv-cache-dtype int3
expect_err 2 "skip-layers: 'x7'" generate --model "$MODEL" --prompt x --kv-cache-dtype-skip-layers x7
expect_err 2 "temperature" generate --model "$MODEL" --prompt x --temperature -1
expect_err 2 "top_p" generate --model "$MODEL" --prompt x --top-p 0
expect_err 2 "--max-tokens: 'ten'" generate --model "$MODEL" --prompt x --max-tokens ten
expect_err 2 "--model and --prompt are required" generate --prompt x
expect_err 1 "/no/such.gguf" generate --model /no/such.gguf --prompt x
expect_err 1 "layer 7 does not exist" generate --model "$MODEL" --prompt x --kv-cache-dtype-skip-layers 7
expect_err 1 "exceeds the context limit" generate --model "$MODEL" --prompt x --max-tokens 5000
expect_err 1 "dummy:nope" generate --model dummy:nope --prompt x
head -c 5000 "$MODEL" > "$tmp/cut.gguf"
expect_err 1 "cut.gguf" generate --model "$tmp/cut.gguf" --prompt x
printf 'GGUF\x03\x00\x00\x00garbage' > "$tmp/junk.gguf"
expect_err 1 "junk.gguf" eval ppl --model "$tmp/junk.gguf" --file tests/data/heldout.txt
echo '{"layers": 3}' > "$tmp/scales.json"
expect_err 1 "scales.json" generate --model "$MODEL" --prompt x --kv-cache-dtype fp8 --kv-scales "$tmp/scales.json"
# --kv-scales: zero, negative, and values that underflow or overflow float are refused, naming file, key and value
for v in 1e-50 0 -0.5 1e-39 1e+31; do
  python3 -c 'import json,sys; L=[{"k_scale":1,"v_scale":1} for _ in range(5)]; L[3]["v_scale"]=[1,1,float(sys.argv[1]),1]
json.dump({"layers":L}, open(sys.argv[2],"w"))' "$v" "$tmp/bad_scales.json"
  expect_err 1 "bad_scales.json: layer 3 v_scale\[2\] = $v" generate --model "$MODEL" --prompt x --kv-cache-dtype fp8 --kv-scales "$tmp/bad_scales.json"
done
echo "Once upon a time." > "$tmp/short.txt"
expect_err 1 "fewer than one chunk" eval ppl --model "$MODEL" --file "$tmp/short.txt" --ctx 64
expect_err 1 "exceeds the model's context length" eval ppl --model "$MODEL" --file tests/data/heldout.txt --ctx 4096
expect_err 1 "cannot open" eval ppl --model "$MODEL" --file "$tmp/none.txt"

# ---- first use: vLLM / llama.cpp habits, one-line errors, outputs that say what ran
# --flag=value and the short aliases (-m -p -n -t -c) give the same greedy text as the long flags
t1=$("$OCTET" generate --model="$MODEL" --prompt="Once upon a time" --max-tokens=8 --kv-cache-dtype=fp32 2>/dev/null)
t2=$("$OCTET" generate -m "$MODEL" -p "Once upon a time" -n 8 -t 1 -c 64 --tensor-parallel-size 1 --dtype auto 2>/dev/null)
t3=$("$OCTET" generate -m "$MODEL" -p "Once upon a time" --n-predict 8 --ctx-size=64 2>/dev/null)
if [ "$t1" = ", there was a little girl" ] && [ "$t2" = "$t1" ] && [ "$t3" = "$t1" ]; then ok; else bad "--flag=value / aliases: '$t1' '$t2' '$t3'"; fi
# generate: the text's newline comes before the timing line even when both go to one pipe; auto is resolved
both=$("$OCTET" generate --model "$MODEL" --prompt "Once upon a time" --max-tokens 8 2>&1)
if [ "$(echo "$both" | head -n 1)" = ", there was a little girl" ] && echo "$both" | tail -n 1 | grep -q "^octet: prompt .*(auto (fp32))$" &&
   [ "$(echo "$both" | wc -l)" = 2 ]; then ok; else bad "generate text + timing: $both"; fi
j=$("$OCTET" generate --model "$MODEL" --prompt x --max-tokens 2 --json 2>/dev/null)
if python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["kv_cache_dtype"]=="auto" and d["kv_cache_dtype_resolved"]=="fp32"' "$j"; then ok; else bad "generate json resolved: $j"; fi
# one error line naming the problem (with a "did you mean" for a misspelled flag) and a pointer to --help
expect_line() {  # $1 = text of the first line, rest = args; exit 2, exactly two stderr lines, the second the pointer
  local want=$1; shift
  "$OCTET" "$@" >/dev/null 2>"$tmp/err"; local rc=$?
  if [ $rc = 2 ] && [ "$(wc -l <"$tmp/err")" = 2 ] && head -n 1 "$tmp/err" | grep -q -- "$want" &&
     tail -n 1 "$tmp/err" | grep -q "^Run 'octet .* --help' for its flags.$"; then ok; else bad "octet $* -> $rc: $(cat "$tmp/err")"; fi
}
expect_line "^octet generate: unknown flag '--tempreature' (did you mean --temperature?)$" generate --model "$MODEL" --prompt x --tempreature 0.5
expect_line "(did you mean --kv-cache-dtype?)" generate --model "$MODEL" --prompt x --kv-cache-dtyp fp8
expect_line "(did you mean --ref-kv-cache-dtype?)" eval ppl --model "$MODEL" --file tests/data/heldout.txt --ref-kv-cache-dtyp fp32
expect_line "(did you mean --depth?)" bench model --model dummy:tiny --detph 4
expect_line "(did you mean --granularity?)" calibrate --model "$MODEL" --file tests/data/heldout.txt -o x.json --granularty head
expect_line "(did you mean --skip-fraction?)" inspect --model "$MODEL" --file tests/data/heldout.txt --skip-fractoin 0.1
expect_line "(did you mean --calibration?)" advise --sweep x.json --calibraton s.json
expect_line "^octet generate: --kv-cache-dtype: unknown value 'fp9'" generate --model "$MODEL" --prompt x --kv-cache-dtype fp9
expect_line "unexpected argument 'hello'" generate --model "$MODEL" hello
expect_line "--tensor-parallel-size 2: tensor parallelism is not supported yet" generate --model "$MODEL" --prompt x --tensor-parallel-size 2
expect_line "--dtype float16: not supported yet" eval ppl --model "$MODEL" --file tests/data/heldout.txt --dtype float16
expect_line "--max-model-len: eval ppl's context is --ctx" eval ppl --model "$MODEL" --file tests/data/heldout.txt --max-model-len 64
expect_line "--kv-scales: calibrate writes scales" calibrate --model "$MODEL" --file tests/data/heldout.txt -o "$tmp/x.json" --kv-scales x.json
expect_line "^octet serve: unknown flag '--prot' (did you mean --port?)$" serve "$MODEL" --prot 8000
expect_line "(did you mean --num-prompts?)" bench serve --num-promts 3
expect_line "^octet bench sweep: --input-lens: 'x'" bench sweep --input-lens x
expect_line "^octet bench sampler: --vocab: '0'" bench sampler --vocab 0
expect_line "^octet bench attention: --ctx: 'x'" bench attention --ctx x
"$OCTET" genrate >/dev/null 2>"$tmp/err"
if grep -q "unknown command 'genrate' (did you mean generate?)" "$tmp/err"; then ok; else bad "genrate: $(cat "$tmp/err")"; fi
# bench sweep validates every configuration's flags before starting anything: no server, no output folder
expect_line "--kv-cache-dtype: unknown value 'fp9'" bench sweep --kv-cache-dtype auto,fp9 --output-dir "$tmp/sw"
expect_line "--max-model-len: 'x' is not an integer" bench sweep --config "--kv-cache-dtype=fp8 --max-model-len=x" --output-dir "$tmp/sw"
expect_line "--max-num-seqs: 'x' is not an integer" bench sweep --config "--kv-cache-dtype fp8 --max-num-seqs x" --output-dir "$tmp/sw"
expect_line "unknown flag '--max-num-seq' (did you mean --max-num-seqs?)" bench sweep --serve-args "--max-num-seq=4" --output-dir "$tmp/sw"
expect_line "--timeout-keep-alive: '0'" bench sweep --serve-args "--threads 1 --timeout-keep-alive=0" --output-dir "$tmp/sw"
if [ ! -e "$tmp/sw" ]; then ok; else bad "bench sweep with a bad flag created $tmp/sw"; fi
expect_line "--input-lens: 'x'" bench sweep -m dummy:tiny -o "$tmp/sw" --input-lens x
# eval ppl ends with llama-perplexity's line; its +/- is ppl x the standard error of the mean NLL
p=$("$OCTET" eval ppl --model "$MODEL" --file tests/data/heldout.txt -c 128 --chunks 4 2>/dev/null)
pj=$("$OCTET" eval ppl --model "$MODEL" --file tests/data/heldout.txt -c 128 --chunks 4 --json 2>/dev/null)
if echo "$p" | head -n 1 | grep -q "^ppl (auto (fp32)) = " && python3 -c '
import json, re, sys
m = re.fullmatch(r"Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+)", sys.argv[1].splitlines()[-1])
d = json.loads(sys.argv[2])
assert m and abs(float(m.group(1)) - d["ppl"]) < 1e-4 and abs(float(m.group(2)) - d["ppl_stderr"]) < 1e-5, (m, d)
assert 0 < d["ppl_stderr"] < 0.5 * d["ppl"] and d["model"].endswith("stories260K.gguf") and d["kv_cache_dtype_resolved"] == "fp32"
' "$p" "$pj"; then ok; else bad "eval ppl PPL line: $p / $pj"; fi
# inspect numbers layers from 0, as --kv-cache-dtype-skip-layers does (stories260K has 5 layers: 0..4)
"$OCTET" inspect --model "$MODEL" --file tests/data/heldout.txt --num-tokens 64 >"$tmp/ins.out" 2>"$tmp/ins.err"
if grep -q "layer 0 (of 0..4)" "$tmp/ins.err" && grep -q "layer 4 (of 0..4)" "$tmp/ins.err" && ! grep -q "layer 5" "$tmp/ins.err" "$tmp/ins.out" &&
   grep -q "vs the auto (fp32) cache" "$tmp/ins.out"; then ok; else bad "inspect layer numbers: $(cat "$tmp/ins.err" "$tmp/ins.out")"; fi
# no program output cites a file outside the repository (the design notes live beside it, not in it)
if ! grep -n 'SPEC\.md\|DESIGN\.md' src/*.c src/*/*.c src/*/*/*.c 2>/dev/null | grep -v '^[^:]*:[0-9]*: *//' | grep -q '"'; then ok
else bad "output strings cite files outside the repository: $(grep -n 'SPEC\.md\|DESIGN\.md' src/*/*.c | grep -v '^[^:]*:[0-9]*: *//')"; fi
# advise refuses inputs from different models instead of recommending a command that fails
python3 - "$tmp/adv" <<'PY'
import json, os, sys
d = sys.argv[1]; os.makedirs(d, exist_ok=True)
info = {"head_dim": 32, "n_layers": 4, "n_kv_heads": 2, "max_pos": 512, "sliding_window": 0, "n_sliding_layers": 0}
cfg = lambda n, fl: {"name": n, "flags": fl, "ok": True, "points": []}
base = {"model": "dummy:tiny", "model_info": info, "input_lens": [32], "configs": [cfg("auto", ["--kv-cache-dtype", "auto"]), cfg("fp8", ["--kv-cache-dtype", "fp8"])]}
json.dump(base, open(d + "/sweep.json", "w"))
mixed = dict(base, configs=[cfg("auto", []), cfg("other", ["--model", "dummy:llama-3.2-1b", "--kv-cache-dtype", "fp8"])])
json.dump(mixed, open(d + "/mixed.json", "w"))
json.dump({"model": "../shared/models/stories260K.gguf", "ppl": 3.7, "ref_ppl": 3.6}, open(d + "/acc.json", "w"))
json.dump({"format": "octet-kv-scales/1", "model": "x.gguf", "layers": [{"k_scale": 1, "v_scale": 1}] * 5}, open(d + "/s5.json", "w"))
json.dump({"format": "octet-kv-scales/1", "model": "dummy:tiny", "layers": [{"k_scale": 1, "v_scale": 1}] * 4}, open(d + "/s4.json", "w"))
PY
"$OCTET" advise --sweep "$tmp/adv/sweep.json" --calibration "$tmp/adv/s4.json" --output "$tmp/adv/a.json" >/dev/null 2>"$tmp/err"
if [ $? = 0 ]; then ok; else bad "advise on one model: $(cat "$tmp/err")"; fi
expect_err 1 "configuration 'other' ran --model dummy:llama-3.2-1b" advise --sweep "$tmp/adv/mixed.json" --output "$tmp/adv/a.json"
expect_err 1 "is not the model the sweep measured (dummy:tiny: n_layers 16 vs 4)" advise --sweep "$tmp/adv/sweep.json" --model dummy:llama-3.2-1b --output "$tmp/adv/a.json"
expect_err 1 "s5.json: 5 layers" advise --sweep "$tmp/adv/sweep.json" --calibration "$tmp/adv/s5.json" --output "$tmp/adv/a.json"
expect_err 1 "--accuracy: measured on ../shared/models/stories260K.gguf" advise --sweep "$tmp/adv/sweep.json" --accuracy "$tmp/adv/acc.json" --output "$tmp/adv/a.json"
if ! grep -q "Recommendation" "$tmp/out"; then ok; else bad "advise printed a recommendation for mixed inputs"; fi
python3 - "$tmp/adv" <<'PY'
import json, sys
d = sys.argv[1]
fit = {"slope_ms_per_token": 1e-4, "intercept_ms": 1.0, "r2": 0.99}
fit8 = dict(fit, intercept_ms=1.1)  # (parallel and 0.1 ms above: fp8 never pays)
cfgs = [{"name": "auto", "flags": [], "itl_fit": fit}, {"name": "fp8", "flags": ["--kv-cache-dtype", "fp8"], "itl_fit": fit8,
        "vs_first": {"slope_ratio_pct": 100.0, "intercept_delta_ms": 0.1, "break_even": "never"}}]
json.dump({"model": "dummy:tiny", "input_lens": [32, 64], "configs": cfgs}, open(d + "/fits.json", "w"))
PY
expect_err 1 "--model ../shared/models/stories260K.gguf is not the model the sweep measured (dummy:tiny)" advise --sweep "$tmp/adv/fits.json" --model "$MODEL" --output "$tmp/adv/a.json"
# the advice says what auto runs as on the model
out=$("$OCTET" advise --sweep "$tmp/adv/fits.json" --model dummy:tiny --output "$tmp/adv/a.json" 2>&1)
if grep -q "stay in auto (bf16) for speed" <<<"$out" && ! grep -q "SPEC" <<<"$out"; then ok; else bad "advise auto label: $out"; fi
# octet serve MODEL (positional, like vllm serve) with -c and --kv-cache-memory-bytes (vLLM's name)
mkfifo "$tmp/srv.fifo"
"$OCTET" serve "$MODEL" --port 0 -c 64 --kv-cache-memory-bytes=2147483648 >"$tmp/srv.fifo" 2>"$tmp/srv.err" &
srv=$!
url=""; if read -r -t 60 line <"$tmp/srv.fifo"; then url=${line##* on }; fi
models=$(curl -s "$url/v1/models")
kill "$srv" 2>/dev/null; wait "$srv" 2>/dev/null
if python3 -c 'import json,sys; d=json.loads(sys.argv[1])["data"][0]; assert d["max_model_len"]==64, d' "$models" &&
   grep -q "KV budget 2.00 GiB" "$tmp/srv.err"; then ok; else bad "serve MODEL: url '$url' $models $(cat "$tmp/srv.err")"; fi

echo "cli: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
