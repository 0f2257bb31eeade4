// Anthropic Messages surface: POST /v1/messages (streaming and not; any query string, as Claude Code sends
// ?beta=true) and POST /v1/messages/count_tokens. Every path under /v1/messages answers errors in
// Anthropic's envelope. anthropic-version and anthropic-beta headers are accepted and not needed.
import type {FastifyInstance} from 'fastify'
import type {TypeBoxTypeProvider} from '@fastify/type-provider-typebox'
import {CountTokensBody, MessagesBody} from './lib/schema.js'
import {toChatRequest, toPromptRequest} from './lib/translate.js'
import {mediaOptionsOf} from '../shared/media-parts.js'
import {MessageBuilder, streamMessage, type SseEvent} from './lib/message.js'
import {generateChat, type ChatEvent} from '../../src/chat/chat.js'
import {streamFailure} from '../../src/server/error-shapes.js'
import {anthropicError} from '../shared/anthropic-error.js'
import {SseStream, clientGone} from '../shared/sse.js'
import {renderPrompt} from '../shared/render.js'

/** While nothing else is sent (a long prompt being processed), a ping goes out this often. */
const PING_MS = 5000

export default async function anthropicMessages(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>()
  app.errorShapes.register('/v1/messages', anthropicError)

  app.post('/v1/messages/count_tokens', {schema: {body: CountTokensBody}}, async request => {
    const {family} = app.modelHost.serving(request.body.model)
    const prompt = {...toPromptRequest(request.body, family.chat, msg => request.log.warn(msg)), media: mediaOptionsOf(app.appOptions)}
    const {tokens} = await renderPrompt(family.chat, prompt)
    return {input_tokens: tokens.length}
  })

  app.post('/v1/messages', {schema: {body: MessagesBody}}, async (request, reply) => {
    const body = request.body
    const {model, engine, family} = app.modelHost.serving(body.model)
    const signal = clientGone(reply)
    const chat = {...toChatRequest(body, family.chat, signal, msg => request.log.warn(msg), model.sampling), media: mediaOptionsOf(app.appOptions)}
    const events = generateChat(engine, family.codec, family.stopTokenIds, family.chat, chat)
    // The first event is 'prompt': admission errors (too long, busy) throw here, before any byte is sent.
    const first = (await events.next()).value as Extract<ChatEvent, {type: 'prompt'}>
    const builder = new MessageBuilder(model.id, first.tokens)

    if (!body.stream) {
      for await (const e of events) builder.apply(e)
      return builder.message()
    }

    const sse = SseStream.open(request, reply)
    let lastWrite = Date.now()
    const send = (out: SseEvent[]) => {
      for (const e of out) sse.event(e.event, e.data)
      if (out.length > 0) lastWrite = Date.now()
    }
    const ping = () => send([{event: 'ping', data: {type: 'ping'}}])
    send(builder.start())
    ping()
    const timer = setInterval(() => {
      if (Date.now() - lastWrite >= PING_MS - 50) ping()
    }, PING_MS)
    try {
      await streamMessage(events, builder, send, err => anthropicError(streamFailure(request, err)).body as {error: unknown})
    } finally {
      clearInterval(timer)
      sse.end()
    }
    return reply
  })
}
