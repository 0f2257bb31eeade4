// How each Splash tensor is stored for a package quant (q4 | q8 | bf16), and writing a list of tensor plans into one
// safetensors file, block by block.
import {SplashError} from '../../errors.js'
import type {Checkpoint} from './checkpoint.js'
import type {TensorPlan} from './family.js'
import type {Quant} from '../manifest.js'
import {QuantPool, quantizeHere} from './quant-pool.js'
import {GROUP_SIZE, type Bits} from './quantize.js'
import {SafetensorsWriter, type TensorSpec} from '../safetensors.js'

export type Storage = {type: 'f32'} | {type: 'bf16'} | {type: 'q'; bits: Bits}

/** q4/q8 for linears whose input size is a multiple of 64 (router and shared-expert gate q8 in q4), else bf16;
 *  `keep16` linears (the vision tower) are bf16 in every package. */
export function storageFor(kind: 'linear' | 'f32', shape: readonly number[], quant: Quant, q8 = false, keep16 = false): Storage {
  if (kind === 'f32') return {type: 'f32'}
  const cols = shape[shape.length - 1]
  if (quant === 'bf16' || keep16 || cols % GROUP_SIZE !== 0) return {type: 'bf16'}
  return {type: 'q', bits: quant === 'q8' || q8 ? 8 : 4}
}

export function specsFor(name: string, shape: readonly number[], s: Storage): TensorSpec[] {
  if (s.type === 'f32') return [{name, dtype: 'F32', shape: [...shape]}]
  if (s.type === 'bf16') return [{name: `${name}.weight`, dtype: 'BF16', shape: [...shape]}]
  const lead = shape.slice(0, -1)
  const cols = shape[shape.length - 1]
  return [
    {name: `${name}.weight`, dtype: 'U32', shape: [...lead, (cols * s.bits) / 32]},
    {name: `${name}.scales`, dtype: 'BF16', shape: [...lead, cols / GROUP_SIZE]},
    {name: `${name}.biases`, dtype: 'BF16', shape: [...lead, cols / GROUP_SIZE]},
  ]
}

/** Running write positions inside one stored tensor (its weight, scales, biases parts). */
class Cursor {
  private readonly at = new Map<string, number>()
  constructor(private readonly w: SafetensorsWriter) {}
  async put(name: string, data: ArrayBufferView): Promise<void> {
    const pos = this.at.get(name) ?? 0
    await this.w.writePart(name, pos, data)
    this.at.set(name, pos + data.byteLength)
  }
}

/** Whether the checkpoint's quantized bytes can be copied unchanged for this plan and storage. */
function passThrough(ck: Checkpoint | undefined, plan: TensorPlan, s: Storage): boolean {
  if (!ck || !plan.source || s.type !== 'q') return false
  const q = ck.quantOf(plan.source)
  return !!q && q.bits === s.bits && q.groupSize === GROUP_SIZE &&
    ck.info(`${plan.source}.scales`).dtype === 'BF16' && ck.info(`${plan.source}.biases`).dtype === 'BF16'
}

async function copyQuantized(ck: Checkpoint, plan: TensorPlan, cur: Cursor): Promise<void> {
  const src = plan.source!
  const rows = ck.info(`${src}.weight`).shape.slice(0, -1).reduce((a, b) => a * b, 1)
  const step = 4096
  for (let r = 0; r < rows; r += step) {
    const r1 = Math.min(rows, r + step)
    for (const part of ['weight', 'scales', 'biases']) await cur.put(`${plan.name}.${part}`, await ck.readRawRows(`${src}.${part}`, r, r1))
  }
}

export interface WriteResult {
  tensors: number
  passedThrough: number
}

