// The closing path (src/grammar/closing.ts): from anywhere inside a random walk through a JSON Schema's grammar (a
// model with random weights, cut at a random length), the path it finds takes the grammar to a complete value, which
// validates; the path is no longer than the characters it writes, and packed by the tokenizer into fewer tokens. The
// same from inside a forced tool call in both of the family's call forms, the shortest of several tools' calls, and
// what the walk needs beyond printable ASCII.
import t from 'tap'
import {decider} from '../helpers/grammar-accepts.js'
import {seeded, walk} from '../helpers/grammar-walk.js'
import {invalidity} from '../helpers/ajv.js'
import {SCHEMAS} from '../helpers/schemas.js'
import {APPLY_PATCH_LARK} from '../helpers/grammars.js'
import {allows} from '../../src/grammar/matcher.js'
import {jsonStringState} from '../../src/grammar/closing.js'
import {closingHints} from '../../src/grammar/closing-hints.js'
import {toolCallGrammar} from '../../models/qwen3_5/tool-grammar.js'
import {OutputParser} from '../../models/qwen3_5/output.js'
import type {JsonSchema} from '../../models/qwen3_5/template.js'

const DEFAULT = new URL('../../packages/default/', import.meta.url).pathname

t.test('from a random point of a random walk, the closing path ends the grammar in a valid value', async t => {
  const v = await decider(DEFAULT)
  const rnd = seeded(48)
  const encode = (text: string) => v.tokenizer.encode(text)
  let closed = 0
  let packed = 0
  for (const c of [...SCHEMAS, {name: 'json_object', schema: undefined, bounded: false}]) {
    for (let i = 0; i < 6; i++) {
      const m = await v.grammars.matcher(c.schema === undefined ? {type: 'json_object'} : {type: 'json_schema', schema: c.schema, param: 'response_format'})
      // no stop token taken: the walk is cut inside the value
      const w = await walk(m, v.size, rnd, Math.floor(rnd() * 40), 0)
      if (w.ended) {
        // a value that left only the stop token: nothing to close
        m.dispose()
        continue
      }
      const before = v.tokenizer.decode(w.ids)
      const path = await m.closingPath(200, encode, before)
      if (!Array.isArray(path)) {
        t.fail(`${c.name}: no closing path from ${JSON.stringify(before)} (${path})`)
        m.dispose()
        continue
      }
      for (const id of path) if (!m.accept(id)) t.fail(`${c.name}: the grammar refused its own closing path at ${id}`)
      const mask = await m.nextMask()
      t.ok(m.stopTokenIds.some(s => allows(mask, s)), `${c.name}: complete after the path`)
      const text = v.tokenizer.decode([...w.ids, ...path])
      const bad = invalidity(c.schema ?? {type: 'object'}, text)
      if (bad) t.fail(`${c.name}: ${bad} (from ${JSON.stringify(before)})`)
      const chars = v.tokenizer.decode(path).length
      if (path.length < chars) packed++
      t.ok(path.length <= Math.max(chars, 1), `${c.name}: ${path.length} tokens for ${chars} characters`)
      closed++
      m.dispose()
    }
  }
  t.ok(closed > 100, `${closed} walks closed`)
  t.ok(packed > closed / 4, `${packed} of them packed into fewer tokens than characters`)
})

t.test('string state of JSON text: quotes, escapes', async t => {
  t.same(jsonStringState(''), {inString: false, escaped: false})
  t.same(jsonStringState('{"a": "b'), {inString: true, escaped: false})
  t.same(jsonStringState('{"a": "b\\'), {inString: true, escaped: true})
  t.same(jsonStringState('{"a": "b\\"'), {inString: true, escaped: false})
  t.same(jsonStringState('{"a": "b\\\\"'), {inString: false, escaped: false})
  t.same(jsonStringState('["}", "]'), {inString: true, escaped: false})
})

// Forced tool calls (the family's structural tags, models/qwen3_5/tool-grammar.ts): the path closes the whole call,
// wrapper included, in both call forms, and the output parser reads back a complete call whose arguments validate.
const TOOL_SCHEMAS = [
  ...SCHEMAS.filter(c => c.bounded && c.schema.type === 'object' && c.schema.properties && c.schema.minProperties === undefined).map(c => c.schema),
  // free strings (a raw XML value never ends by itself), optional parameters, JSON values inside the XML form (a string
  // there must not take the enum's values for its characters)
  {
    type: 'object',
    properties: {path: {type: 'string'}, lines: {type: 'array', items: {type: 'integer'}}, note: {type: 'string'}, mode: {enum: ['a', 'bb']}, cfg: {type: 'object', properties: {k: {type: 'string'}}, required: ['k']}},
    required: ['path', 'lines', 'cfg'],
  },
]

