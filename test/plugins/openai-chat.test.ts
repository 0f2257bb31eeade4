// /v1/chat/completions end to end: the real server on the real engine, talked to with the official
// openai SDK and the Vercel AI SDK (what opencode runs).
import t from 'tap'
import OpenAI from 'openai'
import {createOpenAICompatible} from '@ai-sdk/openai-compatible'
import {generateText, streamText} from 'ai'
import {startServe, type ServerProcess} from '../helpers/cli.js'
import {synthFixture} from '../helpers/packages.js'

let server: ServerProcess
let client: OpenAI
let modelId: string

t.before(async () => {
  const dir = await synthFixture('tiny-hybrid', 'q4')
  server = await startServe(['--model', dir])
  client = new OpenAI({baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0})
  modelId = (await client.models.list()).data[0].id
})
t.teardown(async () => {
  server.child.kill('SIGTERM')
  await server.exited
})

const user = (content: string) => [{role: 'user' as const, content}]

t.test('non-streaming: message, finish reason, usage details', async t => {
  const r = await client.chat.completions.create({model: modelId, messages: user('Say hello'), max_tokens: 12, temperature: 0})
  t.equal(r.object, 'chat.completion')
  t.equal(r.model, modelId)
  t.equal(r.choices.length, 1)
  t.equal(r.choices[0].message.role, 'assistant')
  t.equal(r.choices[0].finish_reason, 'length')
  t.equal(r.usage?.completion_tokens, 12)
  t.ok((r.usage?.prompt_tokens ?? 0) > 0)
  t.equal(r.usage?.total_tokens, (r.usage?.prompt_tokens ?? 0) + 12)
  t.type(r.usage?.prompt_tokens_details?.cached_tokens, 'number')
  t.type(r.usage?.completion_tokens_details?.reasoning_tokens, 'number')
})

t.test('greedy output is deterministic, and a seed makes sampling repeatable', async t => {
  const a = await client.chat.completions.create({model: modelId, messages: user('abc'), max_tokens: 16, temperature: 0})
  const b = await client.chat.completions.create({model: modelId, messages: user('abc'), max_tokens: 16, temperature: 0})
  t.same(b.choices[0].message, a.choices[0].message)
  const s1 = await client.chat.completions.create({model: modelId, messages: user('abc'), max_tokens: 16, temperature: 1, seed: 42})
  const s2 = await client.chat.completions.create({model: modelId, messages: user('abc'), max_tokens: 16, temperature: 1, seed: 42})
  t.same(s2.choices[0].message, s1.choices[0].message)
})

t.test('every sampling parameter through HTTP: the same seed gives the same output; bad values are 400s', async t => {
  const combos: Array<Record<string, number>> = [
    {temperature: 0.8, top_p: 0.9},
    {temperature: 1.2, top_k: 5, min_p: 0.05},
    {temperature: 0.7, top_p: 0.95, presence_penalty: 1.5, frequency_penalty: 0.5, repetition_penalty: 1.3},
    {temperature: 0, repetition_penalty: 1.5, presence_penalty: 2},
  ]
  for (const c of combos) {
    const ask = (seed: number) =>
      client.chat.completions.create({model: modelId, messages: user('abc'), max_tokens: 24, seed, ...c} as OpenAI.ChatCompletionCreateParamsNonStreaming)
    const a = await ask(7)
    const b = await ask(7)
    t.same(b.choices[0].message, a.choices[0].message, JSON.stringify(c))
  }
  const bySeed = new Set<string>()
  for (const seed of [1, 2, 3, 4]) {
    const r = await client.chat.completions.create({model: modelId, messages: user('abc'), max_tokens: 24, temperature: 1, seed})
    bySeed.add(JSON.stringify(r.choices[0].message))
  }
  t.ok(bySeed.size > 1, 'different seeds give different samples')
  for (const bad of [{temperature: 'hot'}, {temperature: 3}, {top_p: 0}, {top_k: 1.5}, {min_p: 2}, {repetition_penalty: 0}, {presence_penalty: -3}, {seed: 1.5}, {logprobs: true, top_logprobs: 50}]) {
    const res = await fetch(`${server.url}/v1/chat/completions`, {
      method: 'POST',
      headers: {'content-type': 'application/json'},
      body: JSON.stringify({messages: user('abc'), max_tokens: 4, ...bad}),
    })
    t.equal(res.status, 400, JSON.stringify(bad))
    t.equal(((await res.json()) as {error: {type: string}}).error.type, 'invalid_request_error')
  }
  const after = await client.chat.completions.create({model: modelId, messages: user('abc'), max_tokens: 4, temperature: 0})
  t.equal(after.choices[0].finish_reason, 'length', 'the server still answers')
})

