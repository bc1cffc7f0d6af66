#!/usr/bin/env bash
# gpu_check.sh OUTDIR [stage...] — everything octet checks and measures on the GPU machine, in
# one call. OUTDIR receives few files, so that a device call can bring them all back: summary.txt
# (the short table of every stage), one <stage>.json per stage (its raw JSON parsed, its logs'
# tails) and logs.tar.xz (every raw file; the raw folder is $GPU_CHECK_RAW, default a temporary one).
# Exits non-zero when a stage fails (a test fails, a binary does not run, a given file is missing).
# Binaries come from $OCTET_BIN (default build-cuda/; rebuilt with CUDA=1 when they do not run), carried
# shared libraries from $OCTET_LIB, the cuDNN peer from $PEER (default .peer/peer_attention.py). OCTET_BIN and
# BASE_BIN may name a bundle archive (`make CUDA=1 bundle`'s octet-bundle.tar.xz) instead of a folder: it is
# unpacked into a temporary folder, removed at the end.
#
# Default stages:
#   probe       the wgmma / mma.sync FP8 accumulation probe and a SASS count of QGMMA / HMMA
#   ops         every CUDA op and every attention kernel-table entry vs the CPU backend (test_cuda_ops; on an H100
#               it had not finished after 4.5 minutes and 2,051 checks: leave it most of a call)
#   hf          the transformers fixtures of tests/data/hf (every dense family) on CUDA vs the CPU backend,
#               bf16 and fp8 caches (and fp8 with --kv-cache-dtype-skip-layers sliding_window): KL and
#               top-1 per row, teacher-forced and on the greedy path (test_hf_cuda, whose comment
#               justifies the bounds)
#   golden      stories260K greedy tokens, CUDA vs CPU; calibrated e4m3 with K offsets, GPU vs CPU ppl
#   kld         FP8-vs-BF16 KLD on dummy:llama-3.2-1b
#   attn        decode attention (bf16, fp8, fp8_per_token_head) at B=1 L=128k, B=8 L=32k, B=8 L=8k, B=1 L=4k beside
#               cuDNN BF16
#   model       whole-model pp64 / tg64 on dummy:llama-3.1-8b, also with --batch-invariant
#   fp8prefill  FP8 prefill per accumulation mode, and fp8_per_token_head, at 4k/16k/64k (FP8PF_DIMS, default 64 128
#               256) beside cuDNN
#   needle      `eval needle --level attention` at 8k-128k
#   ttft        TTFT sweeps (auto vs fp8) on dummy:llama-3.1-8b and dummy:gemma-hd256
#   pd          perplexity by token-by-token decoding vs one chunked prefill, default and
#               --batch-invariant (where they must be identical); PD_BS=N adds N-token cache blocks
#   async       the same greedy completions from a server with and without asynchronous scheduling
# Opt-in stages:
#   compare     this build beside a second one (BASE_BIN, e.g. the previous commit's build) in one
#               call: test_cuda_ops of each, then decode attention (B=1 L=128k, B=8 L=32k), FP8
#               prefill (d128 4k/16k/64k, every:4 and single at 16k, d64 16k) and whole-model tg64 (bf16 weights, and fp8
#               weights with an fp8 cache), the builds alternating round by
#               round (COMPARE_ROUNDS, default 3); medians and new/base ratios (about 5 minutes; COMPARE_OPS=0
#               skips the ops checks)
#   itl         the single-request ITL study on dummy:llama-3.1-8b (about 2.5 minutes); ITL_SERVE_ARGS adds
#               server flags (ITL_SERVE_ARGS="--quantization fp8": the study with FP8 weights)
#   hd256       the head_dim-256 study on dummy:gemma-3-4b (8 query / 4 KV heads, 512-token windows on 5 of 6
#               layers): its attention kernels (decode, prefill, soft-capped prefill; BASE_BIN's beside where
#               given) against cuDNN at the same shape, then the single-request sweep for bf16, fp8, and fp8
#               with the window layers in bf16 (about 6 minutes)
#   load        throughput under load, LOAD_PROMPTS requests (default 24; about 5 minutes), with where the engine's
#               steps spent the time; LOAD_BUDGETS="512 2048 8192" compares fp8 servers at those token budgets instead
#   depth       decode ms/token at depths 256-16384, bf16 vs fp8 in one process (paired)
#   step        ncu kernel times of one captured decode step, summed by kernel (STEP_DEPTHS; STEP_ARGS: more
#               model flags, e.g. "--quantization fp8")
#   fp8w        FP8 weights beside bf16 on dummy:llama-3.1-8b (fp8 KV cache): pp2048, pp8192 and tg64 for bf16,
#               fp8 per-channel and fp8 128x128-block weights (about 3 minutes); FP8W_ITL=1 adds the
#               single-request ITL study with fp8 weights (about 2.5 minutes more)
#   timing      a greedy decode token split into the captured step, the logits' copy and the
#               host's share (needs a `make CUDA=1 STEP_TIMING=1` build)
#   prof        ncu sections of the decode kernel and the FP8 prefill
#   source      ncu's per-SASS stall samples of the FP8 prefill at 16k
#   big         dummy:llama-3.3-70b with fp8 weights (--quantization fp8) on one GPU, which needs about 95 GB (an
#               H200): the servers' startup reports (weights by dtype, KV capacity and concurrency at 128k) and the
#               single-request study at 1k-128k for each cache type in BIG_KV (default "fp8 auto"; each about 4
#               minutes with its server's start: one a call)
#   moe         mixture-of-experts, in parts (MOE_PARTS, default "lab models sweep sweepq load"; about 12 minutes:
#               split it over calls): lab, the grouped expert GEMM (dev/cuda/moe_bench.cu); models, whole-model
#               pp2048 / tg64 with bf16 and fp8 caches for MOE_MODELS (default dummy:qwen3-30b-a3b and
#               dummy:gpt-oss-20b); sweep, gpt-oss-20b's single-request study for bf16, fp8 and fp8 with the
#               sliding-window layers in bf16; sweepq, qwen3-30b-a3b's for bf16 and fp8; load, gpt-oss-20b under
#               load (LOAD_PROMPTS requests, default 24; 16 take about 3 minutes on an H100) for bf16 against
#               fp8 with the windows in bf16; loadq (not in the default), qwen3-30b-a3b under load, bf16 against
#               fp8 (each server start about 40 s: 16 requests take about 7 minutes). MOE_SERVE_ARGS replaces
#               the studies' and loads' serve flags (default "--kv-cache-memory 40000000000"; an 80 GB card
#               needs "--quantization fp8 --kv-cache-memory 30000000000" for qwen3-30b-a3b)
#   gemv        the decode GEMM's variants at the 8B shapes beside the copy rate (dev/cuda/gemv_bench.cu), the
#               skinny FP8 GEMM's (dev/cuda/gemv8_bench.cu), a one-token step's weight stream as a chain of
#               launches against one launch with grid barriers (dev/cuda/layer_chain.cu), and the step's
#               production FP8-weight launches chained, with one stage's work left out at a time
#               (dev/cuda/gemv8_chain.cu)
set -u
DEST=${1:?usage: scripts/gpu_check.sh OUTDIR [stage...]}
REPORT="$(cd "$(dirname "$0")" && pwd)/gpu_report.py"  # the summary lines and tables from each stage's raw output
shift
STAGES=${*:-probe ops hf golden kld attn model fp8prefill needle ttft pd async}
KNOWN=" probe ops hf golden kld attn model fp8prefill needle ttft pd async compare itl hd256 load depth step timing prof source gemv fp8w big moe "
for st in $STAGES; do
  case "$KNOWN" in *" $st "*) ;; *) echo "gpu_check: unknown stage '$st' (stages:$KNOWN)" >&2; exit 2;; esac
