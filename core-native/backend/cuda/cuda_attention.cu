// Causal GQA attention over the KV cache.
// - Few new tokens (decode, verify): split over the context (flash-decoding): block (token·head, split) runs an
//   online softmax over up to kSplit positions with one warp per position stride, writes (max, sum, partial
//   output); a second kernel merges the splits. fp32 throughout.
// - Many new tokens (prefill chunks, ≥ kTcMin): flash attention on the tensor cores: block = kBq query tokens of
//   one head, 4 warps of 16 rows; K and V tiles of kBk positions staged in shared memory as fp16 and shared by
//   the warps; S = Q·Kᵀ and O += P·V by WMMA (fp16 in, fp32 accumulate), the online softmax in fp32 per row.
//   When the query tiles alone make fewer than two waves of blocks (a short step after a long cached prefix),
//   the context is split too: block (head, tile, split) walks one slice of the positions and writes the rows'
//   (max, sum, unnormalised output) in the split form's layout, and the split form's merge combines them.
//   Measured with ncu on the 27B shape, one 4096-token step from position 0: 23 ms per layer against 37 ms
//   for the split form; a 139-token step after 31.8K cached positions was slower than the split form while a
//   block walked its tile's whole context (72 blocks on 132 SMs), which is what the context split is for.
//   SPLASH_ATTN_TC=1 forces this form where the shapes allow, =0 never. Still far from the tensor cores' rate:
//   one block of 4 warps per SM (190 KB of shared memory at head_dim 256), fp32 K/V converted per tile, O kept
//   in shared memory.
#include <mma.h>

#include <algorithm>
#include <cstdlib>

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

constexpr int kTcMin = 64, kBq = 64, kBk = 64, kTcMaxHd = 256, kTcMinSplit = 512;

struct TcLayout {
  int ld, sl, pl, ol;  // row pitches (elements) of Q/K/V (fp16), S (fp32), P (fp16), O (fp32)
  size_t q, k, v, s, p, o, m, bytes;  // byte offsets of each region, all 32-byte aligned (WMMA pointers)
  __host__ __device__ explicit TcLayout(int hd) {
    ld = hd + 8, sl = kBk + 4, pl = kBk + 8, ol = hd + 4;
    q = 0, k = q + size_t(kBq) * ld * 2, v = k + size_t(kBk) * ld * 2, s = v + size_t(kBk) * ld * 2;
    p = s + size_t(kBq) * sl * 4, o = p + size_t(kBq) * pl * 2, m = o + size_t(kBq) * ol * 4;
    bytes = m + size_t(kBq) * 2 * 4;
  }
};

