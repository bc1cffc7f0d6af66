#!/usr/bin/env python3
# gpu_report.py KIND FILE... — the short tables and summary lines scripts/gpu_check.sh prints from
# each stage's raw output (ncu CSV, bench JSON lines, sweep JSON). Owns: the parsing, so that it
# can be tested on recorded files without a GPU (tests/bench/test_gpu_report.sh).
#   prof CSV                 ncu sections, stall ratios and pipe use per tagged kernel
#   ncu_times CSV...         per-kernel median times (gpu__time_duration) of one decode step
#   step CSV...              the last forward pass's kernel times, summed by kernel (ncu_*, step_*)
#   source CSV               ncu's per-SASS-instruction page (--page source --print-source sass --csv):
#                            warp stall samples by opcode and the instructions that hold the most
#   attn JSONL | fp8prefill JSONL | gemv JSONL | model JSONL | depth JSONL | pd JSONL
#   needle JSON | ttft SWEEP_JSON MODEL | itl SWEEP_JSON | load THROUGHPUT_JSON
#   same OPS_JSON OPS_JSON   which test_cuda_ops checks' GPU outputs hash alike in both runs
#   pack RAW_DIR DEST_DIR     one DEST/<stage>.json per stage with its raw files (JSON parsed, logs' tails)
import csv
import json
import statistics
import sys


def num(v):  # an ncu value ("1,234.5") as a float, or None
    try:
        return float(v.replace(",", ""))
    except ValueError:
        return None


def prof(argv):
    rows = list(csv.reader(open(argv[1])))
    keep = ("Duration", "DRAM Throughput", "Memory Throughput", "Compute (SM) Throughput", "Achieved Occupancy",
            "Registers Per Thread", "Warp Cycles Per Issued Instruction", "Issue Slots Busy")
    hdr = next((r for r in rows if "Metric Name" in r), None)
    if not hdr: print("prof: no ncu rows"); return
    mi, vi, ui = hdr.index("Metric Name"), hdr.index("Metric Value"), hdr.index("Metric Unit")
    by = {}
    for r in rows:
        if r is hdr or len(r) <= vi or r[mi] == "Metric Name": continue  # (data rows lack the rule columns)
        by.setdefault(r[0], []).append(r)
    for tag, rs in by.items():
        got = {r[mi]: f"{r[vi]} {r[ui]}".strip() for r in rs if r[mi] in keep}
        stalls = sorted(((num(r[vi]), r[mi].split("issue_stalled_")[1].split("_per_issue")[0]) for r in rs
                         if "issue_stalled_" in r[mi] and num(r[vi]) is not None), reverse=True)[:4]
        pipes = [(r[mi].split("__")[1].split(".")[0], num(r[vi])) for r in rs if r[mi].startswith(("sm__pipe_", "sm__inst_executed_pipe_"))]
        print(f"prof {tag}: " + "; ".join(f"{k} {got[k]}" for k in keep if k in got)
              + ("; top stalls (warps per issue) " + ", ".join(f"{n} {v:.2f}" for v, n in stalls) if stalls else "")
              + ("; pipes % of peak " + ", ".join(f"{n} {v:.1f}" for n, v in pipes if v is not None) if pipes else ""))


def attn(argv):
    rows = [json.loads(l) for l in open(argv[1]) if l.strip().startswith("{")]
    peer = {(r["batch"], r["len"]): r["ms"] * 1000 for r in rows if "peer" in r}
    print("| shape | kv | octet us | GB/s | cuDNN bf16 us | ratio |")
    for r in rows:
        if "peer" in r: continue
        p = peer.get((r["batch"], r["len"]))
        tag = "" if r["backend"] == "cuda" else " (" + r["backend"] + ")"
        tag += f" [{r['variant']}]" if "variant" in r else ""
        print(f"| B={r['batch']} L={r['len']} | {r['kv_dtype']}{tag} | {r['us']:.1f} | {r['kv_GBps']:.0f} | {p or 0:.1f} | {r['us']/p if p else 0:.3f} |")


