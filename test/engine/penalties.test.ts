// Penalties through the engine: the counts a sequence keeps (src/engine/penalties.ts) reach the native sampler
// at every step, so a generation with repetition / presence / frequency penalties (greedy and seeded) is
// token for token what the reference sampler picks from the same logits with the prompt and output so far.
import t from 'tap'
import {NativeModel} from '../../src/native/native-model.js'
import {Engine} from '../../src/engine/engine.js'
import {native} from '../../src/native/native.js'
import {samplingParams, type SamplingParams} from '../../src/engine/sampling.js'
import {PenaltyCounts} from '../../src/engine/penalties.js'
import {Rng} from '../../src/engine/rng.js'
import {sampleRow} from '../helpers/sampling-reference.js'
import {synthFixture} from '../helpers/packages.js'

t.test('PenaltyCounts: prompt tokens count 0, output tokens their occurrences', async t => {
  const p = new PenaltyCounts(Int32Array.of(5, 6, 5))
  p.add(6)
  p.add(9)
  p.add(9)
  const {ids, counts} = p.get()
  const m = new Map(Array.from(ids, (id, i) => [id, counts[i]]))
  t.same([...m].sort((a, b) => a[0] - b[0]), [[5, 0], [6, 1], [9, 2]])
})

t.test('generation with penalties equals the reference applied step by step', async t => {
  const dir = await synthFixture('tiny-hybrid', 'q4')
  const prompt = Int32Array.of(5, 17, 99, 3, 17, 42)
  const cases: SamplingParams[] = [
    samplingParams({temperature: 0, repetitionPenalty: 1.4}),
    samplingParams({temperature: 0, presencePenalty: 1.2, frequencyPenalty: 0.8}),
    samplingParams({temperature: 0.9, topP: 0.9, repetitionPenalty: 1.2, frequencyPenalty: 0.5, seed: 3}),
  ]
  // plain decodes, whose seeded draws follow the RNG stream one uniform per token (with the draft, greedy output
  // with penalties equals this: test/engine/spec.test.ts)
  const m = await NativeModel.open(dir, 256, {threads: 2, draft: false})
  t.teardown(() => m.close())
  const e = new Engine(m)
  const h = await native.openModel(dir, {threads: 2, draft: false})
  t.teardown(() => native.closeModel(h))
  const generate = async (sampling: SamplingParams) => {
    const out: number[] = []
    for await (const ev of e.generate({prompt, maxTokens: 12, sampling, stopTokenIds: []})) if (ev.type === 'token') out.push(ev.token)
    return out
  }
  const plain = await generate(samplingParams({temperature: 0}))
  let changed = 0
  for (const sampling of cases) {
    const got = await generate(sampling)
    // the reference: logits of every prefix, penalties from the prompt and the output so far
    const seq = native.createSequence(h, {maxLength: 64})
    const rng = new Rng(sampling.seed ?? 0)
    const counts = new PenaltyCounts(prompt)
    const want: number[] = []
    let feed = prompt
    for (let i = 0; i < 12; i++) {
      const [{logits}] = await native.step(h, [{seq, tokens: feed, logits: 'last'}])
      const row = sampling.temperature > 0 ? {uniform: rng.next()} : {}
      const tok = sampleRow(logits!, {params: sampling, rows: [row], penalties: counts.get()}, row).token
      want.push(tok)
      counts.add(tok)
      feed = Int32Array.of(tok)
    }
    native.freeSequence(h, seq)
    t.same(got, want, JSON.stringify(sampling))
    if (sampling.temperature === 0 && want.join() !== plain.join()) changed++
  }
  t.ok(changed > 0, 'the penalties change greedy output here, so dropping them would show')
})
