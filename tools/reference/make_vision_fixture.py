#!/usr/bin/env python3
"""Make the image reference: a tiny random Qwen3.5 checkpoint WITH a vision tower, two small test images, the
transformers image processor's outputs for them and the model's logits for a prompt holding both images.

Writes --out/qwen3_5-vl-image/ (see test/fixtures/reference/README.md, "qwen3_5-vl-image"):
  config.json, model.safetensors, preprocessor_config.json    the checkpoint (bf16) and its image settings
  image-a.png (96x64, no resize), image-b.png (75x50, resized to 64x64)
  reference.json, reference.safetensors                       processor outputs, prompt ids, positions, logits

Run on the GPU machine like make_fixtures.py (tools/reference/README.md).  Deterministic.
"""
import argparse
import json
import os
import shutil
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_common as fc  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from PIL import Image  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

NAME = "qwen3_5-vl-image"
WEIGHT_SEED = fc.SEED + 100
# vision special ids inside the tiny vocabulary (the real family uses 248053..248057)
VISION_START, VISION_END, IMAGE_PAD, VIDEO_PAD = 251, 252, 253, 254
MIN_PIXELS, MAX_PIXELS = 1024, 65536
PREPROCESSOR = {
    "image_processor_type": "Qwen2VLImageProcessor", "do_resize": True, "do_rescale": True, "rescale_factor": 1 / 255,
    "do_normalize": True, "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5], "do_convert_rgb": True,
    "size": {"shortest_edge": MIN_PIXELS, "longest_edge": MAX_PIXELS}, "patch_size": 16, "temporal_patch_size": 2,
    "merge_size": 2,
}
N_GREEDY = 8


def build_config():
    tc = fc.hybrid_text(num_hidden_layers=4, tie_word_embeddings=False)
    vc = dict(depth=2, hidden_size=64, num_heads=2, intermediate_size=128, out_hidden_size=fc.HIDDEN,
              patch_size=16, temporal_patch_size=2, spatial_merge_size=2, in_channels=3,
              num_position_embeddings=64, hidden_act="gelu_pytorch_tanh")
    return transformers.Qwen3_5Config(text_config=tc, vision_config=vc, tie_word_embeddings=False,
                                      image_token_id=IMAGE_PAD, video_token_id=VIDEO_PAD,
                                      vision_start_token_id=VISION_START, vision_end_token_id=VISION_END)


