// Speculative decoding in the native core: a verify step computes every row exactly as a single-token
// decode (so greedy with the draft equals greedy without it), rollback inside a verify step leaves the
// state a fresh sequence fed the same prefix has, and the draft pass (DFlash) runs on the shipped default
// package and on a synthetic one.
import t from 'tap'
import {native, type ModelHandle, type MatmulActivations} from '../../src/native/native.js'
import {synthFixture} from '../helpers/packages.js'
import {readManifest} from '../../src/package/manifest.js'
import {stateSizes} from '../../src/serving/memory-plan.js'

const DEFAULT = new URL('../../packages/default/', import.meta.url).pathname

async function step(h: ModelHandle, seq: number, tokens: number[], opts: {logits?: 'none' | 'last' | 'all'; verify?: boolean; capture?: boolean} = {}) {
  const [out] = (await native.step(h, [{seq, tokens: Int32Array.from(tokens), logits: opts.logits ?? 'last', verify: opts.verify, capture: opts.capture}])).map(r => r.logits)
  return out
}

function maxDiff(a: Float32Array, b: Float32Array): number {
  let m = 0
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]))
  return m
}

const PROMPT = [3, 8, 12, 40, 41, 7]
const TOKENS = [1, 5, 9, 200, 33, 7, 100, 4]

for (const act of ['int8x2', 'int8', 'f32'] as MatmulActivations[]) {
  t.test(`tiny-hybrid q4 (${act}): a verify step equals single-token decodes bit for bit`, async t => {
    const h = await native.openModel(await synthFixture('tiny-hybrid', 'q4'), {activations: act, threads: 2})
    t.teardown(() => native.closeModel(h))
    const V = native.modelInfo(h).vocabSize
    const a = native.createSequence(h, {maxLength: 64})
    const b = native.createSequence(h, {maxLength: 64})
    await feed(a, PROMPT)
    await feed(b, PROMPT)
    const all = (await step(h, a, TOKENS, {logits: 'all', verify: true}))!
    let m = 0
    for (let i = 0; i < TOKENS.length; i++) {
      const one = (await step(h, b, [TOKENS[i]]))!
      m = Math.max(m, maxDiff(one, all.subarray(i * V, (i + 1) * V)))
    }
    t.equal(m, 0, 'max |Δlogit| between a verify row and the single decode')
    async function feed(seq: number, tokens: number[]) {
      return (await native.step(h, [{seq, tokens: Int32Array.from(tokens), logits: 'none'}]))[0].logits
    }
  })
}

// Opens a package with the GDN rollback method forced ($SPLASH_GDN_ROLLBACK is read at open).
async function openWith(dir: string, method: 'replay' | 'states', opts: {activations?: MatmulActivations} = {}) {
  const saved = process.env.SPLASH_GDN_ROLLBACK
  process.env.SPLASH_GDN_ROLLBACK = method
  try {
    return await native.openModel(dir, {threads: 2, ...opts})
  } finally {
    if (saved === undefined) delete process.env.SPLASH_GDN_ROLLBACK
    else process.env.SPLASH_GDN_ROLLBACK = saved
  }
}

