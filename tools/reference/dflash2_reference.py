"""The DFlash 2 draft forward in numpy (float64), written from the DFlash 2 math (docs/speculative-decoding.md, docs/package-format.md; and
checked against the z-lab reference code's definitions: DFlash2DraftModel, GroupedDynamicCausalConv,
CandidateSelector), for a Splash package with bf16 weights and a plain Qwen3 target (`splash package synth --preset
tiny-qwen3 --quant bf16 --draft dflash2`).

It runs the target over a prompt to get the tapped layers' outputs (the draft's context features), then one draft
pass for the block [anchor, mask x (B-1)] at the prompt's end, and writes a fixture JSON with:
  prompt, anchor, the draft's transformed logits of rows 1..B-1, the selector's greedy drafts, and at a temperature
  the sampled drafts for given uniforms with each row's candidate distribution q.
test/core-native/draft2.test.ts runs the native draft on the same package and compares.

Usage: python3 tools/reference/dflash2_reference.py PACKAGE_DIR OUT.json [--prompt-len 20] [--seed 20261202]
       [--override '{"layer_types": [...], "is_causal": null}']
--override replaces draft.config keys (recorded in the fixture; the test applies them to a copy of the package).
"""
import argparse
import json
import struct

import numpy as np


def load_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        raw = data[a:b]
        if info["dtype"] == "F32":
            arr = np.frombuffer(raw, "<f4")
        elif info["dtype"] == "BF16":
            arr = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            raise SystemExit(f"{path}: {name} is {info['dtype']}; use a bf16 package")
        out[name] = arr.reshape(info["shape"]).astype(np.float64)
    return out


class Weights:
    def __init__(self, tensors, prefix=""):
        self.t = tensors
        self.p = prefix

    def __call__(self, name):
        for n in (self.p + name + ".weight", self.p + name):
            if n in self.t:
                return self.t[n]
        raise KeyError(self.p + name)


