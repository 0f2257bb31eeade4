// The CUDA backend (sm_90): fills splash_backend_i with device kernels. Buffers are device memory; every
// slot is queued on one stream in call order; copy_to_host and synchronize wait for it. Built as its own
// module (libsplash_cuda.so, static cudart) and opened by backend/loader.cpp when a GPU is present.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

#include "backend/cuda/cuda_common.cuh"

namespace splash::cuda {

void* scratch(Ctx* c, Scratch s, size_t bytes) {
  if (bytes > c->scratch_cap[s]) {
    if (c->scratch[s]) cudaFree(c->scratch[s]);  // cudaFree waits for queued work that may still use it
    c->scratch[s] = nullptr;
    c->scratch_cap[s] = 0;
    const size_t n = bytes + bytes / 2 + 256;
    if (!SPLASH_CK(c, cudaMalloc(&c->scratch[s], n))) return nullptr;
    c->scratch_cap[s] = n;
  }
  return c->scratch[s];
}

namespace {

Ctx* C(void* p) { return static_cast<Ctx*>(p); }

void* buffer_alloc(void* ctx, size_t bytes) {
  Ctx* c = C(ctx);
  void* p = nullptr;
  if (cudaMalloc(&p, bytes == 0 ? 64 : bytes) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  SPLASH_CK(c, cudaMemsetAsync(p, 0, bytes == 0 ? 64 : bytes, c->stream));
  return p;
}
void buffer_free(void* ctx, void* p) {
  if (p) cudaFree(p);
}
void synchronize(void* ctx) { SPLASH_CK(C(ctx), cudaStreamSynchronize(C(ctx)->stream)); }

void copy_to_device(void* ctx, void* dst, const void* src, size_t bytes) {
  Ctx* c = C(ctx);
  SPLASH_CK(c, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->stream));
  SPLASH_CK(c, cudaStreamSynchronize(c->stream));  // the source is the caller's, valid only during the call
}
void copy_to_host(void* ctx, void* dst, const void* src, size_t bytes) {
  Ctx* c = C(ctx);
  SPLASH_CK(c, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->stream));
  SPLASH_CK(c, cudaStreamSynchronize(c->stream));
}
void copy2d(void* ctx, void* dst, size_t dp, const void* src, size_t sp, size_t width, size_t height) {
  Ctx* c = C(ctx);
  if (width == 0 || height == 0) return;
  if (height == 1) SPLASH_CK(c, cudaMemcpyAsync(dst, src, width, cudaMemcpyDeviceToDevice, c->stream));
  else SPLASH_CK(c, cudaMemcpy2DAsync(dst, dp, src, sp, width, height, cudaMemcpyDeviceToDevice, c->stream));
}
void memset_zero(void* ctx, void* dst, size_t bytes) { SPLASH_CK(C(ctx), cudaMemsetAsync(dst, 0, bytes, C(ctx)->stream)); }

// ---- embedding rows

__global__ void k_dequant_rows(splash_weight w, const int32_t* rows, int32_t n, float* out) {
  const int64_t C = w.cols;
  const int32_t i = blockIdx.y;
  const int64_t r = rows[i];
  float* o = out + int64_t(i) * C;
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < C; c += int64_t(gridDim.x) * blockDim.x) {
    float v;
    if (w.dtype == SPLASH_F32) v = static_cast<const float*>(w.data)[r * C + c];
    else if (w.dtype == SPLASH_BF16) v = bf16f(static_cast<const uint16_t*>(w.data)[r * C + c]);
    else {
      const int bits = w.dtype == SPLASH_Q4 ? 4 : 8, per = 32 / bits;
      const uint32_t* words = static_cast<const uint32_t*>(w.data) + r * (C * bits / 32);
      const uint32_t q = (words[c / per] >> (bits * (c % per))) & ((1u << bits) - 1);
      const int64_t g = r * (C / 64) + c / 64;
      v = bf16f(w.scales[g]) * float(q) + bf16f(w.biases[g]);
    }
    o[c] = v;
  }
}

