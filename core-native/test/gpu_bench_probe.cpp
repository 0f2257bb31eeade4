// splash_gpu_test bench-probe DIR prompt n SETTING...: decode steps of a package timed under several settings, to
// find what each kind of kernel costs inside a step's graph. A setting is `base` or a comma-separated list of
// NAME=VALUE environment variables (e.g. SPLASH_CUDA_TWICE=add_rmsnorm, SPLASH_GATES_FUSED=0; cuda_probe.cu), set
// before the model is opened and cleared after. Per setting: a prefill of `prompt` tokens, then three rounds of n
// one-token steps (recorded as a graph after the first) and three rounds of n / 4 steps of 8 tokens; the median round
// of each. The settings run in the order given, so repeating `base` between them shows the drift.
#include <algorithm>
#include <stdexcept>

#include "test/gpu_test_util.h"

namespace splash::gputest {

void bench_probe(const std::string& dir, int prompt, int n, const std::vector<std::string>& settings) {
  for (const std::string& setting : settings) {
    std::vector<std::string> names;
    if (setting != "base")
      for (const std::string& kv : split(setting, ',')) {
        const size_t eq = kv.find('=');
        if (eq == std::string::npos) throw std::runtime_error("bench-probe: a setting is NAME=VALUE[,...] or base: " + kv);
        names.push_back(kv.substr(0, eq));
        setenv(names.back().c_str(), kv.substr(eq + 1).c_str(), 1);
      }
    double one = 0, eight = 0;
    {
      auto m = Model::open(dir, 0, nullptr, 0, false, "cuda");
      const int V = m->config().V;
      OneSeq s(*m, prompt + 16 * n + 64);
      s.items[0].logits = 1;
      s.items[0].tokens.resize(size_t(prompt));
      for (int i = 0; i < prompt; ++i) s.items[0].tokens[size_t(i)] = (i * 7919 + 3) % V;
      m->step(s.items, s.out);
      auto rounds = [&](int k, int steps) {
        std::vector<double> t;
        for (int r = 0; r < 4; ++r) {
          const double t0 = now();
          for (int i = 0; i < steps; ++i) {
            s.items[0].tokens.resize(size_t(k));
            for (int j = 0; j < k; ++j) s.items[0].tokens[size_t(j)] = int32_t((i * 31 + j * 7 + r + 1) % V);
            m->step(s.items, s.out);
          }
          if (r > 0) t.push_back((now() - t0) / steps);  // round 0 records the graphs
        }
        std::sort(t.begin(), t.end());
        return t[1];
      };
      one = rounds(1, n);
      eight = rounds(8, std::max(1, n / 4));
    }
    for (const std::string& name : names) unsetenv(name.c_str());
    std::printf("probe %-60s decode %.4f ms/step  8-token steps %.4f ms\n", setting.c_str(), one * 1e3, eight * 1e3);
    std::fflush(stdout);
  }
}

}  // namespace splash::gputest
