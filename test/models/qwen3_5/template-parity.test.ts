// Template parity: Splash's renderer (@huggingface/jinja) against the expected renderings held in
// test/fixtures/templates/cases.json ("expected" per case, made by tools/reference/render_templates.py;
// "expected_by" names the renderer: transformers on the GPU machine, or jinja2 for a local check).
import t from 'tap'
import {readFileSync} from 'node:fs'
import {ChatTemplate, type ChatMessage, type ToolDefinition} from '../../../models/qwen3_5/template.js'

interface Case {
  name: string
  messages: ChatMessage[]
  tools?: ToolDefinition[]
  add_generation_prompt: boolean
  enable_thinking?: boolean
  expected: string | null
}
const root = new URL('../../../', import.meta.url)
const doc = JSON.parse(readFileSync(new URL('test/fixtures/templates/cases.json', root), 'utf8')) as {
  template: string
  expected_by: string | null
  cases: Case[]
}
const template = new ChatTemplate(readFileSync(new URL(doc.template, root), 'utf8'))
const render = (c: Case) =>
  template.render(c.messages, {tools: c.tools, addGenerationPrompt: c.add_generation_prompt, enableThinking: c.enable_thinking})

t.test('every case renders without errors', async t => {
  t.ok(doc.cases.length >= 15)
  for (const c of doc.cases) {
    try {
      t.type(render(c), 'string', c.name)
    } catch (e) {
      t.fail(`${c.name}: ${String(e)}`)
    }
  }
})

t.test(`renderings equal the expected ones (${doc.expected_by ?? 'none recorded yet'})`, async t => {
  const withExpected = doc.cases.filter(c => c.expected !== null)
  if (withExpected.length === 0) t.comment('no expected renderings yet: run tools/reference/render_templates.py')
  for (const c of withExpected) t.equal(render(c), c.expected, c.name)
})
