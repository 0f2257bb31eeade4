"""Stage: prove the export — load WORK/hf with transformers (Qwen3_5ForCausalLM, eager attention, torch GDN fallback)
and compare its logits with this repo's model on held-out text (fp32 both, then bf16 both); check that transformers'
tokenizer + apply_chat_template reproduce our rendered conversations byte for byte. Writes WORK/hf_check.json.
"""
import argparse
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    from gen import load_model
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    hf_dir = os.path.join(a.work, "hf")
    res = {"transformers": transformers.__version__, "torch": torch.__version__}
    ours = load_model(hf_dir, dev)
    cls = getattr(transformers, "Qwen3_5ForCausalLM", AutoModelForCausalLM)
    hf = cls.from_pretrained(hf_dir, dtype=torch.float32, attn_implementation="eager").to(dev).eval()
    res["hf_class"] = type(hf).__name__
    vh = np.fromfile(os.path.join(a.work, "data", "val_chat.bin"), dtype=np.uint16)
    vc = np.fromfile(os.path.join(a.work, "data", "val_corpus.bin"), dtype=np.uint16)
    T = 256
    x = torch.from_numpy(np.stack([vh[:T], vh[T:2 * T], vc[:T], vc[T:2 * T]]).astype(np.int64)).to(dev)
    with torch.no_grad():
        ours.act_dtype = None
        lo, _ = ours(x)
        lh = hf(input_ids=x).logits.float()
        d = (lo - lh).abs()
        res["fp32"] = {"max_abs_diff": d.max().item(), "mean_abs_diff": d.mean().item(),
                       "logit_scale": lh.abs().mean().item(),
                       "argmax_agree": (lo.argmax(-1) == lh.argmax(-1)).float().mean().item()}
        hfb = hf.to(torch.bfloat16)
        lhb = hfb(input_ids=x).logits.float()
        ours.act_dtype = torch.bfloat16
        with torch.autocast(dev, dtype=torch.bfloat16):
            lob, _ = ours(x)
        lob = lob.float()
        res["bf16"] = {"max_abs_diff": (lob - lhb).abs().max().item(),
                       "argmax_agree": (lob.argmax(-1) == lhb.argmax(-1)).float().mean().item(),
                       "hf_bf16_vs_hf_fp32_argmax_agree": (lhb.argmax(-1) == lh.argmax(-1)).float().mean().item()}
        # loss of HF's fp32 forward on these windows
        lf = torch.nn.functional.cross_entropy(lh[:, :-1].reshape(-1, lh.shape[-1]), x[:, 1:].reshape(-1))
        res["hf_fp32_loss_on_windows"] = lf.item()
    tok = AutoTokenizer.from_pretrained(hf_dir)
    recs = [json.loads(l) for l in open(os.path.join(a.work, "synth", "chat_val.jsonl"))]
    with_tools = [r for r in recs if "messages" in r][:5]
    from synth import TOOLS
    same = 0
    for r in with_tools:
        tools = [TOOLS[n] for n in r["tools"]]
        s = tok.apply_chat_template(r["messages"], tools=tools, tokenize=False)
        same += int(s == r["text"])
        if s != r["text"]:
            res.setdefault("template_mismatch_example", {"hf": s[-400:], "ours": r["text"][-400:]})
    res["chat_template_identical"] = f"{same}/{len(with_tools)}"
    p = [r for r in recs if r["kind"] == "docfn"][0]["text"]
    from tokenizers import Tokenizer
    raw = Tokenizer.from_file(os.path.join(hf_dir, "tokenizer.json"))
    res["tokenizer_ids_identical"] = tok(p, add_special_tokens=False)["input_ids"] == raw.encode(p, add_special_tokens=False).ids
    json.dump(res, open(os.path.join(a.work, "hf_check.json"), "w"), indent=1)
    print("check:", json.dumps(res))


if __name__ == "__main__":
    main()
