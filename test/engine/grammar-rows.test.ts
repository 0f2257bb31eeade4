// Grammar rows through the real engine on the random synthetic package (V = 512): a sampled constrained token
// follows the filtered distribution F restricted to the tokens the grammar allows (chi-square against the
// reference sampler), the first try is the step's own draw without a mask and a mask is computed exactly when
// the grammar refuses it; when F gives the allowed tokens no mass, the filters apply to the masked row; a
// seed gives the same constrained output serial or batched.
import t, {type Test} from 'tap'
import {join} from 'node:path'
import {availableParallelism} from 'node:os'
import {NativeModel} from '../../src/native/native-model.js'
import {Engine} from '../../src/engine/engine.js'
import {native} from '../../src/native/native.js'
import {Rng} from '../../src/engine/rng.js'
import {samplingParams, type SamplingParams} from '../../src/engine/sampling.js'
import {readManifest} from '../../src/package/manifest.js'
import {Grammars} from '../../src/grammar/compiler.js'
import {soleAllowed} from '../../src/grammar/matcher.js'
import {distribution, maskAllows} from '../helpers/sampling-reference.js'
import {chiSquare, chiSquare999} from '../helpers/chi-square.js'
import {CountedConstraint} from '../helpers/counted-constraint.js'
import {synthFixture} from '../helpers/packages.js'

const PROMPT = Int32Array.of(5, 17, 99, 3)

async function setup() {
  const dir = await synthFixture('tiny-hybrid', 'q4')
  const manifest = await readManifest(dir)
  const grammars = new Grammars({tokenizerPath: join(dir, manifest.tokenizer.file), vocabSize: manifest.config.vocab_size, stopTokenIds: [...manifest.tokenizer.eos_token_ids]})
  const saved = process.env.SPLASH_DRAFT
  process.env.SPLASH_DRAFT = 'off'
  const model = await NativeModel.open(dir, 4096, {threads: 2})
  process.env.SPLASH_DRAFT = saved
  // the prompt's last logits row, as the engine's prefill computes it
  const h = await native.openModel(dir, {threads: 2, draft: false})
  const [{logits}] = await native.step(h, [{seq: native.createSequence(h, {maxLength: 16}), tokens: PROMPT, logits: 'last'}])
  native.closeModel(h)
  return {grammars, model, logits: logits!, V: manifest.config.vocab_size}
}

const matcher = (grammars: Grammars, grammar: string) => grammars.matcher({type: 'structural', format: {type: 'grammar', grammar}})

/** The tokens a request made, and the message of the error that ended it (if one did). */
async function tokensOrError(e: Engine, sampling: SamplingParams, constraint: CountedConstraint, maxTokens: number): Promise<{tokens: number[]; error?: string}> {
  const tokens: number[] = []
  for await (const ev of e.generate({prompt: PROMPT, maxTokens, sampling, stopTokenIds: [], constraint})) {
    if (ev.type === 'token') tokens.push(ev.token)
    else if (ev.type === 'error') return {tokens, error: ev.error.message}
  }
  return {tokens, error: undefined}
}

async function generate(e: Engine, sampling: SamplingParams, constraint: CountedConstraint, maxTokens = 1, logprobs?: number): Promise<number[]> {
  const tokens: number[] = []
  for await (const ev of e.generate({prompt: PROMPT, maxTokens, sampling, stopTokenIds: [], constraint, logprobs})) {
    if (ev.type === 'token') tokens.push(ev.token)
    else if (ev.type === 'error') throw ev.error
  }
  return tokens
}

