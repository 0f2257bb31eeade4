#include "addon/registry.h"

#include <cmath>
#include <map>
#include <mutex>

#include "addon/napi_util.h"

namespace splash::addon {
namespace {
std::mutex g_mu;
std::map<uint32_t, std::shared_ptr<Model>> g_models;
uint32_t g_next = 1;
}  // namespace

uint32_t add_model(std::shared_ptr<Model> m) {
  std::lock_guard<std::mutex> lock(g_mu);
  uint32_t h = g_next++;
  g_models.emplace(h, std::move(m));
  return h;
}

std::shared_ptr<Model> model_arg(const Napi::CallbackInfo& info) {
  if (info.Length() < 1 || !info[0].IsNumber()) fail("invalid_argument", "expected a model handle");
  double h = info[0].As<Napi::Number>().DoubleValue();
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_models.find(uint32_t(h));
  if (h != std::floor(h) || h < 1 || it == g_models.end()) fail("unknown_model", "unknown or closed model handle");
  return it->second;
}

void remove_model(uint32_t handle) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_models.erase(handle);
}

}  // namespace splash::addon
