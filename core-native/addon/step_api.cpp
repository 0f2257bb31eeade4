// The compute entries: a batched step, a draft pass and an image encode, each as a promise that resolves off
// the JS thread.
#include "addon/entries.h"
#include "addon/napi_util.h"
#include "addon/registry.h"
#include <cstring>

#include "addon/sample_args.h"
#include "model/load/vision.h"

namespace splash::addon {

// The sequence a step or draft item names, checked: it exists, is not in a step, has not failed, and no
// earlier item of the same call names it. Call with the model's sequence mutex held.
template <class Items>
splash::Sequence* item_sequence(Model& m, Napi::Object o, const std::string& where, const Items& items, uint32_t i) {
  int32_t id = int_arg(o.Get("seq"), (where + ".seq").c_str(), 0, INT32_MAX);
  splash::Sequence* s = m.find(id);
  if (!s) fail("unknown_sequence", where + ": unknown sequence " + std::to_string(id));
  if (s->busy) fail("sequence_busy", where + ": sequence " + std::to_string(id) + " is already in a step");
  if (s->broken) fail("sequence_broken", where + ": sequence " + std::to_string(id) + " failed earlier; truncate it to 0");
  for (uint32_t j = 0; j < i; ++j)
    if (items[j].seq == s) fail("invalid_argument", where + ": sequence " + std::to_string(id) + " appears twice");
  return s;
}

// Optional step item fields: embedAt (Int32Array, distinct token indices of this item) with embeds
// (Float32Array, embedAt.length × hiddenSize) replacing those rows' embeddings, and positions (Int32Array,
// 3 per token: the T, H, W M-RoPE ids).
void multimodal_fields(const Model& m, Napi::Object o, const std::string& where, splash::StepItem& it) {
  const int64_t n = int64_t(it.tokens.size()), H = m.config().H;
  Napi::Value at = o.Get("embedAt"), em = o.Get("embeds"), ps = o.Get("positions");
  if (!at.IsUndefined() || !em.IsUndefined()) {
    if (!at.IsTypedArray() || at.As<Napi::TypedArray>().TypedArrayType() != napi_int32_array)
      fail("invalid_argument", where + ".embedAt must be an Int32Array");
    if (!em.IsTypedArray() || em.As<Napi::TypedArray>().TypedArrayType() != napi_float32_array)
      fail("invalid_argument", where + ".embeds must be a Float32Array");
    Napi::Int32Array a = at.As<Napi::Int32Array>();
    Napi::Float32Array e = em.As<Napi::Float32Array>();
    if (int64_t(e.ElementLength()) != int64_t(a.ElementLength()) * H)
      fail("invalid_argument", where + ".embeds must hold embedAt.length × " + std::to_string(H) + " values");
    std::vector<bool> seen(n, false);
    for (size_t k = 0; k < a.ElementLength(); ++k) {
      const int32_t r = a[k];
      if (r < 0 || r >= n || seen[r]) fail("invalid_argument", where + ".embedAt[" + std::to_string(k) + "] is out of range or repeated");
      seen[r] = true;
    }
    it.embed_at.assign(a.Data(), a.Data() + a.ElementLength());
    it.embeds.assign(e.Data(), e.Data() + e.ElementLength());
  }
  if (!ps.IsUndefined()) {
    if (!ps.IsTypedArray() || ps.As<Napi::TypedArray>().TypedArrayType() != napi_int32_array)
      fail("invalid_argument", where + ".positions must be an Int32Array");
    Napi::Int32Array p = ps.As<Napi::Int32Array>();
    if (int64_t(p.ElementLength()) != 3 * n) fail("invalid_argument", where + ".positions must hold 3 ids per token");
    for (size_t k = 0; k < p.ElementLength(); ++k)
      if (p[k] < 0) fail("invalid_argument", where + ".positions must be non-negative");
    it.positions.assign(p.Data(), p.Data() + p.ElementLength());
  }
}

// Rows that verify a drafted token (sample.rows[r].draft) by the rejection rule: only in a verify item, the token
// must be the item's next one, and the sequence's last draft pass must have drafted it at that position (its
// distribution is kept natively).
void draft_rows(const splash::sampler::Request& req, const splash::StepItem& it, const std::string& where) {
  const int first = int(it.tokens.size() - req.rows.size());
  const splash::Sequence* s = it.seq;
  for (size_t r = 0; r < req.rows.size(); ++r) {
    const int32_t d = req.rows[r].draft;
    if (d < 0) continue;
    const std::string rw = where + ".sample.rows[" + std::to_string(r) + "].draft";
    const size_t at = size_t(first) + r;  // drafted tokens before this row
    if (!it.verify) fail("invalid_argument", rw + " needs a verify item");
    if (at + 1 >= it.tokens.size() || it.tokens[at + 1] != d) fail("invalid_argument", rw + " must be the item's next token");
    if (s->draft_at != s->len || at >= s->draft_tokens.size() || s->draft_tokens[at] != d ||
        (s->draft_q.size() < (at + 1) * size_t(s->draft_V) && size_t(s->draft_qd_rows) < at + 1))
      fail("invalid_argument", rw + ": the sequence's last draft pass did not sample this token here");
  }
}

// encodeImage(handle, {pixels: Float32Array [t·h·w × patchDim], grid: [t, h, w]}) → Promise<Float32Array>:
// the merged image embeddings, [t·h·w / merge² × hiddenSize], in image-pad order.
Napi::Value EncodeImage(const Napi::CallbackInfo& info) {
  return guard(info, [&]() -> Napi::Value {
    auto m = model_arg(info);
    const splash::VisionEncoder* v = m->vision();
    if (!v) fail("unsupported", "this model has no vision encoder");
    if (info.Length() < 2 || !info[1].IsObject()) fail("invalid_argument", "encodeImage(handle, {pixels, grid})");
    Napi::Object o = info[1].As<Napi::Object>();
    Napi::Value pv = o.Get("pixels"), gv = o.Get("grid");
    if (!pv.IsTypedArray() || pv.As<Napi::TypedArray>().TypedArrayType() != napi_float32_array)
      fail("invalid_argument", "pixels must be a Float32Array");
    if (!gv.IsArray() || gv.As<Napi::Array>().Length() != 3) fail("invalid_argument", "grid must be [t, h, w]");
    Napi::Array ga = gv.As<Napi::Array>();
    const int mg = v->config().merge;
    const int t = int_arg(ga.Get(0u), "grid[0]", 1, 64), h = int_arg(ga.Get(1u), "grid[1]", mg, 4096),
              w = int_arg(ga.Get(2u), "grid[2]", mg, 4096);
    if (h % mg || w % mg) fail("invalid_argument", "grid height and width must be multiples of the merge size");
    Napi::Float32Array pa = pv.As<Napi::Float32Array>();
    if (int64_t(pa.ElementLength()) != int64_t(t) * h * w * v->config().patch_dim())
      fail("invalid_argument", "pixels must hold t·h·w × " + std::to_string(v->config().patch_dim()) + " values");
    auto pixels = std::make_shared<std::vector<float>>(pa.Data(), pa.Data() + pa.ElementLength());
    auto out = std::make_shared<std::vector<float>>();
    auto* task = new Task(
        info.Env(), [=] { *out = m->encode_image(pixels->data(), t, h, w); },
        [=](Napi::Env env) -> Napi::Value {
          auto* vec = new std::vector<float>(std::move(*out));
          Napi::ArrayBuffer ab = Napi::ArrayBuffer::New(
              env, vec->data(), vec->size() * sizeof(float), [](Napi::Env, void*, std::vector<float>* p) { delete p; }, vec);
          return Napi::Float32Array::New(env, vec->size(), ab, 0);
        });
    Napi::Promise p = task->promise();
    task->Queue();
    return p;
  });
}

// One item's result: {logits: Float32Array (moved, no copy) | null, sampled: [...] | null}.
Napi::Object item_result(Napi::Env env, std::vector<float>* logits, const splash::sampler::Request* sample,
                         const std::vector<splash::sampler::Sampled>& sampled) {
  Napi::Object r = Napi::Object::New(env);
  if (logits) {
    auto* vec = new std::vector<float>(std::move(*logits));
    Napi::ArrayBuffer ab = Napi::ArrayBuffer::New(
        env, vec->data(), vec->size() * sizeof(float), [](Napi::Env, void*, std::vector<float>* p) { delete p; }, vec);
    r.Set("logits", Napi::Float32Array::New(env, vec->size(), ab, 0));
  } else {
    r.Set("logits", env.Null());
  }
  r.Set("sampled", sample ? Napi::Value(splash::addon::sampled_to_js(env, sampled, sample->n_top >= 0)) : env.Null());
  return r;
}

// The options of a step or draft call (info[2]): {inline: true} runs it on the calling thread (Task::run_here).
bool inline_arg(const Napi::CallbackInfo& info) {
  if (info.Length() < 3 || info[2].IsUndefined()) return false;
  if (!info[2].IsObject()) fail("invalid_argument", "the options must be an object");
  const Napi::Value v = info[2].As<Napi::Object>().Get("inline");
  if (!v.IsUndefined() && !v.IsBoolean()) fail("invalid_argument", "options.inline must be a boolean");
  return v.ToBoolean().Value();
}

// The items of a step or draft call: a non-empty array (info[1]) of objects.
Napi::Array items_arg(const Napi::CallbackInfo& info, const std::string& call) {
  if (info.Length() < 2 || !info[1].IsArray()) fail("invalid_argument", call + "(handle, items): items must be an array");
  Napi::Array arr = info[1].As<Napi::Array>();
  if (arr.Length() == 0) fail("invalid_argument", call + " needs at least one item");
  return arr;
}
Napi::Object item_arg(Napi::Array arr, uint32_t i, const std::string& where) {
  Napi::Value v = arr.Get(i);
  if (!v.IsObject()) fail("invalid_argument", where + " must be an object");
  return v.As<Napi::Object>();
}

// step(handle, [{seq, tokens: Int32Array, logits: 'none'|'last'|'all', capture?, verify?, keep?, snapshots?, sample?}],
//   {inline?})
//   → Promise<{logits: Float32Array|null, sampled: [...]|null}[]>; with inline: true the step runs on the calling
//   thread (the promise is settled when the call returns)
Napi::Value Step(const Napi::CallbackInfo& info) {
  return guard(info, [&]() -> Napi::Value {
    auto m = model_arg(info);
    const bool here = inline_arg(info);
    Napi::Array arr = items_arg(info, "step");
    auto items = std::make_shared<std::vector<splash::StepItem>>(arr.Length());
    const int V = m->config().V;
    std::unique_lock<std::mutex> lock(m->seq_mutex());
    for (uint32_t i = 0; i < arr.Length(); ++i) {
      const std::string where = "items[" + std::to_string(i) + "]";
      Napi::Object o = item_arg(arr, i, where);
      splash::Sequence* s = item_sequence(*m, o, where, *items, i);
      Napi::Value tv = o.Get("tokens");
      if (!tv.IsTypedArray() || tv.As<Napi::TypedArray>().TypedArrayType() != napi_int32_array)
        fail("invalid_argument", where + ".tokens must be an Int32Array");
      Napi::Int32Array ta = tv.As<Napi::Int32Array>();
      if (ta.ElementLength() == 0) fail("invalid_argument", where + ".tokens is empty");
      auto& it = (*items)[i];
      it.seq = s;
      it.tokens.assign(ta.Data(), ta.Data() + ta.ElementLength());
      for (size_t k = 0; k < it.tokens.size(); ++k)
        if (it.tokens[k] < 0 || it.tokens[k] >= V)
          fail("bad_token", where + ".tokens[" + std::to_string(k) + "] = " + std::to_string(it.tokens[k]) +
                                " is outside the vocabulary [0, " + std::to_string(V) + ")");
      Napi::Value lv = o.Get("logits");
      std::string mode = lv.IsUndefined() ? "last" : (lv.IsString() ? std::string(lv.As<Napi::String>()) : "?");
      if (mode == "none") it.logits = 0;
      else if (mode == "last") it.logits = 1;
      else if (mode == "all") it.logits = 2;
      else fail("invalid_argument", where + ".logits must be 'none', 'last' or 'all'");
      it.capture = o.Get("capture").ToBoolean().Value();
      it.verify = o.Get("verify").ToBoolean().Value();
      it.keep = o.Get("keep").ToBoolean().Value();
      if (Napi::Value kv = o.Get("snapshots"); !kv.IsUndefined()) {
        if (!kv.IsArray()) fail("invalid_argument", where + ".snapshots must be an array of lengths");
        Napi::Array ka = kv.As<Napi::Array>();
        for (uint32_t k = 0; k < ka.Length(); ++k)
          it.snaps.push_back(int_arg(ka.Get(k), (where + ".snapshots[" + std::to_string(k) + "]").c_str(), 0, INT32_MAX));
      }
      try {  // what the model's step would refuse, here, before the sequence takes part in a step
        m->check_item(it);
      } catch (const splash::Error& e) {
        fail(e.code, where + ": " + e.what());
      }
      multimodal_fields(*m, o, where, it);
      if (!o.Get("sample").IsUndefined()) {
        it.sample = splash::addon::parse_sample(o.Get("sample"), where + ".sample", V, int(it.tokens.size()));
        draft_rows(*it.sample, it, where);
      }
    }
    for (auto& it : *items) it.seq->busy = true;
    auto out = std::make_shared<std::vector<std::vector<float>>>();
    auto failed = std::make_shared<bool>(true);
    auto* t = new Task(
        info.Env(),
        [=] {
          m->step(*items, *out);
          *failed = false;
        },
        [=](Napi::Env env) -> Napi::Value {
          Napi::Array res = Napi::Array::New(env, items->size());
          for (size_t i = 0; i < items->size(); ++i) {
            const auto& it = (*items)[i];
            res.Set(uint32_t(i), item_result(env, it.logits == 0 ? nullptr : &(*out)[i], it.sample.get(), it.sampled));
          }
          return res;
        },
        [=] {
          std::lock_guard<std::mutex> l2(m->seq_mutex());
          for (auto& it : *items) {
            it.seq->busy = false;
            if (*failed) it.seq->broken = true;
          }
        });
    if (here) {
      lock.unlock();  // the step and its cleanup take it themselves
      return t->run_here();
    }
    Napi::Promise p = t->promise();
    t->Queue();
    return p;
  });
}

// resample(handle, seq, row, sample) → {token, logprob?, top?}: row `row` of the sampled rows the last step kept
// for sequence `seq` (its item had keep: true), drawn again with `sample` (one row), synchronously.
Napi::Value Resample(const Napi::CallbackInfo& info) {
  return guard(info, [&]() -> Napi::Value {
    auto m = model_arg(info);
    if (info.Length() < 4) fail("invalid_argument", "resample(handle, seq, row, sample)");
    const int32_t seq = int_arg(info[1], "seq", 0, INT32_MAX);
    const int32_t row = int_arg(info[2], "row", 0, INT32_MAX);
    auto req = splash::addon::parse_sample(info[3], "sample", m->config().V, 1);
    const sampler::Sampled s = m->resample(seq, row, *req);
    return sampled_to_js(info.Env(), {s}, req->n_top >= 0).Get(uint32_t(0));
  });
}

// draft(handle, [{seq, token, n?, sample?, logits?}], {inline?}) → Promise<{logits, sampled}[]>: per item the draft's logits
// for block rows 1..n ([n·V], n ≤ B−1, default B−1; with `sample` only when logits: true) and its sampled rows;
// `token` is the anchor (the last committed token, at position sequenceLength).
Napi::Value Draft(const Napi::CallbackInfo& info) {
  return guard(info, [&]() -> Napi::Value {
    auto m = model_arg(info);
    const bool here = inline_arg(info);
    if (!m->has_draft()) fail("unsupported", "this model has no draft loaded");
    Napi::Array arr = items_arg(info, "draft");
    auto items = std::make_shared<std::vector<splash::DraftItem>>(arr.Length());
    const int V = m->config().V;
    std::unique_lock<std::mutex> lock(m->seq_mutex());
    for (uint32_t i = 0; i < arr.Length(); ++i) {
      const std::string where = "items[" + std::to_string(i) + "]";
      Napi::Object o = item_arg(arr, i, where);
      splash::Sequence* s = item_sequence(*m, o, where, *items, i);
      (*items)[i].seq = s;
      (*items)[i].anchor = int_arg(o.Get("token"), (where + ".token").c_str(), 0, V - 1);
      const int B = m->draft_config().B;
      (*items)[i].n = o.Get("n").IsUndefined() ? B - 1 : int_arg(o.Get("n"), (where + ".n").c_str(), 0, B - 1);
      if (!o.Get("sample").IsUndefined())
        (*items)[i].sample = splash::addon::parse_sample(o.Get("sample"), where + ".sample", V, (*items)[i].n);
      Napi::Value lv = o.Get("logits");
      if (!lv.IsUndefined() && !lv.IsBoolean()) fail("invalid_argument", where + ".logits must be a boolean");
      (*items)[i].logits = lv.IsUndefined() ? !(*items)[i].sample : lv.As<Napi::Boolean>().Value();
    }
    for (auto& it : *items) it.seq->busy = true;
    auto out = std::make_shared<std::vector<std::vector<float>>>();
    auto* t = new Task(
        info.Env(), [=] { m->draft(*items, *out); },
        [=](Napi::Env env) -> Napi::Value {
          Napi::Array res = Napi::Array::New(env, items->size());
          for (size_t i = 0; i < items->size(); ++i) {
            const auto& it = (*items)[i];
            res.Set(uint32_t(i), item_result(env, it.logits ? &(*out)[i] : nullptr, it.sample.get(), it.sampled));
          }
          return res;
        },
        [=] {
          std::lock_guard<std::mutex> l2(m->seq_mutex());
          for (auto& it : *items) it.seq->busy = false;
        });
    if (here) {
      lock.unlock();  // the pass and its cleanup take it themselves
      return t->run_here();
    }
    Napi::Promise p = t->promise();
    t->Queue();
    return p;
  });
}

}  // namespace splash::addon
