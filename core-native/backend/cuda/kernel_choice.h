// Which CUDA kernel a matmul of a given shape runs: a pure function of the weight's shape, the token count, the
// device and the backend's options, with no CUDA in it, so the CPU test binary checks it on any machine
// (`splash_kernel_test kernel-choice`, test/core-native/kernel-choice.test.ts). cuda_matmul.cu calls it for every
// matmul and launches what it returns; docs/native-core.md explains the rules.
#pragma once
#include <cstdint>

#include "backend/cuda/cuda_options.h"
#include "splash/backend.h"

namespace splash::cuda {

// Decode (≤ 8 tokens, q4/q8 up to 32): memory-bound GEMVs; q4/q8 weights meet activations quantised to two int8
// levels per 32 values. q4/q8 matmuls of up to kGemvSplitMax tokens stay GEMVs, in launches of ≤ kMaxGemvTokens:
// each reads the weights once, where the GEMM path dequantises every weight to bf16 first (on the 27B shape a
// 9-token step took 74 ms that way against ~9 ms for a one-token step). The rows are the single-token GEMV's
// result whatever the chunking.
constexpr int kMaxGemvTokens = 8;
constexpr int kGemvSplitMax = 32;

enum class MatmulKernel : int {
  kQgemm,       // q4 weights × bf16 activations on the tensor cores, fused dequantisation (cuda_qgemm.cu)
  kGemvQ4,      // int8x2 GEMV of q4 weights, launches of ≤ 8 tokens in a form of choose_gemv_form (gemv_q.cuh)
  kGemvQ8,      // the same for q8 weights
  kGemvRowF,    // fp32 activations, a block per output row: weights with few rows (GDN b/a, routers, gates)
  kGemmBf16,    // many tokens: weights and activations rounded to bf16, tensor-core GEMM (cuBLAS, else WMMA)
  kSgemm,       // many tokens in fp32 through cuBLAS (exact or f32 weights, precise mode)
  kGemvF,       // fp32 activations, a warp per output row, launches of ≤ 8 tokens
  kGemvScalar,  // a thread per output (f32/bf16 weights whose columns are not a multiple of 8)
};

// The per-launch form of a q4/q8 GEMV launch of ≤ 8 tokens.
enum class GemvForm : int {
  kMma,     // the integer tensor cores (cuda_gemv_mma.cu)
  kStream,  // weights streamed through shared memory, few-row GEMVs riding along (cuda_gemv_stream.cu)
  kDp4a,    // dp4a, the package's specialised kernel for the columns when it is loaded (gemv_q.cuh, cuda_spec.cu)
};

struct MatmulShape {
  int32_t dtype = SPLASH_F32;  // splash_dtype
  int64_t rows = 0, cols = 0;
  int32_t tokens = 0;
  bool exact = false;          // SPLASH_WEIGHT_EXACT: fp32 activations only
  bool qgemm_aligned = false;  // data 16-byte, scales and biases 4-byte aligned (the fused q4 GEMM's loads)
};

struct DeviceProps {
  int sms = 0;          // streaming multiprocessors
  bool cublas = false;  // cuBLAS loaded
};

struct MatmulChoice {
  MatmulKernel kernel = MatmulKernel::kGemvScalar;
  // the matmul waits for the next ones on the same activations and goes out in one launch with them (q/k/v,
  // gate/up, GDN b/a: cuda_matmul.cu's pending group)
  bool groups = false;
  int32_t launch_tokens = 0;  // tokens per launch (the call's tokens, or kMaxGemvTokens for chunked GEMVs)
};

inline MatmulShape matmul_shape(const splash_weight& w, int32_t tokens) {
  MatmulShape s;
  s.dtype = w.dtype, s.rows = w.rows, s.cols = w.cols, s.tokens = tokens;
  s.exact = (w.flags & SPLASH_WEIGHT_EXACT) != 0;
  s.qgemm_aligned = reinterpret_cast<uintptr_t>(w.data) % 16 == 0 && reinterpret_cast<uintptr_t>(w.scales) % 4 == 0 &&
                    reinterpret_cast<uintptr_t>(w.biases) % 4 == 0;
  return s;
}

// Whether the fused q4 GEMM takes this shape.
inline bool qgemm_takes(const MatmulShape& s, const CudaOptions& o) {
  return s.tokens >= o.qgemm_min && s.tokens <= o.qgemm_max && !o.precise && s.dtype == SPLASH_Q4 && !s.exact &&
         s.cols % 128 == 0 && s.rows > 0 && s.qgemm_aligned;
}

// The kinds that wait for their group (cuda_matmul.cu): the fused q4 GEMM, the int8x2 GEMVs and the few-row GEMV,
// for shapes of at most kMaxGemvTokens (q4/q8: kGemvSplitMax) tokens. None when it does not group.
inline bool grouping_kernel(const MatmulShape& s, const DeviceProps& d, const CudaOptions& o, MatmulKernel& k) {
  if (qgemm_takes(s, o)) return k = MatmulKernel::kQgemm, true;
  if (s.tokens > kGemvSplitMax) return false;
  const bool quant = s.dtype == SPLASH_Q4 || s.dtype == SPLASH_Q8;
  if (quant && !s.exact && s.cols % 64 == 0 && !o.precise)
    return k = s.dtype == SPLASH_Q4 ? MatmulKernel::kGemvQ4 : MatmulKernel::kGemvQ8, true;
  if (s.tokens > kMaxGemvTokens) return false;
  if (s.cols % 8 == 0 && s.rows < 4 * int64_t(d.sms)) return k = MatmulKernel::kGemvRowF, true;
  return false;
}

inline MatmulChoice choose_matmul(const MatmulShape& s, const DeviceProps& d, const CudaOptions& o) {
  MatmulChoice c;
  if (grouping_kernel(s, d, o, c.kernel)) {
    c.groups = true;
    c.launch_tokens = s.tokens;
    return c;
  }
  const bool many = s.tokens > kMaxGemvTokens;
  if (many && s.cols % 8 == 0 && s.dtype != SPLASH_F32 && !s.exact && !o.precise) {
    c.kernel = MatmulKernel::kGemmBf16, c.launch_tokens = s.tokens;
    return c;
  }
  if (many && d.cublas && o.cublas && s.cols % 8 == 0) {
    c.kernel = MatmulKernel::kSgemm, c.launch_tokens = s.tokens;
    return c;
  }
  // launches of ≤ 8 tokens, each of the kind an ≤ 8-token shape takes
  MatmulShape part = s;
  part.tokens = many ? kMaxGemvTokens : s.tokens;
  c.launch_tokens = part.tokens;
  if (!grouping_kernel(part, d, o, c.kernel))
    c.kernel = s.cols % 8 == 0 ? MatmulKernel::kGemvF : MatmulKernel::kGemvScalar;
  return c;
}

// The form of one q4/q8 GEMV launch of `tokens` (≤ 8) tokens; stream_ok: every weight of the launch has columns a
// multiple of 1024 and 16-byte aligned data, scales and biases (the streaming GEMV's loads). The dp4a schedules
// other than the default (gemv_rows, gemv_unroll: benchmarks) run on dp4a only.
inline GemvForm choose_gemv_form(int32_t tokens, bool stream_ok, const CudaOptions& o) {
  if (o.gemv_mma > 0 && tokens >= o.gemv_mma && tokens <= kMaxGemvTokens) return GemvForm::kMma;
  const bool default_schedule = o.gemv_rows == 4 && !(tokens == 1 && o.gemv_unroll == 4);
  if (tokens >= 1 && tokens <= o.gemv_stream && default_schedule && stream_ok) return GemvForm::kStream;
  return GemvForm::kDp4a;
}

inline const char* kernel_name(MatmulKernel k) {
  switch (k) {
    case MatmulKernel::kQgemm: return "qgemm";
    case MatmulKernel::kGemvQ4: return "gemv_q4";
    case MatmulKernel::kGemvQ8: return "gemv_q8";
    case MatmulKernel::kGemvRowF: return "gemv_row_f";
    case MatmulKernel::kGemmBf16: return "gemm_bf16";
    case MatmulKernel::kSgemm: return "sgemm";
    case MatmulKernel::kGemvF: return "gemv_f";
    case MatmulKernel::kGemvScalar: return "gemv_scalar";
  }
  return "?";
}
inline const char* form_name(GemvForm f) {
  return f == GemvForm::kMma ? "mma" : f == GemvForm::kStream ? "stream" : "dp4a";
}

}  // namespace splash::cuda
