// Routed experts on the GPU, all of it on the device except in precise mode, then the shared expert when the layer has
// one (SwiGLU of its gate and up projections, its down GEMV, the sigmoid-gated add), except where both go together:
// - Up to 2 tokens (decode; q4/q8 experts): cuda_moe_fused.cu, two launches for the routed and shared experts.
// - Up to 128 tokens (decode, verify, short prefill chunks; q4/q8 experts): routing (softmax, top-k with ties to
//   the lower index, renormalisation), one expert-indexed GEMV per projection over all (token, expert) pairs,
//   SwiGLU, a weighted combine.
// - More tokens (prefill; or other expert dtypes): the same routing, then the pairs are sorted by expert into slots (stable: in
//   pair order within an expert) with a table of row tiles, and the expert-grouped GEMM (cuda_expert_gemm.cu)
//   runs gate and up in one launch, SwiGLU, down in a second; the combine sums each token's k outputs in
//   routing order. Eight launches whatever the number of experts, and no host round trip.
// - Precise mode (parity checks; or SPLASH_MOE_GROUPED=0 where the GEMVs do not apply): the router probabilities come back to
//   the host, tokens are grouped per expert there (the CPU backend's order), then per used expert: gather its
//   rows, gate/up GEMM, SwiGLU, down GEMM, weighted scatter-add.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <vector>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/moe_route.cuh"

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

// The same routing by one warp per token for E ≤ 32·PER experts (decode: 256 experts, 8 per lane in registers),
// with no block barriers: K rounds of a warp arg-max (ties to the lower index).
template <int PER>
__global__ void k_route_warp(const float* logits, int32_t N, int32_t E, int32_t K, int32_t renorm, int32_t* ids, float* wts) {
  pdl_trigger();
  pdl_wait();  // launched with PDL (launch_dep): the kernel before it is done
  const int lane = threadIdx.x & 31;
  const int64_t t = int64_t(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (t >= N) return;
  route_warp<PER>(logits + t * E, E, K, renorm, lane, ids + t * K, wts + t * K);
}

void route(Ctx* c, const float* logits, int32_t N, int32_t E, int32_t K, int32_t renorm, int32_t* ids, float* wts) {
  if (K <= 32 && E <= 32 * 8)
    launch_dep(c, c->opt.pdl_small, k_route_warp<8>, dim3(blocks_for(N, 4)), dim3(128), 0, logits, N, E, K, renorm, ids,
               wts);
  else if (K <= 32 && E <= 32 * 16)
    launch_dep(c, c->opt.pdl_small, k_route_warp<16>, dim3(blocks_for(N, 4)), dim3(128), 0, logits, N, E, K, renorm, ids,
               wts);
  else
    k_route<<<N, 256, size_t(E) * 4, strm(c)>>>(logits, E, K, renorm, ids, wts);
  SPLASH_LAUNCHED(c, "moe_route");
}

// out[t] = Σ_j w[t, j] · ye[row of pair t·K + j], j in routing order; the row is the pair itself, or its slot
// (pos) when the pairs were sorted by expert
__global__ void k_combine(const float* ye, const float* wts, const int32_t* pos, int32_t K, int64_t H, int32_t N,
                          float* out) {
  pdl_trigger();
  pdl_wait();  // launched with PDL (launch_dep): the kernel before it is done
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= int64_t(N) * H) return;
  const int64_t t = i / H, d = i % H;
  float s = 0.f;
  for (int j = 0; j < K; ++j) {
    const int64_t p = t * K + j;
    s += wts[p] * ye[(pos ? int64_t(pos[p]) : p) * H + d];
  }
  out[i] = s;
}

// Pairs per expert: block e counts the pairs routed to expert e.
__global__ void k_expert_count(const int32_t* ids, int32_t P, int32_t* counts) {
  __shared__ int ws[32];
  const int e = int(blockIdx.x), lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int n = 0;
  for (int p = threadIdx.x; p < P; p += blockDim.x) n += ids[p] == e;
  n = __reduce_add_sync(0xffffffffu, n);
  if (lane == 0) ws[warp] = n;
  __syncthreads();
  if (threadIdx.x == 0) {
    int t = 0;
    for (int w = 0; w < int(blockDim.x >> 5); ++w) t += ws[w];
    counts[e] = t;
  }
}

