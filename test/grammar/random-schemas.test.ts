// Random JSON Schemas (seeded) over the keywords the policy accepts — nested objects with odd property names,
// additional and required keys, arrays with bounds and prefix items, anyOf, enums and consts with escapes, numeric
// ranges, lengths, patterns, formats — compiled for the default package's vocabulary and walked at random over their
// own masks, short tokens and stop tokens favoured so walks end: every walk that ends is JSON that ajv accepts. A
// schema the policy or the engine refuses must be a 400. The fixed list in helpers/schemas.ts holds what is known to
// matter; this finds what nobody listed (the escaped property names, the declared keys through additionalProperties,
// the raw quotes of patterns were found this way).
import t from 'tap'
import {allows} from '../../src/grammar/matcher.js'
import {decider} from '../helpers/grammar-accepts.js'
import {seeded} from '../helpers/grammar-walk.js'
import {invalidity} from '../helpers/ajv.js'

const DEFAULT = new URL('../../packages/default/', import.meta.url).pathname
const SCHEMAS = 60
// another seed explores other schemas: SPLASH_SCHEMA_SEED=N npx tap test/grammar/random-schemas.test.ts
const SEED = Number(process.env.SPLASH_SCHEMA_SEED ?? 20261205)

type Json = null | boolean | number | string | Json[] | {[k: string]: Json}

const NAMES = ['a', 'b', 'x_y', 'with space', 'ü', 'k"q', 'n\\m', 'tab\tx', '1', '$ref', 'type', 'properties', '']
const STRINGS = ['', 'a', 'A b', 'é', '"', '\\', '\n', '😀', 'null', '0', 'xxx']
const PATTERNS = ['^[a-c]+$', '^\\d{2,3}$', '^(ab|c)*d$', 'x', '^.*$', '^[^"]*$', '^\\w+@\\w+$', '^[^,]+$', '^\\s?z$', '^[ -~]{0,3}$']
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
      const ids: number[] = []
      let stopped = false
      for (let step = 0; step < 80 && !stopped; step++) {
        const mask = await m.nextMask()
        const allowed: number[] = []
        for (let id = 0; id < d.size; id++) if (allows(mask, id)) allowed.push(id)
        const stops = allowed.filter(id => m.stopTokenIds.includes(id))
        const short = allowed.filter(id => !m.stopTokenIds.includes(id) && d.tokenizer.decode([id]).length <= 2)
        const next = stops.length > 0 && rnd() < 0.7 ? stops[0]! : short.length > 0 && rnd() < 0.6 ? pick(short) : pick(allowed)
        if (!m.accept(next)) t.fail(`the grammar refused token ${next} from its own mask`)
        if (m.stopTokenIds.includes(next)) stopped = true
        else ids.push(next)
      }
      m.rollBack(ids.length + (stopped ? 1 : 0))
      if (!stopped) continue
      ended++
      const text = d.tokenizer.decode(ids)
      const bad = invalidity(schema, text)
      if (bad) t.fail(`${JSON.stringify(schema)}\n${bad}`)
    }
    m.dispose()
  }
  t.ok(compiled >= SCHEMAS * 0.75, `most schemas compile (${compiled} of ${SCHEMAS})`)
  t.ok(ended >= compiled, `most walks end (${ended})`)
})
