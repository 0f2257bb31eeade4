// Shared pieces of the CUDA backend: the context (one device, one stream, growable scratch buffers,
// the first error seen) and small device helpers.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <atomic>
#include <mutex>
#include <string>
#include <unordered_map>
#include <thread>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_options.h"
#include "splash/backend.h"

namespace splash::cuda {

enum Scratch { kXq, kXs, kXbf, kWbf, kAttn, kTok, kMoeIdx, kMoeX, kMoeG, kMoeU, kMoeY, kMoeR, kWf, kGdn, kGdnChunk, kPq4, kPq8, kPs,
               kQgX, kQgPart, kArgmax, kSampleDesc, kSampleW, kMoeFused, kEgX,
               kNumScratch };

// The GDN gates applied by the few-row GEMV that computes b and a (cuda_matmul.cu k_gemv_f_row); null: none.
struct RowGates {
  const float* A_log = nullptr;
  const float* dt_bias = nullptr;
};

struct Ctx {
  int device = 0;
  int sms = 0;
  cudaStream_t stream = nullptr;  // every slot's work, in call order (use strm(): see below)
  cudaStream_t aux = nullptr;     // other threads' calls while a step is being recorded
  std::string error;  // first failure (sticky until read)
  void* scratch[kNumScratch] = {};
  size_t scratch_cap[kNumScratch] = {};
  // cuBLAS, when libcublas loads (prefill GEMMs); null otherwise
  void* cublas_lib = nullptr;
  void* cublas = nullptr;
  int (*gemm_ex)(void*, int, int, int, int, int, const void*, const void*, int, int, const void*, int, int, const void*,
                 void*, int, int, int, int) = nullptr;
  // which kernels run (read once at create, changed only through splash_cuda_options; kernel_choice.h reads it)
  CudaOptions opt;
  // the GDN gates for the b/a GEMVs' launch (CudaOptions::fuse_gates; set by gates_with_pending)
  RowGates row_gates;
  // device memory this backend holds (buffers and scratch) and its cap (0: none; --max-memory)
  std::mutex mem_mu;
  std::unordered_map<void*, size_t> sizes;
  size_t used = 0, limit = 0;
  // decode graphs: while `capturing`, slots are recorded; one that needs the host sets `capture_spoilt`.
  // Scratch replaced while recording is kept (`retired`: the recording uses it) until the epoch moves.
  bool capturing = false;
  bool capture_spoilt = false;
  std::atomic<std::thread::id> capture_thread{};
  std::atomic<std::thread::id> pend_thread{};  // the thread whose matmuls are waiting (the step's)
  uint64_t epoch = 1;
  int64_t graph_launches = 0;  // for the tests
  std::vector<void*> retired;
  // The int8x2 form of the last norm / SwiGLU output (`xc_x`, `xc_total` values), written by that kernel
  // (kPq4 / kPq8 / kPs); valid until any slot other than a matmul runs (Flushed) or a matmul writes over it.
  std::atomic<bool> xc_valid{false};
  const float* xc_x = nullptr;
  int64_t xc_total = 0;
  // matmuls on one activation block waiting to be launched together (cuda_matmul.cu: matmul / flush)
  struct Pending {
    splash_weight w;
    float* y;
    int64_t ys;
  };
  static constexpr int kMaxGroup = 4;
  Pending pend[kMaxGroup];
  int pend_n = 0, pend_kind = 0;
  // few-row fp32 GEMVs (the GDN's b/a) on the same activations as pending q4/q8 ones, riding in their launch
  // (cuda_matmul.cu rides)
  Pending pend_rows[kMaxGroup];
  int pend_rows_n = 0;
  // a decode step's GDN recurrence waiting for the gated RMSNorm after it, to run as one kernel (cuda_gdn.cu;
  // launched by flush() when anything else comes first)
  bool gdn_pend = false;
  splash_gdn_args gdn_args{};
  const float* pend_x = nullptr;
  int32_t pend_nt = 0;
  // the package's specialised decode GEMVs (cuda_spec.cu): the loaded image and (bits, cols, tokens) →
  // kernel; empty when the package has none or they are off
  cudaLibrary_t spec_lib = nullptr;
  std::vector<char> spec_image;
  std::unordered_map<uint64_t, const void*> spec;
};

inline uint64_t spec_key(int bits, int64_t cols, int nt) { return (uint64_t(cols) << 16) | (uint64_t(bits) << 8) | uint64_t(nt); }
inline const void* spec_kernel(const Ctx* c, int bits, int64_t cols, int nt) {
  if (c->spec.empty()) return nullptr;
  const auto it = c->spec.find(spec_key(bits, cols, nt));
  return it == c->spec.end() ? nullptr : it->second;
}

// Records the first CUDA failure; later slots keep running but the model reads the error after the step.
inline bool check(Ctx* c, cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  if (c->error.empty()) c->error = std::string(what) + ": " + cudaGetErrorString(e);
  return false;
}
#define SPLASH_CK(c, call) ::splash::cuda::check((c), (call), #call)
#define SPLASH_LAUNCHED(c, name) ::splash::cuda::check((c), cudaGetLastError(), name)

void* scratch(Ctx* c, Scratch s, size_t bytes);
// cudaMalloc / cudaFree under the memory cap: null when the cap or the device refuses.
void* device_alloc(Ctx* c, size_t bytes);
void device_free(Ctx* c, void* p);

// The stream of this call: the step's stream, except for a call from another thread (creating, freeing or
// truncating an idle sequence) while a step is being recorded, which must not land in the recording; such a
// call runs on `aux` and is waited for before it returns (Flushed in cuda_backend.cu).
extern thread_local cudaStream_t tl_stream;
inline cudaStream_t strm(const Ctx* c) { return tl_stream ? tl_stream : c->stream; }
// True (and the recording marked spoilt) when a slot that needs the host is called while recording.
inline bool spoils_capture(Ctx* c) {
  if (tl_stream || !c->capturing) return false;
  c->capture_spoilt = true;
  return true;
}

// Programmatic dependent launch (sm_90): a kernel launched with the PDL attribute (launch_pdl) may start while
// the kernel before it in the stream is still running; it must call pdl_wait() before it reads or writes
// anything that kernel touches (weights may be prefetched before). pdl_trigger() in a kernel lets its dependent
// be scheduled from then on (otherwise when its blocks exit). Both are no-ops for kernels launched without it.
__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void pdl_trigger() { asm volatile("griddepcontrol.launch_dependents;" :::); }
// Dynamic shared memory past 48 KiB needs an opt-in per kernel: once per Kernel (the instance keeps the flag),
// false (and the context's error set) when the device refuses.
template <auto Kernel>
bool smem_opt_in(Ctx* c, size_t bytes, const char* what) {
  static bool done = false;
  if (!done)
    done = check(c, cudaFuncSetAttribute(reinterpret_cast<const void*>(Kernel), cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         int(bytes)), what);
  return done;
}
// Launches `kernel` on the call's stream with the PDL attribute.
template <typename... Params, typename... Args>
bool launch_pdl(Ctx* c, void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = strm(c);
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = at;
  cfg.numAttrs = 1;
  return check(c, cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...), "launch");
}

