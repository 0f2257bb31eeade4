// Speculative decoding through the engine: greedy output with the draft is token-for-token the output with
// SPLASH_DRAFT=off (default package and synthetic ones with a DFlash and a DFlash 2 draft, several prompts, batched with ragged acceptance), with
// and without penalties (verify rows count the drafts before them); sampled output (rejection rule) follows the
// target distribution (chi-square, end to end through the engine, top-k and top-p paths) and a seed gives the
// same output on every run, serial or batched, with logprobs; acceptance is reported in usage and in the metrics;
// the backend's pass prices decide whether a new sequence drafts at once.
import t from 'tap'
import {mkdtempSync, readFileSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {NativeModel, draftDisabled} from '../../src/native/native-model.js'
import {Engine} from '../../src/engine/engine.js'
import {Metrics} from '../../src/engine/metrics.js'
import {GREEDY, samplingParams, type SamplingParams, type SampledToken} from '../../src/engine/sampling.js'
import {distribution} from '../helpers/sampling-reference.js'
import {CHI_999, chiSquare} from '../helpers/chi-square.js'
import {native} from '../../src/native/native.js'
import {readManifest} from '../../src/package/manifest.js'
import {load as loadQwen} from '../../models/qwen3_5/index.js'
import {synthFixture, uselessDraftFixture} from '../helpers/packages.js'
import type {Usage} from '../../src/engine/request.js'

const DEFAULT = new URL('../../packages/default/', import.meta.url).pathname
const TEXTS = [
  'Write a short story about a cat.',
  'What is the capital of France?',
  'List three uses of Python.',
  'Explain how rain forms, step by step.',
  'Hello!',
]

async function chatPrompts(dir: string): Promise<Int32Array[]> {
  const family = await loadQwen(dir, await readManifest(dir))
  try {
    return TEXTS.map(text => Int32Array.from(family.codec.encode(`<|im_start|>user\n${text}<|im_end|>\n<|im_start|>assistant\n`)))
  } finally {
    await family.close()
  }
}

async function rawPrompt(dir: string, text: string): Promise<number[]> {
  const family = await loadQwen(dir, await readManifest(dir))
  try {
    return family.codec.encode(text)
  } finally {
    await family.close()
  }
}

async function generate(e: Engine, prompt: Int32Array, sampling: SamplingParams, maxTokens: number, stop: number[], logprobs?: number) {
  const tokens: number[] = []
  const logprobed: SampledToken[] = []
  let usage: Usage | undefined
  for await (const ev of e.generate({prompt, maxTokens, sampling, stopTokenIds: stop, logprobs})) {
    if (ev.type === 'token') tokens.push(ev.token), logprobed.push({token: ev.token, logprob: ev.logprob, top: ev.top})
    else if (ev.type === 'done') usage = ev.usage
    else if (ev.type === 'error') throw ev.error
  }
  return {tokens, logprobed, usage: usage!}
}

async function withModel<T>(dir: string, draft: boolean, fn: (m: NativeModel) => Promise<T>): Promise<T> {
  const saved = process.env.SPLASH_DRAFT
  process.env.SPLASH_DRAFT = draft ? 'on' : 'off'
  const m = await NativeModel.open(dir, 4096, {threads: 2})
  process.env.SPLASH_DRAFT = saved
  try {
    return await fn(m)
  } finally {
    m.close()
  }
}

t.test('SPLASH_DRAFT=off is recognised', async t => {
  t.ok(draftDisabled({SPLASH_DRAFT: 'off'}))
  t.ok(draftDisabled({SPLASH_DRAFT: '0'}))
  t.notOk(draftDisabled({}))
  t.notOk(draftDisabled({SPLASH_DRAFT: 'on'}))
})

t.test('a new greedy sequence drafts from its first decode when the backend prices rows as a GPU does, and probes after 16 plain decodes at CPU prices (the default package, its real engine; only the backend the model reports differs)', async t => {
  const [prompt] = await chatPrompts(DEFAULT)
  const trace = join(mkdtempSync(join(tmpdir(), 'splash-spec-')), 'steps.txt')
  const firstPass = await withModel(DEFAULT, true, async m => {
    const out: Record<string, number> = {}
    for (const backend of ['cuda', 'cpu']) {
      const priced = Object.create(m, {backend: {value: backend}}) as NativeModel
      rmSync(trace, {force: true})
      process.env.SPLASH_TRACE_STEPS = trace
      try {
        await generate(new Engine(priced), prompt!, GREEDY, 24, [])
      } finally {
        delete process.env.SPLASH_TRACE_STEPS
      }
      // the steps after the prompt's: which one first verified drafts
      const decodes = readFileSync(trace, 'utf8').trim().split('\n').slice(1)
      out[backend] = decodes.findIndex(l => / verify=1$/.test(l))
    }
    return out
  })
  t.equal(firstPass.cuda, 0, 'GPU prices: the first decode is a verify pass')
  t.ok(firstPass.cpu >= 15, `CPU prices: ${firstPass.cpu} plain decodes before the first probe`)
})

t.test('a draft that predicts nothing (the default package with random draft weights): greedy requests learn it from each other, so after the first ones they stop probing it, and their output is the output without the draft', async t => {
  const dir = await uselessDraftFixture(DEFAULT)
  const prompts = await chatPrompts(DEFAULT)
  const stop = [16377, 16375]
  const off = await withModel(dir, false, async m => {
    const e = new Engine(m)
    const out = []
    for (const p of prompts) out.push((await generate(e, p, GREEDY, 48, stop)).tokens)
    return out
  })
  const rounds = 3
  const passes = await withModel(dir, true, async m => {
    const e = new Engine(m)
    const per: number[] = []
    for (let r = 0; r < rounds; r++)
      for (const [i, p] of prompts.entries()) {
        const o = await generate(e, p, GREEDY, 48, stop)
        t.same(o.tokens, off[i], `round ${r}, prompt ${i}: the output without the draft`)
        per.push(o.usage.draft?.passes ?? 0)
      }
    return per
  })
  const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0)
  const decodes = off.reduce((a, o) => a + o.length, 0) * rounds
  t.ok(sum(passes) >= 1, `the draft was tried (passes per request: ${passes.join(' ')}; ${decodes} tokens in all)`)
  // One clock for the model: probes after 16, 32, 64, 128 and 256 plain decodes of all the requests together, so
  // the later rounds (after ~200 decodes) see two at most; each request probed on its own before (one pass or more
  // per request). The first round's count is left open: greedy sequences price a pass by the measured step times,
  // and on a loaded machine a first request has drafted several times before its acceptance fell.
  const later = passes.slice(prompts.length)
  t.ok(sum(later) <= 4, `the later rounds: ${sum(later)} passes over ${later.length} requests`)
})