// part == nullptr: the block walks its tile's whole context and writes the output. Otherwise block z of the
// grid walks positions [z·split, (z+1)·split) and writes each row's partial result to part (k_attn_part's layout:
// per (token, head) and split, max, sum and the unnormalised output) for k_attn_merge.
__global__ void __launch_bounds__(128) k_attn_tc(splash_attn_args a, int32_t nsplit, int32_t split, float* part) {
  namespace wmma = nvcuda::wmma;
  extern __shared__ __align__(128) unsigned char smem[];
  const int hd = a.head_dim;
  const TcLayout L(hd);
  half* Qs = reinterpret_cast<half*>(smem + L.q);
  half* Ks = reinterpret_cast<half*>(smem + L.k);
  half* Vs = reinterpret_cast<half*>(smem + L.v);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  float* Sw = reinterpret_cast<float*>(smem + L.s) + warp * 16 * L.sl;
  half* Pw = reinterpret_cast<half*>(smem + L.p) + warp * 16 * L.pl;
  float* Ow = reinterpret_cast<float*>(smem + L.o) + warp * 16 * L.ol;
  float* Mw = reinterpret_cast<float*>(smem + L.m) + warp * 16;  // running max of the warp's 16 rows
  float* Lw = Mw + kBq;                                          // running sum
  // heads vary fastest, so the heads of one K/V head read the same tiles close together (L2); the last query
  // tiles (the longest contexts) go first
  const int h = blockIdx.x, kvh = h / (a.n_heads / a.n_kv_heads);
  const int t0 = (gridDim.y - 1 - blockIdx.y) * kBq, nt = min(kBq, a.n_tokens - t0);
  const int64_t kvs = int64_t(a.n_kv_heads) * hd;
  for (int i = threadIdx.x; i < kBq * hd; i += blockDim.x) {
    const int r = i / hd, d = i - r * hd;
    Qs[r * L.ld + d] = __float2half(r < nt ? a.q[int64_t(t0 + r) * a.q_stride + int64_t(h) * hd + d] * a.scale : 0.f);
  }
  for (int i = lane; i < 16 * hd; i += 32) Ow[(i / hd) * L.ol + i % hd] = 0.f;
  if (lane < 16) Mw[lane] = -INFINITY, Lw[lane] = 0.f;
  int last = a.start + t0 + nt;  // positions [0, last) are seen by some row of the tile
  int first = 0;
  if (part) {
    first = int(blockIdx.z) * split;
    if (first >= last) return;  // no row of the tile reaches this slice (the merge does not read it)
    last = min(last, first + split);
  }
  for (int p0 = first; p0 < last; p0 += kBk) {
    __syncthreads();  // Q staged (first tile) / every warp done with the previous K, V tile
    for (int i = threadIdx.x; i < kBk * hd; i += blockDim.x) {
      const int r = i / hd, d = i - r * hd, pos = p0 + r;
      const int64_t at = int64_t(pos) * kvs + int64_t(kvh) * hd + d;
      Ks[r * L.ld + d] = __float2half(pos < last ? a.k_cache[at] : 0.f);
      Vs[r * L.ld + d] = __float2half(pos < last ? a.v_cache[at] : 0.f);
    }
    __syncthreads();
    // S = Q·Kᵀ for the warp's 16 rows × kBk positions
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> sacc[kBk / 16];
#pragma unroll
    for (int n = 0; n < kBk / 16; ++n) wmma::fill_fragment(sacc[n], 0.f);
    for (int k = 0; k < hd; k += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> qa;
      wmma::load_matrix_sync(qa, Qs + warp * 16 * L.ld + k, L.ld);
#pragma unroll
      for (int n = 0; n < kBk / 16; ++n) {
        wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> kb;
        wmma::load_matrix_sync(kb, Ks + n * 16 * L.ld + k, L.ld);
        wmma::mma_sync(sacc[n], qa, kb, sacc[n]);
      }
    }
#pragma unroll
    for (int n = 0; n < kBk / 16; ++n) wmma::store_matrix_sync(Sw + n * 16, sacc[n], L.sl, wmma::mem_row_major);
    __syncwarp();
    {  // online softmax: two lanes per row, kBk/2 positions each
      const int r = lane >> 1, c0 = (lane & 1) * (kBk / 2);
      const int row = warp * 16 + r, tq = a.start + t0 + row;  // the row's own position: it sees [0, tq]
      const bool live = row < nt;
      float mx = -INFINITY;
      for (int c = c0; c < c0 + kBk / 2; ++c)
        if (live && p0 + c <= tq) mx = fmaxf(mx, Sw[r * L.sl + c]);
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      const float mold = Mw[r], mnew = fmaxf(mold, mx);
      const float corr = mold == -INFINITY ? 0.f : expf(mold - mnew);
      float sum = 0.f;
      for (int c = c0; c < c0 + kBk / 2; ++c) {
        const float e = live && p0 + c <= tq ? expf(Sw[r * L.sl + c] - mnew) : 0.f;
        Pw[r * L.pl + c] = __float2half(e);
        sum += e;
      }
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      for (int d = (lane & 1) * (hd / 2); d < (lane & 1 ? hd : hd / 2); ++d) Ow[r * L.ol + d] *= corr;
      __syncwarp();
      if ((lane & 1) == 0) Mw[r] = mnew, Lw[r] = Lw[r] * corr + sum;
    }
    __syncwarp();
    // O += P·V
    for (int n = 0; n < hd; n += 16) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> oacc;
      wmma::load_matrix_sync(oacc, Ow + n, L.ol, wmma::mem_row_major);
#pragma unroll
      for (int k = 0; k < kBk; k += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> pa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> vb;
        wmma::load_matrix_sync(pa, Pw + k, L.pl);
        wmma::load_matrix_sync(vb, Vs + k * L.ld + n, L.ld);
        wmma::mma_sync(oacc, pa, vb, oacc);
      }
      wmma::store_matrix_sync(Ow + n, oacc, L.ol, wmma::mem_row_major);
    }
    __syncwarp();
  }
  if (part) {
    __syncwarp();
    for (int i = lane; i < 16 * (2 + hd); i += 32) {
      const int r = i / (2 + hd), d = i - r * (2 + hd), row = warp * 16 + r;
      if (row >= nt) continue;
      float* dst = part + ((int64_t(t0 + row) * a.n_heads + h) * nsplit + blockIdx.z) * (2 + hd);
      dst[d] = d == 0 ? Mw[r] : d == 1 ? Lw[r] : Ow[r * L.ol + d - 2];
    }
    return;
  }
  for (int i = lane; i < 16 * hd; i += 32) {
    const int r = i / hd, d = i - r * hd, row = warp * 16 + r;
    if (row < nt) a.out[int64_t(t0 + row) * a.n_heads * hd + int64_t(h) * hd + d] = Ow[r * L.ol + d] / Lw[r];
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
  // precise mode (parity checks) keeps fp32 attention
  const char* force = std::getenv("SPLASH_ATTN_TC");
  const int64_t tc_blocks = int64_t(a->n_heads) * ((a->n_tokens + kBq - 1) / kBq);
  const bool tc_shapes = !c->precise && !a->start_dev && a->n_tokens >= kTcMin && a->head_dim % 16 == 0 &&
                         a->head_dim <= kTcMaxHd && a->n_heads % a->n_kv_heads == 0;
  // context splits: enough for two waves of blocks, each walking at least kTcMinSplit positions
  const int64_t waves2 = 2 * int64_t(std::max(c->sms, 1));
  const int32_t span_tc = a->start + a->n_tokens;
  int32_t tsplit = 1;
  if (tc_blocks < waves2) {
    const int64_t want = (waves2 + tc_blocks - 1) / tc_blocks, most = std::max<int64_t>(1, span_tc / kTcMinSplit);
    tsplit = int32_t(std::min(want, most));
  }
  const bool tc_wanted = force ? force[0] == '1' : tc_blocks * tsplit >= int64_t(c->sms);
  if (tc_shapes && tc_wanted) {
    const TcLayout L(a->head_dim);
    static size_t opted = 0;  // dynamic shared memory past 48 KiB needs an opt-in, once per size
    if (L.bytes > opted) {
      if (!check(c, cudaFuncSetAttribute(k_attn_tc, cudaFuncAttributeMaxDynamicSharedMemorySize, int(L.bytes)), "attention_tc smem"))
        return;
      opted = L.bytes;
    }
    const unsigned qtiles = unsigned((a->n_tokens + kBq - 1) / kBq);
    if (tsplit == 1) {
      k_attn_tc<<<dim3(unsigned(a->n_heads), qtiles), 128, L.bytes, strm(c)>>>(*a, 1, 0, nullptr);
      SPLASH_LAUNCHED(c, "attention_tc");
      return;
    }
    // slices of whole K tiles; the last split may be shorter, and a split no row reaches writes nothing
    const int32_t per = (span_tc + tsplit - 1) / tsplit, split = (per + kBk - 1) / kBk * kBk;
    const int32_t nsplit = (span_tc + split - 1) / split;
    const int64_t th = int64_t(a->n_tokens) * a->n_heads;
    auto* part = static_cast<float*>(scratch(c, kAttn, size_t(th) * nsplit * (2 + a->head_dim) * 4));
    if (!part) return;
    k_attn_tc<<<dim3(unsigned(a->n_heads), qtiles, unsigned(nsplit)), 128, L.bytes, strm(c)>>>(*a, nsplit, split, part);
    SPLASH_LAUNCHED(c, "attention_tc");
    k_attn_merge<<<unsigned(th), 128, 0, strm(c)>>>(*a, nsplit, split, part);
    SPLASH_LAUNCHED(c, "attention_tc_merge");
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
