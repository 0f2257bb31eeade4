// Shared pieces of splash_gpu_test (gpu_test.cpp, gpu_test_model.cpp, gpu_bench.cpp, gpu_test_vision.cpp): random inputs, a
// one-sequence step harness, a backend's buffers, the relative-error report that counts failures, host + device copies
// of a weight, a clock.
#pragma once
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "backend/cuda/cuda_options.h"
#include "backend/loader.h"
#include "model/model.h"
#include "model/load/vision.h"
#include "splash/backend.h"

namespace splash::gputest {

// The sequence a step item runs on (the model's table is read under its lock).
inline Sequence* seq_of(Model& m, int32_t id) {
  std::lock_guard<std::mutex> l(m.seq_mutex());
  return m.find(id);
}

// One sequence of `cap` positions with a step item on it, freed at the end of the scope (the whole-model checks'
// harness): `items` holds the one item, `out` the step's logits rows.
struct OneSeq {
  Model& m;
  const int32_t id;
  std::vector<StepItem> items;
  std::vector<std::vector<float>> out;
  OneSeq(Model& model, int cap) : m(model), id(model.create_sequence(cap)), items(1) { items[0].seq = seq_of(model, id); }
  ~OneSeq() { m.free_sequence(id); }
  OneSeq(const OneSeq&) = delete;
  OneSeq& operator=(const OneSeq&) = delete;
};

// The CUDA backend's options (backend/cuda/cuda_options.h), changed in place between calls.
inline cuda::CudaOptions& cuda_options(const splash_backend& b) {
  auto get = reinterpret_cast<cuda::CudaOptions* (*)(void*)>(b.iface->get_proc_address(b.ctx, "splash_cuda_options"));
  if (!get) throw std::runtime_error("the CUDA backend does not give its options");
  return *get(b.ctx);
}
// The options as they were, put back when the scope ends.
struct KeepOptions {
  cuda::CudaOptions& o;
  const cuda::CudaOptions saved;
  explicit KeepOptions(const splash_backend& b) : o(cuda_options(b)), saved(o) {}
  ~KeepOptions() { o = saved; }
  KeepOptions(const KeepOptions&) = delete;
  KeepOptions& operator=(const KeepOptions&) = delete;
};

// The form of the CUDA backend's q4 expert GEMM (cuda_expert_gemm.cu): "w1", "w2", "w1-noglu" (w1 with gate, up and
// SwiGLU as separate steps) or "wmma"; null: the default (w1 with them fused).
inline void set_expert_form(cuda::CudaOptions& o, const char* f) {
  const cuda::CudaOptions d;
  o.expert_q4 = d.expert_q4, o.expert_glu = d.expert_glu;
  if (!f) return;
  if (std::strcmp(f, "w1-noglu") == 0) o.expert_q4 = 1, o.expert_glu = false;
  else o.expert_q4 = std::strcmp(f, "wmma") == 0 ? 0 : std::strcmp(f, "w2") == 0 ? 2 : 1;
}

// s cut at every sep (an empty piece where two meet)
inline std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t p = 0;
  for (size_t e; (e = s.find(sep, p)) != std::string::npos; p = e + 1) out.push_back(s.substr(p, e - p));
  out.push_back(s.substr(p));
  return out;
}

inline int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : fallback;
}

// Whether the CUDA backend's q4 matmuls of nt tokens take the fused GEMM: the defaults unless $SPLASH_QGEMM_MIN /
// _MAX say otherwise (the backend reads them when it is created).
inline bool qgemm_takes(int nt) {
  const cuda::CudaOptions d;
  return nt >= env_int("SPLASH_QGEMM_MIN", d.qgemm_min) && nt <= env_int("SPLASH_QGEMM_MAX", d.qgemm_max);
}

inline int g_fail = 0;
inline std::mt19937 rng(20261202);

