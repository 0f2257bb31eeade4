// What the incremental tool-call parsers emit, and the part they share: finding `<tool_call>` in the
// text stream (holding back a partial marker as reasoning.ts does, stream-markers.ts), call numbering and ids, and
// turning calls that cannot be accepted back into text.
// The formats (tool-parser-xml.ts, tool-parser-json.ts) only parse the inside of a call.
//
// Rules common to both formats:
// - A call opens at `<tool_call>`. It is accepted (tool_call_start) once its function name is read and
//   names one of the request's tools; an unknown name or markup that is not a call gives the text back.
// - Arguments stream as JSON text fragments; their concatenation is the call's arguments JSON.
// - With `streamArguments: false` a call's events are held until `</tool_call>`, and a call that breaks
//   or is cut off by the end of the stream comes back entirely as text. With streaming (the default) an
//   accepted call cannot be taken back: a break or the end of the stream closes it (`complete: false`),
//   with the arguments parsed so far, and what follows the break is text.
// - Whitespace between text and a call, and between calls, is dropped; all other text is kept.

import {randomBytes} from 'node:crypto'
import type {ToolDefinition} from './template.js'
import {heldBack} from './stream-markers.js'

export type ToolParseEvent =
  /** Ordinary text outside calls. */
  | {type: 'text'; text: string}
  /** A call was accepted; `index` counts calls of this turn from 0. */
  | {type: 'tool_call_start'; index: number; id: string; name: string}
  /** The next fragment of the call's arguments JSON. */
  | {type: 'tool_call_arguments'; index: number; delta: string}
  /** The call ended; `arguments` is every fragment joined; `complete` is false when it was cut off or broke. */
  | {type: 'tool_call_end'; index: number; arguments: string; complete: boolean}

export interface ToolCallParser {
  /** Feeds the next text delta; returns the events it completed. */
  push(text: string): ToolParseEvent[]
  /** End of the stream: releases held text and closes an open call. */
  finish(): ToolParseEvent[]
}

export interface ToolParserOptions {
  /** The request's tools; calls to other names are text. No tools: every call is text. */
  tools?: ToolDefinition[]
  /** Stream arguments while they are generated (default true); see the rules above. */
  streamArguments?: boolean
  /** Makes call ids (default `call_` + 24 random characters). */
  newId?: () => string
}

const OPEN = '<tool_call>'
const ID_CHARS = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789'

export function randomCallId(): string {
  const bytes = randomBytes(24)
  let id = 'call_'
  for (const b of bytes) id += ID_CHARS[b % ID_CHARS.length]
  return id
}

export abstract class ToolCallParserBase implements ToolCallParser {
  protected buf = ''
  protected readonly tools: Map<string, ToolDefinition>
  private readonly stream: boolean
  private readonly newId: () => string
  private out: ToolParseEvent[] = []
  private pending: ToolParseEvent[] | undefined
  private inCall = false
  private raw = ''
  private afterCall = false
  private nextIndex = 0
  private index = -1
  private args = ''

  constructor(options: ToolParserOptions = {}) {
    this.tools = new Map((options.tools ?? []).map(tool => [tool.function.name, tool]))
    this.stream = options.streamArguments ?? true
    this.newId = options.newId ?? randomCallId
  }

  push(text: string): ToolParseEvent[] {
    this.buf += text
    this.run(false)
    return this.drain()
  }

  finish(): ToolParseEvent[] {
    this.run(true)
    return this.drain()
  }

  /** Parses inside a call from `this.buf`; returns false when it needs more text (never when `final`). */
  protected abstract step(final: boolean): boolean
  /** Resets the format's state for a new call. */
  protected abstract beginCall(): void

  /** Consumes `n` characters of the buffer as part of the current call. */
  protected take(n: number): string {
    const s = this.buf.slice(0, n)
    this.buf = this.buf.slice(n)
    this.raw += s
    return s
  }

  protected startCall(name: string): void {
    this.index = this.nextIndex++
    this.args = ''
    this.pending = this.stream ? undefined : []
    this.emit({type: 'tool_call_start', index: this.index, id: this.newId(), name})
  }

  protected argumentsDelta(delta: string): void {
    if (delta === '') return
    this.args += delta
    this.emit({type: 'tool_call_arguments', index: this.index, delta})
  }

  /** The arguments text of the current call so far. */
  protected currentArguments(): string {
    return this.args
  }

  protected endCall(complete: boolean): void {
    if (this.pending && !complete) {
      this.nextIndex--
      this.pending = undefined
      this.text(this.raw)
    } else {
      this.emit({type: 'tool_call_end', index: this.index, arguments: this.args, complete})
      if (this.pending) this.out.push(...this.pending)
      this.pending = undefined
      this.afterCall = true
    }
    this.inCall = false
    this.raw = ''
  }

  /** Not a call after all: what was read of it is text again. */
  protected rejectCall(): void {
    this.text(this.raw)
    this.inCall = false
    this.raw = ''
  }

  private emit(event: ToolParseEvent): void {
    ;(this.pending ?? this.out).push(event)
  }

  private text(text: string): void {
    if (text === '') return
    const last = this.out.at(-1)
    if (last?.type === 'text') last.text += text
    else this.out.push({type: 'text', text})
  }

  private drain(): ToolParseEvent[] {
    const out = this.out
    this.out = []
    return out
  }

  private run(final: boolean): void {
    for (;;) {
      const progressed = this.inCall ? this.step(final) : this.scanText(final)
      if (!progressed) return
    }
  }

  /** Outside a call: release text up to `<tool_call>` or up to what could still become one. */
  private scanText(final: boolean): boolean {
    if (this.afterCall) {
      const rest = this.buf.trimStart()
      if (rest === '') {
        if (final) this.buf = ''
        return false
      }
      this.buf = rest
      this.afterCall = false
    }
    const at = this.buf.indexOf(OPEN)
    if (at >= 0) {
      const before = this.buf.slice(0, at)
      const kept = before.trimEnd()
      this.text(kept)
      this.buf = this.buf.slice(at + OPEN.length)
      this.raw = before.slice(kept.length) + OPEN
      this.inCall = true
      this.beginCall()
      return true
    }
    if (final) {
      this.text(this.buf)
      this.buf = ''
      return false
    }
    const hold = heldBack(this.buf, [OPEN], c => c.trim() === '')
    this.text(this.buf.slice(0, this.buf.length - hold))
    this.buf = this.buf.slice(this.buf.length - hold)
    return false
  }
}

/** JSON-escapes a fragment of a string value (without quotes). */
export function escapeFragment(text: string): string {
  return JSON.stringify(text).slice(1, -1)
}
