// Attention of few new tokens (decode, verify blocks, graph steps, precise mode) over the KV cache, split over
// the context (flash-decoding): blocks write each row's partial result per split — natural-log max, sum and the
// unnormalised output — and k_attn_merge combines the splits. fp32 throughout.
// - k_attn_gqa (head_dim 64 / 128 / 256): block = one K/V head × one split × up to RMAX query rows, the rows
//   being that K/V head's query heads for each new token (row r: token r / G, head kvh·G + r % G). The split's
//   positions stream through shared memory in tiles of kGqaP (cp.async, K and V in separate groups so the next
//   tile's K loads while this tile's V is used), and every row reads them there: the cache is read once per
//   K/V head instead of once per query head (24/4 heads on the 27B shape: 6× fewer bytes).
// - k_attn_part (any head_dim ≤ 256): block = one (token, head) × one split, a warp per position; the form for
//   shapes k_attn_gqa does not take.
// SPLASH_ATTN_GQA=0 keeps k_attn_part everywhere (for measuring).
#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cp_async.cuh"

namespace splash::cuda {
namespace {

// Positions per split: 256 for more tokens; 64 for ≤ 8 (decode), where the splits are all the parallelism
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

// ---- the GQA form ----
constexpr int kGqaThreads = 128, kGqaP = 32;


template <int HD, int RMAX>
struct GqaSmem {
  static constexpr int kld = HD + 4;  // K rows padded: lane p reads row p, 16 bytes at a time, without conflicts
  static constexpr int q = RMAX * HD, k = kGqaP * kld, v = kGqaP * HD, s = RMAX * kGqaP;
  static constexpr size_t bytes = size_t(q + k + v + s + RMAX) * 4;
};

// Scores: lane = position of the tile, warp w takes rows w, w + 4, …; output: thread (c4 = tid % (HD/4), rg = tid
// / (HD/4)) keeps float4 column c4 of rows rg, rg + RG, … in registers.
template <int HD, int RMAX>
__global__ void __launch_bounds__(kGqaThreads) k_attn_gqa(splash_attn_args a, int32_t nsplit, int32_t split, float* part) {
  pdl_trigger();
  pdl_wait();  // launched with PDL (launch_dep): the kernel before it is done
  using L = GqaSmem<HD, RMAX>;
  constexpr int C4 = HD / 4, RG = kGqaThreads / C4, RPT = (RMAX + RG - 1) / RG, RW = RMAX / 4;
  extern __shared__ __align__(16) float gsm[];
  float* const Qs = gsm;
  float* const Ks = Qs + L::q;
  float* const Vs = Ks + L::k;
  float* const Ps = Vs + L::v;
  float* const Cs = Ps + L::s;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int G = a.n_heads / a.n_kv_heads, kvh = blockIdx.z, sp = blockIdx.y;
  const int r0 = blockIdx.x * RMAX, nr = min(RMAX, G * a.n_tokens - r0);
  const int start = a.start_dev ? *a.start_dev : a.start;
  const int p0 = sp * split, p1 = min(p0 + split, start + (r0 + nr - 1) / G + 1);  // the chunk's last row sees most
  if (p0 >= p1) return;
  const int64_t kvs = int64_t(a.n_kv_heads) * HD;
  const float* const kb = a.k_cache + int64_t(kvh) * HD;
  const float* const vb = a.v_cache + int64_t(kvh) * HD;
  auto load = [&](const float* base, float* dst, int ld, int pt) {  // the tile at position pt
#pragma unroll
    for (int i = tid; i < kGqaP * C4; i += kGqaThreads) {
      const int p = i / C4, c = i % C4, pos = pt + p;
      cp16(dst + p * ld + 4 * c, base + int64_t(min(pos, p1 - 1)) * kvs + 4 * c, pos < p1);
    }
    cp_commit();
  };
  load(kb, Ks, L::kld, p0);
  load(vb, Vs, HD, p0);
  for (int i = tid; i < nr * C4; i += kGqaThreads) {  // Q, scaled
    const int r = i / C4, c = i % C4, gr = r0 + r;
    const float4 v = *reinterpret_cast<const float4*>(a.q + int64_t(gr / G) * a.q_stride +
                                                      int64_t(kvh * G + gr % G) * HD + 4 * c);
    *reinterpret_cast<float4*>(Qs + r * HD + 4 * c) = make_float4(v.x * a.scale, v.y * a.scale, v.z * a.scale, v.w * a.scale);
  }
  float m[RW], l[RW];
#pragma unroll
  for (int j = 0; j < RW; ++j) m[j] = -INFINITY, l[j] = 0.f;
  const int c4 = tid % C4, rg = tid / C4;
  float4 o[RPT];
#pragma unroll
  for (int k = 0; k < RPT; ++k) o[k] = make_float4(0.f, 0.f, 0.f, 0.f);
  const int ntiles = (p1 - p0 + kGqaP - 1) / kGqaP;
  for (int it = 0; it < ntiles; ++it) {
    const int pt = p0 + it * kGqaP;
    cp_wait<1>();  // this tile's K (its V may still be on the way)
    __syncthreads();
    float s[RW];
#pragma unroll
    for (int j = 0; j < RW; ++j) s[j] = 0.f;
    const float* kr = Ks + lane * L::kld;
#pragma unroll 4
    for (int d = 0; d < HD; d += 4) {
      const float4 kv = *reinterpret_cast<const float4*>(kr + d);
#pragma unroll
      for (int j = 0; j < RW; ++j) {
        if (warp + 4 * j >= nr) break;
        const float4 qv = *reinterpret_cast<const float4*>(Qs + (warp + 4 * j) * HD + d);
        s[j] += qv.x * kv.x + qv.y * kv.y + qv.z * kv.z + qv.w * kv.w;
      }
    }
    __syncthreads();  // every warp is done with K: the next tile's K comes in while this one's V is used
    if (it + 1 < ntiles) load(kb, Ks, L::kld, pt + kGqaP);
    else cp_commit();  // an empty group keeps the count of groups in flight the same
    const int pos = pt + lane;
#pragma unroll
    for (int j = 0; j < RW; ++j) {
      const int r = warp + 4 * j;
      if (r >= nr) break;
      const float x = pos <= start + (r0 + r) / G ? s[j] : -INFINITY;
      const float mn = fmaxf(m[j], warp_max(x));
      const float base = mn == -INFINITY ? 0.f : mn;  // nothing seen yet: every weight 0
      const float e = expf(x - base), corr = expf(m[j] - base);
      l[j] = l[j] * corr + warp_sum(e);
      m[j] = mn;
      Ps[r * kGqaP + lane] = e;
      if (lane == 0) Cs[r] = corr;
    }
    cp_wait<1>();  // this tile's V
    __syncthreads();
#pragma unroll
    for (int k = 0; k < RPT; ++k) {
      const int r = rg + RG * k;
      if (r >= nr) break;
      const float cr = Cs[r];
      o[k].x *= cr, o[k].y *= cr, o[k].z *= cr, o[k].w *= cr;
    }
#pragma unroll
    for (int p = 0; p < kGqaP; p += 4) {
      float4 v[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) v[u] = *reinterpret_cast<const float4*>(Vs + (p + u) * HD + 4 * c4);
#pragma unroll
      for (int k = 0; k < RPT; ++k) {
        const int r = rg + RG * k;
        if (r >= nr) break;
        const float4 w = *reinterpret_cast<const float4*>(Ps + r * kGqaP + p);
        o[k].x += w.x * v[0].x + w.y * v[1].x + w.z * v[2].x + w.w * v[3].x;
        o[k].y += w.x * v[0].y + w.y * v[1].y + w.z * v[2].y + w.w * v[3].y;
        o[k].z += w.x * v[0].z + w.y * v[1].z + w.z * v[2].z + w.w * v[3].z;
        o[k].w += w.x * v[0].w + w.y * v[1].w + w.z * v[2].w + w.w * v[3].w;
      }
    }
    __syncthreads();  // every thread is done with V and the weights
    if (it + 1 < ntiles) load(vb, Vs, HD, pt + kGqaP);
    else cp_commit();
  }
  auto dst_of = [&](int r) {
    const int gr = r0 + r;
    const int64_t th = int64_t(gr / G) * a.n_heads + kvh * G + gr % G;
    return part + (th * nsplit + sp) * (2 + HD);
  };
#pragma unroll
  for (int j = 0; j < RW; ++j) {
    const int r = warp + 4 * j;
    if (r >= nr) break;
    if (lane == 0) {
      float* dst = dst_of(r);
      dst[0] = m[j], dst[1] = l[j];
    }
  }
#pragma unroll
  for (int k = 0; k < RPT; ++k) {
    const int r = rg + RG * k;
    if (r >= nr) break;
    float2* dst = reinterpret_cast<float2*>(dst_of(r) + 2 + 4 * c4);  // rows of 2 + HD floats: 8-byte aligned
    dst[0] = make_float2(o[k].x, o[k].y);
    dst[1] = make_float2(o[k].z, o[k].w);
  }
}

template <int HD, int RMAX>
bool launch_gqa(Ctx* c, const splash_attn_args& a, int32_t nsplit, int32_t split, float* part) {
  constexpr size_t bytes = GqaSmem<HD, RMAX>::bytes;
  if (!smem_opt_in<k_attn_gqa<HD, RMAX>>(c, bytes, "attention_gqa smem")) return false;
  const int rows = a.n_heads / a.n_kv_heads * a.n_tokens;
  const dim3 grid(unsigned((rows + RMAX - 1) / RMAX), unsigned(nsplit), unsigned(a.n_kv_heads));
  launch_dep(c, c->opt.pdl_small, k_attn_gqa<HD, RMAX>, grid, dim3(kGqaThreads), bytes, a, nsplit, split, part);
  return SPLASH_LAUNCHED(c, "attention_gqa");
}

template <int HD>
bool launch_gqa_hd(Ctx* c, const splash_attn_args& a, int32_t nsplit, int32_t split, float* part) {
  const int rows = a.n_heads / a.n_kv_heads * a.n_tokens;
  return rows <= 8 ? launch_gqa<HD, 8>(c, a, nsplit, split, part) : launch_gqa<HD, 32>(c, a, nsplit, split, part);
}

// ---- the merge: block (token·head, 64-column slice); the splits' weights exp(m_s − M) in chunks of kMergeChunk
// in shared memory, then 16 slices of the splits × 16 float4 columns, summed across the slices at the end.
constexpr int kMergeThreads = 256, kMergeCols = 64, kMergeSlices = kMergeThreads / (kMergeCols / 4), kMergeChunk = 1024;

__global__ void __launch_bounds__(kMergeThreads) k_attn_merge(splash_attn_args a, int32_t nsplit, int32_t split,
                                                              const float* part) {
  pdl_trigger();
  pdl_wait();  // launched with PDL (launch_dep): the kernel before it is done
  __shared__ float w[kMergeChunk];
  __shared__ float red[32];
  __shared__ float4 acc_s[kMergeSlices][kMergeCols / 4];
  const int tid = threadIdx.x;
  const int32_t th = blockIdx.x, t = th / a.n_heads, h = th % a.n_heads, hd = a.head_dim;
  const int32_t used = ((a.start_dev ? *a.start_dev : a.start) + t + 1 + split - 1) / split;
  const int64_t st = 2 + hd;
  const float* src = part + int64_t(th) * nsplit * st;
  float mx = -INFINITY;
  for (int s = tid; s < used; s += kMergeThreads) mx = fmaxf(mx, src[s * st]);
  mx = warp_max(mx);
  if ((tid & 31) == 0) red[tid >> 5] = mx;
  __syncthreads();
  float M = -INFINITY;
  for (int i = 0; i < kMergeThreads / 32; ++i) M = fmaxf(M, red[i]);
  const int col = tid % (kMergeCols / 4), slice = tid / (kMergeCols / 4);
  const int d = int(blockIdx.y) * kMergeCols + 4 * col;
  float lsum = 0.f;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int base = 0; base < used; base += kMergeChunk) {
    const int n = min(kMergeChunk, used - base);
    __syncthreads();  // the previous chunk's weights (and `red`) are read
    for (int s = tid; s < n; s += kMergeThreads) {
      const float mm = src[(base + s) * st];
      const float f = mm == -INFINITY ? 0.f : expf(mm - M);
      w[s] = f;
      lsum += f * src[(base + s) * st + 1];
    }
    __syncthreads();
#pragma unroll 4
    for (int s = slice; s < n; s += kMergeSlices) {
      const float* x = src + (base + s) * st + 2 + d;
      const float f = w[s];
      if (d + 3 < hd) {
        acc.x += f * x[0], acc.y += f * x[1], acc.z += f * x[2], acc.w += f * x[3];
      } else {  // the last columns of a head_dim that is not a multiple of 4
        if (d < hd) acc.x += f * x[0];
        if (d + 1 < hd) acc.y += f * x[1];
        if (d + 2 < hd) acc.z += f * x[2];
      }
    }
  }
  const float L = block_sum(lsum, red);
  acc_s[slice][col] = acc;
  __syncthreads();
  if (slice == 0 && d < hd) {
    float4 v = acc;
    for (int i = 1; i < kMergeSlices; ++i) {
      const float4 u = acc_s[i][col];
      v.x += u.x, v.y += u.y, v.z += u.z, v.w += u.w;
    }
    const float inv = 1.f / L, r[4] = {v.x * inv, v.y * inv, v.z * inv, v.w * inv};
    float* o = a.out + int64_t(t) * a.n_heads * hd + int64_t(h) * hd + d;
    for (int k = 0; k < 4 && d + k < hd; ++k) o[k] = r[k];
  }
}

// Up to kMergeSlices splits (a prefill's two context splits, a short context's decode): a warp per (token, head)
// instead of a block per (token, head) and 64 columns, which spent most of its time starting blocks (2048 tokens ×
// 16 heads × 2 splits: 326 µs on an H100, more than the 258 µs attention it merged). The same operations in the same order
// as k_attn_merge with at most one split per slice: each weight's product rounded (split s is slice s there), the
// slices summed in split order, the l sum by the same warp tree; so the same bits.
__global__ void __launch_bounds__(256) k_attn_merge_few(splash_attn_args a, int32_t nsplit, int32_t split,
                                                         const float* part) {
  pdl_trigger();
  pdl_wait();  // launched with PDL (launch_dep): the kernel before it is done
  const int lane = threadIdx.x & 31;
  const int64_t th = int64_t(blockIdx.x) * 8 + (threadIdx.x >> 5);
  if (th >= int64_t(a.n_tokens) * a.n_heads) return;
  const int32_t t = int32_t(th / a.n_heads), h = int32_t(th % a.n_heads), hd = a.head_dim;
  const int32_t used = ((a.start_dev ? *a.start_dev : a.start) + t + 1 + split - 1) / split;
  const int64_t st = 2 + hd;
  const float* src = part + th * nsplit * st;
  const float mm = lane < used ? src[lane * st] : -INFINITY;
  const float M = warp_max(mm);
  const float f = lane < used && mm != -INFINITY ? expf(mm - M) : 0.f;
  const float L = warp_sum(lane < used ? __fmul_rn(f, src[lane * st + 1]) : 0.f);
  const float inv = 1.f / L;
  float* o = a.out + int64_t(t) * a.n_heads * hd + int64_t(h) * hd;
  for (int d = 2 * lane; d < hd; d += 64) {  // hd even: 8-byte aligned pairs (st is even)
    float2 v = make_float2(0.f, 0.f);
    for (int s = 0; s < used; ++s) {
      const float fs = __shfl_sync(0xffffffffu, f, s);
      const float2 x = *reinterpret_cast<const float2*>(src + s * st + 2 + d);
      const float2 p = make_float2(__fmul_rn(fs, x.x), __fmul_rn(fs, x.y));
      v = s == 0 ? p : make_float2(__fadd_rn(v.x, p.x), __fadd_rn(v.y, p.y));
    }
    *reinterpret_cast<float2*>(o + d) = make_float2(v.x * inv, v.y * inv);
  }
}

}  // namespace

