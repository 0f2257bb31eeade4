// The Qwen3.5 vision encoder (model-arch.md §6): patch embedding, bilinear position embedding, 2-D
// rotary, bidirectional ViT blocks and the 2×2 patch merger. Input is the image processor's patch
// matrix (one row of C·T·P·P values per patch, 2×2 merge groups contiguous); output is one embedding of
// the text model's width per merge group, in the order the image pad tokens appear in the prompt.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/package.h"
#include "runtime/thread_pool.h"
#include "splash/backend.h"

namespace splash {

struct VisionConfig {
  int depth = 0, H = 0, heads = 0, I = 0;
  int patch = 16, temporal = 2, merge = 2, in_ch = 3;
  int out_H = 0, n_pos = 0;
  bool gelu_tanh = true;  // block MLP activation (gelu_pytorch_tanh); the merger always uses exact GELU
  float eps = 1e-6f, theta = 10000.f;
  int hd() const { return H / heads; }
  int patch_dim() const { return in_ch * temporal * patch * patch; }
};

struct VisionLinear {
  splash_weight w{};
  const float* b = nullptr;
};

struct VisionBlock {
  const float *n1w = nullptr, *n1b = nullptr, *n2w = nullptr, *n2b = nullptr;
  VisionLinear qkv, proj, fc1, fc2;
};

class VisionEncoder {
 public:
  // Binds the `visual.*` tensors described by the manifest's `vision` object; throws Error("bad_package").
  static std::unique_ptr<VisionEncoder> bind(const Json& vision, const Package& pkg, splash_backend* be, int threads);
  const VisionConfig& config() const { return cfg_; }
  // pixels: [t·h·w, patch_dim] (h, w in patches); returns [t·h·w / merge², out_H]. Not reentrant.
  std::vector<float> encode(const float* pixels, int t, int h, int w);

 private:
  void linear(const VisionLinear& l, const float* x, int n, float* y) const;
  void layer_norm(const float* w, const float* b, const float* x, int n, int dim, float* y) const;
  void add_position_embedding(float* x, int t, int h, int w) const;
  void attention(const VisionBlock& blk, const float* x, int t, int hw, const float* cos, const float* sin, float* y);

  VisionConfig cfg_;
  splash_backend* be_ = nullptr;
  std::unique_ptr<ThreadPool> pool_;
  VisionLinear patch_;
  const float* pos_ = nullptr;  // [n_pos, H]
  std::vector<VisionBlock> blocks_;
  const float *mnw_ = nullptr, *mnb_ = nullptr;
  VisionLinear mfc1_, mfc2_;
  std::vector<std::vector<float>> owned_;  // F32 copies of BF16 vectors
};

}  // namespace splash
