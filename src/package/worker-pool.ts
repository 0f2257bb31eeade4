// CPU-heavy package work (quantizing a checkpoint, encoding a GGUF export) on worker threads, so it uses every core.
// A worker imports one compiled module and calls its exported functions by name; typed arrays in the arguments and
// results move between threads without copies. Running from TypeScript sources (tests under tap) there is no compiled
// module, so `create` gives no pool and callers run the same functions on the calling thread (same bytes).
import {existsSync} from 'node:fs'
import {availableParallelism} from 'node:os'
import {fileURLToPath} from 'node:url'
import {Worker} from 'node:worker_threads'

const CODE = `
// CommonJS or ES module alike (an eval worker takes the parent's --input-type)
import('node:worker_threads').then(({parentPort, workerData}) => {
  const mod = import(workerData.url)
  const buffers = r => (Array.isArray(r) ? r : [r]).filter(v => ArrayBuffer.isView(v)).map(v => v.buffer)
  parentPort.on('message', async ({id, fn, args}) => {
    try {
      const result = (await mod)[fn](...args)
      parentPort.postMessage({id, result}, [...new Set(buffers(result))])
    } catch (err) {
      parentPort.postMessage({id, error: String((err && err.message) || err)})
    }
  })
})
`

export class WorkerPool {
  private readonly workers: Worker[] = []
  private readonly waiting = new Map<number, {resolve: (r: unknown) => void; reject: (e: Error) => void}>()
  private id = 0

  private constructor(
    url: string,
    readonly size: number,
  ) {
    for (let i = 0; i < size; i++) {
      const w = new Worker(CODE, {eval: true, workerData: {url}})
      w.on('message', (m: {id: number; result?: unknown; error?: string}) => {
        const job = this.waiting.get(m.id)
        this.waiting.delete(m.id)
        if (m.error !== undefined) job?.reject(new Error(m.error))
        else job?.resolve(m.result)
      })
      w.on('error', err => {
        for (const job of this.waiting.values()) job.reject(err)
        this.waiting.clear()
      })
      this.workers.push(w)
    }
  }

  /** A pool over the compiled module at `module` (a .js URL), or undefined when running from sources. */
  static create(module: URL, max = 8): WorkerPool | undefined {
    if (!existsSync(fileURLToPath(module))) return undefined
    return new WorkerPool(module.href, Math.max(1, Math.min(max, availableParallelism())))
  }

  /** Calls `fn(...args)` on a worker; the buffers in `transfer` move there (unusable here afterwards). */
  run<T>(fn: string, args: unknown[], transfer: ArrayBuffer[] = []): Promise<T> {
    const id = this.id++
    return new Promise<T>((resolve, reject) => {
      this.waiting.set(id, {resolve: r => resolve(r as T), reject})
      this.workers[id % this.size].postMessage({id, fn, args}, transfer)
    })
  }

  async close(): Promise<void> {
    await Promise.all(this.workers.map(w => w.terminate()))
  }
}

/** `view` as a transferable of its own: itself when it spans its whole buffer, else a copy. */
export function owned<T extends Float32Array | Uint32Array | Uint16Array | Uint8Array>(view: T): T {
  return view.byteOffset === 0 && view.byteLength === view.buffer.byteLength ? view : (view.slice() as T)
}
