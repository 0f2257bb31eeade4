// Chat as the core sees it: the neutral message and tool shapes every API is translated into, what a
// model family must provide to render prompts and parse output, and generateChat(), the one chat
// generation loop (prompt → engine → detokenize → reasoning / tool calls / stop strings → events) that
// Chat Completions, Responses and Messages all use.
import type {Engine, GenerationHandle} from './engine.js'
import type {TextCodec} from './family.js'
import type {FinishReason as EngineFinish, GenerationEvent, GenerationRequest} from './request.js'
import type {SamplingParams, TopLogprob} from './sampling.js'
import type {Grammars, StructuralTagFormat, ToolGrammarTool, ToolInputSource} from '../grammar/compiler.js'
import {planConstraint, type ResponseFormat} from './chat-constraint.js'
import {errors} from '../errors.js'
import {MEDIA_DEFAULTS, resolveMedia, type MediaOptions, type MediaSource, type PromptMedia, type VisionFamily} from './media.js'

export type {ResponseFormat}

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

export interface ChatOutputParser {
  readonly inReasoning: boolean
  readonly done: boolean
  push(text: string): ChatOutputEvent[]
  finish(reason: 'stop' | 'length'): ChatOutputEvent[]
}

export interface ThinkingPlan {
  enableThinking: boolean | undefined
  budget: number | undefined
  effort: string | undefined
}

/** What a model family provides for chat (models/<family>/ implements it). */
export interface ChatFamily {
  /** Reasoning efforts the package offers, and the default. */
  efforts: string[]
  thinking(effort?: string): ThinkingPlan
  /** Renders the conversation with the package's template and tokenizes it (cached per turn). */
  render(
    messages: ChatMessage[],
    options: {tools?: ChatTool[]; enableThinking?: boolean; addGenerationPrompt?: boolean},
  ): Promise<{text: string; tokens: number[]; cacheAnchors?: number[]}>
  outputParser(prompt: string, options: {tools?: ChatTool[]; stop?: readonly string[]; maxToolCalls?: number}): ChatOutputParser
  /** Text that opens a tool call for `name` in this family's format (forced for tool_choice required / named). */
  toolCallOpener(name?: string): string
  /** Ids that close the think block when a thinking budget is spent. */
  thinkCloseIds: number[]
  /** Images: present when the package has a vision encoder. */
  vision?: VisionFamily
  /** Grammar compilation for this model's vocabulary (absent: structured output is refused). */
  grammars?: Grammars
  /** The family's tool-call form as a structural tag over `tools` (schemas already checked). */
  toolCallGrammar?(tools: ToolGrammarTool[], mode: {type: 'calls'; stopAfterFirst: boolean} | {type: 'triggered'}): StructuralTagFormat
}

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

/**
 * Runs one chat generation and yields its events; the last two are `finish` and `usage`. Throws a
 * SplashError before anything is yielded when the request cannot be served.
 */
