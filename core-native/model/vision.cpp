// The vision encoder, fp32 throughout (model-arch.md §6.2). Linears go through the backend's matmul;
// LayerNorm, rotary, attention and GELU are computed here.
#include "model/vision.h"

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

float gelu_tanh(float x) {
  const float k = 0.7978845608028654f;  // sqrt(2/pi)
  return 0.5f * x * (1.f + std::tanh(k * (x + 0.044715f * x * x * x)));
}
float gelu_erf(float x) { return 0.5f * x * (1.f + std::erf(x * 0.7071067811865476f)); }

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

std::unique_ptr<VisionEncoder> VisionEncoder::bind(const Json& vision, const Package& pkg, splash_backend* be,
                                                   int threads) {
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
  v->pool_ = std::make_unique<ThreadPool>(threads);
  return v;
}

void VisionEncoder::linear(const VisionLinear& l, const float* x, int n, float* y) const {
  be_->iface->matmul(be_->ctx, &l.w, x, n, y, l.w.rows);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t r = 0; r < l.w.rows; ++r) y[t * l.w.rows + r] += l.b[r];
}

void VisionEncoder::layer_norm(const float* w, const float* b, const float* x, int n, int dim, float* y) const {
  for (int t = 0; t < n; ++t) {
    const float* xr = x + int64_t(t) * dim;
    float* yr = y + int64_t(t) * dim;
    float mean = 0.f;
    for (int d = 0; d < dim; ++d) mean += xr[d];
    mean /= float(dim);
    float var = 0.f;
    for (int d = 0; d < dim; ++d) var += (xr[d] - mean) * (xr[d] - mean);
    const float inv = 1.f / std::sqrt(var / float(dim) + cfg_.eps);
    for (int d = 0; d < dim; ++d) yr[d] = (xr[d] - mean) * inv * w[d] + b[d];
  }
}

// Bilinear interpolation of the g×g position table onto the h×w patch grid (row-major), then permuted
// into merge-block order and repeated for each of the t frames.
void VisionEncoder::add_position_embedding(float* x, int t, int h, int w) const {
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
  size_t row = 0;
  for (int f = 0; f < t; ++f)
    for (int by = 0; by < h / m; ++by)
      for (int bx = 0; bx < w / m; ++bx)
        for (int r = 0; r < m; ++r)
          for (int cc = 0; cc < m; ++cc, ++row) {
            const float* src = pe.data() + (size_t(by * m + r) * w + (bx * m + cc)) * H;
            float* dst = x + row * H;
            for (int d = 0; d < H; ++d) dst[d] += src[d];
          }
}

// Bidirectional multi-head attention inside each frame, with the 2-D rotary applied to q and k.
void VisionEncoder::attention(const VisionBlock& blk, const float* x, int t, int hw, const float* cos, const float* sin,
                              float* y) {
  const int H = cfg_.H, nh = cfg_.heads, hd = cfg_.hd(), half = hd / 2, N = t * hw;
  std::vector<float> qkv(size_t(N) * 3 * H), o(size_t(N) * H);
  linear(blk.qkv, x, N, qkv.data());
  for (int i = 0; i < N; ++i)
    for (int s = 0; s < 2; ++s)  // q, k
      for (int h = 0; h < nh; ++h) {
        float* v = qkv.data() + size_t(i) * 3 * H + s * H + h * hd;
        const float* cr = cos + size_t(i) * hd;
        const float* sr = sin + size_t(i) * hd;
        for (int j = 0; j < half; ++j) {
          const float a = v[j], b = v[j + half];
          v[j] = a * cr[j] - b * sr[j];
          v[j + half] = b * cr[j + half] + a * sr[j + half];
        }
      }
  const float scale = 1.f / std::sqrt(float(hd));
  pool_->parallel_tasks(int64_t(N) * nh, [&](int64_t task) {
    const int i = int(task / nh), h = int(task % nh);
    const int f0 = (i / hw) * hw;
    const float* q = qkv.data() + size_t(i) * 3 * H + h * hd;
    std::vector<float> p(hw);
    float mx = -INFINITY;
    for (int j = 0; j < hw; ++j) {
      const float* k = qkv.data() + size_t(f0 + j) * 3 * H + H + h * hd;
      float s = 0.f;
      for (int d = 0; d < hd; ++d) s += q[d] * k[d];
      p[j] = s * scale;
      mx = std::max(mx, p[j]);
    }
    float den = 0.f;
    for (int j = 0; j < hw; ++j) den += (p[j] = std::exp(p[j] - mx));
    float* out = o.data() + size_t(i) * H + h * hd;
    std::fill(out, out + hd, 0.f);
    for (int j = 0; j < hw; ++j) {
      const float* vv = qkv.data() + size_t(f0 + j) * 3 * H + 2 * H + h * hd;
      const float wgt = p[j] / den;
      for (int d = 0; d < hd; ++d) out[d] += wgt * vv[d];
    }
  });
  linear(blk.proj, o.data(), N, y);
}

std::vector<float> VisionEncoder::encode(const float* pixels, int t, int h, int w) {
  const VisionConfig& c = cfg_;
  const int m = c.merge, H = c.H, hd = c.hd();
  if (t <= 0 || h <= 0 || w <= 0 || h % m || w % m) throw Error("invalid_argument", "bad image grid");
  const int hw = h * w, N = t * hw;
  std::vector<float> x(size_t(N) * H), xn(size_t(N) * H), y(size_t(N) * H), mid(size_t(N) * c.I);
  linear(patch_, pixels, N, x.data());
  add_position_embedding(x.data(), t, h, w);
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
  for (const VisionBlock& b : blocks_) {
    layer_norm(b.n1w, b.n1b, x.data(), N, H, xn.data());
    attention(b, xn.data(), t, hw, cos.data(), sin.data(), y.data());
    for (size_t i = 0; i < x.size(); ++i) x[i] += y[i];
    layer_norm(b.n2w, b.n2b, x.data(), N, H, xn.data());
    linear(b.fc1, xn.data(), N, mid.data());
    for (float& v : mid) v = c.gelu_tanh ? gelu_tanh(v) : gelu_erf(v);
    linear(b.fc2, mid.data(), N, y.data());
    for (size_t i = 0; i < x.size(); ++i) x[i] += y[i];
  }
  // merger: LayerNorm per patch, groups of merge² consecutive patches concatenated, fc1, exact GELU, fc2
  layer_norm(mnw_, mnb_, x.data(), N, H, xn.data());
  const int G = N / (m * m), M = H * m * m;
  std::vector<float> g1(size_t(G) * M), out(size_t(G) * c.out_H);
  linear(mfc1_, xn.data(), G, g1.data());
  for (float& v : g1) v = gelu_erf(v);
  linear(mfc2_, g1.data(), G, out.data());
  return out;
}

}  // namespace splash