for (const [name, dir, stop] of [
  ['default package', async () => DEFAULT, [16377, 16375]],
  ['synthetic tiny-hybrid', async () => synthFixture('tiny-hybrid', 'q4'), []],
  // DFlash 2 (conv, candidate selector, sliding window 12: shorter than the block, cut on both sides)
  ['synthetic tiny-hybrid, DFlash 2 draft', async () => synthFixture('tiny-hybrid', 'q4', {dflash2: {window: 12}}), []],
] as const) {
  t.test(`${name}: seeded sampling with the draft gives the same output every run, serial or batched (T 0.7, T 1 with top_p / top_k / min_p, penalties, logprobs)`, async t => {
    const d = await dir()
    const prompts = name === 'default package' ? await chatPrompts(d) : TEXTS.map((_, i) => Int32Array.from({length: 5 + i}, (_, j) => (j * 31 + i * 7) % 200 + 1))
    const params = (i: number) =>
      samplingParams(
        i % 2
          ? {temperature: 0.7, seed: 100 + i, frequencyPenalty: i === 3 ? 0.5 : 0}
          : {temperature: 1, topP: 0.9, topK: 20, minP: i === 2 ? 0.02 : 0, seed: 100 + i},
      )
    const run = () =>
      withModel(d, true, async m => {
        const metrics = new Metrics()
        const e = new Engine(m, {}, metrics)
        const batched = await Promise.all(prompts.map((p, i) => generate(e, p, params(i), 48, [...stop], i === 1 ? 3 : undefined)))
        const serial = []
        for (const [i, p] of prompts.entries()) serial.push(await generate(e, p, params(i), 48, [...stop], i === 1 ? 3 : undefined))
        return {batched, serial, passes: metrics.specPasses.get()}
      })
    const a = await run()
    const b = await run()
    t.ok(a.passes > 0, `${a.passes} verify passes`)
    t.same(a.batched.map(o => o.tokens), a.serial.map(o => o.tokens), 'batched = serial')
    t.same(b.batched.map(o => o.tokens), a.batched.map(o => o.tokens), 'second run = first run')
    t.same(b.batched[1].logprobed, a.batched[1].logprobed, 'the same logprobs')
    const lp = a.batched[1].logprobed
    t.ok(lp.length > 0 && lp.every(x => x.top!.length === 3 && x.logprob! <= 0 && x.logprob! <= x.top![0].logprob), 'logprobs reported')
  })

  t.test(`${name}: greedy with penalties decodes speculatively and equals SPLASH_DRAFT=off`, async t => {
    const d = await dir()
    const prompts = name === 'default package' ? await chatPrompts(d) : TEXTS.map((_, i) => Int32Array.from({length: 5 + i}, (_, j) => (j * 31 + i * 7) % 200 + 1))
    const params = (i: number) =>
      samplingParams({temperature: 0, ...[{repetitionPenalty: 1.3}, {presencePenalty: 1.5}, {frequencyPenalty: 0.8}, {repetitionPenalty: 0.9, frequencyPenalty: -0.5, presencePenalty: 0.4}, {frequencyPenalty: 2}][i]})
    const off = await withModel(d, false, async m => {
      const e = new Engine(m)
      return Promise.all(prompts.map((p, i) => generate(e, p, params(i), 64, [...stop])))
    })
    const metrics = new Metrics()
    const on = await withModel(d, true, async m => {
      const e = new Engine(m, {fixedDraft: 0}, metrics) // speculate on every step, whatever it costs
      return Promise.all(prompts.map((p, i) => generate(e, p, params(i), 64, [...stop])))
    })
    for (let i = 0; i < prompts.length; i++) {
      t.same(on[i].tokens, off[i].tokens, `prompt ${i}`)
      t.ok((on[i].usage.draft?.passes ?? 0) > 0, `prompt ${i} verified drafts`)
    }
    t.ok(metrics.specCommitted.get() > metrics.specPasses.get(), 'drafts were accepted')
  })

  t.test(`${name}: greedy with the draft equals greedy with SPLASH_DRAFT=off (serial and batched)`, async t => {
    const d = await dir()
    const prompts = name === 'default package' ? await chatPrompts(d) : TEXTS.map((_, i) => Int32Array.from({length: 5 + i}, (_, j) => (j * 31 + i * 7) % 200 + 1))
    const maxTokens = 64
    const off = await withModel(d, false, async m => {
      t.equal(m.draftBlockSize, 0)
      const e = new Engine(m)
      const out = []
      for (const p of prompts) out.push(await generate(e, p, GREEDY, maxTokens, [...stop]))
      return out
    })
    const metrics = new Metrics()
    const [serial, batched] = await withModel(d, true, async m => {
      t.equal(m.draftBlockSize, 16)
      const e = new Engine(m, {}, metrics)
      const serial = []
      for (const p of prompts) serial.push(await generate(e, p, GREEDY, maxTokens, [...stop]))
      const batched = await Promise.all(prompts.map(p => generate(e, p, GREEDY, maxTokens, [...stop])))
      return [serial, batched]
    })
    for (let i = 0; i < prompts.length; i++) {
      t.same(serial[i].tokens, off[i].tokens, `prompt ${i}: serial`)
      t.same(batched[i].tokens, off[i].tokens, `prompt ${i}: batched`)
      t.equal(off[i].usage.draft, undefined)
      t.ok(serial[i].usage.draft === undefined || serial[i].usage.draft!.passes > 0)
    }
    const passes = metrics.specPasses.get()
    t.ok(passes > 0, 'verify passes happened')
    t.ok(metrics.specCommitted.get() >= passes, 'each pass commits at least one token')
    t.match(metrics.render(), /splash_spec_acceptance_length_count \d+/)
    if (name === 'default package') t.ok(metrics.specCommitted.get() / passes > 1.2, `the trained draft is accepted (${(metrics.specCommitted.get() / passes).toFixed(2)} per pass)`)
  })
}

