// Requests a hostile or careless client sends, against the real server on the default package: each is answered
// before any work with a 4xx in the route's own shape and a message that says what to change (or succeeds where
// success is right), and none leaves work behind or reaches the error log.
import t, {type Test} from 'tap'
import {startServe, type ServerProcess} from '../helpers/cli.js'

const DEFAULT = new URL('../../packages/default/', import.meta.url).pathname
let server: ServerProcess
const model = 'splash/default'

t.before(async () => {
  server = await startServe(['--model', DEFAULT, '--no-webui'])
})
t.teardown(async () => {
  server.child.kill('SIGTERM')
  await server.exited
})

interface Answer {
  status: number
  json: {error?: {message?: string; code?: string; type?: string; param?: string}; type?: string; usage?: {prompt_tokens: number}} & Record<string, unknown>
}

async function post(path: string, body: string | Uint8Array, contentType: string | null = 'application/json'): Promise<Answer> {
  const res = await fetch(`${server.url}${path}`, {
    method: 'POST',
    headers: contentType === null ? {} : {'content-type': contentType},
    body: new Blob([body as Uint8Array<ArrayBuffer>]),
  })
  return {status: res.status, json: (await res.json()) as Answer['json']}
}
const json = (path: string, body: unknown) => post(path, JSON.stringify(body))
const message = (a: Answer) => String(a.json.error?.message)

function deep(n: number): unknown {
  let s: unknown = {type: 'integer'}
  for (let i = 0; i < n; i++) s = {type: 'array', items: s}
  return s
}

async function idle(t: Test): Promise<void> {
  const metrics = await (await fetch(`${server.url}/metrics`)).text()
  t.match(metrics, /^splash_running_requests 0$/m, 'nothing left running')
  t.match(metrics, /^splash_queue_depth 0$/m, 'nothing left queued')
}

t.test('a tool schema nested 2,000 levels deep (55 KB): 400 on the nesting, in every API', async t => {
  const schema = {type: 'object', properties: {v: deep(2000)}}
  t.ok(JSON.stringify(schema).length > 50_000)
  const answers = [
    await json('/v1/chat/completions', {model, messages: [{role: 'user', content: 'hi'}], tools: [{type: 'function', function: {name: 'd', parameters: schema}}]}),
    await json('/v1/responses', {model, input: 'hi', tools: [{type: 'function', name: 'd', parameters: schema}]}),
    await json('/v1/messages', {model, max_tokens: 8, messages: [{role: 'user', content: 'hi'}], tools: [{name: 'd', input_schema: schema}]}),
  ]
  for (const a of answers) {
    t.equal(a.status, 400)
    t.match(message(a), /nests arrays and objects more than 128 levels deep; at most 128 are accepted/)
  }
  t.equal(answers[2]!.json.type, 'error', 'Anthropic shape on /v1/messages')
})

t.test('/v1/completions with 300 prompts: 400 before any work, and nothing left running after it', async t => {
  const a = await json('/v1/completions', {model, prompt: Array.from({length: 300}, (_, i) => `p${i}`), max_tokens: 2})
  t.equal(a.status, 400)
  t.match(message(a), /asks for 300 prompts; at most 128 per request/)
  t.equal(a.json.error?.param, 'prompt')
  const n = await json('/v1/completions', {model, prompt: Array.from({length: 10}, (_, i) => `q${i}`), n: 16, max_tokens: 2})
  t.equal(n.status, 400)
  t.match(message(n), /10 prompts × n = 16, 160 generations/)
  await idle(t)
  const next = await json('/v1/chat/completions', {model, messages: [{role: 'user', content: 'hi'}], max_tokens: 2})
  t.equal(next.status, 200)
})

