// The DFlash 2 draft pass (model/step/draft.cpp, draft_conv.cpp, draft_selector.cpp) against the numpy reference
// (tools/reference/dflash2_reference.py, float64) on the synthetic tiny-qwen3 package with a DFlash 2 draft
// (sliding window 12, shorter than the block, so every row's window cuts the keys on both sides): the transformed
// logits of the drafted rows, the selector's greedy walk and its sampled walk for given uniforms. A fixture with
// `overrides` (draft.config keys: here a full and a sliding layer, is_causal null, so the sliding layer is causal)
// runs on a copy of the package whose splash.json carries them. The -ring fixtures (windows 8 and 5, 300 and 260
// positions of context) reach far past a sliding layer's ring; test/core-native/draft-kv.test.ts also runs them
// through chunked context, truncations and a restore.
import t from 'tap'
import {native} from '../../src/native/native.js'
import {GREEDY} from '../../src/engine/sampling.js'
import {fixtureFiles, fixturePackage, readFixture} from './helpers/dflash2-fixture.js'

for (const file of fixtureFiles())
t.test(`DFlash 2 draft pass equals the numpy reference: ${file} (f32 activations)`, async t => {
  const fx = readFixture(file)
  const dir = await fixturePackage(fx, fn => t.teardown(fn))
  const h = await native.openModel(dir, {activations: 'f32', threads: 2})
  t.teardown(() => native.closeModel(h))
  const info = native.modelInfo(h)
  const V = info.vocabSize
  const n = fx.greedy.length
  const s = native.createSequence(h, {maxLength: fx.prompt.length + 64})
  await native.step(h, [{seq: s, tokens: Int32Array.from(fx.prompt), logits: 'none', capture: true}])
  const rows = Array.from({length: n}, () => ({}))
  const [greedy] = await native.draft(h, [{seq: s, token: fx.anchor, n, logits: true, sample: {params: GREEDY, rows}}])
  const logits = greedy!.logits!
  t.equal(logits.length, n * V)
  let diff = 0
  let scale = 0
  for (let i = 0; i < logits.length; i++) {
    diff = Math.max(diff, Math.abs(logits[i] - fx.logits[i]))
    scale = Math.max(scale, Math.abs(fx.logits[i]))
  }
  t.ok(diff / scale < 1e-4, `logits: max |Δ| / max |ref| = ${(diff / scale).toExponential(2)} (bound 1e-4)`)
  // the smallest gap between the best and second score of a greedy row is far above the f32 error here
  t.ok(fx.greedy_min_margin > 100 * diff, `greedy margin ${fx.greedy_min_margin.toExponential(2)} vs logit error ${diff.toExponential(2)}`)
  t.same(greedy!.sampled!.map(x => x.token), fx.greedy, 'the greedy selector walk')
  // the context is cached: the sampled walk runs on the same block
  const params = {...GREEDY, temperature: fx.temperature}
  const [sampled] = await native.draft(h, [{seq: s, token: fx.anchor, n, sample: {params, rows: fx.uniforms.map(uniform => ({uniform}))}}])
  t.same(sampled!.sampled!.map(x => x.token), fx.sampled, `the sampled walk at T = ${fx.temperature}`)
  t.equal(sampled!.logits, null, 'no logits unless asked for')
})
