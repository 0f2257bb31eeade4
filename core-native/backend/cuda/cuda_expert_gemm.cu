// Expert-grouped GEMM for routed experts over many tokens (prefill, verify): the (token, expert) pairs are sorted
// by expert into slots (cuda_moe.cu), and one launch multiplies every expert's slots by that expert's weights.
// A block takes one row tile of one expert (kGm slots; a table maps the grid's row index to it) and kGn output
// features of one weight; the weight tile is dequantised (any dtype, load8) to bf16 in shared memory as it is
// read, the activations are rounded to bf16 once before the launch and gathered (slot → activation row) into
// shared memory by asynchronous copies a k-tile ahead, and WMMA multiplies them with fp32 accumulation: the
// operands of the dense prefill path (bf16 weights and activations on the tensor cores), with no dequantised copy
// of the experts and no host round trip. Each output element is one dot product in a fixed order, so the result
// does not depend on which slots share a tile.
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cp_async.cuh"
#include "backend/cuda/wmma_tile.cuh"

namespace splash::cuda {
namespace {

constexpr int kGm = 64, kGn = 64, kGk = 64, kLd = kGk + 8;  // bf16 pitch of the staged tiles (+16 B)

// kQ4: the weights are q4 (each thread fetches 32 values with one 16-byte load); otherwise any dtype via load8.
// The next k-tile's activations (into the other shared stage) and q4 words (into registers) are fetched before the
// current tile's products, so their latency overlaps the tensor-core work.
template <bool kQ4>
__global__ void __launch_bounds__(128, 4) k_expert_gemm(ExpertGemm a) {
  const int e = a.tile_e[blockIdx.y];
  if (e < 0) return;  // past the last row tile
  const int r0 = a.tile_r[blockIdx.y], r1 = min(r0 + kGm, a.off[e + 1]);
  const int g = blockIdx.x / a.ct, n0 = (blockIdx.x % a.ct) * kGn;
  const splash_weight w = splash_weight_expert(&a.w[g], e);
  const int64_t R = w.rows, K = w.cols;
  __shared__ __align__(128) __nv_bfloat16 sa[2][kGm * kLd];
  __shared__ __align__(32) __nv_bfloat16 sb[kGn * kLd];
  __shared__ __align__(32) float sc[4][16 * 16];
  __shared__ int64_t xrow[kGm];
  const int tid = threadIdx.x;
  if (tid < kGm) {
    const int s = r0 + tid;
    xrow[tid] = s < r1 ? int64_t(a.perm ? a.perm[s] / a.xdiv : s) * K : -1;
  }
  __syncthreads();
  // q4 weights: thread = (row tid/2, half tid%2)
  uint4 qw = make_uint4(0, 0, 0, 0);
  float qs = 0.f, qb = 0.f;
  const int brow = tid >> 1, bhalf = tid & 1;
  const bool blive = n0 + brow < R;
  // the k-tile's bf16 activations straight into shared memory (64 rows × 8 chunks of 16 bytes, 4 a thread)
  auto load_a = [&](int64_t k0, int st) {
#pragma unroll
    for (int j = 0; j < kGm * kGk / 8 / 128; ++j) {
      const int i = tid + j * 128, row = i / (kGk / 8), col = (i % (kGk / 8)) * 8;
      const int64_t xr = xrow[row];
      cp16(&sa[st][row * kLd + col], a.xb + (xr >= 0 ? xr + k0 + col : 0), xr >= 0);
    }
  };
  auto fetch = [&](int64_t k0) {
    if (kQ4 && blive) {
      const int64_t r = n0 + brow;
      qw = __ldg(reinterpret_cast<const uint4*>(static_cast<const uint32_t*>(w.data) + r * (K / 8) + k0 / 8 + bhalf * 4));
      const int64_t gi = r * (K / 64) + k0 / 64;
      qs = bf16f(w.scales[gi]), qb = bf16f(w.biases[gi]);
    }
  };
  auto stash = [&](int64_t k0) {
    if (kQ4) {
      const uint32_t words[4] = {qw.x, qw.y, qw.z, qw.w};
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        __align__(16) __nv_bfloat16 o[8];
#pragma unroll
        for (int k = 0; k < 8; ++k) o[k] = __float2bfloat16(qs * float((words[q] >> (4 * k)) & 15u) + qb);
        *reinterpret_cast<uint4*>(&sb[brow * kLd + bhalf * 32 + q * 8]) = *reinterpret_cast<const uint4*>(o);
      }
    } else {
      for (int i = tid; i < kGn * kGk / 8; i += 128) {
        const int row = i / (kGk / 8), col = (i % (kGk / 8)) * 8;
        float v[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
        if (n0 + row < R) load8(w, n0 + row, k0 + col, v);
        __align__(16) __nv_bfloat16 o[8];
#pragma unroll
        for (int k = 0; k < 8; ++k) o[k] = __float2bfloat16(v[k]);
        *reinterpret_cast<uint4*>(&sb[row * kLd + col]) = *reinterpret_cast<const uint4*>(o);
      }
    }
  };
  const int warp = tid / 32;
  WmmaTile tile(warp);
  load_a(0, 0);
  cp_commit();
  fetch(0);
  int st = 0;
  for (int64_t k0 = 0; k0 < K; k0 += kGk, st ^= 1) {
    if (k0 + kGk < K) load_a(k0 + kGk, st ^ 1);  // the other stage: its last reader finished before the barrier
    cp_commit();
    stash(k0);
    cp_wait<1>();  // this k-tile's activations have landed
    __syncthreads();
    if (k0 + kGk < K) fetch(k0 + kGk);
    tile.mma<kGk, kLd>(sa[st], sb);
    __syncthreads();
  }
  float* y = a.y[g];
  tile.store(sc[warp], tid % 32, [&](int mi, int ni, float v) {
    const int m = r0 + mi;
    const int64_t n = n0 + ni;
    if (m < r1 && n < R) y[int64_t(m) * R + n] = v;
  });
}

}  // namespace

bool expert_gemm_fits(const splash_weight& w) { return w.cols % kGk == 0 && w.rows > 0; }

int expert_gemm_rows() { return kGm; }

void expert_gemm(Ctx* c, const ExpertGemm& a, int32_t row_tiles) {
  if (row_tiles <= 0) return;
  ExpertGemm b = a;
  b.ct = int32_t((a.w[0].rows + kGn - 1) / kGn);
  const dim3 grid(unsigned(b.ct * b.nw), unsigned(row_tiles));
  const int64_t n = int64_t(a.x_rows) * a.w[0].cols;
  auto* xb = static_cast<__nv_bfloat16*>(scratch(c, kEgX, size_t(n) * 2));
  if (!xb) return;
  to_bf16(c, a.x, n, xb);
  b.xb = xb;
  if (a.w[0].dtype == SPLASH_Q4) k_expert_gemm<true><<<grid, 128, 0, strm(c)>>>(b);
  else k_expert_gemm<false><<<grid, 128, 0, strm(c)>>>(b);
  SPLASH_LAUNCHED(c, "expert_gemm");
}

}  // namespace splash::cuda
