// Which native calls run on the JS thread (src/native/inline-steps.ts), and what the engine does with them on the
// real engine: the same tokens as queued calls, the event loop served between inline steps, and the calls kept
// queued while the grammar has masks to compute during them.
import t from 'tap'
import {INLINE_MAX_MS, INLINE_MAX_TOKENS, InlinePolicy, inlineEnabled} from '../../src/native/inline-steps.js'
import {NativeModel} from '../../src/native/native-model.js'
import {Engine} from '../../src/engine/engine.js'
import {samplingParams} from '../../src/engine/sampling.js'
import {native, type CallOptions, type StepItem} from '../../src/native/native.js'
import {synthFixture} from '../helpers/packages.js'

t.test('the policy: short calls like recent short ones, never a prefill chunk, never when the caller works', async t => {
  const p = new InlinePolicy(true)
  t.notOk(p.choose(1, false), 'nothing measured yet: queued')
  p.observe(1, 0.8)
  t.ok(p.choose(1, false), 'after a short call')
  t.ok(p.choose(INLINE_MAX_TOKENS, false))
  t.notOk(p.choose(INLINE_MAX_TOKENS + 1, false), 'a long call stays queued')
  t.notOk(p.choose(1, true), 'the caller has work during the call')
  p.observe(500, 4000)
  t.ok(p.choose(1, false), 'long calls do not move the average')
  for (let i = 0; i < 20; i++) p.observe(1, 10 * INLINE_MAX_MS)
  t.notOk(p.choose(1, false), 'slow short calls: queued')
  for (let i = 0; i < 20; i++) p.observe(1, INLINE_MAX_MS / 10)
  t.ok(p.choose(1, false), 'fast again: inline')
  const off = new InlinePolicy(false)
  off.observe(1, 0.1)
  t.notOk(off.choose(1, false), 'disabled: always queued')
  t.ok(inlineEnabled('cpu', {}), 'on for the CPU backend')
  t.notOk(inlineEnabled('cuda', {}), 'not yet measured on a device: queued')
  t.notOk(inlineEnabled('cpu', {SPLASH_INLINE_STEPS: '0'}))
  t.notOk(inlineEnabled('cpu', {SPLASH_INLINE_STEPS: 'off'}))
  t.ok(inlineEnabled('cuda', {SPLASH_INLINE_STEPS: '1'}), 'forced on')
})

t.test('native: an inline step or draft pass gives what a queued one gives, and settles before the call returns', async t => {
  const dir = await synthFixture('tiny-hybrid', 'q4')
  const h = await native.openModel(dir, {threads: 2})
  t.teardown(() => native.closeModel(h))
  const prompt = Int32Array.from({length: 24}, (_, i) => (i * 37) % 200 + 3)
  const run = async (opts: CallOptions) => {
    const s = native.createSequence(h, {maxLength: 128})
    const out: Float32Array[] = []
    const step = async (items: StepItem[]) => {
      const before = native.sequenceLength(h, s)
      const p = native.step(h, items, opts)
      // inline, the step has run when the call returns
      if (opts.inline) t.equal(native.sequenceLength(h, s), before + items[0]!.tokens.length, 'inline: done when the call returns')
      return p
    }
    out.push((await step([{seq: s, tokens: prompt, logits: 'last', capture: true}]))[0]!.logits!)
    for (let i = 0; i < 6; i++) out.push((await step([{seq: s, tokens: Int32Array.of(7 + i), logits: 'last', capture: true}]))[0]!.logits!)
    const drafted = await native.draft(h, [{seq: s, token: 9, n: 3}], opts)
    out.push(drafted[0]!.logits!)
    native.freeSequence(h, s)
    return out
  }
  const queued = await run({})
  const inline = await run({inline: true})
  t.equal(inline.length, queued.length)
  for (let i = 0; i < queued.length; i++) t.same(Buffer.from(inline[i]!.buffer), Buffer.from(queued[i]!.buffer), `call ${i}: the same logits bit for bit`)
  // errors come back the same way, and leave the sequence usable
  const s = native.createSequence(h, {maxLength: 8})
  await t.rejects(native.step(h, [{seq: s, tokens: new Int32Array(9), logits: 'none'}], {inline: true}), {code: 'too_long'})
  await t.rejects(native.step(h, [{seq: s, tokens: Int32Array.of(1), logits: 'none'}], {inline: 'yes' as unknown as boolean}), {code: 'invalid_argument'})
  const ok = await native.step(h, [{seq: s, tokens: Int32Array.of(1, 2), logits: 'last'}], {inline: true})
  t.ok(ok[0]!.logits, 'the sequence is not left busy')
})

