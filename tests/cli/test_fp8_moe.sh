#!/usr/bin/env bash
# FP8 mixture-of-experts experts end to end on the CPU: `--quantization fp8` quantizes the experts of the
# transformers MoE fixtures (Mixtral, Qwen3-MoE; tests/data/hf/*_routed) and stays near the BF16 model;
# FP8 checkpoints with one e4m3 tensor per expert (tools/make_fp8_checkpoint.py, the layout of Qwen3-MoE
# FP8 checkpoints on the Hub) load and give exactly the logits of `--quantization fp8` of the original —
# per channel on the fixtures, 128x128 blocks on a 128-wide Qwen3-MoE written here with NumPy (the
# fixtures' 64-wide experts are not whole blocks) —; MXFP4 experts stay MXFP4; what is not implemented is
# refused with an error naming it.
set -u
BUILD=${BUILD:-build}
OCTET="$BUILD/octet"
PY=/usr/bin/python3
. tests/lib.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

. tests/cli/fp8_lib.sh
gen() { "$OCTET" generate -m "$@" -p hi -n 1; }

for src in mixtral_routed qwen3_moe_routed; do
  S=tests/data/hf/$src
  # the experts are e4m3 after --quantization fp8: only the embedding (40 KiB) is left in bf16
  "$OCTET" generate -m "$S" --quantization fp8 -p hi -n 2 >/dev/null 2>"$tmp/err"
  if grep -q "weights by dtype: fp8_e4m3 0.2 MiB, bf16 0.0 MiB" "$tmp/err"; then ok
  else bad "$src: experts not quantized: $(grep 'weights by dtype' "$tmp/err")"; fi
  # e4m3 keeps 3 mantissa bits (a relative rounding error up to 2^-4 per weight and activation); these
  # random fixtures give KLD 0.03-0.07 and top-1 0.86-0.89 (bf16 KV, 4 x 64 tokens), the dense fixture's
  # --quantization fp8 bound (0.2, tests/cli/test_fp8_weights.sh) holds them with a 3x margin
  close "$src --quantization fp8 vs bf16" "$(ev "$S" "$S" --quantization fp8)" 0.2 0.75
  mk "$S" "$tmp/${src}_ch" --format compressed-tensors --weights channel
  same "$src per-expert fp8 checkpoint (channel) vs --quantization fp8" "$(ev "$S" "$tmp/${src}_ch" --quantization fp8)"
  mk "$S" "$tmp/${src}_t" --format fp8 --weights tensor
  close "$src fp8 per-tensor experts" "$(ev "$tmp/${src}_t" "$S")" 0.2 0.75
  mk "$S" "$tmp/${src}_ts" --format fp8 --weights tensor --activations static
  close "$src fp8 per-tensor experts, static activations" "$(ev "$tmp/${src}_ts" "$S")" 0.5 0.6
  refused "$src --quantization-block 128 on 64-wide experts" "multiples of 128" gen "$S" --quantization fp8 \
    --quantization-block 128
  mk "$S" "$tmp/${src}_blk" --format fp8 --weights block
  refused "$src block checkpoint with 64-wide experts" "stacking experts' 128x128 block scales" gen "$tmp/${src}_blk"
done
close "e5m2 expert gates differ from e4m3" \
  "$(ev "$tmp/qwen3_moe_routed_ch" "$tmp/qwen3_moe_routed_ch" --fp8-gate-dtype e5m2)" 0.2 0.75

# a 128-wide Qwen3-MoE (2 layers, 4 experts of 128, random bf16 weights): the Qwen3-30B-A3B-FP8 block layout
Q=$tmp/q128
"$PY" - tests/data/hf/qwen3_moe_routed "$Q" <<'PYEOF' || bad "writing the 128-wide Qwen3-MoE"
import json, os, shutil, sys
import numpy as np
sys.path.insert(0, "tools")
from make_fp8_checkpoint import write_st
src, dst = sys.argv[1], sys.argv[2]
os.makedirs(dst)
for f in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
    shutil.copy(os.path.join(src, f), dst)
