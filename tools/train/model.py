"""A clean PyTorch implementation of the Qwen3.5 dense hybrid (Gated DeltaNet + gated attention) for training.

The state_dict uses exactly the tensor names of transformers' Qwen3_5ForCausalLM (model.layers.N.*, model.embed_tokens,
model.norm; lm_head tied to the embedding and not stored), and `hf_config()` writes the config.json that
transformers loads as model_type "qwen3_5_text". Math follows transformers' Qwen3.5 text model:
zero-centred RMSNorm (1+w), gated RMSNorm (plain w, then * silu(z)) on the GDN output, partial RoPE (first
rotary_dim = head_dim*partial_rotary_factor dims, half-split pairs), q_proj interleaved per head [q | gate],
sigmoid output gate, GDN with causal depthwise conv (K=4) + SiLU, l2-normalised q/k, q scaled by dk^-0.5,
chunked gated delta rule (chunk 64) for multi-token calls and the recurrent form for single-token decode.
Works with torch 1.13 (CPU, development) and torch 2.x (GPU).
"""
import json
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


DEFAULT_CONFIG = dict(
    vocab_size=16384,
    hidden_size=384,
    intermediate_size=1024,
    num_hidden_layers=8,
    num_attention_heads=6,
    num_key_value_heads=2,
    head_dim=64,
    linear_num_key_heads=6,
    linear_num_value_heads=6,
    linear_key_head_dim=64,
    linear_value_head_dim=64,
    linear_conv_kernel_dim=4,
    full_attention_interval=4,
    rms_norm_eps=1e-6,
    rope_theta=1000000.0,
    partial_rotary_factor=0.25,
    max_position_embeddings=4096,
    tie_word_embeddings=True,
)


def layer_types_of(cfg):
    n = cfg.get("full_attention_interval", 4)
    return ["full_attention" if (i + 1) % n == 0 else "linear_attention" for i in range(cfg["num_hidden_layers"])]


def hf_config(cfg, eos_token_id, pad_token_id, bos_token_id=None):
    """The config.json that transformers' Qwen3_5ForCausalLM loads."""
    rd = int(cfg["head_dim"] * cfg["partial_rotary_factor"])
    half = rd // 2
    sec = [half - 2 * (half // 3), half // 3, half // 3]  # T,H,W slots; text-only: all three ids are equal anyway
    return {
        "architectures": ["Qwen3_5ForCausalLM"],
        "model_type": "qwen3_5_text",
        "vocab_size": cfg["vocab_size"],
        "hidden_size": cfg["hidden_size"],
        "intermediate_size": cfg["intermediate_size"],
        "num_hidden_layers": cfg["num_hidden_layers"],
        "num_attention_heads": cfg["num_attention_heads"],
        "num_key_value_heads": cfg["num_key_value_heads"],
        "head_dim": cfg["head_dim"],
        "hidden_act": "silu",
        "max_position_embeddings": cfg["max_position_embeddings"],
        "initializer_range": 0.02,
        "rms_norm_eps": cfg["rms_norm_eps"],
        "use_cache": True,
        "tie_word_embeddings": bool(cfg["tie_word_embeddings"]),
        "rope_parameters": {
            "rope_type": "default",
            "rope_theta": cfg["rope_theta"],
            "partial_rotary_factor": cfg["partial_rotary_factor"],
            "mrope_section": sec,
            "mrope_interleaved": True,
        },
        "attention_bias": False,
        "attention_dropout": 0.0,
        "attn_output_gate": True,
        "linear_conv_kernel_dim": cfg["linear_conv_kernel_dim"],
        "linear_key_head_dim": cfg["linear_key_head_dim"],
        "linear_value_head_dim": cfg["linear_value_head_dim"],
        "linear_num_key_heads": cfg["linear_num_key_heads"],
        "linear_num_value_heads": cfg["linear_num_value_heads"],
        "layer_types": layer_types_of(cfg),
        "full_attention_interval": cfg.get("full_attention_interval", 4),
        "mamba_ssm_dtype": "float32",
        "bos_token_id": bos_token_id,
        "eos_token_id": eos_token_id,
        "pad_token_id": pad_token_id,
        "torch_dtype": "bfloat16",
        "dtype": "bfloat16",
    }


class ZRMSNorm(nn.Module):
    """Zero-centred RMSNorm: out = x̂ · (1 + w), computed in fp32."""

    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(dim))
        self.eps = eps

    def forward(self, x):
        x32 = x.float()
        y = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return (y * (1.0 + self.weight.float())).to(x.dtype)


class GatedRMSNorm(nn.Module):
    """GDN output norm: plain weight (init 1), then * silu(z)."""

    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x, z):
        dt = x.dtype
        x32 = x.float()
        y = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        y = self.weight * y.to(dt)
        return (y.float() * F.silu(z.float())).to(dt)


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def rope_cos_sin(positions, rd, theta, dtype):
    """positions [B,T] (long) -> cos, sin [B,T,rd] in dtype (computed in fp32)."""
    inv = 1.0 / (theta ** (torch.arange(0, rd, 2, dtype=torch.float32, device=positions.device) / rd))
    f = positions.float()[..., None] * inv
    emb = torch.cat((f, f), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def apply_partial_rope(x, cos, sin):
    """x [B,h,T,d]; cos/sin [B,T,rd]: rotate the first rd dims."""
    rd = cos.shape[-1]
    c = cos[:, None]
    s = sin[:, None]
    xr, xp = x[..., :rd], x[..., rd:]
    xr = xr * c + rotate_half(xr) * s
    return torch.cat((xr, xp), dim=-1)


def l2norm(x, eps=1e-6):
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + eps)


