// Constrained speculative decoding on the real engine (a report, not a test): the default package with its draft
// on every step (SPLASH_DRAFT_FIXED=1, so the block policy does not back off), constrained by a forced tool call in
// the XML form the model was trained on and by a JSON Schema, greedy and sampled at T = 0.7. Reports the grammar
// masks computed per generated token (each a fill over the whole vocabulary, the part that grows with it), the
// tokens committed per verify pass and the wall time per token.
//   npx tsx bench/grammar-draft.ts [package-dir] [requests] [max-tokens]
import {join} from 'node:path'
import {NativeModel} from '../src/native/native-model.ts'
import {Engine} from '../src/engine/engine.ts'
import {Metrics} from '../src/engine/metrics.ts'
import {GREEDY, samplingParams, type SamplingParams} from '../src/engine/sampling.ts'
import {readManifest} from '../src/package/manifest.ts'
import {Grammars, type GrammarSpec} from '../src/grammar/compiler.ts'
import {toolCallGrammar} from '../models/qwen3_5/tool-grammar.ts'
import {QwenTokenizer} from '../models/qwen3_5/tokenizer.ts'
import {CountedConstraint} from '../test/helpers/counted-constraint.ts'

const dir = process.argv[2] ?? new URL('../packages/default/', import.meta.url).pathname
const requests = Number(process.argv[3] ?? 8)
const maxTokens = Number(process.argv[4] ?? 96)
const manifest = await readManifest(dir)
const tokenizer = await QwenTokenizer.load(join(dir, manifest.tokenizer.file))
const stop = [...manifest.tokenizer.eos_token_ids]
const grammars = new Grammars({tokenizerPath: join(dir, manifest.tokenizer.file), vocabSize: manifest.config.vocab_size, stopTokenIds: stop})

const str = {type: 'string'}
const TOOLS = [
  {name: 'send_email', schema: {type: 'object', properties: {to: str, subject: str, body: str}, required: ['to', 'subject', 'body']}},
  {name: 'translate', schema: {type: 'object', properties: {text: str, target_language: str}, required: ['text', 'target_language']}},
]
const SPECS: Record<string, GrammarSpec> = {
  'forced tool call (XML)': {type: 'structural', format: toolCallGrammar('xml', TOOLS, {type: 'calls', stopAfterFirst: true})},
  'JSON Schema': {type: 'json_schema', param: 'x', schema: {type: 'object', properties: {name: str, age: {type: 'integer', minimum: 0, maximum: 150}}, required: ['name', 'age']}},
}
const ASKS = ['Email dave@example.com that the nightly build failed.', 'Translate "cat" into Spanish.', 'Email heidi@example.com to say the meeting moved to 10.', 'Translate "good morning" into French.']
const prompt = (i: number) => Int32Array.from(tokenizer.encode(`<|im_start|>user\n${ASKS[i % ASKS.length]}<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n`))

process.env.SPLASH_DRAFT = 'on'
process.env.SPLASH_DRAFT_FIXED = '1'
const model = await NativeModel.open(dir, 4096, {threads: 2})
const metrics = new Metrics()
const engine = new Engine(model, {}, metrics)
console.log(`package ${manifest.name}, vocab ${manifest.config.vocab_size}, draft on every step, ${requests} requests of at most ${maxTokens} tokens each`)
for (const [name, spec] of Object.entries(SPECS)) {
  for (const [mode, sampling] of [['greedy', GREEDY], ['T=0.7', samplingParams({temperature: 0.7, seed: 3})]] as Array<[string, SamplingParams]>) {
    let tokens = 0
    let masks = 0
    const passes0 = metrics.specPasses.get()
    const committed0 = metrics.specCommitted.get()
    const t0 = performance.now()
    for (let i = 0; i < requests; i++) {
      const constraint = new CountedConstraint(await grammars.matcher(spec))
      for await (const ev of engine.generate({prompt: prompt(i), maxTokens, sampling, stopTokenIds: stop, constraint})) {
        if (ev.type === 'token') tokens++
        else if (ev.type === 'error') throw ev.error
      }
      masks += constraint.masks
    }
    const ms = performance.now() - t0
    const passes = metrics.specPasses.get() - passes0
    const committed = metrics.specCommitted.get() - committed0
    console.log(`${name}, ${mode}: ${tokens} tokens, ${(masks / tokens).toFixed(3)} masks per token, ${(committed / Math.max(1, passes)).toFixed(2)} tokens per pass (${passes} passes), ${(ms / tokens).toFixed(3)} ms per token`)
  }
}
model.close()
