// The scheduler and the engine's step loop on a fake step model (test/helpers/fake-step-model.ts, no native engine):
// request checks, admission under the batch and queue limits and under the backend's memory (a sequence reserves
// prompt + max_tokens when admitted, so admission waits and nothing is preempted), the order of a batch (decodes, then prefill chunks
// under the token budget), stop conditions, cancellation before, between and during steps, a failing step, and
// seeded output that does not depend on batching.
import t from 'tap'
import {Engine} from '../../src/engine/engine.js'
import {Scheduler} from '../../src/engine/scheduler.js'
import {samplingParams, GREEDY} from '../../src/engine/sampling.js'
import type {GenerationEvent, GenerationRequest, Usage} from '../../src/engine/request.js'
import {SplashError} from '../../src/errors.js'
import {FakeStepModel, nextToken} from '../helpers/fake-step-model.js'

const greedy = samplingParams({temperature: 0})

function request(prompt: number[], maxTokens: number, extra: Partial<GenerationRequest> = {}): GenerationRequest {
  return {prompt: Int32Array.from(prompt), maxTokens, sampling: greedy, stopTokenIds: [], ...extra}
}

/** What the fake model generates greedily after `prompt`, stopping before a stop token. */
function expected(prompt: number[], maxTokens: number, vocab: number, stop: number[] = []): number[] {
  const seq = [...prompt]
  const out: number[] = []
  while (out.length < maxTokens) {
    const tok = nextToken(seq, vocab)
    if (stop.includes(tok)) break
    out.push(tok)
    seq.push(tok)
  }
  return out
}

interface Outcome {
  tokens: number[]
  reason?: string
  usage?: Usage
  error?: Error
}

function collect(engine: Engine, req: GenerationRequest): {outcome: Promise<Outcome>; cancel: () => void} {
  const o: Outcome = {tokens: []}
  let done!: (o: Outcome) => void
  const outcome = new Promise<Outcome>(r => (done = r))
  const handle = engine.submit(req, (e: GenerationEvent) => {
    if (e.type === 'token') o.tokens.push(e.token)
    else if (e.type === 'done') done({...o, reason: e.reason, usage: e.usage})
    else if (e.type === 'error') done({...o, error: e.error})
  })
  return {outcome, cancel: handle.cancel}
}

const prompt = (n: number, seed = 1) => Array.from({length: n}, (_, i) => (i * 7 + seed * 13) % 60)

t.test('requests the model cannot serve are refused with a clear error, before anything runs', async t => {
  const m = new FakeStepModel({vocabSize: 64, contextLength: 32})
  const s = new Scheduler(m, {tokenBudget: 16, maxRunning: 2, maxWaiting: 2})
  const refused = (req: GenerationRequest, code: string, param: string) => {
    try {
      s.add(req, () => {})
      t.fail(`${code} accepted`)
    } catch (err) {
      t.ok(err instanceof SplashError, `${code}: a SplashError`)
      t.equal((err as SplashError).status, 400, `${code}: 400`)
      t.equal((err as SplashError).code, code, code)
      t.equal((err as SplashError).param, param, `${code}: names ${param}`)
    }
  }
  refused(request([], 4), 'invalid_request', 'prompt')
  refused(request(prompt(32), 1), 'context_length_exceeded', 'messages')
  refused(request(prompt(20), 20), 'context_length_exceeded', 'max_tokens')
  refused(request([1, 2, 64], 1), 'invalid_request', 'prompt')
  refused(request([1, 2], 1, {sampling: {...greedy, logitBias: {ids: Int32Array.of(99), values: Float32Array.of(1)}}}), 'invalid_request', 'logit_bias')
  t.equal(m.created, 0, 'no sequence was created')
  t.equal(s.numWaiting, 0, 'nothing queued')
})

