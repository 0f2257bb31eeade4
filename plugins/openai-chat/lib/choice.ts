// Accumulates one choice of a chat completion from chat events, and produces the streamed deltas in
// the exact shape strict clients require (first tool-call delta: index, id, type, name, arguments "";
// later ones: index and arguments only).
import type {ChatEvent, ChatUsage} from '../../../src/chat/chat.js'

export interface ToolCallOut {
  id: string
  type: 'function'
  function: {name: string; arguments: string}
}

interface LogprobEntry {
  token: string
  logprob: number
  bytes: number[]
  top_logprobs: Array<{token: string; logprob: number; bytes: number[]}>
}

const bytesOf = (s: string) => Array.from(Buffer.from(s, 'utf8'))

export class ChatChoice {
  content = ''
  reasoning = ''
  readonly toolCalls: ToolCallOut[] = []
  finishReason: string | null = null
  usage: ChatUsage | undefined
  tokenIds: number[] = []
  readonly logprobs: LogprobEntry[] | null

  constructor(
    readonly index: number,
    wantLogprobs: boolean,
  ) {
    this.logprobs = wantLogprobs ? [] : null
  }

  /** Applies one event; returns the delta to stream (undefined when nothing goes on the wire). */
  apply(e: ChatEvent): Record<string, unknown> | undefined {
    switch (e.type) {
      case 'reasoning':
        this.reasoning += e.text
        return {reasoning_content: e.text}
      case 'content':
        this.content += e.text
        return {content: e.text}
      case 'tool_call_start':
        this.toolCalls[e.index] = {id: e.id, type: 'function', function: {name: e.name, arguments: ''}}
        return {tool_calls: [{index: e.index, id: e.id, type: 'function', function: {name: e.name, arguments: ''}}]}
      case 'tool_call_arguments':
        this.toolCalls[e.index].function.arguments += e.delta
        return {tool_calls: [{index: e.index, function: {arguments: e.delta}}]}
      case 'tool_call_end':
        // The arguments were streamed as they were parsed; the final text is authoritative.
        if (this.toolCalls[e.index]) this.toolCalls[e.index].function.arguments = e.arguments
        return undefined
      case 'finish':
        this.finishReason = e.reason
        return undefined
      case 'logprobs': {
        const entry: LogprobEntry = {
          token: e.text,
          logprob: e.logprob,
          bytes: bytesOf(e.text),
          top_logprobs: e.top.map(t => ({token: t.text, logprob: t.logprob, bytes: bytesOf(t.text)})),
        }
        this.logprobs?.push(entry)
        return undefined
      }
      case 'usage':
        this.usage = e.usage
        this.tokenIds = e.tokenIds
        return undefined
      case 'prompt':
        return undefined
    }
  }

  message(): Record<string, unknown> {
    const hasCalls = this.toolCalls.length > 0
    return {
      role: 'assistant',
      content: hasCalls && this.content === '' ? null : this.content,
      ...(this.reasoning ? {reasoning_content: this.reasoning} : {}),
      ...(hasCalls ? {tool_calls: this.toolCalls} : {}),
    }
  }
}

export function usageBody(usages: ChatUsage[], promptTokens: number) {
  const completion = usages.reduce((a, u) => a + u.completionTokens, 0)
  const reasoning = usages.reduce((a, u) => a + u.reasoningTokens, 0)
  const cached = usages.length > 0 ? usages[0].cachedTokens : 0
  return {
    prompt_tokens: promptTokens,
    completion_tokens: completion,
    total_tokens: promptTokens + completion,
    prompt_tokens_details: {cached_tokens: cached},
    completion_tokens_details: {reasoning_tokens: reasoning},
  }
}
