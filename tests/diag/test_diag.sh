#!/usr/bin/env bash
# End-to-end checks of the diagnostic commands on stories260K: `calibrate` (JSON schema,
# loads with --kv-scales in eval ppl), calibration rescuing a model whose K/V sit far
# outside e4m3's range (a rescaled GGUF copy, exactly equivalent in fp32), `eval needle`
# at both levels (JSON schema, retrieval at short length, heatmap PNG), `inspect` (JSON
# schema, histogram PNGs), and bad input: each must exit non-zero with a clear message.
set -u
BUILD=${BUILD:-build}
OCTET="$BUILD/octet"
MODEL=../shared/models/stories260K.gguf
TEXT=tests/data/heldout.txt
. tests/lib.sh  # pass/fail counters, ok, bad
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
pyjson() {  # $1 = file, $2 = python assertions over d
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); exec(sys.argv[2])' "$1" "$2" 2>"$tmp/pyerr"
}
ppl_of() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["ppl"])' "$1"; }

# --- calibrate: per tensor, max; schema; loads with --kv-scales
if "$OCTET" calibrate --model "$MODEL" --file "$TEXT" --granularity tensor --method max --num-tokens 2048 --ctx 256 --output "$tmp/s.json" >"$tmp/out" 2>"$tmp/err" &&
   pyjson "$tmp/s.json" '
assert d["format"]=="octet-kv-scales/1" and d["granularity"]=="tensor" and d["method"]=="max"
assert d["model"].endswith("stories260K.gguf") and d["num_tokens"]==2048 and len(d["layers"])==5
for l in d["layers"]:
    for k in ("k_scale","v_scale","q_scale"): assert isinstance(l[k],float) and 0<l[k]<1, (k,l[k])
    assert abs(l["k_scale"]*448-l["k_amax"])<1e-4*l["k_amax"]'; then ok; else bad "calibrate tensor: $(cat "$tmp/err" "$tmp/pyerr")"; fi
grep -q "| layer |" "$tmp/out" && ok || bad "calibrate prints no table"
"$OCTET" eval ppl --model "$MODEL" --file "$TEXT" --ctx 256 --chunks 8 --kv-cache-dtype fp8 --kv-scales "$tmp/s.json" \
  --ref-kv-cache-dtype fp32 --json >"$tmp/p.json" 2>"$tmp/err"
if pyjson "$tmp/p.json" 'assert 1<d["ppl"]<10 and d["kld_mean"]<0.05 and d["top1_agree"]>0.85'; then ok; else bad "eval ppl --kv-scales: $(cat "$tmp/p.json" "$tmp/err")"; fi

# --- calibrate: per head, percentile, e5m2
if "$OCTET" calibrate --model "$MODEL" --file "$TEXT" --num-tokens 1024 --granularity head --method percentile:99.9 \
     --kv-cache-dtype fp8_e5m2 --output "$tmp/h.json" >/dev/null 2>"$tmp/err" &&
   pyjson "$tmp/h.json" '
assert d["granularity"]=="head" and d["method"]=="percentile:99.9" and d["kv_cache_dtype"]=="fp8_e5m2"
for l in d["layers"]:
    assert len(l["k_scale"])==4 and len(l["v_scale"])==4 and len(l["q_scale"])==8
    assert all(0<s<=l["k_amax"]/57344*1.0001 for s in l["k_scale"])'; then ok; else bad "calibrate head: $(cat "$tmp/err" "$tmp/pyerr")"; fi
"$OCTET" generate --model "$MODEL" --prompt "Once upon a time" --max-tokens 4 --kv-cache-dtype fp8_e5m2 --kv-scales "$tmp/h.json" >/dev/null 2>"$tmp/err" && ok || bad "generate with per-head scales: $(cat "$tmp/err")"

