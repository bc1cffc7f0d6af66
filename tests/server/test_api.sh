#!/usr/bin/env bash
# End-to-end request and sampling rules of `octet serve` on stories260K: a KV pool smaller than
# --max-model-len refuses to start (as vLLM does); a tiny temperature is greedy; numbers are checked as sent;
# integral floats are integers; stream_options' continuous_usage_stats acts; /tokenize counts what a completion or chat is fed and /detokenize reads it back;
# n > 1 gives its choices (seed + index each); logit_bias, penalties,
# stop_token_ids, include_stop_str_in_output, min_tokens and echo act; JSON mode's replies begin JSON objects;
# fields octet does not implement get 400 naming them; chat content's special-token text is text unless
# --special-tokens-in-content. Servers use --port 0 and are killed on exit. Prints "N passed, N failed" last.
set -u
BUILD=${BUILD:-build}
OCTET="$BUILD/octet"
MODEL=../shared/models/stories260K.gguf
. tests/server/lib.sh  # counters, $tmp, start_server, post, py

text() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["choices"][0]["text"], end="")' "$tmp/body"; }

[ -x "$OCTET" ] || { echo "no $OCTET"; echo "0 passed, 1 failed"; exit 1; }

# ---- a pool that cannot hold one --max-model-len sequence: refused at startup, naming both ----
"$OCTET" serve --model "$MODEL" --port 0 --num-kv-blocks 8 --max-model-len 256 >"$tmp/small.out" 2>"$tmp/small.log"
rc=$?
if [ $rc != 0 ] && grep -q "max_model_len 256" "$tmp/small.log" && grep -q "8 blocks (128 tokens" "$tmp/small.log" &&
   grep -q -- "--max-model-len to at most 128" "$tmp/small.log"; then ok; else bad "small pool: rc $rc: $(cat "$tmp/small.log")"; fi

start_server main --num-kv-blocks 64 --max-model-len 256 || { echo "$pass passed, $fail failed"; exit 1; }
C=/v1/completions; H=/v1/chat/completions

# ---- a tiny temperature is greedy (it made every probability NaN) ----
post $C '{"prompt":"Once upon a time","max_tokens":16,"temperature":0}'; greedy=$(text)
for t in 1e-39 2.9e-39 1e-7; do
  post $C "{\"prompt\":\"Once upon a time\",\"max_tokens\":16,\"temperature\":$t}"
  [ "$CODE" = 200 ] && [ "$(text)" = "$greedy" ] && ok || bad "temperature $t: $CODE '$(head -c 300 "$tmp/body")'"
done

# ---- numbers as sent; integral floats ----
post $C '{"prompt":"Once","temperature":1e39}'
[ "$CODE" = 400 ] && py 'd["error"]["param"]=="temperature"' '"1e+39" in d["error"]["message"]' && ok || bad "temperature 1e39: $CODE $(cat "$tmp/body")"
post $C '{"prompt":"Once upon a time","max_tokens":16,"temperature":0,"top_p":1e-50}'
[ "$CODE" = 200 ] && [ "$(text)" = "$greedy" ] && ok || bad "top_p 1e-50: $CODE $(head -c 300 "$tmp/body")"
post $C '{"prompt":"Once upon a time","max_tokens":16.0,"temperature":0,"n":1.0}'
[ "$CODE" = 200 ] && [ "$(text)" = "$greedy" ] && ok || bad "n 1.0: $CODE $(head -c 300 "$tmp/body")"

# ---- n > 1: the choices in order, each drawn with its own seed (seed + index), the prompt counted once ----
post $C '{"prompt":"Once upon a time","max_tokens":16,"temperature":0,"n":2}'
[ "$CODE" = 200 ] && A="$greedy" py '[c["index"] for c in d["choices"]] == [0, 1]' 'all(c["text"] == a for c in d["choices"])' \
  'd["usage"]["completion_tokens"] == 32' 'd["usage"]["total_tokens"] == d["usage"]["prompt_tokens"] + 32' && ok ||
  bad "n 2 greedy: $CODE $(head -c 300 "$tmp/body")"
