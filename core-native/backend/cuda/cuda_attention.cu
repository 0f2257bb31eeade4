// Causal GQA attention over the KV cache.
// - One new token (decode), graph steps and precise mode: fp32, split over the context (cuda_attention_few.cu:
//   the K/V head's query heads share each tile of the cache, and a merge kernel).
// - Many new tokens (prefill chunks, ≥ kTcMin = 17, head_dim 64 / 128 / 256): FlashAttention-2 on the tensor cores
//   (k_attn_fa below): block = 128 query rows (two heads of one K/V head × 64 tokens, or one head × 128), O and
//   the rows' running max and sum in registers, mma.m16n8k16 fp16 with fp32 accumulation, K/V tiles converted
//   from the fp32 cache into double-buffered fp16 shared memory while the previous tile's math runs.
//   When the query tiles alone make fewer than two waves of blocks (a short step after a long cached prefix),
//   the context is split too: block (heads, tile, split) walks one slice of the positions and writes the rows'
//   (max, sum, unnormalised output) in the few-token form's layout, and its merge combines them.
// - Verify blocks (2 .. 16 tokens) whose query heads × tokens fit 128 rows: the same kernel packed, one block per
//   K/V head holding all of its query heads for every token, split over the context as above. On the 27B shape
//   at 31.8K positions this reads the cache once per K/V head where the fp32 form, compute-bound at 16 tokens,
//   took 1.1 ms.
//   SPLASH_ATTN_TC=1 forces the unpacked form where the shapes allow, =0 never takes the tensor cores
//   (splash_gpu_test bench-attn compares them).
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "backend/cuda/cuda_common.cuh"

namespace splash::cuda {
namespace {

// ---- the tensor-core form (FlashAttention-2 style) ----
// Block = 8 warps, 128 query rows: G heads of one K/V head (G = 2 where the GQA group is even, else 1) × 128/G
// tokens; warp w takes 16 rows of head h0 + w / (8/G). K and V tiles of kFaBk positions are read from the fp32
// cache with float4 loads, converted to fp16 in shared memory (two buffers: the next tile is fetched into
// registers a chunk at a time between the current tile's MMAs), and shared by the 8 warps. Per tile a warp
// computes S = Q·Kᵀ (mma.m16n8k16, Q and K fragments by ldmatrix), the online softmax on the accumulators (fp32,
// base 2: log2 e is folded into Q's scale), turns S into P's A fragments in registers and adds P·V (V fragments by
// ldmatrix.trans) into O, which stays in registers with the rows' running max and sum.
// kTcMin: more tokens than a verify block (≤ 16), which takes the packed form instead
constexpr int kTcMin = 17, kFaWarps = 8, kFaThreads = 32 * kFaWarps, kFaRows = 16 * kFaWarps, kFaBk = 64,
              kTcMinSplit = 512;
constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;

template <int HD>
struct FaSmem {
  static constexpr int ld = HD + 8;           // row pitch in halves: 16 bytes of padding keep ldmatrix conflict-free
  static constexpr int tile = kFaBk * ld;     // one K or V tile; buffer b holds K at kv + 2b·tile, V after it
  static constexpr int kv = kFaRows * ld;     // Q first
  static constexpr size_t bytes = size_t(kv + 4 * tile) * 2;
};

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr) : "memory");
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr) : "memory");
}
// d += a·b: a = 16×16 row-major A fragment, (b0, b1) = 16×8 column-major B fragment, d = 16×8 fp32
__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ uint32_t half2_bits(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);  // lo in the low 16 bits: the lower column of a fragment pair
  return *reinterpret_cast<const uint32_t*>(&h);
}