t.test('sampled constrained tokens follow F restricted to the allowed tokens; a mask only when the first try is refused', async t => {
  const {grammars, model, logits, V} = await setup()
  t.teardown(() => model.close())
  const e = new Engine(model, {maxRunning: 50})
  for (const [params, grammar] of [
    [{temperature: 1}, 'root ::= [0-9a-zA-Z]+'],
    [{temperature: 1, topK: 30}, 'root ::= [0-9a-zA-Z]+'],
    [{temperature: 0.8, topP: 0.9}, 'root ::= [^a-z]+'],
  ] as const) {
    const sampling = (seed: number) => samplingParams({...params, seed})
    const probe = await matcher(grammars, grammar)
    const allowed = await probe.nextMask()
    probe.dispose()
    const f = distribution(logits, {params: sampling(0), rows: []})
    const fa = [...f].filter(([id]) => maskAllows(allowed, id))
    const mass = fa.reduce((a, x) => a + x[1], 0)
    const want = new Map(fa.map(([id, p]) => [id, p / mass]))
    if (params.temperature === 1 && !('topK' in params)) {
      // temperature only: F | A is p | A, what sampling under the mask gives
      const masked = distribution(logits, {params: sampling(0), rows: []}, {allowed})
      t.ok([...masked].every(([id, p]) => Math.abs(p - (want.get(id) ?? 0)) < 1e-9), 'temperature only: the same distribution as the mask first')
    }
    const n = 1500
    const counts = new Map<number, number>()
    let refused = 0
    let wrong = 0
    for (let b = 0; b < n; b += 50) {
      const seeds = Array.from({length: 50}, (_, i) => b + i + 1)
      const constraints = await Promise.all(seeds.map(async () => new CountedConstraint(await matcher(grammars, grammar))))
      const outs = await Promise.all(seeds.map((seed, i) => generate(e, sampling(seed), constraints[i]!)))
      outs.forEach(([token], i) => {
        counts.set(token!, (counts.get(token!) ?? 0) + 1)
        // the first try: the step's draw without a mask, with the token's first uniform
        const first = native.sampleLogits(logits, V, {params: sampling(0), rows: [{uniform: new Rng(seeds[i]!).peek(0)}]})[0]!.token
        const ok = maskAllows(allowed, first)
        if (!ok) refused++
        if (constraints[i]!.masks !== (ok ? 0 : 1) || (ok && token !== first)) wrong++
      })
    }
    t.equal(wrong, 0, 'an allowed first try is committed without a mask; a refused one costs one mask')
    t.ok(refused > 0.1 * n && refused < 0.9 * n, `${refused} of ${n} first tries refused (F(allowed) = ${mass.toFixed(3)})`)
    const {chi, df} = chiSquare(counts, want, n)
    t.ok(df >= 3 && chi < chiSquare999(df), `${JSON.stringify(params)} under ${grammar}: chi-square ${chi.toFixed(2)} with ${df} df (${n} samples)`)
    const again = await generate(e, sampling(7), new CountedConstraint(await matcher(grammars, grammar)))
    const seven = await generate(e, sampling(7), new CountedConstraint(await matcher(grammars, grammar)))
    t.same(again, seven, 'same seed, same token')
  }
})

t.test('when F gives the allowed tokens no mass, the filters apply to the masked row', async t => {
  const {grammars, model, logits} = await setup()
  t.teardown(() => model.close())
  const e = new Engine(model, {maxRunning: 50})
  const grammar = 'root ::= [0-9a-z]+'
  const sampling = (seed: number) => samplingParams({temperature: 1, topK: 3, seed})
  const probe = await matcher(grammars, grammar)
  const allowed = await probe.nextMask()
  probe.dispose()
  const f = distribution(logits, {params: sampling(0), rows: []})
  t.ok([...f.keys()].every(id => !maskAllows(allowed, id)), 'the top 3 tokens are all refused')
  const want = distribution(logits, {params: sampling(0), rows: []}, {allowed})
  const n = 600
  const counts = new Map<number, number>()
  for (let b = 0; b < n; b += 50) {
    const outs = await Promise.all(Array.from({length: 50}, async (_, i) => generate(e, sampling(b + i + 1), new CountedConstraint(await matcher(grammars, grammar)))))
    for (const [token] of outs) counts.set(token!, (counts.get(token!) ?? 0) + 1)
  }
  t.ok([...counts.keys()].every(id => want.has(id)), 'every token among the masked row top 3')
  const {chi, df} = chiSquare(counts, want, n)
  t.ok(df >= 1 && chi < chiSquare999(df), `chi-square ${chi.toFixed(2)} with ${df} df`)
})

t.test('a seed gives the same constrained output serial or batched', async t => {
  const {grammars, model} = await setup()
  t.teardown(() => model.close())
  const e = new Engine(model)
  const grammar = 'root ::= [0-9a-zA-Z ]+'
  const params = (i: number) => samplingParams({temperature: 0.9, topP: 0.95, topK: i % 2 ? 40 : 0, frequencyPenalty: i === 2 ? 0.5 : 0, seed: 300 + i})
  const run = (i: number) => matcher(grammars, grammar).then(c => generate(e, params(i), new CountedConstraint(c), 24))
  const batched = await Promise.all([0, 1, 2, 3].map(run))
  const serial: number[][] = []
  for (const i of [0, 1, 2, 3]) serial.push(await run(i))
  t.same(batched, serial)
  t.ok(batched.every(o => o.length > 0) && batched.some(o => o.length === 24), 'outputs ran to max_tokens or to the grammar\'s end')
})

