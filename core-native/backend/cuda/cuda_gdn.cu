// Gated DeltaNet on the GPU: the causal depthwise conv (+ SiLU) with its rolling state (every (token,
// channel) output in parallel, then the state), and the recurrence over T tokens. State columns are
// independent given the token's k̂, q̂: a prep kernel normalises q and k of every token once; then one warp
// per (head, 32 columns) keeps its [dk × 32] slice of S in registers for the whole call (no block
// barriers), per token one read pass (u = Sᵀk̂, w = Sᵀq̂) and one update, as the CPU form:
//   u = e^g·Sᵀk̂,  δ = (v − u)·β,  o = e^g·Sᵀq̂ + (k̂·q̂)·δ,  S ← e^g·S + k̂ ⊗ δ
// (dk of 32, 64 or 128; other sizes use a block form with the slice split over warps).
// Prefill (gdn_chunked, more than a few tokens) uses the chunked form instead: cuda_gdn_chunked.cu.
#include <cooperative_groups.h>

#include <algorithm>
#include <cstdlib>

#include "backend/cuda/cuda_common.cuh"

namespace splash::cuda {
namespace {

constexpr int kMaxConv = 8, kMaxDkWarps = 8;  // conv kernel ≤ 8, dk ≤ 256

// y[t, c] = silu(Σ_j w[c, j]·buf[t + j, c]) with buf = [state (K−1 rows); x (T rows)].
__global__ void k_conv1d_silu(const float* x, int32_t nt, int32_t C, int32_t K, const float* w, const float* state,
                              float* y) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= int64_t(nt) * C) return;
  const int32_t t = int32_t(i / C), c = int32_t(i % C);
  float s = 0.f;
  for (int j = 0; j < K; ++j) {
    const int32_t r = t + j;  // row of buf
    const float b = r < K - 1 ? state[int64_t(r) * C + c] : x[int64_t(r - (K - 1)) * C + c];
    s += w[int64_t(c) * K + j] * b;
  }
  y[i] = siluf_(s);
}

// The same outputs, a thread per channel and run of kConvRun tokens (prefill): the channel's KC weights and the
// window of its last KC inputs stay in registers, so every input is read once and no thread divides by C (the
// form above took 134 µs for 2048 tokens × 8192 channels on an H100). The sum is the form above's, in its order.
constexpr int kConvRun = 16;
template <int KC>
__global__ void k_conv1d_silu_run(const float* x, int32_t nt, int32_t C, const float* w, const float* state, float* y) {
  const int32_t c = blockIdx.x * blockDim.x + threadIdx.x, t0 = int32_t(blockIdx.y) * kConvRun;
  if (c >= C) return;
  float wc[KC], win[KC];
#pragma unroll
  for (int j = 0; j < KC; ++j) wc[j] = w[int64_t(c) * KC + j];
  // buf row r: the state's rows, then x's
  auto buf = [&](int32_t r) { return r < KC - 1 ? state[int64_t(r) * C + c] : x[int64_t(r - (KC - 1)) * C + c]; };
#pragma unroll
  for (int j = 0; j < KC - 1; ++j) win[j] = buf(t0 + j);
  const int32_t t1 = min(nt, t0 + kConvRun);
  for (int32_t t = t0; t < t1; ++t) {
    win[KC - 1] = x[int64_t(t) * C + c];  // buf row t + KC − 1
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < KC; ++j) s += wc[j] * win[j];
    y[int64_t(t) * C + c] = siluf_(s);
#pragma unroll
    for (int j = 0; j < KC - 1; ++j) win[j] = win[j + 1];
  }
}