function parseCall(format: 'xml' | 'json', tools: Array<{name: string; schema: Record<string, unknown>}>, text: string) {
  const parser = new OutputParser({toolFormat: format, tools: tools.map(x => ({type: 'function' as const, function: {name: x.name, parameters: x.schema as JsonSchema}})), startInReasoning: false})
  const events = [...parser.push(text), ...parser.finish('stop')]
  const names = events.flatMap(e => (e.type === 'tool_call_start' ? [e.name] : []))
  const ends = events.flatMap(e => (e.type === 'tool_call_end' ? [e] : []))
  return ends.map((e, i) => ({name: names[i]!, arguments: e.arguments, complete: e.complete}))
}

t.test('forced tool calls: from a random point of a random walk, the path closes a call that reads back valid', async t => {
  const v = await decider(DEFAULT)
  const rnd = seeded(49)
  const encode = (text: string) => v.tokenizer.encode(text)
  let closed = 0
  for (const format of ['xml', 'json'] as const) {
    for (const [i, schema] of TOOL_SCHEMAS.entries()) {
      // one named tool, and two tools under "required" (parallel calls allowed: the grammar may go on after a call)
      const other = TOOL_SCHEMAS[(i + 1) % TOOL_SCHEMAS.length]!
      for (const tools of [[{name: 'act', schema}], [{name: 'act', schema}, {name: 'other_tool', schema: other}]]) {
        const checked = tools.map(x => ({name: x.name, schema: v.grammars.checkSchema(x.schema, 'tools')}))
        const format_ = toolCallGrammar(format, checked, {type: 'calls', stopAfterFirst: tools.length === 1})
        for (let k = 0; k < 2; k++) {
          const m = await v.grammars.matcher({type: 'structural', format: format_})
          const w = await walk(m, v.size, rnd, Math.floor(rnd() * 60), 0)
          if (w.ended) {
            // only the stop token was left: nothing to close
            m.dispose()
            continue
          }
          const before = v.tokenizer.decode(w.ids)
          const where = `${format} ${tools.length} tool(s) #${i} from ${JSON.stringify(before)}`
          const path = await m.closingPath(400, encode, before)
          if (!Array.isArray(path)) {
            t.fail(`${where}: no closing path (${path})`)
            m.dispose()
            continue
          }
          for (const id of path) if (!m.accept(id)) t.fail(`${where}: the grammar refused its own closing path at ${id}`)
          const mask = await m.nextMask()
          m.dispose()
          if (!m.stopTokenIds.some(s => allows(mask, s))) t.fail(`${where}: not complete after the path`)
          const calls = parseCall(format, tools, v.tokenizer.decode([...w.ids, ...path]))
          if (calls.length === 0) t.fail(`${where}: no call parsed`)
          for (const call of calls) {
            if (!call.complete) t.fail(`${where}: call ${call.name} cut`)
            const bad = invalidity(tools.find(x => x.name === call.name)!.schema, call.arguments)
            if (bad) t.fail(`${where}: ${bad} in ${call.arguments}`)
          }
          closed++
        }
      }
    }
  }
  t.ok(closed >= 4 * TOOL_SCHEMAS.length, `${closed} walks closed`)
})

t.test('several tools: the shortest call among them is closed, whichever the grammar lists first', async t => {
  const v = await decider(DEFAULT)
  const encode = (text: string) => v.tokenizer.encode(text)
  const long = {name: 'a_long_tool_name', schema: {type: 'object', properties: {text: {type: 'string', minLength: 40}, ids: {type: 'array', items: {type: 'integer'}, minItems: 5}}, required: ['text', 'ids']}}
  const short = {name: 'ok', schema: {type: 'object', properties: {reason: {type: 'string'}}}}
  for (const format of ['xml', 'json'] as const) {
    const alone = await v.grammars.matcher({type: 'structural', format: toolCallGrammar(format, [short], {type: 'calls', stopAfterFirst: true})})
    const want = await alone.closingPath(400, encode)
    alone.dispose()
    if (!Array.isArray(want)) throw new Error(`no path for ${short.name}`)
    for (const tools of [[long, short], [short, long]]) {
      const m = await v.grammars.matcher({type: 'structural', format: toolCallGrammar(format, tools, {type: 'calls', stopAfterFirst: false})})
      const shortest = await m.closingPath(400, encode, '', 0)
      t.same(shortest, want, `${format} ${tools.map(x => x.name).join(', ')}: the call of ${short.name}`)
      // the output has opened a call but not named its tool yet
      const opened = encode('<tool_call>\n')
      for (const id of opened) t.ok(m.accept(id))
      const rest = await m.closingPath(400, encode, '<tool_call>\n', 0)
      t.ok(Array.isArray(rest) && v.tokenizer.decode(rest).includes(short.name), `${format}: still ${short.name} once the call is open`)
      m.dispose()
    }
  }
})

