// The CUDA backend (sm_90): fills splash_backend_i with device kernels. Buffers are device memory; every
// slot is queued on one stream in call order; copy_to_host and synchronize wait for it. Built as its own
// module (libsplash_cuda.so, static cudart) and opened by backend/loader.cpp when a GPU is present.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

#include "backend/cuda/cuda_common.cuh"

namespace splash::cuda {

thread_local cudaStream_t tl_stream = nullptr;

void* device_alloc(Ctx* c, size_t bytes) {
  std::lock_guard<std::mutex> lock(c->mem_mu);
  if (c->limit && c->used + bytes > c->limit) return nullptr;
  void* p = nullptr;
  if (cudaMalloc(&p, bytes) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  c->sizes[p] = bytes;
  c->used += bytes;
  return p;
}
void device_free(Ctx* c, void* p) {
  if (!p) return;
  std::lock_guard<std::mutex> lock(c->mem_mu);
  if (auto it = c->sizes.find(p); it != c->sizes.end()) c->used -= it->second, c->sizes.erase(it);
  cudaFree(p);
}

void* scratch(Ctx* c, Scratch s, size_t bytes) {
  if (bytes > c->scratch_cap[s]) {
    if (c->scratch[s] && c->capturing) {
      c->retired.push_back(c->scratch[s]);  // the recording (and graphs before it) still use it
    } else if (c->scratch[s]) {
      device_free(c, c->scratch[s]);  // cudaFree waits for queued work that may still use it
      for (void* p : c->retired) device_free(c, p);
      c->retired.clear();
      ++c->epoch;  // recorded graphs may use what was just freed
    }
    c->scratch[s] = nullptr;
    c->scratch_cap[s] = 0;
    const size_t n = bytes + bytes / 2 + 256;
    c->scratch[s] = device_alloc(c, n);
    if (!c->scratch[s]) {
      if (c->error.empty())
        c->error = "cannot allocate " + std::to_string(n) + " bytes of device scratch" +
                   (c->limit ? " within the memory limit of " + std::to_string(c->limit) + " bytes" : std::string());
      return nullptr;
    }
    c->scratch_cap[s] = n;
  }
  return c->scratch[s];
}

namespace {

Ctx* C(void* p) { return static_cast<Ctx*>(p); }

void* buffer_alloc(void* ctx, size_t bytes) {
  Ctx* c = C(ctx);
  void* p = device_alloc(c, bytes == 0 ? 64 : bytes);
  if (!p) return nullptr;
  SPLASH_CK(c, cudaMemsetAsync(p, 0, bytes == 0 ? 64 : bytes, strm(c)));
  return p;
}
void buffer_free(void* ctx, void* p) { device_free(C(ctx), p); }
void synchronize(void* ctx) {
  if (!spoils_capture(C(ctx))) SPLASH_CK(C(ctx), cudaStreamSynchronize(strm(C(ctx))));
}

void copy_to_device(void* ctx, void* dst, const void* src, size_t bytes) {
  Ctx* c = C(ctx);
  if (spoils_capture(c)) return;
  SPLASH_CK(c, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, strm(c)));
  SPLASH_CK(c, cudaStreamSynchronize(strm(c)));  // the source is the caller's, valid only during the call
}
void copy_to_host(void* ctx, void* dst, const void* src, size_t bytes) {
  Ctx* c = C(ctx);
  if (spoils_capture(c)) return;
  SPLASH_CK(c, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, strm(c)));
  SPLASH_CK(c, cudaStreamSynchronize(strm(c)));
}
void copy2d(void* ctx, void* dst, size_t dp, const void* src, size_t sp, size_t width, size_t height) {
  Ctx* c = C(ctx);
  if (width == 0 || height == 0) return;
  if (height == 1) SPLASH_CK(c, cudaMemcpyAsync(dst, src, width, cudaMemcpyDeviceToDevice, strm(c)));
  else SPLASH_CK(c, cudaMemcpy2DAsync(dst, dp, src, sp, width, height, cudaMemcpyDeviceToDevice, strm(c)));
}
void memset_zero(void* ctx, void* dst, size_t bytes) { SPLASH_CK(C(ctx), cudaMemsetAsync(dst, 0, bytes, strm(C(ctx)))); }

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

void embed_dev(void* ctx, const splash_weight* w, const int32_t* tokens, int32_t n, float* out) {
  Ctx* c = C(ctx);
  if (n <= 0) return;
  dim3 grid(unsigned(std::min<int64_t>(8, (w->cols + 255) / 256)), unsigned(n));
  k_dequant_rows<<<grid, 256, 0, strm(c)>>>(*w, tokens, n, out);
  SPLASH_LAUNCHED(c, "dequant_rows");
}

void embed(void* ctx, const splash_weight* w, const int32_t* tokens, int32_t n, float* out) {
  Ctx* c = C(ctx);
  if (n <= 0 || spoils_capture(c)) return;
  auto* d = static_cast<int32_t*>(scratch(c, kTok, size_t(n) * 4));
  if (!d) return;
  SPLASH_CK(c, cudaMemcpyAsync(d, tokens, size_t(n) * 4, cudaMemcpyHostToDevice, strm(c)));
  SPLASH_CK(c, cudaStreamSynchronize(strm(c)));  // tokens is the caller's host memory
  dim3 grid(unsigned(std::min<int64_t>(8, (w->cols + 255) / 256)), unsigned(n));
  k_dequant_rows<<<grid, 256, 0, strm(c)>>>(*w, d, n, out);
  SPLASH_LAUNCHED(c, "dequant_rows");
}
void dequant_row(void* ctx, const splash_weight* w, int64_t row, float* out) {
  const int32_t r = int32_t(row);
  embed(ctx, w, &r, 1, out);
}

// ---- RoPE: one thread per (token, head, rotated pair)

struct RopeArgs {
  int32_t n_heads, half, rd, start, sec1, sec2, has_sec;
  int64_t row_stride, head_stride;
  float theta;
};

__global__ void k_rope(float* x, int32_t nt, RopeArgs a, const int32_t* startp) {
  pdl_trigger();
  pdl_wait();  // launched with PDL (launch_dep): the kernel before it is done
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  const int64_t per_tok = int64_t(a.n_heads) * a.half;
  if (i >= nt * per_tok) return;
  const int32_t t = int32_t(i / per_tok), rem = int32_t(i % per_tok), h = rem / a.half, j = rem % a.half;
  // text positions: the three M-RoPE axes coincide, so the section choice does not change the angle
  const int32_t p = (startp ? *startp : a.start) + t;
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
  launch_dep(C(ctx), C(ctx)->opt.pdl_small, k_rope, dim3(blocks_for(n, 256)), dim3(256), 0, x, nt, a, nullptr);
  SPLASH_LAUNCHED(C(ctx), "rope");
}
void rope_seq_dev(void* ctx, float* x, int32_t nt, int64_t rs, int32_t nh, int64_t hs, int32_t hd, int32_t rd,
                  const int32_t* start, const int32_t* sec, float theta) {
  if (nt <= 0) return;
  RopeArgs a{nh, rd / 2, rd, 0, sec ? sec[1] : 0, sec ? sec[2] : 0, sec ? 1 : 0, rs, hs, theta};
  const int64_t n = int64_t(nt) * nh * (rd / 2);
  launch_dep(C(ctx), C(ctx)->opt.pdl_small, k_rope, dim3(blocks_for(n, 256)), dim3(256), 0, x, nt, a, start);
  SPLASH_LAUNCHED(C(ctx), "rope");
}

__global__ void k_rows_at(float* dst, const float* src, int64_t n, int64_t width, const int32_t* start) {
  pdl_trigger();
  pdl_wait();  // launched with PDL (launch_dep): the kernel before it is done
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < n) dst[int64_t(*start) * width + i] = src[i];
}
void rows_at(void* ctx, float* dst, const float* src, int32_t n, int64_t width, const int32_t* start) {
  const int64_t m = int64_t(n) * width;
  if (m <= 0) return;
  launch_dep(C(ctx), C(ctx)->opt.pdl_small, k_rows_at, dim3(blocks_for(m, 256)), dim3(256), 0, dst, src, m, width, start);
  SPLASH_LAUNCHED(C(ctx), "rows_at");
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
  k_rope3<<<blocks_for(n, 128), 128, 0, strm(C(ctx))>>>(x, nh, hs, rd, pos[0], pos[1], pos[2], sec ? sec[1] : 0,
                                                          sec ? sec[2] : 0, sec ? 1 : 0, theta);
  SPLASH_LAUNCHED(C(ctx), "rope");
}

