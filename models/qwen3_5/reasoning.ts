// Splits streamed model output into reasoning and content at </think>. The generation prompt usually
// opened <think> already (Qwen3.5 with thinking on); a model whose prompt did not (Qwen3's template)
// opens it itself, and that is recognised at the start of the output. Newlines that are only the
// markup around the think block (after <think>, before </think>, after </think>) are dropped.

import {heldBack} from './stream-markers.js'

export type ReasoningEvent = {type: 'reasoning'; text: string} | {type: 'content'; text: string}

const OPEN = '<think>'
const CLOSE = '</think>'

type Mode = 'start' | 'reasoning' | 'content'

/** True when the rendered prompt leaves a think block open (the model starts inside reasoning). */
export function promptOpensThinking(prompt: string): boolean {
  const open = prompt.lastIndexOf(OPEN)
  return open >= 0 && prompt.indexOf(CLOSE, open) < 0 && prompt.slice(open + OPEN.length).trim() === ''
}

export class ReasoningParser {
  private mode: Mode
  private buf = ''
  /** Still at the start of the reasoning: leading newlines and a repeated <think> are dropped. */
  private reasoningStart = true
  /** Right after </think>: leading whitespace of the content is dropped. */
  private contentStart = false
  private out: ReasoningEvent[] = []

  /** `startInReasoning`: the prompt opened <think> (see promptOpensThinking). */
  constructor(startInReasoning: boolean) {
    this.mode = startInReasoning ? 'reasoning' : 'start'
  }

  /** True while the output is inside the think block (for reasoning token counts and thinking budgets). */
  get inReasoning(): boolean {
    return this.mode === 'reasoning'
  }

  push(text: string): ReasoningEvent[] {
    this.buf += text
    while (this.step(false));
    return this.drain()
  }

  finish(): ReasoningEvent[] {
    while (this.step(true));
    return this.drain()
  }

  private step(final: boolean): boolean {
    switch (this.mode) {
      case 'start':
        return this.stepStart(final)
      case 'reasoning':
        return this.stepReasoning(final)
      case 'content':
        return this.stepContent(final)
    }
  }

  /** Output of a prompt that did not open <think>: reasoning only if the model opens it first. */
  private stepStart(final: boolean): boolean {
    const rest = this.buf.trimStart()
    if (rest.startsWith(OPEN)) {
      this.buf = rest.slice(OPEN.length)
      this.mode = 'reasoning'
      return true
    }
    if (!final && OPEN.startsWith(rest)) return false
    this.mode = 'content'
    return true
  }

  private stepReasoning(final: boolean): boolean {
    if (this.reasoningStart) {
      let rest = this.buf.replace(/^\n+/, '')
      if (rest.startsWith(OPEN)) rest = rest.slice(OPEN.length).replace(/^\n+/, '')
      if (!final && OPEN.startsWith(rest)) return false
      this.buf = rest
      this.reasoningStart = false
    }
    const end = this.buf.indexOf(CLOSE)
    if (end >= 0) {
      this.emit('reasoning', this.buf.slice(0, end).replace(/\n+$/, ''))
      this.buf = this.buf.slice(end + CLOSE.length)
      this.mode = 'content'
      this.contentStart = true
      return true
    }
    if (final) {
      this.emit('reasoning', this.buf.replace(/\n+$/, ''))
      this.buf = ''
      return false
    }
    const hold = heldBack(this.buf, [CLOSE], c => c === '\n')
    this.emit('reasoning', this.buf.slice(0, this.buf.length - hold))
    this.buf = this.buf.slice(this.buf.length - hold)
    return false
  }

  private stepContent(final: boolean): boolean {
    if (this.contentStart) {
      const rest = this.buf.trimStart()
      if (rest === '') {
        if (final) this.buf = ''
        return false
      }
      this.buf = rest
      this.contentStart = false
    }
    this.emit('content', this.buf)
    this.buf = ''
    return false
  }

  private emit(type: ReasoningEvent['type'], text: string): void {
    if (text === '') return
    const last = this.out.at(-1)
    if (last?.type === type) last.text += text
    else this.out.push({type, text})
  }

  private drain(): ReasoningEvent[] {
    const out = this.out
    this.out = []
    return out
  }
}