// state ← last K−1 rows of buf (a separate launch: the conv above reads the old state).
__global__ void k_conv_state(const float* x, int32_t nt, int32_t C, int32_t K, float* state) {
  const int32_t c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float keep[kMaxConv];
#pragma unroll
  for (int j = 0; j < kMaxConv; ++j) {
    if (j >= K - 1) break;
    const int32_t r = nt + j;  // buf row nt + j, j < K − 1
    keep[j] = r < K - 1 ? state[int64_t(r) * C + c] : x[int64_t(r - (K - 1)) * C + c];
  }
#pragma unroll
  for (int j = 0; j < kMaxConv; ++j) {
    if (j >= K - 1) break;
    state[int64_t(j) * C + c] = keep[j];
  }
}

// Few tokens (decode): a thread per channel computes its outputs and then moves its own state rows.
constexpr int kConvFusedTokens = 8;
__global__ void k_conv1d_silu_state(const float* x, int32_t nt, int32_t C, int32_t K, const float* w, float* state,
                                    float* y) {
  pdl_trigger();
  pdl_wait();  // launched with PDL (launch_dep): the kernel before it is done
  const int32_t c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float buf[kMaxConv - 1 + kConvFusedTokens], wc[kMaxConv];
#pragma unroll
  for (int j = 0; j < kMaxConv; ++j) wc[j] = j < K ? w[int64_t(c) * K + j] : 0.f;
#pragma unroll
  for (int j = 0; j < kMaxConv - 1 + kConvFusedTokens; ++j) {
    const int r = j;  // buf row: state rows, then x rows
    buf[j] = r < K - 1 ? state[int64_t(r) * C + c] : (r - (K - 1) < nt ? x[int64_t(r - (K - 1)) * C + c] : 0.f);
  }
#pragma unroll
  for (int t = 0; t < kConvFusedTokens; ++t) {
    if (t >= nt) break;
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < kMaxConv; ++j)
      if (j < K) s += wc[j] * buf[t + j];
    y[int64_t(t) * C + c] = siluf_(s);
  }
#pragma unroll
  for (int r = 0; r < kMaxConv - 1 + kConvFusedTokens; ++r) {  // new state = buf rows [nt, nt + K − 1)
    const int j = r - nt;
    if (j >= 0 && j < K - 1) state[int64_t(j) * C + c] = buf[r];
  }
}

// Normalised q̂ (scaled by 1/√dk), k̂ and k̂·q̂ for every (token, key head): [T][nk][2·dk + 4] (16-byte rows).
__global__ void k_gdn_prep(splash_gdn_args a, float* prep) {
  __shared__ float sh[32];
  const int32_t t = blockIdx.x / a.nk, kh = blockIdx.x % a.nk, dk = a.dk, i = threadIdx.x;
  const float* q = a.q + t * a.qk_stride + int64_t(kh) * dk;
  const float* k = a.k + t * a.qk_stride + int64_t(kh) * dk;
  const float qi = i < dk ? q[i] : 0.f, ki = i < dk ? k[i] : 0.f;
  const float sq = block_sum(qi * qi, sh), sk = block_sum(ki * ki, sh), sqk = block_sum(qi * ki, sh);
  const float iq = (1.f / sqrtf(float(dk))) / sqrtf(sq + 1e-6f), ik = 1.f / sqrtf(sk + 1e-6f);
  float* o = prep + int64_t(blockIdx.x) * (2 * dk + 4);
  if (i < dk) o[i] = qi * iq, o[dk + i] = ki * ik;
  if (i == 0) o[2 * dk] = sqk * iq * ik;
}

