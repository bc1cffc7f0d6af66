# fp8_lib.sh — the FP8-weight CLI tests' helpers (sourced by test_fp8_weights.sh and test_fp8_moe.sh after
# tests/lib.sh, with OCTET, PY and tmp set): writing FP8 checkpoints, perplexity/KLD against a reference
# model, and the checks on its result.
mk() { "$PY" tools/make_fp8_checkpoint.py "$@" >/dev/null || bad "make_fp8_checkpoint.py $*"; }
ev() {  # MODEL REF [flags...] -> "ppl ref_ppl kld_mean top1" on 4 chunks of 64 tokens
  local m=$1 r=$2; shift 2
  "$OCTET" eval ppl -m "$m" -f tests/data/heldout.txt -c 64 --chunks 4 --ref-model "$r" --json "$@" 2>"$tmp/err" |
    "$PY" -c 'import json,sys; j=json.load(sys.stdin); print(j["ppl"], j["ref_ppl"], j["kld_mean"], j["top1_agree"])'
}
same() {  # label "ppl ref kld top1": identical logits
  read -r p r k t <<<"$2"
  if [ -n "${t:-}" ] && [ "$p" = "$r" ] && "$PY" -c 'import sys; sys.exit(0 if float(sys.argv[1]) == 0 and float(sys.argv[2]) == 1 else 1)' "$k" "$t"; then ok; else bad "$1: not identical ($2) $(cat "$tmp/err")"; fi
}
close() {  # label "ppl ref kld top1" kld_max [top1_min]: quantized but near the original
  read -r p r k t <<<"$2"
  local tmin=${4:-0}
  if [ -n "${t:-}" ] && "$PY" -c 'import sys; k, t = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if 0 < k < float(sys.argv[3]) and t >= float(sys.argv[4]) else 1)' "$k" "$t" "$3" "$tmin"
  then ok; else bad "$1: KLD not in (0, $3) or top-1 below $tmin: ($2) $(cat "$tmp/err")"; fi
}
refused() {  # label pattern cmd...: fails, and its error matches pattern
  local label=$1 pat=$2; shift 2
  if "$@" >/dev/null 2>"$tmp/err"; then bad "$label: accepted"; return; fi
  if grep -q -- "$pat" "$tmp/err"; then ok; else bad "$label: error does not say '$pat': $(cat "$tmp/err")"; fi
}
