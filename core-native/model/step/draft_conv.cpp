// DFlash 2's grouped dynamic causal conv (tools/reference/dflash2_reference.py, GroupedDynamicCausalConv), around
// both sublayers f of every draft layer. With x the normed sublayer input of one block (rows t = 0..B−1), G channels
// per group, g(c) = c / G the group of channel c, K taps:
//   dyn_t = kernel_projection(x_t), read as [2][K][H/G] (half 0 for prepare, half 1 for finish)
//   prepare: u_t[c] = Σ_o (base[0][o][c] + dyn_t[0][o][g(c)]) · x_{t−o}[c]
//   finish:  y_t[c] = Σ_o (base[1][o][c] + dyn_t[1][o][g(c)]) · f(u)_{t−o}[c]
// Rows before the block's first read zero: a tap never crosses into the context or another block. Both halves of
// the kernel come from the sublayer's input (the finish conv reuses prepare's projection).
//
// The projection is a backend matmul; the taps (a few multiply-adds per value of a 16-row block) run on the host
// over copies of the rows (copy_to_host / copy_to_device), so every backend runs the conv through the same table.
// On a device that is two synchronous copies per conv: there is no device kernel for the taps.
#include <cstring>
#include <vector>

#include "model/hybrid_model.h"

namespace splash {

void draft2::conv_taps(const float* x, const float* dyn, int64_t dyn_stride, const float* base, int rows, int H, int K,
                       int G, float* y) {
  const int groups = H / G;
  for (int t = 0; t < rows; ++t) {
    float* yr = y + size_t(t) * H;
    std::memset(yr, 0, size_t(H) * 4);
    const float* dr = dyn + t * dyn_stride;
    for (int o = 0; o < K && o <= t; ++o) {
      const float* xr = x + size_t(t - o) * H;
      const float* b = base + size_t(o) * H;
      const float* dk = dr + size_t(o) * groups;
      for (int g = 0; g < groups; ++g) {
        const float d = dk[g];
        for (int c = g * G; c < (g + 1) * G; ++c) yr[c] += (b[c] + d) * xr[c];
      }
    }
  }
}

void HybridModel::draft_conv(const DraftLayer& l, int which, bool prepare, float* x, int Nb, int Bb) {
  const DraftConfig& d = dcfg_;
  const auto* be = be_->iface;
  void* bc = be_->ctx;
  const int K = d.conv_k, groups = d.H / d.conv_g;
  const int64_t D = int64_t(2) * K * groups;
  std::vector<float>& dyn = d2h_.dyn[which];
  if (prepare) {
    float* dd = buf(kDDyn, size_t(Nb) * D);
    be->matmul(bc, &l.conv_proj[which], x, Nb, dd, D);
    dyn.resize(size_t(Nb) * D);
    be->copy_to_host(bc, dyn.data(), dd, dyn.size() * 4);
  }
  std::vector<float>& in = d2h_.in;
  std::vector<float>& out = d2h_.out;
  in.resize(size_t(Nb) * d.H);
  out.resize(in.size());
  be->copy_to_host(bc, in.data(), x, in.size() * 4);
  const int half = prepare ? 0 : 1;
  const float* base = l.conv_base[which] + size_t(half) * K * d.H;
  for (int b = 0; b < Nb / Bb; ++b) {
    const size_t r0 = size_t(b) * Bb;
    draft2::conv_taps(in.data() + r0 * d.H, dyn.data() + r0 * D + size_t(half) * K * groups, D, base, Bb, d.H, K,
                      d.conv_g, out.data() + r0 * d.H);
  }
  be->copy_to_device(bc, x, out.data(), out.size() * 4);
}

}  // namespace splash
