#!/usr/bin/env python3
"""train.py — trains octet's pass-key retrieval model (PyTorch, one GPU) and exports it to GGUF.

Owns: the torch twin of octet's Llama forward pass (src/model/forward.c; mirrored line by
line by ref_numpy.py), the curriculum of lengths, the loss, the end-of-run checks.
Not here: data generation (data.py), the GGUF writer (export_gguf.py).
Invariant: the torch model computes the function octet computes from the exported GGUF:
RMSNorm(eps) with weight, GQA (query head h reads KV head h // G), RoPE on adjacent pairs
(2i, 2i+1) with angle pos * theta^(-2i/head_dim), SwiGLU, no biases, untied output head.
Deterministic from --seed: the data of step s is a function of (seed, s) alone (computed ahead
in worker processes), the initialisation comes from torch.manual_seed, and with
--deterministic strict (the default) every kernel is a deterministic one, flash-attention's
backward pass included, so two runs of one seed on one machine give the same weights.

Example (on the GPU machine):
  python3 tools/train_passkey/train.py --out-dir OUT --seed 1
Check of the script on a CPU (tiny model, short lengths; torch >= 1.13):
  python3 tools/train_passkey/train.py --out-dir /tmp/t --device cpu --dim 64 --n-layers 2 --ffn-dim 128 \
      --curriculum 20:256-512:4096,10:512-1024:4096+2048 --eval-lengths 512 --eval-keys 1 --val 512x2x1
"""
import argparse
import json
import math
import os
import sys
import time
import traceback

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import data  # noqa: E402
import export_gguf  # noqa: E402

# Phases, comma-separated: STEPS:MIN_LEN-MAX_LEN:TOKENS[+REPLAY]
#   Each step draws its length L log-uniformly from [MIN_LEN, MAX_LEN] (20 % of steps take MAX_LEN)
#   and runs max(1, TOKENS // L) sequences of length L. +REPLAY adds a second micro-batch of about
#   REPLAY tokens of short sequences (512-4096) to each step, weighted REPLAY_W, so the long phases
#   (one or two sequences a step) keep a steady answer signal and the short-range skill.
#   Older forms still parse: PLANNED>RUN (place PLANNED steps on the LR schedule, run RUN of them)
#   and a fourth field CAP_S (a time cap: it makes a run depend on the GPU's speed; none by default).
#   A further field early=E sets --early for that phase alone (the replay micro-batch included);
#   first=F: probability that a single needle sits right after the intro (depth 0 %; default 0).
# The default trains to 131072 tokens. Phase 0 is long on purpose: retrieval is learnt in a sudden
# transition whose step moved from ~250 to ~650 between two recipes that shared their first 800 steps'
# data and differed only slightly in learning rate (tools/train_passkey/README.md).
DEFAULT_CURRICULUM = ("1000:256-1024:65536,300:1024-4096:98304,150:4096-16384:131072,"
                      "150:16384-65536:131072+16384,550:65536-131072:131072+16384:early=0.4")
REPLAY_LENGTHS = (512, 4096)


def parse_curriculum(s):
    out = []
    for ph in s.split(","):
        f = ph.split(":")
        planned, _, run = f[0].partition(">")
        lo, hi = f[1].split("-")
        tok, _, rep = f[2].partition("+")
        ph = dict(steps=int(planned), run=int(run or planned), lo=int(lo), hi=int(hi), tokens=int(tok),
                  replay=int(rep or 0), cap_s=float("inf"), early=None, first=0.0)
        for extra in f[3:]:  # early=E (this phase's --early), first=F, or a bare number: the time cap
            if extra.startswith("early="):
                ph["early"] = float(extra[6:])
            elif extra.startswith("first="):
                ph["first"] = float(extra[6:])
            else:
                ph["cap_s"] = float(extra)
        out.append(ph)
    return out


