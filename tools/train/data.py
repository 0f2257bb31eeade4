"""Stage 4: tokenize the corpus and the rendered conversations into flat uint16 token streams.

WORK/data/train.bin  — all training conversations + corpus documents (each followed by <|endoftext|>), shuffled at
                        document level; corpus tokens capped at --corpus-ratio × chat tokens.
WORK/data/val_corpus.bin, val_chat.bin — held-out documents / conversations.
WORK/data/meta.json  — token counts.
Resumable: skips if meta.json exists.
"""
import argparse
import json
import os
import random

import numpy as np
from tokenizers import Tokenizer


def read(path, key="text"):
    with open(path) as f:
        return [json.loads(l)[key] for l in f]


def encode(tok, texts, eot):
    out = []
    B = 2048
    for i in range(0, len(texts), B):
        for e in tok.encode_batch(texts[i:i + B], add_special_tokens=False):
            out.append(e.ids + [eot])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--corpus-ratio", type=float, default=1.2)
    ap.add_argument("--seed", type=int, default=2)
    a = ap.parse_args()
    out = os.path.join(a.work, "data")
    if os.path.exists(os.path.join(out, "meta.json")):
        print("data: done already")
        return
    os.makedirs(out, exist_ok=True)
    tok = Tokenizer.from_file(os.path.join(a.work, "tok", "tokenizer.json"))
    eot = tok.token_to_id("<|endoftext|>")
    assert tok.get_vocab_size() < 65536
    chat = encode(tok, read(os.path.join(a.work, "synth", "chat_train.jsonl")), eot)
    n_chat = sum(map(len, chat))
    corpus = encode(tok, read(os.path.join(a.work, "corpus", "train.jsonl")), eot)
    rng = random.Random(a.seed)
    rng.shuffle(corpus)
    keep, n = [], 0
    for d in corpus:
        if n >= a.corpus_ratio * n_chat:
            break
        keep.append(d)
        n += len(d)
    n_corpus_all = sum(map(len, corpus))
    docs = chat + keep
    rng.shuffle(docs)
    arr = np.fromiter((t for d in docs for t in d), dtype=np.uint16, count=sum(map(len, docs)))
    arr.tofile(os.path.join(out, "train.bin"))
    vc = encode(tok, read(os.path.join(a.work, "corpus", "val.jsonl")), eot)
    vh = encode(tok, read(os.path.join(a.work, "synth", "chat_val.jsonl")), eot)
    np.array([t for d in vc for t in d], dtype=np.uint16).tofile(os.path.join(out, "val_corpus.bin"))
    np.array([t for d in vh for t in d], dtype=np.uint16).tofile(os.path.join(out, "val_chat.bin"))
    meta = {"train_tokens": int(arr.size), "chat_tokens": n_chat, "corpus_tokens_used": n,
            "corpus_tokens_available": n_corpus_all, "val_corpus_tokens": sum(map(len, vc)),
            "val_chat_tokens": sum(map(len, vh)), "chat_docs": len(chat), "corpus_docs_used": len(keep)}
    json.dump(meta, open(os.path.join(out, "meta.json"), "w"), indent=1)
    print("data:", meta)


if __name__ == "__main__":
    main()
