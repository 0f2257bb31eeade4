"""Stage 5: train the Qwen3.5-hybrid target model for a wall-clock budget, then export it as a HF checkpoint.

bf16 autocast (on CUDA), fp32 master weights, AdamW (β=0.9/0.95, wd 0.1 on matrices), warmup then cosine decay over
the *time* budget (so a run always ends annealed). Random windows of --seq tokens from WORK/data/train.bin.
Checkpoints to WORK/ckpt/train.pt (model + optimizer + step + tokens) every --ckpt-every seconds and at the end;
a rerun with the same WORK resumes from it. `--init-from DIR` starts from an exported HF checkpoint instead (a later
session: bring packages/default-raw/model back, train more with a fresh optimizer and a short warmup).
With WORK/agents/ (tools/train/agentdata.py), a share of the steps after --agent-start (fraction of the budget)
trains on whole coding-agent transcripts (up to ~25K tokens each, padded per batch to --agent-tokens tokens) with the
loss on the assistant's tokens only; the other steps stay on the chat + corpus mix.
Exports WORK/hf/ (config.json, model-0000N-of-0000M.safetensors + index (shards ≤ 15 MiB), generation_config.json,
tokenizer files) and logs JSON lines to WORK/train_log.jsonl.
"""
import argparse
import json
import math
import os
import shutil
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model import DEFAULT_CONFIG, Qwen35, export_state_dict, hf_config, param_count  # noqa: E402


def log(work, rec):
    rec["time"] = time.strftime("%H:%M:%S")
    print(json.dumps(rec), flush=True)
    with open(os.path.join(work, "train_log.jsonl"), "a") as f:
        f.write(json.dumps(rec) + "\n")


def batches(arr, B, T, rng):
    idx = rng.integers(0, arr.size - T - 1, size=B)
    x = np.stack([arr[i:i + T + 1] for i in idx]).astype(np.int64)
    return torch.from_numpy(x)


class AgentBatches:
    """Whole agent transcripts, one agent per batch (their lengths are alike), right-padded; mask = loss targets."""

    def __init__(self, work, tokens_per_batch, pad):
        d = os.path.join(work, "agents")
        idx = json.load(open(os.path.join(d, "index.json")))
        self.ids = np.memmap(os.path.join(d, "tokens.bin"), dtype=np.uint16, mode="r")
        self.mask = np.memmap(os.path.join(d, "mask.bin"), dtype=np.uint8, mode="r")
        self.by = {}
        for e in idx["sequences"]:
            self.by.setdefault(e["agent"], []).append(e)
        self.agents = sorted(self.by)
        self.tokens = tokens_per_batch
        self.pad = pad

    def next(self, rng, agent=None):
        agent = agent or self.agents[rng.integers(len(self.agents))]
        seqs = self.by[agent]
        L = max(e["length"] for e in seqs)
        B = max(1, self.tokens // L)
        pick = [seqs[i] for i in rng.integers(0, len(seqs), size=B)]
        T = max(e["length"] for e in pick)
        x = np.full((B, T), self.pad, dtype=np.int64)
        m = np.zeros((B, T), dtype=np.bool_)
        for j, e in enumerate(pick):
            o, n = e["offset"], e["length"]
            x[j, :n] = self.ids[o:o + n]
            m[j, :n] = self.mask[o:o + n] == 1
        return agent, torch.from_numpy(x), torch.from_numpy(m)


def masked_loss(model, x, m, amp):
    """Cross-entropy on the positions m marks (targets x[:, 1:]); logits only where the loss is taken."""
    with amp():
        h, _ = model.hidden(x[:, :-1])
        sel = m[:, 1:]
        logits = model.lm_head(h[sel])
    return F.cross_entropy(logits.float(), x[:, 1:][sel])


@torch.no_grad()
def evaluate(model, arr, T, dev, amp, max_windows=64):
    if arr.size < T + 2:
        return None
    model.eval()
    n = min(max_windows, (arr.size - 1) // T)
    tot, cnt = 0.0, 0
    for s in range(0, n, 16):
        xs = [arr[i * T:i * T + T + 1].astype(np.int64) for i in range(s, min(n, s + 16))]
        x = torch.from_numpy(np.stack(xs)).to(dev)
        with amp():
            logits, _ = model(x[:, :-1])
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1), reduction="sum")
        tot += loss.item()
        cnt += x[:, 1:].numel()
    model.train()
    return tot / cnt


