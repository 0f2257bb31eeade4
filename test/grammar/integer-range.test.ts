// Integer bounds are written by Splash, not XGrammar (whose 0..120 let 121..129 through): the range
// expression matches exactly the decimal forms of lo..hi, checked value by value over many ranges; a
// JSON Schema's bounded integer, compiled for a real vocabulary, accepts its bounds and refuses their
// neighbours, alone, nullable, nested and inside $defs, and as a forced tool call's argument in both call forms.
import t from 'tap'
import {integerRangeEbnf} from '../../src/grammar/json/integer-range.js'
import {jsonSchemaEbnf} from '../../src/grammar/json/json-ebnf.js'
import {enforceableSchema} from '../../src/grammar/schema-policy.js'
import {toolCallGrammar} from '../../models/qwen3_5/tool-grammar.js'
import {synthFixture} from '../helpers/packages.js'
import {decider} from '../helpers/grammar-accepts.js'
import {seeded} from '../helpers/grammar-walk.js'

/** The range expression as an anchored RegExp (it uses only literals, digit classes, {n}, | and groups). */
function asRegExp(ebnf: string): RegExp {
  const body = ebnf.replace(/""/g, '').replace(/"(-|[0-9])"/g, '$1').replace(/\s+/g, '')
  if (body.includes('"')) throw new Error(`a literal that is not a digit or minus: ${ebnf}`)
  return new RegExp(`^(?:${body.replace(/\(/g, '(?:')})$`)
}

/** Values around and inside lo..hi that a range expression must decide. */
function probes(lo: number, hi: number, rnd: () => number): number[] {
  const out = new Set<number>()
  for (const edge of [lo, hi, 0, 10, 100, 1000]) for (let d = -12; d <= 12; d++) out.add(edge + d)
  for (let i = 0; i < 40; i++) out.add(Math.round(lo + (hi - lo) * rnd()))
  for (let i = 0; i < 20; i++) out.add(Math.round((rnd() - 0.5) * 4 * Math.max(Math.abs(lo), Math.abs(hi), 10)))
  return [...out].filter(Number.isSafeInteger)
}

t.test('the range expression matches exactly lo..hi', async t => {
  const rnd = seeded(5)
  const ranges: Array<[number, number]> = [
    [0, 120], [0, 9], [0, 10], [1, 50], [5, 1234], [100, 199], [99, 100], [-5, 5], [-120, -3], [-1000, 0], [0, 0], [7, 7], [-7, -7],
    [10, 19], [19, 21], [1, 9999], [0, 99999], [123, 45678], [-999, 1000], [200, 299], [201, 298], [1000, 1000],
    [-Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER], [0, Number.MAX_SAFE_INTEGER], [Number.MAX_SAFE_INTEGER - 25, Number.MAX_SAFE_INTEGER],
  ]
  for (let i = 0; i < 300; i++) {
    const scale = 10 ** Math.floor(rnd() * 7)
    const a = Math.round((rnd() * 2 - 0.6) * scale)
    ranges.push([a, a + Math.round(rnd() * scale)])
  }
  let checked = 0
  for (const [lo, hi] of ranges) {
    const re = asRegExp(integerRangeEbnf(lo, hi))
    for (const v of probes(lo, hi, rnd)) {
      const want = v >= lo && v <= hi
      if (re.test(String(v)) !== want) t.fail(`${lo}..${hi}: ${v} ${want ? 'refused' : 'accepted'}`)
      checked++
    }
    // small ranges: every value inside, and leading zeros, "-0" and "+n" never
    if (hi - lo <= 3000) for (let v = lo; v <= hi; v++) if (!re.test(String(v))) t.fail(`${lo}..${hi}: ${v} refused`)
    for (const bad of ['-0', '00', '01', `0${Math.abs(hi)}`, `+${Math.abs(hi)}`, '', '-']) if (re.test(bad)) t.fail(`${lo}..${hi}: ${JSON.stringify(bad)} accepted`)
  }
  t.ok(checked > 20000, `${checked} values over ${ranges.length} ranges`)
  t.throws(() => integerRangeEbnf(3, 2), RangeError)
  t.throws(() => integerRangeEbnf(0, 2 ** 60), RangeError)
})