done
mkdir -p "$DEST" || exit 2
DEST=$(cd "$DEST" && pwd)
OUT=${GPU_CHECK_RAW:-$(mktemp -d)}  # the stages' raw files (packed into DEST at the end)
mkdir -p "$OUT" || exit 2
[ -n "${OCTET_LIB:-}" ] && export LD_LIBRARY_PATH="$OCTET_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# a file named by the caller must exist: a missing one fails the run before any stage starts
for v in PEER MODEL OCTET_BIN BASE_BIN OCTET_LIB; do
  if [ -n "${!v:-}" ] && [ ! -e "${!v}" ]; then echo "gpu_check: $v=${!v} not found" >&2; exit 2; fi
done
UNPACKED=""  # the temporary folders of unpacked bundle archives
unpack() {  # unpack VAR: a bundle archive named by $VAR becomes the folder it unpacks to
  local v=$1 d
  case "${!v:-}" in
    *.tar.xz)
      d=$(mktemp -d) || exit 2
      tar -C "$d" -xJf "${!v}" && [ -x "$d/octet" ] ||
        { rm -rf "$d"; echo "gpu_check: $v=${!v}: not a bundle archive (no octet inside)" >&2; exit 2; }
      UNPACKED="$UNPACKED $d"
      printf -v "$v" '%s' "$d";;
  esac
}
unpack OCTET_BIN
unpack BASE_BIN
BIN=${OCTET_BIN:-build-cuda}
PEER=${PEER:-.peer/peer_attention.py}
MODEL=${MODEL:-../shared/models/stories260K.gguf}
[ -f "$MODEL" ] || MODEL=.peer/stories260K.gguf
summary="$DEST/summary.txt"
pack() {  # on every exit: the raw files into DEST's per-stage JSON and logs.tar.xz
  local rc=$?
  python3 "$REPORT" pack "$OUT" "$DEST" >/dev/null || rc=1
  tar -C "$OUT" -cJf "$DEST/logs.tar.xz" . || rc=1
  [ -z "${GPU_CHECK_RAW:-}" ] && rm -rf "$OUT"
  [ -n "$UNPACKED" ] && rm -rf $UNPACKED
  exit $rc
}
trap pack EXIT
trap 'exit 143' TERM INT  # (a timeout still packs what the stages wrote)
: > "$summary"
say() { echo "$*" | tee -a "$summary"; }
FAILED=""
failed() { FAILED="$FAILED $1"; say "FAILED: $1"; }
has() { case " $STAGES " in *" $1 "*) return 0;; esac; return 1; }

nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv,noheader > "$OUT/gpu.txt" 2>&1
# (the binary names its commit; the device's copy of the tree carries no reliable git HEAD: it
# said 84e0e7f beside an edb2683 binary built from that very tree)
say "gpu: $(head -n 1 "$OUT/gpu.txt")  binary: $("$BIN/octet" --version 2>/dev/null || echo 'octet ?')  date: $(date -u +%F)"
if ! "$BIN/octet" --help >/dev/null 2>&1; then
  say "carried binary does not run ($(ldd "$BIN/octet" 2>&1 | grep 'not found' | head -3 | tr '\n' ' ')); building with CUDA=1"
  make -j16 CUDA=1 gpu-tests > "$OUT/build.log" 2>&1 || { say "build failed (see build.log)"; exit 1; }
  BIN=build-cuda
fi

