// The native draw a grammar refusal costs at T > 0 (SampleRow.retry: the first draw from the filtered
// distribution F is refused, the second comes from F restricted to the allowed tokens), against the plain draw,
// on synthetic rows of the default package's vocabulary (a report, not a test).
//   npx tsx bench/sample-retry.ts [vocab] [allowed fraction]
import {native} from '../src/native/native.ts'
import {samplingParams} from '../src/engine/sampling.ts'

const V = Number(process.argv[2] ?? 16384)
const fraction = Number(process.argv[3] ?? 0.5)
let seed = 1
const rand = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32)
// a peaked row (a few likely tokens over a long tail) and a flat one
const rows = {
  peaked: Float32Array.from({length: V}, (_, i) => (i % 997 === 0 ? 12 : 0) + 4 * rand()),
  flat: Float32Array.from({length: V}, () => 10 * rand()),
}
const timeIt = (f: () => unknown) => {
  for (let i = 0; i < 50; i++) f()
  const t0 = performance.now()
  for (let i = 0; i < 500; i++) f()
  return (performance.now() - t0) / 500
}
for (const [filters, params] of [
  ['T 0.7', samplingParams({temperature: 0.7})],
  ['T 0.7, top-p 0.95', samplingParams({temperature: 0.7, topP: 0.95})],
  ['T 0.7, top-k 40', samplingParams({temperature: 0.7, topK: 40})],
] as const) {
  for (const [name, logits] of Object.entries(rows)) {
    const first = native.sampleLogits(logits, V, {params, rows: [{uniform: 0.5}]})[0]!.token
    // a mask that refuses the first draw and allows about `fraction` of the rest
    const allowed = new Int32Array(Math.ceil(V / 32))
    for (let i = 0; i < V; i++) if (i !== first && rand() < fraction) allowed[i >> 5]! |= 1 << (i & 31)
    const plain = timeIt(() => native.sampleLogits(logits, V, {params, rows: [{uniform: 0.5}]}))
    const retry = timeIt(() => native.sampleLogits(logits, V, {params, rows: [{uniform: 0.5, retry: 0.3, allowed}]}))
    console.log(`${filters}, ${name} row: plain draw ${plain.toFixed(4)} ms, refused then drawn under the mask ${retry.toFixed(4)} ms`)
  }
}
