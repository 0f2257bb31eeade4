// Generated token ids → output events: the streaming detokenizer feeding the output parser, with the
// counts usage needs. A stop token (EOS / <|im_end|>) ends the output and produces no text.

import type {IncrementalDetokenizer} from '../../src/chat/incremental-detokenizer.js'
import type {OutputEvent, OutputParser} from './output.js'

export class TokenOutputStream {
  /** Tokens generated so far, the stop token included. */
  completionTokens = 0
  /** Of those, the tokens generated inside the think block. */
  reasoningTokens = 0
  private readonly stopIds: Set<number>
  private stopped = false

  constructor(
    private readonly detokenizer: IncrementalDetokenizer,
    private readonly parser: OutputParser,
    stopTokenIds: Iterable<number>,
  ) {
    this.stopIds = new Set(stopTokenIds)
  }

  /** True once the output must end: a stop token, a stop string or the tool-call limit. Call finish(). */
  get done(): boolean {
    return this.stopped || this.parser.done
  }

  /** True while generation is inside the think block (a thinking budget applies). */
  get inReasoning(): boolean {
    return this.parser.inReasoning
  }

  /** Feeds generated ids in order; ids after the output ended are ignored. Adjacent text events are merged. */
  push(ids: Iterable<number>): OutputEvent[] {
    const out: OutputEvent[] = []
    for (const id of ids) {
      if (this.done) break
      this.completionTokens++
      if (this.parser.inReasoning) this.reasoningTokens++
      if (this.stopIds.has(id)) {
        this.stopped = true
        break
      }
      const text = this.detokenizer.push(id)
      if (text !== '') appendMerged(out, this.parser.push(text))
    }
    return out
  }

  /** Ends the output: 'length' when the token limit ended it, else 'stop'. Emits the finish event. */
  finish(reason: 'stop' | 'length'): OutputEvent[] {
    const tail = this.parser.done ? '' : this.detokenizer.flush()
    const out = tail === '' ? [] : this.parser.push(tail)
    out.push(...this.parser.finish(this.stopped ? 'stop' : reason))
    return out
  }
}

/** Appends events, joining a reasoning or content event onto a previous one of the same type. */
function appendMerged(out: OutputEvent[], events: OutputEvent[]): void {
  for (const e of events) {
    const last = out.at(-1)
    if (last && (e.type === 'reasoning' || e.type === 'content') && last.type === e.type) last.text += e.text
    else out.push(e)
  }
}
