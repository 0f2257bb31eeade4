// Models and sequences: open, describe, close; create, free, truncate and measure sequences.
#include <cmath>

#include "addon/entries.h"
#include "addon/napi_util.h"
#include "addon/registry.h"
#include "backend/cpu/isa.h"
#include "backend/loader.h"
#include "model/state/state_sizes.h"
#include "model/load/vision.h"
#include "runtime/options.h"

namespace splash::addon {

// A device backend's memory as {free, total, used, limit} (bytes; limit 0 = none), or null on host memory.
Napi::Value device_memory_js(Napi::Env env, const splash_backend& b) {
  uint64_t fr = 0, tot = 0, used = 0, limit = 0;
  if (!backend_device_memory(b, fr, tot, used, limit)) return env.Null();
  Napi::Object o = Napi::Object::New(env);
  o.Set("free", double(fr));
  o.Set("total", double(tot));
  o.Set("used", double(used));
  o.Set("limit", double(limit));
  return o;
}

// backendInfo() → {backend, isa, deviceMemory, note, ops}: the backend openModel would choose now ($SPLASH_BACKEND,
// else CUDA when a device is present), opened and closed again, so the memory plan can be made before loading; ops:
// the operations it has (splash_backend_supports_op), by slot name.
Napi::Value BackendInfo(const Napi::CallbackInfo& info) {
  return guard(info, [&]() -> Napi::Value {
    Napi::Env env = info.Env();
    BackendHandle h = backend_open("", 1, nullptr, 2);
    Napi::Object o = Napi::Object::New(env);
    o.Set("backend", std::string(h.backend->iface->name));
    o.Set("isa", std::string(h.backend->iface->variant ? h.backend->iface->variant : ""));
    o.Set("deviceMemory", device_memory_js(env, *h.backend));
    o.Set("note", backend_cuda_note());
    Napi::Array ops = Napi::Array::New(env);
    for (int op = 0; op < SPLASH_OP_COUNT; ++op)
      if (splash_backend_supports_op(h.backend, splash_op(op))) ops.Set(ops.Length(), splash_op_name(splash_op(op)));
    o.Set("ops", ops);
    backend_close(h);
    return o;
  });
}

// stateSizes(manifestJson, {kvElementBytes?, rollback?}) → the per-sequence state sizes a model of this package keeps
// (model/state/state_sizes.h), for the memory plan before any model opens: {recurrentBytes, kvBytesPerToken,
// draftWindowBytes, speculativeBytes, draftRowsBytes, gdnRollback}. manifestJson: splash.json's text, or an object's
// JSON with its `family`, `config` and `draft` (null: none). rollback: "replay" or "states" forces the method;
// else $SPLASH_GDN_ROLLBACK, else the rule by state size, as a model opening now would choose.
Napi::Value StateSizes(const Napi::CallbackInfo& info) {
  return guard(info, [&]() -> Napi::Value {
    if (info.Length() < 1 || !info[0].IsString())
      fail("invalid_argument", "stateSizes(manifestJson, {kvElementBytes?, rollback?})");
    const std::string text = info[0].As<Napi::String>().Utf8Value();
    int elem = 4;
    std::string rollback = options_from_env().gdn_rollback;
    if (info.Length() > 1 && info[1].IsObject()) {
      Napi::Object o = info[1].As<Napi::Object>();
      if (o.Has("kvElementBytes") && !o.Get("kvElementBytes").IsUndefined())
        elem = int_arg(o.Get("kvElementBytes"), "kvElementBytes", 1, 8);
      if (o.Has("rollback") && !o.Get("rollback").IsUndefined()) {
        if (!o.Get("rollback").IsString()) fail("invalid_argument", "rollback must be \"replay\" or \"states\"");
        rollback = o.Get("rollback").As<Napi::String>().Utf8Value();
      }
    } else if (info.Length() > 1 && !info[1].IsUndefined()) {
      fail("invalid_argument", "stateSizes: the options must be an object");
    }
    if (!rollback.empty() && rollback != "replay" && rollback != "states")
      fail("invalid_argument", "SPLASH_GDN_ROLLBACK must be replay or states, not " + rollback);
    const Json manifest = Json::parse(text.data(), text.size());
    if (manifest.kind != Json::Object || !manifest.find("config") || manifest.find("config")->kind != Json::Object)
      fail("invalid_argument", "stateSizes: the manifest needs a config object");
    const ModelConfig c = parse_model_config(manifest);
    DraftConfig d;
    const Json* dr = manifest.find("draft");
    const Json* dc = dr && dr->kind == Json::Object ? dr->find("config") : nullptr;
    if (dc && dc->kind == Json::Object) d = parse_draft_config(*dc, c);
    const StateLayout layout = state_layout(c);
    const bool replay = layout.n_linear > 0 && (rollback.empty() ? rollback_replay_by_size(c) : rollback == "replay");
    const PlanSizes p = plan_sizes(c, d.B > 0 ? &d : nullptr, elem, replay);
    Napi::Env env = info.Env();
    Napi::Object o = Napi::Object::New(env);
    o.Set("recurrentBytes", p.recurrent);
    o.Set("kvBytesPerToken", p.kv_per_token);
    o.Set("draftWindowBytes", p.draft_window);
    o.Set("speculativeBytes", p.speculative);
    o.Set("draftRowsBytes", p.draft_rows);
    o.Set("gdnRollback", replay ? "replay" : "states");
    return o;
  });
}

// openModel(dir, {threads?, isa?, int8?, activations?, draft?, maxMemory?}) → Promise<handle>
Napi::Value OpenModel(const Napi::CallbackInfo& info) {
  return guard(info, [&]() -> Napi::Value {
    if (info.Length() < 1 || !info[0].IsString()) fail("invalid_argument", "openModel(dir, opts): dir must be a string");
    std::string dir = info[0].As<Napi::String>();
    int threads = 0;
    std::string isa;
    int levels = 2;  // int8x2 by default
    bool draft = true;
    uint64_t max_memory = 0;
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
      if (o.Has("maxMemory") && !o.Get("maxMemory").IsUndefined()) {
        const Napi::Value v = o.Get("maxMemory");
        const double d = v.IsNumber() ? v.As<Napi::Number>().DoubleValue() : -1;
        if (!(d >= 0 && d <= 9.0e15 && d == std::floor(d))) fail("invalid_argument", "maxMemory must be a non-negative integer (bytes)");
        max_memory = uint64_t(d);
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
        [=] { *holder = Model::open(dir, threads, isa.empty() ? nullptr : isa.c_str(), levels, draft, "", max_memory); },
        [=](Napi::Env env) -> Napi::Value {
          return Napi::Number::New(env, add_model(std::shared_ptr<Model>(std::move(*holder))));
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
    o.Set("threads", m->threads());
    o.Set("deviceMemory", device_memory_js(env, m->backend()));
    o.Set("specialisedKernels", m->specialised_kernels().empty() ? Napi::Value(env.Null())
                                                                 : Napi::Value(Napi::String::New(env, m->specialised_kernels())));
    o.Set("activationType", "f32");
    o.Set("matmulActivations", m->act_levels() == 0 ? "f32" : m->act_levels() == 1 ? "int8" : "int8x2");
    o.Set("kvType", "f32");
    if (m->has_draft()) {
      const auto& d = m->draft_config();
      Napi::Object dr = Napi::Object::New(env);
      dr.Set("blockSize", d.B);
      dr.Set("maskTokenId", d.mask);
      dr.Set("numLayers", d.L);
      // per position only the full-attention layers grow; a sliding layer keeps a fixed ring, and a saved state
      // carries its window (the last window − 1 positions)
      int sliding = 0;
      for (bool x : d.sliding) sliding += x;
      dr.Set("kvBytesPerToken", double(int64_t(d.L - sliding) * 2 * d.nkv * d.hd * 4));
      dr.Set("savedWindowBytes", double(int64_t(sliding) * 2 * d.nkv * d.hd * 4 * m->draft_keep(INT32_MAX)));
      Napi::Array taps = Napi::Array::New(env, d.taps.size());
      for (size_t i = 0; i < d.taps.size(); ++i) taps.Set(uint32_t(i), d.taps[i]);
      dr.Set("targetLayerIds", taps);
      dr.Set("gdnRollback", m->rollback_replay() ? "replay" : "states");
      dr.Set("rollbackBytes", double(m->rollback_floats(d.B) * 4));
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

Napi::Value CloseModel(const Napi::CallbackInfo& info) {
  return guard(info, [&]() -> Napi::Value {
    model_arg(info);
    remove_model(uint32_t(info[0].As<Napi::Number>().DoubleValue()));
    return info.Env().Undefined();  // freed when the last in-flight step finishes
  });
}

}  // namespace splash::addon
