#!/usr/bin/env python3
"""Writes a synthetic q4 Splash package with random weights at the shape of a real model, with fewer layers,
for speed measurements (numpy only; run where the GPU is: scripts/gpu-test.sh, or for the native kernel test's
decode timing).
Usage: make_shape_package.py DIR {qwen3.8-27b|qwen3.6-35b-a3b|dense-1.4b} [layers] [vision]
Shapes (src/package/presets.ts): 27b = hidden 5120, attn 24/4 heads of 256, GDN 16/48 heads of 128, dense MLP 17408;
35b-a3b = hidden 2048, attn 16/2 of 256, GDN 16/32 of 128, 256 experts (top 8) of 512 + a shared expert of 512.
dense-1.4b = hidden 2048, attn 16/2 of 256, GDN 16/32 of 128, dense MLP 6144, vocab 65536, 16 layers by default
(about 1.4 B parameters, 0.78 GB; the shape of test/core-native/helpers/bench-decode.ts).
All: untied lm_head, every 4th layer full attention; vocab 248320 unless named. Default 8 layers (6 GDN + 2
attention) unless named.
`vision` adds the Qwen3.5 vision tower (depth 27, hidden 1152, 16 heads of 72, MLP 4304,
48×48 position table, merger to the text hidden size), bf16 weights with small random values."""
import json, os, sys
import numpy as np

SHAPES = {
    "qwen3.8-27b": dict(H=5120, nh=24, nkv=4, nk=16, nv=48, I=17408, E=0, K=0, Im=0, Is=0),
    "qwen3.6-35b-a3b": dict(H=2048, nh=16, nkv=2, nk=16, nv=32, I=0, E=256, K=8, Im=512, Is=512),
    "dense-1.4b": dict(H=2048, nh=16, nkv=2, nk=16, nv=32, I=6144, E=0, K=0, Im=0, Is=0, V=65536, L=16),
}
d, shape = sys.argv[1], sys.argv[2]
s = SHAPES[shape]
L = int(sys.argv[3]) if len(sys.argv) > 3 else s.get("L", 8)
vision = len(sys.argv) > 4 and sys.argv[4] == "vision"
H, V, hd, dk, dv = s["H"], s.get("V", 248320), 256, 128, 128
nh, nkv, nk, nv = s["nh"], s["nkv"], s["nk"], s["nv"]
types = ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(L)]
rng = np.random.default_rng(1)
path = os.path.join(d, "model.safetensors")
entries = []  # (name, dtype, shape, nbytes, producer)

def bf16(x):
    return np.uint16(np.float32(x).view(np.uint32) >> 16)