inline std::vector<float> randv(size_t n, float lo = -1.f, float hi = 1.f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}
inline uint16_t bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return uint16_t((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}

struct Be {
  splash_backend* b;
  const splash_backend_i* i;
  void* c;
  explicit Be(splash_backend* be) : b(be), i(be->iface), c(be->ctx) {}
  void* alloc(size_t bytes) { return i->buffer_alloc(c, bytes); }
  template <class T>
  T* up(const std::vector<T>& v) {
    T* p = static_cast<T*>(alloc(v.size() * sizeof(T) + 64));
    i->copy_to_device(c, p, v.data(), v.size() * sizeof(T));
    return p;
  }
  std::vector<float> down(const float* p, size_t n) {
    std::vector<float> v(n);
    i->copy_to_host(c, v.data(), p, n * 4);
    return v;
  }
};

// The backend's default decode matmul ranges for a scope (the fused q4 GEMM from 5 to 64 tokens, the tensor-core
// GEMV at 8), whatever $SPLASH_QGEMM_MIN / _MAX and $SPLASH_GEMV_MMA say, and the environment's back after it:
// checks that hold a fused kernel to the unfused kernels' bits (or to the dp4a GEMV's tolerance) need the unfused
// launches to take the kernels the fused one reproduces, also in gpu-test.sh's runs that force the other paths.
struct DefaultGemvs {
  KeepOptions keep;
  explicit DefaultGemvs(Be& be) : keep(*be.b) {
    const cuda::CudaOptions d;
    keep.o.qgemm_min = d.qgemm_min, keep.o.qgemm_max = d.qgemm_max, keep.o.gemv_mma = d.gemv_mma;
  }
};

inline void report(const char* what, const std::vector<float>& ref, const std::vector<float>& got, double tol) {
  double mx = 0, err = 0;
  bool nan = false;
  for (size_t k = 0; k < ref.size(); ++k) {
    mx = std::max(mx, double(std::fabs(ref[k])));
    if (!std::isfinite(got[k])) nan = true;
    err = std::max(err, double(std::fabs(ref[k] - got[k])));
  }
  const double rel = err / (mx > 0 ? mx : 1);
  const bool ok = !nan && rel <= tol;
  std::printf("%-44s rel err %.2e  tol %.1e  %s\n", what, rel, tol, ok ? "ok" : "FAIL");
  g_fail += !ok;
}

// A weight in host memory (for the CPU) and its device copy (for CUDA).
struct W {
  splash_weight h{}, d{};
  std::vector<uint32_t> words;
  std::vector<uint16_t> half, sc, bi;
  std::vector<float> f;
};
inline W make_weight(Be& g, int dtype, int64_t rows, int64_t cols, int64_t E = 1) {
  W w;
  w.h.dtype = dtype;
  w.h.rows = rows;
  w.h.cols = cols;
  const int64_t R = rows * E, G = cols / 64;
  std::uniform_int_distribution<uint32_t> bits;
  if (dtype == SPLASH_F32) {
    w.f = randv(size_t(R * cols), -0.1f, 0.1f);
    w.h.data = w.f.data();
    w.d = w.h;
    w.d.data = g.up(w.f);
  } else if (dtype == SPLASH_BF16) {
    for (float x : randv(size_t(R * cols), -0.1f, 0.1f)) w.half.push_back(bf16(x));
    w.h.data = w.half.data();
    w.d = w.h;
    w.d.data = g.up(w.half);
  } else {
    const int b = dtype == SPLASH_Q4 ? 4 : 8;
    w.words.resize(size_t(R * cols * b / 32));
    for (auto& x : w.words) x = bits(rng);
    for (float x : randv(size_t(R * G), 0.002f, 0.02f)) w.sc.push_back(bf16(x));
    for (float x : randv(size_t(R * G), -0.1f, 0.0f)) w.bi.push_back(bf16(x));
    w.h.data = w.words.data();
    w.h.scales = w.sc.data();
    w.h.biases = w.bi.data();
    w.d = w.h;
    w.d.data = g.up(w.words);
    w.d.scales = g.up(w.sc);
    w.d.biases = g.up(w.bi);
  }
  return w;
}

// Frees a weight's device copy.
inline void free_weight(Be& g, W& w) {
  for (const void* p : {w.d.data, static_cast<const void*>(w.d.scales), static_cast<const void*>(w.d.biases)})
    if (p) g.i->buffer_free(g.c, const_cast<void*>(p));
  w.d = splash_weight{};
}

// One matmul of a random weight (dtype, R × C) on nt random tokens, CUDA against the CPU, reported as `what`
// within `tol`; `after(w, dx, dy, got)` may check more on the same weight and device buffers before they are freed.
template <class After = std::nullptr_t>
inline void matmul_case(Be& cpu, Be& g, int dtype, int64_t R, int64_t C, int nt, const char* what, double tol,
                        After after = nullptr) {
  W w = make_weight(g, dtype, R, C);
  auto x = randv(size_t(nt) * C);
  std::vector<float> yr(size_t(nt) * R);
  cpu.i->matmul(cpu.c, &w.h, x.data(), nt, yr.data(), R);
  float* dx = g.up(x);
  float* dy = static_cast<float*>(g.alloc(yr.size() * 4));
  g.i->matmul(g.c, &w.d, dx, nt, dy, R);
  const std::vector<float> got = g.down(dy, yr.size());
  report(what, yr, got, tol);
  if constexpr (!std::is_same_v<After, std::nullptr_t>) after(w, dx, dy, got);
  g.i->buffer_free(g.c, dx);
  g.i->buffer_free(g.c, dy);
  free_weight(g, w);
}

inline double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// gpu_bench.cpp
void bench_base(Be& g);
void bench_gemv(Be& g);
// q4 matmuls of `tokens` tokens at the 27B / 35B-A3B shapes: the fused GEMM against the paths it replaces
void bench_qgemm(Be& g, const std::vector<int>& tokens);
// the decode GEMV at the 27B shapes, generic vs the package DIR's specialised kernels
void bench_spec_gemv(Be& g, const std::string& dir);
void bench_gdn(Be& g, const std::vector<int>& tokens);
void bench_moe(Be& g, const std::vector<int>& tokens);
void bench_attn(Be& g);
void bench(const std::string& dir, int prompt, int n);
// gpu_bench_probe.cpp: decode steps under several settings (environment variables), for kernels' in-graph costs
void bench_probe(const std::string& dir, int prompt, int n, const std::vector<std::string>& settings);

// gpu_test_vision.cpp
void test_vision_ops(Be& cpu, Be& g);
// gpu_test_sample.cpp
void test_sample(Be& cpu, Be& g);
// gpu_test_fused.cpp: the CUDA backend's fused steps against the CPU's slots
void test_fused(Be& cpu, Be& g);
void test_moe_fused(Be& cpu, Be& g);
// gpu_test_verify.cpp: a speculative verify's GDN calls against one-token calls
void test_verify(Be& cpu, Be& g);
// gpu_test_model.cpp: whole-model logits, CUDA vs CPU (precise: fp32 activations in every CUDA matmul), and a
// package's specialised kernels against the generic ones
void test_model(const std::string& dir, bool precise);
void test_spec(const std::string& dir);
void test_image(Model& cpu, Model& gpu, const std::string& name, bool precise);
void bench_vision(const std::string& dir, const std::string& backend, const std::vector<int>& sizes);

}  // namespace splash::gputest
