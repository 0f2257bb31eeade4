// The grammar after the filters (sampler.h, Row::retry): a constrained row draws first from the filtered
// distribution F of the unmasked row, exactly as the same row without a mask would; the grammar keeps an allowed
// token, and a refused one is replaced by a second draw, with an independent uniform, from F restricted to the
// allowed set A. So P(t) = F(t) + (1 − F(A)) · F(t) / F(A) = F(t) / F(A) for t in A: the output follows F | A,
// and a caller that drew the first token without the mask (inside the step) only needs this when it is refused.
// When F gives A no mass, the filters apply to the masked row instead (the mask first).
#include "runtime/error.h"
#include "sampler/sampler.h"

namespace splash::sampler {

namespace {

bool allowed(const Row& row, int32_t id) { return (row.allowed[size_t(id) >> 5] >> (id & 31)) & 1u; }

}  // namespace

int32_t draw_then_mask(const float* logits, int V, const Request& req, const Row& row, Scratch& s,
                       const int32_t* extra, int n_extra) {
  const float* v = adjust(logits, V, req, row, s, extra, n_extra, /*mask=*/false);
  const int32_t best = argmax(v, V);
  if (best >= 0) {
    if (!row.refused) {
      const int32_t first = draw(v, V, best, req.params, row.uniform, s);
      if (allowed(row, first)) return first;
    }
    const int32_t t = draw_allowed(v, V, best, req.params, row.allowed.data(), row.retry, s);
    if (t >= 0) return t;
  }
  const float* m = adjust(logits, V, req, row, s, extra, n_extra);
  const int32_t masked_best = argmax(m, V);
  if (masked_best < 0) throw Error("invalid_argument", "the allowed-token mask leaves no token to sample");
  return draw(m, V, masked_best, req.params, row.retry, s);
}

}  // namespace splash::sampler
