// Sampled rows chosen by the backend's sampler (the sample_rows slot; core-native/model/step/forward.cpp, draft.cpp,
// item_rows.cpp): items the slot takes (no forced tokens or log-probabilities) send descriptors with their
// penalty counts, drafts and uniforms, and only ids come back; a draft pass keeps its distributions where the
// backend is and the verify pass checks its drafts against them there. On the CPU the slot is the host sampler
// itself ($SPLASH_DEVICE_SAMPLE=1 takes it there), so every token must equal the host path's ($SPLASH_DEVICE_SAMPLE=0):
// plain, penalised, verify and batched steps, draft passes, and a verify pass the host samples after a draft pass
// the slot sampled (its distributions copied back).
import t from 'tap'
import {native, type StepItem} from '../../src/native/native.js'
import {samplingParams} from '../../src/engine/sampling.js'
import {synthFixture} from '../helpers/packages.js'

async function open(dir: string, onBackend: boolean) {
  process.env.SPLASH_DEVICE_SAMPLE = onBackend ? '1' : '0'
  try {
    return await native.openModel(dir, {threads: 2})
  } finally {
    delete process.env.SPLASH_DEVICE_SAMPLE
  }
}

const warm = samplingParams({temperature: 0.8, topK: 40, topP: 0.9, minP: 0.02})
const hot = samplingParams({temperature: 1.3})
const penalised = samplingParams({temperature: 0.7, topP: 0.95, repetitionPenalty: 1.3, presencePenalty: 0.5, frequencyPenalty: 0.4})
const greedyPenalised = samplingParams({temperature: 0, repetitionPenalty: 1.5, presencePenalty: 1})
const penalties = {ids: Int32Array.of(5, 17, 99, 3, 41, 7, 8), counts: Int32Array.of(0, 0, 0, 0, 2, 0, 1)}

// uniforms of a fixed sequence (the engine's RNG gives these in the server)
function uniforms(seed: number, n: number): number[] {
  let x = seed
  return Array.from({length: n}, () => ((x = (x * 1103515245 + 12345) % 2147483648) / 2147483648))
}

