// N-API translation of sampling requests (step and draft items' `sample`, the test entry sampleLogits) and of
// their results.
#pragma once
#include <napi.h>

#include <memory>
#include <string>
#include <vector>

#include "sampler/sampler.h"

namespace splash::addon {

// Parses `{params, rows, logprobs?, penalties?}` for an item whose trailing `max_rows` rows may be sampled
// (rows.length must be 1..max_rows). Throws splash::Error("invalid_argument") naming `where` on bad input.
std::shared_ptr<const sampler::Request> parse_sample(const Napi::Value& v, const std::string& where, int V, int max_rows);

// [{token, logprob?, top?: [{token, logprob}]}] (logprob and top only when log-probabilities were asked for)
Napi::Array sampled_to_js(Napi::Env env, const std::vector<sampler::Sampled>& rows, bool logprobs);

// sampleLogits(logits: Float32Array [rows·V], V, sample) → the sampled rows (test-only, sync)
Napi::Value SampleLogits(const Napi::CallbackInfo& info);

}  // namespace splash::addon
