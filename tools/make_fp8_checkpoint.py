"""Writes an FP8 copy of a Hugging Face safetensors checkpoint, as FP8 checkpoints on the Hub are
laid out, from its F32/F16/BF16 weights (NumPy only; the quantization math is docs/fp8_weights.md).

  /usr/bin/python3 tools/make_fp8_checkpoint.py SRC_DIR DST_DIR --format fp8|compressed-tensors
      [--weights tensor|channel|block] [--activations dynamic|static] [--input-amax A] [--ignore NAME ...]

Every 2-D tensor named *_proj.weight (mixture-of-experts experts' too, one tensor per expert as Qwen3-MoE
FP8 checkpoints store them), Mixtral's experts' w1/w2/w3, and lm_head.weight, becomes e4m3 codes plus f32 scales unless an
--ignore entry is a substring of its module name: scale = amax / 448 over the tensor, each output row,
or each 128x128 tile (1 for an all-zero group), code = round-to-nearest-even saturating e4m3 of
float32(w / scale) -- the same arithmetic as octet's `--quantization fp8`, so a per-channel or block
checkpoint equals octet's own quantization of SRC bit for bit.
  fp8 (transformers' FineGrainedFP8 / vLLM's Fp8Config): "<m>.weight_scale_inv", [] per tensor or
      [ceil(out/128), ceil(in/128)] with weight_block_size [128, 128]; static "<m>.input_scale" [];
      ignore list "modules_to_not_convert".
  compressed-tensors (float-quantized): "<m>.weight_scale" [1] per tensor, [out, 1] per channel,
      [ceil(out/128), ceil(in/128)] block; static "<m>.input_scale" [1]; ignore list "ignore".
Static activation scales are one value for every layer, input_amax / 448 (default amax 8): a fixture's
scale, not a calibration.
"""
import argparse
import json
import os
import shutil
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "ref"))
from ref_fp8_weights import encode  # noqa: E402

DT = {"F32": (np.float32, 4), "F16": (np.float16, 2), "BF16": (np.uint16, 2)}


def read_st(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b0, b1 = e["data_offsets"]
        raw = data[b0:b1]
        if e["dtype"] not in DT:
            sys.exit(f"{path}: tensor {name} has dtype {e['dtype']} (F32, F16 or BF16 expected)")
        a = np.frombuffer(raw, dtype=DT[e["dtype"]][0]).reshape(e["shape"])
        if e["dtype"] == "BF16":
            a = (a.astype(np.uint32) << 16).view(np.float32)
        out[name] = (e["dtype"], a.astype(np.float32), raw)
    return out


def write_st(path, items):
    """items: list of (name, dtype string, shape, raw bytes)."""
    header, off = {"__metadata__": {"format": "pt"}}, 0
    for name, dt, shape, raw in items:
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(raw)]}
        off += len(raw)
    hb = json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * (-len(hb) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for item in items:
            f.write(item[3])


def scale_of(amax):
    s = np.float32(amax) / np.float32(448.0)
    return s if s > 0 else np.float32(1.0)


def quantize(w, how):
    """w: float32 [out, in] -> (codes uint8 [out, in], scales float32)."""
    R, C = w.shape
    if how == "tensor":
        s = np.array([scale_of(np.max(np.abs(w)))], dtype=np.float32)
        return encode((w / s[0]).astype(np.float32), "e4m3"), s
    if how == "channel":
        s = np.array([scale_of(np.max(np.abs(row))) for row in w], dtype=np.float32)
        return encode((w / s[:, None]).astype(np.float32), "e4m3"), s
    B = 128
    nbr, nbc = (R + B - 1) // B, (C + B - 1) // B
    s = np.zeros((nbr, nbc), dtype=np.float32)
    q = np.zeros((R, C), dtype=np.uint8)
    for i in range(nbr):
        for j in range(nbc):
            tile = w[i * B:(i + 1) * B, j * B:(j + 1) * B]
            s[i, j] = scale_of(np.max(np.abs(tile)))
            q[i * B:(i + 1) * B, j * B:(j + 1) * B] = encode((tile / s[i, j]).astype(np.float32), "e4m3")
    return q, s


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--format", choices=["fp8", "compressed-tensors"], required=True)
    ap.add_argument("--weights", choices=["tensor", "channel", "block"], default="tensor")
    ap.add_argument("--activations", choices=["dynamic", "static"], default="dynamic")
    ap.add_argument("--input-amax", type=float, default=8.0)
    ap.add_argument("--ignore", nargs="*", default=[])
    a = ap.parse_args()
    if a.format == "fp8" and a.weights == "channel":
        sys.exit("quant_method fp8 has per-tensor or block scales; per-channel is compressed-tensors")
    os.makedirs(a.dst, exist_ok=True)
    for f in os.listdir(a.src):
        if f not in ("config.json", "model.safetensors") and os.path.isfile(os.path.join(a.src, f)):
            shutil.copy(os.path.join(a.src, f), os.path.join(a.dst, f))
    tensors = read_st(os.path.join(a.src, "model.safetensors"))
    ct = a.format == "compressed-tensors"
    items = []
    for name, (dt, arr, raw) in tensors.items():
        module = name[: -len(".weight")] if name.endswith(".weight") else name
        expert_w = ".experts." in name and name.endswith((".w1.weight", ".w2.weight", ".w3.weight"))  # Mixtral
        linear = arr.ndim == 2 and (name.endswith("_proj.weight") or name == "lm_head.weight" or expert_w)
        if not linear or any(e in module for e in a.ignore):
            items.append((name, dt, arr.shape, raw))
            continue
        q, s = quantize(arr, a.weights)
        items.append((name, "F8_E4M3", q.shape, q.tobytes()))
        shape = {"tensor": [1] if ct else [], "channel": [len(s), 1], "block": list(s.shape)}[a.weights]
        items.append((module + (".weight_scale" if ct else ".weight_scale_inv"), "F32", shape, s.tobytes()))
        if a.activations == "static":
            isc = np.array([np.float32(a.input_amax) / np.float32(448.0)], dtype=np.float32)
            items.append((module + ".input_scale", "F32", [1] if ct else [], isc.tobytes()))
    write_st(os.path.join(a.dst, "model.safetensors"), items)
    with open(os.path.join(a.src, "config.json")) as f:
        cfg = json.load(f)
    if ct:
        w = {"num_bits": 8, "type": "float", "strategy": a.weights, "dynamic": False, "symmetric": True}
        if a.weights == "block":
            w["block_structure"] = [128, 128]
        act = {"num_bits": 8, "type": "float", "strategy": "token" if a.activations == "dynamic" else "tensor",
               "dynamic": a.activations == "dynamic", "symmetric": True}
        cfg["quantization_config"] = {
            "quant_method": "compressed-tensors", "format": "float-quantized", "quantization_status": "compressed",
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": w, "input_activations": act,
                                          "output_activations": None}},
            "ignore": a.ignore, "kv_cache_scheme": None}
    else:
        cfg["quantization_config"] = {"quant_method": "fp8", "activation_scheme": a.activations,
                                      "modules_to_not_convert": a.ignore or None}
        if a.weights == "block":
            cfg["quantization_config"]["weight_block_size"] = [128, 128]
    with open(os.path.join(a.dst, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    n_fp8 = sum(1 for i in items if i[1] == "F8_E4M3")
    print(f"wrote {a.dst}: {a.format}, {a.weights} weights, {a.activations} activations, {n_fp8} fp8 tensors")


if __name__ == "__main__":
    main()
