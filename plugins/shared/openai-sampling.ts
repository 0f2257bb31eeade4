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

/** Checked SamplingParams from a request body (top_k -1 means off, as 0 does), the package's `defaults` filling unset fields. */
export function openAiSampling(body: OpenAiSamplingFields, defaults: Partial<SamplingParams> = {}): SamplingParams {
  const topK = body.top_k ?? undefined
  return samplingParams({
    temperature: body.temperature ?? undefined,
    topP: body.top_p ?? undefined,
    topK: topK === undefined ? undefined : topK < 0 ? 0 : topK,
    minP: body.min_p ?? undefined,
    presencePenalty: body.presence_penalty ?? undefined,
    frequencyPenalty: body.frequency_penalty ?? undefined,
    repetitionPenalty: body.repetition_penalty ?? undefined,
  }, defaults)
}
