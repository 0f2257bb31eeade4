// The sampler on the device (slot sample_rows): sampler/sampler.h's penalties, grammar mask, temperature, top-k,
// min-p, top-p and draws, and the speculative rule, on rows of logits where they lie, so a sampled step sends back one id per
// row instead of a vocabulary-sized row (1 MB a row at the Qwen3.5 vocabulary). One block of 1024 threads per row. A
// grammar mask applies first, or after the filters (mask_after: a constrained row at T > 0, sampler/grammar.cpp).
//
// Candidate order (value descending, id ascending) is a 56-bit key: the value's bits made order-preserving above
// the id complemented in 24 bits, so no two elements share a key. "The element of that order at which the running
// weight reaches a target" (the top-p cut, the draw) is a radix search over the key, five digits (12 bits, then
// 4 × 11), each a pass over the row that sums the weights of the elements under the prefix found so far per digit.
// Those sums are fixed-point integers (weight · 2^44, exact and independent of the order the threads add in), so a
// row gives the same token whatever the schedule. Elements that cannot be the answer are left out as the host does
// (weight at most (universe − target) / V). Small top-k (≤ 2048, the usual 20–50) sorts its candidates in shared
// memory instead and runs the host's own sequential loop over them.
//
// The same tokens as the host sampler up to rounding: the weights are sampler/fast_exp.h's, rounded the same way,
// but the host's sums are in double in another order, so a draw whose target falls within ~1e-9 of a boundary
// between two candidates may land on the other one (sampler/draw.cpp draws on the host).
#include <algorithm>
#include <climits>
#include <cmath>

#include "backend/cuda/cuda_common.cuh"