// ---- elementwise

__global__ void k_add(float* y, const float* x, int64_t n) {
  pdl_trigger();
  pdl_wait();  // launched with PDL (launch_dep): the kernel before it is done
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) y[i] += x[i];
}

__global__ void k_swiglu(const float* g, const float* u, int64_t n, float* out, QuantOut qo) {
  pdl_trigger();
  pdl_wait();  // launched with PDL (launch_dep): the kernel before it is done
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float v = siluf_(g[i]) * u[i];
    out[i] = v;
    if (qo.q4) quant_group(v, i, qo.q4, qo.q8, qo.xs, qo.total);  // whole warps: n % 64 == 0
  }
}

__global__ void k_gdn_gates(float* b, float* a, const float* A_log, const float* dt_bias, int64_t n, int32_t nv) {
  pdl_trigger();
  pdl_wait();  // launched with PDL (launch_dep): the kernel before it is done
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
  launch_dep(C(ctx), C(ctx)->opt.pdl_small, k_gdn_gates, dim3(blocks_for(m, 256)), dim3(256), 0, b, a, A_log, dt_bias, m,
             nv);
  SPLASH_LAUNCHED(C(ctx), "gdn_gates");
}

__global__ void k_sigmoid_gate(float* x, int64_t xp, const float* g, int64_t gp, int32_t rows, int32_t width) {
  pdl_trigger();
  pdl_wait();  // launched with PDL (launch_dep): the kernel before it is done
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= int64_t(rows) * width) return;
  const int64_t r = i / width, c = i % width;
  x[r * xp + c] *= sigmoidf_(g[r * gp + c]);
}
void sigmoid_gate(void* ctx, float* x, int64_t xp, const float* g, int64_t gp, int32_t rows, int32_t width) {
  const int64_t n = int64_t(rows) * width;
  if (n <= 0) return;
  launch_dep(C(ctx), C(ctx)->opt.pdl_small, k_sigmoid_gate, dim3(blocks_for(n, 256)), dim3(256), 0, x, xp, g, gp, rows,
             width);
  SPLASH_LAUNCHED(C(ctx), "sigmoid_gate");
}

