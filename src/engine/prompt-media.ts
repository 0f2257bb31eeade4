// The multimodal side of a request as the engine runs it: each image's span of pad rows and their embeddings, the
// M-RoPE positions, the step-item fields for a range of tokens, and the ids the prefix cache keys a prompt by.

/** One image's span in the prompt: its pad tokens [start, start + length). */
export interface ImageSpan {
  start: number
  length: number
  /** PreparedImage.hash: the prefix cache may reuse these rows only when the hash (and every token before) match. */
  hash: string
  /** length × hidden embeddings replacing the pad rows. */
  embeds: Float32Array
}

/** The multimodal side of a generation request. */
export interface PromptMedia {
  spans: ImageSpan[]
  /** M-RoPE ids (T, H, W) of every prompt token, 3 per token. */
  positions: Int32Array
  /** Positions of generated tokens: index + ropeDelta, for all three components. */
  ropeDelta: number
}

/** The step-item fields for prompt/output tokens [start, start + n) of a multimodal request. */
export function mediaFields(media: PromptMedia | undefined, promptLength: number, start: number, n: number): {embedAt?: Int32Array; embeds?: Float32Array; positions?: Int32Array} {
  if (!media) return {}
  const positions = new Int32Array(3 * n)
  for (let i = 0; i < n; i++) {
    const at = start + i
    if (at < promptLength) positions.set(media.positions.subarray(3 * at, 3 * at + 3), 3 * i)
    else positions.fill(at + media.ropeDelta, 3 * i, 3 * i + 3)
  }
  const rows: number[] = []
  const parts: Float32Array[] = []
  for (const s of media.spans) {
    const a = Math.max(start, s.start)
    const b = Math.min(start + n, s.start + s.length)
    if (a >= b) continue
    const H = s.embeds.length / s.length
    for (let r = a; r < b; r++) rows.push(r - start)
    parts.push(s.embeds.subarray((a - s.start) * H, (b - s.start) * H))
  }
  if (rows.length === 0) return {positions}
  const embeds = new Float32Array(parts.reduce((k, p) => k + p.length, 0))
  let at = 0
  for (const p of parts) {
    embeds.set(p, at)
    at += p.length
  }
  return {embedAt: Int32Array.from(rows), embeds, positions}
}

const keys = new WeakMap<object, Int32Array>()

/**
 * The ids the prefix cache keys a prompt by: the prompt itself, except that each image's pad ids become ids derived
 * from the image's content hash and the row (negative: never a real token). Two prompts then share a cached prefix
 * across an image only when it is the same image.
 */
export function cacheKeyOf(r: {prompt: Int32Array; media?: PromptMedia}): Int32Array {
  if (!r.media || r.media.spans.length === 0) return r.prompt
  let key = keys.get(r)
  if (key) return key
  key = Int32Array.from(r.prompt)
  for (const s of r.media.spans) {
    // four 28-bit slices of the sha256, one per row in turn: a span of 4 rows or more is keyed by 112 bits
    const parts = [0, 7, 14, 21].map(o => Number.parseInt(s.hash.slice(o, o + 7), 16))
    for (let i = 0; i < s.length; i++) key[s.start + i] = -1 - ((parts[i % 4] + i * 0x9e37) & 0x3fffffff)
  }
  keys.set(r, key)
  return key
}