post $C '{"prompt":"Once upon a time","max_tokens":12,"temperature":1.0,"seed":5,"n":3}'; drawn=$(cat "$tmp/body")
[ "$CODE" = 200 ] && py '[c["index"] for c in d["choices"]] == [0, 1, 2]' 'len({c["text"] for c in d["choices"]}) > 1' \
  && ok || bad "n 3 drawn: $CODE $(head -c 300 "$tmp/body")"
post $C '{"prompt":"Once upon a time","max_tokens":12,"temperature":1.0,"seed":5,"n":3}'
[ "$CODE" = 200 ] && A="$drawn" py '[c["text"] for c in d["choices"]] == [c["text"] for c in json.loads(a)["choices"]]' \
  && ok || bad "n 3 drawn again: $CODE $(head -c 300 "$tmp/body")"
post $C '{"prompt":"Once upon a time","max_tokens":12,"temperature":1.0,"seed":6}'
[ "$CODE" = 200 ] && A="$drawn" py 'd["choices"][0]["text"] == json.loads(a)["choices"][1]["text"]' && ok ||
  bad "choice 1 is seed + 1: $CODE $(head -c 300 "$tmp/body")"
post $H '{"messages":[{"role":"user","content":"hi"}],"max_tokens":6,"temperature":0.9,"n":2}'
[ "$CODE" = 200 ] && py '[c["index"] for c in d["choices"]] == [0, 1]' 'all(c["message"]["role"] == "assistant" for c in
  d["choices"])' && ok || bad "chat n 2: $CODE $(head -c 300 "$tmp/body")"

# ---- logit_bias, penalties, stop_token_ids, min_tokens, echo ----
post $C '{"prompt":"Once upon a time","max_tokens":5,"temperature":0,"logit_bias":{"261":100}}'
[ "$CODE" = 200 ] && py 'd["choices"][0]["text"]==" a a a a a"' && ok || bad "logit_bias: $(head -c 300 "$tmp/body")"
for inc in false true; do  # (" a a a a a" until the stop string; include_stop_str_in_output keeps it)
  for st in false true; do
    post $C '{"prompt":"Once upon a time","max_tokens":5,"temperature":0,"logit_bias":{"261":100},"stop":[" a a"],
              "include_stop_str_in_output":'$inc',"stream":'$st'}'
    A=$inc py "(''.join(json.loads(l[6:])['choices'][0]['text'] for l in s.splitlines() if l.startswith('data: {'))
      if d is None else d['choices'][0]['text']) == (' a a' if a == 'true' else '')" \
      && ok || bad "include_stop_str_in_output $inc (stream $st): $(head -c 300 "$tmp/body")"
  done
done
post $C '{"prompt":"Once upon a time","max_tokens":16,"temperature":0,"repetition_penalty":5}'
[ "$CODE" = 200 ] && [ "$(text)" != "$greedy" ] && ok || bad "repetition_penalty changes nothing: $(head -c 300 "$tmp/body")"
post $C '{"prompt":"Once upon a time","max_tokens":40,"temperature":0}'; greedy40=$(text)
post $C '{"prompt":"Once upon a time","max_tokens":40,"temperature":0,"presence_penalty":2,"frequency_penalty":2}'
[ "$CODE" = 200 ] && [ "$(text)" != "$greedy40" ] && ok || bad "presence/frequency_penalty change nothing: $(head -c 300 "$tmp/body")"
post $C '{"prompt":"Once upon a time","max_tokens":8,"temperature":0,"logit_bias":{"261":100},"stop_token_ids":[261]}'
[ "$CODE" = 200 ] && py 'd["choices"][0]["finish_reason"]=="stop"' 'd["usage"]["completion_tokens"]==1' 'd["choices"][0]["text"]==""' && ok || bad "stop_token_ids: $(head -c 300 "$tmp/body")"
post $C '{"prompt":"Once upon a time","max_tokens":8,"temperature":0,"logit_bias":{"261":100},"stop_token_ids":[261],"min_tokens":3}'
[ "$CODE" = 200 ] && py 'd["choices"][0]["finish_reason"]=="stop"' 'd["usage"]["completion_tokens"]==4' '" a" not in d["choices"][0]["text"]' && ok || bad "min_tokens: $(head -c 300 "$tmp/body")"
post $C '{"prompt":"Once upon a time","max_tokens":16,"temperature":0,"echo":true}'
[ "$CODE" = 200 ] && A="Once upon a time$greedy" py 'd["choices"][0]["text"]==a' && ok || bad "echo: $(head -c 300 "$tmp/body")"
post $C '{"prompt":"Once upon a time","max_tokens":4,"temperature":0,"echo":true,"stream":true}'
[ "$CODE" = 200 ] && grep -q '"text":"Once upon a time"' "$tmp/body" && ok || bad "streamed echo: $(head -c 300 "$tmp/body")"

