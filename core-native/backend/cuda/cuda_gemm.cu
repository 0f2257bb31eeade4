// Prefill and verification matmuls (> 8 tokens; > 32 for q4/q8 weights) on the tensor cores: weights dequantised to bf16 (load8,
// cuda_common.cuh) and multiplied by cuBLAS when libcublas loads (opened with dlopen: the module keeps no
// link-time dependency on it), else by the WMMA kernel below; fp32 accumulation. The EXACT matrices (and f32
// weights, precise mode) go through an fp32 cuBLAS GEMM.
#include <dlfcn.h>
#include <algorithm>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/wmma_tile.cuh"

namespace splash::cuda {
namespace {

__global__ void k_to_f32_w(splash_weight w, float* out) {
  const int64_t n8 = w.rows * w.cols / 8;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n8; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / (w.cols / 8), c = (i % (w.cols / 8)) * 8;
    float v[8];
    load8(w, r, c, v);
#pragma unroll
    for (int k = 0; k < 8; ++k) out[r * w.cols + c + k] = v[k];
  }
}

// ---- prefill: bf16 operands on the tensor cores

__global__ void k_to_bf16_w(splash_weight w, __nv_bfloat16* out) {
  const int64_t n8 = w.rows * w.cols / 8;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n8; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / (w.cols / 8), c = (i % (w.cols / 8)) * 8;
    float v[8];
    load8(w, r, c, v);
    __align__(16) __nv_bfloat16 o[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) o[k] = __float2bfloat16(v[k]);
    *reinterpret_cast<uint4*>(out + r * w.cols + c) = *reinterpret_cast<const uint4*>(o);
  }
}

__global__ void k_to_bf16_x(const float* x, int64_t n, __nv_bfloat16* out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = __float2bfloat16(x[i]);
}

// WMMA GEMM (when cuBLAS is absent): y[t, r] = Σ_k A[t, k]·B[r, k]; 64×64 tile, 4 warps of 32×32.
constexpr int BM = 64, BN = 64, BK = 32, LDS = BK + 8;
__global__ void __launch_bounds__(128) k_gemm_wmma(const __nv_bfloat16* A, const __nv_bfloat16* B, int M, int N, int K,
                                                   float* y, int64_t ys) {
  __shared__ __align__(32) __nv_bfloat16 sa[BM * LDS];
  __shared__ __align__(32) __nv_bfloat16 sb[BN * LDS];
  __shared__ __align__(32) float sc[4][16 * 16];
  WmmaTile tile(threadIdx.x / 32);
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  for (int k0 = 0; k0 < K; k0 += BK) {
    for (int i = threadIdx.x; i < BM * BK / 8; i += blockDim.x) {
      const int row = i / (BK / 8), col = (i % (BK / 8)) * 8;
      uint4 va = make_uint4(0, 0, 0, 0), vb = make_uint4(0, 0, 0, 0);
      if (m0 + row < M && k0 + col < K) va = *reinterpret_cast<const uint4*>(A + int64_t(m0 + row) * K + k0 + col);
      if (n0 + row < N && k0 + col < K) vb = *reinterpret_cast<const uint4*>(B + int64_t(n0 + row) * K + k0 + col);
      *reinterpret_cast<uint4*>(&sa[row * LDS + col]) = va;
      *reinterpret_cast<uint4*>(&sb[row * LDS + col]) = vb;
    }
    __syncthreads();
    tile.mma<BK, LDS>(sa, sb);
    __syncthreads();
  }
  tile.store(sc[threadIdx.x / 32], threadIdx.x % 32, [&](int mi, int ni, float v) {
    const int m = m0 + mi, n = n0 + ni;
    if (m < M && n < N) y[int64_t(m) * ys + n] = v;
  });
}

}  // namespace

void to_bf16(Ctx* c, const float* x, int64_t n, __nv_bfloat16* out) {
  k_to_bf16_x<<<std::min<unsigned>(blocks_for(n, 256), unsigned(c->sms) * 16), 256, 0, strm(c)>>>(x, n, out);
  SPLASH_LAUNCHED(c, "to_bf16_x");
}

