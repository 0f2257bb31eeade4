// The native sampler (core-native/sampler/) against the sort-everything reference in
// test/helpers/sampling-reference.ts, on random logits (ties included) for every combination of temperature,
// top-k, min-p, top-p, penalties and grammar masks, the mask first or after the filters (SampleRow.retry: each
// of its three paths taken, frequencies following F | allowed); log-probabilities; the grammar mask contract;
// malformed requests are errors, never crashes; and sampling inside a step or draft pass equals sampling its logits.
import t from 'tap'
import {native, type StepItem} from '../../src/native/native.js'
import {samplingParams, type SampleRequest, type SampleRow} from '../../src/engine/sampling.js'
import {Rng} from '../../src/engine/rng.js'
import {distribution, drawThenMask, maskAllows, sampleRow} from '../helpers/sampling-reference.js'
import {CHI_999, chiSquare} from '../helpers/chi-square.js'
import {PenaltyCounts} from '../../src/engine/penalties.js'
import {writeTinyPackage} from './helpers/tiny-package.js'
import {synthFixture} from '../helpers/packages.js'

const root = t.testdir({})

function randomLogits(rng: Rng, V: number, rows: number, ties: boolean): Float32Array {
  const a = new Float32Array(V * rows)
  for (let i = 0; i < a.length; i++) {
    const g = Math.sqrt(-2 * Math.log(1 - rng.next())) * Math.cos(2 * Math.PI * rng.next()) * 3
    a[i] = ties ? Math.round(g * 2) / 2 : g // halves: many equal logits, so the id order matters
  }
  return a
}

function mask(V: number, allow: (id: number) => boolean): Int32Array {
  const m = new Int32Array(Math.ceil(V / 32))
  for (let id = 0; id < V; id++) if (allow(id)) m[id >> 5] |= 1 << (id & 31)
  return m
}

t.test('native sampling equals the reference for every parameter combination', async t => {
  const rng = new Rng(2026)
  let draws = 0
  let mismatches = 0
  for (const V of [77, 1000, 20011]) {
    for (const temperature of [0, 0.5, 1, 1.7])
      for (const topK of [0, 1, 7, 60])
        for (const minP of [0, 0.05, 0.4])
          for (const topP of [1, 0.9, 0.4])
            for (const pen of ['none', 'repetition', 'presence', 'all'] as const)
              for (const masked of ['none', 'half', 'one'] as const) {
                // a large vocabulary (many partition rounds in the weighted selections) on part of the grid
                if (V > 1000 && (temperature === 0 || temperature === 1 || topK === 1 || topK === 7 || pen === 'repetition' || pen === 'presence' || masked === 'one')) continue
                const params = samplingParams({
                  temperature, topK, minP, topP,
                  repetitionPenalty: pen === 'repetition' || pen === 'all' ? 1.3 : 1,
                  presencePenalty: pen === 'presence' || pen === 'all' ? 0.7 : 0,
                  frequencyPenalty: pen === 'all' ? 0.4 : 0,
                })
                const rows = 3
                const logits = randomLogits(rng, V, rows, draws % 2 === 0)
                const ids = Int32Array.from(new Set(Array.from({length: 12}, () => Math.floor(rng.next() * V))))
                const counts = Int32Array.from(ids, (_, i) => i % 3)
                const only = Math.floor(rng.next() * V)
                const allowed = masked === 'none' ? undefined : masked === 'one' ? mask(V, id => id === only) : mask(V, id => (id * 7919) % 3 !== 0)
                const rowReqs: SampleRow[] = Array.from({length: rows}, () => ({uniform: rng.next(), allowed}))
                const req: SampleRequest = {params, rows: rowReqs, logprobs: 4, penalties: pen === 'none' ? undefined : {ids, counts}}
                const got = native.sampleLogits(logits, V, req)
                for (let r = 0; r < rows; r++) {
                  const want = sampleRow(logits.subarray(r * V, (r + 1) * V), req, rowReqs[r])
                  draws++
                  if (got[r].token !== want.token) {
                    mismatches++
                    t.fail(`V ${V} ${JSON.stringify({temperature, topK, minP, topP, pen, masked})} row ${r}: ${got[r].token} vs ${want.token}`)
                  }
                  if (masked === 'one' && got[r].token !== only) t.fail('a single allowed token is forced')
                  if (Math.abs(got[r].logprob! - want.logprob!) > 1e-4) t.fail(`logprob ${got[r].logprob} vs ${want.logprob}`)
                  if (got[r].top!.map(x => x.token).join() !== want.top!.map(x => x.token).join()) t.fail('top logprobs order')
                }
              }
  }
  t.equal(mismatches, 0, `${draws} draws, all equal to the reference`)
})

