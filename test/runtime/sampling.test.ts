// The grammar hook of the TypeScript sampler: maskLogits takes XGrammar's bitmask layout (bit id & 31 of
// word id >> 5) and leaves exactly the allowed tokens; greedy and sampled choices never leave them.
import t from 'tap'
import {maskLogits, sampleToken, samplingParams, GREEDY} from '../../src/runtime/sampling.js'
import {Rng} from '../../src/runtime/rng.js'

function maskOf(vocab: number, allowed: number[]): Int32Array {
  const m = new Int32Array(Math.ceil(vocab / 32))
  for (const id of allowed) m[id >> 5]! |= 1 << (id & 31)
  return m
}

t.test('only allowed ids keep their logits', async t => {
  const vocab = 100 // not a multiple of 32: the last word is partial
  const logits = Float32Array.from({length: vocab}, (_, i) => i / 10)
  const allowed = [0, 31, 32, 63, 64, 99]
  const out = maskLogits(logits, maskOf(vocab, allowed))
  for (let i = 0; i < vocab; i++) t.equal(out[i], allowed.includes(i) ? logits[i] : -Infinity, `id ${i}`)
  t.equal(maskLogits(logits, undefined), logits, 'no mask: the row itself')
  t.equal(logits[5], 0.5, 'the input is not changed')
  const full = maskLogits(logits, new Int32Array(4).fill(-1))
  t.same([...full], [...logits], 'all bits set: everything allowed')
})

t.test('sampling never picks a disallowed token', async t => {
  const vocab = 64
  const rng = new Rng(3)
  const allowed = [7, 40, 41]
  const mask = maskOf(vocab, allowed)
  for (let i = 0; i < 200; i++) {
    const logits = Float32Array.from({length: vocab}, () => rng.next() * 10)
    t.ok(allowed.includes(sampleToken(maskLogits(logits, mask), samplingParams({temperature: 1.5, topP: 0.95}), rng, [], []).token))
    t.ok(allowed.includes(sampleToken(maskLogits(logits, mask), GREEDY, rng, [], []).token))
  }
})
