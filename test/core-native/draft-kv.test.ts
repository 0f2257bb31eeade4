// The draft's KV layout (core-native/model/state/draft_kv.cpp): a sliding-window draft layer keeps a doubled ring of
// window + B positions. On the -ring reference fixtures (a sliding layer with window 8 beside a full one, and two
// causal sliding layers with window 5; 300 and 260 positions of context, so the ring wraps many times) the draft's
// logits equal the numpy reference (which attends over the whole context through the window mask) however the
// context arrives: in one step, in chunks with drafts between them (block rows written into the ring, then
// overwritten by context), with rejected tokens truncated away. A saved prefix restored into a new sequence drafts
// bit for bit as the original; truncating below what the ring holds leaves a gap the draft refuses until a reset.
// Sequence bytes grow per position by the target KV and the full draft layers only.
import t, {type Test} from 'tap'
import {native, type ModelHandle} from '../../src/native/native.js'
import {GREEDY} from '../../src/engine/sampling.js'
import {stateSizes} from '../../src/serving/memory-plan.js'
import {readManifest, type ModelConfig} from '../../src/package/manifest.js'
import {fixtureFiles, fixturePackage, readFixture, relError, type Fixture} from './helpers/dflash2-fixture.js'

const BOUND = 1e-4 // as draft2.test.ts: f32 activations against float64

async function feed(h: ModelHandle, seq: number, tokens: number[]) {
  await native.step(h, [{seq, tokens: Int32Array.from(tokens), logits: 'none', capture: true}])
}

async function draft(h: ModelHandle, seq: number, token: number, n: number) {
  const [r] = await native.draft(h, [{seq, token, n, logits: true, sample: {params: GREEDY, rows: Array.from({length: n}, () => ({}))}}])
  return {logits: r.logits!, greedy: r.sampled!.map(x => x.token)}
}

function check(t: Test, fx: Fixture, got: {logits: Float32Array; greedy: number[]}, what: string) {
  const e = relError(got.logits, fx.logits)
  t.ok(e < BOUND, `${what}: max |Δ| / max |ref| = ${e.toExponential(2)}`)
  t.same(got.greedy, fx.greedy, `${what}: the greedy selector walk`)
}