t.test('the grammar after the filters (retry): equals the reference on each path, for every filter and penalty', async t => {
  const rng = new Rng(77)
  const paths = {first: 0, restricted: 0, masked: 0}
  let draws = 0
  for (const V of [77, 1000])
    for (const temperature of [0.6, 1.3])
      for (const topK of [0, 4])
        for (const [minP, topP] of [[0, 1], [0.05, 0.8], [0, 0.3]])
          for (const pen of ['none', 'all'] as const)
            for (const masked of ['half', 'few', 'one'] as const) {
              const params = samplingParams({temperature, topK, minP, topP, ...(pen === 'all' ? {repetitionPenalty: 1.3, presencePenalty: 0.7, frequencyPenalty: 0.4} : {})})
              const rows = 4
              const logits = randomLogits(rng, V, rows, draws % 2 === 0)
              const ids = Int32Array.from(new Set(Array.from({length: 12}, () => Math.floor(rng.next() * V))))
              const counts = Int32Array.from(ids, (_, i) => i % 3)
              const few = new Set(Array.from({length: 3}, () => Math.floor(rng.next() * V)))
              const only = Math.floor(rng.next() * V)
              const allowed = masked === 'half' ? mask(V, id => (id * 7919) % 2 === 0) : masked === 'few' ? mask(V, id => few.has(id)) : mask(V, id => id === only)
              const rowReqs = Array.from({length: rows}, () => ({uniform: rng.next(), retry: rng.next(), allowed}))
              const req: SampleRequest = {params, rows: rowReqs, logprobs: 2, penalties: pen === 'none' ? undefined : {ids, counts}}
              const got = native.sampleLogits(logits, V, req)
              for (let r = 0; r < rows; r++) {
                const row = logits.subarray(r * V, (r + 1) * V)
                const want = drawThenMask(row, req, rowReqs[r])
                paths[want.path]++
                draws++
                if (got[r].token !== want.token) t.fail(`V ${V} ${JSON.stringify({temperature, topK, minP, topP, pen, masked})} row ${r} (${want.path}): ${got[r].token} vs ${want.token}`)
                if (!maskAllows(allowed, got[r].token)) t.fail('a disallowed token')
                // the first try is the row's draw without the mask: an allowed one is that very token
                const unmasked = native.sampleLogits(row, V, {...req, rows: [{uniform: rowReqs[r].uniform}]})[0]!.token
                if (want.path === 'first' && got[r].token !== unmasked) t.fail('an allowed first draw is the unmasked draw')
                if (want.path !== 'first' && maskAllows(allowed, unmasked)) t.fail('a second draw only after a refused first one')
              }
            }
  t.ok(paths.first > 50 && paths.restricted > 50 && paths.masked > 50, `${draws} draws equal to the reference: ${JSON.stringify(paths)}`)
  // at T = 0 a retry changes nothing: the argmax if allowed, else the masked argmax
  const logits = randomLogits(rng, 300, 1, false)
  const half = mask(300, id => id % 2 === 1)
  const greedy = samplingParams({temperature: 0})
  t.equal(native.sampleLogits(logits, 300, {params: greedy, rows: [{retry: 0.5, allowed: half}]})[0]!.token, native.sampleLogits(logits, 300, {params: greedy, rows: [{allowed: half}]})[0]!.token, 'T = 0: the masked argmax either way')
})