if has probe; then
  "$BIN/gpu/wgmma_probe" > "$OUT/probe.jsonl" 2>&1
  say "wgmma probe: $(grep -o '"unit":"[^"]*","test":"add_onto".*first_exponent_losing_1":[-0-9]*' "$OUT/probe.jsonl" | sed 's/,"cases".*first/ first/' | tr '\n' ' ')"
  grep '"chain"' "$OUT/probe.jsonl" | tee -a "$summary"
  if command -v cuobjdump >/dev/null; then
    say "SASS of octet: $(cuobjdump -sass "$BIN/octet" 2>/dev/null | grep -c QGMMA) QGMMA, $(cuobjdump -sass "$BIN/octet" 2>/dev/null | grep -c HMMA) HMMA instructions"
  fi
fi

if has ops; then
  "$BIN/gpu/test_cuda_ops" "$OUT/ops.json" > "$OUT/ops.log" 2>&1
  say "ops vs cpu: $(tail -n 1 "$OUT/ops.log")"
  grep -qE ' 0 failed' <(tail -n 1 "$OUT/ops.log") || failed ops
  grep -E "FAIL" "$OUT/ops.log" | head -20 | tee -a "$summary"
fi

if has hf; then
  "$BIN/gpu/test_hf_cuda" "$OUT/hf.json" > "$OUT/hf.log" 2>&1
  say "hf fixtures cuda vs cpu: $(tail -n 1 "$OUT/hf.log")"
  grep -qE ' 0 failed' <(tail -n 1 "$OUT/hf.log") || failed hf
  grep -E "FAIL" "$OUT/hf.log" | head -20 | tee -a "$summary"
fi

if has golden; then
  # fp32/bf16 caches must give the CPU's tokens; fp8 is reported (the GPU quantizes bf16
  # activations, the CPU f32 ones, so rounding boundaries can differ)
  ok=0; bad=0; fp8_same=0
  for p in "Once upon a time" "The little dog" "Lily wanted to"; do
    for dt in fp32 bf16 fp8; do
      a=$("$BIN/octet" generate --model "$MODEL" --prompt "$p" --max-tokens 32 --kv-cache-dtype $dt --device cpu --json 2>>"$OUT/golden.log" | python3 -c 'import json,sys; print(json.load(sys.stdin)["tokens"])')
      b=$("$BIN/octet" generate --model "$MODEL" --prompt "$p" --max-tokens 32 --kv-cache-dtype $dt --device cuda --json 2>>"$OUT/golden.log" | python3 -c 'import json,sys; print(json.load(sys.stdin)["tokens"])')
      if [ $dt = fp8 ]; then [ -n "$a" ] && [ "$a" = "$b" ] && fp8_same=$((fp8_same+1)); continue; fi
      if [ -n "$a" ] && [ "$a" = "$b" ]; then ok=$((ok+1)); else bad=$((bad+1)); echo "golden mismatch '$p' $dt: cpu $a cuda $b" >> "$OUT/golden.log"; fi
    done
  done
  say "golden stories260K greedy cuda==cpu (fp32, bf16 caches): $ok passed, $bad failed; fp8 cache identical for $fp8_same of 3 prompts"
  [ $bad -eq 0 ] || failed golden
  # calibrated e4m3 with per-channel K offsets, end to end: the GPU's perplexity vs the CPU's
  head -c 12380 tests/data/heldout.txt > "$OUT/calib.txt"; tail -c +12381 tests/data/heldout.txt > "$OUT/eval.txt"
  "$BIN/octet" calibrate --model "$MODEL" --file "$OUT/calib.txt" --k-offset mean --output "$OUT/ko.json" >/dev/null 2>>"$OUT/golden.log"
  for d in cpu cuda; do
    "$BIN/octet" eval ppl --model "$MODEL" --device $d --file "$OUT/eval.txt" --ctx 256 --kv-cache-dtype fp8 \
      --kv-scales "$OUT/ko.json" --json > "$OUT/ko_$d.json" 2>>"$OUT/golden.log"
  done
  say "K offsets e4m3 ppl cpu vs cuda: $(python3 -c 'import json,sys; a,b=(json.load(open(f))["ppl"] for f in sys.argv[1:3]); print("%.4f vs %.4f (ratio %.4f)" % (a, b, b / a))' "$OUT/ko_cpu.json" "$OUT/ko_cuda.json" 2>&1)"
fi

if has kld; then
  for m in dummy:llama-3.2-1b; do
    "$BIN/octet" eval ppl --model $m --device cuda --file tests/data/heldout.txt --ctx 2048 --chunks 4 \
      --kv-cache-dtype fp8 --ref-kv-cache-dtype bf16 --json > "$OUT/kld.json" 2>>"$OUT/kld.log"
    say "kld $m fp8 vs bf16: $(cat "$OUT/kld.json")"
  done
fi

if has prof; then  # ncu sections of the decode kernel (bf16 vs fp8 at B=1 L=128k and L=4k) and the FP8
  # prefill at 16k: throughput, occupancy, warp stall reasons (about 1 minute; not in the default list)
  if command -v ncu >/dev/null; then
    : > "$OUT/prof.csv"
    STALLS=$(for r in long_scoreboard short_scoreboard barrier wait mio_throttle math_pipe_throttle lg_throttle \
      not_selected dispatch_stall; do
      printf 'smsp__average_warps_issue_stalled_%s_per_issue_active.ratio,' $r; done | sed 's/,$//')
    PIPES=sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active
    prof() {  # prof TAG KERNEL_REGEX octet-args... (fewer raw metrics if ncu refuses a name)
      local tag=$1 kre=$2 m; shift 2
      for m in "--metrics $STALLS,$PIPES" "--metrics $STALLS" ""; do
        ncu --clock-control none --print-units base --csv --page details -k regex:"$kre" --launch-skip 2 -c 1 \
          --section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section Occupancy \
          --section WarpStateStats --section LaunchStats $m "$BIN/octet" "$@" 2>>"$OUT/prof.log" | grep '^"' > "$OUT/prof1.csv"
        [ -s "$OUT/prof1.csv" ] && break
      done
      sed "s/^/\"$tag\",/" "$OUT/prof1.csv" >> "$OUT/prof.csv"
    }
    for dt in bf16 fp8; do
      for L in 131072 4096; do
        prof "decode $dt L=$L" 'k_decode' bench attention --device cuda --batch 1 --ctx $L --kv-cache-dtype $dt --iters 1 --reps 1
      done
    done
    prof "prefill fp8 L=16384" 'prefill_fp8' bench attention --device cuda --mode prefill --ctx 16384 --head-dim 128 \
      --kv-cache-dtype fp8 --iters 1 --reps 1
    python3 "$REPORT" prof "$OUT/prof.csv" | tee -a "$summary"
  else
    say "prof: ncu not found"
  fi
fi

if has source; then  # ncu's per-SASS-instruction stall samples of the FP8 prefill at 16k d128 (about 40 s, opt-in)
  if command -v ncu >/dev/null; then
    ncu --clock-control none -k regex:prefill_fp8 --launch-skip 2 -c 1 --section SourceCounters --section WarpStateStats \
      --page source --print-source sass --csv "$BIN/octet" bench attention --device cuda --mode prefill --ctx 16384 --head-dim 128 \
      --kv-cache-dtype fp8 --iters 1 --reps 1 > "$OUT/source.csv" 2>>"$OUT/source.log"
    python3 "$REPORT" source "$OUT/source.csv" | tee -a "$summary"
  else
    say "source: ncu not found"
  fi
fi

if has attn; then
  : > "$OUT/attn.jsonl"
  for shape in "1 131072" "8 32768" "8 8192" "1 4096"; do
    set -- $shape
    for dt in bf16 fp8 fp8_per_token_head; do
      "$BIN/octet" bench attention --device cuda --batch $1 --ctx $2 --kv-cache-dtype $dt --iters 50 --reps 7 2>>"$OUT/attn.log" | tail -n 1 >> "$OUT/attn.jsonl"
    done
    [ -f "$PEER" ] && python3 "$PEER" --mode decode --batch $1 --len $2 --json 2>>"$OUT/attn.log" | tail -n 1 >> "$OUT/attn.jsonl"
  done
  python3 "$REPORT" attn "$OUT/attn.jsonl" | tee -a "$summary"
fi
if has fp8prefill; then
  # prefill attention, causal, 32q/8kv heads: bf16 and fp8 (wgmma) per accumulation mode, cuDNN beside
  : > "$OUT/fp8prefill.jsonl"
  for d in ${FP8PF_DIMS:-64 128 256}; do  # (FP8PF_DIMS: a subset of the head dims, for a short lab call)
    for L in 4096 16384 65536; do
      it=3; [ $L = 65536 ] && it=1
      "$BIN/octet" bench attention --device cuda --mode prefill --ctx $L --head-dim $d --kv-cache-dtype bf16 --iters $it --reps 3 2>>"$OUT/attn.log" | tail -n 1 >> "$OUT/fp8prefill.jsonl"
      for acc in two-level every:4 single; do
        "$BIN/octet" bench attention --device cuda --mode prefill --ctx $L --head-dim $d --kv-cache-dtype fp8 \
          --fp8-attention-accumulation $acc --iters $it --reps 3 2>>"$OUT/attn.log" | tail -n 1 >> "$OUT/fp8prefill.jsonl"
      done
      "$BIN/octet" bench attention --device cuda --mode prefill --ctx $L --head-dim $d --kv-cache-dtype fp8_per_token_head \
        --iters $it --reps 3 2>>"$OUT/attn.log" | tail -n 1 >> "$OUT/fp8prefill.jsonl"
      [ -f "$PEER" ] && python3 "$PEER" --mode prefill --len $L --head-dim $d --json 2>>"$OUT/attn.log" | tail -n 1 >> "$OUT/fp8prefill.jsonl"
    done
  done
  python3 "$REPORT" fp8prefill "$OUT/fp8prefill.jsonl" | tee -a "$summary"
fi

if has needle; then
  "$BIN/octet" eval needle --level attention --device cuda --lengths 8192,32768,65536,131072 --heads gqa \
    --kv-cache-dtype bf16,fp8 --fp8-attention-accumulation two-level,every:4,single --json > "$OUT/needle.json" 2>>"$OUT/needle.log"
  python3 "$REPORT" needle "$OUT/needle.json" | tee -a "$summary"
fi
if has ttft; then
  for m in llama-3.1-8b gemma-hd256; do
    lens=1024,4096,8192,16384,32768; [ $m = gemma-hd256 ] && lens=1024,2048,4096,8192,16384
    "$BIN/octet" bench sweep --model dummy:$m --kv-cache-dtype auto,fp8 --input-lens $lens \
      --output-len 2 --serve-args "--kv-cache-memory 40000000000" --output-dir "$OUT/ttft_$m" --quiet > "$OUT/ttft_$m.log" 2>&1
    python3 "$REPORT" ttft "$OUT/ttft_$m/sweep.json" "$m" | tee -a "$summary"
  done
fi
if has gemv; then  # the decode GEMM's tuning variants at Llama-3.1-8B's shapes vs the copy rate (dev/cuda/gemv_bench.cu)
  "$BIN/gpu/gemv_bench" > "$OUT/gemv.log" 2>&1
  grep '^{' "$OUT/gemv.log" > "$OUT/gemv.jsonl"
  python3 "$REPORT" gemv "$OUT/gemv.jsonl" | tee -a "$summary"
  # the skinny FP8 GEMM at the same shapes (dev/cuda/gemv8_bench.cu; its table as printed)
  "$BIN/gpu/gemv8_bench" > "$OUT/gemv8.log" 2>&1 || failed gemv8
  grep '^|' "$OUT/gemv8.log" | sed 's/^/gemv8: /' | tee -a "$summary"
  "$BIN/gpu/layer_chain" > "$OUT/layer_chain.log" 2>&1 || failed layer_chain
  grep '^|' "$OUT/layer_chain.log" | sed 's/^/layer_chain: /' | tee -a "$summary"
  "$BIN/gpu/gemv8_chain" > "$OUT/gemv8_chain.log" 2>&1 || failed gemv8_chain
  grep '^|' "$OUT/gemv8_chain.log" | sed 's/^/gemv8_chain: /' | tee -a "$summary"
fi
# run_variant V CMD...: runs CMD as it is ("default") or with the octet flag V added
run_variant() {
  local v=$1; shift
  case "$v" in default) "$@" ;; *) "$@" "$v" ;; esac
}
if has model; then  # whole-model decode and prefill speed (CUDA graphs on) and the cost of --batch-invariant
  for v in default --batch-invariant; do
    run_variant "$v" "$BIN/octet" bench model --json --model dummy:llama-3.1-8b --device cuda --pp 64 --tg 64 --reps 3 \
      2>>"$OUT/model.log" | tail -n 1 | sed "s/^{/{\"variant\":\"$v\",/" >> "$OUT/model.jsonl"
  done
  python3 "$REPORT" model "$OUT/model.jsonl" | tee -a "$summary"