t.test('a full queue answers 503 with Retry-After; the batch limit makes the rest wait, FIFO', async t => {
  const m = new FakeStepModel()
  const s = new Scheduler(m, {tokenBudget: 64, maxRunning: 2, maxWaiting: 3})
  const seqs = [0, 1, 2].map(i => s.add(request(prompt(5, i), 3), () => {}))
  try {
    s.add(request(prompt(5, 9), 3), () => {})
    t.fail('a fourth request was queued')
  } catch (err) {
    t.ok(err instanceof SplashError && err.status === 503 && err.retryAfter === 1, 'the fourth waits nowhere: 503 with Retry-After')
  }
  const b = s.schedule()
  t.same(b.seqs.map(q => q.id), [seqs[0]!.id, seqs[1]!.id], 'the first two are admitted, in order')
  t.equal(s.numRunning, 2)
  t.equal(s.numWaiting, 1, 'the third waits for room')
  t.equal(m.created, 2, 'only admitted requests get a sequence')
})

t.test('admission reserves prompt + max_tokens and waits for memory rather than overcommitting; no preemption', async t => {
  // room for 40 tokens of state: two 5 + 15 reservations fit, a third waits until one of them is freed
  const m = new FakeStepModel({memoryTokens: 40})
  const s = new Scheduler(m, {tokenBudget: 64, maxRunning: 4, maxWaiting: 4})
  const seqs = [0, 1, 2].map(i => s.add(request(prompt(5, i), 15), () => {}))
  const b = s.schedule()
  t.same(b.seqs.map(q => q.id), [seqs[0]!.id, seqs[1]!.id], 'the first two are admitted, in order')
  t.equal(m.reservedTokens, 40, 'each reserved its prompt and all of its max_tokens at admission')
  t.equal(s.numWaiting, 1, 'the third waits: the backend has no room for its reservation')
  t.equal(seqs[2]!.status, 'waiting', 'it is neither failed nor admitted')

  // the same through the engine: every request completes with the output it has alone, live sequences never
  // hold more than the memory, and none is ever cut short (a running sequence already holds all it needs)
  const m2 = new FakeStepModel({memoryTokens: 40})
  const engine = new Engine(m2, {tokenBudget: 64, maxRunning: 4, maxWaiting: 8})
  let most = 0
  const step = m2.step.bind(m2)
  m2.step = items => {
    most = Math.max(most, m2.reservedTokens)
    return step(items)
  }
  const reqs = [0, 1, 2, 3].map(i => collect(engine, request(prompt(5, i), 15)))
  const outs = await Promise.all(reqs.map(r => r.outcome))
  for (const [i, o] of outs.entries()) {
    t.equal(o.reason, 'length', `request ${i} ran to its max_tokens`)
    t.same(o.tokens, expected(prompt(5, i), 15, 64), `request ${i}: the output it has alone`)
  }
  t.equal(most, 40, 'the reservations filled the memory and never exceeded it')
  t.equal(m2.live, 0, 'every sequence is freed')
})

t.test('a request that cannot be admitted while nothing runs fails alone; a waiting one can be cancelled', async t => {
  const m = new FakeStepModel({memoryTokens: 30})
  const engine = new Engine(m, {tokenBudget: 64, maxRunning: 4, maxWaiting: 8})
  const big = await collect(engine, request(prompt(5), 30)).outcome
  t.ok(big.error instanceof SplashError && big.error.code === 'out_of_memory' && big.error.status === 503, 'too big for the memory with nothing to wait for: 503 out_of_memory')
  t.equal(m.live, 0)
  let open!: () => void
  m.gate = new Promise<void>(r => (open = r))
  const first = collect(engine, request(prompt(5, 1), 15))
  const second = collect(engine, request(prompt(5, 2), 15))
  const third = collect(engine, request(prompt(5, 3), 5))
  await new Promise(r => setImmediate(r))
  t.equal(m.live, 1, 'the second waits for memory (and the third behind it, FIFO)')
  second.cancel()
  t.equal((await second.outcome).reason, 'cancelled', 'a request waiting for memory is cancelled at once')
  open()
  m.gate = undefined
  const [f, th] = await Promise.all([first.outcome, third.outcome])
  t.same(f.tokens, expected(prompt(5, 1), 15, 64))
  t.same(th.tokens, expected(prompt(5, 3), 5, 64), 'the next one is admitted once the cancelled one is gone')
  await engine.idle()
  t.equal(m.live, 0)
})