t.test('the grammar after the filters follows F restricted to the allowed tokens (chi-square, V = 40)', async t => {
  const V = 40
  const logits = randomLogits(new Rng(9), V, 1, false)
  const rng = new Rng(123)
  const n = 6000
  for (const params of [samplingParams({temperature: 1}), samplingParams({temperature: 0.9, topK: 12}), samplingParams({temperature: 1.2, topP: 0.95, minP: 0.01})]) {
    const f = distribution(logits, {params, rows: []})
    // allowed: every other token of F's support (from the most likely one), and half of the rest
    const support = [...f.keys()].sort((a, b) => f.get(b)! - f.get(a)!)
    const allowedIds = new Set([...support.filter((_, i) => i % 2 === 1), ...Array.from({length: V}, (_, id) => id).filter(id => !f.has(id) && id % 2 === 0)])
    const allowed = mask(V, id => allowedIds.has(id))
    const fa = [...f].filter(([id]) => allowedIds.has(id))
    const mass = fa.reduce((a, x) => a + x[1], 0)
    const want = new Map(fa.map(([id, p]) => [id, p / mass]))
    const rows = Array.from({length: n}, () => ({uniform: rng.next(), retry: rng.next(), allowed}))
    const big = new Float32Array(V * n)
    for (let r = 0; r < n; r++) big.set(logits, r * V)
    const got = native.sampleLogits(big, V, {params, rows})
    const counts = new Map<number, number>()
    let first = 0
    got.forEach(({token}, r) => {
      counts.set(token, (counts.get(token) ?? 0) + 1)
      if (token === native.sampleLogits(logits, V, {params, rows: [{uniform: rows[r]!.uniform}]})[0]!.token) first++
    })
    const {chi, df} = chiSquare(counts, want, n)
    t.ok(df >= 2 && chi < CHI_999[Math.min(df, 16)]!, `${JSON.stringify(params)}: chi-square ${chi.toFixed(2)} with ${df} df; F(allowed) = ${mass.toFixed(3)}, first draw kept ${first} of ${n}`)
    t.ok(first > 0.2 * n && first < 0.8 * n, 'both draws taken')
    // the second draw needs its own uniform: drawing it with the first one's is not F | allowed, and the test sees it
    const same = new Map<number, number>()
    for (const {token} of native.sampleLogits(big, V, {params, rows: rows.map(r => ({...r, retry: r.uniform}))})) same.set(token, (same.get(token) ?? 0) + 1)
    const wrong = chiSquare(same, want, n)
    t.ok(wrong.chi > CHI_999[Math.min(wrong.df, 16)]!, `the same uniform twice: chi-square ${wrong.chi.toFixed(2)} with ${wrong.df} df`)
  }
})

t.test('sampled frequencies follow the filtered distribution; scoring a given token', async t => {
  const V = 50
  const logits = randomLogits(new Rng(5), V, 1, false)
  const params = samplingParams({temperature: 0.8, topP: 0.9, topK: 20})
  const rng = new Rng(11)
  const n = 4000
  const rows = Array.from({length: n}, () => ({uniform: rng.next()}))
  const big = new Float32Array(V * n)
  for (let r = 0; r < n; r++) big.set(logits, r * V)
  const got = native.sampleLogits(big, V, {params, rows})
  const want = rows.map(row => sampleRow(logits, {params, rows: []}, row).token)
  t.same(got.map(x => x.token), want)
  const scored = native.sampleLogits(logits, V, {params, rows: [{token: 3}], logprobs: 2})
  const ref = sampleRow(logits, {params, rows: [], logprobs: 2}, {token: 3})
  t.equal(scored[0].token, 3)
  t.ok(Math.abs(scored[0].logprob! - ref.logprob!) < 1e-5, 'the logprob of a scored token')
  t.same(native.sampleLogits(logits, V, {params, rows: [{uniform: 0.5}]})[0].logprob, undefined, 'no logprobs unless asked for')
})