// One block: slot offsets per expert (off[0..E]), and the row-tile table of the grouped GEMM: tile τ <
// total belongs to expert tile_e[τ] from slot tile_r[τ]; tiles [total, tmax) get −1.
__global__ void k_expert_tiles(const int32_t* counts, int32_t E, int32_t gm, int32_t tmax, int32_t* off,
                               int32_t* tile_e, int32_t* tile_r) {
  extern __shared__ int32_t sh[];  // [E] slot offsets, [E] tile offsets
  __shared__ int32_t total;
  int32_t *so = sh, *st = sh + E;
  const int lane = threadIdx.x & 31;
  if (threadIdx.x < 32) {
    int bs = 0, bt = 0;
    for (int e0 = 0; e0 < E; e0 += 32) {
      const int e = e0 + lane, n = e < E ? counts[e] : 0, t = (n + gm - 1) / gm;
      int sn = n, sT = t;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const int x = __shfl_up_sync(0xffffffffu, sn, o), y = __shfl_up_sync(0xffffffffu, sT, o);
        if (lane >= o) sn += x, sT += y;
      }
      if (e < E) so[e] = bs + sn - n, st[e] = bt + sT - t, off[e] = bs + sn - n;
      bs += __shfl_sync(0xffffffffu, sn, 31);
      bt += __shfl_sync(0xffffffffu, sT, 31);
    }
    if (lane == 0) off[E] = bs, total = bt;
  }
  __syncthreads();
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    const int n = counts[e];
    for (int j = 0; j * gm < n; ++j) tile_e[st[e] + j] = e, tile_r[st[e] + j] = so[e] + j * gm;
  }
  for (int t = total + threadIdx.x; t < tmax; t += blockDim.x) tile_e[t] = -1;
}

// Block e places expert e's pairs in pair order: perm[slot] = pair, pos[pair] = slot.
__global__ void k_expert_fill(const int32_t* ids, int32_t P, const int32_t* off, int32_t* perm, int32_t* pos) {
  __shared__ int ws[32];
  const int e = int(blockIdx.x), lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = int(blockDim.x >> 5);
  int base = off[e];
  const int end = off[e + 1];
  for (int p0 = 0; p0 < P && base < end; p0 += blockDim.x) {
    const int p = p0 + int(threadIdx.x);
    const bool f = p < P && ids[p] == e;
    const unsigned b = __ballot_sync(0xffffffffu, f);
    if (lane == 0) ws[warp] = __popc(b);
    __syncthreads();
    int before = 0, tot = 0;
    for (int w = 0; w < nw; ++w) before += w < warp ? ws[w] : 0, tot += ws[w];
    if (f) {
      const int s = base + before + __popc(b & ((1u << lane) - 1u));
      perm[s] = p, pos[p] = s;
    }
    base += tot;
    __syncthreads();
  }
}

bool moe_grouped(Ctx* c, const splash_moe_args* a) {
  const int N = a->n_tokens, E = a->n_experts, K = a->top_k;
  const int64_t H = a->down->rows, I = a->gate->rows;
  if (c->opt.precise || E > 4096) return false;
  if (!c->opt.moe_grouped) return false;
  if (a->up->rows != I || a->up->cols != a->gate->cols || a->up->dtype != a->gate->dtype || a->down->cols != I ||
      !expert_gemm_fits(*a->gate) || !expert_gemm_fits(*a->down))
    return false;
  const int P = N * K, gm = expert_gemm_rows();
  const int tmax = int(std::min<int64_t>((P + gm - 1) / gm + E, P));
  auto* ids = static_cast<int32_t*>(scratch(c, kMoeR, size_t(P) * 8));
  auto* ix = static_cast<int32_t*>(scratch(c, kMoeIdx, (size_t(E) * 2 + 1 + size_t(tmax) * 2 + size_t(P) * 2) * 4));
  // q4 experts: gate, up and SwiGLU in one launch whose bf16 output (in ub's scratch) the down projection reads as
  // it is, so no fp32 gate output (CudaOptions::expert_glu off: the three steps apart, for measurement)
  const bool glu = c->opt.expert_glu && expert_q4_fits(c, *a->gate) && expert_q4_fits(c, *a->up) &&
                   expert_q4_fits(c, *a->down);
  auto* gb = glu ? nullptr : static_cast<float*>(scratch(c, kMoeG, size_t(P) * I * 4));
  auto* ub = static_cast<float*>(scratch(c, kMoeU, size_t(P) * I * 4));
  auto* ye = static_cast<float*>(scratch(c, kMoeY, size_t(P) * H * 4));
  if (!ids || !ix || (!glu && !gb) || !ub || !ye) return true;
  auto* wts = reinterpret_cast<float*>(ids + P);
  int32_t *counts = ix, *off = counts + E, *tile_e = off + E + 1, *tile_r = tile_e + tmax, *perm = tile_r + tmax,
          *pos = perm + P;
  route(c, a->logits, N, E, K, a->renorm, ids, wts);
  k_expert_count<<<E, 256, 0, strm(c)>>>(ids, P, counts);
  SPLASH_LAUNCHED(c, "moe_count");
  k_expert_tiles<<<1, 1024, size_t(E) * 8, strm(c)>>>(counts, E, gm, tmax, off, tile_e, tile_r);
  SPLASH_LAUNCHED(c, "moe_tiles");
  k_expert_fill<<<E, 256, 0, strm(c)>>>(ids, P, off, perm, pos);
  SPLASH_LAUNCHED(c, "moe_fill");
  ExpertGemm gu;
  gu.w[0] = *a->gate, gu.w[1] = *a->up, gu.y[0] = gb, gu.y[1] = ub, gu.nw = 2;
  gu.x = a->x, gu.x_rows = N, gu.perm = perm, gu.xdiv = K, gu.off = off, gu.tile_e = tile_e, gu.tile_r = tile_r;
  ExpertGemm dn;
  dn.w[0] = *a->down, dn.y[0] = ye, dn.nw = 1;
  dn.x = gb, dn.x_rows = P, dn.off = off, dn.tile_e = tile_e, dn.tile_r = tile_r;
  if (glu) {
    auto* hb = reinterpret_cast<uint16_t*>(ub);
    expert_glu(c, gu, hb, tmax);
    dn.x = nullptr, dn.xb = reinterpret_cast<const __nv_bfloat16*>(hb);
  } else {
    expert_gemm(c, gu, tmax);
    swiglu(c, gb, ub, int64_t(P) * I, gb);
  }
  expert_gemm(c, dn, tmax);
  launch_dep(c, c->opt.pdl_small, k_combine, dim3(blocks_for(int64_t(N) * H, 256)), dim3(256), 0, ye, wts, pos, K, H, N,
             a->out);
  SPLASH_LAUNCHED(c, "moe_combine");
  return true;
}

