// /v1/messages end to end: the real server on the real engine (a random-weight package, so the text is
// gibberish), talked to with @anthropic-ai/sdk and with raw fetch; plus a Claude Code request replayed.
// Assertions are about wire shapes, event order and usage, which hold whatever the model writes.
import t, {type Test} from 'tap'
import {readFile} from 'node:fs/promises'
import Anthropic from '@anthropic-ai/sdk'
import {startServe, root, type ServerProcess} from '../helpers/cli.js'
import {synthFixture} from '../helpers/packages.js'

let server: ServerProcess
let client: Anthropic
let modelId: string

t.before(async () => {
  const dir = await synthFixture('tiny-hybrid', 'q4')
  server = await startServe(['--model', dir])
  client = new Anthropic({baseURL: server.url, apiKey: 'unused', maxRetries: 0})
  modelId = ((await (await fetch(`${server.url}/v1/models`)).json()) as {data: Array<{id: string}>}).data[0].id
})
t.teardown(async () => {
  server.child.kill('SIGTERM')
  await server.exited
})

interface Sse {
  event: string
  data: Record<string, unknown>
}

/** Reads a whole SSE body; every data line must have its event line. */
function parseSse(text: string): Sse[] {
  return text
    .split('\n\n')
    .filter(chunk => chunk.trim() !== '' && !chunk.startsWith(':'))
    .map(chunk => {
      const event = /^event: (.+)$/m.exec(chunk)?.[1]
      const data = /^data: (.+)$/m.exec(chunk)?.[1]
      if (!event || !data) throw new Error(`SSE chunk without event or data line: ${chunk}`)
      return {event, data: JSON.parse(data) as Record<string, unknown>}
    })
}

const DELTA_FOR: Record<string, string[]> = {thinking: ['thinking_delta', 'signature_delta'], text: ['text_delta'], tool_use: ['input_json_delta']}

/** The invariants Anthropic clients rely on: order, dense block indices, deltas matching their block. */
function checkStream(t: Test, events: Sse[]) {
  const names = events.map(e => e.event).filter(n => n !== 'ping')
  t.equal(names[0], 'message_start', 'message_start first')
  t.same(names.slice(-2), ['message_delta', 'message_stop'], 'message_delta then message_stop last')
  for (const e of events) t.equal(e.data.type, e.event, `data.type matches the event name (${e.event})`)
  let open: {index: number; type: string} | undefined
  let next = 0
  let lastDelta: string | undefined
  for (const e of events) {
    if (e.event === 'content_block_start') {
      t.notOk(open, 'a block starts only after the previous one stopped')
      t.equal(e.data.index, next++, 'block indices are dense')
      open = {index: e.data.index as number, type: (e.data.content_block as {type: string}).type}
      lastDelta = undefined
    } else if (e.event === 'content_block_delta') {
      t.equal(e.data.index, open?.index, 'a delta belongs to the open block')
      const type = (e.data.delta as {type: string}).type
      t.ok(DELTA_FOR[open!.type].includes(type), `${type} in a ${open!.type} block`)
      lastDelta = type
    } else if (e.event === 'content_block_stop') {
      t.equal(e.data.index, open?.index)
      if (open?.type === 'thinking') t.equal(lastDelta, 'signature_delta', 'a thinking block ends with its signature')
      open = undefined
    }
  }
  t.notOk(open, 'every block stopped')
}

const user = (content: string) => [{role: 'user' as const, content}]
/** Sampling fields the SDK's types no longer list but the API (and this server) still take. */
type Params = Anthropic.MessageCreateParamsNonStreaming
const params = (p: Params & {temperature?: number; top_p?: number; top_k?: number}) => p as Params

t.test('non-streaming Message: shape, stop reason, usage that matches count_tokens', async t => {
  const r = await client.messages.create(params({model: modelId, max_tokens: 12, messages: user('Say hello'), temperature: 0}))
  t.match(r.id, /^msg_/)
  t.equal(r.type, 'message')
  t.equal(r.role, 'assistant')
  t.equal(r.model, modelId)
  t.ok(['end_turn', 'max_tokens'].includes(r.stop_reason!))
  t.equal(r.stop_sequence, null)
  t.ok(r.usage.output_tokens <= 12)
  t.notOk(r.content.some(b => b.type === 'thinking'), 'no thinking unless asked (Anthropic default)')
  const count = await client.messages.countTokens({model: modelId, messages: user('Say hello')})
  t.ok(count.input_tokens > 0)
  t.equal(r.usage.input_tokens + (r.usage.cache_read_input_tokens ?? 0) + (r.usage.cache_creation_input_tokens ?? 0), count.input_tokens, 'input + cache read = the rendered prompt')
})

