#!/usr/bin/env bash
# End-to-end checks of the measuring tools against octet's own server, loopback only:
# `bench serve` (vLLM's result block and JSON keys/values, a failing request counted, a stream
# cut before [DONE] failed, bad flags), `bench sweep` on dummy:tiny (auto vs fp8: JSON schema, "auto"
# resolved, the host and its load, progress by cost, the CPU grid's cap, fits, valid PNGs, the
# --throughput table, with the engine's steps from /metrics) and `advise` on the sweep's JSON. Servers are killed on exit.
set -u
BUILD=${BUILD:-build}
OCTET="$BUILD/octet"
MODEL=../shared/models/stories260K.gguf
. tests/lib.sh  # pass/fail counters, ok, bad
tmp=$(mktemp -d)
srv_pid=
cleanup() { [ -n "$srv_pid" ] && kill "$srv_pid" 2>/dev/null && wait "$srv_pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

# start_server MODEL: runs `octet serve --port 0` in the background, sets $url. Its stdout comes
# through a FIFO, read until the "octet: serving ... on URL" line it prints once it listens.
start_server() {
  local fifo="$tmp/srv.fifo" line fd
  rm -f "$fifo"; mkfifo "$fifo"
  "$OCTET" serve --model "$1" --port 0 --threads 2 >"$fifo" 2>"$tmp/srv.err" &
  srv_pid=$!
  url=
  exec {fd}<"$fifo"
  while IFS= read -r -t 60 -u "$fd" line; do
    if [[ $line =~ ^octet:\ serving\ .*\ on\ (http:[^ ]*)$ ]]; then url=${BASH_REMATCH[1]}; break; fi
  done
  cat <&"$fd" >/dev/null &  # the rest of its stdout, until it exits
  exec {fd}<&-
  [ -n "$url" ] && return 0
  echo "server did not start: $(cat "$tmp/srv.err")" >&2
  return 1
}

# py_check FILE EXPR...: python assertions over d = json.load(FILE)
py_check() { local f=$1; shift; python3 - "$f" "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for e in sys.argv[2:]:
    assert eval(e), e
PY
}

# ---- bench serve against stories260K
if start_server "$MODEL"; then ok; else bad "serve $MODEL"; fi
# (--tokenizer: /v1/models names the model without its path, so the client cannot find the file from it)
out=$("$OCTET" bench serve --base-url "$url" --tokenizer "$MODEL" --num-prompts 16 --max-concurrency 4 --random-input-len 64 \
      --random-output-len 16 --ignore-eos --seed 1 --save-result "$tmp/serve.json" 2>"$tmp/bs.err")
rc=$?
if [ $rc -eq 0 ]; then ok; else bad "bench serve exit $rc: $(tail -3 "$tmp/bs.err")"; fi
for line in "============ Serving Benchmark Result ============" "Successful requests:                     16" \
            "Benchmark duration (s):" "Total input tokens:                      1024" "Total generated tokens:                  256" \
            "Request throughput (req/s):" "Output token throughput (tok/s):" "---------------Time to First Token----------------" \
            "Mean TTFT (ms):" "Median TTFT (ms):" "P99 TTFT (ms):" "Mean TPOT (ms):" "P99 ITL (ms):" "Median E2EL (ms):"; do
  if grep -qF -- "$line" <<<"$out"; then ok; else bad "result block lacks '$line'"; fi
done
keys='date backend model_id num_prompts request_rate max_concurrency duration completed failed total_input_tokens
 total_output_tokens request_throughput output_throughput total_token_throughput input_lens output_lens ttfts itls errors'
for m in ttft tpot itl e2el; do for s in mean median std p99; do keys="$keys ${s}_${m}_ms"; done; done
missing=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(" ".join(k for k in sys.argv[2].split() if k not in d))' "$tmp/serve.json" "$keys" 2>&1)
if [ -z "$missing" ]; then ok; else bad "serve JSON lacks: $missing"; fi
if py_check "$tmp/serve.json" 'd["completed"] == d["num_prompts"] == 16' 'd["failed"] == 0' 'd["output_throughput"] > 0' \
   'd["total_input_tokens"] == 16 * 64' 'd["input_lens"] == [64] * 16' 'd["output_lens"] == [16] * 16' \
   'd["max_concurrency"] == 4 and d["request_rate"] == "inf"' 'all(len(x) == 15 for x in d["itls"])' \
   'all(t > 0 for t in d["ttfts"]) and d["errors"] == [""] * 16' \
   'd["median_ttft_ms"] > 0 and d["p99_e2el_ms"] >= d["median_e2el_ms"] > 0' 'd["model_id"].endswith("stories260K.gguf")'; then ok
else bad "serve JSON values"; fi

# Poisson arrivals and length ranges; requests the server rejects are counted and reported, not dropped
if "$OCTET" bench serve --base-url "$url" --tokenizer "$MODEL" --num-prompts 6 --request-rate 50 --random-input-len 40 --random-range-ratio 0.2 \
     --random-output-len 4 --save-result "$tmp/poisson.json" --disable-tqdm >/dev/null 2>&1 &&
   py_check "$tmp/poisson.json" 'd["completed"] == 6 and d["request_rate"] == 50' 'all(32 <= n <= 48 for n in d["input_lens"])'; then ok
else bad "bench serve --request-rate/--random-range-ratio"; fi
out=$("$OCTET" bench serve --base-url "$url" --model no-such-model --tokenizer "$MODEL" --num-prompts 2 --random-input-len 20 \
      --random-output-len 4 --save-result "$tmp/fail.json" --disable-tqdm 2>"$tmp/fail.err"); rc=$?
if [ $rc -eq 1 ] && grep -q "^Failed requests: *2" <<<"$out" && grep -q "request 0 failed: HTTP 404" "$tmp/fail.err" &&
   py_check "$tmp/fail.json" 'd["failed"] == 2 and d["completed"] == 0' 'all("HTTP 404" in e for e in d["errors"])' 'd["output_lens"] == [0, 0]'; then ok
else bad "failed requests not reported: $out $(cat "$tmp/fail.err")"; fi
kill "$srv_pid" 2>/dev/null; wait "$srv_pid" 2>/dev/null; srv_pid=

# a stream that closes without `data: [DONE]` is a failed request with its reason (a fake server
# that cuts every stream after two chunks)
cat >"$tmp/cut.py" <<'PY'
import http.server, json, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    def log_message(self, *a): pass
    def do_GET(self):
        b = json.dumps({"object": "list", "data": [{"id": "cut", "max_model_len": 4096}]}).encode()
        self.send_response(200); self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(b))); self.end_headers(); self.wfile.write(b)
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200); self.send_header("Content-Type", "text/event-stream"); self.end_headers()
        for t in ("a", "b"):
            ev = {"choices": [{"index": 0, "text": t, "finish_reason": None}]}
            self.wfile.write(b"data: " + json.dumps(ev).encode() + b"\n\n"); self.wfile.flush()
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
PY
coproc CUT { exec python3 "$tmp/cut.py"; }
cut_pid=$CUT_PID
read -r -t 20 cut_port <&"${CUT[0]}"
out=$("$OCTET" bench serve --base-url "http://127.0.0.1:$cut_port" --tokenizer "$MODEL" --num-prompts 2 \
      --random-input-len 8 --random-output-len 4 --save-result "$tmp/cut.json" --disable-tqdm 2>"$tmp/cut.err"); rc=$?
