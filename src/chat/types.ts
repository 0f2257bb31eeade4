// The neutral chat shapes every API is translated into (messages, content parts, tools, the request) and the events
// a chat generation yields.
import type {SamplingParams, TopLogprob} from '../engine/sampling.js'
import type {ToolInputSource} from '../grammar/compiler.js'

/** Where an image's bytes are: inline, or a URL to fetch. */
export type MediaSource = {data: Uint8Array; url?: undefined} | {url: string; data?: undefined}

export interface MediaOptions {
  /** Decoded image size limit (serve --max-image-pixels). */
  maxImagePixels: number
  /** Fetch http(s) image URLs (serve --allow-image-urls); off: such parts get a 400. */
  fetchUrls: boolean
}

/** The answer must be JSON: any object, or one that follows a JSON Schema. */
export type ResponseFormat = {type: 'json_schema'; schema: unknown; name?: string} | {type: 'json_object'}

/**
 * A content part. An image carries its source (inline bytes or a URL) and `where` (the part's path in the request,
 * for errors); a document carries a file the core reads (PDF). After media resolution images are bare placeholders.
 */
export type ChatContentPart =
  | {type: 'text'; text: string}
  | {type: 'image'; source: MediaSource; where: string}
  | {type: 'image'; source?: undefined; where?: undefined}
  | {type: 'document'; data: Uint8Array; mediaType: string; name?: string; where: string}
  | {type: 'video'}

export interface ChatToolCall {
  id?: string
  type?: 'function'
  function: {name: string; arguments: Record<string, unknown> | string}
}

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool'
  content?: string | ChatContentPart[] | null
  reasoning_content?: string | null
  tool_calls?: ChatToolCall[]
  tool_call_id?: string
  name?: string
}

export interface JsonSchema {
  type?: string | string[]
  properties?: Record<string, JsonSchema>
  [key: string]: unknown
}

export interface ChatTool {
  type: 'function'
  function: {name: string; description?: string; parameters?: JsonSchema; strict?: boolean}
  /**
   * A freeform tool whose one string parameter `input` must follow a grammar (OpenAI custom tools with a
   * `grammar` format): enforced whenever the tool is called, like a strict tool.
   */
  inputGrammar?: ToolInputSource
}

export type ToolChoice = 'none' | 'auto' | 'required' | {name: string}

export type ChatFinishReason = 'stop' | 'length' | 'tool_calls'

export type ChatOutputEvent =
  | {type: 'reasoning'; text: string}
  | {type: 'content'; text: string}
  | {type: 'tool_call_start'; index: number; id: string; name: string}
  | {type: 'tool_call_arguments'; index: number; delta: string}
  | {type: 'tool_call_end'; index: number; arguments: string; complete: boolean}
  | {type: 'finish'; reason: ChatFinishReason; stop?: string}

export interface ChatRequest {
  messages: ChatMessage[]
  tools?: ChatTool[]
  toolChoice?: ToolChoice
  parallelToolCalls?: boolean
  effort?: string
  /** chat_template_kwargs.enable_thinking, when a client sets it. */
  enableThinking?: boolean
  sampling: SamplingParams
  /** undefined: as much as the context allows. */
  maxTokens?: number
  stop?: readonly string[]
  /** Top-N logprobs for each generated token. */
  logprobs?: number
  /** Image limits and URL fetching (the server's settings; default MEDIA_DEFAULTS). */
  media?: MediaOptions
  /** The answer must be JSON: any object, or one that follows a JSON Schema (enforced by a grammar). */
  responseFormat?: ResponseFormat
  signal?: AbortSignal
}

export interface ChatUsage {
  promptTokens: number
  completionTokens: number
  cachedTokens: number
  reasoningTokens: number
  /** Speculative decoding figures when the draft was used (see Usage.draft). */
  draft?: {passes: number; committed: number; drafted: number}
}

export type ChatEvent =
  | {type: 'prompt'; tokens: number; promptTokenIds: number[]}
  | ChatOutputEvent
  | {type: 'logprobs'; token: number; text: string; logprob: number; top: Array<TopLogprob & {text: string}>}
  | {type: 'usage'; usage: ChatUsage; tokenIds: number[]}