// The expert-indexed GEMVs read each routed expert once per pair, the grouped GEMM once per row tile of 64 slots
// but through the tile's dequantisation and tensor-core pipeline: up to CudaOptions::moe_gemv_max tokens (128 at the
// 35B-A3B shape, `splash_gpu_test bench-moe`) the GEMVs are faster.

bool moe_device(Ctx* c, const splash_moe_args* a) {
  const int N = a->n_tokens, E = a->n_experts, K = a->top_k;
  const int64_t H = a->down->rows, I = a->gate->rows;
  // up to CudaOptions::moe_gemv_max tokens, where the grouped GEMM starts to win
  if (N > c->opt.moe_gemv_max || c->opt.precise || E > 4096) return false;
  for (const splash_weight* w : {a->gate, a->up, a->down})
    if ((w->dtype != SPLASH_Q4 && w->dtype != SPLASH_Q8) || w->cols % 64 != 0) return false;
  const int P = N * K;
  auto* ids = static_cast<int32_t*>(scratch(c, kMoeR, size_t(P) * 8));
  auto* gb = static_cast<float*>(scratch(c, kMoeG, size_t(P) * I * 4));
  auto* ub = static_cast<float*>(scratch(c, kMoeU, size_t(P) * I * 4));
  auto* ye = static_cast<float*>(scratch(c, kMoeY, size_t(P) * H * 4));
  if (!ids || !gb || !ub || !ye) return true;
  auto* wts = reinterpret_cast<float*>(ids + P);
  route(c, a->logits, N, E, K, a->renorm, ids, wts);
  const splash_weight* gu[2] = {a->gate, a->up};
  float* const gu_out[2] = {gb, ub};
  matmul_experts(c, 2, gu, a->x, N, ids, P, K, gu_out, I);  // gate and up in one launch
  swiglu(c, gb, ub, int64_t(P) * I, gb);
  matmul_experts(c, 1, &a->down, gb, P, ids, P, 1, &ye, H);
  launch_dep(c, c->opt.pdl_small, k_combine, dim3(blocks_for(int64_t(N) * H, 256)), dim3(256), 0, ye, wts, nullptr, K, H,
             N, a->out);
  SPLASH_LAUNCHED(c, "moe_combine");
  return true;
}

// The routed experts on the host's routing (precise mode, or where neither device path applies).
void moe_host(Ctx* c, const splash_moe_args* a) {
  void* ctx = c;
  const int N = a->n_tokens, E = a->n_experts, K = a->top_k;
  const int64_t H = a->down->rows, I = a->gate->rows, Cx = a->gate->cols;
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

}  // namespace

void moe(void* ctx, const splash_moe_args* a) {
  Ctx* c = static_cast<Ctx*>(ctx);
  const int N = a->n_tokens;
  if (N <= 0) return;
  const size_t ob = size_t(N) * size_t(a->down->rows) * 4;
  if (c->xc_valid && reinterpret_cast<uintptr_t>(a->out) < reinterpret_cast<uintptr_t>(c->xc_x) + size_t(c->xc_total) * 4 &&
      reinterpret_cast<uintptr_t>(c->xc_x) < reinterpret_cast<uintptr_t>(a->out) + ob)
    c->xc_valid = false;  // the output would overwrite the activations whose int8 form is kept
  if (moe_fused(c, a)) return;  // routed and shared expert in two launches
  if (!moe_device(c, a) && !moe_grouped(c, a)) {
    if (spoils_capture(c)) return;  // the routing runs on the host
    moe_host(c, a);
  }
  if (!a->sh_down) return;
  // the shared expert: out += sigmoid(gate) · down(silu(g) · u)
  swiglu(c, a->sh_g, a->sh_u, int64_t(N) * a->sh_down->cols, a->sh_g);
  matmul(c, a->sh_down, a->sh_g, N, a->sh_out, a->sh_down->rows);
  flush(c);
  gated_add(c, a->out, a->sh_out, a->sh_gate, N, int32_t(a->down->rows));
}

}  // namespace splash::cuda
