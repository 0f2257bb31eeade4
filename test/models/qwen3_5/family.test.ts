// The family description: tool-call form from the template, stop ids, efforts → thinking plans, loading.
import t from 'tap'
import {copyFileSync} from 'node:fs'
import {join} from 'node:path'
import {describeFamily, detectToolFormat, loadTextModule, type TextManifest} from '../../../models/qwen3_5/family.js'
import {SplashError} from '../../../src/errors.js'
import {writeTinyTokenizer} from '../helpers/tiny-tokenizer.js'

const templatePath = new URL('../../../models/qwen3_5/chat_template.jinja', import.meta.url).pathname
const manifest: TextManifest = {
  family: 'qwen3_5',
  tokenizer: {file: 'tokenizer.json', chat_template: 'chat_template.jinja', eos_token_ids: [248046, 248044], pad_token_id: 248044},
  reasoning: {default: 'medium', efforts: {none: 0, low: 1024, medium: 4096, high: 16384}},
}
const jsonTemplate = '{%- for m in messages %}<tool_call>\\n{"name": <function-name>, "arguments": <args-json-object>}\\n</tool_call>{%- endfor %}'

t.test('tool-call form comes from the template text, else from the family', async t => {
  const {readFileSync} = await import('node:fs')
  t.equal(detectToolFormat(readFileSync(templatePath, 'utf8'), 'qwen3'), 'xml', 'our template teaches the XML form')
  t.equal(detectToolFormat(jsonTemplate, 'qwen3_5'), 'json')
  t.equal(detectToolFormat('{{ messages }}', 'qwen3_5_moe'), 'xml')
  t.equal(detectToolFormat('{{ messages }}', 'qwen3_next'), 'json')
})

t.test('stop ids and reasoning efforts from the manifest', async t => {
  const f = describeFamily(manifest, jsonTemplate)
  t.same(f.stopTokenIds, [248046, 248044])
  t.same(f.efforts, ['none', 'low', 'medium', 'high'])
  t.same(f.thinking(), {enableThinking: undefined, budget: 4096, effort: 'medium'}, 'the package default')
  t.same(f.thinking('none'), {enableThinking: false, budget: 0, effort: 'none'})
  t.same(f.thinking('high'), {enableThinking: undefined, budget: 16384, effort: 'high'})
  const err = t.throws(() => f.thinking('xhigh')) as SplashError
  t.equal(err.status, 400)
  t.equal(err.param, 'reasoning_effort')
})

t.test('loads tokenizer and template from a package folder and makes output parsers', async t => {
  const dir = writeTinyTokenizer()
  copyFileSync(templatePath, join(dir, 'chat_template.jinja'))
  const text = await loadTextModule(dir, manifest, {workers: 0})
  t.teardown(() => text.close())
  t.equal(text.family.toolFormat, 'xml')
  t.equal(text.tokenizer.decode(text.thinkCloseIds), '\n</think>\n\n')
  t.ok(text.thinkCloseIds.includes(text.tokenizer.tokenId('</think>')!))
  const prompt = text.template.render([{role: 'user', content: 'hi'}])
  t.ok(prompt.endsWith('<|im_start|>assistant\n<think>\n'))
  t.same(text.prompts.encode(prompt), text.tokenizer.encode(prompt))
  const parser = text.outputParser(prompt, {})
  t.ok(parser.inReasoning, 'thinking on: output starts in the think block')
  const imEnd = text.tokenizer.tokenId('<|im_end|>')!
  const tiny = await loadTextModule(dir, {...manifest, tokenizer: {...manifest.tokenizer, eos_token_ids: [imEnd]}}, {workers: 0})
  const stream = tiny.outputStream(prompt, {})
  const events = [...stream.push([...tiny.tokenizer.encode('ok</think>\n\nHello'), imEnd]), ...stream.finish('length')]
  t.same(events, [{type: 'reasoning', text: 'ok'}, {type: 'content', text: 'Hello'}, {type: 'finish', reason: 'stop'}])
  const off = text.template.render([{role: 'user', content: 'hi'}], {enableThinking: text.family.thinking('none').enableThinking})
  t.notOk(text.outputParser(off, {}).inReasoning)
})
