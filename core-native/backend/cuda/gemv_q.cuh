// The int8x2 decode GEMV of q4 / q8 weights (dp4a), shared by the generic kernel (cuda_matmul.cu: the
// columns are read from the weight at run time) and the package-specialised kernels (a generated .cu built
// by `splash package kernels` / tools/build_spec_kernels.py, where the columns are a compile-time constant).
// A specialised image is only loaded when its ABI marker matches SPLASH_SPEC_ABI: bump it whenever anything
// here changes the kernels' parameter list or meaning (GemvGroup, splash_weight, the argument order, the
// activation layout).
#pragma once
#include "backend/cuda/cuda_common.cuh"

#define SPLASH_SPEC_ABI 1

namespace splash::cuda {

constexpr int kGemvGroup = Ctx::kMaxGroup;
// Rows per warp the specialised kernels are built for (the generic default; CudaOptions::gemv_rows 1 or 2, a
// benchmark's schedule, keeps the generic kernels).
constexpr int kSpecRows = 4;

// Up to kGemvGroup weights that multiply the same activations, launched as one grid: blocks
// [first[g], first[g+1]) work on weight g (its output y[g], row stride ys[g]).
struct GemvGroup {
  splash_weight w[kGemvGroup];
  float* y[kGemvGroup];
  int64_t ys[kGemvGroup];
  int32_t first[kGemvGroup + 1];
  int32_t n;
};

// The weight of block `b` and the block's index inside it (constant indices only: the group stays in the
// parameter space).
__device__ __forceinline__ int gemv_group_of(const GemvGroup& grp, int32_t b, splash_weight& w, float*& y,
                                             int64_t& ys) {
  w = grp.w[0], y = grp.y[0], ys = grp.ys[0];
  int32_t base = 0;
#pragma unroll
  for (int k = 1; k < kGemvGroup; ++k)
    if (k < grp.n && b >= grp.first[k]) w = grp.w[k], y = grp.y[k], ys = grp.ys[k], base = grp.first[k];
  return b - base;
}

__device__ __forceinline__ int gemv_dp4a_us(uint32_t a, int b, int c) {
  int d;
  asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

// The products of one 32-column chunk `ch` (its ROWS rows' packed values wv, scales s and biases b, wherever they
// were read from) with NT tokens' int8x2 activations, added to acc: the one arithmetic of every dp4a GEMV (this
// kernel, the package-specialised ones and the streaming one of cuda_gemv_stream.cu), so they give the same bits.
template <int BITS, int NT, int ROWS>
__device__ __forceinline__ void gemv_q_dot(float (&acc)[ROWS][NT], const uint4 (&wv)[ROWS][BITS / 4],
                                           const float (&s)[ROWS], const float (&b)[ROWS], int64_t C, int64_t nch,
                                           int64_t ch, const int8_t* xq, const float* xs, const float* xsum,
                                           int64_t lvl2, int32_t nt) {
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    if (t >= nt) break;
    const int4* xp = reinterpret_cast<const int4*>(xq + t * C + ch * 32);
    const int4* xp2 = reinterpret_cast<const int4*>(xq + lvl2 + t * C + ch * 32);
    const int4 a0 = __ldg(xp), a1 = __ldg(xp + 1);
    const int4 c0 = __ldg(xp2), c1 = __ldg(xp2 + 1);
    const int x1[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
    const int x2[8] = {c0.x, c0.y, c0.z, c0.w, c1.x, c1.y, c1.z, c1.w};
    const float sx = xs[t * nch + ch] * (1.f / 256.f), sumx = xsum[t * nch + ch];
#pragma unroll
    for (int i = 0; i < ROWS; ++i) {
      int d1 = 0, d2 = 0;
      const uint32_t* ww = reinterpret_cast<const uint32_t*>(&wv[i][0]);
      if (BITS == 4) {
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          const int lo = int(ww[k] & 0x0F0F0F0Fu), hi = int((ww[k] >> 4) & 0x0F0F0F0Fu);
          d1 = __dp4a(lo, x1[2 * k], d1);
          d1 = __dp4a(hi, x1[2 * k + 1], d1);
          d2 = __dp4a(lo, x2[2 * k], d2);
          d2 = __dp4a(hi, x2[2 * k + 1], d2);
        }
      } else {
#pragma unroll
        for (int k = 0; k < 8; ++k) {
          d1 = gemv_dp4a_us(ww[k], x1[k], d1);
          d2 = gemv_dp4a_us(ww[k], x2[k], d2);
        }
      }
      acc[i][t] += s[i] * sx * float(256 * d1 + d2) + b[i] * sumx;
    }
  }
}

// A warp's sums for its ROWS rows → y (lane 0 writes; rows past R are dropped).
template <int NT, int ROWS>
__device__ __forceinline__ void gemv_q_store(float (&acc)[ROWS][NT], float* y, int64_t ys, int64_t r0, int64_t R,
                                             int32_t nt, int lane) {
#pragma unroll
  for (int i = 0; i < ROWS; ++i)
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      if (t >= nt) break;
      const float v = warp_sum(acc[i][t]);
      if (lane == 0 && r0 + i < R) y[t * ys + r0 + i] = v;
    }
}

