"""Round trip of `splash package export --hf`: transformers loads the exported checkpoints and must reproduce
Splash's own outputs on the reference fixtures.

Input: the folder written by `npx tsx scripts/export-round-trip.ts DIR` (Splash's side, computed on the development
machine): DIR/splash.json (prompt ids, Splash's greedy ids per variant) and per variant DIR/<variant>/
{splash.safetensors (Splash's prefill logits p0.logits, p1.logits), hf-float32/, hf-bfloat16/}.

Checks, per variant:
- the checkpoint loads with no missing or unexpected keys;
- float32 export: transformers' fp32 prefill logits are within --tol of Splash's (the weights are the package's
  dequantised q4 values exactly, so only summation order separates them), the top-1 matches at every position with
  a clear margin, and greedy generation gives Splash's tokens;
- bf16 export: every tensor is exactly the float32 export's tensor rounded to bf16 (the rounding is the only
  difference); the same forward in fp32 over those weights is reported against Splash and, for models without a
  router, must stay within --bf16-tol (in a mixture of experts the rounding can flip a near-tied expert choice of a
  random fixture, which moves the logits by more than rounding alone);
- the exported draft (where there is one) names the target layers it taps, every tap is a layer of the target, and
  its tensors are the set and shapes vLLM's and SGLang's DFlash loaders read.

Writes DIR/check_export.json (or --report) and exits non-zero if any check fails.
"""

import argparse
import json
import sys
from pathlib import Path

import torch
from safetensors import safe_open
from transformers import AutoModelForCausalLM

MARGIN = 1e-3


def load(path: Path, device: str):
    model, info = AutoModelForCausalLM.from_pretrained(
        path, dtype=torch.float32, attn_implementation="eager", output_loading_info=True
    )
    return model.to(device).eval(), info


def margins(logits: torch.Tensor) -> torch.Tensor:
    top = torch.topk(logits, 2, dim=-1).values
    return top[..., 0] - top[..., 1]


def check_target(model, splash: dict, prompts, greedy, device: str) -> dict:
    out = {"maxabs": [], "top1_mismatch": [], "greedy_equal": []}
    for p, prompt in enumerate(prompts):
        ids = torch.tensor([prompt], device=device)
        with torch.no_grad():
            got = model(ids, use_cache=False).logits[0].float().cpu()
        ref = splash[f"p{p}.logits"]
        out["maxabs"].append(float((got - ref).abs().max()))
        clear = margins(ref) > MARGIN
        out["top1_mismatch"].append(int(((got.argmax(-1) != ref.argmax(-1)) & clear).sum()))
        n = len(greedy[p])
        # no EOS, so exactly n tokens come out and no logits processor touches them (Splash's run had none either);
        # the mask is given, else generate() takes every prompt token equal to pad_token_id for padding
        model.generation_config.eos_token_id = None
        model.generation_config.pad_token_id = 0
        with torch.no_grad():
            gen = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, use_cache=True, max_new_tokens=n)
        out["greedy_equal"].append(gen[0, len(prompt):].tolist() == greedy[p])
    return out


def rounded_from(bf16: Path, f32: Path) -> list:
    """The tensors of the bf16 export that are not the float32 export's rounded to bf16 (or are missing from either)."""
    def tensors(d: Path) -> dict:
        out = {}
        for f in sorted(d.glob("*.safetensors")):
            with safe_open(f, "pt") as h:
                out.update({k: h.get_tensor(k) for k in h.keys()})
        return out
    a, b = tensors(bf16), tensors(f32)
    bad = sorted(set(a) ^ set(b))
    bad += [k for k in sorted(set(a) & set(b)) if a[k].dtype != torch.bfloat16 or not torch.equal(a[k], b[k].to(torch.bfloat16))]
    return bad


