// The chat template and its renderer: wire-ish inputs normalised, thinking on/off, tool results grouped,
// reasoning round trip, and tool calls that the XML parser reads back as they were sent.
import t from 'tap'
import {ChatTemplate, normaliseMessage, type ToolDefinition} from '../../../models/qwen3_5/template.js'
import {XmlToolCallParser} from '../../../models/qwen3_5/tool-parser-xml.js'
import {OutputParser} from '../../../models/qwen3_5/output.js'
import {promptOpensThinking} from '../../../models/qwen3_5/reasoning.js'

const template = await ChatTemplate.load(new URL('../../../models/qwen3_5/chat_template.jinja', import.meta.url).pathname)
const tools: ToolDefinition[] = [
  {
    type: 'function',
    function: {
      name: 'edit',
      parameters: {type: 'object', properties: {path: {type: 'string'}, text: {type: 'string'}, line: {type: 'integer'}, opts: {type: 'object'}, dry: {type: 'boolean'}}},
    },
  },
]

t.test('normaliseMessage parses JSON arguments and folds `reasoning` into reasoning_content', async t => {
  const m = normaliseMessage({
    role: 'assistant',
    content: null,
    reasoning: 'why',
    tool_calls: [{id: 'x', type: 'function', function: {name: 'edit', arguments: '{"path": "a"}'}}, {function: {name: 'edit', arguments: 'not json'}}],
  })
  t.equal(m.reasoning_content, 'why')
  t.notOk('reasoning' in m)
  t.same(m.tool_calls!.map(c => c.function.arguments), [{path: 'a'}, 'not json'])
  t.notOk('reasoning_content' in normaliseMessage({role: 'user', content: 'x'}))
})

t.test('generation prompt: thinking on by default, empty think block when off', async t => {
  const msgs = [{role: 'user' as const, content: 'hi'}]
  t.ok(template.render(msgs).endsWith('<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n'))
  t.ok(template.render(msgs, {enableThinking: true}).endsWith('<|im_start|>assistant\n<think>\n'))
  t.ok(template.render(msgs, {enableThinking: false}).endsWith('<|im_start|>assistant\n<think>\n\n</think>\n\n'))
  t.notOk(template.render(msgs, {addGenerationPrompt: false}).includes('assistant'))
  t.ok(promptOpensThinking(template.render(msgs)))
  t.notOk(promptOpensThinking(template.render(msgs, {enableThinking: false})))
})

t.test('tool results are grouped into one user turn; reasoning kept only after the last query', async t => {
  const out = template.render(
    [
      {role: 'user', content: 'old question'},
      {role: 'assistant', content: 'old answer', reasoning: 'old thoughts'},
      {role: 'user', content: 'new question'},
      {role: 'assistant', content: '', reasoning_content: 'plan', tool_calls: [{function: {name: 'edit', arguments: {path: 'a'}}}, {function: {name: 'edit', arguments: {path: 'b'}}}]},
      {role: 'tool', content: 'ok a'},
      {role: 'tool', content: 'ok b'},
    ],
    {tools},
  )
  t.notOk(out.includes('old thoughts'))
  t.ok(out.includes('<|im_start|>assistant\nold answer<|im_end|>'))
  t.ok(out.includes('<|im_start|>assistant\n<think>\nplan\n</think>\n\n<tool_call>\n<function=edit>'))
  t.ok(out.includes('<|im_start|>user\n<tool_response>\nok a\n</tool_response>\n<tool_response>\nok b\n</tool_response><|im_end|>\n'))
  t.equal(out.split('<|im_start|>user').length - 1, 3, 'two questions and one tool-result turn')
})

t.test('a rendered tool call parses back to the arguments it was rendered from', async t => {
  const args = {path: 'src/ü.ts', text: 'if (a < b) {\n  return "</x>"\n}\n', line: 12, opts: {deep: [1, 'two', null]}, dry: false}
  const prompt = template.render(
    [{role: 'user', content: 'go'}, {role: 'assistant', content: 'Editing.', tool_calls: [{function: {name: 'edit', arguments: args}}]}],
    {tools, addGenerationPrompt: false},
  )
  const body = prompt.slice(prompt.lastIndexOf('<|im_start|>assistant\n') + '<|im_start|>assistant\n'.length, prompt.lastIndexOf('<|im_end|>'))
  const parser = new XmlToolCallParser({tools})
  const events = [...parser.push(body), ...parser.finish()]
  const end = events.find(e => e.type === 'tool_call_end')
  t.same(end && 'arguments' in end ? JSON.parse(end.arguments) : undefined, args)
  t.same(events.filter(e => e.type === 'text'), [{type: 'text', text: '<think>\n\n</think>\n\nEditing.'}])
})

t.test('the model answer round trip: parsed output rendered again as the assistant turn', async t => {
  const generated = 'Need the file.\n</think>\n\nLet me edit.\n\n<tool_call>\n<function=edit>\n<parameter=path>\na.ts\n</parameter>\n</function>\n</tool_call>'
  const p = new OutputParser({toolFormat: 'xml', tools, startInReasoning: true, newId: () => 'call_x'})
  let reasoning = ''
  let content = ''
  let args = ''
  for (const e of [...p.push(generated), ...p.finish('stop')]) {
    if (e.type === 'reasoning') reasoning += e.text
    if (e.type === 'content') content += e.text
    if (e.type === 'tool_call_end') args = e.arguments
  }
  const history = template.render(
    [{role: 'user', content: 'q'}, {role: 'assistant', content, reasoning_content: reasoning, tool_calls: [{id: 'call_x', function: {name: 'edit', arguments: args}}]}],
    {tools, addGenerationPrompt: false},
  )
  const prompt = template.render([{role: 'user', content: 'q'}], {tools})
  t.equal(history, prompt + generated + '<|im_end|>\n', 'the next request re-renders exactly what the model produced')
})
