// Routed experts on the GPU. Decode (≤ 8 tokens, q4/q8 experts): routing on the device (softmax, top-k with
// ties to the lower index, renormalisation), then one expert-indexed GEMV per projection over all
// (token, expert) pairs, SwiGLU, and a weighted combine: no host round trip. Prefill (and precise mode): the
// router probabilities come back to the host, tokens are grouped per expert there (the CPU backend's order),
// then per used expert: gather its rows, gate/up GEMM, SwiGLU, down GEMM, weighted scatter-add.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "backend/cuda/cuda_common.cuh"

namespace splash::cuda {
namespace {

__global__ void k_gather(const float* x, int64_t C, const int32_t* idx, int32_t n, float* out) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= int64_t(n) * C) return;
  out[i] = x[int64_t(idx[i / C]) * C + i % C];
}

__global__ void k_scatter_add(float* y, const float* ye, int64_t H, const int32_t* idx, const float* wts, int32_t n) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= int64_t(n) * H) return;
  const int64_t r = i / H;
  y[int64_t(idx[r]) * H + i % H] += wts[r] * ye[i];
}

// Block per token: probabilities in shared memory, then K rounds of arg-max.
__global__ void k_route(const float* logits, int32_t E, int32_t K, int32_t renorm, int32_t* ids, float* wts) {
  extern __shared__ float p[];
  __shared__ float rv[32];
  __shared__ int ri[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  const float* row = logits + int64_t(blockIdx.x) * E;
  float m = -INFINITY;
  for (int e = threadIdx.x; e < E; e += blockDim.x) m = fmaxf(m, row[e]);
  m = warp_max(m);
  if (lane == 0) rv[warp] = m;
  __syncthreads();
  m = -INFINITY;
  for (int w = 0; w < nw; ++w) m = fmaxf(m, rv[w]);
  __syncthreads();
  float part = 0.f;
  for (int e = threadIdx.x; e < E; e += blockDim.x) part += (p[e] = expf(row[e] - m));
  const float den = block_sum(part, rv);
  for (int e = threadIdx.x; e < E; e += blockDim.x) p[e] /= den;
  __syncthreads();
  float sum = 0.f;
  for (int j = 0; j < K; ++j) {
    float bv = -1.f;
    int bi = E;
    for (int e = threadIdx.x; e < E; e += blockDim.x)
      if (p[e] > bv || (p[e] == bv && e < bi)) bv = p[e], bi = e;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
      if (ov > bv || (ov == bv && oi < bi)) bv = ov, bi = oi;
    }
    __syncthreads();
    if (lane == 0) rv[warp] = bv, ri[warp] = bi;
    __syncthreads();
    bv = rv[0], bi = ri[0];
    for (int w = 1; w < nw; ++w)
      if (rv[w] > bv || (rv[w] == bv && ri[w] < bi)) bv = rv[w], bi = ri[w];
    if (threadIdx.x == 0) {
      ids[blockIdx.x * K + j] = bi;
      wts[blockIdx.x * K + j] = bv;
      p[bi] = -2.f;  // taken
    }
    sum += bv;
    __syncthreads();
  }
  if (threadIdx.x < K && renorm) wts[blockIdx.x * K + threadIdx.x] /= sum;
}

__global__ void k_combine(const float* ye, const float* wts, int32_t K, int64_t H, int32_t N, float* out) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= int64_t(N) * H) return;
  const int64_t t = i / H, d = i % H;
  float s = 0.f;
  for (int j = 0; j < K; ++j) s += wts[t * K + j] * ye[(t * K + j) * H + d];
  out[i] = s;
}

bool moe_device(Ctx* c, const splash_moe_args* a) {
  const int N = a->n_tokens, E = a->n_experts, K = a->top_k;
  const int64_t H = a->down->rows, I = a->gate->rows;
  if (N > 8 || c->precise || E > 4096) return false;
  for (const splash_weight* w : {a->gate, a->up, a->down})
    if ((w->dtype != SPLASH_Q4 && w->dtype != SPLASH_Q8) || w->cols % 64 != 0) return false;
  const int P = N * K;
  auto* ids = static_cast<int32_t*>(scratch(c, kMoeR, size_t(P) * 8));
  auto* gb = static_cast<float*>(scratch(c, kMoeG, size_t(P) * I * 4));
  auto* ub = static_cast<float*>(scratch(c, kMoeU, size_t(P) * I * 4));
  auto* ye = static_cast<float*>(scratch(c, kMoeY, size_t(P) * H * 4));
  if (!ids || !gb || !ub || !ye) return true;
  auto* wts = reinterpret_cast<float*>(ids + P);
  k_route<<<N, 256, size_t(E) * 4, strm(c)>>>(a->logits, E, K, a->renorm, ids, wts);
  SPLASH_LAUNCHED(c, "moe_route");
  const splash_weight* gu[2] = {a->gate, a->up};
  float* const gu_out[2] = {gb, ub};
  matmul_experts(c, 2, gu, a->x, N, ids, P, K, gu_out, I);  // gate and up in one launch
  swiglu(c, gb, ub, int64_t(P) * I, gb);
  matmul_experts(c, 1, &a->down, gb, P, ids, P, 1, &ye, H);
  k_combine<<<blocks_for(int64_t(N) * H, 256), 256, 0, strm(c)>>>(ye, wts, K, H, N, a->out);
  SPLASH_LAUNCHED(c, "moe_combine");
  return true;
}

}  // namespace

