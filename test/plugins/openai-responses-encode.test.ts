// Unit tests of the Responses plugin's pure parts: the stream encoder / Response builder on hand-written chat
// event sequences, the input-item translator (custom tools, reasoning replay) and the response store.
import t from 'tap'
import {ResponseBuilder, streamResponse, type StreamEvent} from '../../plugins/openai-responses/lib/response.js'
import {Conversation, customInput, decodeReasoning, encodeReasoning, toChatRequest, toolChoiceOf, toTools} from '../../plugins/openai-responses/lib/translate.js'
import {ResponseStore} from '../../plugins/openai-responses/lib/store.js'
import type {Item, ResponsesBody} from '../../plugins/openai-responses/lib/schema.js'
import type {ChatEvent} from '../../src/chat/chat.js'
import {SplashError, errors} from '../../src/errors.js'

const usage = (promptTokens: number, completionTokens: number, cachedTokens = 0, reasoningTokens = 0): ChatEvent => ({
  type: 'usage',
  usage: {promptTokens, completionTokens, cachedTokens, reasoningTokens},
  tokenIds: [],
})

function run(events: ChatEvent[], custom: string[] = [], encryptedReasoning = true) {
  const b = new ResponseBuilder({model: 'm', custom: new Set(custom), encryptedReasoning, echo: {store: false}})
  const out: StreamEvent[] = [...b.start()]
  for (const e of events) out.push(...b.apply(e))
  out.push(...b.end())
  return {b, out, types: out.map(e => e.type)}
}

t.test('reasoning → text → function call: event order, ids, sequence numbers, final items', async t => {
  const {b, out, types} = run([
    {type: 'prompt', tokens: 50, promptTokenIds: []},
    {type: 'reasoning', text: 'Think'},
    {type: 'reasoning', text: 'ing.'},
    {type: 'content', text: 'Hello'},
    {type: 'content', text: ' there'},
    {type: 'tool_call_start', index: 0, id: 'call_1', name: 'shell'},
    {type: 'tool_call_arguments', index: 0, delta: '{"cmd": '},
    {type: 'tool_call_arguments', index: 0, delta: '"ls"}'},
    {type: 'tool_call_end', index: 0, arguments: '{"cmd": "ls"}', complete: true},
    {type: 'finish', reason: 'tool_calls'},
    usage(50, 12, 30, 4),
  ])
  t.same(types, [
    'response.created',
    'response.in_progress',
    'response.output_item.added',
    'response.reasoning_summary_part.added',
    'response.content_part.added',
    'response.reasoning_summary_text.delta',
    'response.reasoning_text.delta',
    'response.reasoning_summary_text.delta',
    'response.reasoning_text.delta',
    'response.reasoning_text.done',
    'response.content_part.done',
    'response.reasoning_summary_text.done',
    'response.reasoning_summary_part.done',
    'response.output_item.done',
    'response.output_item.added',
    'response.content_part.added',
    'response.output_text.delta',
    'response.output_text.delta',
    'response.output_text.done',
    'response.content_part.done',
    'response.output_item.done',
    'response.output_item.added',
    'response.function_call_arguments.delta',
    'response.function_call_arguments.delta',
    'response.function_call_arguments.done',
    'response.output_item.done',
    'response.completed',
  ])
  t.same(out.map(e => e.sequence_number), out.map((_, i) => i), 'sequence numbers count up from 0')
  const created = out[0].response as {status: string; id: string; output: unknown[]; usage: unknown}
  t.equal(created.status, 'in_progress')
  t.match(created.id, /^resp_/)
  t.same(created.output, [])
  t.equal(created.usage, null)

  const done = out.filter(e => e.type === 'response.output_item.done').map(e => e.item as Item)
  t.match(done[0], {type: 'reasoning', summary: [{type: 'summary_text', text: 'Thinking.'}], content: [{type: 'reasoning_text', text: 'Thinking.'}]})
  t.equal(decodeReasoning(done[0].encrypted_content), 'Thinking.', 'encrypted_content carries the reasoning')
  t.match(done[0].id, /^rs_/)
  t.match(done[1], {type: 'message', role: 'assistant', status: 'completed', content: [{type: 'output_text', text: 'Hello there', annotations: []}]})
  t.match(done[1].id, /^msg_/)
  t.match(done[2], {type: 'function_call', status: 'completed', call_id: 'call_1', name: 'shell', arguments: '{"cmd": "ls"}'})
  t.match(done[2].id, /^fc_/)
  // Every delta names the item it belongs to.
  for (const e of out.filter(e => e.type.endsWith('.delta'))) t.equal(e.item_id, (out.find(a => a.type === 'response.output_item.added' && a.output_index === e.output_index)!.item as Item).id)

  const final = out[out.length - 1].response as {status: string; output: Item[]; usage: Record<string, unknown>}
  t.equal(final.status, 'completed')
  t.equal(final.output.length, 3)
  t.same(final.usage, {input_tokens: 50, input_tokens_details: {cached_tokens: 30}, output_tokens: 12, output_tokens_details: {reasoning_tokens: 4}, total_tokens: 62})
  t.same(b.response().output, final.output)
})

