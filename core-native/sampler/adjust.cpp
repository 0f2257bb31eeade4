// Steps 0–2 of the sampler (sampler.h): the logit bias, penalties (on the counted tokens and any extra ones, e.g. a
// verify pass's drafts), then the grammar mask, on a copy of the row.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "sampler/sampler.h"

namespace splash::sampler {

namespace {

int32_t occurrences(const int32_t* extra, int n, int32_t id) {
  int32_t c = 0;
  for (int i = 0; i < n; ++i) c += extra[i] == id;
  return c;
}

}  // namespace

const float* adjust(const float* logits, int V, const Request& req, const Row& row, Scratch& scratch,
                    const int32_t* extra, int n_extra, bool mask) {
  const Params& p = req.params;
  const bool penalize = penalizes(req, n_extra);
  const bool masked = mask && !row.allowed.empty();
  if (!penalize && !masked && req.bias.empty()) return logits;
  std::vector<float>& w = scratch.work;
  w.assign(logits, logits + V);
  for (size_t i = 0; i < req.bias.ids.size(); ++i) w[size_t(req.bias.ids[i])] += req.bias.values[i];
  if (penalize) {
    // each id once, with its count in the output so far (the extra tokens are output tokens too)
    auto apply = [&](int32_t id, int32_t count) {
      float& v = w[id];
      if (p.repetition != 1.f) v = v > 0.f ? v / p.repetition : v * p.repetition;
      if (count > 0) v -= p.frequency * float(count) + p.presence;
    };
    const auto& ids = req.penalties.ids;
    const auto& counts = req.penalties.counts;
    for (size_t i = 0; i < ids.size(); ++i) apply(ids[i], counts[i] + (n_extra > 0 ? occurrences(extra, n_extra, ids[i]) : 0));
    for (int i = 0; i < n_extra; ++i) {
      const int32_t id = extra[i];
      if (occurrences(extra, i, id) > 0) continue;  // counted at its first occurrence
      if (std::find(ids.begin(), ids.end(), id) != ids.end()) continue;
      apply(id, occurrences(extra, n_extra, id));
    }
  }
  if (masked) {
    // word by word: a grammar's mask is mostly whole words of refused (or of allowed) tokens
    const float ninf = -std::numeric_limits<float>::infinity();
    for (int base = 0; base < V; base += 32) {
      const uint32_t bits = row.allowed[size_t(base) >> 5];
      const int n = std::min(32, V - base);
      if (bits == ~0u) continue;
      if (bits == 0u) {
        std::fill_n(w.data() + base, n, ninf);
        continue;
      }
      for (uint32_t off = ~bits; off != 0; off &= off - 1) {
        const int id = base + std::countr_zero(off);
        if (id < V) w[id] = ninf;
      }
    }
  }
  return w.data();
}

namespace {

constexpr int kBlock = 64;  // argmax: the vectorised pass keeps the block of the running maximum, then scans it

float block_max(const float* v, int n) {
  float m = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : m)
  for (int i = 0; i < n; ++i) m = v[i] > m ? v[i] : m;
  return m;
}

int32_t first_equal(const float* v, int from, int to, float m) {
  for (int i = from; i < to; ++i)
    if (v[i] == m) return i;
  return -1;
}

}  // namespace

int32_t argmax(const float* v, int V) {
  // block by block, a block replacing the running maximum only when larger: the first block holding the maximum
  float m = -std::numeric_limits<float>::infinity();
  int at = -1;
  for (int b = 0; b < V; b += kBlock) {
    const float bm = block_max(v + b, std::min(kBlock, V - b));
    if (bm > m) m = bm, at = b;
  }
  return at < 0 ? -1 : first_equal(v, at, std::min(at + kBlock, V), m);
}

int32_t masked_argmax(const float* v, int V, const uint32_t* allowed) {
  // word by word in id order, strictly larger replacing: a whole allowed word as a block, others bit by bit
  float m = -std::numeric_limits<float>::infinity();
  int32_t best = -1, word = -1;  // the best element, or the whole word that holds it
  for (int base = 0; base < V; base += 32) {
    const uint32_t bits = allowed[size_t(base) >> 5];
    if (bits == 0) continue;
    if (bits == ~0u && V - base >= 32) {
      const float bm = block_max(v + base, 32);
      if (bm > m) m = bm, word = base, best = -1;
      continue;
    }
    for (uint32_t b = bits; b != 0; b &= b - 1) {
      const int id = base + std::countr_zero(b);
      if (id < V && v[id] > m) m = v[id], best = id, word = -1;
    }
  }
  return word >= 0 ? first_equal(v, word, word + 32, m) : best;
}

}  // namespace splash::sampler
