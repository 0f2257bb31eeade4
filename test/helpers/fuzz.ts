// The request fuzzer: bodies for every route of the server, built from valid ones by a seeded generator (so a
// failure replays): values of the wrong type, out of range, odd strings, missing and unknown keys, bad content parts
// and tool definitions; and raw bodies: malformed and truncated JSON, other content types or none, other charsets
// (declared or not), nesting past the limit, oversized strings, the wrong top-level type. Every answer must be a
// success or a 4xx in the calling API's own shape with a message free of internals, never a 5xx; a stream that
// starts must end with its terminator. test/server/fuzz.test.ts runs ~1,000 of them in the suite; bench/fuzz.ts
// runs 10,000 or more and writes the figures.

/** mulberry32: a small seeded generator. */
export function rng(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let x = Math.imul(a ^ (a >>> 15), 1 | a)
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296
  }
}

export type Json = null | boolean | number | string | Json[] | {[k: string]: Json}

export const VALUES: Json[] = [
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
export function deepSchema(depth: number): Json {
  let s: Json = {type: 'integer'}
  for (let i = 0; i < depth; i++) s = {type: 'array', items: s}
  return s
}
const ODD_NAMES: Json = {type: 'object', properties: {'a"b': {type: 'integer'}, 'tab\tc\\': {type: 'boolean'}}, required: ['a"b', 'tab\tc\\']}

/** Optional fields the APIs know, with values from the pool or their own odd ones. */
export const KNOWN: Record<string, Json[]> = {
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

export function mutate(body: {[k: string]: Json}, rand: () => number): {[k: string]: Json} {
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


export interface Route {
  method: 'GET' | 'POST' | 'DELETE'
  url: string
  anthropic: boolean
  /** A valid body (POST), mutated by the fuzzer. */
  body?: () => {[k: string]: Json}
}

/** Every route the server has, with a valid body for each POST. */
export function routes(model: string): Route[] {
  const chat = (): {[k: string]: Json} => ({model, messages: [{role: 'user', content: 'hi'}], max_tokens: 6})
  const post = (url: string, body: () => {[k: string]: Json}, anthropic = false): Route => ({method: 'POST', url, anthropic, body})
  return [
    post('/v1/chat/completions', chat),
    post('/v1/chat/completions', () => ({model, messages: [{role: 'system', content: 's'}, {role: 'user', content: [{type: 'text', text: 'hi'}]}], max_tokens: 6, tools: KNOWN.tools![1]!})),
    post('/v1/chat/completions', () => ({...chat(), stream: true, response_format: {type: 'json_schema', json_schema: {name: 'o', schema: {type: 'object', properties: {a: {type: 'integer'}}, required: ['a']}}}})),
    post('/v1/responses', () => ({model, input: [{role: 'user', content: [{type: 'input_text', text: 'hi'}]}], max_output_tokens: 6})),
    post('/v1/responses/input_tokens', () => ({model, input: 'hi', instructions: 'Be brief.'})),
    post('/v1/messages', () => ({model, max_tokens: 6, messages: [{role: 'user', content: [{type: 'text', text: 'hi'}]}]}), true),
    post('/v1/messages/count_tokens', () => ({model, messages: [{role: 'user', content: 'hi'}], system: 'sys'}), true),
    post('/v1/completions', () => ({model, prompt: 'hi', max_tokens: 6, logprobs: 2})),
    post('/v1/completions', () => ({model, prompt: ['a', 'b'], max_tokens: 4, n: 2, stream: true})),
    post('/tokenize', () => ({model, prompt: 'hi there', with_pieces: true})),
    post('/tokenize', () => ({model, messages: [{role: 'user', content: 'hi'}]})),
    post('/detokenize', () => ({model, tokens: [1, 2, 3]})),
    post('/apply-template', () => ({model, messages: [{role: 'user', content: 'hi'}], add_generation_prompt: true})),
    {method: 'GET', url: '/v1/models', anthropic: false},
    {method: 'GET', url: `/v1/models/${encodeURIComponent(model)}`, anthropic: false},
    {method: 'GET', url: '/health', anthropic: false},
    {method: 'GET', url: '/ready', anthropic: false},
    {method: 'GET', url: '/metrics', anthropic: false},
    {method: 'GET', url: '/v1/responses/resp_nope', anthropic: false},
    {method: 'DELETE', url: '/v1/responses/resp_nope', anthropic: false},
    {method: 'GET', url: '/', anthropic: false},
    {method: 'GET', url: '/v1/nope?x=%zz', anthropic: false},
  ]
}

/** A request as it goes out: headers and bytes (a raw body may be anything). */
export interface Shot {
  route: Route
  headers: Record<string, string>
  body?: Uint8Array
  /** What the fuzzer did, for the failure message. */
  what: string
}

const enc = new TextEncoder()
const nest = (n: number) => '['.repeat(n) + ']'.repeat(n)

/** Raw bodies: the bytes or the headers are what is wrong, not the fields. */
function raw(text: string, rand: () => number): {headers: Record<string, string>; body: Uint8Array; what: string} {
  const json = {'content-type': 'application/json'}
  const cases: Array<() => {headers: Record<string, string>; body: Uint8Array; what: string}> = [
    () => ({headers: json, body: enc.encode(text.slice(0, Math.floor(rand() * text.length))), what: 'truncated'}),
    () => ({headers: json, body: enc.encode(text + '}garbage'), what: 'trailing garbage'}),
    () => ({headers: json, body: enc.encode('\ufeff' + text), what: 'BOM'}),
    () => ({headers: json, body: enc.encode(text.replace(':', ':\u0000')), what: 'NUL'}),
    () => ({headers: {'content-type': 'text/plain'}, body: enc.encode(text), what: 'text/plain'}),
    () => ({headers: {'content-type': 'application/x-www-form-urlencoded'}, body: enc.encode(`a=${encodeURIComponent(text)}`), what: 'form'}),
    () => ({headers: {}, body: enc.encode(text), what: 'no content-type'}),
    () => ({headers: {'content-type': 'application/json; charset=utf-16le'}, body: new Uint8Array(Buffer.from(text, 'utf16le')), what: 'utf-16le declared'}),
    () => ({headers: {'content-type': 'application/json; charset=utf-16'}, body: enc.encode(text), what: 'utf-16 declared, utf-8 sent'}),
    () => ({headers: {'content-type': 'application/json'}, body: new Uint8Array(Buffer.from(text, 'utf16le')), what: 'utf-16 sent as utf-8'}),
    () => ({headers: {'content-type': 'application/json; charset=iso-8859-1'}, body: new Uint8Array(Buffer.from(text.replace('hi', 'hé'), 'latin1')), what: 'latin-1'}),
    () => ({headers: {'content-type': 'application/json; charset=ebcdic-x'}, body: enc.encode(text), what: 'unknown charset'}),
    () => ({headers: {'content-type': 'application/json'}, body: new Uint8Array([0xc3, 0x28, 0xff, 0xfe, 0x7b]), what: 'invalid utf-8'}),
    () => ({headers: json, body: enc.encode(`{"model":"x","messages":${nest(200 + Math.floor(rand() * 20_000))}}`), what: 'deep nesting'}),
    () => ({headers: json, body: enc.encode(JSON.stringify({model: 'x', messages: [{role: 'user', content: 'a'.repeat(2 ** 20 + Math.floor(rand() * 5 * 2 ** 20))}]})), what: 'megabytes of text'}),
    () => ({headers: json, body: enc.encode(['[]', '1', '"x"', 'null', 'true', '{}', '[{"model":1}]'][Math.floor(rand() * 7)]!), what: 'top-level type'}),
    () => ({headers: json, body: enc.encode(`{${Array.from({length: 20_000}, (_, i) => `"k${i}":${i}`).join(',')}}`), what: 'many keys'}),
    () => ({headers: json, body: enc.encode(JSON.stringify({model: 'x', prompt: Array.from({length: 300}, (_, i) => `p${i}`), max_tokens: 2})), what: '300 prompts'}),
    () => ({headers: json, body: new Uint8Array(0), what: 'empty body'}),
  ]
  return cases[Math.floor(rand() * cases.length)]!()
}

/** Shot `i` of a run: a mutated body most of the time, a raw one a fifth of the time. */
export function shot(i: number, all: Route[], rand: () => number): Shot {
  const route = all[i % all.length]!
  if (!route.body) return {route, headers: {}, what: route.method}
  // now and then a body over the 64 MiB limit
  if (i % 500 === 250) return {route, headers: {'content-type': 'application/json'}, body: enc.encode(`{"model":"x","messages":"${'a'.repeat(65 * 2 ** 20)}"}`), what: 'over 64 MiB'}
  const text = JSON.stringify(mutate(route.body(), rand))
  if (rand() < 0.2) {
    const r = raw(text, rand)
    return {route, headers: r.headers, body: r.body, what: `${r.what}: ${text.slice(0, 200)}`}
  }
  return {route, headers: {'content-type': 'application/json'}, body: enc.encode(text), what: text.slice(0, 300)}
}

export interface FuzzResult {
  statuses: Map<number, number>
  failures: string[]
  /** Requests per route. */
  byRoute: Map<string, number>
}

const LEAK = /\n\s+at |\.[cm]?[jt]s:\d|TypeError|ReferenceError|RangeError|Cannot read propert|is not a function|undefined is not|Aborted\(\)|ASSERTIONS|sample\.rows/

/** Sends `rounds` shots from `seed` to the server at `url` and checks every answer. */
export async function fuzz(url: string, model: string, rounds: number, seed: number, requestMs = 60_000): Promise<FuzzResult> {
  const rand = rng(seed)
  const all = routes(model)
  const statuses = new Map<number, number>()
  const byRoute = new Map<string, number>()
  const failures: string[] = []
  for (let i = 0; i < rounds; i++) {
    const s = shot(i, all, rand)
    const key = `${s.route.method} ${s.route.url}`
    byRoute.set(key, (byRoute.get(key) ?? 0) + 1)
    const where = `#${i} ${key} ${s.what}`
    let res: Response
    let answer: string
    try {
      // a Blob without a type: fetch sends no Content-Type for it
      const body = s.body === undefined ? undefined : new Blob([s.body as Uint8Array<ArrayBuffer>])
      res = await fetch(`${url}${s.route.url}`, {method: s.route.method, headers: s.headers, body, signal: AbortSignal.timeout(requestMs)})
      answer = await res.text()
    } catch (err) {
      // a body over the limit is answered 413 and the connection closed while the client may still be sending it;
      // the server must still be up
      if (s.what === 'over 64 MiB' && (await fetch(`${url}/health`).then(h => h.status === 200, () => false))) {
        statuses.set(413, (statuses.get(413) ?? 0) + 1)
        continue
      }
      failures.push(`${where}: no answer (${(err as Error).message})`)
      continue
    }
    statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1)
    if (res.status >= 500) {
      failures.push(`${where}: HTTP ${res.status} ${answer.slice(0, 300)}`)
      continue
    }
    if (res.status >= 400) {
      let err: {type?: string; error?: {type?: string; message?: string}} | undefined
      try {
        err = JSON.parse(answer)
      } catch {
        err = undefined
      }
      const shaped = s.route.anthropic
        ? err?.type === 'error' && typeof err.error?.type === 'string' && typeof err.error.message === 'string'
        : typeof err?.error?.type === 'string' && typeof err.error.message === 'string'
      if (!shaped) failures.push(`${where}: HTTP ${res.status} not in the API's error shape: ${answer.slice(0, 300)}`)
      else if (LEAK.test(err!.error!.message!)) failures.push(`${where}: the error leaks internals: ${err!.error!.message}`)
    }
    // a streamed answer that started must end with its terminator (the server did not give up half-way)
    if (res.status === 200 && res.headers.get('content-type')?.includes('text/event-stream')) {
      const ended = s.route.anthropic ? /event: message_stop|event: error/.test(answer) : /data: \[DONE\]|response\.(completed|incomplete|failed)|"type":"error"|^data: \{"error":/m.test(answer)
      if (!ended) failures.push(`${where}: the stream ended without its terminator: ${answer.slice(-300)}`)
    }
  }
  return {statuses, failures, byRoute}
}