c = json.load(open(os.path.join(src, "config.json")))
c.update(hidden_size=128, moe_intermediate_size=128, intermediate_size=256)
json.dump(c, open(os.path.join(dst, "config.json"), "w"), indent=2)
rng = np.random.default_rng(7)
D, F, V, E, HD = 128, 128, c["vocab_size"], c["num_local_experts"], c["head_dim"]
def bf16(a):
    u = np.asarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16).tobytes()
items = []
def t(name, shape, std=None):
    a = np.ones(shape, np.float32) if std is None else rng.normal(0, std, shape).astype(np.float32)
    items.append((name, "BF16", shape, bf16(a)))
t("model.embed_tokens.weight", [V, D], 0.5)
t("lm_head.weight", [V, D], 0.1)
t("model.norm.weight", [D])
for l in range(c["num_hidden_layers"]):
    p = f"model.layers.{l}."
    t(p + "input_layernorm.weight", [D]); t(p + "post_attention_layernorm.weight", [D])
    t(p + "self_attn.q_norm.weight", [HD]); t(p + "self_attn.k_norm.weight", [HD])
    t(p + "self_attn.q_proj.weight", [4 * HD, D], 0.1); t(p + "self_attn.k_proj.weight", [2 * HD, D], 0.1)
    t(p + "self_attn.v_proj.weight", [2 * HD, D], 0.1); t(p + "self_attn.o_proj.weight", [D, 4 * HD], 0.1)
    t(p + "mlp.gate.weight", [E, D], 0.3)
    for e in range(E):
        for n, shape in (("gate_proj", [F, D]), ("up_proj", [F, D]), ("down_proj", [D, F])):
            t(p + f"mlp.experts.{e}.{n}.weight", shape, 0.1)
write_st(os.path.join(dst, "model.safetensors"), items)
PYEOF
mk "$Q" "$tmp/q128_blk" --format fp8 --weights block
same "Qwen3-MoE FP8 block checkpoint vs --quantization-block 128" \
  "$(ev "$Q" "$tmp/q128_blk" --quantization fp8 --quantization-block 128)"
close "128-wide Qwen3-MoE --quantization-block 128 vs bf16" "$(ev "$Q" "$Q" --quantization fp8 --quantization-block 128)" \
  0.2 0.75
if "$PY" - "$tmp/q128_blk" <<'PYEOF'; then ok; else bad "the block checkpoint's layout"; fi
import json, struct, sys
f = open(sys.argv[1] + "/model.safetensors", "rb"); h = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
e = h["model.layers.1.mlp.experts.3.down_proj.weight"], h["model.layers.1.mlp.experts.3.down_proj.weight_scale_inv"]
assert e[0]["dtype"] == "F8_E4M3" and e[0]["shape"] == [128, 128] and e[1]["shape"] == [1, 1], e
assert h["model.layers.1.mlp.gate.weight"]["dtype"] == "BF16"
PYEOF
# refused: an expert's static input_scale unlike expert 0's
rm -rf "$tmp/v"; cp -r "$tmp/qwen3_moe_routed_ts" "$tmp/v"
"$PY" - "$tmp/v/model.safetensors" <<'PYEOF'
import json, struct, sys
p = sys.argv[1]; b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
o = h["model.layers.0.mlp.experts.2.up_proj.input_scale"]["data_offsets"][0] + 8 + n
open(p, "wb").write(b[:o] + struct.pack("<f", 0.5) + b[o + 4:])
PYEOF
refused "experts' input_scales differ" "static activation scales must be one for all experts" gen "$tmp/v"
"$OCTET" generate -m tests/data/hf/gptoss_mxfp4 --quantization fp8 -p hi -n 1 >/dev/null 2>"$tmp/err"
if grep -q "stay mxfp4" "$tmp/err"; then ok; else bad "mxfp4 experts: no notice: $(cat "$tmp/err")"; fi

echo "fp8_moe: $pass passed, $fail failed"
