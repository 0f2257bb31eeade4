// The prefix cache's native half: KV rows and states saved from a sequence, restored into another, freed.
#include "addon/entries.h"
#include "addon/napi_util.h"
#include "addon/registry.h"

namespace splash::addon {

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

// saveState(handle, seqId, length?) → id: the state at the sequence's length, or at a length its last step kept (snapshots)
Napi::Value SaveState(const Napi::CallbackInfo& info) {
  return guard(info, [&]() -> Napi::Value {
    auto m = model_arg(info);
    if (info.Length() < 2) fail("invalid_argument", "saveState(handle, seqId, length?)");
    const int32_t length = info.Length() > 2 && !info[2].IsUndefined() ? int_arg(info[2], "length", 0, INT32_MAX) : -1;
    return Napi::Number::New(info.Env(), double(m->save_state(int_arg(info[1], "seqId", 0, INT32_MAX), length)));
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

// savedStats(handle) → {sequences, rows, states, bytes, pooled}: what the model holds (leak checks; pooled =
// idle sequence buffers kept for reuse, bounded by the most live sequences held at once)
Napi::Value SavedStats(const Napi::CallbackInfo& info) {
  return guard(info, [&]() -> Napi::Value {
    auto m = model_arg(info);
    const auto st = m->saved_stats();
    Napi::Object o = Napi::Object::New(info.Env());
    o.Set("sequences", double(st.sequences));
    o.Set("rows", double(st.rows));
    o.Set("states", double(st.states));
    o.Set("bytes", double(st.bytes));
    o.Set("pooled", double(st.pooled));
    return o;
  });
}

// ---- the disk tier: saved pieces as floats on the host and back
namespace {

Napi::Float32Array floats_arg(const Napi::Value& v, const char* what) {
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != napi_float32_array)
    fail("invalid_argument", std::string(what) + " must be a Float32Array");
  return v.As<Napi::Float32Array>();
}

}  // namespace

// exportSaved(handle, id) → {kind: 'rows', n, draft, data} | {kind: 'state', length, draft, windowLength, data,
// window}: copies of a saved piece's floats (data, window: Float32Array)
Napi::Value ExportSaved(const Napi::CallbackInfo& info) {
  return guard(info, [&]() -> Napi::Value {
    auto m = model_arg(info);
    if (info.Length() < 2) fail("invalid_argument", "exportSaved(handle, id)");
    const int64_t id = saved_arg(info[1], "id");
    const auto si = m->saved_info(id);
    Napi::Env env = info.Env();
    Napi::Float32Array a = Napi::Float32Array::New(env, si.a_floats);
    Napi::Float32Array b = Napi::Float32Array::New(env, si.b_floats);
    m->read_saved(id, a.Data(), b.Data());
    Napi::Object o = Napi::Object::New(env);
    o.Set("kind", si.state ? "state" : "rows");
    o.Set(si.state ? "length" : "n", double(si.n));
    o.Set("draft", si.draft);
    o.Set("data", a);
    if (si.state) {
      o.Set("windowLength", double(si.win_n));
      o.Set("window", b);
    }
    return o;
  });
}

// importRows(handle, n, draft, data) → id
Napi::Value ImportRows(const Napi::CallbackInfo& info) {
  return guard(info, [&]() -> Napi::Value {
    auto m = model_arg(info);
    if (info.Length() < 4 || !info[2].IsBoolean()) fail("invalid_argument", "importRows(handle, n, draft, data)");
    Napi::Float32Array d = floats_arg(info[3], "data");
    const int64_t id = m->import_rows(int_arg(info[1], "n", 1, INT32_MAX), info[2].As<Napi::Boolean>().Value(), d.Data(), d.ElementLength());
    return Napi::Number::New(info.Env(), double(id));
  });
}

// importState(handle, length, draft, windowLength, data, window) → id
Napi::Value ImportState(const Napi::CallbackInfo& info) {
  return guard(info, [&]() -> Napi::Value {
    auto m = model_arg(info);
    if (info.Length() < 6 || !info[2].IsBoolean()) fail("invalid_argument", "importState(handle, length, draft, windowLength, data, window)");
    Napi::Float32Array d = floats_arg(info[4], "data");
    Napi::Float32Array w = floats_arg(info[5], "window");
    const int64_t id = m->import_state(int_arg(info[1], "length", 1, INT32_MAX), info[2].As<Napi::Boolean>().Value(),
                                       int_arg(info[3], "windowLength", 0, INT32_MAX), d.Data(), d.ElementLength(), w.Data(),
                                       w.ElementLength());
    return Napi::Number::New(info.Env(), double(id));
  });
}

}  // namespace splash::addon
