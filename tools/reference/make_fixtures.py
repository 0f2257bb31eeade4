#!/usr/bin/env python3
"""Make tiny random Qwen-family checkpoints and Hugging Face transformers reference outputs.

Writes one folder per variant under --out (default test/fixtures/reference):
  config.json, model.safetensors      the checkpoint (bf16 weights; MLX variant: 4-bit affine)
  reference.json                      prompts, greedy ids, versions, seed, config, metrics, tensor index
  reference.safetensors               reference tensors (logits, hidden states) -- see test/fixtures/reference/README.md

Run on the GPU machine (see tools/reference/README.md).  Needs torch + transformers 5.x + safetensors + numpy.
Deterministic: weights come from torch.Generator(seed), prompts from numpy default_rng(seed).
"""

import argparse
import copy
import json
import os
import shutil
import sys
import time

# first: it sets the hub's offline switches before transformers is imported
from fixture_common import (LOG, P0_LEN, P1_LEN, SEED, VOCAB, build_variant, clean_checkpoint_dir, forward_capture,
                            init_weights, load_hf, log, round_to_bf16_, run_reference, set_numerics, state_equal,
                            write_reference)

import numpy as np
import torch
import transformers
from safetensors.torch import save_file, load_file

# ----------------------------------------------------------------------------------------------------------------------
# HF-native variants

def make_hf_variant(name, vidx, out, prompts, dev, cpu_check):
    t0 = time.time()
    cfg, cls_name = build_variant(name)
    cls = getattr(transformers, cls_name)
    torch.manual_seed(SEED + vidx)      # only affects HF's own init, which we overwrite
    cfg._attn_implementation = "eager"
    model = cls(cfg).float().eval()
    wseed = SEED + vidx
    init_weights(model, wseed)
    round_to_bf16_(model)
    mem = copy.deepcopy(model)          # fp32 copy (buffers untouched) for the reload check
    vdir = os.path.join(out, name)
    if os.path.isdir(vdir):
        shutil.rmtree(vdir)
    model.to(torch.bfloat16).save_pretrained(vdir)
    clean_checkpoint_dir(vdir)
    notes = []
    if name == "qwen3_5-dense-r3":
        c = json.load(open(os.path.join(vdir, "config.json")))
        if "layer_types" in c:
            del c["layer_types"]
            notes.append("layer_types deleted from config.json after save_pretrained; derive from full_attention_interval (default 4)")
        assert "full_attention_interval" not in c
        json.dump(c, open(os.path.join(vdir, "config.json"), "w"), indent=2, sort_keys=True)
    # reference from the saved checkpoint
    m32 = load_hf(cls_name, vdir, torch.float32, dev)
    m16 = load_hf(cls_name, vdir, torch.bfloat16, dev)
    if name == "qwen3_5-dense-r3":
        assert list(m32.config.layer_types) == ["linear_attention"] * 3 + ["full_attention"], m32.config.layer_types
    # reload check 1: weights identical to the in-memory model
    bad = state_equal(mem, m32)
    assert not bad, f"reloaded weights differ: {bad[:5]}"
    # reload check 2: in-memory fp32 model on dev gives the same logits as the reloaded one
    mem = mem.to(dev).eval()
    reload_diffs = []
    for ids in prompts:
        a = forward_capture(mem, ids, dev)[0]
        b = forward_capture(m32, ids, dev)[0]
        d = float((a - b).abs().max())
        reload_diffs.append(d)
        assert d <= 1e-5, f"{name}: in-memory vs reloaded fp32 logits differ by {d}"
    del mem
    T, M, g32, g16 = run_reference(m32, m16, prompts, dev, cpu_check)
    M["reload_check"] = {"weights_bit_identical": True, "fp32_logits_maxabs_per_prompt": reload_diffs}
    info = {"hf_class": cls_name, "checkpoint_layout": "hf", "weight_dtype": "bfloat16", "weight_seed": wseed,
            "notes": notes}
    if "Moe" in cls_name or "Next" in cls_name:
        info["checkpoint_layout"] = "hf, per-expert tensors (mlp.experts.{e}.{gate,up,down}_proj.weight) as save_pretrained writes them"
    write_reference(vdir, name, info, T, prompts, g32, g16, M, dev)
    log(f"[{name}] done in {time.time() - t0:.1f}s  metrics p0={json.dumps(M['p0'])}")
    return vdir, m32, T