fi
if has depth; then  # decode at context depths, bf16 vs fp8 in one process, measured in turn (paired), with the
  # server's table width (128k): where fp8 starts to pay (the ITL study's break-even) without the server
  for v in default; do
    run_variant "$v" "$BIN/octet" bench model --json --model dummy:llama-3.1-8b --device cuda --max-model-len 131072 \
      --kv-cache-dtype auto,fp8 \
      --pp 512 --tg 32 --reps 5 --depth 256,1024,4096,16384 2>>"$OUT/depth.log" | grep '^{' \
      | sed "s/^{/{\"variant\":\"$v\",/" >> "$OUT/depth.jsonl"
  done
  python3 "$REPORT" depth "$OUT/depth.jsonl" | tee -a "$summary"
fi
if has step; then  # where a decode step's time goes: ncu kernel times of the last captured step of a short
  # run (every kernel, summed by name) at depths 256 and 4096, bf16 and fp8 (about 3 minutes, opt-in)
  if command -v ncu >/dev/null; then
    for dt in auto fp8; do
      for d in ${STEP_DEPTHS:-256 4096}; do
        ncu --clock-control none --print-units base --metrics gpu__time_duration.sum --csv "$BIN/octet" bench model \
          --model dummy:llama-3.1-8b --device cuda --max-model-len 131072 --kv-cache-dtype $dt --pp 1 --tg 3 --reps 1 \
          --depth $d ${STEP_ARGS:-} > "$OUT/step_${dt}_d$d.csv" 2>>"$OUT/step.log"
      done
    done
    python3 "$REPORT" step "$OUT"/step_*.csv | tee -a "$summary"
  else
    say "step: ncu not found"
  fi