// A kernel that starts with pdl_wait() (it touches nothing before the kernel ahead of it is done), launched with PDL
// when `on` (true for the norms, CudaOptions::pdl_small for the others), so its launch overlaps the end of that
// kernel; otherwise a plain launch.
template <typename... Params, typename... Args>
void launch_dep(Ctx* c, bool on, void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, Args&&... args) {
  if (on)
    launch_pdl(c, kernel, grid, block, smem, std::forward<Args>(args)...);
  else
    kernel<<<grid, block, smem, strm(c)>>>(std::forward<Args>(args)...);
}

__device__ __forceinline__ float bf16f(uint16_t v) { return __uint_as_float(uint32_t(v) << 16); }
__device__ __forceinline__ float sigmoidf_(float x) { return 1.f / (1.f + expf(-x)); }
__device__ __forceinline__ float siluf_(float x) { return x / (1.f + expf(-x)); }

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
// Sum over a block of up to 1024 threads (all threads get the result); `sh` holds 32 floats.
__device__ __forceinline__ float block_sum(float v, float* sh) {
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) sh[w] = v;
  __syncthreads();
  float t = lane < nw ? sh[lane] : 0.f;
  return warp_sum(t);
}

// ---- int8x2 activations: per 32 values (a group), scale = amax/127, level 1 and the residual level 2 at
// 1/256 of the step. Planes: level 1 of all values [total], then level 2 [total]; scales [total/32] then
// the groups' sums [total/32]. The q4 layout interleaves each 8 values as [0,2,4,6,1,3,5,7] to meet the
// even/odd nibbles of a word; q8 keeps the order.
struct QuantOut {
  int8_t* q4 = nullptr;  // null: do not write (the producer kernels take this)
  int8_t* q8 = nullptr;
  float* xs = nullptr;
  int64_t total = 0;
};

