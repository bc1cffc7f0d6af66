#!/usr/bin/env bash
# End-to-end tests of `octet serve` on stories260K over loopback HTTP: every endpoint,
# SSE framing, greedy output == `octet generate`, stop strings (never streamed), logprobs
# shapes, token-id prompts, identical outputs with prefix caching / chunked prefill on and
# off, every bad input → the right 4xx and an OpenAI error body, API keys, body limits,
# `promtool check metrics` with no finding, SIGTERM → exit 0 with streams ended cleanly, the load test
# (tests/server/load_test.c) and the official OpenAI npm client. Servers use --port 0
# and are killed on exit, even on failure. Prints "N passed, N failed" last.
set -u
BUILD=${BUILD:-build}
OCTET="$BUILD/octet"
MODEL=../shared/models/stories260K.gguf
. tests/server/lib.sh  # counters, $tmp, start_server, stop_server, post, get, py

# stream_start NAME JSON → posts a streamed completion in the background and returns once its
# first SSE line has arrived (the request is in the engine); curl's pid in CPID, the pid of the
# copy that writes the whole body to $tmp/NAME in KPID (wait for both)
stream_start() {
  local fifo="$tmp/$1.fifo" first="" fd
  mkfifo "$fifo"
  curl -sN -m 30 -H 'Content-Type: application/json' "$URL$C" --data-binary "$2" >"$fifo" &
  CPID=$!
  exec {fd}<"$fifo"
  IFS= read -r -t 30 -u "$fd" first
  { [ -n "$first" ] && printf '%s\n' "$first"; cat; } <&"$fd" >"$tmp/$1" &
  KPID=$!
  exec {fd}<&-
}

# wait_log FILE PATTERN: blocks (tail -f, woken by inotify) until a line of FILE matches; 60 s bound
wait_log() {
  local fd pid rc
  exec {fd}< <(exec timeout 60 tail -n +1 -f "$1")
  pid=$!
  grep -q -m1 -E -- "$2" <&"$fd"; rc=$?
  kill "$pid" 2>/dev/null; exec {fd}<&-
  return $rc
}
# sse_text → prints the concatenated text of an SSE body in $tmp/body, checks framing
sse() { python3 - "$tmp/body" "$1" <<'PY'
import json, sys
s = open(sys.argv[1], encoding="utf-8").read(); kind = sys.argv[2]
events = s.split("\n\n"); assert events[-1] == "", "stream must end with a blank line"
events = events[:-1]; assert events[-1] == "data: [DONE]", "last event must be [DONE]"
text, fin, usage = "", None, None
for ev in events[:-1]:
    assert ev.startswith("data: ") and "\n" not in ev, "bad event " + ev
    c = json.loads(ev[6:])
    assert c["object"] == ("chat.completion.chunk" if kind == "chat" else "text_completion")
    if c.get("usage"): usage = c["usage"]; assert c["choices"] == []; continue
    ch = c["choices"][0]
    text += (ch["delta"].get("content") or "") if kind == "chat" else ch["text"]
    fin = ch["finish_reason"] or fin
print(json.dumps({"text": text, "finish": fin, "usage": usage}))
PY
}

[ -x "$OCTET" ] || { echo "no $OCTET"; echo "0 passed, 1 failed"; exit 1; }
mkdir -p "$BUILD/tests"
LIBS="-ljansson -lpcre2-8 -lmicrohttpd -lm -pthread"
SANFLAGS=""; case "$BUILD" in *san*) SANFLAGS="-fsanitize=address,undefined -fno-sanitize-recover=undefined";; esac

# ---- unit checks of text_output, chat_template, openai, metrics ----
# shellcheck disable=SC2086
if cc -std=c11 -D_GNU_SOURCE -O1 -g -Wall -Wextra -Wno-unused-parameter -pthread $SANFLAGS tests/server/server_unit.c \
      "$BUILD/liboctet.a" -o "$BUILD/tests/server_unit" $LIBS 2>"$tmp/cc"; then
  u=$("$BUILD/tests/server_unit" 2>"$tmp/unit.err"); echo "$u"
  p=$(sed -nE 's/.* ([0-9]+) passed, ([0-9]+) failed/\1/p' <<<"$u"); f=$(sed -nE 's/.* ([0-9]+) passed, ([0-9]+) failed/\2/p' <<<"$u")
  pass=$((pass + ${p:-0})); fail=$((fail + ${f:-1}))
  [ "${f:-1}" = 0 ] || cat "$tmp/unit.err" >&2