__global__ void k_gated_add(float* y, const float* x, const float* gate, int32_t n, int32_t dim) {
  pdl_trigger();
  pdl_wait();  // launched with PDL (launch_dep): the kernel before it is done
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= int64_t(n) * dim) return;
  y[i] += sigmoidf_(gate[i / dim]) * x[i];
}

// out = {free, total} of the device (cudaMemGetInfo), {used, limit} of this backend; false on failure.
int device_memory(void* ctx, uint64_t out[4]) {
  Ctx* c = C(ctx);
  size_t fr = 0, tot = 0;
  if (cudaMemGetInfo(&fr, &tot) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  std::lock_guard<std::mutex> lock(c->mem_mu);
  out[0] = fr, out[1] = tot, out[2] = c->used, out[3] = c->limit;
  return 1;
}
void set_memory_limit(void* ctx, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(C(ctx)->mem_mu);
  C(ctx)->limit = size_t(bytes);
}

// Page-locked host memory (device-to-host copies at full bus speed).
void* host_alloc(void*, size_t bytes) {
  void* p = nullptr;
  if (cudaHostAlloc(&p, bytes, cudaHostAllocDefault) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  return p;
}
void host_free(void*, void* p) {
  if (p) cudaFreeHost(p);
}

const char* last_error(void* ctx) {
  Ctx* c = C(ctx);
  thread_local std::string msg;
  msg = c->error;
  c->error.clear();
  return msg.empty() ? nullptr : msg.c_str();
}
// The backend's options, for tests and benchmarks to change between calls (cuda_options.h). Taken through the
// Flushed wrapper, so the matmuls waiting under the old options go out first.
CudaOptions* options(void* ctx) { return &C(ctx)->opt; }

// ---- decode graphs

void graph_capture_begin(void* ctx) {
  Ctx* c = C(ctx);
  c->capture_spoilt = false;
  c->capture_thread = std::this_thread::get_id();
  // relaxed: scratch may still be allocated while recording (it is kept, see scratch())
  if (SPLASH_CK(c, cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeRelaxed))) c->capturing = true;
}
void* graph_capture_end(void* ctx) {
  Ctx* c = C(ctx);
  if (!c->capturing) return nullptr;
  c->capturing = false;
  cudaGraph_t g = nullptr;
  const cudaError_t e = cudaStreamEndCapture(c->stream, &g);
  c->capture_thread = std::thread::id();
  cudaGraphExec_t exec = nullptr;
  if (e == cudaSuccess && !c->capture_spoilt && c->error.empty()) SPLASH_CK(c, cudaGraphInstantiate(&exec, g, 0));
  else if (e != cudaSuccess && !c->capture_spoilt) check(c, e, "cudaStreamEndCapture");
  if (g) cudaGraphDestroy(g);
  cudaGetLastError();
  return exec;
}
void graph_launch(void* ctx, void* g) {
  ++C(ctx)->graph_launches;
  SPLASH_CK(C(ctx), cudaGraphLaunch(static_cast<cudaGraphExec_t>(g), strm(C(ctx))));
}
void graph_free(void*, void* g) {
  if (g) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(g));
}
uint64_t graph_epoch(void* ctx) { return C(ctx)->epoch; }
int64_t graph_launches(void* ctx) { return C(ctx)->graph_launches; }