fi
if has timing; then  # where a greedy decode token's wall time goes: the captured step on the GPU, the
  # logits' copy, and the GPU's idle time waiting for the host (a STEP_TIMING=1 build; about 15 s, opt-in)
  for dt in auto fp8; do
    "$BIN/octet" bench model --json --model dummy:llama-3.1-8b --device cuda --max-model-len 131072 \
      --kv-cache-dtype $dt --pp 64 --tg 64 --reps 3 --depth 256 2>"$OUT/timing_$dt.log" | tail -n 1 > "$OUT/timing_$dt.json"
    say "timing $dt d256: tg $(python3 -c 'import json,sys; print("%.3f ms/token" % json.load(open(sys.argv[1]))["tg_ms_per_token"])' "$OUT/timing_$dt.json" 2>&1); $(grep -o 'graph [0-9].*' "$OUT/timing_$dt.log")"
    grep -o 'host between.*' "$OUT/timing_$dt.log" | sed "s/^/timing $dt d256: /" | tee -a "$summary"
  done
fi
if has itl; then  # the seed's single-request ITL study (about 2.5 minutes)
  "$BIN/octet" bench sweep --model dummy:llama-3.1-8b --kv-cache-dtype auto,fp8 \
    --input-lens 256,1024,4096,16384,32768,65536,130944 --output-len 128 \
    --serve-args "--kv-cache-memory 40000000000${ITL_SERVE_ARGS:+ $ITL_SERVE_ARGS}" \
    --output-dir "$OUT/sweep_llama-3.1-8b" --quiet > "$OUT/itl.log" 2>&1
  python3 "$REPORT" itl "$OUT/sweep_llama-3.1-8b/sweep.json" | tee -a "$summary"
fi
if has big; then  # dummy:llama-3.3-70b, fp8 weights, on one GPU: its startup report and single-request study per cache
  for kv in ${BIG_KV:-fp8 auto}; do  # (each a server of its own, drawing 70 GB of weights; fp8 and bf16 caches of 128k)
    d="$OUT/sweep_llama-3.3-70b_$kv"
    "$BIN/octet" bench sweep --model dummy:llama-3.3-70b --kv-cache-dtype $kv --serve-args "--quantization fp8" \
      --input-lens 1024,4096,16384,32768,65536,130944 --output-len 128 --startup-timeout 400 \
      --output-dir "$d" --quiet > "$OUT/big_$kv.log" 2>&1 || failed "big [$kv]"
    grep -hE '^octet: (model|KV|kv dtype|fp8 |bf16 )' "$d"/server_*.log | sed "s/^/big [$kv] /" | tee -a "$summary"
    rm -f "$d"/*.png
  done
  python3 "$REPORT" slopes "$OUT"/sweep_llama-3.3-70b_*/sweep.json | sed 's/^/big: /' | tee -a "$summary"
