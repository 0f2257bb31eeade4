// The I/O under `splash package synth`: seeded random bytes, and a sequential safetensors file writer that hashes
// what it writes on a worker thread.
import {createHash} from 'node:crypto'
import {Worker} from 'node:worker_threads'
import type {SafetensorsWriter} from '../safetensors.js'

export const CHUNK = 64 * 1024 * 1024

/** xorshift128 words seeded from sha256(seed, name): about 4x faster than AES-CTR on a CPU without AES-NI. */
export class Keystream {
  private x: number
  private y: number
  private z: number
  private w: number
  constructor(seed: number, name: string) {
    const h = createHash('sha256').update(`splash-synth:${seed}:${name}`).digest()
    this.x = h.readUInt32LE(0) | 1
    this.y = h.readUInt32LE(4)
    this.z = h.readUInt32LE(8)
    this.w = h.readUInt32LE(12)
  }
  bytes(n: number): Buffer {
    const buf = Buffer.alloc(Math.ceil(n / 4) * 4)
    this.fill(buf)
    return buf.subarray(0, n)
  }

  /** Fills a view whose offset and length are multiples of 4. */
  fill(out: Uint8Array): void {
    const u = new Uint32Array(out.buffer, out.byteOffset, out.length >> 2)
    let {x, y, z, w} = this
    for (let i = 0; i < u.length; i++) {
      const t = x ^ (x << 11)
      x = y
      y = z
      z = w
      w = w ^ (w >>> 19) ^ (t ^ (t >>> 8))
      u[i] = w
    }
    Object.assign(this, {x, y, z, w})
  }
  /** n uniform floats in [0, 1). */
  uniform(n: number): Float64Array {
    const b = this.bytes(4 * n)
    const u = new Uint32Array(b.buffer, b.byteOffset, n)
    return Float64Array.from(u, x => x / 4294967296)
  }
}

const SLOTS = 4
const HASHER = `
const {parentPort, workerData} = require('node:worker_threads')
const {createHash} = require('node:crypto')
const h = createHash('sha256')
const slots = workerData.map(b => new Uint8Array(b))
parentPort.on('message', m => {
  if (m.digest) return parentPort.postMessage({digest: h.digest('hex')})
  if (m.gap) h.update(new Uint8Array(m.gap))
  if (m.bytes) h.update(m.bytes)
  if (m.slot !== undefined) {
    h.update(slots[m.slot].subarray(0, m.len))
    parentPort.postMessage({free: m.slot})
  }
})
`

/**
 * Writes one safetensors file in file order through a ring of shared 64 MiB slots: the main thread fills a slot,
 * libuv writes it, then a worker thread hashes it (sha256 of the whole file, zero padding included) and frees it.
 * No per-chunk allocation, no copy to the hashing thread.
 */
export class SequentialFile {
  private pos = 0
  private readonly buffers = Array.from({length: SLOTS}, () => new SharedArrayBuffer(CHUNK))
  private readonly free = Array.from({length: SLOTS}, (_, i) => i)
  private waiters: (() => void)[] = []
  private readonly worker = new Worker(HASHER, {eval: true, workerData: this.buffers})
  private chain: Promise<void> = Promise.resolve()
  private failed: unknown
  private digest?: (hex: string) => void

  constructor(readonly w: SafetensorsWriter) {
    this.worker.on('message', (m: {free?: number; digest?: string}) => {
      if (m.free !== undefined) {
        this.free.push(m.free)
        this.waiters.shift()?.()
      }
      if (m.digest) this.digest?.(m.digest)
    })
    this.worker.postMessage({bytes: new Uint8Array(w.plan.header)})
    this.pos = w.plan.header.length
  }

  /** A free slot (waits for one). */
  async slot(): Promise<number> {
    while (this.free.length === 0) {
      if (this.failed) throw this.failed
      await new Promise<void>(r => this.waiters.push(r))
    }
    if (this.failed) throw this.failed
    return this.free.shift()!
  }

  view(slot: number, n: number): Uint8Array {
    return new Uint8Array(this.buffers[slot], 0, n)
  }

  /** Queues the first n bytes of a filled slot for tensor `name` at `offset`; writes must come in file order. */
  submit(name: string, offset: number, slot: number, n: number): void {
    const at = this.w.info(name).offset + offset
    const gap = at - this.pos
    this.pos = at + n
    const written = this.w.writePart(name, offset, this.view(slot, n))
    this.chain = Promise.all([this.chain, written]).then(() => this.worker.postMessage({gap, slot, len: n}))
    this.chain.catch(err => {
      this.failed = err
      this.waiters.splice(0).forEach(w => w())
    })
  }

  /** Copies data into slots and queues it. */
  async put(name: string, offset: number, data: ArrayBufferView): Promise<void> {
    const src = new Uint8Array(data.buffer, data.byteOffset, data.byteLength)
    for (let done = 0; done < src.length; ) {
      const n = Math.min(CHUNK, src.length - done)
      const s = await this.slot()
      this.view(s, n).set(src.subarray(done, done + n))
      this.submit(name, offset + done, s, n)
      done += n
    }
  }

  async close(): Promise<{size: number; sha256: string}> {
    try {
      await this.chain
      const tail = this.w.plan.fileSize - this.pos
      const hex = new Promise<string>(r => (this.digest = r))
      this.worker.postMessage({gap: tail > 0 ? tail : 0, digest: true})
      await this.w.close()
      return {size: this.w.plan.fileSize, sha256: await hex}
    } finally {
      await this.worker.terminate()
    }
  }
}

