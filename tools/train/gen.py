"""Stage 6: greedy (or sampled) generation with the trained model, with KV / GDN-state caches.

Batched: prompts are sorted by length and run left-aligned; positions shorter than a prompt are teacher-forced with
the prompt token, so no padding ever enters a recurrent state. Used for (a) the draft's training data — the model's
own greedy answers to the training prompts — and (b) sample transcripts (a code request, a tool-call round trip).
Writes WORK/gen/{train,val}.jsonl ({"prompt_ids", "ids" (prompt+response), "kind"}) and WORK/samples.md.
Resumable: skips a split whose file exists.
"""
import argparse
import json
import os
import random
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model import DEFAULT_CONFIG, Qwen35  # noqa: E402


def load_model(hf_dir, dev):
    from train import load_hf_dir
    raw = json.load(open(os.path.join(hf_dir, "config.json")))
    cfg = dict(DEFAULT_CONFIG)
    for k in cfg:
        if k in raw:
            cfg[k] = raw[k]
    rp = raw.get("rope_parameters", {})
    cfg["rope_theta"] = rp.get("rope_theta", cfg["rope_theta"])
    cfg["partial_rotary_factor"] = rp.get("partial_rotary_factor", cfg["partial_rotary_factor"])
    m = Qwen35(cfg).to(dev)
    load_hf_dir(m, hf_dir)
    m.eval()
    return m


@torch.no_grad()
def generate(model, prompts, max_new, eos_ids, temperature=0.0, batch=256, seed=0, dev="cuda"):
    """prompts: list of token-id lists -> list of generated id lists (response only, up to and incl. the first eos)."""
    amp = torch.autocast("cuda", dtype=torch.bfloat16) if dev == "cuda" else torch.autocast("cpu", enabled=False)
    model.act_dtype = torch.bfloat16 if dev == "cuda" else None
    g = torch.Generator(device=dev)
    g.manual_seed(seed)
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    results = [None] * len(prompts)
    eos = torch.tensor(eos_ids, device=dev)
    for s in range(0, len(order), batch):
        idx = order[s:s + batch]
        P = [prompts[i] for i in idx]
        B = len(P)
        lens = torch.tensor([len(p) for p in P], device=dev)
        L = int(lens.max())
        m0 = int(lens.min())
        buf = torch.zeros(B, L + max_new, dtype=torch.long, device=dev)
        for j, p in enumerate(P):
            buf[j, :len(p)] = torch.tensor(p, device=dev)
        caches = model.new_caches()
        with amp:
            logits, _ = model(buf[:, :m0], caches=caches)
        last = logits[:, -1].float()
        done = torch.zeros(B, dtype=torch.bool, device=dev)
        end = lens + max_new
        for t in range(m0, L + max_new):
            if temperature > 0:
                nxt = torch.multinomial(torch.softmax(last / temperature, -1), 1, generator=g)[:, 0]
            else:
                nxt = last.argmax(-1)
            forced = t < lens
            tok = torch.where(forced, buf[:, t], nxt)
            tok = torch.where(done, torch.zeros_like(tok), tok)
            buf[:, t] = tok
            gen = ~forced & ~done
            done = done | (gen & torch.isin(tok, eos)) | (t + 1 >= end)
            if bool(done.all()):
                break
            with amp:
                logits, _ = model(buf[:, t:t + 1], caches=caches, start_pos=t)
            last = logits[:, -1].float()
        for j, i in enumerate(idx):
            r = buf[j, lens[j]:].tolist()
            out = []
            for x in r:
                out.append(x)
                if x in eos_ids:
                    break
            results[i] = out[:max_new]
    return results


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--n-train", type=int, default=3000)
    ap.add_argument("--n-val", type=int, default=64)
    ap.add_argument("--max-new", type=int, default=256)
    ap.add_argument("--batch", type=int, default=512)
    a = ap.parse_args()
    from tokenizers import Tokenizer
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    tok = Tokenizer.from_file(os.path.join(a.work, "tok", "tokenizer.json"))
    special = json.load(open(os.path.join(a.work, "tok", "special.json")))
    model = load_model(os.path.join(a.work, "hf"), dev)
    os.makedirs(os.path.join(a.work, "gen"), exist_ok=True)
    rng = random.Random(5)
    for split, n, src in (("val", a.n_val, "chat_val.jsonl"), ("train", a.n_train, "chat_train.jsonl")):
        path = os.path.join(a.work, "gen", f"{split}.jsonl")
        if os.path.exists(path):
            continue
        recs = [r for r in map(json.loads, open(os.path.join(a.work, "synth", src))) if "prompt" in r]
        rng.shuffle(recs)
        recs = recs[:n]
        prompts = [tok.encode(r["prompt"], add_special_tokens=False).ids for r in recs]
        t0 = time.time()
        outs = generate(model, prompts, a.max_new, special["eos_token_ids"], batch=a.batch, dev=dev)
        ntok = sum(map(len, outs))
        print(f"gen {split}: {len(outs)} prompts, {ntok} tokens in {time.time() - t0:.1f}s", flush=True)
        with open(path, "w") as f:
            for r, p, o in zip(recs, prompts, outs):
                f.write(json.dumps({"kind": r["kind"], "prompt_ids": p, "ids": p + o}) + "\n")
    samples(a.work, model, tok, special, dev)


