"""Stage 7: the DFlash block draft — train on the target's own greedy generations, measure acceptance, export.

Architecture (z-lab DFlash v1; docs/package-format.md, the draft):
  ctx  = hidden_norm(fc(concat(target hidden_states[l+1] for l in target_layer_ids)))     (HF convention: the output
         of decoder layer l; e.g. taps [1, 4, 6] are hidden_states[2], [5], [7])
  x    = target.embed_tokens([anchor, MASK × (B−1)])
  per draft layer (Qwen3 decoder layer): q from the block; k, v from [ctx ; block] with the same k_proj/v_proj (+k_norm);
         full RoPE (rotary dim = head_dim, half-split) at absolute positions; block queries see every context position
         before the anchor and the whole block (bidirectional); then SwiGLU MLP.
  logits = target.lm_head(norm(x))  — the target's (tied) embedding, frozen.
  All draft norms are plain Qwen3 RMSNorms: out = w · x̂ (weight init 1), not zero-centred.
Training: frozen target run on (prompt + the target's own greedy response); random anchors in the response; labels =
the target's argmax at each block position; loss weight w_k = exp(−(k−1)/γ) for block row k = 1..B−1.
Acceptance: batched speculative decoding simulation against the target (full recompute per verify pass), greedy
(T=0: accept while draft == target argmax) and T>0 with exact rejection sampling; τ = tokens committed per target
verify pass (accepted + 1), averaged over passes.
Writes WORK/draft/{draft.safetensors, config.json, accept.json, train_log.jsonl, ckpt.pt}.
"""
import argparse
import json
import math
import os
import random
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model import MLP, rope_cos_sin, rotate_half  # noqa: E402


class RMSNorm(nn.Module):
    """Plain Qwen3 RMSNorm: w · x̂."""

    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        x32 = x.float()
        y = (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype)
        return self.weight.to(x.dtype) * y


class DraftAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        H, self.nh, self.nkv, self.hd = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        self.q_proj = nn.Linear(H, self.nh * self.hd, bias=False)
        self.k_proj = nn.Linear(H, self.nkv * self.hd, bias=False)
        self.v_proj = nn.Linear(H, self.nkv * self.hd, bias=False)
        self.o_proj = nn.Linear(self.nh * self.hd, H, bias=False)
        self.q_norm = RMSNorm(self.hd, c["rms_norm_eps"])
        self.k_norm = RMSNorm(self.hd, c["rms_norm_eps"])

    def forward(self, x, ctx, qcs, kcs, mask):
        N, Q, _ = x.shape
        C = ctx.shape[1]
        q = self.q_norm(self.q_proj(x).reshape(N, Q, self.nh, self.hd)).transpose(1, 2)
        kv_in = torch.cat((ctx, x), dim=1)
        k = self.k_norm(self.k_proj(kv_in).reshape(N, C + Q, self.nkv, self.hd)).transpose(1, 2)
        v = self.v_proj(kv_in).reshape(N, C + Q, self.nkv, self.hd).transpose(1, 2)
        qc, qs = qcs
        kc, ks = kcs
        q = q * qc[:, None] + rotate_half(q) * qs[:, None]
        k = k * kc[:, None] + rotate_half(k) * ks[:, None]
        rep = self.nh // self.nkv
        if rep > 1:
            k = k.repeat_interleave(rep, dim=1)
            v = v.repeat_interleave(rep, dim=1)
        att = (q.float() @ k.float().transpose(-1, -2)) * (self.hd ** -0.5)
        att = att.masked_fill(~mask[:, None], -float("inf"))
        o = (att.softmax(-1).to(v.dtype) @ v).transpose(1, 2).reshape(N, Q, self.nh * self.hd)
        return self.o_proj(o)


class DraftLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.input_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.post_attention_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.self_attn = DraftAttention(c)
        self.mlp = MLP(c["hidden_size"], c["intermediate_size"])

    def forward(self, x, ctx, qcs, kcs, mask):
        x = x + self.self_attn(self.input_layernorm(x), ctx, qcs, kcs, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class Draft(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        H = c["hidden_size"]
        self.fc = nn.Linear(len(c["target_layer_ids"]) * H, H, bias=False)
        self.hidden_norm = RMSNorm(H, c["rms_norm_eps"])
        self.layers = nn.ModuleList([DraftLayer(c) for _ in range(c["num_hidden_layers"])])
        self.norm = RMSNorm(H, c["rms_norm_eps"])
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, std=0.02)

    def forward(self, noise, feats, qpos, cpos, mask):
        """noise [N,Q,H] block embeddings; feats [N,C,k·H] raw tapped target features; qpos [N,Q], cpos [N,C];
        mask [N,Q,C+Q] (True = may attend). Returns normed hidden [N,Q,H]."""
        ctx = self.hidden_norm(self.fc(feats))
        hd = self.c["head_dim"]
        qcs = rope_cos_sin(qpos, hd, self.c["rope_theta"], noise.dtype)
        kcs = rope_cos_sin(torch.cat((cpos, qpos), 1), hd, self.c["rope_theta"], noise.dtype)
        x = noise
        for layer in self.layers:
            x = layer(x, ctx, qcs, kcs, mask)
        return self.norm(x)


def target_pass(target, ids, taps):
    """ids [N,T] -> (logits [N,T,V] fp32? no: bf16, feats [N,T,k·H])."""
    logits, tapped = target(ids, taps=set(taps))
    return logits, torch.cat([tapped[l] for l in taps], dim=-1)


def build_batch(seqs, anchors_per, B, mask_id, rng, dev):
    """seqs: list of (ids, plen). Returns padded ids, and block tensors."""
    N = len(seqs)
    T = max(len(s) for s, _ in seqs)
    ids = torch.zeros(N, T, dtype=torch.long)
    lens = torch.zeros(N, dtype=torch.long)
    anchors = torch.zeros(N, anchors_per, dtype=torch.long)
    valid_a = torch.zeros(N, anchors_per, dtype=torch.bool)
    for i, (s, plen) in enumerate(seqs):
        ids[i, :len(s)] = torch.tensor(s)
        lens[i] = len(s)
        cand = list(range(max(plen, 1), len(s) - 1))
        if not cand:
            continue
        pick = rng.sample(cand, min(anchors_per, len(cand)))
        anchors[i, :len(pick)] = torch.tensor(pick)
        valid_a[i, :len(pick)] = True
    return ids.to(dev), lens.to(dev), anchors.to(dev), valid_a.to(dev)


def block_inputs(ids_or_none, anchors, anchor_tok, lens, C, B, mask_id, dev):
    """anchors [N,A] positions; anchor_tok [N,A]. Returns block tokens [N,A*B], qpos [N,A*B], cpos [N,C], mask."""
    N, A = anchors.shape
    k = torch.arange(B, device=dev)
    blk = torch.full((N, A, B), mask_id, dtype=torch.long, device=dev)
    blk[:, :, 0] = anchor_tok
    qpos = (anchors[:, :, None] + k).reshape(N, A * B)
    cpos = torch.arange(C, device=dev)[None].expand(N, C)
    ctx_ok = (cpos[:, None, None, :] < anchors[:, :, None, None]) & (cpos[:, None, None, :] < lens[:, None, None, None])
    ctx_ok = ctx_ok.expand(N, A, B, C).reshape(N, A * B, C)
    blk_id = torch.arange(A, device=dev).repeat_interleave(B)
    same = (blk_id[:, None] == blk_id[None, :])[None].expand(N, A * B, A * B)
    return blk.reshape(N, A * B), qpos, cpos, torch.cat((ctx_ok, same), dim=-1)


def train(a, target, draft, dcfg, data, dev, amp):
    B = dcfg["block_size"]
    taps = dcfg["target_layer_ids"]
    mask_id = dcfg["mask_token_id"]
    w = torch.exp(-(torch.arange(1, B, device=dev).float() - 1) / a.gamma)
    opt = torch.optim.AdamW(draft.parameters(), lr=a.lr, betas=(0.9, 0.95), weight_decay=0.01)
    rng = random.Random(0)
    E = target.model.embed_tokens.weight
    logf = open(os.path.join(a.work, "draft", "train_log.jsonl"), "a")
    t0 = time.time()
    step = 0
    ck = os.path.join(a.work, "draft", "ckpt.pt")
    if os.path.exists(ck):
        s = torch.load(ck, map_location=dev)
        draft.load_state_dict(s["draft"])
        opt.load_state_dict(s["opt"])
        step = s["step"]
        t0 -= s["elapsed"]
        print("draft: resumed at step", step)
    data = sorted(data, key=lambda s: len(s[0]))
    while time.time() - t0 < a.budget:
        frac = (time.time() - t0) / a.budget
        lr = a.lr * min(1, (step + 1) / 100) * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * frac)))
        for g in opt.param_groups:
            g["lr"] = lr
        j = rng.randrange(0, max(1, len(data) - a.batch))
        seqs = data[j:j + a.batch]  # similar lengths together
        ids, lens, anchors, valid_a = build_batch(seqs, a.anchors, B, mask_id, rng, dev)
        N, T = ids.shape
        with torch.no_grad(), amp():
            tl, feats = target_pass(target, ids, taps)
            pred = tl.argmax(-1)  # target's greedy next token at each position
        A = anchors.shape[1]
        anchor_tok = ids.gather(1, anchors)
        blk, qpos, cpos, mask = block_inputs(None, anchors, anchor_tok, lens, T, B, mask_id, dev)
        lab_pos = (anchors[:, :, None] + torch.arange(1, B, device=dev)).clamp(max=T - 1)  # position p+k
        labels = pred.gather(1, (lab_pos - 1).reshape(N, -1)).reshape(N, A, B - 1)
        lab_ok = (anchors[:, :, None] + torch.arange(1, B, device=dev) < lens[:, None, None]) & valid_a[:, :, None]
        with amp():
            noise = F.embedding(blk, E).to(feats.dtype)
            h = draft(noise, feats, qpos, cpos, mask).reshape(N, A, B, -1)[:, :, 1:]
            logits = h @ E.t().to(h.dtype)
        ce = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), labels.reshape(-1), reduction="none")
        ce = ce.reshape(N, A, B - 1)
        wm = w * lab_ok
        loss = (ce * wm).sum() / wm.sum().clamp(min=1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(draft.parameters(), 1.0)
        opt.step()
        step += 1
        if step % 50 == 0 or step == 1:
            with torch.no_grad():
                acc = ((logits.argmax(-1) == labels) & lab_ok).float()
                # expected accepted prefix under teacher forcing (per block): sum_k prod_{j<=k} acc_j
                run = torch.cumprod(torch.where(lab_ok, acc, torch.zeros_like(acc)), dim=-1).sum(-1)
                tau_tf = (run[valid_a].mean() + 1).item()
                pos_acc = [round(x, 3) for x in (acc.sum((0, 1)) / lab_ok.float().sum((0, 1)).clamp(min=1)).tolist()]
            rec = {"step": step, "loss": round(loss.item(), 4), "lr": round(lr, 6), "tau_teacher_forced": round(tau_tf, 3),
                   "pos_acc": pos_acc[:8], "elapsed": round(time.time() - t0, 1)}
            print(json.dumps(rec), flush=True)
            logf.write(json.dumps(rec) + "\n")
            logf.flush()
    torch.save({"draft": draft.state_dict(), "opt": opt.state_dict(), "step": step, "elapsed": time.time() - t0}, ck)
    return step


@torch.no_grad()
def simulate(target, draft, dcfg, prompts, max_new, eos_ids, temperature, dev, amp, seed=0):
    """Batched DFlash decoding against the target (full recompute each verify). Returns stats."""
    B = dcfg["block_size"]
    taps = dcfg["target_layer_ids"]
    mask_id = dcfg["mask_token_id"]
    E = target.model.embed_tokens.weight
    g = torch.Generator(device=dev)
    g.manual_seed(seed)
    N = len(prompts)

    def pick(logits):  # logits [..., V] -> tokens, probs
        if temperature <= 0:
            return logits.argmax(-1), None
        p = torch.softmax(logits.float() / temperature, -1)
        return torch.multinomial(p.reshape(-1, p.shape[-1]), 1, generator=g).reshape(p.shape[:-1]), p

    def run_target(seqs):
        T = max(map(len, seqs))
        ids = torch.zeros(len(seqs), T, dtype=torch.long, device=dev)
        for i, s in enumerate(seqs):
            ids[i, :len(s)] = torch.tensor(s, device=dev)
        with amp():
            lg, ft = target_pass(target, ids, taps)
        return lg.float(), ft

    out = [list(p) for p in prompts]
    plen = [len(p) for p in prompts]
    lg, feats = run_target(out)
    for i in range(N):
        t, _ = pick(lg[i, plen[i] - 1])
        out[i].append(int(t))
    done = [out[i][-1] in eos_ids for i in range(N)]
    taus, committed = [], []
    while not all(done):
        act = [i for i in range(N) if not done[i]]
        n = len(act)
        anchors = torch.tensor([[len(out[i]) - 1] for i in act], device=dev)
        anchor_tok = torch.tensor([[out[i][-1]] for i in act], device=dev)
        lens = anchors[:, 0]  # valid context = positions < anchor
        C = feats.shape[1]
        f = feats[act]
        blk, qpos, cpos, mask = block_inputs(None, anchors, anchor_tok, lens, C, B, mask_id, dev)
        with amp():
            h = draft(F.embedding(blk, E).to(f.dtype), f, qpos, cpos, mask)
            dl = (h[:, 1:] @ E.t().to(h.dtype)).float()  # [n, B-1, V]
        drafts, q = pick(dl)
        seqs = [out[i] + drafts[j].tolist() for j, i in enumerate(act)]
        tl, tf = run_target(seqs)
        newfeats = torch.zeros(N, tf.shape[1], tf.shape[2], device=dev, dtype=tf.dtype)
        newfeats[act] = tf
        for j, i in enumerate(act):
            a0 = len(out[i]) - 1
            pl = tl[j, a0:a0 + B]  # target logits for positions a0+1 .. a0+B
            d = drafts[j].tolist()
            if temperature <= 0:
                post = pl.argmax(-1).tolist()
                acc = 0
                while acc < B - 1 and d[acc] == post[acc]:
                    acc += 1
                commit = d[:acc] + [post[acc]]
            else:
                p = torch.softmax(pl / temperature, -1)
                acc = 0
                commit = []
                while acc < B - 1:
                    tok = d[acc]
                    if torch.rand(1, generator=g, device=dev).item() < min(1.0, (p[acc, tok] / q[j, acc, tok]).item()):
                        commit.append(tok)
                        acc += 1
                        continue
                    r = (p[acc] - q[j, acc]).clamp(min=0)
                    r = r / r.sum() if r.sum() > 0 else p[acc]
                    commit.append(int(torch.multinomial(r, 1, generator=g)))
                    break
                else:
                    commit.append(int(torch.multinomial(p[B - 1], 1, generator=g)))
            room = plen[i] + max_new - len(out[i])
            commit = commit[:max(room, 0)]
            for c_i, t in enumerate(commit):
                if t in eos_ids:
                    commit = commit[:c_i + 1]
                    break
            taus.append(acc + 1)
            committed.append(len(commit))
            out[i].extend(commit)
            if (commit and commit[-1] in eos_ids) or len(out[i]) >= plen[i] + max_new:
                done[i] = True
        feats = newfeats
    gen = sum(len(out[i]) - plen[i] for i in range(N))
    return {"temperature": temperature, "prompts": N, "verify_passes": len(taus), "generated_tokens": gen,
            "tau_mean": sum(taus) / max(1, len(taus)),
            "committed_per_pass": sum(committed) / max(1, len(committed)),
            "hist": {str(k): taus.count(k) for k in range(1, B + 1)}}


def export(draft, dcfg, out, vocab):
    from safetensors.torch import save_file
    sd = {k: v.detach().cpu().to(torch.bfloat16).contiguous() for k, v in draft.state_dict().items()}
    save_file(sd, os.path.join(out, "draft.safetensors"), metadata={"format": "pt"})
    cfg = {
        "architectures": ["DFlashDraftModel"], "model_type": "qwen3",
        "block_size": dcfg["block_size"], "num_hidden_layers": dcfg["num_hidden_layers"],
        "hidden_size": dcfg["hidden_size"], "intermediate_size": dcfg["intermediate_size"],
        "num_attention_heads": dcfg["num_attention_heads"], "num_key_value_heads": dcfg["num_key_value_heads"],
        "head_dim": dcfg["head_dim"], "rope_theta": dcfg["rope_theta"], "rms_norm_eps": dcfg["rms_norm_eps"],
        "hidden_act": "silu", "attention_bias": False, "tie_word_embeddings": False, "vocab_size": vocab,
        "max_position_embeddings": 4096, "num_target_layers": dcfg["num_target_layers"],
        "layer_types": ["full_attention"] * dcfg["num_hidden_layers"], "sliding_window": None,
        "mask_token_id": dcfg["mask_token_id"], "target_layer_ids": dcfg["target_layer_ids"],
        "dflash_config": {"mask_token_id": dcfg["mask_token_id"], "target_layer_ids": dcfg["target_layer_ids"],
                          "block_size": dcfg["block_size"]},
        "target_layer_ids_convention": "decoder layer index l; the feature is the output of layer l = HF "
                                       "output_hidden_states[l+1] (z-lab extract_context_feature, offset 1)",
        "norm_convention": "plain Qwen3 RMSNorm: out = weight * x_hat (weights init 1), NOT zero-centred (1+w); "
                           "applies to hidden_norm, norm, input/post_attention_layernorm, q_norm, k_norm",
        "rope": "full rotary (rotary dim = head_dim), half-split rotate_half, absolute positions, theta = rope_theta",
        "logits": "target lm_head (tied target embed_tokens) applied to norm(h); the draft has no embedding/head",
        "torch_dtype": "bfloat16",
    }
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--budget", type=float, default=90)
    ap.add_argument("--block", type=int, default=16)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--taps", default="1,4,6")
    ap.add_argument("--gamma", type=float, default=7.0)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--anchors", type=int, default=24)
    ap.add_argument("--eval-prompts", type=int, default=48)
    ap.add_argument("--eval-new", type=int, default=160)
    ap.add_argument("--temps", default="0,0.7")
    ap.add_argument("--eval-only", action="store_true")
    ap.add_argument("--init-draft", default=None, help="folder with draft.safetensors to continue from")
    a = ap.parse_args()
    from gen import load_model
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    special = json.load(open(os.path.join(a.work, "tok", "special.json")))
    target = load_model(os.path.join(a.work, "hf"), dev)
    for p in target.parameters():
        p.requires_grad_(False)
    use_amp = dev == "cuda"
    target.act_dtype = torch.bfloat16 if use_amp else None

    def amp():
        return torch.autocast("cuda", dtype=torch.bfloat16) if use_amp else torch.autocast("cpu", enabled=False)

    tc = target.cfg
    dcfg = {"block_size": a.block, "num_hidden_layers": a.layers, "hidden_size": tc["hidden_size"],
            "intermediate_size": tc["intermediate_size"], "num_attention_heads": tc["num_attention_heads"],
            "num_key_value_heads": tc["num_key_value_heads"], "head_dim": tc["head_dim"],
            "rope_theta": tc["rope_theta"], "rms_norm_eps": tc["rms_norm_eps"],
            "target_layer_ids": [int(x) for x in a.taps.split(",")], "mask_token_id": special["mask_token_id"],
            "num_target_layers": tc["num_hidden_layers"]}
    os.makedirs(os.path.join(a.work, "draft"), exist_ok=True)
    torch.manual_seed(0)
    draft = Draft(dcfg).to(dev)
    if a.init_draft:  # continue from an exported draft (a later session): fresh optimizer
        from safetensors.torch import load_file
        sd = load_file(os.path.join(a.init_draft, "draft.safetensors"))
        draft.load_state_dict({k: v.float() for k, v in sd.items()})
        print("draft: initialised from", a.init_draft)
    data = [(r["ids"], len(r["prompt_ids"])) for r in map(json.loads, open(os.path.join(a.work, "gen", "train.jsonl")))]
    data = [d for d in data if len(d[0]) - d[1] >= 4]
    print(f"draft: {sum(p.numel() for p in draft.parameters())} params, {len(data)} sequences, "
          f"{sum(len(s) - p for s, p in data)} response tokens", flush=True)
    if a.eval_only:
        s = torch.load(os.path.join(a.work, "draft", "ckpt.pt"), map_location=dev)
        draft.load_state_dict(s["draft"])
        steps = s["step"]
    else:
        steps = train(a, target, draft, dcfg, data, dev, amp)
        export(draft, dcfg, os.path.join(a.work, "draft"), tc["vocab_size"])
    draft.eval()
    if not a.temps:
        return
    val = [json.loads(l) for l in open(os.path.join(a.work, "gen", "val.jsonl"))][:a.eval_prompts]
    prompts = [r["prompt_ids"] for r in val]
    res = {"draft_steps": steps, "block_size": a.block, "gamma": a.gamma, "taps": dcfg["target_layer_ids"],
           "layers": a.layers, "results": []}
    for T in [float(x) for x in a.temps.split(",")]:
        t0 = time.time()
        r = simulate(target, draft, dcfg, prompts, a.eval_new, special["eos_token_ids"], T, dev, amp)
        r["seconds"] = round(time.time() - t0, 1)
        res["results"].append(r)
        print("accept:", json.dumps(r), flush=True)
        json.dump(res, open(os.path.join(a.work, "draft", "accept.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
