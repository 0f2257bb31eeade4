// Builds an Anthropic Message from chat events, and the SSE events that stream it: content blocks are
// dense and sequential (thinking, then text / tool_use), each opened, filled with deltas and closed
// before the next opens; a thinking block gets a signature_delta just before its stop.
import {createHash, randomUUID} from 'node:crypto'
import type {ChatEvent, ChatUsage} from '../../../src/chat/chat.js'
import {isJsonPrefix, parseArguments} from './json-prefix.js'

export interface SseEvent {
  event: string
  data: Record<string, unknown>
}

type Block =
  | {type: 'thinking'; thinking: string; signature: string}
  | {type: 'text'; text: string}
  | {type: 'tool_use'; id: string; name: string; input: Record<string, unknown>}

interface ToolState {
  block: number
  args: string
  /** What of `args` went out as input_json_delta (always a valid JSON prefix). */
  sent: string
}

export type StopReason = 'end_turn' | 'max_tokens' | 'stop_sequence' | 'tool_use'

/** Anthropic's tool ids are toolu_…; the core's are call_…. */
export const toolUseId = (callId: string) => `toolu_${callId.replace(/^call_/, '')}`

/** An opaque signature for a thinking block (this server checks none on input). */
export const thinkingSignature = (thinking: string) => createHash('sha256').update('splash-thinking\0' + thinking).digest('base64')

export function usageBody(usage: ChatUsage | undefined, promptTokens: number) {
  const cached = usage?.cachedTokens ?? 0
  return {
    input_tokens: promptTokens - cached,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: cached,
    output_tokens: usage?.completionTokens ?? 0,
  }
}

export class MessageBuilder {
  readonly id = `msg_${randomUUID().replace(/-/g, '')}`
  readonly blocks: Block[] = []
  stopReason: StopReason | null = null
  stopSequence: string | null = null
  usage: ChatUsage | undefined
  private open: number | undefined
  private readonly tools = new Map<number, ToolState>()

  constructor(
    readonly model: string,
    readonly promptTokens: number,
  ) {}

  /** message_start, with the prompt counted as input (the cached part is known at the end, in message_delta). */
  start(): SseEvent[] {
    return [
      {
        event: 'message_start',
        data: {
          type: 'message_start',
          message: {...this.envelope(), content: [], stop_reason: null, stop_sequence: null, usage: usageBody(undefined, this.promptTokens)},
        },
      },
    ]
  }

  /** Applies one chat event; returns the SSE events it produces. */
  apply(e: ChatEvent): SseEvent[] {
    switch (e.type) {
      case 'reasoning':
        return e.text === '' ? [] : this.append('thinking', e.text)
      case 'content':
        return e.text === '' ? [] : this.append('text', e.text)
      case 'tool_call_start': {
        const out = this.closeOpen()
        const block: Block = {type: 'tool_use', id: toolUseId(e.id), name: e.name, input: {}}
        out.push(this.openBlock(block))
        this.tools.set(e.index, {block: this.open!, args: '', sent: ''})
        return out
      }
      case 'tool_call_arguments': {
        const t = this.tools.get(e.index)
        if (!t) return []
        t.args += e.delta
        return t.block === this.open ? this.releaseArguments(t) : []
      }
      case 'tool_call_end': {
        const t = this.tools.get(e.index)
        if (!t) return []
        t.args = e.arguments
        const out = t.block === this.open ? this.releaseArguments(t) : []
        ;(this.blocks[t.block] as Extract<Block, {type: 'tool_use'}>).input = parseArguments(t.args)
        if (t.block === this.open) out.push(...this.closeOpen())
        return out
      }
      case 'finish':
        this.stopReason = e.reason === 'tool_calls' ? 'tool_use' : e.reason === 'length' ? 'max_tokens' : e.stop !== undefined ? 'stop_sequence' : 'end_turn'
        this.stopSequence = e.stop ?? null
        return this.closeOpen()
      case 'usage':
        this.usage = e.usage
        return []
      case 'prompt':
      case 'logprobs':
        return []
    }
  }