template <int DK>
__global__ void __launch_bounds__(32) k_gdn_warp(splash_gdn_args a, const float* prep) {
  pdl_trigger();
  pdl_wait();  // launched with PDL (launch_dep): the kernel before it is done
  const int lane = threadIdx.x;
  const int32_t h = blockIdx.x, col = blockIdx.y * 32 + lane, dv = a.dv, kh = h / (a.nv / a.nk);
  const bool colok = col < dv;
  float* S = a.state + int64_t(h) * DK * dv;
  float s[DK];
#pragma unroll
  for (int i = 0; i < DK; ++i) s[i] = colok ? S[int64_t(i) * dv + col] : 0.f;
  for (int32_t t = 0; t < a.n_tokens; ++t) {
    const float* p = prep + (int64_t(t) * a.nk + kh) * (2 * DK + 4);
    const float4* q4 = reinterpret_cast<const float4*>(p);
    const float4* k4 = reinterpret_cast<const float4*>(p + DK);
    float u = 0.f, wq = 0.f;
#pragma unroll
    for (int i = 0; i < DK / 4; ++i) {
      const float4 kk = k4[i], qq = q4[i];
      u += s[4 * i] * kk.x + s[4 * i + 1] * kk.y + s[4 * i + 2] * kk.z + s[4 * i + 3] * kk.w;
      wq += s[4 * i] * qq.x + s[4 * i + 1] * qq.y + s[4 * i + 2] * qq.z + s[4 * i + 3] * qq.w;
    }
    const float kq = p[2 * DK];
    const float decay = expf(a.g[int64_t(t) * a.nv + h]), beta = a.beta[int64_t(t) * a.nv + h];
    const float v = colok ? a.v[t * a.v_stride + int64_t(h) * dv + col] : 0.f;
    const float d = (v - decay * u) * beta;
    if (colok) a.out[int64_t(t) * a.nv * dv + int64_t(h) * dv + col] = decay * wq + kq * d;
    asm volatile("" ::: "memory");  // reload k̂ below rather than keep 128 values live across the two passes
#pragma unroll
    for (int i = 0; i < DK / 4; ++i) {
      const float4 kk = k4[i];
      s[4 * i] = decay * s[4 * i] + kk.x * d;
      s[4 * i + 1] = decay * s[4 * i + 1] + kk.y * d;
      s[4 * i + 2] = decay * s[4 * i + 2] + kk.z * d;
      s[4 * i + 3] = decay * s[4 * i + 3] + kk.w * d;
    }
  }
#pragma unroll
  for (int i = 0; i < DK; ++i)
    if (colok) S[int64_t(i) * dv + col] = s[i];
}

// Block form: warp w holds rows [w·RW, (w+1)·RW) of the (head, 32 columns) slice. RW = 16 for few tokens
// (decode, verify rows): 8 warps per block for dk = 128, 4× the threads of the warp form and a quarter of its
// serial loads, which decode is bound by; RW = 32 for head sizes the warp form does not take.
// The gated RMSNorm that follows a decode step's recurrence (gated_rmsnorm over each head's dv = 128 outputs),
// done by the recurrence's 4 column blocks of a head as one cluster: each block's warp 0 keeps its 32 outputs per
// token and their sum of squares, the 4 sums meet through distributed shared memory in the order gated_rmsnorm's
// block sum adds them, and the normalised, gated values (and their int8x2 form for the output projection) are
// written as k_rmsnorm writes them: the same expressions, so the same bits.
struct GdnNorm {
  const float* z;
  const float* w;
  float eps;
  float* y;
  QuantOut qo;
};
constexpr int kGdnNormBlocks = 4;  // dv = 128: 4 blocks of 32 columns
constexpr int kGdnNormTokens = 2;  // the most tokens a fused call takes (gdn_defers)

