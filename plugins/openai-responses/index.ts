// OpenAI Responses surface: POST /v1/responses (streaming and not, function and custom tools, reasoning items,
// previous_response_id over a bounded in-memory store), GET and DELETE /v1/responses/:id for stored responses, and
// POST /v1/responses/input_tokens (the prompt a request would run, counted).
import type {FastifyInstance} from 'fastify'
import type {TypeBoxTypeProvider} from '@fastify/type-provider-typebox'
import {Type} from 'typebox'
import {ResponsesBody, type Item} from './lib/schema.js'
import {inputItems, toChatRequest} from './lib/translate.js'
import {mediaOptionsOf} from '../shared/media-parts.js'
import {ResponseBuilder, streamResponse, type StreamEvent} from './lib/response.js'
import {ResponseStore} from './lib/store.js'
import {generateChat} from '../../src/chat/chat.js'
import {SplashError} from '../../src/errors.js'
import {streamFailure, toSplashError, type ErrorEnvelope} from '../../src/server/error-shapes.js'
import {openaiError} from '../shared/openai-error.js'
import {SseStream, clientGone} from '../shared/sse.js'
import {renderPrompt} from '../shared/render.js'

/** While nothing else is sent (a long prompt being processed), an SSE comment goes out this often. */
const KEEPALIVE_MS = 5000

const notStored = (id: string, param?: string) =>
  new SplashError(param ? 'previous_response_not_found' : 'not_found', 'not_found', `${param ? 'Previous response' : 'Response'} with id '${id}' not found.`, {param})

/** The request fields a Response object repeats. */
function echoOf(body: ResponsesBody): Record<string, unknown> {
  return {
    instructions: body.instructions ?? null,
    max_output_tokens: body.max_output_tokens ?? null,
    parallel_tool_calls: body.parallel_tool_calls ?? true,
    previous_response_id: body.previous_response_id ?? null,
    prompt_cache_key: body.prompt_cache_key ?? null,
    reasoning: {effort: body.reasoning?.effort ?? null, summary: body.reasoning?.summary ?? null},
    store: body.store ?? true,
    temperature: body.temperature ?? 1,
    text: {format: body.text?.format ?? {type: 'text'}, verbosity: body.text?.verbosity ?? 'medium'},
    tool_choice: body.tool_choice ?? 'auto',
    tools: body.tools ?? [],
    top_p: body.top_p ?? 1,
    truncation: 'disabled',
    metadata: body.metadata ?? {},
  }
}

/** Errors about the output budget name Chat's field, max_tokens; this API calls it max_output_tokens. */
function responsesError(err: SplashError): ErrorEnvelope {
  if (err.param !== 'max_tokens') return openaiError(err)
  const message = err.message.replace(/\bmax_tokens\b/g, 'max_output_tokens')
  return openaiError(new SplashError(err.code, err.kind, message, {param: 'max_output_tokens', retryAfter: err.retryAfter}))
}

export default async function openaiResponses(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>()
  app.errorShapes.register('/v1/responses', responsesError)
  const store = new ResponseStore(256)

  app.get('/v1/responses/:id', {schema: {params: Type.Object({id: Type.String()})}}, async request => {
    const hit = store.get(request.params.id)
    if (!hit) throw notStored(request.params.id)
    return hit.response
  })

  app.delete('/v1/responses/:id', {schema: {params: Type.Object({id: Type.String()})}}, async request => {
    if (!store.delete(request.params.id)) throw notStored(request.params.id)
    return {id: request.params.id, object: 'response', deleted: true}
  })

  // The prompt a request would run, counted: the same translation and template as POST /v1/responses.
  app.post('/v1/responses/input_tokens', {schema: {body: ResponsesBody}}, async request => {
    const body = request.body
    const {family} = app.modelHost.serving(body.model)
    let history: Item[] = []
    if (body.previous_response_id) {
      const prev = store.get(body.previous_response_id)
      if (!prev) throw notStored(body.previous_response_id, 'previous_response_id')
      history = prev.items
    }
    const {request: chat} = toChatRequest(body, history, family.chat, id => store.findItem(id), new AbortController().signal, msg => request.log.warn(msg))
    const {tokens} = await renderPrompt(family.chat, {...chat, media: mediaOptionsOf(app.appOptions)})
    return {object: 'response.input_tokens', input_tokens: tokens.length}
  })

  app.post('/v1/responses', {schema: {body: ResponsesBody}}, async (request, reply) => {
    const body = request.body
    const {model, engine, family} = app.modelHost.serving(body.model)
    const log = (msg: string) => request.log.warn(msg)
    let history: Item[] = []
    if (body.previous_response_id) {
      const prev = store.get(body.previous_response_id)
      if (!prev) throw notStored(body.previous_response_id, 'previous_response_id')
      history = prev.items
    }
    const signal = clientGone(reply)
    const {request: chat, custom} = toChatRequest(body, history, family.chat, id => store.findItem(id), signal, log, model.sampling)
    chat.media = mediaOptionsOf(app.appOptions)
    const builder = new ResponseBuilder({
      model: model.id,
      custom,
      encryptedReasoning: body.include?.includes('reasoning.encrypted_content') ?? false,
      echo: echoOf(body),
    })
    const keep = () => {
      if (body.store === false) return
      const input = inputItems(body.input).map(item => (item.type === 'item_reference' && typeof item.id === 'string' ? (store.findItem(item.id) ?? item) : item))
      store.set(builder.id, {items: [...history, ...input, ...structuredClone(builder.output)], response: builder.response()})
    }
    const events = generateChat(engine, family.codec, family.stopTokenIds, family.chat, chat)
    // The first event is 'prompt': admission errors throw here, before any byte is sent. A stream reports a
    // prompt over the context as response.failed (Codex reads its code); everything else is an HTTP error.
    let admission: SplashError | undefined
    try {
      await events.next()
    } catch (err) {
      admission = toSplashError(err)
      if (!body.stream || admission.code !== 'context_length_exceeded') throw err
    }

    if (!body.stream) {
      for await (const e of events) builder.apply(e)
      builder.end()
      keep()
      return builder.response()
    }

    const sse = SseStream.open(request, reply)
    let lastWrite = Date.now()
    const send = (out: StreamEvent[]) => {
      for (const e of out) sse.event(e.type, e)
      lastWrite = Date.now()
    }
    const timer = setInterval(() => {
      if (Date.now() - lastWrite < KEEPALIVE_MS - 50) return
      sse.comment('keepalive')
      lastWrite = Date.now()
    }, KEEPALIVE_MS)
    try {
      send(builder.start())
      if (admission) send(builder.fail(admission))
      else if (await streamResponse(events, builder, send, err => streamFailure(request, err))) keep()
    } finally {
      clearInterval(timer)
      sse.end()
    }
    return reply
  })
}