def fp8prefill(argv):
    rows = [json.loads(l) for l in open(argv[1]) if l.strip().startswith("{")]
    peer = {}
    for r in rows:
        if "peer" in r:
            L, d = r["len"], r["head_dim"]
            peer[(L, d)] = 4.0 * r["heads"] * d * L * L / 2 / (r["ms"] * 1e-3) / 1e12
    print("| L | d | kv | accumulation | octet TFLOP/s | cuDNN bf16 TFLOP/s | ratio |")
    for r in rows:
        if "peer" in r: continue
        p = peer.get((r["len"], r["head_dim"]), 0)
        acc = r.get("accumulation", "") if r["kv_dtype"] != "bf16" else "-"
        print(f"| {r['len']} | {r['head_dim']} | {r['kv_dtype']} | {acc} | {r['TFLOPs']:.0f} | {p:.0f} | {r['TFLOPs']/p if p else 0:.2f} |")


def needle(argv):
    o = json.load(open(argv[1]))
    print("| length | kv | kernel | rel L2 vs f64 | cos(needle) | best distractor | retrieved |")
    for r in o["rows"]:
        print(f"| {r['length']} | {r['kv_cache_dtype']} | {r['attention_math']} | {r['rel_l2']:.3e} | {r['cos_needle']:.4f} | {r['cos_distractor']:.4f} | {'yes' if r['retrieved'] else 'NO'} |")


def cfg_key(c):  # a sweep configuration's cache type: "auto (bf16)" -> "auto", "fp8" -> "fp8"
    return c["name"].split(" (")[0]


def ttft(argv):
    j = json.load(open(argv[1]))
    fits = {cfg_key(c): c["ttft_fit"] for c in j["configs"] if c.get("ttft_fit")}
    line = ", ".join(f"{n}: a={f['a']:.3e} ms/tok^2 (R2 {f['r2']:.4f})" for n, f in fits.items())
    ratio = fits["fp8"]["a"] / fits["auto"]["a"] if "fp8" in fits and "auto" in fits else float("nan")
    print(f"ttft {argv[2]}: {line}; fp8/auto quadratic = {ratio:.3f}")


def study(argv):  # a sweep of several --config runs: each one's ITL and TTFT fits, and its ratios to the first
    j = json.load(open(argv[1]))
    cs = [c for c in j["configs"] if c.get("itl_fit") and c.get("ttft_fit")]
    if not cs:
        print("study: no config has both fits"); return
    b = cs[0]
    print(f"| config | ITL slope ms/token | intercept ms | slope ÷ {b['name']} | TTFT a ms/tok^2 | a ÷ {b['name']} | TTFT at longest ms |")
    for c in cs:
        f, t = c["itl_fit"], c["ttft_fit"]
        last = max(c["points"], key=lambda p: p["input_len"])
        print(f"| {c['name']} | {f['slope_ms_per_token']:.3e} | {f['intercept_ms']:.2f} | "
              f"{f['slope_ms_per_token'] / b['itl_fit']['slope_ms_per_token']:.3f} | {t['a']:.3e} | "
              f"{t['a'] / b['ttft_fit']['a']:.3f} | {last.get('ttft_ms', 0):.0f} @ {last['input_len']} |")


def slopes(argv):  # sweeps of one model, one per file (each its own call's server): every configuration's ITL
    cs = [c for f in argv[1:] for c in json.load(open(f))["configs"] if c.get("itl_fit")]  # fit, against the first
    if not cs:
        print("slopes: no configuration has an ITL fit"); return
    b = cs[0]["itl_fit"]["slope_ms_per_token"]
    for c in cs:
        f = c["itl_fit"]
        pts = ", ".join(f"{p['input_len']} {p['itl_ms']:.2f}/{p.get('ttft_ms', 0):.0f}" for p in c["points"])
        print(f"{c['name']}: ITL slope {f['slope_ms_per_token']:.3e} ms/token, intercept {f['intercept_ms']:.2f} ms, "
              f"slope / {cs[0]['name']} {f['slope_ms_per_token'] / b:.3f}; ITL/TTFT ms by length: {pts}")


