// /v1/responses end to end: the real server on the real engine (a random-weight package, so the text is
// gibberish), talked to with the openai SDK (responses.create, responses.stream) and raw fetch; plus a Codex
// request replayed. Assertions are about wire shapes, event order and usage, which hold whatever the model writes.
import t, {type Test} from 'tap'
import {readFile} from 'node:fs/promises'
import OpenAI from 'openai'
import {startServe, root, type ServerProcess} from '../helpers/cli.js'
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

type Event = {type: string; sequence_number: number; [k: string]: unknown}
const TERMINAL = ['response.completed', 'response.incomplete', 'response.failed']

/** Reads a whole SSE body: `event:` names equal data.type; comments (keepalives) are skipped. */
function parseSse(text: string): Event[] {
  return text
    .split('\n\n')
    .filter(chunk => chunk.trim() !== '' && !chunk.startsWith(':'))
    .map(chunk => {
      const name = /^event: (.+)$/m.exec(chunk)?.[1]
      const data = JSON.parse(/^data: (.+)$/m.exec(chunk)![1]) as Event
      if (name !== data.type) throw new Error(`event ${name} carries ${data.type}`)
      return data
    })
}

/** Invariants Codex and the SDK rely on: the lifecycle order, sequence numbers, items opened and closed in turn. */
function checkStream(t: Test, events: Event[]) {
  t.same(events.slice(0, 2).map(e => e.type), ['response.created', 'response.in_progress'])
  t.same(events.map(e => e.sequence_number), events.map((_, i) => i), 'sequence numbers strictly increasing from 0')
  const terminal = events.filter(e => TERMINAL.includes(e.type))
  t.equal(terminal.length, 1, 'exactly one terminal event')
  t.equal(events[events.length - 1], terminal[0], 'the terminal event is last')
  let open: {index: number; id: string} | undefined
  let next = 0
  for (const e of events) {
    if (e.type === 'response.output_item.added') {
      t.notOk(open, 'an item opens after the previous one is done')
      t.equal(e.output_index, next++)
      open = {index: e.output_index as number, id: (e.item as {id: string}).id}
    } else if (e.type === 'response.output_item.done') {
      t.equal(e.output_index, open?.index)
      t.equal((e.item as {id: string}).id, open?.id)
      open = undefined
    } else if ('item_id' in e) {
      t.equal(e.item_id, open?.id, `${e.type} belongs to the open item`)
    }
  }
  t.notOk(open, 'every item is done')
  const final = terminal[0].response as {output: unknown[]}
  t.same(final.output, events.filter(e => e.type === 'response.output_item.done').map(e => e.item), 'the final output is the done items')
}

t.test('responses.create: Response object, usage', async t => {
  const r = await client.responses.create({model: modelId, input: 'Say hello', max_output_tokens: 200, temperature: 0, reasoning: {effort: 'none'}})
  t.match(r.id, /^resp_/)
  t.equal(r.object, 'response')
  t.equal(r.model, modelId)
  t.ok(['completed', 'incomplete'].includes(r.status!))
  t.type(r.output_text, 'string')
  const u = r.usage!
  t.ok(u.input_tokens > 0)
  t.equal(u.total_tokens, u.input_tokens + u.output_tokens)
  t.type(u.input_tokens_details.cached_tokens, 'number')
  t.type(u.output_tokens_details.reasoning_tokens, 'number')
  for (const item of r.output) t.ok(['message', 'reasoning', 'function_call'].includes(item.type))

  const short = await client.responses.create({model: modelId, input: 'Say hello', max_output_tokens: 3, temperature: 0})
  t.equal(short.status, 'incomplete')
  t.same(short.incomplete_details, {reason: 'max_output_tokens'})
  t.equal(short.usage?.output_tokens, 3)
})

