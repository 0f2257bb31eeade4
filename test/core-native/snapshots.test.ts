// States kept inside a step (StepItem.snapshots, core-native/model/state/saved_state.cpp): one prefill step that keeps
// the GDN and conv state at lengths inside it gives, at each of them, the state a step ending there gives, bit for
// bit, and the same logits as those steps; a saved prefix made of such a state restores into a sequence that then
// continues as the original. Kept states last until the sequence's next step; bad lengths are refused before the
// step runs.
import t from 'tap'
import {native, type ModelHandle} from '../../src/native/native.js'
import {GREEDY} from '../../src/engine/sampling.js'
import {writeTinyPackage} from './helpers/tiny-package.js'

const root = t.testdir({})
const prompt = (n: number, V: number) => Int32Array.from({length: n}, (_, i) => (i * 37 + 11) % V)
// a saved state as one string (tap's deep comparison of long arrays is far too slow): length, draft flag, floats
const data = (h: ModelHandle, id: number) => {
  const p = native.exportSaved(h, id)
  if (p.kind !== 'state') throw new Error('not a state')
  return {length: p.length, draft: p.draft, floats: digest(p.data), window: digest(p.window)}
}
const digest = (a: Float32Array) => `${a.length}:${Buffer.from(a.buffer, a.byteOffset, a.byteLength).toString('base64')}`

for (const [name, open] of [
  ['a tiny hybrid package', async () => (await writeTinyPackage(`${root}/hybrid`, 'hybrid', 'q4', 3)).dir],
  ['the default package (with its draft)', async () => 'packages/default'],
] as const) {
  t.test(`${name}: one step keeping states equals steps ending at those lengths`, async t => {
    const h = await native.openModel(await open(), {threads: 2})
    t.teardown(() => native.closeModel(h))
    const V = native.modelInfo(h).vocabSize
    const draft = !!native.modelInfo(h).draft
    const P = prompt(70, V)
    const cuts = [17, 40, 69]

    // the same prompt in steps that end at the cuts, each state saved there
    const parts = native.createSequence(h, {maxLength: 128})
    const partStates: number[] = []
    let at = 0
    let partLogits: Float32Array | null = null
    for (const end of [...cuts, P.length]) {
      const [r] = await native.step(h, [{seq: parts, tokens: P.subarray(at, end), logits: end === P.length ? 'last' : 'none', capture: draft}])
      if (draft) await native.draft(h, [{seq: parts, token: P[0]!, n: 0}])
      if (end < P.length) partStates.push(native.saveState(h, parts))
      partLogits = r!.logits
      at = end
    }

    const whole = native.createSequence(h, {maxLength: 128})
    const [r] = await native.step(h, [{seq: whole, tokens: P, logits: 'last', capture: draft, snapshots: cuts}])
    t.equal(digest(r!.logits!), digest(partLogits!), 'the last logits are those of the steps ending at the cuts')
    t.equal(native.sequenceLength(h, whole), P.length)
    if (draft) await native.draft(h, [{seq: whole, token: P[0]!, n: 0}])
    const kept = cuts.map(k => native.saveState(h, whole, k))
    for (const [i, k] of cuts.entries()) {
      const a = data(h, kept[i]!)
      const b = data(h, partStates[i]!)
      t.same(a, b, `the state kept at ${k} is the state of a step ending there (length, draft context, floats)`)
    }
    t.throws(() => native.saveState(h, whole, cuts[0]), {code: 'invalid_argument'}, 'a kept state is taken once')

    // a prefix restored from a kept state continues as a sequence that stepped to its length in the same segments
    // (the chunked GDN's sums follow where a call starts, so a prompt split elsewhere gives other last bits)
    const k = cuts[1]!
    const again = native.createSequence(h, {maxLength: 128})
    await native.step(h, [{seq: again, tokens: P.subarray(0, cuts[0]), logits: 'none', capture: draft}])
    await native.step(h, [{seq: again, tokens: P.subarray(cuts[0], k), logits: 'none', capture: draft}])
    const rows = native.saveRows(h, whole, 0, k)
    const state = native.saveState(h, whole, P.length) // the current length: the state after the step
    const restored = native.createSequence(h, {maxLength: 128})
    t.equal(native.restoreSequence(h, restored, [rows], kept[1]!), draft, draft ? 'the draft context comes back with it' : 'no draft')
    const next = Int32Array.of(5, 9, 1)
    const cont = async (seq: number) => {
      const [x] = await native.step(h, [{seq, tokens: next, logits: 'all', capture: draft}])
      if (!draft) return {out: digest(x!.logits!)}
      const [d] = await native.draft(h, [{seq, token: 3, n: 4, logits: true, sample: {params: GREEDY, rows: Array.from({length: 4}, () => ({}))}}])
      return {out: digest(x!.logits!), draft: d!.logits!}
    }
    const a = await cont(restored)
    const b = await cont(again)
    t.equal(a.out, b.out, 'a restored kept state continues as a sequence that stepped to its length: the same logits')
    if (draft) t.equal(digest(a.draft!), digest(b.draft!), 'and its draft drafts as that sequence\'s, bit for bit')
    for (const id of [rows, state, ...kept, ...partStates]) native.freeSaved(h, id)
    for (const s of [parts, whole, again, restored]) native.freeSequence(h, s)
    t.same(native.savedStats(h), {...native.savedStats(h), sequences: 0, rows: 0, states: 0, bytes: 0}, 'nothing left')
  })
}