t.test('a batch holds decodes first, then prefill chunks under the token budget', async t => {
  const m = new FakeStepModel()
  const engine = new Engine(m, {tokenBudget: 8, maxRunning: 4, maxWaiting: 8})
  let open!: () => void
  m.gate = new Promise<void>(r => (open = r))
  const short = collect(engine, request(prompt(3), 6))
  await new Promise(r => setImmediate(r)) // the short prompt's step is in flight when the long one arrives
  const long = collect(engine, request(prompt(30, 2), 2))
  m.gate = undefined
  open()
  const [a, b] = await Promise.all([short.outcome, long.outcome])
  t.same(a.tokens, expected(prompt(3), 6, 64), 'the short request: the model’s greedy output')
  t.same(b.tokens, expected(prompt(30, 2), 2, 64), 'the long one too')
  for (const [i, items] of m.steps.entries()) {
    const total = items.reduce((n, it) => n + it.tokens.length, 0)
    t.ok(total <= 8, `step ${i}: ${total} tokens within the budget`)
    const firstPrefill = items.findIndex(it => it.tokens.length > 1)
    if (firstPrefill >= 0) t.ok(items.slice(firstPrefill).every(it => it.tokens.length > 1 || items.indexOf(it) < firstPrefill), `step ${i}: no decode after a prefill chunk`)
  }
  const mixed = m.steps.find(items => items.length === 2 && items[0]!.tokens.length === 1 && items[1]!.tokens.length > 1)
  t.ok(mixed, 'a step decodes the short request and prefills the long one, the decode first')
  t.equal(mixed!.reduce((n, it) => n + it.tokens.length, 0), 8, 'the chunk fills what the decode leaves of the budget')
  t.equal(m.live, 0, 'every sequence is freed')
})

t.test('stop tokens end a request with "stop" and are not emitted; max tokens with "length"', async t => {
  const m = new FakeStepModel()
  const engine = new Engine(m)
  const p = prompt(6, 3)
  const free = expected(p, 8, 64)
  const stop = [free[3]!]
  const stopped = await collect(engine, request(p, 8, {stopTokenIds: stop})).outcome
  t.same(stopped.tokens, expected(p, 8, 64, stop), 'up to the stop token')
  t.equal(stopped.reason, 'stop')
  t.equal(stopped.usage?.completionTokens, stopped.tokens.length, 'the stop token is not counted as output')
  const long = await collect(engine, request(p, 8)).outcome
  t.equal(long.reason, 'length')
  t.same(long.tokens, free)
  const none = await collect(engine, request(p, 0)).outcome
  t.equal(none.reason, 'length', 'max tokens 0: the prompt only')
  t.same(none.tokens, [])
  t.equal(none.usage?.promptTokens, 6)
  t.equal(m.live, 0)
})