// Benchmarks: stop = 0 records a start event on the stream; stop = 1 records the end, waits for it and returns the
// milliseconds between the two (device time of the work queued in between; −1 on an error)
float event_ms(void* ctx, int stop) {
  static cudaEvent_t ev[2] = {};
  Ctx* c = C(ctx);
  if (!ev[0] && (!SPLASH_CK(c, cudaEventCreate(&ev[0])) || !SPLASH_CK(c, cudaEventCreate(&ev[1])))) return -1.f;
  if (!SPLASH_CK(c, cudaEventRecord(ev[stop ? 1 : 0], strm(c))) || !stop) return stop ? -1.f : 0.f;
  float ms = -1.f;
  if (SPLASH_CK(c, cudaEventSynchronize(ev[1]))) SPLASH_CK(c, cudaEventElapsedTime(&ms, ev[0], ev[1]));
  return ms;
}

// Every slot but matmul launches the deferred matmuls first (see flush()).
template <bool Invalidates, class R, class... A>
struct Flushed {
  template <R (*F)(void*, A...)>
  static R call(void* ctx, A... a) {
    Ctx* c = C(ctx);
    const std::thread::id me = std::this_thread::get_id();
    if (c->pend_thread.load() == me) flush(c);  // only the step's own thread has matmuls waiting
    if (Invalidates) c->xc_valid = false;       // this slot may write over the last norm's output
    if (c->capture_thread.load() == std::thread::id() || c->capture_thread.load() == me) return F(ctx, a...);
    // another thread while a step is being recorded: its own stream, finished before returning
    tl_stream = c->aux;
    struct Done {
      Ctx* c;
      ~Done() {
        SPLASH_CK(c, cudaStreamSynchronize(c->aux));
        tl_stream = nullptr;
      }
    } done{c};
    return F(ctx, a...);
  }
};
template <bool Invalidates, class R, class... A>
Flushed<Invalidates, R, A...> flushed_of(R (*)(void*, A...));
template <auto F>
constexpr auto fl = &decltype(flushed_of<true>(F))::template call<F>;
// MoE reads the last norm's output (its int8 form serves the experts) and writes neither it nor its planes
template <auto F>
constexpr auto fl_keep = &decltype(flushed_of<false>(F))::template call<F>;