t.test('malformed sampling requests are errors, never crashes', async t => {
  const V = 40
  const logits = new Float32Array(V * 2).fill(1)
  const ok = {params: samplingParams({temperature: 1}), rows: [{uniform: 0.5}]}
  const bad = (req: unknown, what: string) => t.throws(() => native.sampleLogits(logits, V, req as SampleRequest), {code: 'invalid_argument'}, what)
  bad({...ok, rows: [{uniform: 0.5, allowed: new Int32Array(2)}]}, 'a mask with no bit set')
  bad({...ok, rows: [{uniform: 0.5, allowed: Int32Array.of(0, 0xff << 8)}]}, 'a mask allowing only ids past the vocabulary')
  bad({...ok, rows: [{uniform: 0.5, allowed: new Int32Array(1)}]}, 'a mask of the wrong length')
  bad({...ok, rows: [{uniform: 0.5, allowed: [1, 2]}]}, 'a mask that is not a typed array')
  bad({...ok, rows: [{}]}, 'no uniform at temperature > 0')
  bad({...ok, rows: [{uniform: 1}]}, 'uniform 1')
  bad({...ok, rows: [{uniform: NaN}]}, 'uniform NaN')
  bad({...ok, rows: [{uniform: 0.5, token: V}]}, 'a scored token outside the vocabulary')
  bad({...ok, rows: [{uniform: 0.5, retry: 1}]}, 'retry 1')
  bad({...ok, rows: [{uniform: 0.5, retry: -0.1}]}, 'negative retry')
  bad({...ok, rows: [{uniform: 0.5, retry: '0.5'}]}, 'retry not a number')
  bad({...ok, rows: [{uniform: 0.5, retry: 0.5, draft: 3, accept: 0.5}]}, 'retry with a draft')
  bad({...ok, rows: [{uniform: 0.5, retry: 0.5, allowed: new Int32Array(2)}]}, 'retry with a mask that allows nothing')
  bad({...ok, rows: []}, 'no rows')
  bad({...ok, rows: [{uniform: 0.1}, {uniform: 0.1}, {uniform: 0.1}]}, 'more rows than logits')
  bad({...ok, rows: 'x'}, 'rows not an array')
  bad({...ok, rows: [null]}, 'a null row')
  bad({...ok, params: {...ok.params, temperature: NaN}}, 'temperature NaN')
  bad({...ok, params: {...ok.params, temperature: -1}}, 'negative temperature')
  bad({...ok, params: {...ok.params, topP: 0}}, 'top_p 0')
  bad({...ok, params: {...ok.params, topK: 1.5}}, 'fractional top_k')
  bad({...ok, params: {...ok.params, minP: 2}}, 'min_p 2')
  bad({...ok, params: {...ok.params, repetitionPenalty: 0}}, 'repetition penalty 0')
  bad({...ok, params: {...ok.params, presencePenalty: Infinity}}, 'infinite presence penalty')
  bad({...ok, params: null}, 'no params')
  bad({...ok, logprobs: -1}, 'negative logprobs')
  bad({...ok, penalties: {ids: Int32Array.of(1, 2), counts: Int32Array.of(1)}}, 'penalty arrays of different lengths')
  bad({...ok, penalties: {ids: Int32Array.of(V), counts: Int32Array.of(1)}}, 'a penalty id outside the vocabulary')
  bad({...ok, penalties: {ids: Int32Array.of(3, 3), counts: Int32Array.of(1, 1)}}, 'a repeated penalty id')
  bad({...ok, penalties: {ids: Int32Array.of(3), counts: Int32Array.of(-1)}}, 'a negative count')
  t.throws(() => native.sampleLogits(new Float32Array(V + 1), V, ok), {code: 'invalid_argument'}, 'a partial row')
  t.equal(native.sampleLogits(logits, V, {...ok, rows: [{uniform: 0.5, allowed: mask(V, id => id === 39)}]})[0].token, 39)
})

