// /v1/completions end to end on the real engine: prompts as text or ids, echo, logprobs, max_tokens 0,
// return_token_ids, streaming, stop strings; and batched greedy output equal to serial greedy output.
import t from 'tap'
import OpenAI from 'openai'
import {startServe, type ServerProcess} from '../helpers/cli.js'
import {synthFixture} from '../helpers/packages.js'

let server: ServerProcess
let client: OpenAI

t.before(async () => {
  server = await startServe(['--model', await synthFixture('tiny-hybrid', 'q4')])
  client = new OpenAI({baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0})
})
t.teardown(async () => {
  server.child.kill('SIGTERM')
  await server.exited
})

async function raw(body: Record<string, unknown>) {
  const r = await fetch(`${server.url}/v1/completions`, {method: 'POST', headers: {'content-type': 'application/json'}, body: JSON.stringify(body)})
  return {status: r.status, json: await r.json()}
}

t.test('a string prompt and the same prompt as token ids give the same greedy text', async t => {
  const a = await raw({prompt: 'def add(a, b):', max_tokens: 8, temperature: 0, return_token_ids: true})
  t.equal(a.status, 200)
  const ids = a.json.choices[0].prompt_token_ids as number[]
  t.ok(ids.length > 0)
  t.equal(a.json.choices[0].token_ids.length, 8)
  const b = await raw({prompt: ids, max_tokens: 8, temperature: 0})
  t.equal(b.json.choices[0].text, a.json.choices[0].text)
  t.equal(a.json.usage.prompt_tokens, ids.length)
  t.equal(a.json.usage.completion_tokens, 8)
  t.equal(a.json.usage.prompt_tokens_details.cached_tokens, 0, 'a new prompt reuses nothing')
  t.equal(b.json.usage.prompt_tokens_details.cached_tokens, ids.length - 1, 'the same prompt again: all but its last token from the prefix cache')
  // llama.cpp-style timings, as in Chat Completions
  const tm = b.json.timings
  t.equal(tm.prompt_n, ids.length)
  t.equal(tm.cache_n, ids.length - 1)
  t.equal(tm.predicted_n, 8)
  t.ok(tm.prompt_ms > 0 && tm.predicted_ms > 0 && tm.predicted_per_second > 0, 'times from the server clock')
  if (tm.draft_n !== undefined) t.ok(tm.draft_acceptance_length >= 1 && tm.draft_n_accepted <= tm.draft_n, 'draft counters agree')
})

t.test('max_tokens 0 with echo and logprobs scores the prompt', async t => {
  const r = await raw({prompt: 'one two three', max_tokens: 0, echo: true, logprobs: 5, temperature: 0, return_token_ids: true})
  t.equal(r.status, 200)
  const c = r.json.choices[0]
  t.equal(c.text, 'one two three')
  t.equal(c.finish_reason, 'length')
  const n = c.prompt_token_ids.length
  t.equal(c.logprobs.tokens.length, n)
  t.equal(c.logprobs.token_logprobs[0], null, 'the first prompt token has no logprob')
  for (let i = 1; i < n; i++) {
    t.ok(c.logprobs.token_logprobs[i] < 0)
    const top = Object.keys(c.logprobs.top_logprobs[i]).length
    t.ok(top >= 1 && top <= 5, 'top-5 (tokens that read the same share a key)')
  }
  t.same(c.logprobs.tokens.join(''), 'one two three')
  t.equal(c.logprobs.text_offset[0], 0)
  t.ok(c.logprobs.text_offset[n - 1] > 0)
})

t.test('logprobs of generated tokens are consistent with the prompt scoring', async t => {
  const gen = await raw({prompt: 'x y', max_tokens: 3, temperature: 0, logprobs: 1, return_token_ids: true})
  const c = gen.json.choices[0]
  const full = [...c.prompt_token_ids, ...c.token_ids]
  const scored = await raw({prompt: full, max_tokens: 0, echo: true, logprobs: 1})
  const lp = scored.json.choices[0].logprobs.token_logprobs as number[]
  for (let i = 0; i < 3; i++) t.ok(Math.abs(lp[c.prompt_token_ids.length + i] - c.logprobs.token_logprobs[i]) < 1e-3, `token ${i}`)
})

t.test('streaming with the openai SDK reassembles the non-streamed text', async t => {
  const full = await client.completions.create({model: '', prompt: 'stream', max_tokens: 12, temperature: 0} as never)
  const stream = await client.completions.create({prompt: 'stream', max_tokens: 12, temperature: 0, stream: true, stream_options: {include_usage: true}} as never)
  let text = ''
  let finish = ''
  let usage: {completion_tokens: number} | undefined
  let timings: {predicted_n: number} | undefined
  for await (const chunk of stream as unknown as AsyncIterable<OpenAI.Completion & {timings?: {predicted_n: number}}>) {
    if (chunk.usage) usage = chunk.usage
    if (chunk.timings) timings = chunk.timings
    for (const ch of chunk.choices) {
      text += ch.text
      if (ch.finish_reason) finish = ch.finish_reason
    }
  }
  t.equal(text, (full as OpenAI.Completion).choices[0].text)
  t.equal(finish, 'length')
  t.equal(usage?.completion_tokens, 12)
  t.equal(timings?.predicted_n, 12, 'the usage chunk carries the timings')
})

t.test('a stop string is never emitted', async t => {
  const base = await raw({prompt: 'abc', max_tokens: 16, temperature: 0})
  const text = base.json.choices[0].text as string
  const cut = text.slice(3, 5)
  t.ok(cut.length > 0, `stop string "${cut}"`)
  const r = await raw({prompt: 'abc', max_tokens: 16, temperature: 0, stop: [cut]})
  t.equal(r.json.choices[0].text, text.slice(0, text.indexOf(cut)))
  t.equal(r.json.choices[0].finish_reason, 'stop')
})

t.test('logit_bias takes the draws it forces; a bad one is a 400', async t => {
  const r = await raw({prompt: 'x y', max_tokens: 5, temperature: 0.8, seed: 1, logit_bias: {'300': 100}, return_token_ids: true, ignore_eos: true})
  t.same(r.json.choices[0].token_ids, Array(5).fill(300))
  const bad = await raw({prompt: 'x', logit_bias: {'300': -101}})
  t.equal(bad.status, 400)
  t.match(bad.json.error, {type: 'invalid_request_error', param: 'logit_bias'})
})

t.test('bad input gets 400 in the OpenAI shape', async t => {
  for (const body of [{prompt: 'x', logprobs: 21}, {prompt: [999999]}, {prompt: ''}, {prompt: 'x', max_tokens: -1}, {prompt: 'x', max_tokens: 100000}, {}]) {
    const r = await raw(body)
    t.equal(r.status, 400, JSON.stringify(body))
    t.equal(r.json.error.type, 'invalid_request_error')
  }
})

t.test('batched greedy output equals serial greedy output', async t => {
  const prompts = ['alpha', 'the quick brown fox', 'def f(x):\n    return', '1 2 3 4 5 6 7 8 9 10 11 12', 'zz']
  const serial: string[] = []
  for (const p of prompts) serial.push((await raw({prompt: p, max_tokens: 20, temperature: 0})).json.choices[0].text)
  const batched = await Promise.all(prompts.map(p => raw({prompt: p, max_tokens: 20, temperature: 0})))
  t.same(batched.map(b => b.json.choices[0].text), serial)
  // n > 1 also shares steps
  const multi = await raw({prompt: prompts, max_tokens: 20, temperature: 0})
  t.same(multi.json.choices.map((c: {text: string}) => c.text), serial)
})
