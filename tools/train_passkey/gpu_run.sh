#!/usr/bin/env bash
# gpu_run.sh — one GPU run: RUNS trainings with the same seed, started together on the one GPU
# (the reproducibility check), then octet's CUDA build (.gpu/bin/octet, libraries in .gpu/lib)
# evaluates run 1's model on the whole grid and run 2's on a smaller one. Everything lands in OUTDIR:
#   OUTDIR/runN/{train_log.txt,loss_curve.tsv,torch_eval.json,passkey.gguf,passkey_f32.gguf,stdout.txt,train_stderr.txt}
#   OUTDIR/needle_gpu.jsonl (one JSON per octet command, with "run" and "wall_s" added),
#   OUTDIR/needle_gpu_stderr.txt, OUTDIR/summary.txt (exit codes, sha256, same-weights check), OUTDIR/smi.csv
# Usage (repo root, GPU machine): bash tools/train_passkey/gpu_run.sh OUTDIR [DEADLINE_S] [SEED] [RUNS]
# (environment: TRAIN_ARGS = extra train.py flags, OCTET = another octet binary, both for checks;
#  T128 = trials a cell at 131072 with the bf16 cache (default 10), F8 = trials a cell of the e4m3 grid
#  (default 4), ACCUM=0 skips the FP8 accumulation modes, ACCUM_LENGTHS = their lengths (default
#  65536,131072), EVAL_ONLY = a GGUF to evaluate as run 1 instead of training)
# The octet evaluations run in parallel (the model is too small to fill the GPU alone) and are
# cut by `timeout` at DEADLINE_S seconds after the start, so the script ends inside a fixed budget.
set -u
OUT=$1; DEADLINE=${2:-480}; SEED=${3:-1}; RUNS=${4:-2}
T0=$(date +%s)
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True CUBLAS_WORKSPACE_CONFIG=:4096:8
el() { echo $(( $(date +%s) - T0 )); }
S="$OUT/summary.txt"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | sed 's/^/gpu: /' | tee "$S"
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1 | tee -a "$S"
nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv -l 5 >"$OUT/smi.csv" 2>&1 &
SMI=$!

pids=()
if [ -n "${EVAL_ONLY:-}" ]; then  # no training: evaluate this model as run 1
  RUNS=0
  mkdir -p "$OUT/run1" && cp "$EVAL_ONLY" "$OUT/run1/passkey.gguf" || exit 1
fi
for r in $(seq 1 "$RUNS"); do
  mkdir -p "$OUT/run$r"
  python3 tools/train_passkey/train.py --out-dir "$OUT/run$r" --seed "$SEED" ${TRAIN_ARGS:-} \
    >"$OUT/run$r/stdout.txt" 2>"$OUT/run$r/train_stderr.txt" &
  pids+=($!)
done
for i in "${!pids[@]}"; do
  wait "${pids[$i]}"; echo "run$((i + 1)) train.py exit $? at $(el) s" | tee -a "$S"
done
kill "$SMI" 2>/dev/null
(cd "$OUT" && sha256sum run*/passkey.gguf) | tee -a "$S"
# The files record their own --out-dir, so compare the tensors, not the files.
[ "$RUNS" -ge 2 ] && python3 - "$OUT" "$RUNS" <<'EOF' 2>&1 | tee -a "$S"
import sys, numpy as np
sys.path.insert(0, "tools/train_passkey")
import ref_numpy
out, n = sys.argv[1], int(sys.argv[2])
try:
    ref = ref_numpy.load("%s/run1/passkey_f32.gguf" % out)[1]
    for r in range(2, n + 1):
        p = ref_numpy.load("%s/run%d/passkey_f32.gguf" % (out, r))[1]
        d = max(float(np.abs(ref[k] - p[k]).max()) for k in ref)
        print("run%d vs run1: %s, max |dw| = %.3e" % (r, "identical weights" if d == 0 else "weights differ", d))