# --- calibration helps where scale 1.0 hurts: K x64 (saturates e4m3), V x2^-12 (subnormal),
# compensated by Q /64 and attn_output x2^12: the fp32 model computes exactly the same.
python3 - "$MODEL" "$tmp/scaled.gguf" <<'EOF' 2>"$tmp/err" && ok || bad "writing the rescaled GGUF: $(cat "$tmp/err")"
import struct, sys
src, dst = sys.argv[1], sys.argv[2]
data = bytearray(open(src, "rb").read())
off = 0
def rd(fmt):
    global off
    v = struct.unpack_from("<" + fmt, data, off)[0]; off += struct.calcsize("<" + fmt); return v
def rstr():
    global off
    n = rd("Q"); s = bytes(data[off:off + n]).decode(); off += n; return s
SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
def skip(t):
    global off
    if t == 8: rstr()
    elif t == 9:
        at = rd("I"); n = rd("Q")
        for _ in range(n): skip(at)
    else: off += SIZES[t]
assert rd("I") == 0x46554747 and rd("I") == 3
n_t, n_kv = rd("Q"), rd("Q")
align = 32
for _ in range(n_kv):
    k = rstr(); t = rd("I")
    if k == "general.alignment": align = rd("I")
    else: skip(t)
infos = []
for _ in range(n_t):
    name = rstr(); nd = rd("I"); dims = [rd("Q") for _ in range(nd)]; typ = rd("I"); o = rd("Q")
    infos.append((name, dims, typ, o))
base = (off + align - 1) // align * align
factor = {"attn_k": 64.0, "attn_q": 1 / 64.0, "attn_v": 2.0 ** -12, "attn_output": 2.0 ** 12}
n_done = 0
for name, dims, typ, o in infos:
    kind = name.split(".")[-2] if name.startswith("blk.") else None
    if kind in factor:
        assert typ == 0, name  # F32
        n = 1
        for d in dims: n *= d
        p = base + o
        vals = struct.unpack_from("<%df" % n, data, p)
        struct.pack_into("<%df" % n, data, p, *[v * factor[kind] for v in vals])
        n_done += 1
assert n_done == 20, n_done
open(dst, "wb").write(data)
EOF
run_ppl() {  # $1 = model, $2 = out json, rest = flags
  local m=$1 o=$2; shift 2
  "$OCTET" eval ppl --model "$m" --file "$TEXT" --ctx 256 --chunks 8 --json "$@" >"$o" 2>>"$tmp/err"
}
: >"$tmp/err"
run_ppl "$MODEL" "$tmp/o32.json" --kv-cache-dtype fp32
run_ppl "$tmp/scaled.gguf" "$tmp/s32.json" --kv-cache-dtype fp32
run_ppl "$tmp/scaled.gguf" "$tmp/s8.json" --kv-cache-dtype fp8
"$OCTET" calibrate --model "$tmp/scaled.gguf" --file "$TEXT" --num-tokens 2048 --ctx 256 --output "$tmp/ss.json" >/dev/null 2>>"$tmp/err"
run_ppl "$tmp/scaled.gguf" "$tmp/s8c.json" --kv-cache-dtype fp8 --kv-scales "$tmp/ss.json" --ref-kv-cache-dtype fp32
o32=$(ppl_of "$tmp/o32.json"); s32=$(ppl_of "$tmp/s32.json"); s8=$(ppl_of "$tmp/s8.json"); s8c=$(ppl_of "$tmp/s8c.json")
echo "rescaled stories260K: ppl fp32 $o32 (original) / $s32 (rescaled), fp8 scale 1.0 $s8, fp8 calibrated $s8c" >&2
if python3 -c 'import sys; o,s,b,c=map(float,sys.argv[1:]); assert abs(o-s)<1e-4*o; assert b>1.5*o, b; assert c<1.05*o, c' "$o32" "$s32" "$s8" "$s8c"; then ok
else bad "calibration does not rescue the rescaled model: fp32 $o32/$s32, fp8 1.0 $s8, calibrated $s8c; $(cat "$tmp/err")"; fi

