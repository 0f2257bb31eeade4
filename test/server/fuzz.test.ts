// Malformed requests against the real server on the real engine: valid bodies of every generating API, mutated at
// random (a seeded generator, so a failure replays), with wrong types, out-of-range numbers, odd strings, missing and
// unknown keys, bad content parts and tool definitions. Every answer must be a success or a 4xx in the calling API's
// own error shape, never a 5xx; the server must stay up and end with nothing running or queued.
import t from 'tap'
import {startServe, type ServerProcess} from '../helpers/cli.js'
import {synthFixture} from '../helpers/packages.js'

const ROUNDS = 1500
const REQUEST_MS = 60_000
// another seed explores other mutations: SPLASH_FUZZ_SEED=N npx tap test/server/fuzz.test.ts
const SEED = Number(process.env.SPLASH_FUZZ_SEED ?? 20261203)

/** mulberry32: a small seeded generator. */
function rng(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let x = Math.imul(a ^ (a >>> 15), 1 | a)
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296
  }
}

type Json = null | boolean | number | string | Json[] | {[k: string]: Json}

const VALUES: Json[] = [
  null, true, false, 0, -1, 1, 0.5, -0.5, 2.5, 1e308, -1e308, 2 ** 53, 4097, 1e6, '', ' ', 'x', '0', '-1', 'NaN', 'Infinity',
  'null', '\u0000', '\ud800', '😀'.repeat(50), 'a'.repeat(20_000), '<|im_start|>', '<tool_call>', '{"a":', '[]', [], [null], [1, 'a'],
  [[]], {}, {type: 'text'}, {type: 'image_url', image_url: {url: 'data:image/png;base64,AAAA'}},
  {type: 'image_url', image_url: {url: 'http://example.com/x.png'}}, {type: 'image', source: {type: 'base64', media_type: 'image/png', data: '!!'}},
  {type: 'document', source: {type: 'base64', media_type: 'application/pdf', data: 'JVBERi0='}}, {type: 'input_file', file_data: 'data:application/pdf;base64,AAAA'},
  {type: 'function', function: {name: 'f', parameters: {type: 'object', properties: {a: {type: 'string'}}}}},
  {type: 'function', function: {name: '', parameters: 'nope'}}, {name: 'f', input_schema: {type: 'object'}}, {type: 'json_schema', json_schema: {name: 's', schema: {type: 'integer', minimum: 5, maximum: 1}}},
  {type: 'json_schema', json_schema: {schema: {$ref: '#/nowhere'}}}, {type: 'json_object'}, {type: 'text'}, {role: 'user', content: 'hi'},
  {role: 'tool', content: 'r', tool_call_id: 'nope'}, {role: 'assistant', content: null, tool_calls: [{id: 'c', type: 'function', function: {name: 'f', arguments: '{bad'}}]},
  {a: {b: {c: {d: [1, {e: null}]}}}},
]

/** A schema nested `depth` levels deep (past what the grammar engine's stack takes). */
function deepSchema(depth: number): Json {
  let s: Json = {type: 'integer'}
  for (let i = 0; i < depth; i++) s = {type: 'array', items: s}
  return s
}
const ODD_NAMES: Json = {type: 'object', properties: {'a"b': {type: 'integer'}, 'tab\tc\\': {type: 'boolean'}}, required: ['a"b', 'tab\tc\\']}

