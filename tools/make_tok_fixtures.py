#!/usr/bin/env python3
"""make_tok_fixtures.py — writes the tokenizer test fixtures under tests/data/ (stdlib only).

Owns: a tiny byte-level BPE vocabulary (256 GPT-2-mapped byte symbols + ~30 merges + added
tokens) written both as HF tokenizer.json (+ tokenizer_config.json) and as a GGUF "gpt2"
tokenizer, a tiny SPM GGUF for merge-order checks, and malformed GGUFs for error paths; and
tok_harmony/, the same vocabulary with gpt-oss's harmony special tokens and its template in
chat_template.jinja (transformers' newer layout), and tok_qwen3/ with Qwen3's turn tokens and think
tags, for tests/unit/test_reasoning.c.
The expected encodings live, hand-derived, in tests/unit/test_tokenizer.c.
Run from the repo root: python3 tools/make_tok_fixtures.py
"""
import json
import os
import struct

OUT = "tests/data"


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


B2U = bytes_to_unicode()

# Rank = position. Written in GPT-2 mapped form (Ġ = ' ', Ċ = '\n', Ã© = 'é').
MERGES = [
    "Ġ t", "h e", "Ġt he", "i n", "in g", "' s", "' t", "' l", "'l l", "1 2",
    "12 3", "Ċ Ċ", "Ġ Ġ", "H e", "l l", "He ll", "Hell o", "Ġ w", "o r", "Ġw or",
    "l d", "Ġwor ld", "! !", "Ã ©", "c a", "ca f", "caf Ã©", "Ġ cafÃ©", "4 5", "45 6",
    "' S", "d o", "do n",
]
# (content, special)
ADDED = [("<|begin_of_text|>", True), ("<|end_of_text|>", True), ("<|eot_id|>", True),
         ("<|fim|>", False)]
TEMPLATE = ("{% for m in messages %}<|start|>{{ m['role'] }}\n{{ m['content'] }}<|eot_id|>"
            "{% endfor %}")
LLAMA3_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
             r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


# gpt-oss's special tokens (ids after ADDED's) and a stand-in for its template, which octet detects by them
HARMONY_TOKENS = ["<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>", "<|return|>", "<|call|>",
                  "<|endoftext|>"]
HARMONY_TEMPLATE = ("{#- A stand-in for gpt-oss's chat_template.jinja: octet detects the harmony family by its "
                    "special tokens. -#}\n"
                    "{%- for m in messages %}<|start|>{{ m.role }}{% if m.role == 'assistant' %}<|channel|>final"
                    "{% endif %}<|message|>{{ m.content }}<|end|>{% endfor %}\n"
                    "{%- if add_generation_prompt %}<|start|>assistant{% endif %}\n")


# Qwen3's turn tokens and think tags (the tags are not special in its vocabulary), and a stand-in for its
# template: ChatML that names enable_thinking
QWEN3_TOKENS = [("<|im_start|>", True), ("<|im_end|>", True), ("<think>", False), ("</think>", False)]
QWEN3_TEMPLATE = ("{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
                  "{%- if add_generation_prompt %}<|im_start|>assistant\n{%- if enable_thinking is defined and "
                  "enable_thinking is false %}<think>\n\n</think>\n\n{%- endif %}{%- endif %}")


def bpe_vocab():
    toks = [B2U[b] for b in range(256)]
    for m in MERGES:
        a, b = m.split(" ")
        assert a in toks and b in toks, m
        toks.append(a + b)
    types = [1] * len(toks)
    for content, special in ADDED:
        toks.append(content)
        types.append(3 if special else 4)
    return toks, types


def write_json(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, indent=1)
        f.write("\n")


def hf_json(toks, types, llama3):
    n_base = 256 + len(MERGES)
    added = [{"id": n_base + i, "content": c, "single_word": False, "lstrip": False,
              "rstrip": False, "normalized": False, "special": s} for i, (c, s) in enumerate(ADDED)]
    merges = MERGES if llama3 else [m.split(" ") for m in MERGES]
    model = {"type": "BPE", "dropout": None, "unk_token": None, "fuse_unk": False,
             "byte_fallback": False, "ignore_merges": llama3,
             "vocab": {t: i for i, t in enumerate(toks[:n_base])}, "merges": merges}
    if llama3:
        pre = {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": LLAMA3_RE}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}
        post = {"type": "TemplateProcessing",
                "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                           {"Sequence": {"id": "A", "type_id": 0}}]}
    else:
        pre = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
        post = None
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
            "normalizer": None, "pre_tokenizer": pre, "post_processor": post,
            "decoder": {"type": "ByteLevel"}, "model": model}


# ---- GGUF v3 writer (metadata only, no tensors) ----
U32, I32, F32, BOOL, STR, ARR = 4, 5, 6, 7, 8, 9


def gstr(s):
    b = s.encode("utf-8") if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def gval(t, v):
    if t == U32:
        return struct.pack("<I", v)
    if t == I32:
        return struct.pack("<i", v)
    if t == F32:
        return struct.pack("<f", v)
    if t == BOOL:
        return struct.pack("<B", 1 if v else 0)
    if t == STR:
        return gstr(v)
    raise ValueError(t)


def write_gguf(path, kvs):
    """kvs: list of (key, type, value) or (key, ARR, (elem_type, list))."""
    out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs)))
    for key, t, v in kvs:
        out += gstr(key) + struct.pack("<I", t)
        if t == ARR:
            et, items = v
            out += struct.pack("<IQ", et, len(items))
            for x in items:
                out += gval(et, x)
        else:
            out += gval(t, v)
    out += b"\0" * ((-len(out)) % 32)
    with open(path, "wb") as f:
        f.write(out)