def save_shards(sd, out, max_bytes=15 * 1024 * 1024):
    from safetensors.torch import save_file
    shards, cur, size = [], {}, 0
    for k in sorted(sd):
        nb = sd[k].numel() * sd[k].element_size()
        if cur and size + nb > max_bytes:
            shards.append(cur)
            cur, size = {}, 0
        cur[k] = sd[k]
        size += nb
    shards.append(cur)
    wm = {}
    total = 0
    for i, sh in enumerate(shards):
        name = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        save_file(sh, os.path.join(out, name), metadata={"format": "pt"})
        for k in sh:
            wm[k] = name
            total += sh[k].numel() * sh[k].element_size()
    json.dump({"metadata": {"total_size": total}, "weight_map": wm},
              open(os.path.join(out, "model.safetensors.index.json"), "w"), indent=1)


def load_hf_dir(model, d):
    from safetensors.torch import load_file
    sd = {}
    idx = os.path.join(d, "model.safetensors.index.json")
    files = sorted(set(json.load(open(idx))["weight_map"].values())) if os.path.exists(idx) else ["model.safetensors"]
    for f in files:
        sd.update(load_file(os.path.join(d, f)))
    missing, unexpected = model.load_state_dict({k: v.float() for k, v in sd.items()}, strict=False)
    assert not unexpected, unexpected
    assert all(k == "lm_head.weight" for k in missing), missing