def q4(name, rows, cols, E=1):
    lead = [E] if E > 1 else []
    n, g = E * rows * cols // 8, E * rows * cols // 64
    entries.append((name + ".weight", "U32", lead + [rows, cols // 8], n * 4,
                    lambda: rng.integers(0, 2**32, n, dtype=np.uint32)))
    entries.append((name + ".scales", "BF16", lead + [rows, cols // 64], g * 2,
                    lambda: np.full(g, bf16(2 / 15 / np.sqrt(cols)), np.uint16)))
    entries.append((name + ".biases", "BF16", lead + [rows, cols // 64], g * 2,
                    lambda: np.full(g, bf16(-1 / np.sqrt(cols)), np.uint16)))

def f32(name, shp, v):
    n = int(np.prod(shp))
    entries.append((name, "F32", shp, n * 4, lambda: np.full(n, v, np.float32)))

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
    if s["E"]:
        q4(p + "mlp.router", s["E"], H)
        q4(p + "mlp.experts.gate_proj", s["Im"], H, s["E"]); q4(p + "mlp.experts.up_proj", s["Im"], H, s["E"])
        q4(p + "mlp.experts.down_proj", H, s["Im"], s["E"])
        q4(p + "mlp.shared_expert.gate_proj", s["Is"], H); q4(p + "mlp.shared_expert.up_proj", s["Is"], H)
        q4(p + "mlp.shared_expert.down_proj", H, s["Is"]); q4(p + "mlp.shared_expert_gate", 1, H)
    else:
        q4(p + "mlp.gate_proj", s["I"], H); q4(p + "mlp.up_proj", s["I"], H); q4(p + "mlp.down_proj", H, s["I"])

def bf16_random(name, shp, scale):
    n = int(np.prod(shp))
    entries.append((name, "BF16", shp, n * 2,
                    lambda: (rng.standard_normal(n, dtype=np.float32) * scale).view(np.uint32).__rshift__(16).astype(np.uint16)))

VISION = dict(depth=27, hidden_size=1152, num_heads=16, intermediate_size=4304, patch_size=16, temporal_patch_size=2,
              spatial_merge_size=2, in_channels=3, out_hidden_size=H, num_position_embeddings=2304,
              hidden_act="gelu_pytorch_tanh", rope_theta=10000)
if vision:
    vh, vi, vm = VISION["hidden_size"], VISION["intermediate_size"], VISION["hidden_size"] * 4
    def vlin(name, rows, cols):
        bf16_random(name + ".weight", [rows, cols], 1 / np.sqrt(cols)); f32(name + ".bias", [rows], 0.0)
    def vln(name):
        f32(name + ".weight", [vh], 1.0); f32(name + ".bias", [vh], 0.0)
    vlin("visual.patch_embed", vh, 1536); f32("visual.pos_embed", [2304, vh], 0.01)
    for i in range(VISION["depth"]):
        p = f"visual.blocks.{i}."
        vln(p + "norm1"); vln(p + "norm2"); vlin(p + "attn.qkv", 3 * vh, vh); vlin(p + "attn.proj", vh, vh)
        vlin(p + "mlp.fc1", vi, vh); vlin(p + "mlp.fc2", vh, vi)
    vln("visual.merger.norm"); vlin("visual.merger.fc1", vm, vm); vlin("visual.merger.fc2", H, vm)

header, pos = {}, 0
for name, dt, shp, nb, _ in entries:
    start = (pos + 63) // 64 * 64
    header[name] = {"dtype": dt, "shape": shp, "data_offsets": [start, start + nb]}
    pos = start + nb
hj = json.dumps(header).encode()
hlen = (8 + len(hj) + 63) // 64 * 64 - 8
os.makedirs(d, exist_ok=True)
with open(path, "wb") as f:
    f.write(np.uint64(hlen).tobytes()); f.write(hj + b" " * (hlen - len(hj)))
    base = 8 + hlen
    for name, dt, shp, nb, make in entries:  # one tensor in memory at a time
        f.seek(base + header[name]["data_offsets"][0]); f.write(make().tobytes())
config = dict(hidden_size=H, num_hidden_layers=L, vocab_size=V, layer_types=types, rms_norm_eps=1e-6,
              num_attention_heads=nh, num_key_value_heads=nkv, head_dim=hd, attn_output_gate=True, rope_theta=1e7,
              partial_rotary_factor=0.25, mrope_section=[11, 11, 10], mrope_interleaved=True,
              linear_num_key_heads=nk, linear_num_value_heads=nv, linear_key_head_dim=dk, linear_value_head_dim=dv,
              linear_conv_kernel_dim=4, intermediate_size=s["I"], num_experts=s["E"], num_experts_per_tok=s["K"],
              moe_intermediate_size=s["Im"], shared_expert_intermediate_size=s["Is"], norm_topk_prob=bool(s["E"]),
              tie_word_embeddings=False, max_position_embeddings=262144)
with open(os.path.join(d, "splash.json"), "w") as f:
    json.dump({"format": 1, "name": f"bench/{shape}-{L}l-q4", "family": "qwen3_5_moe" if s["E"] else "qwen3_5",
               "config": config, "weights": {"files": ["model.safetensors"], "quant": "q4", "group_size": 64},
               **({"vision": {"config": VISION}} if vision else {})}, f)
print("wrote", d, f"({pos / 1e9:.2f} GB)")