# --- K offsets (calibrate --k-offset mean): calibrated on the first half of the text, the
# e4m3 cache's perplexity on the disjoint second half is within 1% of fp32, and its KLD is
# well below that of scales calibrated without offsets
head -c 12380 "$TEXT" >"$tmp/calib.txt"; tail -c +12381 "$TEXT" >"$tmp/eval.txt"
: >"$tmp/err"
"$OCTET" calibrate --model "$MODEL" --file "$tmp/calib.txt" --granularity head --k-offset mean --output "$tmp/ko.json" >/dev/null 2>>"$tmp/err"
"$OCTET" calibrate --model "$MODEL" --file "$tmp/calib.txt" --granularity head --output "$tmp/kn.json" >/dev/null 2>>"$tmp/err"
if pyjson "$tmp/ko.json" '
for l in d["layers"]:
    o = l["k_offset"]; assert len(o)==4 and all(len(h)==8 for h in o), o
    assert max(abs(x) for h in o for x in h) > 0.1
    assert all(0<s<=l["k_amax"]/448*1.0001 for s in l["k_scale"])'; then ok; else bad "calibrate --k-offset: $(cat "$tmp/err" "$tmp/pyerr")"; fi
for f in ko kn; do
  "$OCTET" eval ppl --model "$MODEL" --file "$tmp/eval.txt" --ctx 256 --kv-cache-dtype fp8 --kv-scales "$tmp/$f.json" \
    --ref-kv-cache-dtype fp32 --json >"$tmp/p_$f.json" 2>>"$tmp/err"
done
if python3 -c '
import json, sys
o, n = (json.load(open(f)) for f in sys.argv[1:3])
print("k offsets: fp8 ppl / fp32 %.4f (without offsets %.4f), KLD %.4f (%.4f)" % (o["ppl"]/o["ref_ppl"], n["ppl"]/n["ref_ppl"], o["kld_mean"], n["kld_mean"]), file=sys.stderr)
assert o["ppl"] < 1.01 * o["ref_ppl"], o
assert o["kld_mean"] < 0.6 * n["kld_mean"], (o, n)' "$tmp/p_ko.json" "$tmp/p_kn.json"; then ok
else bad "K offsets: $(cat "$tmp/p_ko.json" "$tmp/p_kn.json" "$tmp/err")"; fi
# inspect measures what the offset cache stores: K − offset (smaller, never saturated)
"$OCTET" inspect --model "$MODEL" --file "$tmp/eval.txt" --num-tokens 256 --kv-scales "$tmp/ko.json" --json >"$tmp/iko.json" 2>>"$tmp/err"
"$OCTET" inspect --model "$MODEL" --file "$tmp/eval.txt" --num-tokens 256 --json >"$tmp/ino.json" 2>>"$tmp/err"
if python3 -c '
import json, sys
a, b = (json.load(open(f))["layers"] for f in sys.argv[1:3])
for x, y in zip(a, b):
    assert x["k"]["frac_saturated"] == 0 and x["k"]["max_abs"] < 0.8 * y["k"]["max_abs"], (x["k"], y["k"])
    assert x["v"]["max_abs"] == y["v"]["max_abs"]' "$tmp/iko.json" "$tmp/ino.json"; then ok
else bad "inspect with K offsets: $(cat "$tmp/err")"; fi
"$OCTET" calibrate --model "$MODEL" --file "$tmp/calib.txt" --k-offset median --output "$tmp/x.json" >/dev/null 2>"$tmp/err"
[ $? -ne 0 ] && grep -q -- "--k-offset: unknown value 'median'" "$tmp/err" && ok || bad "bad --k-offset: $(cat "$tmp/err")"

# --- eval needle, attention level
if "$OCTET" eval needle --level attention --lengths 256,1024 --threads 2 --json >"$tmp/na.json" 2>"$tmp/err" &&
   pyjson "$tmp/na.json" '
rows=d["rows"]; assert d["level"]=="attention" and len(rows)==2*2*6, len(rows)
keys={"length","heads","n_heads","n_kv_heads","head_dim","kv_cache_dtype","attention_math","needle_weight","rel_l2","cos_needle","cos_distractor","retrieved"}
for r in rows:
    assert keys<=set(r), set(r)
    assert r["retrieved"] is True, r
    if r["kv_cache_dtype"]=="fp32": assert r["rel_l2"]<1e-5, r
    if r["kv_cache_dtype"]=="bf16": assert r["rel_l2"]<1e-2, r
