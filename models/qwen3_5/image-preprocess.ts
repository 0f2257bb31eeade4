// The Qwen2-VL image processor's arithmetic (transformers' Qwen2VLImageProcessor), as pure functions: the smart-resize rule and the
// patch matrix the vision encoder takes (normalised, each frame duplicated to the temporal patch size, 2×2 merge
// groups contiguous). Decoding and resampling happen in image-worker.ts.

export interface ImageGeometry {
  patchSize: number
  temporalPatchSize: number
  mergeSize: number
  minPixels: number
  maxPixels: number
  mean: readonly number[]
  std: readonly number[]
}

/** Python's round(): halves go to the even neighbour. */
function roundHalfEven(x: number): number {
  const f = Math.floor(x)
  const d = x - f
  if (d > 0.5) return f + 1
  if (d < 0.5) return f
  return f % 2 === 0 ? f : f + 1
}

/** Height and width (multiples of patch·merge) the image is resized to; throws RangeError for extreme aspects. */
export function smartResize(height: number, width: number, g: ImageGeometry): [number, number] {
  const factor = g.patchSize * g.mergeSize
  if (Math.max(height, width) / Math.min(height, width) > 200) {
    throw new RangeError(`its aspect ratio ${(Math.max(height, width) / Math.min(height, width)).toFixed(0)}:1 is over 200:1`)
  }
  let h = roundHalfEven(height / factor) * factor
  let w = roundHalfEven(width / factor) * factor
  if (h * w > g.maxPixels) {
    const beta = Math.sqrt((height * width) / g.maxPixels)
    h = Math.max(factor, Math.floor(height / beta / factor) * factor)
    w = Math.max(factor, Math.floor(width / beta / factor) * factor)
  } else if (h * w < g.minPixels) {
    const beta = Math.sqrt(g.minPixels / (height * width))
    h = Math.ceil((height * beta) / factor) * factor
    w = Math.ceil((width * beta) / factor) * factor
  }
  return [h, w]
}

/** Bicubic (a = −0.5) with the support widened by the scale when shrinking, as Pillow and torchvision resample. */
function cubic(x: number): number {
  const a = -0.5
  x = Math.abs(x)
  if (x < 1) return ((a + 2) * x - (a + 3)) * x * x + 1
  if (x < 2) return (((x - 5) * x + 8) * x - 4) * a
  return 0
}

const PRECISION = 22 // Pillow's fixed-point weights for 8-bit images

/** One axis of Pillow's resampling: per output index, the first input index and the fixed-point weights. */
function axisWeights(inSize: number, outSize: number): {start: Int32Array; weights: Int32Array[]} {
  const scale = inSize / outSize
  const filterScale = Math.max(scale, 1)
  const support = 2 * filterScale
  const start = new Int32Array(outSize)
  const weights: Int32Array[] = []
  for (let o = 0; o < outSize; o++) {
    const center = (o + 0.5) * scale
    const lo = Math.max(Math.trunc(center - support + 0.5), 0)
    const hi = Math.min(Math.trunc(center + support + 0.5), inSize)
    const k: number[] = []
    let sum = 0
    for (let x = lo; x < hi; x++) {
      const w = cubic((x - center + 0.5) / filterScale)
      k.push(w)
      sum += w
    }
    start[o] = lo
    weights.push(Int32Array.from(k, w => {
      const v = (sum !== 0 ? w / sum : w) * (1 << PRECISION)
      return v < 0 ? Math.trunc(v - 0.5) : Math.trunc(v + 0.5)
    }))
  }
  return {start, weights}
}

/**
 * Resizes an RGB image (rows of width × 3 bytes) with Pillow's bicubic resampling: horizontal pass, then vertical,
 * 8-bit fixed-point weights, rounding and clipping after each pass. transformers' processors (Pillow or torchvision)
 * give the same pixels to within one grey level.
 */
export function resizeBicubic(rgb: Uint8Array, width: number, height: number, outW: number, outH: number): Uint8Array {
  const pass = (src: Uint8Array, sw: number, sh: number, horizontal: boolean, size: number): Uint8Array => {
    const {start, weights} = axisWeights(horizontal ? sw : sh, size)
    const ow = horizontal ? size : sw
    const oh = horizontal ? sh : size
    const out = new Uint8Array(ow * oh * 3)
    for (let y = 0; y < oh; y++)
      for (let x = 0; x < ow; x++) {
        const o = horizontal ? x : y
        const k = weights[o]
        for (let c = 0; c < 3; c++) {
          let acc = 1 << (PRECISION - 1)
          for (let j = 0; j < k.length; j++) {
            const i = horizontal ? (y * sw + start[o] + j) * 3 + c : ((start[o] + j) * sw + x) * 3 + c
            acc += src[i] * k[j]
          }
          const v = Math.floor(acc / (1 << PRECISION))
          out[(y * ow + x) * 3 + c] = v < 0 ? 0 : v > 255 ? 255 : v
        }
      }
    return out
  }
  let img = rgb
  let w = width
  if (outW !== width) {
    img = pass(img, w, height, true, outW)
    w = outW
  }
  if (outH !== height) img = pass(img, w, height, false, outH)
  return img
}

/**
 * Patches of an RGB image (`rgb`: height × width × 3 bytes, already resized): rows of C·T·P·P values in
 * (channel, frame, y, x) order, patches ordered block-row, block-col, row-in-block, col-in-block.
 */
export function patchify(rgb: Uint8Array, height: number, width: number, g: ImageGeometry): {pixels: Float32Array; grid: [number, number, number]} {
  const P = g.patchSize
  const T = g.temporalPatchSize
  const m = g.mergeSize
  const gh = height / P
  const gw = width / P
  const dim = 3 * T * P * P
  const pixels = new Float32Array(gh * gw * dim)
  // rescale (1/255) and normalise fused as one step, as transformers' processor does: (x − 255·mean) / (255·std)
  const off = g.mean.map(v => Math.fround(v * 255))
  const div = g.std.map(v => Math.fround(v * 255))
  let row = 0
  for (let by = 0; by < gh / m; by++)
    for (let bx = 0; bx < gw / m; bx++)
      for (let r = 0; r < m; r++)
        for (let c = 0; c < m; c++, row++) {
          const y0 = (by * m + r) * P
          const x0 = (bx * m + c) * P
          let k = row * dim
          for (let ch = 0; ch < 3; ch++) {
            const frame = k
            for (let y = 0; y < P; y++)
              for (let x = 0; x < P; x++) pixels[k++] = (rgb[((y0 + y) * width + x0 + x) * 3 + ch] - off[ch]) / div[ch]
            for (let t = 1; t < T; t++, k += P * P) pixels.copyWithin(k, frame, frame + P * P)
          }
        }
  return {pixels, grid: [1, gh, gw]}
}
