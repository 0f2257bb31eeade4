// The rows an item gets back from a step or draft pass: sampled tokens (the sampler runs here, inside the
// native call, so no vocabulary-sized row travels to JavaScript for them) and the logits rows it asked for.
#include <unordered_map>

#include "model/hybrid_model.h"
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
  if (req.params.temperature > 0.f || req.params.penalized() || !req.bias.empty() || req.n_top >= 0) return false;
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

bool backend_samples(const sampler::Request& req) {
  if (req.n_top >= 0 || !req.bias.empty()) return false;  // (the descriptor carries no logit bias)
  for (const auto& row : req.rows) {
    if (row.token >= 0) return false;
    // the grammar after the filters on a row that verifies a draft: the host's sampler
    if (!row.allowed.empty() && row.retry >= 0.0 && req.params.temperature > 0.f && row.draft >= 0) return false;
  }
  return true;
}

void SampleDescs::add(const sampler::Request& req, int64_t first_row, const int32_t* extra, int first, const float* q,
                      float* q_out, int64_t V) {
  const sampler::Params& p = req.params;
  const bool penalize = p.penalized();
  std::unordered_map<int32_t, int32_t> counts;  // id → occurrences in the output, for the row being added
  if (penalize)
    for (size_t i = 0; i < req.penalties.ids.size(); ++i) counts[req.penalties.ids[i]] += req.penalties.counts[i];
  int counted = 0;  // extra tokens already in `counts`
  for (size_t r = 0; r < req.rows.size(); ++r) {
    const sampler::Row& row = req.rows[r];
    splash_sample_desc d{};
    d.row = first_row + int64_t(r);
    d.temperature = p.temperature;
    d.top_k = p.top_k;
    d.top_p = p.top_p;
    d.min_p = p.min_p;
    d.repetition = p.repetition, d.frequency = p.frequency, d.presence = p.presence;
    d.uniform = row.uniform;
    d.draft = p.temperature > 0.f ? row.draft : -1;
    d.accept = row.accept;
    d.q = d.draft >= 0 && q ? q + size_t(first + int(r)) * size_t(V) : nullptr;
    d.q_out = q_out && p.temperature > 0.f ? q_out + r * size_t(V) : nullptr;
    d.mask_at = -1;
    if (!row.allowed.empty() && row.retry >= 0.0 && p.temperature > 0.f) d.mask_after = 1, d.retry = row.retry;
    if (!row.allowed.empty()) {
      d.mask_at = int64_t(ints.size());
      for (uint32_t w : row.allowed) ints.push_back(int32_t(w));
    }
    if (penalize) {
      for (; extra && counted < first + int(r); ++counted) ++counts[extra[counted]];
      if (ints.size() % 2) ints.push_back(0);  // pairs start at an even index
      d.pen_at = int64_t(ints.size() / 2);
      d.n_penalized = int32_t(counts.size());
      for (const auto& [id, n] : counts) ints.push_back(id), ints.push_back(n);
    }
    descs.push_back(d);
  }
}

void take_sampled(const int32_t* ids, const sampler::Request& req, bool verify, std::vector<sampler::Sampled>& sampled) {
  const size_t n = req.rows.size();
  sampled.assign(n, {});
  for (size_t r = 0; r < n; ++r) {
    if (ids[r] < 0) throw Error("invalid_argument", "the allowed-token mask leaves no token to sample");
    sampled[r].token = ids[r];
    const int32_t d = req.rows[r].draft;
    if (verify && d >= 0 && req.params.temperature > 0.f && ids[r] != d) break;  // the pass commits nothing after it
  }
}

}  // namespace splash
