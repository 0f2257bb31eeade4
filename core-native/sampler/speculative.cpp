// Speculative sampling (sampler.h): the draft samples each position from its filtered distribution q and keeps q;
// the verify pass accepts drafted token d with probability min(1, p(d)/q(d)) and otherwise draws from the residual
// max(0, p − q) normalised, so every committed token follows the target's distribution p (the rejection rule of
// speculative sampling: P(d) = q(d)·min(1, p/q) + (1 − Σ min(p, q))·max(0, p − q)(d)/Σ max(0, p − q) = p(d)).
#include <algorithm>
#include <cstring>

#include "runtime/error.h"
#include "sampler/sampler.h"

namespace splash::sampler {

int32_t draw_probs(const float* probs, int V, double u) {
  double total = 0;
  for (int i = 0; i < V; ++i) total += probs[i];
  const double target = u * total;
  double acc = 0;
  int32_t last = -1;
  for (int i = 0; i < V; ++i) {
    if (!(probs[i] > 0.f)) continue;
    acc += probs[i];
    last = i;
    if (acc > target) return i;
  }
  return last;
}

Sampled verify_row(const float* logits, int V, const Request& req, const Row& row, const float* q, Scratch& s,
                   const int32_t* extra, int n_extra) {
  const float* v = adjust(logits, V, req, row, s, extra, n_extra);
  const int32_t best = argmax(v, V);
  if (best < 0) throw Error("invalid_argument", "the allowed-token mask leaves no token to sample");
  distribution(v, V, best, req.params, s, s.probs);
  float* p = s.probs.data();
  const int32_t d = row.draft;
  Sampled out;
  if (row.accept * double(q[d]) < double(p[d])) {
    out.token = d;
    return out;
  }
  // the residual, in place: max(0, p − q)
  bool any = false;
  for (int i = 0; i < V; ++i) {
    const float r = p[i] - q[i];
    p[i] = r > 0.f ? r : 0.f;
    any = any || r > 0.f;
  }
  // p = q leaves nothing (then the draft is accepted unless p(d) = 0, which q(d) > 0 rules out): draw from p
  out.token = any ? draw_probs(p, V, row.uniform) : draw(v, V, best, req.params, row.uniform, s);
  return out;
}

void sample_draft(const float* rows, int V, const Request& req, std::vector<Sampled>& out, std::vector<float>& q) {
  Scratch s;
  out.clear();
  const size_t n = req.rows.size();
  const bool sampled = req.params.temperature > 0.f;
  q.resize(sampled ? n * size_t(V) : 0);
  std::vector<int32_t> drafted;
  for (size_t r = 0; r < n; ++r) {
    const float* logits = rows + r * size_t(V);
    const Row& row = req.rows[r];
    const float* v = adjust(logits, V, req, row, s, drafted.data(), int(drafted.size()));
    const int32_t best = argmax(v, V);
    if (best < 0) throw Error("invalid_argument", "the allowed-token mask leaves no token to sample");
    Sampled o;
    if (!sampled) {
      o.token = best;
    } else {
      distribution(v, V, best, req.params, s, s.probs);
      std::memcpy(q.data() + r * size_t(V), s.probs.data(), size_t(V) * 4);
      o.token = draw_probs(s.probs.data(), V, row.uniform);
    }
    if (req.n_top >= 0) {
      const double lse = log_sum_exp(logits, V);
      o.logprob = float(double(logits[o.token]) - lse);
      top_logprobs(logits, V, req.n_top, lse, o.top);
    }
    drafted.push_back(o.token);
    out.push_back(std::move(o));
  }
}

}  // namespace splash::sampler