void embed(void* ctx, const splash_weight* w, const int32_t* tokens, int32_t n, float* out) {
  Ctx* c = C(ctx);
  if (n <= 0) return;
  auto* d = static_cast<int32_t*>(scratch(c, kTok, size_t(n) * 4));
  if (!d) return;
  SPLASH_CK(c, cudaMemcpyAsync(d, tokens, size_t(n) * 4, cudaMemcpyHostToDevice, c->stream));
  SPLASH_CK(c, cudaStreamSynchronize(c->stream));  // tokens is the caller's host memory
  dim3 grid(unsigned(std::min<int64_t>(8, (w->cols + 255) / 256)), unsigned(n));
  k_dequant_rows<<<grid, 256, 0, c->stream>>>(*w, d, n, out);
  SPLASH_LAUNCHED(c, "dequant_rows");
}
void dequant_row(void* ctx, const splash_weight* w, int64_t row, float* out) {
  const int32_t r = int32_t(row);
  embed(ctx, w, &r, 1, out);
}

// ---- norms

__global__ void k_rmsnorm(const float* x, const float* w, int32_t dim, float eps, float* y, const float* z) {
  __shared__ float sh[32];
  const float* xi = x + int64_t(blockIdx.x) * dim;
  float* yi = y + int64_t(blockIdx.x) * dim;
  float ss = 0.f;
  for (int c = threadIdx.x; c < dim; c += blockDim.x) ss += xi[c] * xi[c];
  ss = block_sum(ss, sh);
  const float inv = 1.f / sqrtf(ss / float(dim) + eps);
  if (z) {
    const float* zi = z + int64_t(blockIdx.x) * dim;
    for (int c = threadIdx.x; c < dim; c += blockDim.x) yi[c] = xi[c] * inv * w[c] * siluf_(zi[c]);
  } else {
    for (int c = threadIdx.x; c < dim; c += blockDim.x) yi[c] = xi[c] * inv * w[c];
  }
}
int norm_threads(int dim) { return dim >= 1024 ? 512 : dim >= 256 ? 256 : dim >= 128 ? 128 : 64; }

void rmsnorm(void* ctx, const float* x, const float* w, int32_t n, int32_t dim, float eps, float* y) {
  if (n <= 0) return;
  k_rmsnorm<<<n, norm_threads(dim), 0, C(ctx)->stream>>>(x, w, dim, eps, y, nullptr);
  SPLASH_LAUNCHED(C(ctx), "rmsnorm");
}
void gated_rmsnorm(void* ctx, const float* x, const float* z, const float* w, int32_t n, int32_t dim, float eps, float* y) {
  if (n <= 0) return;
  k_rmsnorm<<<n, norm_threads(dim), 0, C(ctx)->stream>>>(x, w, dim, eps, y, z);
  SPLASH_LAUNCHED(C(ctx), "gated_rmsnorm");
}

// ---- RoPE: one thread per (token, head, rotated pair)

struct RopeArgs {
  int32_t n_heads, half, rd, start, sec1, sec2, has_sec;
  int64_t row_stride, head_stride;
  float theta;
};

__global__ void k_rope(float* x, int32_t nt, RopeArgs a) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  const int64_t per_tok = int64_t(a.n_heads) * a.half;
  if (i >= nt * per_tok) return;
  const int32_t t = int32_t(i / per_tok), rem = int32_t(i % per_tok), h = rem / a.half, j = rem % a.half;
  // text positions: the three M-RoPE axes coincide, so the section choice does not change the angle
  const int32_t p = a.start + t;
  const float inv_freq = float(1.0 / pow(double(a.theta), double(2 * j) / double(a.rd)));
  const float ang = float(p) * inv_freq;
  float sn, cs;
  sincosf(ang, &sn, &cs);
  float* v = x + t * a.row_stride + h * a.head_stride;
  const float x0 = v[j], x1 = v[j + a.half];
  v[j] = x0 * cs - x1 * sn;
  v[j + a.half] = x1 * cs + x0 * sn;
}

void rope_seq(void* ctx, float* x, int32_t nt, int64_t rs, int32_t nh, int64_t hs, int32_t hd, int32_t rd, int32_t start,
              const int32_t* sec, float theta) {
  if (nt <= 0) return;
  RopeArgs a{nh, rd / 2, rd, start, sec ? sec[1] : 0, sec ? sec[2] : 0, sec ? 1 : 0, rs, hs, theta};
  const int64_t n = int64_t(nt) * nh * (rd / 2);
  k_rope<<<blocks_for(n, 256), 256, 0, C(ctx)->stream>>>(x, nt, a);
  SPLASH_LAUNCHED(C(ctx), "rope");
}

