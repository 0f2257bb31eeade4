// The image pipeline against transformers' Qwen2-VL processor (test/fixtures/reference/qwen3_5-vl-image): decoding,
// smart resize and patch layout, and the refusals (corrupt, unsupported, over the pixel cap).
import t from 'tap'
import {readFileSync} from 'node:fs'
import {join} from 'node:path'
import sharp from 'sharp'
import prepareImage from '../../../models/qwen3_5/image-worker.js'
import {smartResize, type ImageGeometry} from '../../../models/qwen3_5/image-preprocess.js'
import {SafetensorsReader} from '../../../src/package/safetensors.js'

const FIXTURE = new URL('../../fixtures/reference/qwen3_5-vl-image/', import.meta.url).pathname
const G: ImageGeometry = {patchSize: 16, temporalPatchSize: 2, mergeSize: 2, minPixels: 1024, maxPixels: 65536, mean: [0.5, 0.5, 0.5], std: [0.5, 0.5, 0.5]}

t.test('smart resize follows the processor rule', async t => {
  t.same(smartResize(64, 96, G), [64, 96], 'multiples of 32 stay')
  t.same(smartResize(50, 75, G), [64, 64], 'rounded to the nearest multiple of 32')
  t.same(smartResize(48, 80, G), [64, 64], 'halves round to even (1.5 → 2, 2.5 → 2)')
  t.same(smartResize(1000, 2000, G), [160, 352], 'over max_pixels: scaled down, floored')
  t.same(smartResize(10, 20, G), [32, 64], 'under min_pixels: scaled up, ceiled')
  t.throws(() => smartResize(10, 2100, G), RangeError, 'aspect over 200:1')
})

t.test('pixels equal transformers\' processor output', async t => {
  const ref = await SafetensorsReader.open(join(FIXTURE, 'reference.safetensors'))
  t.teardown(() => ref.close())
  const expected = await ref.readFloat32('pixel_values')
  let row = 0
  for (const [name, grid, tol] of [
    ['image-a.png', [1, 4, 6], 1e-6], // already a multiple of 32: no resampling
    ['image-b.png', [1, 4, 4], 2 / 255 + 1e-6], // 75×50 → 64×64: one grey level at most (observed: one value of 6144 off by one level)
  ] as const) {
    const r = await prepareImage({bytes: readFileSync(join(FIXTURE, name)), maxImagePixels: 1 << 22, geometry: G})
    if (!r.ok) throw new Error(r.message)
    t.same(r.grid, grid, `${name}: grid`)
    const n = grid[0] * grid[1] * grid[2] * 1536
    const want = expected.subarray(row * 1536, row * 1536 + n)
    let max = 0
    let sum = 0
    for (let i = 0; i < n; i++) {
      const d = Math.abs(r.pixels[i] - want[i])
      max = Math.max(max, d)
      sum += d
    }
    t.ok(max <= tol, `${name}: max |Δpixel| ${max.toExponential(2)} ≤ ${tol} (mean ${(sum / n).toExponential(2)})`)
    row += grid[0] * grid[1] * grid[2]
  }
})

t.test('bad images are refused with a reason', async t => {
  const png = readFileSync(join(FIXTURE, 'image-a.png'))
  const r1 = await prepareImage({bytes: new TextEncoder().encode('not an image at all'), maxImagePixels: 1 << 22, geometry: G})
  t.match(r1, {ok: false, reason: 'unsupported'})
  const r2 = await prepareImage({bytes: png.subarray(0, 200), maxImagePixels: 1 << 22, geometry: G})
  t.match(r2, {ok: false, reason: 'corrupt'}, 'truncated PNG')
  const r3 = await prepareImage({bytes: png, maxImagePixels: 4000, geometry: G})
  t.match(r3, {ok: false, reason: 'too_large', message: /96×64 = 6144 pixels, over this server's limit of 4000/})
  const tiff = await sharp({create: {width: 40, height: 40, channels: 3, background: '#808080'}}).tiff().toBuffer()
  t.match(await prepareImage({bytes: tiff, maxImagePixels: 1 << 22, geometry: G}), {ok: false, reason: 'unsupported', message: /tiff/})
  const rgba = await sharp({create: {width: 64, height: 32, channels: 4, background: {r: 0, g: 0, b: 0, alpha: 0}}}).png().toBuffer()
  const r5 = await prepareImage({bytes: rgba, maxImagePixels: 1 << 22, geometry: G})
  if (!r5.ok) throw new Error(r5.message)
  t.equal(r5.pixels[0], 1, 'transparency is composited on white ((255 − 127.5) / 127.5 = 1)')
  const png16 = await sharp({create: {width: 64, height: 32, channels: 3, background: '#808080'}}).toColourspace('rgb16').png().toBuffer()
  const r6 = await prepareImage({bytes: png16, maxImagePixels: 1 << 22, geometry: G})
  if (!r6.ok) throw new Error(r6.message)
  t.equal(r6.pixels[0], Math.fround((128 - 127.5) / 127.5), 'a 16-bit PNG is read as 8-bit RGB')
})
