"""Stage 1: collect a code/doc corpus from what is installed on the machine (no network).

Sources: the files of installed Python distributions whose licence is permissive (MIT, BSD, Apache-2.0, PSF, ISC, ...),
found through importlib.metadata (each distribution's RECORD), plus the Python standard library (PSF-2.0).
Kinds: .py .md .rst .txt and C/C++ headers/sources (.h .hpp .c .cc .cpp .cu .cuh). Exact duplicates removed,
size- and line-length-filtered, per-distribution share capped, 1% of documents held out (by content hash).

Writes WORK/corpus/{train,val}.jsonl ({"src", "text"} per line) and WORK/corpus/sources.json (per distribution: name,
version, licence, files, chars) and WORK/corpus/LICENSES.md (the summary for docs/default-package.md).
Resumable: skips if WORK/corpus/done exists.
"""
import argparse
import hashlib
import importlib.metadata as md
import json
import os
import random
import sys
import sysconfig

EXTS = {".py", ".md", ".rst", ".txt", ".h", ".hpp", ".c", ".cc", ".cpp", ".cu", ".cuh"}
PERMISSIVE = ["mit", "bsd", "apache", "psf", "python software foundation", "isc", "zlib", "unlicense", "hpnd",
              "historical permission", "public domain", "cc0", "0bsd", "python-2.0", "mit-cmu", "x11"]
COPYLEFT = ["gpl", "lgpl", "agpl", "mpl", "mozilla", "eupl", "cddl", "epl", "proprietary", "commercial", "nvidia",
            "other/proprietary", "sspl", "cc-by-nc"]


def licence_of(dist):
    m = dist.metadata
    expr = m.get("License-Expression")
    lic = m.get("License") or ""
    classifiers = [c.split("::")[-1].strip() for c in (m.get_all("Classifier") or []) if c.startswith("License ::")]
    text = expr or (lic.strip().splitlines()[0] if lic.strip() else "") or "; ".join(classifiers)
    if len(text) > 120:
        text = "; ".join(classifiers) or text[:120]
    return text.strip(), classifiers


def is_permissive(text, classifiers, name):
    blob = (text + " " + " ".join(classifiers)).lower()
    if name.lower().startswith(("nvidia-", "cuda-", "triton")):  # vendor binaries / mixed licences: leave out
        return False
    if not blob.strip():
        return False
    if any(c in blob for c in COPYLEFT):
        # dual licences such as "BSD OR GPL" are fine if a permissive option exists first
        if not any(blob.startswith(p) for p in PERMISSIVE):
            return False
    return any(p in blob for p in PERMISSIVE)


