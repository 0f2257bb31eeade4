#!/usr/bin/env bash
# `splash bench` over HTTP on a GPU machine that has no Node (the H200 of the device tool). Prepare the folder here:
#   npm run build && npm run build:native && node scripts/gpu-bundle.mjs .gpu-http
# then, in that folder on the GPU machine:   bash scripts/gpu-http-bench.sh <splash bench flags>
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
tag="$(printf '%s' "$*" | tr -c 'A-Za-z0-9.-' '_' | cut -c1-60)"
SPLASH_BACKEND="${SPLASH_BACKEND:-cuda}" node bin/run.js bench "$@" -o "$out/bench-$tag.json" 2>&1 | tee "$out/bench-$tag.log"