// One 32-column chunk `ch` of ROWS rows against NT tokens, the weights read from global memory.
template <int BITS, int NT, int ROWS>
__device__ __forceinline__ void gemv_q_chunk(float (&acc)[ROWS][NT], const uint8_t* base, const splash_weight& w,
                                             int64_t r0, int64_t R, int64_t C, int64_t G, int64_t nch,
                                             int64_t row_bytes, int64_t ch, const int8_t* xq, const float* xs,
                                             const float* xsum, int64_t lvl2, int32_t nt) {
  uint4 wv[ROWS][BITS / 4];
  float s[ROWS], b[ROWS];
#pragma unroll
  for (int i = 0; i < ROWS; ++i) {
    const int64_t r = min(r0 + i, R - 1);
    const uint4* p = reinterpret_cast<const uint4*>(base + r * row_bytes + ch * (32 * BITS / 8));
#pragma unroll
    for (int k = 0; k < BITS / 4; ++k) wv[i][k] = __ldg(p + k);
    s[i] = bf16f(w.scales[r * G + ch / 2]);
    b[i] = bf16f(w.biases[r * G + ch / 2]);
  }
  gemv_q_dot<BITS, NT, ROWS>(acc, wv, s, b, C, nch, ch, xq, xs, xsum, lvl2, nt);
}

// Warp per ROWS rows; a lane handles 32 columns (one activation group) per iteration. KCOLS = 0: the
// columns come from the weight (generic); KCOLS > 0: every weight of the group has KCOLS columns, so the
// addressing is constant and, when the chunks divide evenly over the lanes, the loop has a fixed trip
// count (fully unrolled up to 8 chunks per lane). The order of the additions is the generic kernel's, so
// the results are the same bits.
// With `eidx` (stacked experts): blockIdx.y = pair p uses expert eidx[p], activation row p / xdiv, output
// row p (one token per pair).
template <int BITS, int NT, int ROWS, int UNROLL, int KCOLS>
__device__ __forceinline__ void gemv_q_body(const GemvGroup& grp, const int8_t* xq, const float* xs, const float* xsum,
                                            int64_t lvl2, int32_t nt, const int32_t* eidx, int32_t xdiv) {
  const int lane = threadIdx.x & 31;
  splash_weight w;
  float* y;
  int64_t ys;
  const int32_t bx = gemv_group_of(grp, blockIdx.x, w, y, ys);
  const int64_t r0 = (int64_t(bx) * (blockDim.x / 32) + threadIdx.x / 32) * ROWS;
  const int64_t R = w.rows, C = KCOLS > 0 ? int64_t(KCOLS) : w.cols, nch = C / 32, G = C / 64;
  if (r0 >= R) return;
  if (!eidx) {
    // launched ahead of the kernel that writes the activations (PDL): the weights' first chunk into L2 meanwhile
#pragma unroll
    for (int i = 0; i < ROWS; ++i) {
      const int64_t r = min(r0 + i, R - 1);
      if (lane < nch)
        asm volatile("prefetch.global.L2 [%0];" ::"l"(static_cast<const uint8_t*>(w.data) + r * (C * BITS / 8) +
                                                     int64_t(lane) * (32 * BITS / 8)));
    }
  }
  pdl_wait();
  if (eidx) {
    const int32_t p = blockIdx.y, e = eidx[p];
    w.data = static_cast<const uint8_t*>(w.data) + int64_t(e) * R * (C * BITS / 8);
    w.scales += int64_t(e) * R * G;
    w.biases += int64_t(e) * R * G;
    const int64_t xr = p / xdiv;
    xq += xr * C;
    xs += xr * nch;
    xsum += xr * nch;
    y += int64_t(p) * ys;
  }
  float acc[ROWS][NT];
#pragma unroll
  for (int i = 0; i < ROWS; ++i)
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[i][t] = 0.f;
  const uint8_t* base = static_cast<const uint8_t*>(w.data);
  const int64_t row_bytes = C * BITS / 8;
  constexpr bool kEven = KCOLS > 0 && (KCOLS / 32) % 32 == 0;
  if constexpr (kEven) {
    constexpr int kTrips = KCOLS / 1024;
    constexpr int kUnroll = kTrips <= 8 ? kTrips : UNROLL;
#pragma unroll kUnroll
    for (int it = 0; it < kTrips; ++it)
      gemv_q_chunk<BITS, NT, ROWS>(acc, base, w, r0, R, C, G, nch, row_bytes, int64_t(lane) + 32 * it, xq, xs, xsum,
                                   lvl2, nt);
  } else {
#pragma unroll UNROLL
    for (int64_t ch = lane; ch < nch; ch += 32)
      gemv_q_chunk<BITS, NT, ROWS>(acc, base, w, r0, R, C, G, nch, row_bytes, ch, xq, xs, xsum, lvl2, nt);
  }
  gemv_q_store<NT, ROWS>(acc, y, ys, r0, R, nt, lane);
}

