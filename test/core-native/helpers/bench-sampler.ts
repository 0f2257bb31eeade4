// Native sampler benchmark (a report, not a test): microseconds per sampled row for vocabulary sizes of the
// default package (16384) and of Qwen3.5 (248320), on logits shaped like a trained model's (a few clear
// favourites over a wide tail) and on flat random logits.
// npx tsx test/core-native/helpers/bench-sampler.ts
import {native} from '../../../src/native/native.ts'
import {samplingParams, type SampleRequest} from '../../../src/engine/sampling.ts'
import {Rng} from '../../../src/engine/rng.ts'

const rng = new Rng(1)
const gauss = () => Math.sqrt(-2 * Math.log(1 - rng.next())) * Math.cos(2 * Math.PI * rng.next())
const ROWS = 16
for (const V of [16384, 248320]) {
  for (const shape of ['peaked', 'flat'] as const) {
    const logits = new Float32Array(V * ROWS)
    for (let r = 0; r < ROWS; r++)
      for (let i = 0; i < V; i++) logits[r * V + i] = shape === 'flat' ? gauss() : 2.5 * gauss() + (i % 4099 === r ? 14 : 0)
    const cases: Array<[string, Omit<SampleRequest, 'rows'>]> = [
      ['T=0', {params: samplingParams({temperature: 0})}],
      ['T=0.7 top_p=0.95', {params: samplingParams({temperature: 0.7, topP: 0.95})}],
      ['T=1', {params: samplingParams({temperature: 1})}],
      ['T=0.7 top_k=40', {params: samplingParams({temperature: 0.7, topK: 40})}],
      ['T=0.7 min_p=0.05', {params: samplingParams({temperature: 0.7, minP: 0.05})}],
      ['T=0.7 top_p=0.95 logprobs=5', {params: samplingParams({temperature: 0.7, topP: 0.95}), logprobs: 5}],
    ]
    for (const [name, req] of cases) {
      const iters = V > 100000 ? 20 : 100
      let best = Infinity
      for (let rep = 0; rep < 3; rep++) {
        const t0 = performance.now()
        for (let i = 0; i < iters; i++) native.sampleLogits(logits, V, {...req, rows: Array.from({length: ROWS}, () => ({uniform: rng.next()}))})
        best = Math.min(best, ((performance.now() - t0) * 1000) / (iters * ROWS))
      }
      console.log(`V=${V} ${shape.padEnd(6)} ${name.padEnd(28)} ${best.toFixed(1)} µs/row`)
    }
  }
}
