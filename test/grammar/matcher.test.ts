// The mask helpers of src/grammar/matcher.ts against a plain count of the mask's bits.
import t from 'tap'
import {allows, soleAllowed} from '../../src/grammar/matcher.js'
import {seeded} from '../helpers/grammar-walk.js'

function maskOf(words: number, ids: number[]): Int32Array {
  const m = new Int32Array(words)
  for (const id of ids) m[id >> 5]! |= 1 << (id & 31)
  return m
}

t.test('soleAllowed gives the one allowed token, or -1 for none or several', async t => {
  const words = 512
  t.equal(soleAllowed(new Int32Array(words)), -1, 'none')
  for (const id of [0, 1, 31, 32, 63, 5000, 16383]) {
    const m = maskOf(words, [id])
    t.equal(soleAllowed(m), id, `only ${id}`)
    t.ok(allows(m, id), `${id} is allowed`)
  }
  for (const ids of [[0, 1], [30, 31], [31, 32], [7, 16383], [100, 101, 102]]) t.equal(soleAllowed(maskOf(words, ids)), -1, `several: ${ids}`)
  // random masks: the helper agrees with a count of the bits
  const rand = seeded(3)
  for (let k = 0; k < 200; k++) {
    const ids = Array.from({length: Math.floor(rand() * 3)}, () => Math.floor(rand() * words * 32))
    const m = maskOf(words, ids)
    const set = [...new Set(ids)]
    t.equal(soleAllowed(m), set.length === 1 ? set[0] : -1)
  }
})