else bad "server_unit build: $(cat "$tmp/cc")"; fi

start_server main --num-kv-blocks 256 --max-model-len 256 --max-body-bytes 20000 || { echo "$pass passed, $fail failed"; exit 1; }
MAIN=$SPID

# ---- endpoints ----
get /health; [ "$CODE" = 200 ] && ok || bad "health $CODE"
get /v1/models; if [ "$CODE" = 200 ] && py 'd["object"]=="list" and d["data"][0]["id"]=="stories"'; then ok; else bad "models"; fi
grep -q "max concurrency" "$tmp/main.log" && ok || bad "no memory plan in the startup log"

# greedy completion == octet generate
gen=$("$OCTET" generate --model "$MODEL" --prompt "Once upon a time" --max-tokens 24 --json 2>/dev/null)
gtext=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["text"], end="")' "$gen")
post /v1/completions '{"model":"stories","prompt":"Once upon a time","max_tokens":24,"temperature":0}'
if [ "$CODE" = 200 ] && A="$gtext" py 'd["choices"][0]["text"]==a' 'd["usage"]["completion_tokens"]==24' 'd["usage"]["prompt_tokens"]==5'; then ok; else bad "completion != generate ('$gtext')"; fi
# the model path is accepted as the model name too; default max_tokens is 16
post /v1/completions "{\"model\":\"$MODEL\",\"prompt\":\"Once upon a time\",\"temperature\":0}"
[ "$CODE" = 200 ] && py 'd["usage"]["completion_tokens"]==16' && ok || bad "model path / default max_tokens"
# token-id prompt == the same text prompt
post /v1/completions '{"prompt":[1,403,407,261,378],"max_tokens":24,"temperature":0}'
[ "$CODE" = 200 ] && A="$gtext" py 'd["choices"][0]["text"]==a' && ok || bad "token-id prompt"

# streaming completion: framing, same text, usage chunk
post /v1/completions '{"prompt":"Once upon a time","max_tokens":24,"temperature":0,"stream":true,"stream_options":{"include_usage":true}}'
s=$(sse completion) && python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["text"]==sys.argv[2] and d["finish"]=="length" and d["usage"]["completion_tokens"]==24' "$s" "$gtext" && ok || bad "stream completion: $s"

# chat, whole and streamed: same text; usage; role
post /v1/chat/completions '{"messages":[{"role":"system","content":"You tell stories."},{"role":"user","content":"Tell me about a cat."}],"max_tokens":20,"temperature":0}'
ctext=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["choices"][0]["message"]["content"], end="")' "$tmp/body" 2>/dev/null)
[ "$CODE" = 200 ] && py 'd["object"]=="chat.completion"' 'd["choices"][0]["message"]["role"]=="assistant"' 'd["usage"]["total_tokens"]==d["usage"]["prompt_tokens"]+d["usage"]["completion_tokens"]' && ok || bad "chat"
post /v1/chat/completions '{"messages":[{"role":"system","content":"You tell stories."},{"role":"user","content":[{"type":"text","text":"Tell me about a cat."}]}],"max_tokens":20,"temperature":0,"stream":true}'
s=$(sse chat) && python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["text"]==sys.argv[2] and d["usage"] is None' "$s" "$ctext" && ok || bad "stream chat != chat: $s vs '$ctext'"
head -c 200 "$tmp/body" | grep -q '"delta":{"role":"assistant","content":""}' && ok || bad "first chat chunk has no role"
# chat default max_tokens: up to the context limit (ignore_eos makes it run there)
post /v1/chat/completions '{"messages":[{"role":"user","content":"Hi"}],"temperature":0,"ignore_eos":true}'
[ "$CODE" = 200 ] && py 'd["usage"]["total_tokens"]==256' 'd["choices"][0]["finish_reason"]=="length"' && ok || bad "chat default max_tokens"

