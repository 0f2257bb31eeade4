// Token ids → events: same events as parsing the decoded text, stop tokens end the output, counts for usage.
import t from 'tap'
import {Tokenizer} from '@huggingface/tokenizers'
import {TokenByteTable, IncrementalDetokenizer} from '../../../src/chat/incremental-detokenizer.js'
import {OutputParser, type OutputEvent} from '../../../models/qwen3_5/output.js'
import {TokenOutputStream} from '../../../models/qwen3_5/token-stream.js'
import type {ToolDefinition} from '../../../models/qwen3_5/template.js'
import {TINY_TOKENIZER_CONFIG, tinyTokenizerJson} from '../helpers/tiny-tokenizer.js'
import {counterIds} from '../helpers/tool-events.js'
import {idSplits} from '../helpers/splits.js'

const json = tinyTokenizerJson()
const tokenizer = new Tokenizer(json, TINY_TOKENIZER_CONFIG)
const table = TokenByteTable.fromTokenizerJson(json as never)
const imEnd = tokenizer.token_to_id('<|im_end|>')!
const tools: ToolDefinition[] = [{type: 'function', function: {name: 'say', parameters: {type: 'object', properties: {text: {type: 'string'}}}}}]
const generated = 'Plan: greet 你好 😀\n</think>\n\nSure.\n\n<tool_call>\n<function=say>\n<parameter=text>\n你好 😀 "hi"\n</parameter>\n</function>\n</tool_call>'
const ids = [...tokenizer.encode(generated, {add_special_tokens: false}).ids, imEnd, ...tokenizer.encode('junk after', {add_special_tokens: false}).ids]

const newStream = () =>
  new TokenOutputStream(new IncrementalDetokenizer(table), new OutputParser({toolFormat: 'xml', tools, startInReasoning: true, newId: counterIds()}), [imEnd])

function textParse(): OutputEvent[] {
  const p = new OutputParser({toolFormat: 'xml', tools, startInReasoning: true, newId: counterIds()})
  return [...p.push(generated), ...p.finish('stop')]
}

function fold(events: OutputEvent[]) {
  const out: Record<string, string> = {}
  for (const e of events) {
    const key = e.type === 'tool_call_arguments' ? 'args' : e.type
    const value = 'text' in e ? e.text : 'delta' in e ? e.delta : JSON.stringify(e)
    out[key] = (out[key] ?? '') + value
  }
  return out
}

t.test('any grouping of ids gives the events of the decoded text; output ends at the stop token', async t => {
  const expected = fold(textParse())
  t.equal(expected.finish, JSON.stringify({type: 'finish', reason: 'tool_calls'}))
  const bad: number[][][] = []
  for (const groups of idSplits(ids, 60, 4)) {
    const s = newStream()
    const events: OutputEvent[] = []
    for (const g of groups) events.push(...s.push(g))
    events.push(...s.finish('length'))
    if (JSON.stringify(fold(events)) !== JSON.stringify(expected)) bad.push(groups)
  }
  t.same(bad.slice(0, 2), [], `${bad.length} bad groupings`)
})

t.test('usage counts', async t => {
  const s = newStream()
  s.push(ids)
  t.ok(s.done)
  const stopAt = ids.indexOf(imEnd)
  t.equal(s.completionTokens, stopAt + 1, 'the stop token counts; nothing after it')
  const reasoningIds = tokenizer.encode('Plan: greet 你好 😀\n</think>', {add_special_tokens: false}).ids
  t.equal(s.reasoningTokens, reasoningIds.length, 'tokens up to and including </think>')
})

t.test('cut by the token limit: finish reason length', async t => {
  const s = newStream()
  s.push(ids.slice(0, 10))
  const events = s.finish('length')
  t.same(events.at(-1), {type: 'finish', reason: 'length'})
  t.ok(s.inReasoning)
})