t.test('responses.stream(): event order, sequence numbers, the same response as non-streaming', async t => {
  const body = {model: modelId, input: 'Stream this', max_output_tokens: 40, temperature: 0, reasoning: {effort: 'low' as const}, include: ['reasoning.encrypted_content' as const]}
  const full = await client.responses.create(body)
  const stream = client.responses.stream(body)
  const events: Event[] = []
  for await (const e of stream) events.push(e as unknown as Event)
  const final = await stream.finalResponse()
  checkStream(t, events)
  t.equal(final.id, (events[0].response as {id: string}).id)
  t.equal(final.output_text, full.output_text, 'same text (greedy)')
  t.same(final.output.map(i => i.type), full.output.map(i => i.type))
  // the second request hits the prefix cache: only the cached count differs
  const whole = (u: typeof full.usage) => u && {...u, input_tokens_details: {...u.input_tokens_details, cached_tokens: 0}}
  t.same(whole(final.usage), whole(full.usage))
  t.ok((final.usage?.input_tokens_details.cached_tokens ?? 0) > 0, 'the repeated prompt is read from the cache')
  const reasoning = final.output.find(i => i.type === 'reasoning')
  t.ok(reasoning, 'effort low: a reasoning item')
  t.equal(final.output[0]?.type, 'reasoning', 'reasoning first')
  t.type(reasoning?.encrypted_content, 'string')
  t.ok(events.some(e => e.type === 'response.reasoning_summary_text.delta'))
  t.ok(events.some(e => e.type === 'response.reasoning_text.delta'))

  // Stateless replay (what Codex does with store:false): the output items go back as input.
  const next = await client.responses.create({
    model: modelId, store: false, max_output_tokens: 4, temperature: 0,
    input: [{role: 'user', content: 'Stream this'}, ...(final.output as OpenAI.Responses.ResponseInputItem[]), {role: 'user', content: 'more'}],
  })
  t.ok(next.usage!.input_tokens > full.usage!.input_tokens, 'the replayed turn is in the prompt')
})

t.test('a turn the model ends itself streams to response.completed', async t => {
  const base = {model: modelId, max_output_tokens: 400, temperature: 0, reasoning: {effort: 'none' as const}}
  let input: string | undefined
  let full: OpenAI.Responses.Response | undefined
  for (const candidate of ['Stream this', 'hi', 'Say hello', 'What?', 'ok']) {
    full = await client.responses.create({...base, input: candidate})
    if (full.status === 'completed') {
      input = candidate
      break
    }
  }
  if (!input) return t.pass('the random model ran past 400 tokens on every candidate (greedy)')
  const stream = client.responses.stream({...base, input})
  const events: Event[] = []
  for await (const e of stream) events.push(e as unknown as Event)
  checkStream(t, events)
  t.equal(events[events.length - 1].type, 'response.completed')
  const final = await stream.finalResponse()
  t.equal(final.status, 'completed')
  t.equal(final.incomplete_details, null)
  t.equal(final.output_text, full!.output_text)
  t.same(final.usage && {...final.usage, input_tokens_details: {cached_tokens: 0}}, full!.usage && {...full!.usage, input_tokens_details: {cached_tokens: 0}}, 'same usage, the cached count aside (the second request hits the prefix cache)')
})

t.test('previous_response_id continues a stored conversation; store:false keeps nothing', async t => {
  const first = await client.responses.create({model: modelId, input: 'My name is Ann.', max_output_tokens: 6, temperature: 0})
  const second = await client.responses.create({model: modelId, previous_response_id: first.id, input: 'What is my name?', max_output_tokens: 6, temperature: 0})
  t.equal(second.previous_response_id, first.id)
  t.ok(second.usage!.input_tokens > first.usage!.input_tokens + first.usage!.output_tokens, 'the first turn and its answer are in the prompt')
  const third = await client.responses.create({model: modelId, previous_response_id: second.id, input: 'Again?', max_output_tokens: 2, temperature: 0})
  t.ok(third.usage!.input_tokens > second.usage!.input_tokens + second.usage!.output_tokens, 'chains continue')
  const fetched = await client.responses.retrieve(first.id)
  t.equal(fetched.id, first.id)
  t.same(fetched.output, first.output)

  const unstored = await client.responses.create({model: modelId, input: 'secret', store: false, max_output_tokens: 2})
  const err = await client.responses.create({model: modelId, previous_response_id: unstored.id, input: 'x'}).catch(e => e)
  t.ok(err instanceof OpenAI.NotFoundError)
  t.equal(err.code, 'previous_response_not_found')
  t.equal(err.param, 'previous_response_id')
  t.ok((await client.responses.retrieve(unstored.id).catch(e => e)) instanceof OpenAI.NotFoundError, 'not stored')
  await t.rejects(client.responses.create({model: modelId, previous_response_id: 'resp_unknown', input: 'x'}), {status: 404, code: 'previous_response_not_found'})
})

