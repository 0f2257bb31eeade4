// Log-probabilities from the unmodified row: the log-softmax normaliser and the top-n list.
#include <algorithm>
#include <cmath>
#include <limits>

#include "sampler/fast_exp.h"
#include "sampler/sampler.h"

namespace splash::sampler {

double log_sum_exp(const float* v, int V) {
  float m = -std::numeric_limits<float>::infinity();
  for (int i = 0; i < V; ++i) m = v[i] > m ? v[i] : m;
  if (!std::isfinite(m)) return m;
  return double(m) + std::log(exp_sum(v, V, m, 1.f));
}

void top_candidates(const float* v, int V, int n, std::vector<Scratch::Cand>& out) {
  out.clear();
  n = std::min(n, V);
  if (n <= 0) return;
  // a heap of the best n so far whose root is the worst kept (ids ascend, so an equal value never displaces it)
  auto better = [](const Scratch::Cand& a, const Scratch::Cand& b) { return a.v > b.v || (a.v == b.v && a.id < b.id); };
  out.reserve(size_t(n));
  for (int i = 0; i < V; ++i) {
    if (int(out.size()) < n) {
      out.push_back({v[i], int32_t(i), 0.f});
      std::push_heap(out.begin(), out.end(), better);
    } else if (v[i] > out.front().v) {
      std::pop_heap(out.begin(), out.end(), better);
      out.back() = {v[i], int32_t(i), 0.f};
      std::push_heap(out.begin(), out.end(), better);
    }
  }
  std::sort_heap(out.begin(), out.end(), better);
}

void top_logprobs(const float* v, int V, int n, double lse, std::vector<TopEntry>& out) {
  std::vector<Scratch::Cand> top;
  top_candidates(v, V, n, top);
  out.clear();
  for (const auto& c : top) out.push_back({c.id, float(double(c.v) - lse)});
}

}  // namespace splash::sampler
