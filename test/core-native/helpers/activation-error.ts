// What int8 and int8x2 activations cost in accuracy against fp32 activations (a report, not a test): the model
// greedily answers a few chat prompts with fp32 activations, then every mode scores the same token sequences
// (logits of every position). Per mode: mean and max KL(fp32 ‖ mode) in nats, the share of positions whose argmax
// agrees with fp32, and max |Δlogit| / max |logit| per row (worst row).
// npx tsx test/core-native/helpers/activation-error.ts <package-dir> [tokens per answer] [modes, e.g. int8x2,int8]
import {readManifest} from '../../../src/package/manifest.ts'
import {native, type MatmulActivations} from '../../../src/native/native.ts'
import {load} from '../../../models/qwen3_5/index.ts'

if (!process.argv[2]) {
  console.log('usage: npx tsx test/core-native/helpers/activation-error.ts <package-dir> [tokens] [int8x2,int8]')
  process.exit(0)
}
const dir = process.argv[2]
const answer = Number(process.argv[3] ?? 96)
const modes = (process.argv[4] ?? 'int8x2,int8').split(',') as MatmulActivations[]
const fam = await load(dir, await readManifest(dir))
const texts = ['Write a short story about a cat.', 'Explain how rain forms, step by step.', 'Write a Python function that reverses a string.',
  'What is the weather in Paris?', 'Explain the difference between a list and a tuple.', 'Tell me about the history of Rome.']
const prompts = texts.map(x => Array.from(fam.codec.encode(`<|im_start|>user\n${x}<|im_end|>\n<|im_start|>assistant\n`)))
await fam.close()

// fp32 greedy answers: the token sequences every mode scores
const ref = await native.openModel(dir, {activations: 'f32', threads: 2, draft: false})
const V = native.modelInfo(ref).vocabSize
const argmax = (row: Float32Array, off: number) => {
  let b = 0
  for (let i = 1; i < V; i++) if (row[off + i] > row[off + b]) b = i
  return b
}
const seqs: number[][] = []
for (const p of prompts) {
  const seq = native.createSequence(ref, {maxLength: p.length + answer + 8})
  let [r] = await native.step(ref, [{seq, tokens: Int32Array.from(p), logits: 'last'}])
  const out = [...p]
  for (let i = 0; i < answer; i++) {
    const t = argmax(r.logits!, 0)
    out.push(t)
    ;[r] = await native.step(ref, [{seq, tokens: Int32Array.of(t), logits: 'last'}])
  }
  native.freeSequence(ref, seq)
  seqs.push(out)
}
async function score(h: number, toks: number[]): Promise<Float32Array> {
  const seq = native.createSequence(h, {maxLength: toks.length + 8})
  const [r] = await native.step(h, [{seq, tokens: Int32Array.from(toks), logits: 'all'}])
  native.freeSequence(h, seq)
  return r.logits!
}
const refLogits = await Promise.all(seqs.map(s => score(ref, s)))
native.closeModel(ref)

function logSoftmax(row: Float32Array, off: number): Float64Array {
  let m = -Infinity
  for (let i = 0; i < V; i++) m = Math.max(m, row[off + i])
  let s = 0
  for (let i = 0; i < V; i++) s += Math.exp(row[off + i] - m)
  const ls = Math.log(s) + m
  const o = new Float64Array(V)
  for (let i = 0; i < V; i++) o[i] = row[off + i] - ls
  return o
}
for (const mode of modes) {
  const h = await native.openModel(dir, {activations: mode, threads: 2, draft: false})
  let kl = 0, klMax = 0, agree = 0, n = 0, rel = 0
  for (let s = 0; s < seqs.length; s++) {
    const got = await score(h, seqs[s])
    const want = refLogits[s]
    // positions from the last prompt token on: the rows that chose the answer
    for (let p = prompts[s].length - 1; p < seqs[s].length; p++) {
      const off = p * V
      const a = logSoftmax(want, off), b = logSoftmax(got, off)
      let k = 0, dmax = 0, lmax = 0
      for (let i = 0; i < V; i++) {
        k += Math.exp(a[i]) * (a[i] - b[i])
        dmax = Math.max(dmax, Math.abs(want[off + i] - got[off + i]))
        lmax = Math.max(lmax, Math.abs(want[off + i]))
      }
      kl += k
      klMax = Math.max(klMax, k)
      rel = Math.max(rel, dmax / lmax)
      if (argmax(want, off) === argmax(got, off)) agree++
      n++
    }
  }
  native.closeModel(h)
  console.log(`${mode}: ${n} positions, KL mean ${(kl / n).toExponential(2)} max ${klMax.toExponential(2)} nats, ` +
    `argmax agrees ${(100 * agree / n).toFixed(2)} %, worst row max|Δ|/max|logit| ${rel.toExponential(2)}`)
}