t.test('inputTokens.count counts the prompt a request runs; delete forgets a stored response', async t => {
  const tools: OpenAI.Responses.Tool[] = [{type: 'function', name: 'shell', description: 'Runs a command', parameters: {type: 'object', properties: {cmd: {type: 'string'}}}, strict: false}]
  const params = {model: modelId, instructions: 'Be brief.', input: 'List the files here.', tools}
  const counted = await client.responses.inputTokens.count(params)
  t.equal(counted.object, 'response.input_tokens')
  const ran = await client.responses.create({...params, max_output_tokens: 4, temperature: 0})
  t.equal(counted.input_tokens, ran.usage!.input_tokens, 'the count is the prompt the request ran')
  // instructions and tools are not carried over by previous_response_id: sent again
  const next = await client.responses.inputTokens.count({...params, previous_response_id: ran.id, input: 'And hidden ones?'})
  t.ok(next.input_tokens > counted.input_tokens, 'previous_response_id counts the stored conversation')

  await client.responses.delete(ran.id)
  t.ok((await client.responses.retrieve(ran.id).catch(e => e)) instanceof OpenAI.NotFoundError, 'gone after delete')
  t.ok((await client.responses.delete(ran.id).catch(e => e)) instanceof OpenAI.NotFoundError, 'a second delete is a 404')
  t.ok((await client.responses.inputTokens.count({model: modelId, previous_response_id: ran.id, input: 'x'}).catch(e => e)) instanceof OpenAI.NotFoundError)
})

t.test('tools: a forced function call and a forced custom (freeform) call, complete in output_item.done', async t => {
  const tools: OpenAI.Responses.Tool[] = [
    {type: 'function', name: 'get_weather', description: 'Weather for a city', parameters: {type: 'object', properties: {city: {type: 'string'}}, required: ['city']}, strict: false},
    {type: 'custom', name: 'apply_patch', description: 'Edit files', format: {type: 'grammar', syntax: 'lark', definition: 'start: /.+/'}},
    {type: 'web_search'},
  ]
  // max_output_tokens holds the shortest call (a smaller one is a 400, forced-tools-budget.test.ts)
  const fn = client.responses.stream({model: modelId, input: 'Weather in Paris?', tools, tool_choice: {type: 'function', name: 'get_weather'}, max_output_tokens: 100})
  const fnEvents: Event[] = []
  for await (const e of fn) fnEvents.push(e as unknown as Event)
  checkStream(t, fnEvents)
  const fnFinal = await fn.finalResponse()
  const call = fnFinal.output.find(i => i.type === 'function_call')
  t.ok(call, 'the forced call is a function_call item')
  if (call?.type === 'function_call') {
    t.equal(call.name, 'get_weather')
    t.match(call.call_id, /^call_/)
    t.type(JSON.parse(call.arguments).city, 'string', 'closed within max_output_tokens: the arguments parse')
    const done = fnEvents.find(e => e.type === 'response.function_call_arguments.done')
    t.equal(done?.arguments, call.arguments)
  }

  const custom = await fetch(`${server.url}/v1/responses`, {
    method: 'POST',
    headers: {'content-type': 'application/json'},
    body: JSON.stringify({model: modelId, input: 'Add a file', tools, tool_choice: {type: 'custom', name: 'apply_patch'}, max_output_tokens: 100, stream: true}),
  })
  const events = parseSse(await custom.text())
  checkStream(t, events)
  const final = events[events.length - 1].response as {output: Array<Record<string, unknown>>; id: string}
  const ctc = final.output.find(i => i.type === 'custom_tool_call')
  t.ok(ctc, 'the forced call is a custom_tool_call item')
  t.notOk(final.output.some(i => i.type === 'function_call'), 'a custom tool is never a function_call')
  t.equal(ctc?.name, 'apply_patch')
  t.type(ctc?.input, 'string')
  t.equal(events.find(e => e.type === 'response.custom_tool_call_input.done')?.input, ctc?.input)

  // Its output on the next turn.
  const next = await client.responses.create({
    model: modelId, previous_response_id: final.id, tools, max_output_tokens: 4,
    input: [{type: 'custom_tool_call_output', call_id: ctc!.call_id as string, output: 'Success. Updated the following files:\nA hello.txt'}],
  })
  t.ok(['completed', 'incomplete'].includes(next.status!))
})

