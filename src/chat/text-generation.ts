// Generation as text: runs a request on the engine and turns token events into text deltas, with
// incremental detokenization and stop strings (never emitted, even when split across tokens). Every
// API that streams text builds on this; chat adds the family's output parser on top.
import type {Engine} from '../engine/engine.js'
import type {TextCodec} from './family.js'
import type {FinishReason, GenerationRequest, Usage} from '../engine/request.js'
import type {SampledToken} from '../engine/sampling.js'
import {StopStringMatcher} from './stop-strings.js'

export type TextEvent =
  | {type: 'prompt_logprobs'; entries: Array<SampledToken | null>}
  | {type: 'text'; text: string; token: number; logprob?: number; top?: SampledToken['top']}
  | {type: 'done'; reason: FinishReason; usage: Usage; stop?: string}

export interface TextRequest extends GenerationRequest {
  stop?: readonly string[]
}

export async function* generateText(engine: Engine, codec: TextCodec, request: TextRequest): AsyncGenerator<TextEvent> {
  const abort = new AbortController()
  const outer = request.signal
  if (outer) {
    if (outer.aborted) abort.abort()
    else outer.addEventListener('abort', () => abort.abort(), {once: true})
  }
  const decoder = codec.streamDecoder()
  const stops = new StopStringMatcher(request.stop ?? [])
  let stoppedBy: string | undefined
  let tokens = 0
  try {
    for await (const event of engine.generate({...request, signal: abort.signal})) {
      if (event.type === 'error') throw event.error
      if (event.type === 'prompt_logprobs') {
        yield event
        continue
      }
      if (event.type === 'token') {
        tokens++
        const r = stops.push(decoder.push(event.token))
        yield {type: 'text', text: r.text, token: event.token, logprob: event.logprob, top: event.top}
        if (r.stopped) {
          stoppedBy = r.stopped.stop
          abort.abort() // frees the sequence now; its 'done' event follows as cancelled
        }
        continue
      }
      // done
      if (stoppedBy !== undefined) {
        yield {type: 'done', reason: 'stop', stop: stoppedBy, usage: {...event.usage, completionTokens: tokens}}
        return
      }
      const rest = stops.push(decoder.flush())
      const tail = rest.text + (rest.stopped ? '' : stops.flush())
      if (tail) yield {type: 'text', text: tail, token: -1}
      yield {type: 'done', reason: rest.stopped ? 'stop' : event.reason, usage: event.usage, stop: rest.stopped?.stop}
      return
    }
  } finally {
    // A consumer that stops reading (client gone) cancels the generation.
    abort.abort()
  }
}