namespace splash::cuda {

namespace {

using u64 = unsigned long long;
constexpr int kST = 1024;      // threads per row
constexpr int kSmallK = 2048;  // top-k up to this is sorted in shared memory
constexpr int kNB = 4096;      // buckets of the first digit
constexpr double kFix = 17592186044416.0;  // 2^44

struct Desc {
  int64_t row, pen_at, mask_at;
  float temperature, inv, wmin, rep, freq, pres;
  int32_t top_k, n_pen, draft, mask_after;
  double top_p, u, accept, retry;
  const float* q;
  float* q_out;
};

struct Shared {
  union {
    struct {
      u64 w[kNB];
      unsigned c[kNB];
    } h;
    u64 keys[kSmallK];
  } u;
  u64 red64[32];
  double redd[32];
  int redi[32];
  u64 sel_before, sel_w, sel_key;
  int found, lastne, n, pick, token, sel_c;
  double kept;
  u64 kmin;
};

// sampler/fast_exp.h with every operation rounded on its own (no fused multiply-adds), as the host's baseline build
__device__ __forceinline__ float fexp(float x) {
  const bool zero = !(x >= -87.f);
  x = x < -87.f ? -87.f : (x > 88.f ? 88.f : x);
  const float t = __fmul_rn(x, 1.44269504088896341f);
  const float n = __fsub_rn(__fadd_rn(t, 12582912.f), 12582912.f);
  const float r = __fsub_rn(__fsub_rn(x, __fmul_rn(n, 0.693145751953125f)), __fmul_rn(n, 1.428606765330187045e-06f));
  float p = 1.f / 720.f;
  p = __fadd_rn(__fmul_rn(p, r), 1.f / 120.f);
  p = __fadd_rn(__fmul_rn(p, r), 1.f / 24.f);
  p = __fadd_rn(__fmul_rn(p, r), 1.f / 6.f);
  p = __fadd_rn(__fmul_rn(p, r), 0.5f);
  p = __fadd_rn(__fmul_rn(p, r), 1.f);
  p = __fadd_rn(__fmul_rn(p, r), 1.f);
  return zero ? 0.f : __fmul_rn(p, __int_as_float((int(n) + 127) << 23));
}

// candidate order as a key (larger = earlier); NaN gets 0 (never a candidate)
__device__ __forceinline__ u64 ckey(float v, int i) {
  if (v != v) return 0ull;
  const uint32_t b = __float_as_uint(v);
  const uint32_t o = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
  return (u64(o) << 24) | u64(0xFFFFFFu - uint32_t(i));
}
__device__ __forceinline__ int key_id(u64 k) { return int(0xFFFFFFu - uint32_t(k & 0xFFFFFFull)); }

template <class T, class Op>
__device__ T block_reduce(T v, Op op, T* sh) {
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
  __syncthreads();
  T r = sh[0];
  for (int w = 1; w < 32; ++w) r = op(r, sh[w]);
  __syncthreads();
  return r;
}

// exclusive prefix over the threads in thread order (a fixed tree: the same bits every run); *total = the sum
template <class T>
__device__ T block_exscan(T v, T* sh, T* total) {
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  T inc = v;
  for (int o = 1; o < 32; o <<= 1) {
    const T y = __shfl_up_sync(0xffffffffu, inc, o);
    if (lane >= o) inc += y;
  }
  T ex = __shfl_up_sync(0xffffffffu, inc, 1);
  if (lane == 0) ex = T(0);
  if (lane == 31) sh[w] = inc;
  __syncthreads();
  T before = T(0), all = T(0);
  for (int j = 0; j < 32; ++j) {
    if (j < w) before += sh[j];
    all += sh[j];
  }
  __syncthreads();
  *total = all;
  return before + ex;
}

struct Pick {
  u64 key, before, w;  // the element, the weight before it in candidate order, its own weight
  bool found;
};

struct MaxOp {
  template <class T>
  __device__ T operator()(T a, T b) const { return a > b ? a : b; }
};
struct AddOp {
  template <class T>
  __device__ T operator()(T a, T b) const { return a + b; }
};

__device__ __forceinline__ u64 fixq(float w) { return __double2ull_rn(double(w) * kFix); }

// Among the elements item(i, ok, key, wq) accepts, the one at which the running weight in candidate order first
// reaches `target` (Σ before < target ≤ Σ before + w); when rounding leaves it unreached, the last one in order.
// item computes the key first and gives up when ok(key) is false (not under the prefix found so far), before the
// weight. `counting`: every weight is 1 (item sets wq = 1), and only the counts are kept.
template <class Item>
__device__ Pick radix_select(const Item& item, int V, double target, Shared& s, bool counting = false) {
  u64 prefix = 0, acc = 0, sel_w = 0;
  for (int level = 0; level < 5; ++level) {
    const int nb = level == 0 ? kNB : 2048;
    const int shift = 44 - 11 * level;  // the digit is bits [shift, shift + 12 or 11)
    const int above = shift + (level == 0 ? 12 : 11);
    for (int j = threadIdx.x; j < nb; j += kST) s.u.h.w[j] = 0, s.u.h.c[j] = 0;
    if (threadIdx.x == 0) s.found = INT_MAX, s.lastne = -1;
    __syncthreads();
    auto under = [&](u64 key) { return level == 0 || (key >> above) == prefix; };
    for (int i = threadIdx.x; i < V; i += kST) {
      u64 key, wq;
      if (!item(i, under, key, wq)) continue;
      const int dg = int((key >> shift) & u64(nb - 1));
      if (!counting) atomicAdd(&s.u.h.w[dg], wq);
      atomicAdd(&s.u.h.c[dg], 1u);
    }
    __syncthreads();
    if (counting) {  // the counts are the weights
      for (int j = threadIdx.x; j < nb; j += kST) s.u.h.w[j] = s.u.h.c[j];
      __syncthreads();
    }
    // buckets in candidate order (digit descending): thread t owns positions [t·per, (t + 1)·per)
    const int per = nb / kST;
    u64 mine = 0;
    for (int k = 0; k < per; ++k) mine += s.u.h.w[nb - 1 - (int(threadIdx.x) * per + k)];
    u64 all;
    const u64 start = acc + block_exscan(mine, s.red64, &all);
    u64 run = start;
    for (int k = 0; k < per; ++k) {
      const int pos = int(threadIdx.x) * per + k, dg = nb - 1 - pos;
      const u64 w = s.u.h.w[dg];
      if (s.u.h.c[dg] > 0) {
        if (double(run + w) >= target) atomicMin(&s.found, pos);
        atomicMax(&s.lastne, pos);
      }
      run += w;
    }
    __syncthreads();
    const int pos = s.found != INT_MAX ? s.found : s.lastne;
    if (pos < 0) {
      __syncthreads();
      return Pick{0, 0, 0, false};
    }
    if (int(threadIdx.x) == pos / per) {
      u64 b = start;
      for (int k = 0; k < pos % per; ++k) b += s.u.h.w[nb - 1 - (int(threadIdx.x) * per + k)];
      s.sel_before = b;
      s.sel_w = s.u.h.w[nb - 1 - pos];
      s.sel_c = int(s.u.h.c[nb - 1 - pos]);
    }
    __syncthreads();
    acc = s.sel_before;
    sel_w = s.sel_w;
    prefix = (prefix << (level == 0 ? 12 : 11)) | u64(nb - 1 - pos);
    if (s.sel_c == 1 && level < 4) {
      // one element under the prefix: find it instead of narrowing digit by digit
      auto is_it = [&](u64 key) { return (key >> shift) == prefix; };
      for (int i = threadIdx.x; i < V; i += kST) {
        u64 key, wq;
        if (item(i, is_it, key, wq)) s.sel_key = key;
      }
      __syncthreads();
      const u64 key = s.sel_key;
      __syncthreads();
      return Pick{key, acc, sel_w, true};
    }
  }
  __syncthreads();
  return Pick{prefix, acc, sel_w, true};
}

// The host's draw_probs over val(i) ≥ 0 in id order (the first id where the running sum passes u · total, else
// the last positive one); `store`, when given, gets every val(i). Threads own contiguous id ranges.
template <class Val>
__device__ int draw_ids(const Val& val, int V, double u, Shared& s, float* store) {
  const int C = (V + kST - 1) / kST, lo = min(V, int(threadIdx.x) * C), hi = min(V, lo + C);
  double sum = 0;
  int last = -1;
  for (int i = lo; i < hi; ++i) {
    const float f = val(i);
    if (store) store[i] = f;
    if (f > 0.f) sum += f, last = i;
  }
  double total;
  const double ex = block_exscan(sum, s.redd, &total);
  last = block_reduce(last, MaxOp{}, s.redi);
  const double target = u * total;
  if (threadIdx.x == 0) s.pick = INT_MAX;
  __syncthreads();
  if (sum > 0 && !(ex > target)) {
    double acc = ex;
    for (int i = lo; i < hi; ++i) {
      const float f = val(i);
      if (!(f > 0.f)) continue;
      acc += f;
      if (acc > target) {
        atomicMin(&s.pick, i);
        break;
      }
    }
  }
  __syncthreads();
  const int r = s.pick != INT_MAX ? s.pick : last;
  __syncthreads();
  return r;
}

__device__ void bitonic_desc(u64* k, int n2) {
  for (int size = 2; size <= n2; size <<= 1)
    for (int stride = size / 2; stride > 0; stride >>= 1) {
      for (int t = threadIdx.x; t < n2 / 2; t += kST) {
        const int i = 2 * stride * (t / stride) + t % stride, j = i + stride;
        const bool desc = (i & size) == 0;
        const u64 a = k[i], b = k[j];
        if ((a < b) == desc) k[i] = b, k[j] = a;
      }
      __syncthreads();
    }
}

__global__ void __launch_bounds__(kST) k_sample(float* x, int V, const Desc* descs, const int32_t* ints, int32_t* out,
                                                 float* wcache) {
  extern __shared__ __align__(16) unsigned char smem[];
  Shared& s = *reinterpret_cast<Shared*>(smem);
  const Desc d = descs[blockIdx.x];
  float* v = x + d.row * int64_t(V);
  const int tid = threadIdx.x;
  // 1. penalties, each id once (sampler/adjust.cpp)
  if (d.n_pen > 0) {
    for (int j = tid; j < d.n_pen; j += kST) {
      const int id = ints[2 * (d.pen_at + j)], cnt = ints[2 * (d.pen_at + j) + 1];
      if (id < 0 || id >= V) continue;
      float a = v[id];
      if (d.rep != 1.f) a = a > 0.f ? __fdiv_rn(a, d.rep) : __fmul_rn(a, d.rep);
      if (cnt > 0) a = __fsub_rn(a, __fadd_rn(__fmul_rn(d.freq, float(cnt)), d.pres));
      v[id] = a;
    }
    __syncthreads();
  }
  const auto* mw = d.mask_at >= 0 ? reinterpret_cast<const uint32_t*>(ints + d.mask_at) : nullptr;
  auto allowed = [&](int i) { return ((mw[i >> 5] >> (i & 31)) & 1u) != 0u; };
  // The grammar after the filters (mask_after, sampler/grammar.cpp): pass 0 draws from the unmasked row's filtered
  // distribution F; an allowed token stands, a refused one is redrawn from F restricted to the allowed tokens with
  // the second uniform, and when F gives them no mass, pass 1 runs steps 2–4 on the masked row with that uniform.
  for (int pass = 0;; ++pass) {
    const bool after = d.mask_after && pass == 0;
    const double u = pass == 0 ? d.u : d.retry;
    // 2. the grammar mask: disallowed tokens become −inf
    if (mw && !after) {
      for (int i = tid; i < V; i += kST)
        if (!allowed(i)) v[i] = -INFINITY;
      __syncthreads();
    }
    // 3. the argmax (first index of the largest value above −inf; NaN never counts)
    u64 best = 0;
    for (int i = tid; i < V; i += kST) {
      const float a = v[i];
      if (a > -INFINITY) {
        const uint32_t b = __float_as_uint(a);
        const uint32_t o = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
        best = max(best, (u64(o) << 32) | u64(0xFFFFFFFFu - uint32_t(i)));
      }
    }
    best = block_reduce(best, MaxOp{}, s.red64);
    if (best == 0) {
      if (tid == 0) out[d.row] = -1;
      return;
    }
    const int bi = int(0xFFFFFFFFu - uint32_t(best & 0xFFFFFFFFull));
    if (!(d.temperature > 0.f)) {
      if (tid == 0) out[d.row] = bi;
      return;
    }
    // 4. weights w = exp((v − max) / T), 0 under min-p; the kept candidates are those of key ≥ kmin with w > 0
    const float m = v[bi];
    auto weight = [&](float a) {
      const float w = fexp(__fmul_rn(__fsub_rn(a, m), d.inv));
      return w >= d.wmin ? w : 0.f;
    };
    // w > 0 without the exponential: fast_exp is 0 exactly below −87, and min-p 0 keeps every positive weight
    auto positive = [&](float a) {
      return d.wmin > 0.f ? weight(a) > 0.f : __fmul_rn(__fsub_rn(a, m), d.inv) >= -87.f;
    };
    // the weights, once the general path has stored them (wcache: a row of V floats per row sampled)
    float* wb = wcache + size_t(blockIdx.x) * size_t(V);
    bool cached = false;
    auto wt = [&](int i, float a) { return cached ? wb[i] : weight(a); };
    const bool topk = d.top_k > 0 && d.top_k < V, has_cut = d.top_p < 1.0;
    u64 klo = 0;  // top-k: the k-th largest key among positive weights
    if (topk) {
      auto count = [&](int i, const auto& ok, u64& key, u64& wq) {
        const float a = v[i];
        key = ckey(a, i), wq = 1;
        return ok(key) && positive(a);
      };
      klo = radix_select(count, V, double(d.top_k), s, true).key;
    }
    u64 kmin = klo, kcut = 0, through = 0;
    double kept = 0;
    int token = -1;  // the plain draw, when already known
    if (topk && d.top_k <= kSmallK) {
      // the k candidates sorted in shared memory, then the host's sequential loops (draw.cpp: kept_top_k, draw_top_k)
      if (tid == 0) s.n = 0;
      __syncthreads();
      for (int i = tid; i < V; i += kST) {
        const float a = v[i];
        if (!positive(a)) continue;
        const u64 k = ckey(a, i);
        if (k >= klo) {
          const int at = atomicAdd(&s.n, 1);
          if (at < kSmallK) s.u.keys[at] = k;
        }
      }
      __syncthreads();
      const int n = min(s.n, kSmallK);
      int n2 = 1;
      while (n2 < n) n2 <<= 1;
      for (int j = n + tid; j < n2; j += kST) s.u.keys[j] = 0;
      __syncthreads();
      bitonic_desc(s.u.keys, n2);
      if (tid == 0) {
        auto cw = [&](int c) { return fexp(__fmul_rn(__fsub_rn(v[key_id(s.u.keys[c])], m), d.inv)); };
        double total = 0;
        int nk = 0;
        for (; nk < n; ++nk) {
          const float w = cw(nk);
          if (!(w >= d.wmin) || v[key_id(s.u.keys[nk])] == -INFINITY) break;
          total += w;
        }
        if (has_cut) {
          const double target = d.top_p * total;
          double cum = 0;
          int i = 0;
          while (i < nk) {
            cum += cw(i++);
            if (cum >= target) break;
          }
          nk = i, total = cum;
        }
        nk = max(nk, 1);
        double xx = u * total;
        int tk = key_id(s.u.keys[nk - 1]);
        for (int i = 0; i < nk; ++i) {
          xx -= cw(i);
          if (xx <= 0) {
            tk = key_id(s.u.keys[i]);
            break;
          }
        }
        s.kept = total, s.kmin = s.u.keys[nk - 1], s.token = tk;
      }
      __syncthreads();
      kept = s.kept, kmin = s.kmin, token = s.token;
      __syncthreads();
    } else {
      u64 part = 0;
      for (int i = tid; i < V; i += kST) {
        const float a = v[i], w = weight(a);
        wb[i] = w;
        if (w > 0.f && (!topk || ckey(a, i) >= klo)) part += fixq(w);
      }
      const u64 W = block_reduce(part, AddOp{}, s.red64);  // (its barrier also makes wb visible to the block)
      cached = true;
      through = W;
      if (has_cut) {
        const double target = d.top_p * double(W), floor = (double(W) - target) / double(V) * 0.999;
        auto item = [&](int i, const auto& ok, u64& key, u64& wq) {
          const float a = v[i];
          key = ckey(a, i);
          if (!ok(key) || (topk && key < klo)) return false;
          wq = fixq(wt(i, a));
          return wq > 0 && double(wq) > floor;
        };
        const Pick c = radix_select(item, V, target, s);
        kcut = c.key, through = c.before + c.w, kmin = c.key;
      }
      kept = double(through) / kFix;
    }
    // the plain draw in candidate order over the kept candidates (sampler::draw)
    auto plain = [&]() {
      if (token >= 0) return token;
      const double target = u * double(through), floor = (double(through) - target) / double(V) * 0.999;
      auto item = [&](int i, const auto& ok, u64& key, u64& wq) {
        const float a = v[i];
        key = ckey(a, i);
        if (!ok(key) || key < kmin) return false;
        wq = fixq(wt(i, a));
        return wq > 0 && double(wq) > floor;
      };
      const Pick p = radix_select(item, V, target, s);
      return p.found ? key_id(p.key) : (has_cut ? key_id(kcut) : bi);
    };
    // the kept distribution p (sampler::distribution)
    auto prob = [&](int i) {
      const float a = v[i];
      if (ckey(a, i) < kmin) return 0.f;
      const float w = wt(i, a);
      return w > 0.f ? float(double(w) / kept) : 0.f;
    };
    if (after) {
      token = plain();
      if (!allowed(token)) {
        auto kept_allowed = [&](int i) { return allowed(i) ? prob(i) : 0.f; };
        int any = 0;
        for (int i = tid; i < V && !any; i += kST) any = kept_allowed(i) > 0.f;
        if (!block_reduce(any, MaxOp{}, s.redi)) continue;  // no mass under F: the mask first (pass 1)
        token = draw_ids(kept_allowed, V, d.retry, s, nullptr);
      }
    } else if (d.draft >= 0 && d.draft < V && d.q) {
      // speculative.cpp: accept the drafted token with probability min(1, p/q), else draw from max(0, p − q)
      const int dt = d.draft;
      if (d.accept * double(d.q[dt]) < double(prob(dt))) {
        token = dt;
      } else {
        auto res = [&](int i) {
          const float r = prob(i) - d.q[i];
          return r > 0.f ? r : 0.f;
        };
        int any = 0;
        for (int i = tid; i < V && !any; i += kST) any = res(i) > 0.f;
        any = block_reduce(any, MaxOp{}, s.redi);
        token = any ? draw_ids(res, V, d.u, s, nullptr) : plain();
      }
    } else if (d.q_out) {
      token = draw_ids(prob, V, d.u, s, d.q_out);
    } else {
      token = plain();
    }
    if (tid == 0) out[d.row] = token;
    return;
  }
}

}  // namespace

void sample_rows(void* ctx, float* x, int64_t width, const splash_sample_desc* rows, int32_t n, const int32_t* ints,
                 int64_t n_ints, int32_t* out) {
  Ctx* c = static_cast<Ctx*>(ctx);
  if (n <= 0) return;
  if (width <= 0 || width >= (int64_t(1) << 24)) {
    check(c, cudaErrorInvalidValue, "sample_rows: row width");
    return;
  }
  std::vector<Desc> h(static_cast<size_t>(n));
  for (int32_t j = 0; j < n; ++j) {
    const splash_sample_desc& r = rows[j];
    Desc& d = h[size_t(j)];
    d.row = r.row, d.pen_at = r.pen_at, d.mask_at = r.mask_at;
    d.temperature = r.temperature;
    d.inv = r.temperature > 0.f ? 1.f / r.temperature : 0.f;
    // min-p on float weights: w ≥ min_p exactly when w ≥ the smallest float not below min_p (as draw.cpp)
    d.wmin = float(r.min_p);
    if (double(d.wmin) < r.min_p) d.wmin = std::nextafter(d.wmin, 2.f);
    d.rep = r.repetition, d.freq = r.frequency, d.pres = r.presence;
    d.top_k = r.top_k, d.n_pen = r.n_penalized, d.draft = r.draft;
    d.top_p = r.top_p, d.u = r.uniform, d.accept = r.accept;
    d.mask_after = r.mask_after && r.mask_at >= 0 && r.temperature > 0.f && r.draft < 0, d.retry = r.retry;
    d.q = r.q, d.q_out = r.q_out;
    if (r.n_penalized > 0 && (r.pen_at < 0 || 2 * (r.pen_at + r.n_penalized) > n_ints)) {
      check(c, cudaErrorInvalidValue, "sample_rows: penalty pairs out of range");
      return;
    }
    if (r.mask_at >= 0 && r.mask_at + (width + 31) / 32 > n_ints) {
      check(c, cudaErrorInvalidValue, "sample_rows: mask out of range");
      return;
    }
  }
  const size_t db = (size_t(n) * sizeof(Desc) + 255) / 256 * 256, ib = size_t(std::max<int64_t>(n_ints, 1)) * 4;
  auto* dev = static_cast<char*>(scratch(c, kSampleDesc, db + ib));
  auto* wcache = static_cast<float*>(scratch(c, kSampleW, size_t(n) * size_t(width) * 4));
  if (!dev || !wcache) return;
  SPLASH_CK(c, cudaMemcpyAsync(dev, h.data(), size_t(n) * sizeof(Desc), cudaMemcpyHostToDevice, strm(c)));
  if (n_ints > 0) SPLASH_CK(c, cudaMemcpyAsync(dev + db, ints, size_t(n_ints) * 4, cudaMemcpyHostToDevice, strm(c)));
  SPLASH_CK(c, cudaFuncSetAttribute(k_sample, cudaFuncAttributeMaxDynamicSharedMemorySize, int(sizeof(Shared))));
  k_sample<<<unsigned(n), kST, sizeof(Shared), strm(c)>>>(x, int(width), reinterpret_cast<const Desc*>(dev),
                                                           reinterpret_cast<const int32_t*>(dev + db), out, wcache);
  SPLASH_LAUNCHED(c, "sample_rows");
}

}  // namespace splash::cuda
