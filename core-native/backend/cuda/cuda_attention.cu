// Causal GQA attention over the KV cache, split over the context (flash-decoding): block (token·head,
// split) runs an online softmax over up to kSplit positions with one warp per position stride, writes
// (max, sum, partial output); a second kernel merges the splits.
#include <algorithm>

#include "backend/cuda/cuda_common.cuh"

namespace splash::cuda {
namespace {

// Positions per split: 256 for prefill; 64 for few tokens (decode), where the splits are all the parallelism
constexpr int kSplit = 256, kSplitFew = 64, kWarps = 4, kMaxPer = 8;  // head_dim ≤ 32·kMaxPer = 256

__global__ void __launch_bounds__(kWarps * 32) k_attn_part(splash_attn_args a, int32_t nsplit, int32_t split, float* part) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int32_t th = blockIdx.x, t = th / a.n_heads, h = th % a.n_heads, sp = blockIdx.y;
  const int32_t hd = a.head_dim, per = (hd + 31) / 32;
  const int32_t kvh = h / (a.n_heads / a.n_kv_heads);
  const int64_t kvs = int64_t(a.n_kv_heads) * hd;
  const int32_t npos = (a.start_dev ? *a.start_dev : a.start) + t + 1;
  const int32_t p0 = sp * split, p1 = min(npos, p0 + split);
  if (p0 >= npos) return;  // a split past this token's context (graphs size the grid for a capacity)
  const float* q = a.q + t * a.q_stride + int64_t(h) * hd;
  float qv[kMaxPer], acc[kMaxPer];
#pragma unroll
  for (int i = 0; i < kMaxPer; ++i) {
    const int d = lane + 32 * i;
    qv[i] = (i < per && d < hd) ? q[d] * a.scale : 0.f;
    acc[i] = 0.f;
  }
  float m = -INFINITY, l = 0.f;
  for (int32_t p = p0 + warp; p < p1; p += kWarps) {
    const float* k = a.k_cache + p * kvs + int64_t(kvh) * hd;
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < kMaxPer; ++i) {
      const int d = lane + 32 * i;
      if (i < per && d < hd) s += qv[i] * k[d];
    }
    s = warp_sum(s);
    const float mn = fmaxf(m, s), corr = expf(m - mn), e = expf(s - mn);
    l = l * corr + e;
    const float* v = a.v_cache + p * kvs + int64_t(kvh) * hd;
#pragma unroll
    for (int i = 0; i < kMaxPer; ++i) {
      const int d = lane + 32 * i;
      if (i < per && d < hd) acc[i] = acc[i] * corr + e * v[d];
    }
    m = mn;
  }
  // merge the warps of this block
  __shared__ float sm[kWarps], sl[kWarps];
  __shared__ float so[kWarps][32 * kMaxPer];
  if (lane == 0) sm[warp] = m, sl[warp] = l;
#pragma unroll
  for (int i = 0; i < kMaxPer; ++i) so[warp][lane + 32 * i] = acc[i];
  __syncthreads();
  if (warp != 0) return;
  float M = -INFINITY;
  for (int w = 0; w < kWarps; ++w) M = fmaxf(M, sm[w]);
  float L = 0.f;
  float out[kMaxPer] = {};
  for (int w = 0; w < kWarps; ++w) {
    const float f = sm[w] == -INFINITY ? 0.f : expf(sm[w] - M);
    L += sl[w] * f;
#pragma unroll
    for (int i = 0; i < kMaxPer; ++i) out[i] += so[w][lane + 32 * i] * f;
  }
  float* dst = part + (int64_t(th) * nsplit + sp) * (2 + hd);
  if (lane == 0) dst[0] = M, dst[1] = L;
#pragma unroll
  for (int i = 0; i < kMaxPer; ++i) {
    const int d = lane + 32 * i;
    if (i < per && d < hd) dst[2 + d] = out[i];
  }
}

__global__ void k_attn_merge(splash_attn_args a, int32_t nsplit, int32_t split, const float* part) {
  const int32_t th = blockIdx.x, t = th / a.n_heads, h = th % a.n_heads, hd = a.head_dim;
  const int32_t used = ((a.start_dev ? *a.start_dev : a.start) + t + 1 + split - 1) / split;
  const float* src = part + int64_t(th) * nsplit * (2 + hd);
  float M = -INFINITY;
  for (int s = 0; s < used; ++s) M = fmaxf(M, src[s * (2 + hd)]);
  float L = 0.f;
  for (int s = 0; s < used; ++s) {
    const float mm = src[s * (2 + hd)];
    if (mm != -INFINITY) L += src[s * (2 + hd) + 1] * expf(mm - M);
  }
  float* o = a.out + int64_t(t) * a.n_heads * hd + int64_t(h) * hd;
  for (int d = threadIdx.x; d < hd; d += blockDim.x) {
    float v = 0.f;
    for (int s = 0; s < used; ++s) {
      const float mm = src[s * (2 + hd)];
      if (mm != -INFINITY) v += src[s * (2 + hd) + 2 + d] * expf(mm - M);
    }
    o[d] = v / L;
  }
}

}  // namespace

void attention(void* ctx, const splash_attn_args* a) {
  Ctx* c = static_cast<Ctx*>(ctx);
  if (a->n_tokens <= 0) return;
  if (a->head_dim > 32 * kMaxPer) {
    if (c->error.empty()) c->error = "attention: head_dim > 256 is not supported by the CUDA backend";
    return;
  }
  const int32_t span = a->start_dev ? a->cap : a->start + a->n_tokens;
  const int32_t split = a->n_tokens <= 8 ? kSplitFew : kSplit;
  const int32_t nsplit = (span + split - 1) / split;
  const int64_t th = int64_t(a->n_tokens) * a->n_heads;
  auto* part = static_cast<float*>(scratch(c, kAttn, size_t(th) * nsplit * (2 + a->head_dim) * 4));
  if (!part) return;
  k_attn_part<<<dim3(unsigned(th), unsigned(nsplit)), kWarps * 32, 0, strm(c)>>>(*a, nsplit, split, part);
  SPLASH_LAUNCHED(c, "attention");
  k_attn_merge<<<unsigned(th), 128, 0, strm(c)>>>(*a, nsplit, split, part);
  SPLASH_LAUNCHED(c, "attention_merge");
}

}  // namespace splash::cuda
