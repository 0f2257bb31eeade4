// Unit tests of the Messages plugin's pure parts: the SSE encoder / Message builder on hand-written chat
// event sequences, the partial-JSON guard for input_json_delta, and the request translator.
import t from 'tap'
import {MessageBuilder, streamMessage, toolUseId, type SseEvent} from '../../plugins/anthropic-messages/lib/message.js'
import {isJsonPrefix, parseArguments} from '../../plugins/anthropic-messages/lib/json-prefix.js'
import {thinkingOf, toChatRequest, toMessages, toPromptRequest} from '../../plugins/anthropic-messages/lib/translate.js'
import type {MessagesBody} from '../../plugins/anthropic-messages/lib/schema.js'
import type {ChatEvent} from '../../src/chat/chat.js'
import {SplashError, errors} from '../../src/errors.js'
import {anthropicError} from '../../plugins/shared/anthropic-error.js'

const usage = (promptTokens: number, completionTokens: number, cachedTokens = 0): ChatEvent => ({
  type: 'usage',
  usage: {promptTokens, completionTokens, cachedTokens, reasoningTokens: 0},
  tokenIds: [],
})

function run(events: ChatEvent[], promptTokens = 100) {
  const b = new MessageBuilder('m', promptTokens)
  const out: SseEvent[] = [...b.start()]
  for (const e of events) out.push(...b.apply(e))
  out.push(...b.end())
  return {b, out, names: out.map(e => e.event)}
}

const deltaTypes = (out: SseEvent[]) => out.filter(e => e.event === 'content_block_delta').map(e => (e.data.delta as {type: string}).type)

t.test('thinking → text → tool call with streamed arguments', async t => {
  const {b, out, names} = run([
    {type: 'prompt', tokens: 100, promptTokenIds: []},
    {type: 'reasoning', text: 'Let me '},
    {type: 'reasoning', text: 'think.'},
    {type: 'content', text: 'I will look.'},
    {type: 'tool_call_start', index: 0, id: 'call_abc', name: 'get_weather'},
    {type: 'tool_call_arguments', index: 0, delta: '{"city": '},
    {type: 'tool_call_arguments', index: 0, delta: '"Par'},
    {type: 'tool_call_arguments', index: 0, delta: 'is"}'},
    {type: 'tool_call_end', index: 0, arguments: '{"city": "Paris"}', complete: true},
    {type: 'finish', reason: 'tool_calls'},
    usage(100, 20, 60),
  ])
  t.same(names, [
    'message_start',
    'content_block_start', 'content_block_delta', 'content_block_delta', 'content_block_delta', 'content_block_stop',
    'content_block_start', 'content_block_delta', 'content_block_stop',
    'content_block_start', 'content_block_delta', 'content_block_delta', 'content_block_delta', 'content_block_stop',
    'message_delta', 'message_stop',
  ])
  t.same(deltaTypes(out), ['thinking_delta', 'thinking_delta', 'signature_delta', 'text_delta', 'input_json_delta', 'input_json_delta', 'input_json_delta'])
  // Block indices are dense and every start has its stop.
  const starts = out.filter(e => e.event === 'content_block_start').map(e => e.data.index)
  const stops = out.filter(e => e.event === 'content_block_stop').map(e => e.data.index)
  t.same(starts, [0, 1, 2])
  t.same(stops, [0, 1, 2])
  t.same(out[1].data.content_block, {type: 'thinking', thinking: '', signature: ''})
  t.same(out.find(e => e.event === 'content_block_start' && e.data.index === 2)?.data.content_block, {type: 'tool_use', id: 'toolu_abc', name: 'get_weather', input: {}})
  const json = out.filter(e => (e.data.delta as {type?: string})?.type === 'input_json_delta').map(e => (e.data.delta as {partial_json: string}).partial_json)
  t.equal(json.join(''), '{"city": "Paris"}')
  const start = out[0].data.message as {usage: Record<string, number>}
  t.same(start.usage, {input_tokens: 100, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 0})
  const delta = out.find(e => e.event === 'message_delta')!.data
  t.same(delta.delta, {stop_reason: 'tool_use', stop_sequence: null})
  t.same(delta.usage, {input_tokens: 40, cache_creation_input_tokens: 0, cache_read_input_tokens: 60, output_tokens: 20}, 'input_tokens is the uncached part')

  const m = b.message() as {content: Array<Record<string, unknown>>; stop_reason: string; usage: Record<string, number>}
  t.equal(m.stop_reason, 'tool_use')
  t.same(m.content.map(c => c.type), ['thinking', 'text', 'tool_use'])
  t.equal(m.content[0].thinking, 'Let me think.')
  t.type(m.content[0].signature, 'string')
  t.ok((m.content[0].signature as string).length > 0)
  t.same(m.content[2].input, {city: 'Paris'})
  t.equal(m.usage.input_tokens + m.usage.cache_read_input_tokens, 100)
})