template <int RW, bool NORM>
__device__ __forceinline__ void gdn_body(const splash_gdn_args& a, const GdnNorm& nm) {
  pdl_trigger();
  pdl_wait();  // launched with PDL (launch_dep): the kernel before it is done
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  const int32_t h = blockIdx.x, col = blockIdx.y * 32 + lane;
  const int32_t dk = a.dk, dv = a.dv, kh = h / (a.nv / a.nk);
  const bool colok = col < dv;
  float* S = a.state + int64_t(h) * dk * dv;
  __shared__ float qn[32 * kMaxDkWarps], kn[32 * kMaxDkWarps];
  __shared__ float pu[kMaxDkWarps][32], pw[kMaxDkWarps][32], delta[32], red[3][32];
  __shared__ float ob[NORM ? kGdnNormTokens : 1][32], part[NORM ? kGdnNormTokens : 1];
  float s[RW];
#pragma unroll
  for (int i = 0; i < RW; ++i) {
    const int row = warp * RW + i;
    s[i] = (colok && row < dk) ? S[int64_t(row) * dv + col] : 0.f;
  }
  const float qscale = 1.f / sqrtf(float(dk));
  for (int32_t t = 0; t < a.n_tokens; ++t) {
    const float* q = a.q + t * a.qk_stride + int64_t(kh) * dk;
    const float* k = a.k + t * a.qk_stride + int64_t(kh) * dk;
    const int i = threadIdx.x;
    const float qi = i < dk ? q[i] : 0.f, ki = i < dk ? k[i] : 0.f;
    // three block sums: |q|², |k|², q·k
    float v0 = warp_sum(qi * qi), v1 = warp_sum(ki * ki), v2 = warp_sum(qi * ki);
    if (lane == 0) red[0][warp] = v0, red[1][warp] = v1, red[2][warp] = v2;
    __syncthreads();
    float sq = 0.f, sk = 0.f, sqk = 0.f;
    for (int w = 0; w < nw; ++w) sq += red[0][w], sk += red[1][w], sqk += red[2][w];
    const float iq = qscale / sqrtf(sq + 1e-6f), ik = 1.f / sqrtf(sk + 1e-6f);
    if (i < dk) qn[i] = qi * iq, kn[i] = ki * ik;
    const float kq = sqk * iq * ik;
    __syncthreads();
    float u = 0.f, wq = 0.f;
#pragma unroll
    for (int r = 0; r < RW; ++r) {
      const int row = warp * RW + r;
      const float kr = row < dk ? kn[row] : 0.f, qr = row < dk ? qn[row] : 0.f;
      u += s[r] * kr;
      wq += s[r] * qr;
    }
    pu[warp][lane] = u;
    pw[warp][lane] = wq;
    __syncthreads();
    const float decay = expf(a.g[int64_t(t) * a.nv + h]);
    if (warp == 0) {
      float U = 0.f, W = 0.f;
      for (int w = 0; w < nw; ++w) U += pu[w][lane], W += pw[w][lane];
      const float beta = a.beta[int64_t(t) * a.nv + h];
      const float v = colok ? a.v[t * a.v_stride + int64_t(h) * dv + col] : 0.f;
      const float d = (v - decay * U) * beta;
      delta[lane] = d;
      const float o = decay * W + kq * d;
      if (colok && (!NORM || nm.y != a.out)) a.out[int64_t(t) * a.nv * dv + int64_t(h) * dv + col] = o;
      if constexpr (NORM) {
        ob[t][lane] = o;
        const float ss = warp_sum(o * o);
        if (lane == 0) part[t] = ss;
      }
    }
    __syncthreads();
    const float d = delta[lane];
#pragma unroll
    for (int r = 0; r < RW; ++r) {
      const int row = warp * RW + r;
      const float kr = row < dk ? kn[row] : 0.f;
      s[r] = decay * s[r] + kr * d;
    }
    if (a.states) {  // a verify keeps the state after every token (the rollback's slots)
      float* St = a.states + t * a.states_stride + int64_t(h) * dk * dv;
#pragma unroll
      for (int r = 0; r < RW; ++r) {
        const int row = warp * RW + r;
        if (colok && row < dk) St[int64_t(row) * dv + col] = s[r];
      }
    }
    __syncthreads();  // qn/kn/red are rewritten by the next token
  }
#pragma unroll
  for (int i = 0; i < RW; ++i) {
    const int row = warp * RW + i;
    if (colok && row < dk) S[int64_t(row) * dv + col] = s[i];
  }
  if constexpr (NORM) {
    namespace cg = cooperative_groups;
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();  // every block's sums are in its shared memory
    if (warp == 0)
      for (int32_t t = 0; t < a.n_tokens; ++t) {
        float p[kGdnNormBlocks];
#pragma unroll
        for (int r = 0; r < kGdnNormBlocks; ++r) p[r] = *cluster.map_shared_rank(&part[t], r);
        const float tot = (p[0] + p[2]) + (p[1] + p[3]);  // block_sum's order over gated_rmsnorm's 4 warps
        const float inv = 1.f / sqrtf(tot / float(dv) + nm.eps);
        const int64_t i = (int64_t(t) * a.nv + h) * dv + col;
        const float v = ob[t][lane] * inv * nm.w[col] * siluf_(nm.z[i]);
        nm.y[i] = v;
        if (nm.qo.q4) quant_group(v, i, nm.qo.q4, nm.qo.q8, nm.qo.xs, nm.qo.total);
      }
    cluster.sync();  // the others have read this block's sums before it exits
  }
}

