#!/usr/bin/env bash
# End-to-end: `octet serve` of replies that reason first. A gpt-oss checkpoint in transformers' newer layout
# (the random-weight tests/data/hf/gptoss model with tests/data/tok_harmony's vocabulary and
# chat_template.jinja) speaks harmony: the startup report names it, chat answers carry reasoning_content
# beside content (whole and streamed), reasoning_effort is taken and checked; a gpt-oss shape whose
# vocabulary lacks harmony's tokens (dummy:tiny-gpt-oss) chats in ChatML, and a checkpoint whose own
# template is harmony without them is refused at startup. A Qwen3 checkpoint (tests/data/hf/qwen3's weights,
# tests/data/tok_qwen3's vocabulary) takes chat_template_kwargs.enable_thinking, and --reasoning-parser
# qwen3 adds reasoning_content; the flag is refused for harmony, for a vocabulary without </think> and for
# an unknown parser. The same servers run vLLM's tool flags (--enable-auto-tool-choice --tool-call-parser
# hermes for Qwen3, openai for gpt-oss): a request with tools and a history of calls and results renders and
# answers; the flags are refused apart, for an unknown parser and for the other family's parser; without them, a
# tool_choice naming a function answers with its arguments, and "required" with calls, whole and streamed alike.
# Prints
# "N passed, N failed" last.
set -u
BUILD=${BUILD:-build}
OCTET="$BUILD/octet"
. tests/server/lib.sh

ck() { mkdir -p "$1"; cp tests/data/hf/gptoss/config.json tests/data/hf/gptoss/model.safetensors "$1/"; }
ck "$tmp/oss"
cp tests/data/tok_harmony/tokenizer.json tests/data/tok_harmony/tokenizer_config.json \
   tests/data/tok_harmony/chat_template.jinja "$tmp/oss/"

MODEL="$tmp/oss"
C=/v1/chat/completions
if start_server harmony --max-model-len 1024 --enable-auto-tool-choice --tool-call-parser openai; then
  grep -q "chat template: harmony; tool calls: openai" "$tmp/harmony.log" && ok ||
    bad "startup report: $(grep 'chat template' "$tmp/harmony.log")"
  post $C '{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"hi"}],"max_tokens":12,
            "temperature":0,"reasoning_effort":"high"}'
  [ "$CODE" = 200 ] && py "isinstance(d['choices'][0]['message']['content'], str)" \
    "isinstance(d['choices'][0]['message']['reasoning_content'], str)" \
    "d['usage']['completion_tokens'] >= 1" && ok || bad "harmony chat: $CODE $(head -c 300 "$tmp/body")"
  post $C '{"messages":[{"role":"user","content":"hi"}],"max_tokens":12,"temperature":0,"stream":true}'
  [ "$CODE" = 200 ] && py "s.rstrip().endswith('data: [DONE]')" \
    "all(set(json.loads(l[6:])['choices'][0]['delta']) <= {'role','content','reasoning_content'} for l in s.splitlines() if l.startswith('data: {'))" \
    && ok || bad "harmony stream: $CODE $(head -c 300 "$tmp/body")"
  post $C '{"messages":[{"role":"user","content":"hi"}],"reasoning_effort":"extreme"}'
  [ "$CODE" = 400 ] && py "d['error']['param'] == 'reasoning_effort'" && ok || bad "bad effort: $CODE"
  # a system message after the conversation began is not harmony
  post $C '{"messages":[{"role":"user","content":"hi"},{"role":"system","content":"x"}]}'
  [ "$CODE" = 400 ] && py "'messages[1]' in d['error']['message']" && ok || bad "late system: $CODE $(head -c 300 "$tmp/body")"
  # tools, a call and its result in gpt-oss's format; a tool the template cannot render is refused
  tools='"tools":[{"type":"function","function":{"name":"weather","description":"Weather.","parameters":{"type":
         "object","properties":{"city":{"type":"string"}},"required":["city"]}}}]'
  post $C '{"messages":[{"role":"user","content":"Oslo?"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1",
            "type":"function","function":{"name":"weather","arguments":"{\"city\": \"Oslo\"}"}}]},{"role":"tool",
            "tool_call_id":"c1","content":"-3 C"}],"max_tokens":4,"temperature":0,'"$tools"'}'
  [ "$CODE" = 200 ] && py "d['choices'][0]['finish_reason'] in ('stop', 'length', 'tool_calls')" \
    "d['usage']['prompt_tokens'] > 100" && ok || bad "harmony tool loop: $CODE $(head -c 300 "$tmp/body")"
  post $C '{"messages":[{"role":"user","content":"Oslo?"}],"tools":[{"type":"function","function":{"name":"w"}}]}'
  [ "$CODE" = 400 ] && py "'tools[0].function.description' in d['error']['message']" && ok ||
    bad "tool without description: $CODE $(head -c 300 "$tmp/body")"
  stop_server "$SPID"
