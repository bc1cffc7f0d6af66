#!/usr/bin/env bash
# test_quant_gguf.sh — GGUF block-type weights (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K and llama.cpp's Q4_K_M mix)
# against the NumPy reference (tools/ref/gguf_quant.py, ref_gguf_run.py):
#   - random blocks and quantizer output: octet's dequantizer gives NumPy's float32 values bit for bit,
#     and its integer dot products (x quantized to 8 bits) give NumPy's qdot values bit for bit on every
#     compiled path (build/tests/test_kquant --blocks);
#   - a small Llama-shaped model with random weights written in each type (tools/make_shape_gguf.py):
#     octet's last-position logits (CPU, fp32 cache) equal the float64 reference forward on the
#     dequantized weights with x quantized as octet quantizes it; its greedy tokens are the reference's
#     best on the same sequence or within 0.25 of it, and its perplexity is within 1 %: an element of x
#     within ~1e-7 of a half step can round to neighbouring 8-bit values in the reference (f64
#     activations) and in octet (f32), which moves later logits by up to ~0.1 in these random models;
#   - decode equals prefill bit for bit: every position's logits, fed at once and one token at a time;
#   - Phi-3's fused attn_qkv / ffn_up in Q4_K and Q8_0 give the greedy tokens and, within the 8-bit
#     quantization of x (correlation > 0.999, max difference < 5 % of the largest), the logits of the
#     file dequantized to F32 (which octet multiplies in f32);
#   - the "auto" KV cache of a quantized file is fp16;
#   - a truncated file and an unsupported block type are refused with errors that name them.
set -u
. tests/lib.sh
BUILD=${BUILD:-build}
O=$BUILD/octet
K=$BUILD/tests/test_kquant
PY=""
for p in $(type -ap python3); do "$p" -c 'import numpy' 2>/dev/null && { PY=$p; break; }; done
if [ -z "$PY" ]; then
  bad "no python3 with numpy on PATH (scripts/deps.sh installs python3-numpy)"
  echo "test_quant_gguf: $pass passed, $fail failed"; exit 1
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# ---- blocks: random bytes with finite scales, then the quantizer's own blocks ----
for t in q8_0 q4_0 q4_k q5_k q6_k; do
  "$PY" - "$t" "$tmp/$t.raw" "$tmp/$t.f32" "$tmp/$t.x" "$tmp/$t.dots" <<'PY'
import sys
import numpy as np
sys.path.insert(0, "tools/ref")
import gguf_quant as g
t, rawp, f32p, xp, dotp = sys.argv[1:]
gt = g.IDS[t]
_, be, bb = g.TYPES[gt]
rng = np.random.default_rng(5)
raw = rng.integers(0, 256, size=(64, bb), dtype=np.uint8)
for o in {"q8_0": [0], "q4_0": [0], "q4_k": [0, 2], "q5_k": [0, 2], "q6_k": [208]}[t]:  # the f16 scales
    s = rng.uniform(0.5, 2, 64) * 2.0 ** -rng.integers(5, 10, 64).astype(np.float64)
    raw[:, o:o + 2] = s.astype(np.float16).view(np.uint8).reshape(64, 2)