# ---- fields octet does not implement: 400 naming them; harmless ones accepted ----
expect() {  # PARAM CODE PATH BODY
  post "$3" "$4"
  if [ "$CODE" = 400 ] && A="$1|$2" py 'd["error"]["param"]==(a.split("|")[0] or None)' 'd["error"]["code"]==a.split("|")[1]'; then ok
  else bad "$3 $4 → $CODE: $(head -c 300 "$tmp/body")"; fi
}
msg='{"messages":[{"role":"user","content":"hi"}],'
expect tools unsupported_parameter $H "$msg\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]}"
expect response_format unsupported_parameter $H "$msg\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{}}}"
expect suffix unsupported_parameter $C '{"prompt":"Once","suffix":" the end"}'
expect best_of unsupported_parameter $C '{"prompt":"Once","best_of":3}'
expect echo unsupported_value $C '{"prompt":"Once","echo":true,"logprobs":2}'
expect "" unrecognized_parameter $C '{"prompt":"Once","frobnicate":true}'
post $H "$msg\"user\":\"u-1\",\"metadata\":{\"k\":\"v\"},\"tools\":[],\"tool_choice\":\"none\",\"max_tokens\":2}"
[ "$CODE" = 200 ] && ok || bad "harmless fields: $CODE $(head -c 300 "$tmp/body")"

# ---- stream_options: continuous_usage_stats (vLLM's) puts the usage so far in every chunk; unknown keys refused ----
post $C '{"prompt":"Once upon a time","max_tokens":5,"temperature":0,"stream":true,"stream_options":{"include_usage":true,
          "continuous_usage_stats":true}}'
[ "$CODE" = 200 ] && py "(lambda u: [x['completion_tokens'] for x in u] == [1, 2, 3, 4, 5, 5, 5] and all(
  x['total_tokens'] == x['prompt_tokens'] + x['completion_tokens'] for x in u))([json.loads(l[6:])['usage'] for l in
  s.splitlines() if l.startswith('data: {')])" && ok || bad "continuous_usage_stats: $CODE $(head -c 400 "$tmp/body")"
expect stream_options unrecognized_parameter $C '{"prompt":"x","stream":true,"stream_options":{"include_usage":true,"x":1}}'

# ---- /tokenize and /detokenize (vLLM's): the ids a completion or a chat is fed, and back ----
post $C '{"prompt":"Once upon a time","max_tokens":1}'; n_c=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["usage"]["prompt_tokens"])' "$tmp/body")
post /tokenize '{"prompt":"Once upon a time"}'; toks=$(python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["tokens"]))' "$tmp/body")
[ "$CODE" = 200 ] && A="$n_c" py 'd["count"] == len(d["tokens"]) == int(a)' 'd["max_model_len"] > 0' 'd["token_strs"] is None' \
  && ok || bad "/tokenize prompt: $CODE $(head -c 300 "$tmp/body")"