def samples(work, model, tok, special, dev):
    """A code request and a tool-call round trip (the tool result is fed back, the model answers)."""
    recs = [json.loads(l) for l in open(os.path.join(work, "synth", "chat_val.jsonl"))]
    eos = special["eos_token_ids"]
    dec = lambda ids: tok.decode(ids, skip_special_tokens=False)  # noqa: E731
    lines = ["# Sample transcripts (greedy, T=0) from the trained model\n",
             "Prompts are held-out conversations rendered with models/qwen3_5/chat_template.jinja; everything after "
             "the prompt is generated by the model.\n"]
    picks = [r for r in recs if r["kind"] == "docfn"][:2] + [r for r in recs if r["kind"] == "explain"][:1]
    tools = [r for r in recs if r["kind"] == "tool" and "messages" in r][:3]
    custom = [
        "<|im_start|>user\nWrite a Python function `is_palindrome(s)` that returns True if the string reads the same "
        "backwards.<|im_end|>\n<|im_start|>assistant\n<think>\n",
        "<|im_start|>user\nWrite a function that returns the sum of the squares of a list of numbers.<|im_end|>\n"
        "<|im_start|>assistant\n<think>\n",
    ]
    for i, p in enumerate([r["prompt"] for r in picks] + custom):
        ids = tok.encode(p, add_special_tokens=False).ids
        out = generate(model, [ids], 300, eos, dev=dev)[0]
        lines.append(f"\n## Code/explanation request {i + 1}\n\n````text\n{p}{dec(out)}\n````\n")
    for i, r in enumerate(tools):
        ids = tok.encode(r["prompt"], add_special_tokens=False).ids
        out = generate(model, [ids], 200, eos, dev=dev)[0]
        first = dec(out)
        tool_msg = [m for m in r["messages"] if m["role"] == "tool"][0]["content"]
        cont = (r["prompt"] + first + ("\n" if first.endswith("<|im_end|>") else "<|im_end|>\n") +
                f"<|im_start|>user\n<tool_response>\n{tool_msg}\n</tool_response><|im_end|>\n<|im_start|>assistant\n<think>\n")
        ids2 = tok.encode(cont, add_special_tokens=False).ids
        out2 = generate(model, [ids2], 160, eos, dev=dev)[0]
        user = [m for m in r["messages"] if m["role"] == "user"][0]["content"]
        lines.append(f"\n## Tool-call round trip {i + 1}\n\nTools offered: {', '.join(r['tools'])}. User: {user!r}\n\n"
                     f"Model turn 1 (after the prompt `<|im_start|>assistant\\n<think>\\n`):\n\n````text\n{first}\n````\n\n"
                     f"Tool result fed back: `{tool_msg}`\n\nModel turn 2:\n\n````text\n{dec(out2)}\n````\n")
    open(os.path.join(work, "samples.md"), "w").write("\n".join(lines))
    print("gen: samples written")


if __name__ == "__main__":
    main()