def chunk_gated_delta_rule(q, k, v, g, beta, chunk=64, initial_state=None):
    """q,k [B,H,T,dk] (already l2-normalised, q scaled), v [B,H,T,dv], g,beta [B,H,T]; all fp32.
    Returns o [B,H,T,dv], final state [B,H,dk,dv]."""
    B, H, T, dk = q.shape
    dv = v.shape[-1]
    pad = (chunk - T % chunk) % chunk
    if pad:
        q = F.pad(q, (0, 0, 0, pad))
        k = F.pad(k, (0, 0, 0, pad))
        v = F.pad(v, (0, 0, 0, pad))
        g = F.pad(g, (0, pad))
        beta = F.pad(beta, (0, pad))
    N = (T + pad) // chunk
    q = q.reshape(B, H, N, chunk, dk)
    k = k.reshape(B, H, N, chunk, dk)
    v = v.reshape(B, H, N, chunk, dv)
    g = g.reshape(B, H, N, chunk)
    beta = beta.reshape(B, H, N, chunk)
    gc = g.cumsum(-1)
    idx = torch.arange(chunk, device=q.device)
    strict = idx[:, None] > idx[None, :]
    lower = idx[:, None] >= idx[None, :]
    diff = gc[..., :, None] - gc[..., None, :]
    dec_strict = torch.exp(diff.masked_fill(~strict, -float("inf")))
    dec_lower = torch.exp(diff.masked_fill(~lower, -float("inf")))
    kb = k * beta[..., None]
    A = (kb @ k.transpose(-1, -2)) * dec_strict
    L = A + torch.eye(chunk, device=q.device, dtype=q.dtype)
    rhs = torch.cat((v * beta[..., None], kb * torch.exp(gc)[..., None]), dim=-1)
    sol = torch.linalg.solve_triangular(L, rhs, upper=False, unitriangular=True)
    U, W = sol[..., :dv], sol[..., dv:]
    P = (q @ k.transpose(-1, -2)) * dec_lower
    qe = q * torch.exp(gc)[..., None]
    glast = gc[..., -1]  # [B,H,N]
    kd = k * torch.exp(glast[..., None] - gc)[..., None]
    S = q.new_zeros(B, H, dk, dv) if initial_state is None else initial_state
    outs = []
    for n in range(N):
        Vn = U[:, :, n] - W[:, :, n] @ S
        outs.append(qe[:, :, n] @ S + P[:, :, n] @ Vn)
        S = torch.exp(glast[:, :, n])[..., None, None] * S + kd[:, :, n].transpose(-1, -2) @ Vn
    o = torch.stack(outs, dim=2).reshape(B, H, N * chunk, dv)[:, :, :T]
    return o, S


def recurrent_gated_delta_rule(q, k, v, g, beta, state):
    """Reference/decode form. Same shapes as chunked; state [B,H,dk,dv] or None."""
    B, H, T, dk = q.shape
    S = q.new_zeros(B, H, dk, v.shape[-1]) if state is None else state
    outs = []
    for t in range(T):
        S = S * torch.exp(g[:, :, t])[..., None, None]
        u = (S * k[:, :, t, :, None]).sum(-2)
        d = (v[:, :, t] - u) * beta[:, :, t, None]
        S = S + k[:, :, t, :, None] * d[:, :, None, :]
        outs.append((S * q[:, :, t, :, None]).sum(-2))
    return torch.stack(outs, dim=2), S


