// The speculative block policy (src/engine/spec-policy.ts): expected tokens per pass, the best block length for
// an acceptance and a cost, the acceptance estimate, the fit of the measured pass cost, the backends' priors, and the
// model-wide history greedy sequences start from and probe by.
import t from 'tap'
import {Acceptance, DraftHistory, FIXED_COST, FIXED_COST_GPU, MeasuredCost, bestBlock, expectedCommit, fixedCost} from '../../src/engine/spec-policy.js'

t.test('expected tokens per pass: 1 + α + … + α^k', async t => {
  t.equal(expectedCommit(0, 5), 1)
  t.ok(Math.abs(expectedCommit(0.5, 3) - (1 + 0.5 + 0.25 + 0.125)) < 1e-12)
  t.ok(Math.abs(expectedCommit(0.9, 15) - (1 - 0.9 ** 16) / 0.1) < 1e-12)
})

t.test('the best block grows with acceptance and shrinks with the cost per row; a useless draft does not pay', async t => {
  const cost = {r0: 1, r1: 0.3}
  const low = bestBlock(0.3, cost, 15)
  const mid = bestBlock(0.7, cost, 15)
  const high = bestBlock(0.95, cost, 15)
  t.ok(low.k <= mid.k && mid.k <= high.k, `k ${low.k} ≤ ${mid.k} ≤ ${high.k}`)
  t.ok(high.gain > 1 && low.gain < high.gain)
  t.ok(bestBlock(0.95, {r0: 1, r1: 1.5}, 15).k < high.k, 'costlier rows, shorter blocks')
  t.ok(bestBlock(0.02, FIXED_COST, 15).gain < 1, 'nothing accepted: plain decoding wins')
  t.equal(bestBlock(0.99, {r0: 0.1, r1: 0.01}, 15).k, 15, 'capped at B−1')
  // the gain is the best over all k
  for (let k = 1; k <= 15; k++) t.ok(expectedCommit(0.7, k) / (cost.r0 + cost.r1 * (k + 1)) <= mid.gain + 1e-12)
})

t.test('acceptance: starts optimistic, follows the passes', async t => {
  const a = new Acceptance()
  t.ok(a.alpha > 0.5)
  for (let i = 0; i < 40; i++) a.observe(0, 4)
  t.ok(a.alpha < 0.05, `nothing accepted: ${a.alpha}`)
  for (let i = 0; i < 40; i++) a.observe(4, 4)
  t.ok(a.alpha > 0.95, `everything accepted: ${a.alpha}`)
  const b = new Acceptance()
  for (let i = 0; i < 200; i++) b.observe(i % 2 ? 3 : 1, 4) // 4 accepted of 4 + 2 verified: 2/3
  t.ok(Math.abs(b.alpha - 4 / 6) < 0.05, `${b.alpha}`)
})

t.test('measured cost: the fixed model until measured, then the fit of pass cost against rows', async t => {
  const c = new MeasuredCost()
  t.same([c.r0, c.r1], [FIXED_COST.r0, FIXED_COST.r1])
  c.observePass(0.01, 5) // no plain cost yet: ignored
  t.same([c.r0, c.r1], [FIXED_COST.r0, FIXED_COST.r1])
  c.observePlain(0.002)
  for (let i = 0; i < 30; i++) {
    const rows = 2 + (i % 6)
    c.observePass(0.002 * (1.2 + 0.4 * rows), rows) // r0 = 1.2, r1 = 0.4 plain steps
  }
  t.ok(Math.abs(c.r1 - 0.4) < 1e-6 && Math.abs(c.r0 - 1.2) < 1e-6, `r0 ${c.r0}, r1 ${c.r1}`)
  const one = new MeasuredCost()
  one.observePlain(0.002)
  for (let i = 0; i < 30; i++) one.observePass(0.002 * 3, 5) // one block length only: the fixed shape, scaled
  t.ok(Math.abs(one.r0 + 5 * one.r1 - 3) < 1e-9, 'the measured cost at the rows seen')
  t.ok(Math.abs(one.r1 / one.r0 - FIXED_COST.r1 / FIXED_COST.r0) < 1e-9, 'split as the fixed model splits it')
})

