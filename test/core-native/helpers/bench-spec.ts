// Speculative decoding benchmark (a report, not a test): decode tokens/s with the draft off, adaptive (default) and
// fixed at B−1 drafts per pass, and the acceptance length measured by the engine (after one untimed warm-up
// generation per mode).
// npx tsx test/core-native/helpers/bench-spec.ts <package-dir> <temperature[:top_p]> <maxTokens> [modes: off,on,fixed,fixed:N] [nostop] [seeds=N]
// (seeds=N: every prompt N times with seeds 100+i, 200+i, ...: more verify passes for the acceptance figure;
// think: prompts that leave the model's thinking on, whose answers run longer; wide: twelve more prompts)
import {NativeModel} from '../../../src/native/native-model.ts'
import {Engine} from '../../../src/engine/engine.ts'
import {Metrics} from '../../../src/engine/metrics.ts'
import {samplingParams, GREEDY} from '../../../src/engine/sampling.ts'
import {readManifest} from '../../../src/package/manifest.ts'
import {load} from '../../../models/qwen3_5/index.ts'
if (!process.argv[2]) {
  console.log('usage: npx tsx test/core-native/helpers/bench-spec.ts <package-dir> <temperature[:top_p]> <maxTokens> [modes] [nostop] [seeds=N]')
  process.exit(0)
}
const dir = process.argv[2], maxTokens = Number(process.argv[4] ?? 128)
const [temp, topP] = (process.argv[3] ?? '0').split(':').map(Number)
const nostop = process.argv.includes('nostop')
const seeds = Number(process.argv.find(a => a.startsWith('seeds='))?.slice(6) ?? 1)
const fam = await load(dir, await readManifest(dir))
const texts = ['Write a short story about a cat.', 'Explain how rain forms, step by step.', 'List three uses of Python.', 'Tell me about the history of Rome.']
if (process.argv.includes('wide'))
  texts.push('What is the weather in Paris?', 'Write a Python function that reverses a string.', 'Explain what a hash table is.', 'How do I read a file line by line in Python?',
    'Summarise the plot of Romeo and Juliet.', 'What is recursion? Give an example.', 'Translate "good morning" into French.', 'List the planets of the solar system.',
    'Write a haiku about the sea.', 'What does the numpy function argsort do?', 'Explain the difference between a list and a tuple.', 'How does HTTP caching work?')
const think = process.argv.includes('think') ? '' : '<think>\n\n</think>\n\n'
const prompts = texts.map(x => Int32Array.from(fam.codec.encode(`<|im_start|>user\n${x}<|im_end|>\n<|im_start|>assistant\n${think}`)))
await fam.close()
for (const mode of (process.argv[5] ?? 'off,on,fixed,off,on').split(',')) {
  process.env.SPLASH_DRAFT = mode === 'off' ? 'off' : 'on'
  // fixed: always speculate, B−1 drafts per pass; fixed:N: N drafts per pass
  if (mode.startsWith('fixed')) process.env.SPLASH_DRAFT_FIXED = '1'; else delete process.env.SPLASH_DRAFT_FIXED
  if (mode.startsWith('fixed:')) process.env.SPLASH_DRAFT_K = mode.slice(6); else delete process.env.SPLASH_DRAFT_K
  const m = await NativeModel.open(dir, 4096, {threads: Number(process.env.BENCH_THREADS ?? 2)})
  // one untimed generation first, on its own engine: the first draft and verify passes after a model opens
  // allocate their buffers (page faults), which a server pays once and a short timed run would charge to the mode
  for await (const ev of new Engine(m).generate({prompt: prompts[0]!, maxTokens: 48, sampling: GREEDY, stopTokenIds: []})) void ev
  const metrics = new Metrics()
  const e = new Engine(m, {}, metrics)
  let toks = 0, decodeS = 0
  const c0 = process.cpuUsage() // CPU time (all threads, prefill included): steadier than wall time on a shared machine
  for (let k = 0; k < seeds; k++) for (const [i, p] of prompts.entries()) {
    let first = 0, n = 0
    for await (const ev of e.generate({prompt: p, maxTokens, sampling: temp ? samplingParams({temperature: temp, topP, seed: 100 * (k + 1) + i}) : GREEDY, stopTokenIds: nostop ? [] : fam.stopTokenIds})) {
      if (ev.type === 'token') { if (!first) first = performance.now(); n++ }
      if (ev.type === 'done') { decodeS += (performance.now() - first) / 1000; toks += n - 1 }
    }
  }
  const passes = metrics.specPasses.get()
  const cpu = process.cpuUsage(c0)
  console.log(`${mode.padEnd(5)} T=${temp}${topP ? ` top_p=${topP}` : ''} decode ${(toks / decodeS).toFixed(1)} tok/s (${toks} tokens, cpu ${((cpu.user + cpu.system) / 1000 / toks).toFixed(2)} ms/token)` + (passes ? `  acceptance ${(metrics.specCommitted.get() / passes).toFixed(2)} tokens/pass over ${passes} passes` : ''))
  m.close()
}
