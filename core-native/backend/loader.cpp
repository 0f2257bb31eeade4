#include "backend/loader.h"

#include <dlfcn.h>

#include <string>

#include "runtime/error.h"
#include "runtime/options.h"

namespace splash {
namespace {

std::string g_note;

// The directory of the binary this code is linked into (the addon or a test executable).
std::string own_dir() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&own_dir), &info) && info.dli_fname) {
    std::string p = info.dli_fname;
    const size_t slash = p.rfind('/');
    if (slash != std::string::npos) return p.substr(0, slash);
  }
  return ".";
}

// The first required op (splash_op_required) the backend lacks, or null.
const char* missing_op(const splash_backend& b) {
  for (int i = 0; i < SPLASH_OP_COUNT; ++i) {
    const splash_op op = splash_op(i);
    if (splash_op_required(op) && !splash_backend_supports_op(&b, op)) return splash_op_name(op);
  }
  return nullptr;
}

bool open_cuda(BackendHandle& h, const Options& opt) {
  const std::string path = !opt.cuda_module.empty() ? opt.cuda_module : own_dir() + "/libsplash_cuda.so";
  void* mod = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!mod) {
    const char* e = dlerror();
    g_note = "cannot load " + path + ": " + (e ? e : "unknown error");
    return false;
  }
  auto create = reinterpret_cast<splash_backend_cuda_create_fn>(dlsym(mod, "splash_backend_cuda_create"));
  auto destroy = reinterpret_cast<splash_backend_cuda_free_fn>(dlsym(mod, "splash_backend_cuda_free"));
  // The module stays loaded for the life of the process (its static CUDA runtime keeps process-wide state).
  if (!create || !destroy) {
    g_note = path + " does not export the CUDA backend";
    return false;
  }
  splash_backend* b = create(opt.cuda_device);
  if (!b) {
    g_note = "no usable CUDA device";
    return false;
  }
  if (b->iface->abi_version != SPLASH_BACKEND_ABI) {
    g_note = "CUDA module ABI " + std::to_string(b->iface->abi_version) + " != " + std::to_string(SPLASH_BACKEND_ABI);
    destroy(b);
    return false;
  }
  if (const char* missing = missing_op(*b)) {
    g_note = std::string("the CUDA module lacks the required op ") + missing;
    destroy(b);
    return false;
  }
  h.backend = b;
  h.destroy = destroy;
  h.module = mod;
  g_note.clear();
  return true;
}

}  // namespace

const std::string& backend_cuda_note() { return g_note; }

bool backend_device_memory(const splash_backend& b, uint64_t& free, uint64_t& total, uint64_t& used, uint64_t& limit) {
  if (b.iface->host_memory || !b.iface->get_proc_address) return false;
  auto f = reinterpret_cast<int (*)(void*, uint64_t*)>(b.iface->get_proc_address(b.ctx, "splash_device_memory"));
  uint64_t v[4] = {};
  if (!f || !f(b.ctx, v)) return false;
  free = v[0], total = v[1], used = v[2], limit = v[3];
  return true;
}

bool backend_set_memory_limit(const splash_backend& b, uint64_t bytes) {
  if (b.iface->host_memory || !b.iface->get_proc_address) return false;
  auto f = reinterpret_cast<void (*)(void*, uint64_t)>(b.iface->get_proc_address(b.ctx, "splash_set_memory_limit"));
  if (!f) return false;
  f(b.ctx, bytes);
  return true;
}

BackendHandle backend_open(const std::string& name_in, int threads, const char* isa, int act_levels) {
  const Options opt = options_from_env();
  std::string name = name_in;
  if (name.empty() || name == "auto") name = !opt.backend.empty() ? opt.backend : "auto";
  if (name != "cpu" && name != "cuda" && name != "auto")
    throw Error("invalid_argument", "unknown backend '" + name + "' (cpu, cuda or auto)");
  BackendHandle h;
  if (name == "cuda" || name == "auto") {
    if (open_cuda(h, opt)) return h;
    if (name == "cuda") throw Error("unsupported", "CUDA backend unavailable: " + g_note);
  }
  h.backend = splash_backend_cpu_create(threads, isa, act_levels);
  if (!h.backend) throw Error("unsupported", std::string("this CPU cannot run ISA '") + (isa ? isa : "") + "'");
  h.destroy = splash_backend_cpu_free;
  return h;
}

void backend_close(BackendHandle& h) {
  if (h.backend && h.destroy) h.destroy(h.backend);
  h = BackendHandle{};  // the module itself stays loaded (see open_cuda)
}

}  // namespace splash