t.test('the schema EBNF carries the exact range and keeps data values as they are', async t => {
  const ebnf = await jsonSchemaEbnf({type: 'object', properties: {age: {type: 'integer', minimum: 0, maximum: 120}, k: {const: {type: 'integer', minimum: 0, maximum: 1}}}, required: ['age', 'k'], additionalProperties: false})
  t.match(ebnf, integerRangeEbnf(0, 120))
  t.notMatch(ebnf, /7351924086/, 'no sentinel left')
  t.match(ebnf, /minimum/, 'the const object is emitted as data')
})

t.test('compiled for a real vocabulary: bounds accepted, neighbours refused', async t => {
  const {acceptsJson: accepts, accepts: acceptsSpec} = await decider(await synthFixture('tiny-hybrid', 'q4'))
  const int = (minimum: number, maximum: number) => ({type: 'integer', minimum, maximum})
  const obj = (v: unknown) => ({type: 'object', properties: {v}, required: ['v'], additionalProperties: false})

  const cases: Array<[unknown, string[], string[]]> = [
    [obj(int(0, 120)), ['0', '9', '99', '100', '119', '120'], ['121', '125', '129', '130', '-1', '1000', '007']],
    [obj(int(-50, -3)), ['-50', '-3', '-10'], ['-2', '-51', '0', '3', '-0']],
    [obj({type: ['integer', 'null'], minimum: 1, maximum: 12}), ['1', '12', 'null'], ['0', '13', '19', '"x"']],
    [obj({type: 'integer', exclusiveMinimum: 0, exclusiveMaximum: 200}), ['1', '199'], ['0', '200', '209']],
    [{type: 'object', properties: {v: {$ref: '#/$defs/p'}}, required: ['v'], additionalProperties: false, $defs: {p: int(10, 310)}}, ['10', '310', '299'], ['9', '311', '319', '400']],
    [obj({type: 'array', items: int(0, 20), maxItems: 2}), ['[20, 0]', '[]'], ['[21]', '[29]', '[0, 25]']],
  ]
  for (const [schema, good, bad] of cases) {
    const checked = enforceableSchema(schema, 'x')
    for (const v of good) t.ok(await accepts(checked, `{"v": ${v}}`), `${JSON.stringify(schema)} takes ${v}`)
    for (const v of bad) t.notOk(await accepts(checked, `{"v": ${v}}`), `${JSON.stringify(schema)} refuses ${v}`)
  }

  // bounds next to enum cannot be replaced whole: a 400, never XGrammar's own (wrong) range
  const refused = await accepts({type: 'integer', minimum: 0, maximum: 120, enum: [5, 125]}, '125').then(
    () => undefined,
    (e: unknown) => e as {status?: number},
  )
  t.equal(refused?.status, 400, 'integer bounds next to enum: 400')

  // a forced call whose argument is a bounded integer: the tool grammar carries the same exact range
  const tool = enforceableSchema(obj(int(0, 120)), 'tools') as Record<string, unknown>
  const calls = {
    json: (v: string) => `<tool_call>\n{"name": "set", "arguments": {"v": ${v}}}\n</tool_call>`,
    xml: (v: string) => `<tool_call>\n<function=set>\n<parameter=v>\n${v}\n</parameter>\n</function>\n</tool_call>`,
  }
  for (const format of ['json', 'xml'] as const) {
    const call = (v: string) =>
      acceptsSpec({type: 'structural', format: toolCallGrammar(format, [{name: 'set', schema: tool}], {type: 'calls', stopAfterFirst: true})}, calls[format](v), false)
    for (const v of ['0', '120', '99']) t.ok(await call(v), `${format} call takes ${v}`)
    for (const v of ['121', '129', '-1']) t.notOk(await call(v), `${format} call refuses ${v}`)
  }
})
