// JSON Schema `pattern` through XGrammar, decided string by string: every string up to a small length over an
// alphabet that exercises the pattern, compiled for the default package's vocabulary, against JavaScript's RegExp.
// XGrammar must accept exactly the strings the RegExp accepts. Until session 21 it took an unanchored pattern or a
// top-level `|` beside anchors as `^(…)$` (fewer strings), and a caret, a space or a non-ASCII member in a class
// broke the class; json-pattern.ts now writes them so that the two agree. Bounded repetitions of "." and negated
// classes were refused until session 22 (they could end in invalid UTF-8, which the UTF-8 guard now refuses).
import t from 'tap'
import {enforceableSchema} from '../../src/grammar/schema-policy.js'
import {decider} from '../helpers/grammar-accepts.js'
import {strings} from '../helpers/strings.js'

const DEFAULT = new URL('../../packages/default/', import.meta.url).pathname

// [pattern, alphabet, max length]
const CASES: Array<[string, string, number]> = [
  ['^[a-c]{2,4}$', 'abcd', 4],
  ['^(ab|c){1,3}$', 'abc', 5],
  ['^x?y+z*$', 'xyz', 4],
  ['^[0-9]{2}-[0-9]$', '09-', 4],
  ['^(a|bc)+$', 'abc', 4],
  ['^a{2,}$', 'ab', 4],
  ['^(x(y|z)){2}$', 'xyz', 4],
  ['^\\d{2}$', '0a9', 3],
  ['^\\w+$', 'a_-0', 3],
  ['^[A-Z][a-z]*$', 'Aab', 3],
  ['^(a|b)?c$', 'abc', 3],
  ['^[ab]{0,2}c?$', 'abc', 4],
  ['^a*b{2}$', 'ab', 4],
  ['^(a{2}|b){2}$', 'ab', 4],
  ['^a.c$', 'abc', 3],
  ['^[a-]+$', 'a-b', 3],
  ['^\\.a$', '.ab', 3],
  ['^(ab)*$', 'ab', 4],
  ['^(a|)b$', 'ab', 3],
  ['abc', 'abc', 4],
  ['^a|b$', 'ab', 3],
  ['b$', 'ab', 3],
  ['^(|a)b', 'ab', 3],
  ['^[a^]+$', 'a^b', 3],
  ['^[a-b ]+$', 'a b', 3],
  ['^[α-γ]+$', 'αγδa', 2],
  ['^[a-bé]$', 'aéè', 2],
  // bounded repetitions of atoms that match multi-byte characters count characters (utf8-guard.ts keeps them whole)
  ['^.{2}$', 'aé😀', 3],
  ['^[^a]{1,3}$', 'aé日😀', 4],
  ['x\\D{2}', 'x1é😀', 4],
  ['^((.)b){2}$', 'bé😀', 4],
  // "." leaves out U+2028 and U+2029 (the UTF-8 guard keeps them out of every output)
  ['^a.$', 'a\u2028\u2029é', 2],
]

t.test('patterns: XGrammar accepts exactly the strings the RegExp accepts', async t => {
  const d = await decider(DEFAULT)
  for (const [pattern, alphabet, max] of CASES) {
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
    t.equal(left, 0, `${pattern}: everything the pattern takes`)
  }
})
