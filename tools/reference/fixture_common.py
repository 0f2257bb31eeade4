"""Shared pieces of make_fixtures.py: the fixtures' sizes and seeds, weight initialisation, the transformers
forward passes that produce the reference tensors, and the reference files' writer."""
import copy
import json
import os
import platform
import shutil

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np
import torch
import transformers
import safetensors
from safetensors.torch import save_file

SEED = 20261202
VOCAB = 256
HIDDEN = 64
INTERMEDIATE = 128
P0_LEN = 16
P1_LEN = 80          # > 64: the chunked GDN prefill crosses a chunk boundary
N_GREEDY = 24
STD_LINEAR = 0.08
STD_OUT = float(os.environ.get('STD_OUT', '0.04'))  # output projections (o_proj, out_proj, down_proj, experts.down_proj)
STD_EMBED = 0.1      # embeddings and lm_head
STD_NORM = 0.1
STD_CONV = 0.25
STD_BIAS = 0.02

ZERO_CENTRED_NORMS = {"Qwen3_5RMSNorm", "Qwen3_5MoeRMSNorm", "Qwen3NextRMSNorm"}
ONE_CENTRED_NORMS = {"Qwen3RMSNorm", "Qwen3_5RMSNormGated", "Qwen3_5MoeRMSNormGated", "Qwen3NextRMSNormGated"}

LOG = []


def log(*a):
    s = " ".join(str(x) for x in a)
    LOG.append(s)
    print(s, flush=True)


# ----------------------------------------------------------------------------------------------------------------------
# configs

ROPE_MROPE = dict(rope_type="default", rope_theta=10000.0, partial_rotary_factor=0.25,
                  mrope_section=[2, 1, 1], mrope_interleaved=True)


def hybrid_text(**over):
    d = dict(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=INTERMEDIATE, num_hidden_layers=4,
             num_attention_heads=4, num_key_value_heads=2, head_dim=32,
             linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=32, linear_value_head_dim=32,
             linear_conv_kernel_dim=4, rms_norm_eps=1e-6, max_position_embeddings=4096, hidden_act="silu",
             rope_parameters=copy.deepcopy(ROPE_MROPE), tie_word_embeddings=False)
    d.update(over)
    return d


MOE = dict(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=64, shared_expert_intermediate_size=64)

DENSE_LAYER_TYPES = ["linear_attention", "linear_attention", "full_attention", "linear_attention",
                     "linear_attention", "linear_attention", "full_attention"]


def build_variant(name):
    """Return (config, model_class_name, notes)."""
    T = transformers
    if name == "qwen3_5-dense":
        c = T.Qwen3_5TextConfig(**hybrid_text(num_hidden_layers=7, layer_types=DENSE_LAYER_TYPES, tie_word_embeddings=True))
        return c, "Qwen3_5ForCausalLM"
    if name == "qwen3_5-dense-r3":
        c = T.Qwen3_5TextConfig(**hybrid_text(num_hidden_layers=4, linear_num_value_heads=6, tie_word_embeddings=False))
        return c, "Qwen3_5ForCausalLM"
    if name == "qwen3_5-vl":
        tc = hybrid_text(num_hidden_layers=4, tie_word_embeddings=False)
        vc = dict(depth=2, hidden_size=64, num_heads=2, intermediate_size=128, out_hidden_size=HIDDEN,
                  patch_size=16, temporal_patch_size=2, spatial_merge_size=2, in_channels=3,
                  num_position_embeddings=64, hidden_act="gelu_pytorch_tanh")
        c = T.Qwen3_5Config(text_config=tc, vision_config=vc, tie_word_embeddings=False)
        return c, "Qwen3_5ForConditionalGeneration"
    if name == "qwen3_5_moe":
        tc = hybrid_text(num_hidden_layers=4, tie_word_embeddings=False)
        tc.pop("intermediate_size")
        tc.update(MOE)
        return T.Qwen3_5MoeTextConfig(**tc), "Qwen3_5MoeForCausalLM"
    if name == "qwen3_next":
        tc = hybrid_text(num_hidden_layers=4, tie_word_embeddings=False,
                         rope_parameters=dict(rope_type="default", rope_theta=10000.0, partial_rotary_factor=0.25))
        tc.update(MOE)
        tc.update(norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[])
        return T.Qwen3NextConfig(**tc), "Qwen3NextForCausalLM"
    if name in ("qwen3-tied", "qwen3-untied"):
        c = T.Qwen3Config(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=INTERMEDIATE, num_hidden_layers=3,
                          num_attention_heads=4, num_key_value_heads=2, head_dim=32, rms_norm_eps=1e-6,
                          max_position_embeddings=4096, hidden_act="silu",
                          rope_parameters=dict(rope_type="default", rope_theta=10000.0),
                          tie_word_embeddings=(name == "qwen3-tied"))
        return c, "Qwen3ForCausalLM"
    raise KeyError(name)


# ----------------------------------------------------------------------------------------------------------------------
# weights