def gemv(argv):
    rows = [json.loads(l) for l in open(argv[1])]
    for key in sorted({(r["shape"], r["n"]) for r in rows}, key=lambda k: (k[1], k[0])):
        rs = [r for r in rows if (r["shape"], r["n"]) == key]
        d = next(r for r in rs if "default" in r["variant"])
        b = min(rs, key=lambda r: r["us"])
        print(f"gemv {key[0]} n={key[1]}: default {d['us']:.1f} us ({d['GBps']:.0f} GB/s, {d['GBps'] / d['copy_GBps']:.2f} of copy); "
              f"best {b['variant']} {b['us']:.1f} us; worst err {max(r['max_rel_err'] for r in rs):.1e}")


def model(argv):
    for l in open(argv[1]):
        if l.startswith("{"):
            d = json.loads(l)
            print(f"model dummy:llama-3.1-8b ({d['variant']}): pp64 {d['pp_tok_s_median']:.0f} tok/s, tg64 {d['tg_tok_s_median']:.1f} tok/s = {1000 / d['tg_tok_s_median']:.2f} ms/token")


def depth(argv):
    rows = [json.loads(l) for l in open(argv[1]) if l.startswith("{")]
    for v in dict.fromkeys(r["variant"] for r in rows):
        ms = {(r["kv_cache_dtype"], r["depth"]): r for r in rows if r["variant"] == v}
        cells = [f"d{d}: {ms[('auto', d)]['tg_ms_per_token']:.3f}/{ms[('fp8', d)]['tg_ms_per_token']:.3f} "
                 f"({ms[('fp8', d)].get('tg_ms_diff_paired_median', float('nan')) * 1e3:+.0f} us paired)"
                 for d in sorted({d for _, d in ms}) if ("auto", d) in ms and ("fp8", d) in ms]
        print(f"decode ms/token bf16/fp8 ({v}): " + ", ".join(cells))


def ncu_kernels(f):  # [(kernel short name, ns)] of an ncu --csv gpu__time_duration file, in launch order; None: no rows
    rows = list(csv.reader(open(f)))
    hi = next((i for i, r in enumerate(rows) if "Kernel Name" in r and "Metric Value" in r), None)
    if hi is None:
        return None
    h = rows[hi]
    ki, vi = h.index("Kernel Name"), h.index("Metric Value")
    name = lambda k: k.split("<")[0].split("(")[0].replace("void ", "").strip()
    return [(name(r[ki]), float(r[vi].replace(",", ""))) for r in rows[hi + 1:] if len(r) == len(h)]


def ncu_times(argv):
    for f in argv[1:]:
        ks = ncu_kernels(f)
        if ks is None: print(f"ncu {f}: no kernel rows"); continue
        t = {}
        for k, ns in ks:
            t.setdefault(k, []).append(ns)
        print(f"ncu depth 4096 {f.split('/')[-1][4:-4]}: " + ", ".join(f"{k} x{len(v)} median {statistics.median(v) / 1e3:.2f} us" for k, v in t.items()))


def step(argv):  # the last forward pass in each file (from its last k_get_rows on): kernel time by name
    for f in argv[1:]:
        label = f.split("/")[-1].rsplit(".", 1)[0]
        label = label[5:] if label.startswith("step_") else label
        ks = ncu_kernels(f)
        starts = [i for i, (k, _) in enumerate(ks or []) if k == "k_get_rows"]
        if not starts: print(f"step {label}: no forward pass found"); continue
        last = ks[starts[-1]:]
        t = {}
        for k, ns in last:
            n, tot = t.get(k, (0, 0.0))
            t[k] = (n + 1, tot + ns)
        total = sum(ns for _, ns in last)
        top = sorted(t.items(), key=lambda kv: -kv[1][1])
        print(f"step {label}: {total / 1e3:.1f} us in {len(last)} kernels; "
              + ", ".join(f"{k} x{n} {tot / 1e3:.1f} us ({100 * tot / total:.0f} %)" for k, (n, tot) in top[:8]))