for (const method of ['replay', 'states'] as const) {
  t.test(`default package (rollback: ${method}): verify rows equal single decodes; rollback equals a fresh sequence fed the same prefix`, async t => {
    const h = await openWith(DEFAULT, method)
    t.teardown(() => native.closeModel(h))
    const info = native.modelInfo(h)
    const V = info.vocabSize
    t.equal(info.matmulActivations, 'int8x2')
    t.match(info.draft, {blockSize: 16, maskTokenId: 16383, targetLayerIds: [1, 4, 6], numLayers: 2, gdnRollback: method})
    // what a verify step keeps: B + 1 whole states, or one state and B tokens' inputs per linear layer
    const cfg = info.config as {layer_types: string[]; linear_num_key_heads: number; linear_key_head_dim: number; linear_num_value_heads: number; linear_value_head_dim: number}
    const C = 2 * cfg.linear_num_key_heads * cfg.linear_key_head_dim + cfg.linear_num_value_heads * cfg.linear_value_head_dim
    const linear = cfg.layer_types.filter(x => x === 'linear_attention').length
    const state = info.stateBytesPerSequence
    t.equal(info.draft!.rollbackBytes, method === 'states' ? 17 * state : state + 16 * linear * (C + 2 * cfg.linear_num_value_heads) * 4)
    const manifest = await readManifest(DEFAULT)
    t.equal(stateSizes(manifest, 4, method).speculativeBytes, info.draft!.rollbackBytes, 'the memory plan counts what the native model keeps')
    for (const keep of [3, 0, 7, 8]) {
      const a = native.createSequence(h, {maxLength: 64})
      await step(h, a, PROMPT, {logits: 'none', capture: true})
      const all = (await step(h, a, TOKENS, {logits: 'all', verify: true, capture: true}))!
      t.equal(native.sequenceLength(h, a), PROMPT.length + TOKENS.length)
      native.truncateSequence(h, a, PROMPT.length + keep)
      t.equal(native.sequenceLength(h, a), PROMPT.length + keep)
      const next = keep < TOKENS.length ? TOKENS[keep] : 11
      const again = (await step(h, a, [next], {capture: true}))!
      if (keep < TOKENS.length) t.equal(maxDiff(again, all.subarray(keep * V, (keep + 1) * V)), 0, `rollback to +${keep}: the next decode equals the verify row`)
      const fresh = native.createSequence(h, {maxLength: 64})
      await step(h, fresh, PROMPT, {logits: 'none'})
      for (let i = 0; i < keep; i++) await step(h, fresh, [TOKENS[i]], {logits: 'none'})
      const f = (await step(h, fresh, [next]))!
      t.equal(maxDiff(again, f), 0, `rollback to +${keep}: same logits as a fresh sequence fed the same prefix`)
      native.freeSequence(h, fresh)
      if (keep === 3) {
        // outside the last verify step's window the recurrent state cannot roll back
        t.throws(() => native.truncateSequence(h, a, 2), {code: 'state_not_truncatable'})
      }
      native.freeSequence(h, a)
    }
  })
}

for (const method of ['replay', 'states'] as const) {
  t.test(`rollback (${method}) vs a fresh prefill (f32 activations: chunked GDN agrees to ~1e-5)`, async t => {
    const h = await openWith(DEFAULT, method, {activations: 'f32'})
    t.teardown(() => native.closeModel(h))
    const a = native.createSequence(h, {maxLength: 64})
    await step(h, a, PROMPT, {logits: 'none'})
    await step(h, a, TOKENS, {logits: 'none', verify: true})
    native.truncateSequence(h, a, PROMPT.length + 4)
    const x = (await step(h, a, [TOKENS[4]]))!
    const fresh = native.createSequence(h, {maxLength: 64})
    const y = (await step(h, fresh, [...PROMPT, ...TOKENS.slice(0, 5)]))!
    t.ok(maxDiff(x, y) < 1e-3, `max |Δlogit| ${maxDiff(x, y)}`)
  })
}

for (const [name, dir] of [
  ['default package', async () => DEFAULT],
  ['synthetic tiny-hybrid', async () => synthFixture('tiny-hybrid', 'q4')],
] as const) {
  t.test(`${name}: draft pass`, async t => {
    const h = await native.openModel(await dir(), {threads: 2})
    t.teardown(() => native.closeModel(h))
    const info = native.modelInfo(h)
    t.ok(info.draft, 'the draft is loaded')
    const B = info.draft!.blockSize
    const V = info.vocabSize
    const s = native.createSequence(h, {maxLength: 64})
    await step(h, s, PROMPT, {logits: 'none', capture: true})
    const [d1] = (await native.draft(h, [{seq: s, token: 5}])).map(r => r.logits!)
    t.equal(d1.length, (B - 1) * V)
    t.ok(d1.every(Number.isFinite))
    // the context is consumed: the same anchor again gives the same drafts (context cached, not re-added)
    const [d2] = (await native.draft(h, [{seq: s, token: 5, n: B - 1}])).map(r => r.logits!)
    t.ok(maxDiff(d2, d1) < 1e-5)
    // a shorter draft runs a shorter block (anchor + n masks): other logits, the same shape
    const [short] = (await native.draft(h, [{seq: s, token: 5, n: 3}])).map(r => r.logits!)
    t.equal(short.length, 3 * V)
    t.ok(short.every(Number.isFinite))
    // a step without capture leaves a gap in the draft context: refused until the sequence is reset
    await step(h, s, [5], {logits: 'none'})
    await t.rejects(native.draft(h, [{seq: s, token: 6}]), {code: 'invalid_argument'})
    native.truncateSequence(h, s, 0)
    await step(h, s, PROMPT, {logits: 'none', capture: true})
    const [d3] = (await native.draft(h, [{seq: s, token: 5}])).map(r => r.logits!)
    t.ok(maxDiff(d3, d1) < 1e-5, 'after a reset the draft sees the same context')
    // batched drafts of two sequences equal separate ones
    const u = native.createSequence(h, {maxLength: 64})
    await step(h, u, [9, 9, 9], {logits: 'none', capture: true})
    const v = native.createSequence(h, {maxLength: 64})
    await step(h, v, PROMPT, {logits: 'none', capture: true})
    const [du, dv] = (await native.draft(h, [{seq: u, token: 1}, {seq: v, token: 5}])).map(r => r.logits!)
    t.equal(du.length, (B - 1) * V)
    t.ok(maxDiff(dv, d1) < 1e-5, 'a batched draft equals the single one')
  })
}