/** Optional fields the APIs know, with values from the pool or their own odd ones. */
const KNOWN: Record<string, Json[]> = {
  temperature: [-1, 0, 3, 'hot'], top_p: [0, 1.5, -0.1], top_k: [-1, 0, 1e9, 0.5], min_p: [2, -1], seed: [-1, 2 ** 64, 'x'],
  stop: ['', [''], ['a', 'b', 'c', 'd', 'e'], 'a'.repeat(5000)], n: [0, 2, 100], logprobs: [true, 5, -1], top_logprobs: [21, -1, 5],
  stream: [true, 'yes'], stream_options: [{include_usage: true}, {include_usage: 'x'}], presence_penalty: [-3, 3], frequency_penalty: [9],
  repetition_penalty: [0, -1, 1.2], logit_bias: [{'1': 100}, {x: 1}, {'99999999': -100}], max_completion_tokens: [0, -5, 4],
  tools: [
    [], [{type: 'function', function: {name: 'get', parameters: {type: 'object', properties: {q: {type: 'string'}}, required: ['q']}}}], [{type: 'nope'}],
    [{type: 'function', function: {name: 'x>y', parameters: ODD_NAMES}}], [{type: 'function', function: {name: 'd', strict: true, parameters: {type: 'object', properties: {v: deepSchema(300)}}}}],
    [{type: 'custom', name: 'patch', format: {type: 'grammar', syntax: 'regex', definition: `${'('.repeat(300)}a${')'.repeat(300)}`}}],
  ],
  tool_choice: ['required', 'none', 'auto', {type: 'function', function: {name: 'missing'}}, {type: 'tool', name: 'x'}, {type: 'any'}],
  response_format: [
    {type: 'json_object'}, {type: 'json_schema', json_schema: {name: 'o', schema: {type: 'object', properties: {a: {type: 'boolean'}}, required: ['a']}}},
    {type: 'json_schema', json_schema: {name: 'deep', schema: deepSchema(300)}}, {type: 'json_schema', json_schema: {name: 'odd', schema: ODD_NAMES}},
    {type: 'json_schema', json_schema: {name: 'email', schema: {type: 'string', format: 'email'}}},
  ],
  reasoning_effort: ['none', 'max', 'weird'], thinking: [{type: 'enabled', budget_tokens: 0}, {type: 'disabled'}], echo: [true], return_token_ids: [true],
  ignore_eos: [true], suffix: ['x'], text: [{format: {type: 'json_object'}}, {format: {type: 'json_schema', name: 'x', schema: {type: 'string'}}}, {format: {type: 'json_schema', name: 'd', schema: deepSchema(300)}}],
  instructions: ['Be brief.', 5], system: ['sys', [{type: 'text', text: 'sys'}], [{type: 'image'}]], metadata: [{user_id: 'u'}], parallel_tool_calls: [false],
}

/** Every place in a body (path of keys) where a value could go. */
function paths(v: Json, prefix: (string | number)[] = []): (string | number)[][] {
  const out: (string | number)[][] = [prefix]
  if (Array.isArray(v)) v.forEach((x, i) => out.push(...paths(x, [...prefix, i])))
  else if (v && typeof v === 'object') for (const [k, x] of Object.entries(v)) out.push(...paths(x, [...prefix, k]))
  return out
}

function mutate(body: {[k: string]: Json}, rand: () => number): {[k: string]: Json} {
  const b = structuredClone(body)
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!
  for (let n = 1 + Math.floor(rand() * 3); n > 0; n--) {
    const op = rand()
    if (op < 0.35) {
      const key = pick(Object.keys(KNOWN))
      b[key] = rand() < 0.6 ? structuredClone(pick(KNOWN[key]!)) : structuredClone(pick(VALUES))
      continue
    }
    const path = pick(paths(b).filter(p => p.length > 0))
    if (!path) continue
    let parent: Json = b
    for (const k of path.slice(0, -1)) parent = (parent as Record<string | number, Json>)[k]!
    const last = path[path.length - 1]!
    const container = parent as Record<string | number, Json>
    if (op < 0.5 && !Array.isArray(parent)) delete container[last]
    else if (op < 0.6 && Array.isArray(parent)) parent.push(structuredClone(pick(VALUES)))
    else container[last] = structuredClone(pick(VALUES))
  }
  return b
}

let server: ServerProcess
let model = ''

t.before(async () => {
  server = await startServe(['--model', await synthFixture('tiny-hybrid', 'q4'), '--max-context', '4K'])
  model = ((await (await fetch(`${server.url}/v1/models`)).json()) as {data: Array<{id: string}>}).data[0]!.id
})
t.teardown(async () => {
  server.child.kill('SIGTERM')
  await server.exited
})