template <int RW>
__global__ void k_gdn(splash_gdn_args a) {
  gdn_body<RW, false>(a, GdnNorm{});
}
__global__ void __cluster_dims__(1, kGdnNormBlocks, 1) __launch_bounds__(256) k_gdn_norm(splash_gdn_args a, GdnNorm nm) {
  gdn_body<16, true>(a, nm);
}

// A decode step's recurrence waits (Ctx::gdn_pend) so that the gated RMSNorm after it can join it as k_gdn_norm:
// few tokens, dk a multiple of 16 up to 128 (8 warps), dv = 128.
// Not on the side stream of a call from another thread while a step records (it must be done when it returns).
// Up to 2 tokens: at 8 the fused form measured slower (warp 0 of each block normalises the tokens one by one, where
// gated_rmsnorm has a block per (token, head); 27B / 35B-A3B shapes, steps of 8 tokens 2.14 / 1.44 ms against
// 2.10 / 1.38 ms unfused).
bool gdn_defers(const Ctx* c, const splash_gdn_args& a) {
  return !c->opt.precise && !tl_stream && a.n_tokens <= kGdnNormTokens && a.dk % 16 == 0 &&
         a.dk <= 128 && a.dv == 32 * kGdnNormBlocks;
}

}  // namespace


bool gdn_norm_with_pending(Ctx* c, const float* x, const float* z, const float* w, int32_t n, int32_t dim, float eps,
                           float* y) {
  const splash_gdn_args& a = c->gdn_args;
  if (!c->gdn_pend || c->pend_n != 0 || x != a.out || n != a.n_tokens * a.nv || dim != a.dv) return false;
  c->gdn_pend = false;
  c->xc_valid = false;  // the int8x2 planes are rewritten for y below
  const QuantOut qo = quant_out(c, int64_t(n) * dim);  // for the output projection
  launch_dep(c, c->opt.pdl_small, k_gdn_norm, dim3(unsigned(a.nv), kGdnNormBlocks), dim3((a.dk / 16) * 32), 0, a,
             GdnNorm{z, w, eps, y, qo});
  if (SPLASH_LAUNCHED(c, "gdn + gated_rmsnorm") && qo.q4) produced(c, y, qo.total);
  return true;
}

void gdn_prep(Ctx* c, const splash_gdn_args& a, float* prep) {
  k_gdn_prep<<<unsigned(a.n_tokens * a.nk), a.dk, 0, strm(c)>>>(a, prep);
  SPLASH_LAUNCHED(c, "gdn_prep");
}