class GatedDeltaNet(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        H = cfg["hidden_size"]
        self.nk, self.nv = cfg["linear_num_key_heads"], cfg["linear_num_value_heads"]
        self.dk, self.dv = cfg["linear_key_head_dim"], cfg["linear_value_head_dim"]
        self.K = cfg["linear_conv_kernel_dim"]
        self.Dk, self.Dv = self.nk * self.dk, self.nv * self.dv
        C = 2 * self.Dk + self.Dv
        self.in_proj_qkv = nn.Linear(H, C, bias=False)
        self.in_proj_z = nn.Linear(H, self.Dv, bias=False)
        self.in_proj_b = nn.Linear(H, self.nv, bias=False)
        self.in_proj_a = nn.Linear(H, self.nv, bias=False)
        self.conv1d = nn.Conv1d(C, C, self.K, groups=C, padding=self.K - 1, bias=False)
        self.A_log = nn.Parameter(torch.log(torch.empty(self.nv).uniform_(1, 16)))
        self.dt_bias = nn.Parameter(torch.ones(self.nv))
        self.norm = GatedRMSNorm(self.dv, cfg["rms_norm_eps"])
        self.out_proj = nn.Linear(self.Dv, H, bias=False)

    def _mix(self, x, conv_out, cache):
        """x [B,T,H] normed input; conv_out [B,T,C] post-conv post-silu."""
        B, T, _ = x.shape
        q, k, v = torch.split(conv_out, [self.Dk, self.Dk, self.Dv], dim=-1)
        q = q.reshape(B, T, self.nk, self.dk).transpose(1, 2).float()
        k = k.reshape(B, T, self.nk, self.dk).transpose(1, 2).float()
        v = v.reshape(B, T, self.nv, self.dv).transpose(1, 2).float()
        r = self.nv // self.nk
        if r > 1:
            q = q.repeat_interleave(r, dim=1)
            k = k.repeat_interleave(r, dim=1)
        beta = torch.sigmoid(self.in_proj_b(x)).float().transpose(1, 2)
        g = (-torch.exp(self.A_log.float()) * F.softplus(self.in_proj_a(x).float() + self.dt_bias.float())).transpose(1, 2)
        q = l2norm(q) * (self.dk ** -0.5)
        k = l2norm(k)
        state = None if cache is None else cache.get("S")
        with torch.autocast(device_type=q.device.type, enabled=False):  # the delta rule runs in fp32, as in HF
            if T == 1 and cache is not None:
                o, S = recurrent_gated_delta_rule(q, k, v, g, beta, state)
            else:
                o, S = chunk_gated_delta_rule(q, k, v, g, beta, initial_state=state)
        if cache is not None:
            cache["S"] = S
        o = o.transpose(1, 2).to(x.dtype)  # [B,T,nv,dv]
        z = self.in_proj_z(x).reshape(B, T, self.nv, self.dv)
        o = self.norm(o, z).reshape(B, T, self.Dv)
        return self.out_proj(o)

    def forward(self, x, cache=None):
        B, T, _ = x.shape
        X = self.in_proj_qkv(x)  # [B,T,C]
        if cache is None or "conv" not in cache:
            y = self.conv1d(X.transpose(1, 2))[..., :T]
            if cache is not None:
                Xt = X.transpose(1, 2)
                cache["conv"] = F.pad(Xt, (self.K - 1 - T, 0))[..., -(self.K - 1):] if T < self.K - 1 else Xt[..., -(self.K - 1):]
        else:
            Xt = torch.cat((cache["conv"], X.transpose(1, 2)), dim=-1)  # [B,C,K-1+T]
            y = F.conv1d(Xt, self.conv1d.weight, groups=Xt.shape[1])
            cache["conv"] = Xt[..., -(self.K - 1):]
        y = F.silu(y).transpose(1, 2)
        return self._mix(x, y, cache)


class GatedAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        H = cfg["hidden_size"]
        self.nh, self.nkv, self.hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
        self.q_proj = nn.Linear(H, self.nh * self.hd * 2, bias=False)
        self.k_proj = nn.Linear(H, self.nkv * self.hd, bias=False)
        self.v_proj = nn.Linear(H, self.nkv * self.hd, bias=False)
        self.o_proj = nn.Linear(self.nh * self.hd, H, bias=False)
        self.q_norm = ZRMSNorm(self.hd, cfg["rms_norm_eps"])
        self.k_norm = ZRMSNorm(self.hd, cfg["rms_norm_eps"])
        # SDPA for multi-token calls without earlier keys (torch >= 2.0); the explicit form stays the reference
        self.use_sdpa = hasattr(F, "scaled_dot_product_attention")

    def forward(self, x, cos, sin, cache=None):
        B, T, _ = x.shape
        qg = self.q_proj(x).reshape(B, T, self.nh, 2 * self.hd)
        q, gate = qg[..., : self.hd], qg[..., self.hd:]
        gate = gate.reshape(B, T, self.nh * self.hd)
        q = self.q_norm(q).transpose(1, 2)
        k = self.k_norm(self.k_proj(x).reshape(B, T, self.nkv, self.hd)).transpose(1, 2)
        v = self.v_proj(x).reshape(B, T, self.nkv, self.hd).transpose(1, 2)
        q = apply_partial_rope(q, cos, sin)
        k = apply_partial_rope(k, cos, sin)
        fresh = cache is None or "k" not in cache
        if cache is not None:
            if "k" in cache:
                k = torch.cat((cache["k"], k), dim=2)
                v = torch.cat((cache["v"], v), dim=2)
            cache["k"], cache["v"] = k, v
        rep = self.nh // self.nkv
        if fresh and T > 1 and self.use_sdpa:
            # long prompts: the fused causal kernel never materialises the T x T score matrix
            kr = k.repeat_interleave(rep, dim=1) if rep > 1 else k
            vr = v.repeat_interleave(rep, dim=1) if rep > 1 else v
            o = F.scaled_dot_product_attention(q, kr.to(q.dtype), vr.to(q.dtype), is_causal=True)
            o = o.transpose(1, 2).reshape(B, T, self.nh * self.hd).to(x.dtype)
            return self.o_proj(o * torch.sigmoid(gate))
        if rep > 1:
            k = k.repeat_interleave(rep, dim=1)
            v = v.repeat_interleave(rep, dim=1)
        S = k.shape[2]
        att = (q.float() @ k.float().transpose(-1, -2)) * (self.hd ** -0.5)
        if T > 1:
            i = torch.arange(T, device=x.device)[:, None] + (S - T)
            j = torch.arange(S, device=x.device)[None, :]
            att = att.masked_fill(j > i, -float("inf"))
        o = (att.softmax(-1).to(v.dtype) @ v).transpose(1, 2).reshape(B, T, self.nh * self.hd)
        o = o * torch.sigmoid(gate)
        return self.o_proj(o)


class MLP(nn.Module):
    def __init__(self, H, I):
        super().__init__()
        self.gate_proj = nn.Linear(H, I, bias=False)
        self.up_proj = nn.Linear(H, I, bias=False)
        self.down_proj = nn.Linear(I, H, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, cfg, kind):
        super().__init__()
        self.kind = kind
        H = cfg["hidden_size"]
        self.input_layernorm = ZRMSNorm(H, cfg["rms_norm_eps"])
        self.post_attention_layernorm = ZRMSNorm(H, cfg["rms_norm_eps"])
        if kind == "linear_attention":
            self.linear_attn = GatedDeltaNet(cfg)
        else:
            self.self_attn = GatedAttention(cfg)
        self.mlp = MLP(H, cfg["intermediate_size"])

    def forward(self, h, cos, sin, cache=None):
        x = self.input_layernorm(h)
        x = self.linear_attn(x, cache) if self.kind == "linear_attention" else self.self_attn(x, cos, sin, cache)
        h = h + x
        return h + self.mlp(self.post_attention_layernorm(h))


class Inner(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg["vocab_size"], cfg["hidden_size"])
        self.layers = nn.ModuleList([DecoderLayer(cfg, t) for t in layer_types_of(cfg)])
        self.norm = ZRMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])


