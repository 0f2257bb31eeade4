import type {ModelHost, ServedModel} from '../../../src/serving/model-host.js'
import {errors} from '../../../src/errors.js'

function entry(model: ServedModel) {
  return {
    id: model.id,
    object: 'model' as const,
    created: model.created,
    owned_by: model.ownedBy,
    // What llama.cpp and vLLM clients look for to learn the window.
    context_length: model.contextLength,
    max_model_len: model.contextLength,
    // The package's own limit: how far --max-context could go with enough memory.
    ...(model.packageContextLength !== undefined ? {package_context_length: model.packageContextLength} : {}),
    // Whether requests may carry images (a package without a vision encoder answers them 400).
    ...(model.vision !== undefined ? {input_modalities: model.vision ? ['text', 'image'] : ['text']} : {}),
    ...(model.reasoningEfforts ? {reasoning_efforts: model.reasoningEfforts, reasoning_effort_default: model.reasoningDefault} : {}),
  }
}

export function listModels(host: ModelHost) {
  return {object: 'list' as const, data: host.ready && host.model ? [entry(host.model)] : []}
}

export function retrieveModel(host: ModelHost, id: string) {
  if (!host.ready || !host.model || !host.matches(id)) throw errors.modelNotFound(id, host.model?.id)
  return entry(host.model)
}