t.test('a custom tool call comes back as custom_tool_call with the raw input', async t => {
  const patch = '*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch'
  const args = JSON.stringify({input: patch})
  const {out, types} = run(
    [
      {type: 'tool_call_start', index: 0, id: 'call_p', name: 'apply_patch'},
      {type: 'tool_call_arguments', index: 0, delta: args.slice(0, 10)},
      {type: 'tool_call_arguments', index: 0, delta: args.slice(10)},
      {type: 'tool_call_end', index: 0, arguments: args, complete: true},
      {type: 'finish', reason: 'tool_calls'},
      usage(10, 10),
    ],
    ['apply_patch'],
  )
  t.same(types.slice(2), ['response.output_item.added', 'response.custom_tool_call_input.delta', 'response.custom_tool_call_input.done', 'response.output_item.done', 'response.completed'])
  t.match(out[2].item, {type: 'custom_tool_call', call_id: 'call_p', name: 'apply_patch', input: ''})
  const item = out.find(e => e.type === 'response.output_item.done')!.item as Item
  t.match(item, {type: 'custom_tool_call', call_id: 'call_p', name: 'apply_patch', input: patch})
  t.match(item.id, /^ctc_/)

  // Round trip: the call and its output on the next turn become a tool call taking `input` and a tool turn.
  const c = new Conversation(() => {})
  c.add([
    {type: 'message', role: 'user', content: [{type: 'input_text', text: 'add a file'}]},
    item,
    {type: 'custom_tool_call_output', call_id: 'call_p', output: 'Done!'},
  ])
  t.same(c.messages, [
    {role: 'user', content: 'add a file'},
    {role: 'assistant', content: '', tool_calls: [{id: 'call_p', type: 'function', function: {name: 'apply_patch', arguments: {input: patch}}}]},
    {role: 'tool', tool_call_id: 'call_p', content: 'Done!'},
  ])
  t.equal(customInput('not json'), 'not json')
  t.equal(customInput('{"input": "x"}'), 'x')
})

t.test('max_output_tokens → response.incomplete; an error → response.failed', async t => {
  const {out} = run([{type: 'content', text: 'abc'}, {type: 'finish', reason: 'length'}, usage(5, 3)])
  const last = out[out.length - 1]
  t.equal(last.type, 'response.incomplete')
  t.match(last.response, {status: 'incomplete', incomplete_details: {reason: 'max_output_tokens'}})
  t.equal(out.filter(e => e.type === 'response.output_item.done').length, 1, 'the open item is closed first')

  const b = new ResponseBuilder({model: 'm', custom: new Set(), encryptedReasoning: false, echo: {}})
  const events = [...b.start(), ...b.fail(errors.contextLengthExceeded(5000, 4096))]
  t.same(events.map(e => e.type), ['response.created', 'response.in_progress', 'response.failed'])
  t.match(events[2].response, {status: 'failed', error: {code: 'context_length_exceeded', message: /prompt is too long/}})
})

t.test('without include reasoning.encrypted_content the reasoning item has none', async t => {
  const {out} = run([{type: 'reasoning', text: 'r'}, {type: 'finish', reason: 'stop'}, usage(1, 1)], [], false)
  const item = out.find(e => e.type === 'response.output_item.done')!.item as Item
  t.equal(item.encrypted_content, undefined)
})

