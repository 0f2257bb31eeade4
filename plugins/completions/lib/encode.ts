// Completion choices in the OpenAI legacy shape, built up from text events.
import type {TextCodec} from '../../../src/chat/family.js'
import type {TextEvent} from '../../../src/chat/text-generation.js'
import type {SampledToken} from '../../../src/engine/sampling.js'

export interface LegacyLogprobs {
  tokens: string[]
  token_logprobs: Array<number | null>
  top_logprobs: Array<Record<string, number> | null>
  text_offset: number[]
}

export class ChoiceBuilder {
  text = ''
  readonly tokenIds: number[] = []
  finishReason: string | null = null
  logprobs: LegacyLogprobs | null
  private offset = 0
  promptTokens = 0
  completionTokens = 0
  /** Prompt tokens this choice's generation took from the prefix cache. */
  cachedTokens = 0
  /** Speculative decoding figures when the draft ran (Usage.draft). */
  draft: {passes: number; committed: number; drafted: number} | undefined
  /** When its first token came (performance.now(); 0: none yet). */
  firstAt = 0

  constructor(
    readonly index: number,
    private readonly codec: TextCodec,
    wantLogprobs: boolean,
  ) {
    this.logprobs = wantLogprobs ? {tokens: [], token_logprobs: [], top_logprobs: [], text_offset: []} : null
  }

  /** Echoed prompt text (and its logprobs when asked). Returns the text added. */
  echo(prompt: Int32Array, entries: Array<SampledToken | null> | undefined): string {
    const decoder = this.codec.streamDecoder()
    const start = this.text.length
    for (let i = 0; i < prompt.length; i++) {
      if (this.logprobs) this.addLogprob(prompt[i], entries?.[i] ?? null)
      this.text += decoder.push(prompt[i])
      this.offset = this.text.length
    }
    this.text += decoder.flush()
    this.offset = this.text.length
    return this.text.slice(start)
  }

  /** Applies one text event; returns the delta for streaming. */
  apply(event: Extract<TextEvent, {type: 'text'}>): {text: string; logprobs: LegacyLogprobs | null} {
    const before = this.logprobs ? this.logprobs.tokens.length : 0
    if (event.token >= 0) {
      this.tokenIds.push(event.token)
      if (this.logprobs) this.addLogprob(event.token, {token: event.token, logprob: event.logprob ?? 0, top: event.top})
    }
    this.text += event.text
    this.offset = this.text.length
    const lp = this.logprobs
    return {
      text: event.text,
      logprobs: lp
        ? {
            tokens: lp.tokens.slice(before),
            token_logprobs: lp.token_logprobs.slice(before),
            top_logprobs: lp.top_logprobs.slice(before),
            text_offset: lp.text_offset.slice(before),
          }
        : null,
    }
  }

  private addLogprob(token: number, entry: SampledToken | null): void {
    const lp = this.logprobs!
    lp.tokens.push(this.codec.tokenText(token))
    lp.token_logprobs.push(entry ? (entry.logprob ?? null) : null)
    lp.top_logprobs.push(entry?.top ? Object.fromEntries(entry.top.map(t => [this.codec.tokenText(t.token), t.logprob])) : null)
    lp.text_offset.push(this.offset)
  }
}
