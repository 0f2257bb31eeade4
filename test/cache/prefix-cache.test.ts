// The prefix cache on the real engine: a hit gives exactly the tokens a miss gives (greedy and seeded, with
// and without the draft), blocks are shared between snapshots of one prefix, a conversation that grows
// resumes from the previous turn, eviction keeps the cache inside its budget, and nothing is left behind
// natively once requests end and the cache is cleared.
import t from 'tap'
import {NativeModel} from '../../src/native/native-model.js'
import {Engine} from '../../src/engine/engine.js'
import {PrefixCache} from '../../src/cache/prefix-cache.js'
import {GREEDY, samplingParams, type SamplingParams} from '../../src/engine/sampling.js'
import {synthFixture} from '../helpers/packages.js'
import {native} from '../../src/native/native.js'
import type {Usage} from '../../src/engine/request.js'
import {randomPrompt} from '../helpers/tokens.js'

const DEFAULT = new URL('../../packages/default/', import.meta.url).pathname

async function generate(e: Engine, prompt: Int32Array, sampling: SamplingParams, maxTokens: number, anchors?: number[]) {
  const tokens: number[] = []
  let usage: Usage | undefined
  for await (const ev of e.generate({prompt, maxTokens, sampling, stopTokenIds: [], cacheAnchors: anchors})) {
    if (ev.type === 'token') tokens.push(ev.token)
    else if (ev.type === 'done') usage = ev.usage
    else if (ev.type === 'error') throw ev.error
  }
  return {tokens, usage: usage!}
}

async function withModel<T>(dir: string, draft: boolean, fn: (m: NativeModel) => Promise<T>): Promise<T> {
  const saved = process.env.SPLASH_DRAFT
  process.env.SPLASH_DRAFT = draft ? 'on' : 'off'
  const m = await NativeModel.open(dir, 4096, {threads: 2})
  if (saved === undefined) delete process.env.SPLASH_DRAFT
  else process.env.SPLASH_DRAFT = saved
  try {
    return await fn(m)
  } finally {
    m.close()
  }
}

const CACHE = 256 * 1024 * 1024

for (const draft of [true, false]) {
  t.test(`a hit gives the tokens of a miss (default package, draft ${draft ? 'on' : 'off'})`, async t => {
    await withModel(DEFAULT, draft, async m => {
      const cold = new Engine(m, {}, undefined, {cacheBytes: 0})
      // with the draft it runs on every step (not only when the engine's cost gating lets it), so the checks of the
      // next turn below do not depend on this machine's timings
      const warm = new Engine(m, draft ? {fixedDraft: 0} : {}, undefined, {cacheBytes: CACHE})
      const modes = [GREEDY, samplingParams({temperature: 0.8, topP: 0.95, seed: 11})]
      for (const [i, sampling] of modes.entries()) {
        const prompt = randomPrompt(700, m.vocabSize, 7 + i)
        const miss = await generate(cold, prompt, sampling, 40)
        const first = await generate(warm, prompt, sampling, 40)
        const again = await generate(warm, prompt, sampling, 40)
        t.equal(first.usage.cachedTokens, 0, 'the first request computes everything')
        t.equal(again.usage.cachedTokens, prompt.length - 1, 'a replay computes only the last prompt token')
        t.same(again.tokens, first.tokens, 'a hit gives the same tokens as a miss')
        // without a cache the prompt is not cut at its anchors, and a chunk boundary changes the last bits of
        // the GDN state: greedy output is the same, a sampled one may differ from the first token that is a
        // near tie
        if (sampling.temperature === 0) t.same(again.tokens, miss.tokens, 'and as an engine without a cache')
      }
      // a conversation that grows: the previous prompt and its answer are a prefix of the next prompt
      const prompt = randomPrompt(600, m.vocabSize, 17)
      const turn1 = await generate(warm, prompt, GREEDY, 24)
      const next = Int32Array.from([...prompt, ...turn1.tokens, ...randomPrompt(50, m.vocabSize, 99)])
      const hit = await generate(warm, next, GREEDY, 24)
      const coldNext = await generate(cold, next, GREEDY, 24)
      t.ok(hit.usage.cachedTokens >= prompt.length + turn1.tokens.length - 1, `the next turn resumes after the answer (${hit.usage.cachedTokens})`)
      t.same(hit.tokens, coldNext.tokens, 'and gives the tokens of a miss')
      if (draft) t.ok(hit.usage.draft, 'the draft still runs on a restored sequence')
      warm.scheduler.cache!.clear()
      t.has(m.savedStats(), {sequences: 0, rows: 0, states: 0, bytes: 0}, 'nothing is left natively')
    })
  })
}

/** The prefill items (more than one token) the model is given from now on; the real step runs. */
function recordPrefills(m: NativeModel): {tokens: number; snapshots?: number[]}[] {
  const prefills: {tokens: number; snapshots?: number[]}[] = []
  const step = m.step.bind(m)
  m.step = (items, hint) => {
    for (const it of items) if (it.tokens.length > 1) prefills.push({tokens: it.tokens.length, snapshots: it.snapshots})
    return step(items, hint)
  }
  return prefills
}