def check_draft(hf: Path, taps) -> dict:
    cfg = json.loads((hf / "draft" / "config.json").read_text())
    target = json.loads((hf / "config.json").read_text())
    problems = []
    if cfg.get("architectures") != ["DFlashDraftModel"]:
        problems.append(f"architectures {cfg.get('architectures')}")
    named = cfg.get("dflash_config", {}).get("target_layer_ids")
    if named != taps:
        problems.append(f"dflash_config.target_layer_ids {named}, the package's draft taps {taps}")
    L = target["num_hidden_layers"]
    if cfg.get("num_target_layers") != L or any(not 0 <= t < L for t in named or []):
        problems.append(f"taps {named} / num_target_layers {cfg.get('num_target_layers')} for a {L}-layer target")
    H, T = cfg["hidden_size"], target["hidden_size"]
    expected = {"fc.weight": [H, len(taps) * T], "hidden_norm.weight": [H], "norm.weight": [H]}
    hd, nh, nkv, inter = cfg["head_dim"], cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["intermediate_size"]
    for i in range(cfg["num_hidden_layers"]):
        p = f"layers.{i}."
        expected.update({
            p + "input_layernorm.weight": [H], p + "post_attention_layernorm.weight": [H],
            p + "self_attn.q_proj.weight": [nh * hd, H], p + "self_attn.k_proj.weight": [nkv * hd, H],
            p + "self_attn.v_proj.weight": [nkv * hd, H], p + "self_attn.o_proj.weight": [H, nh * hd],
            p + "self_attn.q_norm.weight": [hd], p + "self_attn.k_norm.weight": [hd],
            p + "mlp.gate_proj.weight": [inter, H], p + "mlp.up_proj.weight": [inter, H], p + "mlp.down_proj.weight": [H, inter],
        })
    with safe_open(hf / "draft" / "model.safetensors", "pt") as f:
        have = {k: list(f.get_slice(k).get_shape()) for k in f.keys()}
    if have != expected:
        problems.append(f"tensors differ: missing {sorted(set(expected) - set(have))}, extra {sorted(set(have) - set(expected))}, "
                        f"shapes {[k for k in expected if k in have and have[k] != expected[k]]}")
    # each draft layer is a plain Qwen3 decoder layer: transformers' own class takes its tensors strictly
    from transformers import Qwen3Config
    from transformers.models.qwen3.modeling_qwen3 import Qwen3DecoderLayer
    keys = ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim", "rms_norm_eps")
    qcfg = Qwen3Config(**{k: cfg[k] for k in keys}, num_hidden_layers=cfg["num_hidden_layers"], vocab_size=cfg["vocab_size"])
    with safe_open(hf / "draft" / "model.safetensors", "pt") as f:
        for i in range(cfg["num_hidden_layers"]):
            p = f"layers.{i}."
            state = {k[len(p):]: f.get_tensor(k) for k in f.keys() if k.startswith(p)}
            try:
                Qwen3DecoderLayer(qcfg, i).load_state_dict(state, strict=True)
            except RuntimeError as e:
                problems.append(f"layer {i} does not load into Qwen3DecoderLayer: {e}")
    return {"target_layer_ids": named, "num_target_layers": cfg.get("num_target_layers"), "problems": problems}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir", type=Path)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--tol", type=float, default=1e-3)
    ap.add_argument("--bf16-tol", type=float, default=1.0)
    ap.add_argument("--report", type=Path)
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    index = json.loads((a.dir / "splash.json").read_text())
    report, failed = {"versions": {"torch": torch.__version__, "transformers": __import__("transformers").__version__,
                                    "device": torch.cuda.get_device_name() if a.device == "cuda" else "cpu"}}, []
    for variant, meta in index.items():
        with safe_open(a.dir / variant / "splash.safetensors", "pt") as f:
            splash = {k: f.get_tensor(k) for k in f.keys()}
        r = {}
        for dtype in ("float32", "bfloat16"):
            hf = a.dir / variant / f"hf-{dtype}"
            model, info = load(hf, a.device)
            res = check_target(model, splash, meta["prompt_ids"], meta["greedy"], a.device)
            res["missing_keys"] = sorted(info["missing_keys"])
            res["unexpected_keys"] = sorted(info["unexpected_keys"])
            r[dtype] = res
            bad = res["missing_keys"] or res["unexpected_keys"]
            if dtype == "float32":
                bad = bad or max(res["maxabs"]) > a.tol or any(res["top1_mismatch"]) or not all(res["greedy_equal"])
            else:
                res["not_rounded"] = rounded_from(hf, a.dir / variant / "hf-float32")
                routed = meta["family"] in ("qwen3_5_moe", "qwen3_next")
                bad = bad or bool(res["not_rounded"]) or (not routed and max(res["maxabs"]) > a.bf16_tol)
            if bad:
                failed.append(f"{variant} {dtype}")
            print(f"{variant:22s} {dtype:9s} maxabs {max(res['maxabs']):.2e} top1-mismatch {res['top1_mismatch']} "
                  f"greedy {res['greedy_equal']} keys ok {not (res['missing_keys'] or res['unexpected_keys'])}", flush=True)
            del model
        if meta.get("draft_taps"):
            r["draft"] = check_draft(a.dir / variant / "hf-float32", meta["draft_taps"])
            if r["draft"]["problems"]:
                failed.append(f"{variant} draft")
            print(f"{variant:22s} draft     taps {r['draft']['target_layer_ids']} problems {r['draft']['problems']}", flush=True)
        report[variant] = r
    report["failed"] = failed
    (a.report or a.dir / "check_export.json").write_text(json.dumps(report, indent=1) + "\n")
    print("FAILED: " + ", ".join(failed) if failed else "all checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
