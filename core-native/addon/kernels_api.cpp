// Kernel-level entries for tests and benchmarks: the CPU ISAs present, the kernel self-test, a matmul timing
// and a single test matmul through the CPU backend.
#include "addon/entries.h"
#include "addon/napi_util.h"
#include "addon/registry.h"
#include "backend/cpu/isa.h"
#include "backend/cpu/selftest.h"

namespace splash::addon {

Napi::Value IsaList(const Napi::CallbackInfo& info) {
  return guard(info, [&]() -> Napi::Value {
    auto v = splash::cpu::isa_available();
    Napi::Array a = Napi::Array::New(info.Env(), v.size());
    for (size_t i = 0; i < v.size(); ++i) a.Set(uint32_t(i), v[i]->name);
    return a;
  });
}

// kernelSelfTest(seed?) → Promise<Array<{kernel, isa, against, maxErr, tol, ok}>>
Napi::Value KernelSelfTest(const Napi::CallbackInfo& info) {
  return guard(info, [&]() -> Napi::Value {
    uint32_t seed = info.Length() > 0 && !info[0].IsUndefined() ? uint32_t(int_arg(info[0], "seed", 0, INT32_MAX)) : 1234;
    auto res = std::make_shared<std::vector<splash::cpu::SelfTestResult>>();
    auto* t = new Task(
        info.Env(), [=] { *res = splash::cpu::kernel_self_test(seed); },
        [=](Napi::Env env) -> Napi::Value {
          Napi::Array a = Napi::Array::New(env, res->size());
          for (size_t i = 0; i < res->size(); ++i) {
            const auto& r = (*res)[i];
            Napi::Object o = Napi::Object::New(env);
            o.Set("kernel", r.kernel);
            o.Set("isa", r.isa);
            o.Set("against", r.against);
            o.Set("maxErr", r.max_err);
            o.Set("tol", r.tol);
            o.Set("ok", r.ok);
            a.Set(uint32_t(i), o);
          }
          return a;
        });
    Napi::Promise p = t->promise();
    t->Queue();
    return p;
  });
}

// benchMatmul({rows, cols, dtype, threads?, int8?, iters?, isa?}) → Promise<object>
Napi::Value BenchMatmul(const Napi::CallbackInfo& info) {
  return guard(info, [&]() -> Napi::Value {
    if (info.Length() < 1 || !info[0].IsObject()) fail("invalid_argument", "benchMatmul(opts)");
    Napi::Object o = info[0].As<Napi::Object>();
    int64_t rows = int_arg(o.Get("rows"), "rows", 1, 1 << 20), cols = int_arg(o.Get("cols"), "cols", 64, 1 << 20);
    std::string dtype = o.Get("dtype").IsString() ? std::string(o.Get("dtype").As<Napi::String>()) : "q4";
    int threads = o.Get("threads").IsUndefined() ? 0 : int_arg(o.Get("threads"), "threads", 1, 256);
    int iters = o.Get("iters").IsUndefined() ? 20 : int_arg(o.Get("iters"), "iters", 1, 10000);
    int int8 = o.Get("int8").IsUndefined() ? 1 : (o.Get("int8").ToBoolean().Value() ? 1 : 0);
    if (o.Get("activations").IsString()) {
      std::string a = o.Get("activations").As<Napi::String>();
      int8 = a == "f32" ? 0 : a == "int8" ? 1 : a == "int8x2" ? 2 : -1;
      if (int8 < 0) fail("invalid_argument", "activations must be 'f32', 'int8' or 'int8x2'");
    }
    std::string isa = o.Get("isa").IsString() ? std::string(o.Get("isa").As<Napi::String>()) : "";
    auto res = std::make_shared<splash::cpu::BenchResult>();
    auto* t = new Task(
        info.Env(),
        [=] { *res = splash::cpu::bench_matmul(rows, cols, dtype, threads, int8, iters, isa.empty() ? nullptr : isa.c_str()); },
        [=](Napi::Env env) -> Napi::Value {
          Napi::Object r = Napi::Object::New(env);
          r.Set("isa", res->isa);
          r.Set("threads", res->threads);
          r.Set("rows", double(res->rows));
          r.Set("cols", double(res->cols));
          r.Set("dtype", res->dtype);
          r.Set("int8", res->int8 > 0);
          r.Set("activations", res->int8 == 0 ? "f32" : res->int8 == 1 ? "int8" : "int8x2");
          r.Set("weightBytes", res->weight_bytes);
          r.Set("secondsPerMatvec", res->seconds_per_matvec);
          r.Set("matvecGBps", res->matvec_gbps);
          r.Set("readGBps", res->read_gbps);
          r.Set("memcpyGBps", res->memcpy_gbps);
          return r;
        });
    Napi::Promise p = t->promise();
    t->Queue();
    return p;
  });
}

// runMatmul({dtype, rows, cols, weight: Uint8Array|Float32Array|Uint16Array|Uint32Array, scales?, biases?,
//            x: Float32Array [nt·cols], nt, int8?, isa?, exact?}) → Float32Array [nt·rows] (test-only, sync; small inputs)
Napi::Value RunMatmul(const Napi::CallbackInfo& info) {
  return guard(info, [&]() -> Napi::Value {
    if (info.Length() < 1 || !info[0].IsObject()) fail("invalid_argument", "runMatmul(opts)");
    Napi::Object o = info[0].As<Napi::Object>();
    std::string dtype = o.Get("dtype").IsString() ? std::string(o.Get("dtype").As<Napi::String>()) : "";
    int d = dtype == "q4" ? SPLASH_Q4 : dtype == "q8" ? SPLASH_Q8 : dtype == "bf16" ? SPLASH_BF16 : dtype == "f32" ? SPLASH_F32 : -1;
    if (d < 0) fail("invalid_argument", "dtype must be q4, q8, bf16 or f32");
    const int64_t rows = int_arg(o.Get("rows"), "rows", 1, 1 << 16), cols = int_arg(o.Get("cols"), "cols", 1, 1 << 16);
    const int32_t nt = int_arg(o.Get("nt"), "nt", 1, 4096);
    const bool quant = d == SPLASH_Q4 || d == SPLASH_Q8;
    if (quant && cols % 64) fail("invalid_argument", "q4/q8 need cols % 64 == 0");
    auto bytes_of = [&](const char* key, size_t want) -> const void* {
      Napi::Value v = o.Get(key);
      if (!v.IsTypedArray()) fail("invalid_argument", std::string(key) + " must be a typed array");
      Napi::TypedArray ta = v.As<Napi::TypedArray>();
      if (ta.ByteLength() != want) fail("invalid_argument", std::string(key) + " has the wrong byte length");
      return static_cast<const uint8_t*>(ta.ArrayBuffer().Data()) + ta.ByteOffset();
    };
    const size_t wbytes = d == SPLASH_F32 ? rows * cols * 4 : d == SPLASH_BF16 ? rows * cols * 2 : d == SPLASH_Q8 ? rows * cols : rows * cols / 2;
    splash_weight w{};
    w.dtype = d;
    w.rows = rows;
    w.cols = cols;
    // copy into aligned storage (the kernels may use aligned loads in future)
    std::vector<uint8_t> wcopy(wbytes + 64);
    std::memcpy(wcopy.data(), bytes_of("weight", wbytes), wbytes);
    w.data = wcopy.data();
    std::vector<uint16_t> sc, bi;
    if (quant) {
      const size_t n = rows * cols / 64;
      sc.resize(n);
      bi.resize(n);
      std::memcpy(sc.data(), bytes_of("scales", n * 2), n * 2);
      std::memcpy(bi.data(), bytes_of("biases", n * 2), n * 2);
      w.scales = sc.data();
      w.biases = bi.data();
    }
    if (o.Get("exact").ToBoolean().Value()) w.flags = SPLASH_WEIGHT_EXACT;
    const float* x = static_cast<const float*>(bytes_of("x", size_t(nt) * cols * 4));
    int levels = o.Get("int8").ToBoolean().Value() ? 1 : 0;
    if (o.Get("int8x2").ToBoolean().Value()) levels = 2;
    std::string isa = o.Get("isa").IsString() ? std::string(o.Get("isa").As<Napi::String>()) : "";
    splash_backend* be = splash_backend_cpu_create(1, isa.empty() ? nullptr : isa.c_str(), levels);
    if (!be) fail("unsupported", "ISA not supported on this CPU");
    Napi::Float32Array y = Napi::Float32Array::New(info.Env(), size_t(nt) * rows);
    be->iface->matmul(be->ctx, &w, x, nt, y.Data(), rows);
    splash_backend_cpu_free(be);
    return y;
  });
}

}  // namespace splash::addon
