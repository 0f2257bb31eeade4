// Responses body → the core's ChatRequest. Input items are folded into chat turns: consecutive assistant-side
// items (reasoning, assistant message, function_call, custom_tool_call) make one assistant turn, outputs make
// tool turns. Custom (freeform) tools are shown to the model as function tools taking one string `input`;
// a custom tool's grammar format (Lark or regex) holds that input to the grammar whenever the tool is called.
import type {Item, ResponsesBody} from './schema.js'
import type {ChatContentPart, ChatFamily, ChatMessage, ChatRequest, ChatTool, ResponseFormat, ToolChoice} from '../../../src/chat/chat.js'
import type {ToolInputSource} from '../../../src/grammar/compiler.js'
import {fileFromData, imageFromUrl} from '../../shared/media-parts.js'
import {samplingParams, type SamplingParams} from '../../../src/engine/sampling.js'
import {errors} from '../../../src/errors.js'

const bad = (where: string, message: string) => errors.invalidRequest(`${where}: ${message}`, where)

function str(value: unknown, where: string): string {
  if (typeof value !== 'string') throw bad(where, 'must be a string')
  return value
}

/** encrypted_content of this server's reasoning items: the reasoning text itself, so that a stateless client can replay it. */
export function encodeReasoning(text: string): string {
  return Buffer.from(JSON.stringify({splash: 1, text}), 'utf8').toString('base64')
}

export function decodeReasoning(encrypted: unknown): string | undefined {
  if (typeof encrypted !== 'string' || encrypted === '') return undefined
  try {
    const v = JSON.parse(Buffer.from(encrypted, 'base64').toString('utf8')) as {splash?: number; text?: unknown}
    return v.splash === 1 && typeof v.text === 'string' ? v.text : undefined
  } catch {
    return undefined
  }
}

/** The reasoning text of a reasoning item: ours (encrypted_content), else its reasoning_text, else its summary. */
function reasoningText(item: Item): string | undefined {
  const own = decodeReasoning(item.encrypted_content)
  if (own !== undefined) return own
  const parts = (arr: unknown, type: string) =>
    Array.isArray(arr) ? (arr as Item[]).filter(p => p?.type === type && typeof p.text === 'string').map(p => p.text as string) : []
  const content = parts(item.content, 'reasoning_text')
  if (content.length > 0) return content.join('\n')
  const summary = parts(item.summary, 'summary_text')
  return summary.length > 0 ? summary.join('\n') : undefined
}

function partsText(content: unknown, where: string): string {
  if (typeof content === 'string') return content
  if (!Array.isArray(content)) throw bad(where, 'must be a string or an array of content parts')
  return (content as Item[])
    .map((p, j) => {
      const at = `${where}[${j}]`
      switch (p?.type) {
        case 'input_text':
        case 'output_text':
        case 'text':
        case 'summary_text':
          return str(p.text, `${at}.text`)
        case 'refusal':
          return str(p.refusal, `${at}.refusal`)
        case 'input_image':
        case 'input_file':
          throw bad(at, `${String(p.type)} is only accepted in user messages`)
        default:
          throw bad(at, `content parts of type "${String(p?.type)}" are not supported`)
      }
    })
    .join('')
}

/** A user message's content: text, or parts when it holds input_image / input_file. */
function userContent(content: unknown, where: string): string | ChatContentPart[] {
  if (!Array.isArray(content) || !(content as Item[]).some(p => p?.type === 'input_image' || p?.type === 'input_file')) return partsText(content, where)
  return (content as Item[]).map((p, j): ChatContentPart => {
    const at = `${where}[${j}]`
    if (p?.type === 'input_image') {
      if (typeof p.image_url !== 'string') throw bad(at, 'input_image needs image_url (file_id is not supported: this server keeps no files)')
      return imageFromUrl(p.image_url, at)
    }
    if (p?.type === 'input_file') {
      if (typeof p.file_data !== 'string') throw bad(at, 'input_file needs file_data (file_id and file_url are not supported)')
      return fileFromData(p.file_data, at, typeof p.filename === 'string' ? p.filename : undefined)
    }
    return {type: 'text', text: partsText([p], where)}
  })
}

/** Tools the model is shown and which of them are custom (their calls go back as custom_tool_call). */
export interface ToolSet {
  tools: ChatTool[] | undefined
  custom: Set<string>
}

