// The Qwen3.5 vision encoder: patch embedding, bilinear position embedding, 2-D
// rotary, bidirectional ViT blocks and the 2×2 patch merger. Input is the image processor's patch
// matrix (one row of C·T·P·P values per patch, 2×2 merge groups contiguous); output is one embedding of
// the text model's width per merge group, in the order the image pad tokens appear in the prompt.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/package.h"
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

// Every op goes through the backend table (the model's backend: weights are uploaded once when its buffers
// are device memory); the pixels go in and the embeddings come back with one copy each. The position
// embedding and the rotary tables depend only on the grid: they are made on the host and uploaded.
class VisionEncoder {
 public:
  // Binds the `visual.*` tensors described by the manifest's `vision` object; throws Error("bad_package").
  static std::unique_ptr<VisionEncoder> bind(const Json& vision, const Package& pkg, splash_backend* be);
  ~VisionEncoder();
  const VisionConfig& config() const { return cfg_; }
  // pixels: host [t·h·w, patch_dim] (h, w in patches); returns [t·h·w / merge², out_H]. Not reentrant: the
  // caller serialises it with everything else on the backend.
  std::vector<float> encode(const float* pixels, int t, int h, int w);

 private:
  enum Buf { kPix, kX, kXn, kY, kQKV, kO, kMid, kPos, kCos, kSin, kG1, kOut, kNumBufs };
  float* buf(Buf b, size_t floats);
  float* upload(Buf b, const std::vector<float>& host);
  void upload_weights();
  void linear(const VisionLinear& l, const float* x, int n, float* y) const;
  std::vector<float> position_embedding(int t, int h, int w) const;  // [t·h·w, H], merge-block order

  VisionConfig cfg_;
  splash_backend* be_ = nullptr;
  VisionLinear patch_;
  const float* pos_ = nullptr;  // [n_pos, H], host
  std::vector<VisionBlock> blocks_;
  const float *mnw_ = nullptr, *mnb_ = nullptr;
  VisionLinear mfc1_, mfc2_;
  std::vector<std::vector<float>> owned_;  // F32 copies of BF16 vectors
  std::vector<void*> device_;              // uploaded weights (device backends)
  std::vector<std::pair<float*, size_t>> bufs_;  // activations (pointer, capacity in floats), kept across images
};

}  // namespace splash