// The GDN gates go into the launch of the b/a GEMVs when those are what waits (decode steps); else their kernel.
void gdn_gates_slot(void* ctx, float* b, float* a, const float* A_log, const float* dt_bias, int32_t n, int32_t nv) {
  Ctx* c = C(ctx);
  if (c->pend_thread.load() == std::this_thread::get_id() && gates_with_pending(c, b, a, A_log, dt_bias, n, nv)) return;
  fl<gdn_gates>(ctx, b, a, A_log, dt_bias, n, nv);
}

// The gated RMSNorm joins the decode step's recurrence waiting before it (cuda_gdn.cu); else its own kernel.
void gated_rmsnorm_slot(void* ctx, const float* x, const float* z, const float* w, int32_t n, int32_t dim, float eps,
                        float* y) {
  Ctx* c = C(ctx);
  if (c->pend_thread.load() == std::this_thread::get_id() && gdn_norm_with_pending(c, x, z, w, n, dim, eps, y)) return;
  fl<gated_rmsnorm>(ctx, x, z, w, n, dim, eps, y);
}

void* get_proc_address(void*, const char* name) {
  if (std::strcmp(name, "splash_last_error") == 0) return reinterpret_cast<void*>(&last_error);
  if (std::strcmp(name, "splash_cuda_options") == 0) return reinterpret_cast<void*>(fl<options>);
  if (std::strcmp(name, "splash_host_alloc") == 0) return reinterpret_cast<void*>(&host_alloc);
  if (std::strcmp(name, "splash_host_free") == 0) return reinterpret_cast<void*>(fl<host_free>);
  if (std::strcmp(name, "splash_device_memory") == 0) return reinterpret_cast<void*>(&device_memory);
  if (std::strcmp(name, "splash_set_memory_limit") == 0) return reinterpret_cast<void*>(&set_memory_limit);
  if (std::strcmp(name, "splash_cuda_graph_launches") == 0) return reinterpret_cast<void*>(&graph_launches);
  if (std::strcmp(name, "splash_cuda_load_kernels") == 0) return reinterpret_cast<void*>(fl<spec_load>);
  if (std::strcmp(name, "splash_cuda_kernel_shapes") == 0) return reinterpret_cast<void*>(&spec_shapes);
  if (std::strcmp(name, "splash_cuda_event_ms") == 0) return reinterpret_cast<void*>(fl<event_ms>);
  return nullptr;
}

const splash_backend_i kIface = {
    /* .abi_version         = */ SPLASH_BACKEND_ABI,
    /* .name                = */ "cuda",
    /* .variant             = */ "sm_90",
    /* .host_memory         = */ 0,
    /* .buffer_alloc        = */ fl<buffer_alloc>,
    /* .buffer_free         = */ fl<buffer_free>,
    /* .synchronize         = */ fl<synchronize>,
    /* .copy_to_device      = */ fl<copy_to_device>,
    /* .copy_to_host        = */ fl<copy_to_host>,
    /* .copy2d              = */ fl<copy2d>,
    /* .memset_zero         = */ fl<memset_zero>,
    /* .matmul              = */ matmul,  // deferred: launched with the next matmuls on the same activations
    /* .dequant_row         = */ fl<dequant_row>,
    /* .embed               = */ fl<embed>,
    /* .embed_dev           = */ fl<embed_dev>,
    /* .rmsnorm             = */ fl<rmsnorm>,
    /* .add_rmsnorm         = */ fl<add_rmsnorm>,
    /* .gated_rmsnorm       = */ gated_rmsnorm_slot,
    /* .layer_norm          = */ fl<layer_norm>,
    /* .add                 = */ fl<add>,
    /* .add_bias            = */ fl<add_bias>,
    /* .swiglu              = */ fl<swiglu>,
    /* .gelu                = */ fl<gelu>,
    /* .gated_add           = */ fl<gated_add>,
    /* .sigmoid_gate        = */ fl<sigmoid_gate>,
    /* .rope                = */ fl<rope>,
    /* .rope_seq            = */ fl<rope_seq>,
    /* .rope_seq_dev        = */ fl<rope_seq_dev>,
    /* .rope_table          = */ fl<rope_table>,
    /* .rows_at             = */ fl<rows_at>,
    /* .attention           = */ fl<attention>,
    /* .seg_attention       = */ fl<seg_attention>,
    /* .conv1d_silu         = */ fl<conv1d_silu>,
    /* .gdn_gates           = */ gdn_gates_slot,
    /* .gdn_recurrent       = */ fl<gdn_recurrent>,
    /* .gdn_chunked         = */ fl<gdn_chunked>,  // the recurrent kernels up to a few tokens
    /* .moe                 = */ fl_keep<moe>,
    /* .argmax_rows         = */ fl_keep<argmax_rows>,
    /* .sample_rows         = */ fl<sample_rows>,
    /* .graph_capture_begin = */ fl<graph_capture_begin>,
    /* .graph_capture_end   = */ fl<graph_capture_end>,
    /* .graph_launch        = */ fl<graph_launch>,
    /* .graph_free          = */ fl<graph_free>,
    /* .graph_epoch         = */ graph_epoch,
    /* .get_proc_address    = */ get_proc_address,
};

