// CompletionBody → one TextRequest per (prompt, n).
import type {CompletionBody} from './schema.js'
import type {TextCodec} from '../../../src/chat/family.js'
import type {TextRequest} from '../../../src/chat/text-generation.js'
import {openAiSampling} from '../../shared/openai-sampling.js'
import type {SamplingParams} from '../../../src/engine/sampling.js'
import {logitBias} from '../../shared/logit-bias.js'
import {errors} from '../../../src/errors.js'

export interface PromptJob {
  index: number
  promptIndex: number
  prompt: Int32Array
  request: TextRequest
}

export function promptsOf(body: CompletionBody, codec: TextCodec): Int32Array[] {
  const p = body.prompt
  if (typeof p === 'string') return [Int32Array.from(codec.encode(p))]
  if (p.length > 0 && typeof p[0] === 'number') return [Int32Array.from(p as number[])]
  if (p.length > 0 && typeof p[0] === 'string') return (p as string[]).map(s => Int32Array.from(codec.encode(s)))
  return (p as number[][]).map(ids => Int32Array.from(ids))
}

/**
 * Most generations one request may ask for (prompts × n), checked before any prompt is tokenized: each takes a place
 * in the scheduler's queue (256), so a request past this would fill it alone.
 */
export const MAX_COMPLETION_CHOICES = 128

export function toJobs(body: CompletionBody, codec: TextCodec, stopTokenIds: number[], signal: AbortSignal, defaults: Partial<SamplingParams> = {}): PromptJob[] {
  if (body.suffix) throw errors.invalidRequest('suffix is not supported', 'suffix')
  const n = body.n ?? 1
  if (body.best_of != null && body.best_of !== n) throw errors.invalidRequest('best_of must equal n', 'best_of')
  const p = body.prompt
  const count = typeof p === 'string' || typeof p[0] === 'number' ? 1 : p.length
  if (count * n > MAX_COMPLETION_CHOICES) {
    const asked = n === 1 ? `${count} prompts` : `${count} prompt${count === 1 ? '' : 's'} × n = ${n}, ${count * n} generations`
    throw errors.invalidRequest(`The request asks for ${asked}; at most ${MAX_COMPLETION_CHOICES} per request (send the rest in further requests)`, count > 1 ? 'prompt' : 'n')
  }
  const prompts = promptsOf(body, codec)
  for (const [i, p] of prompts.entries()) {
    if (p.length === 0) throw errors.invalidRequest(`prompt ${i} is empty`, 'prompt')
  }
  const sampling = openAiSampling(body, defaults)
  const bias = logitBias(body.logit_bias)
  const stop = body.stop == null ? [] : typeof body.stop === 'string' ? [body.stop] : body.stop
  const jobs: PromptJob[] = []
  prompts.forEach((prompt, promptIndex) => {
    for (let j = 0; j < n; j++) {
      const seed = body.seed == null ? undefined : (body.seed + j) >>> 0
      jobs.push({
        index: promptIndex * n + j,
        promptIndex,
        prompt,
        request: {
          prompt,
          maxTokens: body.max_tokens ?? 16,
          sampling: {...sampling, seed, logitBias: bias},
          stopTokenIds,
          stop,
          logprobs: body.logprobs ?? undefined,
          promptLogprobs: body.echo && body.logprobs != null ? body.logprobs : undefined,
          signal,
        },
      })
    }
  })
  return jobs
}
