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

# bench model prints a table and JSON
bm=$("$OCTET" bench model --model dummy:tiny --pp 64 --tg 8 --reps 2 --threads 2 2>/dev/null)
if echo "$bm" | grep -q "| pp64 |" && echo "$bm" | tail -n 1 | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["pp_tok_s_median"]>0 and d["tg_tok_s_median"]>0'; then ok; else bad "bench model: $bm"; fi
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
# bench model --depth: one table row per test and depth, one JSON line per depth
bm=$("$OCTET" bench model --model dummy:tiny --pp 16 --tg 4 --reps 1 --threads 2 --depth 0,48 2>/dev/null)
if echo "$bm" | grep -q "| tg4 @ d48 |" && echo "$bm" | grep '^{' | python3 -c '
import json,sys
d=[json.loads(l) for l in sys.stdin]
assert [x["depth"] for x in d]==[0,48] and all(x["tg_ms_per_token"]>0 and x["pp_tok_s_median"]>0 for x in d)'; then ok; else bad "bench model --depth: $bm"; fi
# bench model with two cache types: one engine each, measured in turn; fp8 rows carry the paired difference
bm=$("$OCTET" bench model --model dummy:tiny --pp 16 --tg 4 --reps 2 --threads 2 --depth 0,48 --kv-cache-dtype auto,fp8 2>/dev/null)
if echo "$bm" | grep '^{' | python3 -c '
import json,sys
d=[json.loads(l) for l in sys.stdin]
assert [(x["kv_cache_dtype"], x["depth"]) for x in d]==[("auto",0),("fp8",0),("auto",48),("fp8",48)]
assert all(("tg_ms_diff_paired_median" in x)==(x["kv_cache_dtype"]=="fp8") for x in d)'; then ok; else bad "bench model auto,fp8: $bm"; fi
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

echo "cli: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
