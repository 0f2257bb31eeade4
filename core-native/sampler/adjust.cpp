// Steps 1–2 of the sampler (sampler.h): penalties, then the grammar mask, on a copy of the row.
#include <cmath>
#include <cstring>
#include <limits>

#include "sampler/sampler.h"

namespace splash::sampler {

const float* adjust(const float* logits, int V, const Request& req, const Row& row, Scratch& scratch) {
  const Params& p = req.params;
  const bool penalize = p.penalized() && !req.penalties.ids.empty();
  if (!penalize && row.allowed.empty()) return logits;
  std::vector<float>& w = scratch.work;
  w.assign(logits, logits + V);
  if (penalize) {
    const auto& ids = req.penalties.ids;
    const auto& counts = req.penalties.counts;
    for (size_t i = 0; i < ids.size(); ++i) {
      float& v = w[ids[i]];
      if (p.repetition != 1.f) v = v > 0.f ? v / p.repetition : v * p.repetition;
      if (counts[i] > 0) v -= p.frequency * float(counts[i]) + p.presence;
    }
  }
  if (!row.allowed.empty()) {
    const float ninf = -std::numeric_limits<float>::infinity();
    for (int id = 0; id < V; ++id)
      if (!((row.allowed[id >> 5] >> (id & 31)) & 1u)) w[id] = ninf;
  }
  return w.data();
}

int32_t argmax(const float* v, int V) {
  // the maximum in a vectorisable reduction, then its first index
  float m = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : m)
  for (int i = 0; i < V; ++i) m = v[i] > m ? v[i] : m;
  if (!(m > -std::numeric_limits<float>::infinity())) return -1;
  for (int i = 0; i < V; ++i)
    if (v[i] == m) return i;
  return -1;
}

}  // namespace splash::sampler
