// The chat template: the package's Jinja template rendered with @huggingface/jinja, with the inputs
// transformers' apply_chat_template would pass (messages, tools, add_generation_prompt, enable_thinking).
// Messages arrive in the family's neutral form (below); API plugins translate their wire shapes into it.

import {readFile} from 'node:fs/promises'
import {Template} from '@huggingface/jinja'

/** A content part. Images and videos are placeholders here: their pixels travel separately. */
export type ContentPart = {type: 'text'; text: string} | {type: 'image'} | {type: 'video'}

export interface ToolCallInput {
  id?: string
  type?: 'function'
  function: {
    name: string
    /** An object, or the JSON text of one (as OpenAI clients send it); text is parsed before rendering. */
    arguments: Record<string, unknown> | string
  }
}

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool'
  content?: string | ContentPart[] | null
  /** Assistant reasoning sent back by the client (`reasoning_content`, or `reasoning` as some clients name it). */
  reasoning_content?: string | null
  reasoning?: string | null
  tool_calls?: ToolCallInput[]
  tool_call_id?: string
  name?: string
}

/** JSON schema as tools declare it; only what the parsers look at is typed. */
export interface JsonSchema {
  type?: string | string[]
  properties?: Record<string, JsonSchema>
  anyOf?: JsonSchema[]
  oneOf?: JsonSchema[]
  [key: string]: unknown
}

export interface ToolDefinition {
  type: 'function'
  function: {name: string; description?: string; parameters?: JsonSchema; strict?: boolean}
  /** Set on a freeform tool (its one parameter `input` is raw text held to a grammar); the template ignores it. */
  inputGrammar?: unknown
}

export interface RenderOptions {
  tools?: ToolDefinition[]
  /** Append the assistant turn opener (default true). */
  addGenerationPrompt?: boolean
  /** false renders the empty think block (reasoning_effort "none"); undefined leaves the template's default. */
  enableThinking?: boolean
  /** Extra template variables (e.g. preserve_thinking for templates that know it). */
  extra?: Record<string, unknown>
}

export class ChatTemplate {
  readonly source: string
  private readonly template: Template

  constructor(source: string) {
    this.source = source
    this.template = new Template(source)
  }

  static async load(path: string): Promise<ChatTemplate> {
    return new ChatTemplate(await readFile(path, 'utf8'))
  }

  render(messages: ChatMessage[], options: RenderOptions = {}): string {
    const context: Record<string, unknown> = {
      ...options.extra,
      messages: messages.map(normaliseMessage),
      add_generation_prompt: options.addGenerationPrompt ?? true,
      bos_token: '',
      eos_token: '<|im_end|>',
    }
    if (options.tools && options.tools.length > 0) context.tools = options.tools
    if (options.enableThinking !== undefined) context.enable_thinking = options.enableThinking
    return this.template.render(context)
  }
}

/** What a template would see from transformers: arguments as objects, `reasoning` folded into reasoning_content. */
export function normaliseMessage(message: ChatMessage): ChatMessage {
  const out: ChatMessage = {...message}
  if (out.reasoning_content == null && typeof out.reasoning === 'string') out.reasoning_content = out.reasoning
  delete out.reasoning
  if (out.reasoning_content == null) delete out.reasoning_content
  if (out.tool_calls) {
    out.tool_calls = out.tool_calls.map(call => ({
      ...call,
      function: {...call.function, arguments: parseArguments(call.function.arguments)},
    }))
  }
  return out
}

function parseArguments(args: Record<string, unknown> | string): Record<string, unknown> | string {
  if (typeof args !== 'string') return args
  try {
    const value: unknown = JSON.parse(args)
    if (value !== null && typeof value === 'object' && !Array.isArray(value)) return value as Record<string, unknown>
  } catch {
    // not JSON: the template renders the text as it came
  }
  return args
}
