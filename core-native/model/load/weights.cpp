// Model loading: normalised config from splash.json and weights bound in place.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <thread>

#include "model/hybrid_model.h"
#include "model/state/state_sizes.h"
#include "runtime/error.h"

namespace splash {
namespace {

[[noreturn]] void bad(const std::string& msg) { throw Error("bad_package", msg); }

double num(const Json& c, const char* key, double def, bool required = false) {
  const Json* v = c.find(key);
  if (!v || v->isNull()) {
    if (required) bad(std::string("config.") + key + " is missing");
    return def;
  }
  if (v->kind == Json::Bool) return v->b ? 1 : 0;
  if (v->kind != Json::Number) bad(std::string("config.") + key + " is not a number");
  return v->num;
}
int inum(const Json& c, const char* key, int def, bool required = false) {
  double d = num(c, key, def, required);
  if (d < 0 || d > 1e9 || d != std::floor(d)) bad(std::string("config.") + key + " is not a valid integer");
  return int(d);
}
bool flag(const Json& c, const char* key, bool def) {
  const Json* v = c.find(key);
  if (!v || v->isNull()) return def;
  if (v->kind != Json::Bool) bad(std::string("config.") + key + " is not a boolean");
  return v->b;
}

// The DFlash 2 keys of draft.config (model/config.h DraftConfig); absent or null keys leave a DFlash draft.
void parse_draft2(const Json& cj, DraftConfig& d, int V) {
  d.window = inum(cj, "sliding_window", 0);
  const Json* kinds = cj.find("layer_types");
  const Json* causal = cj.find("is_causal");
  for (int i = 0; i < d.L; ++i) {
    bool sl = false;
    if (kinds && !kinds->isNull()) {
      if (kinds->kind != Json::Array || int(kinds->arr.size()) != d.L) bad("draft.config.layer_types must have one entry per layer");
      const Json& k = kinds->arr[i];
      if (k.kind != Json::String || (k.str != "sliding_attention" && k.str != "full_attention")) bad("bad draft.config.layer_types entry");
      sl = k.str == "sliding_attention";
    }
    if (sl && d.window <= 0) bad("draft.config: sliding_attention layers need sliding_window");
    d.sliding.push_back(sl);
    // as the reference code: without is_causal, sliding layers are causal and full ones bidirectional
    d.causal.push_back(causal && !causal->isNull() ? flag(cj, "is_causal", false) : sl);
  }
  d.conv_k = inum(cj, "conv_kernel_size", 0);
  d.conv_g = inum(cj, "conv_group_size", 0);
  if ((d.conv_k > 0) != (d.conv_g > 0) || (d.conv_g > 0 && d.H % d.conv_g)) bad("bad draft.config conv_kernel_size / conv_group_size");
  d.sel_rank = inum(cj, "selector_rank", 0);
  d.sel_k = inum(cj, "selector_top_k", 0);
  if ((d.sel_rank > 0) != (d.sel_k > 0) || d.sel_k > V) bad("bad draft.config selector_rank / selector_top_k");
  d.out_mul = float(num(cj, "output_multiplier", 1.0));
  d.softcap = float(num(cj, "final_logit_softcapping", 0.0));
  if (!(d.out_mul > 0.f) || d.softcap < 0.f) bad("bad draft.config output_multiplier / final_logit_softcapping");
}

}  // namespace

ModelConfig parse_model_config(const Json& m) {
  ModelConfig c;
  const Json& j = *m.find("config");
  const Json* fam = m.find("family");
  c.family = fam && fam->kind == Json::String ? fam->str : "";
  if (c.family != "qwen3_5" && c.family != "qwen3_5_moe" && c.family != "qwen3_next" && c.family != "qwen3")
    throw Error("unsupported", "unsupported model family '" + c.family + "'");
  c.H = inum(j, "hidden_size", 0, true);
  c.L = inum(j, "num_hidden_layers", 0, true);
  c.V = inum(j, "vocab_size", 0, true);
  c.eps = float(num(j, "rms_norm_eps", 1e-6));
  c.nh = inum(j, "num_attention_heads", 0, true);
  c.nkv = inum(j, "num_key_value_heads", c.nh);
  c.hd = inum(j, "head_dim", c.nh ? c.H / c.nh : 0);
  c.attn_gate = flag(j, "attn_output_gate", c.family != "qwen3");
  c.rope_theta = float(num(j, "rope_theta", 10000.0));
  const double prf = num(j, "partial_rotary_factor", c.family == "qwen3" ? 1.0 : 0.25);
  c.rot_dim = int(c.hd * prf);
  if (c.rot_dim % 2 || c.rot_dim <= 0 || c.rot_dim > c.hd) bad("bad rotary dimension");
  if (const Json* s = j.find("mrope_section"); s && s->kind == Json::Array) {
    if (s->arr.size() != 3) bad("mrope_section must have 3 entries");
    for (auto& v : s->arr) c.mrope.push_back(int32_t(v.num));
  }
  c.nk = inum(j, "linear_num_key_heads", 0);
  c.nv = inum(j, "linear_num_value_heads", 0);
  c.dk = inum(j, "linear_key_head_dim", 0);
  c.dv = inum(j, "linear_value_head_dim", 0);
  c.conv_k = inum(j, "linear_conv_kernel_dim", 4);
  c.I = inum(j, "intermediate_size", 0);
  c.E = inum(j, "num_experts", 0);
  c.topk = inum(j, "num_experts_per_tok", 0);
  c.Im = inum(j, "moe_intermediate_size", 0);
  c.Is = inum(j, "shared_expert_intermediate_size", 0);
  c.renorm_topk = flag(j, "norm_topk_prob", false) || c.family == "qwen3_5_moe";
  c.tie = flag(j, "tie_word_embeddings", false);
  c.max_pos = inum(j, "max_position_embeddings", 0);
  const Json* lt = j.find("layer_types");
  for (int i = 0; i < c.L; ++i) {
    bool lin = false;
    if (lt && lt->kind == Json::Array) {
      if (int(lt->arr.size()) != c.L) bad("layer_types has the wrong length");
      const std::string& s = lt->arr[i].str;
      if (s == "linear_attention") lin = true;
      else if (s != "full_attention") bad("unknown layer type '" + s + "'");
    } else if (c.family != "qwen3") {
      lin = (i + 1) % 4 != 0;
    }
    c.linear.push_back(lin);
  }
  if (c.H <= 0 || c.L <= 0 || c.V <= 0 || c.nh <= 0 || c.nkv <= 0 || c.hd <= 0 || c.nh % c.nkv) bad("bad attention shape");
  for (bool lin : c.linear)
    if (lin && (c.nk <= 0 || c.nv <= 0 || c.dk <= 0 || c.dv <= 0 || c.nv % c.nk || c.conv_k < 1)) bad("bad GDN shape");
  if (c.E > 0 && (c.topk <= 0 || c.topk > c.E || c.Im <= 0)) bad("bad MoE shape");
  return c;
}

DraftConfig parse_draft_config(const Json& cj, const ModelConfig& c) {
  DraftConfig d;
  d.B = inum(cj, "block_size", 0, true);
  d.mask = inum(cj, "mask_token_id", 0, true);
  d.L = inum(cj, "num_hidden_layers", 0, true);
  d.H = inum(cj, "hidden_size", 0, true);
  d.I = inum(cj, "intermediate_size", 0, true);
  d.nh = inum(cj, "num_attention_heads", 0, true);
  d.nkv = inum(cj, "num_key_value_heads", d.nh);
  d.hd = inum(cj, "head_dim", d.nh ? d.H / d.nh : 0);
  d.theta = float(num(cj, "rope_theta", 10000.0));
  d.eps = float(num(cj, "rms_norm_eps", 1e-6));
  const Json* taps = cj.find("target_layer_ids");
  if (!taps || taps->kind != Json::Array || taps->arr.empty()) bad("draft.config.target_layer_ids is missing");
  for (auto& t : taps->arr) {
    if (t.kind != Json::Number || t.num < 0 || t.num >= c.L) bad("draft.config.target_layer_ids is out of range");
    d.taps.push_back(int(t.num));
  }
  if (d.B < 2 || d.mask < 0 || d.mask >= c.V || d.L <= 0 || d.H != c.H || d.nh <= 0 || d.nkv <= 0 ||
      d.nh % d.nkv || d.hd <= 0 || d.hd > 512 || d.hd % 2)
    bad("bad draft config");
  parse_draft2(cj, d, c.V);
  return d;
}

splash_weight Stacked::expert(int64_t e) const {
  splash_weight w = base;
  const int64_t C = base.cols, R = base.rows;
  const int64_t G = C / 64;
  size_t row_bytes = base.dtype == SPLASH_F32 ? C * 4 : base.dtype == SPLASH_BF16 ? C * 2
                     : base.dtype == SPLASH_Q8 ? C : C / 2;
  w.data = static_cast<const uint8_t*>(base.data) + size_t(e) * R * row_bytes;
  if (base.scales) {
    w.scales = base.scales + size_t(e) * R * G;
    w.biases = base.biases + size_t(e) * R * G;
  }
  return w;
}

void HybridModel::bind_weights() {
  const ModelConfig& c = cfg_;
  auto vec = [&](const std::string& name, int64_t n) -> const float* {
    const TensorInfo* t = pkg_->find(name);
    if (!t) bad("missing tensor " + name);
    if (t->numel() != n) bad("tensor " + name + " has " + std::to_string(t->numel()) + " values, expected " + std::to_string(n));
    if (t->dtype == "F32") {
      if (reinterpret_cast<uintptr_t>(t->data) % 4 == 0) return reinterpret_cast<const float*>(t->data);
      owned_.emplace_back(n);
      std::memcpy(owned_.back().data(), t->data, n * 4);
      return owned_.back().data();
    }
    if (t->dtype == "BF16") {
      owned_.emplace_back(n);
      for (int64_t i = 0; i < n; ++i) {
        uint16_t v;
        std::memcpy(&v, t->data + 2 * i, 2);
        uint32_t u = uint32_t(v) << 16;
        std::memcpy(&owned_.back()[i], &u, 4);
      }
      return owned_.back().data();
    }
    bad("tensor " + name + " must be F32");
  };
  // A linear weight [E?][rows, cols] stored bf16/f32 or q4/q8 (MLX affine).
  auto lin = [&](const std::string& p, int64_t rows, int64_t cols, int64_t E = 0) -> splash_weight {
    const TensorInfo* w = pkg_->find(p + ".weight");
    if (!w) bad("missing tensor " + p + ".weight");
    const size_t lead = E ? 1 : 0;
    if (w->shape.size() != 2 + lead || (E && w->shape[0] != E)) bad("tensor " + p + ".weight has the wrong rank");
    splash_weight sw{};
    sw.rows = rows;
    sw.cols = cols;
    if (const TensorInfo* s = pkg_->find(p + ".scales")) {
      const TensorInfo* b = pkg_->find(p + ".biases");
      if (!b || w->dtype != "U32" || s->dtype != "BF16" || b->dtype != "BF16" || s->shape != b->shape ||
          s->shape.size() != w->shape.size())
        bad("quantized tensor " + p + " is malformed (U32 weight, BF16 scales/biases expected)");
      const int64_t wc = w->shape.back(), sc = s->shape.back();
      if (sc == 0 || (32 * wc) % (64 * sc)) bad("tensor " + p + ": bad quantized shape");
      const int64_t bits = 32 * wc / (64 * sc);
      if (bits != 4 && bits != 8) bad("tensor " + p + ": only 4- and 8-bit weights are supported");
      if (w->shape[lead] != rows || wc * 32 / bits != cols || s->shape[lead] != rows || cols % 64)
        bad("tensor " + p + " has the wrong shape");
      sw.dtype = bits == 4 ? SPLASH_Q4 : SPLASH_Q8;
      sw.scales = reinterpret_cast<const uint16_t*>(s->data);
      sw.biases = reinterpret_cast<const uint16_t*>(b->data);
      if (reinterpret_cast<uintptr_t>(s->data) % 2 || reinterpret_cast<uintptr_t>(b->data) % 2)
        bad("tensor " + p + " is misaligned");
    } else {
      if (w->dtype == "BF16") sw.dtype = SPLASH_BF16;
      else if (w->dtype == "F32") sw.dtype = SPLASH_F32;
      else bad("tensor " + p + ".weight: unsupported dtype " + w->dtype);
      if (w->shape[lead] != rows || w->shape[lead + 1] != cols) bad("tensor " + p + ".weight has the wrong shape");
      if (reinterpret_cast<uintptr_t>(w->data) % 4) bad("tensor " + p + " is misaligned");
    }
    sw.data = w->data;
    return sw;
  };

  embed_ = lin("embed_tokens", c.V, c.H);
  lm_head_ = c.tie ? embed_ : lin("lm_head", c.V, c.H);
  norm_ = vec("norm", c.H);
  layers_.resize(c.L);
  int64_t gdn = 0, nfull = 0, nlin = 0;
  for (int i = 0; i < c.L; ++i) {
    Layer& l = layers_[i];
    const std::string p = "layers." + std::to_string(i) + ".";
    l.linear = c.linear[i];
    l.in_norm = vec(p + "input_layernorm", c.H);
    l.post_norm = vec(p + "post_attention_layernorm", c.H);
    if (l.linear) {
      const int64_t C = c.conv_ch();
      l.qkv = lin(p + "linear_attn.in_proj_qkv", C, c.H);
      l.z = lin(p + "linear_attn.in_proj_z", c.Dv(), c.H);
      l.b = lin(p + "linear_attn.in_proj_b", c.nv, c.H);
      l.a = lin(p + "linear_attn.in_proj_a", c.nv, c.H);
      l.b.flags = l.a.flags = SPLASH_WEIGHT_EXACT;
      l.out = lin(p + "linear_attn.out_proj", c.H, c.Dv());
      l.conv = vec(p + "linear_attn.conv1d", C * c.conv_k);
      l.A_log = vec(p + "linear_attn.A_log", c.nv);
      l.dt_bias = vec(p + "linear_attn.dt_bias", c.nv);
      l.gnorm = vec(p + "linear_attn.norm", c.dv);
      l.gdn_index = nlin++;
      l.conv_off = gdn;
      gdn += int64_t(c.conv_k - 1) * C;
      l.ssm_off = gdn;
      gdn += int64_t(c.nv) * c.dk * c.dv;
    } else {
      l.q = lin(p + "self_attn.q_proj", int64_t(c.nh) * c.hd * (c.attn_gate ? 2 : 1), c.H);
      l.k = lin(p + "self_attn.k_proj", int64_t(c.nkv) * c.hd, c.H);
      l.v = lin(p + "self_attn.v_proj", int64_t(c.nkv) * c.hd, c.H);
      l.o = lin(p + "self_attn.o_proj", c.H, int64_t(c.nh) * c.hd);
      l.q_norm = vec(p + "self_attn.q_norm", c.hd);
      l.k_norm = vec(p + "self_attn.k_norm", c.hd);
      l.kv_index = nfull++;
    }
    l.moe = pkg_->find(p + "mlp.router.weight") != nullptr;
    if (l.moe) {
      if (c.E <= 0) bad("layer " + std::to_string(i) + " has a router but config.num_experts is 0");
      l.router = lin(p + "mlp.router", c.E, c.H);
      l.router.flags = SPLASH_WEIGHT_EXACT;
      l.eg.base = lin(p + "mlp.experts.gate_proj", c.Im, c.H, c.E);
      l.eu.base = lin(p + "mlp.experts.up_proj", c.Im, c.H, c.E);
      l.ed.base = lin(p + "mlp.experts.down_proj", c.H, c.Im, c.E);
      l.eg.E = l.eu.E = l.ed.E = c.E;
      l.shared = c.Is > 0;
      if (l.shared) {
        l.sg = lin(p + "mlp.shared_expert.gate_proj", c.Is, c.H);
        l.su = lin(p + "mlp.shared_expert.up_proj", c.Is, c.H);
        l.sd = lin(p + "mlp.shared_expert.down_proj", c.H, c.Is);
        l.sgate = lin(p + "mlp.shared_expert_gate", 1, c.H);
        l.sgate.flags = SPLASH_WEIGHT_EXACT;
      }
    } else {
      if (c.I <= 0) bad("layer " + std::to_string(i) + " is dense but config.intermediate_size is 0");
      l.gate = lin(p + "mlp.gate_proj", c.I, c.H);
      l.up = lin(p + "mlp.up_proj", c.I, c.H);
      l.down = lin(p + "mlp.down_proj", c.H, c.I);
    }
  }
  if (dcfg_.B > 0) {
    const DraftConfig& d = dcfg_;
    const int K = int(d.taps.size());
    dfc_ = lin("draft.fc", d.H, int64_t(K) * c.H);
    dhnorm_ = vec("draft.hidden_norm", d.H);
    dnorm_ = vec("draft.norm", d.H);
    dlayers_.resize(d.L);
    for (int i = 0; i < d.L; ++i) {
      DraftLayer& l = dlayers_[i];
      const std::string p = "draft.layers." + std::to_string(i) + ".";
      l.in_norm = vec(p + "input_layernorm", d.H);
      l.post_norm = vec(p + "post_attention_layernorm", d.H);
      l.q = lin(p + "self_attn.q_proj", int64_t(d.nh) * d.hd, d.H);
      l.k = lin(p + "self_attn.k_proj", int64_t(d.nkv) * d.hd, d.H);
      l.v = lin(p + "self_attn.v_proj", int64_t(d.nkv) * d.hd, d.H);
      l.o = lin(p + "self_attn.o_proj", d.H, int64_t(d.nh) * d.hd);
      l.q_norm = vec(p + "self_attn.q_norm", d.hd);
      l.k_norm = vec(p + "self_attn.k_norm", d.hd);
      l.gate = lin(p + "mlp.gate_proj", d.I, d.H);
      l.up = lin(p + "mlp.up_proj", d.I, d.H);
      l.down = lin(p + "mlp.down_proj", d.H, d.I);
      if (d.conv_k > 0) {
        const char* names[2] = {"attention_conv", "mlp_conv"};
        for (int j = 0; j < 2; ++j) {
          l.conv_base[j] = vec(p + names[j] + ".base_kernel", int64_t(2) * d.conv_k * d.H);
          l.conv_proj[j] = lin(p + names[j] + ".kernel_projection", int64_t(2) * d.conv_k * (d.H / d.conv_g), d.H);
          l.conv_proj[j].flags |= SPLASH_WEIGHT_FAST;
        }
      }
    }
    if (d.sel_k > 0) {
      dsel_proj_ = lin("draft.candidate_selector.hidden_projection", d.sel_rank, d.H);
      dsel_pred_ = lin("draft.candidate_selector.predecessor_codebook", c.V, d.sel_rank);
      dsel_succ_ = lin("draft.candidate_selector.successor_codebook", c.V, d.sel_rank);
    }
    // the draft only proposes tokens: its matmuls may take the backend's fastest activations
    dfc_.flags |= SPLASH_WEIGHT_FAST;
    for (DraftLayer& l : dlayers_)
      for (splash_weight* w : {&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down}) w->flags |= SPLASH_WEIGHT_FAST;
    tap_slot_.assign(c.L, -1);
    for (int j = 0; j < K; ++j) tap_slot_[d.taps[j]] = j;
  }
  // the offsets above walk the layout state_layout sizes (model/state/state_sizes.cpp)
  const StateLayout st = state_layout(c);
  gdn_floats_ = st.gdn_floats;
  n_full_ = st.n_full;
  n_linear_ = st.n_linear;
  kv_floats_per_token_ = st.kv_floats_per_token;
  if (n_full_ != nfull || n_linear_ != nlin || gdn > gdn_floats_) throw Error("internal", "state layout mismatch");
}

void HybridModel::load_draft_files(const std::string& dir) {
  const Json* dr = pkg_->manifest().find("draft");
  if (!dr || dr->kind != Json::Object) return;
  const Json* cj = dr->find("config");
  const Json* files = dr->find("files");
  if (!cj || cj->kind != Json::Object || !files || files->kind != Json::Array || files->arr.empty())
    bad("splash.json: draft needs config and files");
  const DraftConfig d = parse_draft_config(*cj, cfg_);
  for (auto& f : files->arr) {
    if (f.kind != Json::String || f.str.empty() || f.str.find("..") != std::string::npos || f.str[0] == '/')
      bad("splash.json: bad draft file name");
    pkg_->add_safetensors(dir + "/" + f.str, "draft.");
  }
  dcfg_ = d;
}

std::unique_ptr<Model> Model::open(const std::string& dir, int threads, const char* isa, int act_levels, bool load_draft,
                                   const std::string& backend, uint64_t max_memory) {
  std::unique_ptr<HybridModel> m(new HybridModel());
  m->opts_ = options_from_env();
  m->pkg_ = Package::open(dir, [&](const Json& manifest) { m->cfg_ = parse_model_config(manifest); });
  if (load_draft) m->load_draft_files(dir);
  m->bind_weights();
  m->bh_ = backend_open(backend, threads, isa, act_levels);
  m->be_ = m->bh_.backend;
  m->act_levels_ = act_levels;
  m->threads_ = threads > 0 ? threads : int(std::max(1u, std::thread::hardware_concurrency()));  // the pool's size
  m->host_memory_ = m->be_->iface->host_memory != 0;
  {
    m->pick_on_backend_ = splash_backend_supports_op(m->be_, SPLASH_OP_ARGMAX_ROWS) && m->opts_.device_argmax;
    // sampled rows on a device backend's sampler; on the CPU the slot is the host's sampler itself, taken only
    // when asked (Options::device_sample, to test the path)
    const bool want = m->opts_.device_sample >= 0 ? m->opts_.device_sample == 1 : !m->be_->iface->host_memory;
    m->sample_on_backend_ = splash_backend_supports_op(m->be_, SPLASH_OP_SAMPLE_ROWS) && want && m->cfg_.V < (1 << 24);  // (the key's id field)
  }
  if (!m->host_memory_ && max_memory > 0) backend_set_memory_limit(*m->be_, max_memory);
  if (!m->host_memory_) m->upload_weights();
  m->load_spec_kernels(dir);
  m->choose_rollback();
  if (const Json* v = m->pkg_->manifest().find("vision"); v && v->kind == Json::Object) {
    m->vision_ = VisionEncoder::bind(*v, *m->pkg_, m->be_);  // on the model's backend (uploads on a device)
    if (m->vision_->config().out_H != m->cfg_.H) bad("vision.config.out_hidden_size differs from the text hidden size");
  }
  return m;
}

// The package's specialised kernels (manifest `kernels`: backend cuda, arch sm_90) go to the CUDA backend;
// any other backend ignores them. A missing file, an ABI the backend does not run or a failed load is one
// line on stderr and the generic kernels. Options::spec_kernels off leaves them unloaded (to measure the gain).
void HybridModel::load_spec_kernels(const std::string& dir) {
  const Json* ks = pkg_->manifest().find("kernels");
  if (!ks || ks->kind != Json::Array || std::strcmp(be_->iface->name, "cuda") != 0 || !be_->iface->get_proc_address)
    return;
  const Json* entry = nullptr;
  for (const Json& k : ks->arr) {
    const Json* b = k.kind == Json::Object ? k.find("backend") : nullptr;
    const Json* a = k.kind == Json::Object ? k.find("arch") : nullptr;
    if (b && a && b->kind == Json::String && a->kind == Json::String && b->str == "cuda" && a->str == "sm_90") entry = &k;
  }
  if (!entry) return;
  if (!opts_.spec_kernels) return;
  auto warn = [](const std::string& why) {
    std::fprintf(stderr, "splash: the package's cuda-sm90 kernels are not used (%s); running the generic kernels\n",
                 why.c_str());
  };
  const Json* f = entry->find("file");
  const Json* abi = entry->find("abi");
  if (!f || f->kind != Json::String || f->str.empty() || f->str.find("..") != std::string::npos || f->str[0] == '/' ||
      !abi || abi->kind != Json::Number)
    return warn("bad kernels entry in splash.json");
  auto load = reinterpret_cast<const char* (*)(void*, const void*, size_t, int)>(
      be_->iface->get_proc_address(be_->ctx, "splash_cuda_load_kernels"));
  if (!load) return warn("this CUDA module cannot load package kernels");
  std::ifstream in(dir + "/" + f->str, std::ios::binary);
  std::vector<char> image((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) return warn("cannot read " + f->str);
  if (image.empty()) return warn("cannot read " + f->str);
  if (const char* why = load(be_->ctx, image.data(), image.size(), int(abi->num))) return warn(why);
  spec_kernels_ = "cuda-sm90";
}

std::vector<float> HybridModel::encode_image(const float* pixels, int t, int h, int w) {
  if (!vision_) throw Error("unsupported", "this model has no vision encoder");
  std::lock_guard<std::mutex> lock(compute_mu_);  // shares the backend with steps
  return vision_->encode(pixels, t, h, w);
}

void HybridModel::upload_weights() {
  const auto* be = be_->iface;
  std::unordered_map<const void*, void*> done;  // host pointer → device copy (tied embeddings share one)
  auto up = [&](const void* src, size_t bytes) -> void* {
    if (!src) return nullptr;
    if (auto it = done.find(src); it != done.end()) return it->second;
    void* d = be->buffer_alloc(be_->ctx, bytes);
    if (!d) {
      DeviceMemory dm;
      std::string why;
      if (device_memory(dm))
        why = dm.limit && dm.used + bytes > dm.limit
                  ? " within the memory limit (--max-memory) of " + std::to_string(dm.limit) + " bytes, " +
                        std::to_string(dm.used) + " already used"
                  : " (" + std::to_string(dm.free) + " free on the device)";
      throw Error("out_of_memory", "cannot allocate " + std::to_string(bytes) + " bytes of device memory for weights" + why);
    }
    device_.push_back(d);
    be->copy_to_device(be_->ctx, d, src, bytes);
    done.emplace(src, d);
    return d;
  };
  auto vec = [&](const float*& p, int64_t n) { p = static_cast<const float*>(up(p, size_t(n) * 4)); };
  auto w = [&](splash_weight& sw, int64_t E = 1) {
    if (!sw.data) return;
    const int64_t C = sw.cols, R = sw.rows * E, G = C / 64;
    const size_t row = sw.dtype == SPLASH_F32 ? C * 4 : sw.dtype == SPLASH_BF16 ? C * 2 : sw.dtype == SPLASH_Q8 ? C : C / 2;
    sw.data = up(sw.data, size_t(R) * row);
    if (sw.scales) {
      sw.scales = static_cast<const uint16_t*>(up(sw.scales, size_t(R) * G * 2));
      sw.biases = static_cast<const uint16_t*>(up(sw.biases, size_t(R) * G * 2));
    }
  };
  const ModelConfig& c = cfg_;
  w(embed_);
  w(lm_head_);
  vec(norm_, c.H);
  for (Layer& l : layers_) {
    vec(l.in_norm, c.H);
    vec(l.post_norm, c.H);
    if (l.linear) {
      for (splash_weight* p : {&l.qkv, &l.z, &l.b, &l.a, &l.out}) w(*p);
      vec(l.conv, c.conv_ch() * int64_t(c.conv_k));
      vec(l.A_log, c.nv);
      vec(l.dt_bias, c.nv);
      vec(l.gnorm, c.dv);
    } else {
      for (splash_weight* p : {&l.q, &l.k, &l.v, &l.o}) w(*p);
      vec(l.q_norm, c.hd);
      vec(l.k_norm, c.hd);
    }
    for (splash_weight* p : {&l.gate, &l.up, &l.down, &l.router, &l.sgate, &l.sg, &l.su, &l.sd}) w(*p);
    if (l.moe) {
      w(l.eg.base, l.eg.E);
      w(l.eu.base, l.eu.E);
      w(l.ed.base, l.ed.E);
    }
  }
  if (has_draft()) {
    const DraftConfig& d = dcfg_;
    w(dfc_);
    vec(dhnorm_, d.H);
    vec(dnorm_, d.H);
    for (DraftLayer& l : dlayers_) {
      vec(l.in_norm, d.H);
      vec(l.post_norm, d.H);
      vec(l.q_norm, d.hd);
      vec(l.k_norm, d.hd);
      for (splash_weight* p : {&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down, &l.conv_proj[0], &l.conv_proj[1]}) w(*p);
    }
    // the selector's projection runs on the device; its codebooks are gathered there (embed); the conv base
    // kernels stay on the host, where the conv taps run
    for (splash_weight* p : {&dsel_proj_, &dsel_pred_, &dsel_succ_}) w(*p);
  }
  be->synchronize(be_->ctx);
}

HybridModel::~HybridModel() {
  vision_.reset();
  if (!be_) return;
  saved_rows_.clear();  // device memory on a device backend: freed while the backend is open
  saved_states_.clear();
  for (auto& [id, s] : seqs_) {
    free_state(s.gdn);
    drop_snaps(&s, -1);
    pool_.give(s.kv);
    pool_.give(s.dkv);
    pool_.give(s.feat);
    pool_.give(s.slots);
  }
  pool_.clear();
  for (float* p : gdn_pool_) free_state(p);
  drop_graphs();
  if (gvars_dev_) be_->iface->buffer_free(be_->ctx, gvars_dev_);
  if (logits_pinned_) {
    auto hfree = reinterpret_cast<void (*)(void*, void*)>(be_->iface->get_proc_address(be_->ctx, "splash_host_free"));
    hfree(be_->ctx, logits_pinned_);
  }
  for (auto& [p, cap] : bufs_) be_->iface->buffer_free(be_->ctx, p);
  for (void* p : device_) be_->iface->buffer_free(be_->ctx, p);
  backend_close(bh_);
}

}  // namespace splash