assert {r["attention_math"] for r in rows if r["kv_cache_dtype"].startswith("fp8")}=={"exact","emulate"}'; then ok
else bad "eval needle attention: $(cat "$tmp/err" "$tmp/pyerr")"; fi
"$OCTET" eval needle --lengths 256 --heads gqa --kv-cache-dtype fp8 --fp8-attention-math emulate --threads 2 >"$tmp/out" 2>"$tmp/err"
if grep -q "| 256 | 32q/8kv | fp8_e4m3 | emulate |" "$tmp/out" && [ "$(grep -c '^| 256' "$tmp/out")" -eq 1 ]; then ok; else bad "needle table: $(cat "$tmp/out" "$tmp/err")"; fi

# --- eval needle: --v-bias (V outlier channels share an offset) and the accumulation flag
if "$OCTET" eval needle --level attention --lengths 512 --heads 1 --kv-cache-dtype fp32,fp8 --v-bias 4 --device cpu \
     --fp8-attention-accumulation two-level,every:4,single --threads 2 --json >"$tmp/nb.json" 2>"$tmp/err" &&
   pyjson "$tmp/nb.json" '
assert d["v_bias"]==4 and len(d["rows"])==5, d
em={r["attention_math"]:r for r in d["rows"] if r["attention_math"].startswith("emulate")}
assert set(em)=={"emulate","emulate every:4","emulate single"}, set(em)
assert em["emulate single"]["accumulation"]=="single" and em["emulate"]["accumulation"]=="two-level"
assert all(r["device"]=="cpu" for r in d["rows"])
assert [r for r in d["rows"] if r["kv_cache_dtype"]=="fp32"][0]["rel_l2"]<1e-5'; then ok
else bad "eval needle --v-bias: $(cat "$tmp/err" "$tmp/pyerr")"; fi
# the centred and the offset problem differ only in V, so their fp32 errors are both tiny but the outputs differ
"$OCTET" eval needle --level attention --lengths 512 --heads 1 --kv-cache-dtype fp32 --threads 2 --json >"$tmp/nc.json" 2>/dev/null
python3 -c 'import json,sys; a=json.load(open(sys.argv[1]))["rows"][0]; b=json.load(open(sys.argv[2]))["rows"][0]; assert a["cos_needle"]!=b["cos_needle"]' \
  "$tmp/nb.json" "$tmp/nc.json" 2>/dev/null && ok || bad "--v-bias changed nothing"
for badv in "every:0" "every:x" "double" ""; do
  if "$OCTET" eval needle --level attention --lengths 256 --heads 1 --fp8-attention-accumulation "$badv" >"$tmp/out" 2>"$tmp/err"; then
    bad "--fp8-attention-accumulation '$badv' accepted"
  elif grep -q -- "--fp8-attention-accumulation" "$tmp/err"; then ok; else bad "error does not name the flag: $(cat "$tmp/err")"; fi
done
if "$OCTET" generate --model "$MODEL" --prompt "Once upon a time" --max-tokens 4 --kv-cache-dtype fp8 --device cpu \
     --fp8-attention-accumulation every:4 >"$tmp/out" 2>"$tmp/err"; then ok; else bad "generate --fp8-attention-accumulation every:4: $(cat "$tmp/err")"; fi
if "$OCTET" generate --model "$MODEL" --prompt "x" --max-tokens 1 --fp8-attention-accumulation sometimes >"$tmp/out" 2>"$tmp/err"; then
  bad "generate accepted --fp8-attention-accumulation sometimes"
elif grep -q "two-level, every:N" "$tmp/err"; then ok; else bad "generate: unclear accumulation error: $(cat "$tmp/err")"; fi
if "$OCTET" eval needle --level attention --lengths 256 --v-bias 1e9 >"$tmp/out" 2>"$tmp/err"; then bad "--v-bias 1e9 accepted"
elif grep -q -- "--v-bias" "$tmp/err"; then ok; else bad "--v-bias error: $(cat "$tmp/err")"; fi

