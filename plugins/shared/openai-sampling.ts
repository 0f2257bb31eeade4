// The OpenAI sampling fields (with the top_k, min_p and repetition_penalty that vLLM and llama.cpp accept) as the
// engine's SamplingParams: one mapping for Chat Completions and Completions.
import {samplingParams, type SamplingParams} from '../../src/engine/sampling.js'

/** The fields both request schemas declare; null means "not set", as in the OpenAI API. */
export interface OpenAiSamplingFields {
  temperature?: number | null
  top_p?: number | null
  top_k?: number | null
  min_p?: number | null
  presence_penalty?: number | null
  frequency_penalty?: number | null
  repetition_penalty?: number | null
}

/** Checked SamplingParams from a request body (top_k -1 means off, as 0 does). */
export function openAiSampling(body: OpenAiSamplingFields): SamplingParams {
  const topK = body.top_k ?? 0
  return samplingParams({
    temperature: body.temperature ?? undefined,
    topP: body.top_p ?? undefined,
    topK: topK < 0 ? 0 : topK,
    minP: body.min_p ?? undefined,
    presencePenalty: body.presence_penalty ?? undefined,
    frequencyPenalty: body.frequency_penalty ?? undefined,
    repetitionPenalty: body.repetition_penalty ?? undefined,
  })
}
