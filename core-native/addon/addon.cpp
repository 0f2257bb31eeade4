// N-API surface of the engine. Every entry validates its arguments on the JS thread; heavy work runs
// on the libuv pool (AsyncWorker) and the event loop never waits on compute. Every failure becomes a
// JS Error with a `code`; no C++ exception escapes (NAPI_CPP_EXCEPTIONS turns Napi::Error throws into
// JS throws; everything else is caught here).
#include <napi.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

#include "addon/sample_args.h"
#include "backend/cpu/isa.h"
#include "backend/cpu/selftest.h"
#include "model/model.h"
#include "runtime/error.h"

namespace {

using splash::Error;
using splash::Model;

Napi::Error coded(Napi::Env env, const std::string& code, const std::string& msg) {
  Napi::Error e = Napi::Error::New(env, msg);
  e.Set("code", Napi::String::New(env, code));
  return e;
}
[[noreturn]] void fail(const std::string& code, const std::string& msg) { throw Error(code, msg); }

// Runs `fn` for every entry so that any C++ exception becomes a coded JS Error.
template <typename F>
Napi::Value guard(const Napi::CallbackInfo& info, F fn) {
  Napi::Env env = info.Env();
  try {
    return fn();
  } catch (const Napi::Error&) {
    throw;
  } catch (const Error& e) {
    throw coded(env, e.code, e.what());
  } catch (const std::bad_alloc&) {
    throw coded(env, "out_of_memory", "out of memory");
  } catch (const std::exception& e) {
    throw coded(env, "internal", e.what());
  } catch (...) {
    throw coded(env, "internal", "unknown native error");
  }
}

// ---- model registry (handles are small integers)
std::mutex g_mu;
std::map<uint32_t, std::shared_ptr<Model>> g_models;
uint32_t g_next = 1;

std::shared_ptr<Model> model_arg(const Napi::CallbackInfo& info) {
  if (info.Length() < 1 || !info[0].IsNumber()) fail("invalid_argument", "expected a model handle");
  double h = info[0].As<Napi::Number>().DoubleValue();
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_models.find(uint32_t(h));
  if (h != std::floor(h) || h < 1 || it == g_models.end()) fail("unknown_model", "unknown or closed model handle");
  return it->second;
}

int32_t int_arg(const Napi::Value& v, const char* what, int64_t lo, int64_t hi) {
  if (!v.IsNumber()) fail("invalid_argument", std::string(what) + " must be an integer");
  double d = v.As<Napi::Number>().DoubleValue();
  if (!std::isfinite(d) || d != std::floor(d) || d < double(lo) || d > double(hi))
    fail("invalid_argument", std::string(what) + " must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return int32_t(d);
}

// A promise-returning worker: `exec` runs off the JS thread, `done` builds the value on it.
class Task : public Napi::AsyncWorker {
 public:
  Task(Napi::Env env, std::function<void()> exec, std::function<Napi::Value(Napi::Env)> done,
       std::function<void()> cleanup = nullptr)
      : Napi::AsyncWorker(env, "splash.task"), deferred_(Napi::Promise::Deferred::New(env)), exec_(std::move(exec)),
        done_(std::move(done)), cleanup_(std::move(cleanup)) {}
  Napi::Promise promise() { return deferred_.Promise(); }

  void Execute() override {
    try {
      exec_();
    } catch (const Error& e) {
      code_ = e.code;
      SetError(e.what());
    } catch (const std::bad_alloc&) {
      code_ = "out_of_memory";
      SetError("out of memory");
    } catch (const std::exception& e) {
      code_ = "internal";
      SetError(e.what());
    } catch (...) {
      code_ = "internal";
      SetError("unknown native error");
    }
  }
  void OnOK() override {
    Napi::Env env = Env();
    if (cleanup_) cleanup_();
    try {
      deferred_.Resolve(done_(env));
    } catch (const Napi::Error& e) {
      deferred_.Reject(e.Value());
    } catch (const std::exception& e) {
      deferred_.Reject(coded(env, "internal", e.what()).Value());
    }
  }
  void OnError(const Napi::Error& e) override {
    if (cleanup_) cleanup_();
    deferred_.Reject(coded(Env(), code_.empty() ? "internal" : code_, e.Message()).Value());
  }

 private:
  Napi::Promise::Deferred deferred_;
  std::function<void()> exec_;
  std::function<Napi::Value(Napi::Env)> done_;
  std::function<void()> cleanup_;
  std::string code_;
};

Napi::Value to_js(Napi::Env env, const splash::Json& j) {
  switch (j.kind) {
    case splash::Json::Null: return env.Null();
    case splash::Json::Bool: return Napi::Boolean::New(env, j.b);
    case splash::Json::Number: return Napi::Number::New(env, j.num);
    case splash::Json::String: return Napi::String::New(env, j.str);
    case splash::Json::Array: {
      Napi::Array a = Napi::Array::New(env, j.arr.size());
      for (size_t i = 0; i < j.arr.size(); ++i) a.Set(uint32_t(i), to_js(env, j.arr[i]));
      return a;
    }
    default: {
      Napi::Object o = Napi::Object::New(env);
      for (auto& [k, v] : j.obj) o.Set(k, to_js(env, v));
      return o;
    }
  }
}

// openModel(dir, {threads?, isa?, int8?}) → Promise<handle>
Napi::Value OpenModel(const Napi::CallbackInfo& info) {
  return guard(info, [&]() -> Napi::Value {
    if (info.Length() < 1 || !info[0].IsString()) fail("invalid_argument", "openModel(dir, opts): dir must be a string");
    std::string dir = info[0].As<Napi::String>();
    int threads = 0;
    std::string isa;
    int levels = 2;  // int8x2 by default
    bool draft = true;
    if (info.Length() > 1 && !info[1].IsUndefined()) {
      if (!info[1].IsObject()) fail("invalid_argument", "opts must be an object");
      Napi::Object o = info[1].As<Napi::Object>();
      if (o.Has("threads") && !o.Get("threads").IsUndefined()) threads = int_arg(o.Get("threads"), "threads", 1, 256);
      if (o.Has("isa") && !o.Get("isa").IsUndefined()) {
        if (!o.Get("isa").IsString()) fail("invalid_argument", "isa must be a string");
        isa = o.Get("isa").As<Napi::String>();
      }
      if (o.Has("int8") && !o.Get("int8").IsUndefined()) {
        if (!o.Get("int8").IsBoolean()) fail("invalid_argument", "int8 must be a boolean");
        levels = o.Get("int8").As<Napi::Boolean>() ? 1 : 0;
      }
      if (o.Has("draft") && !o.Get("draft").IsUndefined()) {
        if (!o.Get("draft").IsBoolean()) fail("invalid_argument", "draft must be a boolean");
        draft = o.Get("draft").As<Napi::Boolean>();
      }
      if (o.Has("activations") && !o.Get("activations").IsUndefined()) {
        Napi::Value v = o.Get("activations");
        std::string a = v.IsString() ? std::string(v.As<Napi::String>()) : "";
        if (a == "f32") levels = 0;
        else if (a == "int8") levels = 1;
        else if (a == "int8x2") levels = 2;
        else fail("invalid_argument", "activations must be 'f32', 'int8' or 'int8x2'");
      }
    }
    auto holder = std::make_shared<std::unique_ptr<Model>>();
    auto* t = new Task(
        info.Env(),
        [=] { *holder = Model::open(dir, threads, isa.empty() ? nullptr : isa.c_str(), levels, draft); },
        [=](Napi::Env env) -> Napi::Value {
          std::lock_guard<std::mutex> lock(g_mu);
          uint32_t h = g_next++;
          g_models.emplace(h, std::shared_ptr<Model>(std::move(*holder)));
          return Napi::Number::New(env, h);
        });
    Napi::Promise p = t->promise();
    t->Queue();
    return p;
  });
}

Napi::Value ModelInfo(const Napi::CallbackInfo& info) {
  return guard(info, [&]() -> Napi::Value {
    auto m = model_arg(info);
    Napi::Env env = info.Env();
    const auto& c = m->config();
    Napi::Object o = Napi::Object::New(env);
    o.Set("family", c.family);
    o.Set("config", to_js(env, m->package().config()));
    const splash::Json* name = m->package().manifest().find("name");
    o.Set("name", name && name->kind == splash::Json::String ? Napi::Value(Napi::String::New(env, name->str)) : env.Null());
    o.Set("vocabSize", c.V);
    o.Set("hiddenSize", c.H);
    o.Set("numLayers", c.L);
    o.Set("maxPositionEmbeddings", c.max_pos);
    o.Set("weightBytes", double(m->weight_bytes()));
    o.Set("stateBytesPerSequence", double(m->gdn_bytes()));
    o.Set("kvBytesPerToken", double(m->kv_bytes_per_token()));
    o.Set("backend", std::string(m->backend().iface->name));
    o.Set("isa", std::string(m->backend().iface->variant));
    o.Set("activationType", "f32");
    o.Set("matmulActivations", m->act_levels() == 0 ? "f32" : m->act_levels() == 1 ? "int8" : "int8x2");
    o.Set("kvType", "f32");
    if (m->has_draft()) {
      const auto& d = m->draft_config();
      Napi::Object dr = Napi::Object::New(env);
      dr.Set("blockSize", d.B);
      dr.Set("maskTokenId", d.mask);
      dr.Set("numLayers", d.L);
      dr.Set("kvBytesPerToken", double(int64_t(d.L) * 2 * d.nkv * d.hd * 4));
      Napi::Array taps = Napi::Array::New(env, d.taps.size());
      for (size_t i = 0; i < d.taps.size(); ++i) taps.Set(uint32_t(i), d.taps[i]);
      dr.Set("targetLayerIds", taps);
      o.Set("draft", dr);
    } else {
      o.Set("draft", env.Null());
    }
    if (const splash::VisionEncoder* v = m->vision()) {
      Napi::Object vo = Napi::Object::New(env);
      vo.Set("patchDim", v->config().patch_dim());
      vo.Set("mergeSize", v->config().merge);
      vo.Set("patchSize", v->config().patch);
      vo.Set("temporalPatchSize", v->config().temporal);
      o.Set("vision", vo);
    } else {
      o.Set("vision", env.Null());
    }
    return o;
  });
}

// sequenceBytes(handle, maxLength) → bytes one sequence needs (GDN state + KV for maxLength tokens)
Napi::Value SequenceBytes(const Napi::CallbackInfo& info) {
  return guard(info, [&]() -> Napi::Value {
    auto m = model_arg(info);
    if (info.Length() < 2) fail("invalid_argument", "sequenceBytes(handle, maxLength)");
    int32_t n = int_arg(info[1], "maxLength", 0, INT32_MAX);
    return Napi::Number::New(info.Env(), double(m->sequence_bytes(n)));
  });
}

Napi::Value CreateSequence(const Napi::CallbackInfo& info) {
  return guard(info, [&]() -> Napi::Value {
    auto m = model_arg(info);
    if (info.Length() < 2 || !info[1].IsObject()) fail("invalid_argument", "createSequence(handle, {maxLength})");
    Napi::Object o = info[1].As<Napi::Object>();
    int32_t max_len = int_arg(o.Get("maxLength"), "maxLength", 1, INT32_MAX);
    return Napi::Number::New(info.Env(), m->create_sequence(max_len));
  });
}

Napi::Value FreeSequence(const Napi::CallbackInfo& info) {
  return guard(info, [&]() -> Napi::Value {
    auto m = model_arg(info);
    if (info.Length() < 2) fail("invalid_argument", "freeSequence(handle, seqId)");
    m->free_sequence(int_arg(info[1], "seqId", 0, INT32_MAX));
    return info.Env().Undefined();
  });
}

Napi::Value TruncateSequence(const Napi::CallbackInfo& info) {
  return guard(info, [&]() -> Napi::Value {
    auto m = model_arg(info);
    if (info.Length() < 3) fail("invalid_argument", "truncateSequence(handle, seqId, length)");
    m->truncate_sequence(int_arg(info[1], "seqId", 0, INT32_MAX), int_arg(info[2], "length", 0, INT32_MAX));
    return info.Env().Undefined();
  });
}

Napi::Value SequenceLength(const Napi::CallbackInfo& info) {
  return guard(info, [&]() -> Napi::Value {
    auto m = model_arg(info);
    if (info.Length() < 2) fail("invalid_argument", "sequenceLength(handle, seqId)");
    int32_t id = int_arg(info[1], "seqId", 0, INT32_MAX);
    std::lock_guard<std::mutex> lock(m->seq_mutex());
    splash::Sequence* s = m->find(id);
    if (!s) fail("unknown_sequence", "unknown sequence " + std::to_string(id));
    return Napi::Number::New(info.Env(), s->len);
  });
}

// ---- prefix cache: saved KV rows and states (ids are positive integers below 2^53)
int64_t saved_arg(const Napi::Value& v, const char* what) {
  if (!v.IsNumber()) fail("invalid_argument", std::string(what) + " must be a saved-state id");
  double d = v.As<Napi::Number>().DoubleValue();
  if (!std::isfinite(d) || d != std::floor(d) || d < 1 || d > 9007199254740991.0)
    fail("invalid_argument", std::string(what) + " must be a saved-state id");
  return int64_t(d);
}

// saveRows(handle, seqId, start, n) → id
Napi::Value SaveRows(const Napi::CallbackInfo& info) {
  return guard(info, [&]() -> Napi::Value {
    auto m = model_arg(info);
    if (info.Length() < 4) fail("invalid_argument", "saveRows(handle, seqId, start, n)");
    const int64_t id = m->save_rows(int_arg(info[1], "seqId", 0, INT32_MAX), int_arg(info[2], "start", 0, INT32_MAX),
                                    int_arg(info[3], "n", 1, INT32_MAX));
    return Napi::Number::New(info.Env(), double(id));
  });
}

// saveState(handle, seqId) → id
Napi::Value SaveState(const Napi::CallbackInfo& info) {
  return guard(info, [&]() -> Napi::Value {
    auto m = model_arg(info);
    if (info.Length() < 2) fail("invalid_argument", "saveState(handle, seqId)");
    return Napi::Number::New(info.Env(), double(m->save_state(int_arg(info[1], "seqId", 0, INT32_MAX))));
  });
}

// restoreSequence(handle, seqId, rowIds[], stateId) → whether the draft context was restored too
Napi::Value RestoreSequence(const Napi::CallbackInfo& info) {
  return guard(info, [&]() -> Napi::Value {
    auto m = model_arg(info);
    if (info.Length() < 4 || !info[2].IsArray()) fail("invalid_argument", "restoreSequence(handle, seqId, rowIds, stateId)");
    Napi::Array arr = info[2].As<Napi::Array>();
    std::vector<int64_t> rows(arr.Length());
    for (uint32_t i = 0; i < arr.Length(); ++i) rows[i] = saved_arg(arr.Get(i), "rowIds[i]");
    const bool draft = m->restore(int_arg(info[1], "seqId", 0, INT32_MAX), rows, saved_arg(info[3], "stateId"));
    return Napi::Boolean::New(info.Env(), draft);
  });
}

// freeSaved(handle, id)
Napi::Value FreeSaved(const Napi::CallbackInfo& info) {
  return guard(info, [&]() -> Napi::Value {
    auto m = model_arg(info);
    if (info.Length() < 2) fail("invalid_argument", "freeSaved(handle, id)");
    m->free_saved(saved_arg(info[1], "id"));
    return info.Env().Undefined();
  });
}

// savedStats(handle) → {sequences, rows, states, bytes}: what the model holds (leak checks)
Napi::Value SavedStats(const Napi::CallbackInfo& info) {
  return guard(info, [&]() -> Napi::Value {
    auto m = model_arg(info);
    const auto st = m->saved_stats();
    Napi::Object o = Napi::Object::New(info.Env());
    o.Set("sequences", double(st.sequences));
    o.Set("rows", double(st.rows));
    o.Set("states", double(st.states));
    o.Set("bytes", double(st.bytes));
    return o;
  });
}

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
        s->draft_q.size() < (at + 1) * size_t(s->draft_V))
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

// step(handle, [{seq, tokens: Int32Array, logits: 'none'|'last'|'all', capture?, verify?, sample?}])
//   → Promise<{logits: Float32Array|null, sampled: [...]|null}[]>
Napi::Value Step(const Napi::CallbackInfo& info) {
  return guard(info, [&]() -> Napi::Value {
    auto m = model_arg(info);
    if (info.Length() < 2 || !info[1].IsArray()) fail("invalid_argument", "step(handle, items): items must be an array");
    Napi::Array arr = info[1].As<Napi::Array>();
    if (arr.Length() == 0) fail("invalid_argument", "step needs at least one item");
    auto items = std::make_shared<std::vector<splash::StepItem>>(arr.Length());
    const int V = m->config().V;
    std::lock_guard<std::mutex> lock(m->seq_mutex());
    for (uint32_t i = 0; i < arr.Length(); ++i) {
      const std::string where = "items[" + std::to_string(i) + "]";
      Napi::Value v = arr.Get(i);
      if (!v.IsObject()) fail("invalid_argument", where + " must be an object");
      Napi::Object o = v.As<Napi::Object>();
      splash::Sequence* s = item_sequence(*m, o, where, *items, i);
      Napi::Value tv = o.Get("tokens");
      if (!tv.IsTypedArray() || tv.As<Napi::TypedArray>().TypedArrayType() != napi_int32_array)
        fail("invalid_argument", where + ".tokens must be an Int32Array");
      Napi::Int32Array ta = tv.As<Napi::Int32Array>();
      if (ta.ElementLength() == 0) fail("invalid_argument", where + ".tokens is empty");
      if (int64_t(s->len) + int64_t(ta.ElementLength()) > s->max_len)
        fail("too_long", where + ": " + std::to_string(s->len) + " + " + std::to_string(ta.ElementLength()) +
                             " tokens exceed the sequence's maxLength " + std::to_string(s->max_len));
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
    Napi::Promise p = t->promise();
    t->Queue();
    return p;
  });
}

// draft(handle, [{seq, token, n?, sample?, logits?}]) → Promise<{logits, sampled}[]>: per item the draft's logits
// for block rows 1..n ([n·V], n ≤ B−1, default B−1; with `sample` only when logits: true) and its sampled rows;
// `token` is the anchor (the last committed token, at position sequenceLength).
Napi::Value Draft(const Napi::CallbackInfo& info) {
  return guard(info, [&]() -> Napi::Value {
    auto m = model_arg(info);
    if (!m->has_draft()) fail("unsupported", "this model has no draft loaded");
    if (info.Length() < 2 || !info[1].IsArray()) fail("invalid_argument", "draft(handle, items): items must be an array");
    Napi::Array arr = info[1].As<Napi::Array>();
    if (arr.Length() == 0) fail("invalid_argument", "draft needs at least one item");
    auto items = std::make_shared<std::vector<splash::DraftItem>>(arr.Length());
    const int V = m->config().V;
    std::lock_guard<std::mutex> lock(m->seq_mutex());
    for (uint32_t i = 0; i < arr.Length(); ++i) {
      const std::string where = "items[" + std::to_string(i) + "]";
      Napi::Value v = arr.Get(i);
      if (!v.IsObject()) fail("invalid_argument", where + " must be an object");
      Napi::Object o = v.As<Napi::Object>();
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
    Napi::Promise p = t->promise();
    t->Queue();
    return p;
  });
}

Napi::Value CloseModel(const Napi::CallbackInfo& info) {
  return guard(info, [&]() -> Napi::Value {
    model_arg(info);
    std::lock_guard<std::mutex> lock(g_mu);
    g_models.erase(uint32_t(info[0].As<Napi::Number>().DoubleValue()));
    return info.Env().Undefined();  // freed when the last in-flight step finishes
  });
}

Napi::Value IsaList(const Napi::CallbackInfo& info) {
  return guard(info, [&]() -> Napi::Value {
    auto v = splash::cpu::isa_available();
    Napi::Array a = Napi::Array::New(info.Env(), v.size());
    for (size_t i = 0; i < v.size(); ++i) a.Set(uint32_t(i), v[i]->name);
    return a;
  });
}

// kernelSelfTest(seed?) → Promise<Array<{kernel, isa, against, maxErr, tol, ok}>>
Napi::Value KernelSelfTest(const Napi::CallbackInfo& info) {
  return guard(info, [&]() -> Napi::Value {
    uint32_t seed = info.Length() > 0 && !info[0].IsUndefined() ? uint32_t(int_arg(info[0], "seed", 0, INT32_MAX)) : 1234;
    auto res = std::make_shared<std::vector<splash::cpu::SelfTestResult>>();
    auto* t = new Task(
        info.Env(), [=] { *res = splash::cpu::kernel_self_test(seed); },
        [=](Napi::Env env) -> Napi::Value {
          Napi::Array a = Napi::Array::New(env, res->size());
          for (size_t i = 0; i < res->size(); ++i) {
            const auto& r = (*res)[i];
            Napi::Object o = Napi::Object::New(env);
            o.Set("kernel", r.kernel);
            o.Set("isa", r.isa);
            o.Set("against", r.against);
            o.Set("maxErr", r.max_err);
            o.Set("tol", r.tol);
            o.Set("ok", r.ok);
            a.Set(uint32_t(i), o);
          }
          return a;
        });
    Napi::Promise p = t->promise();
    t->Queue();
    return p;
  });
}

// benchMatmul({rows, cols, dtype, threads?, int8?, iters?, isa?}) → Promise<object>
Napi::Value BenchMatmul(const Napi::CallbackInfo& info) {
  return guard(info, [&]() -> Napi::Value {
    if (info.Length() < 1 || !info[0].IsObject()) fail("invalid_argument", "benchMatmul(opts)");
    Napi::Object o = info[0].As<Napi::Object>();
    int64_t rows = int_arg(o.Get("rows"), "rows", 1, 1 << 20), cols = int_arg(o.Get("cols"), "cols", 64, 1 << 20);
    std::string dtype = o.Get("dtype").IsString() ? std::string(o.Get("dtype").As<Napi::String>()) : "q4";
    int threads = o.Get("threads").IsUndefined() ? 0 : int_arg(o.Get("threads"), "threads", 1, 256);
    int iters = o.Get("iters").IsUndefined() ? 20 : int_arg(o.Get("iters"), "iters", 1, 10000);
    int int8 = o.Get("int8").IsUndefined() ? 1 : (o.Get("int8").ToBoolean().Value() ? 1 : 0);
    if (o.Get("activations").IsString()) {
      std::string a = o.Get("activations").As<Napi::String>();
      int8 = a == "f32" ? 0 : a == "int8" ? 1 : a == "int8x2" ? 2 : -1;
      if (int8 < 0) fail("invalid_argument", "activations must be 'f32', 'int8' or 'int8x2'");
    }
    std::string isa = o.Get("isa").IsString() ? std::string(o.Get("isa").As<Napi::String>()) : "";
    auto res = std::make_shared<splash::cpu::BenchResult>();
    auto* t = new Task(
        info.Env(),
        [=] { *res = splash::cpu::bench_matmul(rows, cols, dtype, threads, int8, iters, isa.empty() ? nullptr : isa.c_str()); },
        [=](Napi::Env env) -> Napi::Value {
          Napi::Object r = Napi::Object::New(env);
          r.Set("isa", res->isa);
          r.Set("threads", res->threads);
          r.Set("rows", double(res->rows));
          r.Set("cols", double(res->cols));
          r.Set("dtype", res->dtype);
          r.Set("int8", res->int8 > 0);
          r.Set("activations", res->int8 == 0 ? "f32" : res->int8 == 1 ? "int8" : "int8x2");
          r.Set("weightBytes", res->weight_bytes);
          r.Set("secondsPerMatvec", res->seconds_per_matvec);
          r.Set("matvecGBps", res->matvec_gbps);
          r.Set("readGBps", res->read_gbps);
          r.Set("memcpyGBps", res->memcpy_gbps);
          return r;
        });
    Napi::Promise p = t->promise();
    t->Queue();
    return p;
  });
}

// runMatmul({dtype, rows, cols, weight: Uint8Array|Float32Array|Uint16Array|Uint32Array, scales?, biases?,
//            x: Float32Array [nt·cols], nt, int8?, isa?, exact?}) → Float32Array [nt·rows] (test-only, sync; small inputs)
Napi::Value RunMatmul(const Napi::CallbackInfo& info) {
  return guard(info, [&]() -> Napi::Value {
    if (info.Length() < 1 || !info[0].IsObject()) fail("invalid_argument", "runMatmul(opts)");
    Napi::Object o = info[0].As<Napi::Object>();
    std::string dtype = o.Get("dtype").IsString() ? std::string(o.Get("dtype").As<Napi::String>()) : "";
    int d = dtype == "q4" ? SPLASH_Q4 : dtype == "q8" ? SPLASH_Q8 : dtype == "bf16" ? SPLASH_BF16 : dtype == "f32" ? SPLASH_F32 : -1;
    if (d < 0) fail("invalid_argument", "dtype must be q4, q8, bf16 or f32");
    const int64_t rows = int_arg(o.Get("rows"), "rows", 1, 1 << 16), cols = int_arg(o.Get("cols"), "cols", 1, 1 << 16);
    const int32_t nt = int_arg(o.Get("nt"), "nt", 1, 4096);
    const bool quant = d == SPLASH_Q4 || d == SPLASH_Q8;
    if (quant && cols % 64) fail("invalid_argument", "q4/q8 need cols % 64 == 0");
    auto bytes_of = [&](const char* key, size_t want) -> const void* {
      Napi::Value v = o.Get(key);
      if (!v.IsTypedArray()) fail("invalid_argument", std::string(key) + " must be a typed array");
      Napi::TypedArray ta = v.As<Napi::TypedArray>();
      if (ta.ByteLength() != want) fail("invalid_argument", std::string(key) + " has the wrong byte length");
      return static_cast<const uint8_t*>(ta.ArrayBuffer().Data()) + ta.ByteOffset();
    };
    const size_t wbytes = d == SPLASH_F32 ? rows * cols * 4 : d == SPLASH_BF16 ? rows * cols * 2 : d == SPLASH_Q8 ? rows * cols : rows * cols / 2;
    splash_weight w{};
    w.dtype = d;
    w.rows = rows;
    w.cols = cols;
    // copy into aligned storage (the kernels may use aligned loads in future)
    std::vector<uint8_t> wcopy(wbytes + 64);
    std::memcpy(wcopy.data(), bytes_of("weight", wbytes), wbytes);
    w.data = wcopy.data();
    std::vector<uint16_t> sc, bi;
    if (quant) {
      const size_t n = rows * cols / 64;
      sc.resize(n);
      bi.resize(n);
      std::memcpy(sc.data(), bytes_of("scales", n * 2), n * 2);
      std::memcpy(bi.data(), bytes_of("biases", n * 2), n * 2);
      w.scales = sc.data();
      w.biases = bi.data();
    }
    if (o.Get("exact").ToBoolean().Value()) w.flags = SPLASH_WEIGHT_EXACT;
    const float* x = static_cast<const float*>(bytes_of("x", size_t(nt) * cols * 4));
    int levels = o.Get("int8").ToBoolean().Value() ? 1 : 0;
    if (o.Get("int8x2").ToBoolean().Value()) levels = 2;
    std::string isa = o.Get("isa").IsString() ? std::string(o.Get("isa").As<Napi::String>()) : "";
    splash_backend* be = splash_backend_cpu_create(1, isa.empty() ? nullptr : isa.c_str(), levels);
    if (!be) fail("unsupported", "ISA not supported on this CPU");
    Napi::Float32Array y = Napi::Float32Array::New(info.Env(), size_t(nt) * rows);
    be->iface->matmul(be->ctx, &w, x, nt, y.Data(), rows);
    splash_backend_cpu_free(be);
    return y;
  });
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("runMatmul", Napi::Function::New(env, RunMatmul));
  exports.Set("sampleLogits", Napi::Function::New(env, [](const Napi::CallbackInfo& info) {
                return guard(info, [&] { return splash::addon::SampleLogits(info); });
              }));
  exports.Set("abiVersion", Napi::Number::New(env, SPLASH_BACKEND_ABI));
  exports.Set("openModel", Napi::Function::New(env, OpenModel));
  exports.Set("modelInfo", Napi::Function::New(env, ModelInfo));
  exports.Set("sequenceBytes", Napi::Function::New(env, SequenceBytes));
  exports.Set("createSequence", Napi::Function::New(env, CreateSequence));
  exports.Set("freeSequence", Napi::Function::New(env, FreeSequence));
  exports.Set("truncateSequence", Napi::Function::New(env, TruncateSequence));
  exports.Set("sequenceLength", Napi::Function::New(env, SequenceLength));
  exports.Set("step", Napi::Function::New(env, Step));
  exports.Set("draft", Napi::Function::New(env, Draft));
  exports.Set("saveRows", Napi::Function::New(env, SaveRows));
  exports.Set("saveState", Napi::Function::New(env, SaveState));
  exports.Set("restoreSequence", Napi::Function::New(env, RestoreSequence));
  exports.Set("freeSaved", Napi::Function::New(env, FreeSaved));
  exports.Set("savedStats", Napi::Function::New(env, SavedStats));
  exports.Set("encodeImage", Napi::Function::New(env, EncodeImage));
  exports.Set("closeModel", Napi::Function::New(env, CloseModel));
  exports.Set("isaList", Napi::Function::New(env, IsaList));
  exports.Set("kernelSelfTest", Napi::Function::New(env, KernelSelfTest));
  exports.Set("benchMatmul", Napi::Function::New(env, BenchMatmul));
  return exports;
}

}  // namespace

NODE_API_MODULE(splash_core, Init)
