"""Stage 2: byte-level BPE tokenizer trained on the corpus (+ a sample of rendered chat data), Qwen3.5 special tokens.

Pre-tokenizer = Qwen3.5's split regex (digits split singly) + ByteLevel (no prefix space); NFC normaliser;
ByteLevel decoder. Special tokens are appended after the BPE vocabulary; the last one, <|dflash_mask|>, is a
reserved row used as the DFlash mask token. Writes WORK/tok/{tokenizer.json, tokenizer_config.json,
chat_template.jinja, special.json}. Resumable: skips if tokenizer.json exists (or copies --from-dir).
"""
import argparse
import json
import os
import shutil

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

PAT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|"
       r"\s+(?!\S)|\s+")
# (content, special): "special" tokens are control tokens; <think>/<tool_call>… stay visible text (special=false),
# as in Qwen's own tokenizer.
SPECIALS = [
    ("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True),
    ("<|vision_start|>", True), ("<|vision_end|>", True), ("<|vision_pad|>", True), ("<|image_pad|>", True),
    ("<|video_pad|>", True),
    ("<tool_call>", False), ("</tool_call>", False), ("<tool_response>", False), ("</tool_response>", False),
    ("<think>", False), ("</think>", False),
    ("<|dflash_mask|>", True),
]
HERE = os.path.dirname(os.path.abspath(__file__))
TEMPLATE = os.path.join(HERE, "..", "..", "models", "qwen3_5", "chat_template.jinja")


def iter_texts(paths, max_chars):
    n = 0
    for p in paths:
        with open(p) as f:
            for line in f:
                t = json.loads(line)["text"]
                yield t
                n += len(t)
                if n >= max_chars:
                    return


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--vocab", type=int, default=16384)
    ap.add_argument("--max-chars", type=float, default=40e6)
    ap.add_argument("--from-dir", default=None, help="reuse a tokenizer trained earlier (copy its files)")
    a = ap.parse_args()
    out = os.path.join(a.work, "tok")
    os.makedirs(out, exist_ok=True)
    if os.path.exists(os.path.join(out, "tokenizer.json")):
        print("tok: done already")
        return
    if a.from_dir and os.path.exists(os.path.join(a.from_dir, "tokenizer.json")):
        shutil.copy(os.path.join(a.from_dir, "tokenizer.json"), out)
        print("tok: copied from", a.from_dir)
    else:
        tok = Tokenizer(models.BPE())
        tok.normalizer = normalizers.NFC()
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(PAT), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
        ])
        tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
        trainer = trainers.BpeTrainer(vocab_size=a.vocab - len(SPECIALS), min_frequency=2, show_progress=False,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[])
        srcs = [os.path.join(a.work, "corpus", "train.jsonl")]
        chat = os.path.join(a.work, "synth", "chat_train.jsonl")
        texts = list(iter_texts(srcs, a.max_chars * 0.8))
        if os.path.exists(chat):
            texts += list(iter_texts([chat], a.max_chars * 0.2))
        tok.train_from_iterator(texts, trainer, length=len(texts))
        tok.add_tokens([AddedToken(c, special=s, normalized=False) for c, s in SPECIALS if not s])
        # add in the listed order: re-add all with explicit ids order by adding special ones via add_special_tokens
        tok.add_special_tokens([AddedToken(c, special=True, normalized=False) for c, s in SPECIALS if s])
        tok.save(os.path.join(out, "tokenizer.json"))
    tok = Tokenizer.from_file(os.path.join(out, "tokenizer.json"))
    ids = {c: tok.token_to_id(c) for c, _ in SPECIALS}
    V = tok.get_vocab_size()
    special = {"ids": ids, "vocab_size": V, "model_vocab_size": ((V + 63) // 64) * 64,
               "mask_token_id": ids["<|dflash_mask|>"], "eos_token_ids": [ids["<|im_end|>"], ids["<|endoftext|>"]],
               "pad_token_id": ids["<|endoftext|>"]}
    json.dump(special, open(os.path.join(out, "special.json"), "w"), indent=1)
    template = open(TEMPLATE).read()
    shutil.copy(TEMPLATE, os.path.join(out, "chat_template.jinja"))
    added = {}
    for c, s in SPECIALS:
        added[str(ids[c])] = {"content": c, "lstrip": False, "normalized": False, "rstrip": False,
                              "single_word": False, "special": s}
    tc = {"add_bos_token": False, "add_prefix_space": False, "added_tokens_decoder": added,
          "bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "unk_token": None,
          "clean_up_tokenization_spaces": False, "errors": "replace", "model_max_length": 131072,
          "split_special_tokens": False, "tokenizer_class": "PreTrainedTokenizerFast", "chat_template": template}
    json.dump(tc, open(os.path.join(out, "tokenizer_config.json"), "w"), indent=1, ensure_ascii=False)
    print(f"tok: vocab {V}, specials {ids}")


if __name__ == "__main__":
    main()