t.test('measured cost: passes of one length on a device where rows are nearly free keep their length', async t => {
  // a GPU where a pass costs 2.7 plain decodes per sequence plus 0.05 a row (16 rows: 3.5), 90 % of drafts accepted
  const cost = (rows: number) => 0.001 * (2.7 + 0.05 * rows)
  const c = new MeasuredCost()
  c.observePlain(0.001)
  for (let i = 0; i < 30; i++) c.observePass(cost(16), 16)
  const first = bestBlock(0.9, c, 15)
  t.ok(first.k >= 4 && first.gain > 2, `k ${first.k}, gain ${first.gain.toFixed(2)}: drafting pays`)
  t.equal(bestBlock(0.9, {r0: Math.max(0, 3.5 - 16 * FIXED_COST.r1), r1: FIXED_COST.r1}, 15).k, 1, 'the fixed slope alone chose 1 draft')
  // passes of that length vary the rows, the fit finds the device's slope, and the blocks grow to the longest
  for (let i = 0; i < 30; i++) c.observePass(cost(first.k + 1), first.k + 1)
  t.ok(Math.abs(c.r1 - 0.05) < 1e-6, `slope ${c.r1}`)
  t.equal(bestBlock(0.9, c, 15).k, 15)
})

t.test('the fixed cost per backend: a GPU prices rows low enough that a new sequence drafts at its first decode', async t => {
  t.same(fixedCost('cpu'), FIXED_COST)
  t.same(fixedCost(undefined), FIXED_COST, 'a model that does not say is priced as the CPU')
  t.same(fixedCost('cuda'), FIXED_COST_GPU)
  const prior = new Acceptance().alpha // a new sequence's optimistic start
  t.ok(bestBlock(prior, FIXED_COST, 15).gain < 1, 'CPU prices: a new sequence waits for its probe')
  const gpu = bestBlock(prior, FIXED_COST_GPU, 15)
  t.ok(gpu.gain > 1 && gpu.k >= 3, `GPU prices: ${gpu.k} drafts at once (gain ${gpu.gain.toFixed(2)})`)
  // the measured model starts from the backend's prior and keeps its shape until the rows per pass vary
  const c = new MeasuredCost(FIXED_COST_GPU)
  t.same([c.r0, c.r1], [FIXED_COST_GPU.r0, FIXED_COST_GPU.r1])
  c.observePlain(0.002)
  for (let i = 0; i < 30; i++) c.observePass(0.002 * 4, 10)
  t.ok(Math.abs(c.r0 + 10 * c.r1 - 4) < 1e-9 && Math.abs(c.r1 / c.r0 - FIXED_COST_GPU.r1 / FIXED_COST_GPU.r0) < 1e-9)
  // an acceptance a trained draft has at T = 0.7: the CPU's fixed model would never draft on a GPU, the GPU's does
  t.ok(bestBlock(0.8, FIXED_COST, 15).gain < 1 && bestBlock(0.8, FIXED_COST_GPU, 15).gain > 1.2)
})

t.test('draft history: a new sequence starts from the passes seen, optimistic before any', async t => {
  const h = new DraftHistory()
  const fresh = new Acceptance()
  const a = new Acceptance()
  h.start(a)
  t.equal(a.alpha, fresh.alpha, 'no pass yet: the optimistic start')
  for (let i = 0; i < 30; i++) h.observe(0, 3)
  t.ok(h.alpha < 0.05, `nothing accepted: ${h.alpha}`)
  const b = new Acceptance()
  h.start(b)
  t.equal(b.alpha, h.alpha, 'a later sequence starts where the model is')
  t.ok(bestBlock(b.alpha, FIXED_COST_GPU, 15).gain < 1, 'and a useless draft no longer pays at its first decode, even at GPU prices')
  // its own passes outweigh the start quickly (the start weighs two trials)
  for (let i = 0; i < 3; i++) b.observe(4, 4)
  t.ok(b.alpha > 0.7, `its own passes: ${b.alpha}`)
  // the history forgets slowly: 60 good passes bring it back
  for (let i = 0; i < 60; i++) h.observe(3, 3)
  t.ok(h.alpha > 0.9, `good passes since: ${h.alpha}`)
})

t.test('draft history: one probe clock for the model, doubling to 256 while drafting does not pay, back to 16 when it does', async t => {
  const h = new DraftHistory()
  const gaps: number[] = []
  let n = 0
  for (let i = 0; i < 2000 && gaps.length < 7; i++) {
    n++
    if (h.probe()) gaps.push(n), (n = 0)
  }
  t.same(gaps, [16, 32, 64, 128, 256, 256, 256])
  h.paid()
  n = 0
  while (!h.probe()) n++
  t.equal(n + 1, 16, 'after a sequence found drafting pays')
})