def rmsnorm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope(x, positions, theta):
    """Rotate-half RoPE over the whole head: x [T, heads, hd], positions [T]."""
    hd = x.shape[-1]
    half = hd // 2
    inv = theta ** (-np.arange(half) * 2.0 / hd)
    ang = np.asarray(positions, dtype=np.float64)[:, None] * inv[None, :]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def attend(q, k, v, visible):
    """q [T, nh, hd], k/v [S, nkv, hd], visible [T, S] -> [T, nh*hd] (GQA: head h reads kv head h // (nh/nkv))."""
    T, nh, hd = q.shape
    g = nh // k.shape[1]
    out = np.zeros((T, nh, hd))
    for h in range(nh):
        s = q[:, h, :] @ k[:, h // g, :].T / np.sqrt(hd)
        s = np.where(visible, s, -np.inf)
        s = np.exp(s - s.max(axis=-1, keepdims=True))
        out[:, h, :] = (s / s.sum(axis=-1, keepdims=True)) @ v[:, h // g, :]
    return out.reshape(T, nh * hd)


def mlp(w, prefix, x):
    gate = x @ w(prefix + "mlp.gate_proj").T
    up = x @ w(prefix + "mlp.up_proj").T
    return (gate / (1 + np.exp(-gate)) * up) @ w(prefix + "mlp.down_proj").T


def target_taps(w, cfg, prompt, taps):
    """Outputs of the tapped decoder layers (hidden_states[l + 1]) of a plain Qwen3 target, concatenated."""
    nh, nkv, hd, eps = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"], cfg["rms_norm_eps"]
    T = len(prompt)
    h = w("embed_tokens")[prompt]
    pos = np.arange(T)
    causal = pos[None, :] <= pos[:, None]
    outs = {}
    for li in range(max(taps) + 1):
        p = f"layers.{li}."
        x = rmsnorm(h, w(p + "input_layernorm"), eps)
        q = rmsnorm((x @ w(p + "self_attn.q_proj").T).reshape(T, nh, hd), w(p + "self_attn.q_norm"), eps)
        k = rmsnorm((x @ w(p + "self_attn.k_proj").T).reshape(T, nkv, hd), w(p + "self_attn.k_norm"), eps)
        v = (x @ w(p + "self_attn.v_proj").T).reshape(T, nkv, hd)
        q, k = rope(q, pos, cfg["rope_theta"]), rope(k, pos, cfg["rope_theta"])
        h = h + attend(q, k, v, causal) @ w(p + "self_attn.o_proj").T
        h = h + mlp(w, p, rmsnorm(h, w(p + "post_attention_layernorm"), eps))
        outs[li] = h
    return np.concatenate([outs[t] for t in taps], axis=-1)


def conv(x, dyn, base, group):
    """Grouped dynamic causal conv of one block: y_t = sum_o (base[o] + dyn_t[o] per group) * x_{t-o}; x_{-1} = 0.
    x [B, H], dyn [B, K, H/group], base [K, H]."""
    B, H = x.shape
    K = base.shape[0]
    y = np.zeros_like(x)
    for o in range(K):
        shifted = np.zeros_like(x)
        shifted[o:] = x[: B - o]
        kernel = base[o][None, :] + np.repeat(dyn[:, o, :], group, axis=1)
        y += kernel * shifted
    return y


def draft_hidden(dw, tw, d, feats, anchor, start):
    """The draft's normed block rows 1..B-1 for context features of positions [0, start) and the anchor at start."""
    B, H, nh, nkv, hd, eps = d["block_size"], d["hidden_size"], d["num_attention_heads"], d["num_key_value_heads"], d["head_dim"], d["rms_norm_eps"]
    K, G = d.get("conv_kernel_size"), d.get("conv_group_size")
    kinds = d.get("layer_types") or ["full_attention"] * d["num_hidden_layers"]
    ctx = rmsnorm(feats @ dw("fc").T, dw("hidden_norm"), eps)
    n = ctx.shape[0]
    h = tw("embed_tokens")[[anchor] + [d["mask_token_id"]] * (B - 1)]
    qpos = start + np.arange(B)
    kpos = np.arange(n + B)
    for li in range(d["num_hidden_layers"]):
        p = f"layers.{li}."
        sliding = kinds[li] == "sliding_attention"
        causal = d.get("is_causal")
        causal = sliding if causal is None else causal
        W = d.get("sliding_window")
        visible = np.ones((B, n + B), dtype=bool)
        if causal:
            visible &= kpos[None, :] <= qpos[:, None]
        if sliding:
            visible &= qpos[:, None] - kpos[None, :] < W
            if not causal:
                visible &= kpos[None, :] - qpos[:, None] < W

        def around(name, x, f):
            if not K:
                return f(x)
            dyn = (x @ dw(p + name + ".kernel_projection").T).reshape(B, 2, K, H // G)
            base = dw(p + name + ".base_kernel")
            return conv(f(conv(x, dyn[:, 0], base[0], G)), dyn[:, 1], base[1], G)

        def attention(x):
            q = rmsnorm((x @ dw(p + "self_attn.q_proj").T).reshape(B, nh, hd), dw(p + "self_attn.q_norm"), eps)
            kv_in = np.concatenate([ctx, x])
            k = rmsnorm((kv_in @ dw(p + "self_attn.k_proj").T).reshape(n + B, nkv, hd), dw(p + "self_attn.k_norm"), eps)
            v = (kv_in @ dw(p + "self_attn.v_proj").T).reshape(n + B, nkv, hd)
            q, k = rope(q, qpos, d["rope_theta"]), rope(k, kpos, d["rope_theta"])
            return attend(q, k, v, visible) @ dw(p + "self_attn.o_proj").T

        h = h + around("attention_conv", rmsnorm(h, dw(p + "input_layernorm"), eps), attention)
        h = h + around("mlp_conv", rmsnorm(h, dw(p + "post_attention_layernorm"), eps), lambda x: mlp(dw, p, x))
    return rmsnorm(h[1:], dw("norm"), eps)


def transform(logits, d):
    x = logits * (d.get("output_multiplier") or 1.0)
    cap = d.get("final_logit_softcapping") or 0.0
    return cap * np.tanh(x / cap) if cap > 0 else x


def selector(dw, d, hidden, logits, anchor, temperature=0.0, uniforms=None):
    """Left-to-right walk over the top-k candidates of each row (ordered by logit, ties by lower id)."""
    k = d["selector_top_k"]
    A, Bc = dw("candidate_selector.predecessor_codebook"), dw("candidate_selector.successor_codebook")
    hp = hidden @ dw("candidate_selector.hidden_projection").T
    pred, tokens, qs, margins = anchor, [], [], []
    for t in range(hidden.shape[0]):
        cand = np.lexsort((np.arange(logits.shape[1]), -logits[t]))[:k]
        score = logits[t, cand] + Bc[cand] @ (A[pred] * hp[t])
        top2 = np.sort(score)[-2:]
        margins.append(float(top2[1] - top2[0]))
        if temperature > 0:
            e = np.exp((score - score.max()) / temperature)
            q = e / e.sum()
            pick = int(np.searchsorted(np.cumsum(q), uniforms[t] * q.sum(), side="right"))
            qs.append([[int(c), float(p)] for c, p in zip(cand, q)])
        else:
            pick = int(np.argmax(score))
        pred = int(cand[pick])
        tokens.append(pred)
    return tokens, qs, margins


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("package")
    ap.add_argument("out")
    ap.add_argument("--prompt-len", type=int, default=20)
    ap.add_argument("--seed", type=int, default=20261202)
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--override", default="{}")
    a = ap.parse_args()
    m = json.load(open(f"{a.package}/splash.json"))
    overrides = json.loads(a.override)
    cfg, d = m["config"], {**m["draft"]["config"], **overrides}
    if m["family"] != "qwen3" or m["weights"]["quant"] != "bf16":
        raise SystemExit("needs a bf16 package with a plain Qwen3 target (preset tiny-qwen3)")
    tw = Weights({k: v for f in m["weights"]["files"] for k, v in load_safetensors(f"{a.package}/{f}").items()})
    dw = Weights({k: v for f in m["draft"]["files"] for k, v in load_safetensors(f"{a.package}/{f}").items()})
    rng = np.random.default_rng(a.seed)
    prompt = [int(x) for x in rng.integers(0, 480, a.prompt_len)]
    anchor = int(rng.integers(0, 480))
    feats = target_taps(tw, cfg, prompt, d["target_layer_ids"])
    hidden = draft_hidden(dw, tw, d, feats, anchor, len(prompt))
    logits = transform(hidden @ tw("lm_head").T, d)
    greedy, _, margins = selector(dw, d, hidden, logits, anchor)
    uniforms = [float(u) for u in rng.random(hidden.shape[0])]
    sampled, qs, _ = selector(dw, d, hidden, logits, anchor, a.temperature, uniforms)
    fixture = {
        "about": "tools/reference/dflash2_reference.py: numpy DFlash 2 draft pass (float64) on a synthetic package",
        "package": {"preset": "tiny-qwen3", "quant": "bf16", "draft": "dflash2", "window": m["draft"]["config"]["sliding_window"], "seed": 7},
        "overrides": overrides,
        "prompt": prompt,
        "anchor": anchor,
        "logits": [float(x) for x in logits.astype(np.float32).ravel()],
        "greedy": greedy,
        "greedy_min_margin": min(margins),
        "temperature": a.temperature,
        "uniforms": uniforms,
        "sampled": sampled,
        "q": qs,
    }
    with open(a.out, "w") as f:
        json.dump(fixture, f)
        f.write("\n")
    print(f"wrote {a.out}: {len(greedy)} rows, greedy {greedy}, min greedy margin {min(margins):.3g}")


if __name__ == "__main__":
    main()