// part == nullptr: the block walks its tile's whole context and writes the output. Otherwise block z of the
// grid walks positions [z·split, (z+1)·split) and writes each row's partial result to part (the few-token form's
// layout: per (token, head) and split, max, sum and the unnormalised output) for its merge.
// pack = G > 0 (a verify block, G·T ≤ 128 rows): block x holds every query head of K/V head x for every token,
// row R = token R / G, head x·G + R % G, so the cache is read once per K/V head; `heads` is unused then.
template <int HD, bool PACK>
__global__ void __launch_bounds__(kFaThreads, HD <= 64 ? 2 : 1)
    k_attn_fa(splash_attn_args a, int32_t heads, int32_t pack, int32_t nsplit, int32_t split, float* part) {
  using L = FaSmem<HD>;
  constexpr int kKc = HD / 64, kNc = 2 * kKc;  // chunks of 4 float4 per thread: K's, then V's
  constexpr int kRowStep = kFaThreads / (HD / 4);  // tile rows between one thread's float4s
  extern __shared__ __align__(128) unsigned char smem_raw[];
  half* smem = reinterpret_cast<half*>(smem_raw);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, c = lane & 3;
  const int rw = kFaWarps / heads, bq = 16 * rw;  // warps per head, tokens per block
  // heads vary fastest, so the heads of one K/V head read the same tiles close together (L2); the last query
  // tiles (the longest contexts) go first
  const int h0 = PACK ? blockIdx.x * pack : blockIdx.x * heads, kvh = h0 / (a.n_heads / a.n_kv_heads);
  const int t0 = PACK ? 0 : (gridDim.y - 1 - blockIdx.y) * bq, nt = PACK ? a.n_tokens : min(bq, a.n_tokens - t0);
  auto token_of = [&](int R) { return PACK ? R / pack : t0 + R % bq; };  // block row R → token, head
  auto head_of = [&](int R) { return PACK ? h0 + R % pack : h0 + R / bq; };
  const int64_t kvs = int64_t(a.n_kv_heads) * HD;
  int last = a.start + t0 + nt;  // positions [0, last) are seen by some row of the block
  int first = 0;
  if (part) {
    first = int(blockIdx.z) * split;
    if (first >= last) return;  // no row of the block reaches this slice (the merge does not read it)
    last = min(last, first + split);
  }
  {  // Q, scaled (log2 e folded in), as fp16: smem row r = (token_of(r), head_of(r))
    const float qs = a.scale * kLog2e;
#pragma unroll 4
    for (int i = tid; i < kFaRows * HD / 4; i += kFaThreads) {
      const int r = i / (HD / 4), d = (i % (HD / 4)) * 4, t = token_of(r);
      float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
      if (t < a.n_tokens)
        v = *reinterpret_cast<const float4*>(a.q + int64_t(t) * a.q_stride + int64_t(head_of(r)) * HD + d);
      *reinterpret_cast<uint2*>(smem + r * L::ld + d) = make_uint2(half2_bits(v.x * qs, v.y * qs), half2_bits(v.z * qs, v.w * qs));
    }
  }
  // K/V tile loads: thread tid reads float4 column lcol of rows lrow + i·kRowStep (i < HD/16) of a tile
  const int lrow = tid / (HD / 4), lcol = (tid % (HD / 4)) * 4;
  const float* kbase = a.k_cache + int64_t(kvh) * HD + lcol;
  const float* vbase = a.v_cache + int64_t(kvh) * HD + lcol;
  float4 stage[4];
  auto fetch = [&](int ch, int p) {  // chunk ch of the tile at position p into stage (zeros past `last`)
    const float* src = ch < kKc ? kbase : vbase;
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int pos = p + lrow + (4 * (ch % kKc) + u) * kRowStep;
      stage[u] = pos < last ? __ldg(reinterpret_cast<const float4*>(src + int64_t(pos) * kvs)) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
  };
  auto put = [&](int ch, half* buf) {  // stage → fp16 in buffer buf (its K tile; V follows)
    half* dst = buf + (ch < kKc ? 0 : L::tile) + lcol;
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int row = lrow + (4 * (ch % kKc) + u) * kRowStep;
      *reinterpret_cast<uint2*>(dst + row * L::ld) =
          make_uint2(half2_bits(stage[u].x, stage[u].y), half2_bits(stage[u].z, stage[u].w));
    }
  };
  half* const kv0 = smem + L::kv;