async function scenario(h: number, seed: number): Promise<number[][]> {
  const u = uniforms(seed, 64)
  let k = 0
  const next = () => u[k++ % u.length]
  const prompt = Int32Array.of(5, 17, 99, 3, 41, 7)
  const [a, b, c] = [0, 1, 2].map(() => native.createSequence(h, {maxLength: 128}))
  const got: number[][] = []
  const take = (r: {sampled: {token: number}[] | null}) => got.push(r.sampled!.map(x => x.token))
  // a prompt with two sampled rows under top-k / top-p / min-p, then the same with penalties
  take((await native.step(h, [{seq: a, tokens: prompt, logits: 'none', capture: true, sample: {params: warm, rows: [{uniform: next()}, {uniform: next()}]}}]))[0])
  await native.step(h, [{seq: b, tokens: prompt, logits: 'none', capture: true}])
  take((await native.step(h, [{seq: b, tokens: Int32Array.of(8, 41), logits: 'none', capture: true, sample: {params: penalised, penalties, rows: [{uniform: next()}, {uniform: next()}]}}]))[0])
  take((await native.step(h, [{seq: c, tokens: prompt, logits: 'none', capture: true, sample: {params: greedyPenalised, penalties, rows: [{}, {}, {}]}}]))[0])
  // draft passes the slot samples (q kept there), then verify passes that check every draft against them, with and
  // without penalties (each row counts the drafts before it)
  for (const [seq, params] of [[a, hot], [a, warm], [b, warm]] as const) {
    const rows = [0, 1, 2, 3].map(() => ({uniform: next()}))
    const [d] = await native.draft(h, [{seq, token: 8, n: 4, sample: {params, rows}}])
    take(d)
    const drafts = d.sampled!.map(x => x.token)
    const vparams = seq === b ? samplingParams({temperature: 1.3, repetitionPenalty: 3, presencePenalty: 1, frequencyPenalty: 1.5}) : params
    const vrows = [...drafts.map(dt => ({draft: dt, accept: next(), uniform: next()})), {uniform: next()}]
    const [v] = await native.step(h, [{seq, tokens: Int32Array.of(8, ...drafts), logits: 'none', capture: true, verify: true, sample: {params: vparams, rows: vrows, ...(seq === b ? {penalties} : {})}}])
    take(v)
    const toks = v.sampled!.map(x => x.token)
    const kept = toks.findIndex((x, i) => i < drafts.length && x !== drafts[i])
    native.truncateSequence(h, seq, native.sequenceLength(h, seq) - (kept < 0 ? 0 : drafts.length - kept))
  }
  // a verify pass that samples only its last rows (they verify the later drafts, against the distributions of
  // those positions) after one whose rows all count the drafts before them under strong greedy penalties
  {
    const [d] = await native.draft(h, [{seq: c, token: 8, n: 4, sample: {params: hot, rows: [0, 1, 2, 3].map(() => ({uniform: next()}))}}])
    take(d)
    const drafts = d.sampled!.map(x => x.token)
    const [v] = await native.step(h, [{seq: c, tokens: Int32Array.of(8, ...drafts), logits: 'none', capture: true, verify: true, sample: {params: hot, rows: [...drafts.slice(2).map(dt => ({draft: dt, accept: next(), uniform: next()})), {uniform: next()}]}}])
    take(v)
    native.truncateSequence(h, c, native.sequenceLength(h, c) - drafts.length)
    const [g] = await native.draft(h, [{seq: c, token: 8, n: 6, sample: {params: samplingParams({temperature: 0}), rows: [0, 1, 2, 3, 4, 5].map(() => ({}))}}])
    const gd = g.sampled!.map(x => x.token)
    const strong = samplingParams({temperature: 0, repetitionPenalty: 10, presencePenalty: 2, frequencyPenalty: 2})
    const [gv] = await native.step(h, [{seq: c, tokens: Int32Array.of(8, ...gd), logits: 'none', capture: true, verify: true, sample: {params: strong, penalties, rows: [...gd.map(() => ({})), {}]}}])
    take(gv)
    // rows of a verify item without drafts: plain draws, each under the penalties of the tokens before it
    native.truncateSequence(h, c, native.sequenceLength(h, c) - gd.length - 1)
    const strongHot = samplingParams({temperature: 1.3, repetitionPenalty: 3, presencePenalty: 2, frequencyPenalty: 2})
    const [hv] = await native.step(h, [{seq: c, tokens: Int32Array.of(8, ...gd), logits: 'none', capture: true, verify: true, sample: {params: strongHot, penalties, rows: [...gd.map(() => ({uniform: next()})), {uniform: next()}]}}])
    take(hv)
  }
  // grammar masks: a verify pass whose rows carry masks (a constrained sequence's, without draft tokens), sampled
  // and greedy, and a plain row with one
  {
    const words = Math.ceil(native.modelInfo(h).vocabSize / 32)
    const mask = (salt: number) => Int32Array.from({length: words}, (_, w) => (((w + salt) * 2654435761) ^ 0x5a5a5a5a) | 0)
    for (const params of [warm, samplingParams({temperature: 0})]) {
      const [v] = await native.step(h, [{seq: b, tokens: Int32Array.of(8, 30, 31), logits: 'none', capture: true, verify: true, sample: {params, rows: [0, 1, 2].map(r => ({uniform: next(), allowed: mask(r)}))}}])
      take(v)
      native.truncateSequence(h, b, native.sequenceLength(h, b) - 3)
    }
    take((await native.step(h, [{seq: b, tokens: Int32Array.of(8), logits: 'none', capture: true, sample: {params: hot, rows: [{uniform: next(), allowed: mask(7)}]}}]))[0])
    // the grammar after the filters (a constrained row at T > 0: a second uniform redraws a refused first draw), in
    // a verify pass and a plain row; a sparse mask under top-k 40 leaves some rows without mass in F
    const sparse = (salt: number) => Int32Array.from({length: words}, (_, w) => ((w * 7 + salt) % 5 === 0 ? 0x01010101 << (salt % 8) : 0))
    for (const [params, m] of [[warm, mask], [hot, mask], [warm, sparse]] as const) {
      const rows = [0, 1, 2].map(r => ({uniform: next(), retry: next(), allowed: m(r)}))
      const [v] = await native.step(h, [{seq: b, tokens: Int32Array.of(8, 30, 31), logits: 'none', capture: true, verify: true, sample: {params, rows}}])
      take(v)
      native.truncateSequence(h, b, native.sequenceLength(h, b) - 3)
    }
    take((await native.step(h, [{seq: b, tokens: Int32Array.of(8), logits: 'none', capture: true, sample: {params: warm, rows: [{uniform: next(), retry: next(), allowed: mask(9)}]}}]))[0])
  }
  // a verify pass the host samples (log-probabilities asked for) after a draft pass the slot sampled
  {
    const [d] = await native.draft(h, [{seq: a, token: 9, n: 3, sample: {params: hot, rows: [0, 1, 2].map(() => ({uniform: next()}))}}])
    take(d)
    const drafts = d.sampled!.map(x => x.token)
    const [v] = await native.step(h, [{seq: a, tokens: Int32Array.of(9, ...drafts), logits: 'none', capture: true, verify: true, sample: {params: hot, logprobs: 2, rows: [...drafts.map(dt => ({draft: dt, accept: next(), uniform: next()})), {uniform: next()}]}}])
    take(v)
  }
  // a batch: sampled, greedy-only, log-probabilities (the host), and a logits row asked for
  const [a2, b2, c2] = [0, 1, 2].map(() => native.createSequence(h, {maxLength: 64}))
  await native.step(h, [{seq: a2, tokens: prompt, logits: 'none'}, {seq: b2, tokens: prompt, logits: 'none'}, {seq: c2, tokens: prompt, logits: 'none'}])
  const items: StepItem[] = [
    {seq: a2, tokens: Int32Array.of(12, 13), logits: 'none', sample: {params: hot, rows: [{uniform: next()}, {uniform: next()}]}},
    {seq: b2, tokens: Int32Array.of(12), logits: 'none', sample: {params: samplingParams({temperature: 0}), rows: [{}]}},
    {seq: c2, tokens: Int32Array.of(12, 14), logits: 'last', sample: {params: warm, logprobs: 1, rows: [{uniform: next()}]}},
  ]
  for (const r of await native.step(h, items)) take(r)
  for (const s of [a, b, c, a2, b2, c2]) native.freeSequence(h, s)
  return got
}