export function toTools(tools: Item[] | null | undefined, log: (msg: string) => void): ToolSet {
  const out: ChatTool[] = []
  const custom = new Set<string>()
  ;(tools ?? []).forEach((t, i) => {
    const where = `tools[${i}]`
    if (t.type === 'function') {
      out.push({
        type: 'function',
        function: {
          name: str(t.name, `${where}.name`),
          description: typeof t.description === 'string' ? t.description : undefined,
          parameters: (t.parameters ?? {type: 'object', properties: {}}) as ChatTool['function']['parameters'],
          strict: typeof t.strict === 'boolean' ? t.strict : undefined,
        },
      })
    } else if (t.type === 'custom') {
      const name = str(t.name, `${where}.name`)
      const inputGrammar = customFormat(t.format, `${where}.format`)
      const grammar = inputGrammar ? `\n\nThe input follows this ${inputGrammar.syntax} grammar:\n${inputGrammar.definition}` : ''
      custom.add(name)
      out.push({
        type: 'function',
        function: {
          name,
          description: `${typeof t.description === 'string' ? t.description : ''}${grammar}`.trim() || undefined,
          parameters: {type: 'object', properties: {input: {type: 'string', description: 'The raw input text of this tool'}}, required: ['input']},
        },
        ...(inputGrammar ? {inputGrammar} : {}),
      })
    } else {
      log(`${where} of type "${String(t.type)}" is not supported by this server; skipped`)
    }
  })
  return {tools: out.length > 0 ? out : undefined, custom}
}

/** A custom tool's format: text (none) or a grammar its input must follow (enforced; see src/grammar/tool-input.ts). */
function customFormat(format: unknown, where: string): ToolInputSource | undefined {
  if (format === undefined || format === null) return undefined
  if (typeof format !== 'object') throw bad(where, 'must be an object')
  const f = format as Item
  if (f.type === 'text') return undefined
  if (f.type !== 'grammar') throw bad(`${where}.type`, `custom tool formats are "text" or "grammar", not "${String(f.type)}"`)
  if (f.syntax !== 'lark' && f.syntax !== 'regex') throw bad(`${where}.syntax`, `grammar syntax must be "lark" or "regex", not "${String(f.syntax)}"`)
  return {syntax: f.syntax, definition: str(f.definition, `${where}.definition`), param: where}
}

/** A custom tool call's raw input from the arguments the model wrote for its `input` parameter. */
export function customInput(args: string): string {
  try {
    const v = JSON.parse(args) as {input?: unknown}
    if (v && typeof v.input === 'string') return v.input
  } catch {
    // not JSON: the text is the input
  }
  return args
}

export function toolChoiceOf(choice: ResponsesBody['tool_choice'], log: (msg: string) => void): ToolChoice {
  if (choice == null) return 'auto'
  if (typeof choice === 'string') return choice
  const c = choice as Item
  if ((c.type === 'function' || c.type === 'custom') && typeof c.name === 'string') return {name: c.name}
  if (c.type === 'allowed_tools') return c.mode === 'required' ? 'required' : 'auto'
  log(`tool_choice of type "${c.type}" is not supported by this server; using auto`)
  return 'auto'
}

/** Folds input items (with those of the previous responses first) into chat turns. */
export class Conversation {
  readonly messages: ChatMessage[] = []
  private assistant: ChatMessage | undefined

  constructor(
    private readonly log: (msg: string) => void,
    private readonly resolve: (id: string) => Item | undefined = () => undefined,
  ) {}

  add(items: Item[], where = 'input'): void {
    items.forEach((item, i) => this.addItem(item, `${where}[${i}]`))
  }

  private addItem(item: Item, where: string): void {
    const type = item.type ?? (item.role !== undefined ? 'message' : undefined)
    switch (type) {
      case 'message':
        return this.message(item, where)
      case 'reasoning': {
        const text = reasoningText(item)
        if (text === undefined) return
        const turn = this.assistantTurn(true)
        turn.reasoning_content = (turn.reasoning_content ? turn.reasoning_content + '\n' : '') + text
        return
      }
      case 'function_call':
        return this.call(str(item.call_id, `${where}.call_id`), str(item.name, `${where}.name`), str(item.arguments ?? '', `${where}.arguments`))
      case 'custom_tool_call':
        return this.call(str(item.call_id, `${where}.call_id`), str(item.name, `${where}.name`), {input: str(item.input ?? '', `${where}.input`)})
      case 'local_shell_call':
        return this.call(str(item.call_id, `${where}.call_id`), 'local_shell', JSON.stringify(item.action ?? {}))
      case 'function_call_output':
      case 'custom_tool_call_output':
        return this.output(str(item.call_id, `${where}.call_id`), partsText(item.output ?? '', `${where}.output`))
      case 'local_shell_call_output':
        return this.output(str(item.id ?? item.call_id, `${where}.id`), partsText(item.output ?? '', `${where}.output`))
      case 'item_reference': {
        const id = str(item.id, `${where}.id`)
        const found = this.resolve(id)
        if (!found) throw bad(`${where}.id`, `no stored item has the id "${id}"`)
        return this.addItem(found, where)
      }
      default:
        this.log(`${where} of type "${String(type)}" is not used by this server; skipped`)
    }
  }