// Single-token form with distinct (T,H,W) positions.
__global__ void k_rope3(float* x, int32_t nh, int64_t hs, int32_t rd, int32_t p0, int32_t p1, int32_t p2, int32_t s1,
                        int32_t s2, int32_t has_sec, float theta) {
  const int32_t half = rd / 2;
  const int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= nh * half) return;
  const int32_t h = i / half, j = i % half;
  int32_t p = p0;
  if (has_sec) {
    if (j % 3 == 1 && j < 3 * s1) p = p1;
    else if (j % 3 == 2 && j < 3 * s2) p = p2;
  }
  const float inv_freq = float(1.0 / pow(double(theta), double(2 * j) / double(rd)));
  float sn, cs;
  sincosf(float(p) * inv_freq, &sn, &cs);
  float* v = x + h * hs;
  const float x0 = v[j], x1 = v[j + half];
  v[j] = x0 * cs - x1 * sn;
  v[j + half] = x1 * cs + x0 * sn;
}

void rope(void* ctx, float* x, int32_t nh, int64_t hs, int32_t hd, int32_t rd, const int32_t pos[3], const int32_t* sec,
          float theta) {
  const int n = nh * (rd / 2);
  k_rope3<<<blocks_for(n, 128), 128, 0, C(ctx)->stream>>>(x, nh, hs, rd, pos[0], pos[1], pos[2], sec ? sec[1] : 0,
                                                          sec ? sec[2] : 0, sec ? 1 : 0, theta);
  SPLASH_LAUNCHED(C(ctx), "rope");
}

// ---- elementwise

__global__ void k_add(float* y, const float* x, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) y[i] += x[i];
}
void add(void* ctx, float* y, const float* x, int64_t n) {
  if (n <= 0) return;
  k_add<<<std::min<unsigned>(blocks_for(n, 256), 4096), 256, 0, C(ctx)->stream>>>(y, x, n);
  SPLASH_LAUNCHED(C(ctx), "add");
}

__global__ void k_swiglu(const float* g, const float* u, int64_t n, float* out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = siluf_(g[i]) * u[i];
}

__global__ void k_gdn_gates(float* b, float* a, const float* A_log, const float* dt_bias, int64_t n, int32_t nv) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const int h = int(i % nv);
  b[i] = sigmoidf_(b[i]);
  const float s = a[i] + dt_bias[h];
  const float sp = s > 20.f ? s : log1pf(expf(s));
  a[i] = -expf(A_log[h]) * sp;
}
void gdn_gates(void* ctx, float* b, float* a, const float* A_log, const float* dt_bias, int32_t n, int32_t nv) {
  const int64_t m = int64_t(n) * nv;
  if (m <= 0) return;
  k_gdn_gates<<<blocks_for(m, 256), 256, 0, C(ctx)->stream>>>(b, a, A_log, dt_bias, m, nv);
  SPLASH_LAUNCHED(C(ctx), "gdn_gates");
}

__global__ void k_sigmoid_gate(float* x, int64_t xp, const float* g, int64_t gp, int32_t rows, int32_t width) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= int64_t(rows) * width) return;
  const int64_t r = i / width, c = i % width;
  x[r * xp + c] *= sigmoidf_(g[r * gp + c]);
}
void sigmoid_gate(void* ctx, float* x, int64_t xp, const float* g, int64_t gp, int32_t rows, int32_t width) {
  const int64_t n = int64_t(rows) * width;
  if (n <= 0) return;
  k_sigmoid_gate<<<blocks_for(n, 256), 256, 0, C(ctx)->stream>>>(x, xp, g, gp, rows, width);
  SPLASH_LAUNCHED(C(ctx), "sigmoid_gate");
}

__global__ void k_gated_add(float* y, const float* x, const float* gate, int32_t n, int32_t dim) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= int64_t(n) * dim) return;
  y[i] += sigmoidf_(gate[i / dim]) * x[i];
}
void gated_add(void* ctx, float* y, const float* x, const float* gate, int32_t n, int32_t dim) {
  const int64_t m = int64_t(n) * dim;
  if (m <= 0) return;
  k_gated_add<<<blocks_for(m, 256), 256, 0, C(ctx)->stream>>>(y, x, gate, n, dim);
  SPLASH_LAUNCHED(C(ctx), "gated_add");
}

