// One sampled (or scored) row: adjust → argmax or draw → log-probabilities of the unmodified row.
#include "sampler/sampler.h"

#include "runtime/error.h"

namespace splash::sampler {

Sampled sample_row(const float* logits, int V, const Request& req, const Row& row, Scratch& scratch) {
  Sampled out;
  if (row.token >= 0) {
    out.token = row.token;
  } else {
    const float* v = adjust(logits, V, req, row, scratch);
    const int32_t best = argmax(v, V);
    if (best < 0) throw Error("invalid_argument", "the allowed-token mask leaves no token to sample");
    out.token = req.params.temperature > 0.f ? draw(v, V, best, req.params, row.uniform, scratch) : best;
  }
  if (req.n_top >= 0) {
    const double lse = log_sum_exp(logits, V);
    out.logprob = float(double(logits[out.token]) - lse);
    top_logprobs(logits, V, req.n_top, lse, out.top);
  }
  return out;
}

void sample_rows(const float* rows, int V, const Request& req, std::vector<Sampled>& out) {
  Scratch scratch;
  out.clear();
  out.reserve(req.rows.size());
  for (size_t r = 0; r < req.rows.size(); ++r) out.push_back(sample_row(rows + r * size_t(V), V, req, req.rows[r], scratch));
}

}  // namespace splash::sampler
