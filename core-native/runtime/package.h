// A Splash package on disk: splash.json (manifest) plus safetensors files mapped read-only; tensors
// are used in place (zero copy). The manifest's fields: src/package/manifest.ts.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/json.h"

namespace splash {

struct TensorInfo {
  std::string dtype;  // "F32" | "BF16" | "U32" | ...
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  size_t bytes = 0;
  int64_t numel() const {
    int64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
  }
};

class MappedFile {
 public:
  explicit MappedFile(const std::string& path);  // throws Error("io_error")
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

class Package {
 public:
  // Reads splash.json; `check` (may throw) sees the manifest before any weight file is mapped.
  static std::unique_ptr<Package> open(const std::string& dir, const std::function<void(const Json&)>& check = nullptr);
  const Json& manifest() const { return manifest_; }
  const Json& config() const { return *config_; }
  const TensorInfo* find(const std::string& name) const;
  uint64_t tensor_bytes() const { return tensor_bytes_; }
  // Maps one more safetensors file; its tensors are found as `prefix + name` (the draft uses "draft.").
  void add_safetensors(const std::string& path, const std::string& prefix = "");

 private:
  Json manifest_;
  const Json* config_ = nullptr;
  std::vector<std::unique_ptr<MappedFile>> files_;
  std::map<std::string, TensorInfo> tensors_;
  uint64_t tensor_bytes_ = 0;
};

}  // namespace splash