void gemm(Ctx* c, const splash_weight* w, const float* x, int32_t nt, float* y, int64_t ys) {
  const int64_t R = w->rows, K = w->cols;
  const __nv_bfloat16* B;
  if (w->dtype == SPLASH_BF16) {
    B = static_cast<const __nv_bfloat16*>(w->data);
  } else {
    auto* wb = static_cast<__nv_bfloat16*>(scratch(c, kWbf, size_t(R) * K * 2));
    if (!wb) return;
    k_to_bf16_w<<<std::min<unsigned>(blocks_for(R * K / 8, 256), unsigned(c->sms) * 16), 256, 0, strm(c)>>>(*w, wb);
    SPLASH_LAUNCHED(c, "to_bf16_w");
    B = wb;
  }
  auto* xb = static_cast<__nv_bfloat16*>(scratch(c, kXbf, size_t(nt) * K * 2));
  if (!xb) return;
  to_bf16(c, x, int64_t(nt) * K, xb);
  if (c->gemm_ex && c->opt.cublas) {
    const float one = 1.f, zero = 0.f;
    // column-major view: C[R×nt] (ld ys) = op(B)ᵀ… W is K×R column-major (ld K), transposed; x is K×nt (ld K)
    const int st = c->gemm_ex(c->cublas, /*T*/ 1, /*N*/ 0, int(R), int(nt), int(K), &one, B, /*bf16*/ 14, int(K), xb, 14,
                              int(K), &zero, y, /*f32*/ 0, int(ys), /*COMPUTE_32F*/ 68, /*DEFAULT*/ -1);
    if (st != 0 && c->error.empty()) c->error = "cublasGemmEx failed with status " + std::to_string(st);
    return;
  }
  dim3 grid(blocks_for(R, BN), blocks_for(nt, BM));
  k_gemm_wmma<<<grid, 128, 0, strm(c)>>>(xb, B, nt, int(R), int(K), y, ys);
  SPLASH_LAUNCHED(c, "gemm_wmma");
}

// fp32 GEMM through cuBLAS (exact weights, f32 weights and precise mode with many tokens); false without it.
bool sgemm(Ctx* c, const splash_weight* w, const float* x, int32_t nt, float* y, int64_t ys) {
  if (!c->gemm_ex || !c->opt.cublas || w->cols % 8 != 0) return false;
  const int64_t R = w->rows, K = w->cols;
  const float* B = static_cast<const float*>(w->data);
  if (w->dtype != SPLASH_F32) {
    auto* wf = static_cast<float*>(scratch(c, kWf, size_t(R) * K * 4));
    if (!wf) return true;
    k_to_f32_w<<<std::min<unsigned>(blocks_for(R * K / 8, 256), unsigned(c->sms) * 16), 256, 0, strm(c)>>>(*w, wf);
    SPLASH_LAUNCHED(c, "to_f32_w");
    B = wf;
  }
  const float one = 1.f, zero = 0.f;
  const int st = c->gemm_ex(c->cublas, 1, 0, int(R), int(nt), int(K), &one, B, /*f32*/ 0, int(K), x, 0, int(K), &zero, y, 0,
                            int(ys), /*COMPUTE_32F, no TF32*/ 68, -1);
  if (st != 0 && c->error.empty()) c->error = "cublasGemmEx (fp32) failed with status " + std::to_string(st);
  return true;
}

// libcublas through dlopen: the module keeps no link-time dependency on it.
void cublas_open(Ctx* c) {
  if (!c->opt.cublas) return;  // $SPLASH_CUBLAS=0: not even loaded
  for (const char* name : {"libcublas.so.13", "libcublas.so.12", "libcublas.so"}) {
    c->cublas_lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (c->cublas_lib) break;
  }
  if (!c->cublas_lib) return;
  using create_fn = int (*)(void**);
  using stream_fn = int (*)(void*, cudaStream_t);
  auto create = reinterpret_cast<create_fn>(dlsym(c->cublas_lib, "cublasCreate_v2"));
  auto set_stream = reinterpret_cast<stream_fn>(dlsym(c->cublas_lib, "cublasSetStream_v2"));
  auto gemm = dlsym(c->cublas_lib, "cublasGemmEx");
  if (!create || !set_stream || !gemm || create(&c->cublas) != 0 || set_stream(c->cublas, strm(c)) != 0) {
    dlclose(c->cublas_lib);
    c->cublas_lib = nullptr;
    c->cublas = nullptr;
    return;
  }
  c->gemm_ex = reinterpret_cast<decltype(c->gemm_ex)>(gemm);
}

void cublas_close(Ctx* c) {
  if (!c->cublas_lib) return;
  using destroy_fn = int (*)(void*);
  if (auto destroy = reinterpret_cast<destroy_fn>(dlsym(c->cublas_lib, "cublasDestroy_v2"))) destroy(c->cublas);
  dlclose(c->cublas_lib);
  c->cublas_lib = nullptr;
}

}  // namespace splash::cuda
