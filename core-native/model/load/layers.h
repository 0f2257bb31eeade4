// The model's weights as bound from the package (model/load/weights.cpp): per target layer, per draft layer, and the
// DFlash 2 selector's host pieces.
#pragma once
#include <cstddef>
#include <cstdint>

#include "splash/backend.h"

namespace splash {

// Stacked experts [E, rows, cols]: expert e is `base` shifted by e strides.
struct Stacked {
  splash_weight base{};
  int64_t E = 0;
  splash_weight expert(int64_t e) const;
};

struct Layer {
  bool linear = false, moe = false;
  const float* in_norm = nullptr;
  const float* post_norm = nullptr;
  // Gated DeltaNet
  splash_weight qkv{}, z{}, b{}, a{}, out{};
  const float *conv = nullptr, *A_log = nullptr, *dt_bias = nullptr, *gnorm = nullptr;
  // gated attention
  splash_weight q{}, k{}, v{}, o{};
  const float *q_norm = nullptr, *k_norm = nullptr;
  // dense MLP / shared expert / MoE
  splash_weight gate{}, up{}, down{};
  splash_weight router{}, sgate{}, sg{}, su{}, sd{};
  Stacked eg, eu, ed;
  bool shared = false;
  // offsets into a sequence's state block (floats)
  int64_t conv_off = 0, ssm_off = 0, kv_index = -1;
  int64_t gdn_index = -1;  // linear layers: their index among the linear layers (rollback tape)
};

struct DraftLayer {
  const float *in_norm = nullptr, *post_norm = nullptr, *q_norm = nullptr, *k_norm = nullptr;
  splash_weight q{}, k{}, v{}, o{}, gate{}, up{}, down{};
  // DFlash 2 conv, [0] around attention, [1] around the MLP: base kernels [2][K][H] (host memory: the taps run on
  // the host) and the kernel projections [2·K·H/G, H]
  const float* conv_base[2] = {nullptr, nullptr};
  splash_weight conv_proj[2]{};
};

// The DFlash 2 selector's host pieces (model/step/draft_selector.cpp).
namespace draft2 {
// The k largest of v[0..V) (ties to the lower index), largest first.
void top_k(const float* v, int V, int k, int32_t* ids, float* vals);
// x ← softcap·tanh(mul·x / softcap) (softcap 0: mul·x only).
void transform_logits(float* x, size_t n, float mul, float softcap);
// y = the grouped dynamic causal conv of one block's `rows` rows of x [rows, H] (model/step/draft_conv.cpp).
void conv_taps(const float* x, const float* dyn, int64_t dyn_stride, const float* base, int rows, int H, int K, int G,
               float* y);
}  // namespace draft2

}  // namespace splash
