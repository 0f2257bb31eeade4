#include "runtime/options.h"

#include <cstdlib>

namespace splash {

Options options_from_env() {
  Options o;
  auto env = [](const char* name) -> const char* {
    const char* v = std::getenv(name);
    return v && *v ? v : nullptr;
  };
  if (const char* v = env("SPLASH_BACKEND")) o.backend = v;
  if (const char* v = env("SPLASH_CUDA_MODULE")) o.cuda_module = v;
  if (const char* v = env("SPLASH_CUDA_DEVICE")) o.cuda_device = std::atoi(v);
  if (const char* v = env("SPLASH_DEVICE_ARGMAX")) o.device_argmax = v[0] != '0' || v[1] != '\0';
  if (const char* v = env("SPLASH_DEVICE_SAMPLE")) o.device_sample = v[0] == '0' && v[1] == '\0' ? 0 : 1;
  if (const char* v = env("SPLASH_SPEC_KERNELS")) o.spec_kernels = !(v[0] == '0' && v[1] == '\0');
  if (const char* v = env("SPLASH_CUDA_GRAPHS")) o.step_graphs = !(v[0] == '0' && v[1] == '\0');
  if (const char* v = env("SPLASH_GDN_ROLLBACK")) o.gdn_rollback = v;
  return o;
}

}  // namespace splash