def itl(argv):
    j = json.load(open(argv[1]))
    fits = {cfg_key(c): c["itl_fit"] for c in j["configs"] if c.get("itl_fit")}
    for n, f in fits.items():
        print(f"itl {n}: slope {f['slope_ms_per_token']:.3e} ms/token, intercept {f['intercept_ms']:.2f} ms (R2 {f['r2']:.3f})")
    if "fp8" in fits and "auto" in fits:
        vs = next((c.get("vs_first") for c in j["configs"] if cfg_key(c) == "fp8"), None) or {}
        se = vs.get("slope_ratio_pct_se")  # (older sweeps lack it)
        be = vs.get("break_even")
        print(f"itl fp8/auto slope = {fits['fp8']['slope_ms_per_token'] / fits['auto']['slope_ms_per_token']:.3f}"
              + (f" ± {se / 100:.3f}" if se is not None else "") + (f", break-even {be}" if be is not None else ""))
        # between neighbouring lengths (not the goal's figure, which is the fit over every length: where
        # the fit's ratio comes from — the long lengths' increments are the cache's reading rate)
        pts = {cfg_key(c): {p["input_len"]: p["itl_ms"] for p in c["points"]} for c in j["configs"] if cfg_key(c) in ("auto", "fp8")}
        lens = sorted(set(pts["auto"]) & set(pts["fp8"]))
        inc = []
        for a, b in zip(lens, lens[1:]):
            da, df = ((pts[n][b] - pts[n][a]) / (b - a) for n in ("auto", "fp8"))
            inc.append(f"{a}->{b} {df / da:.3f}" if da > 0 else f"{a}->{b} -")
        if inc:
            print("itl fp8/auto increments: " + ", ".join(inc))
        # each length's first and last quarter of the output (older sweeps lack them)
        for c in j["configs"]:
            q = [(p["input_len"], p["itl_quarters_ms"]) for p in c["points"] if p.get("itl_quarters_ms")]
            if q:
                print(f"itl {c['name']} quarters (first/last ms): " + ", ".join(f"{n} {v[0]:.3f}/{v[-1]:.3f}" for n, v in q))


def load(argv):
    j = json.load(open(argv[1]))
    tp = {c["name"]: c["result"]["output_throughput"] for c in j["configs"] if c.get("result")}
    names = list(tp)  # every configuration against the first (the sweep's own comparison)
    print("load: " + ", ".join(f"{n} {v:.1f} output tok/s" for n, v in tp.items())
          + "".join(f"; {n} / {names[0]} = {tp[n] / tp[names[0]]:.3f}" for n in names[1:] if tp[names[0]]))
    for c in j["configs"]:  # where an octet server's time went (older runs and other engines lack "steps")
        st = {k: v for k, v in c.get("steps", {}).items() if v["steps"]}
        total = sum(v["forward_s"] + v["host_s"] for v in c.get("steps", {}).values())
        if st and total > 0:
            print(f"load steps {c['name']}: " + "; ".join(
                f"{k} {v['steps']} x {1e3 * (v['forward_s'] + v['host_s']) / v['steps']:.2f} ms "
                f"(forward {1e3 * v['forward_s'] / v['steps']:.2f}, host {1e3 * v['host_s'] / v['steps']:.2f}; "
                f"{v['decode_tokens'] / v['steps']:.1f} decode + {v['prefill_tokens'] / v['steps']:.0f} prefill tokens; "
                f"{100 * (v['forward_s'] + v['host_s']) / total:.0f} % of the time)" for k, v in st.items()))
    for c in j["configs"]:  # failed requests make the rates meaningless: name them
        if c.get("failed"):
            errs = sorted({e for e in c.get("errors", []) if e})
            print(f"load {c['name']}: {c['failed']} of {c.get('completed', 0) + c['failed']} requests FAILED ({'; '.join(errs)[:200]}): not a throughput measurement")


def pd(argv):
    rows = [json.loads(l) for l in open(argv[1]) if l.startswith("{")]
    by = {(r.get("mode", "default"), r["kv"], r["step"]): r["ppl"] for r in rows}
    modes = sorted({m for m, _, _ in by}, key=lambda m: (len(m), m))  # default, identity, then -bsN
    for mode in modes:
        base, _, bs = mode.partition("-bs")
        name = ("--batch-invariant" if base == "identity" else base) + (f", {bs}-token blocks" if bs else "")
        for kv in ("bf16", "fp8"):
            a, b = by.get((mode, kv, 1)), by.get((mode, kv, 256))
            if a and b:
                print(f"prefill vs decode ({name}), dummy:llama-3.1-8b {kv}: ppl token-by-token {a!r}, one 256-token prefill {b!r}, "
                      f"rel. diff {abs(a-b)/b:.2e}{' (identical)' if a == b else ''}")
            if bs:  # against the same mode with 16-token blocks
                for step in (1, 256):
                    x, y = by.get((mode, kv, step)), by.get((base, kv, step))
                    if x and y:
                        print(f"  {bs}- vs 16-token blocks ({base}, {kv}, step {step}): {x!r} vs {y!r}, rel. diff {abs(x-y)/y:.2e}{' (identical)' if x == y else ''}")


