#!/usr/bin/env bash
# vs_llama_cpp.sh — octet's CPU backend beside llama.cpp on the same synthetic GGUF files, the engines
# interleaved (octet, llama.cpp, octet, ...) round by round so that a shared machine's load falls on both:
# llama-bench's pp (prompt) and tg (decode) tests from each engine's own llama-bench-style JSON lines, the
# machine's read bandwidth (dev/cpu/membw.c) and the load average at each round. Prints a markdown table
# (medians over rounds of each engine's mean t/s, and octet ÷ llama.cpp) and one JSON line per row.
#
#   bench/cpu/vs_llama_cpp.sh LLAMA_BENCH OUTDIR [ROUNDS=3] [TYPES="f16 q8_0 q4_k_m"] [PP=512] [TG=128] [REPS=3]
#
# LLAMA_BENCH: llama.cpp's llama-bench binary. OUTDIR receives the models (1.2B Llama shape: dim 2048,
# 16 layers, 32/8 heads, ffn 8192, vocab 32000; written by tools/make_shape_gguf.py when missing; about
# 2.2 GB in F16), every raw line (raw.jsonl) and the table (table.md). Run from the repository root after
# `make`; threads: 2 (the test machine's cores) unless THREADS is set.
set -eu
LB=${1:?usage: bench/cpu/vs_llama_cpp.sh LLAMA_BENCH OUTDIR [ROUNDS] [TYPES] [PP] [TG] [REPS]}
OUT=${2:?usage: bench/cpu/vs_llama_cpp.sh LLAMA_BENCH OUTDIR [ROUNDS] [TYPES] [PP] [TG] [REPS]}
ROUNDS=${3:-3}
TYPES=${4:-f16 q8_0 q4_k_m}
PP=${5:-512}
TG=${6:-128}
REPS=${7:-3}
T=${THREADS:-2}
[ -x "$LB" ] || { echo "vs_llama_cpp: $LB is not an executable llama-bench" >&2; exit 2; }
[ -x build/octet ] || { echo "vs_llama_cpp: build/octet missing (run make first)" >&2; exit 2; }
mkdir -p "$OUT"
# the block types' generator needs NumPy: the first python3 on PATH that has it (scripts/deps.sh installs it)
PY=
for p in $(type -ap python3); do "$p" -c 'import numpy' 2>/dev/null && { PY=$p; break; }; done
[ -n "$PY" ] || { echo "vs_llama_cpp: no python3 with numpy on PATH (scripts/deps.sh installs python3-numpy)" >&2; exit 2; }
cc -O2 -march=native -pthread dev/cpu/membw.c -o "$OUT/membw"
for ty in $TYPES; do
  f="$OUT/m12b_$ty.gguf"
  [ -f "$f" ] || "$PY" tools/make_shape_gguf.py "$f" --vocab 32000 --dim 2048 --layers 16 --heads 32 \
    --kv-heads 8 --ffn 8192 --dtype "$ty"
done
raw="$OUT/raw.jsonl"
: > "$raw"
for r in $(seq 1 "$ROUNDS"); do
  load=$(cut -d' ' -f1 /proc/loadavg)
  bw=$("$OUT/membw" 1024 "$T" 5 | grep '^{')
  echo "{\"round\": $r, \"load\": $load, \"membw\": $bw}" >> "$raw"
  for ty in $TYPES; do
    f="$OUT/m12b_$ty.gguf"
    # (each line's model file named without OUTDIR, so records hold no machine's paths)
    build/octet bench model -m "$f" -p "$PP" -n "$TG" -r "$REPS" -t "$T" -o jsonl 2>/dev/null \
      | sed "s|$OUT/||g; s/^{/{\"round\": $r, \"engine\": \"octet\", \"file_type\": \"$ty\", /" >> "$raw"
    "$LB" -m "$f" -p "$PP" -n "$TG" -r "$REPS" -t "$T" -o jsonl 2>/dev/null \
      | sed "s|$OUT/||g; s/^{/{\"round\": $r, \"engine\": \"llama.cpp\", \"file_type\": \"$ty\", /" >> "$raw"
  done
done
python3 - "$raw" "$OUT/table.md" <<'EOF'
import json, statistics, sys
rows, meta = {}, []
for line in open(sys.argv[1]):
    o = json.loads(line)
    if "membw" in o:
        meta.append(o)
        continue
    test = "pp%d" % o["n_prompt"] if o["n_prompt"] else "tg%d" % o["n_gen"]
    rows.setdefault((o["file_type"], test), {}).setdefault(o["engine"], []).append(o["avg_ts"])
out = ["| weights | test | octet t/s | llama.cpp t/s | octet ÷ llama.cpp | per round (octet / llama.cpp) |",
       "|---|---|---:|---:|---:|---|"]
js = []
for (ty, test), e in rows.items():
    a, b = e.get("octet", []), e.get("llama.cpp", [])
    ma = statistics.median(a) if a else float("nan")
    mb = statistics.median(b) if b else float("nan")
    per = ", ".join("%.2f / %.2f" % p for p in zip(a, b))
    out.append("| %s | %s | %.2f | %.2f | %.2f | %s |" % (ty, test, ma, mb, ma / mb if mb else float("nan"), per))
    js.append({"weights": ty, "test": test, "octet_ts": a, "llama_cpp_ts": b, "ratio_of_medians": ma / mb if mb else None})
out.append("")
for m in meta:
    out.append("round %d: load %.2f, membw %.1f GB/s (best) / %.1f (mean)" % (
        m["round"], m["load"], m["membw"].get("best_gbs", float("nan")), m["membw"].get("mean_gbs", float("nan"))))
text = "\n".join(out)
print(text)
open(sys.argv[2], "w").write(text + "\n")
for j in js:
    print(json.dumps(j))
EOF