t.test('logit_bias: +100 takes every token, -100 bans one; bad biases are 400s naming logit_bias', async t => {
  type WithIds = {choices: Array<{token_ids: number[]}>}
  const ask = async (extra: Record<string, unknown>) => {
    const res = await fetch(`${server.url}/v1/chat/completions`, {
      method: 'POST',
      headers: {'content-type': 'application/json'},
      body: JSON.stringify({messages: user('abc'), max_tokens: 8, return_token_ids: true, ignore_eos: true, ...extra}),
    })
    return {status: res.status, json: (await res.json()) as WithIds & {error: {type: string; param: string}}}
  }
  const plain = await ask({temperature: 0})
  const first = plain.json.choices[0]!.token_ids[0]!
  for (const temperature of [0, 1]) {
    const forced = await ask({temperature, seed: 3, logit_bias: {'200': 100}})
    t.same(forced.json.choices[0]!.token_ids, Array(8).fill(200), `T=${temperature}: +100 on token 200 takes every token`)
  }
  const banned = await ask({temperature: 0, logit_bias: {[String(first)]: -100}})
  t.not(banned.json.choices[0]!.token_ids[0], first, 'the greedy first token, banned, is not chosen')
  t.notOk(banned.json.choices[0]!.token_ids.includes(first), 'nor anywhere after')
  // through the SDK (its type allows logit_bias)
  const sdk = await client.chat.completions.create({model: modelId, messages: user('abc'), max_tokens: 4, temperature: 0, logit_bias: {'200': 100}})
  t.equal(sdk.choices[0]!.finish_reason, 'length')
  for (const bad of [{abc: 1}, {'01': 1}, {'5': 101}, {'5': 'x'}, {'99999999': 1}, {'-1': 5}]) {
    const r = await ask({logit_bias: bad})
    t.equal(r.status, 400, JSON.stringify(bad))
    t.match(r.json.error, {type: 'invalid_request_error', param: 'logit_bias'})
  }
})

t.test('streaming: deltas then finish then usage, and the same text as non-streaming', async t => {
  const full = await client.chat.completions.create({model: modelId, messages: user('stream me'), max_tokens: 10, temperature: 0})
  const stream = await client.chat.completions.create({
    model: modelId, messages: user('stream me'), max_tokens: 10, temperature: 0, stream: true, stream_options: {include_usage: true},
  })
  let content = ''
  let reasoning = ''
  let finish: string | null = null
  let usage: OpenAI.CompletionUsage | undefined
  let first = true
  for await (const chunk of stream) {
    t.equal(chunk.object, 'chat.completion.chunk')
    if (chunk.usage) usage = chunk.usage
    const c = chunk.choices[0]
    if (!c) continue
    if (first) t.equal(c.delta.role, 'assistant', 'the first delta carries the role')
    first = false
    content += c.delta.content ?? ''
    reasoning += (c.delta as {reasoning_content?: string}).reasoning_content ?? ''
    if (c.finish_reason) finish = c.finish_reason
  }
  t.equal(finish, 'length')
  t.equal(usage?.completion_tokens, 10)
  t.equal(content, full.choices[0].message.content ?? '')
  t.equal(reasoning, (full.choices[0].message as {reasoning_content?: string}).reasoning_content ?? '')
})