#pragma unroll
  for (int ch = 0; ch < kNc; ++ch) fetch(ch, first), put(ch, kv0);
  __syncthreads();

  // this warp's rows 16·warp .. + 15 (unpacked: one head, consecutive tokens); block row R is at position qpos(R)
  auto qpos = [&](int R) { return a.start + token_of(R); };
  const bool live = token_of(16 * warp) < a.n_tokens;
  // ldmatrix lane addresses (bytes): Q rows 16·warp + (lane & 15) at column 8·(lane / 16) (A: the four 8×8
  // blocks in a0..a3 order); K rows (lane & 7) + 8·(lane / 16) at column 8·((lane / 8) & 1) (B of two
  // 8-position n-tiles); V rows (lane & 15) at column 8·(lane / 16), transposed (B of two 8-wide d-tiles)
  const uint32_t sbase = uint32_t(__cvta_generic_to_shared(smem));
  const uint32_t qaddr = sbase + 2 * ((16 * warp + (lane & 15)) * L::ld + 8 * (lane >> 4));
  const uint32_t koff = 2 * (((lane & 7) + 8 * (lane >> 4)) * L::ld + 8 * ((lane >> 3) & 1));
  const uint32_t voff = 2 * ((lane & 15) * L::ld + 8 * (lane >> 4));
  float o[HD / 8][4];
