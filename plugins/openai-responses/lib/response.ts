// Builds a Response from chat events, and the stream events that carry it (each with a sequence_number):
// response.created → response.in_progress → per output item: output_item.added, its parts and deltas,
// output_item.done (tool calls complete there) → response.completed | response.incomplete | response.failed.
import {randomUUID} from 'node:crypto'
import type {ChatEvent, ChatUsage} from '../../../src/chat/chat.js'
import type {SplashError} from '../../../src/errors.js'
import {customInput, encodeReasoning} from './translate.js'

export interface StreamEvent {
  type: string
  sequence_number: number
  [key: string]: unknown
}

const newId = (prefix: string) => `${prefix}_${randomUUID().replace(/-/g, '')}`

type OutputItem = Record<string, unknown> & {id: string; type: string}

interface OpenItem {
  index: number
  kind: 'reasoning' | 'message' | 'function_call' | 'custom_tool_call'
  text: string
  toolIndex?: number
}

export interface ResponseOptions {
  model: string
  /** Names of custom (freeform) tools: their calls become custom_tool_call items. */
  custom: ReadonlySet<string>
  /** include: ["reasoning.encrypted_content"]. */
  encryptedReasoning: boolean
  /** Request fields echoed in the Response object (instructions, tools, tool_choice, …). */
  echo: Record<string, unknown>
}

export function usageBody(u: ChatUsage | undefined) {
  const input = u?.promptTokens ?? 0
  const output = u?.completionTokens ?? 0
  return {
    input_tokens: input,
    input_tokens_details: {cached_tokens: u?.cachedTokens ?? 0},
    output_tokens: output,
    output_tokens_details: {reasoning_tokens: u?.reasoningTokens ?? 0},
    total_tokens: input + output,
  }
}

export class ResponseBuilder {
  readonly id = newId('resp')
  readonly createdAt = Math.floor(Date.now() / 1000)
  readonly output: OutputItem[] = []
  status: 'in_progress' | 'completed' | 'incomplete' | 'failed' = 'in_progress'
  usage: ChatUsage | undefined
  error: {code: string; message: string} | null = null
  private finish: 'stop' | 'length' | 'tool_calls' | undefined
  /** A tool call was cut off (by max_output_tokens): the response is incomplete whatever the finish reason says. */
  private cut = false
  private open: OpenItem | undefined
  private seq = 0

  constructor(private readonly options: ResponseOptions) {}

  /** response.created and response.in_progress. */
  start(): StreamEvent[] {
    return [this.event('response.created', {response: this.response()}), this.event('response.in_progress', {response: this.response()})]
  }

  apply(e: ChatEvent): StreamEvent[] {
    switch (e.type) {
      case 'reasoning':
        return e.text === '' ? [] : this.appendText('reasoning', e.text)
      case 'content':
        return e.text === '' ? [] : this.appendText('message', e.text)
      case 'tool_call_start': {
        const out = this.closeOpen()
        const custom = this.options.custom.has(e.name)
        const item: OutputItem = custom
          ? {id: newId('ctc'), type: 'custom_tool_call', status: 'in_progress', call_id: e.id, name: e.name, input: ''}
          : {id: newId('fc'), type: 'function_call', status: 'in_progress', call_id: e.id, name: e.name, arguments: ''}
        out.push(this.addItem(item, custom ? 'custom_tool_call' : 'function_call'))
        this.open!.toolIndex = e.index
        return out
      }
      case 'tool_call_arguments': {
        const o = this.open
        if (!o || o.toolIndex !== e.index) return []
        o.text += e.delta
        if (o.kind === 'custom_tool_call') return []
        return [this.event('response.function_call_arguments.delta', {item_id: this.output[o.index].id, output_index: o.index, delta: e.delta})]
      }
      case 'tool_call_end': {
        const o = this.open
        if (!o || o.toolIndex !== e.index) return []
        o.text = e.arguments
        if (!e.complete) this.cut = true
        return this.closeOpen(e.complete ? 'completed' : 'incomplete')
      }
      case 'finish':
        this.finish = e.reason
        return this.closeOpen()
      case 'usage':
        this.usage = e.usage
        return []
      case 'prompt':
      case 'logprobs':
        return []
    }
  }

  /** The closing event: response.completed, or response.incomplete when max_output_tokens cut the output. */
  end(): StreamEvent[] {
    const out = this.closeOpen()
    if (this.finish === 'length' || this.cut) {
      this.status = 'incomplete'
      out.push(this.event('response.incomplete', {response: this.response()}))
    } else {
      this.status = 'completed'
      out.push(this.event('response.completed', {response: this.response()}))
    }
    return out
  }

  /** response.failed (an error after the stream began, or a prompt over the context). */
  fail(err: SplashError): StreamEvent[] {
    const out = this.closeOpen('incomplete')
    this.status = 'failed'
    this.error = {code: err.code, message: err.message}
    out.push(this.event('response.failed', {response: this.response()}))
    return out
  }

