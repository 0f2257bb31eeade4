// Measurement only. $SPLASH_CUDA_TWICE and $SPLASH_CUDA_SKIP name backend slots (comma-separated) that run twice or
// not at all, so a decode step timed with and without one kind of kernel gives that kind's cost inside the step's
// graph, where programmatic dependent launch and the GPU's queue overlap kernels and a profiler's one-at-a-time
// figures do not apply. The outputs are wrong then; nothing else reads these variables. `gemv_f_row` names the
// few-row GEMV launches alone (the GDN b/a projections, routers), `matmul` every matmul (each launched twice
// apart: a second call never joins the first's launch, its output overlaps).
#include <cstdlib>
#include <cstring>
#include <utility>

#include "backend/cuda/cuda_common.cuh"

namespace splash::cuda {
namespace {

bool listed(const char* list, const char* name) {
  if (!list) return false;
  const size_t n = std::strlen(name);
  for (const char* p = list;;) {
    const char* e = std::strchr(p, ',');
    const size_t len = e ? size_t(e - p) : std::strlen(p);
    if (len == n && std::strncmp(p, name, n) == 0) return true;
    if (!e) return false;
    p = e + 1;
  }
}

}  // namespace

// Each slot keeps its original function in a static of its own (one block per expansion).
#define SPLASH_PROBE(slot)                                                                        \
  {                                                                                               \
    static decltype(t.slot) orig;                                                                 \
    orig = t.slot;                                                                                \
    if (listed(twice, #slot)) {                                                                   \
      t.slot = [](auto... a) {                                                                    \
        orig(a...);                                                                               \
        return orig(a...);                                                                        \
      };                                                                                          \
    } else if (listed(skip, #slot)) {                                                             \
      t.slot = [](auto... a) { return decltype(orig(a...))(); };                                  \
    }                                                                                             \
  }

void apply_probes(::splash_backend_i& t, Ctx& c) {
  const char* twice = c.opt.probe_twice.empty() ? nullptr : c.opt.probe_twice.c_str();
  const char* skip = c.opt.probe_skip.empty() ? nullptr : c.opt.probe_skip.c_str();
  if (!twice && !skip) return;
  c.opt.probe_f_row = listed(twice, "gemv_f_row") ? 2 : listed(skip, "gemv_f_row") ? 1 : 0;
  SPLASH_PROBE(matmul)
  SPLASH_PROBE(rmsnorm)
  SPLASH_PROBE(gated_rmsnorm)
  SPLASH_PROBE(add_rmsnorm)
  SPLASH_PROBE(swiglu)
  SPLASH_PROBE(attention)
  SPLASH_PROBE(conv1d_silu)
  SPLASH_PROBE(gdn_recurrent)
  SPLASH_PROBE(copy2d)
  SPLASH_PROBE(add)
  SPLASH_PROBE(gdn_gates)
  SPLASH_PROBE(sigmoid_gate)
  SPLASH_PROBE(gated_add)
  SPLASH_PROBE(moe)
  SPLASH_PROBE(rope_seq_dev)
  SPLASH_PROBE(rows_at)
  SPLASH_PROBE(embed_dev)
}

}  // namespace splash::cuda
