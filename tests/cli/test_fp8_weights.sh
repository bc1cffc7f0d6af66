#!/usr/bin/env bash
# FP8 weights end to end on the transformers fixtures (tests/data/hf): FP8 checkpoints in both Hugging
# Face layouts, written by tools/make_fp8_checkpoint.py into a temporary directory, load and give
# exactly the logits of `--quantization fp8` of the BF16 original where the schemes coincide (per-channel,
# 128x128 blocks; fused Phi-3 projections too); per-tensor and static-activation checkpoints load and stay
# close to the original; --quantization-skip-layers and --fp8-gate-dtype e5m2 act; every scheme octet does
# not implement, and every inconsistent checkpoint, is refused with an error naming it.
set -u
BUILD=${BUILD:-build}
OCTET="$BUILD/octet"
PY=/usr/bin/python3
. tests/lib.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
L=tests/data/hf/llama3_rope

. tests/cli/fp8_lib.sh

# checkpoints equal to octet's own quantization of the original, bit for bit
for src in llama3_rope phi3 qwen3; do
  S=tests/data/hf/$src
  mk "$S" "$tmp/${src}_ct_ch" --format compressed-tensors --weights channel
  same "$src compressed-tensors channel vs --quantization fp8" "$(ev "$S" "$tmp/${src}_ct_ch" --quantization fp8)"
done
mk $L "$tmp/fp8_blk" --format fp8 --weights block
same "fp8 128x128 blocks vs --quantization-block 128" "$(ev $L "$tmp/fp8_blk" --quantization fp8 --quantization-block 128)"
mk $L "$tmp/ct_blk" --format compressed-tensors --weights block
same "compressed-tensors blocks vs fp8 blocks" "$(ev "$tmp/ct_blk" "$tmp/fp8_blk")"
# the scale of the original's quantization error, then the schemes with no --quantization twin
close "--quantization fp8 vs original" "$(ev $L $L --quantization fp8)" 0.2
mk $L "$tmp/fp8_t" --format fp8 --weights tensor
close "fp8 per-tensor" "$(ev "$tmp/fp8_t" $L)" 0.2
mk $L "$tmp/fp8_ts" --format fp8 --weights tensor --activations static
close "fp8 per-tensor, static activations" "$(ev "$tmp/fp8_ts" $L)" 0.5
mk $L "$tmp/ct_ts" --format compressed-tensors --weights tensor --activations static
same "compressed-tensors static == fp8 static" "$(ev "$tmp/ct_ts" "$tmp/fp8_ts")"
mk $L "$tmp/ct_chs" --format compressed-tensors --weights channel --activations static
close "compressed-tensors channel, static activations" "$(ev "$tmp/ct_chs" $L)" 0.5
# an ignored module stays BF16: the lm_head-ignored checkpoint equals --quantization-skip-layers lm_head
mk $L "$tmp/ct_nohead" --format compressed-tensors --weights channel --ignore lm_head
same "ignore lm_head vs --quantization-skip-layers lm_head" \
  "$(ev $L "$tmp/ct_nohead" --quantization fp8 --quantization-skip-layers lm_head)"
same "every layer and lm_head skipped == the original" "$(ev $L $L --quantization fp8 --quantization-skip-layers 0,1,lm_head)"
close "gate e5m2 differs from gate e4m3" "$(ev "$tmp/llama3_rope_ct_ch" "$tmp/llama3_rope_ct_ch" --fp8-gate-dtype e5m2)" 0.2
"$OCTET" generate -m $L --quantization fp8 -p "hi" -n 2 >/dev/null 2>"$tmp/err"
if grep -q "weights by dtype: .*fp8_e4m3" "$tmp/err"; then ok; else bad "no weights-by-dtype line: $(cat "$tmp/err")"; fi

