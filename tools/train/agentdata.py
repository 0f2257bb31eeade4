"""Stage 4b: tokenize the coding-agent transcripts rendered by tools/train/agent-render.mjs.

Input: an agents.jsonl.gz (prompt heads once, then transcripts as [text, loss] segments, byte-identical to the
server's rendering). Each segment is tokenized on its own, so every span the model must generate starts on a token
boundary exactly as at inference (the prompt ends with the generation prompt, the model's tokens follow).
Writes WORK/agents/{tokens.bin (uint16), mask.bin (uint8, 1 = assistant token to learn), index.json} for training
and WORK/agents/val.jsonl (held-out transcripts as token segments) for tools/train/agenteval.py.
Resumable: skips if index.json exists.
"""
import argparse
import gzip
import json
import os

import numpy as np
from tokenizers import Tokenizer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--src", required=True)
    a = ap.parse_args()
    out = os.path.join(a.work, "agents")
    if os.path.exists(os.path.join(out, "index.json")):
        print("agentdata: done already")
        return
    os.makedirs(out, exist_ok=True)
    tok = Tokenizer.from_file(os.path.join(a.work, "tok", "tokenizer.json"))
    heads, rows = {}, []
    with gzip.open(a.src, "rt") as f:
        for line in f:
            r = json.loads(line)
            if "text" in r:
                heads[r["head"]] = r["text"]
            else:
                rows.append(r)
    # The first segment carries the shared head in front of it. A head is encoded once, up to its last
    # <|im_start|> (an added token: the tokenizer splits there first, so the pieces encode as the whole would).
    cut = {h: t.rfind("<|im_start|>") + len("<|im_start|>") for h, t in heads.items()}
    hnames = sorted(heads)
    henc = dict(zip(hnames, (e.ids for e in tok.encode_batch([heads[h][:cut[h]] for h in hnames], add_special_tokens=False))))
    texts, spans = [], []
    for r in rows:
        segs = r["segments"]
        spans.append((len(texts), len(segs)))
        for i, (t, _) in enumerate(segs):
            texts.append(heads[r["head"]][cut[r["head"]]:] + t if i == 0 else t)
    enc = tok.encode_batch(texts, add_special_tokens=False)
    ids_all, mask_all, index, val = [], [], [], []
    pos = 0
    for r, (s, n) in zip(rows, spans):
        seg_ids = [henc[r["head"]] + enc[s].ids] + [enc[s + i].ids for i in range(1, n)]
        losses = [m for _, m in r["segments"]]
        if r["split"] == "val":
            val.append({"agent": r["agent"], "task": r["task"], "segments": [[ids, m] for ids, m in zip(seg_ids, losses)]})
            continue
        ids = [t for x in seg_ids for t in x]
        mask = [m for x, m in zip(seg_ids, losses) for _ in x]
        ids_all.append(np.array(ids, dtype=np.uint16))
        mask_all.append(np.array(mask, dtype=np.uint8))
        index.append({"agent": r["agent"], "offset": pos, "length": len(ids), "loss_tokens": int(sum(mask))})
        pos += len(ids)
    np.concatenate(ids_all).tofile(os.path.join(out, "tokens.bin"))
    np.concatenate(mask_all).tofile(os.path.join(out, "mask.bin"))
    with open(os.path.join(out, "val.jsonl"), "w") as f:
        for v in val:
            f.write(json.dumps(v) + "\n")
    by = {}
    for e in index:
        b = by.setdefault(e["agent"], {"sequences": 0, "tokens": 0, "loss_tokens": 0, "max_len": 0})
        b["sequences"] += 1
        b["tokens"] += e["length"]
        b["loss_tokens"] += e["loss_tokens"]
        b["max_len"] = max(b["max_len"], e["length"])
    json.dump({"sequences": index, "by_agent": by, "val": len(val)}, open(os.path.join(out, "index.json"), "w"))
    print("agentdata:", json.dumps(by), "val", len(val), flush=True)


if __name__ == "__main__":
    main()
