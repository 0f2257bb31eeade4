// Piscina task: one image's bytes → the vision encoder's patch matrix. Decodes with sharp (JPEG, PNG, WebP, GIF's
// first frame), refuses images over the pixel cap before decoding their pixels, composites transparency on white,
// resizes to the smart-resize size with Pillow's bicubic resampling (image-preprocess.ts) and patchifies. Failures
// come back as values: a thrown error would lose its detail crossing the thread boundary.
import {createHash} from 'node:crypto'
import sharp, {type Metadata} from 'sharp'
import {patchify, resizeBicubic, smartResize, type ImageGeometry} from './image-preprocess.js'

export interface ImageTask {
  bytes: Uint8Array
  /** Most pixels a decoded image may have (serve --max-image-pixels). */
  maxImagePixels: number
  geometry: ImageGeometry
}

export type ImageResult =
  | {ok: true; pixels: Float32Array; grid: [number, number, number]; width: number; height: number; hash: string}
  | {ok: false; reason: 'unsupported' | 'corrupt' | 'too_large'; message: string}

const FORMATS = new Set(['jpeg', 'png', 'webp', 'gif'])

export default async function prepareImage(task: ImageTask): Promise<ImageResult> {
  let meta: Metadata
  try {
    meta = await sharp(task.bytes).metadata()
  } catch {
    return {ok: false, reason: 'unsupported', message: 'is not an image in a supported format (JPEG, PNG, WebP or GIF)'}
  }
  if (!meta.format || !FORMATS.has(meta.format)) {
    return {ok: false, reason: 'unsupported', message: `is a ${meta.format ?? 'unknown'} image; supported formats are JPEG, PNG, WebP and GIF`}
  }
  const width = meta.width ?? 0
  const height = meta.pageHeight ?? meta.height ?? 0
  if (width < 1 || height < 1) return {ok: false, reason: 'corrupt', message: 'has no pixels'}
  if (width * height > task.maxImagePixels) {
    return {ok: false, reason: 'too_large', message: `is ${width}×${height} = ${width * height} pixels, over this server's limit of ${task.maxImagePixels}`}
  }
  let size: [number, number]
  try {
    size = smartResize(height, width, task.geometry)
  } catch (err) {
    return {ok: false, reason: 'unsupported', message: (err as Error).message}
  }
  const [h, w] = size
  let rgb: Buffer
  try {
    const img = sharp(task.bytes, {pages: 1, limitInputPixels: task.maxImagePixels}).flatten({background: '#ffffff'}).toColourspace('srgb')
    const out = await img.removeAlpha().raw().toBuffer({resolveWithObject: true})
    if (out.info.channels !== 3 || (out.info as {depth?: string}).depth !== 'uchar' || out.info.width !== width || out.info.height !== height) {
      return {ok: false, reason: 'corrupt', message: 'could not be decoded to RGB'}
    }
    rgb = out.data
  } catch (err) {
    return {ok: false, reason: 'corrupt', message: `could not be decoded (${(err as Error).message})`}
  }
  const decoded = new Uint8Array(rgb.buffer, rgb.byteOffset, rgb.length)
  const resized = h !== height || w !== width ? resizeBicubic(decoded, width, height, w, h) : decoded
  const {pixels, grid} = patchify(resized, h, w, task.geometry)
  const hash = createHash('sha256').update(new Uint8Array(pixels.buffer)).update(grid.join(',')).digest('hex')
  return {ok: true, pixels, grid, width, height, hash}
}
