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

void top_logprobs(const float* v, int V, int n, double lse, std::vector<TopEntry>& out) {
  out.clear();
  n = std::min(n, V);
  if (n <= 0) return;
  // min-heap of the best n so far under (value descending, id ascending): the root is the worst kept
  struct E {
    float v;
    int32_t id;
  };
  auto worse = [](const E& a, const E& b) { return a.v > b.v || (a.v == b.v && a.id < b.id); };
  std::vector<E> heap;
  heap.reserve(n);
  for (int i = 0; i < V; ++i) {
    if (int(heap.size()) < n) {
      heap.push_back({v[i], i});
      std::push_heap(heap.begin(), heap.end(), worse);
    } else if (v[i] > heap.front().v) {  // ids ascend, so an equal value never displaces a kept one
      std::pop_heap(heap.begin(), heap.end(), worse);
      heap.back() = {v[i], i};
      std::push_heap(heap.begin(), heap.end(), worse);
    }
  }
  std::sort_heap(heap.begin(), heap.end(), worse);
  for (const E& e : heap) out.push_back({e.id, float(double(e.v) - lse)});
}

}  // namespace splash::sampler
