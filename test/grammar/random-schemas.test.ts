// Random JSON Schemas (seeded) over the keywords the policy accepts — nested objects with odd property names,
// additional and required keys, arrays with bounds and prefix items, anyOf, enums and consts with escapes, numeric
// ranges, lengths, patterns, formats — compiled for the default package's vocabulary and walked at random over their
// own masks, short tokens and stop tokens favoured so walks end: every walk that ends is JSON that ajv accepts. A
// schema the policy or the engine refuses must be a 400. The fixed list in helpers/schemas.ts holds what is known to
// matter; this finds what nobody listed (the escaped property names, the declared keys through additionalProperties,
// the raw quotes of patterns were found this way). Tool schemas go through both call forms and are read back by the
// family's parser (enum values holding a closing marker of the XML form were found this way).
import t from 'tap'
import {allows, type GrammarMatcherState} from '../../src/grammar/matcher.js'
import {decider, type Decider} from '../helpers/grammar-accepts.js'
import {seeded} from '../helpers/grammar-walk.js'
import {invalidity} from '../helpers/ajv.js'
import {toolCallGrammar} from '../../models/qwen3_5/tool-grammar.js'
import {OutputParser} from '../../models/qwen3_5/output.js'
import type {JsonSchema} from '../../models/qwen3_5/template.js'

const DEFAULT = new URL('../../packages/default/', import.meta.url).pathname
const SCHEMAS = 60
const TOOLS = 12
// another seed explores other schemas: SPLASH_SCHEMA_SEED=N npx tap test/grammar/random-schemas.test.ts
const SEED = Number(process.env.SPLASH_SCHEMA_SEED ?? 20261205)

type Json = null | boolean | number | string | Json[] | {[k: string]: Json}

const NAMES = ['a', 'b', 'x_y', 'with space', 'ü', 'k"q', 'n\\m', 'tab\tx', '1', '$ref', 'type', 'properties', '']
const STRINGS = ['', 'a', 'A b', 'é', '"', '\\', '\n', '😀', 'null', '0', 'xxx', 'x\n</parameter>\ny']
const PATTERNS = ['^[a-c]+$', '^\\d{2,3}$', '^(ab|c)*d$', 'x', '^.*$', '^[^"]*$', '^\\w+@\\w+$', '^[^,]+$', '^\\s?z$', '^[ -~]{0,3}$', '^[a-zA-Z ]+$', '^[α-ω0-9]{1,4}$', '^a b$']
const FORMATS = ['date', 'time', 'date-time', 'email', 'uri', 'uri-reference', 'ipv4', 'ipv6', 'uuid', 'duration']

function generator(rnd: () => number) {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)]!
  const leaf = (): Json =>
    pick<() => Json>([
      () => ({type: pick(['string', 'integer', 'number', 'boolean', 'null'])}),
      () => ({type: 'string', maxLength: Math.floor(rnd() * 5)}),
      () => ({type: 'string', minLength: 1, maxLength: 3}),
      () => ({type: 'integer', minimum: -3, maximum: Math.floor(rnd() * 200)}),
      () => ({type: 'number', minimum: -1.5, exclusiveMaximum: 2}),
      () => ({type: 'integer', exclusiveMinimum: -10, exclusiveMaximum: 10}),
      () => ({enum: [pick(STRINGS), pick(STRINGS), 1, null, true]}),
      () => ({const: pick<Json>([pick(STRINGS), 0, -0.5, false, null, [1, 'a'], {k: 'v'}])}),
      () => ({type: 'string', pattern: pick(PATTERNS)}),
      () => ({type: 'string', format: pick(FORMATS)}),
      () => ({type: ['string', 'null']}),
      () => ({type: ['integer', 'null'], minimum: 0, maximum: 5}),
      () => ({}),
      () => true,
    ])()
  const node = (depth: number): Json => {
    const r = rnd()
    if (depth > 3 || r < 0.35) return leaf()
    if (r < 0.6) {
      const properties: {[k: string]: Json} = {}
      for (let n = Math.floor(rnd() * 4); n > 0; n--) properties[pick(NAMES)] = node(depth + 1)
      const s: {[k: string]: Json} = {type: 'object', properties, required: Object.keys(properties).filter(() => rnd() < 0.5)}
      const extra = rnd()
      if (extra < 0.4) s.additionalProperties = false
      else if (extra < 0.55) s.additionalProperties = node(depth + 1)
      else if (extra < 0.6) s.additionalProperties = true
      if (rnd() < 0.1) s.required = [...(s.required as string[]), pick(NAMES)]
      if (rnd() < 0.1) s.patternProperties = {'^p[0-9]$': node(depth + 1)}
      return s
    }
    if (r < 0.8) {
      const s: {[k: string]: Json} = {type: 'array', items: node(depth + 1)}
      if (rnd() < 0.5) s.maxItems = 1 + Math.floor(rnd() * 3)
      if (rnd() < 0.3) s.minItems = 1
      if (rnd() < 0.2) {
        s.prefixItems = [node(depth + 1)]
        if (rnd() < 0.5) s.items = false
      }
      return s
    }
    return {anyOf: [node(depth + 1), node(depth + 1)]}
  }
  return {pick, node}
}