t.test('logit bias: the draws of the biased row, on every path; log-probabilities of the unbiased one; bad biases are errors', async t => {
  const rng = new Rng(77)
  const V = 1000
  const logits = randomLogits(rng, V, 1, false)
  const ids = Int32Array.from(new Set(Array.from({length: 40}, () => Math.floor(rng.next() * V))))
  const values = Float32Array.from(ids, (_, i) => (i === 0 ? 100 : i === 1 ? -100 : (rng.next() - 0.5) * 20))
  const biased = Float32Array.from(logits)
  ids.forEach((id, i) => (biased[id] = Math.fround(biased[id]! + values[i]!)))
  const logitBias = {ids, values}
  const lse = Math.log(logits.reduce((a, x) => a + Math.exp(x), 0))
  const paths: Array<[string, SampleRequest['params'], (u: number) => SampleRow]> = [
    ['greedy', samplingParams({temperature: 0}), () => ({})],
    ['T 0.7, top-p, min-p', samplingParams({temperature: 0.7, topP: 0.9, minP: 0.02}), u => ({uniform: u})],
    ['T 1.2, top-k, penalties', samplingParams({temperature: 1.2, topK: 50, frequencyPenalty: 0.5, repetitionPenalty: 1.3}), u => ({uniform: u})],
    ['T 0.9, mask first', samplingParams({temperature: 0.9}), u => ({uniform: u, allowed: mask(V, id => id % 3 !== 0)})],
    ['T 0.9, grammar after the filters', samplingParams({temperature: 0.9, topK: 20}), u => ({uniform: u, retry: 1 - u, allowed: mask(V, id => id % 5 === 1)})],
  ]
  const penalties = {ids: Int32Array.of(ids[2]!, 5, 9), counts: Int32Array.of(1, 0, 2)}
  for (const [name, params, row] of paths) {
    let differ = 0
    let forced = 0
    for (let k = 0; k < 200; k++) {
      const r = row(rng.next())
      const a = native.sampleLogits(logits, V, {params: {...params, logitBias}, rows: [r], penalties, logprobs: 2})[0]!
      const b = native.sampleLogits(biased, V, {params, rows: [r], penalties})[0]!
      if (a.token !== b.token) differ++
      if (a.token === ids[0]) forced++
      if (Math.abs(a.logprob! - (logits[a.token]! - lse)) > 1e-4) differ++
    }
    t.equal(differ, 0, `${name}: the biased row's draws, the unbiased row's log-probabilities`)
    if (!name.includes('mask') && !name.includes('grammar')) t.equal(forced, 200, `${name}: +100 takes every draw`)
  }
  const ok = {params: samplingParams({temperature: 1}), rows: [{uniform: 0.5}]}
  const bad = (b: unknown, what: string) => t.throws(() => native.sampleLogits(logits, V, {...ok, params: {...ok.params, logitBias: b}} as SampleRequest), {code: 'invalid_argument'}, what)
  bad({ids: Int32Array.of(V), values: Float32Array.of(1)}, 'an id outside the vocabulary')
  bad({ids: Int32Array.of(-1), values: Float32Array.of(1)}, 'a negative id')
  bad({ids: Int32Array.of(3, 3), values: Float32Array.of(1, 2)}, 'a repeated id')
  bad({ids: Int32Array.of(3), values: Float32Array.of(NaN)}, 'a NaN bias')
  bad({ids: Int32Array.of(3, 4), values: Float32Array.of(1)}, 'lengths that differ')
  bad({ids: Int32Array.of(3), values: [1]}, 'values not a Float32Array')
  bad('x', 'not an object')
})