t.test('kept states: refused lengths, lifetime', async t => {
  const pkg = await writeTinyPackage(`${root}/life`, 'hybrid', 'q4', 5)
  const h = await native.openModel(pkg.dir, {threads: 2})
  t.teardown(() => native.closeModel(h))
  const V = native.modelInfo(h).vocabSize
  const seq = native.createSequence(h, {maxLength: 64})
  const P = prompt(10, V)
  for (const snapshots of [[0], [10], [11], [5, 3], [4, 4], [-1], [2.5], 'x'])
    await t.rejects(native.step(h, [{seq, tokens: P, snapshots: snapshots as never}]), {code: 'invalid_argument'}, `snapshots ${JSON.stringify(snapshots)}`)
  await t.rejects(native.step(h, [{seq, tokens: P.subarray(0, 3), verify: true, snapshots: [1]}]), {code: 'invalid_argument'}, 'not in a verify pass')
  t.equal(native.sequenceLength(h, seq), 0, 'refused steps change nothing')
  await native.step(h, [{seq, tokens: P, logits: 'none', snapshots: [3, 7]}])
  t.throws(() => native.saveState(h, seq, 5), {code: 'invalid_argument'}, 'no state at a length the step did not keep')
  t.throws(() => native.saveState(h, seq, 11), {code: 'invalid_argument'}, 'nor past the sequence')
  await native.step(h, [{seq, tokens: Int32Array.of(1), logits: 'none'}])
  t.throws(() => native.saveState(h, seq, 7), {code: 'invalid_argument'}, 'kept states end with the next step')
  await native.step(h, [{seq, tokens: Int32Array.of(2, 3, 4), logits: 'none', snapshots: [12, 13]}])
  native.truncateSequence(h, seq, 0)
  t.throws(() => native.saveState(h, seq, 12), {code: 'invalid_argument'}, 'a truncation below them drops them')
  await native.step(h, [{seq, tokens: P, logits: 'none', snapshots: [4]}])
  native.freeSequence(h, seq) // with a kept state not taken
  t.equal(native.savedStats(h).sequences, 0)

  // a model without linear layers keeps only the length; a truncation keeps those at or below it
  const q = await writeTinyPackage(`${root}/plain`, 'qwen3', 'q4', 7)
  const hq = await native.openModel(q.dir, {threads: 2})
  t.teardown(() => native.closeModel(hq))
  const s2 = native.createSequence(hq, {maxLength: 64})
  await native.step(hq, [{seq: s2, tokens: P, logits: 'none', snapshots: [3, 8]}])
  native.truncateSequence(hq, s2, 6)
  t.throws(() => native.saveState(hq, s2, 8), {code: 'invalid_argument'}, 'above the new length: dropped')
  const st = native.saveState(hq, s2, 3)
  t.equal(data(hq, st).length, 3, 'at or below it: kept')
  native.freeSaved(hq, st)
})