t.test('rows the backend\'s sampler chooses are the host sampler\'s, in steps, draft passes and verify passes', async t => {
  const dir = await synthFixture('tiny-hybrid', 'q4')
  const models = [await open(dir, true), await open(dir, false)]
  t.teardown(() => models.forEach(h => native.closeModel(h)))
  const V = native.modelInfo(models[0]).vocabSize
  for (const seed of [1, 2, 3]) {
    const [on, off] = [await scenario(models[0], seed), await scenario(models[1], seed)]
    t.same(on, off, `seed ${seed}: the slot's tokens equal the host's`)
    for (const row of on) for (const id of row) t.ok(id >= -1 && id < V)
    t.ok(on.flat().filter(x => x >= 0).length > 30, 'rows were sampled')
  }
})

t.test('resample draws a row the last step kept again, as the host sampler draws that row', async t => {
  const dir = await synthFixture('tiny-hybrid', 'q4')
  for (const onBackend of [true, false]) {
    const h = await open(dir, onBackend)
    t.teardown(() => native.closeModel(h))
    const V = native.modelInfo(h).vocabSize
    const words = Math.ceil(V / 32)
    const mask = Int32Array.from({length: words}, (_, w) => ((w * 2654435761) ^ 0x5a5a5a5a) | 0)
    const u = uniforms(11, 32)
    const [a, b] = [0, 1].map(() => native.createSequence(h, {maxLength: 64}))
    const prompt = Int32Array.of(5, 17, 99, 3, 41, 7)
    await native.step(h, [{seq: a, tokens: prompt, logits: 'none'}, {seq: b, tokens: prompt, logits: 'none'}])
    // a verify item (anchor and two drafts) under penalties, its rows' first tries sampled in the step and kept; its
    // logits come back too, for the host's draw. Row r counts the drafts before it.
    const drafts = [30, 31]
    const [v] = await native.step(h, [
      {seq: a, tokens: Int32Array.of(8, ...drafts), logits: 'all', keep: true, verify: true, sample: {params: penalised, penalties, rows: [0, 1, 2].map(r => ({uniform: u[r]!}))}},
      {seq: b, tokens: Int32Array.of(8), logits: 'none', sample: {params: warm, rows: [{uniform: u[3]!}]}},
    ])
    for (const [r, params] of [[2, penalised], [0, samplingParams({temperature: 0})]] as const) {
      const rows = [params.temperature > 0 ? {uniform: u[4 + r]!, retry: u[8 + r]!, allowed: mask} : {allowed: mask}]
      const got = native.resample(h, a, r, {params, penalties, rows})
      const counts = new Map<number, number>()
      penalties.ids.forEach((id, i) => counts.set(id, penalties.counts[i]!))
      for (const d of drafts.slice(0, r)) counts.set(d, (counts.get(d) ?? 0) + 1)
      const withDrafts = {ids: Int32Array.from(counts.keys()), counts: Int32Array.from(counts.values())}
      const [want] = native.sampleLogits(v!.logits!.subarray(r * V, (r + 1) * V), V, {params, penalties: withDrafts, rows})
      t.equal(got.token, want!.token, `${onBackend ? 'backend' : 'host'} sampler, row ${r}, T=${params.temperature}: the host's token`)
      t.ok((mask[got.token >> 5]! >>> (got.token & 31)) & 1, 'the token is one the mask allows')
    }
    // the drafts before a row count: row 1 under a mask that allows draft 1 (30) and the token just below it, with
    // strong greedy penalties, gives that token only when 30 is counted
    const row1 = v!.logits!.subarray(V, 2 * V)
    let below = -1
    for (let id = 0; id < V; id++) if (id !== 30 && row1[id]! < row1[30]! && (below < 0 || row1[id]! > row1[below]!)) below = id
    const pair = new Int32Array(words)
    for (const id of [30, below]) pair[id >> 5]! |= 1 << (id & 31)
    const strong = samplingParams({temperature: 0, repetitionPenalty: 10, presencePenalty: 2, frequencyPenalty: 2})
    t.equal(native.resample(h, a, 1, {params: strong, penalties, rows: [{allowed: pair}]}).token, below, 'row 1 counts draft 1 for the penalties')
    const again = {params: warm, rows: [{uniform: 0.5}]}
    t.throws(() => native.resample(h, a, 0, again), /already sampled again/, 'a kept row is drawn again once')
    t.throws(() => native.resample(h, a, 3, again), /not one of the 3 sampled rows/, 'a row the item did not sample')
    t.throws(() => native.resample(h, b, 0, again), /kept no rows/, 'an item without keep')
    await native.step(h, [{seq: b, tokens: Int32Array.of(9), logits: 'none'}])
    t.throws(() => native.resample(h, a, 1, again), /kept no rows/, 'the next step drops what the last one kept')
  }
})