# a sweep against it stops at the failed warm-up: exit 1 with the reason, no tables of nan, no sweep.json
"$OCTET" bench sweep --base-url "http://127.0.0.1:$cut_port" --tokenizer "$MODEL" --input-lens 8,16 --output-len 4 \
  --output-dir "$tmp/cutsw" >"$tmp/cutsw.out" 2>"$tmp/cutsw.err"; src=$?
kill "$cut_pid" 2>/dev/null; wait "$cut_pid" 2>/dev/null
if [ $src -eq 1 ] && grep -q "\[external\] failed: the warm-up request failed: the stream ended without" "$tmp/cutsw.err" &&
   ! grep -qi "nan" "$tmp/cutsw.out" && [ ! -e "$tmp/cutsw/sweep.json" ]; then ok
else bad "sweep on a failing server: $src $(cat "$tmp/cutsw.out" "$tmp/cutsw.err")"; fi
if [ $rc -eq 1 ] && grep -q "^Failed requests: *2" <<<"$out" && grep -q "without 'data: \[DONE\]'" "$tmp/cut.err" &&
   py_check "$tmp/cut.json" 'd["failed"] == 2 and d["completed"] == 0' 'all("[DONE]" in e for e in d["errors"])'; then ok
else bad "a stream cut before [DONE] counted as a success: rc $rc $out $(cat "$tmp/cut.err")"; fi