// All 32 lanes of a warp call this with consecutive values: lane l holds value i = 32·g + l.
__device__ __forceinline__ void quant_group(float v, int64_t i, int8_t* q4, int8_t* q8, float* xs, int64_t total) {
  const int lane = int(i & 31);
  const float amax = warp_max(fabsf(v));
  const float sum = warp_sum(v);
  const float sc = amax / 127.f, inv = amax > 0.f ? 127.f / amax : 0.f;
  const int q1 = max(-127, min(127, int(rintf(v * inv))));
  const float sc2 = sc / 256.f, inv2 = sc2 > 0.f ? 1.f / sc2 : 0.f;
  const int q2 = max(-127, min(127, int(rintf((v - sc * float(q1)) * inv2))));
  const int64_t base = i - lane;
  if (q8) q8[i] = int8_t(q1), q8[total + i] = int8_t(q2);
  if (q4) {
    const int j = lane & 7;
    const int pos = (lane & ~7) | ((j & 1) ? 4 + (j >> 1) : (j >> 1));
    q4[base + pos] = int8_t(q1), q4[total + base + pos] = int8_t(q2);
  }
  if (lane == 0) xs[i / 32] = sc, xs[total / 32 + i / 32] = sum;
}

// 8 consecutive weights of row r from column c (c % 8 == 0), any dtype, as fp32.
__device__ __forceinline__ void load8(const splash_weight& w, int64_t r, int64_t c, float v[8]) {
  const int64_t C = w.cols;
  if (w.dtype == SPLASH_F32) {
    const float4* p = reinterpret_cast<const float4*>(static_cast<const float*>(w.data) + r * C + c);
    const float4 a = __ldg(p), b = __ldg(p + 1);
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
  } else if (w.dtype == SPLASH_BF16) {
    const uint4 a = __ldg(reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(w.data) + r * C + c));
    const uint32_t u[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) v[2 * k] = __uint_as_float(u[k] << 16), v[2 * k + 1] = __uint_as_float(u[k] & 0xFFFF0000u);
  } else {
    const int64_t g = r * (C / 64) + c / 64;
    const float s = bf16f(w.scales[g]), b = bf16f(w.biases[g]);
    if (w.dtype == SPLASH_Q4) {
      const uint32_t q = __ldg(static_cast<const uint32_t*>(w.data) + r * (C / 8) + c / 8);
#pragma unroll
      for (int k = 0; k < 8; ++k) v[k] = s * float((q >> (4 * k)) & 15u) + b;
    } else {
      const uint2 q = __ldg(reinterpret_cast<const uint2*>(static_cast<const uint32_t*>(w.data) + r * (C / 4) + c / 4));
#pragma unroll
      for (int k = 0; k < 4; ++k) v[k] = s * float((q.x >> (8 * k)) & 255u) + b, v[4 + k] = s * float((q.y >> (8 * k)) & 255u) + b;
    }
  }
}

inline unsigned blocks_for(int64_t n, int per) { return unsigned((n + per - 1) / per); }