/** Writes every plan into `path` (one safetensors file), each tensor streamed block by block. */
export async function writePlans(
  path: string,
  plans: TensorPlan[],
  quant: Quant,
  opts: {checkpoint?: Checkpoint; metadata?: Record<string, string>; progress?: (done: number, total: number) => void} = {},
): Promise<WriteResult> {
  const storages = plans.map(p => storageFor(p.kind, p.shape, quant, p.q8, p.keep16))
  const specs = plans.flatMap((p, i) => specsFor(p.name, p.shape, storages[i]))
  const writer = await SafetensorsWriter.create(path, specs, opts.metadata ?? {format: 'splash'})
  const cur = new Cursor(writer)
  const pool = QuantPool.create()
  // blocks being quantized, oldest first; each resolves to the writes of its parts, done in this order
  const pending: Promise<() => Promise<void>>[] = []
  const drain = async (keep: number) => {
    while (pending.length > keep) await (await pending.shift()!)()
  }
  let passedThrough = 0
  try {
    for (let i = 0; i < plans.length; i++) {
      const plan = plans[i]
      const s = storages[i]
      if (passThrough(opts.checkpoint, plan, s)) {
        await drain(0)
        await copyQuantized(opts.checkpoint!, plan, cur)
        passedThrough++
      } else {
        const cols = plan.shape[plan.shape.length - 1] ?? 1
        for (const chunk of plan.chunks) {
          const data = await chunk()
          if (data.length % cols !== 0) {
            throw new SplashError('invalid_checkpoint', 'invalid_request', `${plan.name}: a block of ${data.length} values does not fit [${plan.shape}]`)
          }
          const names = s.type === 'f32' ? [plan.name] : s.type === 'bf16' ? [`${plan.name}.weight`] : ['weight', 'scales', 'biases'].map(x => `${plan.name}.${x}`)
          const target = s.type === 'q' ? s.bits : 16
          const parts: Promise<ArrayBufferView[]> =
            s.type === 'f32' ? Promise.resolve([data]) : pool ? pool.run(data, data.length / cols, cols, target) : Promise.resolve(quantizeHere(data, data.length / cols, cols, target))
          const job = parts.then(ps => async () => {
            for (let k = 0; k < names.length; k++) await cur.put(names[k], ps[k])
          })
          job.catch(() => undefined) // awaited in order by drain; this only keeps an early failure from being unhandled
          pending.push(job)
          await drain(pool ? pool.size + 1 : 0)
        }
      }
      opts.progress?.(i + 1, plans.length)
    }
    await drain(0)
  } catch (err) {
    await writer.abort()
    throw err
  } finally {
    await pool?.close()
  }
  await writer.close() // checks that every tensor was filled: a plan whose blocks miss rows fails here
  return {tensors: plans.length, passedThrough}
}

/** Bytes a plan takes in the file (without alignment padding). */
export function storedBytes(plan: Pick<TensorPlan, 'kind' | 'shape' | 'q8' | 'keep16'>, quant: Quant): number {
  const s = storageFor(plan.kind, plan.shape, quant, plan.q8, plan.keep16)
  return specsFor('x', plan.shape, s).reduce((n, t) => n + t.shape.reduce((a, b) => a * b, 1) * (t.dtype === 'BF16' ? 2 : 4), 0)
}

/** Splits plans, in order, into shards of at most `maxBytes` each (a tensor larger than that gets a shard alone). */
export function shardPlans<T extends Pick<TensorPlan, 'kind' | 'shape' | 'q8' | 'keep16'>>(plans: T[], quant: Quant, maxBytes: number): T[][] {
  const shards: T[][] = [[]]
  let size = 0
  for (const p of plans) {
    const b = storedBytes(p, quant)
    if (size > 0 && size + b > maxBytes) {
      shards.push([])
      size = 0
    }
    shards[shards.length - 1].push(p)
    size += b
  }
  return shards
}

/** model.safetensors for one shard, else model-00001-of-00003.safetensors (the Hugging Face naming). */
export function shardNames(count: number): string[] {
  if (count === 1) return ['model.safetensors']
  const pad = (n: number) => String(n).padStart(5, '0')
  return Array.from({length: count}, (_, i) => `model-${pad(i + 1)}-of-${pad(count)}.safetensors`)
}