t.test('sampling inside a step: equals sampling its logits; masks force tokens; bad requests leave the sequence usable', async t => {
  const pkg = await writeTinyPackage(`${root}/tiny`, 'hybrid', 'q4', 3)
  const h = await native.openModel(pkg.dir, {threads: 2})
  t.teardown(() => native.closeModel(h))
  const V = native.modelInfo(h).vocabSize
  const params = samplingParams({temperature: 0.9, topP: 0.95, minP: 0.01})
  const a = native.createSequence(h, {maxLength: 32})
  const b = native.createSequence(h, {maxLength: 32})
  const prompt = Int32Array.of(3, 14, 15, 92, 65)
  const rows = [0.1, 0.5, 0.77, 0.99, 0.3].map(uniform => ({uniform}))
  const item = (seq: number, extra: Partial<StepItem>): StepItem => ({seq, tokens: prompt, logits: 'all', ...extra})
  const [withLogits, sampledOnly] = await native.step(h, [
    item(a, {sample: {params, rows, logprobs: 3}}),
    item(b, {logits: 'none', sample: {params, rows: rows.slice(3), logprobs: 3}}),
  ])
  t.equal(sampledOnly.logits, null, 'no logits rows unless asked for')
  t.same(native.sampleLogits(withLogits.logits!, V, {params, rows, logprobs: 3}), withLogits.sampled)
  t.same(sampledOnly.sampled, withLogits.sampled!.slice(3), 'the trailing rows')
  // a grammar mask allowing one token forces it, at T = 0 and T > 0, one mask per row of a verify pass
  const one = (id: number) => mask(V, x => x === id)
  const [forced] = await native.step(h, [
    {seq: a, tokens: Int32Array.of(7, 8, 9), logits: 'none', verify: true, sample: {params, rows: [{uniform: 0.2, allowed: one(11)}, {uniform: 0.9, allowed: one(200)}, {uniform: 0.5}]}},
  ])
  t.same(forced.sampled!.slice(0, 2).map(x => x.token), [11, 200])
  const [greedy] = await native.step(h, [{seq: b, tokens: Int32Array.of(7), logits: 'none', sample: {params: samplingParams({temperature: 0}), rows: [{allowed: one(42)}]}}])
  t.equal(greedy.sampled![0].token, 42)
  // a bad request fails before anything runs: the sequence keeps its length and stays usable
  const len = native.sequenceLength(h, b)
  await t.rejects(native.step(h, [{seq: b, tokens: Int32Array.of(7), sample: {params, rows: [{uniform: 0.5, allowed: new Int32Array(Math.ceil(V / 32))}]}}]), {code: 'invalid_argument'})
  await t.rejects(native.step(h, [{seq: b, tokens: Int32Array.of(7), sample: {params, rows: [{uniform: 0.5}, {uniform: 0.5}]}}]), {code: 'invalid_argument'})
  await t.rejects(native.step(h, [{seq: b, tokens: Int32Array.of(7), sample: {params: {...params, topP: 7}, rows: [{uniform: 0.5}]}}]), {code: 'invalid_argument'})
  t.equal(native.sequenceLength(h, b), len)
  const [after] = await native.step(h, [{seq: b, tokens: Int32Array.of(7), logits: 'none', sample: {params, rows: [{uniform: 0.5}]}}])
  t.ok(after.sampled![0].token >= 0 && after.sampled![0].token < V)
})