type Route = {url: string; anthropic: boolean; body: () => {[k: string]: Json}}
const ROUTES: Route[] = [
  {url: '/v1/chat/completions', anthropic: false, body: () => ({model, messages: [{role: 'user', content: 'hi'}], max_tokens: 6})},
  {url: '/v1/chat/completions', anthropic: false, body: () => ({model, messages: [{role: 'system', content: 's'}, {role: 'user', content: [{type: 'text', text: 'hi'}]}], max_tokens: 6, tools: KNOWN.tools![1]!})},
  {url: '/v1/responses', anthropic: false, body: () => ({model, input: [{role: 'user', content: [{type: 'input_text', text: 'hi'}]}], max_output_tokens: 6})},
  {url: '/v1/messages', anthropic: true, body: () => ({model, max_tokens: 6, messages: [{role: 'user', content: [{type: 'text', text: 'hi'}]}]})},
  {url: '/v1/completions', anthropic: false, body: () => ({model, prompt: 'hi', max_tokens: 6, logprobs: 2})},
]

t.test(`${ROUNDS} mutated requests: success or a 4xx in the API's own shape, never a 5xx`, async t => {
  const rand = rng(SEED)
  const statuses = new Map<number, number>()
  let failures = 0
  for (let i = 0; i < ROUNDS; i++) {
    const route = ROUTES[i % ROUTES.length]!
    const body = mutate(route.body(), rand)
    const text = JSON.stringify(body)
    const res = await fetch(`${server.url}${route.url}`, {method: 'POST', headers: {'content-type': 'application/json'}, body: text, signal: AbortSignal.timeout(REQUEST_MS)})
    const answer = await res.text()
    statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1)
    const where = `#${i} ${route.url} ${text.slice(0, 300)}`
    if (res.status >= 500) {
      failures++
      t.fail(`${where}: HTTP ${res.status} ${answer.slice(0, 300)}`)
      continue
    }
    if (res.status >= 400) {
      let err: {type?: string; error?: {type?: string; message?: string}} | undefined
      try {
        err = JSON.parse(answer)
      } catch {
        err = undefined
      }
      const shaped = route.anthropic
        ? err?.type === 'error' && typeof err.error?.type === 'string' && typeof err.error.message === 'string'
        : typeof err?.error?.type === 'string' && typeof err.error.message === 'string'
      if (!shaped) {
        failures++
        t.fail(`${where}: HTTP ${res.status} not in the API's error shape: ${answer.slice(0, 300)}`)
      } else if (/\n\s+at |\.[cm]?[jt]s:\d|TypeError|ReferenceError|RangeError|Cannot read propert|is not a function|undefined is not/.test(err!.error!.message!)) {
        failures++
        t.fail(`${where}: the error leaks internals: ${err!.error!.message}`)
      }
    }
    // a streamed answer that started must end with its terminator (the server did not give up half-way)
    if (res.status === 200 && res.headers.get('content-type')?.includes('text/event-stream')) {
      const ended = route.anthropic ? /event: message_stop|event: error/.test(answer) : /data: \[DONE\]|response\.(completed|incomplete|failed)|"type":"error"/.test(answer)
      if (!ended) {
        failures++
        t.fail(`${where}: the stream ended without its terminator: ${answer.slice(-300)}`)
      }
    }
  }
  t.equal(failures, 0, `no 5xx, every error shaped (${[...statuses].map(([s, n]) => `${n}×${s}`).join(', ')})`)
  t.ok((statuses.get(200) ?? 0) > ROUNDS / 10, 'a fair share of the mutated requests were still valid and answered')
  t.ok([...statuses.keys()].some(s => s >= 400 && s < 500), 'and many were refused')

  const health = await fetch(`${server.url}/health`)
  t.equal(health.status, 200, 'the server is still up')
  const metrics = await (await fetch(`${server.url}/metrics`)).text()
  t.match(metrics, /^splash_running_requests 0$/m, 'nothing left running')
  t.match(metrics, /^splash_queue_depth 0$/m, 'nothing left queued')
})
