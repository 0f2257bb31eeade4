// A small JSON reader (RFC 8259 subset that splash.json and safetensors headers use). Throws
// splash::Error("bad_package") on malformed input.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/error.h"

namespace splash {

struct Json {
  enum Kind { Null, Bool, Number, String, Array, Object } kind = Null;
  bool b = false;
  double num = 0;
  std::string str;
  std::vector<Json> arr;
  std::vector<std::pair<std::string, Json>> obj;  // insertion order kept

  const Json* find(const std::string& key) const {
    for (auto& kv : obj)
      if (kv.first == key) return &kv.second;
    return nullptr;
  }
  bool isNull() const { return kind == Null; }

  static Json parse(const char* p, size_t n);
};

}  // namespace splash