t.test('input items fold into chat turns', async t => {
  const warnings: string[] = []
  const body = {
    model: 'm',
    instructions: 'You are Codex.',
    input: [
      {type: 'message', role: 'developer', content: [{type: 'input_text', text: 'Sandbox: read-only.'}]},
      {type: 'message', role: 'user', content: [{type: 'input_text', text: 'fix the bug'}]},
      {type: 'reasoning', id: 'rs_1', summary: [{type: 'summary_text', text: 'summary only'}], encrypted_content: encodeReasoning('full reasoning')},
      {type: 'function_call', call_id: 'c1', name: 'shell', arguments: '{"command":["ls"]}'},
      {type: 'function_call_output', call_id: 'c1', output: 'a.py'},
      {type: 'reasoning', id: 'rs_2', summary: [{type: 'summary_text', text: 'from the summary'}], encrypted_content: 'gAAAAB-someone-elses'},
      {type: 'message', role: 'assistant', content: [{type: 'output_text', text: 'Patching.'}]},
      {type: 'custom_tool_call', call_id: 'c2', name: 'apply_patch', input: '*** Begin Patch'},
      {type: 'custom_tool_call_output', call_id: 'c2', output: [{type: 'input_text', text: 'ok'}]},
      {type: 'web_search_call', id: 'ws_1', status: 'completed'},
      {role: 'user', content: 'thanks'},
    ],
    tools: [
      {type: 'function', name: 'shell', description: 'Runs a command', parameters: {type: 'object', properties: {command: {type: 'array'}}}},
      {type: 'custom', name: 'apply_patch', description: 'Edit files.', format: {type: 'grammar', syntax: 'lark', definition: 'start: begin_patch'}},
      {type: 'web_search'},
      {type: 'local_shell'},
    ],
    tool_choice: 'auto',
    parallel_tool_calls: false,
    reasoning: {effort: 'high', summary: 'auto'},
    max_output_tokens: 500,
  } as unknown as ResponsesBody
  const {request, custom} = toChatRequest(body, [], {efforts: ['none', 'low', 'high']}, () => undefined, new AbortController().signal, m => warnings.push(m))
  t.same(request.messages, [
    {role: 'system', content: 'You are Codex.\n\nSandbox: read-only.'},
    {role: 'user', content: 'fix the bug'},
    {role: 'assistant', content: '', reasoning_content: 'full reasoning', tool_calls: [{id: 'c1', type: 'function', function: {name: 'shell', arguments: '{"command":["ls"]}'}}]},
    {role: 'tool', tool_call_id: 'c1', content: 'a.py'},
    {role: 'assistant', content: 'Patching.', reasoning_content: 'from the summary', tool_calls: [{id: 'c2', type: 'function', function: {name: 'apply_patch', arguments: {input: '*** Begin Patch'}}}]},
    {role: 'tool', tool_call_id: 'c2', content: 'ok'},
    {role: 'user', content: 'thanks'},
  ])
  t.same([...custom], ['apply_patch'])
  t.same(request.tools?.map(x => x.function.name), ['shell', 'apply_patch'])
  t.same(request.tools?.[1].function.parameters, {type: 'object', properties: {input: {type: 'string', description: 'The raw input text of this tool'}}, required: ['input']})
  t.match(request.tools?.[1].function.description, /Edit files\.[\s\S]*lark grammar:\nstart: begin_patch/)
  t.equal(warnings.length, 3, 'web_search_call item, web_search and local_shell tools skipped')
  t.equal(request.effort, 'high')
  t.equal(request.parallelToolCalls, false)
  t.equal(request.maxTokens, 500)
  t.equal(request.toolChoice, 'auto')
})