# bad flags exit 2 naming the flag; an unreachable server exits 1
"$OCTET" bench serve --bogus 2>"$tmp/e"; rc=$?
if [ $rc -eq 2 ] && grep -q "unknown flag '--bogus'" "$tmp/e"; then ok; else bad "bench serve --bogus: $rc"; fi
"$OCTET" bench serve --random-range-ratio 1.5 2>"$tmp/e"; rc=$?
if [ $rc -eq 2 ] && grep -q -- "--random-range-ratio" "$tmp/e"; then ok; else bad "bad range ratio: $rc"; fi
"$OCTET" bench serve --base-url http://127.0.0.1:9 --num-prompts 1 2>"$tmp/e"; rc=$?
if [ $rc -eq 1 ] && grep -q "v1/models" "$tmp/e"; then ok; else bad "unreachable server: $rc $(cat "$tmp/e")"; fi
"$OCTET" bench sweep --model dummy:tiny --input-lens 32,x 2>"$tmp/e"; rc=$?
if [ $rc -eq 2 ] && grep -q -- "--input-lens: 'x'" "$tmp/e"; then ok; else bad "sweep bad --input-lens: $rc"; fi

# ---- bench sampler: every case timed, table then JSON; a bad flag is refused
"$OCTET" bench sampler --vocab 1000 --iters 2 --reps 3 >"$tmp/bs.out" 2>"$tmp/bs.err"; rc=$?
if [ $rc -eq 0 ] && grep -q "^top_p 0.95 " "$tmp/bs.out" && tail -n 1 "$tmp/bs.out" | python3 -c '
import json, sys
d = json.load(sys.stdin)
u = d["us_per_draw"]
sys.exit(0 if d["vocab"] == 1000 and len(u) == 6 and all(v > 0 for v in u.values()) else 1)'; then ok; else bad "bench sampler: $rc $(cat "$tmp/bs.out" "$tmp/bs.err")"; fi
"$OCTET" bench sampler --vocab 0 2>"$tmp/e"; rc=$?
if [ $rc -eq 2 ] && grep -q -- "--vocab" "$tmp/e"; then ok; else bad "bench sampler --vocab 0: $rc $(cat "$tmp/e")"; fi

# ---- bench sweep: dummy:tiny, auto vs fp8 (the sweep starts and stops its own servers)
sw="$tmp/sweep"
"$OCTET" bench sweep --model dummy:tiny --kv-cache-dtype auto,fp8 --input-lens 32,64,128,256 --output-len 8 \
  --serve-args "--threads 2" --output-dir "$sw" >"$tmp/sweep.out" 2>"$tmp/sweep.err"; rc=$?
if [ $rc -eq 0 ]; then ok; else bad "sweep exit $rc: $(tail -5 "$tmp/sweep.err")"; fi
if grep -q "ITL slope" "$tmp/sweep.out" && grep -q "break-even" "$tmp/sweep.out" && grep -q "^fp8 " "$tmp/sweep.out" &&
   grep -q "^Recommendation: octet serve --model dummy:tiny" "$tmp/sweep.out"; then ok; else bad "sweep table: $(cat "$tmp/sweep.out")"; fi
