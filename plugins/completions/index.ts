// POST /v1/completions: text in (a string or token ids), text out; streaming and not.
import type {FastifyInstance} from 'fastify'
import type {TypeBoxTypeProvider} from '@fastify/type-provider-typebox'
import {randomUUID} from 'node:crypto'
import {CompletionBody} from './lib/schema.js'
import {toJobs} from './lib/translate.js'
import {ChoiceBuilder} from './lib/encode.js'
import {generateText} from '../../src/chat/text-generation.js'
import {SseStream, clientGone} from '../shared/sse.js'
import {openAiStream} from '../shared/openai-stream.js'
import type {SampledToken} from '../../src/engine/sampling.js'
import {timingsBody} from '../shared/timings.js'

export default async function completions(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>()
  app.post('/v1/completions', {schema: {body: CompletionBody}}, async (request, reply) => {
    const started = performance.now()
    const body = request.body
    const {model, engine, family} = app.modelHost.serving(body.model)
    const signal = clientGone(reply)
    const jobs = toJobs(body, family.codec, body.ignore_eos ? [] : family.stopTokenIds, signal, model.sampling)
    const id = `cmpl-${randomUUID().replace(/-/g, '')}`
    const created = Math.floor(Date.now() / 1000)
    const builders = jobs.map(j => new ChoiceBuilder(j.index, family.codec, body.logprobs != null))
    const echo = body.echo === true
    const returnIds = body.return_token_ids === true
    let promptTokens = 0
    const seenPrompts = new Set<number>()
    const firstOfPrompt: number[] = []
    for (const [k, j] of jobs.entries()) {
      if (seenPrompts.has(j.promptIndex)) continue
      promptTokens += j.prompt.length
      seenPrompts.add(j.promptIndex)
      firstOfPrompt.push(k)
    }
    // each prompt counted once, as prompt_tokens is: its first choice's reuse
    const usage = () => {
      const completion = builders.reduce((a, b) => a + b.completionTokens, 0)
      const cached = firstOfPrompt.reduce((a, k) => a + builders[k].cachedTokens, 0)
      return {prompt_tokens: promptTokens, completion_tokens: completion, total_tokens: promptTokens + completion, prompt_tokens_details: {cached_tokens: cached}}
    }
    const timings = () => {
      const firsts = builders.map(b => b.firstAt).filter(x => x > 0)
      return timingsBody(builders, promptTokens, usage().prompt_tokens_details.cached_tokens, started, firsts.length > 0 ? Math.min(...firsts) : 0)
    }
    // Every generation is admitted before anything is sent, so a refusal is a plain error response.
    const streams = jobs.map(j => generateText(engine, family.codec, j.request)[Symbol.asyncIterator]())
    // One refused (the queue full): the ones already admitted are cancelled with it, not left running for nobody.
    const admitted = await Promise.allSettled(streams.map(s => s.next()))
    const refused = admitted.find(a => a.status === 'rejected')
    if (refused) {
      await Promise.all(streams.map(s => s.return(undefined).catch(() => undefined)))
      throw refused.reason
    }
    const firsts = admitted.map(a => (a as PromiseFulfilledResult<IteratorResult<import('../../src/chat/text-generation.js').TextEvent>>).value)
    const base = {id, object: 'text_completion', created, model: model.id}

    if (!body.stream) {
      await Promise.all(jobs.map((job, k) => drain(firsts[k], streams[k], job.prompt, builders[k], echo, () => {})))
      const choices = builders.map((b, k) => ({
        index: b.index,
        text: b.text,
        logprobs: b.logprobs,
        finish_reason: b.finishReason,
        ...(returnIds ? {prompt_token_ids: Array.from(jobs[k].prompt), token_ids: b.tokenIds} : {}),
      }))
      return {...base, choices, usage: usage(), timings: timings()}
    }

    const sse = SseStream.open(request, reply)
    await openAiStream(sse, request, () =>
      Promise.all(
        jobs.map((job, k) =>
          drain(firsts[k], streams[k], job.prompt, builders[k], echo, (text, logprobs, finish, extra) =>
            sse.data({...base, choices: [{index: builders[k].index, text, logprobs, finish_reason: finish, ...extra}]}),
            returnIds,
          ),
        ),
      ),
      body.stream_options?.include_usage ? () => ({...base, choices: [], usage: usage(), timings: timings()}) : undefined,
    )
    return reply
  })
}

type Emit = (text: string, logprobs: unknown, finish: string | null, extra?: Record<string, unknown>) => void

async function drain(
  first: IteratorResult<import('../../src/chat/text-generation.js').TextEvent>,
  stream: AsyncIterator<import('../../src/chat/text-generation.js').TextEvent>,
  prompt: Int32Array,
  b: ChoiceBuilder,
  echo: boolean,
  emit: Emit,
  returnIds = false,
): Promise<void> {
  let promptEntries: Array<SampledToken | null> = []
  let echoed = false
  const doEcho = () => {
    if (!echo || echoed) return
    echoed = true
    const text = b.echo(prompt, promptEntries)
    const lp = b.logprobs ? {...b.logprobs} : null
    emit(text, lp, null, returnIds ? {prompt_token_ids: Array.from(prompt)} : undefined)
  }
  for (let r = first; !r.done; r = await stream.next()) {
    const e = r.value
    if (e.type === 'prompt_logprobs') {
      promptEntries = promptEntries.concat(e.entries)
      continue
    }
    doEcho()
    if (e.type === 'text') {
      b.firstAt ||= performance.now()
      const d = b.apply(e)
      if (d.text || e.token >= 0) emit(d.text, d.logprobs, null, returnIds && e.token >= 0 ? {token_ids: [e.token]} : undefined)
      continue
    }
    b.finishReason = e.reason === 'cancelled' ? 'stop' : e.reason
    b.completionTokens = e.usage.completionTokens
    b.cachedTokens = e.usage.cachedTokens
    b.draft = e.usage.draft
    emit('', null, b.finishReason)
  }
}
