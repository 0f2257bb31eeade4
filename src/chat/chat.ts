// Chat as the core sees it: the neutral message and tool shapes every API is translated into, what a
// model family must provide to render prompts and parse output, and generateChat(), the one chat
// generation loop (prompt → engine → detokenize → reasoning / tool calls / stop strings → events) that
// Chat Completions, Responses and Messages all use.
import type {Engine, GenerationHandle} from '../engine/engine.js'
import type {ChatFamily, TextCodec} from './family.js'
import type {FinishReason as EngineFinish, GenerationEvent, GenerationRequest} from '../engine/request.js'
import type {SamplingParams, TopLogprob} from '../engine/sampling.js'
import type {Grammars, StructuralTagFormat, ToolGrammarTool, ToolInputSource} from '../grammar/compiler.js'
import type {GrammarMatcherState} from '../grammar/matcher.js'
import {planConstraint} from './chat-constraint.js'
import {errors} from '../errors.js'
import {MEDIA_DEFAULTS, resolveMedia} from './media/media.js'
import type {PromptMedia} from '../engine/prompt-media.js'
import type {ChatEvent, ChatFinishReason, ChatMessage, ChatRequest, ChatTool, ChatUsage, ResponseFormat, ToolChoice} from './types.js'

export type * from './types.js'
export type {ChatFamily, ChatOutputParser, ThinkingPlan} from './family.js'

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
  const maxCalls = req.parallelToolCalls === false || typeof choice === 'object' ? 1 : undefined
  // with a grammar the forced call's opener comes from the grammar itself
  const opener = forcedTool && !constrained ? family.toolCallOpener(typeof choice === 'object' ? choice.name : undefined) : ''
  const constraint = constrained ? await family.grammars!.matcher(constrained.spec) : undefined
  // a response format or a forced tool call closes within max_tokens (budget-close.ts)
  const closeWithinBudget =
    constraint && (req.responseFormat || forcedTool) ? await planClose(constraint, codec, maxTokens, {format: req.responseFormat, tools, choice, restarts: forcedTool && maxCalls === undefined}) : undefined
  const parser = family.outputParser(prompt, {tools, stop: req.stop, maxToolCalls: maxCalls})
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
    // a closed forced call ends as max_tokens decided, though the parser saw the call through to its tool-call limit
    // (a response format's close already finishes with 'length')
    const cut = handle?.closedByBudget === true
    const finish = parser
      .finish(reason === 'length' || cut ? 'length' : 'stop')
      .map(e => (cut && e.type === 'finish' && e.stop === undefined ? {...e, reason: 'length' as const} : e))
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

/**
 * The budget close of a response format or a forced tool call (budget-close.ts): its shortest form (the shortest of
 * the tools' calls, where several may be called) must fit max_tokens first, else a 400. `restarts`: several calls
 * may follow one another, so after one a token may open another of any tool. The constraint is disposed on a throw.
 */
async function planClose(
  constraint: GrammarMatcherState,
  codec: TextCodec,
  maxTokens: number,
  what: {format: ResponseFormat | undefined; tools: ChatTool[] | undefined; choice: ToolChoice; restarts: boolean},
): Promise<GenerationRequest['closeWithinBudget']> {
  const encode = (text: string) => codec.encode(text)
  // past a small max_tokens, so that the 400 can say how long the shortest form is
  const limit = Math.max(maxTokens, 256) + 16
  try {
    const shortest = await constraint.closingPath(limit, encode, '', maxTokens)
    if (shortest === 'stuck') return undefined
    if (shortest === 'long' || shortest.length > maxTokens) {
      const need = shortest === 'long' ? `more than ${limit}` : String(shortest.length)
      throw errors.invalidRequest(`max_tokens is ${maxTokens}, but ${tooSmall(what.format, what.tools, what.choice, need)}`, 'max_tokens', 'max_tokens_too_small')
    }
    const restart = what.restarts ? Math.max(shortest.length, ...(await constraint.alternativeLengths(limit, encode))) : undefined
    return {encode, decode: ids => codec.decode(ids), shortest: shortest.length, restart}
  } catch (err) {
    constraint.dispose()
    throw err
  }
}

/** What the shortest complete output takes, for the 400 when max_tokens cannot hold it. */
function tooSmall(format: ResponseFormat | undefined, tools: ChatTool[] | undefined, choice: ToolChoice, need: string): string {
  if (format) {
    const what = format.type === 'json_object' ? 'a JSON object' : "the JSON Schema's shortest instance"
    return `${what} takes ${need} tokens; raise max_tokens so the answer can be complete`
  }
  const name = typeof choice === 'object' ? choice.name : tools?.length === 1 ? tools[0]!.function.name : undefined
  const what = name === undefined ? 'the shortest call of any of the tools' : `the shortest call of "${name}"`
  return `${what} takes ${need} tokens; raise max_tokens so the call can be complete`
}
