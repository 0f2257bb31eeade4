"""Lays out what a device run returned ($OUT: HF shards, draft.safetensors, results.tar.gz) as packages/default-raw/:

  model/   HF checkpoint (config.json, model-0000N-of-0000M.safetensors + index, generation_config.json,
           tokenizer.json, tokenizer_config.json, chat_template.jinja) — input of `splash package build`
  draft/   DFlash draft (config.json, draft.safetensors) — `--draft` of `splash package build`
  logs/    train_log.jsonl, draft_train_log.jsonl, accept.json, hf_check.json, train_result.json, data_meta.json, stages.json,
           agent_eval.json and agent_data.json (the coding-agent transcripts: counts per agent, held-out greedy eval)
  samples.md, DATA_SOURCES.md (licences), sources.json

  python3 tools/train/unpack.py --src <files_at dir> --dest packages/default-raw
"""
import argparse
import os
import shutil
import tarfile
import tempfile


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", required=True)
    ap.add_argument("--dest", default="packages/default-raw")
    a = ap.parse_args()
    d = a.dest
    for sub in ("model", "draft", "logs"):
        os.makedirs(os.path.join(d, sub), exist_ok=True)
    shards = sorted(f for f in os.listdir(a.src) if f.startswith("model-") and f.endswith(".safetensors"))
    if shards:
        for f in os.listdir(os.path.join(d, "model")):
            if f.endswith(".safetensors"):
                os.remove(os.path.join(d, "model", f))
    for f in shards:
        shutil.copy(os.path.join(a.src, f), os.path.join(d, "model", f))
    if os.path.exists(os.path.join(a.src, "draft.safetensors")):
        shutil.copy(os.path.join(a.src, "draft.safetensors"), os.path.join(d, "draft", "draft.safetensors"))
    tmp = tempfile.mkdtemp()
    with tarfile.open(os.path.join(a.src, "results.tar.gz")) as t:
        t.extractall(tmp)
    moves = {
        "hf/config.json": "model/config.json", "hf/model.safetensors.index.json": "model/model.safetensors.index.json",
        "hf/generation_config.json": "model/generation_config.json", "hf/tokenizer.json": "model/tokenizer.json",
        "hf/tokenizer_config.json": "model/tokenizer_config.json", "hf/chat_template.jinja": "model/chat_template.jinja",
        "draft/config.json": "draft/config.json", "draft/accept.json": "logs/accept.json",
        "draft/train_log.jsonl": "logs/draft_train_log.jsonl", "train_log.jsonl": "logs/train_log.jsonl",
        "train_result.json": "logs/train_result.json", "hf_check.json": "logs/hf_check.json",
        "stages.json": "logs/stages.json", "data/meta.json": "logs/data_meta.json", "tok/special.json": "logs/special_tokens.json",
        "agent_eval.json": "logs/agent_eval.json", "samples.md": "samples.md", "corpus/LICENSES.md": "DATA_SOURCES.md", "corpus/sources.json": "sources.json",
    }
    for s, t in moves.items():
        p = os.path.join(tmp, s)
        if os.path.exists(p):
            shutil.copy(p, os.path.join(d, t))
    idx = os.path.join(tmp, "agents", "index.json")
    if os.path.exists(idx):
        import json
        meta = json.load(open(idx))
        json.dump({"by_agent": meta["by_agent"], "val": meta["val"]}, open(os.path.join(d, "logs", "agent_data.json"), "w"), indent=1)
    shutil.rmtree(tmp)
    print("unpacked into", d, sorted(os.listdir(d)))


if __name__ == "__main__":
    main()