  /** The Response object as it stands. */
  response(): Record<string, unknown> {
    return {
      id: this.id,
      object: 'response',
      created_at: this.createdAt,
      status: this.status,
      ...(this.status === 'completed' || this.status === 'incomplete' ? {completed_at: Math.floor(Date.now() / 1000)} : {}),
      error: this.error,
      incomplete_details: this.status === 'incomplete' ? {reason: 'max_output_tokens'} : null,
      model: this.options.model,
      output: this.output.map(item => ({...item})),
      usage: this.usage && this.status !== 'in_progress' ? usageBody(this.usage) : null,
      ...this.options.echo,
    }
  }

  private event(type: string, payload: Record<string, unknown>): StreamEvent {
    return {type, sequence_number: this.seq++, ...payload}
  }

  private addItem(item: OutputItem, kind: OpenItem['kind']): StreamEvent {
    this.output.push(item)
    this.open = {index: this.output.length - 1, kind, text: ''}
    return this.event('response.output_item.added', {output_index: this.open.index, item: {...item}})
  }

  private appendText(kind: 'reasoning' | 'message', text: string): StreamEvent[] {
    const out: StreamEvent[] = []
    if (this.open?.kind !== kind) {
      out.push(...this.closeOpen())
      if (kind === 'reasoning') {
        out.push(this.addItem({id: newId('rs'), type: 'reasoning', summary: []}, kind))
        const at = this.at()
        out.push(this.event('response.reasoning_summary_part.added', {...at, summary_index: 0, part: {type: 'summary_text', text: ''}}))
        out.push(this.event('response.content_part.added', {...at, content_index: 0, part: {type: 'reasoning_text', text: ''}}))
      } else {
        out.push(this.addItem({id: newId('msg'), type: 'message', role: 'assistant', status: 'in_progress', content: []}, kind))
        out.push(this.event('response.content_part.added', {...this.at(), content_index: 0, part: {type: 'output_text', text: '', annotations: []}}))
      }
    }
    this.open!.text += text
    const at = this.at()
    if (kind === 'reasoning') {
      out.push(this.event('response.reasoning_summary_text.delta', {...at, summary_index: 0, delta: text}))
      out.push(this.event('response.reasoning_text.delta', {...at, content_index: 0, delta: text}))
    } else {
      out.push(this.event('response.output_text.delta', {...at, content_index: 0, delta: text, logprobs: []}))
    }
    return out
  }

  private at() {
    const o = this.open!
    return {item_id: this.output[o.index].id, output_index: o.index}
  }

  /** Finishes the open item: its closing part events, then output_item.done with the complete item. */
  private closeOpen(status: 'completed' | 'incomplete' = 'completed'): StreamEvent[] {
    const o = this.open
    if (!o) return []
    const at = this.at()
    const item = this.output[o.index]
    const out: StreamEvent[] = []
    switch (o.kind) {
      case 'reasoning': {
        const summary = {type: 'summary_text', text: o.text}
        const content = {type: 'reasoning_text', text: o.text}
        out.push(this.event('response.reasoning_text.done', {...at, content_index: 0, text: o.text}))
        out.push(this.event('response.content_part.done', {...at, content_index: 0, part: content}))
        out.push(this.event('response.reasoning_summary_text.done', {...at, summary_index: 0, text: o.text}))
        out.push(this.event('response.reasoning_summary_part.done', {...at, summary_index: 0, part: summary}))
        Object.assign(item, {summary: [summary], content: [content], ...(this.options.encryptedReasoning ? {encrypted_content: encodeReasoning(o.text)} : {})})
        break
      }
      case 'message': {
        const part = {type: 'output_text', text: o.text, annotations: [], logprobs: []}
        out.push(this.event('response.output_text.done', {...at, content_index: 0, text: o.text, logprobs: []}))
        out.push(this.event('response.content_part.done', {...at, content_index: 0, part}))
        Object.assign(item, {status, content: [part]})
        break
      }
      case 'function_call':
        out.push(this.event('response.function_call_arguments.done', {...at, name: item.name, arguments: o.text}))
        Object.assign(item, {status, arguments: o.text})
        break
      case 'custom_tool_call': {
        const input = customInput(o.text)
        out.push(this.event('response.custom_tool_call_input.delta', {...at, delta: input}))
        out.push(this.event('response.custom_tool_call_input.done', {...at, input}))
        Object.assign(item, {status, input})
        break
      }
    }
    out.push(this.event('response.output_item.done', {output_index: o.index, item: {...item}}))
    this.open = undefined
    return out
  }
}

/**
 * Streams a response from its chat events (after the 'prompt' event), ending with response.completed or
 * response.incomplete; an error on the way ends it with response.failed. True when it ended normally.
 */
export async function streamResponse(events: AsyncIterable<ChatEvent>, builder: ResponseBuilder, send: (out: StreamEvent[]) => void, toError: (err: unknown) => SplashError): Promise<boolean> {
  try {
    for await (const e of events) send(builder.apply(e))
    send(builder.end())
    return true
  } catch (err) {
    send(builder.fail(toError(err)))
    return false
  }
}