# --- eval needle, model level (stories260K has no passkey skill: schema only)
if "$OCTET" eval needle --level model --model "$MODEL" --lengths 256,512 --depths 0,50,100 --trials 2 --json \
     --heatmap "$tmp/heat.png" >"$tmp/nm.json" 2>"$tmp/err" &&
   pyjson "$tmp/nm.json" '
assert d["level"]=="model" and len(d["cells"])==6
for c in d["cells"]:
    assert c["length"] in (256,512) and c["depth"] in (0,50,100) and 0<=c["accuracy"]<=1 and c["trials"]==2
    assert c["prompt_tokens"]<=c["length"]'; then ok; else bad "eval needle model: $(cat "$tmp/err" "$tmp/pyerr")"; fi
python3 -c 'import sys; assert open(sys.argv[1],"rb").read(8)==b"\x89PNG\r\n\x1a\n"' "$tmp/heat.png" 2>/dev/null && ok || bad "heatmap is not a PNG"
# --from-json redraws a recorded result: the same table; a grid split over two files merges
"$OCTET" eval needle --level model --model "$MODEL" --lengths 256,512 --depths 0,50,100 --trials 2 >"$tmp/nm.txt" 2>/dev/null
"$OCTET" eval needle --level model --from-json "$tmp/nm.json" --heatmap "$tmp/heat2.png" >"$tmp/re.txt" 2>"$tmp/err"
if [ $? -eq 0 ] && diff <(sed 1d "$tmp/nm.txt") <(sed 1d "$tmp/re.txt") >/dev/null && [ -s "$tmp/heat2.png" ]; then ok
else bad "--from-json table differs: $(cat "$tmp/err"; diff "$tmp/nm.txt" "$tmp/re.txt")"; fi
python3 - "$tmp/nm.json" "$tmp/nm_a.json" "$tmp/nm_b.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for path, L in ((sys.argv[2], 256), (sys.argv[3], 512)):
    json.dump(dict(d, cells=[c for c in d["cells"] if c["length"] == L]), open(path, "w"))
PY
"$OCTET" eval needle --level model --from-json "$tmp/nm_a.json,$tmp/nm_b.json" >"$tmp/re2.txt" 2>"$tmp/err" &&
  diff <(sed 1d "$tmp/nm.txt") <(sed 1d "$tmp/re2.txt") >/dev/null && ok || bad "--from-json of two parts: $(cat "$tmp/err")"
"$OCTET" eval needle --level model --from-json "$tmp/nm_a.json,$tmp/nm_a.json" >/dev/null 2>"$tmp/err"
[ $? -ne 0 ] && grep -q "do not fill" "$tmp/err" && ok || bad "--from-json with a repeated part: $(cat "$tmp/err")"
echo '{"level":"model","kv_cache_dtype":"fp8","cells":[{"length":256,"depth":0,"accuracy":1.5,"trials":2}]}' >"$tmp/bad.json"
"$OCTET" eval needle --level model --from-json "$tmp/bad.json" >/dev/null 2>"$tmp/err"
[ $? -ne 0 ] && grep -q "accuracy in \[0, 1\]" "$tmp/err" && ok || bad "--from-json bad cell: $(cat "$tmp/err")"
"$OCTET" eval needle --level model --from-json "$tmp/nm.json" --json >/dev/null 2>"$tmp/err"
[ $? -ne 0 ] && grep -q "not --json" "$tmp/err" && ok || bad "--from-json with --json: $(cat "$tmp/err")"

# --- inspect
if "$OCTET" inspect --model "$MODEL" --file "$TEXT" --num-tokens 512 --output-dir "$tmp/hist" --json >"$tmp/in.json" 2>"$tmp/err" &&
   pyjson "$tmp/in.json" '
