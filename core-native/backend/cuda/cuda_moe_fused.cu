// A MoE layer's decode in two launches (few tokens; q4 or q8 experts and shared expert), where the unfused path
// (cuda_moe.cu moe_device, then the shared expert's SwiGLU, down GEMV and gated add) takes eight:
// - k_moe_up: a block per (pair, group of 32 expert rows) routes the pair's token itself (moe_route.cuh), runs
//   those rows of the expert's gate and up GEMVs (the int8x2 dp4a arithmetic of gemv_q.cuh), and writes the
//   32 SwiGLU outputs' int8x2 form for the down projection; blocks past the pairs do the shared expert's SwiGLU
//   (its gate and up were computed with the router, in the launch before).
// - k_moe_down: a block per (token, 16 output rows), a warp per routed expert and one for the shared expert: each
//   routes the token again and fetches its rows into L2 before waiting for k_moe_up, runs its down GEMV rows, and
//   the rows are summed with the routing weights in routing order, plus the shared expert's sigmoid-gated part.
// Every value is computed with the unfused kernels' arithmetic in their order (as the combine and the gated add),
// so at 1–4 tokens the output has the unfused path's bits. SPLASH_MOE_FUSED=n: up to n tokens (0: never).
#include <algorithm>
#include <cstdlib>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/gemv_q.cuh"
#include "backend/cuda/moe_route.cuh"

