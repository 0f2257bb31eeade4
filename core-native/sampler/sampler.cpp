// One sampled (or scored) row: adjust → argmax or draw → log-probabilities of the unmodified row.
#include "sampler/sampler.h"

#include "runtime/error.h"

namespace splash::sampler {

namespace {

void add_logprobs(const float* logits, int V, const Request& req, Sampled& out) {
  if (req.n_top < 0) return;
  const double lse = log_sum_exp(logits, V);
  out.logprob = float(double(logits[out.token]) - lse);
  top_logprobs(logits, V, req.n_top, lse, out.top);
}

}  // namespace

Sampled sample_row(const float* logits, int V, const Request& req, const Row& row, Scratch& scratch,
                   const int32_t* extra, int n_extra) {
  Sampled out;
  if (row.token >= 0) {
    out.token = row.token;
  } else if (row.retry >= 0.0 && !row.allowed.empty() && req.params.temperature > 0.f) {
    out.token = draw_then_mask(logits, V, req, row, scratch, extra, n_extra);
  } else if (req.params.temperature <= 0.f && !row.allowed.empty() && req.bias.empty() && !penalizes(req, n_extra)) {
    // greedy under a grammar mask with nothing else adjusting the row (a refused greedy row's second draw)
    out.token = masked_argmax(logits, V, row.allowed.data());
    if (out.token < 0) throw Error("invalid_argument", "the allowed-token mask leaves no token to sample");
  } else {
    const float* v = adjust(logits, V, req, row, scratch, extra, n_extra);
    const int32_t best = argmax(v, V);
    if (best < 0) throw Error("invalid_argument", "the allowed-token mask leaves no token to sample");
    out.token = req.params.temperature > 0.f ? draw(v, V, best, req.params, row.uniform, scratch) : best;
  }
  add_logprobs(logits, V, req, out);
  return out;
}

void sample_rows(const float* rows, int V, const Request& req, std::vector<Sampled>& out, const Speculative* spec) {
  Scratch scratch;
  out.clear();
  out.reserve(req.rows.size());
  bool rejected = false;
  for (size_t r = 0; r < req.rows.size(); ++r) {
    const float* logits = rows + r * size_t(V);
    const Row& row = req.rows[r];
    if (!spec) {
      out.push_back(sample_row(logits, V, req, row, scratch));
      continue;
    }
    if (rejected) {  // the pass commits nothing after a rejected draft
      out.push_back(Sampled{});
      continue;
    }
    const int at = spec->first + int(r);  // the row's index in the item = drafted tokens before it
    if (row.draft >= 0 && req.params.temperature > 0.f && row.token < 0) {
      out.push_back(verify_row(logits, V, req, row, spec->q + size_t(at) * V, scratch, spec->extra, at));
      add_logprobs(logits, V, req, out.back());
      rejected = out.back().token != row.draft;
    } else {
      out.push_back(sample_row(logits, V, req, row, scratch, spec->extra, at));
    }
  }
}

}  // namespace splash::sampler
