#!/usr/bin/env bash
# weights_load_ab.sh — decode speed with the model file mapped (--weights-load mmap) against read into
# 2 MiB-page memory (--weights-load read), interleaved pair by pair (mmap, read, mmap, read ...) so that a
# shared machine's load falls on both. Each run is one `octet bench model` process (-p 0 -n TG -r REPS, after
# its warm-up). Prints a markdown table (per pair, and the medians) and one JSON line per mode.
#
#   bench/cpu/weights_load_ab.sh MODEL [PAIRS=5] [TG=32] [REPS=1]
#
# Run from the repository root after `make`; threads: 2 unless THREADS is set.
set -eu
M=${1:?usage: bench/cpu/weights_load_ab.sh MODEL [PAIRS] [TG] [REPS]}
PAIRS=${2:-5}
TG=${3:-32}
REPS=${4:-1}
T=${THREADS:-2}
[ -x build/octet ] || { echo "weights_load_ab: build/octet missing (run make first)" >&2; exit 2; }
raw=$(mktemp)
trap 'rm -f "$raw"' EXIT
for p in $(seq 1 "$PAIRS"); do
  for mode in mmap read; do
    load=$(cut -d' ' -f1 /proc/loadavg)
    build/octet bench model -m "$M" -p 0 -n "$TG" -r "$REPS" -t "$T" --device cpu --weights-load "$mode" \
        -o jsonl 2>/dev/null | sed "s/^{/{\"pair\": $p, \"mode\": \"$mode\", \"load\": $load, /" >> "$raw"
  done
done
python3 - "$raw" "$M" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
by = {"mmap": [], "read": []}
print("| pair | load (1 min) | mmap tok/s | read tok/s | read ÷ mmap |")
print("|---:|---:|---:|---:|---:|")
pairs = sorted({r["pair"] for r in rows})
for p in pairs:
    m = [r for r in rows if r["pair"] == p and r["mode"] == "mmap"][0]
    d = [r for r in rows if r["pair"] == p and r["mode"] == "read"][0]
    by["mmap"].append(m["avg_ts"]); by["read"].append(d["avg_ts"])
    print("| %d | %.2f | %.2f | %.2f | %.3f |" % (p, m["load"], m["avg_ts"], d["avg_ts"], d["avg_ts"] / m["avg_ts"]))
mm, md = statistics.median(by["mmap"]), statistics.median(by["read"])
ratios = [d / m for m, d in zip(by["mmap"], by["read"])]
print("| median | | %.2f | %.2f | %.3f |" % (mm, md, statistics.median(ratios)))
for mode in ("mmap", "read"):
    print(json.dumps({"model": sys.argv[2].rsplit("/", 1)[-1], "mode": mode, "tg": rows[0]["n_gen"],
                      "tok_s": by[mode], "median_tok_s": statistics.median(by[mode]),
                      "use_mmap": [r["use_mmap"] for r in rows if r["mode"] == mode][0]}))
EOF