void moe(void* ctx, const splash_moe_args* a) {
  Ctx* c = static_cast<Ctx*>(ctx);
  const int N = a->n_tokens, E = a->n_experts, K = a->top_k;
  const int64_t H = a->down->rows, I = a->gate->rows, Cx = a->gate->cols;
  if (N <= 0) return;
  const size_t ob = size_t(N) * size_t(H) * 4;
  if (c->xc_valid && reinterpret_cast<uintptr_t>(a->out) < reinterpret_cast<uintptr_t>(c->xc_x) + size_t(c->xc_total) * 4 &&
      reinterpret_cast<uintptr_t>(c->xc_x) < reinterpret_cast<uintptr_t>(a->out) + ob)
    c->xc_valid = false;  // the output would overwrite the activations whose int8 form is kept
  if (moe_device(c, a)) return;
  if (spoils_capture(c)) return;  // the routing below runs on the host
  std::vector<float> p(size_t(N) * E);
  SPLASH_CK(c, cudaMemcpyAsync(p.data(), a->logits, p.size() * 4, cudaMemcpyDeviceToHost, strm(c)));
  SPLASH_CK(c, cudaStreamSynchronize(strm(c)));
  std::vector<std::vector<std::pair<int32_t, float>>> routed(E);
  std::vector<int> idx(E);
  for (int t = 0; t < N; ++t) {
    float* row = p.data() + size_t(t) * E;
    const float mx = *std::max_element(row, row + E);
    float den = 0.f;
    for (int e = 0; e < E; ++e) den += (row[e] = std::exp(row[e] - mx));
    for (int e = 0; e < E; ++e) row[e] /= den;
    std::iota(idx.begin(), idx.end(), 0);
    std::partial_sort(idx.begin(), idx.begin() + K, idx.end(),
                      [&](int x, int y) { return row[x] > row[y] || (row[x] == row[y] && x < y); });
    float sum = 0.f;
    for (int j = 0; j < K; ++j) sum += row[idx[j]];
    for (int j = 0; j < K; ++j) routed[idx[j]].push_back({t, a->renorm ? row[idx[j]] / sum : row[idx[j]]});
  }
  // one upload: token indices then weights, expert by expert
  std::vector<int32_t> tok;
  std::vector<float> wts;
  std::vector<int> off(E + 1, 0);
  int maxn = 0;
  for (int e = 0; e < E; ++e) {
    for (auto [t, w] : routed[e]) tok.push_back(t), wts.push_back(w);
    off[e + 1] = int(tok.size());
    maxn = std::max(maxn, int(routed[e].size()));
  }
  const size_t M = tok.size();
  auto* d_tok = static_cast<int32_t*>(scratch(c, kMoeIdx, M * 8));
  auto* xe = static_cast<float*>(scratch(c, kMoeX, size_t(maxn) * Cx * 4));
  auto* gb = static_cast<float*>(scratch(c, kMoeG, size_t(maxn) * I * 4));
  auto* ub = static_cast<float*>(scratch(c, kMoeU, size_t(maxn) * I * 4));
  auto* ye = static_cast<float*>(scratch(c, kMoeY, size_t(maxn) * H * 4));
  if (!d_tok || !xe || !gb || !ub || !ye) return;
  auto* d_w = reinterpret_cast<float*>(d_tok + M);
  SPLASH_CK(c, cudaMemcpyAsync(d_tok, tok.data(), M * 4, cudaMemcpyHostToDevice, strm(c)));
  SPLASH_CK(c, cudaMemcpyAsync(d_w, wts.data(), M * 4, cudaMemcpyHostToDevice, strm(c)));
  SPLASH_CK(c, cudaMemsetAsync(a->out, 0, size_t(N) * H * 4, strm(c)));
  for (int e = 0; e < E; ++e) {
    const int n = off[e + 1] - off[e];
    if (n == 0) continue;
    k_gather<<<blocks_for(int64_t(n) * Cx, 256), 256, 0, strm(c)>>>(a->x, Cx, d_tok + off[e], n, xe);
    SPLASH_LAUNCHED(c, "moe_gather");
    const splash_weight g = splash_weight_expert(a->gate, e), u = splash_weight_expert(a->up, e),
                        d = splash_weight_expert(a->down, e);
    matmul(ctx, &g, xe, n, gb, I);
    matmul(ctx, &u, xe, n, ub, I);
    swiglu(ctx, gb, ub, int64_t(n) * I, gb);
    matmul(ctx, &d, gb, n, ye, H);
    flush(c);
    k_scatter_add<<<blocks_for(int64_t(n) * H, 256), 256, 0, strm(c)>>>(a->out, ye, H, d_tok + off[e], d_w + off[e], n);
    SPLASH_LAUNCHED(c, "moe_scatter");
  }
  // the host vectors above are sources of queued copies: wait before they go out of scope
  SPLASH_CK(c, cudaStreamSynchronize(strm(c)));
}

}  // namespace splash::cuda