t.test('anchors: a prompt that diverges after an anchor resumes there', async t => {
  await withModel(DEFAULT, true, async m => {
    const prefills = recordPrefills(m)
    const e = new Engine(m, {}, undefined, {cacheBytes: CACHE})
    const cold = new Engine(m, {}, undefined, {cacheBytes: 0})
    const shared = randomPrompt(300, m.vocabSize, 3)
    const a = Int32Array.from([...shared, ...randomPrompt(40, m.vocabSize, 4)])
    const b = Int32Array.from([...shared, ...randomPrompt(60, m.vocabSize, 5)])
    await generate(e, a, GREEDY, 8, [shared.length])
    t.same(prefills, [{tokens: a.length, snapshots: [shared.length, a.length - 1]}], 'the prompt takes one step, which keeps the state at its anchors')
    const hit = await generate(e, b, GREEDY, 16, [shared.length])
    t.equal(hit.usage.cachedTokens, shared.length, 'resumed at the anchor both prompts share')
    t.same(hit.tokens, (await generate(cold, b, GREEDY, 16)).tokens, 'same tokens as a miss')
    // a request that ends in the step that computes its prompt saves the state kept before its last token
    const c = randomPrompt(200, m.vocabSize, 6)
    await generate(e, c, GREEDY, 1)
    const replay = await generate(e, c, GREEDY, 4)
    t.equal(replay.usage.cachedTokens, c.length - 1, 'its replay computes only the last prompt token')
    t.same(replay.tokens, (await generate(cold, c, GREEDY, 4)).tokens, 'and gives the tokens of a miss')
    e.scheduler.cache!.clear()
  })
})

t.test('anchors: a chunk the token budget cuts short ends at the last anchor it reaches', async t => {
  await withModel(DEFAULT, false, async m => {
    const prefills = recordPrefills(m)
    const e = new Engine(m, {tokenBudget: 100}, undefined, {cacheBytes: CACHE})
    const prompt = randomPrompt(260, m.vocabSize, 8)
    await generate(e, prompt, GREEDY, 8, [30, 60, 150])
    // 100 tokens a step: [0, 60) keeping 30, [60, 150), [150, 250), [250, 260) keeping 259
    t.same(prefills, [
      {tokens: 60, snapshots: [30]},
      {tokens: 90, snapshots: undefined},
      {tokens: 100, snapshots: undefined},
      {tokens: 10, snapshots: [259]},
    ])
    const next = Int32Array.from([...prompt.subarray(0, 150), ...randomPrompt(20, m.vocabSize, 9)])
    const again = await generate(e, next, GREEDY, 8, [30, 60, 150])
    t.equal(again.usage.cachedTokens, 150, 'a prompt sharing the first 150 tokens resumes at that anchor')
    const fresh = new Engine(m, {tokenBudget: 100}, undefined, {cacheBytes: CACHE})
    const miss = await generate(fresh, next, GREEDY, 8, [30, 60, 150])
    t.equal(miss.usage.cachedTokens, 0)
    t.same(again.tokens, miss.tokens, 'and gives the tokens of a miss')
    e.scheduler.cache!.clear()
    fresh.scheduler.cache!.clear()
  })
})