#pragma unroll
  for (int n = 0; n < HD / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  float mrow[2] = {-INFINITY, -INFINITY}, lsum[2] = {0.f, 0.f};  // rows g and g + 8 (l: this lane's columns)
  int b = 0;
  for (int p0 = first; p0 < last; p0 += kFaBk, b ^= 1) {
    const bool next = p0 + kFaBk < last;
    const uint32_t kt = sbase + 2 * (L::kv + 2 * b * L::tile), vt = kt + 2 * L::tile;
    half* const nb = kv0 + 2 * (b ^ 1) * L::tile;
    const bool active = live && p0 <= qpos(16 * warp + 15);  // some row of the warp sees some position of the tile
    float s[kFaBk / 8][4];
#pragma unroll
    for (int n = 0; n < kFaBk / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < HD / 16; ++kk) {
      if (kk % 4 == 0 && next) {
        if (kk) put(kk / 4 - 1, nb);
        fetch(kk / 4, p0 + kFaBk);
      }
      if (active) {
        uint32_t qa[4];
        ldsm_x4(qa, qaddr + 32 * kk);
#pragma unroll
        for (int np = 0; np < kFaBk / 16; ++np) {
          uint32_t kb[4];
          ldsm_x4(kb, kt + koff + 2 * 16 * np * L::ld + 32 * kk);
          mma16816(s[2 * np], qa, kb[0], kb[1]);
          mma16816(s[2 * np + 1], qa, kb[2], kb[3]);
        }
      }
    }
    if (next) put(kKc - 1, nb);
    uint32_t pa[kFaBk / 16][4];
    if (active) {
      if (p0 + kFaBk - 1 > qpos(16 * warp)) {  // the diagonal: rows see positions up to their own
#pragma unroll
        for (int n = 0; n < kFaBk / 8; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            if (p0 + 8 * n + 2 * c + (e & 1) > qpos(16 * warp + g + 8 * (e >> 1))) s[n][e] = -INFINITY;
      }
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float mx = -INFINITY;
#pragma unroll
        for (int n = 0; n < kFaBk / 8; ++n) mx = fmaxf(mx, fmaxf(s[n][2 * r], s[n][2 * r + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float mnew = fmaxf(mrow[r], mx), base = mnew == -INFINITY ? 0.f : mnew;  // all masked so far: e = 0
        const float corr = exp2f(mrow[r] - base);
        float sum = 0.f;
#pragma unroll
        for (int n = 0; n < kFaBk / 8; ++n) {
          s[n][2 * r] = exp2f(s[n][2 * r] - base);
          s[n][2 * r + 1] = exp2f(s[n][2 * r + 1] - base);
          sum += s[n][2 * r] + s[n][2 * r + 1];
        }
        lsum[r] = lsum[r] * corr + sum;
        mrow[r] = mnew;
#pragma unroll
        for (int n = 0; n < HD / 8; ++n) o[n][2 * r] *= corr, o[n][2 * r + 1] *= corr;
      }
      // P's A fragments straight from the accumulators: k-step kk covers n-tiles 2kk (cols 0-7) and 2kk + 1
#pragma unroll
      for (int kk = 0; kk < kFaBk / 16; ++kk) {
        pa[kk][0] = half2_bits(s[2 * kk][0], s[2 * kk][1]);
        pa[kk][1] = half2_bits(s[2 * kk][2], s[2 * kk][3]);
        pa[kk][2] = half2_bits(s[2 * kk + 1][0], s[2 * kk + 1][1]);
        pa[kk][3] = half2_bits(s[2 * kk + 1][2], s[2 * kk + 1][3]);
      }
    }
#pragma unroll
    for (int dp = 0; dp < HD / 16; ++dp) {
      if (dp % 4 == 0 && next) {
        if (dp) put(kKc + dp / 4 - 1, nb);
        fetch(kKc + dp / 4, p0 + kFaBk);
      }
      if (active) {
#pragma unroll
        for (int kk = 0; kk < kFaBk / 16; ++kk) {
          uint32_t vb[4];
          ldsm_x4_trans(vb, vt + voff + 2 * 16 * kk * L::ld + 32 * dp);
          mma16816(o[2 * dp], pa[kk], vb[0], vb[1]);
          mma16816(o[2 * dp + 1], pa[kk], vb[2], vb[3]);
        }
      }
    }
    if (next) put(kNc - 1, nb);
    __syncthreads();  // the next tile is in place; every warp is done with this one (its buffer is refilled next)
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    lsum[r] += __shfl_xor_sync(0xffffffffu, lsum[r], 1);
    lsum[r] += __shfl_xor_sync(0xffffffffu, lsum[r], 2);
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int t = token_of(16 * warp + g + 8 * r), h = head_of(16 * warp + g + 8 * r);
    if (t >= a.n_tokens) continue;
    if (part) {  // natural-log max (−∞ and sum 0 when no position of the slice is seen), unnormalised output
      float* dst = part + ((int64_t(t) * a.n_heads + h) * nsplit + blockIdx.z) * (2 + HD);
      if (c == 0) dst[0] = mrow[r] == -INFINITY ? -INFINITY : mrow[r] * kLn2, dst[1] = lsum[r];
#pragma unroll
      for (int n = 0; n < HD / 8; ++n)
        *reinterpret_cast<float2*>(dst + 2 + 8 * n + 2 * c) = make_float2(o[n][2 * r], o[n][2 * r + 1]);
    } else {
      const float inv = lsum[r] > 0.f ? 1.f / lsum[r] : 0.f;
      float* dst = a.out + int64_t(t) * a.n_heads * HD + int64_t(h) * HD;
#pragma unroll
      for (int n = 0; n < HD / 8; ++n)
        *reinterpret_cast<float2*>(dst + 8 * n + 2 * c) = make_float2(o[n][2 * r] * inv, o[n][2 * r + 1] * inv);
    }
  }
}

template <int HD, bool PACK>
bool launch_fa(Ctx* c, const splash_attn_args& a, int heads, int pack, unsigned qtiles, int32_t nsplit, int32_t split,
               float* part) {
  constexpr size_t bytes = FaSmem<HD>::bytes;
  if (!smem_opt_in<k_attn_fa<HD, PACK>>(c, bytes, "attention_tc smem")) return false;
  const unsigned bx = unsigned(PACK ? a.n_kv_heads : a.n_heads / heads);
  k_attn_fa<HD, PACK><<<dim3(bx, qtiles, unsigned(nsplit)), kFaThreads, bytes, strm(c)>>>(a, heads, pack, nsplit, split,
                                                                                            part);
  return SPLASH_LAUNCHED(c, "attention_tc");
}

}  // namespace

void attention(void* ctx, const splash_attn_args* a) {
  Ctx* c = static_cast<Ctx*>(ctx);
  if (a->n_tokens <= 0) return;
  if (a->head_dim > 256) {
    if (c->error.empty()) c->error = "attention: head_dim > 256 is not supported by the CUDA backend";
    return;
  }
  // the tensor-core form: not in precise mode (parity checks keep fp32), not in graphs (start on the device),
  // head_dim 64, 128 or 256, 16-byte aligned rows; from kTcMin tokens, or packed (every query head of a K/V head in
  // one block) for a verify block of 2 .. kTcMin − 1 tokens whose rows fit one block. One-token steps stay fp32.
  const int hd = a->head_dim, group = a->n_kv_heads > 0 ? a->n_heads / a->n_kv_heads : 0;
  const bool aligned = (reinterpret_cast<uintptr_t>(a->q) | reinterpret_cast<uintptr_t>(a->k_cache) |
                        reinterpret_cast<uintptr_t>(a->v_cache) | reinterpret_cast<uintptr_t>(a->out)) % 16 == 0 &&
                       a->q_stride % 4 == 0;
  const bool tc_ok = !c->opt.precise && !a->start_dev && (hd == 64 || hd == 128 || hd == 256) && group > 0 &&
                     a->n_heads % a->n_kv_heads == 0 && aligned && c->opt.attn_tc != 0;
  const int pack = a->n_tokens >= 2 && a->n_tokens < kTcMin && group * a->n_tokens <= kFaRows ? group : 0;
  const bool tc_shapes = tc_ok && (a->n_tokens >= kTcMin || pack);
  const int heads = group % 2 == 0 ? 2 : 1, bq = kFaRows / heads;  // heads of one K/V head per block (unpacked)
  const unsigned qtiles = pack ? 1u : unsigned((a->n_tokens + bq - 1) / bq);
  const int64_t tc_blocks = pack ? int64_t(a->n_kv_heads) : int64_t(a->n_heads / heads) * qtiles;
  // context splits: enough for two waves of blocks, each walking at least kTcMinSplit positions
  const int64_t waves2 = 2 * int64_t(std::max(c->sms, 1));
  const int32_t span_tc = a->start + a->n_tokens;
  int32_t tsplit = 1;
  if (tc_blocks < waves2) {
    const int64_t want = (waves2 + tc_blocks - 1) / tc_blocks, most = std::max<int64_t>(1, span_tc / kTcMinSplit);
    tsplit = int32_t(std::min(want, most));
  }
  // packed: always where it applies; unpacked: when the blocks fill the machine, or forced (CudaOptions::attn_tc)
  const bool tc_wanted = pack || (c->opt.attn_tc == 1 || (c->opt.attn_tc < 0 && tc_blocks * tsplit >= int64_t(c->sms)));
  if (tc_shapes && tc_wanted) {
    auto launch = [&](int32_t nsplit, int32_t split, float* part) {
      if (pack)
        return hd == 64    ? launch_fa<64, true>(c, *a, heads, pack, qtiles, nsplit, split, part)
               : hd == 128 ? launch_fa<128, true>(c, *a, heads, pack, qtiles, nsplit, split, part)
                           : launch_fa<256, true>(c, *a, heads, pack, qtiles, nsplit, split, part);
      return hd == 64    ? launch_fa<64, false>(c, *a, heads, pack, qtiles, nsplit, split, part)
             : hd == 128 ? launch_fa<128, false>(c, *a, heads, pack, qtiles, nsplit, split, part)
                         : launch_fa<256, false>(c, *a, heads, pack, qtiles, nsplit, split, part);
    };
    if (tsplit == 1) {
      launch(1, 0, nullptr);
      return;
    }
    // slices of whole K tiles; the last split may be shorter, and a split no row reaches writes nothing
    const int32_t per = (span_tc + tsplit - 1) / tsplit, split = (per + kFaBk - 1) / kFaBk * kFaBk;
    const int32_t nsplit = (span_tc + split - 1) / split;
    const int64_t th = int64_t(a->n_tokens) * a->n_heads;
    auto* part = static_cast<float*>(scratch(c, kAttn, size_t(th) * nsplit * (2 + hd) * 4));
    if (!part || !launch(nsplit, split, part)) return;
    attention_merge(c, *a, nsplit, split, part);
    return;
  }
  attention_few(c, *a);
}

}  // namespace splash::cuda