t.test("a grammar's stop token ends a request that does not stop on it", async t => {
  const {grammars, model} = await setup()
  t.teardown(() => model.close())
  const e = new Engine(model)
  for (const temperature of [0, 1]) {
    const c = new CountedConstraint(await matcher(grammars, 'root ::= [0-9]'))
    const events = []
    for await (const ev of e.generate({prompt: PROMPT, maxTokens: 8, sampling: samplingParams({temperature, seed: 7}), stopTokenIds: [], constraint: c})) events.push(ev)
    const tokens = events.filter(ev => ev.type === 'token').map(ev => (ev as {token: number}).token)
    const done = events.at(-1)
    t.equal(tokens.length, 1, `T=${temperature}: one digit`)
    t.match(done, {type: 'done', reason: 'stop', usage: {completionTokens: 1}}, `T=${temperature}: it stops after the digit, without an error`)
    t.equal(c.tokens.length, 2, 'the grammar took the digit and its stop token')
  }
})

t.test('masks ahead of the step only where a core is free during it; the same tokens either way', async t => {
  const dir = await synthFixture('tiny-hybrid', 'q4')
  const manifest = await readManifest(dir)
  const grammars = new Grammars({tokenizerPath: join(dir, manifest.tokenizer.file), vocabSize: manifest.config.vocab_size, stopTokenIds: [...manifest.tokenizer.eos_token_ids]})
  const saved = process.env.SPLASH_DRAFT
  process.env.SPLASH_DRAFT = 'off'
  const cores = availableParallelism()
  const run = async (threads: number) => {
    const model = await NativeModel.open(dir, 4096, {threads})
    try {
      t.equal(model.hostThreads, threads, 'the pool as the model reports it')
      const e = new Engine(model)
      const outs: Array<{tokens: number[]; masks: number; refusals: number}> = []
      for (const seed of [1, 2, 3]) {
        const c = new CountedConstraint(await matcher(grammars, 'root ::= [0-9a-zA-Z ]+'))
        outs.push({tokens: await generate(e, samplingParams({temperature: 0.9, seed}), c, 40), masks: c.masks, refusals: c.refusals})
      }
      return {ahead: e.scheduler.grammar.ahead, outs}
    } finally {
      model.close()
    }
  }
  const all = await run(cores)
  const one = await run(1)
  process.env.SPLASH_DRAFT = saved
  t.equal(all.ahead, false, 'a pool on every core: no masks during the step')
  t.equal(one.ahead, cores > 1, 'a core left free: masks during the step')
  t.same(one.outs.map(o => o.tokens), all.outs.map(o => o.tokens), 'the same tokens')
  const masks = (r: typeof all) => r.outs.reduce((a, o) => a + o.masks, 0)
  t.ok(masks(all) > 0 && all.outs.every(o => o.masks === o.refusals), `${masks(all)} masks, one per refused first try`)
  if (cores > 1) t.ok(masks(one) > masks(all), `ahead: ${masks(one)} masks, more than the ${masks(all)} refusals`)
})

t.test("a grammar that fails ends its own request; the batch's other requests go on", async t => {
  const {grammars, model} = await setup()
  t.teardown(() => model.close())
  const dir = await synthFixture('tiny-hybrid', 'q4')
  process.env.SPLASH_DRAFT = 'off'
  const oneThread = await NativeModel.open(dir, 4096, {threads: 1}) // with a free core, masks fail during the step
  delete process.env.SPLASH_DRAFT
  t.teardown(() => oneThread.close())
  for (const m of [model, oneThread]) await failingGrammar(t, grammars, new Engine(m))
})

async function failingGrammar(t: Test, grammars: Grammars, e: Engine) {
  const grammar = 'root ::= [0-9a-zA-Z ]+'
  const sampling = (seed: number) => samplingParams({temperature: 0.9, seed})
  // the matcher's second mask fails (an engine bug in a real grammar: it must cost that one request only)
  class Failing extends CountedConstraint {
    override nextMask(): Promise<Int32Array> {
      return this.masks >= 1 ? Promise.reject(new Error('the grammar broke')) : super.nextMask()
    }
  }
  const alone = await generate(e, sampling(5), new CountedConstraint(await matcher(grammars, grammar)), 32)
  const outcome = (c: CountedConstraint, seed: number) => tokensOrError(e, sampling(seed), c, 32)
  const [broken, healthy] = await Promise.all([outcome(new Failing(await matcher(grammars, grammar)), 6), outcome(new CountedConstraint(await matcher(grammars, grammar)), 5)])
  t.equal(broken.error, 'the grammar broke', 'the failing request gets its error')
  t.equal(healthy.error, undefined, 'the other request has no error')
  t.same(healthy.tokens, alone, 'and its tokens are those it makes alone')
  t.equal(e.scheduler.numRunning + e.scheduler.numWaiting, 0, 'nothing left running')
}