// Entry points of the other translation units.
// Prefill matmuls (cuda_gemm.cu): bf16 tensor cores; fp32 cuBLAS (false when cuBLAS is absent or unusable).
void gemm(Ctx* c, const splash_weight* w, const float* x, int32_t nt, float* y, int64_t ys);
// out[i] = x[i] rounded to bf16 (round to nearest even), n values
void to_bf16(Ctx* c, const float* x, int64_t n, __nv_bfloat16* out);
bool sgemm(Ctx* c, const splash_weight* w, const float* x, int32_t nt, float* y, int64_t ys);
void matmul(void* ctx, const splash_weight* w, const float* x, int32_t n, float* y, int64_t ys);
// Stacked-expert GEMVs (q4/q8, ≤ 1 token per pair) of n ≤ 4 weights on the same activations, one launch:
// pair p multiplies activation row p / xdiv (of nx rows) by expert eidx[p] (device) of each weight g into row
// p of y[g]. False when a weight is not eligible (the caller falls back).
bool matmul_experts(Ctx* c, int n, const splash_weight* const* base, const float* x, int32_t nx, const int32_t* eidx,
                    int32_t pairs, int32_t xdiv, float* const* y, int64_t ys);
// Activations [n, C] → their int8x2 form for a q4 (bits 4) or q8 GEMV: the planes the last norm / SwiGLU wrote for
// exactly these values, else quantised into scratch now (false when scratch fails).
bool quantize_x(Ctx* c, int bits, const float* x, int64_t C, int32_t n, int8_t*& xq, float*& xs, float*& xsum);
void attention(void* ctx, const splash_attn_args* a);
// cuda_attention_few.cu: few tokens in fp32, split over the context (any head_dim ≤ 256); the merge of split
// partial results (per (token, head) and split: max, sum, unnormalised output), which the tensor-core form uses too
void attention_few(Ctx* c, const splash_attn_args& a);
void attention_merge(Ctx* c, const splash_attn_args& a, int32_t nsplit, int32_t split, const float* part);
void conv1d_silu(void* ctx, const float* x, int32_t nt, int32_t C, int32_t K, const float* w, float* state, float* y);
void gdn_recurrent(void* ctx, const splash_gdn_args* a);
void gdn_chunked(void* ctx, const splash_gdn_args* a);  // prefill: the chunked form past a few tokens
constexpr int kGdnFewTokens = 16;  // up to this many tokens the recurrent block form (16 state rows per warp) wins
// q̂ (scaled by 1/√dk), k̂ and k̂·q̂ of every (token, key head) of a into prep: [T][nk][2·dk + 4] (cuda_gdn.cu)
void gdn_prep(Ctx* c, const splash_gdn_args& a, float* prep);
void moe(void* ctx, const splash_moe_args* a);
// Expert-grouped GEMM (cuda_expert_gemm.cu): slots sorted by expert, off[e]..off[e+1] of expert e; row tile τ of
// the grid covers slots [tile_r[τ], min(tile_r[τ] + expert_gemm_rows(), off[e + 1])) of expert tile_e[τ] (−1: none).
// Slot s multiplies activation row (perm ? perm[s] / xdiv : s) of x (rows of w.cols values) by expert e of each of
// the nw weights (same rows and cols) into row s of y[g] (rows of w.rows values).
struct ExpertGemm {
  splash_weight w[2];
  float* y[2];
  int32_t nw = 1, ct = 0;  // ct: set by expert_gemm
  const float* x = nullptr;
  int32_t x_rows = 0;                   // rows of x (rounded to bf16 once before the launch)
  const __nv_bfloat16* xb = nullptr;    // set by expert_gemm
  const int32_t* perm = nullptr;
  int32_t xdiv = 1;
  const int32_t* off = nullptr;
  const int32_t* tile_e = nullptr;
  const int32_t* tile_r = nullptr;
};
bool expert_gemm_fits(const splash_weight& w);
// The fused q4 GEMM (cuda_qgemm.cu): one launch for a group of weights (same columns) that kernel_choice.h gives it,
// on activations x [nt, cols].
struct GemvGroup;
void qgemm(Ctx* c, GemvGroup& grp, const float* x, int32_t nt);
// x [n] fp32 → bf16 with every 8 values in the order 0 4 1 5 2 6 3 7 (qmma.cuh; n a multiple of 8), and with sums
// not null the sum of each 64 rounded values
void qgemm_act(Ctx* c, const float* x, int64_t n, uint16_t* out, float* sums);
int expert_gemm_rows();
// x null: xb holds the activations already in the q4 form's layout (expert_glu's output; q4 weights that
// expert_q4_fits)
void expert_gemm(Ctx* c, const ExpertGemm& a, int32_t row_tiles);
// q4 weights the tensor-core q4 form takes (every grouped q4 matmul of a MoE layer must, for expert_glu)
bool expert_q4_fits(const Ctx* c, const splash_weight& w);
// gate and up (gu.w[0], gu.w[1], gu.nw = 2) and SwiGLU in one launch: hb [slots][rows] = silu(gate)·up in bf16,
// laid out as the down projection's expert_gemm reads it (x null, xb = hb)
void expert_glu(Ctx* c, const ExpertGemm& gu, uint16_t* hb, int32_t row_tiles);
void swiglu(void* ctx, const float* g, const float* u, int64_t n, float* out);
void gated_add(void* ctx, float* y, const float* x, const float* gate, int32_t n, int32_t dim);
// cuda_moe_fused.cu: a MoE layer of a few tokens (and its shared expert) in two launches; false when it does not apply
// (the caller runs the unfused path)
bool moe_fused(Ctx* c, const splash_moe_args* a);
// the vision encoder's slots (cuda_vision.cu)
void layer_norm(void* ctx, const float* x, const float* w, const float* b, int32_t n, int32_t dim, float eps, float* y);
void add_bias(void* ctx, float* y, const float* b, int32_t n, int32_t dim);
void gelu(void* ctx, float* x, int64_t n, int32_t tanh_approx);
void rope_table(void* ctx, float* x, int32_t nt, int64_t rs, int32_t nh, int64_t hs, int32_t hd, const float* cos,
                const float* sin);
