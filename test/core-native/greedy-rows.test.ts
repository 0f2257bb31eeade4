// Greedy rows chosen on the backend (the argmax_rows slot; core-native/model/step/forward.cpp and draft.cpp): a step's
// or draft pass's items that need nothing but each row's argmax get their ids from the backend instead of their
// logits rows. The tokens must be the host sampler's, with the slot on and off ($SPLASH_DEVICE_ARGMAX=0), for plain,
// verify and batched steps that mix such items with others, and for greedy draft passes.
import t from 'tap'
import {native, type StepItem} from '../../src/native/native.js'
import {samplingParams} from '../../src/engine/sampling.js'
import {synthFixture} from '../helpers/packages.js'

async function open(dir: string, onBackend: boolean) {
  if (!onBackend) process.env.SPLASH_DEVICE_ARGMAX = '0'
  try {
    return await native.openModel(dir, {threads: 2})
  } finally {
    delete process.env.SPLASH_DEVICE_ARGMAX
  }
}

function argmax(row: Float32Array): number {
  let best = 0
  for (let i = 1; i < row.length; i++) if (row[i] > row[best]) best = i
  return best
}

t.test('greedy rows chosen on the backend are the host sampler\'s, in steps and draft passes', async t => {
  const dir = await synthFixture('tiny-hybrid', 'q4')
  const models = [await open(dir, true), await open(dir, false)]
  t.teardown(() => models.forEach(h => native.closeModel(h)))
  const greedy = samplingParams({temperature: 0})
  const warm = samplingParams({temperature: 0.7})
  const prompt = Int32Array.of(5, 17, 99, 3, 41, 7)
  const runs = []
  for (const h of models) {
    const V = native.modelInfo(h).vocabSize
    const [a, b, c] = [0, 1, 2].map(() => native.createSequence(h, {maxLength: 96}))
    const got: number[][] = []
    // a prompt with three greedy rows, then a verify step of four
    const [p] = await native.step(h, [{seq: a, tokens: prompt, logits: 'none', capture: true, sample: {params: greedy, rows: [{}, {}, {}]}}])
    got.push(p.sampled!.map(x => x.token))
    const [v] = await native.step(h, [{seq: a, tokens: Int32Array.of(8, 9, 10, 11), logits: 'none', capture: true, verify: true, sample: {params: greedy, rows: [{}, {}, {}, {}]}}])
    got.push(v.sampled!.map(x => x.token))
    // a batch: greedy-only, greedy with its last logits row asked for, sampled, and no rows at all
    await native.step(h, [{seq: b, tokens: prompt, logits: 'none'}, {seq: c, tokens: prompt, logits: 'none'}])
    const items: StepItem[] = [
      {seq: a, tokens: Int32Array.of(12, 13), logits: 'none', capture: true, sample: {params: greedy, rows: [{}, {}]}},
      {seq: b, tokens: Int32Array.of(12), logits: 'last', sample: {params: greedy, rows: [{}]}},
      {seq: c, tokens: Int32Array.of(12, 14, 15), logits: 'none', sample: {params: warm, rows: [{uniform: 0.3}, {uniform: 0.8}]}},
    ]
    const batch = await native.step(h, items)
    for (const r of batch) got.push(r.sampled!.map(x => x.token))
    t.equal(argmax(batch[1].logits!), batch[1].sampled![0].token, 'the logits row asked for comes back with its token')
    // greedy draft passes: ids only, and with the logits asked for (the host's choice)
    const [d] = await native.draft(h, [{seq: a, token: 16, n: 5, sample: {params: greedy, rows: [{}, {}, {}, {}, {}]}}])
    t.equal(d.logits, null)
    got.push(d.sampled!.map(x => x.token))
    const [dl] = await native.draft(h, [{seq: a, token: 16, n: 5, sample: {params: greedy, rows: [{}, {}, {}, {}, {}]}, logits: true}])
    t.same(dl.sampled!.map(x => x.token), d.sampled!.map(x => x.token), 'the same draft with its logits')
    t.same(d.sampled!.map(x => x.token), [0, 1, 2, 3, 4].map(r => argmax(dl.logits!.subarray(r * V, (r + 1) * V))))
    for (const row of got) for (const id of row) t.ok(id >= 0 && id < V)
    runs.push(got)
  }
  t.same(runs[0], runs[1], 'the backend\'s choice equals the host\'s')
})