t.test('characters and tokens beyond printable ASCII: line breaks, non-ASCII values, the <tool_call> token', async t => {
  const v = await decider(DEFAULT)
  const encode = (text: string) => v.tokenizer.encode(text)
  const text = async (spec: Parameters<typeof v.grammars.matcher>[0]) => {
    const m = await v.grammars.matcher(spec)
    const path = await m.closingPath(100, encode)
    m.dispose()
    return Array.isArray(path) ? v.tokenizer.decode(path) : path
  }
  t.equal(await text({type: 'structural', format: {type: 'grammar', grammar: 'root ::= "line\\n" [0-9] "\\t;"'}}), 'line\n0\t;')
  t.equal(await text({type: 'json_schema', schema: {enum: ['ü']}, param: 'response_format'}), '"ü"')
  const m = await v.grammars.matcher({type: 'structural', format: toolCallGrammar('xml', [{name: 'f', schema: {type: 'object', properties: {}}}], {type: 'calls', stopAfterFirst: true})})
  const path = await m.closingPath(100, encode)
  m.dispose()
  t.ok(Array.isArray(path) && path[0] === v.tokenizer.addedToken('<tool_call>')?.id, 'the call opens with the one <tool_call> token')
  t.equal(Array.isArray(path) ? v.tokenizer.decode(path) : path, '<tool_call>\n<function=f>\n</function>\n</tool_call>')
})

t.test("closing hints: a structural tag's fixed texts, those that end a free part first, and its tools' begins", async t => {
  const schema = {type: 'object', properties: {a: {type: 'string'}, b: {type: 'integer'}}, required: ['a']}
  const h = closingHints(toolCallGrammar('xml', [{name: 'f', schema}, {name: 'g', schema: true}], {type: 'calls', stopAfterFirst: false}))
  t.same(h.starts, ['<tool_call>\n<function=f>\n', '<tool_call>\n<function=g>\n'])
  t.same(h.closers, ['</function>\n</tool_call>', '\n</parameter>\n'])
  t.same(h.openers, ['<tool_call>\n<function=g>\n', '<parameter=b>\n', '<parameter=a>\n', '<tool_call>\n<function=f>\n'], 'later first')
  t.notOk(h.openers.includes('\n'), 'single characters are left to the walk')
  t.same(closingHints(toolCallGrammar('json', [{name: 'f', schema}], {type: 'calls', stopAfterFirst: true})), {closers: ['}\n</tool_call>'], openers: ['<tool_call>\n{"name": "f", "arguments": '], starts: []})
})

t.test('a free part the walk would never leave is stuck, not long; counted strings and arrays still close', async t => {
  const v = await decider(DEFAULT)
  const encode = (text: string) => v.tokenizer.encode(text)
  // apply_patch's `/(.+)/` file name ends at a line break, which the walk's order never reaches (the raw text of the
  // XML form, a JSON string's escape in the JSON form): no close, rather than a walk to the limit and a 400
  const input = v.grammars.checkToolInput('apply_patch', {syntax: 'lark', definition: APPLY_PATCH_LARK, param: 'tools[0].format'})
  for (const format of ['xml', 'json'] as const) {
    const m = await v.grammars.matcher({type: 'structural', format: toolCallGrammar(format, [{name: 'apply_patch', input}], {type: 'calls', stopAfterFirst: true})})
    t.equal(await m.closingPath(400, encode), 'stuck', `${format}: apply_patch`)
    m.dispose()
  }
  for (const schema of [
    {type: 'string', minLength: 100},
    {type: 'array', items: {type: 'integer'}, minItems: 12},
  ]) {
    const m = await v.grammars.matcher({type: 'json_schema', schema, param: 'response_format'})
    const path = await m.closingPath(400, encode)
    m.dispose()
    t.ok(Array.isArray(path), `${JSON.stringify(schema)}: a path`)
    if (Array.isArray(path)) t.notOk(invalidity(schema, v.tokenizer.decode(path)), v.tokenizer.decode(path))
  }
  // a raw XML value of a minimum length repeats its mask as well, and no line break leaves it
  const tool = {name: 'note', schema: {type: 'object', properties: {text: {type: 'string', minLength: 30}}, required: ['text']}}
  for (const format of ['xml', 'json'] as const) {
    const m = await v.grammars.matcher({type: 'structural', format: toolCallGrammar(format, [tool], {type: 'calls', stopAfterFirst: true})})
    const path = await m.closingPath(400, encode)
    m.dispose()
    const calls = Array.isArray(path) ? parseCall(format, [tool], v.tokenizer.decode(path)) : []
    t.equal(calls.length, 1, `${format}: a call of a 30-character text`)
    if (calls[0]) t.notOk(invalidity(tool.schema, calls[0].arguments), calls[0].arguments)
  }
})