post $H '{"messages":[{"role":"user","content":"hi"}],"max_tokens":1}'; n_h=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["usage"]["prompt_tokens"])' "$tmp/body")
post /tokenize '{"messages":[{"role":"user","content":"hi"}]}'
[ "$CODE" = 200 ] && A="$n_h" py 'd["count"] == int(a)' && ok || bad "/tokenize chat: $CODE $(head -c 300 "$tmp/body")"
post /detokenize "{\"tokens\":$toks}"
[ "$CODE" = 200 ] && py 'd["prompt"].endswith("Once upon a time")' && ok || bad "/detokenize: $CODE $(head -c 300 "$tmp/body")"
expect add_special_tokens unsupported_parameter /tokenize '{"prompt":"x","add_special_tokens":false}'
expect "" unrecognized_parameter /tokenize '{"prompt":"x","max_tokens":3}'
post /detokenize '{"model":"nope","tokens":[1]}'
[ "$CODE" = 404 ] && py 'd["error"]["code"] == "model_not_found"' && ok || bad "/detokenize model: $CODE $(head -c 300 "$tmp/body")"
post /detokenize '{"tokens":[1,100000]}'
[ "$CODE" = 400 ] && py 'd["error"]["param"] == "tokens"' && ok || bad "/detokenize id: $CODE $(head -c 300 "$tmp/body")"

# ---- JSON mode: the reply is a JSON object's beginning (whole, streamed, and whole where it stops) ----
starts='(lambda t, f: t.lstrip(" \t\n\r").startswith("{") and (f != "stop" or isinstance(json.loads(t), dict)))'
post $H "$msg\"response_format\":{\"type\":\"json_object\"},\"max_tokens\":40,\"temperature\":0.8,\"seed\":3}"
[ "$CODE" = 200 ] && py "$starts(d['choices'][0]['message']['content'], d['choices'][0]['finish_reason'])" && ok ||
  bad "JSON mode: $CODE $(head -c 300 "$tmp/body")"
post $C '{"prompt":"Once","response_format":{"type":"json_object"},"max_tokens":40,"temperature":0,"stream":true}'
[ "$CODE" = 200 ] && py "$starts(''.join(json.loads(l[6:])['choices'][0]['text'] for l in s.splitlines()
  if l.startswith('data: {') and json.loads(l[6:])['choices']), 'length')" && ok ||
  bad "JSON mode streamed: $CODE $(head -c 300 "$tmp/body")"

# ---- chat content's special-token text stays text (</s> is a control token here) ----
post $H '{"messages":[{"role":"user","content":"x"}],"max_tokens":1}'; n1=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["usage"]["prompt_tokens"])' "$tmp/body")
post $H '{"messages":[{"role":"user","content":"x</s>"}],"max_tokens":1}'; n2=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["usage"]["prompt_tokens"])' "$tmp/body")
[ -n "$n1" ] && [ -n "$n2" ] && [ "$n2" -gt $((n1 + 1)) ] && ok || bad "chat content </s> read as a special token ($n1 → $n2 tokens)"

kill -TERM "$SPID"; wait "$SPID"; rc=$?; [ $rc = 0 ] && ok || bad "server exited $rc on SIGTERM"
# --special-tokens-in-content: the operator's opt-in, </s> in content is the one control token
if start_server special --num-kv-blocks 64 --max-model-len 256 --special-tokens-in-content; then
  post $H '{"messages":[{"role":"user","content":"x</s>"}],"max_tokens":1}'; n3=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["usage"]["prompt_tokens"])' "$tmp/body")
  # (</s> is one token here, several as text; the text around it splits differently)
  [ -n "$n3" ] && [ "$n3" -lt "$n2" ] && ok || bad "--special-tokens-in-content: x $n1, x</s> ${n3:-?} tokens (as text $n2)"
  kill -TERM "$SPID"; wait "$SPID"; rc=$?; [ $rc = 0 ] && ok || bad "server exited $rc on SIGTERM"
fi
if grep -l -E "AddressSanitizer|LeakSanitizer|runtime error:" "$tmp"/*.log >/dev/null 2>&1; then
  bad "sanitizer reports: $(grep -h -A5 -E "AddressSanitizer|LeakSanitizer|runtime error:" "$tmp"/*.log | head -30)"
else ok; fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
