// Grammar mask cost per token against the decode step (a report, not a test). For each schema, one greedy
// constrained generation through the real engine (draft off) with the matcher timed: the time to compute
// each mask (XGrammar, on the JS thread while the native step runs), to accept each token, and to sample
// the logits row under the mask (native.sampleLogits, on the JS thread after the step); then the same prompts unconstrained
// for the decode step time.
//   npx tsx bench/grammar-mask.ts [package-dir] [max-tokens]
import {join} from 'node:path'
import {NativeModel} from '../src/runtime/native-model.ts'
import {Engine} from '../src/runtime/engine.ts'
import {GREEDY} from '../src/runtime/sampling.ts'
import {native} from '../src/runtime/native.ts'
import type {TokenConstraint} from '../src/runtime/request.ts'
import {readManifest} from '../src/package/manifest.ts'
import {Grammars} from '../src/grammar/compiler.ts'
import {QwenTokenizer} from '../models/qwen3_5/tokenizer.ts'

const dir = process.argv[2] ?? new URL('../packages/default/', import.meta.url).pathname
const maxTokens = Number(process.argv[3] ?? 96)
const manifest = await readManifest(dir)
const tokenizer = await QwenTokenizer.load(join(dir, manifest.tokenizer.file))
const stop = [...manifest.tokenizer.eos_token_ids]
const vocab = manifest.config.vocab_size
const grammars = new Grammars({tokenizerPath: join(dir, manifest.tokenizer.file), vocabSize: vocab, stopTokenIds: stop})

const SCHEMAS: Record<string, unknown> = {
  'person (free strings)': {type: 'object', properties: {name: {type: 'string'}, email: {type: 'string', format: 'email'}, age: {type: 'integer', minimum: 0, maximum: 150}, tags: {type: 'array', items: {type: 'string'}}}, required: ['name', 'age', 'tags']},
  'order (enums, bounded strings, nesting)': {type: 'object', properties: {id: {type: 'string', pattern: '^[A-Z]{3}-[0-9]{4}$'}, items: {type: 'array', items: {type: 'object', properties: {sku: {type: 'string', maxLength: 8}, qty: {type: 'integer', minimum: 1, maximum: 99}}, required: ['sku', 'qty']}, maxItems: 4}, status: {enum: ['new', 'paid', 'sent']}, note: {anyOf: [{type: 'string'}, {type: 'null'}]}}, required: ['id', 'items', 'status', 'note']},
  'any JSON object': undefined,
}

const logits = Float32Array.from({length: vocab}, () => Math.random())

class Timed implements TokenConstraint {
  maskMs: number[] = []
  /** a masked native sample of one row per mask, best of 5 (the machine is shared: the minimum is the cost, the rest is noise). */
  applyMs: number[] = []
  acceptMs = 0
  accepted = 0
  constructor(private readonly inner: TokenConstraint) {}
  get ready() {
    return this.inner.ready
  }
  async nextMask() {
    if (this.inner.ready) return this.inner.ready
    const t0 = performance.now()
    const m = await this.inner.nextMask()
    this.maskMs.push(performance.now() - t0)
    let best = Infinity
    for (let i = 0; i < 5; i++) {
      const a0 = performance.now()
      native.sampleLogits(logits, vocab, {params: GREEDY, rows: [{allowed: m}]})
      best = Math.min(best, performance.now() - a0)
    }
    this.applyMs.push(best)
    return m
  }
  accept(token: number) {
    const t0 = performance.now()
    const ok = this.inner.accept(token)
    this.acceptMs += performance.now() - t0
    this.accepted++
    return ok
  }
  rollBack(n: number) {
    this.inner.rollBack(n)
  }
  dispose() {
    this.inner.dispose()
  }
}

const prompt = Int32Array.from(tokenizer.encode('<|im_start|>user\nDescribe an example record as JSON.<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n'))
process.env.SPLASH_DRAFT = 'off'
const model = await NativeModel.open(dir, 4096, {threads: 2})
const engine = new Engine(model)

/** Tokens and the time from the first to the last token (the unconstrained run ignores EOS: as many tokens). */
async function run(constraint?: TokenConstraint): Promise<{tokens: number; ms: number}> {
  let tokens = 0
  let first = 0
  let last = 0
  for await (const ev of engine.generate({prompt, maxTokens, sampling: GREEDY, stopTokenIds: constraint ? stop : [], constraint})) {
    if (ev.type !== 'token') continue
    tokens++
    last = performance.now()
    if (tokens === 1) first = last
  }
  return {tokens, ms: last - first}
}

const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))] ?? 0
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length)

await run() // warm up
const plainRuns = [await run(), await run(), await run()].map(r => r.ms / Math.max(1, r.tokens - 1))
const stepMs = pct(plainRuns, 0.5)
console.log(`package ${manifest.name}, vocab ${vocab}, ${maxTokens} tokens max, greedy, draft off, 2 threads`)
console.log(`decode step (unconstrained, median of 3 runs of ${maxTokens} tokens): ${stepMs.toFixed(2)} ms/token`)
for (const [name, schema] of Object.entries(SCHEMAS)) {
  const spec = schema === undefined ? ({type: 'json_object'} as const) : ({type: 'json_schema', schema, param: 'x'} as const)
  const t0 = performance.now()
  const inner = await grammars.matcher(spec)
  const compileMs = performance.now() - t0
  const timed = new Timed(inner)
  const out = await run(timed)
  const applyMs = mean(timed.applyMs)
  const perToken = mean(timed.maskMs) + timed.acceptMs / Math.max(1, timed.accepted) + applyMs
  // the mask is computed while the step runs: only what outlasts the step, plus accept and apply, is on the critical path
  const exposed = mean(timed.maskMs.map(ms => Math.max(0, ms - stepMs))) + timed.acceptMs / Math.max(1, timed.accepted) + applyMs
  const constrainedStep = out.ms / Math.max(1, out.tokens - 1)
  console.log(
    `${name}: compile+matcher ${compileMs.toFixed(0)} ms; mask mean ${mean(timed.maskMs).toFixed(3)} ms (p50 ${pct(timed.maskMs, 0.5).toFixed(3)}, p99 ${pct(timed.maskMs, 0.99).toFixed(3)}), ` +
      `accept ${(timed.acceptMs / Math.max(1, timed.accepted)).toFixed(3)} ms, apply ${applyMs.toFixed(3)} ms → ${perToken.toFixed(3)} ms/token = ${((100 * perToken) / stepMs).toFixed(1)}% of the step (not overlapped: ${exposed.toFixed(3)} ms = ${((100 * exposed) / stepMs).toFixed(1)}%); ` +
      `constrained decode ${constrainedStep.toFixed(2)} ms/token over ${out.tokens} tokens (${((100 * (constrainedStep - stepMs)) / stepMs).toFixed(1)}% vs unconstrained)`,
  )
}
model.close()
