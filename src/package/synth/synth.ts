// `splash package synth`: a package with random weights in the exact shapes of a real model (presets.ts), written
// tensor by tensor in file order. Bulk bytes come from xorshift128 streams seeded by (seed, tensor name), so a
// preset and seed always give the same files and the packed q4/q8 words cost no per-element work; only scales,
// biases and the small F32 tensors are computed. The sha256 of each file is computed while it is written.
import {mkdir, writeFile} from 'node:fs/promises'
import {join, resolve} from 'node:path'
import {SplashError} from '../../errors.js'
import {DRAFT_FILE, WEIGHTS_FILE} from '../builder/builder.js'
import {finishPackage} from '../builder/finish.js'
import {draftLayout, modelLayout, visionLayout, type LayoutEntry} from '../layout.js'
import {DEFAULT_REASONING, type FileEntry, type Manifest, type Quant} from '../manifest.js'
import {dflash2, PRESETS, withLayers} from '../presets.js'
import {bf16Bits} from '../builder/quantize.js'
import {SafetensorsWriter} from '../safetensors.js'
import {CHUNK, Keystream, SequentialFile} from './synth-io.js'
import {makeTokenizer, SYNTH_CHAT_TEMPLATE} from './synth-tokenizer.js'
import {builderId} from '../version.js'
import {specsFor, storageFor, type Storage} from '../builder/weights.js'

export interface SynthOptions {
  preset: string
  out: string
  quant: Quant
  layers?: number
  seed?: number
  name?: string
  /** The draft's kind: DFlash (default) or DFlash 2 (presets.ts dflash2), with its sliding window. */
  draft?: 'dflash' | 'dflash2'
  draftWindow?: number
  /** The package's context window (max_position_embeddings) instead of the preset's. */
  context?: number
  log?: (line: string) => void
}


/** Packed words of big tensors are tiled from an 8 MiB random pool, starting each 8 MiB at a random offset: memcpy
 *  speed instead of a PRNG per word; rows never repeat in phase (row sizes do not divide the pool). */
const POOL = 8 * 1024 * 1024

function tiledInto(pool: Buffer, out: Uint8Array, ks: Keystream): void {
  const n = out.length
  const raw = ks.bytes(4 * Math.ceil(n / POOL))
  const starts = new Uint32Array(raw.buffer, raw.byteOffset, raw.length / 4)
  for (let at = 0, k = 0; at < n; k++) {
    const start = (starts[k] % (POOL / 4)) * 4
    const len = Math.min(POOL - start, n - at)
    out.set(pool.subarray(start, start + len), at)
    at += len
  }
}

const QSTD: Record<number, number> = {4: Math.sqrt((16 * 16 - 1) / 12), 8: Math.sqrt((256 * 256 - 1) / 12)}

async function writeLinear(f: SequentialFile, e: LayoutEntry, s: Storage, ks: Keystream): Promise<void> {
  const cols = e.shape[e.shape.length - 1]
  const rows = e.shape.slice(0, -1).reduce((a, b) => a * b, 1)
  const sigma = 1 / Math.sqrt(cols)
  if (s.type === 'q') {
    const rowBytes = (cols * s.bits) / 8
    const step = Math.max(1, Math.floor(CHUNK / rowBytes))
    const pool = rows * rowBytes > POOL ? ks.bytes(POOL) : undefined
    for (let r = 0; r < rows; r += step) {
      const n = Math.min(step, rows - r)
      const slot = await f.slot()
      const view = f.view(slot, n * rowBytes)
      if (pool) tiledInto(pool, view, ks)
      else ks.fill(view)
      f.submit(`${e.name}.weight`, r * rowBytes, slot, view.length)
    }
    // scales: sigma / std(q) with ±25 % jitter from a 4096-entry table, tiled; biases centre the values on 0
    const groups = (rows * cols) / 64
    const table = ks.uniform(4096)
    const half = 2 ** (s.bits - 1)
    const sc = new Uint16Array(4096)
    const bi = new Uint16Array(4096)
    for (let i = 0; i < 4096; i++) {
      const scale = (sigma / QSTD[s.bits]) * (0.75 + 0.5 * table[i])
      sc[i] = bf16Bits(scale)
      bi[i] = bf16Bits(-scale * half)
    }
    for (const [part, t] of [['scales', sc], ['biases', bi]] as const) {
      const out = new Uint16Array(groups)
      for (let g = 0; g < groups; g += 4096) out.set(t.subarray(0, Math.min(4096, groups - g)), g)
      await f.put(`${e.name}.${part}`, 0, out)
    }
    return
  }
  // bf16: sign, 7 random mantissa bits, exponent within the 4 octaves below 2·sigma (rms ≈ sigma)
  const e0 = Math.floor(Math.log2(sigma)) + 127
  const total = rows * cols
  const step = CHUNK / 2
  for (let i = 0; i < total; i += step) {
    const n = Math.min(step, total - i)
    const slot = await f.slot()
    const view = f.view(slot, 2 * n)
    ks.fill(view)
    const u = new Uint16Array(view.buffer, 0, n)
    for (let k = 0; k < n; k++) {
      const x = u[k]
      u[k] = (x & 0x8000) | ((e0 - ((x >> 7) & 3)) << 7) | (x & 0x7f)
    }
    f.submit(`${e.name}.weight`, 2 * i, slot, 2 * n)
  }
}