# stop strings: text ends before the stop; streamed text never contains it
post /v1/completions '{"prompt":"Once upon a time","max_tokens":24,"temperature":0,"stop":["Lily","zzz"]}'
[ "$CODE" = 200 ] && py 'd["choices"][0]["text"]==", there was a little girl named "' 'd["choices"][0]["finish_reason"]=="stop"' && ok || bad "stop"
post /v1/completions '{"prompt":"Once upon a time","max_tokens":24,"temperature":0,"stop":"girl named L","stream":true}'
s=$(sse completion) && python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["text"]==", there was a little " and d["finish"]=="stop"' "$s" && ! grep -q 'girl' "$tmp/body" && ok || bad "streamed stop: $s"
post /v1/completions '{"prompt":"Once upon a time","max_tokens":24,"temperature":0,"stop":"Lily and"}'
A="$gtext" py 'd["choices"][0]["text"]==a' && ok || bad "a stop prefix that never completes must be released"

# logprobs shapes
post /v1/completions '{"prompt":"Once upon a time","max_tokens":5,"temperature":0,"logprobs":3}'
py '(l:=d["choices"][0]["logprobs"]) and len(l["tokens"])==5 and len(l["token_logprobs"])==5 and len(l["text_offset"])==5' \
   'all(len(t)==3 and max(t.values())<=0 for t in d["choices"][0]["logprobs"]["top_logprobs"])' \
   '(l:=d["choices"][0]["logprobs"]) and "".join(l["tokens"])==d["choices"][0]["text"] and l["text_offset"][0]==0' && ok || bad "completion logprobs"
post /v1/chat/completions '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":4,"temperature":0,"logprobs":true,"top_logprobs":2}'
py '(c:=d["choices"][0]["logprobs"]["content"]) and len(c)==4 and all(set(x)=={"token","logprob","bytes","top_logprobs"} and len(x["top_logprobs"])==2 for x in c)' && ok || bad "chat logprobs"
# seeded sampling is reproducible
post /v1/completions '{"prompt":"Tom","max_tokens":16,"temperature":0.9,"top_p":0.9,"top_k":40,"min_p":0.05,"seed":11}'; cp "$tmp/body" "$tmp/s1"
post /v1/completions '{"prompt":"Tom","max_tokens":16,"temperature":0.9,"top_p":0.9,"top_k":40,"min_p":0.05,"seed":11}'
python3 -c 'import json,sys; a,b=[json.load(open(f))["choices"][0]["text"] for f in sys.argv[1:]]; assert a==b' "$tmp/s1" "$tmp/body" && ok || bad "seeded sampling"

