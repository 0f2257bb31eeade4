// Messages body → the core's ChatRequest: system blocks, content blocks (text, tool_use, tool_result,
// thinking), tools, tool_choice and the thinking setting (mapped onto the package's reasoning efforts).
import type {BlockIn, CountTokensBody, MessageIn, MessagesBody, ToolIn} from './schema.js'
import type {ChatContentPart, ChatFamily, ChatMessage, ChatRequest, ChatTool, ChatToolCall, ResponseFormat, ToolChoice} from '../../../src/chat/chat.js'
import {fileFromData, imageFromUrl} from '../../shared/media-parts.js'
import {samplingParams, type SamplingParams} from '../../../src/engine/sampling.js'
import {errors} from '../../../src/errors.js'

/** Claude Code's per-request attribution block; it changes every request, so it would defeat prefix reuse. */
const VOLATILE_SYSTEM = /^x-anthropic-billing-header:/

const bad = (where: string, message: string) => errors.invalidRequest(`${where}: ${message}`, where)

function str(value: unknown, where: string): string {
  if (typeof value !== 'string') throw bad(where, 'must be a string')
  return value
}

function unsupportedMedia(block: BlockIn, where: string): never {
  if (block.type === 'image' || block.type === 'document') throw bad(where, `${block.type} blocks are only accepted in user messages`)
  throw bad(where, `content blocks of type "${block.type}" are not supported`)
}

export function systemText(system: MessagesBody['system']): string | undefined {
  if (system === undefined) return undefined
  if (typeof system === 'string') return system
  const texts = (system as BlockIn[]).map((b, j) => {
    if (b.type !== 'text') throw bad(`system[${j}]`, `system blocks must be text, not "${b.type}"`)
    return str(b.text, `system[${j}].text`)
  })
  return texts.filter(t => !VOLATILE_SYSTEM.test(t)).join('\n\n')
}

/** A tool result's content: text, or parts when it holds images or documents (a screenshot, a file the tool read). */
function toolResultContent(block: BlockIn, where: string): string | ChatContentPart[] {
  const c = block.content
  const prefix = block.is_error === true ? 'Error: ' : ''
  if (c === undefined || c === null) return prefix
  if (typeof c === 'string') return prefix + c
  if (!Array.isArray(c)) throw bad(`${where}.content`, 'must be a string or an array of blocks')
  const parts: ChatContentPart[] = prefix ? [{type: 'text', text: prefix}] : []
  ;(c as BlockIn[]).forEach((b, k) => {
    const at = `${where}.content[${k}]`
    if (b.type === 'text') {
      if (k > 0) parts.push({type: 'text', text: '\n'})
      parts.push({type: 'text', text: str(b.text, `${at}.text`)})
    } else if (b.type === 'image' || b.type === 'document') parts.push(mediaBlock(b, at))
    else throw bad(at, `content blocks of type "${b.type}" are not supported in a tool result`)
  })
  return parts.every(p => p.type === 'text') ? parts.map(p => (p as {text: string}).text).join('') : parts
}

/** An image or document block → a core content part (base64 or URL sources; plain-text documents become text). */
function mediaBlock(b: BlockIn, where: string): ChatContentPart {
  const src = b.source as Record<string, unknown> | undefined
  if (!src || typeof src !== 'object') throw bad(`${where}.source`, 'is required')
  if (src.type === 'base64') {
    const data = str(src.data, `${where}.source.data`)
    const mediaType = str(src.media_type, `${where}.source.media_type`)
    if (b.type === 'document' && mediaType !== 'application/pdf') throw bad(`${where}.source.media_type`, `documents of type ${mediaType} are not supported; send application/pdf`)
    if (b.type === 'image' && !mediaType.startsWith('image/')) throw bad(`${where}.source.media_type`, `${mediaType} is not an image type`)
    return fileFromData(data, where, typeof b.title === 'string' ? b.title : undefined, mediaType)
  }
  if (src.type === 'url') {
    if (b.type === 'document') throw bad(`${where}.source`, 'URL documents are not supported; send the PDF as base64')
    return imageFromUrl(str(src.url, `${where}.source.url`), where)
  }
  if (b.type === 'document' && src.type === 'text') return {type: 'text', text: str(src.data, `${where}.source.data`)}
  throw bad(`${where}.source.type`, `sources of type "${String(src.type)}" are not supported`)
}