t.test('blocks are shared, eviction keeps the budget, clear frees everything', async t => {
  const dir = await synthFixture('tiny-hybrid', 'q4')
  await withModel(dir, false, async m => {
    const store = m.store
    const cache = new PrefixCache(store, {blockSize: 16, capacityBytes: 1e9, rowBytes: store.rowBytes, stateBytes: store.stateBytes})
    const e = new Engine(m, {}, undefined, {cacheBytes: 0})
    const prompt = randomPrompt(100, m.vocabSize, 1)
    // compute the prompt on a raw sequence, then save it at two lengths
    const seq = m.createSequence(200)
    await m.step([{seq, tokens: prompt.subarray(0, 50), logits: 'none'}])
    cache.save(seq, prompt.subarray(0, 50))
    t.match(cache.stats(), {snapshots: 1, blocks: 3})
    await m.step([{seq, tokens: prompt.subarray(50), logits: 'none'}])
    cache.save(seq, prompt)
    t.match(cache.stats(), {snapshots: 2, blocks: 6}, 'the longer prefix reuses the three blocks it shares')
    cache.save(seq, prompt)
    t.match(cache.stats(), {snapshots: 2}, 'saving the same prefix twice keeps one snapshot')
    t.equal(cache.lookup(prompt, 99)?.length, 50, 'a lookup that must leave one token picks the shorter snapshot')
    t.equal(cache.lookup(prompt)?.length, 100)
    const other = Int32Array.from(prompt)
    other[20] = (other[20] + 1) % m.vocabSize
    t.equal(cache.lookup(other), undefined, 'a prompt that differs inside the first block misses')
    m.freeSequence(seq)

    // restoring into a fresh sequence gives the same next-token logits as computing the prompt
    const hit = cache.lookup(prompt, 99)!
    const a = m.createSequence(200)
    t.equal(store.restore(a, hit.rows, hit.state), false, 'no draft context on a package without a draft')
    const [ra] = await m.step([{seq: a, tokens: prompt.subarray(50), logits: 'last'}])
    const b = m.createSequence(200)
    await m.step([{seq: b, tokens: prompt.subarray(0, 50), logits: 'none'}])
    const [rb] = await m.step([{seq: b, tokens: prompt.subarray(50), logits: 'last'}])
    t.same(Array.from(ra.logits!), Array.from(rb.logits!), 'restored state continues bit for bit')
    m.freeSequence(a)
    m.freeSequence(b)

    // a budget below one snapshot: the least recently used goes first
    const small = new PrefixCache(store, {blockSize: 16, capacityBytes: store.stateBytes + 60 * store.rowBytes, rowBytes: store.rowBytes, stateBytes: store.stateBytes})
    const s2 = m.createSequence(200)
    await m.step([{seq: s2, tokens: prompt, logits: 'none'}])
    small.save(s2, prompt)
    t.equal(small.stats().snapshots, 0, 'a snapshot larger than the budget is not kept')
    m.truncate(s2, 0)
    await m.step([{seq: s2, tokens: prompt.subarray(0, 40), logits: 'none'}])
    small.save(s2, prompt.subarray(0, 40))
    t.ok(small.stats().bytes <= small.stats().capacityBytes)
    t.equal(small.stats().snapshots, 1)
    m.freeSequence(s2)
    small.clear()
    cache.clear()
    t.has(m.savedStats(), {sequences: 0, rows: 0, states: 0, bytes: 0}, 'clear frees every block and state')
    t.equal(e.scheduler.cache, undefined, 'cacheBytes 0 means no cache')

    // bad ids are errors, not crashes
    t.throws(() => store.restore(m.createSequence(10), [123456], 654321), {code: 'invalid_argument'})
    t.throws(() => store.freeSaved(987654), {code: 'invalid_argument'})
    t.throws(() => store.saveRows(999999, 0, 1), {code: 'unknown_sequence'})
  })
})

t.test('1,000 requests with random cancellations leave no sequence behind', async t => {
  const dir = await synthFixture('tiny-hybrid', 'q4')
  await withModel(dir, false, async m => {
    const e = new Engine(m, {maxRunning: 8}, undefined, {cacheBytes: 64 * 1024 * 1024})
    const base = randomPrompt(40, m.vocabSize, 21)
    let x = 12345
    const rand = () => ((x = (Math.imul(x, 1103515245) + 12345) >>> 0) / 2 ** 32)
    const reasons: string[] = []
    let next = 0
    // 64 clients at a time, each sending requests one after another (the queue stays under its bound)
    const client = async () => {
      for (let i = next++; i < 1000; i = next++) reasons.push(await one(i))
    }
    const one = (i: number) => {
      const prompt = Int32Array.from([...base.subarray(0, 10 + Math.floor(rand() * 30)), ...randomPrompt(1 + Math.floor(rand() * 20), m.vocabSize, i + 1)])
      const ac = new AbortController()
      const mode = rand()
      return (async () => {
          const events = e.generate({prompt, maxTokens: 1 + Math.floor(rand() * 12), sampling: GREEDY, stopTokenIds: [], signal: ac.signal})
          if (mode < 0.2) ac.abort() // cancelled before it starts
          let n = 0
          for await (const ev of events) {
            if (ev.type === 'token' && ++n === 2 && mode < 0.5) ac.abort() // cancelled mid-generation
            if (ev.type === 'done') return ev.reason
            if (ev.type === 'error') throw ev.error
          }
          return 'ended'
        })()
    }
    await Promise.all(Array.from({length: 64}, client))
    t.equal(reasons.length, 1000)
    await e.idle()
    t.ok(reasons.includes('cancelled') && reasons.some(r => r !== 'cancelled'), 'both cancelled and completed requests')
    const stats = e.scheduler.cache!.stats()
    t.ok(stats.hits > 0, `the cache served hits (${stats.hits})`)
    t.ok(stats.bytes <= stats.capacityBytes)
    t.equal(m.savedStats().sequences, 0, 'no live sequence')
    // idle buffers kept for reuse never exceed what the 8 running sequences could hold at once
    t.ok(m.savedStats().pooled <= 8 * native.sequenceBytes(m.handle, 4096 + 64), `pooled buffers are bounded (${m.savedStats().pooled} bytes)`)
    e.scheduler.cache!.clear()
    t.has(m.savedStats(), {sequences: 0, rows: 0, states: 0, bytes: 0}, 'and nothing saved after clear')
  })
})
