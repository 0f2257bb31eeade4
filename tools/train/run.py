"""Driver: runs the whole stage sequence within a wall-clock budget and copies the results to $OUT.

  python3 tools/train/run.py --work /tmp/splash_train --out $OUT --budget 565 --train-args "--batch 64 --seq 512"
  (add --smoke for a 2-minute end-to-end check; to continue the committed model in a later session:
   --init-from packages/default-raw/model --train-args "--batch 64 --seq 512 --lr 1e-3 --warmup 50"
   --draft-args "--init-draft packages/default-raw/draft" — the tokenizer is then copied, not retrained)

Agent-capable default (packages/default-raw/README.md): --agents FILE adds the coding-agent transcripts rendered by
agent-render.mjs (agentdata.py tokenizes them, train.py mixes them in, agenteval.py decodes the held-out ones), and
--phase 1 / --phase 2 split the run over two commands on the same GPU machine (1: data + train + export;
2: check, agent eval, draft), each within one call's 10 minutes.

Stages (each a script in this folder, each resumable from the files in WORK): corpus → synth → tok → data → train
(gets whatever time is left after reserving the later stages) → check (transformers load + logits comparison) →
gen (the model's own greedy answers for the draft) → draft (train + acceptance) → collect.
$OUT receives at most 8 files (the GPU machine's limit): the HF shards (≤ 15 MiB each), draft.safetensors and
results.tar.gz (configs, tokenizer, logs, samples, licences, acceptance). Collected after train and again at the end,
so a run cut short still returns the model.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def sh(args, work, log, timeout=None):
    t = time.time()
    cmd = [sys.executable, os.path.join(HERE, args[0])] + ["--work", work] + [str(x) for x in args[1:]]
    print(">>", " ".join(cmd), flush=True)
    try:
        rc = subprocess.run(cmd, timeout=timeout).returncode
    except subprocess.TimeoutExpired:
        rc = "timeout"
    dt = time.time() - t
    log.append({"stage": " ".join(str(x) for x in args), "seconds": round(dt, 1), "rc": rc})
    print(f"<< {args[0]} rc={rc} {dt:.1f}s", flush=True)
    return rc == 0


def collect(work, out, log):
    if not out:
        return
    os.makedirs(out, exist_ok=True)
    for f in os.listdir(out):
        if f.endswith(".safetensors") or f == "results.tar.gz":
            os.remove(os.path.join(out, f))
    hf = os.path.join(work, "hf")
    if os.path.isdir(hf):
        for f in sorted(os.listdir(hf)):
            if f.endswith(".safetensors"):
                shutil.copy(os.path.join(hf, f), out)
    d = os.path.join(work, "draft", "draft.safetensors")
    if os.path.exists(d):
        shutil.copy(d, out)
    json.dump(log, open(os.path.join(work, "stages.json"), "w"), indent=1)
    with tarfile.open(os.path.join(out, "results.tar.gz"), "w:gz") as tar:
        for rel in ["hf/config.json", "hf/model.safetensors.index.json", "hf/generation_config.json",
                    "hf/tokenizer.json", "hf/tokenizer_config.json", "hf/chat_template.jinja",
                    "draft/config.json", "draft/accept.json", "draft/train_log.jsonl",
                    "train_log.jsonl", "train_result.json", "hf_check.json", "samples.md", "stages.json",
                    "corpus/LICENSES.md", "corpus/sources.json", "data/meta.json", "synth/done", "tok/special.json",
                    "gen/val.jsonl", "agent_eval.json", "agents/index.json"]:
            p = os.path.join(work, rel)
            if os.path.exists(p):
                tar.add(p, arcname=rel)
    print("collected:", os.listdir(out), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default="/tmp/splash_train")
    ap.add_argument("--out", default=os.environ.get("OUT"))
    ap.add_argument("--budget", type=float, default=540)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--train-args", default="")
    ap.add_argument("--draft-args", default="")
    ap.add_argument("--init-from", default=None)
    ap.add_argument("--reserve", type=float, default=None, help="seconds kept for the stages after train")
    ap.add_argument("--agents", default=None, help="agents.jsonl.gz from tools/train/agent-render.mjs")
    ap.add_argument("--tok-from", default=None, help="copy the tokenizer from this folder (no --init-from weights)")
    ap.add_argument("--phase", type=int, default=0, help="1: data + train + export only; 2: the stages after train")
    ap.add_argument("--agent-eval-args", default="")
    a = ap.parse_args()
    t0 = time.time()
    w = a.work
    os.makedirs(w, exist_ok=True)
    log = []
    sm = a.smoke
    if a.phase == 2:
        return after_train(a, w, log, t0)
    sh(["corpus.py", "--max-chars", 20e6 if sm else 120e6], w, log)
    sh(["synth.py"] + (["--docfn", 3000, "--explain", 1000, "--tool", 3000] if sm else []), w, log)
    # continuing a trained model must keep its tokenizer: copy it instead of training a new one
    sh(["tok.py"] + (["--max-chars", 10e6] if sm else ["--max-chars", 25e6]) +
       (["--from-dir", a.init_from or a.tok_from] if (a.init_from or a.tok_from) else []), w, log)
    sh(["data.py"], w, log)
    if a.agents and not sh(["agentdata.py", "--src", a.agents], w, log):
        print("run: the agent transcripts did not tokenize; stopping before training", flush=True)
        return
    reserve = a.reserve if a.reserve is not None else (100 if sm else 250)
    left = a.budget - (time.time() - t0) - reserve
    targs = ["--budget", max(20, left)] + a.train_args.split()
    if a.init_from:
        targs += ["--init-from", a.init_from]
    ok = sh(["train.py"] + targs, w, log)
    collect(w, a.out, log)
    if not ok or a.phase == 1:
        json.dump(log, open(os.path.join(w, "stages_phase1.json"), "w"), indent=1)
        return
    after_train(a, w, log, t0)


def after_train(a, w, log, t0):
    sm = a.smoke
    if a.phase == 2:
        p1 = os.path.join(w, "stages_phase1.json")
        log[:0] = json.load(open(p1)) if os.path.exists(p1) else []
    sh(["check.py"], w, log)
    if os.path.exists(os.path.join(w, "agents", "val.jsonl")):
        sh(["agenteval.py"] + a.agent_eval_args.split(), w, log)
        collect(w, a.out, log)
    gargs = ["--n-train", 96, "--n-val", 16, "--max-new", 96] if sm else ["--n-train", 1500, "--n-val", 48, "--max-new", 160]
    sh(["gen.py"] + gargs, w, log)
    eval_time = 40 if sm else 75
    left = a.budget - (time.time() - t0) - eval_time - 15
    dargs = (["--eval-prompts", 12, "--eval-new", 64] if sm else []) + a.draft_args.split()
    if sh(["draft.py", "--budget", max(10, left), "--temps", ""] + dargs, w, log):
        collect(w, a.out, log)
        left = a.budget - (time.time() - t0) - 5
        sh(["draft.py", "--eval-only"] + dargs, w, log, timeout=max(10, left))
    log.append({"total_seconds": round(time.time() - t0, 1)})
    collect(w, a.out, log)


if __name__ == "__main__":
    main()