def source(argv):
    rows = list(csv.reader(open(argv[1], errors="replace")))
    hi = next((i for i, r in enumerate(rows) if r and r[0] == "Address" and "Source" in r), None)
    if hi is None: print("source: no ncu source rows"); return
    h = rows[hi]
    si, ei, ti = h.index("Source"), h.index("Instructions Executed"), h.index("Warp Stall Sampling (All Samples)")
    # the stall reasons of every sample (ncu's stall_* columns, all samples: not the "(Not Issued)" ones)
    sc = [(j, c[len("stall_"):]) for j, c in enumerate(h) if c.startswith("stall_") and "(" not in c]
    data, why = [], []
    for r in rows[hi + 1:]:
        if len(r) <= max(si, ei, ti) or num(r[ti] or "0") is None: continue
        data.append((num(r[ti] or "0"), num(r[ei] or "0") or 0.0, r[si].strip()))
        why.append({name: num(r[j] or "0") or 0.0 for j, name in sc if j < len(r)})

    def reasons(idx, k=3):  # the k largest stall reasons over the instructions idx, as "name %"
        acc = {}
        for i in idx:
            for name, v in why[i].items(): acc[name] = acc.get(name, 0.0) + v
        t = sum(acc.values())
        if t <= 0: return ""
        return " [" + ", ".join(f"{n} {100 * v / t:.0f} %" for n, v in sorted(acc.items(), key=lambda kv: -kv[1])[:k]) + "]"
    tot = sum(d[0] for d in data) or 1.0
    by, ex = {}, {}
    for smp, e, text in data:
        words = [w for w in text.split() if not w.startswith("@")]
        op = words[0].split(".")[0] if words else "?"
        by[op] = by.get(op, 0.0) + smp
        ex[op] = ex.get(op, 0.0) + e
    print(f"source: {len(data)} instructions, {tot:.0f} stall samples, {sum(d[1] for d in data):.0f} warp instructions executed")
    print("source by opcode: " + ", ".join(f"{k} {100 * v / tot:.1f} %" for k, v in sorted(by.items(), key=lambda kv: -kv[1])[:10]))
    # the top instructions; a branch stalled on a wait names the instruction it waits behind
    # (a SYNCS.PHASECHK up to 3 instructions before it: which mbarrier a warp sleeps on)
    order = sorted(range(len(data)), key=lambda i: -data[i][0])
    for i in order[:int(argv[2]) if len(argv) > 2 else 8]:
        smp, e, text = data[i]
        w = next((j for j in range(i - 1, max(i - 4, -1), -1) if "SYNCS" in data[j][2]), None) if "BRA" in text else None
        after = f" (after: {data[w][2]})" if w is not None else ""
        print(f"source top: {100 * smp / tot:5.2f} % of samples, executed {e:.0f}: {text}{after}{reasons([i], 2)}")
    # straight-line regions: runs of consecutive instructions executed equally often (a loop body,
    # a tile's consumer code, a wait loop), by their share of the samples
    regions, cur = [], None
    for i, (smp, e, text) in enumerate(data):
        if cur and cur[1] == e: cur[0] += smp; cur[2] += 1
        else: cur = [smp, e, 1, text, i]; regions.append(cur)
    for smp, e, n, text, i0 in sorted(regions, key=lambda r: -r[0])[:int(argv[3]) if len(argv) > 3 else 6]:
        print(f"source region: {100 * smp / tot:5.2f} % of samples, {n} instructions executed {e:.0f} times each, from: {text}"
              f"{reasons(range(i0, i0 + n))}")