t.test('refusals: files by id, text.format other than text / json_schema / json_object', async t => {
  const attempt = (body: Record<string, unknown>) => {
    try {
      toChatRequest({input: 'x', ...body} as unknown as ResponsesBody, [], {efforts: []}, () => undefined, new AbortController().signal, () => {})
    } catch (err) {
      if (err instanceof SplashError) return err
      throw err
    }
    return undefined
  }
  // images and PDFs are accepted (test/plugins/media.test.ts); files by id or URL are not
  t.equal(attempt({input: [{role: 'user', content: [{type: 'input_image', image_url: 'data:image/png;base64,AA'}]}]}), undefined)
  t.equal(attempt({input: [{role: 'user', content: [{type: 'input_file', filename: 'a.pdf', file_data: 'data:application/pdf;base64,AA'}]}]}), undefined)
  t.match(attempt({input: [{role: 'user', content: [{type: 'input_file', file_id: 'f'}]}]}), {status: 400, message: /input\[0\]\.content\[0\]: input_file needs file_data/})
  t.match(attempt({text: {format: {type: 'regex', pattern: 'a+'}}}), {status: 400, param: 'text.format'})
  t.match(attempt({text: {format: {type: 'json_schema', name: 'x'}}}), {status: 400, param: 'text.format', message: /schema is required/})
  const translated = toChatRequest({input: 'x', text: {format: {type: 'json_schema', name: 'x', strict: true, schema: {type: 'object'}}}} as unknown as ResponsesBody, [], {efforts: []}, () => undefined, new AbortController().signal, () => {})
  t.same(translated.request.responseFormat, {type: 'json_schema', name: 'x', schema: {type: 'object'}})
  const object = toChatRequest({input: 'x', text: {format: {type: 'json_object'}}} as unknown as ResponsesBody, [], {efforts: []}, () => undefined, new AbortController().signal, () => {})
  t.same(object.request.responseFormat, {type: 'json_object'})
  t.match(attempt({input: [{type: 'item_reference', id: 'msg_nope'}]}), {status: 400, message: /msg_nope/})
  t.equal(attempt({text: {format: {type: 'text'}}}), undefined)
  t.same(toolChoiceOf({type: 'function', name: 'f'} as ResponsesBody['tool_choice'], () => {}), {name: 'f'})
  t.same(toolChoiceOf({type: 'custom', name: 'apply_patch'} as ResponsesBody['tool_choice'], () => {}), {name: 'apply_patch'})
  t.equal(toolChoiceOf('required', () => {}), 'required')
  t.equal(toTools(null, () => {}).tools, undefined)
})

t.test('item_reference resolves stored items; the store is a bounded LRU', async t => {
  const store = new ResponseStore(2)
  store.set('resp_a', {items: [{type: 'message', id: 'msg_a', role: 'assistant', content: [{type: 'output_text', text: 'A'}]}], response: {}})
  store.set('resp_b', {items: [], response: {}})
  t.ok(store.get('resp_a'), 'touching a makes b the oldest')
  store.set('resp_c', {items: [], response: {}})
  t.equal(store.size, 2)
  t.equal(store.get('resp_b'), undefined)
  t.ok(store.get('resp_a'))
  const c = new Conversation(() => {}, id => store.findItem(id))
  c.add([{type: 'item_reference', id: 'msg_a'}, {role: 'user', content: 'B'}])
  t.same(c.messages, [{role: 'assistant', content: 'A'}, {role: 'user', content: 'B'}])
})

t.test('an error mid-stream closes the open item and ends with response.failed', async t => {
  async function* failing(): AsyncGenerator<ChatEvent> {
    yield {type: 'content', text: 'partial'}
    throw errors.internal(new Error('boom'))
  }
  const b = new ResponseBuilder({model: 'm', custom: new Set(), encryptedReasoning: false, echo: {}})
  const out: StreamEvent[] = [...b.start()]
  const ok = await streamResponse(failing(), b, events => out.push(...events), err => err as SplashError)
  t.equal(ok, false)
  t.same(out.map(e => e.type).slice(-5), ['response.output_text.delta', 'response.output_text.done', 'response.content_part.done', 'response.output_item.done', 'response.failed'])
  t.match(out[out.length - 1].response, {status: 'failed', error: {code: 'internal_error', message: 'The server had an internal error'}, output: [{type: 'message', status: 'incomplete'}]})
  t.same(out.map(e => e.sequence_number), out.map((_, i) => i))
})