t.test('JSON Schemas that cannot be enforced: 400s that say why, never the grammar engine\'s words', async t => {
  const cases: Array<[unknown, RegExp]> = [
    [{$ref: '#'}, /admits no finite value/],
    [{type: 'bogus'}, /"bogus" is not a JSON Schema type/],
    [{type: 'object', properties: {a: {type: 'integer'}}, required: 'a'}, /"required" .* must be an array of property names/],
  ]
  for (const [schema, why] of cases) {
    const chat = await json('/v1/chat/completions', {model, messages: [{role: 'user', content: 'x'}], max_tokens: 40, response_format: {type: 'json_schema', json_schema: {name: 's', schema}}})
    const responses = await json('/v1/responses', {model, input: 'x', max_output_tokens: 40, text: {format: {type: 'json_schema', name: 's', schema}}})
    for (const a of [chat, responses]) {
      t.equal(a.status, 400, JSON.stringify(schema))
      t.match(message(a), why)
      t.notMatch(message(a), /Aborted|ASSERTIONS|sample\.rows|allows no token/)
    }
  }
})

t.test('tens of megabytes: one repeated character, or one message, refused at once', async t => {
  for (const ch of ['a', '[', '"', '{']) {
    const a = await post('/v1/chat/completions', ch.repeat(40 * 2 ** 20))
    t.equal(a.status, 400, `40 MB of ${ch}`)
    t.match(message(a), /not valid JSON|levels deep/)
  }
  const t0 = performance.now()
  const a = await json('/v1/chat/completions', {model, messages: [{role: 'user', content: 'a '.repeat(20 * 2 ** 20)}], max_tokens: 2})
  t.equal(a.status, 400)
  t.equal(a.json.error?.code, 'context_length_exceeded')
  t.match(message(a), /prompt is too long: the request holds \d+ characters of text, at most \d+ are read in one request/)
  t.ok(performance.now() - t0 < 30_000, 'answered before any tokenizing (not after tens of seconds)')
  await idle(t)
})

t.test('content types and charsets: 415 naming the header, or the body read in the charset it declares', async t => {
  const body = {model, messages: [{role: 'user', content: 'héllo wörld, ça va?'}], max_tokens: 1, temperature: 0}
  const text = JSON.stringify(body)
  const none = await post('/v1/chat/completions', text, null)
  t.equal(none.status, 415)
  t.match(message(none), /no Content-Type: send the body as JSON with the header Content-Type: application\/json/)
  const plain = await post('/v1/chat/completions', text, 'text/plain')
  t.equal(plain.status, 415)
  t.match(message(plain), /Unsupported Content-Type "text\/plain": send the body as JSON with the header Content-Type: application\/json/)
  const anthropic = await post('/v1/messages', JSON.stringify({model, max_tokens: 1, messages: [{role: 'user', content: 'hi'}]}), 'text/plain')
  t.equal(anthropic.status, 415)
  t.equal(anthropic.json.type, 'error')

  const utf8 = await post('/v1/chat/completions', text)
  t.equal(utf8.status, 200)
  const tokens = utf8.json.usage!.prompt_tokens
  const utf16 = await post('/v1/chat/completions', new Uint8Array(Buffer.from(text, 'utf16le')), 'application/json; charset=utf-16le')
  t.equal(utf16.status, 200)
  t.equal(utf16.json.usage?.prompt_tokens, tokens, 'UTF-16: the same prompt')
  const latin = await post('/v1/chat/completions', new Uint8Array(Buffer.from(text, 'latin1')), 'application/json; charset=iso-8859-1')
  t.equal(latin.status, 200)
  t.equal(latin.json.usage?.prompt_tokens, tokens, 'ISO-8859-1: the same prompt')
  const misread = await post('/v1/chat/completions', new Uint8Array(Buffer.from(text, 'latin1')), 'application/json')
  t.equal(misread.status, 400, 'Latin-1 bytes sent as UTF-8')
  t.match(message(misread), /not valid text in the charset/)
  const unknown = await post('/v1/chat/completions', text, 'application/json; charset=x-unknown')
  t.equal(unknown.status, 415)
  t.match(message(unknown), /Unsupported charset "x-unknown"/)
})

t.test('Responses with an empty input list: 400', async t => {
  const a = await json('/v1/responses', {model, input: [], max_output_tokens: 4})
  t.equal(a.status, 400)
  t.equal(a.json.error?.param, 'input')
})

t.test('none of it reached the error log or the server-error count', async t => {
  t.notMatch(server.output(), /"level":50/, 'no error-level line')
  const metrics = await (await fetch(`${server.url}/metrics`)).text()
  t.notMatch(metrics, /^splash_server_errors_total\{/m)
  t.equal((await fetch(`${server.url}/health`)).status, 200)
})
