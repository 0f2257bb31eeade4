// Quantization of row blocks on worker threads, so a build uses every core. Workers load the compiled
// quantize.js; running from TypeScript sources (tests under tap) there is no such file and blocks are quantized on
// the calling thread instead (same functions, same bytes).
import {availableParallelism} from 'node:os'
import {Worker} from 'node:worker_threads'
import {quantize, toBf16, type Bits} from './quantize.js'

const CODE = `
const {parentPort, workerData} = require('node:worker_threads')
const mod = import(workerData.url)
parentPort.on('message', async ({id, data, rows, cols, bits}) => {
  try {
    const q = await mod
    if (bits === 16) {
      const w = q.toBf16(data)
      parentPort.postMessage({id, parts: [w]}, [w.buffer])
      return
    }
    const r = q.quantize(data, rows, cols, bits)
    parentPort.postMessage({id, parts: [r.weight, r.scales, r.biases]}, [r.weight.buffer, r.scales.buffer, r.biases.buffer])
  } catch (err) {
    parentPort.postMessage({id, error: String(err && err.message || err)})
  }
})
`

/** bf16 (16) → [weight]; q4/q8 → [weight, scales, biases]. */
export type Target = Bits | 16

export function quantizeHere(data: Float32Array, rows: number, cols: number, bits: Target): ArrayBufferView[] {
  if (bits === 16) return [toBf16(data)]
  const q = quantize(data, rows, cols, bits)
  return [q.weight, q.scales, q.biases]
}

export class QuantPool {
  private readonly workers: Worker[] = []
  private readonly waiting = new Map<number, {resolve: (p: ArrayBufferView[]) => void; reject: (e: Error) => void}>()
  private id = 0

  private constructor(readonly size: number) {
    const url = new URL('./quantize.js', import.meta.url).href
    for (let i = 0; i < size; i++) {
      const w = new Worker(CODE, {eval: true, workerData: {url}})
      w.on('message', (m: {id: number; parts?: ArrayBufferView[]; error?: string}) => {
        const job = this.waiting.get(m.id)
        this.waiting.delete(m.id)
        if (m.error !== undefined) job?.reject(new Error(m.error))
        else job?.resolve(m.parts!)
      })
      w.on('error', err => {
        for (const job of this.waiting.values()) job.reject(err)
        this.waiting.clear()
      })
      this.workers.push(w)
    }
  }

  /** A pool when running compiled code, else undefined (quantize on this thread). */
  static create(): QuantPool | undefined {
    if (!import.meta.url.endsWith('.js')) return undefined
    return new QuantPool(Math.max(1, Math.min(8, availableParallelism())))
  }

  run(data: Float32Array, rows: number, cols: number, bits: Target): Promise<ArrayBufferView[]> {
    const id = this.id++
    const own = data.byteOffset === 0 && data.byteLength === data.buffer.byteLength
    const msg = own ? data : data.slice()
    return new Promise((resolve, reject) => {
      this.waiting.set(id, {resolve, reject})
      this.workers[id % this.size].postMessage({id, data: msg, rows, cols, bits}, [msg.buffer as ArrayBuffer])
    })
  }

  async close(): Promise<void> {
    await Promise.all(this.workers.map(w => w.terminate()))
  }
}