def export(model, work, special, out=None):
    out = out or os.path.join(work, "hf")
    os.makedirs(out, exist_ok=True)
    for f in os.listdir(out):
        if f.endswith(".safetensors"):
            os.remove(os.path.join(out, f))
    cfg = hf_config(model.cfg, eos_token_id=special["ids"]["<|im_end|>"], pad_token_id=special["pad_token_id"])
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=1)
    json.dump({"eos_token_id": special["eos_token_ids"], "pad_token_id": special["pad_token_id"],
               "do_sample": False}, open(os.path.join(out, "generation_config.json"), "w"), indent=1)
    save_shards(export_state_dict(model), out)
    for f in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        shutil.copy(os.path.join(work, "tok", f), out)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--budget", type=float, default=300, help="seconds of training in this run")
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--min-lr-frac", type=float, default=0.05)
    ap.add_argument("--warmup", type=int, default=150)
    ap.add_argument("--eval-every", type=int, default=400)
    ap.add_argument("--ckpt-every", type=float, default=120)
    ap.add_argument("--config", default=None, help="JSON overrides of the model config")
    ap.add_argument("--init-from", default=None)
    ap.add_argument("--max-steps", type=int, default=10 ** 9)
    ap.add_argument("--agent-frac", type=float, default=0.5, help="share of steps on agent transcripts")
    ap.add_argument("--agent-start", type=float, default=0.25, help="fraction of the budget before agent steps")
    ap.add_argument("--agent-tokens", type=int, default=65536, help="padded tokens per agent batch")
    a = ap.parse_args()
    torch.manual_seed(0)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    if dev == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    special = json.load(open(os.path.join(a.work, "tok", "special.json")))
    cfg = dict(DEFAULT_CONFIG)
    cfg["vocab_size"] = special["model_vocab_size"]
    if a.config:
        cfg.update(json.loads(a.config))
    model = Qwen35(cfg).to(dev)
    if a.init_from:
        load_hf_dir(model, a.init_from)
    amp_on = dev == "cuda"
    model.act_dtype = torch.bfloat16 if amp_on else None

    def amp():
        return torch.autocast("cuda", dtype=torch.bfloat16) if amp_on else torch.autocast("cpu", enabled=False)

    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8, **({"fused": True} if dev == "cuda" else {}))
    ck = os.path.join(a.work, "ckpt", "train.pt")
    os.makedirs(os.path.dirname(ck), exist_ok=True)
    state = {"step": 0, "tokens": 0, "elapsed": 0.0, "budget": a.budget}
    if os.path.exists(ck):
        s = torch.load(ck, map_location=dev)
        model.load_state_dict(s["model"])
        opt.load_state_dict(s["opt"])
        state = s["state"]
        print("train: resumed", state)
    arr = np.memmap(os.path.join(a.work, "data", "train.bin"), dtype=np.uint16, mode="r")
    vc = np.fromfile(os.path.join(a.work, "data", "val_corpus.bin"), dtype=np.uint16)
    vh = np.fromfile(os.path.join(a.work, "data", "val_chat.bin"), dtype=np.uint16)
    rng = np.random.default_rng(1234 + state["step"])
    agents = None
    if os.path.exists(os.path.join(a.work, "agents", "index.json")):
        agents = AgentBatches(a.work, a.agent_tokens, special["pad_token_id"])
        print("train: agent transcripts of", agents.agents, flush=True)
    agent_loss = {}
    if agents is not None and state["step"] == 0:
        # fail fast: one forward/backward on the longest transcripts before the budget starts counting
        t = time.time()
        agent, x, m = agents.next(np.random.default_rng(0), agent=max(agents.agents, key=lambda k: max(e["length"] for e in agents.by[k])))
        masked_loss(model, x.to(dev), m.to(dev), amp).backward()
        opt.zero_grad(set_to_none=True)
        print(f"train: {agent} batch {tuple(x.shape)} forward+backward in {time.time() - t:.2f}s", flush=True)
    log(a.work, {"event": "start", "params": param_count(model), "config": cfg, "train_tokens": int(arr.size),
                 "device": dev, **state})
    budget = state["budget"]
    t0 = time.time() - state["elapsed"]
    last_ck = time.time()
    model.train()
    while True:
        el = time.time() - t0
        if el >= budget or state["step"] >= a.max_steps:
            break
        frac = min(1.0, el / budget)
        lr = a.lr * min(1.0, (state["step"] + 1) / a.warmup) * (a.min_lr_frac + (1 - a.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * frac)))
        for g in opt.param_groups:
            g["lr"] = lr
        if agents is not None and frac >= a.agent_start and rng.random() < a.agent_frac:
            agent, x, m = agents.next(rng)
            x, m = x.to(dev, non_blocking=True), m.to(dev, non_blocking=True)
            loss = masked_loss(model, x, m, amp)
            state["agent_steps"] = state.get("agent_steps", 0) + 1
            state["agent_tokens"] = state.get("agent_tokens", 0) + int(x.numel())
            agent_loss[agent] = round(loss.item(), 4) if agent not in agent_loss else round(0.9 * agent_loss[agent] + 0.1 * loss.item(), 4)
            step_tokens = 0
        else:
            x = batches(arr, a.batch, a.seq, rng).to(dev, non_blocking=True)
            with amp():
                logits, _ = model(x[:, :-1])
            loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))
            step_tokens = a.batch * a.seq
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        state["step"] += 1
        state["tokens"] += step_tokens
        if state["step"] % 50 == 0 or state["step"] == 1:
            log(a.work, {"step": state["step"], "loss": round(loss.item(), 4), "agent_loss": agent_loss, "lr": round(lr, 6),
                         "gnorm": round(float(gn), 3), "tokens": state["tokens"], "elapsed": round(el, 1),
                         "tok_per_s": round(state["tokens"] / max(el, 1e-6))})
        if state["step"] % a.eval_every == 0:
            log(a.work, {"step": state["step"], "val_corpus": evaluate(model, vc, a.seq, dev, amp),
                         "val_chat": evaluate(model, vh, a.seq, dev, amp)})
        if time.time() - last_ck > a.ckpt_every:
            state["elapsed"] = time.time() - t0
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "state": state}, ck)
            last_ck = time.time()
    state["elapsed"] = time.time() - t0
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "state": state}, ck)
    res = {"event": "end", **state, "val_corpus": evaluate(model, vc, a.seq, dev, amp, 256),
           "val_chat": evaluate(model, vh, a.seq, dev, amp, 256)}
    log(a.work, res)
    out = export(model, a.work, special)
    json.dump(res, open(os.path.join(a.work, "train_result.json"), "w"), indent=1)
    print("train: exported", out)


if __name__ == "__main__":
    main()