fi
if has fp8w; then  # FP8 weights beside bf16: whole-model prefill and decode, each weight type its own process
  for q in "" "--quantization fp8" "--quantization fp8 --quantization-block 128"; do
    "$BIN/octet" bench model --model dummy:llama-3.1-8b --device cuda $q -p 2048,8192 -n 64 -r 2 --kv-cache-dtype fp8 \
      > "$OUT/fp8w_${#q}.md" 2>> "$OUT/fp8w.log" || failed "fp8w [$q]"
    grep -E '^\| dummy' "$OUT/fp8w_${#q}.md" | sed "s/^/fp8w weights [${q:-bf16}]: /" | tee -a "$summary"
  done
  if [ "${FP8W_ITL:-0}" = 1 ]; then
    "$BIN/octet" bench sweep --model dummy:llama-3.1-8b --kv-cache-dtype auto,fp8 \
      --input-lens 256,1024,4096,16384,32768,65536,130944 --output-len 128 \
      --serve-args "--kv-cache-memory 40000000000 --quantization fp8" \
      --output-dir "$OUT/sweep_llama-3.1-8b-fp8w" --quiet > "$OUT/fp8w_itl.log" 2>&1
    python3 "$REPORT" itl "$OUT/sweep_llama-3.1-8b-fp8w/sweep.json" | sed 's/^/fp8 weights: /' | tee -a "$summary"
  fi
fi
if has moe; then  # mixture-of-experts on the GPU (cuda_moe.cu): the lab, whole models, the studies, under load
  MP=" ${MOE_PARTS:-lab models sweep sweepq load} "
  SA=${MOE_SERVE_ARGS:---kv-cache-memory 40000000000}
  if [[ $MP == *" lab "* ]]; then
    "$BIN/gpu/moe_bench" > "$OUT/moe_bench.log" 2>&1 || failed moe_bench
    grep '^|' "$OUT/moe_bench.log" | sed 's/^/moe_bench: /' | tee -a "$summary"
  fi
  if [[ $MP == *" models "* ]]; then
    for m in ${MOE_MODELS:-qwen3-30b-a3b gpt-oss-20b}; do
      "$BIN/octet" bench model --model dummy:$m --device cuda -p 2048 -n 64 -r 2 --kv-cache-dtype auto,fp8 \
        > "$OUT/moe_$m.md" 2>> "$OUT/moe.log" || failed "moe bench model dummy:$m"
      grep -E '^\| dummy' "$OUT/moe_$m.md" | sed "s/^/moe dummy:$m: /" | tee -a "$summary"
    done
  fi
  if [[ $MP == *" sweep "* ]]; then
    "$BIN/octet" bench sweep --model dummy:gpt-oss-20b --config "--kv-cache-dtype auto" --config "--kv-cache-dtype fp8" \
      --config "--kv-cache-dtype fp8 --kv-cache-dtype-skip-layers sliding_window" \
      --input-lens 256,1024,4096,16384,32768,65536,130944 --output-len 128 --serve-args "$SA" \
      --output-dir "$OUT/sweep_gpt-oss-20b" --quiet > "$OUT/moe_sweep.log" 2>&1 || failed "moe sweep dummy:gpt-oss-20b"
    python3 "$REPORT" study "$OUT/sweep_gpt-oss-20b/sweep.json" | sed 's/^/gpt-oss-20b sweep /' | tee -a "$summary"
  fi
  if [[ $MP == *" sweepq "* ]]; then
    "$BIN/octet" bench sweep --model dummy:qwen3-30b-a3b --kv-cache-dtype auto,fp8 \
      --input-lens 256,1024,4096,16384,32768,65536,130944 --output-len 128 --serve-args "$SA" \
      --output-dir "$OUT/sweep_qwen3-30b-a3b" --quiet > "$OUT/moe_sweep_qwen3.log" 2>&1 || failed "moe sweep dummy:qwen3-30b-a3b"
    python3 "$REPORT" study "$OUT/sweep_qwen3-30b-a3b/sweep.json" | sed 's/^/qwen3-30b-a3b sweep /' | tee -a "$summary"
  fi
  # throughput under load (c = 8, 20k in / 2k out) as the MoE issue asks: bf16 against fp8 (gpt-oss-20b: with
  # the windows in bf16)
  if [[ $MP == *" load "* ]]; then
    "$BIN/octet" bench sweep --throughput --model dummy:gpt-oss-20b --config "--kv-cache-dtype auto" \
      --config "--kv-cache-dtype fp8 --kv-cache-dtype-skip-layers sliding_window" --num-prompts "${LOAD_PROMPTS:-24}" \
      --input-len 20000 --output-len 2000 --max-concurrency 8 --serve-args "$SA" \
      --output-dir "$OUT/throughput_gpt-oss-20b" --quiet > "$OUT/moe_load.log" 2>&1 || failed "moe load dummy:gpt-oss-20b"
    python3 "$REPORT" load "$OUT/throughput_gpt-oss-20b/throughput.json" | sed 's/^/gpt-oss-20b load /' | tee -a "$summary"
  fi
  if [[ $MP == *" loadq "* ]]; then
    "$BIN/octet" bench sweep --throughput --model dummy:qwen3-30b-a3b --kv-cache-dtype auto,fp8 \
      --num-prompts "${LOAD_PROMPTS:-24}" --input-len 20000 --output-len 2000 --max-concurrency 8 --serve-args "$SA" \
      --output-dir "$OUT/throughput_qwen3-30b-a3b" --quiet > "$OUT/moe_loadq.log" 2>&1 || failed "moe load dummy:qwen3-30b-a3b"
    python3 "$REPORT" load "$OUT/throughput_qwen3-30b-a3b/throughput.json" | sed 's/^/qwen3-30b-a3b load /' | tee -a "$summary"
  fi