t.test('errors: OpenAI shape; a prompt over the context', async t => {
  const long = 'x'.repeat(30000)
  const tooLong = await client.responses.create({model: modelId, input: long}).catch(e => e)
  t.ok(tooLong instanceof OpenAI.BadRequestError)
  t.equal(tooLong.code, 'context_length_exceeded')
  t.match(tooLong.message, /prompt is too long/)

  const res = await fetch(`${server.url}/v1/responses`, {method: 'POST', headers: {'content-type': 'application/json'}, body: JSON.stringify({model: modelId, input: long, stream: true})})
  t.equal(res.status, 200, 'a stream reports it as response.failed')
  const events = parseSse(await res.text())
  t.same(events.map(e => e.type), ['response.created', 'response.in_progress', 'response.failed'])
  t.match(events[2].response, {status: 'failed', error: {code: 'context_length_exceeded', message: /prompt is too long/}})

  await t.rejects(client.responses.create({model: 'nope/other', input: 'x'}), {status: 404, code: 'model_not_found'})
  await t.rejects(client.responses.create({model: modelId, input: 'x', text: {format: {type: 'json_schema', name: 'x', schema: {type: 'array', uniqueItems: true}}}}), {status: 400, param: 'uniqueItems', message: /uniqueItems/})
  await t.rejects(client.responses.create({model: modelId, input: [{role: 'user', content: [{type: 'input_image', image_url: 'data:image/png;base64,AA', detail: 'auto'}]}]}), {status: 400, message: /input\[0\]\.content\[0\]: this package has no vision encoder.*serve a package that has one/})
  await t.rejects(client.responses.create({model: modelId, input: 'x', reasoning: {effort: 'ultra' as 'high'}}), {status: 400, message: /ultra/})
})

t.test('Codex request (recorded fixture) replayed: a complete, well-formed stream, nothing stored', async t => {
  const fixture = JSON.parse(await readFile(`${root}/test/fixtures/agents/codex-responses.json`, 'utf8')) as {path: string; headers: Record<string, string>; body: Record<string, unknown>}
  const res = await fetch(`${server.url}${fixture.path}`, {
    method: 'POST',
    headers: {...fixture.headers, 'content-type': 'application/json', authorization: 'Bearer unused'},
    body: JSON.stringify({...fixture.body, model: modelId}),
  })
  t.equal(res.status, 200)
  t.match(res.headers.get('content-type'), /^text\/event-stream/)
  const events = parseSse(await res.text())
  checkStream(t, events)
  const last = events[events.length - 1]
  t.ok(['response.completed', 'response.incomplete'].includes(last.type), `ends with ${last.type}`)
  const response = last.response as {id: string; store: boolean; usage: {input_tokens: number}; output: Array<Record<string, unknown>>}
  t.equal(response.store, false)
  t.ok(response.usage.input_tokens > 1000, 'the whole history is in the prompt')
  for (const item of response.output.filter(i => i.type === 'reasoning')) t.type(item.encrypted_content, 'string', 'include: reasoning.encrypted_content')
  await t.rejects(client.responses.retrieve(response.id), {status: 404, message: /not found/}, 'store:false: not kept')
})
