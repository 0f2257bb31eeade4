// The JS entries of the addon (Init in addon.cpp exports them); each validates its arguments and never throws
// anything but a coded JS Error.
#pragma once
#include <napi.h>

namespace splash::addon {

Napi::Value BackendInfo(const Napi::CallbackInfo& info);
Napi::Value StateSizes(const Napi::CallbackInfo& info);
Napi::Value OpenModel(const Napi::CallbackInfo& info);
Napi::Value ModelInfo(const Napi::CallbackInfo& info);
Napi::Value SequenceBytes(const Napi::CallbackInfo& info);
Napi::Value CreateSequence(const Napi::CallbackInfo& info);
Napi::Value FreeSequence(const Napi::CallbackInfo& info);
Napi::Value TruncateSequence(const Napi::CallbackInfo& info);
Napi::Value SequenceLength(const Napi::CallbackInfo& info);
Napi::Value CloseModel(const Napi::CallbackInfo& info);
Napi::Value SaveRows(const Napi::CallbackInfo& info);
Napi::Value SaveState(const Napi::CallbackInfo& info);
Napi::Value RestoreSequence(const Napi::CallbackInfo& info);
Napi::Value FreeSaved(const Napi::CallbackInfo& info);
Napi::Value ExportSaved(const Napi::CallbackInfo& info);
Napi::Value ImportRows(const Napi::CallbackInfo& info);
Napi::Value ImportState(const Napi::CallbackInfo& info);
Napi::Value SavedStats(const Napi::CallbackInfo& info);
Napi::Value EncodeImage(const Napi::CallbackInfo& info);
Napi::Value Step(const Napi::CallbackInfo& info);
Napi::Value Draft(const Napi::CallbackInfo& info);
Napi::Value Resample(const Napi::CallbackInfo& info);
Napi::Value IsaList(const Napi::CallbackInfo& info);
Napi::Value KernelSelfTest(const Napi::CallbackInfo& info);
Napi::Value BenchMatmul(const Napi::CallbackInfo& info);
Napi::Value RunMatmul(const Napi::CallbackInfo& info);

}  // namespace splash::addon
