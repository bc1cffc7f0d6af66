#!/usr/bin/env python3
"""harmony_tool_fixtures.py — tests/data/harmony_tools.json: gpt-oss prompts with tools, tool calls and tool
results as its own chat template renders them, for test_harmony_tools to compare octet's harmony renderer with.

The template is gpt-oss's chat_template.jinja (Hugging Face's openai/gpt-oss-20b and -120b ship the same
one; llama.cpp keeps a copy as models/templates/openai-gpt-oss-120b.jinja). It is not in the repository:
pass its path. The environment is the one transformers' apply_chat_template renders in (a sandboxed Jinja
environment with trim_blocks and lstrip_blocks, loop controls, a tojson filter that is json.dumps with
ensure_ascii=False and no key sorting, raise_exception and strftime_now), and the messages are what vLLM
hands a template: a null content as "", an assistant message's tool_calls with their arguments parsed from
JSON text into objects; an assistant message's reasoning_content is passed as the template's "thinking". The template these fixtures were made with has sha256 52f245ae1d6b2714…d66e4b
(16,717 characters).

Each case: "name"; "request", the OpenAI chat body's messages, tools and reasoning_effort (arguments as the
JSON text a client sends); "date", the template's strftime_now("%Y-%m-%d"); "prompt", the rendered text, or
"error" where the template refuses (raise_exception, or a missing field it concatenates).
Usage (from the repo root): python3 tools/ref/harmony_tool_fixtures.py TEMPLATE.jinja [OUT.json]
Needs jinja2 (Debian's python3-jinja2).
"""
import json
import sys

import jinja2
import jinja2.ext
import jinja2.sandbox

DATE = "2026-12-06"

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Gets the current weather in a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "The city, e.g. Paris"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"}},
        "required": ["city"]}}}
NO_PARAMS = {"type": "function", "function": {"name": "get_location", "description": "Gets the user's location."}}
EMPTY_PARAMS = {"type": "function", "function": {
    "name": "ping", "description": "Checks the service.", "parameters": {"type": "object", "properties": {}}}}
KITCHEN = {"type": "function", "function": {
    "name": "kitchen_sink", "description": "Every parameter type.\nSecond line of the description.",
    "parameters": {"type": "object", "properties": {
        "count": {"type": "integer", "description": "How many", "default": 3},
        "ratio": {"type": "number", "default": 0.1},
        "big": {"type": "number", "default": 1e20},
        "small": {"type": "number", "default": 2.5e-05},
        "whole": {"type": "number", "default": 2.0},
        "flag": {"type": "boolean", "default": False},
        "label": {"type": "string", "default": "a \"quoted\" label"},
        "maybe": {"type": "string", "nullable": True},
        "tags": {"type": "array", "items": {"type": "string"}},
        "ints": {"type": "array", "items": {"type": "integer"}, "nullable": True},
        "flags": {"type": "array", "items": {"type": "boolean"}},
        "grid": {"type": "array", "items": {"type": "array", "items": {"type": "number"}}},
        "modes": {"type": "array", "items": {"type": "string", "enum": ["r", "w"]}},
        "anything": {"type": "array"},
        "untyped": {"type": "array", "items": {"description": "no type"}},
        "points": {"type": "array", "items": {"type": "object", "properties": {
            "x": {"type": "number"}, "y": {"type": "number"}}, "required": ["x", "y"]}},
        "pairs": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"}}}},
        "blobs": {"type": "array", "items": {"type": "object"}},
        "either": {"type": ["string", "null"]},
        "single": {"type": ["integer"]},
        "objs": {"type": "array", "items": {"type": ["object", "object"]}},
        "choice": {"description": "One or the other", "oneOf": [
            {"type": "string", "description": "a name"}, {"type": "number", "default": 7}], "default": "x"},
        "plain_choice": {"oneOf": [{"type": "string"}, {"type": "boolean"}]},
        "obj_choice": {"oneOf": [{"type": "object"}, {"type": "string"}]},
        "where": {"type": "object", "description": "A place", "properties": {
            "lat": {"type": "number"}, "name": {"type": "string", "enum": ["home", "work"]},
            "tags": {"type": "array", "items": {"type": "string"}}}, "required": ["lat"]},
        "free": {"type": "object"},
        "what": {"description": "no type at all"},
        "level": {"type": "string", "enum": ["lo", "hi"], "default": "lo", "description": "Level\nof detail"}},
        "required": ["count", "tags", "where"]}}}

def call(name, args, cid="call_1"):
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args,
                                                                                           ensure_ascii=False)}}