t.test('messages.stream().finalMessage(): event order, and the same message as non-streaming', async t => {
  const body = params({model: modelId, max_tokens: 40, messages: user('Stream this'), temperature: 0, thinking: {type: 'enabled', budget_tokens: 1024}})
  const full = await client.messages.create(body)
  const events: Sse[] = []
  const stream = client.messages.stream(body)
  stream.on('streamEvent', e => events.push({event: e.type, data: e as unknown as Record<string, unknown>}))
  const final = await stream.finalMessage()
  checkStream(t, events)
  t.equal(final.content[0]?.type, 'thinking', 'thinking enabled: the thinking block comes first')
  t.same(final.content, full.content, 'streamed and non-streamed content agree (greedy)')
  t.equal(final.stop_reason, full.stop_reason)
  // the second request hits the prefix cache: the same prompt, split differently between input and cache reads
  const whole = (u: typeof full.usage) => ({...u, input_tokens: u.input_tokens + (u.cache_read_input_tokens ?? 0), cache_read_input_tokens: 0})
  t.same(whole(final.usage), whole(full.usage))
  t.ok((final.usage.cache_read_input_tokens ?? 0) > 0, 'the repeated prompt is read from the cache')
})

t.test('raw SSE: event lines, a ping after message_start, usage in message_start and message_delta', async t => {
  const res = await fetch(`${server.url}/v1/messages?beta=true`, {
    method: 'POST',
    headers: {'content-type': 'application/json', 'anthropic-version': '2023-06-01', 'anthropic-beta': 'interleaved-thinking-2025-05-14'},
    body: JSON.stringify({model: modelId, max_tokens: 10, messages: user('hi'), stream: true}),
  })
  t.equal(res.status, 200)
  t.match(res.headers.get('content-type'), /^text\/event-stream/)
  const events = parseSse(await res.text())
  checkStream(t, events)
  t.same(events.slice(0, 2).map(e => e.event), ['message_start', 'ping'])
  const start = events[0].data.message as {usage: Record<string, number>; content: unknown[]; stop_reason: null}
  t.same(start.content, [])
  t.equal(start.stop_reason, null)
  t.same(Object.keys(start.usage).sort(), ['cache_creation_input_tokens', 'cache_read_input_tokens', 'input_tokens', 'output_tokens'])
  const delta = events.find(e => e.event === 'message_delta')!.data as {usage: Record<string, number>; delta: {stop_reason: string}}
  t.equal(delta.usage.input_tokens + delta.usage.cache_read_input_tokens, start.usage.input_tokens)
  t.ok(delta.usage.output_tokens <= 10)
  t.ok(['end_turn', 'max_tokens'].includes(delta.delta.stop_reason))
})

t.test('stop_sequences: stop_reason stop_sequence with the sequence that matched', async t => {
  const base = params({model: modelId, max_tokens: 30, messages: user('Count'), temperature: 0})
  const text = (await client.messages.create(base)).content.map(b => (b.type === 'text' ? b.text : '')).join('')
  const k = [...Array(Math.max(0, text.length - 3)).keys()].find(i => i > 0 && text.indexOf(text.slice(i, i + 3)) === i && text.slice(i, i + 3).trim().length === 3)
  if (k === undefined) return t.pass(`no usable stop sequence in ${JSON.stringify(text)}`)
  const stop = text.slice(k, k + 3)
  const r = await client.messages.create({...base, stop_sequences: [stop]})
  t.equal(r.stop_reason, 'stop_sequence')
  t.equal(r.stop_sequence, stop)
  t.equal(r.content.map(b => (b.type === 'text' ? b.text : '')).join(''), text.slice(0, k))
})

t.test('a named tool: tool_use, in order, without thinking, closed within max_tokens', async t => {
  const tools = [
    {name: 'get_weather', description: 'Weather for a city', input_schema: {type: 'object' as const, properties: {city: {type: 'string'}}, required: ['city']}},
    {name: 'web_search', type: 'web_search_20250305' as const, max_uses: 1},
  ]
  const events: Sse[] = []
  const stream = client.messages.stream({
    // max_tokens holds the shortest call (a smaller one is a 400, forced-tools-budget.test.ts)
    model: modelId, max_tokens: 100, messages: user('Weather in Paris?'), tools: tools as Anthropic.Messages.ToolUnion[],
    tool_choice: {type: 'tool', name: 'get_weather', disable_parallel_tool_use: true}, thinking: {type: 'enabled', budget_tokens: 2048},
  })
  stream.on('streamEvent', e => events.push({event: e.type, data: e as unknown as Record<string, unknown>}))
  const final = await stream.finalMessage()
  checkStream(t, events)
  t.notOk(final.content.some(b => b.type === 'thinking'), 'a forced call starts at once')
  const calls = final.content.filter(b => b.type === 'tool_use')
  t.equal(calls.length, 1, 'disable_parallel_tool_use: one call')
  for (const c of calls) {
    t.match(c.id, /^toolu_/)
    t.equal(c.name, 'get_weather')
    t.type((c.input as {city?: unknown}).city, 'string')
  }
  t.ok(['tool_use', 'max_tokens'].includes(final.stop_reason!))
})