q = g.quantize(t, rng.standard_normal((8, 4 * be)).astype(np.float32))
raw = np.concatenate([raw.reshape(-1), q.reshape(-1)])
raw.tofile(rawp)
g.dequantize(gt, raw, raw.size // bb * be).astype("<f4").tofile(f32p)
x = (rng.standard_normal(4 * be) * rng.uniform(0.1, 10, 4 * be)).astype(np.float32)
x[be:2 * be] = 0  # a block of zeros (d = 0)
x.astype("<f4").tofile(xp)
g.qdot(gt, raw.reshape(-1, 4 * bb), x).astype("<f4").tofile(dotp)
PY
  if out=$("$K" --blocks "$t" "$tmp/$t.raw" "$tmp/$t.f32" "$tmp/$t.x" "$tmp/$t.dots" 2>&1) &&
     grep -q "kquant_blocks: [1-9][0-9]* passed, 0 failed" <<<"$out"
  then ok; else bad "blocks $t against NumPy: $out"; fi
done

# ---- whole models: octet against the reference on the dequantized weights ----
TEXT=tests/data/heldout.txt
for t in q8_0 q4_0 q4_k q5_k q6_k q4_k_m; do
  m=$tmp/m_$t.gguf
  if ! "$PY" tools/make_shape_gguf.py "$m" --vocab 512 --dim 256 --layers 2 --heads 4 --kv-heads 2 --ffn 512 \
       --dtype $t --seed 1 --std 0.08; then bad "make_shape_gguf.py --dtype $t"; continue; fi
  gen=$("$O" generate -m "$m" -p "Hello, quant" -n 8 --json --ignore-eos --device cpu --kv-cache-dtype fp32 2>"$tmp/err")
  gids=$("$PY" -c 'import json,sys; print(" ".join(map(str, json.loads(sys.argv[1])["tokens"])))' "$gen")
  ref=$("$PY" tools/ref/ref_gguf_run.py "$m" --prompt "Hello, quant" --gen 8 --follow "$gids" --ppl-file $TEXT \
        --ctx 128 --chunks 3)
  ppl=$("$O" eval ppl -m "$m" -f $TEXT --ctx 128 --chunks 3 --json --device cpu --kv-cache-dtype fp32 2>>"$tmp/err")
  ids=$("$PY" -c 'import json,sys; print(" ".join(map(str, json.loads(sys.argv[1])["prompt_tokens"])))' "$ref")
  # shellcheck disable=SC2086
  lg=$("$K" --logits "$m" $ids 2>>"$tmp/err")
  if "$PY" - "$ref" "$gen" "$ppl" "$lg" <<'PY'
import json, sys
r, g, p, lg = json.loads(sys.argv[1]), json.loads(sys.argv[2]), json.loads(sys.argv[3]), json.loads(sys.argv[4])
assert g["prompt_tokens"] == r["prompt_tokens"], (g["prompt_tokens"], r["prompt_tokens"])
assert max(r["follow_gaps"]) < 0.25, ("greedy", g["tokens"], r["tokens"], r["follow_gaps"])
assert abs(p["ppl"] / r["ppl"] - 1) < 1e-2, ("ppl", p["ppl"], r["ppl"])
big = max(abs(v) for v in r["logits"])
err = max(abs(a - b) for a, b in zip(lg, r["logits"]))
assert len(lg) == len(r["logits"]) and err < 1e-5 * (1 + big), ("logits", err, big)
PY
  then ok; else bad "$t model against the reference: $(tail -n 3 "$tmp/err")"; fi
  # shellcheck disable=SC2086
  if out=$("$K" --decode-equals-prefill "$m" $ids $gids 2>&1); then ok; else bad "$t decode vs prefill: $out"; fi
done

# ---- Phi-3 (Q, K, V fused in attn_qkv, gate + up in ffn_up, split by block rows): the quantized file
# against its copy dequantized to F32 (tools/gguf_dequant.py), octet on both ----
for t in q4_k q8_0; do
  m=$tmp/phi3_$t.gguf
  if ! "$PY" tools/make_shape_gguf.py "$m" --arch phi3 --vocab 512 --dim 256 --layers 2 --heads 4 --kv-heads 2 \
       --ffn 512 --dtype $t --seed 2 --std 0.08 || ! "$PY" tools/gguf_dequant.py "$m" "$tmp/phi3_f32.gguf"; then
    bad "phi3 $t files"; continue
  fi
  res=()
  for f in "$m" "$tmp/phi3_f32.gguf"; do
    res+=("$("$O" generate -m "$f" -p "Hello, quant" -n 8 --json --ignore-eos --device cpu --kv-cache-dtype fp32 \
             2>>"$tmp/err")")
    res+=("$("$K" --logits "$f" 256 72 101 108 108 111 2>>"$tmp/err")")
  done
  if "$PY" - "${res[@]}" <<'PY'
import json, sys
import numpy as np
ga, la, gb, lb = (json.loads(a) for a in sys.argv[1:])
assert ga["tokens"] == gb["tokens"], (ga["tokens"], gb["tokens"])
la, lb = np.array(la), np.array(lb)
assert la.shape == lb.shape and np.corrcoef(la, lb)[0, 1] > 0.999, np.corrcoef(la, lb)[0, 1]
assert np.abs(la - lb).max() < 0.05 * np.abs(lb).max(), (np.abs(la - lb).max(), np.abs(lb).max())
PY
  then ok; else bad "phi3 $t against its F32 copy: $(tail -n 3 "$tmp/err")"; fi
done

# ---- the "auto" cache under block-type weights is fp16 ----
out=$("$O" generate -m "$tmp/m_q4_k_m.gguf" -p hi -n 1 --json --device cpu 2>/dev/null)
if "$PY" -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["kv_cache_dtype_resolved"]=="fp16", d' "$out"; then ok
else bad "auto cache of a Q4_K_M file: $out"; fi

# ---- refusals ----
head -c $(( $(stat -c %s "$tmp/m_q4_k.gguf") - 100 )) "$tmp/m_q4_k.gguf" >"$tmp/trunc.gguf"
if ! "$O" generate -m "$tmp/trunc.gguf" -p hi -n 1 --device cpu 2>"$tmp/err" >/dev/null &&
   grep -q "tensor 'output.weight': data .* lies outside" "$tmp/err"; then ok; else bad "truncated Q4_K file: $(cat "$tmp/err")"; fi
"$PY" - "$tmp/m_q4_k.gguf" "$tmp/iq.gguf" <<'PY'
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
name = b"blk.0.attn_q.weight"
i = b.index(struct.pack("<Q", len(name)) + name) + 8 + len(name)
nd = struct.unpack_from("<I", b, i)[0]
struct.pack_into("<I", b, i + 4 + 8 * nd, 16)  # ggml type 16: IQ2_XXS
open(sys.argv[2], "wb").write(b)
PY
if ! "$O" generate -m "$tmp/iq.gguf" -p hi -n 1 --device cpu 2>"$tmp/err" >/dev/null &&
   grep -q "tensor 'blk.0.attn_q.weight': ggml type 16 (IQ2_XXS) is not supported" "$tmp/err"; then ok
else bad "IQ2_XXS tensor: $(cat "$tmp/err")"; fi

echo "test_quant_gguf: $pass passed, $fail failed"