fi
if has hd256; then  # the head_dim-256 study (gemma-3-4b's attention shape: 8 query heads, 4 KV heads)
  : > "$OUT/hd256_decode.jsonl"; : > "$OUT/hd256_prefill.jsonl"
  H256="--heads 8 --kv-heads 4 --head-dim 256"
  for shape in "1 131072" "8 32768" "1 4096"; do
    set -- $shape
    for dt in bf16 fp8; do
      for b in "$BIN" ${BASE_BIN:-}; do
        "$b/octet" bench attention --device cuda --batch $1 --ctx $2 $H256 --kv-cache-dtype $dt --iters 50 --reps 7 \
          2>>"$OUT/hd256.log" | tail -n 1 | sed "s|^{|{\"variant\":\"$([ "$b" = "$BIN" ] && echo new || echo base)\",|" \
          >> "$OUT/hd256_decode.jsonl"
      done
    done
    [ -f "$PEER" ] && python3 "$PEER" --mode decode --batch $1 --len $2 $H256 --json 2>>"$OUT/hd256.log" | tail -n 1 >> "$OUT/hd256_decode.jsonl"
  done
  python3 "$REPORT" attn "$OUT/hd256_decode.jsonl" | sed 's/^/hd256 decode /' | tee -a "$summary"
  for L in 4096 16384 65536; do
    it=3; [ $L = 65536 ] && it=1
    for dt in bf16 fp8; do
      for cap in 0 50; do
        "$BIN/octet" bench attention --device cuda --mode prefill --ctx $L $H256 --kv-cache-dtype $dt --softcap $cap \
          --iters $it --reps 3 2>>"$OUT/hd256.log" | tail -n 1 >> "$OUT/hd256_prefill.jsonl"
      done
    done
    [ -f "$PEER" ] && python3 "$PEER" --mode prefill --len $L $H256 --json 2>>"$OUT/hd256.log" | tail -n 1 >> "$OUT/hd256_prefill.jsonl"
  done
  python3 "$REPORT" fp8prefill "$OUT/hd256_prefill.jsonl" | sed 's/^/hd256 prefill /' | tee -a "$summary"
  grep -h -o '"softcap": *[0-9.]*\|"TFLOPs": *[0-9.]*\|"kv_dtype": *"[a-z0-9_]*"\|"len": *[0-9]*' "$OUT/hd256_prefill.jsonl" \
    | paste -d' ' - - - - | sed 's/^/hd256 prefill /' | tee -a "$summary"
  "$BIN/octet" bench sweep --model dummy:gemma-3-4b --config "--kv-cache-dtype auto" --config "--kv-cache-dtype fp8" \
    --config "--kv-cache-dtype fp8 --kv-cache-dtype-skip-layers sliding_window" \
    --input-lens 256,1024,4096,16384,32768,65536,130944 --output-len 128 --serve-args "--kv-cache-memory 40000000000" \
    --output-dir "$OUT/sweep_gemma-3-4b" --quiet > "$OUT/hd256_sweep.log" 2>&1
  python3 "$REPORT" study "$OUT/sweep_gemma-3-4b/sweep.json" | sed 's/^/hd256 sweep /' | tee -a "$summary"
fi
if has async; then  # asynchronous scheduling: the same greedy completions with and without it
  # (3 concurrent requests of 100-180 tokens; ASYNC_MODEL, default dummy:llama-3.1-8b; about 1 minute)
  for a in async-scheduling no-async-scheduling; do
    "$BIN/octet" serve --model "${ASYNC_MODEL:-dummy:llama-3.1-8b}" --port "${ASYNC_PORT:-18123}" --kv-cache-memory 8000000000 --max-model-len 8192 \
      --"$a" > "$OUT/serve_$a.log" 2>&1 &
    pid=$!
    python3 - "${ASYNC_PORT:-18123}" "$OUT/async_$a.json" <<'PY'  # (urllib: a system curl may not run beside the carried libraries)
import concurrent.futures, json, sys, time, urllib.request
base = f"http://127.0.0.1:{sys.argv[1]}"
for _ in range(300):
    try:
        model = json.load(urllib.request.urlopen(base + "/v1/models", timeout=2))["data"][0]["id"]; break
    except Exception:
        time.sleep(0.5)
def complete(k):
    body = json.dumps({"model": model, "prompt": ["Once upon a time", "Lily and Tom went", "The cat sat on"][k],
                       "max_tokens": 100 + 40 * k, "temperature": 0}).encode()
    req = urllib.request.Request(base + "/v1/completions", body, {"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(req, timeout=120))["choices"][0]["text"]
with concurrent.futures.ThreadPoolExecutor(3) as ex:
    texts = list(ex.map(complete, range(3)))
ahead = [l.split()[-1] for l in urllib.request.urlopen(base + "/metrics").read().decode().splitlines() if l.startswith("octet_steps_ahead_total")]
json.dump({"texts": texts, "steps_ahead": float(ahead[0]) if ahead else -1}, open(sys.argv[2], "w"))
PY
    kill $pid; wait $pid 2>/dev/null
  done
  say "$(python3 - "$OUT/async_async-scheduling.json" "$OUT/async_no-async-scheduling.json" <<'PY'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
same = sum(x == y for x, y in zip(a["texts"], b["texts"]))
print(f"async scheduling: {same} of {len(b['texts'])} completions identical without it; steps launched ahead {a['steps_ahead']:.0f} (without: {b['steps_ahead']:.0f})")
PY
)"
fi
if has load; then  # throughput under load, scaled down to LOAD_PROMPTS requests (default 24: about 5 minutes)
  # LOAD_BUDGETS="512 2048 8192": fp8 servers at those --max-num-batched-tokens instead of auto vs fp8
  cfg=(--kv-cache-dtype auto,fp8)
  [ -n "${LOAD_BUDGETS:-}" ] && cfg=() && for b in $LOAD_BUDGETS; do cfg+=(--config "--kv-cache-dtype fp8 --max-num-batched-tokens $b"); done
  "$BIN/octet" bench sweep --throughput --model dummy:llama-3.1-8b "${cfg[@]}" --num-prompts "${LOAD_PROMPTS:-24}" \
    --input-len 20000 --output-len 2000 --max-concurrency 8 --serve-args "--kv-cache-memory 40000000000" \
    --output-dir "$OUT/throughput_llama-3.1-8b" --quiet > "$OUT/load.log" 2>&1
  python3 "$REPORT" load "$OUT/throughput_llama-3.1-8b/throughput.json" | tee -a "$summary"
fi
if has pd; then  # by default and with --batch-invariant, whose two numbers must be equal
  # PD_BS=N adds both modes with N-token cache blocks (default-bsN, identity-bsN)
  for mode in default identity ${PD_BS:+default-bs$PD_BS identity-bs$PD_BS}; do
    for dt in bf16 fp8; do
      for step in 1 256; do
        "$BIN/octet" eval ppl --model dummy:llama-3.1-8b $(case $mode in identity*) echo --batch-invariant;; esac) \
          $(case $mode in *-bs*) echo --kv-block-tokens "${mode#*-bs}";; esac) \
          --device cuda --file tests/data/heldout.txt --ctx 256 --chunks 1 --kv-cache-dtype $dt --max-num-batched-tokens $step \
          --json 2>>"$OUT/pd.log" | tail -n 1 | sed "s/^{/{\"mode\":\"$mode\",\"kv\":\"$dt\",\"step\":$step,/" >> "$OUT/pd.jsonl"
      done
    done
  done
  python3 "$REPORT" pd "$OUT/pd.jsonl" | tee -a "$summary"