assert len(d["layers"])==5 and sorted(d["ranking"])==list(range(5)) and d["kld_all_layers"]>0
for l in d["layers"]:
    assert l["sensitivity_kld"]>=0
    for k in ("k","v","q","gate"):
        s=l[k]
        for f in ("max_abs","p50","p99","p999","frac_saturated","frac_subnormal","frac_zero","rt_rel_err"): assert f in s, f
        assert 0<s["p50"]<=s["p99"]<=s["p999"]<=s["max_abs"]*1.0001, s
        assert 0<s["rt_rel_err"]<0.1 and s["frac_saturated"]<0.01, (k,s)
skip=[int(x) for x in d["skip_layers"].split(",")]
assert skip and skip[0] in range(5) and d["ranking"][0] in skip
assert len(d["pngs"])==5'; then ok; else bad "inspect json: $(cat "$tmp/err" "$tmp/pyerr")"; fi
npng=0; for f in "$tmp"/hist/layer_*.png; do python3 -c 'import sys; assert open(sys.argv[1],"rb").read(8)==b"\x89PNG\r\n\x1a\n"' "$f" && npng=$((npng + 1)); done
[ "$npng" -eq 5 ] && ok || bad "inspect wrote $npng valid PNGs, want 5"
"$OCTET" inspect --model "$tmp/scaled.gguf" --file "$TEXT" --num-tokens 256 >"$tmp/out" 2>"$tmp/err"
if grep -q "suggested: --kv-cache-dtype-skip-layers 0,1,2,3,4" "$tmp/out"; then ok; else bad "inspect on the rescaled model: $(tail -5 "$tmp/out")"; fi

# --- bad input: exit code and a message naming the problem
expect_err() {  # $1 = expected exit code, $2 = text the message must contain, rest = args
  local code=$1 want=$2; shift 2
  "$OCTET" "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?
  if [ $rc -eq "$code" ] && grep -q -- "$want" "$tmp/err"; then ok; else bad "octet $* -> exit $rc, stderr: $(head -c 300 "$tmp/err")"; fi
}
expect_err 1 "cannot open" calibrate --model "$MODEL" --file "$tmp/none.txt" --output "$tmp/x.json"
expect_err 2 "--method: unknown value 'median'" calibrate --model "$MODEL" --file "$TEXT" --output "$tmp/x.json" --method median
expect_err 2 "--method" calibrate --model "$MODEL" --file "$TEXT" --output "$tmp/x.json" --method percentile:200
expect_err 2 "--granularity: unknown value 'channel'" calibrate --model "$MODEL" --file "$TEXT" --output "$tmp/x.json" --granularity channel
expect_err 2 "--kv-cache-dtype: 'bf16' is not an FP8 type with scales" calibrate --model "$MODEL" --file "$TEXT" --output "$tmp/x.json" --kv-cache-dtype bf16
expect_err 2 "--output are required" calibrate --model "$MODEL" --file "$TEXT"
expect_err 1 "/no/such.gguf" calibrate --model /no/such.gguf --file "$TEXT" --output "$tmp/x.json"
expect_err 1 "/no/dir/x.json" calibrate --model "$MODEL" --file "$TEXT" --output /no/dir/x.json
expect_err 2 "--level: unknown value 'layer'" eval needle --level layer
expect_err 2 "--lengths: 'abc'" eval needle --lengths 256,abc
expect_err 2 "--kv-cache-dtype: 'int4'" eval needle --kv-cache-dtype fp8,int4
expect_err 2 "--heads" eval needle --heads 2
expect_err 2 "--needle-weight" eval needle --needle-weight 1.5
expect_err 2 "--model is required" eval needle --level model
expect_err 1 "cannot hold the passkey prompt" eval needle --level model --model "$MODEL" --lengths 64
expect_err 1 "cannot open" inspect --model "$MODEL" --file "$tmp/none.txt"
expect_err 2 "not an FP8 type" inspect --model "$MODEL" --file "$TEXT" --kv-cache-dtype fp16
expect_err 2 "unknown flag '--bogus'" inspect --model "$MODEL" --file "$TEXT" --bogus

echo "diag: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