t.test('a draft pass samples row r from its filtered distribution (inverse CDF in id order), penalties counting drafts 1..r', async t => {
  const dir = await synthFixture('tiny-hybrid', 'q4')
  const h = await native.openModel(dir, {threads: 2})
  t.teardown(() => native.closeModel(h))
  const info = native.modelInfo(h)
  t.ok(info.draft, 'the synthetic package has a draft')
  const V = info.vocabSize
  const s = native.createSequence(h, {maxLength: 64})
  const prompt = Int32Array.of(5, 17, 99, 3)
  await native.step(h, [{seq: s, tokens: prompt, logits: 'none', capture: true}])
  const base = new PenaltyCounts(prompt)
  base.add(3)
  for (const params of [
    samplingParams({temperature: 1, topK: 30, frequencyPenalty: 1.5, repetitionPenalty: 1.3}),
    samplingParams({temperature: 0.8, topP: 0.9, presencePenalty: 2}),
    samplingParams({temperature: 0, repetitionPenalty: 3, frequencyPenalty: 2}),
  ]) {
    const rows = [0.3, 0.6, 0.9, 0.1].map(uniform => (params.temperature > 0 ? {uniform} : {}))
    const [d] = await native.draft(h, [{seq: s, token: 8, n: 4, sample: {params, rows, penalties: base.get()}, logits: true}])
    const counts = new PenaltyCounts(prompt)
    counts.add(3)
    const want: number[] = []
    for (let r = 0; r < rows.length; r++) {
      const logits = d.logits!.subarray(r * V, (r + 1) * V)
      const req = {params, rows: [], penalties: counts.get()}
      if (params.temperature === 0) want.push(sampleRow(logits, req, {}).token)
      else {
        const p = [...distribution(logits, req)].sort((a, b) => a[0] - b[0])
        const u = rows[r].uniform! * p.reduce((a, x) => a + x[1], 0)
        let acc = 0
        want.push((p.find(x => (acc += x[1]) > u) ?? p[p.length - 1])[0])
      }
      counts.add(want[r])
    }
    t.same(d.sampled!.map(x => x.token), want, JSON.stringify(params))
    native.truncateSequence(h, s, 0)
    await native.step(h, [{seq: s, tokens: prompt, logits: 'none', capture: true}])
    const [d2] = await native.draft(h, [{seq: s, token: 8, n: 4, sample: {params, rows, penalties: base.get()}}])
    t.equal(d2.logits, null, 'a sampled draft returns no logits unless asked for')
    t.same(d2.sampled, d.sampled)
  }
})

t.test('verify rows with a draft token: only for the tokens the last sampled draft pass drafted there', async t => {
  const dir = await synthFixture('tiny-hybrid', 'q4')
  const h = await native.openModel(dir, {threads: 2})
  t.teardown(() => native.closeModel(h))
  const s = native.createSequence(h, {maxLength: 64})
  await native.step(h, [{seq: s, tokens: Int32Array.of(5, 17, 99, 3), logits: 'none', capture: true}])
  const params = samplingParams({temperature: 1})
  const [d] = await native.draft(h, [{seq: s, token: 8, n: 2, sample: {params, rows: [{uniform: 0.2}, {uniform: 0.7}]}}])
  const [d1, d2] = d.sampled!.map(x => x.token)
  const verify = (tokens: number[], rows: object[], verify = true) =>
    native.step(h, [{seq: s, tokens: Int32Array.from(tokens), logits: 'none', capture: true, verify, sample: {params, rows}}])
  const ok = [{draft: d1, accept: 0.5, uniform: 0.5}, {draft: d2, accept: 0.5, uniform: 0.5}, {uniform: 0.5}]
  await t.rejects(verify([8, d1, d2], ok, false), {code: 'invalid_argument'}, 'not a verify item')
  await t.rejects(verify([8, d1 === 1 ? 2 : 1, d2], ok), {code: 'invalid_argument'}, 'not the item token')
  await t.rejects(verify([8, d1, d2], [{draft: d1, uniform: 0.5}, ok[1], ok[2]]), {code: 'invalid_argument'}, 'no acceptance uniform')
  await t.rejects(verify([8, d1, d2], [{...ok[0], accept: 1}, ok[1], ok[2]]), {code: 'invalid_argument'}, 'acceptance uniform out of range')
  await t.rejects(verify([8, d2, d1], [{...ok[0], draft: d2}, {...ok[1], draft: d1}, ok[2]]), {code: 'invalid_argument'}, 'not what was drafted')
  t.equal(native.sequenceLength(h, s), 4, 'refused steps change nothing')
  const [v] = await verify([8, d1, d2], ok)
  const got = v.sampled!.map(x => x.token)
  t.ok(got[0] >= 0 && got[0] < native.modelInfo(h).vocabSize, 'the first row is always sampled')
  if (got[0] !== d1) t.same(got.slice(1), [-1, -1], 'after a rejected draft nothing more is sampled')
})