t.test('with the draft: a grammar that fails while drafts are walked, verified or committed ends its own request', async t => {
  const dir = await synthFixture('tiny-hybrid', 'q4')
  const manifest = await readManifest(dir)
  const grammars = new Grammars({tokenizerPath: join(dir, manifest.tokenizer.file), vocabSize: manifest.config.vocab_size, stopTokenIds: [...manifest.tokenizer.eos_token_ids]})
  process.env.SPLASH_DRAFT = 'on'
  const model = await NativeModel.open(dir, 4096, {threads: 2})
  t.teardown(() => {
    model.close()
    delete process.env.SPLASH_DRAFT
  })
  const e = new Engine(model, {fixedDraft: 0})
  const grammar = 'root ::= [0-9a-zA-Z ]+'
  const sampling = (seed: number) => (seed % 2 ? samplingParams({temperature: 0.9, seed}) : samplingParams({temperature: 0}))
  // the matcher's n-th accept throws: in a draft's walk, in a verify pass's settling, or in the commit
  class Failing extends CountedConstraint {
    private calls = 0
    constructor(
      inner: CountedConstraint,
      private readonly at: number,
    ) {
      super(inner)
    }
    override accept(token: number): boolean {
      if (++this.calls === this.at) throw new Error('the grammar broke')
      return super.accept(token)
    }
  }
  const outcome = (c: CountedConstraint, seed: number) => tokensOrError(e, sampling(seed), c, 24)
  for (const seed of [1, 2]) {
    const alone = await outcome(new CountedConstraint(await matcher(grammars, grammar)), seed)
    for (const at of [2, 5, 9, 14]) {
      const broken = new Failing(new CountedConstraint(await matcher(grammars, grammar)), at)
      const [b, h] = await Promise.all([outcome(broken, seed + 10), outcome(new CountedConstraint(await matcher(grammars, grammar)), seed)])
      t.equal(b.error, 'the grammar broke', `seed ${seed}, accept ${at} throws: that request fails`)
      t.same(h, alone, `seed ${seed}, accept ${at} throws: the other request is unchanged`)
    }
  }
  t.equal(e.scheduler.numRunning + e.scheduler.numWaiting, 0, 'nothing left running')
})

t.test('a refused row whose mask allows one token takes it without a second draw, the token the draw gives', async t => {
  const {grammars, model} = await setup()
  t.teardown(() => model.close())
  const draws = {n: 0}
  const resample = model.resample.bind(model)
  model.resample = (...args) => (draws.n++, resample(...args))
  const e = new Engine(model)
  // the opening `{"id": ` is one token here, any digit may follow: one refusal with one allowed token, then free ones
  const grammar = 'root ::= "{\\"id\\": " [0-9]+ "}"'
  for (const sampling of [samplingParams({temperature: 0}), samplingParams({temperature: 0.9, seed: 11})]) {
    const run = async (logprobs?: number) => {
      const c = new CountedConstraint(await matcher(grammars, grammar))
      draws.n = 0
      const tokens = await generate(e, sampling, c, 12, logprobs)
      return {tokens, draws: draws.n, refusals: c.refusals}
    }
    const quick = await run()
    const drawn = await run(0) // log-probabilities: every refused row is drawn again natively
    const label = `T=${sampling.temperature}`
    t.same(quick.tokens, drawn.tokens, `${label}: the same tokens`)
    t.equal(quick.tokens[0], 123, `${label}: the grammar's opening token first`)
    t.equal(drawn.draws, drawn.refusals, `${label}: with log-probabilities a draw per refusal (${drawn.refusals})`)
    // positions of the output whose mask allows one token (the opening, the grammar's end): a refusal there costs no draw
    const replay = await matcher(grammars, grammar)
    let sole = 0
    for (const token of quick.tokens) {
      if (soleAllowed(await replay.nextMask()) >= 0) sole++
      replay.accept(token)
    }
    replay.dispose()
    t.ok(quick.draws < quick.refusals && quick.draws >= quick.refusals - sole, `${label}: without, ${quick.draws} draws for ${quick.refusals} refusals, ${sole} positions with one allowed token`)
  }
})
