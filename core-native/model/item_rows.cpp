// The rows an item gets back from a step or draft pass: sampled tokens (the sampler runs here, inside the
// native call, so no vocabulary-sized row travels to JavaScript for them) and the logits rows it asked for.
#include "model/model.h"
#include "runtime/error.h"

namespace splash {

void take_rows(const float* rows, int nrows, int V, int keep, const sampler::Request* sample, std::vector<float>& logits,
               std::vector<sampler::Sampled>& sampled) {
  if (sample) {
    const size_t first = size_t(nrows) - sample->rows.size();
    sampler::sample_rows(rows + first * V, V, *sample, sampled);
  }
  if (keep > 0) logits.assign(rows + size_t(nrows - keep) * V, rows + size_t(nrows) * V);
}

bool greedy_only(const sampler::Request& req) {
  if (req.params.temperature > 0.f || req.params.penalized() || req.n_top >= 0) return false;
  for (const auto& row : req.rows)
    if (row.token >= 0 || !row.allowed.empty()) return false;
  return true;
}

void take_ids(const int32_t* ids, size_t n, std::vector<sampler::Sampled>& sampled) {
  sampled.assign(n, {});
  for (size_t r = 0; r < n; ++r) {
    if (ids[r] < 0) throw Error("invalid_argument", "the allowed-token mask leaves no token to sample");
    sampled[r].token = ids[r];
  }
}

}  // namespace splash