void attention_merge(Ctx* c, const splash_attn_args& a, int32_t nsplit, int32_t split, const float* part) {
  const unsigned th = unsigned(int64_t(a.n_tokens) * a.n_heads);
  if (nsplit <= kMergeSlices && a.head_dim % 2 == 0 && reinterpret_cast<uintptr_t>(a.out) % 8 == 0 &&
      reinterpret_cast<uintptr_t>(part) % 8 == 0) {
    launch_dep(c, c->opt.pdl_small, k_attn_merge_few, dim3((th + 7) / 8), dim3(256), 0, a, nsplit, split, part);
    SPLASH_LAUNCHED(c, "attention_merge");
    return;
  }
  launch_dep(c, c->opt.pdl_small, k_attn_merge, dim3(th, unsigned((a.head_dim + kMergeCols - 1) / kMergeCols)),
             dim3(kMergeThreads), 0, a, nsplit, split, part);
  SPLASH_LAUNCHED(c, "attention_merge");
}

void attention_few(Ctx* c, const splash_attn_args& a) {
  const int32_t span = a.start_dev ? a.cap : a.start + a.n_tokens;
  const int32_t split = a.n_tokens <= 8 ? kSplitFew : kSplit;
  const int32_t nsplit = (span + split - 1) / split;
  const int64_t th = int64_t(a.n_tokens) * a.n_heads;
  auto* part = static_cast<float*>(scratch(c, kAttn, size_t(th) * nsplit * (2 + a.head_dim) * 4));
  if (!part) return;
  const int hd = a.head_dim;
  const bool aligned = (reinterpret_cast<uintptr_t>(a.q) | reinterpret_cast<uintptr_t>(a.k_cache) |
                        reinterpret_cast<uintptr_t>(a.v_cache) | reinterpret_cast<uintptr_t>(a.out)) % 16 == 0 &&
                       a.q_stride % 4 == 0;
  const bool gqa = c->opt.attn_gqa && (hd == 64 || hd == 128 || hd == 256) && a.n_kv_heads > 0 &&
                   a.n_heads % a.n_kv_heads == 0 && aligned;
  if (gqa) {
    const bool ok = hd == 64    ? launch_gqa_hd<64>(c, a, nsplit, split, part)
                    : hd == 128 ? launch_gqa_hd<128>(c, a, nsplit, split, part)
                                : launch_gqa_hd<256>(c, a, nsplit, split, part);
    if (!ok) return;
  } else {
    k_attn_part<<<dim3(unsigned(th), unsigned(nsplit)), kWarps * 32, 0, strm(c)>>>(a, nsplit, split, part);
    if (!SPLASH_LAUNCHED(c, "attention")) return;
  }
  attention_merge(c, a, nsplit, split, part);
}

}  // namespace splash::cuda