# ---- bad input: status, error shape, param ----
expect() {  # STATUS PARAM(or -) PATH BODY
  local want=$1 param=$2 path=$3 body=$4
  post "$path" "$body"
  if [ "$CODE" = "$want" ] && A=$param py 'set(d["error"])=={"message","type","param","code"}' 'isinstance(d["error"]["message"],str) and d["error"]["message"]' \
        "a=='-' or d['error']['param']==a"; then ok; else bad "$path $body → $CODE (want $want, param $param): $(head -c 300 "$tmp/body")"; fi
}
C=/v1/completions; H=/v1/chat/completions
expect 400 - $C '{"prompt": "Once upon'
expect 400 - $C '[1,2,3]'
expect 400 - $C ''
expect 400 prompt $C '{"max_tokens":4}'
expect 400 prompt $C '{"prompt":42}'
expect 400 prompt $C '{"prompt":[1,99999]}'
expect 400 prompt $C '{"prompt":["a","b"]}'
expect 404 model $C '{"model":"gpt-4","prompt":"hi"}'
expect 400 model $C '{"model":7,"prompt":"hi"}'
expect 400 max_tokens $C '{"prompt":"hi","max_tokens":0}'
expect 400 max_tokens $C '{"prompt":"hi","max_tokens":-3}'
expect 400 max_tokens $C '{"prompt":"hi","max_tokens":"8"}'
expect 400 max_tokens $C '{"prompt":"hi","max_tokens":100000}'
expect 400 max_completion_tokens $H '{"messages":[{"role":"user","content":"hi"}],"max_completion_tokens":0}'
expect 400 temperature $C '{"prompt":"hi","temperature":-0.5}'
expect 400 temperature $C '{"prompt":"hi","temperature":"hot"}'
expect 400 top_p $C '{"prompt":"hi","top_p":0}'
expect 400 top_p $C '{"prompt":"hi","top_p":1.5}'
expect 400 min_p $C '{"prompt":"hi","min_p":2}'
expect 400 top_k $C '{"prompt":"hi","top_k":-2}'
expect 400 n $C '{"prompt":"hi","n":2,"stream":true}'
expect 400 stop $C '{"prompt":"hi","stop":["a","b","c","d","e"]}'
expect 400 stop $C '{"prompt":"hi","stop":[1]}'
expect 400 stream $C '{"prompt":"hi","stream":"yes"}'
expect 400 stream_options $C '{"prompt":"hi","stream_options":{"include_usage":true}}'
expect 400 logprobs $C '{"prompt":"hi","logprobs":21}'
expect 400 top_logprobs $H '{"messages":[{"role":"user","content":"hi"}],"top_logprobs":2}'
expect 400 messages $H '{"prompt":"hi"}'
expect 400 messages $H '{"messages":[]}'
expect 400 messages $H '{"messages":"hi"}'
expect 400 messages $H '{"messages":[{"content":"hi"}]}'
expect 400 messages $H '{"messages":[{"role":"wizard","content":"hi"}]}'
expect 400 messages $H '{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}'
long=$(python3 -c 'print(" ".join(["word"]*400))')
expect 400 prompt $C "{\"prompt\":\"$long\"}"
expect 400 messages $H "{\"messages\":[{\"role\":\"user\",\"content\":\"$long\"}]}"
# invalid UTF-8 inside a JSON string (raw bytes) and a lone surrogate escape
printf '{"prompt":"caf\xc3\x28 \xff","max_tokens":2}' >"$tmp/badutf8"
CODE=$(curl -s -m 10 -o "$tmp/body" -w '%{http_code}' -H 'Content-Type: application/json' "$URL$C" --data-binary @"$tmp/badutf8")
[ "$CODE" = 400 ] && py 'd["error"]["type"]=="invalid_request_error"' && ok || bad "invalid UTF-8 → $CODE"
expect 400 - $C '{"prompt":"\ud800","max_tokens":2}'
# oversized body (limit 20000 on this server), with and without Content-Length
python3 -c 'import json; print(json.dumps({"prompt":"x"*30000}))' >"$tmp/big"
CODE=$(curl -s -m 10 -o "$tmp/body" -w '%{http_code}' -H 'Content-Type: application/json' "$URL$C" --data-binary @"$tmp/big")
[ "$CODE" = 413 ] && py 'd["error"]["code"]=="request_too_large"' && ok || bad "oversized body → $CODE"
CODE=$(curl -s -m 10 -o "$tmp/body" -w '%{http_code}' -H 'Content-Type: application/json' -H 'Transfer-Encoding: chunked' "$URL$C" --data-binary @"$tmp/big")
[ "$CODE" = 413 ] && ok || bad "oversized chunked body → $CODE"
# routing
get /v1/nothing; [ "$CODE" = 404 ] && py 'd["error"]["code"]=="not_found"' && ok || bad "unknown path → $CODE"
get /v1/completions; [ "$CODE" = 405 ] && py 'd["error"]["code"]=="method_not_allowed"' && ok || bad "GET completions → $CODE"
curl -s -m 5 -D - -o /dev/null "$URL/v1/completions" | grep -qi '^Allow: POST' && ok || bad "405 without Allow: POST"
post /health '{}'; [ "$CODE" = 405 ] && ok || bad "POST health → $CODE"
get /health; [ "$CODE" = 200 ] && ok || bad "server unhealthy after bad input"

