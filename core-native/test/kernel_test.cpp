// Standalone kernel self-test and matmul benchmark:
// `splash_kernel_test [bench rows cols dtype threads [isa|-] [tokens]]`, `decode DIR …`, `guard DIR`,
// `kernel-choice [KEY=VALUE…] SHAPE…` (the CUDA backend's matmul kernel choice, no GPU needed).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <chrono>
#include <vector>

#include "backend/cpu/selftest.h"
#include "backend/cuda/kernel_choice.h"
#include "model/model.h"

namespace {

// kernel-choice: for each SHAPE dtype:rows:cols:tokens[:exact] (dtype f32, bf16, q8, q4) one line
// `SHAPE KERNEL groups=0|1 launch=N forms=F,…` (forms: the q4/q8 GEMV launches of ≤ 8 tokens; `-` otherwise), under
// the CUDA backend's default options as changed by the KEY=VALUE arguments before it (sms, cublas and the
// CudaOptions fields precise, gemv_mma, gemv_stream, qgemm_min, qgemm_max, gemv_rows, gemv_unroll). Aligned
// weights. Exit status 2 on an argument it cannot read.
int kernel_choice(int argc, char** argv) {
  using namespace splash::cuda;
  CudaOptions o;
  DeviceProps d{132, true};
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (const size_t eq = a.find('='); eq != std::string::npos) {
      const std::string k = a.substr(0, eq);
      const int v = std::atoi(a.c_str() + eq + 1);
      if (k == "sms") d.sms = v;
      else if (k == "cublas") d.cublas = v != 0;
      else if (k == "precise") o.precise = v != 0;
      else if (k == "gemv_mma") o.gemv_mma = v;
      else if (k == "gemv_stream") o.gemv_stream = v;
      else if (k == "qgemm_min") o.qgemm_min = v;
      else if (k == "qgemm_max") o.qgemm_max = v;
      else if (k == "gemv_rows") o.gemv_rows = v;
      else if (k == "gemv_unroll") o.gemv_unroll = v;
      else return std::fprintf(stderr, "kernel-choice: unknown setting %s\n", k.c_str()), 2;
      continue;
    }
    MatmulShape s;
    char dt[8] = {};
    long long rows = 0, cols = 0;
    int tokens = 0, exact = 0;
    const int got = std::sscanf(a.c_str(), "%7[a-z0-9]:%lld:%lld:%d:%d", dt, &rows, &cols, &tokens, &exact);
    const std::string dts = dt;
    if (got < 4 || rows <= 0 || cols <= 0 || tokens <= 0 || (dts != "f32" && dts != "bf16" && dts != "q8" && dts != "q4"))
      return std::fprintf(stderr, "kernel-choice: bad shape %s (dtype:rows:cols:tokens[:exact])\n", a.c_str()), 2;
    s.dtype = dts == "f32" ? SPLASH_F32 : dts == "bf16" ? SPLASH_BF16 : dts == "q8" ? SPLASH_Q8 : SPLASH_Q4;
    s.rows = rows, s.cols = cols, s.tokens = tokens, s.exact = exact != 0, s.qgemm_aligned = true;
    const MatmulChoice c = choose_matmul(s, d, o);
    std::string forms;
    if (c.kernel == MatmulKernel::kGemvQ4 || c.kernel == MatmulKernel::kGemvQ8)
      for (int t0 = 0; t0 < tokens; t0 += kMaxGemvTokens) {
        if (!forms.empty()) forms += ',';
        forms += form_name(choose_gemv_form(std::min(kMaxGemvTokens, tokens - t0), cols % 1024 == 0, o));
      }
    std::printf("%s %s groups=%d launch=%d forms=%s\n", a.c_str(), kernel_name(c.kernel), int(c.groups),
                int(c.launch_tokens), forms.empty() ? "-" : forms.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace splash::cpu;
  if (argc > 1 && std::string(argv[1]) == "kernel-choice") return kernel_choice(argc, argv);
  if (argc > 1 && std::string(argv[1]) == "bench") {
    int64_t rows = argc > 2 ? std::atoll(argv[2]) : 8192, cols = argc > 3 ? std::atoll(argv[3]) : 8192;
    std::string dtype = argc > 4 ? argv[4] : "q4";
    int threads = argc > 5 ? std::atoi(argv[5]) : 0;
    const char* isa = argc > 6 && std::string(argv[6]) != "-" ? argv[6] : nullptr;
    const int nt = argc > 7 ? std::atoi(argv[7]) : 1;
    for (int i8 : {1, 2, 0}) {
      BenchResult r = bench_matmul(rows, cols, dtype, threads, i8, nt > 1 ? 10 : 50, isa, nt);
      if (nt > 1) {
        const double s = r.seconds_per_matvec;
        std::printf("%s %lldx%lld %s int8=%d threads=%d nt=%d: %.3f ms per call, %.3f ms per token, %.1f GMAC/s\n",
                    r.isa.c_str(), (long long)rows, (long long)cols, dtype.c_str(), int(i8), r.threads, nt, s * 1e3,
                    s * 1e3 / nt, double(rows) * double(cols) * nt / s / 1e9);
        continue;
      }
      std::printf("%s %lldx%lld %s int8=%d threads=%d: %.3f ms, %.2f GB/s (read %.2f GB/s, memcpy %.2f GB/s)\n",
                  r.isa.c_str(), (long long)rows, (long long)cols, dtype.c_str(), int(i8), r.threads,
                  r.seconds_per_matvec * 1e3, r.matvec_gbps, r.read_gbps, r.memcpy_gbps);
    }
    return 0;
  }
  if (argc > 2 && std::string(argv[1]) == "decode") {
    // decode DIR [threads] [levels 0|1|2] [prompt] [tokens]
    int threads = argc > 3 ? std::atoi(argv[3]) : 0;
    int int8 = argc > 4 ? std::atoi(argv[4]) : 1;  // 0 fp32, 1 int8, 2 int8x2
    int prompt = argc > 5 ? std::atoi(argv[5]) : 128, n = argc > 6 ? std::atoi(argv[6]) : 32;
    auto m = splash::Model::open(argv[2], threads, nullptr, int8);
    int32_t id = m->create_sequence(prompt + n + 8);
    std::vector<splash::StepItem> items(1);
    std::vector<std::vector<float>> out;
    {
      std::lock_guard<std::mutex> lock(m->seq_mutex());
      items[0].seq = m->find(id);
    }
    items[0].logits = 1;
    using clk = std::chrono::steady_clock;
    items[0].tokens.resize(prompt);
    for (int i = 0; i < prompt; ++i) items[0].tokens[i] = (i * 7919) % m->config().V;
    auto t0 = clk::now();
    m->step(items, out);
    double pf = std::chrono::duration<double>(clk::now() - t0).count();
    items[0].tokens.assign(1, 1);
    m->step(items, out);  // warm
    t0 = clk::now();
    for (int i = 0; i < n; ++i) {
      items[0].tokens.assign(1, i + 2);
      m->step(items, out);
    }
    double dc = std::chrono::duration<double>(clk::now() - t0).count();
    const double gb = double(m->weight_bytes()) / 1e9;
    std::printf("%s threads=%d int8=%d weights %.2f GB: prefill %d tok %.1f tok/s; decode %.2f tok/s (%.1f GB/s of weights)\n",
                m->backend().iface->variant, threads, int(int8), gb, prompt, prompt / pf, n / dc, gb * n / dc);
    return 0;
  }
  if (argc > 2 && std::string(argv[1]) == "guard") {
    // guard DIR: Model::step refuses a step that would pass the sequence's maxLength (code too_long), before it
    // runs, so the sequence is still usable; prints "guard ok" or what went wrong
    auto m = splash::Model::open(argv[2], 1, nullptr, 2);
    const int32_t id = m->create_sequence(4);
    splash::Sequence* s = nullptr;
    {
      std::lock_guard<std::mutex> lock(m->seq_mutex());
      s = m->find(id);
    }
    std::vector<splash::StepItem> items(1);
    std::vector<std::vector<float>> out;
    items[0].seq = s;
    items[0].logits = 1;
    auto refused = [&](int n) {
      items[0].tokens.assign(size_t(n), 1);
      try {
        m->step(items, out);
      } catch (const splash::Error& e) {
        if (e.code == "too_long") return true;
        std::printf("guard: %d tokens at length %d failed with %s: %s\n", n, s->len, e.code.c_str(), e.what());
        return false;
      }
      std::printf("guard: %d tokens at length %d were not refused\n", n, s->len - n);
      return false;
    };
    auto steps = [&](int n) {
      items[0].tokens.assign(size_t(n), 1);
      m->step(items, out);
      return s->len;
    };
    bool ok = refused(5) && s->len == 0 && steps(3) == 3 && refused(2) && s->len == 3 && steps(1) == 4 && refused(1);
    ok = ok && out.size() == 1 && out[0].size() == size_t(m->config().V);
    std::printf("guard %s\n", ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
  }
  int bad = 0;
  for (auto& r : kernel_self_test(1234)) {
    std::printf("%-22s %-7s vs %-9s err %.3g tol %.3g %s\n", r.kernel.c_str(), r.isa.c_str(), r.against.c_str(),
                r.max_err, r.tol, r.ok ? "ok" : "FAIL");
    bad += !r.ok;
  }
  std::printf("%d failed\n", bad);
  return bad ? 1 : 0;
}