# ----------------------------------------------------------------------------------------------------------------------
# packed MoE

def make_packed_moe(src_dir, out, prompts, dev, src_T):
    name = "qwen3_5_moe-packed"
    vdir = os.path.join(out, name)
    if os.path.isdir(vdir):
        shutil.rmtree(vdir)
    os.makedirs(vdir)
    shutil.copy(os.path.join(src_dir, "config.json"), os.path.join(vdir, "config.json"))
    sd = load_file(os.path.join(src_dir, "model.safetensors"))
    cfg = json.load(open(os.path.join(vdir, "config.json")))
    E, I = cfg["num_experts"], cfg["moe_intermediate_size"]
    new = {}
    layers = {}
    for k, v in sd.items():
        if ".mlp.experts." in k:
            pre, rest = k.split(".mlp.experts.")
            e, proj, _w = rest.split(".")
            layers.setdefault(pre, {})[(int(e), proj)] = v
        else:
            new[k] = v
    for pre, d in layers.items():
        assert len(d) == 3 * E
        gu = torch.stack([torch.cat([d[(e, "gate_proj")], d[(e, "up_proj")]], 0) for e in range(E)])
        dn = torch.stack([d[(e, "down_proj")] for e in range(E)])
        assert gu.shape[1] == 2 * I and dn.shape[2] == I
        new[f"{pre}.mlp.experts.gate_up_proj"] = gu.contiguous()
        new[f"{pre}.mlp.experts.down_proj"] = dn.contiguous()
    save_file(new, os.path.join(vdir, "model.safetensors"), metadata={"format": "pt"})
    # re-derive: unpack again and compare with the per-expert source
    chk = load_file(os.path.join(vdir, "model.safetensors"))
    for pre in layers:
        for e in range(E):
            assert torch.equal(chk[f"{pre}.mlp.experts.gate_up_proj"][e, :I], sd[f"{pre}.mlp.experts.{e}.gate_proj.weight"])
            assert torch.equal(chk[f"{pre}.mlp.experts.gate_up_proj"][e, I:], sd[f"{pre}.mlp.experts.{e}.up_proj.weight"])
            assert torch.equal(chk[f"{pre}.mlp.experts.down_proj"][e], sd[f"{pre}.mlp.experts.{e}.down_proj.weight"])
    # HF loads the packed layout too? then its logits must equal the source variant's
    M = {}
    try:
        m32 = load_hf("Qwen3_5MoeForCausalLM", vdir, torch.float32, dev)
        for pi, ids in enumerate(prompts):
            lg = forward_capture(m32, ids, dev)[0]
            d = float((lg - src_T[f"p{pi}.logits_fp32"]).abs().max())
            M[f"p{pi}_hf_load_packed_vs_per_expert_logits_maxabs"] = d
            assert d <= 1e-5, d
        M["hf_loads_packed"] = True
    except AssertionError:
        raise
    except Exception as ex:  # noqa
        M["hf_loads_packed"] = f"failed: {type(ex).__name__}: {ex}"
    ref = json.load(open(os.path.join(src_dir, "reference.json")))
    ref["variant"] = name
    ref["checkpoint_layout"] = ("packed experts: L.mlp.experts.gate_up_proj [E, 2I, H] (rows [gate(I); up(I)]), "
                                "L.mlp.experts.down_proj [E, H, I], no .weight suffix")
    ref["notes"] = ref.get("notes", []) + [
        "same weights as qwen3_5_moe, experts re-packed; reference tensors are qwen3_5_moe's (tensors_file points there)"]
    ref["metrics"]["packed_check"] = M
    ref["tensors_file"] = "../qwen3_5_moe/reference.safetensors"   # identical reference: not duplicated
    json.dump(ref, open(os.path.join(vdir, "reference.json"), "w"), indent=1)
    log(f"[{name}] done  {json.dumps(M)}")
    return vdir