# ---- metrics ----
get /metrics
if [ "$CODE" = 200 ]; then
  for m in octet_num_requests_running octet_num_requests_waiting octet_kv_cache_usage_perc octet_prompt_tokens_total \
           octet_generation_tokens_total octet_time_to_first_token_seconds_bucket octet_inter_token_latency_seconds_sum \
           octet_e2e_request_latency_seconds_count octet_preemptions_total octet_prefix_cache_hits_total \
           octet_prefix_cache_queries_total octet_request_success_total octet_client_disconnects_total; do
    grep -q "^$m{.*model_name=\"stories\"" "$tmp/body" && ok || bad "metric $m missing"
  done
  if command -v promtool >/dev/null; then
    # exit 0 and not a line of output: no parse error and no lint finding (':' in a name is one)
    promtool check metrics <"$tmp/body" >"$tmp/promtool" 2>&1; prc=$?
    if [ $prc = 0 ] && ! grep -q . "$tmp/promtool"; then ok
    else bad "promtool (exit $prc): $(cat "$tmp/promtool")"; fi
  else bad "promtool not installed (Debian package prometheus)"; fi
  py 'float([l for l in s.splitlines() if l.startswith("octet_e2e_request_latency_seconds_count")][0].split()[-1]) >= 10' && ok || bad "e2e histogram count"
else bad "metrics $CODE"; fi

stop_server "$MAIN"

# ---- SIGTERM with requests in flight: a short one finishes, a long one is aborted after the
# grace period (1 s: under ASan on a busy 2-core machine 20 tokens once took more than 0.3 s);
# both streams end with [DONE]; exit 0; no longer listening ----
if start_server term --model dummy:tiny --max-model-len 8192 --num-kv-blocks 1100 --shutdown-grace-ms 1000; then
  # a non-streamed request whose client gives up is aborted: the server logs it once the engine
  # has released it, and from then on nothing is running
  curl -s -m 0.3 -o /dev/null -H 'Content-Type: application/json' "$URL$C" --data-binary '{"prompt":"Once","max_tokens":8000,"ignore_eos":true}'
  wait_log "$tmp/term.log" "request cmpl-[0-9a-f]+ aborted: " && get /metrics &&
    grep -q '^octet_num_requests_running{.*} 0$' "$tmp/body" && grep -q '^octet_client_disconnects_total{.*} 1$' "$tmp/body" &&
    ok || bad "non-streamed request not aborted when its client left: $(grep -E 'num_requests_running|disconnects' "$tmp/body")"
  body='{"prompt":"Once","max_tokens":%d,"temperature":0,"ignore_eos":true,"stream":true}'
  # (SIGTERM only once both streams have begun: their first SSE line says the server accepted them)
  stream_start term_long "$(printf "$body" 8000)"; c1=$CPID; k1=$KPID
  stream_start term_short "$(printf "$body" 20)"; c2=$CPID; k2=$KPID
  t0=$(date +%s%N)
  kill -TERM "$SPID"; wait "$SPID"; rc=$?; wait "$c1" "$c2" "$k1" "$k2"
  t1=$(( ($(date +%s%N) - t0) / 1000000 ))
  [ "$rc" = 0 ] && ok || bad "SIGTERM exit code $rc"
  [ "$t1" -lt 5000 ] && ok || bad "SIGTERM took ${t1} ms"
  grep -q '"finish_reason":"abort"' "$tmp/term_long" && tail -c 20 "$tmp/term_long" | grep -q 'data: \[DONE\]' && ok || bad "long stream at SIGTERM: $(tail -c 300 "$tmp/term_long")"
  grep -q '"finish_reason":"length"' "$tmp/term_short" && tail -c 20 "$tmp/term_short" | grep -q 'data: \[DONE\]' && ok || bad "short stream at SIGTERM: $(tail -c 300 "$tmp/term_short")"
  curl -s -m 2 "$URL/health" >/dev/null && bad "still listening after SIGTERM" || ok
fi

# ---- API key ----
start_server auth --api-key sekrit --num-kv-blocks 64 --max-model-len 1024 && {
  post /v1/models ''; get /v1/models; [ "$CODE" = 401 ] && py 'd["error"]["code"]=="invalid_api_key"' && ok || bad "no key → $CODE"
  CODE=$(curl -s -m 10 -o "$tmp/body" -w '%{http_code}' -H 'Authorization: Bearer wrong' "$URL/v1/models"); [ "$CODE" = 401 ] && ok || bad "wrong key → $CODE"
  CODE=$(curl -s -m 10 -o "$tmp/body" -w '%{http_code}' -H 'Authorization: Bearer sekrit' "$URL/v1/models"); [ "$CODE" = 200 ] && ok || bad "right key → $CODE"
  get /health; [ "$CODE" = 200 ] && ok || bad "health needs no key"
  post /tokenize '{"prompt":"hi"}'; [ "$CODE" = 401 ] && ok || bad "/tokenize without the key → $CODE"
  stop_server "$SPID"
}

