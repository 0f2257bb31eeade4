// The JSON tool-call form: streamed arguments, other key orders, malformed calls as text, and the same
// result for every way of splitting the stream.
import t from 'tap'
import {JsonToolCallParser} from '../../../models/qwen3_5/tool-parser-json.js'
import type {ToolDefinition} from '../../../models/qwen3_5/template.js'
import {assemble, collect, counterIds, type Segment} from '../helpers/tool-events.js'
import {charSplit, randomSplits, twoWaySplits} from '../helpers/splits.js'

const tools: ToolDefinition[] = [
  {type: 'function', function: {name: 'get_weather', parameters: {type: 'object', properties: {city: {type: 'string'}}}}},
  {type: 'function', function: {name: 'search', parameters: {type: 'object', properties: {q: {type: 'string'}}}}},
]
const parse = (pieces: string[], streamArguments = true) =>
  assemble(collect(new JsonToolCallParser({tools, streamArguments, newId: counterIds()}), pieces))
const calls = (segments: Segment[]) => segments.flatMap(s => ('call' in s ? [s.call] : []))
const texts = (segments: Segment[]) => segments.flatMap(s => ('text' in s ? [s.text] : []))
const call = (name: string, args: unknown) => `<tool_call>\n{"name": "${name}", "arguments": ${JSON.stringify(args)}}\n</tool_call>`

const cases: Record<string, string> = {
  plain: 'no calls here {"name": "get_weather"} <tool_ nor here',
  one: `Checking.\n\n${call('get_weather', {city: 'Zürich "center" \\ 😀', nested: {a: [1, {b: '}]'}]}})}`,
  several: `${call('get_weather', {city: 'A'})}\n${call('search', {q: 'x'})}`,
  argsFirst: '<tool_call>\n{"arguments": {"q": "y"}, "name": "search"}\n</tool_call> done',
  argsAsString: '<tool_call>\n{"name": "search", "arguments": "{\\"q\\": \\"z\\"}"}\n</tool_call>',
  unknown: `${call('delete_all', {})} text`,
  notJson: 'a <tool_call>\nsearch for cats\n</tool_call> b',
  eos: `${call('search', {q: 'x'})}\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par`,
  junkAfter: '<tool_call>\n{"name": "search", "arguments": {"q": "x"}} extra\n</tool_call>',
}

t.test('reference parses', async t => {
  const one = parse([cases.one!])
  t.same(texts(one), ['Checking.'])
  t.same(JSON.parse(calls(one)[0]!.arguments), {city: 'Zürich "center" \\ 😀', nested: {a: [1, {b: '}]'}]}})
  t.same(calls(parse([cases.several!])).map(c => [c.index, c.name, c.complete]), [[0, 'get_weather', true], [1, 'search', true]])
  t.same(calls(parse([cases.argsFirst!])).map(c => [c.name, JSON.parse(c.arguments)]), [['search', {q: 'y'}]])
  t.same(texts(parse([cases.argsFirst!])), ['done'])
  t.same(calls(parse([cases.argsAsString!])).map(c => JSON.parse(c.arguments)), [{q: 'z'}])
  t.same(parse([cases.unknown!]), [{text: cases.unknown!}])
  t.same(parse([cases.notJson!]), [{text: cases.notJson!}])
  t.same(parse([cases.plain!]), [{text: cases.plain!}])
  const eos = parse([cases.eos!])
  t.same(calls(eos).map(c => [c.name, c.complete]), [['search', true], ['get_weather', false]])
  t.equal(calls(eos)[1]!.arguments, '{"city": "Par')
  const eosBuffered = parse([cases.eos!], false)
  t.same(calls(eosBuffered).map(c => c.name), ['search'])
  t.same(texts(eosBuffered), ['<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par'])
  const junk = parse([cases.junkAfter!])
  t.same(calls(junk).map(c => [c.arguments, c.complete]), [['{"q": "x"}', true]])
  t.same(texts(junk), ['extra\n</tool_call>'])
})

t.test('arguments stream while they are generated', async t => {
  const p = new JsonToolCallParser({tools, newId: counterIds()})
  const events = p.push('<tool_call>\n{"name": "search", "arguments": {"q": "hel')
  t.same(events, [
    {type: 'tool_call_start', index: 0, id: 'call_0', name: 'search'},
    {type: 'tool_call_arguments', index: 0, delta: '{'},
    {type: 'tool_call_arguments', index: 0, delta: '"q": "hel'},
  ])
})

t.test('every split of the stream gives the unsplit result', async t => {
  for (const [name, text] of Object.entries(cases)) {
    for (const stream of [true, false]) {
      const whole = parse([text], stream)
      const bad: string[][] = []
      for (const pieces of [...twoWaySplits(text), ...randomSplits(text, 150, 5), charSplit(text)]) {
        let got: Segment[] | string
        try {
          got = parse(pieces, stream)
        } catch (e) {
          got = String(e)
        }
        if (JSON.stringify(got) !== JSON.stringify(whole)) bad.push(pieces)
      }
      t.same(bad.slice(0, 3), [], `${name} (stream ${stream}): ${bad.length} bad splits`)
    }
  }
})
