#!/usr/bin/env bash
# The GPU test suite and benchmarks in one command, on a machine with an NVIDIA GPU (sm_90), nvcc, CMake and
# ninja (the H200 GPU machine). Prepare the folder on a machine with Node first:
#   npm run build && node scripts/gpu-prepare.mjs .gpu      # sources + fixture packages
# then, in that folder on the GPU machine:   bash scripts/gpu-test.sh [--no-bench] [--no-fallback] [--spec] [layers]
# (--no-fallback skips the benchmarks of the WMMA prefill path without cuBLAS; --spec runs only the build and the
# package-specialised kernels' checks: logits against the generic kernels and the CPU on the q4/q8 fixtures, and
# the decode benchmark with and without them on the synthetic 27B shape)
# Builds core-native (CPU engine + CUDA module), runs the op parity test, the whole-model parity test on the
# fixtures (CUDA vs CPU), then the benchmarks on synthetic qwen3.8-27b and qwen3.6-35b-a3b q4 packages.
set -uo pipefail
cd "$(dirname "$0")/.."
bench=1
fallback=1
spec_only=0
while [[ "${1:-}" == --* ]]; do
  case "$1" in
    --no-bench) bench=0 ;;
    --no-fallback) fallback=0 ;;
    --spec) spec_only=1 ;;
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
# Package-specialised kernels (tools/build_spec_kernels.py: nvcc, no Node): the quantised fixtures get them in a
# copy, which must load them and give the generic kernels' logits (and the CPU's); then the 27B shape's decode
# with them, without, with again.
spec_checks() {
  local tmp=/tmp/splash-spec-fixtures pk=()
  rm -rf $tmp && mkdir -p $tmp
  for d in fixtures/*; do
    grep -q '"quant": *"q[48]"' "$d/splash.json" 2>/dev/null || continue
    cp -r "$d" "$tmp/" && python3 tools/build_spec_kernels.py "$tmp/$(basename "$d")" >/dev/null && pk+=("$tmp/$(basename "$d")")
  done
  if (( ${#pk[@]} )); then
    $T spec "${pk[@]}" 2>&1 | tee "$out/spec.txt" || fail=1
    $T model "${pk[@]}" 2>&1 | tee "$out/spec-model.txt" || fail=1
  else
    echo "spec: no q4/q8 fixtures" | tee "$out/spec.txt"; fail=1
  fi
  rm -rf $tmp
  if [[ $bench == 1 ]]; then
    python3 tools/bench/make_shape_package.py /tmp/pkg-spec-27b qwen3.8-27b "$layers" || fail=1
    python3 tools/build_spec_kernels.py /tmp/pkg-spec-27b 2>&1 | tee "$out/spec-bench.txt" || fail=1
    $T spec /tmp/pkg-spec-27b 2>&1 | tee -a "$out/spec-bench.txt" || fail=1
    $T bench-spec-gemv /tmp/pkg-spec-27b 2>&1 | tee -a "$out/spec-bench.txt" || fail=1
    $T bench-spec /tmp/pkg-spec-27b 2048 64 2>&1 | tee -a "$out/spec-bench.txt" || fail=1
    rm -rf /tmp/pkg-spec-27b
  fi
}
if [[ $spec_only == 1 ]]; then
  spec_checks
  echo "gpu-test --spec: $([[ $fail == 0 ]] && echo PASS || echo FAIL) in $(( $(date +%s) - t0 )) s"
  exit $fail
fi
$T ops 2>&1 | tee "$out/ops.txt" || fail=1
# the tensor-core GEMV at every token count (by default it takes launches of 8 tokens only)
SPLASH_GEMV_MMA=1 $T ops > "$out/ops-mma.txt" 2>&1 || { fail=1; grep FAIL "$out/ops-mma.txt"; }
# the fused q4 GEMM at every token count (by default it takes q4 matmuls of 5 to 64 tokens)
SPLASH_QGEMM_MIN=1 $T ops > "$out/ops-qgemm.txt" 2>&1 || { fail=1; grep FAIL "$out/ops-qgemm.txt"; }
# the fixtures, and the repository's default package (q4, with a DFlash draft) when it is next to this folder
models=()
[[ -d fixtures ]] && models+=(fixtures/*)
for d in packages/default ../packages/default; do [[ -f $d/splash.json ]] && models+=("$d") && break; done
if (( ${#models[@]} )); then
  $T model "${models[@]}" 2>&1 | tee "$out/model.txt" || fail=1
fi
spec_checks
if [[ $bench == 1 ]]; then
  $T bench-base 2>&1 | tee "$out/bench.txt"
  $T bench-attn 2>&1 | tee -a "$out/bench.txt" || fail=1
  $T bench-moe 16 64 512 2048 4096 2>&1 | tee -a "$out/bench.txt" || fail=1
  $T bench-qgemm 1 2 4 8 16 32 64 128 2>&1 | tee -a "$out/bench.txt" || fail=1
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
