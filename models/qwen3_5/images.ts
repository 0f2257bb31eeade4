// The Qwen3.5 vision side of a package (manifest `vision`): images are decoded and preprocessed on worker threads
// (image-worker.ts through piscina), and a rendered prompt's single `<|image_pad|>` per image is expanded to the
// image's merged-patch count with its M-RoPE ids (transformers' get_rope_index; docs/images-and-pdfs.md).
import {availableParallelism} from 'node:os'
import {Piscina} from 'piscina'
import {errors} from '../../src/errors.js'
import type {VisionManifest} from '../../src/package/manifest.js'
import type {PreparedImage, VisionFamily} from '../../src/chat/media/media.js'
import type {ImageGeometry} from './image-preprocess.js'
import type {ImageResult, ImageTask} from './image-worker.js'

/** Positions of a prompt whose image spans are given: text advances by one, an image by its larger merged side. */
export function mropePositions(length: number, spans: ReadonlyArray<{start: number; rows: number; cols: number}>): {positions: Int32Array; ropeDelta: number} {
  const positions = new Int32Array(3 * length)
  let cur = 0
  let i = 0
  let max = -1
  for (const s of [...spans, {start: length, rows: 0, cols: 0}]) {
    for (; i < s.start; i++, cur++) positions.fill(cur, 3 * i, 3 * i + 3)
    for (let r = 0; r < s.rows; r++)
      for (let c = 0; c < s.cols; c++, i++) {
        positions[3 * i] = cur
        positions[3 * i + 1] = cur + r
        positions[3 * i + 2] = cur + c
      }
    if (s.rows > 0) cur += Math.max(s.rows, s.cols)
  }
  for (const p of positions) max = Math.max(max, p)
  return {positions, ropeDelta: max + 1 - length}
}

export class QwenImages implements VisionFamily {
  private readonly geometry: ImageGeometry
  private pool: Piscina | undefined

  constructor(
    private readonly vision: VisionManifest,
    private readonly workers = Math.max(1, Math.min(4, availableParallelism() - 1)),
  ) {
    const c = vision.config
    const p = vision.preprocessor
    this.geometry = {
      patchSize: c.patch_size,
      temporalPatchSize: c.temporal_patch_size,
      mergeSize: c.spatial_merge_size,
      minPixels: p.min_pixels,
      maxPixels: p.max_pixels,
      mean: p.image_mean,
      std: p.image_std,
    }
  }

  async prepare(bytes: Uint8Array, where: string, maxImagePixels: number): Promise<PreparedImage> {
    const task: ImageTask = {bytes, maxImagePixels, geometry: this.geometry}
    const r = (await this.getPool().run(task)) as ImageResult
    if (!r.ok) throw errors.invalidRequest(`${where}: the image ${r.message}`, where, r.reason === 'too_large' ? 'image_too_large' : 'invalid_image')
    return {pixels: r.pixels, grid: r.grid, hash: r.hash, where}
  }

  layout(tokens: readonly number[], images: readonly PreparedImage[]) {
    const pad = this.vision.tokens.image_pad
    const m = this.vision.config.spatial_merge_size
    const found = tokens.reduce((n, t) => n + (t === pad ? 1 : 0), 0)
    if (found !== images.length) {
      throw errors.invalidRequest(`the prompt holds ${found} image placeholders for ${images.length} images (is <|image_pad|> written in the text?)`)
    }
    const out: number[] = []
    const spans: Array<{start: number; length: number; rows: number; cols: number}> = []
    let k = 0
    for (const t of tokens) {
      if (t !== pad) {
        out.push(t)
        continue
      }
      const [frames, h, w] = images[k++].grid
      const rows = (frames * h) / m
      const cols = w / m
      spans.push({start: out.length, length: rows * cols, rows, cols})
      for (let j = 0; j < rows * cols; j++) out.push(pad)
    }
    const {positions, ropeDelta} = mropePositions(out.length, spans)
    return {tokens: out, spans: spans.map(s => ({start: s.start, length: s.length})), positions, ropeDelta}
  }

  async close(): Promise<void> {
    const pool = this.pool
    this.pool = undefined
    await pool?.destroy()
  }

  private getPool(): Piscina {
    // The worker is a .ts file when this module runs from source (tap), a .js file in dist/.
    const ext = import.meta.url.endsWith('.ts') ? '.ts' : '.js'
    this.pool ??= new Piscina({
      filename: new URL(`./image-worker${ext}`, import.meta.url).href,
      maxThreads: this.workers,
      minThreads: 0,
      idleTimeout: 60_000,
    })
    return this.pool
  }
}