/** A seeded walk over a matcher's masks, short tokens, closing characters and stop tokens favoured; the matcher is rolled back. */
async function walkTo(m: GrammarMatcherState, d: Decider, rnd: () => number, pick: <T>(xs: readonly T[]) => T, budget: number): Promise<string | undefined> {
  const ids: number[] = []
  let stopped = false
  for (let step = 0; step < budget && !stopped; step++) {
    const mask = await m.nextMask()
    const allowed: number[] = []
    for (let id = 0; id < d.size; id++) if (allows(mask, id)) allowed.push(id)
    const stops = allowed.filter(id => m.stopTokenIds.includes(id))
    const text = (id: number) => d.tokenizer.decode([id])
    const closing = allowed.filter(id => !m.stopTokenIds.includes(id) && /^(\n|"|<|,|\}|\])/.test(text(id)))
    const short = allowed.filter(id => !m.stopTokenIds.includes(id) && text(id).length <= 2)
    const next =
      stops.length > 0 && rnd() < 0.75 ? stops[0]! : closing.length > 0 && rnd() < 0.2 ? pick(closing) : short.length > 0 && rnd() < 0.6 ? pick(short) : pick(allowed)
    if (!m.accept(next)) throw new Error(`the grammar refused token ${next} from its own mask`)
    if (m.stopTokenIds.includes(next)) stopped = true
    else ids.push(next)
  }
  m.rollBack(ids.length + (stopped ? 1 : 0))
  return stopped ? d.tokenizer.decode(ids) : undefined
}

t.test(`${SCHEMAS} random schemas: every ended walk validates, every refusal is a 400`, async t => {
  const d = await decider(DEFAULT)
  const rnd = seeded(SEED)
  const {pick, node} = generator(rnd)
  let compiled = 0
  let ended = 0
  for (let k = 0; k < SCHEMAS; k++) {
    const schema = {type: 'object', properties: {v: node(0)}, required: ['v'], additionalProperties: false}
    let m
    try {
      m = await d.grammars.matcher({type: 'json_schema', schema, param: 'response_format'})
    } catch (e) {
      t.equal((e as {status?: number}).status, 400, `refused with a 400: ${JSON.stringify(schema)}: ${(e as Error).message}`)
      continue
    }
    compiled++
    for (let w = 0; w < 3; w++) {
      const text = await walkTo(m, d, rnd, pick, 80)
      if (text === undefined) continue
      ended++
      const bad = invalidity(schema, text)
      if (bad) t.fail(`${JSON.stringify(schema)}\n${bad}`)
    }
    m.dispose()
  }
  t.ok(compiled >= SCHEMAS * 0.75, `most schemas compile (${compiled} of ${SCHEMAS})`)
  t.ok(ended >= compiled, `most walks end (${ended})`)
})

t.test(`${TOOLS} random tool schemas in both call forms: every ended call reads back as valid arguments`, async t => {
  const d = await decider(DEFAULT)
  const rnd = seeded(SEED + 1)
  const {pick, node} = generator(rnd)
  let ended = 0
  for (let k = 0; k < TOOLS; k++) {
    const properties: {[k: string]: Json} = {}
    for (let n = 1 + Math.floor(rnd() * 3); n > 0; n--) properties[pick(NAMES.filter(x => x !== ''))] = node(3)
    const schema = {type: 'object', properties, required: Object.keys(properties).filter(() => rnd() < 0.6)}
    for (const format of ['xml', 'json'] as const) {
      let m
      try {
        const checked = d.grammars.checkSchema(schema, 'tools')
        m = await d.grammars.matcher({type: 'structural', format: toolCallGrammar(format, [{name: 'act', schema: checked}], {type: 'calls', stopAfterFirst: true})})
      } catch (e) {
        t.equal((e as {status?: number}).status, 400, `${format}: refused with a 400: ${JSON.stringify(schema)}: ${(e as Error).message}`)
        continue
      }
      for (let w = 0; w < 3; w++) {
        const text = await walkTo(m, d, rnd, pick, 200)
        if (text === undefined) continue
        ended++
        const parser = new OutputParser({toolFormat: format, tools: [{type: 'function', function: {name: 'act', parameters: schema as JsonSchema}}], startInReasoning: false})
        const end = [...parser.push(text), ...parser.finish('stop')].find(e => e.type === 'tool_call_end')
        if (end?.type !== 'tool_call_end') t.fail(`${format}: no call parsed from ${JSON.stringify(text)} (${JSON.stringify(schema)})`)
        else {
          const bad = invalidity(schema, end.arguments)
          if (bad) t.fail(`${format} ${JSON.stringify(schema)}\n${bad}\n${JSON.stringify(text)}`)
        }
      }
      m.dispose()
    }
  }
  t.ok(ended >= TOOLS, `most calls end (${ended})`)
})
