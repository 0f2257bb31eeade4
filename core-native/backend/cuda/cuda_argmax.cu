// The greedy token choice on the device (slot argmax_rows): each row's first index of its largest value, so a
// greedy step or draft pass sends back one id per row instead of a vocabulary-sized row of logits (1 MB a row at
// the Qwen3.5 vocabulary). Same answer as the host sampler's argmax (sampler/adjust.cpp): NaN never counts, ties
// go to the lowest index, a row with nothing above −inf gives −1.
#include "backend/cuda/cuda_common.cuh"

namespace splash::cuda {

namespace {

constexpr int kArgmaxThreads = 256;
constexpr int64_t kArgmaxSpan = 16384;  // values a block scans

// (value, index) as one 64-bit key whose unsigned order is "larger value, then lower index": the value's bits made
// order-preserving in the high word, the index complemented in the low one. Only values above −inf get a key, so
// 0 means none.
__device__ __forceinline__ unsigned long long argmax_key(float v, int64_t i) {
  if (!(v > -INFINITY)) return 0ull;
  const uint32_t b = __float_as_uint(v);
  const uint32_t o = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
  return (static_cast<unsigned long long>(o) << 32) | (0xFFFFFFFFu - uint32_t(i));
}

// grid (spans, rows): a block reduces its span of row blockIdx.y and folds it into keys[row] (atomicMax: the
// maximum does not depend on the order the blocks arrive in).
__global__ void __launch_bounds__(kArgmaxThreads) k_argmax(const float* x, int64_t width, unsigned long long* keys) {
  const int64_t r = blockIdx.y, lo = int64_t(blockIdx.x) * kArgmaxSpan, hi = min(width, lo + kArgmaxSpan);
  const float* v = x + r * width;
  unsigned long long best = 0;
  if ((width & 3) == 0 && (reinterpret_cast<uintptr_t>(x) & 15) == 0) {
    for (int64_t i = lo + 4 * threadIdx.x; i < hi; i += 4 * kArgmaxThreads) {
      const float4 q = *reinterpret_cast<const float4*>(v + i);
      best = max(best, argmax_key(q.x, i));
      best = max(best, argmax_key(q.y, i + 1));
      best = max(best, argmax_key(q.z, i + 2));
      best = max(best, argmax_key(q.w, i + 3));
    }
  } else {
    for (int64_t i = lo + threadIdx.x; i < hi; i += kArgmaxThreads) best = max(best, argmax_key(v[i], i));
  }
  for (int o = 16; o > 0; o >>= 1) best = max(best, __shfl_xor_sync(0xffffffffu, best, o));
  __shared__ unsigned long long part[kArgmaxThreads / 32];
  if ((threadIdx.x & 31) == 0) part[threadIdx.x / 32] = best;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kArgmaxThreads / 32; ++w) best = max(best, part[w]);
    if (best) atomicMax(keys + r, best);
  }
}

__global__ void k_argmax_ids(const unsigned long long* keys, int32_t rows, int32_t* out) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < rows) out[r] = keys[r] ? int32_t(0xFFFFFFFFu - uint32_t(keys[r] & 0xFFFFFFFFull)) : -1;
}

}  // namespace

void argmax_rows(void* ctx, const float* x, int32_t rows, int64_t width, int32_t* out) {
  Ctx* c = static_cast<Ctx*>(ctx);
  if (rows <= 0) return;
  if (width <= 0 || width > 0xFFFFFFFFll) {
    check(c, cudaErrorInvalidValue, "argmax_rows: row width");
    return;
  }
  auto* keys = static_cast<unsigned long long*>(scratch(c, kArgmax, size_t(rows) * 8));
  if (!keys) return;
  SPLASH_CK(c, cudaMemsetAsync(keys, 0, size_t(rows) * 8, strm(c)));
  const dim3 grid(unsigned((width + kArgmaxSpan - 1) / kArgmaxSpan), unsigned(rows));
  k_argmax<<<grid, kArgmaxThreads, 0, strm(c)>>>(x, width, keys);
  SPLASH_LAUNCHED(c, "argmax_rows");
  k_argmax_ids<<<(rows + 127) / 128, 128, 0, strm(c)>>>(keys, rows, out);
  SPLASH_LAUNCHED(c, "argmax_rows ids");
}

}  // namespace splash::cuda