except Exception as e:
    print("weight comparison failed:", e)
EOF

export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
O=${OCTET:-.gpu/bin/octet}
[ -f "$OUT/run1/passkey.gguf" ] || { echo "no model exported" | tee -a "$S"; exit 1; }
mkdir -p "$OUT/ev"
# ev NAME RUN DTYPE LENGTHS TRIALS [extra flags]: one background octet command, cut at the deadline
ev() {
  local name=$1 run=$2 dt=$3 lens=$4 trials=$5; shift 5
  local left=$(( DEADLINE - $(el) ))
  if [ "$left" -lt 15 ]; then echo "skip $name (only $left s left)" | tee -a "$S"; return; fi
  ( t=$(date +%s)
    timeout "$left" "$O" eval needle --level model --model "$OUT/run$run/passkey.gguf" --lengths "$lens" \
      --depths 0,25,50,75,100 --trials "$trials" --json --kv-cache-dtype "$dt" --max-num-batched-tokens 2048 "$@" \
      >"$OUT/ev/$name.json" 2>"$OUT/ev/$name.err"
    echo "$name exit $? in $(( $(date +%s) - t )) s" >>"$OUT/ev/$name.err"
    echo "{\"run\": $run, \"name\": \"$name\", \"wall_s\": $(( $(date +%s) - t ))}" >"$OUT/ev/$name.meta" ) &
}
echo "octet evaluations start at $(el) s" | tee -a "$S"
ev auto_short 1 auto 1024,4096,16384,32768 10
ev auto_64k 1 auto 65536 10
ev auto_128k 1 auto 131072 "${T128:-10}"
ev fp8 1 fp8 1024,4096,16384,32768,65536,131072 "${F8:-4}"
ev fp8_e5m2 1 fp8_e5m2 1024,4096,16384,32768,65536,131072 4
[ "$RUNS" -ge 2 ] && ev run2_auto 2 auto 1024,4096,16384,32768,65536,131072 2
wait
if [ "${ACCUM:-1}" = 1 ] && "$O" generate --help 2>&1 | grep -q -- --fp8-attention-accumulation; then
  ev fp8_single 1 fp8 "${ACCUM_LENGTHS:-65536,131072}" 4 --fp8-attention-accumulation single
  ev fp8_every4 1 fp8 "${ACCUM_LENGTHS:-65536,131072}" 4 --fp8-attention-accumulation every:4
  wait
fi
# one JSON per command, in a fixed order, with the run and the wall time added
for n in auto_short auto_64k auto_128k fp8 fp8_e5m2 run2_auto fp8_single fp8_every4; do
  [ -f "$OUT/ev/$n.json" ] || continue
  { echo "== $n"; cat "$OUT/ev/$n.err"; } >>"$OUT/needle_gpu_stderr.txt"
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d.update(json.load(open(sys.argv[2]))); print(json.dumps(d))' \
    "$OUT/ev/$n.json" "$OUT/ev/$n.meta" >>"$OUT/needle_gpu.jsonl" 2>>"$OUT/needle_gpu_stderr.txt"
done
# summary: mean accuracy per length and the lowest cell, per command
python3 - "$OUT/needle_gpu.jsonl" <<'EOF' 2>&1 | tee -a "$S"
import json, sys, collections
for line in open(sys.argv[1]):
    d = json.loads(line)
    by = collections.OrderedDict()
    for c in d.get("cells", []):
        by.setdefault(c["length"], []).append(c["accuracy"])
    low = min((c["accuracy"], c["length"], c["depth"]) for c in d["cells"]) if d.get("cells") else None
    print("%-11s run%s %s trials %s: %s; lowest cell %s; %s s" % (d.get("name"), d.get("run"), d.get("kv_cache_dtype"),
          d.get("trials"), " ".join("%d:%.2f" % (L, sum(v) / len(v)) for L, v in by.items()), low, d.get("wall_s")))
EOF
echo "all done at $(el) s" | tee -a "$S"
