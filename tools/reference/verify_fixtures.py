#!/usr/bin/env python3
"""Re-check committed fixtures: reload every checkpoint with transformers (fp32, eager) and compare its logits with
reference.safetensors.  The MLX variant is dequantized in numpy (make_fixtures.mlx_dequantize) and loaded into the
source variant's architecture.  Runs on CPU or GPU; prints max abs differences (expect ~1e-5 across devices/versions).

    python3 tools/reference/verify_fixtures.py [--dir test/fixtures/reference] [--device cpu]
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_common as fc  # noqa: E402
import make_fixtures as mf  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from safetensors.torch import load_file  # noqa: E402


def mlx_to_hf_state(vdir):
    arr, dts = mf.read_safetensors_raw(os.path.join(vdir, "model.safetensors"))
    sd = {}
    for k in arr:
        if k.endswith(".scales") or k.endswith(".biases"):
            continue
        P = k[: -len(".weight")] if k.endswith(".weight") else None
        hk = k[len("language_model."):]
        if P and P + ".scales" in arr:
            w = mf.mlx_dequantize(arr[k], arr[P + ".scales"], arr[P + ".biases"])
        elif dts[k] == "BF16":
            w = mf.bf16_to_f32_np(arr[k])
        else:
            w = arr[k].astype(np.float32)
        if hk.endswith("conv1d.weight"):
            w = np.moveaxis(w, 1, 2)                       # [C, K, 1] -> [C, 1, K]
        elif any(hk.endswith(s) for s in mf.MLX_SHIFTED_NORMS) and w.ndim == 1:
            w = w - np.float32(1.0)                        # stored 1 + w
        sd[hk] = torch.from_numpy(np.ascontiguousarray(w))
    return sd


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default="test/fixtures/reference")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--tol", type=float, default=1e-4)
    a = ap.parse_args()
    fc.set_numerics()
    bad = 0
    for name in sorted(os.listdir(a.dir)):
        vdir = os.path.join(a.dir, name)
        if not os.path.isfile(os.path.join(vdir, "reference.json")):
            continue
        ref = json.load(open(os.path.join(vdir, "reference.json")))
        if "checkpoint_layout" not in ref:  # the image fixture: make_vision_fixture.py checks its own outputs
            print(f"[{name}] skipped (made by make_vision_fixture.py)")
            continue
        T = load_file(os.path.normpath(os.path.join(vdir, ref["tensors_file"])))
        if ref["checkpoint_layout"].startswith("mlx"):
            src = os.path.join(a.dir, ref["source_variant"])
            cfg = transformers.Qwen3_5TextConfig.from_pretrained(src)
            cfg._attn_implementation = "eager"
            m = transformers.Qwen3_5ForCausalLM(cfg).float()
            missing, unexpected = m.load_state_dict(mlx_to_hf_state(vdir), strict=False)
            assert set(missing) <= {"lm_head.weight"} and not unexpected, (missing, unexpected)
            m.tie_weights()
            m = m.to(a.device).eval()
        else:
            cls = ref["hf_class"].split()[0]
            m = fc.load_hf(cls, vdir, torch.float32, a.device)
        out = []
        for pi, ids in enumerate(ref["prompt_ids"]):
            lg, hid, _ = fc.forward_capture(m, ids, a.device)
            d = float((lg - T[f"p{pi}.logits_fp32"]).abs().max())
            out.append(d)
            bad += d > a.tol
        g, _ = fc.greedy(m, ref["prompt_ids"][0], a.device)
        same = g == ref["greedy_fp32"][0]
        bad += not same
        print(f"{name:24s} logits maxabs per prompt {['%.3g' % x for x in out]}  greedy p0 {'==' if same else '!='}", flush=True)
    print("OK" if not bad else f"{bad} mismatches")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