if py_check "$sw/sweep.json" 'd["model"] == "dummy:tiny" and d["input_lens"] == [32, 64, 128, 256] and d["output_len"] == 8' \
   '[c["name"] for c in d["configs"]] == ["auto (bf16)", "fp8"]' 'all(c["ok"] and c["failed"] == 0 and len(c["points"]) == 4 for c in d["configs"])' \
   '[c["kv_cache_dtype_resolved"] for c in d["configs"]] == ["bf16", "fp8_e4m3"]' \
   'all(c["itl_quarter_spread_pct"] is None or c["itl_quarter_spread_pct"] >= 0 for c in d["configs"])' \
   'd["host"]["cores"] >= 1 and d["host"]["octet"].startswith("octet ") and len(d["host"]["loadavg_start"]) == 3' \
   'd["host"]["busy_cores_start"] >= 0 and d["host"]["busy"] == (d["host"]["busy_cores_start"] >= d["host"]["cores"] / 2)' \
   'all(set(c["itl_fit"]) >= {"slope_ms_per_token", "slope_se_ms_per_token", "intercept_ms", "r2"} for c in d["configs"])' \
   'd["configs"][1]["vs_first"]["slope_ratio_pct_se"] > 0' \
   'all(set(c["ttft_fit"]) >= {"a", "b", "c", "r2"} for c in d["configs"])' \
   'all(p["input_len"] in (32, 64, 128, 256) and p["ttft_ms"] > 0 and p["itl_ms"] > 0 for c in d["configs"] for p in c["points"])' \
   'all(len(p["itl_quarters_ms"]) == 4 and all(v > 0 for v in p["itl_quarters_ms"]) for c in d["configs"] for p in c["points"])' \
   '"vs_first" not in d["configs"][0]' 'd["configs"][1]["vs_first"]["slope_ratio_pct"] is not None' \
   'd["configs"][1]["vs_first"]["break_even"] in ("never", "always") or float(d["configs"][1]["vs_first"]["break_even"]) > 0' \
   'd["model_info"]["head_dim"] == 32' 'd["plots"] == {"itl": "itl.png", "ttft": "ttft.png"}' 'd["advice"]["verdict"] in ("fp8", "fp8_above_break_even", "bf16")'; then ok
else bad "sweep JSON schema"; fi
# progress names the running length and weighs the ETA by cost; "auto" is resolved in the tables
if grep -q "^sweep auto (bf16) \[1/2\]: 1/4 (.*% of the work) .*, running input 64, eta [0-9]*s ([0-9]*s for all)" \
     "$tmp/sweep.err" &&
   grep -q "^sweep fp8 \[2/2\]: 4/4 (100% of the work)" "$tmp/sweep.err" && grep -q "^auto (bf16) " "$tmp/sweep.out" &&
   grep -q "^machine: [0-9]* cores, [0-9.]* in use by other work and load average" "$tmp/sweep.out"; then ok
else bad "sweep progress/labels: $(cat "$tmp/sweep.err")"; fi
# without a GPU the default grid ends at 8192 tokens (the README's main job stays near a minute)
if ! command -v nvidia-smi >/dev/null 2>&1; then
  "$OCTET" bench sweep --model dummy:tiny --kv-cache-dtype fp8 --min-input-len 16384 --serve-args "--threads 2" \
    --output-dir "$tmp/cap" >/dev/null 2>"$tmp/e"; rc=$?
  if [ $rc -ne 0 ] && grep -q "input lengths up to 8192 tokens" "$tmp/e" && grep -q "8192 is below --min-input-len 16384" "$tmp/e"; then ok
  else bad "CPU default grid: $rc $(cat "$tmp/e")"; fi
fi
for png in itl ttft; do
  if [ -s "$sw/$png.png" ] && [ "$(head -c 8 "$sw/$png.png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ]; then ok
  else bad "$png.png is not a PNG"; fi
done