// A launch of up to 8 tokens on the integer tensor cores (cuda_gemv_mma.cu), where kernel_choice.h's
// choose_gemv_form gives GemvForm::kMma.
bool gemv_q_mma(Ctx* c, int bits, GemvGroup& grp, const int8_t* xq, const float* xs, const float* xsum, int64_t lvl2,
                int32_t nt);
// A launch of up to CudaOptions::gemv_stream (≤ 4) tokens through shared memory (cuda_gemv_stream.cu), where
// choose_gemv_form gives GemvForm::kStream (columns a multiple of 1024, aligned weights).
// `rows` (may be null): few-row fp32 GEMVs on the same activations `xf`, launched in the same grid when it takes the
// launch (rows->n is 0 afterwards; the gates in Ctx::row_gates go with them)
bool gemv_q_stream(Ctx* c, int bits, GemvGroup& grp, const int8_t* xq, const float* xs, const float* xsum, int64_t lvl2,
                   int32_t nt, GemvGroup* rows = nullptr, const float* xf = nullptr);

}  // namespace splash::cuda

// ---- the specialised image (a generated .cu: `#include "backend/cuda/gemv_q.cuh"`, then
// SPLASH_SPEC_TABLE(n, bits0, cols0, bits1, cols1, ...) and one SPLASH_SPEC_GEMV(bits, cols) per shape).
// Kernel names: splash_spec<ABI>_gemv_q<BITS>_k<COLS>_t<NT> for NT = 1, 2, 4, 8 (the token counts the decode
// GEMV is instantiated for). The table `splash_spec_table` = {ABI, sizeof(GemvGroup), n, bits, cols, ...}
// tells the loader (cuda_spec.cu) what the image holds and what it was built against.
#define SPLASH_SPEC_NAME_(abi, bits, cols, nt) splash_spec##abi##_gemv_q##bits##_k##cols##_t##nt
#define SPLASH_SPEC_NAME(abi, bits, cols, nt) SPLASH_SPEC_NAME_(abi, bits, cols, nt)
#define SPLASH_SPEC_ONE(BITS_, COLS_, NT_)                                                                  \
  extern "C" __global__ void __launch_bounds__(128) SPLASH_SPEC_NAME(SPLASH_SPEC_ABI, BITS_, COLS_, NT_)(        \
      splash::cuda::GemvGroup grp, const int8_t* xq, const float* xs, const float* xsum, int64_t lvl2,         \
      int32_t ntok, const int32_t* eidx, int32_t xdiv) {                                                        \
    static_assert((COLS_) % 64 == 0, "q4/q8 GEMV columns must be a multiple of 64");                           \
    splash::cuda::gemv_q_body<BITS_, NT_, splash::cuda::kSpecRows, 2, COLS_>(grp, xq, xs, xsum, lvl2, ntok, eidx, \
                                                                              xdiv);                            \
  }
#define SPLASH_SPEC_GEMV(bits, cols) \
  SPLASH_SPEC_ONE(bits, cols, 1) SPLASH_SPEC_ONE(bits, cols, 2) SPLASH_SPEC_ONE(bits, cols, 4) SPLASH_SPEC_ONE(bits, cols, 8)
#define SPLASH_SPEC_TABLE(n, ...) \
  extern "C" __device__ int splash_spec_table[3 + 2 * (n)] = {SPLASH_SPEC_ABI, int(sizeof(splash::cuda::GemvGroup)), (n), __VA_ARGS__};
#define SPLASH_SPEC_STR2(x) #x
#define SPLASH_SPEC_STR(x) SPLASH_SPEC_STR2(x)
// the host's view of the names: SPLASH_SPEC_PREFIX + "<bits>_k<cols>_t<nt>"
#define SPLASH_SPEC_PREFIX "splash_spec" SPLASH_SPEC_STR(SPLASH_SPEC_ABI) "_gemv_q"