def spm_vocab(extra):
    toks = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)]
    types = [2, 3, 3] + [6] * 256
    scores = [0.0] * len(toks)
    for t, s in extra:
        toks.append(t)
        types.append(1)
        scores.append(s)
    return toks, types, scores


def spm_kvs(toks, types, scores, extra=()):
    return [("general.architecture", STR, "llama"), ("tokenizer.ggml.model", STR, "llama"),
            ("tokenizer.ggml.tokens", ARR, (STR, toks)), ("tokenizer.ggml.scores", ARR, (F32, scores)),
            ("tokenizer.ggml.token_type", ARR, (I32, types)),
            ("tokenizer.ggml.bos_token_id", U32, 1), ("tokenizer.ggml.eos_token_id", U32, 2)] + list(extra)


def main():
    toks, types = bpe_vocab()
    n_base = 256 + len(MERGES)
    write_json(f"{OUT}/tok_bpe/tokenizer.json", hf_json(toks, types, True))
    write_json(f"{OUT}/tok_bpe/tokenizer_config.json",
               {"add_bos_token": True, "bos_token": "<|begin_of_text|>",
                "eos_token": {"content": "<|eot_id|>", "special": True}, "chat_template": TEMPLATE})
    write_json(f"{OUT}/tok_bpe_gpt2/tokenizer.json", hf_json(toks, types, False))
    harmony = hf_json(toks, types, True)
    for c in HARMONY_TOKENS:
        harmony["added_tokens"].append({"id": len(toks) + len(harmony["added_tokens"]) - len(ADDED), "content": c,
                                        "single_word": False, "lstrip": False, "rstrip": False,
                                        "normalized": False, "special": True})
    write_json(f"{OUT}/tok_harmony/tokenizer.json", harmony)
    write_json(f"{OUT}/tok_harmony/tokenizer_config.json", {"add_bos_token": False, "eos_token": "<|return|>"})
    with open(f"{OUT}/tok_harmony/chat_template.jinja", "w", encoding="utf-8") as f:
        f.write(HARMONY_TEMPLATE)
    qwen3 = hf_json(toks, types, True)
    for c, special in QWEN3_TOKENS:
        qwen3["added_tokens"].append({"id": len(toks) + len(qwen3["added_tokens"]) - len(ADDED), "content": c,
                                      "single_word": False, "lstrip": False, "rstrip": False,
                                      "normalized": False, "special": special})
    write_json(f"{OUT}/tok_qwen3/tokenizer.json", qwen3)
    write_json(f"{OUT}/tok_qwen3/tokenizer_config.json",
               {"add_bos_token": False, "eos_token": "<|im_end|>", "chat_template": QWEN3_TEMPLATE})
    bpe_kvs = [("general.architecture", STR, "llama"), ("tokenizer.ggml.model", STR, "gpt2"),
               ("tokenizer.ggml.pre", STR, "llama-bpe"), ("tokenizer.ggml.tokens", ARR, (STR, toks)),
               ("tokenizer.ggml.token_type", ARR, (I32, types)),
               ("tokenizer.ggml.merges", ARR, (STR, MERGES)),
               ("tokenizer.ggml.bos_token_id", U32, n_base), ("tokenizer.ggml.eos_token_id", U32, n_base + 2),
               ("tokenizer.ggml.add_bos_token", BOOL, True), ("tokenizer.chat_template", STR, TEMPLATE)]
    write_gguf(f"{OUT}/tok_bpe.gguf", bpe_kvs)

    # Tiny SPM: "aa" outscores "▁a"; "ab" outscores both (see test_spm_merge_order).
    st, sty, ssc = spm_vocab([("▁", -2.0), ("a", -2.0), ("b", -2.0), ("aa", -1.0), ("▁a", -5.0),
                              ("ab", -0.5)])
    write_gguf(f"{OUT}/tok_spm_tiny.gguf", spm_kvs(st, sty, ssc))
    write_gguf(f"{OUT}/tok_spm_noprefix.gguf", spm_kvs(st, sty, ssc, [
        ("tokenizer.ggml.add_space_prefix", BOOL, False), ("tokenizer.ggml.add_bos_token", BOOL, False)]))

    # Malformed files: each must fail with a message naming the key.
    write_gguf(f"{OUT}/tok_bad_scores.gguf", spm_kvs(st, sty, ssc[:-1]))
    write_gguf(f"{OUT}/tok_bad_types.gguf", spm_kvs(st, sty[:-3], ssc))
    write_gguf(f"{OUT}/tok_bad_type_value.gguf", spm_kvs(st, sty[:-1] + [9], ssc))
    write_gguf(f"{OUT}/tok_bad_bos.gguf", [kv if kv[0] != "tokenizer.ggml.bos_token_id" else
                                           ("tokenizer.ggml.bos_token_id", U32, 9999) for kv in spm_kvs(st, sty, ssc)])
    write_gguf(f"{OUT}/tok_bad_byte.gguf", spm_kvs(st[:3] + ["abc"] + st[4:], sty, ssc))
    bad_merge = [kv if kv[0] != "tokenizer.ggml.merges" else
                 ("tokenizer.ggml.merges", ARR, (STR, MERGES + ["x zzz"])) for kv in bpe_kvs]
    write_gguf(f"{OUT}/tok_bad_merge.gguf", bad_merge)
    bad_model = [kv if kv[0] != "tokenizer.ggml.model" else ("tokenizer.ggml.model", STR, "wordpiece")
                 for kv in bpe_kvs]
    write_gguf(f"{OUT}/tok_bad_model.gguf", bad_model)


if __name__ == "__main__":
    main()
