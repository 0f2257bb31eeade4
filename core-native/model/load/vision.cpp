// The vision encoder, fp32 throughout, on the model's backend: linears, LayerNorm, GELU,
// the table rotary and the per-frame attention are backend slots; only the grid-dependent tables are made here.
#include "model/load/vision.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "runtime/error.h"

namespace splash {
namespace {

[[noreturn]] void bad(const std::string& msg) { throw Error("bad_package", msg); }

int inum(const Json& c, const char* key, int def, bool required) {
  const Json* v = c.find(key);
  if (!v || v->isNull()) {
    if (required) bad(std::string("vision.config.") + key + " is missing");
    return def;
  }
  if (v->kind != Json::Number || v->num < 0 || v->num > 1e9 || v->num != std::floor(v->num))
    bad(std::string("vision.config.") + key + " is not a valid integer");
  return int(v->num);
}

// torch.linspace(0, end, steps) in fp32: the first half counts up from 0, the second half down from end.
std::vector<float> linspace(float end, int steps) {
  std::vector<float> v(steps);
  if (steps == 1) return {0.f};
  const float step = end / float(steps - 1);
  const int half = steps / 2;
  for (int i = 0; i < steps; ++i) v[i] = i < half ? float(i) * step : end - float(steps - 1 - i) * step;
  return v;
}

VisionConfig parse_vision_config(const Json& vision) {
  const Json* cj = vision.find("config");
  if (!cj || cj->kind != Json::Object) bad("splash.json: vision.config is missing");
  VisionConfig c;
  c.depth = inum(*cj, "depth", 0, true);
  c.H = inum(*cj, "hidden_size", 0, true);
  c.heads = inum(*cj, "num_heads", 0, true);
  c.I = inum(*cj, "intermediate_size", 0, true);
  c.patch = inum(*cj, "patch_size", 16, false);
  c.temporal = inum(*cj, "temporal_patch_size", 2, false);
  c.merge = inum(*cj, "spatial_merge_size", 2, false);
  c.in_ch = inum(*cj, "in_channels", 3, false);
  c.out_H = inum(*cj, "out_hidden_size", 0, true);
  c.n_pos = inum(*cj, "num_position_embeddings", 0, true);
  if (const Json* a = cj->find("hidden_act"); a && a->kind == Json::String) {
    if (a->str == "gelu_pytorch_tanh") c.gelu_tanh = true;
    else if (a->str == "gelu") c.gelu_tanh = false;
    else bad("vision.config.hidden_act '" + a->str + "' is not supported");
  }
  if (const Json* t = cj->find("rope_theta"); t && t->kind == Json::Number) c.theta = float(t->num);
  const int g = int(std::lround(std::sqrt(double(c.n_pos))));
  if (c.depth <= 0 || c.H <= 0 || c.heads <= 0 || c.H % c.heads || c.hd() % 4 || c.I <= 0 || c.out_H <= 0 ||
      c.patch <= 0 || c.temporal <= 0 || c.merge <= 0 || c.in_ch <= 0 || g * g != c.n_pos || g < 1)
    bad("bad vision config");
  return c;
}

}  // namespace

std::unique_ptr<VisionEncoder> VisionEncoder::bind(const Json& vision, const Package& pkg, splash_backend* be) {
  std::unique_ptr<VisionEncoder> v(new VisionEncoder());
  v->cfg_ = parse_vision_config(vision);
  const VisionConfig& c = v->cfg_;
  auto vec = [&](const std::string& name, int64_t n) -> const float* {
    const TensorInfo* t = pkg.find(name);
    if (!t) bad("missing tensor " + name);
    if (t->numel() != n) bad("tensor " + name + " has the wrong size");
    v->owned_.emplace_back(n);
    float* dst = v->owned_.back().data();
    if (t->dtype == "F32") {
      std::memcpy(dst, t->data, n * 4);
    } else if (t->dtype == "BF16") {
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, t->data + 2 * i, 2);
        uint32_t u = uint32_t(h) << 16;
        std::memcpy(dst + i, &u, 4);
      }
    } else {
      bad("tensor " + name + " must be F32 or BF16");
    }
    return dst;
  };
  auto lin = [&](const std::string& p, int64_t rows, int64_t cols) -> VisionLinear {
    const TensorInfo* w = pkg.find(p + ".weight");
    if (!w) bad("missing tensor " + p + ".weight");
    if (w->shape.size() != 2 || w->shape[0] != rows || w->shape[1] != cols) bad("tensor " + p + ".weight has the wrong shape");
    VisionLinear l;
    l.w.rows = rows;
    l.w.cols = cols;
    if (w->dtype == "BF16") l.w.dtype = SPLASH_BF16;
    else if (w->dtype == "F32") l.w.dtype = SPLASH_F32;
    else bad("tensor " + p + ".weight: vision linears are stored BF16 or F32");
    if (reinterpret_cast<uintptr_t>(w->data) % 4) bad("tensor " + p + " is misaligned");
    l.w.data = w->data;
    l.b = vec(p + ".bias", rows);
    return l;
  };
  const int H = c.H;
  v->patch_ = lin("visual.patch_embed", H, c.patch_dim());
  v->pos_ = vec("visual.pos_embed", int64_t(c.n_pos) * H);
  v->blocks_.resize(c.depth);
  for (int i = 0; i < c.depth; ++i) {
    VisionBlock& b = v->blocks_[i];
    const std::string p = "visual.blocks." + std::to_string(i) + ".";
    b.n1w = vec(p + "norm1.weight", H);
    b.n1b = vec(p + "norm1.bias", H);
    b.n2w = vec(p + "norm2.weight", H);
    b.n2b = vec(p + "norm2.bias", H);
    b.qkv = lin(p + "attn.qkv", 3 * H, H);
    b.proj = lin(p + "attn.proj", H, H);
    b.fc1 = lin(p + "mlp.fc1", c.I, H);
    b.fc2 = lin(p + "mlp.fc2", H, c.I);
  }
  const int M = H * c.merge * c.merge;
  v->mnw_ = vec("visual.merger.norm.weight", H);
  v->mnb_ = vec("visual.merger.norm.bias", H);
  v->mfc1_ = lin("visual.merger.fc1", M, M);
  v->mfc2_ = lin("visual.merger.fc2", c.out_H, M);
  v->be_ = be;
  if (!be->iface->host_memory) v->upload_weights();
  return v;
}

