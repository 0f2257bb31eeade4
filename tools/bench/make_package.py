#!/usr/bin/env python3
"""Writes a synthetic q4 Splash package with random weights for speed measurements (numpy only).
Usage: make_package.py DIR [hidden layers intermediate vocab]
Default: hidden 2048, 16 layers (12 GDN + 4 attention; attn 16/2 heads of 256; GDN 16/32 heads of 128),
dense MLP 6144, vocab 65536 (about 1.4 B parameters, 0.8 GB). Same shapes as test/core-native/helpers/bench-decode.ts."""
import json, os, sys
import numpy as np

d = sys.argv[1]
H = int(sys.argv[2]) if len(sys.argv) > 2 else 2048
L = int(sys.argv[3]) if len(sys.argv) > 3 else 16
I = int(sys.argv[4]) if len(sys.argv) > 4 else 6144
V = int(sys.argv[5]) if len(sys.argv) > 5 else 65536
nh, nkv, hd, nk, nv, dk, dv = 16, 2, 256, 16, 32, 128, 128
types = ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(L)]
rng = np.random.default_rng(0)
tensors = []  # (name, dtype, shape, bytes)

def bf16(x):
    return (np.asarray([x], dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)[0]

def q4(name, rows, cols):
    tensors.append((name + ".weight", "U32", [rows, cols // 8], rng.integers(0, 2**32, rows * cols // 8, dtype=np.uint32).tobytes()))
    g = rows * cols // 64
    tensors.append((name + ".scales", "BF16", [rows, cols // 64], np.full(g, bf16(2 / 15 / np.sqrt(cols)), np.uint16).tobytes()))
    tensors.append((name + ".biases", "BF16", [rows, cols // 64], np.full(g, bf16(-1 / np.sqrt(cols)), np.uint16).tobytes()))

def f32(name, shape, v):
    tensors.append((name, "F32", shape, np.full(int(np.prod(shape)), v, np.float32).tobytes()))

q4("embed_tokens", V, H); q4("lm_head", V, H); f32("norm", [H], 1.0)
C = 2 * nk * dk + nv * dv
for i in range(L):
    p = f"layers.{i}."
    f32(p + "input_layernorm", [H], 1.0); f32(p + "post_attention_layernorm", [H], 1.0)
    if types[i] == "linear_attention":
        q4(p + "linear_attn.in_proj_qkv", C, H); q4(p + "linear_attn.in_proj_z", nv * dv, H)
        q4(p + "linear_attn.in_proj_b", nv, H); q4(p + "linear_attn.in_proj_a", nv, H)
        q4(p + "linear_attn.out_proj", H, nv * dv)
        f32(p + "linear_attn.conv1d", [C, 4], 0.3); f32(p + "linear_attn.A_log", [nv], 0.5)
        f32(p + "linear_attn.dt_bias", [nv], 0.0); f32(p + "linear_attn.norm", [dv], 1.0)
    else:
        q4(p + "self_attn.q_proj", nh * hd * 2, H); q4(p + "self_attn.k_proj", nkv * hd, H)
        q4(p + "self_attn.v_proj", nkv * hd, H); q4(p + "self_attn.o_proj", H, nh * hd)
        f32(p + "self_attn.q_norm", [hd], 1.0); f32(p + "self_attn.k_norm", [hd], 1.0)
    q4(p + "mlp.gate_proj", I, H); q4(p + "mlp.up_proj", I, H); q4(p + "mlp.down_proj", H, I)

header, pos = {}, 0
for name, dt, shape, b in tensors:
    start = (pos + 63) // 64 * 64
    header[name] = {"dtype": dt, "shape": shape, "data_offsets": [start, start + len(b)]}
    pos = start + len(b)
hj = json.dumps(header).encode()
hlen = (8 + len(hj) + 63) // 64 * 64 - 8
os.makedirs(d, exist_ok=True)
with open(os.path.join(d, "model.safetensors"), "wb") as f:
    f.write(np.uint64(hlen).tobytes()); f.write(hj + b" " * (hlen - len(hj)))
    base = 8 + hlen
    for name, dt, shape, b in tensors:
        f.seek(base + header[name]["data_offsets"][0]); f.write(b)
config = dict(hidden_size=H, num_hidden_layers=L, vocab_size=V, layer_types=types, rms_norm_eps=1e-6,
              num_attention_heads=nh, num_key_value_heads=nkv, head_dim=hd, attn_output_gate=True, rope_theta=1e7,
              partial_rotary_factor=0.25, mrope_section=[11, 11, 10], mrope_interleaved=True,
              linear_num_key_heads=nk, linear_num_value_heads=nv, linear_key_head_dim=dk, linear_value_head_dim=dv,
              linear_conv_kernel_dim=4, intermediate_size=I, num_experts=0, num_experts_per_tok=0,
              moe_intermediate_size=0, shared_expert_intermediate_size=0, norm_topk_prob=False,
              tie_word_embeddings=False, max_position_embeddings=262144)
with open(os.path.join(d, "splash.json"), "w") as f:
    json.dump({"format": 1, "name": "bench/q4", "family": "qwen3_5", "config": config,
               "weights": {"files": ["model.safetensors"], "quant": "q4", "group_size": 64}}, f)
print("wrote", d)
