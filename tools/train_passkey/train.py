#!/usr/bin/env python3
"""train.py — trains octet's pass-key retrieval model (PyTorch, one GPU) and exports it to GGUF.

Owns: the torch twin of octet's Llama forward pass (src/model/forward.c; mirrored line by
line by ref_numpy.py), the curriculum of lengths, the loss, the end-of-run checks.
Not here: data generation (data.py), the GGUF writer (export_gguf.py).
Invariant: the torch model computes the function octet computes from the exported GGUF:
RMSNorm(eps) with weight, GQA (query head h reads KV head h // G), RoPE on adjacent pairs
(2i, 2i+1) with angle pos * theta^(-2i/head_dim), SwiGLU, no biases, untied output head.
Deterministic from --seed (data and init); GPU attention kernels may add run-to-run noise.

Example (on the GPU machine):
  python3 tools/train_passkey/train.py --out-dir OUT --seed 1
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

# Phases, comma-separated: PLANNED[>RUN]:MIN_LEN-MAX_LEN:TOKENS_PER_STEP[:CAP_S]
#   PLANNED steps place the phase on the learning-rate schedule; RUN (default PLANNED) steps are
#   executed; CAP_S (optional) stops a phase after that many seconds (a safety net: a phase
#   stopped by it makes the run depend on the GPU's speed, so the log says how many steps ran).
# The default is the committed model's run: its first attempt had 40 s / 30 s caps on phases 0/1,
# which stopped them after 335 and 214 steps on an H200; ">335" and ">214" replay that exactly.
DEFAULT_CURRICULUM = ("600>335:256-1024:65536,300>214:1024-4096:98304,150:4096-16384:131072,"
                      "80:16384-32768:131072,40:32768-65536:131072")


def parse_curriculum(s):
    out = []
    for ph in s.split(","):
        f = ph.split(":")
        planned, _, run = f[0].partition(">")
        lo, hi = f[1].split("-")
        out.append(dict(steps=int(planned), run=int(run or planned), lo=int(lo), hi=int(hi), tokens=int(f[2]),
                        cap_s=float(f[3]) if len(f) > 3 else float("inf")))
    return out


def build_model(cfg):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    D, H, KV, hd, Fd, V = cfg["dim"], cfg["n_heads"], cfg["n_kv_heads"], cfg["head_dim"], cfg["ffn_dim"], cfg["vocab"]
    G, eps = H // KV, cfg["norm_eps"]

    def rmsnorm(x, w):  # ref_numpy.rmsnorm, in float32
        x = x.float()
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w.float()

    def rope(x, cos, sin):  # x [B, T, heads, hd]; ref_numpy.rope: pairs (2i, 2i+1)
        x = x.float()
        x0, x1 = x[..., 0::2], x[..., 1::2]
        c, s = cos[None, :, None, :], sin[None, :, None, :]
        return torch.stack([x0 * c - x1 * s, x0 * s + x1 * c], dim=-1).flatten(-2)

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

        def forward(self, x, cos, sin, act_dtype):
            B, T, _ = x.shape
            h = rmsnorm(x, self.attn_norm).to(act_dtype)
            q = rope(self.wq(h).view(B, T, H, hd), cos, sin).to(act_dtype)
            k = rope(self.wk(h).view(B, T, KV, hd), cos, sin).to(act_dtype)
            v = self.wv(h).view(B, T, KV, hd).to(act_dtype)
            k = k.repeat_interleave(G, dim=2)  # query head h reads KV head h // G
            v = v.repeat_interleave(G, dim=2)
            o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
            x = x + self.wo(o.transpose(1, 2).reshape(B, T, H * hd)).float()
            h = rmsnorm(x, self.ffn_norm).to(act_dtype)
            g = self.w_gate(h)
            return x + self.w_down(F.silu(g) * self.w_up(h)).float()

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(V, D)
            self.layers = nn.ModuleList([Block() for _ in range(cfg["n_layers"])])
            self.norm_w = nn.Parameter(torch.ones(D))
            self.out = nn.Linear(D, V, bias=False)
            self._rope = None

        def rope_tables(self, T, device):
            if self._rope is None or self._rope[0].shape[0] < T:
                n = max(T, 1024)
                inv = 1.0 / cfg["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.float64, device=device) / hd)
                ang = torch.arange(n, dtype=torch.float64, device=device)[:, None] * inv[None, :]
                self._rope = (torch.cos(ang).float(), torch.sin(ang).float())
            return self._rope[0][:T], self._rope[1][:T]

        def hidden(self, ids, act_dtype=torch.bfloat16):
            cos, sin = self.rope_tables(ids.shape[1], ids.device)
            x = self.tok(ids).float()
            for blk in self.layers:
                x = blk(x, cos, sin, act_dtype)
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


def params_numpy(model, cfg):
    p = {"tok_embd": model.tok.weight, "out_norm": model.norm_w, "out": model.out.weight}
    for i, b in enumerate(model.layers):
        for short in ("attn_norm", "ffn_norm"):
            p["layers.%d.%s" % (i, short)] = getattr(b, short)
        for short in ("wq", "wk", "wv", "wo", "w_gate", "w_up", "w_down"):
            p["layers.%d.%s" % (i, short)] = getattr(b, short).weight
    return {k: v.detach().float().cpu().numpy() for k, v in p.items()}


def lr_at(step, total, peak, warmup, final_frac=0.1):
    if step < warmup:
        return peak * (step + 1) / warmup
    t = min(1.0, (step - warmup) / max(1, total - warmup))
    return peak * (final_frac + (1 - final_frac) * 0.5 * (1 + math.cos(math.pi * t)))


def passkey_eval(model, lengths, depths, n_keys, seed, device, log):
    """octet's exact needle prompts; a key counts as retrieved when the argmax at each answer
    position reproduces " KEY" given the correct prefix (= greedy decoding's first 6 tokens)."""
    import torch
    rng = np.random.default_rng(seed + 777)
    res = {}
    model.eval()
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
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


def consistency_check(model, cfg, gguf_path, log):
    """Torch (fp32 activations) vs the NumPy twin on the exported F32 GGUF, on a short prompt."""
    import torch
    import ref_numpy
    c2, p2 = ref_numpy.load(gguf_path)
    ids = data.octet_prompt(300, 50, "31415")
    ref = ref_numpy.forward(c2, p2, ids, np.float64)
    with torch.no_grad():
        t = torch.from_numpy(ids.astype(np.int64))[None].cuda()
        torch.set_float32_matmul_precision("highest")
        got = model.out(model.hidden(t, torch.float32)).double().cpu().numpy()[0]
        torch.set_float32_matmul_precision("high")
    diff = float(np.abs(got - ref).max())
    agree = float((got.argmax(-1) == ref.argmax(-1)).mean())
    log("consistency torch fp32 vs numpy twin (f32 gguf): max |dlogit| = %.3e, argmax agreement %.4f, logit scale %.2f"
        % (diff, agree, float(np.abs(ref).max())))
    return diff, agree


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--curriculum", default=DEFAULT_CURRICULUM)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--w-copy", type=float, default=0.3, help="weight of the in-needle key repeat")
    ap.add_argument("--w-lm", type=float, default=0.1, help="weight of all other predictable tokens")
    ap.add_argument("--mix", default="0.6,0.25,0.15", help="octet,varied,multi sample fractions")
    ap.add_argument("--eval-lengths", default="1024,4096,16384,32768,65536")
    ap.add_argument("--eval-keys", type=int, default=4)
    ap.add_argument("--log-every", type=int, default=10)
    for k in ("dim", "n_layers", "n_heads", "n_kv_heads", "head_dim", "ffn_dim"):
        ap.add_argument("--" + k.replace("_", "-"), type=int, default=export_gguf.DEFAULT_CFG[k])
    ap.add_argument("--rope-theta", type=float, default=1e6)
    a = ap.parse_args(argv)

    import torch
    import torch.nn.functional as F

    os.makedirs(a.out_dir, exist_ok=True)
    logf = open(os.path.join(a.out_dir, "train_log.txt"), "w")

    def log(s):
        print(s, flush=True)
        logf.write(s + "\n")
        logf.flush()

    t0 = time.time()
    phases = parse_curriculum(a.curriculum)
    cfg = dict(export_gguf.DEFAULT_CFG, dim=a.dim, n_layers=a.n_layers, n_heads=a.n_heads, n_kv_heads=a.n_kv_heads,
               head_dim=a.head_dim, ffn_dim=a.ffn_dim, rope_theta=a.rope_theta,
               context_length=max(p["hi"] for p in phases))
    log("config %s" % json.dumps(cfg))
    log("command %s" % " ".join(sys.argv))
    torch.manual_seed(a.seed)
    np_rng = np.random.default_rng(a.seed)
    torch.set_float32_matmul_precision("high")
    dev = torch.device("cuda")
    model = build_model(cfg).to(dev)
    init_weights(model, cfg)
    n_params = sum(p.numel() for p in model.parameters())
    log("parameters %d (%.2f M); torch %s; %s" % (n_params, n_params / 1e6, torch.__version__, torch.cuda.get_device_name()))
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=a.lr, betas=(0.9, 0.95), fused=True)
    mix = [float(x) for x in a.mix.split(",")]
    total_steps = sum(p["steps"] for p in phases)
    curve = open(os.path.join(a.out_dir, "loss_curve.tsv"), "w")
    curve.write("step\tphase\tlength\tn_seq\tloss\tans_ce\tcopy_ce\tlm_ce\tans_tok_acc\tans_seq_acc\tlr\telapsed_s\n")
    gstep, n_tokens, last, n_run = 0, 0, None, 0
    notes = []
    try:
        for pi, ph in enumerate(phases):
            p_t0 = time.time()
            base = sum(p["steps"] for p in phases[:pi])
            acc = None
            for s in range(min(ph["run"], ph["steps"])):
                if time.time() - p_t0 > ph["cap_s"]:
                    notes.append("phase %d stopped by its %.0f s time cap after %d of %d steps" % (pi, ph["cap_s"], s, ph["steps"]))
                    log("WARNING " + notes[-1])
                    break
                gstep = base + s
                L = int(round(math.exp(np_rng.uniform(math.log(ph["lo"]), math.log(ph["hi"])))))
                if np_rng.random() < 0.2:
                    L = ph["hi"]
                n_seq = max(1, ph["tokens"] // L)
                ids_np, kinds_np = data.batch(np_rng, L, n_seq, mix)
                ids = torch.from_numpy(ids_np.astype(np.int64)).to(dev, non_blocking=True)
                kinds = torch.from_numpy(kinds_np.astype(np.int64)).to(dev, non_blocking=True)
                lr = lr_at(gstep, total_steps, a.lr, a.warmup)
                for g in opt.param_groups:
                    g["lr"] = lr
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    logits = model(ids[:, :-1])
                tgt = ids[:, 1:]
                ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1), reduction="none").view_as(tgt)
                m_ans, m_copy = (kinds == data.ANS).float(), (kinds == data.COPY).float()
                m_lm = (kinds == data.LM).float()
                ans_ce = (ce * m_ans).sum() / m_ans.sum().clamp(min=1)
                copy_ce = (ce * m_copy).sum() / m_copy.sum().clamp(min=1)
                lm_ce = (ce * m_lm).sum() / m_lm.sum().clamp(min=1)
                loss = ans_ce + a.w_copy * copy_ce + a.w_lm * lm_ce
                opt.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                with torch.no_grad():
                    right = (logits.argmax(-1) == tgt).float()
                    tok_acc = (right * m_ans).sum() / m_ans.sum().clamp(min=1)
                    seq_acc = (((right * m_ans).sum(1) == m_ans.sum(1)).float()).mean()
                    cur = torch.stack([loss.detach(), ans_ce.detach(), copy_ce.detach(), lm_ce.detach(), tok_acc, seq_acc])
                    acc = cur if acc is None else acc + cur
                n_tokens += ids.numel()
                del logits, ce
                n_run += 1
                if (s + 1) % a.log_every == 0 or s + 1 == min(ph["run"], ph["steps"]):
                    k = (s % a.log_every) + 1
                    v = (acc / k).tolist()
                    acc = None
                    last = v
                    el = time.time() - t0
                    curve.write("%d\t%d\t%d\t%d\t%.5f\t%.5f\t%.5f\t%.5f\t%.4f\t%.4f\t%.3e\t%.1f\n"
                                % (gstep + 1, pi, L, n_seq, v[0], v[1], v[2], v[3], v[4], v[5], lr, el))
                    curve.flush()
                    log("step %4d ph %d L %6d x%3d loss %.4f ans %.4f copy %.4f lm %.4f tok_acc %.3f seq_acc %.3f lr %.2e %.0fs %.2fM tok/s"
                        % (gstep + 1, pi, L, n_seq, v[0], v[1], v[2], v[3], v[4], v[5], lr, el, n_tokens / el / 1e6))
            log("phase %d done at %.1f s (%d steps run so far)" % (pi, time.time() - t0, n_run))
    except Exception:
        notes.append("training stopped by an error at step %d: %s" % (gstep, traceback.format_exc().strip().splitlines()[-1]))
        log("ERROR " + traceback.format_exc())
    train_s = time.time() - t0
    status = "; ".join(notes) if notes else "complete"
    log("training: %s; %.1f s, %d steps run (last schedule position %d of %d), %.1f M tokens, peak GPU memory %.1f GiB"
        % (status, train_s, n_run, gstep + 1, total_steps, n_tokens / 1e6, torch.cuda.max_memory_allocated() / 2**30))

    params = params_numpy(model, cfg)
    meta = {"octet.train.seed": str(a.seed), "octet.train.curriculum": a.curriculum, "octet.train.status": status,
            "octet.train.final_loss": json.dumps(last), "octet.train.steps": str(n_run),
            "octet.train.command": "python3 tools/train_passkey/train.py " + " ".join(argv if argv else sys.argv[1:])}
    extra = [(k, export_gguf.GGUF_STR, v) for k, v in meta.items()]
    f32_path = os.path.join(a.out_dir, "passkey_f32.gguf")
    export_gguf.export(f32_path, cfg, params, "f32", extra_kvs=extra)
    export_gguf.export(os.path.join(a.out_dir, "passkey.gguf"), cfg, params, "bf16", extra_kvs=extra)
    log("exported %s and passkey.gguf (bf16) at %.1f s" % (f32_path, time.time() - t0))
    try:
        consistency_check(model, cfg, f32_path, log)
    except Exception:
        log("ERROR consistency check: " + traceback.format_exc())
    try:
        lengths = [int(x) for x in a.eval_lengths.split(",") if x]
        res = passkey_eval(model, lengths, [0, 25, 50, 75, 100], a.eval_keys, a.seed, dev, log)
        with open(os.path.join(a.out_dir, "torch_eval.json"), "w") as f:
            json.dump({"final": last, "status": status, "train_s": train_s, "accuracy": res}, f)
    except Exception:
        log("ERROR torch eval: " + traceback.format_exc())
    log("done at %.1f s" % (time.time() - t0))


if __name__ == "__main__":
    main()