# ----------------------------------------------------------------------------------------------------------------------
# MLX 4-bit

def bf16_to_f32_np(u16):
    return (u16.astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16_np(x):
    """Round-to-nearest-even fp32 -> bf16 bits (uint16). No NaNs expected."""
    b = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    r = ((b >> 16) & 1) + np.uint32(0x7FFF)
    return ((b + r) >> 16).astype(np.uint16)


def mlx_quantize(w, gs=64, bits=4):
    """w: float32 [out, in].  Returns (packed uint32 [out, in*bits/32], scales bf16-bits, biases bf16-bits)."""
    assert bits == 4 and w.ndim == 2 and w.shape[1] % gs == 0
    o, n = w.shape
    wg = w.reshape(o, n // gs, gs).astype(np.float32)
    mn = wg.min(-1)
    mx = wg.max(-1)
    scale = ((mx - mn) / np.float32(15.0)).astype(np.float32)
    s16 = f32_to_bf16_np(scale)
    b16 = f32_to_bf16_np(mn)
    s = bf16_to_f32_np(s16)[..., None]
    b = bf16_to_f32_np(b16)[..., None]
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(s > 0, np.round((wg - b) / np.where(s > 0, s, 1)), 0)
    q = np.clip(q, 0, 15).astype(np.uint32).reshape(o, n)
    q8 = q.reshape(o, n // 8, 8)
    packed = np.zeros((o, n // 8), dtype=np.uint32)
    for j in range(8):
        packed |= q8[:, :, j] << np.uint32(4 * j)
    return packed, s16, b16


def mlx_dequantize(packed, s16, b16, gs=64, bits=4):
    o, nw = packed.shape
    n = nw * 8
    q = np.stack([(packed >> np.uint32(4 * j)) & np.uint32(0xF) for j in range(8)], -1).reshape(o, n).astype(np.float32)
    s = np.repeat(bf16_to_f32_np(s16), gs, axis=1)
    b = np.repeat(bf16_to_f32_np(b16), gs, axis=1)
    return (s * q).astype(np.float32) + b        # fp32 multiply, then fp32 add (no FMA)


MLX_SHIFTED_NORMS = (".input_layernorm.weight", ".post_attention_layernorm.weight", "model.norm.weight",
                     ".q_norm.weight", ".k_norm.weight")


def make_mlx4(src_dir, out, prompts, dev, cpu_check):
    name = "qwen3_5-dense-mlx4"
    t0 = time.time()
    vdir = os.path.join(out, name)
    if os.path.isdir(vdir):
        shutil.rmtree(vdir)
    os.makedirs(vdir)
    src_cfg = json.load(open(os.path.join(src_dir, "config.json")))
    sd = load_file(os.path.join(src_dir, "model.safetensors"))     # bf16 torch tensors, HF names model.*
    gs, bits = 64, 4
    mlx = {}                    # name -> numpy array (uint32 / uint16-as-bf16 / float32)
    bf16_keys = set()
    hf_deq = {}                 # HF name -> float32 torch tensor used for the reference
    quantized = []
    for k, v in sorted(sd.items()):
        assert k.startswith("model."), k
        mk = "language_model." + k
        v32 = v.float().numpy()
        if v.ndim == 2 and k.endswith(".weight") and v.shape[1] % gs == 0:
            P = mk[: -len(".weight")]
            packed, s16, b16 = mlx_quantize(v32, gs, bits)
            mlx[P + ".weight"] = packed
            mlx[P + ".scales"] = s16
            mlx[P + ".biases"] = b16
            bf16_keys.update([P + ".scales", P + ".biases"])
            hf_deq[k] = torch.from_numpy(mlx_dequantize(packed, s16, b16, gs, bits))
            quantized.append(P)
        elif k.endswith("conv1d.weight"):
            mlx[mk] = f32_to_bf16_np(np.ascontiguousarray(np.moveaxis(v32, 2, 1)))   # [C,1,K] -> [C,K,1]
            bf16_keys.add(mk)
            hf_deq[k] = v.float()
        elif any(k.endswith(s) for s in MLX_SHIFTED_NORMS) and v.ndim == 1:
            stored = f32_to_bf16_np(np.float32(1.0) + v32)                           # 1 + w, rounded to bf16
            mlx[mk] = stored
            bf16_keys.add(mk)
            w_hf = bf16_to_f32_np(stored) - np.float32(1.0)
            assert np.array_equal(np.float32(1.0) + w_hf, bf16_to_f32_np(stored))
            hf_deq[k] = torch.from_numpy(w_hf.astype(np.float32))
        elif k.endswith("A_log"):
            mlx[mk] = v32.astype(np.float32)                                          # kept fp32 like mlx-lm
            hf_deq[k] = v.float()
        else:                                                                         # dt_bias, linear_attn.norm
            mlx[mk] = f32_to_bf16_np(v32)
            bf16_keys.add(mk)
            hf_deq[k] = v.float()
    # write safetensors by hand so bf16 stays bf16 (numpy has no bf16): build header ourselves
    write_safetensors_raw(os.path.join(vdir, "model.safetensors"), mlx, bf16_keys)
    text_cfg = {k: v for k, v in src_cfg.items() if k not in ("architectures", "transformers_version", "dtype")}
    text_cfg["model_type"] = "qwen3_5_text"
    qcfg = {"group_size": gs, "bits": bits, "mode": "affine"}
    cfg = {
        "architectures": ["Qwen3_5ForConditionalGeneration"],
        "model_type": "qwen3_5",
        "text_config": text_cfg,
        "tie_word_embeddings": src_cfg["tie_word_embeddings"],
        "quantization": qcfg,
        "quantization_config": qcfg,
    }
    json.dump(cfg, open(os.path.join(vdir, "config.json"), "w"), indent=2, sort_keys=True)

    # re-derive: read the file back, dequantize, compare with the weights used for the reference
    back, back_dt = read_safetensors_raw(os.path.join(vdir, "model.safetensors"))
    nq = 0
    max_qerr = 0.0
    for k in sd:
        mk = "language_model." + k
        P = mk[: -len(".weight")]
        if P in quantized:
            assert back_dt[P + ".weight"] == "U32" and back_dt[P + ".scales"] == "BF16" and back_dt[P + ".biases"] == "BF16"
            w = mlx_dequantize(back[P + ".weight"], back[P + ".scales"], back[P + ".biases"], gs, bits)
            assert np.array_equal(w, hf_deq[k].numpy()), k
            # independent unpack of element (r, c) by the documented formula
            r, c = 1, 13
            q = (int(back[P + ".weight"][r, c // 8]) >> (4 * (c % 8))) & 0xF
            s = bf16_to_f32_np(back[P + ".scales"][r:r + 1, c // gs])[0]
            b = bf16_to_f32_np(back[P + ".biases"][r:r + 1, c // gs])[0]
            assert np.float32(s * np.float32(q)) + b == w[r, c]
            max_qerr = max(max_qerr, float(np.abs(w - sd[k].float().numpy()).max()))
            nq += 1
        elif any(k.endswith(s) for s in MLX_SHIFTED_NORMS) and sd[k].ndim == 1:
            assert np.array_equal(bf16_to_f32_np(back[mk]) - np.float32(1.0), hf_deq[k].numpy())
        elif k.endswith("conv1d.weight"):
            assert list(back[mk].shape) == [sd[k].shape[0], sd[k].shape[2], 1]
            assert np.array_equal(bf16_to_f32_np(back[mk])[:, :, 0], sd[k].float().numpy()[:, 0, :])
    log(f"[{name}] re-derived {nq} quantized tensors from the file: dequant == reference weights; max |dequant - bf16 orig| = {max_qerr:.4g}")

    # reference: variant 1's architecture with the dequantized weights
    cls = transformers.Qwen3_5ForCausalLM
    hf_cfg = transformers.Qwen3_5TextConfig.from_pretrained(src_dir)
    m32 = cls(hf_cfg).float()
    missing, unexpected = m32.load_state_dict(hf_deq, strict=False)
    missing = [m for m in missing if m != "lm_head.weight"]        # tied
    assert not missing and not unexpected, (missing, unexpected)
    m32.tie_weights()
    assert torch.equal(m32.lm_head.weight, hf_deq["model.embed_tokens.weight"])
    # go through save_pretrained/from_pretrained (fp32 file) so both dtypes are set up exactly like the other variants
    tmp = os.path.join(out, ".tmp-mlx4-dequant-hf")
    if os.path.isdir(tmp):
        shutil.rmtree(tmp)
    m32.save_pretrained(tmp)
    m32 = load_hf("Qwen3_5ForCausalLM", tmp, torch.float32, dev)
    m16 = load_hf("Qwen3_5ForCausalLM", tmp, torch.bfloat16, dev)
    sd32 = m32.state_dict()
    for k, v in hf_deq.items():
        assert torch.equal(sd32[k].cpu(), v), k
    shutil.rmtree(tmp)
    T, M, g32, g16 = run_reference(m32, m16, prompts, dev, cpu_check)
    # compare with the bf16 source variant (4-bit noise)
    src_T = load_file(os.path.join(src_dir, "reference.safetensors"))
    for pi in range(len(prompts)):
        a, b = T[f"p{pi}.logits_fp32"], src_T[f"p{pi}.logits_fp32"]
        M[f"p{pi}"]["vs_bf16_source_logits_maxabs"] = float((a - b).abs().max())
        M[f"p{pi}"]["vs_bf16_source_top1_agree"] = float((a.argmax(-1) == b.argmax(-1)).float().mean())
    M["rederive_check"] = (f"{nq} quantized tensors read back from model.safetensors and dequantized in numpy: "
                           "bit-identical to the fp32 weights loaded into HF; shifted norms: 1 + (stored - 1) == stored exactly")
    info = {"hf_class": "Qwen3_5ForCausalLM (dequantized weights loaded with load_state_dict)",
            "checkpoint_layout": "mlx-lm 4-bit affine (group 64), language_model.model.* names",
            "weight_dtype": "uint32 packed 4-bit + bf16 scales/biases; other tensors bf16; A_log float32",
            "weight_seed": None,
            "source_variant": "qwen3_5-dense",
            "quantized_modules": quantized,
            "notes": [
                "logits_fp32: HF forward (fp32, eager) with w = float32(scale)*q + float32(bias) (fp32 multiply then add) for every quantized module; lm_head is tied = dequantized embed_tokens",
                "shifted norms: HF weight = float32(stored_bf16) - 1, so that 1 + w_hf == stored exactly in fp32",
                "logits_bf16: same model cast to bf16 (dequantized weights rounded to bf16): for the record only",
                "config.json keeps layer_types in text_config; note mlx-lm itself derives layer kinds from full_attention_interval only",
            ]}
    src_info = json.load(open(os.path.join(src_dir, "reference.json")))
    info["weight_seed_of_source"] = src_info.get("weight_seed")
    write_reference(vdir, name, info, T, prompts, g32, g16, M, dev)
    log(f"[{name}] done in {time.time() - t0:.1f}s  metrics p0={json.dumps(M['p0'])}")
    return vdir


def cfg_attn(model):
    model.config._attn_implementation = "eager"
    try:
        model.set_attn_implementation("eager")
    except Exception:
        pass


def write_safetensors_raw(path, arrays, bf16_keys):
    dt = {np.dtype(np.uint32): "U32", np.dtype(np.float32): "F32", np.dtype(np.uint16): "BF16"}
    header = {"__metadata__": {"format": "mlx"}}
    off = 0
    blobs = []
    for k in sorted(arrays):
        a = np.ascontiguousarray(arrays[k])
        d = dt[a.dtype]
        if a.dtype == np.uint16:
            assert k in bf16_keys
        b = a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()
        header[k] = {"dtype": d, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little"))
        f.write(h)
        for b in blobs:
            f.write(b)


def read_safetensors_raw(path):
    npdt = {"U32": np.uint32, "F32": np.float32, "BF16": np.uint16}
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        data = f.read()
    out, dts = {}, {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        s, e = v["data_offsets"]
        out[k] = np.frombuffer(data[s:e], dtype=np.dtype(npdt[v["dtype"]]).newbyteorder("<")).reshape(v["shape"])
        dts[k] = v["dtype"]
    return out, dts


# ----------------------------------------------------------------------------------------------------------------------

ALL = ["qwen3_5-dense", "qwen3_5-dense-r3", "qwen3_5-vl", "qwen3_5_moe", "qwen3_5_moe-packed", "qwen3_next",
       "qwen3-tied", "qwen3-untied", "qwen3_5-dense-mlx4"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="test/fixtures/reference")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--only", default=",".join(ALL))
    ap.add_argument("--no-cpu-check", action="store_true")
    a = ap.parse_args()
    set_numerics()
    torch.set_num_threads(min(8, os.cpu_count() or 1))
    dev = a.device
    only = a.only.split(",")
    os.makedirs(a.out, exist_ok=True)
    rng = np.random.default_rng(SEED)
    prompts = [rng.integers(0, VOCAB, P0_LEN).tolist(), rng.integers(0, VOCAB, P1_LEN).tolist()]
    log(f"torch {torch.__version__} transformers {transformers.__version__} device {dev}")
    log(f"prompts {prompts}")
    summary = {}
    made = {}
    t0 = time.time()
    for vidx, name in enumerate(ALL):
        if name not in only:
            continue
        try:
            if name == "qwen3_5_moe-packed":
                src = made.get("qwen3_5_moe")
                assert src, "needs qwen3_5_moe in the same run"
                made[name] = (make_packed_moe(src[0], a.out, prompts, dev, src[2]),)
            elif name == "qwen3_5-dense-mlx4":
                src = made.get("qwen3_5-dense")
                assert src, "needs qwen3_5-dense in the same run"
                made[name] = (make_mlx4(src[0], a.out, prompts, dev, not a.no_cpu_check),)
            else:
                made[name] = make_hf_variant(name, vidx, a.out, prompts, dev, not a.no_cpu_check)
            summary[name] = "ok"
        except Exception as ex:
            import traceback
            traceback.print_exc()
            summary[name] = f"FAILED: {type(ex).__name__}: {ex}"
            log(f"[{name}] FAILED {ex}")
    sizes = {}
    for name in made:
        d = os.path.join(a.out, name)
        sizes[name] = {fn: os.path.getsize(os.path.join(d, fn)) for fn in sorted(os.listdir(d))}
    log(f"summary {json.dumps(summary, indent=1)}")
    log(f"sizes {json.dumps(sizes)}")
    log(f"total bytes {sum(sum(v.values()) for v in sizes.values())}  elapsed {time.time() - t0:.1f}s")
    with open(os.path.join(a.out, "generation-log.txt"), "w") as f:
        f.write("\n".join(LOG) + "\n")
    sys.exit(0 if all(v == "ok" for v in summary.values()) else 1)


if __name__ == "__main__":
    main()
