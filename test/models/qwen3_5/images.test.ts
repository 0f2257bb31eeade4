// Prompt layout for images: pad expansion and M-RoPE ids against transformers' position_ids for the fixture prompt
// (test/fixtures/reference/qwen3_5-vl-image), and the step fields a prefill chunk or a decode step gets.
import t from 'tap'
import {readFileSync} from 'node:fs'
import {join} from 'node:path'
import {QwenImages} from '../../../models/qwen3_5/images.js'
import {SafetensorsReader} from '../../../src/package/safetensors.js'
import type {PreparedImage} from '../../../src/chat/media/media.js'
import {mediaFields, type PromptMedia} from '../../../src/engine/prompt-media.js'

const FIXTURE = new URL('../../fixtures/reference/qwen3_5-vl-image/', import.meta.url).pathname
const ref = JSON.parse(readFileSync(join(FIXTURE, 'reference.json'), 'utf8')) as {input_ids: number[]; metrics: {grid_thw: [number, number, number][]}}
const PAD = 253
const vision = new QwenImages({
  config: {depth: 2, hidden_size: 64, num_heads: 2, intermediate_size: 128, patch_size: 16, temporal_patch_size: 2, spatial_merge_size: 2, in_channels: 3, out_hidden_size: 64, num_position_embeddings: 64, hidden_act: 'gelu_pytorch_tanh', rope_theta: 10000},
  preprocessor: {min_pixels: 1024, max_pixels: 65536, image_mean: [0.5, 0.5, 0.5], image_std: [0.5, 0.5, 0.5]},
  tokens: {vision_start: 251, vision_end: 252, image_pad: PAD},
})
t.teardown(() => vision.close())

const image = (grid: [number, number, number]): PreparedImage => ({pixels: new Float32Array(0), grid, hash: 'h', where: 'x'})

t.test('one pad per image expands to its merged patches; positions equal transformers\'', async t => {
  // the rendered prompt: each image's pad run collapsed to one pad
  const collapsed = ref.input_ids.filter((id, i) => id !== PAD || ref.input_ids[i - 1] !== PAD)
  const lay = vision.layout(collapsed, ref.metrics.grid_thw.map(image))
  t.same(lay.tokens, ref.input_ids)
  t.same(lay.spans, [{start: 6, length: 6}, {start: 18, length: 4}])
  const st = await SafetensorsReader.open(join(FIXTURE, 'reference.safetensors'))
  t.teardown(() => st.close())
  const b = await st.read('position_ids')
  const hf = new Int32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength))
  const T = ref.input_ids.length
  const ours = Array.from({length: 3}, (_, d) => Array.from({length: T}, (_, i) => lay.positions[3 * i + d]))
  t.same(ours, Array.from({length: 3}, (_, d) => Array.from(hf.subarray(d * T, (d + 1) * T))), 'T, H and W ids')
  t.equal(lay.ropeDelta, Math.max(...lay.positions) + 1 - T)
  t.throws(() => vision.layout(collapsed, [image([1, 4, 6])]), {message: /./, status: 400}, 'pads and images must match')
})

t.test('step fields: a chunk gets its positions and the embedding rows it covers; decode positions shift', async t => {
  const media: PromptMedia = {
    spans: [{start: 2, length: 3, hash: 'a', embeds: Float32Array.from([1, 1, 2, 2, 3, 3])}],
    positions: Int32Array.from([0, 0, 0, 1, 1, 1, 2, 2, 2, 2, 2, 3, 2, 2, 4, 5, 5, 5]),
    ropeDelta: -1,
  }
  const chunk = mediaFields(media, 6, 3, 3)
  t.same(Array.from(chunk.embedAt!), [0, 1], 'rows 3 and 4 of the prompt are rows 0 and 1 of the chunk')
  t.same(Array.from(chunk.embeds!), [2, 2, 3, 3], 'their embeddings, H = 2 values each')
  t.same(Array.from(chunk.positions!), [2, 2, 3, 2, 2, 4, 5, 5, 5])
  const decode = mediaFields(media, 6, 7, 1)
  t.same(Array.from(decode.positions!), [6, 6, 6], 'index 7 + delta −1')
  t.equal(decode.embedAt, undefined)
  t.same(mediaFields(undefined, 6, 0, 2), {}, 'text requests carry nothing')
})