def make_step(seed, gstep, ph, mix, early):
    """The data of one step, a pure function of (seed, schedule position): the same stream whatever
    the worker that computes it. Returns (L, n_seq, [(ids, kinds) main, (ids, kinds) replay?])."""
    rng = np.random.default_rng([seed, gstep])
    L = int(round(math.exp(rng.uniform(math.log(ph["lo"]), math.log(ph["hi"])))))
    if rng.random() < 0.2:
        L = ph["hi"]
    n_seq = max(1, ph["tokens"] // L)
    if ph.get("early") is not None:
        early = ph["early"]
    first = ph.get("first", 0.0)
    mbs = [data.batch(rng, L, n_seq, mix, early, first)]
    if ph["replay"]:
        lo, hi = REPLAY_LENGTHS
        Lr = int(round(math.exp(rng.uniform(math.log(lo), math.log(hi)))))
        mbs.append(data.batch(rng, Lr, max(1, ph["replay"] // Lr), mix, early, first))
    return L, n_seq, mbs


class Prefetch:
    """Computes make_step for the next `ahead` steps in worker processes (fork, before CUDA starts)."""

    def __init__(self, plan, seed, mix, early, workers, ahead=8):
        import multiprocessing as mp
        from collections import deque
        self.plan, self.args, self.i = plan, (seed, mix, early), 0
        self.pool = mp.get_context("fork").Pool(workers) if workers > 0 else None
        self.q = deque()
        for _ in range(ahead if self.pool else 0):
            self._submit()

    def _submit(self):
        if self.i < len(self.plan):
            gstep, ph = self.plan[self.i]
            self.q.append((gstep, self.pool.apply_async(make_step, (self.args[0], gstep, ph) + self.args[1:])))
            self.i += 1

    def next(self, gstep, ph):
        while self.pool is not None and self.q:
            g, r = self.q.popleft()
            self._submit()
            if g == gstep:  # steps skipped by a time cap are dropped here
                return r.get()
        return make_step(self.args[0], gstep, ph, *self.args[1:])

    def close(self):
        if self.pool:
            self.pool.terminate()


def build_model(cfg):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    D, H, KV, hd, Fd, V = cfg["dim"], cfg["n_heads"], cfg["n_kv_heads"], cfg["head_dim"], cfg["ffn_dim"], cfg["vocab"]
    G, eps = H // KV, cfg["norm_eps"]
    fused_rms = getattr(F, "rms_norm", None)

    def rmsnorm(x, w):  # ref_numpy.rmsnorm, in float32: x / sqrt(mean(x^2) + eps) * w
        x = x.float()
        if fused_rms is not None:
            return fused_rms(x, (D,), w.float(), eps)
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w.float()

    def rope(x, fc):  # x [B, T, heads, hd]; ref_numpy.rope: pair (2i, 2i+1) = complex x[2i] + i x[2i+1]
        B, T, nh, _ = x.shape
        xc = torch.view_as_complex(x.float().reshape(B, T, nh, hd // 2, 2))
        return torch.view_as_real(xc * fc[None, :, None, :]).reshape(B, T, nh, hd)

    if hasattr(F, "scaled_dot_product_attention"):
        sdpa = F.scaled_dot_product_attention
    else:  # torch < 2.0 (CPU checks only): the same causal softmax attention, unfused
        def sdpa(q, k, v, is_causal=True):
            T = q.shape[-2]
            s = (q.float() @ k.float().transpose(-1, -2)) / math.sqrt(q.shape[-1])
            s = s.masked_fill(torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
            return (s.softmax(-1) @ v.float()).to(q.dtype)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn_norm = nn.Parameter(torch.ones(D))
            self.wq = nn.Linear(D, H * hd, bias=False)
            self.wk = nn.Linear(D, KV * hd, bias=False)
            self.wv = nn.Linear(D, KV * hd, bias=False)
            self.wo = nn.Linear(H * hd, D, bias=False)
            self.ffn_norm = nn.Parameter(torch.ones(D))
            self.w_gate = nn.Linear(D, Fd, bias=False)
            self.w_up = nn.Linear(D, Fd, bias=False)
            self.w_down = nn.Linear(Fd, D, bias=False)

        def forward(self, x, fc, act_dtype):
            B, T, _ = x.shape
            h = rmsnorm(x, self.attn_norm).to(act_dtype)
            q = rope(self.wq(h).view(B, T, H, hd), fc).to(act_dtype)
            k = rope(self.wk(h).view(B, T, KV, hd), fc).to(act_dtype)
            v = self.wv(h).view(B, T, KV, hd).to(act_dtype)
            # query head h reads KV head h // G (expand + copy: its backward is a plain sum)
            k = k[:, :, :, None, :].expand(B, T, KV, G, hd).reshape(B, T, H, hd)
            v = v[:, :, :, None, :].expand(B, T, KV, G, hd).reshape(B, T, H, hd)
            o = sdpa(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
            x = x + self.wo(o.transpose(1, 2).reshape(B, T, H * hd)).float()
            h = rmsnorm(x, self.ffn_norm).to(act_dtype)
            return x + self.w_down(F.silu(self.w_gate(h)) * self.w_up(h)).float()

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(V, D)
            self.layers = nn.ModuleList([Block() for _ in range(cfg["n_layers"])])
            self.norm_w = nn.Parameter(torch.ones(D))
            self.out = nn.Linear(D, V, bias=False)
            self._rope = None

        def rope_table(self, T, device):
            """cos + i sin of pos * theta^(-2i/hd): angles in float64 (as octet), stored as complex64."""
            if self._rope is None or self._rope.shape[0] < T:
                n = max(T, 1024)
                inv = 1.0 / cfg["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.float64, device=device) / hd)
                ang = torch.arange(n, dtype=torch.float64, device=device)[:, None] * inv[None, :]
                self._rope = torch.complex(torch.cos(ang).float(), torch.sin(ang).float())
            return self._rope[:T]

        def hidden(self, ids, act_dtype=torch.bfloat16):
            fc = self.rope_table(ids.shape[1], ids.device)
            x = self.tok(ids).float()
            for blk in self.layers:
                x = blk(x, fc, act_dtype)
            return rmsnorm(x, self.norm_w)

        def forward(self, ids, act_dtype=torch.bfloat16):
            return self.out(self.hidden(ids, act_dtype).to(act_dtype)).float()

    return Model()


def init_weights(model, cfg, std=0.02):
    import torch
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 1:
                p.fill_(1.0)
            elif name.endswith("wo.weight") or name.endswith("w_down.weight"):
                p.normal_(0.0, std / math.sqrt(2 * cfg["n_layers"]))
            else:
                p.normal_(0.0, std)


def load_weights(model, cfg, path, log):
    """Copies a GGUF's weights (read by ref_numpy, so BF16 files widen exactly) into the model;
    the architecture must match the one asked for (context_length may differ)."""
    import hashlib
    import torch
    import ref_numpy
    icfg, ip = ref_numpy.load(path)
    for k in ("dim", "n_layers", "n_heads", "n_kv_heads", "head_dim", "ffn_dim", "vocab"):
        if icfg[k] != cfg[k]:
            raise SystemExit("--init %s: %s is %s, the model asked for has %s" % (path, k, icfg[k], cfg[k]))
    if float(icfg["rope_theta"]) != float(cfg["rope_theta"]):
        raise SystemExit("--init %s: rope_theta %s differs from --rope-theta %s" % (path, icfg["rope_theta"], cfg["rope_theta"]))
    tgt = params_numpy_tensors(model)
    with torch.no_grad():
        for name, t in tgt.items():
            src = np.asarray(ip[name], np.float32)
            if tuple(src.shape) != tuple(t.shape):
                raise SystemExit("--init %s: tensor %s has shape %s, expected %s" % (path, name, src.shape, tuple(t.shape)))
            t.copy_(torch.from_numpy(src))
    sha = hashlib.sha256(open(path, "rb").read()).hexdigest()
    log("init: weights of %s (sha256 %s)" % (path, sha))
    return sha


def params_numpy_tensors(model):
    """name (ref_numpy's) -> the model's parameter tensor."""
    p = {"tok_embd": model.tok.weight, "out_norm": model.norm_w, "out": model.out.weight}
    for i, b in enumerate(model.layers):
        for short in ("attn_norm", "ffn_norm"):
            p["layers.%d.%s" % (i, short)] = getattr(b, short)
        for short in ("wq", "wk", "wv", "wo", "w_gate", "w_up", "w_down"):
            p["layers.%d.%s" % (i, short)] = getattr(b, short).weight
    return p


def params_numpy(model, cfg):
    return {k: v.detach().float().cpu().numpy() for k, v in params_numpy_tensors(model).items()}


def lr_at(step, total, peak, warmup, final_frac=0.1):
    if step < warmup:
        return peak * (step + 1) / warmup
    t = min(1.0, (step - warmup) / max(1, total - warmup))
    return peak * (final_frac + (1 - final_frac) * 0.5 * (1 + math.cos(math.pi * t)))


def mb_loss(model, ids_np, kinds_np, dev, w_copy, w_lm, backward_scale=None):
    """Loss of one micro-batch: CE(answer) + w_copy CE(key repeat) + w_lm CE(other tokens), each a
    mean over its own tokens. backward_scale: run backward on scale * loss. Returns a float64
    tensor [loss, ans, copy, lm, ans_tok_acc, ans_seq_acc] (detached)."""
    import torch
    import torch.nn.functional as F
    ids = torch.from_numpy(ids_np.astype(np.int64)).to(dev, non_blocking=True)
    kinds = torch.from_numpy(kinds_np).to(dev, non_blocking=True)
    with torch.autocast(dev.type, dtype=torch.bfloat16):
        logits = model(ids[:, :-1])
    tgt = ids[:, 1:]
    ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1), reduction="none").view_as(tgt)
    m_ans, m_copy, m_lm = (kinds == data.ANS).float(), (kinds == data.COPY).float(), (kinds == data.LM).float()
    ans_ce = (ce * m_ans).sum() / m_ans.sum().clamp(min=1)
    copy_ce = (ce * m_copy).sum() / m_copy.sum().clamp(min=1)
    lm_ce = (ce * m_lm).sum() / m_lm.sum().clamp(min=1)
    loss = ans_ce + w_copy * copy_ce + w_lm * lm_ce
    if backward_scale is not None:
        (loss * backward_scale).backward()
    with torch.no_grad():
        right = (logits.argmax(-1) == tgt).float()
        tok_acc = (right * m_ans).sum() / m_ans.sum().clamp(min=1)
        seq_acc = (((right * m_ans).sum(1) == m_ans.sum(1)).float()).mean()
        return torch.stack([loss.detach(), ans_ce.detach(), copy_ce.detach(), lm_ce.detach(), tok_acc, seq_acc]).double()


def passkey_eval(model, lengths, depths, n_keys, seed, device, log):
    """octet's exact needle prompts; a key counts as retrieved when the argmax at each answer
    position reproduces " KEY" given the correct prefix (= greedy decoding's first 6 tokens)."""
    import torch
    rng = np.random.default_rng(seed + 777)
    res = {}
    model.eval()
    with torch.no_grad(), torch.autocast(device.type, dtype=torch.bfloat16):
        for L in lengths:
            for d in depths:
                keys = [str(int(rng.integers(10000, 100000))) for _ in range(n_keys)]
                ok = 0
                for key in keys:
                    prompt = data.octet_prompt(L, d, key)
                    ans = data.enc(" " + key)
                    ids = torch.from_numpy(np.concatenate([prompt, ans[:-1]]).astype(np.int64))[None].to(device)
                    h = model.hidden(ids)[0, len(prompt) - 1:]
                    pred = model.out(h.to(torch.bfloat16)).float().argmax(-1).cpu().numpy()
                    ok += int((pred == ans).all())
                res["%d/%d" % (L, d)] = ok / n_keys
            log("torch passkey eval length %6d: %s" % (L, " ".join("d%d=%.2f" % (d, res["%d/%d" % (L, d)]) for d in depths)))
    model.train()
    return res


def val_loss(model, sets, mix, dev, w_copy, w_lm, log):
    """The loss terms on a fixed held-out set (the same for every training seed): a low-noise final
    loss to compare runs by. sets: [(length, n_seq, n_batches)]."""
    import torch
    rng = np.random.default_rng(20261130)
    out = {}
    model.eval()
    with torch.no_grad():
        for L, n, nb in sets:
            v = sum(mb_loss(model, *data.batch(rng, L, n, mix), dev, w_copy, w_lm) for _ in range(nb)) / nb
            out[str(L)] = [round(float(x), 5) for x in v.tolist()]
            log("val length %6d (%d x %d seq): loss %.4f ans %.4f copy %.4f lm %.4f tok_acc %.3f seq_acc %.3f"
                % ((L, nb, n) + tuple(out[str(L)])))
    model.train()
    return out


def consistency_check(model, cfg, gguf_path, dev, log):
    """Torch (fp32 activations) vs the NumPy twin on the exported F32 GGUF, on a short prompt."""
    import torch
    import ref_numpy
    c2, p2 = ref_numpy.load(gguf_path)
    ids = data.octet_prompt(300, 50, "31415")
    ref = ref_numpy.forward(c2, p2, ids, np.float64)
    with torch.no_grad():
        t = torch.from_numpy(ids.astype(np.int64))[None].to(dev)
        torch.set_float32_matmul_precision("highest")
        got = model.out(model.hidden(t, torch.float32)).double().cpu().numpy()[0]
        torch.set_float32_matmul_precision("high")
    diff = float(np.abs(got - ref).max())
    agree = float((got.argmax(-1) == ref.argmax(-1)).mean())
    log("consistency torch fp32 vs numpy twin (f32 gguf): max |dlogit| = %.3e, argmax agreement %.4f, logit scale %.2f"
        % (diff, agree, float(np.abs(ref).max())))
    return diff, agree


def set_determinism(torch, mode, log):
    """strict: deterministic kernels everywhere (flash-attention's deterministic backward too);
    warn: only where that costs nothing; off. Returns the mode in force."""
    if mode == "off":
        return mode
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.use_deterministic_algorithms(True, warn_only=(mode == "warn"))
    try:  # no NaN-filling of every torch.empty: that is only a debugging aid and costs a kernel each
        torch.utils.deterministic.fill_uninitialized_memory = False
    except AttributeError:
        pass
    log("determinism: %s (CUBLAS_WORKSPACE_CONFIG=%s)" % (mode, os.environ.get("CUBLAS_WORKSPACE_CONFIG")))
    return mode


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--curriculum", default=DEFAULT_CURRICULUM)
    ap.add_argument("--init", help="start from this GGUF's weights (a model this script exported; same shape) "
                    "instead of random ones: a fine-tuning stage")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--lr-final", type=float, default=0.02, help="the cosine ends at this fraction of --lr")
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--w-copy", type=float, default=0.3, help="weight of the in-needle key repeat")
    ap.add_argument("--w-lm", type=float, default=0.1, help="weight of all other predictable tokens")
    ap.add_argument("--w-replay", type=float, default=0.5, help="weight of a step's replay micro-batch")
    ap.add_argument("--mix", default="0.6,0.25,0.15", help="octet,varied,multi sample fractions")
    ap.add_argument("--early", type=float, default=0.3,
                    help="probability that a single needle sits in the first tenth of the filler")
    ap.add_argument("--eval-lengths", default="1024,4096,16384,32768,65536,131072")
    ap.add_argument("--eval-keys", type=int, default=4)
    ap.add_argument("--val", default="1024x32x1,16384x4x1,131072x1x2", help="held-out set: LENxSEQxBATCHES,...")
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--workers", type=int, default=4, help="data worker processes (0: in the main process)")
    ap.add_argument("--deterministic", default="strict", choices=("strict", "warn", "off"),
                    help="strict falls back to warn (logged) if an op has no deterministic kernel")
    ap.add_argument("--device", default="cuda", help="cuda; cpu only for checking the script on tiny settings")
    for k in ("dim", "n_layers", "n_heads", "n_kv_heads", "head_dim", "ffn_dim"):
        ap.add_argument("--" + k.replace("_", "-"), type=int, default=export_gguf.DEFAULT_CFG[k])
    ap.add_argument("--rope-theta", type=float, default=1e6)
    a = ap.parse_args(argv)

    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # before torch starts cuBLAS
    import torch

    os.makedirs(a.out_dir, exist_ok=True)
    logf = open(os.path.join(a.out_dir, "train_log.txt"), "w")

    def log(s):
        print(s, flush=True)
        logf.write(s + "\n")
        logf.flush()

    t0 = time.time()
    phases = parse_curriculum(a.curriculum)
    max_len = max(p["hi"] for p in phases)
    # context_length: the longest training sequence is a MAX_LEN-token prompt plus its answer
    # (at most 12 tokens), so round MAX_LEN + 12 up to a multiple of 64.
    cfg = dict(export_gguf.DEFAULT_CFG, dim=a.dim, n_layers=a.n_layers, n_heads=a.n_heads, n_kv_heads=a.n_kv_heads,
               head_dim=a.head_dim, ffn_dim=a.ffn_dim, rope_theta=a.rope_theta,
               context_length=(max_len + 12 + 63) // 64 * 64)
    mix = [float(x) for x in a.mix.split(",")]
    log("config %s" % json.dumps(cfg))
    log("command %s" % " ".join(sys.argv))
    log("curriculum %s; lr %.1e -> %.1e; early %.2f; replay weight %.2f"
        % (a.curriculum, a.lr, a.lr * a.lr_final, a.early, a.w_replay))
    # the whole schedule is known up front, so the data stream does not depend on timing
    total_steps = sum(p["steps"] for p in phases)
    plan = []
    for pi, ph in enumerate(phases):
        base = sum(p["steps"] for p in phases[:pi])
        plan += [(base + s, ph) for s in range(min(ph["run"], ph["steps"]))]
    prefetch = Prefetch(plan, a.seed, mix, a.early, a.workers)  # forks before CUDA starts

    torch.manual_seed(a.seed)
    torch.set_float32_matmul_precision("high")
    det = set_determinism(torch, a.deterministic, log)
    dev = torch.device(a.device)
    model = build_model(cfg).to(dev)
    init_weights(model, cfg)
    init_sha = load_weights(model, cfg, a.init, log) if a.init else None
    n_params = sum(p.numel() for p in model.parameters())
    log("parameters %d (%.2f M); torch %s; %s" % (n_params, n_params / 1e6, torch.__version__,
                                                  torch.cuda.get_device_name() if dev.type == "cuda" else "cpu"))
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    groups = [{"params": decay, "weight_decay": a.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=a.lr, betas=(0.9, 0.95), **({"fused": True} if dev.type == "cuda" else {}))

    def step_fn(mbs):
        """One optimiser step over the step's micro-batches. Returns (main metrics, replay metrics)."""
        opt.zero_grad(set_to_none=True)
        res = [mb_loss(model, ids, kinds, dev, a.w_copy, a.w_lm, 1.0 if j == 0 else a.w_replay)
               for j, (ids, kinds) in enumerate(mbs)]
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return res[0], (res[1] if len(res) > 1 else None)

    if det == "strict":  # probe every op once on a small batch (no optimiser step); fall back if one refuses
        try:
            ids, kinds = data.batch(np.random.default_rng(0), 600, 2, mix)
            mb_loss(model, ids, kinds, dev, a.w_copy, a.w_lm, 1.0)
            opt.zero_grad(set_to_none=True)
            log("determinism probe: every op ran with deterministic kernels")
        except RuntimeError as e:
            opt.zero_grad(set_to_none=True)
            det = set_determinism(torch, "warn", log)
            log("WARNING determinism probe failed (%s); running with warn_only" % str(e).splitlines()[0])

    curve = open(os.path.join(a.out_dir, "loss_curve.tsv"), "w")
    curve.write("step\tphase\tlength\tn_seq\tloss\tans_ce\tcopy_ce\tlm_ce\tans_tok_acc\tans_seq_acc\treplay_ans_ce\t"
                "lr\telapsed_s\tdata_wait_ms\tstep_ms\n")
    gstep, n_tokens, last, n_run = 0, 0, None, 0
    notes = []
    try:
        k_plan = 0
        for pi, ph in enumerate(phases):
            p_t0 = time.time()
            acc, acc_r, n_r, wait_s = None, None, 0, 0.0
            w_t0 = time.time()
            n_this = min(ph["run"], ph["steps"])
            for s in range(n_this):
                if time.time() - p_t0 > ph["cap_s"]:
                    notes.append("phase %d stopped by its %.0f s time cap after %d of %d steps" % (pi, ph["cap_s"], s, ph["steps"]))
                    log("WARNING " + notes[-1])
                    k_plan += n_this - s
                    break
                gstep = plan[k_plan][0]
                k_plan += 1
                tw = time.time()
                L, n_seq, mbs = prefetch.next(gstep, ph)
                wait_s += time.time() - tw
                lr = lr_at(gstep, total_steps, a.lr, a.warmup, a.lr_final)
                for g in opt.param_groups:
                    g["lr"] = lr
                try:
                    cur, cur_r = step_fn(mbs)
                except RuntimeError as e:
                    if det != "strict" or "determinis" not in str(e):
                        raise
                    det = set_determinism(torch, "warn", log)
                    log("WARNING step %d: %s; retrying with warn_only" % (gstep + 1, str(e).splitlines()[0]))
                    cur, cur_r = step_fn(mbs)
                acc = cur if acc is None else acc + cur
                if cur_r is not None:
                    acc_r = cur_r if acc_r is None else acc_r + cur_r
                    n_r += 1
                n_tokens += sum(ids.size for ids, _ in mbs)
                n_run += 1
                if (s + 1) % a.log_every == 0 or s + 1 == n_this:
                    k = (s % a.log_every) + 1
                    v = (acc / k).tolist()
                    r_ans = float(acc_r[1] / n_r) if acc_r is not None else float("nan")
                    last = v
                    el = time.time() - t0
                    step_ms = (time.time() - w_t0) / k * 1e3
                    curve.write("%d\t%d\t%d\t%d\t%.5f\t%.5f\t%.5f\t%.5f\t%.4f\t%.4f\t%.5f\t%.3e\t%.1f\t%.1f\t%.1f\n"
                                % (gstep + 1, pi, L, n_seq, v[0], v[1], v[2], v[3], v[4], v[5], r_ans, lr, el,
                                   wait_s / k * 1e3, step_ms))
                    curve.flush()
                    log("step %4d ph %d L %6d x%3d loss %.4f ans %.4f copy %.4f lm %.4f tok_acc %.3f seq_acc %.3f%s "
                        "lr %.2e %.0fs %.2fM tok/s %.0f ms/step (data wait %.0f)"
                        % (gstep + 1, pi, L, n_seq, v[0], v[1], v[2], v[3], v[4], v[5],
                           " replay_ans %.4f" % r_ans if acc_r is not None else "", lr, el, n_tokens / el / 1e6,
                           step_ms, wait_s / k * 1e3))
                    acc, acc_r, n_r, wait_s, w_t0 = None, None, 0, 0.0, time.time()
            log("phase %d done at %.1f s (%d steps run so far)" % (pi, time.time() - t0, n_run))
    except Exception:
        notes.append("training stopped by an error at step %d: %s" % (gstep, traceback.format_exc().strip().splitlines()[-1]))
        log("ERROR " + traceback.format_exc())
    prefetch.close()
    train_s = time.time() - t0
    status = "; ".join(notes) if notes else "complete"
    peak = torch.cuda.max_memory_allocated() / 2**30 if dev.type == "cuda" else 0.0
    log("training: %s; %.1f s, %d steps run (last schedule position %d of %d), %.1f M tokens, peak GPU memory %.1f GiB, determinism %s"
        % (status, train_s, n_run, gstep + 1, total_steps, n_tokens / 1e6, peak, det))

    params = params_numpy(model, cfg)
    meta = {"octet.train.seed": str(a.seed), "octet.train.curriculum": a.curriculum, "octet.train.status": status,
            "octet.train.final_loss": json.dumps(last), "octet.train.steps": str(n_run),
            "octet.train.determinism": det,
            **({"octet.train.init_sha256": init_sha} if init_sha else {}),
            "octet.train.command": "python3 tools/train_passkey/train.py " + " ".join(argv if argv else sys.argv[1:])}
    extra = [(k, export_gguf.GGUF_STR, v) for k, v in meta.items()]
    f32_path = os.path.join(a.out_dir, "passkey_f32.gguf")
    export_gguf.export(f32_path, cfg, params, "f32", extra_kvs=extra)
    export_gguf.export(os.path.join(a.out_dir, "passkey.gguf"), cfg, params, "bf16", extra_kvs=extra)
    log("exported %s and passkey.gguf (bf16) at %.1f s" % (f32_path, time.time() - t0))
    result = {"final": last, "status": status, "train_s": train_s, "steps": n_run, "determinism": det}
    try:
        consistency_check(model, cfg, f32_path, dev, log)
    except Exception:
        log("ERROR consistency check: " + traceback.format_exc())
    try:
        sets = [tuple(int(x) for x in v.split("x")) for v in a.val.split(",") if v]
        result["val"] = val_loss(model, sets, mix, dev, a.w_copy, a.w_lm, log)
    except Exception:
        log("ERROR val loss: " + traceback.format_exc())
    try:
        lengths = [int(x) for x in a.eval_lengths.split(",") if x]
        result["accuracy"] = passkey_eval(model, lengths, [0, 25, 50, 75, 100], a.eval_keys, a.seed, dev, log)
    except Exception:
        log("ERROR torch eval: " + traceback.format_exc())
    with open(os.path.join(a.out_dir, "torch_eval.json"), "w") as f:
        json.dump(result, f)
    log("done at %.1f s" % (time.time() - t0))


if __name__ == "__main__":
    main()
