#!/usr/bin/env bash
# The GPU test suite and benchmarks in one command, on a machine with an NVIDIA GPU (sm_90), nvcc, CMake and
# ninja (the H200 of the device tool). Prepare the folder on a machine with Node first:
#   npm run build && node scripts/gpu-prepare.mjs .gpu      # sources + fixture packages
# then, in that folder on the GPU machine:   bash scripts/gpu-test.sh [--no-bench] [--no-fallback] [layers]
# (--no-fallback skips the benchmarks of the WMMA prefill path without cuBLAS)
# Builds core-native (CPU engine + CUDA module), runs the op parity test, the whole-model parity test on the
# fixtures (CUDA vs CPU), then the benchmarks on synthetic qwen3.8-27b and qwen3.6-35b-a3b q4 packages.
set -uo pipefail
cd "$(dirname "$0")/.."
bench=1
fallback=1
while [[ "${1:-}" == --* ]]; do
  case "$1" in
    --no-bench) bench=0 ;;
    --no-fallback) fallback=0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
layers="${1:-8}"
out="${OUT:-/tmp/splash-gpu-out}"
build="${SPLASH_GPU_BUILD:-/tmp/splash-gpu-build}"  # another folder when several checkouts share the machine
mkdir -p "$out"
fail=0
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
t0=$(date +%s)
cmake -S core-native -B $build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)" >"$out/cmake.log" 2>&1 \
  && cmake --build $build -j "$(nproc)" >>"$out/cmake.log" 2>&1 || { tail -40 "$out/cmake.log"; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"
export SPLASH_CUDA_MODULE=$build/libsplash_cuda.so
T=$build/splash_gpu_test
$T ops 2>&1 | tee "$out/ops.txt" || fail=1
# the fixtures, and the repository's default package (q4, with a DFlash draft) when it is next to this folder
models=()
[[ -d fixtures ]] && models+=(fixtures/*)
for d in packages/default ../packages/default; do [[ -f $d/splash.json ]] && models+=("$d") && break; done
if (( ${#models[@]} )); then
  $T model "${models[@]}" 2>&1 | tee "$out/model.txt" || fail=1
fi
if [[ $bench == 1 ]]; then
  $T bench-base 2>&1 | tee "$out/bench.txt"
  for shape in qwen3.8-27b qwen3.6-35b-a3b; do
    python3 tools/bench/make_shape_package.py "/tmp/pkg-$shape" "$shape" "$layers" || fail=1
    $T bench "/tmp/pkg-$shape" 2048 64 2>&1 | tee -a "$out/bench.txt" || fail=1
    if [[ $fallback == 1 ]]; then
      SPLASH_CUBLAS=0 $T bench "/tmp/pkg-$shape" 2048 16 2>&1 | sed 's/^/[no cuBLAS] /' | tee -a "$out/bench.txt" || fail=1
    fi
    rm -rf "/tmp/pkg-$shape"
  done
fi
echo "gpu-test: $([[ $fail == 0 ]] && echo PASS || echo FAIL) in $(( $(date +%s) - t0 )) s"
exit $fail
