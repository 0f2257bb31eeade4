// The closing path (src/grammar/closing.ts): from anywhere inside a random walk through a JSON Schema's grammar (a
// model with random weights, cut at a random length), the path it finds takes the grammar to a complete value, which
// validates; the path is no longer than the characters it writes, and packed by the tokenizer into fewer tokens.
import t from 'tap'
import {decider} from '../helpers/grammar-accepts.js'
import {seeded, walk} from '../helpers/grammar-walk.js'
import {invalidity} from '../helpers/ajv.js'
import {SCHEMAS} from '../helpers/schemas.js'
import {allows} from '../../src/grammar/matcher.js'
import {jsonStringState} from '../../src/grammar/closing.js'

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
