// The one streaming output parser of the family: generated text in, typed events out. Stop strings are
// applied first (to the raw text, reasoning included), then the reasoning split, then tool calls in the
// content. API plugins translate these events to their wire formats; nothing here knows a wire format.
//
// Event order guarantees:
// - `reasoning` events all come before the first `content` or tool-call event.
// - A tool call is `tool_call_start`, then zero or more `tool_call_arguments` (their deltas joined are the
//   arguments JSON), then `tool_call_end`; calls never interleave; `index` counts from 0 in order.
// - Exactly one `finish` event, last, from finish() (or from push() when the output must stop early).
// - No event carries empty text.

import {StopStringMatcher} from '../../src/chat/stop-strings.js'
import {ReasoningParser} from './reasoning.js'
import {JsonToolCallParser} from './tool-parser-json.js'
import type {ToolCallParser, ToolParseEvent} from './tool-parser.js'
import {XmlToolCallParser} from './tool-parser-xml.js'
import type {ToolDefinition} from './template.js'

export type ToolCallFormat = 'xml' | 'json'

export type FinishReason = 'stop' | 'length' | 'tool_calls'

export type OutputEvent =
  /** Text of the think block (`reasoning_content` on the wire). */
  | {type: 'reasoning'; text: string}
  /** Answer text (`content`). */
  | {type: 'content'; text: string}
  /** A tool call begins: the first wire delta of the call carries index, id, name and arguments "". */
  | {type: 'tool_call_start'; index: number; id: string; name: string}
  /** The next fragment of the call's arguments JSON. */
  | {type: 'tool_call_arguments'; index: number; delta: string}
  /** The call is over; `arguments` is the whole JSON text; `complete` is false when it was cut off. */
  | {type: 'tool_call_end'; index: number; arguments: string; complete: boolean}
  /** The last event. `stop` is the stop string that ended the output, when one did. */
  | {type: 'finish'; reason: FinishReason; stop?: string}

export interface OutputParserOptions {
  /** The family's tool-call form. */
  toolFormat: ToolCallFormat
  /** Tools callable in this request (after tool_choice: "none" gives none). */
  tools?: ToolDefinition[]
  /** The prompt opened <think> (reasoning.ts promptOpensThinking). */
  startInReasoning: boolean
  /** Stop strings; the text is cut before the first one and the output ends. */
  stop?: readonly string[]
  /** At most this many tool calls (parallel_tool_calls false = 1); the output ends after the last one. */
  maxToolCalls?: number
  /** See tool-parser.ts: stream arguments (default) or hold each call until it is complete. */
  streamArguments?: boolean
  newId?: () => string
}

export class OutputParser {
  private readonly stops: StopStringMatcher
  private readonly reasoning: ReasoningParser
  private readonly tools: ToolCallParser
  private readonly maxToolCalls: number
  private callsEnded = 0
  private callsComplete = 0
  private finished = false
  private stopString: string | undefined
  private toolLimitReached = false

  constructor(options: OutputParserOptions) {
    this.stops = new StopStringMatcher(options.stop ?? [])
    this.reasoning = new ReasoningParser(options.startInReasoning)
    const toolOptions = {tools: options.tools, streamArguments: options.streamArguments, newId: options.newId}
    this.tools = options.toolFormat === 'json' ? new JsonToolCallParser(toolOptions) : new XmlToolCallParser(toolOptions)
    this.maxToolCalls = options.maxToolCalls ?? Infinity
  }

  /** True while the output is in the think block: count these tokens as reasoning; a budget may close it. */
  get inReasoning(): boolean {
    return this.reasoning.inReasoning
  }

  /** True once the output must end (a stop string, or the tool-call limit): stop generating, call finish(). */
  get done(): boolean {
    return this.stopString !== undefined || this.toolLimitReached
  }

  /** Feeds the next decoded text; returns the events it completed. */
  push(text: string): OutputEvent[] {
    if (this.finished || this.done) return []
    const {text: released, stopped} = this.stops.push(text)
    const out = this.afterStops(released, false)
    if (stopped && !this.toolLimitReached) {
      this.stopString = stopped.stop
      out.push(...this.afterStops('', true))
    }
    return out
  }

  /**
   * Ends the output. `reason` is why generation ended: 'stop' (a stop token / EOS) or 'length' (token
   * limit). Returns the remaining events and the finish event; later calls return nothing.
   */
  finish(reason: 'stop' | 'length'): OutputEvent[] {
    if (this.finished) return []
    const out = this.done ? [] : this.afterStops(this.stops.flush(), true)
    this.finished = true
    out.push({type: 'finish', reason: this.finishReason(reason), ...(this.stopString ? {stop: this.stopString} : {})})
    return out
  }

  private finishReason(reason: 'stop' | 'length'): FinishReason {
    if (this.toolLimitReached) return 'tool_calls'
    if (this.stopString === undefined && reason === 'length') return 'length'
    return this.callsComplete > 0 ? 'tool_calls' : 'stop'
  }

  /** Text past the stop-string matcher goes through reasoning, then tool calls. */
  private afterStops(text: string, final: boolean): OutputEvent[] {
    const out: OutputEvent[] = []
    const split = this.reasoning.push(text)
    if (final) split.push(...this.reasoning.finish())
    for (const event of split) {
      if (event.type === 'reasoning') out.push(event)
      else this.addToolEvents(out, this.tools.push(event.text))
    }
    if (final && !this.toolLimitReached) this.addToolEvents(out, this.tools.finish())
    return out
  }

  private addToolEvents(out: OutputEvent[], events: ToolParseEvent[]): void {
    for (const event of events) {
      if (this.toolLimitReached) return
      if (event.type === 'text') {
        const last = out.at(-1)
        if (last?.type === 'content') last.text += event.text
        else out.push({type: 'content', text: event.text})
        continue
      }
      out.push(event)
      if (event.type === 'tool_call_end') {
        this.callsEnded++
        if (event.complete) this.callsComplete++
        if (this.callsEnded >= this.maxToolCalls) this.toolLimitReached = true
      }
    }
  }
}
