// Loaded models by handle (small positive integers). A handle stays valid until closeModel; a model is freed
// when its last user (an in-flight step holds a shared_ptr) lets go.
#pragma once
#include <napi.h>

#include <cstdint>
#include <memory>

#include "model/model.h"

namespace splash::addon {

// Registers a freshly opened model and returns its handle.
uint32_t add_model(std::shared_ptr<Model> m);
// The model named by info[0], or a coded error (unknown_model / invalid_argument).
std::shared_ptr<Model> model_arg(const Napi::CallbackInfo& info);
// Forgets the handle (the model lives on while steps still hold it).
void remove_model(uint32_t handle);

}  // namespace splash::addon
