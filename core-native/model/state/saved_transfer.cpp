// The prefix cache's disk tier needs saved pieces as plain floats on the host and back: read_saved copies a
// saved range of KV rows or a saved state out of the memory it lives in (device memory on a device backend),
// import_rows / import_state make a saved piece from such floats after checking that their shape is the one this
// model saves (a file written by another model or build is refused, never misread).
#include <string>

#include "model/hybrid_model.h"
#include "runtime/error.h"

namespace splash {

namespace {

int sliding_layers(const DraftConfig& d) {
  int n = 0;
  for (int li = 0; li < d.L; ++li) n += !d.sliding.empty() && d.sliding[li];
  return n;
}

}  // namespace

HybridModel::SavedInfo HybridModel::saved_info(int64_t id) {
  std::lock_guard<std::mutex> lock(seq_mu_);
  SavedInfo info;
  if (auto r = saved_rows_.find(id); r != saved_rows_.end()) {
    info.n = r->second.n;
    info.draft = r->second.draft;
    info.a_floats = r->second.floats;
    return info;
  }
  auto s = saved_states_.find(id);
  if (s == saved_states_.end()) throw Error("invalid_argument", "unknown saved rows or state " + std::to_string(id));
  info.state = true;
  info.n = s->second.len;
  info.draft = s->second.draft;
  info.win_n = s->second.win_n;
  info.a_floats = s->second.floats;
  info.b_floats = s->second.win_floats;
  return info;
}

void HybridModel::read_saved(int64_t id, float* a, float* b) {
  auto lock = saved_lock();
  if (auto r = saved_rows_.find(id); r != saved_rows_.end()) {
    be_->iface->copy_to_host(be_->ctx, a, r->second.data.get(), r->second.floats * 4);
    return;
  }
  auto s = saved_states_.find(id);
  if (s == saved_states_.end()) throw Error("invalid_argument", "unknown saved rows or state " + std::to_string(id));
  if (s->second.floats > 0) be_->iface->copy_to_host(be_->ctx, a, s->second.gdn.get(), s->second.floats * 4);
  if (s->second.win_floats > 0) be_->iface->copy_to_host(be_->ctx, b, s->second.win.get(), s->second.win_floats * 4);
}

std::unique_ptr<float[], HybridModel::SavedFree> HybridModel::upload(const float* src, size_t floats, const char* what) {
  std::unique_ptr<float[], SavedFree> p(static_cast<float*>(alloc_state(floats * 4, false)), SavedFree{this});
  if (!p) throw Error("out_of_memory", "cannot allocate " + std::to_string(floats * 4) + " bytes for " + what);
  be_->iface->copy_to_device(be_->ctx, p.get(), src, floats * 4);
  return p;
}

int64_t HybridModel::import_rows(int32_t n, bool draft, const float* data, size_t floats) {
  if (n <= 0) throw Error("invalid_argument", "saved rows need at least one position");
  if (draft && !has_draft()) throw Error("invalid_argument", "saved rows carry a draft context but this model has no draft");
  const int64_t w = int64_t(cfg_.nkv) * cfg_.hd;
  const int64_t dw = has_draft() ? int64_t(dcfg_.nkv) * dcfg_.hd : 0;
  const int dfull = has_draft() ? dcfg_.L - sliding_layers(dcfg_) : 0;
  const size_t want = size_t(2 * n_full_ * w + (draft ? 2 * dfull * dw : 0)) * size_t(n);
  if (floats != want)
    throw Error("invalid_argument", "saved rows of " + std::to_string(n) + " positions hold " + std::to_string(floats) +
                                        " floats; this model's hold " + std::to_string(want));
  auto lock = saved_lock();
  SavedRows r;
  r.n = n;
  r.draft = draft;
  r.floats = want;
  r.data = upload(data, want, "saved rows");
  const int64_t key = next_saved_++;
  saved_rows_.emplace(key, std::move(r));
  return key;
}

int64_t HybridModel::import_state(int32_t len, bool draft, int32_t win_n, const float* gdn, size_t gdn_floats,
                            const float* win, size_t win_floats) {
  if (len <= 0) throw Error("invalid_argument", "a saved state needs a length of at least one position");
  if (draft && !has_draft()) throw Error("invalid_argument", "a saved state carries a draft context but this model has no draft");
  if (gdn_floats != size_t(gdn_floats_))
    throw Error("invalid_argument", "a saved state holds " + std::to_string(gdn_floats) + " recurrent floats; this model's hold " +
                                        std::to_string(gdn_floats_));
  const int32_t keep = draft ? draft_keep(len) : 0;
  const size_t want_win = has_draft() ? size_t(2 * sliding_layers(dcfg_)) * size_t(dcfg_.nkv) * dcfg_.hd * size_t(keep) : 0;
  if (win_n != keep || win_floats != want_win)
    throw Error("invalid_argument", "a saved state's draft window (" + std::to_string(win_n) + " positions, " +
                                        std::to_string(win_floats) + " floats) is not this model's (" + std::to_string(keep) +
                                        ", " + std::to_string(want_win) + ")");
  auto lock = saved_lock();
  SavedState st;
  st.len = len;
  st.draft = draft;
  st.floats = gdn_floats;
  if (gdn_floats > 0) st.gdn = upload(gdn, gdn_floats, "a saved state");
  st.win_n = keep;  // as save_state
  if (want_win > 0) {
    st.win_floats = want_win;
    st.win = upload(win, want_win, "a saved draft window");
  }
  const int64_t key = next_saved_++;
  saved_states_.emplace(key, std::move(st));
  return key;
}

}  // namespace splash
