// The token counts repetition / presence / frequency penalties look at, kept per sequence and handed to the
// native sampler with each sampled row: every distinct token of the prompt and the output (repetition
// penalty), with its number of occurrences in the output (presence and frequency penalties; 0 = prompt only).

export class PenaltyCounts {
  private readonly counts = new Map<number, number>()
  private arrays: {ids: Int32Array; counts: Int32Array} | undefined

  constructor(prompt: ArrayLike<number>) {
    for (let i = 0; i < prompt.length; i++) this.counts.set(prompt[i], 0)
  }

  /** One more output token. */
  add(token: number): void {
    this.counts.set(token, (this.counts.get(token) ?? 0) + 1)
    this.arrays = undefined
  }

  /** The ids and their output counts, as the native sampler takes them. */
  get(): {ids: Int32Array; counts: Int32Array} {
    if (this.arrays) return this.arrays
    const ids = new Int32Array(this.counts.size)
    const counts = new Int32Array(this.counts.size)
    let i = 0
    for (const [id, c] of this.counts) {
      ids[i] = id
      counts[i++] = c
    }
    return (this.arrays = {ids, counts})
  }
}
