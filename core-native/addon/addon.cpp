// N-API module of the engine: exports the entries (model_api, saved_api, step_api, kernels_api, sample_args).
#include <napi.h>

#include "addon/entries.h"
#include "addon/napi_util.h"
#include "addon/sample_args.h"
#include "splash/backend.h"

namespace {

using namespace splash::addon;

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("runMatmul", Napi::Function::New(env, RunMatmul));
  exports.Set("sampleLogits", Napi::Function::New(env, [](const Napi::CallbackInfo& info) {
                return guard(info, [&] { return SampleLogits(info); });
              }));
  exports.Set("abiVersion", Napi::Number::New(env, SPLASH_BACKEND_ABI));
  exports.Set("backendInfo", Napi::Function::New(env, BackendInfo));
  exports.Set("openModel", Napi::Function::New(env, OpenModel));
  exports.Set("modelInfo", Napi::Function::New(env, ModelInfo));
  exports.Set("sequenceBytes", Napi::Function::New(env, SequenceBytes));
  exports.Set("stateSizes", Napi::Function::New(env, StateSizes));
  exports.Set("createSequence", Napi::Function::New(env, CreateSequence));
  exports.Set("freeSequence", Napi::Function::New(env, FreeSequence));
  exports.Set("truncateSequence", Napi::Function::New(env, TruncateSequence));
  exports.Set("sequenceLength", Napi::Function::New(env, SequenceLength));
  exports.Set("step", Napi::Function::New(env, Step));
  exports.Set("draft", Napi::Function::New(env, Draft));
  exports.Set("resample", Napi::Function::New(env, Resample));
  exports.Set("saveRows", Napi::Function::New(env, SaveRows));
  exports.Set("saveState", Napi::Function::New(env, SaveState));
  exports.Set("restoreSequence", Napi::Function::New(env, RestoreSequence));
  exports.Set("freeSaved", Napi::Function::New(env, FreeSaved));
  exports.Set("exportSaved", Napi::Function::New(env, ExportSaved));
  exports.Set("importRows", Napi::Function::New(env, ImportRows));
  exports.Set("importState", Napi::Function::New(env, ImportState));
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
