#!/usr/bin/env bash
# Pass-key retrieval on octet's own trained model (models/passkey.gguf, trained by
# tools/train_passkey/): the embedded byte-level tokenizer (BOS + one token per byte), a
# greedy answer through `generate`, and `eval needle --level model` at 1k, 2k and 4k tokens with
# fp32 and fp8 (e4m3) KV caches on the CPU. The model retrieved every key in these cells when
# it was trained (bench/accuracy/RESULTS.md), so every cell must stay at accuracy 1.0.
# Bounded: about 40 s on 2 cores.
set -u
BUILD=${BUILD:-build}
OCTET="$BUILD/octet"
MODEL=models/passkey.gguf
. tests/lib.sh  # pass/fail counters, ok, bad
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

if [ ! -f "$MODEL" ]; then
  bad "$MODEL is missing"
  echo "passkey: $pass passed, $fail failed"; exit 1
fi

# tokenizer: BOS (256) then one token per byte; a short pass-key prompt answered greedily
prompt="There is an important info hidden inside a lot of irrelevant text. Find it and memorize it. I will quiz you about the important information there. The grass is green. The pass key is 60412. Remember it. 60412 is the pass key. The sky is blue. What is the pass key? The pass key is"
out=$("$OCTET" generate --model "$MODEL" --prompt "$prompt" --max-tokens 8 --kv-cache-dtype fp32 --threads 2 --json 2>"$tmp/err")
if python3 -c '
import json, sys
d = json.loads(sys.argv[1]); p = sys.argv[2].encode()
assert d["prompt_tokens"] == [256] + list(p), "prompt tokens are not BOS + bytes"
assert "60412" in d["text"], d["text"]' "$out" "$prompt"; then ok; else bad "generate: $out $(cat "$tmp/err")"; fi

# eval needle: every cell (1k, 2k, 4k tokens x depth 0/50/100 x 2 keys) retrieved, fp32 and fp8
for dt in fp32 fp8; do
  js=$("$OCTET" eval needle --level model --model "$MODEL" --lengths 1024,2048,4096 --depths 0,50,100 --trials 2 \
       --json --kv-cache-dtype "$dt" --threads 2 2>"$tmp/err_$dt")
  if python3 -c '
import json, sys
d = json.loads(sys.argv[1])
cells = d["cells"]
assert len(cells) == 9, len(cells)
assert d["device"] == "cpu" and d["fp8_attention_accumulation"] == "two-level", (d["device"], d["fp8_attention_accumulation"])
assert sorted({c["prompt_tokens"] for c in cells}) == [1020, 2044, 4092], "prompt lengths changed"
low = [(c["length"], c["depth"], c["accuracy"]) for c in cells if c["accuracy"] < 1.0]
assert not low, "cells below 1.0: %s" % low' "$js"; then ok; else bad "eval needle $dt: $js $(tail -n 8 "$tmp/err_$dt")"; fi
done

echo "passkey: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