t.test('cancellation: waiting, between steps and during a step; the sequence is freed every time', async t => {
  const m = new FakeStepModel()
  const engine = new Engine(m, {tokenBudget: 64, maxRunning: 1, maxWaiting: 8})
  let open!: () => void
  m.gate = new Promise<void>(r => (open = r))
  const running = collect(engine, request(prompt(4), 50))
  const waiting = collect(engine, request(prompt(4, 2), 50))
  await new Promise(r => setImmediate(r))
  t.equal(m.steps.length, 1, 'the first request’s prefill is in flight')
  waiting.cancel()
  const w = await waiting.outcome
  t.equal(w.reason, 'cancelled', 'a waiting request ends at once')
  t.equal(m.created, 1, 'it never got a sequence')
  running.cancel() // in flight: freed right after the step
  t.equal(m.live, 1, 'not freed while its step runs')
  open()
  m.gate = undefined
  const r = await running.outcome
  t.equal(r.reason, 'cancelled')
  t.same(r.tokens, [], 'the step’s token is not emitted after the cancel')
  await engine.idle()
  t.equal(m.live, 0, 'freed after the step')

  const ac = new AbortController()
  const between = collect(engine, request(prompt(4, 3), 200, {signal: ac.signal}))
  while (m.steps.length < 5) await new Promise(r => setImmediate(r))
  ac.abort()
  const b = await between.outcome
  t.equal(b.reason, 'cancelled', 'an aborted signal cancels a running request')
  t.ok(b.tokens.length < 200, 'it stopped early')
  t.same(b.tokens, expected(prompt(4, 3), b.tokens.length, 64), 'what it emitted is the model’s output')
  await engine.idle()
  t.equal(m.live, 0)
  const pre = new AbortController()
  pre.abort()
  t.equal((await collect(engine, request(prompt(4), 5, {signal: pre.signal})).outcome).reason, 'cancelled', 'an already aborted signal: cancelled at once')
})

t.test('a step that throws fails the requests in it alone; the engine serves the next ones', async t => {
  const m = new FakeStepModel()
  const engine = new Engine(m, {tokenBudget: 64, maxRunning: 4, maxWaiting: 8})
  let failed = 0
  m.failWhen = items => (items.length === 2 && failed++ === 0 ? new Error('device lost') : undefined)
  const a = collect(engine, request(prompt(4), 5))
  const b = collect(engine, request(prompt(4, 2), 5))
  const [ra, rb] = await Promise.all([a.outcome, b.outcome])
  t.equal(ra.error?.message, 'device lost', 'the first request gets the step’s error')
  t.equal(rb.error?.message, 'device lost', 'so does the second (same step)')
  t.equal(ra.tokens.length, 1, 'the first had its prompt token before the failing step')
  t.equal(m.live, 0, 'both sequences are freed')
  const c = await collect(engine, request(prompt(4, 3), 5)).outcome
  t.same(c.tokens, expected(prompt(4, 3), 5, 64), 'a later request runs normally')
})

t.test('requests that reach an idle engine together start in one step (EngineOptions.gather); nothing waits while sequences run', async t => {
  const burst = async (gather: number | undefined) => {
    const m = new FakeStepModel()
    const engine = new Engine(m, {tokenBudget: 64, maxRunning: 8, maxWaiting: 8}, undefined, gather === undefined ? {} : {gather})
    // a lone request first: its one-sequence decode steps are the gather's measure (none measured: no wait)
    const lone = collect(engine, request(prompt(4, 9), 3))
    t.equal(m.steps.length, 1, 'nothing measured yet: the first request starts at once')
    t.same((await lone.outcome).tokens, expected(prompt(4, 9), 3, 64))
    await engine.idle()
    const before = m.steps.length
    const three = [1, 2, 3].map(i => collect(engine, request(prompt(4 + i, i), 6)))
    const late = new Promise<Outcome>(resolve => {
      // once the three are running, a newcomer joins at the next step, as without the gather
      const wait = () => (m.steps.length >= before + 2 ? resolve(collect(engine, request(prompt(5, 7), 2)).outcome) : setImmediate(wait))
      wait()
    })
    const outs = await Promise.all([...three.map(c => c.outcome), late])
    await engine.idle()
    for (const [i, o] of outs.slice(0, 3).entries()) t.same(o.tokens, expected(prompt(5 + i, i + 1), 6, 64), 'the same tokens either way')
    t.same(outs[3]!.tokens, expected(prompt(5, 7), 2, 64))
    const late4 = m.steps.slice(before).findIndex(items => items.some(it => it.tokens.length === 5 && it.tokens[0] === prompt(5, 7)[0]))
    return {first: m.steps[before]!.length, lateAt: late4, live: m.live}
  }
  const off = await burst(undefined)
  t.equal(off.first, 1, 'no gather: the first arrival starts alone (the others wait for the next step)')
  const on = await burst(1e4) // the fake's steps take microseconds: a large share makes the gap the cap, 10 ms
  t.equal(on.first, 3, 'gather: the three start in one step')
  t.equal(on.lateAt, 2, 'a request that comes while they run is admitted at the next step')
  t.equal(on.live, 0, 'every sequence is freed')
})