export async function* generateChat(engine: Engine, codec: TextCodec, stopTokenIds: number[], family: ChatFamily, req: ChatRequest): AsyncGenerator<ChatEvent> {
  const choice = req.toolChoice ?? 'auto'
  const tools = choice === 'none' ? undefined : req.tools && req.tools.length > 0 ? req.tools : undefined
  if ((choice === 'required' || typeof choice === 'object') && !tools) throw errors.invalidRequest('tool_choice requires tools', 'tool_choice')
  if (typeof choice === 'object' && !tools!.some(t => t.function.name === choice.name)) {
    throw errors.invalidRequest(`tool_choice names "${choice.name}", which is not among the tools`, 'tool_choice')
  }
  const forcedTool = choice === 'required' || typeof choice === 'object'
  const plan = family.thinking(req.effort)
  const constrained = planConstraint(family, req, tools, choice)
  // A forced tool call or a constrained answer starts right away: no thinking first.
  const enableThinking = forcedTool || constrained?.answerOnly ? false : (req.enableThinking ?? plan.enableThinking)
  const resolved = await resolveMedia(req.messages, family.vision, req.media ?? MEDIA_DEFAULTS)
  const rendered = await family.render(resolved.messages, {tools, enableThinking})
  const prompt = rendered.text
  let tokens = rendered.tokens
  let cacheAnchors = rendered.cacheAnchors
  const limit = engine.model.contextLength
  let media: PromptMedia | undefined
  if (resolved.images.length > 0) {
    const lay = family.vision!.layout(tokens, resolved.images)
    tokens = lay.tokens
    // anchors were rendered positions: each image before one adds its span length − 1
    cacheAnchors = cacheAnchors?.map(a => {
      let shift = 0
      for (const sp of lay.spans) if (sp.start - shift < a) shift += sp.length - 1
      return a + shift
    })
    if (tokens.length >= limit) throw errors.contextLengthExceeded(tokens.length, limit)
    const encode = engine.model.encodeImage
    if (!encode) throw errors.invalidRequest(`${resolved.images[0].where}: this model has no vision encoder loaded`, resolved.images[0].where, 'images_not_supported')
    const embeds: Float32Array[] = []
    for (const im of resolved.images) embeds.push(await encode(im.pixels, im.grid))
    media = {
      spans: lay.spans.map((s, i) => ({...s, hash: resolved.images[i].hash, embeds: embeds[i]})),
      positions: lay.positions,
      ropeDelta: lay.ropeDelta,
    }
  }
  if (tokens.length >= limit) throw errors.contextLengthExceeded(tokens.length, limit)
  const maxTokens = Math.min(req.maxTokens ?? limit - tokens.length, limit - tokens.length)
  // with a grammar the forced call's opener comes from the grammar itself
  const opener = forcedTool && !constrained ? family.toolCallOpener(typeof choice === 'object' ? choice.name : undefined) : ''
  const constraint = constrained ? await family.grammars!.matcher(constrained.spec) : undefined
  // a response format closes within max_tokens (budget-close.ts); its shortest instance must fit first
  let closeWithinBudget: GenerationRequest['closeWithinBudget']
  if (constraint && req.responseFormat) {
    const encode = (text: string) => codec.encode(text)
    const shortest = await constraint.closingPath(maxTokens + 16, encode).catch((err: unknown) => {
      constraint.dispose()
      throw err
    })
    if (shortest === 'long' || (shortest !== 'stuck' && shortest.length > maxTokens)) {
      constraint.dispose()
      const what = req.responseFormat.type === 'json_object' ? 'a JSON object' : "the JSON Schema's shortest instance"
      const need = shortest === 'long' ? `more than ${maxTokens + 16}` : String(shortest.length)
      throw errors.invalidRequest(`max_tokens is ${maxTokens}, but ${what} takes ${need} tokens; raise max_tokens so the answer can be complete`, 'max_tokens', 'max_tokens_too_small')
    }
    if (shortest !== 'stuck') closeWithinBudget = {encode, decode: ids => codec.decode(ids), shortest: shortest.length}
  }
  const parser = family.outputParser(prompt, {
    tools,
    stop: req.stop,
    maxToolCalls: req.parallelToolCalls === false || typeof choice === 'object' ? 1 : undefined,
  })
  const budget = enableThinking === false ? undefined : plan.budget

  const queue: ChatEvent[] = []
  let wake: (() => void) | undefined
  let ended = false
  let failure: Error | undefined
  let reasoningTokens = 0
  let closedThinking = false
  const decoder = codec.streamDecoder()
  const outputIds: number[] = []
  const push = (events: ChatEvent[]) => {
    if (events.length > 0) queue.push(...events)
    wake?.()
  }
  // Events are handled synchronously, inside the engine's step, so a budget or a stop takes effect
  // before the next token is generated.
  let handle: GenerationHandle | undefined = undefined
  const onEvent = (event: GenerationEvent) => {
    if (event.type === 'error') {
      failure = event.error
      ended = true
      return push([])
    }
    if (event.type === 'prompt_logprobs') return
    if (event.type === 'token') {
      outputIds.push(event.token)
      if (parser.inReasoning) reasoningTokens++
      const out: ChatEvent[] = []
      if (req.logprobs !== undefined && event.logprob !== undefined) {
        out.push({
          type: 'logprobs',
          token: event.token,
          text: codec.tokenText(event.token),
          logprob: event.logprob,
          top: (event.top ?? []).map(t => ({...t, text: codec.tokenText(t.token)})),
        })
      }
      out.push(...parser.push(decoder.push(event.token)))
      if (parser.done) {
        // this token's events first: the cancel may end the request at once, and its finish follows them
        push(out)
        return handle?.cancel()
      }
      if (budget !== undefined && !closedThinking && parser.inReasoning && reasoningTokens >= budget) {
        closedThinking = true
        handle?.force(family.thinkCloseIds)
      }
      return push(out)
    }
    // done
    const reason: EngineFinish = event.reason
    const tail = parser.done ? [] : parser.push(decoder.flush())
    const finish = parser.finish(reason === 'length' ? 'length' : 'stop')
    ended = true
    push([
      ...tail,
      ...finish,
      {
        type: 'usage',
        usage: {
          promptTokens: tokens.length,
          completionTokens: outputIds.length,
          cachedTokens: event.usage.cachedTokens,
          reasoningTokens,
          ...(event.usage.draft ? {draft: event.usage.draft} : {}),
        },
        tokenIds: outputIds,
      },
    ])
  }

  const promptIds = Int32Array.from(tokens)
  try {
    handle = engine.submit(
      {prompt: promptIds, maxTokens, sampling: req.sampling, stopTokenIds, logprobs: req.logprobs, media, signal: req.signal, cacheAnchors, constraint, closeWithinBudget},
      onEvent,
    )
  } catch (e) {
    constraint?.dispose()
    throw e
  }
  if (opener) {
    handle.force(codec.encode(opener))
  }
  yield {type: 'prompt', tokens: tokens.length, promptTokenIds: tokens}
  try {
    for (;;) {
      while (queue.length > 0) yield queue.shift()!
      if (failure) throw failure
      if (ended) return
      await new Promise<void>(r => (wake = r))
      wake = undefined
    }
  } finally {
    if (!ended) handle.cancel()
  }
}
