#!/usr/bin/env bash
# `splash bench` over HTTP on a GPU machine that has no Node (the H200 GPU machine). Prepare the folder here:
#   npm run build && npm run build:native && node scripts/gpu-bundle.mjs .gpu-http
# then, in that folder on the GPU machine:   bash scripts/gpu-http-bench.sh <splash bench flags> | --serve-check | --disk-check
# e.g. bash scripts/gpu-http-bench.sh --preset qwen3.8-27b --runs 2. It unpacks node and the app under /tmp, then runs
# the four scenarios against `splash serve` on the CUDA backend; the JSON and SVG go to $OUT (or /tmp/splash-http-out).
# With peer.tar.xz beside them (`node scripts/peer-cuda.mjs pack … OUT`), `--peer llama.cpp` runs llama.cpp on the GPU
# too, linked against the CUDA runtime and cuBLAS of the machine's Python packages.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-/tmp/splash-http-out}"
app=/tmp/splash-app
mkdir -p "$out" "$app/.node"
python3 - "$app" <<'PY' || exit 1
import lzma, os, shutil, sys, tarfile
app = sys.argv[1]
with lzma.open('node.xz') as src, open(os.path.join(app, '.node', 'node'), 'wb') as dst:
    shutil.copyfileobj(src, dst)
os.chmod(os.path.join(app, '.node', 'node'), 0o755)
with tarfile.open('app.tar.xz', 'r:xz') as t:
    t.extractall(app, filter='tar')
if os.path.exists('peer.tar.xz'):
    with tarfile.open('peer.tar.xz', 'r:xz') as t:
        t.extractall('/tmp/splash-peer', filter='tar')
PY
if [ -d /tmp/splash-peer/node_modules/node-llama-cpp ]; then
  export SPLASH_PEER_PATH=/tmp/splash-peer
  cuda_libs="$(python3 -c "import glob, os, site; print(':'.join(sorted({os.path.dirname(p) for d in site.getsitepackages() for n in ('libcublas.so.13', 'libcudart.so.13') for p in glob.glob(d + '/nvidia/**/' + n, recursive=True)})))")"
  # the driver's folder too (libcuda, libnvidia-ml), where node-llama-cpp looks for a usable CUDA
  driver_libs="$(ldconfig -p | awk '/libcuda\.so\.1 /{print $NF; exit}' | xargs -r dirname)"
  export LD_LIBRARY_PATH="$cuda_libs${driver_libs:+:$driver_libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  echo "llama.cpp peer: node-llama-cpp in $SPLASH_PEER_PATH, CUDA libraries from $cuda_libs"
fi
export PATH="$app/.node:$PATH"
cd "$app"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
echo "node $(node -v)"
# --serve-check: the memory plan of `splash serve` on the device instead of the benchmark. The full-depth 27B shape
# (16.1 GB of q4 weights) with --max-memory 8G must be refused before loading (the breakdown, a non-zero exit); without
# a cap and with --max-memory 24G it must print its plan, say Ready and answer a request; each prints the process's
# device memory after the request (nvidia-smi: the backend's allocations and the CUDA context).
if [[ "${1:-}" == --serve-check ]]; then
  preset="${CHECK_PRESET:-qwen3.8-27b}" low="${CHECK_LOW:-8G}" cap="${CHECK_CAP:-24G}"  # other values: trying it elsewhere
  pkg=/tmp/splash-serve-$preset
  [[ -f $pkg/splash.json ]] || node bin/run.js package synth --preset "$preset" -o $pkg > /dev/null || exit 1
  export SPLASH_BACKEND="${SPLASH_BACKEND:-cuda}"
  fail=0
  node bin/run.js serve --model $pkg --max-memory "$low" --port 8001 > "$out/serve-low.log" 2>&1
  rc=$?
  cat "$out/serve-low.log"
  if [[ $rc == 0 ]] || grep -q Ready "$out/serve-low.log"; then echo "FAIL: --max-memory $low was not refused"; fail=1; else echo "ok: --max-memory $low refused (exit $rc)"; fi
  for c in auto "$cap"; do
    args=(); [[ $c != auto ]] && args=(--max-memory "$c")
    log="$out/serve-$c.log"
    node bin/run.js serve --model $pkg --port 8001 "${args[@]}" > "$log" 2>&1 &
    pid=$!
    for _ in $(seq 240); do grep -q Ready "$log" && break; kill -0 $pid 2>/dev/null || break; sleep 0.5; done
    cat "$log"
    if grep -q Ready "$log"; then
      reply="$(python3 -c 'import urllib.request as u; print(u.urlopen(u.Request("http://127.0.0.1:8001/v1/chat/completions", data=b"{\"model\":\"splash/synth-'"$preset"'\",\"messages\":[{\"role\":\"user\",\"content\":\"Say hi\"}],\"max_tokens\":8}", headers={"content-type": "application/json"}), timeout=60).read().decode())' 2>&1)"
      echo "reply: ${reply:0:300}"
      echo "$reply" | grep -q '"choices"' && echo "ok: serve ($c) answered" || { echo "FAIL: serve ($c) did not answer"; fail=1; }
      nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader 2>/dev/null
    else
      echo "FAIL: serve ($c) did not start"; fail=1
    fi
    kill $pid 2>/dev/null; wait $pid 2>/dev/null
  done
  echo "serve-check: $([[ $fail == 0 ]] && echo PASS || echo FAIL)"
  exit $fail
