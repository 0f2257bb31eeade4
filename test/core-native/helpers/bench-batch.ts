// Aggregate decode through the native engine, no HTTP (a report, not a test): N sequences with short prompts
// decode together, one token each per step, in one native.step call; prints tokens/s summed over the batch
// (median over the timed steps) for each N, and its ratio to N = 1; also the process CPU time per step (all threads:
// on a shared machine it moves less than wall time; with one thread it is the compute alone).
// npx tsx test/core-native/helpers/bench-batch.ts <package-dir | preset> [threads] [batches, e.g. 1,4,8] [steps] [int8x2|int8|f32]
// A preset name (qwen3.5-0.8b, …) is synthesised once as a q4 package in the bench cache, as `splash bench` does.
import {existsSync} from 'node:fs'
import {presetPackage} from '../../../src/bench/common.ts'
import {PRESETS} from '../../../src/package/presets.ts'
import {native} from '../../../src/native/native.ts'

if (!process.argv[2]) {
  console.log('usage: npx tsx test/core-native/helpers/bench-batch.ts <package-dir | preset> [threads] [1,4,8] [steps]')
  process.exit(0)
}
const arg = process.argv[2]
const dir = !existsSync(arg) && arg in PRESETS ? await presetPackage(arg, undefined) : arg
const threads = Number(process.argv[3] ?? 2)
const batches = (process.argv[4] ?? '1,4,8').split(',').map(Number)
const steps = Number(process.argv[5] ?? 12)
const activations = (process.argv[6] ?? 'int8x2') as 'int8x2' | 'int8' | 'f32'
const h = await native.openModel(dir, {threads, activations})
const info = native.modelInfo(h)
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
let single = 0
for (const n of batches) {
  const seqs = Array.from({length: n}, () => native.createSequence(h, {maxLength: 64 + steps + 8}))
  // a different short prompt per sequence, prefilled together
  await native.step(h, seqs.map((seq, i) => ({seq, tokens: Int32Array.from({length: 16}, (_, j) => (i * 131 + j * 7) % 200 + 10), logits: 'last' as const})))
  const times: number[] = []
  const cpu: number[] = []
  for (let s = 0; s < steps + 2; s++) {
    const t0 = process.hrtime.bigint()
    const c0 = process.cpuUsage()
    await native.step(h, seqs.map((seq, i) => ({seq, tokens: Int32Array.of((s * 17 + i * 29) % 200 + 10), logits: 'last' as const})))
    const c = process.cpuUsage(c0)
    if (s >= 2) times.push(Number(process.hrtime.bigint() - t0) / 1e9), cpu.push((c.user + c.system) / 1e6)
  }
  for (const seq of seqs) native.freeSequence(h, seq)
  const tps = n / median(times)
  if (n === 1) single = tps
  console.log(`${info.isa} ${activations} threads=${threads} batch ${n}: ${(median(times) * 1e3).toFixed(1)} ms/step, aggregate ${tps.toFixed(2)} tok/s` +
    (single ? ` (${(tps / single).toFixed(2)}× one sequence)` : '') + `; cpu ${(median(cpu) * 1e3).toFixed(1)} ms/step`)
}
native.closeModel(h)
