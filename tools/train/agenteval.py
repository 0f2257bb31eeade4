"""Stage 6b: greedy decoding on the held-out coding-agent transcripts (WORK/agents/val.jsonl), at their real lengths.

For each transcript: turn 1 = the agent's whole first request (system prompt, tools, the user's task) → the model must
answer with the expected tool call (exact match of the function name and every argument); turn 2 = the same prompt
plus the expected call and the tool's real result → the model must end the turn with a short text answer (no tool
call, ends with <|im_end|> within 48 tokens; exact match of the wording is reported too). Prints the table last and
writes WORK/agent_eval.json (with a few transcripts of misses).
"""
import argparse
import json
import os
import re
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen import generate, load_model  # noqa: E402

CALL = re.compile(r"<function=([^>\n]+)>\n(.*?)</function>", re.S)
PARAM = re.compile(r"<parameter=([^>\n]+)>\n(.*?)\n</parameter>", re.S)


def parse_call(text):
    m = CALL.search(text)
    if not m:
        return None
    return m.group(1), dict(PARAM.findall(m.group(2)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--per-agent", type=int, default=24)
    ap.add_argument("--max-new", type=int, default=160)
    a = ap.parse_args()
    from tokenizers import Tokenizer
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    tok = Tokenizer.from_file(os.path.join(a.work, "tok", "tokenizer.json"))
    special = json.load(open(os.path.join(a.work, "tok", "special.json")))
    eos = special["eos_token_ids"]
    dec = lambda ids: tok.decode(ids, skip_special_tokens=False)  # noqa: E731
    model = load_model(os.path.join(a.work, "hf"), dev)
    rows = [json.loads(l) for l in open(os.path.join(a.work, "agents", "val.jsonl"))]
    by = {}
    for r in rows:
        by.setdefault(r["agent"], []).append(r)
    table, misses = {}, []
    t0 = time.time()
    for agent, rs in sorted(by.items()):
        rs = rs[:a.per_agent]
        p1, e1, p2, e2 = [], [], [], []
        for r in rs:
            segs = r["segments"]
            loss_at = [i for i, (_, m) in enumerate(segs) if m == 1]
            i1, i2 = loss_at[-2], loss_at[-1]
            flat = lambda upto: [t for ids, _ in segs[:upto] for t in ids]  # noqa: E731
            p1.append(flat(i1))
            e1.append(segs[i1][0])
            p2.append(flat(i2))
            e2.append(segs[i2][0])
        g1 = generate(model, p1, a.max_new, eos, batch=8, dev=dev)
        g2 = generate(model, p2, 48, eos, batch=8, dev=dev)
        n = len(rs)
        call_ok = final_ok = final_exact = both = 0
        for r, a1, x1, a2, x2 in zip(rs, g1, e1, g2, e2):
            got, want = parse_call(dec(a1)), parse_call(dec(x1))
            c = got is not None and got == want
            t2 = dec(a2)
            f = t2.endswith("<|im_end|>") and "<tool_call>" not in t2 and len(t2.split("</think>")[-1].strip()) > len("<|im_end|>")
            call_ok += c
            final_ok += f
            final_exact += a2 == x2
            both += c and f
            if not c and len(misses) < 12:
                misses.append({"agent": agent, "task": r["task"]["text"], "expected": dec(x1), "got": dec(a1)})
        table[agent] = {"tasks": n, "prompt_tokens": [min(map(len, p1)), max(map(len, p1))], "tool_call_exact": call_ok,
                        "final_answer_ok": final_ok, "final_answer_exact": final_exact, "both": both}
        print(agent, json.dumps(table[agent]), f"{time.time() - t0:.0f}s", flush=True)
    json.dump({"table": table, "misses": misses, "seconds": round(time.time() - t0, 1)},
              open(os.path.join(a.work, "agent_eval.json"), "w"), indent=1)
    for m in misses[:6]:
        print("MISS", json.dumps(m)[:600])
    print("\nagent      tasks  prompt tokens   tool call exact  final answer ok  (exact wording)  both")
    for agent, t in table.items():
        print(f"{agent:<10} {t['tasks']:>5}  {t['prompt_tokens'][0]:>6}-{t['prompt_tokens'][1]:<6}  "
              f"{t['tool_call_exact']:>8}/{t['tasks']:<6}  {t['final_answer_ok']:>8}/{t['tasks']:<6}  "
              f"{t['final_answer_exact']:>8}/{t['tasks']:<6}  {t['both']:>3}/{t['tasks']}", flush=True)


if __name__ == "__main__":
    main()
