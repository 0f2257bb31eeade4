// Grammars compiled for real package vocabularies (the default package's 16K BPE and the synthetic
// package's 512-token one), walked at random over their own masks: every walk that reaches the end of
// the grammar decodes to JSON that ajv accepts, for 50+ schemas, the JSON object format and both
// tool-call forms (read back by the family's output parser), freeform tools with a regex or Lark input
// grammar in both forms; bounded schemas always reach the end.
// Masks survive rollback exactly; compiled grammars are cached by schema text.
import t from 'tap'
import {OutputParser} from '../../models/qwen3_5/output.js'
import {toolCallGrammar} from '../../models/qwen3_5/tool-grammar.js'
import {synthFixture} from '../helpers/packages.js'
import {decider} from '../helpers/grammar-accepts.js'
import {seeded, walk} from '../helpers/grammar-walk.js'
import {invalidity} from '../helpers/ajv.js'
import {SCHEMAS} from '../helpers/schemas.js'

const DEFAULT = new URL('../../packages/default/', import.meta.url).pathname

for (const which of ['default', 'synthetic'] as const) {
  t.test(`${which} vocabulary`, async t => {
    const v = await decider(which === 'default' ? DEFAULT : await synthFixture('tiny-hybrid', 'q4'))
    const rnd = seeded(which === 'default' ? 11 : 12)

    t.test('every JSON Schema: ended walks validate, bounded walks end', async t => {
      for (const c of SCHEMAS) {
        let ended = 0
        for (let i = 0; i < 3; i++) {
          const m = await v.grammars.matcher({type: 'json_schema', schema: c.schema, param: 'response_format'})
          const w = await walk(m, v.size, rnd, c.bounded ? 200 : 60)
          m.dispose()
          if (!w.ended) continue
          ended++
          const bad = invalidity(c.schema, v.tokenizer.decode(w.ids))
          if (bad) t.fail(`${c.name}: ${bad}`)
        }
        if (c.bounded) t.equal(ended, 3, `${c.name}: every walk ends`)
      }
      t.pass(`${SCHEMAS.length} schemas`)
    })

    t.test('json_object gives an object', async t => {
      for (let i = 0; i < 4; i++) {
        const m = await v.grammars.matcher({type: 'json_object'})
        const w = await walk(m, v.size, rnd, 80, 0.7)
        m.dispose()
        if (w.ended) t.notOk(invalidity({type: 'object'}, v.tokenizer.decode(w.ids)))
      }
    })

    t.test('tool calls in both forms read back as schema-valid arguments', async t => {
      const schemas = SCHEMAS.filter(c => c.bounded && c.schema.type === 'object' && c.schema.properties)
      t.ok(schemas.length >= 8)
      for (const format of ['xml', 'json'] as const) {
        for (const c of schemas) {
          const checked = v.grammars.checkSchema(c.schema, 'tools')
          if (format === 'xml' && c.schema.minProperties !== undefined) {
            // the XML form leaves optional parameters out freely: a property-count bound is refused there
            t.throws(() => toolCallGrammar(format, [{name: 'act', schema: checked}], {type: 'calls', stopAfterFirst: true}), {message: /./, status: 400})
            continue
          }
          const m = await v.grammars.matcher({type: 'structural', format: toolCallGrammar(format, [{name: 'act', schema: checked}], {type: 'calls', stopAfterFirst: true})})
          const w = await walk(m, v.size, rnd, 300)
          m.dispose()
          t.ok(w.ended, `${format} ${c.name}: the call ends`)
          const parser = new OutputParser({toolFormat: format, tools: [{type: 'function', function: {name: 'act', parameters: c.schema}}], startInReasoning: false})
          const events = [...parser.push(v.tokenizer.decode(w.ids)), ...parser.finish('stop')]
          const end = events.find(e => e.type === 'tool_call_end')
          if (!end || end.type !== 'tool_call_end') {
            t.fail(`${format} ${c.name}: no call parsed from ${JSON.stringify(v.tokenizer.decode(w.ids))}`)
            continue
          }
          t.ok(end.complete)
          const bad = invalidity(c.schema, end.arguments)
          if (bad) t.fail(`${format} ${c.name}: ${bad}`)
        }
      }
    })

    t.test('freeform tool calls in both forms read back as inputs that follow their grammar; free tools take any parameters', async t => {
      // bounded, with the characters JSON escapes (quote, backslash, newline, tab) and a non-ASCII class
      const regex = '(["\\\\]|[a-c]|\\n|\\t|[éü]){1,6}-[0-9]{1,2}'
      const lark = 'start: WORD ("," WORD)~0..2 "!"?\nWORD: /[a-z"\\\\]{1,3}/'
      const check: Array<[string, 'regex' | 'lark', RegExp]> = [
        [regex, 'regex', new RegExp(`^(?:${regex})$`, 'u')],
        [lark, 'lark', /^[a-z"\\]{1,3}(?:,[a-z"\\]{1,3}){0,2}!?$/u],
      ]
      for (const format of ['xml', 'json'] as const) {
        for (const [definition, syntax, pattern] of check) {
          const input = v.grammars.checkToolInput('edit', {syntax, definition, param: 'tools[0].format'})
          for (let i = 0; i < 4; i++) {
            const m = await v.grammars.matcher({type: 'structural', format: toolCallGrammar(format, [{name: 'edit', input}], {type: 'calls', stopAfterFirst: true})})
            const w = await walk(m, v.size, rnd, 300)
            m.dispose()
            t.ok(w.ended, `${format} ${syntax}: the call ends`)
            const parser = new OutputParser({toolFormat: format, tools: [{type: 'function', function: {name: 'edit', parameters: {type: 'object', properties: {input: {type: 'string'}}, required: ['input']}}}], startInReasoning: false})
            const text = v.tokenizer.decode(w.ids)
            const end = [...parser.push(text), ...parser.finish('stop')].find(e => e.type === 'tool_call_end')
            if (end?.type !== 'tool_call_end') {
              t.fail(`${format} ${syntax}: no call parsed from ${JSON.stringify(text)}`)
              continue
            }
            const got = (JSON.parse(end.arguments) as {input: string}).input
            t.match(got, pattern, `${format} ${syntax}: ${JSON.stringify(got)}`)
          }
        }
      }
      // a tool held to no schema under a triggered grammar: any parameter names, raw values
      const m = await v.grammars.matcher({type: 'structural', format: toolCallGrammar('xml', [{name: 'free', schema: true}], {type: 'calls', stopAfterFirst: true})})
      for (const id of v.tokenizer.encode('<tool_call>\n<function=free>\n<parameter=any_name>\nline one\nline two\n</parameter>\n<parameter=x.y>\n42\n</parameter>\n</function>\n</tool_call>')) {
        t.ok(m.accept(id), `free XML call accepts token ${id}`)
      }
      m.dispose()
      // names the XML form cannot carry (its parser reads a name up to ">" or a line break) are a 400 there, and
      // names JSON escapes are written escaped in the JSON form (the call parses back to the same name and value)
      for (const bad of ['a>b', 'x\ny', '']) {
        t.throws(() => toolCallGrammar('xml', [{name: bad, schema: true}], {type: 'calls', stopAfterFirst: true}), {message: /./, status: 400}, `tool name ${JSON.stringify(bad)}`)
        t.throws(() => toolCallGrammar('xml', [{name: 'ok', schema: {type: 'object', properties: {[bad]: {type: 'integer'}}}}], {type: 'calls', stopAfterFirst: true}), {message: /./, status: 400}, `parameter ${JSON.stringify(bad)}`)
      }
      // a value the XML parser reads back up to markup: no closing marker inside it, not even inside a JSON string
      // of a non-string parameter (found by the random tool walks: an array holding "<parameter=…" came back cut)
      const xmlCall = async (schema: Record<string, unknown>) =>
        v.grammars.matcher({type: 'structural', format: toolCallGrammar('xml', [{name: 'f', schema: v.grammars.checkSchema(schema, 'tools')}], {type: 'calls', stopAfterFirst: true})})
      const call = (value: string) => `<tool_call>\n<function=f>\n<parameter=p>\n${value}\n</parameter>\n</function>\n</tool_call>`
      const takes = async (schema: Record<string, unknown>, value: string) => {
        const m = await xmlCall(schema)
        try {
          return v.tokenizer.encode(call(value)).every(id => m.accept(id)) && m.accept(m.stopTokenIds[0]!)
        } finally {
          m.dispose()
        }
      }
      const list = {type: 'object', properties: {p: {type: 'array', items: {type: 'string'}}}, required: ['p']}
      t.ok(await takes(list, '["a", "b \\u003c c"]'), 'an escaped < is fine')
      t.notOk(await takes(list, '["x</parameter>y"]'), 'a raw closing marker inside a JSON string is not')
      t.notOk(await takes({type: 'object', properties: {p: {type: 'object', additionalProperties: {type: 'integer'}}}, required: ['p']}, '{"<parameter=x": 1}'), 'nor in a free key')
      t.notOk(await takes({type: 'object', properties: {p: {type: 'array', items: {type: 'string', pattern: '^.+$'}}}, required: ['p']}, '["<parameter=q"]'), 'nor in a pattern string')
      for (const bad of [{enum: ['a', 'x</parameter>']}, {const: 'y</function>'}]) {
        await t.rejects(xmlCall({type: 'object', properties: {p: bad}, required: ['p']}), {message: /closing marker/, status: 400}, JSON.stringify(bad))
        await t.rejects(xmlCall({type: 'object', properties: {p: {type: 'array', items: bad}}, required: ['p']}), {message: /closing marker/, status: 400}, `inside JSON: ${JSON.stringify(bad)}`)
      }
      const odd = 'a"b\\c'
      const schema = v.grammars.checkSchema({type: 'object', properties: {[odd]: {type: 'integer'}}, required: [odd]}, 'tools')
      const jsonCall = `<tool_call>\n{"name": ${JSON.stringify(odd)}, "arguments": {${JSON.stringify(odd)}: 7}}\n</tool_call>`
      t.ok(await v.accepts({type: 'structural', format: toolCallGrammar('json', [{name: odd, schema}], {type: 'calls', stopAfterFirst: true})}, jsonCall), 'JSON form: escaped names')
    })

    t.test('a trap inside the engine fails one compile; later grammars get a fresh instance', async t => {
      const live = await v.grammars.matcher({type: 'json_schema', schema: {type: 'object', properties: {a: {type: 'integer'}}, required: ['a']}, param: 'x'})
      const ids = v.tokenizer.encode('{"a": 12}')
      t.ok(live.accept(ids[0]!))
      // past the policy's nesting limit, straight to XGrammar: its wasm stack overflows (the trap the limit keeps out)
      let deep: unknown = {type: 'integer'}
      for (let i = 0; i < 90; i++) deep = {type: 'object', properties: {k: deep}, required: ['k'], additionalProperties: false}
      const grammars = v.grammars as unknown as {checkSchema(s: unknown, p: string): unknown}
      const check = grammars.checkSchema
      grammars.checkSchema = s => s
      try {
        await t.rejects(v.grammars.matcher({type: 'json_schema', schema: deep, param: 'response_format'}), {message: /compile/, status: 400, param: 'response_format'})
      } finally {
        grammars.checkSchema = check
      }
      t.ok(await v.acceptsJson({type: 'string'}, '"after"'), 'a new grammar compiles and matches')
      t.ok(await v.acceptsJson({type: 'object', properties: {q: {type: 'integer'}}, required: ['q']}, '{"q": 5}'), 'and another')
      for (const id of ids.slice(1)) t.ok(live.accept(id), 'a matcher made before goes on')
      t.ok(live.accept(live.stopTokenIds[0]!), 'to its end')
      live.dispose()
    })

    t.test('rollback restores the exact earlier masks', async t => {
      const m = await v.grammars.matcher({type: 'json_schema', schema: SCHEMAS.find(c => c.name === 'flat object')!.schema, param: 'x'})
      const masks: Int32Array[] = [await m.nextMask()]
      const w = await walk(m, v.size, rnd, 6, 0)
      t.equal(w.ids.length, 6)
      m.rollBack(6)
      t.same(await m.nextMask(), masks[0])
      for (const id of w.ids) t.ok(m.accept(id))
      const after = await m.nextMask()
      m.rollBack(3)
      for (const id of w.ids.slice(3)) t.ok(m.accept(id))
      t.same(await m.nextMask(), after)
      m.dispose()
    })
  })
}
