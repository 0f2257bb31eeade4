// Sampling requests from JavaScript, checked field by field: nothing a caller passes reaches the sampler
// unvalidated (ranges as in src/engine/sampling.ts, which checks API input first with API wording).
#include "addon/sample_args.h"

#include <cmath>

#include "runtime/error.h"

namespace splash::addon {

namespace {

[[noreturn]] void bad(const std::string& msg) { throw Error("invalid_argument", msg); }

double number(const Napi::Object& o, const char* key, const std::string& where, double dflt, double lo, double hi,
              bool lo_open = false) {
  Napi::Value v = o.Get(key);
  if (v.IsUndefined()) return dflt;
  const std::string name = where + "." + key;
  if (!v.IsNumber()) bad(name + " must be a number");
  const double d = v.As<Napi::Number>().DoubleValue();
  if (!std::isfinite(d) || d < lo || d > hi || (lo_open && d == lo))
    bad(name + " must be in " + (lo_open ? "(" : "[") + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return d;
}

int32_t integer(const Napi::Value& v, const std::string& name, double lo, double hi) {
  if (!v.IsNumber()) bad(name + " must be an integer");
  const double d = v.As<Napi::Number>().DoubleValue();
  if (!std::isfinite(d) || d != std::floor(d) || d < lo || d > hi)
    bad(name + " must be an integer in [" + std::to_string(int64_t(lo)) + ", " + std::to_string(int64_t(hi)) + "]");
  return int32_t(d);
}

std::vector<int32_t> int32s(const Napi::Value& v, const std::string& name) {
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != napi_int32_array) bad(name + " must be an Int32Array");
  Napi::Int32Array a = v.As<Napi::Int32Array>();
  return std::vector<int32_t>(a.Data(), a.Data() + a.ElementLength());
}

// Token ids that must each be in the vocabulary, once.
void unique_ids(const std::vector<int32_t>& ids, int V, const std::string& name) {
  std::vector<bool> seen(size_t(V), false);
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (id < 0 || id >= V) bad(name + "[" + std::to_string(i) + "] is outside the vocabulary");
    if (seen[size_t(id)]) bad(name + "[" + std::to_string(i) + "] repeats token " + std::to_string(id));
    seen[size_t(id)] = true;
  }
}

sampler::Params parse_params(const Napi::Value& v, const std::string& where) {
  if (!v.IsObject()) bad(where + " must be an object");
  Napi::Object o = v.As<Napi::Object>();
  sampler::Params p;
  p.temperature = float(number(o, "temperature", where, 0, 0, 100));
  p.top_p = number(o, "topP", where, 1, 0, 1, true);
  p.top_k = o.Get("topK").IsUndefined() ? 0 : integer(o.Get("topK"), where + ".topK", 0, INT32_MAX);
  p.min_p = number(o, "minP", where, 0, 0, 1);
  p.presence = float(number(o, "presencePenalty", where, 0, -100, 100));
  p.frequency = float(number(o, "frequencyPenalty", where, 0, -100, 100));
  p.repetition = float(number(o, "repetitionPenalty", where, 1, 0, 100, true));
  return p;
}

}  // namespace

