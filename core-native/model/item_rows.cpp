// The rows an item gets back from a step or draft pass: sampled tokens (the sampler runs here, inside the
// native call, so no vocabulary-sized row travels to JavaScript for them) and the logits rows it asked for.
#include "model/model.h"

namespace splash {

void take_rows(const float* rows, int nrows, int V, int keep, const sampler::Request* sample, std::vector<float>& logits,
               std::vector<sampler::Sampled>& sampled) {
  if (sample) {
    const size_t first = size_t(nrows) - sample->rows.size();
    sampler::sample_rows(rows + first * V, V, *sample, sampled);
  }
  if (keep > 0) logits.assign(rows + size_t(nrows - keep) * V, rows + size_t(nrows) * V);
}

}  // namespace splash