  private message(item: Item, where: string): void {
    const role = item.role
    if (role === 'user') {
      this.assistant = undefined
      return void this.messages.push({role: 'user', content: userContent(item.content ?? '', `${where}.content`)})
    }
    const text = partsText(item.content ?? '', `${where}.content`)
    if (role === 'assistant') {
      const turn = this.assistantTurn(false)
      turn.content = (turn.content as string) + text
      return
    }
    this.assistant = undefined
    if (role === 'user') return void this.messages.push({role: 'user', content: text})
    if (role !== 'system' && role !== 'developer') throw bad(`${where}.role`, `unknown role "${String(role)}"`)
    // Leading instructions and developer messages make one system turn.
    const last = this.messages[this.messages.length - 1]
    if (last?.role === 'system' && this.messages.length === 1) last.content = `${last.content as string}\n\n${text}`
    else this.messages.push({role: 'system', content: text})
  }

  private call(id: string, name: string, args: string | Record<string, unknown>): void {
    const turn = this.assistantTurn(false)
    ;(turn.tool_calls ??= []).push({id, type: 'function', function: {name, arguments: args}})
  }

  private output(callId: string, text: string): void {
    this.assistant = undefined
    this.messages.push({role: 'tool', tool_call_id: callId, content: text})
  }

  /** The assistant turn being built; reasoning after text or calls starts a new one. */
  private assistantTurn(forReasoning: boolean): ChatMessage {
    const a = this.assistant
    const started = a !== undefined && ((a.content as string) !== '' || (a.tool_calls?.length ?? 0) > 0)
    if (a && !(forReasoning && started)) return a
    const turn: ChatMessage = {role: 'assistant', content: ''}
    this.messages.push(turn)
    this.assistant = turn
    return turn
  }
}

/** The request's own input as items (a string is one user message). */
export function inputItems(input: ResponsesBody['input']): Item[] {
  if (input === undefined) return []
  if (typeof input === 'string') return [{type: 'message', role: 'user', content: input}]
  return input as Item[]
}

function effortOf(body: ResponsesBody, chat: Pick<ChatFamily, 'efforts'>): string | undefined {
  const effort = body.reasoning?.effort ?? undefined
  // "minimal" is OpenAI's step below low; a package without it gets its lowest thinking effort.
  if (effort === 'minimal' && !chat.efforts.includes('minimal')) return chat.efforts.find(e => e !== 'none') ?? effort
  return effort
}

export interface Translated {
  request: ChatRequest
  custom: Set<string>
}

/** text.format: json_schema ({name, schema, strict}, always enforced) or json_object; text is no constraint. */
function textFormatOf(format: Item | null | undefined): ResponseFormat | undefined {
  if (!format || format.type === 'text') return undefined
  if (format.type === 'json_object') return {type: 'json_object'}
  if (format.type !== 'json_schema') throw errors.invalidRequest(`text.format "${String(format.type)}" is not supported`, 'text.format')
  if (typeof format.schema !== 'object' || format.schema === null) throw errors.invalidRequest('text.format.schema is required', 'text.format')
  return {type: 'json_schema', schema: format.schema, name: typeof format.name === 'string' ? format.name : undefined}
}

export function toChatRequest(body: ResponsesBody, history: Item[], chat: Pick<ChatFamily, 'efforts'>, resolve: (id: string) => Item | undefined, signal: AbortSignal, log: (msg: string) => void, defaults: Partial<SamplingParams> = {}): Translated {
  const responseFormat = textFormatOf(body.text?.format)
  const conversation = new Conversation(log, resolve)
  if (body.instructions) conversation.add([{type: 'message', role: 'system', content: body.instructions}], 'instructions')
  conversation.add(history, 'previous_response')
  conversation.add(inputItems(body.input))
  if (conversation.messages.length === 0) throw errors.invalidRequest('input is empty', 'input')
  const {tools, custom} = toTools(body.tools, log)
  return {
    request: {
      messages: conversation.messages,
      tools,
      toolChoice: toolChoiceOf(body.tool_choice, log),
      parallelToolCalls: body.parallel_tool_calls ?? undefined,
      effort: effortOf(body, chat),
      sampling: samplingParams({temperature: body.temperature ?? undefined, topP: body.top_p ?? undefined}, defaults),
      maxTokens: body.max_output_tokens ?? undefined,
      responseFormat,
      signal,
    },
    custom,
  }
}