t.test('draft: false leaves the draft unloaded', async t => {
  const h = await native.openModel(DEFAULT, {threads: 1, draft: false})
  t.teardown(() => native.closeModel(h))
  t.equal(native.modelInfo(h).draft, null)
  const s = native.createSequence(h, {maxLength: 8})
  await t.rejects(native.draft(h, [{seq: s, token: 1}]), {code: 'unsupported'})
})

for (const method of ['replay', 'states'] as const) {
  t.test(`tiny-hybrid q4 (rollback: ${method}): rounds of batched verify + rollback equal serial decodes bit for bit`, async t => {
    const h = await openWith(await synthFixture('tiny-hybrid', 'q4'), method)
    t.teardown(() => native.closeModel(h))
    t.equal(native.modelInfo(h).draft?.gdnRollback, method)
    const V = native.modelInfo(h).vocabSize
    const spec = [native.createSequence(h, {maxLength: 128}), native.createSequence(h, {maxLength: 128})]
    const serial = [native.createSequence(h, {maxLength: 128}), native.createSequence(h, {maxLength: 128})]
    const prompts = [PROMPT, [9, 9, 2, 77]]
    for (let j = 0; j < 2; j++) {
      await step(h, spec[j], prompts[j], {logits: 'none'})
      await step(h, serial[j], prompts[j], {logits: 'none'})
    }
    // per round and sequence: the verified tokens and how many of them are kept (ragged, 0 and all included)
    const rounds = [[[5, 6, 7, 8, 9], 2], [[11, 12, 13, 14, 15, 16, 17], 7], [[20, 21, 22], 0], [[30, 31, 32, 33], 1]] as const
    let m = 0
    for (let r = 0; r < rounds.length; r++) {
      const items = [0, 1].map(j => ({seq: spec[j], tokens: Int32Array.from(rounds[(r + j) % rounds.length][0]), logits: 'all' as const, verify: true}))
      const out = (await native.step(h, items)).map(o => o.logits!)
      for (let j = 0; j < 2; j++) {
        const [tokens, keep] = rounds[(r + j) % rounds.length]
        const base = native.sequenceLength(h, serial[j])
        native.truncateSequence(h, spec[j], base + keep)
        // serial decodes of the kept tokens give the verify rows; the next decode after the rollback then equals
        // the serial sequence's next decode
        for (let i = 0; i < keep; i++) {
          const one = (await step(h, serial[j], [tokens[i]]))!
          m = Math.max(m, maxDiff(one, out[j].subarray(i * V, (i + 1) * V)))
        }
      }
    }
    t.equal(m, 0, 'max |Δlogit| between verify rows and serial decodes')
    for (let j = 0; j < 2; j++) {
      t.equal(native.sequenceLength(h, spec[j]), native.sequenceLength(h, serial[j]))
      const a = (await step(h, spec[j], [42]))!
      const b = (await step(h, serial[j], [42]))!
      t.equal(maxDiff(a, b), 0, `sequence ${j}: the state after the rollbacks equals the serial one`)
    }
  })
}

t.test('without SPLASH_GDN_ROLLBACK the native model picks the memory plan\'s method', async t => {
  t.equal(process.env.SPLASH_GDN_ROLLBACK, undefined)
  for (const dir of [DEFAULT, await synthFixture('tiny-hybrid', 'q4')]) {
    const h = await native.openModel(dir, {threads: 2})
    const info = native.modelInfo(h)
    native.closeModel(h)
    t.equal(info.draft?.gdnRollback, native.stateSizes(await readManifest(dir)).gdnRollback, dir)
  }
})

t.test('SPLASH_GDN_ROLLBACK takes replay or states only', async t => {
  process.env.SPLASH_GDN_ROLLBACK = 'sometimes'
  t.teardown(() => void delete process.env.SPLASH_GDN_ROLLBACK)
  await t.rejects(native.openModel(await synthFixture('tiny-hybrid', 'q4'), {threads: 2}), {code: 'invalid_argument', message: /SPLASH_GDN_ROLLBACK/})
})
