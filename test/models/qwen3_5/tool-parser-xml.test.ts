// The XML tool-call form: typed arguments, several calls, malformed calls as text, and the same result
// for every way of splitting the stream.
import t from 'tap'
import {XmlToolCallParser} from '../../../models/qwen3_5/tool-parser-xml.js'
import type {ToolDefinition} from '../../../models/qwen3_5/template.js'
import {assemble, collect, counterIds, type Segment} from '../helpers/tool-events.js'
import {charSplit, randomSplits, twoWaySplits} from '../helpers/splits.js'

const tools: ToolDefinition[] = [
  {
    type: 'function',
    function: {
      name: 'write_file',
      parameters: {
        type: 'object',
        properties: {
          path: {type: 'string'},
          content: {type: 'string'},
          line: {type: 'integer'},
          ratio: {type: 'number'},
          force: {type: 'boolean'},
          options: {type: 'object'},
          tags: {type: 'array', items: {type: 'string'}},
          note: {type: ['string', 'null']},
          mode: {enum: ['a', 'b']},
        },
      },
    },
  },
  {type: 'function', function: {name: 'list', parameters: {type: 'object', properties: {}}}},
  {
    type: 'function',
    function: {name: 'apply_patch', parameters: {type: 'object', properties: {input: {type: 'string'}}}},
    inputGrammar: {syntax: 'lark', definition: 'start: /.+/'},
  },
]

/** A patch whose lines hold the XML form's own markup, which a freeform grammar allows. */
const PATCH = '*** Begin Patch\n*** Add File: a.xml\n+<parameter=x>\n+</parameter>\n+</function>\n+<function=list>\n+</tool_call>\n*** End Patch'

const call = (name: string, params: [string, string][]) =>
  `<tool_call>\n<function=${name}>\n${params.map(([k, v]) => `<parameter=${k}>\n${v}\n</parameter>\n`).join('')}</function>\n</tool_call>`

const parse = (pieces: string[], streamArguments = true) =>
  assemble(collect(new XmlToolCallParser({tools, streamArguments, newId: counterIds()}), pieces))

const calls = (segments: Segment[]) => segments.filter(s => 'call' in s).map(s => ('call' in s ? s.call : undefined)!)
const texts = (segments: Segment[]) => segments.filter(s => 'text' in s).map(s => ('text' in s ? s.text : ''))

const cases: Record<string, string> = {
  plain: 'Just an answer, with <b>tags</b> and a lone < and <tool_ but no call.',
  one: `I will write it.\n\n${call('write_file', [['path', 'src/a.ts'], ['content', 'const s = "x\\ty";\n\tline 2 </param\n你好 😀\n']])}`,
  typed: call('write_file', [
    ['path', 'p'],
    ['line', '42'],
    ['ratio', '-0.5e1'],
    ['force', 'True'],
    ['options', '{"a": [1, {"b": null}], "c": "d"}'],
    ['tags', '["x", "y"]'],
    ['note', 'null'],
    ['mode', 'b'],
  ]),
  fallback: call('write_file', [['line', 'forty-two'], ['options', '{broken'], ['force', 'maybe']]),
  several: `${call('list', [])}\n${call('write_file', [['path', 'a']])}\n${call('write_file', [['path', 'b']])}`,
  textAfter: `${call('list', [])}\n\nDone. Anything else?`,
  unknown: `Calling: ${call('rm_rf', [['path', '/']])} after`,
  notACall: 'text <tool_call>\nHello there</tool_call> more',
  brokenMarkup: `${call('list', [])}<tool_call>\n<function=write_file>\n<parameter=path>\nx\n</parameter>\ngarbage here\n</function>\n</tool_call> tail`,
  eosInValue: `before ${call('list', [])}\n<tool_call>\n<function=write_file>\n<parameter=path>\nunfinished`,
  eosAfterName: '<tool_call>\n<function=write_file>\n',
  emptyValue: call('write_file', [['path', ''], ['content', '\n']]),
  noClosingCall: `<tool_call>\n<function=list>\n</function>\nafter`,
  unclosedValues: '<tool_call>\n<function=write_file>\n<parameter=path>\na.txt\n<parameter=line>\n7\n</function>\n</tool_call>',
  freeform: `${call('apply_patch', [['input', PATCH]])}\n${call('list', [])}`,
  freeformCut: `${call('apply_patch', [['input', PATCH]]).slice(0, -'</function>\n</tool_call>'.length)}`,
}

