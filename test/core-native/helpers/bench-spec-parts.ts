// Per-call costs of the speculative path (a report, not a test): decode, verify of n tokens, draft pass.
// npx tsx test/core-native/helpers/bench-spec-parts.ts <package-dir> [threads] [rollback [runs]]
// With `rollback`, only a verify of 16 and the GDN rollback after it to k kept tokens, timed apart, with the
// method the model chose at open ($SPLASH_GDN_ROLLBACK=replay|states to force one).
import {native} from '../../../src/native/native.ts'
import {GREEDY} from '../../../src/engine/sampling.ts'
if (!process.argv[2]) {
  console.log('usage: npx tsx test/core-native/helpers/bench-spec-parts.ts <package-dir> [threads]')
  process.exit(0)
}
const dir = process.argv[2]
const h = await native.openModel(dir, {threads: Number(process.argv[3] ?? 2)})
const s = native.createSequence(h, {maxLength: 4096})
await native.step(h, [{seq: s, tokens: Int32Array.from({length: 100}, (_, i) => (i * 37) % 1000 + 10), logits: 'none', capture: true}])
let L = 100
if (process.argv[4] === 'rollback') {
  const runs = Number(process.argv[5] ?? 5)
  const B = native.modelInfo(h).draft?.blockSize ?? 16
  console.log(`GDN rollback: ${native.modelInfo(h).draft?.gdnRollback ?? 'states'}, ${runs} runs each`)
  for (const keep of [1, B / 2, B - 1]) {
    let verify = 0
    let rollback = 0
    let cpuVerify = 0
    let cpuRollback = 0
    for (let i = 0; i < runs + 1; i++) {
      const base = native.sequenceLength(h, s)
      const t0 = performance.now()
      const c0 = process.cpuUsage()
      await native.step(h, [{seq: s, tokens: new Int32Array(B).fill(7), logits: 'none', capture: true, verify: true}])
      const t1 = performance.now()
      const c1 = process.cpuUsage(c0)
      native.truncateSequence(h, s, base + keep)
      const c2 = process.cpuUsage(c0)
      if (i === 0) continue // warm-up
      verify += t1 - t0
      rollback += performance.now() - t1
      cpuVerify += (c1.user + c1.system) / 1e3
      cpuRollback += (c2.user + c2.system - c1.user - c1.system) / 1e3
    }
    const f = (x: number) => (x / runs).toFixed(2)
    console.log(`verify ${B}, keep ${keep}: verify ${f(verify)} ms (cpu ${f(cpuVerify)}), rollback ${f(rollback)} ms (cpu ${f(cpuRollback)})`)
  }
  process.exit(0)
}
const time = async (label: string, f: () => Promise<unknown>, n = 40) => {
  for (let i = 0; i < 3; i++) await f()
  const t0 = performance.now()
  const c0 = process.cpuUsage()
  for (let i = 0; i < n; i++) await f()
  const c = process.cpuUsage(c0)
  // cpu: process CPU time (all threads) per call; on a shared machine it moves less than wall time
  console.log(label.padEnd(28), ((performance.now() - t0) / n).toFixed(2), 'ms', `(cpu ${((c.user + c.system) / 1e3 / n).toFixed(2)} ms)`)
}
const dec = (logits: 'none' | 'last') => async () => {
  await native.step(h, [{seq: s, tokens: Int32Array.of(5), logits, capture: true}])
  L++
}
await time('decode 1 (logits none)', dec('none'))
await time('decode 1 (logits last)', dec('last'))
for (const n of [2, 4, 8, 16]) {
  await time(`verify ${n} (logits all)`, async () => {
    await native.step(h, [{seq: s, tokens: new Int32Array(n).fill(7), logits: 'all', capture: true, verify: true}])
    native.truncateSequence(h, s, L + 1)
    L++
  })
  await time(`verify ${n} (logits none)`, async () => {
    await native.step(h, [{seq: s, tokens: new Int32Array(n).fill(7), logits: 'none', capture: true, verify: true}])
    native.truncateSequence(h, s, L + 1)
    L++
  })
}
for (const n of [1, 4, 15]) await time(`draft (n=${n})`, async () => native.draft(h, [{seq: s, token: 5, n}]))
// the drafts chosen in the pass (argmax rows; a DFlash 2 draft's selector walk)
for (const n of [4, 15]) {
  await time(`draft, greedy drafts (n=${n})`, async () => native.draft(h, [{seq: s, token: 5, n, sample: {params: GREEDY, rows: Array.from({length: n}, () => ({}))}}]))
}