void conv1d_silu(void* ctx, const float* x, int32_t nt, int32_t C, int32_t K, const float* w, float* state, float* y) {
  Ctx* c = static_cast<Ctx*>(ctx);
  if (K < 1 || K > kMaxConv) {
    if (c->error.empty()) c->error = "conv1d: kernel size > 8 is not supported by the CUDA backend";
    return;
  }
  if (nt <= 0) return;
  if (nt <= kConvFusedTokens) {
    launch_dep(c, c->opt.pdl_small, k_conv1d_silu_state, dim3(blocks_for(C, 128)), dim3(128), 0, x, nt, C, K, w, state, y);
    SPLASH_LAUNCHED(c, "conv1d_silu_state");
    return;
  }
  if (K == 4)
    k_conv1d_silu_run<4><<<dim3(blocks_for(C, 128), unsigned((nt + kConvRun - 1) / kConvRun)), 128, 0, strm(c)>>>(
        x, nt, C, w, state, y);
  else
    k_conv1d_silu<<<blocks_for(int64_t(nt) * C, 256), 256, 0, strm(c)>>>(x, nt, C, K, w, state, y);
  SPLASH_LAUNCHED(c, "conv1d_silu");
  k_conv_state<<<blocks_for(C, 128), 128, 0, strm(c)>>>(x, nt, C, K, state);
  SPLASH_LAUNCHED(c, "conv_state");
}

namespace {

// The recurrence's kernels for one call, the form chosen by head size and tokens (a waiting call's too: gdn_flush).
void launch_recurrent(Ctx* c, const splash_gdn_args* a) {
  dim3 grid(unsigned(a->nv), unsigned((a->dv + 31) / 32));
  // stepwise (a verify, a replay): the form a one-token call takes, at any length, so the bits are a decode's
  const bool stepwise = a->stepwise || a->states;
  if ((a->n_tokens <= kGdnFewTokens || stepwise) && a->dk % 16 == 0 && a->dk <= 16 * kMaxDkWarps) {
    launch_dep(c, c->opt.pdl_small, k_gdn<16>, dim3(grid), dim3((a->dk / 16) * 32), 0, *a);
    SPLASH_LAUNCHED(c, "gdn");
    return;
  }
  if (!stepwise && (a->dk == 32 || a->dk == 64 || a->dk == 128)) {
    auto* prep = static_cast<float*>(scratch(c, kGdn, size_t(a->n_tokens) * a->nk * (2 * a->dk + 4) * 4));
    if (!prep) return;
    gdn_prep(c, *a, prep);
    if (a->dk == 32) launch_dep(c, c->opt.pdl_small, k_gdn_warp<32>, dim3(grid), dim3(32), 0, *a, prep);
    else if (a->dk == 64) launch_dep(c, c->opt.pdl_small, k_gdn_warp<64>, dim3(grid), dim3(32), 0, *a, prep);
    else launch_dep(c, c->opt.pdl_small, k_gdn_warp<128>, dim3(grid), dim3(32), 0, *a, prep);
    SPLASH_LAUNCHED(c, "gdn");
    return;
  }
  const int warps = (a->dk + 31) / 32;
  launch_dep(c, c->opt.pdl_small, k_gdn<32>, dim3(grid), dim3(warps * 32), 0, *a);
  SPLASH_LAUNCHED(c, "gdn");
}

}  // namespace

void gdn_recurrent(void* ctx, const splash_gdn_args* a) {
  Ctx* c = static_cast<Ctx*>(ctx);
  if (a->dk > 32 * kMaxDkWarps) {
    if (c->error.empty()) c->error = "gdn: key head dim > 256 is not supported by the CUDA backend";
    return;
  }
  if (a->n_tokens <= 0) return;
  if (gdn_defers(c, *a)) {  // launched by the next slot, fused with it when it is the gated RMSNorm
    c->gdn_args = *a;
    c->gdn_pend = true;
    c->pend_thread = std::this_thread::get_id();
    return;
  }
  launch_recurrent(c, a);
}

void gdn_flush(Ctx* c) {
  if (!c->gdn_pend) return;
  c->gdn_pend = false;
  launch_recurrent(c, &c->gdn_args);
}

}  // namespace splash::cuda