fi
# --disk-check: the prefix cache's disk tier on the device (on by default on the CPU backend only). `splash serve` with
# SPLASH_PREFIX_DISK=on on an 8-layer package of the shape answers one long prompt (greedy), is stopped with SIGTERM
# (it writes its cache), started again on the same data folder and asked again: the second answer must be the first,
# with all but the prompt's last token reused. Prints both TTFTs.
if [[ "${1:-}" == --disk-check ]]; then
  preset="${CHECK_PRESET:-qwen3.8-27b}" layers="${CHECK_LAYERS:-8}"
  pkg=/tmp/splash-disk-$preset-$layers data=/tmp/splash-disk-data  # a package per depth: CHECK_LAYERS=64 must not reuse an 8-layer one
  [[ -f $pkg/splash.json ]] || node bin/run.js package synth --preset "$preset" --layers "$layers" -o $pkg > /dev/null || exit 1
  rm -rf $data
  export SPLASH_BACKEND="${SPLASH_BACKEND:-cuda}" SPLASH_PREFIX_DISK=on SPLASH_DATA_DIR=$data
  fail=0
  for round in 1 2; do
    log="$out/disk-serve-$round.log"
    node bin/run.js serve --model $pkg --port 8001 --no-webui > "$log" 2>&1 &
    pid=$!
    for _ in $(seq 240); do grep -q Ready "$log" && break; kill -0 $pid 2>/dev/null || break; sleep 0.5; done
    grep -E 'Prefix cache on disk|Ready' "$log"
    python3 - "$out/disk-$round.json" <<'PY' || fail=1
import json, sys, time, urllib.request as u
import os
words = ' '.join(['alpha', 'kernel', 'river', 'matrix', 'cloud', 'stone', 'vector', 'signal'][(i * 7 + (i >> 3)) % 8] for i in range(int(os.environ.get('CHECK_WORDS', '3000'))))
model = json.load(u.urlopen('http://127.0.0.1:8001/v1/models', timeout=60))['data'][0]['id']
body = json.dumps({'model': model, 'prompt': words, 'max_tokens': 16, 'temperature': 0}).encode()
t0 = time.time()
try:
    r = json.load(u.urlopen(u.Request('http://127.0.0.1:8001/v1/completions', data=body, headers={'content-type': 'application/json'}), timeout=600))
except u.HTTPError as e:
    sys.exit(f'HTTP {e.code}: {e.read().decode()[:500]}')
r['client_ms'] = (time.time() - t0) * 1000
json.dump(r, open(sys.argv[1], 'w'))
print(f"{r['client_ms']:.0f} ms for {r['usage']['prompt_tokens']} prompt tokens, {r['usage']['prompt_tokens_details']['cached_tokens']} from the cache: {r['choices'][0]['text']!r}")
PY
    kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null
  done
  python3 - "$out/disk-1.json" "$out/disk-2.json" <<'PY' || fail=1
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
same = a['choices'][0]['text'] == b['choices'][0]['text']
cached = b['usage']['prompt_tokens_details']['cached_tokens']
reused = cached == b['usage']['prompt_tokens'] - 1
print(f"same answer: {same}; second start reused {cached} of {b['usage']['prompt_tokens']}")
sys.exit(0 if same and reused else 1)
PY
  [[ $? == 0 ]] || fail=1
  echo "disk-check: $([[ $fail == 0 ]] && echo PASS || echo FAIL)"
  exit $fail
fi
tag="$(printf '%s' "$*" | tr -c 'A-Za-z0-9.-' '_' | cut -c1-60)"
SPLASH_BACKEND="${SPLASH_BACKEND:-cuda}" node bin/run.js bench "$@" -o "$out/bench-$tag.json" 2>&1 | tee "$out/bench-$tag.log"
