// POST /tokenize, /detokenize and /apply-template: the prompt as the model will see it, without running it.
import type {FastifyInstance} from 'fastify'
import type {TypeBoxTypeProvider} from '@fastify/type-provider-typebox'
import {ApplyTemplateBody, DetokenizeBody, TokenizeBody} from './lib/schema.js'
import {toMessages, toTools} from '../openai-chat/lib/translate.js'
import {errors} from '../../src/errors.js'
import {resolveMedia} from '../../src/chat/media/media.js'
import {mediaOptionsOf} from '../shared/media-parts.js'

export default async function tokenize(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>()

  const render = async (body: {messages: ApplyTemplateBody['messages']; tools?: ApplyTemplateBody['tools']; reasoning_effort?: string; add_generation_prompt?: boolean}, family: ReturnType<typeof app.modelHost.serving>['family'], log: (m: string) => void) => {
    const plan = family.chat.thinking(body.reasoning_effort)
    // images and PDFs as generation sees them: PDFs as page text, each image as its full pad span
    const resolved = await resolveMedia(toMessages(body.messages), family.chat.vision, mediaOptionsOf(app.appOptions))
    const out = await family.chat.render(resolved.messages, {
      tools: toTools(body.tools, log),
      enableThinking: plan.enableThinking,
      addGenerationPrompt: body.add_generation_prompt ?? true,
    })
    return resolved.images.length === 0 ? out : {text: out.text, tokens: family.chat.vision!.layout(out.tokens, resolved.images).tokens}
  }

  app.post('/tokenize', {schema: {body: TokenizeBody}}, async request => {
    const body = request.body
    const {model, family} = app.modelHost.serving(body.model)
    let tokens: number[]
    if (body.messages) tokens = (await render({...body, messages: body.messages}, family, m => request.log.warn(m))).tokens
    else if (body.prompt !== undefined || body.content !== undefined) tokens = family.codec.encode(body.prompt ?? body.content ?? '')
    else throw errors.invalidRequest('Give "prompt" (text) or "messages"', 'prompt')
    return {
      tokens: body.with_pieces ? tokens.map(id => ({id, piece: family.codec.tokenText(id)})) : tokens,
      count: tokens.length,
      max_model_len: model.contextLength,
    }
  })

  app.post('/detokenize', {schema: {body: DetokenizeBody}}, async request => {
    const {family, engine} = app.modelHost.serving(request.body.model)
    const bad = request.body.tokens.find(t => t >= engine.model.vocabSize)
    if (bad !== undefined) throw errors.invalidRequest(`Token id ${bad} is outside the vocabulary`, 'tokens')
    const text = family.codec.decode(request.body.tokens)
    return {prompt: text, content: text}
  })

  app.post('/apply-template', {schema: {body: ApplyTemplateBody}}, async request => {
    const {family} = app.modelHost.serving(request.body.model)
    const {text, tokens} = await render(request.body, family, m => request.log.warn(m))
    return {prompt: text, num_tokens: tokens.length}
  })
}
