// Grammar-constrained generation through the real engine (scheduler masks, speculative verify along the
// grammar, matcher rollback): on the default package and on the random synthetic one, every output
// ends at the end of its grammar and validates; with the draft (drafting forced on every step) the
// constrained output is token for token the output without it, greedy and seeded-sampled.
import t from 'tap'
import {join} from 'node:path'
import {NativeModel} from '../../src/native/native-model.js'
import {Engine} from '../../src/engine/engine.js'
import {Metrics} from '../../src/engine/metrics.js'
import {GREEDY, samplingParams, type SamplingParams} from '../../src/engine/sampling.js'
import {readManifest} from '../../src/package/manifest.js'
import {Grammars} from '../../src/grammar/compiler.js'
import {QwenTokenizer} from '../../models/qwen3_5/tokenizer.js'
import {synthFixture} from '../helpers/packages.js'
import {invalidity} from '../helpers/ajv.js'
import {SCHEMAS} from '../helpers/schemas.js'
import type {FinishReason} from '../../src/engine/request.js'

const DEFAULT = new URL('../../packages/default/', import.meta.url).pathname
const PICK = ['flat object', 'array of objects', 'oneOf discriminated', '$defs reference', 'format date', 'tuple', 'nullable field', 'pattern code']

async function setup(dir: string) {
  const manifest = await readManifest(dir)
  const path = join(dir, manifest.tokenizer.file)
  const stop = [...manifest.tokenizer.eos_token_ids]
  const tokenizer = await QwenTokenizer.load(path)
  const grammars = new Grammars({tokenizerPath: path, vocabSize: manifest.config.vocab_size, stopTokenIds: stop})
  return {stop, tokenizer, grammars}
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

for (const [name, dir] of [
  ['default package', async () => DEFAULT],
  ['synthetic tiny-hybrid (random weights)', async () => synthFixture('tiny-hybrid', 'q4')],
  // drafting under the grammar samples the DFlash 2 draft's transformed logits (not the selector)
  ['synthetic tiny-hybrid, DFlash 2 draft', async () => synthFixture('tiny-hybrid', 'q4', {dflash2: {window: 12}})],
] as const) {
  t.test(name, async t => {
    const d = await dir()
    const {stop, tokenizer, grammars} = await setup(d)
    const prompt = Int32Array.from(tokenizer.encode('<|im_start|>user\nAnswer in JSON.<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n'))
    const cases = SCHEMAS.filter(c => PICK.includes(c.name))
    const run = async (e: Engine, schema: unknown, sampling: SamplingParams) => {
      const constraint = await grammars.matcher({type: 'json_schema', schema, param: 'x'})
      const tokens: number[] = []
      let reason: FinishReason | undefined
      for await (const ev of e.generate({prompt, maxTokens: 120, sampling, stopTokenIds: stop, constraint})) {
        if (ev.type === 'token') tokens.push(ev.token)
        else if (ev.type === 'done') reason = ev.reason
        else if (ev.type === 'error') throw ev.error
      }
      return {tokens, reason}
    }
    const all = (e: Engine, sampling: (i: number) => SamplingParams) => Promise.all(cases.map((c, i) => run(e, c.schema, sampling(i))))
    const sampled = (i: number) => samplingParams({temperature: 0.8, seed: 40 + i})

    const plain = await withModel(d, false, async m => {
      const e = new Engine(m)
      return {greedy: await all(e, () => GREEDY), sampled: await all(e, sampled)}
    })
    cases.forEach((c, i) => {
      for (const out of [plain.greedy[i]!, plain.sampled[i]!]) {
        t.equal(out.reason, 'stop', `${c.name}: the grammar ended the output`)
        t.notOk(invalidity(c.schema, tokenizer.decode(out.tokens)), `${c.name}: valid`)
      }
    })

    const metrics = new Metrics()
    const spec = await withModel(d, true, async m => {
      const e = new Engine(m, {fixedDraft: 0}, metrics)
      return {greedy: await all(e, () => GREEDY), sampled: await all(e, sampled)}
    })
    t.ok(metrics.specPasses.get() > 0, `${metrics.specPasses.get()} verify passes under grammars`)
    cases.forEach((c, i) => {
      t.same(spec.greedy[i]!.tokens, plain.greedy[i]!.tokens, `${c.name}: greedy with the draft = without`)
      t.same(spec.sampled[i]!.tokens, plain.sampled[i]!.tokens, `${c.name}: seeded sampling with the draft = without`)
    })
  })
}
