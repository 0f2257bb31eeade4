#include "runtime/package.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

namespace splash {

MappedFile::MappedFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error("io_error", "cannot open " + path + ": " + std::strerror(errno));
  struct stat st{};
  if (fstat(fd, &st) != 0) {
    ::close(fd);
    throw Error("io_error", "cannot stat " + path);
  }
  size_ = size_t(st.st_size);
  if (size_ > 0) {
    void* p = mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      throw Error("io_error", "cannot map " + path + ": " + std::strerror(errno));
    }
    data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (data_) munmap(const_cast<uint8_t*>(data_), size_);
}

namespace {

size_t dtype_size(const std::string& d) {
  if (d == "F32" || d == "U32" || d == "I32") return 4;
  if (d == "BF16" || d == "F16" || d == "I16" || d == "U16") return 2;
  if (d == "U8" || d == "I8" || d == "BOOL") return 1;
  if (d == "F64" || d == "I64" || d == "U64") return 8;
  return 0;
}

std::string read_text(const std::string& path) {
  MappedFile f(path);
  return std::string(reinterpret_cast<const char*>(f.data()), f.size());
}

}  // namespace

void Package::add_safetensors(const std::string& path, const std::string& prefix) {
  auto file = std::make_unique<MappedFile>(path);
  const uint8_t* base = file->data();
  const size_t size = file->size();
  if (size < 8) throw Error("bad_package", path + ": too small for safetensors");
  uint64_t hlen = 0;
  std::memcpy(&hlen, base, 8);
  if (hlen > size - 8) throw Error("bad_package", path + ": header length past end of file");
  Json header = Json::parse(reinterpret_cast<const char*>(base + 8), size_t(hlen));
  if (header.kind != Json::Object) throw Error("bad_package", path + ": header is not an object");
  const uint8_t* data = base + 8 + hlen;
  const size_t data_size = size - 8 - hlen;
  for (auto& [name, t] : header.obj) {
    if (name == "__metadata__" || name.rfind("__pad__", 0) == 0) continue;  // writer padding
    const Json* dt = t.find("dtype");
    const Json* sh = t.find("shape");
    const Json* off = t.find("data_offsets");
    if (!dt || !sh || !off || dt->kind != Json::String || sh->kind != Json::Array || off->kind != Json::Array ||
        off->arr.size() != 2)
      throw Error("bad_package", path + ": bad header entry for " + name);
    TensorInfo info;
    info.dtype = dt->str;
    for (auto& d : sh->arr) {
      if (d.kind != Json::Number || d.num < 0) throw Error("bad_package", path + ": bad shape for " + name);
      info.shape.push_back(int64_t(d.num));
    }
    const double b = off->arr[0].num, e = off->arr[1].num;
    if (b < 0 || e < b || e > double(data_size))
      throw Error("bad_package", path + ": data offsets out of range for " + name);
    const size_t es = dtype_size(info.dtype);
    if (es == 0) throw Error("bad_package", path + ": unsupported dtype " + info.dtype + " for " + name);
    info.data = data + size_t(b);
    info.bytes = size_t(e - b);
    if (size_t(info.numel()) * es != info.bytes)
      throw Error("bad_package", path + ": size does not match shape for " + name);
    tensor_bytes_ += info.bytes;
    if (!tensors_.emplace(prefix + name, std::move(info)).second)
      throw Error("bad_package", "tensor " + name + " appears twice");
  }
  files_.push_back(std::move(file));
}

std::unique_ptr<Package> Package::open(const std::string& dir, const std::function<void(const Json&)>& check) {
  auto pkg = std::unique_ptr<Package>(new Package());
  struct stat st{};
  if (::stat((dir + "/splash.json").c_str(), &st) != 0) {
    if (::stat((dir + "/config.json").c_str(), &st) == 0)
      throw Error("not_a_package", dir + " is not a Splash package; build one with `splash package build`");
    throw Error("io_error", "no splash.json in " + dir);
  }
  std::string text = read_text(dir + "/splash.json");
  pkg->manifest_ = Json::parse(text.data(), text.size());
  const Json& m = pkg->manifest_;
  const Json* fmt = m.find("format");
  if (!fmt || fmt->kind != Json::Number || fmt->num != 1)
    throw Error("bad_package", "splash.json: unsupported format (expected 1)");
  pkg->config_ = m.find("config");
  if (!pkg->config_ || pkg->config_->kind != Json::Object) throw Error("bad_package", "splash.json: no config object");
  if (check) check(m);
  const Json* weights = m.find("weights");
  const Json* files = weights ? weights->find("files") : nullptr;
  if (!files || files->kind != Json::Array || files->arr.empty())
    throw Error("bad_package", "splash.json: weights.files is missing");
  for (auto& f : files->arr) {
    if (f.kind != Json::String || f.str.empty() || f.str.find("..") != std::string::npos || f.str[0] == '/')
      throw Error("bad_package", "splash.json: bad weight file name");
    pkg->add_safetensors(dir + "/" + f.str);
  }
  return pkg;
}

const TensorInfo* Package::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

}  // namespace splash