for (const file of fixtureFiles().filter(f => f.includes('-ring'))) {
  t.test(`${file}: a sliding layer's ring drafts as the full context with the window mask`, async t => {
    const fx = readFixture(file)
    const window = fx.overrides.sliding_window as number
    const dir = await fixturePackage(fx, fn => t.teardown(fn))
    const h = await native.openModel(dir, {activations: 'f32', threads: 2})
    t.teardown(() => native.closeModel(h))
    const info = native.modelInfo(h)
    const B = info.draft!.blockSize
    const P = fx.prompt
    const n = fx.greedy.length
    t.ok(P.length > 10 * (window + B), `the context (${P.length}) runs far past the ring (${window + B} positions)`)
    const maxLength = P.length + 64

    // one step
    const one = native.createSequence(h, {maxLength})
    await feed(h, one, P)
    const ref = await draft(h, one, fx.anchor, n)
    check(t, fx, ref, 'context in one step')

    // chunks of odd sizes, a draft after each (its block rows land in the ring where later context goes), rejected
    // tokens stepped and truncated away (below the draft's context too, within the ring)
    const inc = native.createSequence(h, {maxLength})
    const sizes = [1, 7, 3, 40, 13, 2, 29, 5, 60, 11]
    let at = 0
    for (let i = 0; at < P.length; i++) {
      const k = Math.min(sizes[i % sizes.length], P.length - at)
      await feed(h, inc, P.slice(at, at + k))
      at += k
      if (at === P.length) break
      await draft(h, inc, P[at], 1 + (i * 5) % (B - 1))
      if (i % 3 === 1) {
        // a verify step whose drafts were all rejected; the draft saw some of them before the cut
        await feed(h, inc, [P[at], 5, 6, 7, 8].slice(0, 2 + (i % 4)))
        if (i % 2) await draft(h, inc, 9, 3)
        native.truncateSequence(h, inc, at - (i % 2 ? 2 : 0))
        if (i % 2) {
          at -= 2
          await feed(h, inc, P.slice(at, at + 2))
          at += 2
        }
      }
    }
    check(t, fx, await draft(h, inc, fx.anchor, n), 'context in chunks, drafts and truncations between them')

    // one position at a time over more than two rings' worth, a draft at every length (so runs start at every
    // ring row, and windows cross the ring's end at every offset): each equals a fresh sequence given the same
    // context in one step
    const slow = native.createSequence(h, {maxLength})
    const from = P.length - 2 * (window + B) - 5
    await feed(h, slow, P.slice(0, from))
    let worst = 0
    for (let len = from; len < P.length; len++) {
      const k = 1 + (len % (B - 1))
      const got = await draft(h, slow, P[len], k)
      const fresh = native.createSequence(h, {maxLength})
      await feed(h, fresh, P.slice(0, len))
      worst = Math.max(worst, relError(got.logits, (await draft(h, fresh, P[len], k)).logits))
      native.freeSequence(h, fresh)
      await feed(h, slow, [P[len]])
    }
    t.ok(worst < BOUND, `a draft at each of ${P.length - from} lengths, position by position, equals a fresh sequence's: max |Δ| / max |ref| = ${worst.toExponential(2)}`)
    check(t, fx, await draft(h, slow, fx.anchor, n), 'context position by position')
    native.freeSequence(h, slow)

    // a saved prefix (blocks of 128 rows and the state, as the prefix cache saves them) restores bit for bit
    const ids: number[] = []
    for (let s = 0; s < P.length; s += 128) ids.push(native.saveRows(h, one, s, Math.min(128, P.length - s)))
    const before = native.savedStats(h).bytes
    const state = native.saveState(h, one)
    const keep = Math.min(P.length, window - 1)
    t.equal(native.savedStats(h).bytes - before, info.stateBytesPerSequence + info.draft!.savedWindowBytes, 'the state carries the sliding layers\' last window − 1 positions')
    const sliding = (fx.overrides.layer_types as string[]).filter(x => x === 'sliding_attention').length
    t.equal(info.draft!.savedWindowBytes, sliding * 2 * keep * 32 * 4, 'window − 1 positions of K and V per sliding layer (1 KV head of 32)')
    const restored = [maxLength, 4 * maxLength].map(cap => native.createSequence(h, {maxLength: cap}))
    for (const r of restored) {
      t.equal(native.restoreSequence(h, r, ids, state), true, 'the draft context comes back')
      const got = await draft(h, r, fx.anchor, n)
      t.same(Array.from(got.logits), Array.from(ref.logits), 'restored: the same draft logits bit for bit')
    }
    // and they keep drafting as the original over new context
    const next = async (seq: number) => {
      await feed(h, seq, [11, 12, 13])
      return Array.from((await draft(h, seq, 14, n)).logits)
    }
    const b = await next(one)
    for (const r of restored) t.same(await next(r), b, 'after more context too')
    for (const r of restored) native.freeSequence(h, r)
    // the last block's rows overwrote ring rows of the window before position P + 3 − B + 1: cutting back to P
    // leaves a gap, refused until a reset
    native.truncateSequence(h, one, P.length)
    await t.rejects(native.draft(h, [{seq: one, token: 1, n: 3}]), {code: 'invalid_argument'}, 'the ring no longer holds the window')

    native.truncateSequence(h, one, 0)
    await feed(h, one, P)
    check(t, fx, await draft(h, one, fx.anchor, n), 'after a reset')
    for (const id of [...ids, state]) native.freeSaved(h, id)
  })
}

t.test('draft bytes: a sliding layer keeps a fixed ring; only full layers grow with maxLength', async t => {
  for (const file of fixtureFiles().filter(f => f.includes('-ring'))) {
    const fx = readFixture(file)
    const dir = await fixturePackage(fx, fn => t.teardown(fn))
    const h = await native.openModel(dir, {threads: 1})
    const info = native.modelInfo(h)
    t.teardown(() => native.closeModel(h))
    const manifest = await readManifest(dir)
    const d = manifest.draft!.config
    const sliding = d.layer_types!.filter(x => x === 'sliding_attention').length
    const row = 2 * d.num_key_value_heads * d.head_dim * 4
    t.equal(info.draft!.kvBytesPerToken, (d.num_hidden_layers - sliding) * row, `${file}: per position, the full layers only`)
    const M = d.sliding_window! + d.block_size
    const bytes = (len: number) => info.stateBytesPerSequence + len * info.kvBytesPerToken + (len + d.block_size) * info.draft!.kvBytesPerToken + sliding * row * 2 * M
    for (const len of [1000, 4096, 32768]) t.equal(native.sequenceBytes(h, len), bytes(len), `${file}: sequenceBytes(${len})`)
    // a sequence shorter than the ring keeps the linear rows (never more than before)
    t.equal(native.sequenceBytes(h, 8), info.stateBytesPerSequence + 8 * info.kvBytesPerToken + d.num_hidden_layers * (8 + d.block_size) * row)
    // the memory plan counts the same: the full layers per token, the rings per sequence
    const plan = stateSizes(manifest, 4)
    t.equal(plan.kvBytesPerToken, info.kvBytesPerToken + info.draft!.kvBytesPerToken)
    t.equal(plan.draftWindowBytes, sliding * row * 2 * M)
  }
})