t.test('DFlash 2 draft with window 4 (its layer keeps a ring of 20 positions): long prompts and outputs, greedy with the draft on every step equals SPLASH_DRAFT=off, serial, batched and from the prefix cache', async t => {
  const d = await synthFixture('tiny-hybrid', 'q4', {dflash2: {window: 4}})
  const prompts = [300, 420].map((n, i) => Int32Array.from({length: n}, (_, j) => (j * 37 + i * 11 + ((j * j) % 7)) % 250 + 1))
  const maxTokens = 160
  const off = await withModel(d, false, async m => {
    const e = new Engine(m)
    const out = []
    for (const p of prompts) out.push(await generate(e, p, GREEDY, maxTokens, []))
    return out
  })
  const metrics = new Metrics()
  const [serial, batched, cached] = await withModel(d, true, async m => {
    // speculate on every step: a rollback after most of them
    const e = new Engine(m, {fixedDraft: 0}, metrics, {cacheBytes: 64 * 1024 * 1024})
    const serial = []
    for (const p of prompts) serial.push(await generate(e, p, GREEDY, maxTokens, []))
    const batched = await Promise.all(prompts.map(p => generate(e, p, GREEDY, maxTokens, [])))
    const cached = []
    for (const p of prompts) cached.push(await generate(e, p, GREEDY, maxTokens, []))
    return [serial, batched, cached]
  })
  for (let i = 0; i < prompts.length; i++) {
    t.equal(off[i].tokens.length, maxTokens)
    t.same(serial[i].tokens, off[i].tokens, `prompt ${i}: serial`)
    t.same(batched[i].tokens, off[i].tokens, `prompt ${i}: batched`)
    t.same(cached[i].tokens, off[i].tokens, `prompt ${i}: restored from the prefix cache`)
    t.ok(cached[i].usage.cachedTokens > 0 && (cached[i].usage.draft?.passes ?? 0) > 0, `prompt ${i}: a cache hit (${cached[i].usage.cachedTokens} positions) that still drafts`)
  }
  t.ok(metrics.specPasses.get() > 2 * maxTokens / 16, `${metrics.specPasses.get()} verify passes`)
})