function userMessages(content: MessageIn['content'], where: string): ChatMessage[] {
  if (typeof content === 'string') return [{role: 'user', content}]
  const tools: ChatMessage[] = []
  const parts: ChatContentPart[] = []
  ;(content as BlockIn[]).forEach((b, j) => {
    const at = `${where}.content[${j}]`
    switch (b.type) {
      case 'text':
        if (parts.length > 0) parts.push({type: 'text', text: '\n\n'})
        parts.push({type: 'text', text: str(b.text, `${at}.text`)})
        return
      case 'image':
      case 'document':
        parts.push(mediaBlock(b, at))
        return
      case 'tool_result':
        tools.push({role: 'tool', tool_call_id: str(b.tool_use_id, `${at}.tool_use_id`), content: toolResultContent(b, at)})
        return
      case 'thinking':
      case 'redacted_thinking':
        return
      default:
        unsupportedMedia(b, at)
    }
  })
  if (parts.length === 0) return tools
  // Tool results answer the previous assistant turn, so they come before any new user text.
  const text = parts.every(p => p.type === 'text')
  return [...tools, {role: 'user', content: text ? parts.map(p => (p as {text: string}).text).join('') : parts}]
}

function assistantMessage(content: MessageIn['content'], where: string): ChatMessage {
  if (typeof content === 'string') return {role: 'assistant', content}
  const texts: string[] = []
  const reasoning: string[] = []
  const calls: ChatToolCall[] = []
  ;(content as BlockIn[]).forEach((b, j) => {
    const at = `${where}.content[${j}]`
    switch (b.type) {
      case 'text':
        texts.push(str(b.text, `${at}.text`))
        return
      case 'thinking':
        reasoning.push(str(b.thinking, `${at}.thinking`))
        return
      case 'tool_use': {
        const input = b.input ?? {}
        if (typeof input !== 'object' || Array.isArray(input)) throw bad(`${at}.input`, 'must be an object')
        calls.push({id: str(b.id, `${at}.id`), type: 'function', function: {name: str(b.name, `${at}.name`), arguments: input as Record<string, unknown>}})
        return
      }
      case 'redacted_thinking':
      case 'server_tool_use':
      case 'web_search_tool_result':
        // Opaque to this server (encrypted thinking, results of Anthropic's own tools): left out of the prompt.
        return
      default:
        unsupportedMedia(b, at)
    }
  })
  return {
    role: 'assistant',
    content: texts.join(''),
    ...(reasoning.length > 0 ? {reasoning_content: reasoning.join('\n')} : {}),
    ...(calls.length > 0 ? {tool_calls: calls} : {}),
  }
}

export function toMessages(body: Pick<MessagesBody, 'system' | 'messages'>): ChatMessage[] {
  const out: ChatMessage[] = []
  const system = systemText(body.system)
  if (system) out.push({role: 'system', content: system})
  body.messages.forEach((m, i) => {
    const where = `messages[${i}]`
    if (m.role === 'user') out.push(...userMessages(m.content, where))
    else if (m.role === 'system') {
      const text = systemText(m.content as MessagesBody['system'])
      if (text) out.push({role: 'system', content: text})
    } else out.push(assistantMessage(m.content, where))
  })
  return out
}

/** Custom (client) tools; Anthropic's server and built-in tools (web_search_…, bash_…) are skipped. */
export function toTools(tools: ToolIn[] | undefined, log: (msg: string) => void): ChatTool[] | undefined {
  if (!tools || tools.length === 0) return undefined
  const out: ChatTool[] = []
  tools.forEach((t, i) => {
    if (t.type != null && t.type !== 'custom') {
      log(`tools[${i}] "${t.name}" of type "${t.type}" is a server tool; skipped`)
      return
    }
    out.push({
      type: 'function',
      function: {
        name: t.name,
        description: t.description,
        parameters: (t.input_schema ?? {type: 'object', properties: {}}) as ChatTool['function']['parameters'],
        strict: t.strict === true ? true : undefined,
      },
    })
  })
  return out
}