def make_image(h, w, seed):
    """A smooth colour field with a few hard-edged shapes (exercises both resampling and the patch layout)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    img = np.zeros((h, w, 3))
    for c in range(3):
        a, b, p = rng.uniform(0.02, 0.2), rng.uniform(0.02, 0.2), rng.uniform(0, 6.28)
        img[..., c] = 127.5 + 120 * np.sin(a * x + b * y + p)
    for _ in range(4):
        y0, x0 = rng.integers(0, h - 8), rng.integers(0, w - 8)
        img[y0:y0 + rng.integers(4, 16), x0:x0 + rng.integers(4, 20)] = rng.integers(0, 256, 3)
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def processor_classes():
    out = []
    for n in ("Qwen2VLImageProcessor", "Qwen2VLImageProcessorFast", "Qwen2VLImageProcessorPil"):
        if hasattr(transformers, n):
            out.append(n)
    return out


def run_processor(cls_name, images):
    cls = getattr(transformers, cls_name)
    kw = {k: v for k, v in PREPROCESSOR.items() if k != "image_processor_type"}
    proc = cls(**kw)
    out = proc(images=images, return_tensors="pt")
    return out["pixel_values"].float(), out["image_grid_thw"].long()


def prompt_ids(grids, rng):
    """text, <vs> pads <ve>, text, <vs> pads <ve>, text; pads = t*h*w/4 per image."""
    text = lambda n: rng.integers(0, 250, n).tolist()  # noqa: E731
    ids = text(5)
    for i, g in enumerate(grids):
        n = int(g[0] * g[1] * g[2]) // 4
        ids += [VISION_START] + [IMAGE_PAD] * n + [VISION_END] + text(4 if i == 0 else 6)
    return ids


def expected_positions(ids, grids):
    """transformers' get_rope_index: text runs advance by one; an image's tokens get (cur, cur+r, cur+c), then cur += max(h, w)/2."""
    out = [[], [], []]
    cur, i, k = 0, 0, 0
    while i < len(ids):
        if ids[i] == IMAGE_PAD:
            t, h, w = grids[k]
            h, w = h // 2, w // 2
            for r in range(h):
                for c in range(w):
                    out[0].append(cur); out[1].append(cur + r); out[2].append(cur + c)  # noqa: E702
            cur += max(h, w)
            i += h * w
            k += 1
        else:
            for d in range(3):
                out[d].append(cur)
            cur += 1
            i += 1
    return torch.tensor(out, dtype=torch.long)


@torch.no_grad()
def forward(model, ids, pv, grid, dev):
    caps = {}
    vis = model.model.visual
    hooks = [vis.merger.register_forward_hook(lambda m, i, o: caps.__setitem__("merger", o)),
             vis.patch_embed.register_forward_hook(lambda m, i, o: caps.__setitem__("patch", o)),
             model.model.language_model.register_forward_pre_hook(
                 lambda m, a, k: caps.__setitem__("pos", k.get("position_ids")), with_kwargs=True)]
    try:
        x = torch.tensor([ids], device=dev)
        out = model(input_ids=x, attention_mask=torch.ones_like(x), mm_token_type_ids=(x == IMAGE_PAD).long(),
                    pixel_values=pv.to(dev, model.dtype),
                    image_grid_thw=grid.to(dev), use_cache=False)
    finally:
        for h in hooks:
            h.remove()
    merger = caps["merger"]
    merger = merger[0] if isinstance(merger, tuple) else merger
    return out.logits[0].float().cpu(), merger.float().cpu(), caps["patch"].float().cpu(), caps["pos"]


@torch.no_grad()
def greedy(model, ids, pv, grid, dev):
    x = torch.tensor([ids], device=dev)
    out = model.generate(input_ids=x, attention_mask=torch.ones_like(x), mm_token_type_ids=(x == IMAGE_PAD).long(),
                         pixel_values=pv.to(dev, model.dtype),
                         image_grid_thw=grid.to(dev), max_new_tokens=N_GREEDY, min_new_tokens=N_GREEDY,
                         do_sample=False, use_cache=True, num_beams=1, eos_token_id=None, pad_token_id=0,
                         output_logits=True, return_dict_in_generate=True, temperature=None, top_p=None, top_k=None)
    return out.sequences[0, len(ids):].tolist(), torch.stack([l[0] for l in out.logits]).float().cpu()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="test/fixtures/reference")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = ap.parse_args()
    fc.set_numerics()
    dev = a.device
    t0 = time.time()
    fc.log(f"torch {torch.__version__} transformers {transformers.__version__} device {dev}")
    fc.log("classes: " + ", ".join(n for n in dir(transformers) if "Qwen3_5" in n or "Qwen2VLImage" in n))
    vdir = os.path.join(a.out, NAME)
    if os.path.isdir(vdir):
        shutil.rmtree(vdir)
    cfg = build_config()
    cfg._attn_implementation = "eager"
    model = transformers.Qwen3_5ForConditionalGeneration(cfg).float().eval()
    fc.init_weights(model, WEIGHT_SEED)
    fc.round_to_bf16_(model)
    model.to(torch.bfloat16).save_pretrained(vdir)
    fc.clean_checkpoint_dir(vdir)
    with open(os.path.join(vdir, "preprocessor_config.json"), "w") as f:
        json.dump(PREPROCESSOR, f, indent=2)
        f.write("\n")
    imgs = [make_image(64, 96, fc.SEED + 1), make_image(50, 75, fc.SEED + 2)]
    for nm, im in zip(("image-a.png", "image-b.png"), imgs):
        Image.fromarray(im).save(os.path.join(vdir, nm))
    pil = [Image.open(os.path.join(vdir, nm)).convert("RGB") for nm in ("image-a.png", "image-b.png")]
    assert all(np.array_equal(np.asarray(p), im) for p, im in zip(pil, imgs))

    procs = processor_classes()
    fc.log(f"image processors: {procs}")
    ref_proc = procs[0]
    pv, grid = run_processor(ref_proc, pil)
    M = {"processor": ref_proc, "grid_thw": grid.tolist()}
    for other in procs[1:]:
        try:
            pv2, grid2 = run_processor(other, pil)
            M[f"{other}_grid_equal"] = grid2.tolist() == grid.tolist()
            if pv2.shape == pv.shape:
                na = int(grid[0].prod())
                M[f"{other}_pixel_maxabs_image_a"] = float((pv2[:na] - pv[:na]).abs().max())
                M[f"{other}_pixel_maxabs_image_b"] = float((pv2[na:] - pv[na:]).abs().max())
        except Exception as ex:  # noqa
            M[f"{other}_failed"] = f"{type(ex).__name__}: {ex}"
    fc.log(f"processor {json.dumps(M)}")

    rng = np.random.default_rng(fc.SEED)
    ids = prompt_ids(grid.tolist(), rng)
    m32 = fc.load_hf("Qwen3_5ForConditionalGeneration", vdir, torch.float32, dev)
    m16 = fc.load_hf("Qwen3_5ForConditionalGeneration", vdir, torch.bfloat16, dev)
    lg32, emb32, patch32, pos = forward(m32, ids, pv, grid, dev)
    lg16, _, _, _ = forward(m16, ids, pv, grid, dev)
    mine = expected_positions(ids, grid.tolist())
    if pos is None:
        fc.log("position_ids were not passed to the language model; using the documented rule")
        pos3 = mine
    else:
        pos = pos.detach().cpu().long()
        fc.log(f"position_ids shape {list(pos.shape)}")
        pos3 = pos[-3:, 0, :] if pos.dim() == 3 else pos   # [3, T] (T, H, W); a leading text row, if any, is dropped
    M["positions_match_documented_rule"] = bool(torch.equal(pos3, mine))
    g32, gl32 = greedy(m32, ids, pv, grid, dev)
    full = ids + g32
    tf, _, _, _ = forward(m32, full, pv, grid, dev)
    tf_at = tf[len(ids) - 1: len(ids) - 1 + N_GREEDY]
    M.update({
        "prompt_len": len(ids),
        "fp32_logit_std": float(lg32.std()),
        "fp32_top1_margin_min": fc.margin_min(lg32),
        "greedy_fp32_top1_margin_min": fc.margin_min(gl32),
        "bf16_vs_fp32_logits_maxabs": float((lg16 - lg32).abs().max()),
        "decode_vs_prefill_logits_maxabs": float((gl32 - tf_at).abs().max()),
        "image_embeds_absmax": float(emb32.abs().max()),
    })
    if dev != "cpu":
        mc = fc.load_hf("Qwen3_5ForConditionalGeneration", vdir, torch.float32, "cpu")
        lgc, embc, _, _ = forward(mc, ids, pv, grid, "cpu")
        M["cpu_vs_device_fp32_logits_maxabs"] = float((lgc - lg32).abs().max())
        M["cpu_vs_device_image_embeds_maxabs"] = float((embc - emb32).abs().max())
    T = {
        "pixel_values": pv.contiguous(),
        "image_grid_thw": grid.to(torch.int32).contiguous(),
        "input_ids": torch.tensor(ids, dtype=torch.int32),
        "position_ids": pos3.to(torch.int32).contiguous(),
        "patch_embed_fp32": patch32.contiguous(),
        "image_embeds_fp32": emb32.contiguous(),
        "logits_fp32": lg32.contiguous(),
        "logits_bf16": lg16.to(torch.bfloat16).contiguous(),
        "greedy_logits_fp32": gl32.contiguous(),
    }
    save_file(T, os.path.join(vdir, "reference.safetensors"), metadata={"format": "pt", "variant": NAME})
    ref = {
        "format_version": 1, "variant": NAME, "hf_class": "Qwen3_5ForConditionalGeneration",
        "weight_seed": WEIGHT_SEED, "seed": fc.SEED, "versions": fc.versions(dev),
        "images": [{"file": "image-a.png", "height": 64, "width": 96}, {"file": "image-b.png", "height": 50, "width": 75}],
        "vision_token_ids": {"vision_start": VISION_START, "vision_end": VISION_END, "image_pad": IMAGE_PAD},
        "input_ids": ids, "greedy_fp32": g32, "n_greedy": N_GREEDY, "tensors_file": "reference.safetensors",
        "tensors": fc.tensor_index(T), "metrics": M,
        "config": json.load(open(os.path.join(vdir, "config.json"))), "preprocessor": PREPROCESSOR,
    }
    with open(os.path.join(vdir, "reference.json"), "w") as f:
        json.dump(ref, f, indent=1)
        f.write("\n")
    fc.log(f"[{NAME}] done in {time.time() - t0:.1f}s metrics {json.dumps(M)}")
    fc.log(f"sizes {json.dumps({fn: os.path.getsize(os.path.join(vdir, fn)) for fn in sorted(os.listdir(vdir))})}")
    with open(os.path.join(a.out, "vision-generation-log.txt"), "w") as f:
        f.write("\n".join(fc.LOG) + "\n")


if __name__ == "__main__":
    try:
        main()
    except Exception:
        traceback.print_exc()
        with open(os.path.join("/tmp", "vision-generation-log.txt"), "w") as f:
            f.write("\n".join(fc.LOG) + "\n")
        sys.exit(1)