@torch.no_grad()
def init_weights(model, seed):
    """Deterministic random init (fp32), see README for the rules."""
    g = torch.Generator().manual_seed(seed)

    def normal(p, std, mean=0.0):
        p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float32) * std + mean)

    done = set()
    for mname, mod in model.named_modules():
        cls = type(mod).__name__
        for pname, p in mod.named_parameters(recurse=False):
            full = f"{mname}.{pname}" if mname else pname
            if id(p) in done:
                continue           # tied
            done.add(id(p))
            if cls in ZERO_CENTRED_NORMS:
                normal(p, STD_NORM)                       # applied as (1 + w)
            elif cls in ONE_CENTRED_NORMS:
                normal(p, STD_NORM, 1.0)                  # applied as w
            elif cls == "LayerNorm":
                normal(p, STD_NORM, 1.0) if pname == "weight" else normal(p, STD_BIAS)
            elif cls == "Embedding":
                normal(p, STD_EMBED if "embed_tokens" in full else STD_LINEAR)
            elif cls == "Linear":
                if pname == "bias":
                    normal(p, STD_BIAS)
                elif full.startswith("lm_head"):
                    normal(p, STD_EMBED)
                elif full.rsplit(".", 1)[-1] in ("o_proj", "out_proj", "down_proj") and "visual" not in full:
                    normal(p, STD_OUT)
                else:
                    normal(p, STD_LINEAR)
            elif cls == "Conv1d":                         # GDN depthwise causal conv
                normal(p, STD_CONV)
            elif cls == "Conv3d":                         # vision patch embed
                normal(p, STD_LINEAR) if pname == "weight" else normal(p, STD_BIAS)
            elif pname == "A_log":
                u = torch.rand(p.shape, generator=g) * 15.0 + 1.0          # A ~ U(1, 16)
                p.copy_(torch.log(u))
            elif pname == "dt_bias":
                lo, hi = np.log(1e-3), np.log(1e-1)
                dt = torch.exp(torch.rand(p.shape, generator=g) * (hi - lo) + lo)   # dt ~ logU(1e-3, 0.1)
                p.copy_(dt + torch.log(-torch.expm1(-dt)))                     # inverse softplus
            elif pname == "down_proj":                                     # fused experts [E, H, I]
                normal(p, STD_OUT)
            elif pname == "gate_up_proj" or p.ndim >= 2:                   # fused experts [E, 2I, H], anything else 2-D
                normal(p, STD_LINEAR)
            else:
                normal(p, STD_BIAS)
                log(f"  [init] generic small normal for {full} ({cls})")
    return model


def round_to_bf16_(model):
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(torch.bfloat16).to(p.dtype))


# ----------------------------------------------------------------------------------------------------------------------
# running HF

def set_numerics():
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")


def decoder_layers(model):
    m = model.model
    if hasattr(m, "language_model"):
        m = m.language_model
    return m, m.layers


@torch.no_grad()
def forward_capture(model, ids, dev):
    """Logits [T,V] and residual stream: [L+1, T, H] (0 = embeddings, i+1 = output of layer i), final norm [T,H]."""
    base, layers = decoder_layers(model)
    caps = {}
    hooks = [base.embed_tokens.register_forward_hook(lambda m, i, o: caps.__setitem__("emb", o))]
    for li, layer in enumerate(layers):
        def hk(m, i, o, li=li):
            caps[li] = o[0] if isinstance(o, tuple) else o
        hooks.append(layer.register_forward_hook(hk))
    hooks.append(base.norm.register_forward_hook(lambda m, i, o: caps.__setitem__("norm", o)))
    try:
        x = torch.tensor([ids], device=dev)
        out = model(input_ids=x, use_cache=False)
    finally:
        for h in hooks:
            h.remove()
    hid = torch.stack([caps["emb"][0]] + [caps[i][0] for i in range(len(layers))])
    return out.logits[0].detach().cpu(), hid.detach().cpu(), caps["norm"][0].detach().cpu()


@torch.no_grad()
def greedy(model, ids, dev, n=N_GREEDY):
    x = torch.tensor([ids], device=dev)
    out = model.generate(input_ids=x, attention_mask=torch.ones_like(x), max_new_tokens=n, min_new_tokens=n,
                         do_sample=False, use_cache=True, num_beams=1, eos_token_id=None, pad_token_id=0,
                         output_logits=True, return_dict_in_generate=True, temperature=None, top_p=None, top_k=None)
    seq = out.sequences[0, len(ids):].tolist()
    logits = torch.stack([l[0] for l in out.logits]).detach().float().cpu()
    assert len(seq) == n, seq
    return seq, logits


def margin_min(logits):
    t = torch.topk(logits.float(), 2, dim=-1).values
    return float((t[:, 0] - t[:, 1]).min())


def load_hf(cls_name, path, dtype, dev):
    cls = getattr(transformers, cls_name)
    m = cls.from_pretrained(path, dtype=dtype, attn_implementation="eager")
    return m.to(dev).eval()