U = {"role": "user", "content": "What is the weather in Paris?"}
SYS = {"role": "system", "content": "Answer in one sentence."}
CALL = {"role": "assistant", "content": None, "tool_calls": [call("get_weather", {"city": "Paris"})]}
RESULT = {"role": "tool", "tool_call_id": "call_1", "content": "{\"temperature\": 21, \"sky\": \"clear\"}"}

CASES = [
    ("no_tools", [SYS, {"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"},
                  {"role": "user", "content": "3+3?"}], None, "low"),
    ("tools_and_system", [SYS, U], [WEATHER], None),
    ("tools_without_system", [U], [WEATHER, NO_PARAMS], "high"),
    ("tool_kinds", [U], [NO_PARAMS, EMPTY_PARAMS, KITCHEN], None),
    ("call_and_result", [SYS, U, CALL, RESULT], [WEATHER], None),
    ("call_with_preamble", [U, {"role": "assistant", "content": "Let me look that up.",
                                "tool_calls": [call("get_weather", {"city": "Paris", "unit": "celsius"})]},
                            RESULT], [WEATHER], "low"),
    ("preamble_dropped_after_final", [U, {"role": "assistant", "content": "Checking.", "tool_calls": [
        call("get_weather", {"city": "Paris"})]}, RESULT, {"role": "assistant", "content": "It is 21 °C and clear."},
        {"role": "user", "content": "And in Oslo?"}], [WEATHER], None),
    ("result_escapes", [U, {"role": "assistant", "content": "", "tool_calls": [
        call("get_weather", {"city": "Zürich", "note": "line\none \"q\" \\ /"})]},
        {"role": "tool", "tool_call_id": "call_1", "content": "tab\there \"quoted\" back\\slash\nnew line é ✓ \u0001"}],
        [WEATHER], None),
    ("two_results", [U, CALL, RESULT, {"role": "tool", "tool_call_id": "call_1", "content": "second"}],
     [WEATHER], None),
    ("call_with_reasoning", [U, {"role": "assistant", "content": None, "reasoning_content": "I should look it up.",
                                 "tool_calls": [call("get_weather", {"city": "Paris"})]}, RESULT,
                             {"role": "assistant", "content": "Sunny.", "reasoning_content": "Dropped: not last."},
                             {"role": "user", "content": "Thanks"}], [WEATHER], None),
    ("call_with_reasoning_kept", [U, {"role": "assistant", "content": "", "reasoning_content": "Need data.",
                                      "tool_calls": [call("get_weather", {"city": "Paris"})]}, RESULT], [WEATHER],
     None),
    ("content_and_reasoning", [U, {"role": "assistant", "content": "Looking.", "reasoning_content": "Both.",
                                   "tool_calls": [call("get_weather", {"city": "Paris"})]}, RESULT], [WEATHER], None),
    ("result_without_call", [U, {"role": "tool", "tool_call_id": "x", "content": "orphan"}], [WEATHER], None),
    ("tool_without_description", [U], [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"a": {"type": "string"}}}}}], None),
]


def render(template, messages, tools, effort):
    def raise_exception(msg):
        raise jinja2.exceptions.TemplateError(msg)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                       extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: DATE
    msgs = json.loads(json.dumps(messages))
    for m in msgs:  # (vLLM: a null content as "", arguments as objects for templates that tojson them)
        if m.get("content") is None:
            m["content"] = ""
        if "reasoning_content" in m:  # (octet: the OpenAI field is what this template calls thinking)
            m["thinking"] = m.pop("reasoning_content")
        for c in m.get("tool_calls") or []:
            c["function"]["arguments"] = json.loads(c["function"]["arguments"])
    kw = {"reasoning_effort": effort} if effort else {}
    return env.from_string(template).render(messages=msgs, tools=tools, add_generation_prompt=True, **kw)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    template = open(sys.argv[1], encoding="utf-8").read()
    out = sys.argv[2] if len(sys.argv) > 2 else "tests/data/harmony_tools.json"
    cases = []
    for name, messages, tools, effort in CASES:
        req = {"messages": messages}
        if tools:
            req["tools"] = tools
        if effort:
            req["reasoning_effort"] = effort
        case = {"name": name, "request": req, "date": DATE}
        try:
            case["prompt"] = render(template, messages, tools, effort)
        except (jinja2.exceptions.TemplateError, TypeError) as e:
            case["error"] = f"{type(e).__name__}: {e}"
        cases.append(case)
    with open(out, "w", encoding="utf-8") as f:
        json.dump(cases, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{out}: {len(cases)} cases, {sum('error' in c for c in cases)} refused")


if __name__ == "__main__":
    main()
