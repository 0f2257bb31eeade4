// One Gated DeltaNet call's arguments (splash_gdn_args) from a layer's sizes and the rows the call reads: the conv
// outputs [q (nk·dk) | k (nk·dk) | v (nv·dv)] of each token at a row stride, the gates β and g at nv per token. The
// ABI-9 fields (stepwise, states) stay off; the caller sets them for a verify or a replay.
#pragma once

#include <cstdint>

#include "splash/backend.h"

namespace splash {

inline splash_gdn_args gdn_call(int32_t n_tokens, int32_t nk, int32_t nv, int32_t dk, int32_t dv, const float* qkv,
                                int64_t stride, const float* beta, const float* g, float* state, float* out) {
  splash_gdn_args a{};
  a.n_tokens = n_tokens, a.nk = nk, a.nv = nv, a.dk = dk, a.dv = dv;
  a.q = qkv, a.k = qkv + int64_t(nk) * dk, a.v = qkv + 2 * int64_t(nk) * dk;
  a.qk_stride = stride, a.v_stride = stride;
  a.beta = beta, a.g = g, a.state = state, a.out = out;
  return a;
}

}  // namespace splash
