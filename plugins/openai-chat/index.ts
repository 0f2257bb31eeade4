// POST /v1/chat/completions: streaming and not, tools, reasoning, logprobs, n.
import type {FastifyInstance} from 'fastify'
import type {TypeBoxTypeProvider} from '@fastify/type-provider-typebox'
import {randomUUID} from 'node:crypto'
import {ChatBody} from './lib/schema.js'
import {toChatRequest} from './lib/translate.js'
import {mediaOptionsOf} from '../shared/media-parts.js'
import {ChatChoice, usageBody} from './lib/choice.js'
import {generateChat, type ChatEvent} from '../../src/chat/chat.js'
import {SseStream, clientGone} from '../shared/sse.js'
import {openAiStream} from '../shared/openai-stream.js'
import {timingsBody} from '../shared/timings.js'

export default async function openaiChat(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>()
  app.post('/v1/chat/completions', {schema: {body: ChatBody}}, async (request, reply) => {
    const body = request.body
    const {model, engine, family} = app.modelHost.serving(body.model)
    const signal = clientGone(reply)
    const chat = {...toChatRequest(body, signal, msg => request.log.warn(msg), model.sampling), media: mediaOptionsOf(app.appOptions)}
    const n = body.n ?? 1
    const started = performance.now()
    const streams = Array.from({length: n}, (_, k) =>
      generateChat(engine, family.codec, body.ignore_eos ? [] : family.stopTokenIds, family.chat, {
        ...chat,
        sampling: {...chat.sampling, seed: chat.sampling.seed === undefined ? undefined : (chat.sampling.seed + k) >>> 0},
      }),
    )
    // The first event of each choice is 'prompt': admission errors (too long, busy) surface here, before any byte is sent.
    let firsts: Array<IteratorResult<ChatEvent>>
    try {
      firsts = await Promise.all(streams.map(s => s.next()))
    } catch (err) {
      await Promise.all(streams.map(s => s.return(undefined)))
      throw err
    }
    const promptEvent = firsts[0].value as Extract<ChatEvent, {type: 'prompt'}>
    const choices = streams.map((_, k) => new ChatChoice(k, chat.logprobs !== undefined))
    const id = `chatcmpl-${randomUUID().replace(/-/g, '')}`
    const created = Math.floor(Date.now() / 1000)
    const base = {id, object: 'chat.completion.chunk', created, model: model.id, system_fingerprint: 'splash'}
    let firstTokenAt = 0
    const timings = () => timingsBody(choices.map(c => c.usage), promptEvent.tokens, choices[0].usage?.cachedTokens ?? 0, started, firstTokenAt)

    if (!body.stream) {
      await Promise.all(
        streams.map(async (s, k) => {
          for await (const e of s) {
            if (!firstTokenAt && e.type !== 'prompt' && e.type !== 'usage') firstTokenAt = performance.now()
            choices[k].apply(e)
          }
        }),
      )
      return {
        id,
        object: 'chat.completion',
        created,
        model: model.id,
        system_fingerprint: 'splash',
        choices: choices.map(c => ({
          index: c.index,
          message: c.message(),
          logprobs: c.logprobs ? {content: c.logprobs} : null,
          finish_reason: c.finishReason,
          ...(body.return_token_ids ? {token_ids: c.tokenIds} : {}),
        })),
        usage: usageBody(choices.map(c => c.usage!).filter(Boolean), promptEvent.tokens),
        ...(body.return_token_ids ? {prompt_token_ids: promptEvent.promptTokenIds} : {}),
        timings: timings(),
      }
    }

    const sse = SseStream.open(request, reply)
    const includeUsage = body.stream_options?.include_usage === true
    const usage = () => ({...base, choices: [], usage: usageBody(choices.map(c => c.usage!).filter(Boolean), promptEvent.tokens), timings: timings()})
    await openAiStream(sse, request, async () => {
      for (const c of choices) sse.data({...base, choices: [{index: c.index, delta: {role: 'assistant', content: ''}, logprobs: null, finish_reason: null}]})
      await Promise.all(
        streams.map(async (s, k) => {
          const c = choices[k]
          let lpSent = 0
          for await (const e of s) {
            if (!firstTokenAt && e.type !== 'prompt' && e.type !== 'usage') firstTokenAt = performance.now()
            const delta = c.apply(e)
            if (delta) {
              const lp = c.logprobs && c.logprobs.length > lpSent ? {content: c.logprobs.slice(lpSent)} : null
              lpSent = c.logprobs?.length ?? 0
              sse.data({...base, choices: [{index: c.index, delta, logprobs: lp, finish_reason: null}]})
            } else if (e.type === 'finish') {
              sse.data({...base, choices: [{index: c.index, delta: {}, logprobs: null, finish_reason: e.reason}]})
            }
          }
        }),
      )
    }, includeUsage ? usage : undefined)
    return reply
  })
}
