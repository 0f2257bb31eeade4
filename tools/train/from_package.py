"""Turns a q4/q8/bf16 Splash package of the dense Qwen3.5 family back into the training checkpoints `--init-from`
(train.py) and `--init-draft` (draft.py) read, so a later run continues the shipped model without carrying its bf16
shards (which do not fit beside the checkout in what travels to the GPU machine).

  python3 tools/train/from_package.py --package packages/default --tok-from packages/default-raw/model --out /tmp/init
  -> /tmp/init/model/ (config.json, tokenizer files, model.safetensors in fp32)   /tmp/init/draft/draft.safetensors

The values are the package's own (w = scale * q + bias per group of 64, src/package/builder/quantize.ts), so the
start point is the shipped model exactly as the engine runs it. Names and the zero-centred norms (stored in a
package as 1 + w) follow src/package/export/export-hf-map.ts. numpy only: it runs here and on the GPU machine.
"""
import argparse
import json
import os
import re
import shutil
import struct

import numpy as np

ZERO_CENTRED = re.compile(r"(^norm|input_layernorm|post_attention_layernorm|self_attn\.[qk]_norm)$")
DTYPES = {"F32": np.float32, "U32": np.uint32, "U8": np.uint8, "BF16": np.uint16, "F16": np.float16}


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k, v in header.items():
        if k == "__metadata__" or k.startswith("__pad__"):
            continue
        a, b = v["data_offsets"]
        out[k] = (v["dtype"], np.frombuffer(data[a:b], dtype=DTYPES[v["dtype"]]).reshape(v["shape"]))
    return out


def write_safetensors(path, tensors):
    header, off, blobs = {}, 0, []
    for k in sorted(tensors):
        a = np.ascontiguousarray(tensors[k], dtype=np.float32)
        header[k] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
        blobs.append(a.tobytes())
        off += a.nbytes
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)


def bf16(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def dequantize(w, scales, biases, group):
    """MLX affine layout: [rows, cols*bits/32] words, value j of a word in bits [bits*j, bits*(j+1))."""
    rows, words = w.shape
    cols = scales.shape[1] * group
    bits = 32 * words // cols
    per = 32 // bits
    shifts = (np.arange(per, dtype=np.uint32) * bits)
    q = ((w[:, :, None] >> shifts) & ((1 << bits) - 1)).reshape(rows, cols).astype(np.float32)
    s = np.repeat(bf16(scales), group, axis=1)
    b = np.repeat(bf16(biases), group, axis=1)
    return (s * q + b).astype(np.float32)


def tensors_of(path, group):
    """Package tensors as float32 arrays under their package names (without the .weight/.scales/.biases split)."""
    raw = read_safetensors(path)
    out = {}
    for k, (dt, a) in raw.items():
        if k.endswith(".scales") or k.endswith(".biases"):
            continue
        if k.endswith(".weight") and dt == "U32":
            base = k[: -len(".weight")]
            out[base] = dequantize(a, raw[base + ".scales"][1], raw[base + ".biases"][1], group)
        elif dt == "BF16":
            out[k[: -len(".weight")] if k.endswith(".weight") else k] = bf16(a)
        else:
            out[k[: -len(".weight")] if k.endswith(".weight") else k] = a.astype(np.float32)
    return out


def target_state(t, zero_centred):
    sd = {}
    for k, v in t.items():
        local = re.sub(r"^layers\.\d+\.", "", k)
        if k == "lm_head":
            sd["lm_head.weight"] = v
        elif local == "linear_attn.conv1d":
            sd[f"model.{k}.weight"] = v.reshape(v.shape[0], 1, v.shape[1])
        elif local in ("linear_attn.A_log", "linear_attn.dt_bias"):
            sd[f"model.{k}"] = v
        else:
            sd[f"model.{k}.weight"] = v - 1 if zero_centred and v.ndim == 1 and ZERO_CENTRED.search(local) else v
    return sd


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--package", required=True)
    ap.add_argument("--tok-from", required=True, help="an HF folder with config.json and the tokenizer files")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    m = json.load(open(os.path.join(a.package, "splash.json")))
    if m["family"] != "qwen3_5" or m["config"].get("num_experts"):
        raise SystemExit(f"{a.package}: only dense qwen3_5 packages are read (got {m['family']})")
    group = m["weights"].get("group_size", 64)
    md, dd = os.path.join(a.out, "model"), os.path.join(a.out, "draft")
    os.makedirs(md, exist_ok=True)
    os.makedirs(dd, exist_ok=True)
    t = {}
    for f in m["weights"]["files"]:
        t.update(tensors_of(os.path.join(a.package, f), group))
    write_safetensors(os.path.join(md, "model.safetensors"),
                      target_state(t, m["config"].get("qk_norm") == "zero_centred"))
    for f in os.listdir(a.tok_from):
        if not f.endswith(".safetensors") and f != "model.safetensors.index.json":
            shutil.copy(os.path.join(a.tok_from, f), md)
    if m.get("draft"):
        d = {}
        for f in m["draft"]["files"]:
            d.update(tensors_of(os.path.join(a.package, f), group))
        write_safetensors(os.path.join(dd, "draft.safetensors"), {f"{k}.weight": v for k, v in d.items()})
    print("from_package:", a.package, "->", a.out, f"({len(t)} target tensors, {len(m.get('draft') and d or {})} draft)")


if __name__ == "__main__":
    main()