t.test('stop reasons', async t => {
  const stopOf = (finish: ChatEvent) => {
    const {b, out} = run([{type: 'content', text: 'x'}, finish, usage(5, 1)])
    return {message: b.message() as {stop_reason: string; stop_sequence: string | null}, delta: out.find(e => e.event === 'message_delta')!.data.delta}
  }
  t.same(stopOf({type: 'finish', reason: 'stop'}).delta, {stop_reason: 'end_turn', stop_sequence: null})
  t.same(stopOf({type: 'finish', reason: 'length'}).delta, {stop_reason: 'max_tokens', stop_sequence: null})
  t.same(stopOf({type: 'finish', reason: 'stop', stop: '###'}).delta, {stop_reason: 'stop_sequence', stop_sequence: '###'})
  t.equal(stopOf({type: 'finish', reason: 'stop', stop: '###'}).message.stop_sequence, '###')
  t.same(stopOf({type: 'finish', reason: 'tool_calls'}).delta, {stop_reason: 'tool_use', stop_sequence: null})
})

t.test('empty output: no blocks, still message_delta and message_stop', async t => {
  const {names, b} = run([{type: 'finish', reason: 'stop'}, usage(3, 1)])
  t.same(names, ['message_start', 'message_delta', 'message_stop'])
  t.same((b.message() as {content: unknown[]}).content, [])
})

t.test('arguments that stop reading as JSON are held back; a cut-off call keeps what parses', async t => {
  const {out, b} = run([
    {type: 'tool_call_start', index: 0, id: 'call_x', name: 'f'},
    {type: 'tool_call_arguments', index: 0, delta: '{"a": 1, '},
    {type: 'tool_call_arguments', index: 0, delta: 'oops}'},
    {type: 'tool_call_end', index: 0, arguments: '{"a": 1, oops}', complete: false},
    {type: 'finish', reason: 'length'},
    usage(5, 5),
  ])
  const json = out.filter(e => (e.data.delta as {type?: string})?.type === 'input_json_delta').map(e => (e.data.delta as {partial_json: string}).partial_json)
  t.same(json, ['{"a": 1, '])
  t.same((b.message() as {content: Array<{input: unknown}>}).content[0].input, {a: 1})
  t.equal(toolUseId('call_q1'), 'toolu_q1')
})

t.test('JSON prefixes', async t => {
  for (const ok of ['', '{', '{"a"', '{"a": ', '{"a": "x', '{"a": "x\\', '{"a": tr', '{"a": [1, 2', '{"a": -', '{"a": 1.', '{"a": {"b": null}, ', '{"a": "\\u00']) {
    t.ok(isJsonPrefix(ok), `prefix: ${ok}`)
  }
  for (const no of ['x', '{a', '{"a": oops', '{"a" 1', '}']) t.notOk(isJsonPrefix(no), `not a prefix: ${no}`)
  t.same(parseArguments('{"a": "x'), {a: 'x'})
  t.same(parseArguments('{"a": [1, {"b": tr'), {a: [1, {b: true}]})
  t.same(parseArguments('garbage'), {})
  t.same(parseArguments('[1]'), {})
})

const chat = {
  efforts: ['none', 'low', 'medium', 'high'],
  thinking: (e?: string) => ({enableThinking: e === 'none' ? false : undefined, budget: {none: 0, low: 1024, medium: 4096, high: 16384}[e ?? 'medium'], effort: e}),
}

t.test('thinking settings map onto reasoning efforts', async t => {
  t.same(thinkingOf(undefined, chat), {effort: 'none'}, 'absent: off, as Anthropic')
  t.same(thinkingOf({type: 'disabled'}, chat), {effort: 'none'})
  t.same(thinkingOf({type: 'adaptive'}, chat), {}, 'adaptive: the package default')
  t.same(thinkingOf({type: 'enabled', budget_tokens: 1024}, chat), {effort: 'low'})
  t.same(thinkingOf({type: 'enabled', budget_tokens: 2000}, chat), {effort: 'medium'})
  t.same(thinkingOf({type: 'enabled', budget_tokens: 100000}, chat), {effort: 'high'}, 'over every budget: the largest')
  t.same(thinkingOf({type: 'disabled'}, {efforts: ['low'], thinking: chat.thinking}), {enableThinking: false})
})