struct CudaBackend {
  splash_backend b;
  splash_backend_i iface;
  Ctx ctx;
};

}  // namespace

void add(void* ctx, float* y, const float* x, int64_t n) {
  if (n <= 0) return;
  launch_dep(C(ctx), C(ctx)->opt.pdl_small, k_add, dim3(std::min<unsigned>(blocks_for(n, 256), 4096)), dim3(256), 0, y, x,
             n);
  SPLASH_LAUNCHED(C(ctx), "add");
}

void gated_add(void* ctx, float* y, const float* x, const float* gate, int32_t n, int32_t dim) {
  const int64_t m = int64_t(n) * dim;
  if (m <= 0) return;
  launch_dep(C(ctx), C(ctx)->opt.pdl_small, k_gated_add, dim3(blocks_for(m, 256)), dim3(256), 0, y, x, gate, n, dim);
  SPLASH_LAUNCHED(C(ctx), "gated_add");
}

void swiglu(void* ctx, const float* g, const float* u, int64_t n, float* out) {
  Ctx* c = C(ctx);
  flush(c);  // also called inside the backend, after matmuls that may wait
  if (n <= 0) return;
  const QuantOut qo = quant_out(c, n);  // for the down projection
  launch_dep(c, c->opt.pdl_small, k_swiglu, dim3(std::min<unsigned>(blocks_for(n, 256), 4096)), dim3(256), 0, g, u, n,
             out, qo);
  if (SPLASH_LAUNCHED(c, "swiglu") && qo.q4) produced(c, out, qo.total);
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
  if (cudaStreamCreateWithFlags(&cb->ctx.stream, cudaStreamNonBlocking) != cudaSuccess ||
      cudaStreamCreateWithFlags(&cb->ctx.aux, cudaStreamNonBlocking) != cudaSuccess) {
    if (cb->ctx.stream) cudaStreamDestroy(cb->ctx.stream);
    delete cb;
    return nullptr;
  }
  cb->ctx.opt = cuda_options_from_env();
  cublas_open(&cb->ctx);
  apply_probes(cb->iface, cb->ctx);
  cb->b.iface = &cb->iface;
  cb->b.ctx = &cb->ctx;
  return &cb->b;
}

extern "C" __attribute__((visibility("default"))) void splash_backend_cuda_free(splash_backend* b) {
  using namespace splash::cuda;
  if (!b) return;
  auto* cb = reinterpret_cast<CudaBackend*>(b);
  flush(&cb->ctx);
  cudaStreamSynchronize(cb->ctx.stream);
  cublas_close(&cb->ctx);
  spec_unload(&cb->ctx);
  for (void* p : cb->ctx.scratch) device_free(&cb->ctx, p);
  for (void* p : cb->ctx.retired) device_free(&cb->ctx, p);
  cudaStreamDestroy(cb->ctx.stream);
  cudaStreamDestroy(cb->ctx.aux);
  delete cb;
}
