// Step 4 of the sampler (sampler.h): the draw at temperature > 0 without sorting the vocabulary.
// With top-k, the k best come from one heap pass and everything after is over those k. Otherwise the
// weights w = exp((v − max)/T) are computed in one vectorised pass, and the top-p cut and the draw are
// each a weighted selection: the element of the candidate order at which the running sum of weights
// reaches a target, found by quickselect-style partitioning (expected linear time) rather than a sort.
// Elements too light to be that element are left out first: if the answer has weight w*, every element
// at or after it in the order weighs at most w*, and together they weigh more than total − target, so
// w* > (total − target) / V. For a trained model's peaked rows that leaves a handful of candidates.
#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "sampler/fast_exp.h"
#include "sampler/sampler.h"

namespace splash::sampler {

namespace {

using Cand = Scratch::Cand;

bool before(const Cand& a, const Cand& b) { return a.v > b.v || (a.v == b.v && a.id < b.id); }

// The element at which the running weight, in candidate order, first reaches `target`; `through` gets the
// running weight including it. Unreachable (rounding): the last element in order. `c` is reordered.
Cand weighted_select(std::vector<Cand>& c, double target, double& through) {
  size_t lo = 0, hi = c.size();
  double acc = 0;
  Cand last{};  // the last element in order among those passed
  bool have_last = false;
  while (hi - lo > 32) {
    const size_t mid = lo + (hi - lo) / 2;
    Cand a = c[lo], b = c[mid], d = c[hi - 1];
    if (before(b, a)) std::swap(a, b);
    if (before(d, b)) std::swap(b, d);
    if (before(b, a)) std::swap(a, b);
    const Cand pivot = b;  // median of three; ids are unique, so the order is strict
    auto m = std::partition(c.begin() + lo, c.begin() + hi, [&](const Cand& x) { return before(x, pivot); });
    const size_t m1 = size_t(m - c.begin());
    auto p = std::find_if(m, c.begin() + hi, [&](const Cand& x) { return x.id == pivot.id; });
    std::iter_swap(m, p);
    double s = 0;
    for (size_t i = lo; i < m1; ++i) s += c[i].w;
    if (acc + s >= target) {
      hi = m1;
    } else if (acc + s + pivot.w >= target) {
      through = acc + s + pivot.w;
      return pivot;
    } else {
      acc += s + pivot.w;
      last = pivot, have_last = true;
      lo = m1 + 1;
    }
  }
  std::sort(c.begin() + lo, c.begin() + hi, before);
  for (size_t i = lo; i < hi; ++i) {
    acc += c[i].w;
    last = c[i], have_last = true;
    if (acc >= target) break;
  }
  through = acc;
  return have_last ? last : c.front();
}

// The draw over the first k candidates (top-k): sequential over a sorted list.
size_t kept_top_k(const float* v, int V, const Params& p, float wmin, Scratch& s, double& total);

int32_t draw_top_k(const float* v, int V, const Params& p, double u, float wmin, Scratch& s) {
  double total = 0;
  const size_t n = kept_top_k(v, V, p, wmin, s, total);
  double x = u * total;
  for (size_t i = 0; i < n; ++i) {
    x -= s.cands[i].w;
    if (x <= 0) return s.cands[i].id;
  }
  return s.cands[n - 1].id;
}

// The kept candidates of the top-k path (sorted, weights set) and their total: min-p, then top-p.
size_t kept_top_k(const float* v, int V, const Params& p, float wmin, Scratch& s, double& total) {
  top_candidates(v, V, p.top_k, s.cands);
  const float m = s.cands.front().v, inv = 1.f / p.temperature;
  size_t n = 0;
  total = 0;
  for (; n < s.cands.size(); ++n) {
    Cand& c = s.cands[n];
    c.w = fast_exp((c.v - m) * inv);
    if (!(c.w >= wmin) || c.v == -std::numeric_limits<float>::infinity()) break;
    total += c.w;
  }
  if (p.top_p < 1.0) {
    const double target = p.top_p * total;
    double cum = 0;
    size_t i = 0;
    while (i < n) {
      cum += s.cands[i++].w;
      if (cum >= target) break;
    }
    n = i;
    total = cum;
  }
  return n;
}

float min_p_floor(const Params& p) {
  // min-p on float weights: w ≥ min_p exactly when w ≥ the smallest float not below min_p
  float wmin = float(p.min_p);
  if (double(wmin) < p.min_p) wmin = std::nextafter(wmin, 2.f);
  return wmin;
}

// The kept candidates of the path without top-k, as draw() finds them: the weights (in s.weights) and, with
// top-p < 1, the cut (the element where the running weight reaches top_p of the total); an element is kept when it
// has weight and does not come after the cut.
struct KeptSet {
  const float* v = nullptr;
  const float* w = nullptr;
  bool has_cut = false;
  Cand cut{};
  bool kept(int i) const { return w[i] != 0.f && !(has_cut && before(cut, Cand{v[i], int32_t(i), w[i]})); }
  // the kept elements' total weight, summed in id order
  double mass(int V) const {
    double m = 0;
    for (int i = 0; i < V; ++i)
      if (kept(i)) m += w[i];
    return m;
  }
};

KeptSet kept_set(const float* v, int V, int32_t best, const Params& p, float wmin, Scratch& s) {
  KeptSet k;
  k.v = v;
  const float m = v[best], inv = 1.f / p.temperature;
  s.weights.resize(size_t(V));
  float* w = s.weights.data();
  k.w = w;
  const double total = exp_weights(v, V, m, inv, wmin, w);
  if (p.top_p < 1.0) {
    const double target = p.top_p * total;
    const float floor = float((total - target) / double(V) * 0.999);
    s.cands.clear();
    for (int i = 0; i < V; ++i)
      if (w[i] > floor && w[i] != 0.f) s.cands.push_back({v[i], int32_t(i), w[i]});
    double through = 0;
    k.cut = weighted_select(s.cands, target, through);
    k.has_cut = true;
  }
  return k;
}

}  // namespace

int32_t draw(const float* v, int V, int32_t best, const Params& p, double u, Scratch& s) {
  const float wmin = min_p_floor(p);
  if (p.top_k > 0 && p.top_k < V) return draw_top_k(v, V, p, u, wmin, s);
  const float m = v[best], inv = 1.f / p.temperature;
  s.weights.resize(size_t(V));
  float* w = s.weights.data();
  const double total = exp_weights(v, V, m, inv, wmin, w);
  // candidates that can hold the running sum's crossing of `target` within a universe of weight `within`
  auto collect = [&](double target, double within, const Cand* cut) {
    const float floor = float((within - target) / double(V) * 0.999);  // a little low: rounding never drops the answer
    s.cands.clear();
    for (int i = 0; i < V; ++i) {
      if (!(w[i] > floor) || w[i] == 0.f) continue;
      const Cand c{v[i], int32_t(i), w[i]};
      if (cut && before(*cut, c)) continue;
      s.cands.push_back(c);
    }
  };
  double kept = total;
  Cand cut{};
  const bool has_cut = p.top_p < 1.0;
  if (has_cut) {
    collect(p.top_p * total, total, nullptr);
    cut = weighted_select(s.cands, p.top_p * total, kept);
  }
  collect(u * kept, kept, has_cut ? &cut : nullptr);
  if (s.cands.empty()) return has_cut ? cut.id : best;
  double through = 0;
  return weighted_select(s.cands, u * kept, through).id;
}


namespace {

// draw_allowed without filters over a small allowed set: F's weights exp((v − max)/T) of the allowed tokens alone,
// in id order (two passes over the set, none over the vocabulary); -1 when they all round to zero.
int32_t draw_few_allowed(const float* v, int V, int32_t best, const Params& p, const uint32_t* allowed, double u) {
  const float m = v[best], inv = 1.f / p.temperature;
  const int words = (V + 31) / 32;
  double total = 0;
  for (int word = 0; word < words; ++word)
    for (uint32_t bits = allowed[word]; bits != 0; bits &= bits - 1) {
      const int i = word * 32 + std::countr_zero(bits);
      if (i < V) total += fast_exp((v[i] - m) * inv);
    }
  if (!(total > 0)) return -1;
  const double target = u * total;
  double acc = 0;
  int32_t last = -1;
  for (int word = 0; word < words; ++word)
    for (uint32_t bits = allowed[word]; bits != 0; bits &= bits - 1) {
      const int i = word * 32 + std::countr_zero(bits);
      if (i >= V) continue;
      const float w = fast_exp((v[i] - m) * inv);
      if (!(w > 0.f)) continue;
      acc += w;
      last = i;
      if (acc > target) return i;
    }
  return last;  // rounding left the target unreached
}

}  // namespace

int32_t draw_allowed(const float* v, int V, int32_t best, const Params& p, const uint32_t* allowed, double u, Scratch& s) {
  auto ok = [&](int32_t id) { return (allowed[size_t(id) >> 5] >> (id & 31)) & 1u; };
  const float wmin = min_p_floor(p);
  if (p.top_k > 0 && p.top_k < V) {
    // the allowed tokens among the k kept candidates, in id order, with their weights
    double total = 0;
    const size_t n = kept_top_k(v, V, p, wmin, s, total);
    size_t m = 0;
    for (size_t i = 0; i < n; ++i)
      if (ok(s.cands[i].id)) s.cands[m++] = s.cands[i];
    s.cands.resize(m);
    std::sort(s.cands.begin(), s.cands.end(), [](const Cand& a, const Cand& b) { return a.id < b.id; });
    double sum = 0;
    for (const Cand& c : s.cands) sum += c.w;
    const double target = u * sum;
    double acc = 0;
    int32_t last = -1;
    for (const Cand& c : s.cands) {
      if (!(c.w > 0.f)) continue;
      acc += c.w;
      last = c.id;
      if (acc > target) return c.id;
    }
    return last;
  }
  if (p.top_p >= 1.0 && !(wmin > 0.f)) {
    // no filter: where the grammar allows a small part of the vocabulary (digits, an enum, punctuation), only those
    // weights are computed (a refused row's second draw, 16K tokens: ~0.03 ms for the whole row)
    int count = 0;
    for (int word = 0; word < (V + 31) / 32; ++word) count += std::popcount(allowed[word]);
    if (count <= V / 8) return draw_few_allowed(v, V, best, p, allowed, u);
  }
  // the kept weights (zero outside F), the allowed weight of each word, then the word where the running sum passes
  // u · total and the element inside it: two vectorised passes over the vocabulary and one over its words, where a
  // grammar often allows thousands of tokens (a string's characters)
  const KeptSet k = kept_set(v, V, best, p, wmin, s);
  float* w = s.weights.data();
  if (k.has_cut) zero_after_cut(v, V, k.cut.v, k.cut.id, w);
  const int words = (V + 31) / 32;
  s.word_sums.resize(size_t(words));
  float* ws = s.word_sums.data();
  const double total = allowed_word_sums(w, allowed, V, ws);
  if (!(total > 0)) return -1;
  const double target = u * total;
  double acc = 0;
  int last_word = -1;
  for (int word = 0; word < words; ++word) {
    if (!(ws[word] > 0.f)) continue;
    last_word = word;
    if (acc + ws[word] <= target) {
      acc += ws[word];
      continue;
    }
    for (uint32_t bits = allowed[word]; bits != 0; bits &= bits - 1) {
      const int i = word * 32 + std::countr_zero(bits);
      if (i >= V || !(w[i] > 0.f)) continue;
      acc += w[i];
      if (acc > target) return i;
    }
  }
  // rounding left the target unreached: the last allowed element with weight
  int32_t last = -1;
  for (uint32_t bits = allowed[last_word]; bits != 0; bits &= bits - 1) {
    const int i = last_word * 32 + std::countr_zero(bits);
    if (i < V && w[i] > 0.f) last = i;
  }
  return last;
}

void distribution(const float* v, int V, int32_t best, const Params& p, Scratch& s, std::vector<float>& probs) {
  probs.assign(size_t(V), 0.f);
  const float wmin = min_p_floor(p);
  if (p.top_k > 0 && p.top_k < V) {
    double total = 0;
    const size_t n = kept_top_k(v, V, p, wmin, s, total);
    for (size_t i = 0; i < n; ++i) probs[size_t(s.cands[i].id)] = float(double(s.cands[i].w) / total);
    return;
  }
  const KeptSet k = kept_set(v, V, best, p, wmin, s);
  const double kept = k.mass(V);
  for (int i = 0; i < V; ++i)
    if (k.kept(i)) probs[size_t(i)] = float(double(k.w[i]) / kept);
}

}  // namespace splash::sampler