def compare(argv):  # compare.jsonl from gpu_check.sh's compare stage: medians per (measure, build), new / base
    rows = [json.loads(l) for l in open(argv[1]) if l.strip().startswith("{")]
    def value(r):  # (number, unit): decode µs, prefill TFLOP/s, model tg ms/token and pp tok/s
        if "TFLOPs" in r: return r["TFLOPs"], "TFLOP/s"
        if "us" in r: return r["us"], "us"
        return 1000 / r["tg_tok_s_median"], "tg ms/token"
    def median(v):
        v = sorted(v); n = len(v)
        return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2
    print("| measure | unit | base (median) | new (median) | new / base | rounds |")
    print("|---|---|---:|---:|---:|---:|")
    worst = 0.0
    for m in dict.fromkeys(r["measure"] for r in rows):
        got = {b: [value(r)[0] for r in rows if r["measure"] == m and r["build"] == b] for b in ("base", "new")}
        unit = value(next(r for r in rows if r["measure"] == m))[1]
        if not got["base"] or not got["new"]:
            print(f"| {m} | {unit} | missing | missing | - | - |"); worst = float("inf"); continue
        a, b = median(got["base"]), median(got["new"])
        print(f"| {m} | {unit} | {a:.1f} | {b:.1f} | {b / a:.3f} | {min(len(got['base']), len(got['new']))} |")
        worst = max(worst, abs(b / a - 1))
    print(f"compare: largest change {worst * 100:.1f} %")


def same(argv):  # two test_cuda_ops JSON reports: which checks' GPU outputs are bit-identical (gpu_fnv1a)
    def hashes(f):
        return {r["check"]: r["detail"].split()[1] for r in json.load(open(f))  # (the hash; a kernel name may follow)
                if r.get("detail", "").startswith("gpu_fnv1a ")}
    a, b = hashes(argv[1]), hashes(argv[2])
    both = [k for k in a if k in b]
    differ = [k for k in both if a[k] != b[k]]
    print(f"same: {len(both) - len(differ)} of {len(both)} GPU outputs bit-identical"
          + ("; differ: " + "; ".join(differ[:int(argv[3]) if len(argv) > 3 else 8]) if differ else ""))


# The stage a raw gpu_check.sh output file belongs to, from its name (most files are named after
# their stage; these are the exceptions).
PACK_STAGE = {"ops_base": "compare", "ops_new": "compare", "ko": "golden", "calib": "golden", "eval": "golden",
              "prof1": "prof", "serve": "async", "throughput": "load", "sweep": "itl", "build": "gpu"}


def pack(argv):  # pack RAW_DIR DEST_DIR: one DEST/<stage>.json per stage holding its raw files
    import os
    import re
    raw, dest = argv[1], argv[2]
    stages = {}
    for root, _, names in os.walk(raw):
        for n in sorted(names):
            path = os.path.join(root, n)
            rel = os.path.relpath(path, raw)
            if n.endswith((".png", ".svg")) or rel == "summary.txt":
                continue
            tok = re.split(r"[._]", rel.split(os.sep)[0])
            stage = PACK_STAGE.get("_".join(tok[:2]), PACK_STAGE.get(tok[0], tok[0]))
            text = open(path, errors="replace").read()
            if n.endswith(".json"):
                try:
                    value = json.loads(text)
                except ValueError:
                    value = text
            elif n.endswith(".jsonl"):
                value = []
                for line in text.splitlines():
                    try:
                        value.append(json.loads(line))
                    except ValueError:
                        value.append(line)
            else:  # logs and CSV: the last 400 lines (the whole file is in logs.tar.xz)
                value = "\n".join(text.splitlines()[-400:])
            stages.setdefault(stage, {})[rel] = value
    for stage, files in sorted(stages.items()):
        with open(os.path.join(dest, stage + ".json"), "w") as f:
            json.dump({"stage": stage, "files": files}, f, indent=1)
    print("pack: " + ", ".join(f"{s}.json ({len(f)} files)" for s, f in sorted(stages.items())))


KINDS = {f.__name__: f for f in (prof, attn, fp8prefill, needle, ttft, gemv, model, depth, ncu_times, step, itl, study, slopes, load, pd, source,
                                       same, compare, pack)}

if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in KINDS:
        sys.exit("usage: gpu_report.py {" + "|".join(KINDS) + "} FILE...")
    KINDS[sys.argv[1]](sys.argv[1:])  # (argv[0] is the kind, argv[1:] the files, as in the heredocs it came from)