std::shared_ptr<const sampler::Request> parse_sample(const Napi::Value& v, const std::string& where, int V, int max_rows) {
  if (!v.IsObject()) bad(where + " must be an object");
  Napi::Object o = v.As<Napi::Object>();
  auto req = std::make_shared<sampler::Request>();
  req->params = parse_params(o.Get("params"), where + ".params");
  Napi::Value bv = o.Get("params").As<Napi::Object>().Get("logitBias");
  if (!bv.IsUndefined()) {
    const std::string bw = where + ".params.logitBias";
    if (!bv.IsObject()) bad(bw + " must be an object");
    Napi::Object bo = bv.As<Napi::Object>();
    req->bias.ids = int32s(bo.Get("ids"), bw + ".ids");
    Napi::Value vv = bo.Get("values");
    if (!vv.IsTypedArray() || vv.As<Napi::TypedArray>().TypedArrayType() != napi_float32_array) bad(bw + ".values must be a Float32Array");
    Napi::Float32Array va = vv.As<Napi::Float32Array>();
    req->bias.values.assign(va.Data(), va.Data() + va.ElementLength());
    if (req->bias.ids.size() != req->bias.values.size()) bad(bw + ": ids and values differ in length");
    unique_ids(req->bias.ids, V, bw + ".ids");
    for (size_t i = 0; i < req->bias.values.size(); ++i)
      if (!std::isfinite(req->bias.values[i])) bad(bw + ".values[" + std::to_string(i) + "] is not finite");
  }
  Napi::Value lp = o.Get("logprobs");
  req->n_top = lp.IsUndefined() ? -1 : integer(lp, where + ".logprobs", 0, std::min(V, 1024));
  Napi::Value pen = o.Get("penalties");
  if (!pen.IsUndefined()) {
    if (!pen.IsObject()) bad(where + ".penalties must be an object");
    Napi::Object po = pen.As<Napi::Object>();
    req->penalties.ids = int32s(po.Get("ids"), where + ".penalties.ids");
    req->penalties.counts = int32s(po.Get("counts"), where + ".penalties.counts");
    if (req->penalties.ids.size() != req->penalties.counts.size()) bad(where + ".penalties: ids and counts differ in length");
    unique_ids(req->penalties.ids, V, where + ".penalties.ids");
    for (size_t i = 0; i < req->penalties.counts.size(); ++i)
      if (req->penalties.counts[i] < 0) bad(where + ".penalties.counts[" + std::to_string(i) + "] is negative");
  }
  Napi::Value rv = o.Get("rows");
  if (!rv.IsArray()) bad(where + ".rows must be an array");
  Napi::Array rows = rv.As<Napi::Array>();
  if (rows.Length() < 1 || rows.Length() > uint32_t(max_rows))
    bad(where + ".rows must hold 1.." + std::to_string(max_rows) + " rows (the item's trailing rows)");
  const size_t words = (size_t(V) + 31) / 32;
  req->rows.resize(rows.Length());
  for (uint32_t r = 0; r < rows.Length(); ++r) {
    const std::string rw = where + ".rows[" + std::to_string(r) + "]";
    Napi::Value e = rows.Get(r);
    if (!e.IsObject()) bad(rw + " must be an object");
    Napi::Object ro = e.As<Napi::Object>();
    sampler::Row& row = req->rows[r];
    Napi::Value u = ro.Get("uniform");
    if (!u.IsUndefined()) {
      if (!u.IsNumber()) bad(rw + ".uniform must be a number");
      row.uniform = u.As<Napi::Number>().DoubleValue();
      if (!(row.uniform >= 0 && row.uniform < 1)) bad(rw + ".uniform must be in [0, 1)");
    }
    Napi::Value t = ro.Get("token");
    if (!t.IsUndefined()) row.token = integer(t, rw + ".token", 0, V - 1);
    if (u.IsUndefined() && row.token < 0 && req->params.temperature > 0)
      bad(rw + ".uniform is needed at temperature > 0");
    Napi::Value dv = ro.Get("draft");
    if (!dv.IsUndefined()) {
      row.draft = integer(dv, rw + ".draft", 0, V - 1);
      Napi::Value av = ro.Get("accept");
      if (!av.IsNumber()) bad(rw + ".accept (a number) must come with .draft");
      row.accept = av.As<Napi::Number>().DoubleValue();
      if (!(row.accept >= 0 && row.accept < 1)) bad(rw + ".accept must be in [0, 1)");
    }
    Napi::Value rt = ro.Get("retry");
    if (!rt.IsUndefined()) {
      if (!rt.IsNumber()) bad(rw + ".retry must be a number");
      row.retry = rt.As<Napi::Number>().DoubleValue();
      if (!(row.retry >= 0 && row.retry < 1)) bad(rw + ".retry must be in [0, 1)");
      if (row.draft >= 0) bad(rw + ".retry cannot come with .draft (a row verifies a draft or follows a grammar)");
    }
    Napi::Value a = ro.Get("allowed");
    if (!a.IsUndefined()) {
      if (!a.IsTypedArray()) bad(rw + ".allowed must be an Int32Array or Uint32Array");
      Napi::TypedArray ta = a.As<Napi::TypedArray>();
      if (ta.TypedArrayType() != napi_int32_array && ta.TypedArrayType() != napi_uint32_array)
        bad(rw + ".allowed must be an Int32Array or Uint32Array");
      if (ta.ElementLength() != words)
        bad(rw + ".allowed must hold ceil(vocab/32) = " + std::to_string(words) + " words, not " + std::to_string(ta.ElementLength()));
      const auto* w = reinterpret_cast<const uint32_t*>(static_cast<const uint8_t*>(ta.ArrayBuffer().Data()) + ta.ByteOffset());
      row.allowed.assign(w, w + words);
      if (V % 32) row.allowed.back() &= (1u << (V % 32)) - 1;  // bits past the vocabulary mean nothing
      bool any = false;
      for (uint32_t x : row.allowed) any = any || x != 0;
      if (!any) bad(rw + ".allowed allows no token");
    }
  }
  return req;
}

Napi::Array sampled_to_js(Napi::Env env, const std::vector<sampler::Sampled>& rows, bool logprobs) {
  Napi::Array a = Napi::Array::New(env, rows.size());
  for (size_t r = 0; r < rows.size(); ++r) {
    Napi::Object o = Napi::Object::New(env);
    o.Set("token", rows[r].token);
    if (logprobs) {
      o.Set("logprob", double(rows[r].logprob));
      Napi::Array top = Napi::Array::New(env, rows[r].top.size());
      for (size_t i = 0; i < rows[r].top.size(); ++i) {
        Napi::Object e = Napi::Object::New(env);
        e.Set("token", rows[r].top[i].token);
        e.Set("logprob", double(rows[r].top[i].logprob));
        top.Set(uint32_t(i), e);
      }
      o.Set("top", top);
    }
    a.Set(uint32_t(r), o);
  }
  return a;
}

Napi::Value SampleLogits(const Napi::CallbackInfo& info) {
  if (info.Length() < 3) bad("sampleLogits(logits, vocab, sample)");
  Napi::Value lv = info[0];
  if (!lv.IsTypedArray() || lv.As<Napi::TypedArray>().TypedArrayType() != napi_float32_array) bad("logits must be a Float32Array");
  Napi::Float32Array logits = lv.As<Napi::Float32Array>();
  const int V = integer(info[1], "vocab", 1, 1 << 24);
  if (logits.ElementLength() == 0 || logits.ElementLength() % size_t(V)) bad("logits must hold whole rows of `vocab` values");
  const int nrows = int(logits.ElementLength() / size_t(V));
  auto req = parse_sample(info[2], "sample", V, nrows);
  std::vector<sampler::Sampled> out;
  const size_t first = size_t(nrows) - req->rows.size();
  sampler::sample_rows(logits.Data() + first * V, V, *req, out);
  return sampled_to_js(info.Env(), out, req->n_top >= 0);
}

}  // namespace splash::addon