VisionEncoder::~VisionEncoder() {
  for (auto& [p, cap] : bufs_)
    if (p) be_->iface->buffer_free(be_->ctx, p);
  for (void* p : device_) be_->iface->buffer_free(be_->ctx, p);
}

void VisionEncoder::upload_weights() {
  const auto* be = be_->iface;
  auto up = [&](const void* src, size_t bytes) -> void* {
    void* d = be->buffer_alloc(be_->ctx, bytes);
    if (!d) throw Error("out_of_memory", "cannot allocate " + std::to_string(bytes) + " bytes of device memory for the vision tower");
    device_.push_back(d);
    be->copy_to_device(be_->ctx, d, src, bytes);
    return d;
  };
  auto vec = [&](const float*& p, int64_t n) { p = static_cast<const float*>(up(p, size_t(n) * 4)); };
  auto lin = [&](VisionLinear& l) {
    l.w.data = up(l.w.data, size_t(l.w.rows) * l.w.cols * (l.w.dtype == SPLASH_F32 ? 4 : 2));
    vec(l.b, l.w.rows);
  };
  const int H = cfg_.H;
  lin(patch_);
  for (VisionBlock& b : blocks_) {
    for (const float** p : {&b.n1w, &b.n1b, &b.n2w, &b.n2b}) vec(*p, H);
    for (VisionLinear* l : {&b.qkv, &b.proj, &b.fc1, &b.fc2}) lin(*l);
  }
  vec(mnw_, H);
  vec(mnb_, H);
  lin(mfc1_);
  lin(mfc2_);
  be->synchronize(be_->ctx);
}

