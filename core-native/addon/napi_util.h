// Shared pieces of the N-API surface: coded JS errors, the guard every entry runs in, integer arguments,
// the promise-returning worker, and JSON to JS values. Every entry validates its arguments on the JS thread;
// heavy work runs on the libuv pool (Task) so the event loop never waits on compute, and no C++ exception
// escapes (NAPI_CPP_EXCEPTIONS turns Napi::Error throws into JS throws; everything else is caught here).
#pragma once
#include <napi.h>

#include <cmath>
#include <functional>
#include <string>

#include "runtime/error.h"
#include "runtime/json.h"

namespace splash::addon {

using splash::Error;

inline Napi::Error coded(Napi::Env env, const std::string& code, const std::string& msg) {
  Napi::Error e = Napi::Error::New(env, msg);
  e.Set("code", Napi::String::New(env, code));
  return e;
}
[[noreturn]] inline void fail(const std::string& code, const std::string& msg) { throw Error(code, msg); }

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

inline int32_t int_arg(const Napi::Value& v, const char* what, int64_t lo, int64_t hi) {
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

  // Runs the work on the calling (JS) thread instead of queueing it to libuv's pool, settles the promise and frees
  // the task: for steps so short that the two thread hand-offs of a queued call (to a pool thread and back to the
  // event loop) cost a noticeable part of them.
  Napi::Promise run_here() {
    Napi::Promise p = promise();
    Execute();
    if (message_.empty()) OnOK();
    else OnError(Napi::Error::New(Env(), message_));
    delete this;
    return p;
  }

  void Execute() override {
    try {
      exec_();
    } catch (const Error& e) {
      fail(e.code, e.what());
    } catch (const std::bad_alloc&) {
      fail("out_of_memory", "out of memory");
    } catch (const std::exception& e) {
      fail("internal", e.what());
    } catch (...) {
      fail("internal", "unknown native error");
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
  std::string code_, message_;

  void fail(const std::string& code, const std::string& message) {
    code_ = code;
    message_ = message.empty() ? "native error" : message;
    SetError(message_);
  }
};

inline Napi::Value to_js(Napi::Env env, const splash::Json& j) {
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

}  // namespace splash::addon
