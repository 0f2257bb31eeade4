// Chat Completions body → the core's ChatRequest.
import type {ChatBody, ChatMessageIn, ToolIn} from './schema.js'
import type {ChatContentPart, ChatMessage, ChatRequest, ChatTool, ResponseFormat, ToolChoice} from '../../../src/chat/chat.js'
import {fileFromData, imageFromUrl} from '../../shared/media-parts.js'
import {openAiSampling} from '../../shared/openai-sampling.js'
import type {SamplingParams} from '../../../src/engine/sampling.js'
import {logitBias} from '../../shared/logit-bias.js'
import {errors} from '../../../src/errors.js'

function textOf(content: ChatMessageIn['content'], where: string, allowMedia: boolean): string | ChatContentPart[] {
  if (content == null) return ''
  if (typeof content === 'string') return content
  const parts: ChatContentPart[] = []
  content.forEach((part, j) => {
    const at = `${where}.content[${j}]`
    if (part.type === 'text') parts.push({type: 'text', text: part.text})
    else if (part.type === 'refusal') parts.push({type: 'text', text: part.refusal})
    else if (part.type === 'image_url' || part.type === 'file') {
      if (!allowMedia) throw errors.invalidRequest(`${at}: ${part.type === 'file' ? 'files' : 'images'} are only accepted in user messages`, at)
      if (part.type === 'image_url') parts.push(imageFromUrl(part.image_url.url, at))
      else if (part.file.file_data) parts.push(fileFromData(part.file.file_data, at, part.file.filename))
      else throw errors.invalidRequest(`${at}: file parts need file_data (file_id is not supported: this server keeps no files)`, at)
    } else {
      throw errors.invalidRequest(`${at}: content of type "${part.type}" is not supported`, at)
    }
  })
  if (parts.every(p => p.type === 'text')) return parts.map(p => (p as {text: string}).text).join('')
  return parts
}

export function toMessages(messages: ChatMessageIn[]): ChatMessage[] {
  return messages.map((m, i) => {
    const where = `messages[${i}]`
    switch (m.role) {
      case 'system':
      case 'developer':
        return {role: 'system', content: textOf(m.content, where, false)}
      case 'user':
        return {role: 'user', content: textOf(m.content, where, true)}
      case 'tool':
        return {role: 'tool', content: textOf(m.content, where, false), tool_call_id: m.tool_call_id}
      case 'assistant': {
        const calls = m.tool_calls ?? undefined
        return {
          role: 'assistant',
          content: textOf(m.content ?? null, where, false),
          reasoning_content: m.reasoning_content ?? m.reasoning ?? undefined,
          tool_calls: calls?.map(c => ({id: c.id, type: 'function' as const, function: {name: c.function.name, arguments: c.function.arguments}})),
        }
      }
    }
  })
}

export function toTools(tools: ToolIn[] | null | undefined, log: (msg: string) => void): ChatTool[] | undefined {
  if (!tools || tools.length === 0) return undefined
  const out: ChatTool[] = []
  tools.forEach((t, i) => {
    if (t.type !== 'function' || !t.function) {
      log(`tools[${i}] of type "${t.type}" is not a function tool; skipped`)
      return
    }
    out.push({type: 'function', function: {name: t.function.name, description: t.function.description, parameters: t.function.parameters as ChatTool['function']['parameters'], strict: t.function.strict ?? undefined}})
  })
  return out
}

function toolChoiceOf(body: ChatBody): ToolChoice {
  const c = body.tool_choice
  if (c == null) return 'auto'
  if (typeof c === 'string') return c
  return {name: c.function.name}
}

/** response_format: json_schema (strict or not, always enforced) or json_object; text is no constraint. */
function responseFormatOf(format: ChatBody['response_format']): ResponseFormat | undefined {
  if (!format || format.type === 'text') return undefined
  if (format.type === 'json_object') return {type: 'json_object'}
  const schema = format.json_schema.schema
  if (schema === undefined) throw errors.invalidRequest('response_format.json_schema.schema is required', 'response_format')
  return {type: 'json_schema', schema, name: format.json_schema.name}
}

export function toChatRequest(body: ChatBody, signal: AbortSignal, log: (msg: string) => void, defaults: Partial<SamplingParams> = {}): ChatRequest {
  const responseFormat = responseFormatOf(body.response_format)
  const kwargs = body.chat_template_kwargs ?? undefined
  return {
    messages: toMessages(body.messages),
    tools: toTools(body.tools, log),
    toolChoice: toolChoiceOf(body),
    parallelToolCalls: body.parallel_tool_calls ?? undefined,
    effort: body.reasoning_effort ?? body.reasoning?.effort ?? undefined,
    enableThinking: typeof kwargs?.enable_thinking === 'boolean' ? kwargs.enable_thinking : undefined,
    sampling: {
      ...openAiSampling(body, defaults),
      seed: body.seed ?? undefined,
      logitBias: logitBias(body.logit_bias),
    },
    maxTokens: body.max_completion_tokens ?? body.max_tokens ?? undefined,
    stop: body.stop == null ? undefined : typeof body.stop === 'string' ? [body.stop] : body.stop,
    logprobs: body.logprobs ? (body.top_logprobs ?? 0) : undefined,
    responseFormat,
    signal,
  }
}
