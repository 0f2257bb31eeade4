// Step 4 of the sampler (sampler.h): the draw at temperature > 0 without sorting the vocabulary.
// Candidates come in their fixed order (logit descending, id ascending) band by band: a band is every
// token within a logit range below the maximum, collected in one pass and sorted on its own, so only as
// many candidates are ordered as top-k, min-p, top-p and the draw actually reach — a few dozen for a
// trained model, where the mass sits near the top. The universe total comes from one vectorised pass.
#include <algorithm>
#include <cmath>
#include <limits>

#include "sampler/fast_exp.h"
#include "sampler/sampler.h"

namespace splash::sampler {

namespace {

using Cand = Scratch::Cand;

bool before(const Cand& a, const Cand& b) { return a.v > b.v || (a.v == b.v && a.id < b.id); }

// Band lower bounds, in temperatures below the maximum (weights e^-4, e^-8, …; the last band takes the rest).
constexpr float kBands[] = {4.f, 8.f, 16.f, 32.f, 64.f};

class Walk {
 public:
  Walk(const float* v, int V, float m, float T, size_t limit, Scratch& s)
      : v_(v), V_(V), m_(m), T_(T), limit_(limit), s_(s) {
    s_.cands.clear();
  }

  // The i-th candidate in order, materialising bands as needed; false past the last one.
  bool at(size_t i, Cand& c) {
    while (i >= s_.cands.size())
      if (!more()) return false;
    c = s_.cands[i];
    return true;
  }

 private:
  bool more() {
    if (band_ > std::size(kBands) || s_.cands.size() >= limit_) return false;
    const float ninf = -std::numeric_limits<float>::infinity();
    const float lo = band_ < std::size(kBands) ? m_ - T_ * kBands[band_] : ninf;
    const bool last = band_ == std::size(kBands);
    auto& b = s_.band;
    b.clear();
    for (int i = 0; i < V_; ++i) {
      const float x = v_[i];
      if (x < hi_ && (last ? x > ninf : x >= lo)) b.push_back({x, int32_t(i)});
    }
    hi_ = lo;
    ++band_;
    const size_t room = limit_ - s_.cands.size();
    if (b.size() > room) {  // top-k: only the first `room` of this band can ever be used
      std::partial_sort(b.begin(), b.begin() + room, b.end(), before);
      b.resize(room);
    } else {
      std::sort(b.begin(), b.end(), before);
    }
    s_.cands.insert(s_.cands.end(), b.begin(), b.end());
    return true;
  }

  const float* v_;
  int V_;
  float m_, T_;
  size_t limit_;
  Scratch& s_;
  size_t band_ = 0;
  float hi_ = std::numeric_limits<float>::infinity();
};

}  // namespace

int32_t draw(const float* v, int V, int32_t best, const Params& p, double u, Scratch& scratch) {
  const float m = v[best], inv = 1.f / p.temperature;
  const size_t k = p.top_k > 0 && p.top_k < V ? size_t(p.top_k) : size_t(V);
  // min-p on float weights: w ≥ min_p exactly when w ≥ the smallest float not below min_p
  float wmin = float(p.min_p);
  if (double(wmin) < p.min_p) wmin = std::nextafter(wmin, 2.f);
  auto weight = [&](const Cand& c) { return double(fast_exp((c.v - m) * inv)); };
  Walk walk(v, V, m, p.temperature, k, scratch);
  // The universe: the first k candidates whose weight is at least min_p (a prefix of the order).
  Cand c{};
  auto in_universe = [&](size_t i) { return i < k && walk.at(i, c) && float(weight(c)) >= wmin; };
  double total = 0;
  if (k < size_t(V)) {
    for (size_t i = 0; in_universe(i); ++i) total += weight(c);
  } else {
    total = exp_sum(v, V, m, inv, wmin);
  }
  // top-p: the shortest prefix whose weight reaches top_p · total
  size_t cut = std::numeric_limits<size_t>::max();
  if (p.top_p < 1.f) {
    const double target = p.top_p * total;
    double cum = 0;
    size_t i = 0;
    for (; in_universe(i); ++i) {
      cum += weight(c);
      if (cum >= target) {
        ++i;
        break;
      }
    }
    cut = i;
    total = cum;
  }
  // inverse CDF
  double x = u * total;
  int32_t last = best;
  for (size_t i = 0; i < cut && in_universe(i); ++i) {
    last = c.id;
    x -= weight(c);
    if (x <= 0) return c.id;
  }
  return last;
}

}  // namespace splash::sampler
