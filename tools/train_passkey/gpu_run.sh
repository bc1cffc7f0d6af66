#!/usr/bin/env bash
# gpu_run.sh — one GPU session: train + export the passkey model, then evaluate it with the
# CUDA build of octet (.gpu/bin/octet, libraries in .gpu/lib). Everything lands in OUTDIR.
# Usage (repo root, GPU machine): bash tools/train_passkey/gpu_run.sh OUTDIR [DEADLINE_S] [SEED]
# The octet evaluations are ordered by priority and skipped once DEADLINE_S (seconds since
# start) would be passed, so the whole script ends inside a fixed device budget.
set -u
OUT=$1; DEADLINE=${2:-300}; SEED=${3:-1}
T0=$(date +%s)
export PYTHONUNBUFFERED=1 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | sed 's/^/gpu: /' >"$OUT/needle_gpu_stderr.txt"

python3 tools/train_passkey/train.py --out-dir "$OUT" --seed "$SEED" 2>"$OUT/train_stderr.txt"
echo "train.py exit $? at $(el) s" | tee -a "$OUT/train_log.txt"

export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
O=.gpu/bin/octet
[ -f "$OUT/passkey.gguf" ] || { echo "no model exported"; exit 1; }
# eval DTYPE LENGTHS TRIALS EST_S: runs when EST_S more seconds still fit before the deadline
ev() {
  local left=$(( DEADLINE - $(el) ))
  if [ "$left" -lt "$4" ]; then echo "skip $1 $2 (only $left s left)" | tee -a "$OUT/needle_gpu_stderr.txt"; return; fi
  echo "== $1 $2 trials $3 at $(el) s" >>"$OUT/needle_gpu_stderr.txt"
  timeout "$left" "$O" eval needle --level model --model "$OUT/passkey.gguf" --lengths "$2" --depths 0,25,50,75,100 \
    --trials "$3" --json --kv-cache-dtype "$1" --max-num-batched-tokens 2048 >>"$OUT/needle_gpu.jsonl" 2>>"$OUT/needle_gpu_stderr.txt"
  echo "== exit $? at $(el) s" >>"$OUT/needle_gpu_stderr.txt"
}
ev auto 1024,4096,16384,32768 4 20
ev fp8 1024,4096,16384,32768 4 20
ev fp8_e5m2 1024,4096,16384,32768 4 20
ev auto 65536,131072 2 25
ev fp8 65536,131072 2 25
ev fp8_e5m2 65536,131072 2 25
echo "all done at $(el) s" | tee -a "$OUT/needle_gpu_stderr.txt"
