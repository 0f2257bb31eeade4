// The combined output parser: reasoning, content, tool calls, stop strings and finish reasons, for
// every split of the stream.
import t from 'tap'
import {OutputParser, type OutputEvent, type OutputParserOptions} from '../../../models/qwen3_5/output.js'
import type {ToolDefinition} from '../../../models/qwen3_5/template.js'
import {counterIds} from '../helpers/tool-events.js'
import {charSplit, randomSplits, twoWaySplits} from '../helpers/splits.js'

const tools: ToolDefinition[] = [
  {type: 'function', function: {name: 'read', parameters: {type: 'object', properties: {path: {type: 'string'}, n: {type: 'integer'}}}}},
]
const xmlCall = (path: string) => `<tool_call>\n<function=read>\n<parameter=path>\n${path}\n</parameter>\n<parameter=n>\n3\n</parameter>\n</function>\n</tool_call>`

function run(options: Omit<OutputParserOptions, 'newId'>, pieces: string[], reason: 'stop' | 'length' = 'stop') {
  const p = new OutputParser({...options, newId: counterIds()})
  const events: OutputEvent[] = []
  for (const piece of pieces) {
    events.push(...p.push(piece))
    if (p.done) break
  }
  events.push(...p.finish(reason))
  if (p.finish(reason).length !== 0) throw new Error('a second finish() returned events')
  return summarise(events)
}

function summarise(events: OutputEvent[]) {
  let reasoning = ''
  let content = ''
  const calls: {name: string; args: string; complete: boolean}[] = []
  let finish: OutputEvent | undefined
  let seenOther = false
  for (const e of events) {
    if (finish) throw new Error('event after finish')
    if ('text' in e && e.text === '') throw new Error('empty text')
    if (e.type === 'reasoning') {
      if (seenOther) throw new Error('reasoning after content')
      reasoning += e.text
    } else if (e.type === 'finish') finish = e
    else seenOther = true
    if (e.type === 'content') content += e.text
    if (e.type === 'tool_call_start') calls.push({name: e.name, args: '', complete: false})
    if (e.type === 'tool_call_arguments') calls.at(-1)!.args += e.delta
    if (e.type === 'tool_call_end') calls.at(-1)!.complete = e.complete
  }
  return {reasoning, content, calls, finish}
}

const xml = {toolFormat: 'xml' as const, tools, startInReasoning: true}

const cases: {name: string; options: Omit<OutputParserOptions, 'newId'>; text: string; reason?: 'stop' | 'length'; expect: unknown}[] = [
  {
    name: 'reasoning then a call',
    options: xml,
    text: `I should read it.\n</think>\n\nReading.\n\n${xmlCall('a.txt')}`,
    expect: {reasoning: 'I should read it.', content: 'Reading.', calls: [{name: 'read', args: '{"path": "a.txt", "n": 3}', complete: true}], finish: {type: 'finish', reason: 'tool_calls'}},
  },
  {
    name: 'thinking off, plain answer',
    options: {...xml, startInReasoning: false},
    text: 'Hello there!',
    expect: {reasoning: '', content: 'Hello there!', calls: [], finish: {type: 'finish', reason: 'stop'}},
  },
  {
    name: 'cut off while reasoning',
    options: xml,
    text: 'still thinking about <tool_call> things',
    reason: 'length',
    expect: {reasoning: 'still thinking about <tool_call> things', content: '', calls: [], finish: {type: 'finish', reason: 'length'}},
  },
  {
    name: 'stop string inside content',
    options: {...xml, stop: ['\nUser:']},
    text: 'ok\n</think>\n\nAnswer.\nUser: more',
    expect: {reasoning: 'ok', content: 'Answer.', calls: [], finish: {type: 'finish', reason: 'stop', stop: '\nUser:'}},
  },
  {
    name: 'parallel_tool_calls false keeps one call',
    options: {...xml, maxToolCalls: 1},
    text: `r</think>\n\n${xmlCall('a')}\n${xmlCall('b')}`,
    expect: {reasoning: 'r', content: '', calls: [{name: 'read', args: '{"path": "a", "n": 3}', complete: true}], finish: {type: 'finish', reason: 'tool_calls'}},
  },
  {
    name: 'call cut by the token limit',
    options: xml,
    text: `r</think>\n\n<tool_call>\n<function=read>\n<parameter=path>\nlong/pa`,
    reason: 'length',
    expect: {reasoning: 'r', content: '', calls: [{name: 'read', args: '{"path": "long/pa"}', complete: false}], finish: {type: 'finish', reason: 'length'}},
  },
  {
    name: 'json form, model opens think itself',
    options: {toolFormat: 'json', tools, startInReasoning: false},
    text: '<think>\nhmm\n</think>\n\n<tool_call>\n{"name": "read", "arguments": {"path": "x"}}\n</tool_call>',
    expect: {reasoning: 'hmm', content: '', calls: [{name: 'read', args: '{"path": "x"}', complete: true}], finish: {type: 'finish', reason: 'tool_calls'}},
  },
  {
    name: 'no tools offered: calls are content',
    options: {toolFormat: 'xml', startInReasoning: false},
    text: xmlCall('a'),
    expect: {reasoning: '', content: xmlCall('a'), calls: [], finish: {type: 'finish', reason: 'stop'}},
  },
]

t.test('each case, unsplit and over every split', async t => {
  for (const c of cases) {
    const whole = run(c.options, [c.text], c.reason)
    t.same(whole, c.expect, c.name)
    const bad: string[][] = []
    for (const pieces of [...twoWaySplits(c.text), ...randomSplits(c.text, 100, 9), charSplit(c.text)]) {
      if (JSON.stringify(run(c.options, pieces, c.reason)) !== JSON.stringify(whole)) bad.push(pieces)
    }
    t.same(bad.slice(0, 3), [], `${c.name}: ${bad.length} bad splits`)
  }
})

t.test('done tells the caller to stop generating', async t => {
  const p = new OutputParser({...xml, stop: ['STOP']})
  p.push('abc ST')
  t.notOk(p.done)
  t.ok(p.inReasoning)
  p.push('OP and more')
  t.ok(p.done)
  t.same(p.push('ignored'), [])
})