t.test('request translation', async t => {
  const warnings: string[] = []
  const body = {
    model: 'm',
    max_tokens: 100,
    system: [
      {type: 'text', text: 'x-anthropic-billing-header: cc_version=2.1.0; cch=abc;'},
      {type: 'text', text: 'You are Claude Code.', cache_control: {type: 'ephemeral'}},
      {type: 'text', text: 'Be brief.'},
    ],
    messages: [
      {role: 'user', content: 'List files'},
      {
        role: 'assistant',
        content: [
          {type: 'thinking', thinking: 'I should call ls.', signature: 'anything'},
          {type: 'redacted_thinking', data: 'opaque'},
          {type: 'text', text: 'Calling ls.'},
          {type: 'tool_use', id: 'toolu_1', name: 'Bash', input: {command: 'ls'}},
        ],
      },
      {
        role: 'user',
        content: [
          {type: 'tool_result', tool_use_id: 'toolu_1', content: [{type: 'text', text: 'a.txt'}]},
          {type: 'tool_result', tool_use_id: 'toolu_2', content: 'boom', is_error: true},
          {type: 'text', text: 'Now what?', cache_control: {type: 'ephemeral'}},
        ],
      },
    ],
    tools: [
      {name: 'Bash', description: 'Run a command', input_schema: {type: 'object', properties: {command: {type: 'string'}}}},
      {name: 'web_search', type: 'web_search_20250305'},
    ],
    tool_choice: {type: 'any', disable_parallel_tool_use: true},
    thinking: {type: 'enabled', budget_tokens: 4096},
    stop_sequences: ['END'],
    temperature: 0.5,
    top_k: 20,
    metadata: {user_id: 'u'},
  } as unknown as MessagesBody
  const req = toChatRequest(body, chat, new AbortController().signal, m => warnings.push(m))
  t.same(req.messages, [
    {role: 'system', content: 'You are Claude Code.\n\nBe brief.'},
    {role: 'user', content: 'List files'},
    {role: 'assistant', content: 'Calling ls.', reasoning_content: 'I should call ls.', tool_calls: [{id: 'toolu_1', type: 'function', function: {name: 'Bash', arguments: {command: 'ls'}}}]},
    {role: 'tool', tool_call_id: 'toolu_1', content: 'a.txt'},
    {role: 'tool', tool_call_id: 'toolu_2', content: 'Error: boom'},
    {role: 'user', content: 'Now what?'},
  ])
  t.equal(req.tools?.length, 1)
  t.equal(req.tools?.[0].function.name, 'Bash')
  t.match(warnings[0], /web_search_20250305/)
  t.equal(req.toolChoice, 'required')
  t.equal(req.parallelToolCalls, false)
  t.equal(req.effort, 'medium')
  t.same(req.stop, ['END'])
  t.equal(req.maxTokens, 100)
  t.equal(req.sampling.temperature, 0.5)
  t.equal(req.sampling.topK, 20)
  t.same(toPromptRequest({messages: [{role: 'user', content: 'x'}], tool_choice: {type: 'tool', name: 'Bash'}}, chat, () => {}).toolChoice, {name: 'Bash'})
  t.same(toPromptRequest({messages: [{role: 'user', content: 'x'}], tool_choice: {type: 'none'}}, chat, () => {}).toolChoice, 'none')
})

function errorOf(fn: () => unknown): SplashError | undefined {
  try {
    fn()
  } catch (err) {
    if (err instanceof SplashError) return err
    throw err
  }
  return undefined
}

t.test('images and documents become media parts; unsupported sources are refused naming the block', async t => {
  const [image] = toMessages(<MessagesBody>(<unknown>{messages: [{role: 'user', content: [{type: 'text', text: 'see'}, {type: 'image', source: {type: 'base64', media_type: 'image/png', data: 'AAAA'}}]}]}))
  t.match(image.content, [{type: 'text', text: 'see'}, {type: 'image', where: 'messages[0].content[1]'}])
  const [pdf] = toMessages(<MessagesBody>(<unknown>{messages: [{role: 'user', content: [{type: 'document', source: {type: 'base64', media_type: 'application/pdf', data: 'AAAA'}}]}]}))
  t.match(pdf.content, [{type: 'document', mediaType: 'application/pdf', where: 'messages[0].content[0]'}])
  const inResult = () => toMessages(<MessagesBody>(<unknown>{messages: [{role: 'user', content: [{type: 'tool_result', tool_use_id: 't', content: [{type: 'image', source: {}}]}]}]}))
  t.match(errorOf(inResult), {status: 400, message: /content\[0\]\.content\[0\]\.source\.type/})
  const fileSource = () => toMessages(<MessagesBody>(<unknown>{messages: [{role: 'user', content: [{type: 'image', source: {type: 'file', file_id: 'x'}}]}]}))
  t.match(errorOf(fileSource), {status: 400, message: /messages\[0\]\.content\[0\]\.source\.type: sources of type "file"/})
})

t.test('an error mid-stream ends the stream with an error event', async t => {
  async function* failing(): AsyncGenerator<ChatEvent> {
    yield {type: 'content', text: 'partial'}
    throw errors.overloaded(1)
  }
  const b = new MessageBuilder('m', 10)
  const out: SseEvent[] = [...b.start()]
  await streamMessage(failing(), b, events => out.push(...events), err => anthropicError(err as SplashError).body as {error: unknown})
  t.same(out.map(e => e.event), ['message_start', 'content_block_start', 'content_block_delta', 'error'])
  t.same(out[3].data, {type: 'error', error: {type: 'overloaded_error', message: 'The server is busy; retry shortly'}})

  const ok = new MessageBuilder('m', 10)
  const done: SseEvent[] = []
  async function* fine(): AsyncGenerator<ChatEvent> {
    yield {type: 'content', text: 'x'}
    yield {type: 'finish', reason: 'stop'}
  }
  await streamMessage(fine(), ok, events => done.push(...events), () => ({error: null}))
  t.same(done.map(e => e.event), ['content_block_start', 'content_block_delta', 'content_block_stop', 'message_delta', 'message_stop'])
})