  /** Closes what is open, then message_delta (stop reason, final usage) and message_stop. */
  end(): SseEvent[] {
    return [
      ...this.closeOpen(),
      {
        event: 'message_delta',
        data: {type: 'message_delta', delta: {stop_reason: this.stopReason ?? 'end_turn', stop_sequence: this.stopSequence}, usage: usageBody(this.usage, this.promptTokens)},
      },
      {event: 'message_stop', data: {type: 'message_stop'}},
    ]
  }

  /** The whole Message (non-streaming reply). */
  message(): Record<string, unknown> {
    return {
      ...this.envelope(),
      content: this.blocks,
      stop_reason: this.stopReason ?? 'end_turn',
      stop_sequence: this.stopSequence,
      usage: usageBody(this.usage, this.promptTokens),
    }
  }

  private envelope() {
    return {id: this.id, type: 'message', role: 'assistant', model: this.model}
  }

  private append(type: 'thinking' | 'text', text: string): SseEvent[] {
    const out: SseEvent[] = []
    if (this.open === undefined || this.blocks[this.open].type !== type) {
      out.push(...this.closeOpen())
      out.push(this.openBlock(type === 'thinking' ? {type, thinking: '', signature: ''} : {type, text: ''}))
    }
    const block = this.blocks[this.open!]
    if (block.type === 'thinking') {
      block.thinking += text
      out.push(this.delta({type: 'thinking_delta', thinking: text}))
    } else if (block.type === 'text') {
      block.text += text
      out.push(this.delta({type: 'text_delta', text}))
    }
    return out
  }

  private openBlock(block: Block): SseEvent {
    this.blocks.push(block)
    this.open = this.blocks.length - 1
    const start = block.type === 'tool_use' ? {...block, input: {}} : {...block}
    return {event: 'content_block_start', data: {type: 'content_block_start', index: this.open, content_block: start}}
  }

  private delta(delta: Record<string, unknown>): SseEvent {
    return {event: 'content_block_delta', data: {type: 'content_block_delta', index: this.open, delta}}
  }

  /** Sends the arguments received since the last release when all of them so far read as the start of JSON. */
  private releaseArguments(t: ToolState): SseEvent[] {
    if (t.args.length <= t.sent.length || !t.args.startsWith(t.sent)) return []
    if (t.args.trim() === '' || !isJsonPrefix(t.args)) return []
    const part = t.args.slice(t.sent.length)
    t.sent = t.args
    return [this.delta({type: 'input_json_delta', partial_json: part})]
  }

  private closeOpen(): SseEvent[] {
    if (this.open === undefined) return []
    const out: SseEvent[] = []
    const block = this.blocks[this.open]
    if (block.type === 'thinking') {
      block.signature = thinkingSignature(block.thinking)
      out.push(this.delta({type: 'signature_delta', signature: block.signature}))
    }
    out.push({event: 'content_block_stop', data: {type: 'content_block_stop', index: this.open}})
    this.open = undefined
    return out
  }
}

/** Anthropic's mid-stream error event (after a 200, the error can only travel as an SSE event). */
export function errorEvent(body: {error: unknown}): SseEvent {
  return {event: 'error', data: {type: 'error', error: body.error}}
}

/**
 * Streams a message from its chat events (after the 'prompt' event): the blocks as they come, then
 * message_delta and message_stop; an error on the way ends the stream with an `error` event.
 */
export async function streamMessage(events: AsyncIterable<ChatEvent>, builder: MessageBuilder, send: (out: SseEvent[]) => void, errorBody: (err: unknown) => {error: unknown}): Promise<void> {
  try {
    for await (const e of events) send(builder.apply(e))
    send(builder.end())
  } catch (err) {
    send([errorEvent(errorBody(err))])
  }
}