class Qwen35(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = dict(cfg)
        self.model = Inner(cfg)
        self.rd = int(cfg["head_dim"] * cfg["partial_rotary_factor"])
        self.act_dtype = None  # set to torch.bfloat16 when running under bf16 autocast
        self.apply(self._init)

    @staticmethod
    def _init(m):
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=0.02)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, std=0.02)

    def lm_head(self, h):
        return h @ self.model.embed_tokens.weight.t().to(h.dtype)

    def hidden(self, ids, taps=(), caches=None, start_pos=0):
        """Runs the decoder. Returns (final normed hidden [B,T,H], {layer_id: output of layer l (= HF hidden_states[l+1])})."""
        B, T = ids.shape
        h = self.model.embed_tokens(ids)
        if self.act_dtype is not None:
            h = h.to(self.act_dtype)
        pos = torch.arange(start_pos, start_pos + T, device=ids.device)[None].expand(B, T)
        cos, sin = rope_cos_sin(pos, self.rd, self.cfg["rope_theta"], h.dtype)
        tapped = {}
        for i, layer in enumerate(self.model.layers):
            h = layer(h, cos, sin, None if caches is None else caches[i])
            if i in taps:
                tapped[i] = h
        return self.model.norm(h), tapped

    def forward(self, ids, taps=(), caches=None, start_pos=0):
        h, tapped = self.hidden(ids, taps, caches, start_pos)
        return self.lm_head(h), tapped

    def new_caches(self):
        return [dict() for _ in self.model.layers]


def param_count(m):
    return sum(p.numel() for p in m.parameters())


def export_state_dict(model, dtype=torch.bfloat16):
    """HF names; tied lm_head not stored. A_log kept fp32 (HF keeps it fp32 too? stored as the model dtype is fine)."""
    sd = {}
    for k, v in model.state_dict().items():
        sd[k] = v.detach().to("cpu").to(dtype).contiguous()
    return sd