function smallValues(e: LayoutEntry, ks: Keystream): Float32Array {
  const n = e.shape.reduce((a, b) => a * b, 1)
  const u = ks.uniform(n)
  const out = new Float32Array(n)
  for (let i = 0; i < n; i++) {
    const x = u[i]
    switch (e.role) {
      case 'norm': case 'gdn_norm': out[i] = 0.9 + 0.2 * x; break
      case 'conv': out[i] = x - 0.5; break
      case 'a_log': out[i] = Math.log(1 + 15 * x); break // A in [1, 16]
      case 'dt_bias': out[i] = 2 * x - 1; break
      case 'bias': out[i] = 0.04 * (x - 0.5); break
      default: out[i] = x
    }
  }
  return out
}

async function writeFileOf(path: string, entries: LayoutEntry[], quant: Quant, seed: number, tag: string): Promise<FileEntry & {bytes: number}> {
  const storages = entries.map(e => storageFor(e.kind, e.shape, quant, e.q8, e.keep16))
  const specs = entries.flatMap((e, i) => specsFor(e.name, e.shape, storages[i]))
  const f = new SequentialFile(await SafetensorsWriter.create(path, specs, {format: 'splash', synthetic: 'true'}))
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i]
    const ks = new Keystream(seed, `${tag}/${e.name}`)
    if (e.kind === 'f32') await f.put(e.name, 0, smallValues(e, ks))
    else await writeLinear(f, e, storages[i], ks)
  }
  const {size, sha256} = await f.close()
  return {path: '', size, sha256, bytes: size}
}

export async function synthPackage(o: SynthOptions): Promise<Manifest> {
  const log = o.log ?? (() => undefined)
  const base = PRESETS[o.preset]
  if (!base) {
    throw new SplashError('unknown_preset', 'invalid_request', `unknown preset "${o.preset}"; presets: ${Object.keys(PRESETS).join(', ')}`)
  }
  const L = base.config.num_hidden_layers
  if (o.layers !== undefined && (!Number.isInteger(o.layers) || o.layers < 1 || o.layers > L)) {
    throw new SplashError('invalid_layers', 'invalid_request', `--layers must be between 1 and ${L} for ${o.preset}`)
  }
  if (o.context !== undefined && (!Number.isInteger(o.context) || o.context < 256)) {
    throw new SplashError('invalid_context', 'invalid_request', `--context must be a whole number of tokens, at least 256`)
  }
  const layered = withLayers(base, o.layers)
  const shaped = o.context === undefined ? layered : {...layered, config: {...layered.config, max_position_embeddings: o.context}}
  const p = o.draft === 'dflash2' ? {...shaped, draft: dflash2(shaped.draft, o.draftWindow)} : shaped
  const seed = o.seed ?? 0
  const out = resolve(o.out)
  await mkdir(out, {recursive: true})
  const model = [...modelLayout(p.config), ...(p.vision ? visionLayout(p.vision.config) : [])]
  const draft = draftLayout(p.draft, p.config.hidden_size, p.config.vocab_size)
  const t0 = Date.now()
  log(`${o.preset}${o.layers ? ` (${o.layers} of ${L} layers)` : ''}: ${model.length} tensors + draft ${draft.length}, ${o.quant} → ${out}`)
  const known = new Map<string, FileEntry>()
  let bytes = 0
  for (const [file, entries, tag] of [[WEIGHTS_FILE, model, 'model'], [DRAFT_FILE, draft, 'draft']] as const) {
    const r = await writeFileOf(join(out, file), entries, o.quant, seed, tag)
    known.set(file, {path: file, size: r.size, sha256: r.sha256})
    bytes += r.bytes
  }
  const secs = (Date.now() - t0) / 1000
  log(`wrote ${(bytes / 1e9).toFixed(2)} GB in ${secs.toFixed(1)} s (${(bytes / 1e9 / Math.max(secs, 1e-3)).toFixed(2)} GB/s)`)
  const tok = makeTokenizer(p.specialBase)
  await writeFile(join(out, 'tokenizer.json'), tok.json)
  await writeFile(join(out, 'chat_template.jinja'), SYNTH_CHAT_TEMPLATE)
  return finishPackage(
    out,
    {
      format: 1,
      name: o.name ?? `splash/synth-${o.preset}${o.layers ? `-${o.layers}l` : ''}`,
      family: p.family,
      architecture: p.architecture,
      config: p.config,
      tokenizer: {
        file: 'tokenizer.json',
        chat_template: 'chat_template.jinja',
        eos_token_ids: [tok.specials['<|im_end|>'], tok.specials['<|endoftext|>']],
        pad_token_id: tok.specials['<|endoftext|>'],
      },
      reasoning: DEFAULT_REASONING,
      weights: {files: [WEIGHTS_FILE], quant: o.quant, group_size: 64},
      draft: {config: p.draft, files: [DRAFT_FILE]},
      vision: p.vision
        ? {...p.vision, tokens: {vision_start: tok.specials['<|vision_start|>'], vision_end: tok.specials['<|vision_end|>'], image_pad: tok.specials['<|image_pad|>']}}
        : null,
      kernels: [],
      provenance: {
        source: `preset:${o.preset}${o.layers ? `:layers=${o.layers}` : ''}${o.draft === 'dflash2' ? `:draft=dflash2` : ''}${o.context !== undefined ? `:context=${o.context}` : ''}:seed=${seed}`,
        builder: builderId(),
        kind: 'synthetic',
      },
    },
    known,
  )
}