const char* last_error(void* ctx) {
  Ctx* c = C(ctx);
  thread_local std::string msg;
  msg = c->error;
  c->error.clear();
  return msg.empty() ? nullptr : msg.c_str();
}
void set_cublas(void* ctx, int on) { C(ctx)->use_cublas = on != 0; }
void set_precise(void* ctx, int on) { C(ctx)->precise = on != 0; }
void set_gemv_rows(void* ctx, int rows) { C(ctx)->gemv_rows = rows; }
void set_gemv_unroll(void* ctx, int u) { C(ctx)->gemv_unroll = u; }

void* get_proc_address(void*, const char* name) {
  if (std::strcmp(name, "splash_last_error") == 0) return reinterpret_cast<void*>(&last_error);
  if (std::strcmp(name, "splash_cuda_set_cublas") == 0) return reinterpret_cast<void*>(&set_cublas);
  if (std::strcmp(name, "splash_cuda_set_precise") == 0) return reinterpret_cast<void*>(&set_precise);
  if (std::strcmp(name, "splash_cuda_set_gemv_rows") == 0) return reinterpret_cast<void*>(&set_gemv_rows);
  if (std::strcmp(name, "splash_cuda_set_gemv_unroll") == 0) return reinterpret_cast<void*>(&set_gemv_unroll);
  return nullptr;
}

const splash_backend_i kIface = {
    SPLASH_BACKEND_ABI, "cuda", "sm_90",
    buffer_alloc, buffer_free, synchronize,
    matmul, dequant_row,
    rmsnorm, gated_rmsnorm, rope, swiglu,
    attention, conv1d_silu, gdn_recurrent, nullptr /* gdn_chunked: the recurrent kernel takes T tokens */,
    nullptr, nullptr, get_proc_address,
    0 /* host_memory */, copy_to_device, copy_to_host, copy2d, memset_zero, embed, add, gdn_gates, sigmoid_gate,
    gated_add, rope_seq, moe,
    layer_norm, add_bias, gelu, rope_table, seg_attention,
};

struct CudaBackend {
  splash_backend b;
  splash_backend_i iface;
  Ctx ctx;
};

}  // namespace

void swiglu(void* ctx, const float* g, const float* u, int64_t n, float* out) {
  if (n <= 0) return;
  k_swiglu<<<std::min<unsigned>(blocks_for(n, 256), 4096), 256, 0, C(ctx)->stream>>>(g, u, n, out);
  SPLASH_LAUNCHED(C(ctx), "swiglu");
}

}  // namespace splash::cuda

extern "C" __attribute__((visibility("default"))) splash_backend* splash_backend_cuda_create(int device) {
  using namespace splash::cuda;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count <= device || device < 0) {
    cudaGetLastError();
    return nullptr;
  }
  cudaDeviceProp prop{};
  if (cudaSetDevice(device) != cudaSuccess || cudaGetDeviceProperties(&prop, device) != cudaSuccess || prop.major < 9) {
    cudaGetLastError();
    return nullptr;  // the kernels are built for sm_90
  }
  auto* cb = new (std::nothrow) CudaBackend();
  if (!cb) return nullptr;
  cb->iface = kIface;
  cb->ctx.device = device;
  cb->ctx.sms = prop.multiProcessorCount;
  if (cudaStreamCreateWithFlags(&cb->ctx.stream, cudaStreamNonBlocking) != cudaSuccess) {
    delete cb;
    return nullptr;
  }
  cublas_open(&cb->ctx);
  if (const char* r = getenv("SPLASH_GEMV_ROWS")) cb->ctx.gemv_rows = atoi(r);
  if (const char* u = getenv("SPLASH_GEMV_UNROLL")) cb->ctx.gemv_unroll = atoi(u);
  cb->b.iface = &cb->iface;
  cb->b.ctx = &cb->ctx;
  return &cb->b;
}

extern "C" __attribute__((visibility("default"))) void splash_backend_cuda_free(splash_backend* b) {
  using namespace splash::cuda;
  if (!b) return;
  auto* cb = reinterpret_cast<CudaBackend*>(b);
  cudaStreamSynchronize(cb->ctx.stream);
  cublas_close(&cb->ctx);
  for (void* p : cb->ctx.scratch)
    if (p) cudaFree(p);
  cudaStreamDestroy(cb->ctx.stream);
  delete cb;
}