def good_text(t):
    if len(t) < 300:
        return False
    lines = t.split("\n")
    if max(len(l) for l in lines) > 1000:
        return False
    if len(t) / max(1, len(lines)) > 120:
        return False
    nonascii = sum(1 for ch in t[:5000] if ord(ch) > 127)
    return nonascii < 0.05 * min(len(t), 5000)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--max-chars", type=float, default=160e6)
    ap.add_argument("--max-file", type=int, default=150_000)
    ap.add_argument("--dist-share", type=float, default=0.10)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    out = os.path.join(a.work, "corpus")
    if os.path.exists(os.path.join(out, "done")):
        print("corpus: done already")
        return
    os.makedirs(out, exist_ok=True)

    groups = {}  # key -> (meta, [paths])
    seen_dists = set()
    for dist in md.distributions():
        name = dist.metadata.get("Name") or "?"
        if name.lower() in seen_dists:
            continue
        seen_dists.add(name.lower())
        lic, cls = licence_of(dist)
        ok = is_permissive(lic, cls, name)
        paths = []
        if ok:
            for f in dist.files or []:
                p = str(f)
                if os.path.splitext(p)[1].lower() not in EXTS or ".dist-info" in p or ".egg-info" in p:
                    continue
                full = str(f.locate())
                try:
                    sz = os.path.getsize(full)
                except OSError:
                    continue
                if 300 <= sz <= a.max_file:
                    paths.append(full)
        groups[name] = ({"name": name, "version": dist.version, "licence": lic, "classifiers": cls,
                         "used": ok and bool(paths)}, paths)
    stdlib = sysconfig.get_paths()["stdlib"]
    sp = []
    for root, dirs, files in os.walk(stdlib):
        dirs[:] = [d for d in dirs if d not in ("site-packages", "dist-packages", "__pycache__")]
        for fn in files:
            if os.path.splitext(fn)[1] in (".py",):
                full = os.path.join(root, fn)
                if 300 <= os.path.getsize(full) <= a.max_file:
                    sp.append(full)
    groups["Python standard library"] = ({"name": "Python standard library", "version": sys.version.split()[0],
                                          "licence": "PSF-2.0", "classifiers": [], "used": bool(sp)}, sp)

    rng = random.Random(a.seed)
    cap = a.max_chars * a.dist_share
    hashes = set()
    docs = []
    total = 0
    for name in sorted(groups):
        meta, paths = groups[name]
        paths = sorted(paths)
        rng.shuffle(paths)
        n = c = 0
        for p in paths:
            if c >= cap:
                break
            try:
                t = open(p, encoding="utf-8").read()
            except (UnicodeDecodeError, OSError):
                continue
            if not good_text(t):
                continue
            h = hashlib.sha1(t.encode()).hexdigest()
            if h in hashes:
                continue
            hashes.add(h)
            rel = p.split("site-packages/")[-1] if "site-packages/" in p else os.path.relpath(p, stdlib)
            docs.append((h, name, rel, t))
            n += 1
            c += len(t)
        meta["files"], meta["chars"] = n, c
        meta["used"] = n > 0
        total += c
    rng.shuffle(docs)
    if total > a.max_chars:
        keep, c = [], 0
        for d in docs:
            if c >= a.max_chars:
                break
            keep.append(d)
            c += len(d[3])
        docs = keep
    counts = {}
    with open(os.path.join(out, "train.jsonl"), "w") as tr, open(os.path.join(out, "val.jsonl"), "w") as va:
        for h, name, rel, t in docs:
            counts[name] = counts.get(name, [0, 0])
            counts[name][0] += 1
            counts[name][1] += len(t)
            (va if int(h[:4], 16) % 100 == 0 else tr).write(json.dumps({"src": f"{name}:{rel}", "text": t}) + "\n")
    metas = []
    for name in sorted(groups):
        m = groups[name][0]
        m["files"], m["chars"] = counts.get(name, [0, 0])
        m["used"] = m["files"] > 0
        metas.append(m)
    json.dump(metas, open(os.path.join(out, "sources.json"), "w"), indent=1)
    used = [m for m in metas if m["used"]]
    skipped = [m for m in metas if not m["used"]]
    with open(os.path.join(out, "LICENSES.md"), "w") as f:
        f.write(f"Training corpus: {len(docs)} documents, {sum(len(d[3]) for d in docs)/1e6:.1f} M characters, "
                f"from {len(used)} sources (Python standard library + installed Python distributions with permissive "
                f"licences; .py .md .rst .txt and C/C++ header/source files shipped inside them).\n\n")
        f.write("| source | version | licence (metadata) | files | chars |\n|---|---|---|---|---|\n")
        for m in sorted(used, key=lambda m: -m["chars"]):
            f.write(f"| {m['name']} | {m['version']} | {m['licence'] or '; '.join(m['classifiers'])} | {m['files']} | {m['chars']} |\n")
        f.write(f"\nLeft out (licence not clearly permissive, vendor binaries, or no usable text): "
                + ", ".join(f"{m['name']} ({m['licence'] or 'unknown'})" for m in skipped) + "\n")
    open(os.path.join(out, "done"), "w").write("ok")
    print(f"corpus: {len(docs)} docs, {sum(len(d[3]) for d in docs)/1e6:.1f} M chars, {len(used)} sources used, {len(skipped)} skipped")


if __name__ == "__main__":
    main()
