// JSON Schema `pattern` through XGrammar, decided string by string: every string up to a small length over an
// alphabet that exercises the pattern, compiled for the default package's vocabulary, against JavaScript's RegExp.
// XGrammar must never accept a string the RegExp refuses; where it refuses one the RegExp accepts, that is the
// whole-string reading (an unanchored pattern or a top-level `|` beside anchors is taken as `^(…)$`), which keeps
// outputs valid.
import t from 'tap'
import {enforceableSchema} from '../../src/grammar/schema-policy.js'
import {decider} from '../helpers/grammar-accepts.js'
import {strings} from '../helpers/strings.js'

const DEFAULT = new URL('../../packages/default/', import.meta.url).pathname

// [pattern, alphabet, max length, strings the whole-string reading leaves out (RegExp accepts, XGrammar refuses)]
const CASES: Array<[string, string, number, boolean]> = [
  ['^[a-c]{2,4}$', 'abcd', 4, false],
  ['^(ab|c){1,3}$', 'abc', 5, false],
  ['^x?y+z*$', 'xyz', 4, false],
  ['^[0-9]{2}-[0-9]$', '09-', 4, false],
  ['^(a|bc)+$', 'abc', 4, false],
  ['^a{2,}$', 'ab', 4, false],
  ['^(x(y|z)){2}$', 'xyz', 4, false],
  ['^\\d{2}$', '0a9', 3, false],
  ['^\\w+$', 'a_-0', 3, false],
  ['^[A-Z][a-z]*$', 'Aab', 3, false],
  ['^(a|b)?c$', 'abc', 3, false],
  ['^[ab]{0,2}c?$', 'abc', 4, false],
  ['^a*b{2}$', 'ab', 4, false],
  ['^(a{2}|b){2}$', 'ab', 4, false],
  ['^a.c$', 'abc', 3, false],
  ['^[a-]+$', 'a-b', 3, false],
  ['^\\.a$', '.ab', 3, false],
  ['^(ab)*$', 'ab', 4, false],
  ['^(a|)b$', 'ab', 3, false],
  ['abc', 'abc', 4, true],
  ['^a|b$', 'ab', 3, true],
]

t.test('patterns: XGrammar accepts no string the RegExp refuses', async t => {
  const d = await decider(DEFAULT)
  for (const [pattern, alphabet, max, narrower] of CASES) {
    const schema = enforceableSchema({type: 'string', pattern}, 'x')
    const re = new RegExp(pattern, 'u')
    let wider = 0
    let left = 0
    let n = 0
    for (const s of strings(alphabet, max)) {
      n++
      const want = re.test(s)
      const got = await d.acceptsJson(schema, JSON.stringify(s))
      if (got && !want) wider++
      if (!got && want) left++
    }
    t.equal(wider, 0, `${pattern}: nothing outside the pattern (${n} strings)`)
    if (narrower) t.ok(left > 0, `${pattern}: read as a whole-string match (${left} strings left out)`)
    else t.equal(left, 0, `${pattern}: exactly the pattern`)
  }
})
