// Quantization of row blocks on worker threads (worker-pool.ts), so a build uses every core.
import {WorkerPool, owned} from '../worker-pool.js'
import {quantizeParts, type Target} from './quantize.js'

export type {Target}
export {quantizeParts as quantizeHere}

export class QuantPool {
  private constructor(private readonly pool: WorkerPool) {}

  get size(): number {
    return this.pool.size
  }

  /** A pool when running compiled code, else undefined (quantize on this thread). */
  static create(): QuantPool | undefined {
    const pool = WorkerPool.create(new URL('./quantize.js', import.meta.url))
    return pool && new QuantPool(pool)
  }

  run(data: Float32Array, rows: number, cols: number, bits: Target): Promise<ArrayBufferView[]> {
    const msg = owned(data)
    return this.pool.run('quantizeParts', [msg, rows, cols, bits], [msg.buffer as ArrayBuffer])
  }

  close(): Promise<void> {
    return this.pool.close()
  }
}