t.test('reference parses', async t => {
  const one = parse([cases.one!])
  t.same(texts(one), ['I will write it.'])
  t.same(JSON.parse(calls(one)[0]!.arguments), {path: 'src/a.ts', content: 'const s = "x\\ty";\n\tline 2 </param\n你好 😀\n'})
  t.equal(calls(one)[0]!.name, 'write_file')
  t.equal(calls(one)[0]!.id, 'call_0')

  const typed = calls(parse([cases.typed!]))[0]!
  t.same(JSON.parse(typed.arguments), {
    path: 'p', line: 42, ratio: -5, force: true, options: {a: [1, {b: null}], c: 'd'}, tags: ['x', 'y'], note: null, mode: 'b',
  })
  t.same(JSON.parse(calls(parse([cases.fallback!]))[0]!.arguments), {line: 'forty-two', options: '{broken', force: 'maybe'})

  const several = parse([cases.several!])
  t.same(calls(several).map(c => [c.index, c.name, JSON.parse(c.arguments)]), [
    [0, 'list', {}], [1, 'write_file', {path: 'a'}], [2, 'write_file', {path: 'b'}],
  ])
  t.same(texts(several), [], 'whitespace between calls is dropped')
  t.same(texts(parse([cases.textAfter!])), ['Done. Anything else?'])
  t.same(parse([cases.unknown!]), [{text: cases.unknown!}], 'an unknown function is text')
  t.same(parse([cases.notACall!]), [{text: cases.notACall!}])
  t.same(parse([cases.plain!]), [{text: cases.plain!}])
  t.same(JSON.parse(calls(parse([cases.emptyValue!]))[0]!.arguments), {path: '', content: '\n'})
  t.same(JSON.parse(calls(parse([cases.unclosedValues!]))[0]!.arguments), {path: 'a.txt', line: 7}, 'values without </parameter>')
  for (const stream of [true, false]) {
    const freeform = calls(parse([cases.freeform!], stream))
    t.same(freeform.map(c => [c.name, JSON.parse(c.arguments), c.complete]), [['apply_patch', {input: PATCH}, true], ['list', {}, true]],
      `a freeform input holding markup ends only at the call's closing markup (stream ${stream})`)
  }
  t.same(calls(parse([cases.freeformCut!])).map(c => [JSON.parse(c.arguments), c.complete]), [[{input: PATCH}, false]], 'cut off in the closing markup')
})

t.test('streaming: a call that breaks or is cut off closes with what was parsed', async t => {
  const broken = parse([cases.brokenMarkup!])
  t.same(calls(broken).map(c => [c.name, c.arguments, c.complete]), [['list', '{}', true], ['write_file', '{"path": "x"}', false]])
  t.same(texts(broken), ['garbage here\n</function>\n</tool_call> tail'])
  const eos = parse([cases.eosInValue!])
  t.same(calls(eos).map(c => [c.name, c.arguments, c.complete]), [['list', '{}', true], ['write_file', '{"path": "unfinished"}', false]])
  t.same(calls(parse([cases.eosAfterName!])).map(c => [c.arguments, c.complete]), [['{}', false]])
  const noClose = parse([cases.noClosingCall!])
  t.same(calls(noClose).map(c => c.complete), [true])
  t.same(texts(noClose), ['after'])
})

t.test('buffered: a call that breaks or is cut off comes back as text', async t => {
  const broken = parse([cases.brokenMarkup!], false)
  t.same(calls(broken).map(c => c.name), ['list'])
  t.match(texts(broken).join(''), /^<tool_call>\n<function=write_file>[\s\S]*garbage here[\s\S]* tail$/)
  const eos = parse([cases.eosInValue!], false)
  t.same(calls(eos).map(c => c.name), ['list'])
  t.same(texts(eos), ['before', '<tool_call>\n<function=write_file>\n<parameter=path>\nunfinished'])
  t.same(parse([cases.eosAfterName!], false), [{text: cases.eosAfterName!}])
})

t.test('string values stream while they are generated', async t => {
  const p = new XmlToolCallParser({tools, newId: counterIds()})
  const first = p.push('<tool_call>\n<function=write_file>\n<parameter=content>\nline one\nline')
  t.same(first.map(e => e.type), ['tool_call_start', 'tool_call_arguments', 'tool_call_arguments'])
  t.same(first.filter(e => e.type === 'tool_call_arguments').map(e => ('delta' in e ? e.delta : '')).join(''), '{"content": "line one\\nline')
  t.same(p.push(' two\n</para'), [{type: 'tool_call_arguments', index: 0, delta: ' two'}], 'holds back what may be the end tag')
})

t.test('every split of the stream gives the unsplit result', async t => {
  for (const [name, text] of Object.entries(cases)) {
    for (const stream of [true, false]) {
      const whole = parse([text], stream)
      const bad: string[][] = []
      for (const pieces of [...twoWaySplits(text), ...randomSplits(text, 150, 11), charSplit(text)]) {
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

t.test('no tools: every call is text', async t => {
  const text = cases.one!
  t.same(assemble(collect(new XmlToolCallParser({}), [text])), [{text}])
})