for (const method of ['replay', 'states'] as const) {
  t.test(`default package (GDN rollback: ${method}): greedy with the draft on every step equals SPLASH_DRAFT=off, batched`, async t => {
    const prompts = await chatPrompts(DEFAULT)
    const stop = [16377, 16375]
    const off = await withModel(DEFAULT, false, async m => {
      const e = new Engine(m)
      return Promise.all(prompts.map(p => generate(e, p, GREEDY, 48, stop)))
    })
    process.env.SPLASH_GDN_ROLLBACK = method
    t.teardown(() => {
      delete process.env.SPLASH_GDN_ROLLBACK
    })
    const metrics = new Metrics()
    const on = await withModel(DEFAULT, true, async m => {
      t.equal(m.info.draft?.gdnRollback, method)
      const e = new Engine(m, {fixedDraft: 0}, metrics) // speculate on every step: many rollbacks
      return Promise.all(prompts.map(p => generate(e, p, GREEDY, 48, stop)))
    })
    for (let i = 0; i < prompts.length; i++) t.same(on[i].tokens, off[i].tokens, `prompt ${i}`)
    const passes = metrics.specPasses.get()
    t.ok(passes > 0 && metrics.specCommitted.get() < passes * 16, `${passes} verify passes, some drafts rejected (rolled back)`)
  })
}