void seg_attention(void* ctx, const splash_seg_attn_args* a);
void add(void* ctx, float* y, const float* x, int64_t n);
// cuda_argmax.cu
void argmax_rows(void* ctx, const float* x, int32_t rows, int64_t width, int32_t* out);
// cuda_sample.cu
void sample_rows(void* ctx, float* x, int64_t width, const splash_sample_desc* rows, int32_t n, const int32_t* ints,
                 int64_t n_ints, int32_t* out);
// cuda_norm.cu
void rmsnorm(void* ctx, const float* x, const float* w, int32_t n, int32_t dim, float eps, float* y);
void gated_rmsnorm(void* ctx, const float* x, const float* z, const float* w, int32_t n, int32_t dim, float eps, float* y);
void add_rmsnorm(void* ctx, float* h, const float* y, const float* w, int32_t n, int32_t dim, float eps, float* x);
// Launches the matmuls deferred by `matmul` (several weights on one activation block go out as one kernel).
// Every other slot calls it first, so the queue order is the call order.
void flush(Ctx* c);
// cuda_gdn.cu: the waiting recurrence launched alone / fused with the gated RMSNorm that follows it (false when
// the norm is not over its output: the caller flushes and runs the norm)
void gdn_flush(Ctx* c);
bool gdn_norm_with_pending(Ctx* c, const float* x, const float* z, const float* w, int32_t n, int32_t dim, float eps,
                           float* y);
// gdn_gates as the epilogue of the pending b/a GEMVs (launched now); false when what is pending is not exactly
// those two (the caller flushes and launches the gates kernel)
bool gates_with_pending(Ctx* c, float* b, float* a, const float* A_log, const float* dt_bias, int32_t n, int32_t nv);
// CudaOptions::probe_twice / probe_skip: the slots they name run twice or not at all (measurement only,
// cuda_probe.cu)
void apply_probes(::splash_backend_i& t, Ctx& c);
// The int8x2 planes a producer kernel (norms, SwiGLU) writes next to its fp32 output `y` of `total` values,
// or an empty QuantOut when it should not (total % 32, precise mode); `produced` records them after launch.
QuantOut quant_out(Ctx* c, int64_t total);
void produced(Ctx* c, const float* y, int64_t total);
// Loads a package's kernel image (null on success, else why not; nothing is kept on failure; image null and
// bytes 0: drops the loaded one) / drops it.
const char* spec_load(void* ctx, const void* image, size_t bytes, int abi);
int spec_shapes(void* ctx);
void spec_unload(Ctx* c);
void cublas_open(Ctx* c);
void cublas_close(Ctx* c);

}  // namespace splash::cuda