def run_reference(model32, model16, prompts, dev, cpu_check=True):
    """Compute every reference tensor and metric.  model32 / model16 on dev."""
    T = {}
    M = {}
    greedy_fp32, greedy_bf16 = [], []
    for pi, ids in enumerate(prompts):
        lg32, hid32, fn32 = forward_capture(model32, ids, dev)
        lg16, hid16, fn16 = forward_capture(model16, ids, dev)
        T[f"p{pi}.logits_fp32"] = lg32.float().contiguous()
        T[f"p{pi}.logits_bf16"] = lg16.to(torch.bfloat16).contiguous()
        if pi == 0:
            T["p0.hidden_fp32"] = hid32.float().contiguous()
            T["p0.final_norm_fp32"] = fn32.float().contiguous()
            T["p0.hidden_bf16"] = hid16.to(torch.bfloat16).contiguous()
        g32, gl32 = greedy(model32, ids, dev)
        g16, _ = greedy(model16, ids, dev)
        greedy_fp32.append(g32)
        greedy_bf16.append(g16)
        if pi == 0:
            T["p0.greedy_logits_fp32"] = gl32.contiguous()
        # teacher-forced prefill over prompt+greedy: compare with the decode-path logits
        full = ids + g32
        tf, _, _ = forward_capture(model32, full, dev)
        tf_at = tf[len(ids) - 1: len(ids) - 1 + N_GREEDY]
        M[f"p{pi}"] = {
            "fp32_logit_std": float(lg32.std()),
            "fp32_logit_absmax": float(lg32.abs().max()),
            "fp32_top1_margin_min": margin_min(lg32),
            "greedy_fp32_top1_margin_min": margin_min(gl32),
            "bf16_vs_fp32_logits_maxabs": float((lg16.float() - lg32).abs().max()),
            "bf16_vs_fp32_top1_agree": float((lg16.float().argmax(-1) == lg32.argmax(-1)).float().mean()),
            "greedy_bf16_equals_fp32_prefix": next((i for i, (a, b) in enumerate(zip(g32, g16)) if a != b), N_GREEDY),
            "decode_vs_prefill_logits_maxabs": float((gl32 - tf_at).abs().max()),
            "decode_vs_prefill_argmax_agree": bool((gl32.argmax(-1) == tf_at.argmax(-1)).all()),
        }
        if cpu_check and dev != "cpu":
            mc = copy.deepcopy(model32).to("cpu")
            lgc, hidc, _ = forward_capture(mc, ids, "cpu")
            M[f"p{pi}"]["cpu_vs_device_fp32_logits_maxabs"] = float((lgc - lg32).abs().max())
            M[f"p{pi}"]["cpu_vs_device_fp32_hidden_maxabs"] = float((hidc - hid32).abs().max()) if pi == 0 else None
            del mc
    return T, M, greedy_fp32, greedy_bf16


# ----------------------------------------------------------------------------------------------------------------------
# writing

def versions(dev):
    v = {"torch": torch.__version__, "transformers": transformers.__version__, "numpy": np.__version__,
         "safetensors": safetensors.__version__, "python": platform.python_version(), "device": dev}
    if dev == "cuda":
        v["gpu"] = torch.cuda.get_device_name(0)
        v["cuda"] = torch.version.cuda
    v["tf32"] = False
    return v


def tensor_index(T):
    return {k: {"dtype": str(v.dtype).replace("torch.", ""), "shape": list(v.shape)} for k, v in sorted(T.items())}


def write_reference(vdir, name, info, T, prompts, g32, g16, M, dev, extra=None):
    save_file({k: v.contiguous() for k, v in T.items()}, os.path.join(vdir, "reference.safetensors"),
              metadata={"format": "pt", "variant": name})
    cfg = json.load(open(os.path.join(vdir, "config.json")))
    ref = {
        "format_version": 1,
        "variant": name,
        **info,
        "seed": SEED,
        "weight_seed": info.get("weight_seed"),
        "versions": versions(dev),
        "prompt_ids": prompts,
        "greedy_fp32": g32,
        "greedy_bf16": g16,
        "n_greedy": N_GREEDY,
        "tensors_file": "reference.safetensors",
        "tensors": tensor_index(T),
        "metrics": M,
        "config": cfg,
    }
    if extra:
        ref.update(extra)
    with open(os.path.join(vdir, "reference.json"), "w") as f:
        json.dump(ref, f, indent=1)
        f.write("\n")


def clean_checkpoint_dir(vdir):
    for fn in os.listdir(vdir):
        if fn not in ("config.json", "model.safetensors"):
            p = os.path.join(vdir, fn)
            shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)


def state_equal(m_a, m_b):
    sa, sb = m_a.state_dict(), m_b.state_dict()
    assert set(sa) == set(sb), (set(sa) ^ set(sb))
    bad = [k for k in sa if not torch.equal(sa[k].float().cpu(), sb[k].float().cpu())]
    return bad