t.test('seeded sampling gives the same output alone and batched with others', async t => {
  const seeded = (seed: number) => samplingParams({temperature: 0.8, seed})
  const alone = async (seed: number) => {
    const m = new FakeStepModel()
    return (await collect(new Engine(m), request(prompt(5, seed), 12, {sampling: seeded(seed)})).outcome).tokens
  }
  const solo = [await alone(1), await alone(2), await alone(3)]
  t.not(solo[0]!.join(), expected(prompt(5, 1), 12, 64).join(), 'the uniforms change the output (T > 0)')
  const m = new FakeStepModel()
  const engine = new Engine(m, {tokenBudget: 4, maxRunning: 3, maxWaiting: 8})
  const together = await Promise.all([1, 2, 3].map(s => collect(engine, request(prompt(5, s), 12, {sampling: seeded(s)})).outcome))
  t.same(together.map(o => o.tokens), solo, 'batched (and chunked by a budget of 4) as alone')
  t.ok(m.steps.some(items => items.length > 1), 'they did share steps')
})

t.test('many requests with random cancellations leave no sequence behind', async t => {
  const m = new FakeStepModel()
  const engine = new Engine(m, {tokenBudget: 16, maxRunning: 4, maxWaiting: 64})
  let rng = 7
  const rand = () => ((rng = Math.imul(rng ^ (rng >>> 15), 0x2c1b3c6d) >>> 0) / 2 ** 32)
  const runs: Array<Promise<Outcome>> = []
  for (let i = 0; i < 60; i++) {
    const c = collect(engine, request(prompt(2 + Math.floor(rand() * 20), i), 1 + Math.floor(rand() * 10), {sampling: GREEDY}))
    runs.push(c.outcome)
    if (rand() < 0.3) setTimeout(c.cancel, Math.floor(rand() * 5))
    if (rand() < 0.5) await new Promise(r => setImmediate(r))
  }
  const outs = await Promise.all(runs)
  t.ok(outs.every(o => o.reason === 'length' || o.reason === 'cancelled'), 'each ends with length or cancelled')
  t.ok(outs.some(o => o.reason === 'cancelled') && outs.some(o => o.reason === 'length'), 'both happened')
  await engine.idle()
  t.equal(m.live, 0, 'no sequence left')
})

t.test('speculation: verify items of anchor + drafts, rolled back where a draft was wrong; greedy output as without', async t => {
  const m = new FakeStepModel({draftBlock: 4, draftWrongEvery: 5})
  const engine = new Engine(m, {tokenBudget: 32, maxRunning: 4, maxWaiting: 8, fixedDraft: 0})
  const prompts = [prompt(6, 1), prompt(9, 2), prompt(4, 3)]
  const outs = await Promise.all(prompts.map(p => collect(engine, request(p, 20)).outcome))
  outs.forEach((o, i) => t.same(o.tokens, expected(prompts[i]!, 20, 64), `prompt ${i}: the output without the draft`))
  t.ok(outs.every(o => (o.usage?.draft?.passes ?? 0) > 0), 'every request verified drafts')
  const verify = m.steps.flat().filter(it => it.verify)
  t.ok(verify.length > 0 && verify.every(it => it.tokens.length >= 2 && it.tokens.length <= 4), 'verify items hold the anchor and up to B − 1 drafts')
  t.ok(m.truncations > 0, 'wrong drafts were rolled back')
  const committed = outs.reduce((n, o) => n + o.usage!.draft!.committed, 0)
  const passes = outs.reduce((n, o) => n + o.usage!.draft!.passes, 0)
  t.ok(committed / passes > 1, `more than one token per pass (${(committed / passes).toFixed(2)})`)
  t.equal(m.live, 0)
})