float* VisionEncoder::buf(Buf b, size_t floats) {
  if (bufs_.size() != size_t(kNumBufs)) bufs_.assign(kNumBufs, {nullptr, 0});
  auto& [p, cap] = bufs_[b];
  if (floats > cap) {
    if (p) be_->iface->buffer_free(be_->ctx, p);
    p = static_cast<float*>(be_->iface->buffer_alloc(be_->ctx, floats * 4));
    if (!p) {
      cap = 0;
      throw Error("out_of_memory", "cannot allocate " + std::to_string(floats * 4) + " bytes for the vision encoder");
    }
    cap = floats;
  }
  return p;
}

float* VisionEncoder::upload(Buf b, const std::vector<float>& host) {
  float* d = buf(b, host.size());
  be_->iface->copy_to_device(be_->ctx, d, host.data(), host.size() * 4);
  return d;
}

void VisionEncoder::linear(const VisionLinear& l, const float* x, int n, float* y) const {
  be_->iface->matmul(be_->ctx, &l.w, x, n, y, l.w.rows);
  be_->iface->add_bias(be_->ctx, y, l.b, n, int32_t(l.w.rows));
}

// Bilinear interpolation of the g×g position table onto the h×w patch grid (row-major), then permuted
// into merge-block order and repeated for each of the t frames.
std::vector<float> VisionEncoder::position_embedding(int t, int h, int w) const {
  const VisionConfig& c = cfg_;
  const int H = c.H, g = int(std::lround(std::sqrt(double(c.n_pos)))), m = c.merge;
  const std::vector<float> hs = linspace(float(g - 1), h), ws = linspace(float(g - 1), w);
  std::vector<float> pe(size_t(h) * w * H);
  for (int y = 0; y < h; ++y) {
    const int h0 = int(hs[y]), h1 = std::min(h0 + 1, g - 1);
    const float dh = hs[y] - float(h0);
    for (int xx = 0; xx < w; ++xx) {
      const int w0 = int(ws[xx]), w1 = std::min(w0 + 1, g - 1);
      const float dw = ws[xx] - float(w0);
      const float k[4] = {(1 - dh) * (1 - dw), (1 - dh) * dw, dh * (1 - dw), dh * dw};
      const float* e[4] = {pos_ + size_t(h0 * g + w0) * H, pos_ + size_t(h0 * g + w1) * H, pos_ + size_t(h1 * g + w0) * H,
                           pos_ + size_t(h1 * g + w1) * H};
      float* o = pe.data() + (size_t(y) * w + xx) * H;
      for (int d = 0; d < H; ++d) o[d] = e[0][d] * k[0] + e[1][d] * k[1] + e[2][d] * k[2] + e[3][d] * k[3];
    }
  }
  std::vector<float> out(size_t(t) * h * w * H);
  size_t row = 0;
  for (int f = 0; f < t; ++f)
    for (int by = 0; by < h / m; ++by)
      for (int bx = 0; bx < w / m; ++bx)
        for (int r = 0; r < m; ++r)
          for (int cc = 0; cc < m; ++cc, ++row) {
            const float* src = pe.data() + (size_t(by * m + r) * w + (bx * m + cc)) * H;
            std::copy(src, src + H, out.data() + row * H);
          }
  return out;
}

