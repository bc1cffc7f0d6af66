"""Independent NumPy reference for the Llama architecture (stories260K GGUF).

Precision: float64 by default (weights are read as F32 and widened);
Model(dtype=np.float32) runs the same code in float32 (used only as a cross-check).
Everything is written from the published formulas, not from another engine's code.

Forward pass, one sequence, no KV cache (the whole prefix is recomputed; with
a causal mask this is mathematically identical to incremental decoding):
    x = token_embd[tokens]
    per layer:
        h  = rmsnorm(x) * attn_norm              rmsnorm(v) = v / sqrt(mean(v^2) + eps)
        q,k,v = Wq h, Wk h, Wv h                  y[o] = sum_i W[o,i] x[i]
        q,k  <- RoPE "normal" (adjacent pairs (2i, 2i+1), angle pos * theta^(-2i/d))
        attn: query head hq uses KV head hq // (n_head / n_head_kv),
              scores = q.k / sqrt(head_dim), causal mask, softmax, sum p*v
        x  = x + Wo attn
        h  = rmsnorm(x) * ffn_norm
        x  = x + Wdown( silu(Wgate h) * (Wup h) )
    logits = output.weight @ (rmsnorm(x) * output_norm)

Tokenizer: SentencePiece-style (llama.cpp "SPM" algorithm), see encode().

CLI:  /usr/bin/python3 tools/ref/ref_llama.py "Once upon a time" [n_gen]
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gguf_read import read_gguf  # noqa: E402

DEFAULT_MODEL = "../shared/models/stories260K.gguf"
SPACE = "\u2581"  # '▁'


class Model:
    def __init__(self, path=DEFAULT_MODEL, dtype=np.float64):
        meta, t = read_gguf(path)
        self.dtype = dtype
        self.meta = meta
        arch = meta["general.architecture"]
        g = lambda k, d=None: meta.get("%s.%s" % (arch, k), d)  # noqa: E731
        self.n_layer = int(g("block_count"))
        self.n_embd = int(g("embedding_length"))
        self.n_head = int(g("attention.head_count"))
        self.n_head_kv = int(g("attention.head_count_kv", self.n_head))
        self.head_dim = int(g("attention.key_length", self.n_embd // self.n_head))
        self.n_rot = int(g("rope.dimension_count", self.head_dim))
        self.eps = float(g("attention.layer_norm_rms_epsilon", 1e-5))
        self.rope_theta = float(g("rope.freq_base", 10000.0))
        f64 = lambda a: np.asarray(a, dtype=dtype)  # noqa: E731
        self.tok_embd = f64(t["token_embd.weight"])              # [vocab, n_embd]
        self.out_w = f64(t.get("output.weight", t["token_embd.weight"]))
        self.out_norm = f64(t["output_norm.weight"])
        self.layers = []
        for i in range(self.n_layer):
            p = "blk.%d." % i
            self.layers.append({k: f64(t[p + k + ".weight"]) for k in (
                "attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
                "ffn_norm", "ffn_gate", "ffn_up", "ffn_down")})
        # tokenizer (a file without one: octet's byte stand-in, bytes 0..255, BOS 256, EOS 257)
        self.vocab = self.tok_embd.shape[0]
        if "tokenizer.ggml.tokens" not in meta:
            self.tokens = None
            self.bos, self.eos = 256, 257
            return
        self.tokens = meta["tokenizer.ggml.tokens"]
        self.scores = meta["tokenizer.ggml.scores"]
        self.token_type = meta["tokenizer.ggml.token_type"]
        self.tok_id = {s: i for i, s in enumerate(self.tokens)}
        self.bos = int(meta.get("tokenizer.ggml.bos_token_id", 1))
        self.eos = int(meta.get("tokenizer.ggml.eos_token_id", 2))
        self.vocab = len(self.tokens)

    # ------------------------------------------------------------ tokenizer
    def encode(self, text, add_bos=True):
        """llama.cpp SPM algorithm.
        1. ' ' -> '▁', prepend '▁'.
        2. start from one symbol per Unicode character.
        3. repeatedly merge the adjacent pair whose concatenation is a vocab
           token with the highest score (leftmost pair on ties).
        4. each final symbol -> its token id, or byte-fallback tokens <0xNN>
           for each UTF-8 byte of a symbol that is not in the vocab."""
        out = [self.bos] if add_bos else []
        if self.tokens is None:  # the byte stand-in
            return out + list(text.encode("utf-8"))
        if text == "":
            return out
        s = SPACE + text.replace(" ", SPACE)
        syms = list(s)
        while True:
            best, best_i = None, -1
            for i in range(len(syms) - 1):
                tid = self.tok_id.get(syms[i] + syms[i + 1])
                if tid is None:
                    continue
                sc = self.scores[tid]
                if best is None or sc > best:
                    best, best_i = sc, i
            if best_i < 0:
                break
            syms[best_i:best_i + 2] = [syms[best_i] + syms[best_i + 1]]
        for sym in syms:
            tid = self.tok_id.get(sym)
            if tid is not None:
                out.append(tid)
            else:
                for b in sym.encode("utf-8"):
                    out.append(self.tok_id["<0x%02X>" % b])
        return out

    def encode_heap(self, text, add_bos=True):
        """Same result as encode(), computed with a priority queue of candidate
        bigrams (score desc, left position asc), skipping stale entries. Used
        to cross-check encode() and for speed on long texts."""
        import heapq
        out = [self.bos] if add_bos else []
        if text == "":
            return out
        s = SPACE + text.replace(" ", SPACE)
        n = len(s)
        sym = list(s)                 # symbol text, indexed by start position
        nxt = list(range(1, n + 1))   # next symbol start (n = end)
        prv = list(range(-1, n - 1))
        alive = [True] * n
        heap = []

        def push(a):
            b = nxt[a]
            if a < 0 or b >= n:
                return
            t = sym[a] + sym[b]
            tid = self.tok_id.get(t)
            if tid is not None:
                heapq.heappush(heap, (-self.scores[tid], a, t))

        for i in range(n - 1):
            push(i)
        while heap:
            _, a, t = heapq.heappop(heap)
            b = nxt[a] if a < n else n
            if not alive[a] or b >= n or sym[a] + sym[b] != t:
                continue  # stale
            sym[a] = t
            alive[b] = False
            nxt[a] = nxt[b]
            if nxt[a] < n:
                prv[nxt[a]] = a
            if prv[a] >= 0:
                push(prv[a])
            push(a)
        i = 0
        while i < n:
            tid = self.tok_id.get(sym[i])
            if tid is not None:
                out.append(tid)
            else:
                for bb in sym[i].encode("utf-8"):
                    out.append(self.tok_id["<0x%02X>" % bb])
            i = nxt[i]
        return out

    def token_piece(self, tid):
        s = self.tokens[tid]
        if self.token_type[tid] == 6:  # BYTE
            return bytes([int(s[3:5], 16)])
        if self.token_type[tid] in (2, 3):  # UNKNOWN, CONTROL
            return b""
        return s.replace(SPACE, " ").encode("utf-8")

    def decode(self, ids, strip_leading_space=True):
        b = b"".join(self.token_piece(i) for i in ids)
        t = b.decode("utf-8", errors="replace")
        if strip_leading_space and t.startswith(" "):
            t = t[1:]
        return t

    # ------------------------------------------------------------ forward
    def rmsnorm(self, x, w):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * w

    def rope_normal(self, x, pos):
        """x: [T, n_heads, head_dim]; rotates pairs (2i, 2i+1) of the first n_rot dims."""
        d = self.n_rot
        i = np.arange(d // 2, dtype=np.float64)
        inv_freq = self.rope_theta ** (-2.0 * i / d)                 # [d/2]
        ang = np.asarray(pos, dtype=np.float64)[:, None] * inv_freq  # [T, d/2]
        c = np.cos(ang)[:, None, :].astype(self.dtype)
        s = np.sin(ang)[:, None, :].astype(self.dtype)
        y = x.copy()
        x0 = x[..., 0:d:2]
        x1 = x[..., 1:d:2]
        y[..., 0:d:2] = x0 * c - x1 * s
        y[..., 1:d:2] = x0 * s + x1 * c
        return y

    def forward(self, tokens, return_hidden=False, kv_hook=None):
        """tokens: list of ids at positions 0..T-1. Returns logits [T, vocab] float64.
        kv_hook(layer_index, k, v) -> (k, v), if given, replaces each layer's K (after RoPE)
        and V [T, n_kv_heads, head_dim] with what a KV cache would hold (e.g. FP8-rounded)."""
        T = len(tokens)
        H, HKV, D = self.n_head, self.n_head_kv, self.head_dim
        grp = H // HKV
        pos = np.arange(T)
        x = self.tok_embd[np.asarray(tokens)]
        mask = np.triu(np.full((T, T), -np.inf, dtype=self.dtype), k=1)
        for li, L in enumerate(self.layers):
            h = self.rmsnorm(x, L["attn_norm"])
            q = (h @ L["attn_q"].T).reshape(T, H, D)
            k = (h @ L["attn_k"].T).reshape(T, HKV, D)
            v = (h @ L["attn_v"].T).reshape(T, HKV, D)
            q = self.rope_normal(q, pos)
            k = self.rope_normal(k, pos)
            if kv_hook is not None:
                k, v = kv_hook(li, k, v)
            att = np.empty((T, H, D), dtype=self.dtype)
            for hq in range(H):
                hk = hq // grp
                sc = (q[:, hq, :] @ k[:, hk, :].T) * self.dtype(1.0 / np.sqrt(D)) + mask
                sc = sc - sc.max(axis=1, keepdims=True)
                p = np.exp(sc)
                p /= p.sum(axis=1, keepdims=True)
                att[:, hq, :] = p @ v[:, hk, :]
            x = x + att.reshape(T, H * D) @ L["attn_output"].T
            h = self.rmsnorm(x, L["ffn_norm"])
            g = h @ L["ffn_gate"].T
            u = h @ L["ffn_up"].T
            x = x + ((g / (1.0 + np.exp(-g))) * u) @ L["ffn_down"].T
        x = self.rmsnorm(x, self.out_norm)
        logits = x @ self.out_w.T
        return (logits, x) if return_hidden else logits

    def greedy(self, prompt_ids, n_gen):
        """Greedy (argmax) generation, no EOS stopping. Returns (generated ids,
        logits [len(prompt)+n_gen-1... ] list: logits used to pick each token)."""
        ids = list(prompt_ids)
        gen, picked_logits = [], []
        for _ in range(n_gen):
            lg = self.forward(ids)[-1]
            t = int(np.argmax(lg))
            picked_logits.append(lg)
            gen.append(t)
            ids.append(t)
        return gen, picked_logits


if __name__ == "__main__":
    m = Model()
    prompt = sys.argv[1] if len(sys.argv) > 1 else "Once upon a time"
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 32
    ids = m.encode(prompt)
    print("prompt ids:", ids)
    gen, _ = m.greedy(ids, n)
    print("generated ids:", gen)
    print("text:", repr(m.decode(ids + gen)))