# ---- identical outputs: prefix caching on/off x chunked prefill on/off ----
reqs=()
for p in "Once upon a time" "Once upon a time, there was a little dog named Max. Max liked to run in the park with his friend" \
         "Once upon a time, there was a little dog named Max. Max liked to run in the park with his ball"; do
  reqs+=("{\"prompt\":\"$p\",\"max_tokens\":40,\"temperature\":0,\"ignore_eos\":true}")
done
ref=""
for cfg in "--enable-prefix-caching --enable-chunked-prefill" "--no-enable-prefix-caching --enable-chunked-prefill" \
           "--enable-prefix-caching --no-enable-chunked-prefill" "--no-enable-prefix-caching --no-enable-chunked-prefill"; do
  # shellcheck disable=SC2086
  start_server cfg $cfg --max-num-batched-tokens 16 --num-kv-blocks 64 --max-model-len 256 || continue
  out=""
  for r in "${reqs[@]}" "${reqs[@]}"; do post /v1/completions "$r"; out+=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["choices"][0]["text"])' "$tmp/body" 2>&1); done
  get /metrics; hits=$(grep '^octet_prefix_cache_hits_total' "$tmp/body" | awk '{print $2}')
  stop_server "$SPID"
  if [ -z "$ref" ]; then ref=$out; [ "${hits:-0}" -gt 0 ] && ok || bad "prefix caching on but no hits"; 
  elif [ "$out" = "$ref" ]; then ok; else bad "outputs differ with $cfg"; fi
done

# ---- load test: 64 streaming clients on a small pool (preemption), then 100 disconnects ----
if cc -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra tests/server/load_test.c -o "$BUILD/tests/load_test" -lcurl -ljansson 2>"$tmp/cc"; then
  if start_server load --num-kv-blocks 48 --max-model-len 512 --max-num-batched-tokens 256; then
    "$BUILD/tests/load_test" --url "$URL" --model stories --clients 64 --distinct 16 --max-tokens 48 --disconnect 100 \
      --server-log "$tmp/load.log" >"$tmp/load.out" 2>"$tmp/load.err"
    lrc=$?
    cat "$tmp/load.out"
    [ "$lrc" = 0 ] && ok || bad "load test: $(tail -20 "$tmp/load.err")"
    python3 -c 'import json,sys; d=json.loads(open(sys.argv[1]).readline()); assert d["preemptions"]>0' "$tmp/load.out" && ok || bad "load test did not force preemption"
    get /health; [ "$CODE" = 200 ] && ok || bad "unhealthy after the load test"
    stop_server "$SPID"
  fi
else bad "load_test build: $(cat "$tmp/cc")"; fi

# ---- the official OpenAI client (npm package openai) ----
if command -v node >/dev/null && command -v npm >/dev/null; then
  d=tests/server/openai_client
  [ -d "$d/node_modules/openai" ] || (cd "$d" && timeout 120 npm install --no-audit --no-fund >"$tmp/npm" 2>&1) || bad "npm install: $(tail -5 "$tmp/npm")"
  if [ -d "$d/node_modules/openai" ] && start_server npm --num-kv-blocks 64 --max-model-len 1024; then
    if timeout 60 node "$d/client.mjs" "$URL/v1" stories >"$tmp/node.out" 2>&1; then ok; else bad "openai client: $(cat "$tmp/node.out")"; fi
    stop_server "$SPID"
  fi
else bad "node/npm not installed"; fi

# sanitizer or UBSan reports in any server log
if grep -l -E "AddressSanitizer|LeakSanitizer|runtime error:" "$tmp"/*.log >/dev/null 2>&1; then
  bad "sanitizer reports: $(grep -h -A5 -E "AddressSanitizer|LeakSanitizer|runtime error:" "$tmp"/*.log | head -30)"
else ok; fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