t.test('a conversation with thinking, tool_use and tool_result blocks (any signature) is accepted', async t => {
  const r = await client.messages.create(params({
    model: modelId,
    max_tokens: 8,
    system: [{type: 'text', text: 'You are terse.', cache_control: {type: 'ephemeral'}}],
    tools: [{name: 'ls', input_schema: {type: 'object', properties: {}}}],
    messages: [
      {role: 'user', content: 'list'},
      {
        role: 'assistant',
        content: [
          {type: 'thinking', thinking: 'call ls', signature: 'not-a-real-signature'},
          {type: 'redacted_thinking', data: 'opaque'},
          {type: 'tool_use', id: 'toolu_1', name: 'ls', input: {}},
        ],
      },
      {role: 'user', content: [{type: 'tool_result', tool_use_id: 'toolu_1', content: [{type: 'text', text: 'a.txt'}], is_error: false}]},
    ],
    metadata: {user_id: 'u1'},
    top_p: 0.9,
    top_k: 20,
  }))
  t.equal(r.type, 'message')
})

t.test('errors: Anthropic shape, SDK error classes, Anthropic wording', async t => {
  t.ok((await client.post('/v1/no-such-route', {body: {}}).catch(e => e)) instanceof Anthropic.NotFoundError, 'unknown route: NotFoundError')
  const wrongModel = await client.messages.create({model: 'claude-nope', max_tokens: 4, messages: user('x')}).catch(e => e)
  t.ok(wrongModel instanceof Anthropic.NotFoundError)
  t.equal(wrongModel.error?.type, 'error')
  t.equal(wrongModel.error?.error?.type, 'not_found_error')
  t.ok(wrongModel.requestID, 'request-id header')
  const tooLong = await client.messages.create({model: modelId, max_tokens: 4, messages: user('x'.repeat(30000))}).catch(e => e)
  t.ok(tooLong instanceof Anthropic.BadRequestError)
  t.match(tooLong.message, /prompt is too long: \d+ tokens > \d+ maximum/)
  t.equal(tooLong.error?.error?.type, 'invalid_request_error')
  const tooLongCount = await client.messages.countTokens({model: modelId, messages: user('x'.repeat(30000))})
  t.ok(tooLongCount.input_tokens > 4096, 'count_tokens counts past the context')
  const noMax = await client.post('/v1/messages', {body: {model: modelId, messages: user('x')}}).catch(e => e)
  t.ok(noMax instanceof Anthropic.BadRequestError, 'max_tokens is required')
  const image = await client.messages
    .create({model: modelId, max_tokens: 4, messages: [{role: 'user', content: [{type: 'image', source: {type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo='}}]}]})
    .catch(e => e)
  t.ok(image instanceof Anthropic.BadRequestError)
  t.match(image.message, /messages\[0\]\.content\[0\]: this package has no vision encoder, so it does not accept images; to send images, serve a package that has one/)
  const pdf = await client.messages
    .create({model: modelId, max_tokens: 4, messages: [{role: 'user', content: [{type: 'document', source: {type: 'base64', media_type: 'application/pdf', data: 'JVBERi0='}}]}]})
    .catch(e => e)
  t.ok(pdf instanceof Anthropic.BadRequestError)
  t.match(pdf.message, /messages\[0\]\.content\[0\]: the PDF (is malformed|could not be read)/, 'PDFs are read on any model; this one is only a header')
})

t.test('Claude Code request (recorded fixture) replayed: a complete, well-formed stream', async t => {
  const fixture = JSON.parse(await readFile(`${root}/test/fixtures/agents/claude-code-messages.json`, 'utf8')) as {path: string; headers: Record<string, string>; body: Record<string, unknown>}
  const body = {...fixture.body, model: modelId}
  const headers = {...fixture.headers, 'content-type': 'application/json', authorization: 'Bearer unused'}
  const count = await fetch(`${server.url}/v1/messages/count_tokens?beta=true`, {method: 'POST', headers, body: JSON.stringify({...body, max_tokens: undefined, stream: undefined})})
  t.equal(count.status, 200)
  const {input_tokens} = (await count.json()) as {input_tokens: number}
  const res = await fetch(`${server.url}${fixture.path}`, {method: 'POST', headers, body: JSON.stringify(body)})
  t.equal(res.status, 200)
  const events = parseSse(await res.text())
  checkStream(t, events)
  t.equal(events.filter(e => e.event === 'message_stop').length, 1)
  const delta = events.find(e => e.event === 'message_delta')!.data as {usage: Record<string, number>; delta: {stop_reason: string}}
  t.equal(delta.usage.input_tokens + delta.usage.cache_read_input_tokens, input_tokens, 'usage agrees with count_tokens')
  t.ok(['end_turn', 'max_tokens', 'tool_use'].includes(delta.delta.stop_reason))
  const first = events.find(e => e.event === 'content_block_start')?.data.content_block as {type: string} | undefined
  if (first) t.equal(first.type, 'thinking', 'thinking enabled: the first block is thinking')
})