# refusals: schemes octet does not implement, inconsistent checkpoints, bad flags
edit() {  # DIR PYTHON-STATEMENT on the config dict c
  "$PY" - "$1/config.json" "$2" <<'PYEOF'
import json, sys
p, stmt = sys.argv[1], sys.argv[2]
c = json.load(open(p)); q = c["quantization_config"]
exec(stmt)
json.dump(c, open(p, "w"))
PYEOF
}
variant() { rm -rf "$tmp/v"; cp -r "$1" "$tmp/v"; edit "$tmp/v" "$2"; }
gen() { "$OCTET" generate -m "$@" -p hi -n 1; }
variant "$tmp/fp8_t" 'q["quant_method"] = "awq"'
refused "quant_method awq" "quant_method 'awq' is not supported" gen "$tmp/v"
variant "$tmp/fp8_t" 'q["weight_block_size"] = [64, 64]'
refused "64x64 blocks" "weight_block_size is not supported" gen "$tmp/v"
variant "$tmp/fp8_t" 'q["activation_scheme"] = "per_group"'
refused "activation_scheme" "activation_scheme 'per_group'" gen "$tmp/v"
variant "$tmp/ct_blk" 'q["format"] = "pack-quantized"'
refused "compressed-tensors pack-quantized" "format 'pack-quantized'" gen "$tmp/v"
variant "$tmp/llama3_rope_ct_ch" 'q["config_groups"]["group_0"]["weights"]["strategy"] = "group"'
refused "weights strategy group" "strategy 'group'" gen "$tmp/v"
variant "$tmp/llama3_rope_ct_ch" 'q["config_groups"]["group_0"]["input_activations"] = None'
refused "weight-only fp8" "without input_activations" gen "$tmp/v"
variant "$tmp/llama3_rope_ct_ch" 'q["config_groups"]["group_0"]["input_activations"]["strategy"] = "tensor"'
refused "dynamic per-tensor activations" "strategy 'tensor' with dynamic true" gen "$tmp/v"
variant "$tmp/llama3_rope_ct_ch" 'q["config_groups"]["group_0"]["weights"]["type"] = "int"'
refused "int weights" "of type 'int'" gen "$tmp/v"
variant "$tmp/fp8_ts" 'q["activation_scheme"] = "dynamic"'
refused "input_scale beside dynamic activations" "input_scale' is not used" gen "$tmp/v"
variant "$tmp/fp8_t" 'q["activation_scheme"] = "static"'
refused "static without input_scale" "static activation scales, but '.*' has no '.*input_scale'" gen "$tmp/v"
variant "$tmp/llama3_rope_ct_ch" 'q["ignore"] = ["re:.*mlp\\.down_proj$"]'
refused "ignored module stored in fp8" "mlp.down_proj' is in quantization_config's ignore list" gen "$tmp/v"
mk $L "$tmp/ct_nodown" --format compressed-tensors --weights channel --ignore mlp.down_proj
variant "$tmp/ct_nodown" 'q["ignore"] = []'
refused "bf16 module not ignored" "down_proj' is bf16, but quantization_config quantizes it" gen "$tmp/v"
variant "$tmp/fp8_t" 'del c["quantization_config"]'
refused "fp8 tensors without quantization_config" "has no quantization_config" gen "$tmp/v"
mk tests/data/hf/phi3 "$tmp/phi3_blk" --format fp8 --weights block
refused "fused projections in blocks" "cannot split 128x128 block scales" gen "$tmp/phi3_blk"
refused "--quantization int8" "--quantization int8: not supported" gen $L --quantization int8
refused "skip a layer the model lacks" "layer 5, but" gen $L --quantization fp8 --quantization-skip-layers 5
refused "skip without --quantization" "applies to --quantization fp8" gen $L --quantization-skip-layers 0
refused "e5m2 gate without fp8" "has no fp8 gate projections" gen $L --fp8-gate-dtype e5m2
refused "block 64" "0 (per output channel) or 128" gen $L --quantization fp8 --quantization-block 64
refused "inspect ignores no flag" "not taken by octet inspect" "$OCTET" inspect -m $L --quantization fp8
# bench sweep checks the FP8 flags of the servers it will start: a good set passes (the run stops at the next,
# unknown flag), a bad one is refused up front
refused "sweep --serve-args fp8" "unknown flag '--not-a-flag'" "$OCTET" bench sweep -m $L \
  --serve-args "--quantization fp8 --quantization-block 128 --fp8-gate-dtype e5m2" --not-a-flag
refused "sweep --serve-args fp9" "--quantization fp9: not supported" "$OCTET" bench sweep -m $L --serve-args "--quantization fp9"

echo "fp8_weights: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