# ---- advise on the sweep JSON (+ an accuracy result below 95% and a sliding-window model)
out=$("$OCTET" advise --sweep "$sw/sweep.json" --output "$tmp/advice.json" 2>"$tmp/e"); rc=$?
if [ $rc -eq 0 ] && grep -q "^Recommendation:" <<<"$out" && py_check "$tmp/advice.json" 'd["verdict"] in ("fp8", "fp8_above_break_even", "bf16")' \
   'd["break_even"] in ("never", "always", "inconclusive") or d["break_even_tokens"] > 0' 'len(d["items"]) >= 2' 'all(set(i) == {"topic", "text"} for i in d["items"])'; then ok
else bad "advise: $rc $out $(cat "$tmp/e")"; fi
echo '{"ppl": 5.0, "ref_ppl": 4.5, "kld_mean": 0.05, "top1_agree": 0.9}' >"$tmp/acc.json"
out=$("$OCTET" advise --sweep "$sw/sweep.json" --model dummy:tiny-swa --accuracy "$tmp/acc.json" --output "$tmp/adv2.json" 2>"$tmp/e"); rc=$?
if [ $rc -eq 0 ] && grep -q "calibrate first" <<<"$out" && grep -q "skip-layers sliding_window" <<<"$out" &&
   py_check "$tmp/adv2.json" 'd["calibrate_first"] is True and abs(d["recovery"] - 0.9) < 1e-9' 'd["skip_sliding_window"] is True'; then ok
else bad "advise with accuracy + sliding windows: $rc $out $(cat "$tmp/e")"; fi
"$OCTET" advise --sweep "$tmp/nope.json" 2>"$tmp/e"; rc=$?
if [ $rc -eq 1 ] && grep -q -- "--sweep" "$tmp/e"; then ok; else bad "advise missing file: $rc"; fi
"$OCTET" advise 2>"$tmp/e"; rc=$?
if [ $rc -eq 2 ] && grep -q -- "--sweep is required" "$tmp/e"; then ok; else bad "advise without --sweep: $rc"; fi

# ---- sweep --throughput: the load scenario scaled down, side by side
"$OCTET" bench sweep --model dummy:tiny --kv-cache-dtype auto,fp8 --throughput --num-prompts 8 --input-len 64 \
  --output-len 8 --max-concurrency 4 --serve-args "--threads 2" --output-dir "$sw" >"$tmp/tp.out" 2>"$tmp/tp.err"; rc=$?
if [ $rc -eq 0 ] && grep -q "median TTFT (ms)" "$tmp/tp.out" && grep -q "output tok/s" "$tmp/tp.out" && grep -qE "^fp8 .*%\)" "$tmp/tp.out" &&
   py_check "$sw/throughput.json" 'd["mode"] == "throughput" and len(d["configs"]) == 2' \
   'all(c["result"]["completed"] == 8 and c["result"]["failed"] == 0 and c["result"]["output_throughput"] > 0 for c in d["configs"])' \
   '"output_throughput_change_pct" in d["configs"][1]'; then ok
else bad "sweep --throughput: $rc $(cat "$tmp/tp.out") $(tail -3 "$tmp/tp.err")"; fi
# where the engine's time went: every output token but each request's first decoded in a step, every
# prompt token (none is cached: the prompts are random) prefilled, the rows printed
if grep -q "where the engine's time went" "$tmp/tp.out" && grep -qE "^fp8 +decode +[0-9]+ " "$tmp/tp.out" &&
   py_check "$sw/throughput.json" \
   'all(sum(v["decode_tokens"] for v in c["steps"].values()) == c["result"]["total_output_tokens"] - c["result"]["completed"] for c in d["configs"])' \
   'all(sum(v["prefill_tokens"] for v in c["steps"].values()) == c["result"]["total_input_tokens"] for c in d["configs"])' \
   'all(c["steps"]["decode"]["steps"] > 0 and c["steps"]["decode"]["forward_s"] > 0 for c in d["configs"])'; then ok
else bad "sweep --throughput steps: $(grep -A8 "time went" "$tmp/tp.out")"; fi

echo "bench: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