function toolChoiceOf(choice: MessagesBody['tool_choice']): ToolChoice {
  switch (choice?.type) {
    case undefined:
    case 'auto':
      return 'auto'
    case 'any':
      return 'required'
    case 'none':
      return 'none'
    case 'tool':
      return {name: str(choice.name, 'tool_choice.name')}
  }
}

/**
 * Anthropic's thinking setting as a reasoning effort of the package: enabled picks the smallest effort
 * whose budget covers budget_tokens (else the largest), adaptive leaves the package default, and
 * disabled or absent (Anthropic's default) turns thinking off.
 */
export function thinkingOf(thinking: MessagesBody['thinking'], chat: Pick<ChatFamily, 'efforts' | 'thinking'>): {effort?: string; enableThinking?: boolean} {
  const off = chat.efforts.includes('none') ? {effort: 'none'} : {enableThinking: false}
  if (!thinking || thinking.type === 'disabled') return off
  if (thinking.type === 'adaptive') return {}
  const want = thinking.budget_tokens ?? 0
  const budgets = chat.efforts
    .filter(e => e !== 'none')
    .map(effort => ({effort, budget: chat.thinking(effort).budget ?? Number.POSITIVE_INFINITY}))
    .filter(b => b.budget > 0)
    .sort((a, b) => a.budget - b.budget)
  if (budgets.length === 0) return {}
  return {effort: (budgets.find(b => b.budget >= want) ?? budgets[budgets.length - 1]).effort}
}

type Translatable = Pick<MessagesBody, 'system' | 'messages' | 'tools' | 'tool_choice' | 'thinking'>

/** The parts of a ChatRequest that decide the prompt (shared by /v1/messages and count_tokens). */
export function toPromptRequest(body: Translatable | CountTokensBody, chat: Pick<ChatFamily, 'efforts' | 'thinking'>, log: (msg: string) => void) {
  return {
    messages: toMessages(body),
    tools: toTools(body.tools, log),
    toolChoice: toolChoiceOf(body.tool_choice),
    parallelToolCalls: body.tool_choice?.disable_parallel_tool_use === true ? false : undefined,
    ...thinkingOf(body.thinking, chat),
  }
}

/**
 * Structured outputs: `output_config.format` (GA) or the beta `output_format`, both
 * `{type: "json_schema", schema}`; the answer's text block is JSON following the schema.
 */
function outputFormatOf(body: MessagesBody): ResponseFormat | undefined {
  const config = body.output_config as {format?: unknown} | null | undefined
  const format = (config?.format ?? body.output_format) as {type?: unknown; schema?: unknown} | null | undefined
  const param = config?.format != null ? 'output_config.format' : 'output_format'
  if (format == null) return undefined
  if (format.type !== 'json_schema') throw errors.invalidRequest(`${param}.type must be "json_schema"`, param)
  if (typeof format.schema !== 'object' || format.schema === null) throw errors.invalidRequest(`${param}.schema is required`, param)
  return {type: 'json_schema', schema: format.schema}
}

export function toChatRequest(body: MessagesBody, chat: Pick<ChatFamily, 'efforts' | 'thinking'>, signal: AbortSignal, log: (msg: string) => void, defaults: Partial<SamplingParams> = {}): ChatRequest {
  return {
    ...toPromptRequest(body, chat, log),
    sampling: samplingParams({temperature: body.temperature, topP: body.top_p, topK: body.top_k}, defaults),
    maxTokens: body.max_tokens,
    stop: body.stop_sequences && body.stop_sequences.length > 0 ? body.stop_sequences : undefined,
    responseFormat: outputFormatOf(body),
    signal,
  }
}