std::vector<float> VisionEncoder::encode(const float* pixels, int t, int h, int w) {
  const VisionConfig& c = cfg_;
  const int m = c.merge, H = c.H, hd = c.hd(), nh = c.heads;
  if (t <= 0 || h <= 0 || w <= 0 || h % m || w % m) throw Error("invalid_argument", "bad image grid");
  const auto* be = be_->iface;
  void* bc = be_->ctx;
  const int hw = h * w, N = t * hw;
  const size_t P = size_t(c.patch_dim());
  float* px = buf(kPix, size_t(N) * P);
  be->copy_to_device(bc, px, pixels, size_t(N) * P * 4);
  float* x = buf(kX, size_t(N) * H);
  float* xn = buf(kXn, size_t(N) * H);
  float* y = buf(kY, size_t(N) * H);
  float* qkv = buf(kQKV, size_t(N) * 3 * H);
  float* o = buf(kO, size_t(N) * H);
  float* mid = buf(kMid, size_t(N) * c.I);
  linear(patch_, px, N, x);
  be->add(bc, x, upload(kPos, position_embedding(t, h, w)), int64_t(N) * H);
  // rotary tables: per patch (row, col) in merge-block order; freqs = [row·inv | col·inv], emb = [freqs | freqs]
  const int quarter = hd / 4;  // inv_freq entries per axis
  std::vector<float> inv(quarter);
  for (int i = 0; i < quarter; ++i) inv[i] = 1.f / std::pow(c.theta, float(2 * i) / float(hd / 2));
  std::vector<float> cos(size_t(N) * hd), sin(size_t(N) * hd);
  {
    size_t row = 0;
    for (int f = 0; f < t; ++f)
      for (int by = 0; by < h / m; ++by)
        for (int bx = 0; bx < w / m; ++bx)
          for (int r = 0; r < m; ++r)
            for (int cc = 0; cc < m; ++cc, ++row) {
              const float pr = float(by * m + r), pc = float(bx * m + cc);
              for (int i = 0; i < quarter; ++i) {
                const float a = pr * inv[i], b = pc * inv[i];
                for (int rep = 0; rep < 2; ++rep) {
                  cos[row * hd + rep * (hd / 2) + i] = std::cos(a);
                  sin[row * hd + rep * (hd / 2) + i] = std::sin(a);
                  cos[row * hd + rep * (hd / 2) + quarter + i] = std::cos(b);
                  sin[row * hd + rep * (hd / 2) + quarter + i] = std::sin(b);
                }
              }
            }
  }
  const float* dcos = upload(kCos, cos);
  const float* dsin = upload(kSin, sin);
  splash_seg_attn_args att{};
  att.n_tokens = N;
  att.n_heads = nh;
  att.head_dim = hd;
  att.segment = hw;  // attention stays inside each frame
  att.q = qkv;
  att.k = qkv + H;
  att.v = qkv + 2 * H;
  att.stride = 3 * H;
  att.out = o;
  att.scale = 1.f / std::sqrt(float(hd));
  for (const VisionBlock& b : blocks_) {
    be->layer_norm(bc, x, b.n1w, b.n1b, N, H, c.eps, xn);
    linear(b.qkv, xn, N, qkv);
    be->rope_table(bc, qkv, N, 3 * H, 2 * nh, hd, hd, dcos, dsin);  // the q heads, then the k heads
    be->seg_attention(bc, &att);
    linear(b.proj, o, N, y);
    be->add(bc, x, y, int64_t(N) * H);
    be->layer_norm(bc, x, b.n2w, b.n2b, N, H, c.eps, xn);
    linear(b.fc1, xn, N, mid);
    be->gelu(bc, mid, int64_t(N) * c.I, c.gelu_tanh ? 1 : 0);
    linear(b.fc2, mid, N, y);
    be->add(bc, x, y, int64_t(N) * H);
  }
  // merger: LayerNorm per patch, groups of merge² consecutive patches concatenated, fc1, exact GELU, fc2
  be->layer_norm(bc, x, mnw_, mnb_, N, H, c.eps, xn);
  const int G = N / (m * m), M = H * m * m;
  float* g1 = buf(kG1, size_t(G) * M);
  float* dout = buf(kOut, size_t(G) * c.out_H);
  linear(mfc1_, xn, G, g1);
  be->gelu(bc, g1, int64_t(G) * M, 0);
  linear(mfc2_, g1, G, dout);
  std::vector<float> out(size_t(G) * c.out_H);
  be->copy_to_host(bc, out.data(), dout, out.size() * 4);
  if (auto* gpa = be->get_proc_address)
    if (auto last = reinterpret_cast<const char* (*)(void*)>(gpa(bc, "splash_last_error")))
      if (const char* e = last(bc)) throw Error("backend_error", std::string(be->name) + " backend (vision encoder): " + e);
  return out;
}

}  // namespace splash