fi
if has compare; then  # this build (new) beside BASE_BIN (base), alternating round by round
  BASE=${BASE_BIN:?compare needs BASE_BIN, the folder of the build to compare against}
  [ -x "$BASE/octet" ] || { failed "compare: $BASE/octet not found"; BASE=""; }
fi
if has compare && [ -n "$BASE" ]; then
  : > "$OUT/compare.jsonl"
  if [ "${COMPARE_OPS:-1}" != 0 ]; then  # COMPARE_OPS=0: the timed rounds only (the ops checks take minutes)
    for b in base new; do
      d=$BIN; [ $b = base ] && d=$BASE
      "$d/gpu/test_cuda_ops" "$OUT/ops_$b.json" > "$OUT/ops_$b.log" 2>&1
      say "compare ops ($b): $(tail -n 1 "$OUT/ops_$b.log")"
      [ $b = new ] && { grep -qE ' 0 failed' <(tail -n 1 "$OUT/ops_$b.log") || failed "compare ops"; }
    done
    say "compare ops: $(python3 "$REPORT" same "$OUT/ops_base.json" "$OUT/ops_new.json" 4)"
  fi
  tag() { sed "s|^{|{\"build\":\"$1\",\"measure\":\"$2\",|"; }  # tag BUILD MEASURE < json line
  for r in $(seq 1 "${COMPARE_ROUNDS:-3}"); do
    order="base new"; [ $((r % 2)) = 0 ] && order="new base"
    for b in $order; do
      d=$BIN; [ $b = base ] && d=$BASE
      for shape in "1 131072" "8 32768"; do
        set -- $shape
        for dt in bf16 fp8; do
          "$d/octet" bench attention --device cuda --batch $1 --ctx $2 --kv-cache-dtype $dt --iters 50 --reps 7 \
            2>>"$OUT/compare.log" | tail -n 1 | tag $b "decode B=$1 L=$2 $dt" >> "$OUT/compare.jsonl"
        done
      done
      for L in 4096 16384 65536; do
        it=3; [ $L = 65536 ] && it=1
        "$d/octet" bench attention --device cuda --mode prefill --ctx $L --head-dim 128 --kv-cache-dtype fp8 \
          --iters $it --reps 3 2>>"$OUT/compare.log" | tail -n 1 | tag $b "fp8 prefill d128 L=$L" >> "$OUT/compare.jsonl"
      done
      for acc in every:4 single; do  # (the two-consumer loops; d64 two-level below)
        "$d/octet" bench attention --device cuda --mode prefill --ctx 16384 --head-dim 128 --kv-cache-dtype fp8 \
          --fp8-attention-accumulation $acc --iters 3 --reps 3 2>>"$OUT/compare.log" | tail -n 1 \
          | tag $b "fp8 prefill d128 L=16384 $acc" >> "$OUT/compare.jsonl"
      done
      "$d/octet" bench attention --device cuda --mode prefill --ctx 16384 --head-dim 64 --kv-cache-dtype fp8 \
        --iters 3 --reps 3 2>>"$OUT/compare.log" | tail -n 1 | tag $b "fp8 prefill d64 L=16384" >> "$OUT/compare.jsonl"
      # bench model prints JSON lines with --json; builds from before that flag print them after the table
      bj=$("$d/octet" bench model --help 2>&1 | grep -q -- "--json  " && echo --json)
      "$d/octet" bench model $bj --model dummy:llama-3.1-8b --device cuda --pp 64 --tg 64 --reps 3 2>>"$OUT/compare.log" \
        | tail -n 1 | tag $b "model tg64" >> "$OUT/compare.jsonl"
      "$d/octet" bench model $bj --model dummy:llama-3.1-8b --device cuda --quantization fp8 --kv-cache-dtype fp8 \
        --pp 64 --tg 64 --reps 3 2>>"$OUT/compare.log" | tail -n 1 | tag $b "model tg64 fp8 weights" >> "$OUT/compare.jsonl"
    done
  done
  python3 "$REPORT" compare "$OUT/compare.jsonl" | tee -a "$summary"
fi
say "done: $(date -u +%T)${FAILED:+; failed:$FAILED}"
[ -z "$FAILED" ]