fi

# the same weights with a byte vocabulary and no template: gptoss's family would be harmony, which needs
# tokens this vocabulary lacks, so chat falls back to ChatML and says so; reasoning_effort is then refused
MODEL=dummy:tiny-gpt-oss
if start_server bytes --max-model-len 512; then
  grep -q "chat template: chatml (the model has none, and the gptoss family's, harmony" "$tmp/bytes.log" && ok \
    || bad "fallback report: $(grep 'chat template' "$tmp/bytes.log")"
  post $C '{"messages":[{"role":"user","content":"hi"}],"max_tokens":4,"reasoning_effort":"low"}'
  [ "$CODE" = 400 ] && py "d['error']['param'] == 'reasoning_effort'" "'chatml' in d['error']['message']" && ok \
    || bad "chatml effort: $CODE"
  stop_server "$SPID"
fi

# a checkpoint whose own template is harmony, with a vocabulary that lacks its tokens: refused, naming one
ck "$tmp/broken"
cp tests/data/tok_bpe/tokenizer.json "$tmp/broken/"
printf '{"add_bos_token": false}\n' > "$tmp/broken/tokenizer_config.json"
cp tests/data/tok_harmony/chat_template.jinja "$tmp/broken/"
out=$("$OCTET" serve --model "$tmp/broken" --port 0 2>&1 >/dev/null); rc=$?
[ $rc -ne 0 ] && grep -q "harmony chat format needs the token <|" <<<"$out" && ok || bad "broken checkpoint: rc $rc: $out"