t.test('n choices and logprobs', async t => {
  const r = await client.chat.completions.create({model: modelId, messages: user('x'), max_tokens: 4, temperature: 1, seed: 1, n: 3, logprobs: true, top_logprobs: 3})
  t.equal(r.choices.length, 3)
  t.same(r.choices.map(c => c.index), [0, 1, 2])
  const lp = r.choices[0].logprobs?.content ?? []
  t.equal(lp.length, 4)
  for (const e of lp) {
    t.ok(e.logprob <= 0)
    t.equal(e.top_logprobs.length, 3)
    t.ok(e.top_logprobs[0].logprob >= e.top_logprobs[2].logprob)
  }
})

t.test('errors in the OpenAI shape', async t => {
  await t.rejects(client.chat.completions.create({model: 'nope/other', messages: user('x')}), {status: 404, code: 'model_not_found'})
  await t.rejects(client.chat.completions.create({model: modelId, messages: user('x'.repeat(30000)), max_tokens: 4}), {status: 400, code: 'context_length_exceeded'})
  await t.rejects(client.chat.completions.create({model: modelId, messages: [], max_tokens: 4}), {message: /./, status: 400})
  await t.rejects(client.chat.completions.create({model: modelId, messages: user('x'), temperature: 5}), {message: /./, status: 400})
  await t.rejects(client.chat.completions.create({model: modelId, messages: user('x'), reasoning_effort: 'ultra' as 'high'}), {message: /./, status: 400, param: 'reasoning_effort'})
  await t.rejects(
    client.chat.completions.create({model: modelId, messages: user('x'), tool_choice: {type: 'function', function: {name: 'missing'}}, tools: [{type: 'function', function: {name: 'present', parameters: {type: 'object'}}}]}),
    {message: /./, status: 400, param: 'tool_choice'},
  )
})

t.test('model is optional', async t => {
  const r = await fetch(`${server.url}/v1/chat/completions`, {method: 'POST', headers: {'content-type': 'application/json'}, body: JSON.stringify({messages: user('x'), max_tokens: 2})})
  t.equal(r.status, 200)
  t.equal((await r.json()).model, modelId)
})

t.test('a client that disconnects cancels its generation and frees its state', async t => {
  const controller = new AbortController()
  const stream = await client.chat.completions.create(
    {model: modelId, messages: user('go on forever'), max_tokens: 3000, temperature: 1, seed: 3, stream: true, ignore_eos: true} as OpenAI.ChatCompletionCreateParamsStreaming,
    {signal: controller.signal},
  )
  let chunks = 0
  try {
    for await (const _ of stream) {
      if (++chunks === 5) {
        controller.abort()
        break
      }
    }
  } catch {
    // the SDK reports the abort
  }
  t.equal(chunks, 5, 'the stream was cut after five chunks')
  let running = -1
  for (let i = 0; i < 300; i++) {
    const metrics = await (await fetch(`${server.url}/metrics`)).text()
    running = Number(/^splash_running_requests (\d+)/m.exec(metrics)?.[1])
    if (running === 0 && /splash_generations_total\{reason="cancelled"\} [1-9]/.test(metrics)) break
    await new Promise(r => setTimeout(r, 100))
  }
  t.equal(running, 0, 'no generation left running')
})

t.test('Vercel AI SDK (openai-compatible provider): generateText and streamText', async t => {
  const provider = createOpenAICompatible({name: 'splash', baseURL: `${server.url}/v1`, includeUsage: true})
  const model = provider.chatModel(modelId)
  const g = await generateText({model, prompt: 'hello', maxOutputTokens: 8, temperature: 0})
  t.equal(g.finishReason, 'length')
  t.equal(g.usage.outputTokens, 8)
  const s = streamText({model, prompt: 'hello', maxOutputTokens: 8, temperature: 0})
  let text = ''
  for await (const part of s.textStream) text += part
  t.equal(text, g.text)
  t.equal((await s.usage).outputTokens, 8)
})