namespace splash::cuda {
namespace {

struct MoeFused {
  splash_weight gate, up, down, sdown;  // expert 0 of the stacked bases; sdown.data null: no shared expert
  const float* logits;
  int32_t N, E, K, renorm;
  const int8_t* xq;  // the layer input's int8x2 form [N × H]
  const float* xs;
  const float* xsum;
  int64_t xl2;
  int8_t* hq;  // the routed SwiGLU outputs' int8x2 form [P × I]: planes of P·I values, scales and sums of P·I/32
  float* hs;
  int8_t* sq;  // the shared expert's [N × Is]
  float* ss;
  const float* sg;  // the shared expert's gate and up projections [N × Is], its gate logits [N]
  const float* su;
  const float* sgate;
  float* out;  // [N × H]
};

// Up to CudaOptions::moe_fused_max tokens (0: never): measured faster than the unfused path at 2 tokens, even at 1,
// slower from 4.
constexpr int kUpWarps = 8, kUpRows = 4;  // k_moe_up: 8 warps × 4 rows = one 32-value activation group

template <int BITS>
__device__ __forceinline__ void quant_to(float v, int64_t i, int8_t* q, float* s, int64_t total) {
  quant_group(v, i, BITS == 4 ? q : nullptr, BITS == 4 ? nullptr : q, s, total);
}

template <int BITS, int PER>
__global__ void __launch_bounds__(kUpWarps * 32) k_moe_up(MoeFused a) {
  pdl_wait();  // launched with PDL: the router's launch is done
  pdl_trigger();  // only now: k_moe_down reads the router's output before its own wait
  __shared__ int32_t sid[32];
  __shared__ float swt[32];
  __shared__ float sh[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int P = a.N * a.K, p = int(blockIdx.y);
  const int64_t g0 = int64_t(blockIdx.x) * 32;
  if (p >= P) {  // the shared expert's SwiGLU for token p − P
    const int64_t Is = a.sdown.cols;
    if (warp != 0 || g0 >= Is) return;
    const int64_t i = int64_t(p - P) * Is + g0 + lane;
    quant_to<BITS>(siluf_(a.sg[i]) * a.su[i], i, a.sq, a.ss, int64_t(a.N) * Is);
    return;
  }
  const int64_t I = a.gate.rows, H = a.gate.cols;
  if (g0 >= I) return;
  const int t = p / a.K, j = p % a.K;
  if (warp == 0) route_warp<PER>(a.logits + int64_t(t) * a.E, a.E, a.K, a.renorm, lane, sid, swt);
  __syncthreads();
  const int e = sid[j];
  const splash_weight wg = splash_weight_expert(&a.gate, e), wu = splash_weight_expert(&a.up, e);
  const int64_t nch = H / 32, G = H / 64, rb = H * BITS / 8, r0 = g0 + warp * kUpRows;
  const int8_t* xq = a.xq + int64_t(t) * H;
  const float *xs = a.xs + int64_t(t) * nch, *xsum = a.xsum + int64_t(t) * nch;
  float ag[kUpRows][1], au[kUpRows][1];
#pragma unroll
  for (int i = 0; i < kUpRows; ++i) ag[i][0] = au[i][0] = 0.f;
#pragma unroll 2
  for (int64_t ch = lane; ch < nch; ch += 32) {
    gemv_q_chunk<BITS, 1, kUpRows>(ag, static_cast<const uint8_t*>(wg.data), wg, r0, I, H, G, nch, rb, ch, xq, xs, xsum,
                                 a.xl2, 1);
    gemv_q_chunk<BITS, 1, kUpRows>(au, static_cast<const uint8_t*>(wu.data), wu, r0, I, H, G, nch, rb, ch, xq, xs, xsum,
                                 a.xl2, 1);
  }
#pragma unroll
  for (int i = 0; i < kUpRows; ++i) {
    const float g = warp_sum(ag[i][0]), u = warp_sum(au[i][0]);
    if (lane == 0) sh[warp * kUpRows + i] = siluf_(g) * u;
  }
  __syncthreads();
  if (warp == 0) quant_to<BITS>(sh[lane], int64_t(p) * I + g0 + lane, a.hq, a.hs, int64_t(P) * I);
}

// k_moe_down: a block's warp w < K runs the token's w-th expert, warp K the shared expert, over kDownRows rows: as two
// half warps of 8 rows when the columns are at most 16 chunks of 32 (the expert width 512 of the Qwen MoE models;
// a half's butterfly over 16 lanes gives the unfused GEMV's sum, whose other 16 lanes add zeros), else as the whole
// warp over 8 rows twice.
constexpr int kDownRows = 16, kDownMaxWarps = 16;

// the rows [r0, r0 + 8) of w against one activation row (int8x2 form, level 2 at lvl2): lanes `base + j·step` take
// chunks j (the unfused GEMV's per-lane order); returns with each row's sum in its lanes after a butterfly over
// `width` lanes
template <int BITS, int WIDTH>
__device__ __forceinline__ void down_rows(float (&v)[8], const splash_weight& w, int64_t r0, const int8_t* xq,
                                          const float* xs, const float* xsum, int64_t lvl2, int l) {
  const int64_t C = w.cols, nch = C / 32, rb = C * BITS / 8;
  float acc[8][1];
#pragma unroll
  for (int i = 0; i < 8; ++i) acc[i][0] = 0.f;
  for (int64_t ch = l; ch < nch; ch += WIDTH)
    gemv_q_chunk<BITS, 1, 8>(acc, static_cast<const uint8_t*>(w.data), w, r0, w.rows, C, C / 64, nch, rb, ch, xq, xs,
                             xsum, lvl2, 1);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    float x = acc[i][0];
#pragma unroll
    for (int o = WIDTH / 2; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    v[i] = x;
  }
}

template <int BITS, int PER, bool HALF>
__global__ void __launch_bounds__(kDownMaxWarps * 32) k_moe_down(MoeFused a) {
  __shared__ int32_t sid[32];
  __shared__ float swt[32];
  __shared__ float part[kDownMaxWarps][kDownRows];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, t = int(blockIdx.y);
  const int64_t H = a.down.rows, r0 = int64_t(blockIdx.x) * kDownRows;
  // k_moe_up lets this launch start only once the router's output is final: route the token again (the same
  // arithmetic, so the same experts and weights) and fetch this warp's weight rows into L2 while k_moe_up runs
  if (warp == 0) route_warp<PER>(a.logits + int64_t(t) * a.E, a.E, a.K, a.renorm, lane, sid, swt);
  __syncthreads();
  const bool shared = warp == a.K;
  const splash_weight w = shared ? a.sdown : splash_weight_expert(&a.down, sid[warp]);
  const int64_t C = w.cols, nch = C / 32, rb = C * BITS / 8;
  for (int64_t i = lane; i < kDownRows * nch; i += 32)
    asm volatile("prefetch.global.L2 [%0];" ::"l"(static_cast<const uint8_t*>(w.data) + min(r0 + i / nch, H - 1) * rb +
                                                 (i % nch) * (32 * BITS / 8)));
  pdl_trigger();
  pdl_wait();  // launched with PDL: k_moe_up is done
  const int64_t tot = shared ? int64_t(a.N) * C : int64_t(a.N) * a.K * C, row = shared ? t : int64_t(t) * a.K + warp;
  const int8_t* xq = (shared ? a.sq : a.hq) + row * C;
  const float* xs = (shared ? a.ss : a.hs) + row * nch;
  const float* xsum = (shared ? a.ss : a.hs) + tot / 32 + row * nch;
  float v[8];
  if constexpr (HALF) {
    const int half = lane >> 4;
    down_rows<BITS, 16>(v, w, r0 + 8 * half, xq, xs, xsum, tot, lane & 15);
    if ((lane & 15) == 0)
#pragma unroll
      for (int i = 0; i < 8; ++i) part[warp][8 * half + i] = v[i];
  } else {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      down_rows<BITS, 32>(v, w, r0 + 8 * h, xq, xs, xsum, tot, lane);
      if (lane == 0)
#pragma unroll
        for (int i = 0; i < 8; ++i) part[warp][8 * h + i] = v[i];
    }
  }
  __syncthreads();
  // the weighted sum in routing order (the unfused combine), then the shared expert's gated part (its gated add)
  if (threadIdx.x < kDownRows && r0 + threadIdx.x < H) {
    float s = 0.f;
    for (int j = 0; j < a.K; ++j) s += swt[j] * part[j][threadIdx.x];
    if (a.sdown.data) s += sigmoidf_(a.sgate[t]) * part[a.K][threadIdx.x];
    a.out[int64_t(t) * H + r0 + threadIdx.x] = s;
  }
}

template <int BITS, int PER>
void launch(Ctx* c, const MoeFused& f, int64_t I, int64_t Is, int32_t P, int32_t N, int64_t H) {
  const dim3 up(unsigned((std::max(I, Is) + 31) / 32), unsigned(P + (Is > 0 ? N : 0)));
  launch_pdl(c, k_moe_up<BITS, PER>, up, dim3(kUpWarps * 32), 0, f);
  SPLASH_LAUNCHED(c, "moe_up");
  const dim3 down(blocks_for(H, kDownRows), unsigned(N)), warps((f.K + (Is > 0)) * 32);
  if (std::max(I, Is) <= 512) launch_pdl(c, k_moe_down<BITS, PER, true>, down, warps, 0, f);
  else launch_pdl(c, k_moe_down<BITS, PER, false>, down, warps, 0, f);
  SPLASH_LAUNCHED(c, "moe_down");
}

bool quant_weight(const splash_weight* w, int dtype) {
  return w->dtype == dtype && w->cols % 64 == 0 && w->rows > 0;
}

}  // namespace

bool moe_fused(Ctx* c, const splash_moe_args* a) {
  const int N = a->n_tokens, E = a->n_experts, K = a->top_k;
  if (c->opt.precise || N > c->opt.moe_fused_max || K + 1 > kDownMaxWarps || E > 32 * 16) return false;
  const int dt = a->gate->dtype;
  if (dt != SPLASH_Q4 && dt != SPLASH_Q8) return false;
  const int64_t H = a->gate->cols, I = a->gate->rows;
  if (!quant_weight(a->gate, dt) || !quant_weight(a->up, dt) || !quant_weight(a->down, dt) || a->up->rows != I ||
      a->up->cols != H || a->down->cols != I || a->down->rows != H || I % 32 != 0)
    return false;
  const int64_t Is = a->sh_down ? a->sh_down->cols : 0;
  if (a->sh_down && (!quant_weight(a->sh_down, dt) || a->sh_down->rows != H)) return false;
  const int P = N * K;
  MoeFused f{};
  f.gate = *a->gate, f.up = *a->up, f.down = *a->down;
  if (a->sh_down) f.sdown = *a->sh_down, f.sg = a->sh_g, f.su = a->sh_u, f.sgate = a->sh_gate;
  f.logits = a->logits, f.N = N, f.E = E, f.K = K, f.renorm = a->renorm, f.out = a->out;
  // scratch: the int8x2 planes (routed, shared; 16-byte aligned), then their scales and sums
  const size_t nh = size_t(P) * I, ns = size_t(N) * Is;
  const size_t bytes = nh * 2 + ns * 2 + nh / 32 * 8 + ns / 32 * 8;
  auto* base = static_cast<uint8_t*>(scratch(c, kMoeFused, bytes));
  if (!base) return true;  // the error is set
  float* xs;
  float* xsum;
  int8_t* xq;
  if (!quantize_x(c, dt == SPLASH_Q4 ? 4 : 8, a->x, H, N, xq, xs, xsum)) return true;
  f.xq = xq, f.xs = xs, f.xsum = xsum, f.xl2 = int64_t(N) * H;
  f.hq = reinterpret_cast<int8_t*>(base);
  f.sq = f.hq + nh * 2;
  f.hs = reinterpret_cast<float*>(f.sq + ns * 2);
  f.ss = f.hs + nh / 32 * 2;
  if (dt == SPLASH_Q4) {
    if (E <= 256) launch<4, 8>(c, f, I, Is, P, N, H);
    else launch<4, 16>(c, f, I, Is, P, N, H);
  } else {
    if (E <= 256) launch<8, 8>(c, f, I, Is, P, N, H);
    else launch<8, 16>(c, f, I, Is, P, N, H);
  }
  return true;
}

}  // namespace splash::cuda