t.test('the engine: inline steps give the queued tokens and let timers run between steps', async t => {
  const dir = await synthFixture('tiny-hybrid', 'q4')
  const generate = async (env: string | undefined) => {
    const saved = process.env.SPLASH_INLINE_STEPS
    if (env === undefined) delete process.env.SPLASH_INLINE_STEPS
    else process.env.SPLASH_INLINE_STEPS = env
    const m = await NativeModel.open(dir, 512, {threads: 2})
    if (saved === undefined) delete process.env.SPLASH_INLINE_STEPS
    else process.env.SPLASH_INLINE_STEPS = saved
    const calls: boolean[] = []
    const step = native.step
    native.step = (h, items, opts) => (calls.push(opts?.inline === true), step(h, items, opts))
    let ticks = 0
    const timer = setInterval(() => ticks++, 1)
    const out: number[] = []
    try {
      for await (const ev of new Engine(m).generate({prompt: Int32Array.of(5, 17, 99), maxTokens: 200, sampling: samplingParams({temperature: 0.8, seed: 3}), stopTokenIds: []}))
        if (ev.type === 'token') out.push(ev.token)
    } finally {
      clearInterval(timer)
      native.step = step
      m.close()
    }
    return {out, inline: calls.filter(x => x).length, calls: calls.length, ticks}
  }
  const queued = await generate('0')
  const inline = await generate(undefined)
  t.equal(queued.inline, 0, 'SPLASH_INLINE_STEPS=0: every step queued')
  t.ok(inline.inline > inline.calls / 2, `${inline.inline} of ${inline.calls} steps inline`)
  t.same(inline.out, queued.out, 'the same 200 sampled tokens')
  t.ok(inline.ticks > 5, `a 1 ms interval ran ${inline.ticks} times during the inline generation`)
})

t.test('an image encode in flight keeps steps queued (it holds the compute lock on a pool thread)', async t => {
  const m = await NativeModel.open(await synthFixture('tiny-vl', 'q4'), 256, {threads: 2, draft: false})
  const calls: boolean[] = []
  const step = native.step
  native.step = (h, items, opts) => (calls.push(opts?.inline === true), step(h, items, opts))
  try {
    const seq = m.createSequence(64)
    await m.step([{seq, tokens: Int32Array.of(5, 6, 7), logits: 'none'}])
    // enough decodes for the average of short calls to fall under the inline bound even when the first calls were
    // slow (a loaded machine: the prompt's call can take tens of ms, and each later call takes a quarter of the weight)
    for (let i = 0; i < 12; i++) await m.step([{seq, tokens: Int32Array.of(8 + i), logits: 'last'}])
    t.equal(calls.at(-1), true, 'decode steps inline before')
    // 1024 patches: some 200 ms, much of which the queued step below spends waiting for the lock
    const encoded = m.encodeImage!(Float32Array.from({length: 1024 * 1536}, (_, i) => Math.sin(i)), [1, 32, 32])
    await m.step([{seq, tokens: Int32Array.of(30), logits: 'last'}])
    t.equal(calls.at(-1), false, 'queued while the encode runs')
    t.ok((await encoded).length > 0)
    // that wait is not a step's time: it stays out of the inline average
    await m.step([{seq, tokens: Int32Array.of(31), logits: 'last'}])
    t.equal(calls.at(-1), true, 'inline again after it')
  } finally {
    native.step = step
    m.close()
  }
})
