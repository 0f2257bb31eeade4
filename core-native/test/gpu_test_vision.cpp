// splash_gpu_test's vision checks: the encoder's ops against the CPU backend, a package's encoder and an image
// prompt on CUDA against the CPU, and the encoder's time per image.
#include <algorithm>
#include <array>
#include <stdexcept>

#include "test/gpu_test_util.h"

namespace splash::gputest {

// The vision encoder's slots and its matmul shapes: LayerNorm with bias, bias add, both GELUs, the
// rotary from 2-D tables on the q and k heads of a packed qkv row, bidirectional attention per segment.
void test_vision_ops(Be& cpu, Be& g) {
  for (int dim : {64, 1152}) {
    const int n = 37;
    auto x = randv(size_t(n) * dim, -2.f, 3.f), w = randv(dim, 0.5f, 1.5f), b = randv(dim, -0.2f, 0.2f);
    std::vector<float> r(x.size());
    cpu.i->layer_norm(cpu.c, x.data(), w.data(), b.data(), n, dim, 1e-6f, r.data());
    float* d = static_cast<float*>(g.alloc(r.size() * 4));
    g.i->layer_norm(g.c, g.up(x), g.up(w), g.up(b), n, dim, 1e-6f, d);
    report(("layer_norm 37x" + std::to_string(dim)).c_str(), r, g.down(d, r.size()), 1e-5);
    r = x;
    cpu.i->add_bias(cpu.c, r.data(), b.data(), n, dim);
    float* dx = g.up(x);
    g.i->add_bias(g.c, dx, g.up(b), n, dim);
    report(("add_bias 37x" + std::to_string(dim)).c_str(), r, g.down(dx, r.size()), 1e-6);
    for (int approx : {1, 0}) {
      auto v = randv(size_t(n) * dim, -6.f, 6.f);
      r = v;
      cpu.i->gelu(cpu.c, r.data(), int64_t(r.size()), approx);
      float* dv = g.up(v);
      g.i->gelu(g.c, dv, int64_t(v.size()), approx);
      report(approx ? "gelu (tanh)" : "gelu (erf)", r, g.down(dv, r.size()), 1e-6);
    }
  }
  {  // rotary on the q and k heads of [N, 3H] rows (hd 72: the Qwen3.5 tower), positions up to 60
    const int N = 50, nh = 4, hd = 72, H = nh * hd;
    auto x = randv(size_t(N) * 3 * H), cs = randv(size_t(N) * hd), sn = randv(size_t(N) * hd);
    for (int i = 0; i < N; ++i)
      for (int j = 0; j < hd; ++j) {
        const float a = float(i % 60) * std::pow(10000.f, -float(2 * (j % (hd / 4))) / float(hd / 2));
        cs[size_t(i) * hd + j] = std::cos(a);
        sn[size_t(i) * hd + j] = std::sin(a);
      }
    auto r = x;
    cpu.i->rope_table(cpu.c, r.data(), N, 3 * H, 2 * nh, hd, hd, cs.data(), sn.data());
    float* dx = g.up(x);
    g.i->rope_table(g.c, dx, N, 3 * H, 2 * nh, hd, hd, g.up(cs), g.up(sn));
    report("rope_table hd=72 (q and k of qkv rows)", r, g.down(dx, r.size()), 1e-6);
  }
  // attention: one segment, two frames, a partial last segment; head dims of the fixtures, Qwen3.5 (72), 128
  for (auto [N, seg, nh, hd] : {std::array{77, 77, 2, 32}, {200, 100, 3, 72}, {1100, 1100, 2, 72}, {130, 60, 2, 128},
                                {96, 48, 16, 64}}) {
    const int64_t st = 3 * int64_t(nh) * hd;
    auto qkv = randv(size_t(N) * st, -2.f, 2.f);
    std::vector<float> r(size_t(N) * nh * hd);
    splash_seg_attn_args a{N, nh, hd, seg, qkv.data(), qkv.data() + nh * hd, qkv.data() + 2 * nh * hd, st, r.data(),
                           1.f / std::sqrt(float(hd))};
    cpu.i->seg_attention(cpu.c, &a);
    float* dq = g.up(qkv);
    float* dout = static_cast<float*>(g.alloc(r.size() * 4));
    splash_seg_attn_args ad{N, nh, hd, seg, dq, dq + nh * hd, dq + 2 * nh * hd, st, dout, a.scale};
    g.i->seg_attention(g.c, &ad);
    char what[80];
    std::snprintf(what, sizeof what, "seg_attention T=%d segment=%d heads=%d hd=%d", N, seg, nh, hd);
    report(what, r, g.down(dout, r.size()), 1e-5);
  }
  // the encoder's matmul shapes: patch embedding (1536 inputs), a merger fc2-like 4304-input bf16 weight
  for (auto [R, Cc, nt] : {std::array{1152, 1536, 64}, {64, 4304, 24}, {128, 1536, 6}}) {
    char what[80];
    std::snprintf(what, sizeof what, "matmul bf16 %dx%d tokens=%d (vision)", R, Cc, nt);
    matmul_case(cpu, g, SPLASH_BF16, R, Cc, nt, what, nt > 8 ? 1e-2 : 1e-4);
  }
}

// A package with a vision tower: the encoder on both backends (two images, one of two frames), then a prompt
// holding the first image (its embeddings in place of the pads, M-RoPE (T, H, W) ids), two decode steps, a verify
// pass and a rollback at positions shifted by the rope delta.
void test_image(Model& cpu, Model& gpu, const std::string& name, bool precise) {
  const VisionConfig& vc = cpu.vision()->config();
  const int P = vc.patch_dim(), V = cpu.config().V;
  std::vector<std::vector<float>> ea, eb;
  for (auto [t, h, w] : {std::array{1, 4, 6}, {2, 6, 4}, {1, 32, 32}}) {
    auto px = randv(size_t(t) * h * w * P);
    ea.push_back(cpu.encode_image(px.data(), t, h, w));
    eb.push_back(gpu.encode_image(px.data(), t, h, w));
    char what[64];
    std::snprintf(what, sizeof what, "image embeddings grid %dx%dx%d", t, h, w);
    // default mode: the encoder's GEMMs take bf16 activations
    report((name + what).c_str(), ea.back(), eb.back(), precise ? 1e-4 : 3e-2);
  }
  // prompt: 5 text tokens, the 2×3 merged grid of image 0, 6 text tokens
  const int G = int(ea[0].size()) / cpu.config().H, mh = 2, mw = 3;
  std::vector<int32_t> toks, pos, at;
  int cur = 0;
  for (int i = 0; i < 5; ++i, ++cur) toks.push_back((i * 29 + 3) % V), pos.insert(pos.end(), {cur, cur, cur});
  for (int r = 0; r < mh; ++r)
    for (int c = 0; c < mw; ++c) at.push_back(int32_t(toks.size())), toks.push_back(7 % V), pos.insert(pos.end(), {cur, cur + r, cur + c});
  cur += std::max(mh, mw);
  for (int i = 0; i < 6; ++i, ++cur) toks.push_back((i * 41 + 17) % V), pos.insert(pos.end(), {cur, cur, cur});
  if (G != mh * mw) throw std::runtime_error("unexpected merged grid");
  const int delta = cur - int(toks.size());
  auto run = [&](Model& m, const std::vector<float>& emb, std::vector<std::vector<float>>& all) {
    OneSeq one(m, 64);
    const int32_t id = one.id;
    auto& items = one.items;
    auto& out = one.out;
    items[0].tokens = toks;
    items[0].logits = 2;
    items[0].embed_at = at;
    items[0].embeds = emb;
    items[0].positions = pos;
    m.step(items, out);
    all.push_back(out[0]);
    items[0].embed_at.clear();
    items[0].embeds.clear();
    for (int s = 0; s < 2; ++s) {
      const int32_t p = m.find(id)->len + delta;
      items[0].tokens = {int32_t((s * 13 + 5) % V)};
      items[0].positions = {p, p, p};
      items[0].logits = 1;
      m.step(items, out);
      all.push_back(out[0]);
    }
    // a verify pass after the image (as speculative decoding runs it: shifted positions), then a rollback
    const int32_t p = m.find(id)->len + delta;
    items[0].tokens = {3 % V, 9 % V, 27 % V};
    items[0].positions = {p, p, p, p + 1, p + 1, p + 1, p + 2, p + 2, p + 2};
    items[0].logits = 2;
    items[0].verify = true;
    m.step(items, out);
    all.push_back(out[0]);
    m.truncate_sequence(id, m.find(id)->len - 2);
    const int32_t q = m.find(id)->len + delta;
    items[0].tokens = {5 % V};
    items[0].positions = {q, q, q};
    items[0].logits = 1;
    items[0].verify = false;
    m.step(items, out);
    all.push_back(out[0]);
  };
  std::vector<std::vector<float>> a, b;
  run(cpu, ea[0], a);
  run(gpu, eb[0], b);
  const char* what[] = {"prompt with an image", "decode after the image 1", "decode after the image 2",
                        "verify 3 after the image", "after rollback (image)"};
  for (size_t i = 0; i < a.size(); ++i) report((name + what[i]).c_str(), a[i], b[i], precise ? 1e-4 : 1.5e-1);
}

// Encoder time for one image of size×size pixels (grid size/16 square) on `backend`, for each size: the best
// of 3 after a warm-up on CUDA, one run on the CPU. fp32 activations on the CPU; CUDA's default numerics.
void bench_vision(const std::string& dir, const std::string& backend, const std::vector<int>& sizes) {
  auto m = Model::open(dir, 0, nullptr, 0, false, backend);
  if (!m->vision()) throw std::runtime_error(dir + " has no vision tower");
  const VisionConfig& vc = m->vision()->config();
  for (int px : sizes) {
    const int gh = px / vc.patch, n = gh * gh;
    auto pixels = randv(size_t(n) * vc.patch_dim());
    const int reps = backend == "cuda" ? 3 : 1;
    if (backend == "cuda") m->encode_image(pixels.data(), 1, gh, gh);
    double best = 1e30;
    for (int r = 0; r < reps; ++r) {
      const double t0 = now();
      m->encode_image(pixels.data(), 1, gh, gh);
      best = std::min(best, now() - t0);
    }
    std::printf("vision encoder (%s, depth %d, hidden %d, %d heads of %d): %dx%d image = %d patches: %.1f ms\n",
                backend.c_str(), vc.depth, vc.H, vc.heads, vc.hd(), px, px, n, best * 1e3);
  }
}

}  // namespace splash::gputest