for (const [name, dir, params] of [
  ['default package', async () => DEFAULT, {temperature: 1, topK: 8}],
  ['synthetic tiny-hybrid', async () => synthFixture('tiny-hybrid', 'q4'), {temperature: 1, topK: 8}],
  ['synthetic tiny-hybrid, DFlash 2 draft', async () => synthFixture('tiny-hybrid', 'q4', {dflash2: {window: 12}}), {temperature: 1, topK: 8}],
  ['default package', async () => DEFAULT, {temperature: 0.7, topP: 0.9}],
] as const)
t.test(`${name}: sampled output with the draft follows the target distribution (${JSON.stringify(params)})`, async t => {
  const d = await dir()
  const prompt = name === 'default package' ? Int32Array.from(await rawPrompt(d, 'Once upon a time, there was a')) : Int32Array.of(5, 17, 99, 3)
  const sampling = (seed: number) => samplingParams({...params, seed})
  // the first token comes from the prompt's logits; the second from the first verify pass [anchor, 1 draft]
  // (max_tokens 3 leaves room for exactly one draft): the accepted draft or the residual sample (rejection rule).
  // Condition on the most frequent first token.
  const n = name === 'default package' ? 400 : 2000
  const metrics = new Metrics()
  const results = await withModel(d, true, async m => {
    // always speculate (no cost-based fallback to plain decodes) so every sample goes through a verify pass
    const e = new Engine(m, {maxRunning: 50, fixedDraft: 0}, metrics)
    const out: number[][] = []
    for (let b = 0; b < n; b += 50)
      out.push(...(await Promise.all(Array.from({length: 50}, (_, i) => generate(e, prompt, sampling(b + i + 1), 3, [])))).map(r => r.tokens))
    // seeded: the same seed gives the same output
    const again = await generate(e, prompt, sampling(7), 3, [])
    t.same(again.tokens, out[6], 'same seed, same tokens')
    const passes = metrics.specPasses.get()
    t.ok(passes >= n, 'every generation verified a draft')
    const committed = metrics.specCommitted.get()
    t.ok(committed > passes && committed < 2 * passes, `drafts accepted and rejected (${(committed / passes).toFixed(2)} tokens per pass)`)
    return out
  })
  const firsts = new Map<number, number>()
  for (const r of results) firsts.set(r[0], (firsts.get(r[0]) ?? 0) + 1)
  const [t1] = [...firsts].sort((a, b) => b[1] - a[1])[0]
  const seconds = new Map<number, number>()
  let m = 0
  for (const r of results)
    if (r[0] === t1) {
      seconds.set(r[1], (seconds.get(r[1]) ?? 0) + 1)
      m++
    }
  // the target's distribution after [prompt, t1]
  const h = await native.openModel(d, {threads: 2, draft: false})
  const s = native.createSequence(h, {maxLength: 64})
  const [{logits}] = await native.step(h, [{seq: s, tokens: Int32Array.from([...prompt, t1]), logits: 'last'}])
  native.closeModel(h)
  const p = distribution(logits!, {params: sampling(0), rows: []})
  const {chi, df} = chiSquare(seconds, p, m)
  t.ok(m >= 50, `${m} samples after the most frequent first token`)
  t.ok(df >= 2, `${df} degrees of freedom`)
  t.ok(chi < CHI_999[Math.min(df, 16)], `chi-square ${chi.toFixed(2)} with ${df} df (${m} samples)`)
})