# Qwen3
mkdir -p "$tmp/q3"
cp tests/data/hf/qwen3/config.json tests/data/hf/qwen3/model.safetensors tests/data/tok_qwen3/* "$tmp/q3/"
MODEL="$tmp/q3"
if start_server qwen3 --max-model-len 1024 --reasoning-parser qwen3 --enable-auto-tool-choice --tool-call-parser hermes
then
  grep -q "chat template: qwen3; tool calls: hermes" "$tmp/qwen3.log" && ok ||
    bad "qwen3 report: $(grep 'chat template' "$tmp/qwen3.log")"
  tools='"tools":[{"type":"function","function":{"name":"weather","parameters":{"type":"object"}}}]'
  post $C '{"messages":[{"role":"user","content":"Oslo?"}],"max_tokens":4,'"$tools"'}'
  n_tools=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['usage']['prompt_tokens'])" "$tmp/body")
  post $C '{"messages":[{"role":"user","content":"Oslo?"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1",
            "type":"function","function":{"name":"weather","arguments":"{\"city\": \"Oslo\"}"}}]},{"role":"tool",
            "tool_call_id":"c1","content":"-3 C"}],"max_tokens":4,"stream":true,'"$tools"'}'
  [ "$CODE" = 200 ] && grep -q '"finish_reason":"' "$tmp/body" && ok || bad "qwen3 tool loop: $CODE $(head -c 300 "$tmp/body")"
  post $C '{"messages":[{"role":"user","content":"Oslo?"}],"max_tokens":4}'
  [ "$CODE" = 200 ] && [ -n "$n_tools" ] && A="$n_tools" py "d['usage']['prompt_tokens'] + 40 < int(a)" && ok ||
    bad "tools in the prompt: $n_tools tokens, $(head -c 200 "$tmp/body") without"
  # constrained replies begin after the <think> block, which is free ("<think>" 295 and "</think>" 296 pushed, so
  # the block opens and closes at once; "}" 125 pushed less)
  post $C '{"messages":[{"role":"user","content":"Oslo?"}],"tool_choice":"required","parallel_tool_calls":false,
            "logit_bias":{"295":40,"296":50,"125":30},"max_tokens":120,"temperature":0,"logprobs":true,'"$tools"'}'
  [ "$CODE" = 200 ] && py "d['choices'][0]['finish_reason'] == 'tool_calls'" \
    "[t['token'] for t in d['choices'][0]['logprobs']['content'][:2]] == ['<think>', '</think>']" "[(c['function']['name'],
    json.loads(c['function']['arguments'])) for c in d['choices'][0]['message']['tool_calls']] == [('weather', {})]" \
    && ok || bad "tool_choice required beside --reasoning-parser: $CODE $(head -c 300 "$tmp/body")"
  post $C '{"messages":[{"role":"user","content":"Oslo?"}],"response_format":{"type":"json_object"},
            "logit_bias":{"295":40,"296":50,"125":30},"max_tokens":120,"temperature":0,"logprobs":true}'
  [ "$CODE" = 200 ] && py "d['choices'][0]['finish_reason'] == 'stop'" \
    "[t['token'] for t in d['choices'][0]['logprobs']['content'][:2]] == ['<think>', '</think>']" \
    "(json.loads(d['choices'][0]['message']['content'])
    == {})" "'<think>' not in d['choices'][0]['message']['content']" && ok ||
    bad "JSON mode beside --reasoning-parser: $CODE $(head -c 300 "$tmp/body")"
  post $C '{"messages":[{"role":"user","content":"hi"}],"max_tokens":8,"chat_template_kwargs":{"enable_thinking":false}}'
  [ "$CODE" = 200 ] && py "'reasoning_content' in d['choices'][0]['message']" \
    "d['usage']['prompt_tokens'] > 10" && ok || bad "qwen3 chat: $CODE $(head -c 300 "$tmp/body")"
  post $C '{"messages":[{"role":"user","content":"hi"}],"chat_template_kwargs":{"enable_thinking":1}}'
  [ "$CODE" = 400 ] && ok || bad "qwen3 kwargs type: $CODE"
  stop_server "$SPID"
fi
# the same checkpoint without flags: a tool_choice naming a function makes the reply its arguments (JSON mode),
# one call, whole and streamed (the streamed deltas join to the whole reply's arguments)
if start_server qwen3plain --max-model-len 1024; then
  named='{"messages":[{"role":"user","content":"Oslo?"}],"tools":[{"type":"function","function":{"name":"weather"}}],
          "tool_choice":{"type":"function","function":{"name":"weather"}},"max_tokens":24,"temperature":0'
  post $C "$named}"
  whole=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"])' "$tmp/body" 2>/dev/null)
  [ "$CODE" = 200 ] && py "d['choices'][0]['message']['content'] is None" \
    "[c['function']['name'] for c in d['choices'][0]['message']['tool_calls']] == ['weather']" \
    "d['choices'][0]['message']['tool_calls'][0]['function']['arguments'].startswith('{')" \
    "d['choices'][0]['finish_reason'] != 'stop' or isinstance(json.loads(d['choices'][0]['message']['tool_calls'][0]['function']['arguments']), dict)" \
    && ok || bad "named tool_choice: $CODE $(head -c 300 "$tmp/body")"
  post $C "$named,\"stream\":true}"
  [ "$CODE" = 200 ] && [ -n "$whole" ] && A="$whole" py "''.join(t['function'].get('arguments', '') for l in
    s.splitlines() if l.startswith('data: {') for c in json.loads(l[6:])['choices']
    for t in c['delta'].get('tool_calls', [])) == a" && ok || bad "named tool_choice streamed: $CODE $(head -c 300 "$tmp/body")"
  # "required": the reply is calls in the hermes format, here one (parallel_tool_calls false) whose arguments
  # "}" (id 125, pushed) ends as soon as the grammar lets it
  req='{"messages":[{"role":"user","content":"Oslo?"}],"tools":[{"type":"function","function":{"name":"weather"}}],
        "tool_choice":"required","parallel_tool_calls":false,"logit_bias":{"125":30},"max_tokens":160,"temperature":0'
  post $C "$req}"
  calls=$(python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["choices"][0]["message"]
print(json.dumps([(c["function"]["name"], c["function"]["arguments"]) for c in m.get("tool_calls") or []]))' "$tmp/body" 2>/dev/null)
  [ "$CODE" = 200 ] && py "d['choices'][0]['finish_reason'] == 'tool_calls'" "d['choices'][0]['message']['content'] is None" \
    "[(c['function']['name'], json.loads(c['function']['arguments'])) for c in
      d['choices'][0]['message']['tool_calls']] == [('weather', {})]" && ok || bad "tool_choice required: $CODE $(head -c 300 "$tmp/body")"
  post $C "$req,\"stream\":true}"
  joined=$(python3 -c 'import json,sys
calls = {}
for l in open(sys.argv[1]):
    for c in json.loads(l[6:])["choices"] if l.startswith("data: {") else []:
        for x in c["delta"].get("tool_calls", []):
            d = calls.setdefault(x["index"], ["", ""])
            d[0] = x["function"].get("name", d[0])
            d[1] += x["function"].get("arguments", "")
print(json.dumps([calls[i] for i in sorted(calls)]))' "$tmp/body" 2>/dev/null)
  [ "$CODE" = 200 ] && [ -n "$calls" ] && [ "$joined" = "$calls" ] && ok ||
    bad "tool_choice required streamed: $CODE, joined $joined, whole $calls"
  stop_server "$SPID"
fi
ck "$tmp/plain"  # (a ChatML-like template, no think tags)
cp tests/data/tok_bpe/tokenizer.json tests/data/tok_bpe/tokenizer_config.json "$tmp/plain/"
for bad_flag in "$tmp/oss qwen3 split by their channels" "$tmp/plain qwen3 no </think> token" \
                "$tmp/q3 granite one of qwen3, deepseek_r1"; do
  read -r mdl parser want <<<"$bad_flag"
  out=$("$OCTET" serve --model "$mdl" --port 0 --reasoning-parser "$parser" 2>&1 >/dev/null); rc=$?
  [ $rc -ne 0 ] && grep -q -- "$want" <<<"$out" && ok || bad "--reasoning-parser $parser on $mdl: rc $rc: $out"
done

for flags in "--enable-auto-tool-choice|$tmp/q3|together" "--tool-call-parser hermes|$tmp/q3|together" \
             "--enable-auto-tool-choice --tool-call-parser pythonic|$tmp/q3|octet parses hermes" \
             "--enable-auto-tool-choice --tool-call-parser hermes|$tmp/oss|(harmony) has gpt-oss's calls" \
             "--enable-auto-tool-choice --tool-call-parser openai|$tmp/q3|(qwen3) has the hermes tool format" \
             "--enable-auto-tool-choice --tool-call-parser openai|$tmp/plain|(chatml) has the hermes"; do
  IFS='|' read -r f mdl want <<<"$flags"
  out=$("$OCTET" serve --model "$mdl" --port 0 $f 2>&1 >/dev/null); rc=$?
  [ $rc -ne 0 ] && grep -qF -- "$want" <<<"$out" && ok || bad "serve $f on $mdl: rc $rc: $out"
done

echo "reasoning_serve: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
